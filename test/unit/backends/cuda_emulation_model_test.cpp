// Whole tiny MoE models (gguf-synth qwen3moe, glm4moe, gpt-oss, deepseek2 in both forms) planned as
// plan-model plans them on "h200,llamacpp-cpu" with -ngl 99 and run by a session whose CUDA0 is a host
// stand-in for the CUDA backend: it refuses every node its op table (cuda_op_table.cpp, as the probed CUDA
// device answers it) refuses, as CudaBackend::Compute does, runs the ops of the MoE graphs through
// the emulation of their kernels (cuda_emulation.h: MUL_MAT_ID's mat-vec for the decode steps and
// its batched path for the prompt, ARGSORT's bitonic network, SUM_ROWS, DIV, SIGMOID, CONCAT,
// REPEAT, FILL, SET_ROWS, SWIGLU_OAI, ADD_ID) and the other ops with the CPU kernels; logits against the
// CPU-only plan's. No GPU needed: this checks that every node these graphs place on a GPU is one the CUDA
// backend runs, and the MoE kernels' arithmetic inside a model. Built with MLIR, a dense model's -O2
// plan (the compiler's fused ops on CUDA0, ROPE_SET_ROWS / ROPE_CPY through their kernels'
// emulation, a weight group in CUDA0's weight buffer) runs too, with the -O0 plan's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "cuda_emulation.h"
#include "cuda_op_table.h"
#ifdef STOWAGE_HAVE_COMPILER
#include "stowage/Compiler/CompilePlan.h"
#include "stowage/planner/plan.h"
#endif
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/plan_export.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "synth.h"

namespace stowage {
namespace {

class EmulatedCuda;

/// CUDA0 memory of the stand-in: not host memory, so the CPU backend never reads it and the session
/// copies split inputs and weights in and out as it does for a GPU.
class DeviceBuffer final : public exec::Buffer {
 public:
  DeviceBuffer(const EmulatedCuda* owner, uint64_t size) : owner_(owner), bytes_(size + 64, 0), size_(size) {}
  uint8_t* base() override {
    const auto p = reinterpret_cast<uintptr_t>(bytes_.data());
    return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t(63));
  }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("CUDA0 stand-in: write outside the buffer");
    std::memcpy(base() + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("CUDA0 stand-in: read outside the buffer");
    std::memcpy(dst, const_cast<DeviceBuffer*>(this)->base() + offset, n);
    return Status::Ok();
  }
  const EmulatedCuda* owner() const { return owner_; }

