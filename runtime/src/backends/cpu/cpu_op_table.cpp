// The CPU backend's op table (see cpu_op_table.h).
#include "cpu_op_table.h"

namespace stowage::exec {

std::vector<OpRule> CpuOpRules(const std::vector<GgmlType>& weight_types) {
  using T = GgmlType;
  using O = GgmlOp;
  const TensorConstraint f32 = OfTypes({T::F32});
  const TensorConstraint f32_opt = OfTypes({T::F32}, true);
  // cpu::SupportsCpyTypes(F32, dst): what CPY and SET_ROWS write from F32.
  const std::vector<T> from_f32 = {T::F32,  T::F16,  T::BF16, T::Q8_0,  T::Q4_0,
                                   T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL};
  const char* kOps = "runtime/src/backends/cpu/ops.h";
  std::vector<OpRule> rules = {
      AcceptRule({O::GET_ROWS}, {OfTypes(weight_types), OfTypes({T::I32})}, {T::F32}, 0, kOps),
      AcceptRule({O::MUL_MAT}, {OfTypes(weight_types), f32}, {T::F32}, 0, kOps),
      AcceptRule({O::RMS_NORM, O::NORM, O::SCALE, O::SILU, O::GELU, O::TANH, O::FILL, O::CLAMP}, {f32},
                 {T::F32}, 0, kOps),
      AcceptRule({O::ADD, O::MUL}, {f32, OfTypes({T::F32, T::F16})}, {T::F32}, 0, kOps),
      AcceptRule({O::SWIGLU, O::GEGLU}, {f32, f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::ROPE}, {f32, OfTypes({T::I32}), f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::SOFT_MAX}, {f32, OfTypes({T::F16, T::F32}, true), f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::CPY, O::CONT, O::DUP}, {f32}, from_f32, 0, kOps),
      // F16 -> F16: the CONT of a transposed F16 K-cache view (deepseek2 MLA's V without flash attention)
      AcceptRule({O::CPY, O::CONT, O::DUP}, {OfTypes({T::F16})}, {T::F32, T::F16}, 0, kOps),
  };
  // Mixture of experts (ops_moe.cpp; DIV / SIGMOID in ops_elementwise.cpp).
  TensorConstraint experts = OfTypes(weight_types);
  experts.contiguous = true;  // cpu::MulMatId: contiguous expert matrices
  rules.push_back(AcceptRule({O::MUL_MAT_ID}, {experts, f32, OfTypes({T::I32})}, {T::F32}, 0, kOps));
  rules.push_back(AcceptRule({O::ARGSORT}, {f32}, {T::I32}, 0, kOps));
  rules.push_back(AcceptRule({O::SUM_ROWS, O::SIGMOID}, {f32}, {T::F32}, 0, kOps));
  rules.push_back(AcceptRule({O::DIV}, {f32, OfTypes({T::F32, T::F16})}, {T::F32}, 0, kOps));
  // Flash attention (ops_attn.cpp): K and V of any KV cache type.
  rules.push_back(
      AcceptRule({O::FLASH_ATTN_EXT},
                 {f32, OfTypes(weight_types), OfTypes(weight_types), OfTypes({T::F16}, true), f32_opt},
                 {T::F32}, 0, kOps));
  // gpt-oss's experts (ops_gpt_oss.cpp): the expert biases and the clamped SwiGLU.
  rules.push_back(AcceptRule({O::ADD_ID}, {f32, f32, OfTypes({T::I32})}, {T::F32}, 0, kOps));
  rules.push_back(AcceptRule({O::SWIGLU_OAI}, {f32, f32}, {T::F32}, 0, kOps));
  // Mamba (ops_ssm.cpp); CONCAT and REPEAT (ops_cpy.cpp) also build deepseek2's K.
  rules.push_back(AcceptRule({O::CONCAT, O::SSM_CONV}, {f32, f32}, {T::F32}, 0, kOps));
  rules.push_back(AcceptRule({O::REPEAT}, {f32}, {T::F32}, 0, kOps));
  rules.push_back(AcceptRule({O::SSM_SCAN}, {f32, f32, f32, f32, f32, f32}, {T::F32}, 0, kOps));
  // Stowage's fused ops (the compiler's passes make them where this table has them).
  rules.push_back(AcceptRule({O::RMS_NORM_MUL}, {f32, OfTypes({T::F32, T::F16})}, {T::F32}, 0, kOps));
  rules.push_back(
      AcceptRule({O::MUL_MAT_GLU}, {OfTypes(weight_types), f32, OfTypes(weight_types)}, {T::F32}, 0, kOps));
  // ROPE then SET_ROWS or CPY (ops_rope_store.cpp): ROPE's sources, a destination of a plain float
  // type.
  const TensorConstraint plain_float = OfTypes({T::F32, T::F16, T::BF16});
  rules.push_back(AcceptRule({O::ROPE_SET_ROWS},
                             {f32, OfTypes({T::I32}), plain_float, OfTypes({T::I64, T::I32}), f32_opt},
                             {T::F32, T::F16, T::BF16}, 0, kOps));
  rules.push_back(AcceptRule({O::ROPE_CPY}, {f32, OfTypes({T::I32}), plain_float, f32_opt},
                             {T::F32, T::F16, T::BF16}, 0, kOps));
  // KV-cache row stores (ops_rows.cpp): F32 rows at I64 or I32 indices (ggml_set_rows).
  rules.push_back(AcceptRule({O::SET_ROWS}, {f32, OfTypes({T::I64, T::I32})}, from_f32, 0, kOps));
  return rules;
}

bool CpuTableHasOp(GgmlOp op) {
  static const OpSet kOps = OpsNamedBy(CpuOpRules({GgmlType::F32}));  // the ops do not depend on the types
  return Contains(kOps, op);
}

}  // namespace stowage::exec
