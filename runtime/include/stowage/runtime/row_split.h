// The row split of CUDA<i>_Split weights (-sm row), as ggml-cuda's split buffer computes it: pure
// functions, built without CUDA (library stowage_row_split) so the rules are unit-tested on any
// machine (row_split_test) and shared by the CUDA backend, which splits the weights, and the
// planner's fit check (planner/lib/placement/fit.cpp RowSplitShares), which counts each device's
// bytes of them with RowSplitStarts and RowSplit. Both start from the split the plan records on the
// split buffer (planner RecordTensorSplit: -ts normalized per device, or empty for ggml's default of
// each device's total memory), so they count the same rows per device. (ggml starts from the raw
// -ts; normalizing first can move a boundary by one rounding step against llama.cpp in rare cases:
// 0.5% of 100000 random -ts splits over 2-4 devices, checked on 6 row counts.)
//
// ggml (ggml-cuda.cu ggml_backend_cuda_split_buffer_type, get_row_rounding, get_row_split): the
// buffer type is made with the user's tensor split (llama.cpp -ts, one proportion per device); when
// it is absent or all zero, each device's total memory (ggml_cuda_info().default_tensor_split).
// The proportions become cumulative starts (cum[0] = 0, cum[i] = sum(p[0..i)) / sum(p)). Device id
// holds rows [nrows * cum[id], nrows * cum[id + 1]) with both ends rounded down to a multiple of the
// row rounding; the last device ends at nrows. The rounding is the largest mmq_y (128 for compute
// capability >= 7.0, else 64) over the devices that get a non-empty share.
// Differs from ggml: the sums are in double (ggml: float, so -ts 3e38,3e38 overflows to inf there)
// and total memory enters them exactly (ggml: int64 prefix sums converted to float); the starts are
// float as in ggml.

#pragma once

#include <cstdint>
#include <vector>

namespace stowage::exec {

/// The cumulative split starts of a split buffer over the n = total_memory.size() devices it
/// spreads over (ggml-cuda get_row_split / ggml_backend_cuda_split_buffer_type rules): from
/// `tensor_split` (-ts, one proportion per device position; entries past n are ignored, missing
/// ones count as 0, negative ones as 0) when one of its first n entries is positive, else from
/// `total_memory` (bytes per device, ggml's default_tensor_split), else equal shares.
/// starts[0] = 0, non-decreasing, each < 1 unless the devices from there on have no share
/// (-ts 1,0 -> {0, 1}). Empty when n is 0.
std::vector<float> RowSplitStarts(const std::vector<float>& tensor_split,
                                  const std::vector<uint64_t>& total_memory);

/// Cumulative split starts from per-device proportions (-ts 3,1 -> {0, 0.75}) for `n` devices, as
/// RowSplitStarts with every device's total memory 0: missing entries count as 0, negative ones as
/// 0; equal shares when every proportion is 0 or the list is empty.
std::vector<float> CumulativeSplit(const std::vector<float>& proportions, int n);

/// The proportions the split buffer uses: `tensor_split` (from the plan) when it has a positive
/// entry, else `total_memory` (bytes per device, ggml's default split) converted to float.
/// For a `tensor_split` of at most mem.size() entries, CumulativeSplit(SplitProportions(ts, mem),
/// mem.size()) equals RowSplitStarts(ts, mem) up to that float conversion of the memory sizes
/// (prefer RowSplitStarts, which keeps them exact).
std::vector<float> SplitProportions(const std::vector<float>& tensor_split,
                                    const std::vector<uint64_t>& total_memory);

/// ggml's get_row_rounding: max mmq_y over devices whose share is not empty (cum[id] < cum[id + 1],
/// or < 1 for the last one); `compute_capability` per device as major*100 + minor*10 (e.g. 900).
/// 0 when no device has a share.
int64_t RowRounding(const std::vector<float>& cum, const std::vector<int>& compute_capability);

/// ggml's get_row_split: rows [*lo, *hi) of `nrows` that device `id` of cum.size() holds:
/// lo = nrows * cum[id], hi = nrows * cum[id + 1] (nrows for the last device), both products in
/// float as ggml's int64 * float, truncated and rounded down to a multiple of `rounding` (below 1
/// taken as 1); empty (*hi == *lo) when they meet, never *hi < *lo.
void RowSplit(int64_t nrows, const std::vector<float>& cum, int64_t rounding, int id, int64_t* lo,
              int64_t* hi);

}  // namespace stowage::exec
