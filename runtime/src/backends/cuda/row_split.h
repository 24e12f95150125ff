// The row split of CUDA<i>_Split weights (-sm row), as ggml-cuda's split buffer computes it: pure
// functions, built without CUDA so the rules are unit-tested on any machine (row_split_test).
//
// ggml (ggml-cuda.cu ggml_backend_cuda_split_buffer_type, get_row_rounding, get_row_split): the
// buffer type is made with the user's tensor split (llama.cpp -ts, one proportion per device); when
// it is absent or all zero, each device's total memory (ggml_cuda_info().default_tensor_split).
// The proportions become cumulative starts (cum[0] = 0, cum[i] = sum(p[0..i)) / sum(p)). Device id
// holds rows [nrows * cum[id], nrows * cum[id + 1]) with both ends rounded down to a multiple of the
// row rounding; the last device ends at nrows. The rounding is the largest mmq_y (128 for compute
// capability >= 7.0, else 64) over the devices that get a non-empty share.
#pragma once

#include <cstdint>
#include <vector>

namespace stowage::exec {

/// Cumulative split starts from per-device proportions (-ts 3,1 -> {0, 0.75}) for `n` devices;
/// missing entries count as 0, negative ones as 0; equal shares when every proportion is 0 or the
/// list is empty.
std::vector<float> CumulativeSplit(const std::vector<float>& proportions, int n);

/// The proportions the split buffer uses: `tensor_split` (from the plan) when it has a non-zero
/// entry, else `total_memory` (bytes per device, ggml's default split).
std::vector<float> SplitProportions(const std::vector<float>& tensor_split, const std::vector<uint64_t>& total_memory);

/// ggml's get_row_rounding: max mmq_y over devices whose share is not empty (cum[id] < cum[id + 1],
/// or < 1 for the last one); `compute_capability` per device as major*100 + minor*10 (e.g. 900).
/// 0 when no device has a share.
int64_t RowRounding(const std::vector<float>& cum, const std::vector<int>& compute_capability);

/// ggml's get_row_split: rows [*lo, *hi) of `nrows` that device `id` of cum.size() holds. Rounding
/// below 1 is taken as 1. Never *hi < *lo.
void RowSplit(int64_t nrows, const std::vector<float>& cum, int64_t rounding, int id, int64_t* lo, int64_t* hi);

}  // namespace stowage::exec