 private:
  const EmulatedCuda* owner_;
  std::vector<uint8_t> bytes_;
  uint64_t size_;
};

TensorDesc Desc(const cpu::TensorView& t) {
  TensorDesc d;
  d.type = t.type;
  for (int i = 0; i < 4; ++i) d.ne[static_cast<size_t>(i)] = t.ne[i];
  d.contiguous = t.is_contiguous();
  d.buft = "CUDA0";
  return d;
}

class EmulatedCuda final : public exec::Backend {
 public:
  EmulatedCuda(std::string name, std::map<std::string, int>* ran)
      : name_(std::move(name)),
        cpu_(exec::CreateCpuBackend(1)),
        device_(MakeCudaDevice(CudaDeviceInfo{})),
        ran_(ran) {}
  const std::string& name() const override { return name_; }
  Result<std::unique_ptr<exec::Buffer>> Allocate(const std::string& buft, uint64_t size, uint64_t) override {
    if (buft == "CUDA_Host") {  // pinned host memory: the CPU backend computes in it
      STOWAGE_ASSIGN_OR_RETURN(auto h, exec::HostBuffer::Allocate(size, 64));
      return std::unique_ptr<exec::Buffer>(std::move(h));
    }
    return std::unique_ptr<exec::Buffer>(new DeviceBuffer(this, size));
  }
  bool CanAccess(const exec::Buffer& buf) const override {
    const auto* b = dynamic_cast<const DeviceBuffer*>(&buf);
    return b != nullptr && b->owner() == this;
  }
  Status Compute(const exec::NodeCall& c) override {
    const std::string op = GgmlOpName(c.op);
    // CudaBackend::Compute: an op outside the table is unimplemented whatever its tensors.
    if (!exec::CudaTableHasOp(c.op))
      return Unimplemented(name_ + ": op " + op + " (node '" + c.name +
                           "') is not implemented by the CUDA backend");
    // The table's tensor rules, as the probed CUDA device answers them (sources present in order).
    OpQuery q;
    q.op = c.op;
    q.dst = Desc(c.dst);
    bool gap = false;
    for (int i = 0; i < exec::NodeCall::kMaxSrc; ++i) {
      const bool present = c.has_src[i] && c.src[i].data != nullptr;
      if (present && gap) return Status::Ok();  // an absent source before a present one: not asked
      gap = gap || !present;
      if (present) q.src.push_back(Desc(c.src[i]));
    }
    if (!device_.SupportsOp(q))
      return Unimplemented(name_ + ": the CUDA op table refuses " + op + " (node '" + c.name + "')");
    ++(*ran_)[op];
    const cuda::Tv d = cuda::ToTv(c.dst), a = cuda::ToTv(c.src[0]), b = cuda::ToTv(c.src[1]);
    switch (c.op) {
      case GgmlOp::MUL_MAT_ID:
        if (c.src[2].ne[1] <= cuda::kMmvIdMaxTokens) ++(*ran_)["MUL_MAT_ID mat-vec"];
        return test::EmulateMulMatId(ctx_, c.src[0], c.src[1], c.src[2], c.dst);
      case GgmlOp::ARGSORT: {
        STOWAGE_ASSIGN_OR_RETURN(const ArgsortParams p, DecodeArgsort(c.params()));
        test::EmulateArgsort(a, d, p.order == 1);
        return Status::Ok();
      }
      case GgmlOp::SUM_ROWS:
        test::EmulateSumRows(a, d);
        return Status::Ok();
      case GgmlOp::DIV:
        test::EmulateElements(d, [&](int64_t l) { cuda::BinaryElement(cuda::Binary::kDiv, a, b, d, l); });
        return Status::Ok();
      case GgmlOp::SIGMOID:
        test::EmulateElements(
            d, [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kSigmoid, a, d, 0.f, 0.f, l); });
        return Status::Ok();
      case GgmlOp::CONCAT: {
        STOWAGE_ASSIGN_OR_RETURN(const ConcatParams p, DecodeConcat(c.params()));
        test::EmulateElements(d, [&](int64_t l) { cuda::ConcatElement(a, b, d, p.dim, l); });
        return Status::Ok();
      }
      case GgmlOp::REPEAT:
        test::EmulateElements(d, [&](int64_t l) { cuda::RepeatElement(a, d, l); });
        return Status::Ok();
      case GgmlOp::FILL: {
        STOWAGE_ASSIGN_OR_RETURN(const FillParams p, DecodeFill(c.params()));
        test::EmulateElements(d,
                              [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kFill, a, d, p.c, 0.f, l); });
        return Status::Ok();
      }
      case GgmlOp::CLAMP: {
        STOWAGE_ASSIGN_OR_RETURN(const ClampParams p, DecodeClamp(c.params()));
        test::EmulateElements(
            d, [&](int64_t l) { cuda::UnaryElement(cuda::Unary::kClamp, a, d, p.min, p.max, l); });
        return Status::Ok();
      }
      case GgmlOp::SET_ROWS: {
        const bool i64 = c.src[1].type == GgmlType::I64;
        test::EmulateElements(a, [&](int64_t l) { (void)cuda::SetRowsElement(a, b, i64, d, l); });
        return Status::Ok();
      }
      case GgmlOp::SWIGLU_OAI: {
        STOWAGE_ASSIGN_OR_RETURN(const SwiGluOaiParams p, DecodeSwiGluOai(c.params()));
        test::EmulateElements(d, [&](int64_t l) { cuda::SwiGluOaiElement(a, b, d, p.alpha, p.limit, l); });
        return Status::Ok();
      }
      case GgmlOp::ADD_ID: {
        const cuda::Tv ids = cuda::ToTv(c.src[2]);
        test::EmulateElements(d, [&](int64_t l) { cuda::AddIdElement(a, b, ids, d, l); });
        return Status::Ok();
      }
      case GgmlOp::ROPE_SET_ROWS:
      case GgmlOp::ROPE_CPY: {  // RopeK with RopePutRows / RopePutCopy, one thread per pair
        STOWAGE_ASSIGN_OR_RETURN(const RopeParams rp, DecodeRope(c.params()));
        const bool set_rows = c.op == GgmlOp::ROPE_SET_ROWS;
        const int ff_src = set_rows ? 4 : 3;
        const float* ff = c.has_src[ff_src] ? static_cast<const float*>(c.src[ff_src].data) : nullptr;
        const int32_t* pos = static_cast<const int32_t*>(c.src[1].data);
        const cuda::RopeArgs args = cuda::ToRopeArgs(rp);
        cuda::RopePutRows rows;
        rows.idx = cuda::ToTv(c.src[3]);
        rows.dst = d;
        rows.idx_i64 = c.src[3].type == GgmlType::I64;
        rows.head_dim = a.ne[0];
        cuda::RopePutCopy copy;
        copy.dst = d;
        for (int i = 0; i < 4; ++i) copy.ne[i] = a.ne[i];
        for (int64_t l = 0; l < cuda::RopeItems(a); ++l) {
          if (set_rows)
            cuda::RopeThreadTo(a, pos, ff, args, l, rows);
          else
            cuda::RopeThreadTo(a, pos, ff, args, l, copy);
        }
        return Status::Ok();
      }
      default:
        return cpu_->Compute(c);  // the dense graphs' ops, checked elsewhere (cuda_math_test)
    }
  }

 private:
  std::string name_;
  std::unique_ptr<exec::Backend> cpu_;
  ProbedDevice device_;
  cpu::ComputeContext ctx_;
  std::map<std::string, int>* ran_;
};

