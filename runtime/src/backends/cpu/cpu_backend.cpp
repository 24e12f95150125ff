// The CPU backend (backend.h CreateCpuBackend): host buffers, and each node dispatched to its
// kernel of ops.h with its parameters decoded from the plan's layout (ggml_op_params.h).
#include <memory>
#include <string>

#include "backend.h"
#include "cpu_op_table.h"
#include "ops.h"
#include "ops_rope_store.h"
#include "stowage/runtime/ggml_op_params.h"

namespace stowage::exec {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(int n_threads, bool llamacpp_numerics, CpuIsa max_isa) {
    ctx_.n_threads = n_threads;
    ctx_.llamacpp_numerics = llamacpp_numerics;
    ctx_.max_isa = static_cast<cpu::IsaLevel>(max_isa);
  }
  const std::string& name() const override { return name_; }
  bool CanAccess(const Buffer& buf) const override { return buf.is_host(); }

  Result<std::unique_ptr<Buffer>> Allocate(const std::string&, uint64_t size, uint64_t alignment) override {
    STOWAGE_ASSIGN_OR_RETURN(auto b, HostBuffer::Allocate(size, alignment));
    return std::unique_ptr<Buffer>(std::move(b));
  }

  // Parameter errors of the decodes name the op (the plan verifier has refused such plans before).
  Status Compute(const NodeCall& c) override {
    TensorView dst = c.dst;
    const TensorView none;
    const int min_srcs = GetOpTraits(c.op).min_srcs;
    for (int i = 0; i < min_srcs && i < NodeCall::kMaxSrc; ++i)
      if (!c.has_src[i])
        return InvalidArgument(std::string(GgmlOpName(c.op)) + " (node '" + c.name + "'): needs " +
                               std::to_string(min_srcs) + " sources, source " + std::to_string(i) +
                               " is missing");
    const auto not_implemented = [&c] {
      return Unimplemented(std::string("CPU backend: op ") + GgmlOpName(c.op) + " (node '" + c.name +
                           "') is not implemented");
    };
    if (!CpuTableHasOp(c.op)) return not_implemented();  // the backend's op table (cpu_op_table.cpp)
    const OpParamsRef params = c.params();
    switch (c.op) {
      case GgmlOp::GET_ROWS:
        return cpu::GetRows(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::SET_ROWS:
        return cpu::SetRows(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::MUL_MAT:
        return cpu::MulMat(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::ADD:
        return cpu::Add(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::MUL:
        return cpu::Mul(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::SCALE: {
        STOWAGE_ASSIGN_OR_RETURN(const ScaleParams p, DecodeScale(params));
        return cpu::Scale(ctx_, c.src[0], dst, p.s, p.b);
      }
      case GgmlOp::CLAMP: {
        STOWAGE_ASSIGN_OR_RETURN(const ClampParams p, DecodeClamp(params));
        return cpu::Clamp(ctx_, c.src[0], dst, p.min, p.max);
      }
      case GgmlOp::FILL: {
        STOWAGE_ASSIGN_OR_RETURN(const FillParams p, DecodeFill(params));
        return cpu::Fill(ctx_, c.src[0], dst, p.c);
      }
      case GgmlOp::RMS_NORM: {
        STOWAGE_ASSIGN_OR_RETURN(const NormParams p, DecodeNorm(c.op, params));
        return cpu::RmsNorm(ctx_, c.src[0], dst, p.eps);
      }
      case GgmlOp::RMS_NORM_MUL: {
        STOWAGE_ASSIGN_OR_RETURN(const NormParams p, DecodeNorm(c.op, params));
        return cpu::RmsNormMul(ctx_, c.src[0], c.src[1], dst, p.eps);
      }
      case GgmlOp::MUL_MAT_GLU: {
        STOWAGE_ASSIGN_OR_RETURN(const MulMatGluParams p, DecodeMulMatGlu(params));
        return cpu::MulMatGlu(ctx_, c.src[0], c.src[1], c.src[2], dst, p.glu);
      }
      case GgmlOp::NORM: {
        STOWAGE_ASSIGN_OR_RETURN(const NormParams p, DecodeNorm(c.op, params));
        return cpu::Norm(ctx_, c.src[0], dst, p.eps);
      }
      case GgmlOp::SILU:
        return cpu::Silu(ctx_, c.src[0], dst);
      case GgmlOp::GELU:
        return cpu::Gelu(ctx_, c.src[0], dst);
      case GgmlOp::TANH:
        return cpu::Tanh(ctx_, c.src[0], dst);
      case GgmlOp::SWIGLU:
        return cpu::SwiGlu(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::GEGLU:
        return cpu::GeGlu(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::SWIGLU_OAI: {  // ops_gpt_oss.cpp
        STOWAGE_ASSIGN_OR_RETURN(const SwiGluOaiParams p, DecodeSwiGluOai(params));
        return cpu::SwiGluOai(ctx_, c.src[0], c.src[1], dst, p.alpha, p.limit);
      }
      case GgmlOp::ROPE: {
        STOWAGE_ASSIGN_OR_RETURN(const RopeParams p, DecodeRope(params));
        return cpu::Rope(ctx_, c.src[0], c.src[1], c.has_src[2] ? c.src[2] : none, dst, p);
      }
      case GgmlOp::ROPE_SET_ROWS: {  // ops_rope_store.cpp
        STOWAGE_ASSIGN_OR_RETURN(const RopeParams p, DecodeRope(params));
        return cpu::RopeSetRows(ctx_, c.src[0], c.src[1], c.has_src[4] ? c.src[4] : none, c.src[3], dst, p);
      }
      case GgmlOp::ROPE_CPY: {  // ops_rope_store.cpp
        STOWAGE_ASSIGN_OR_RETURN(const RopeParams p, DecodeRope(params));
        return cpu::RopeCpy(ctx_, c.src[0], c.src[1], c.has_src[3] ? c.src[3] : none, dst, p);
      }
      case GgmlOp::SOFT_MAX: {
        STOWAGE_ASSIGN_OR_RETURN(const SoftMaxParams p, DecodeSoftMax(params));
        return cpu::SoftMax(ctx_, c.src[0], c.has_src[1] ? c.src[1] : none, dst, p.scale, p.max_bias,
                            c.has_src[2] ? c.src[2] : none);
      }
      case GgmlOp::FLASH_ATTN_EXT: {  // ops_attn.cpp; both precisions accumulate as ggml-cpu
        STOWAGE_ASSIGN_OR_RETURN(const FlashAttnExtParams p, DecodeFlashAttnExt(params));
        return cpu::FlashAttnExt(ctx_, c.src[0], c.src[1], c.src[2], c.has_src[3] ? c.src[3] : none, dst,
                                 p.scale, p.max_bias, p.logit_softcap, c.has_src[4] ? c.src[4] : none);
      }
      // Mixture of experts (ops_moe.cpp).
      case GgmlOp::MUL_MAT_ID:
        return cpu::MulMatId(ctx_, c.src[0], c.src[1], c.src[2], dst);
      case GgmlOp::ADD_ID:  // ops_gpt_oss.cpp
        return cpu::AddId(ctx_, c.src[0], c.src[1], c.src[2], dst);
      case GgmlOp::ARGSORT: {
        STOWAGE_ASSIGN_OR_RETURN(const ArgsortParams p, DecodeArgsort(params));
        return cpu::ArgSort(ctx_, c.src[0], dst, p.order);
      }
      case GgmlOp::SUM_ROWS:
        return cpu::SumRows(ctx_, c.src[0], dst);
      case GgmlOp::DIV:
        return cpu::Div(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::SIGMOID:
        return cpu::Sigmoid(ctx_, c.src[0], dst);
      // Mamba (ops_ssm.cpp).
      case GgmlOp::CONCAT: {
        STOWAGE_ASSIGN_OR_RETURN(const ConcatParams p, DecodeConcat(params));
        return cpu::Concat(ctx_, c.src[0], c.src[1], dst, p.dim);
      }
      case GgmlOp::SSM_CONV:
        return cpu::SsmConv(ctx_, c.src[0], c.src[1], dst);
      case GgmlOp::SSM_SCAN:
        return cpu::SsmScan(ctx_, c.src[0], c.src[1], c.src[2], c.src[3], c.src[4], c.src[5], dst);
      case GgmlOp::CPY:
      case GgmlOp::CONT:
      case GgmlOp::DUP:
        return cpu::Cpy(ctx_, c.src[0], dst);
      case GgmlOp::REPEAT:  // ops_cpy.cpp
        return cpu::Repeat(ctx_, c.src[0], dst);
      default:
        break;
    }
    return not_implemented();  // an op of the table without a case above
  }

 private:
  std::string name_ = "CPU";
  cpu::ComputeContext ctx_;
};

}  // namespace

static_assert(int(CpuIsa::kScalar) == int(cpu::IsaLevel::kScalar) &&
                  int(CpuIsa::kAvx2) == int(cpu::IsaLevel::kAvx2) &&
                  int(CpuIsa::kAvx512) == int(cpu::IsaLevel::kAvx512) &&
                  int(CpuIsa::kAvx512Vnni) == int(cpu::IsaLevel::kAvx512Vnni),
              "SessionOptions::cpu_max_isa carries cpu::IsaLevel's values");

std::unique_ptr<Backend> CreateCpuBackend(int n_threads, bool llamacpp_numerics, CpuIsa max_isa) {
  return std::make_unique<CpuBackend>(n_threads, llamacpp_numerics, max_isa);
}

}  // namespace stowage::exec
