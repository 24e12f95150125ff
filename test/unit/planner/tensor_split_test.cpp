// RecordTensorSplit: the normalized -ts each row-split buffer type carries into the plan
// (Buffer.tensor_split), as ggml_backend_cuda_split_buffer_type normalizes llama.cpp's tensor_split.
#include <gtest/gtest.h>

#include "stowage/planner/layer_map.h"
#include "test_manifests.h"

namespace stowage::planner {
namespace {

std::vector<float> SplitOf(const Placement& p, const std::string& buft) {
  const int i = p.FindBuft(buft);
  EXPECT_GE(i, 0) << buft;
  return i >= 0 ? p.bufts[i].tensor_split : std::vector<float>{1234.f};
}

/// Two CUDA GPUs with split bufts (-sm row) and the CPU.
Placement TwoGpus(const std::vector<float>& ts, DeviceSet* ds_out = nullptr) {
  auto ds = MakeDeviceSet({testing::Gpu("G0", 10, "CUDA", /*host=*/true, /*split=*/true),
                           testing::Gpu("G1", 30, "CUDA", /*host=*/false, /*split=*/true), testing::Cpu()},
                          SplitMode::kRow, 0);
  EXPECT_TRUE(ds.ok()) << ds.status().message();
  Placement p;
  InitPlacement(*ds, true, &p);
  RecordTensorSplit(*ds, ts, &p);
  if (ds_out) *ds_out = *ds;
  return p;
}

TEST(RecordTensorSplit, SplitBuftsCarryTheNormalizedProportions) {
  const Placement p = TwoGpus({3, 1});
  EXPECT_EQ(SplitOf(p, "G0_Split"), (std::vector<float>{0.75f, 0.25f}));
  EXPECT_EQ(SplitOf(p, "G1_Split"), (std::vector<float>{0.75f, 0.25f}));
  // Only the split bufts: the default, host and CPU bufts carry nothing.
  for (const char* b : {"G0", "G0_Host", "G1", "CPU"}) EXPECT_TRUE(SplitOf(p, b).empty()) << b;
  // Any scale: -ts 30,10 and 0.6,0.2 are the same split.
  EXPECT_EQ(SplitOf(TwoGpus({30, 10}), "G0_Split"), (std::vector<float>{0.75f, 0.25f}));
  EXPECT_EQ(SplitOf(TwoGpus({0.6f, 0.2f}), "G1_Split"), (std::vector<float>{0.75f, 0.25f}));
  // A device left out (-ts 1,0) keeps a 0 entry: the split has two devices, the second gets no rows.
  EXPECT_EQ(SplitOf(TwoGpus({1, 0}), "G0_Split"), (std::vector<float>{1.f, 0.f}));
  // Huge values do not overflow the sum.
  EXPECT_EQ(SplitOf(TwoGpus({3e38f, 3e38f}), "G0_Split"), (std::vector<float>{0.5f, 0.5f}));
  // Fewer values than devices: the missing ones are 0 (llama.cpp's tensor_split array is zeroed).
  EXPECT_EQ(SplitOf(TwoGpus({2}), "G1_Split"), (std::vector<float>{1.f, 0.f}));
}

TEST(RecordTensorSplit, WithoutTsTheDefaultIsLeftToTheRuntime) {
  // No -ts or all zero: ggml's default split (each device's total memory, here 10 and 30 MiB) is the
  // running machine's, so nothing is recorded (an absent Buffer.tensor_split means exactly that).
  for (const auto& ts : {std::vector<float>{}, std::vector<float>{0, 0}}) {
    const Placement p = TwoGpus(ts);
    EXPECT_TRUE(SplitOf(p, "G0_Split").empty());
    EXPECT_TRUE(SplitOf(p, "G1_Split").empty());
  }
}

TEST(RecordTensorSplit, OnlyTheDevicesOfTheSplitsBackendCount) {
  // RPC devices are moved to the front of the model devices; -ts is indexed like the model devices
  // (RPC, CUDA0, CUDA1), but a CUDA split buffer spreads over the CUDA devices only.
  auto ds =
      MakeDeviceSet({testing::Gpu("G0", 10, "CUDA", false, true), testing::Gpu("G1", 10, "CUDA", false, true),
                     testing::Gpu("R", 10, "RPC"), testing::Cpu()},
                    SplitMode::kRow, 0);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ASSERT_EQ(ds->devices[0].name, "R");
  Placement p;
  InitPlacement(*ds, true, &p);
  RecordTensorSplit(*ds, {2, 3, 1}, &p);
  EXPECT_EQ(SplitOf(p, "G0_Split"), (std::vector<float>{0.75f, 0.25f}));
  EXPECT_EQ(SplitOf(p, "G1_Split"), (std::vector<float>{0.75f, 0.25f}));
  EXPECT_TRUE(SplitOf(p, "R").empty());
  // Only the RPC device has a share: the CUDA devices' proportions are all zero -> default.
  RecordTensorSplit(*ds, {1, 0, 0}, &p);
  EXPECT_TRUE(SplitOf(p, "G0_Split").empty());
}

}  // namespace
}  // namespace stowage::planner