class Factory final : public exec::BackendFactory {
 public:
  explicit Factory(std::map<std::string, int>* ran) : ran_(ran) {}
  std::unique_ptr<exec::Backend> Create(const std::string& name, const std::string& type, int) override {
    if (type != "GPU") return nullptr;
    return std::make_unique<EmulatedCuda>(name, ran_);
  }

 private:
  std::map<std::string, int>* ran_;
};

/// plan-model's pipeline on the registry devices `devices`, n_ctx 256, -ngl 99 (0 for the CPU alone).
std::vector<uint8_t> PlanOn(const std::string& model, const std::string& devices, int ngl, bool flash_attn) {
  auto gguf = GgufFile::Open(model);
  EXPECT_TRUE(gguf.ok()) << gguf.status().ToString();
  if (!gguf.ok()) return {};
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.flash_attn = flash_attn;
  auto m = planner::BuildModelGraphs(**gguf, cfg);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  auto reg = planner::Registry::Open({STOWAGE_TEST_MANIFESTS, STOWAGE_TEST_REGISTRY});
  EXPECT_TRUE(reg.ok()) << reg.status().ToString();
  if (!m.ok() || !reg.ok()) return {};
  auto machine = reg->MakeDevices(devices);
  EXPECT_TRUE(machine.ok()) << machine.status().ToString();
  if (!machine.ok()) return {};
  planner::PlacementOptions opt;
  opt.n_gpu_layers = ngl;
  auto outcome = planner::PlaceModel(*m, *machine, opt);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  if (!outcome.ok()) return {};
  return planner::SerializePlan(**gguf, *m, outcome->placement, outcome->memory, "cuda emulation test");
}

