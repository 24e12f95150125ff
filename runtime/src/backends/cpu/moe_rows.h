// MUL_MAT_ID's grouping of (slot, token) pairs by expert, shared by the CPU backend's MulMatId
// (ops_moe.cpp) and the CUDA backend's batched MUL_MAT_ID (its ids copied to the host).
#pragma once

#include <cstdint>
#include <vector>

#include "stowage/runtime/status.h"
#include "tensor_view.h"

namespace stowage::cpu {

using TensorView = exec::TensorView;

/// ggml-cpu's matrix_rows: (*rows)[e] lists t * n_used + s for every ids[s, t] == e, tokens in
/// order, slots in order within a token. ids I32 [n_used, n_tokens] in host memory, any strides;
/// *rows gets n_as lists. Errors: kOutOfRange naming the first id outside [0, n_as).
Status GroupRowsByExpert(const TensorView& ids, int64_t n_as, std::vector<std::vector<int64_t>>* rows);

}  // namespace stowage::cpu
