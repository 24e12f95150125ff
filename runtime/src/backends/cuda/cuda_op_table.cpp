// The CUDA backend's op table (see cuda_op_table.h).
#include "cuda_op_table.h"

#include <algorithm>

namespace stowage::exec {

std::vector<OpRule> CudaOpRules(const std::vector<GgmlType>& weight_types,
                                const std::vector<std::pair<GgmlType, GgmlType>>& cpy_types) {
  using T = GgmlType;
  using O = GgmlOp;
  const TensorConstraint f32 = OfTypes({T::F32});
  const TensorConstraint f32_opt = OfTypes({T::F32}, true);
  const TensorConstraint kv = OfTypes({T::F32, T::F16, T::BF16, T::Q8_0, T::Q4_0});
  const TensorConstraint plain_float = OfTypes({T::F32, T::F16, T::BF16});
  const char* kOps = "runtime/src/backends/cuda/cuda_backend.cpp";
  TensorConstraint experts = OfTypes(weight_types);
  experts.contiguous = true;  // CudaBackend::MulMatId: each expert's matrix at its nb[2]
  std::vector<OpRule> rules = {
      AcceptRule({O::GET_ROWS}, {OfTypes(weight_types), OfTypes({T::I32})}, {T::F32}, 0, kOps),
      AcceptRule({O::MUL_MAT}, {OfTypes(weight_types), f32}, {T::F32}, 0, kOps),
      AcceptRule({O::RMS_NORM, O::NORM, O::SCALE, O::SILU, O::GELU, O::TANH, O::SIGMOID, O::FILL, O::CLAMP},
                 {f32}, {T::F32}, 0, kOps),
      AcceptRule({O::ADD, O::MUL, O::DIV}, {f32, OfTypes({T::F32, T::F16})}, {T::F32}, 0, kOps),
      // Stowage's fused ops (the compiler's passes make them where this table has them): the norm
      // with its weight, the FFN-in (CudaBackend::MulMatGlu), ROPE with the K store into a plain
      // float cache (cuda::RopeSetRows / RopeCpy; quantized caches keep ROPE and the CPY).
      AcceptRule({O::RMS_NORM_MUL}, {f32, OfTypes({T::F32, T::F16})}, {T::F32}, 0, kOps),
      AcceptRule({O::MUL_MAT_GLU}, {OfTypes(weight_types), f32, OfTypes(weight_types)}, {T::F32}, 0, kOps),
      AcceptRule({O::ROPE_SET_ROWS},
                 {f32, OfTypes({T::I32}), plain_float, OfTypes({T::I64, T::I32}), f32_opt},
                 {T::F32, T::F16, T::BF16}, 0, kOps),
      AcceptRule({O::ROPE_CPY}, {f32, OfTypes({T::I32}), plain_float, f32_opt}, {T::F32, T::F16, T::BF16}, 0,
                 kOps),
      AcceptRule({O::SWIGLU, O::GEGLU}, {f32, f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::ROPE}, {f32, OfTypes({T::I32}), f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::SOFT_MAX}, {f32, OfTypes({T::F16, T::F32}, true), f32_opt}, {T::F32}, 0, kOps),
      AcceptRule({O::SWIGLU_OAI}, {f32, f32}, {T::F32}, 0, kOps),
      AcceptRule({O::ADD_ID}, {f32, f32, OfTypes({T::I32})}, {T::F32}, 0, kOps),
      // Mixture of experts (CudaBackend::MulMatId; the routing's ARGSORT and SUM_ROWS).
      AcceptRule({O::MUL_MAT_ID}, {experts, f32, OfTypes({T::I32})}, {T::F32}, 0, kOps),
      AcceptRule({O::ARGSORT}, {f32}, {T::I32}, 0, kOps),
      AcceptRule({O::SUM_ROWS}, {f32}, {T::F32}, 0, kOps),
      // deepseek2's group-limited routing: the -inf FILL of the experts and SET_ROWS of the chosen groups.
      AcceptRule({O::SET_ROWS}, {f32, OfTypes({T::I64, T::I32})}, {T::F32, T::F16, T::BF16}, 0, kOps),
      // deepseek2 joins the rope and no-rope parts of its q and k heads (the older form repeats the
      // rope part of k over the heads first).
      AcceptRule({O::CONCAT}, {f32, f32}, {T::F32}, 0, kOps),
      AcceptRule({O::REPEAT}, {f32}, {T::F32}, 0, kOps),
      // cuda_math.h FaCacheType: the KV cache types the backend writes (CPY into them)
      AcceptRule({O::FLASH_ATTN_EXT}, {f32, kv, kv, OfTypes({T::F16}, true), f32_opt}, {T::F32}, 0, kOps),
  };
  // CPY/CONT/DUP: one rule per source type, into the listed destination types.
  std::vector<std::pair<T, std::vector<T>>> by_src;
  for (const auto& [from, to] : cpy_types) {
    auto it = std::find_if(by_src.begin(), by_src.end(), [&](const auto& p) { return p.first == from; });
    if (it == by_src.end()) it = by_src.insert(by_src.end(), {from, {}});
    it->second.push_back(to);
  }
  for (const auto& [from, to] : by_src)
    rules.push_back(AcceptRule({O::CPY, O::CONT, O::DUP}, {OfTypes({from})}, to, 0, kOps));
  return rules;
}

bool CudaCopies(GgmlType src, GgmlType dst) {
  auto is_float = [](GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; };
  return is_float(src) && (is_float(dst) || dst == GgmlType::Q8_0 || dst == GgmlType::Q4_0);
}

std::vector<std::pair<GgmlType, GgmlType>> CudaCopyPairs() {
  std::vector<std::pair<GgmlType, GgmlType>> pairs;
  for (uint32_t s = 0; s < kGgmlTypeCount; ++s) {
    for (uint32_t d = 0; d < kGgmlTypeCount; ++d) {
      if (!IsValidGgmlType(s) || !IsValidGgmlType(d)) continue;
      const auto from = static_cast<GgmlType>(s), to = static_cast<GgmlType>(d);
      if (CudaCopies(from, to)) pairs.push_back({from, to});
    }
  }
  return pairs;
}

bool CudaTableHasOp(GgmlOp op) {
  // The ops of the table do not depend on its types: built once from any instance with a copy rule.
  static const OpSet kOps = OpsNamedBy(CudaOpRules({GgmlType::F32}, {{GgmlType::F32, GgmlType::F32}}));
  return Contains(kOps, op);
}

}  // namespace stowage::exec