/// The logits of a 12-token prompt (n_tokens 12: MUL_MAT_ID's batched path) and 3 greedy steps (its
/// mat-vec), concatenated.
std::vector<float> RunPlan(const std::vector<uint8_t>& plan, const std::string& model,
                           std::shared_ptr<exec::BackendFactory> factory) {
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = std::move(factory);
  auto s = Session::CreateFromPlanBytes(plan, model, opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<int32_t> tokens = {1, 7, 23, 5, 60, 33, 2, 41, 17, 9, 58, 12};
  std::vector<float> all, logits;
  for (int step = 0; step < 4; ++step) {
    const Status st = (*s)->Decode(tokens, step == 0, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    all.insert(all.end(), logits.end() - (*s)->n_vocab(), logits.end());
    tokens = {static_cast<int32_t>(std::max_element(logits.end() - (*s)->n_vocab(), logits.end()) -
                                   (logits.end() - (*s)->n_vocab()))};
  }
  return all;
}

struct Arch {
  const char* arch;
  GgmlType type;
  bool mla_legacy = false;  ///< deepseek2's older form (attn_kv_b: MHA over a K / V cache)
  uint32_t n_expert_groups = 0, n_group_used = 0;  ///< deepseek2's group-limited routing
};

class CudaEmulationModel : public ::testing::TestWithParam<Arch> {};

TEST_P(CudaEmulationModel, EveryGpuNodeRunsAndLogitsMatchTheCpu) {
  const Arch p = GetParam();
  synth::ModelSpec spec;
  spec.arch = p.arch;
  spec.n_vocab = 64;
  spec.weight_type = p.type;
  spec.mla_legacy = p.mla_legacy;
  if (p.n_expert_groups > 0) {
    spec.n_expert = 8;
    spec.n_expert_used = 2;
    spec.n_expert_groups = p.n_expert_groups;
    spec.n_group_used = p.n_group_used;
  }
  spec.seed = 11;
  const std::string model = ::testing::TempDir() + "/cuda_emulation_" + p.arch + "_" + GgmlTypeName(p.type) +
                            (p.mla_legacy ? "_legacy" : "") + (p.n_expert_groups ? "_groups" : "") + ".gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  for (bool fa : {false, true}) {
    SCOPED_TRACE(fa ? "flash attention" : "soft_max attention");
    const std::vector<uint8_t> gpu_plan = PlanOn(model, "h200,llamacpp-cpu", 99, fa);
    const std::vector<uint8_t> cpu_plan = PlanOn(model, "llamacpp-cpu", 0, fa);
    ASSERT_FALSE(gpu_plan.empty() || cpu_plan.empty());
    std::map<std::string, int> ran;
    const std::vector<float> gpu = RunPlan(gpu_plan, model, std::make_shared<Factory>(&ran));
    const std::vector<float> cpu = RunPlan(cpu_plan, model, nullptr);
    ASSERT_FALSE(gpu.empty());
    ASSERT_EQ(gpu.size(), cpu.size());
    float diff = 0;
    for (size_t i = 0; i < gpu.size(); ++i) diff = std::max(diff, std::fabs(gpu[i] - cpu[i]));
    // F32 experts: the GPU mat-vec sums in another order (~1e-6); Q8_0: the CPU also quantizes the
    // activations to Q8_0, the GPU's mat-vec keeps them F32.
    EXPECT_LE(diff, p.type == GgmlType::F32 ? 1e-3f : 5e-2f);
    std::printf("[ %s%s %s%s ] CUDA stand-in vs CPU max |logit diff| = %.2e over %zu logits\n", p.arch,
                p.mla_legacy        ? " (older form)"
                : p.n_expert_groups ? " (expert groups)"
                                    : "",
                GgmlTypeName(p.type), fa ? " -fa" : "", double(diff), gpu.size());
    std::string seen;
    for (const auto& [op, n] : ran) seen += op + " " + std::to_string(n) + ", ";
    for (const char* op : {"MUL_MAT_ID", "MUL_MAT_ID mat-vec", "ARGSORT", "MUL_MAT", "RMS_NORM"})
      EXPECT_GT(ran[op], 0) << op << " never ran on the CUDA0 stand-in; ran: " << seen;
    const std::string a = p.arch;
    if (a == "qwen3moe" || a == "glm4moe" || a == "deepseek2") {
      EXPECT_GT(ran["SUM_ROWS"], 0) << seen;
      EXPECT_GT(ran["DIV"], 0) << seen;
      EXPECT_GT(ran["CLAMP"], 0) << seen;  // the weight sum's
    }
    if (a == "glm4moe" || a == "deepseek2") EXPECT_GT(ran["SIGMOID"], 0) << seen;
    if (a == "deepseek2") EXPECT_GT(ran["CONCAT"], 0) << seen;
    if (p.mla_legacy) EXPECT_GT(ran["REPEAT"], 0) << seen;
    if (p.n_expert_groups > 0) {
      EXPECT_GT(ran["FILL"], 0) << seen;
      EXPECT_GT(ran["SET_ROWS"], 0) << seen;
    }
    if (a == "gpt-oss") {
      EXPECT_GT(ran["SWIGLU_OAI"], 0) << seen;
      EXPECT_GT(ran["ADD_ID"], 0) << seen;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Moe, CudaEmulationModel,
                         ::testing::Values(Arch{"qwen3moe", GgmlType::F32}, Arch{"qwen3moe", GgmlType::Q8_0},
                                           Arch{"glm4moe", GgmlType::F32}, Arch{"gpt-oss", GgmlType::F32},
                                           Arch{"gpt-oss", GgmlType::MXFP4}, Arch{"deepseek2", GgmlType::F32},
                                           Arch{"deepseek2", GgmlType::F32, true}),
                         [](const ::testing::TestParamInfo<Arch>& i) {
                           std::string n = std::string(i.param.arch) + "_" + GgmlTypeName(i.param.type) +
                                           (i.param.mla_legacy ? "_legacy" : "") +
                                           (i.param.n_expert_groups ? "_groups" : "");
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

#ifdef STOWAGE_HAVE_COMPILER
// A dense model (gguf-synth llama, Q8_0) planned on h200,llamacpp-cpu with -ngl 99 and compiled with
// every rewriting pass (plan-model -O2), llama.cpp 2026's graphs and Feb 2025's: the CUDA0 split
// runs the fused ops (RMS_NORM_MUL, MUL_MAT_GLU, ROPE_SET_ROWS or ROPE_CPY through their kernels'
// emulation, the Q, K and V MUL_MAT over a weight group the session uploaded part by part into
// CUDA0's weight buffer, planned == allocated), and its logits are the -O0 plan's on the same
// stand-in, bit for bit (each fused op computes what it replaces; MUL_MAT and MUL_MAT_GLU run on
// the CPU backend here).
TEST(CudaEmulationModel, CompiledPlanFusesOnCudaWithTheSameLogits) {
  synth::ModelSpec spec;
  spec.arch = "llama";
  spec.n_vocab = 64;
  spec.weight_type = GgmlType::Q8_0;
  spec.seed = 12;
  const std::string model = ::testing::TempDir() + "/cuda_emulation_llama_compiled.gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  auto gguf = GgufFile::Open(model);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto reg = planner::Registry::Open({STOWAGE_TEST_MANIFESTS, STOWAGE_TEST_REGISTRY});
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  auto machine = reg->MakeDevices("h200,llamacpp-cpu");
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  for (planner::LlamacppCompat compat : {planner::LlamacppCompat::k2026, planner::LlamacppCompat::kFeb25}) {
    const bool feb25 = compat == planner::LlamacppCompat::kFeb25;
    SCOPED_TRACE(feb25 ? "feb25" : "2026");
    planner::PlanRequest req;
    req.context.n_ctx = 256;
    req.llamacpp_compat = compat;
    req.placement.n_gpu_layers = 99;
    req.fit_check = false;
    req.flags = "cuda emulation test -O2";
    auto planned = planner::Plan(**gguf, *machine, req);
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    auto compiled = compiler::CompilePlan(**gguf, *planned, req.flags);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    ASSERT_TRUE(compiled->not_compiled.empty()) << compiled->not_compiled;
    std::map<std::string, int> ran_fused, ran_plain;
    const std::vector<float> fused = RunPlan(compiled->bytes, model, std::make_shared<Factory>(&ran_fused));
    const std::vector<float> plain = RunPlan(planned->bytes, model, std::make_shared<Factory>(&ran_plain));
    ASSERT_FALSE(fused.empty());
    ASSERT_EQ(fused.size(), plain.size());
    size_t differ = 0;
    for (size_t i = 0; i < fused.size(); ++i) differ += std::memcmp(&fused[i], &plain[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << "logits of the -O2 plan differ from the -O0 plan's";
    std::string seen;
    for (const auto& [op, n] : ran_fused) seen += op + " " + std::to_string(n) + ", ";
    for (const char* op : {"RMS_NORM_MUL", "MUL_MAT_GLU", feb25 ? "ROPE_CPY" : "ROPE_SET_ROWS"})
      EXPECT_GT(ran_fused[op], 0) << op << " never ran on the CUDA0 stand-in; ran: " << seen;
    EXPECT_EQ(ran_plain["MUL_MAT_GLU"], 0);
    // The Q, K and V products became one (a weight group per layer): fewer MUL_MATs.
    EXPECT_LT(ran_fused["MUL_MAT"], ran_plain["MUL_MAT"]) << seen;
  }
}
#endif

// The stand-in refuses what the CUDA backend refuses: an op outside its table (SSM_CONV), and an
// op of the table with tensors its rules refuse (MUL_MAT with IQ2_XXS weights).
TEST(CudaEmulationModel, StandInRefusesWhatTheTableRefuses) {
  std::map<std::string, int> ran;
  EmulatedCuda gpu("CUDA0", &ran);
  std::vector<uint8_t> bytes(4096, 0);
  exec::NodeCall c;
  c.op = GgmlOp::SSM_CONV;
  c.name = "ssm";
  EXPECT_EQ(gpu.Compute(c).code(), StatusCode::kUnimplemented);
  c.op = GgmlOp::MUL_MAT;
  c.src[0].type = GgmlType::IQ2_XXS;
  c.src[0].ne[0] = 256;
  cpu::SetContiguousStrides(c.src[0]);
  c.src[1].ne[0] = 256;
  cpu::SetContiguousStrides(c.src[1]);
  c.src[0].data = c.src[1].data = c.dst.data = bytes.data();
  c.has_src[0] = c.has_src[1] = true;
  cpu::SetContiguousStrides(c.dst);
  EXPECT_EQ(gpu.Compute(c).code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(ran.empty());
}

}  // namespace
}  // namespace stowage
