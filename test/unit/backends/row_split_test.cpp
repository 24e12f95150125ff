// The CUDA<i>_Split row split (row_split.h), checked against ggml-cuda's rules
// (ggml_backend_cuda_split_buffer_type, get_row_rounding, get_row_split) on any machine. The
// planner's fit check (RowSplitShares, fit_test) counts split weights with the same functions.
#include "stowage/runtime/row_split.h"

#include <gtest/gtest.h>

#include <utility>

namespace stowage::exec {
namespace {

TEST(RowSplit, CumulativeFromProportions) {
  EXPECT_EQ(CumulativeSplit({3, 1}, 2), (std::vector<float>{0.f, 0.75f}));
  EXPECT_EQ(CumulativeSplit({}, 4), (std::vector<float>{0.f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(CumulativeSplit({0, 0}, 2), (std::vector<float>{0.f, 0.5f}));
  EXPECT_EQ(CumulativeSplit({1, 0, 1}, 3), (std::vector<float>{0.f, 0.5f, 0.5f}));
  // Fewer proportions than devices: the missing ones are 0 (ggml reads a zero-filled array).
  EXPECT_EQ(CumulativeSplit({1}, 2), (std::vector<float>{0.f, 1.f}));
}

TEST(RowSplit, PlanProportionsElseTotalMemory) {
  const std::vector<uint64_t> mem = {80ull << 30, 40ull << 30};
  EXPECT_EQ(SplitProportions({3, 1}, mem), (std::vector<float>{3, 1}));
  // -ts absent or all zero: ggml's default_tensor_split, the devices' total memory.
  EXPECT_EQ(CumulativeSplit(SplitProportions({}, mem), 2), (std::vector<float>{0.f, 2.f / 3.f}));
  EXPECT_EQ(CumulativeSplit(SplitProportions({0, 0}, mem), 2), (std::vector<float>{0.f, 2.f / 3.f}));
}

TEST(RowSplit, StartsFollowTensorSplitElseTotalMemory) {
  EXPECT_EQ(RowSplitStarts({3, 1}, {10, 10}), (std::vector<float>{0.f, 0.75f}));
  EXPECT_EQ(RowSplitStarts({}, {30, 10}), (std::vector<float>{0.f, 0.75f}));      // ggml default_tensor_split
  EXPECT_EQ(RowSplitStarts({0, 0}, {10, 30}), (std::vector<float>{0.f, 0.25f}));  // all zero: memory
  EXPECT_EQ(RowSplitStarts({}, {0, 0}), (std::vector<float>{0.f, 0.5f}));
  EXPECT_EQ(RowSplitStarts({0, 1}, {10, 10}), (std::vector<float>{0.f, 0.f}));  // device 0 holds nothing
  // Only the first total_memory.size() proportions count: a positive one past them leaves the memory split.
  EXPECT_EQ(RowSplitStarts({0, 0, 5}, {10, 30}), (std::vector<float>{0.f, 0.25f}));
  EXPECT_TRUE(RowSplitStarts({1}, {}).empty());
}

TEST(RowSplit, StartsSumInDouble) {
  // -ts 3e38,3e38: a float sum overflows to inf (device 0's start of device 1 would be 0).
  EXPECT_EQ(RowSplitStarts({3e38f, 3e38f}, {10, 10}), (std::vector<float>{0.f, 0.5f}));
  EXPECT_EQ(CumulativeSplit({3e38f, 3e38f}, 2), (std::vector<float>{0.f, 0.5f}));
  // Total memory enters exactly: 2^25 + 3 and 2^25 - 1 bytes split in halves; converted to float
  // first (2^25 + 4 and 2^25) and divided in float, device 1 would start at 0.50000006.
  EXPECT_EQ(RowSplitStarts({}, {(1ull << 25) + 3, (1ull << 25) - 1}), (std::vector<float>{0.f, 0.5f}));
}

TEST(RowSplit, RangesRoundDownToTheGranularityAndTheLastDeviceTakesTheRest) {
  auto range = [](int64_t nrows, const std::vector<float>& starts, int id) {
    int64_t lo = -1, hi = -1;
    RowSplit(nrows, starts, 128, id, &lo, &hi);
    return std::pair<int64_t, int64_t>(lo, hi);
  };
  EXPECT_EQ(range(256, {0.f, 0.5f}, 0), (std::pair<int64_t, int64_t>(0, 128)));
  EXPECT_EQ(range(256, {0.f, 0.5f}, 1), (std::pair<int64_t, int64_t>(128, 256)));
  EXPECT_EQ(range(128, {0.f, 0.5f}, 0), (std::pair<int64_t, int64_t>(0, 0)));  // 64 rounds down to 0
  EXPECT_EQ(range(128, {0.f, 0.5f}, 1), (std::pair<int64_t, int64_t>(0, 128)));
  EXPECT_EQ(range(1000, {0.f, 0.25f, 0.5f}, 1),
            (std::pair<int64_t, int64_t>(128, 384)));  // 250 -> 128, 500 -> 384
  EXPECT_EQ(range(1000, {0.f, 0.25f, 0.5f}, 2), (std::pair<int64_t, int64_t>(384, 1000)));
}

TEST(RowSplit, RoundingFromDevicesWithAShare) {
  // mmq_y: 128 from compute capability 7.0 on, 64 below; the largest over devices with rows.
  EXPECT_EQ(RowRounding(CumulativeSplit({1, 1}, 2), {900, 800}), 128);
  EXPECT_EQ(RowRounding(CumulativeSplit({1, 1}, 2), {610, 610}), 64);
  EXPECT_EQ(RowRounding(CumulativeSplit({1, 1}, 2), {610, 750}), 128);
  // The Volta device has no share (-ts 1,0): only the Pascal one counts.
  EXPECT_EQ(RowRounding(CumulativeSplit({1, 0}, 2), {610, 750}), 64);
  EXPECT_EQ(RowRounding(CumulativeSplit({0, 1}, 2), {750, 610}), 64);
}

TEST(RowSplit, GgmlRoundingAndLastDevice) {
  // -ts 3,1 on 1000 rows with mmq_y = 128: device 0 gets [0, 640), device 1 [640, 1000).
  const std::vector<float> cum = CumulativeSplit({3, 1}, 2);
  int64_t lo, hi;
  RowSplit(1000, cum, 128, 0, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 640);
  RowSplit(1000, cum, 128, 1, &lo, &hi);
  EXPECT_EQ(lo, 640);
  EXPECT_EQ(hi, 1000);
  // Fewer rows than the rounding: everything on the last device.
  RowSplit(100, cum, 128, 0, &lo, &hi);
  EXPECT_EQ(hi - lo, 0);
  RowSplit(100, cum, 128, 1, &lo, &hi);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 100);
}

TEST(RowSplit, EveryRowOnceForManySplits) {
  // A device with a zero share gets no rows; rows stay covered exactly once, in device order,
  // every inner boundary a multiple of the rounding.
  const std::vector<std::vector<float>> splits = {
      {1, 0, 1}, {3, 1}, {1, 1, 1}, {0.1f, 0.7f, 0.2f}, {5, 0, 0, 1}};
  for (const auto& ts : splits)
    for (int64_t nrows : {1, 127, 4096, 5000, 32000, 151936})
      for (int64_t rounding : {64, 128}) {
        const int n = static_cast<int>(ts.size());
        const std::vector<float> cum = CumulativeSplit(ts, n);
        int64_t prev = 0;
        for (int id = 0; id < n; ++id) {
          int64_t lo, hi;
          RowSplit(nrows, cum, rounding, id, &lo, &hi);
          EXPECT_EQ(lo, prev) << "nrows " << nrows << " device " << id;
          EXPECT_LE(lo, hi);
          if (id + 1 < n) EXPECT_EQ(hi % rounding, 0) << "nrows " << nrows << " device " << id;
          if (ts[static_cast<size_t>(id)] == 0) EXPECT_EQ(hi, lo) << "zero share, device " << id;
          prev = hi;
        }
        EXPECT_EQ(prev, nrows);
      }
}

TEST(RowSplit, FloatProductAsGgml) {
  // ggml computes nrows*tensor_split[id] with int64 * float, a float product: 2^24 + 3 rows round to
  // 16777220.f, * 0.25 = 4194305; a double product would give 4194304.75 -> 4194304.
  const std::vector<float> cum = {0.f, 0.25f};
  int64_t lo, hi;
  RowSplit(16777219, cum, 1, 0, &lo, &hi);
  EXPECT_EQ(hi, 4194305);
  RowSplit(16777219, cum, 1, 1, &lo, &hi);
  EXPECT_EQ(lo, 4194305);
}

}  // namespace
}  // namespace stowage::exec
