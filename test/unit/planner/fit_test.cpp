// fit: the -ngl search.
#include "stowage/planner/fit.h"

#include <gtest/gtest.h>

#include "stowage/planner/graph.h"

namespace stowage::planner {
namespace {

TEST(FitGpuLayers, FindsTheLargestFittingValue) {
  for (int limit : {0, 1, 5, 9}) {
    int calls = 0;
    auto r = FitGpuLayers(9, [&](int ngl, std::string*) -> Result<bool> {
      ++calls;
      return ngl <= limit;
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, limit);
    EXPECT_LE(calls, 6);  // binary search
  }
}

TEST(FitGpuLayers, ReportsWhenNothingFitsAndPropagatesErrors) {
  auto none = FitGpuLayers(9, [](int, std::string* why) -> Result<bool> {
    *why = "does not fit: device X";
    return false;
  });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(), "--fit: even -ngl 0 does not fit: device X");
  auto err = FitGpuLayers(9, [](int, std::string*) -> Result<bool> { return InvalidArgument("bad"); });
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().message(), "bad");
}

}  // namespace
}  // namespace stowage::planner

#include "stowage/planner/layer_map.h"
#include "test_manifests.h"

namespace stowage::planner {
namespace {

TEST(CheckFit, CountsDeviceBuffersNotMappedOrHostOnes) {
  PlacementOutcome o;
  o.devices =
      *MakeDeviceSet({testing::Gpu("G", 10, "CUDA", /*host=*/true), testing::Cpu()}, SplitMode::kLayer, 0);
  InitPlacement(o.devices, true, &o.placement);
  auto buf = [&](const std::string& buft, uint64_t mib, bool mapped) {
    PlannedBuffer b;
    b.buft = o.placement.FindBuft(buft);
    b.device = o.placement.bufts[b.buft].device;
    b.size = mib << 20;
    b.mapped = mapped;
    o.memory.buffers.push_back(b);
  };
  buf("G", 6, false);
  buf("G_Host", 50, false);  // pinned host memory: counts for the CPU
  buf("CPU", 100, true);     // the file mapping: counts for nobody
  o.memory.buffers[1].usage = BufferUsage::kOutput;
  auto use = DeviceMemory(o);
  EXPECT_EQ(use[0].needed, 6ull << 20);
  EXPECT_EQ(use[1].needed, 50ull << 20);
  // The breakdown by usage counts the same buffers (the deployment report's columns).
  EXPECT_EQ(use[0].by_usage[static_cast<int>(BufferUsage::kWeights)], 6ull << 20);
  EXPECT_EQ(use[1].by_usage[static_cast<int>(BufferUsage::kOutput)], 50ull << 20);
  EXPECT_EQ(use[1].by_usage[static_cast<int>(BufferUsage::kWeights)], 0u);
  EXPECT_FALSE(use[1].reported);  // the CPU manifest reports no memory: never checked
  EXPECT_TRUE(CheckFit(o).ok());
  buf("G", 5, false);
  Status s = CheckFit(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(
      s.message(),
      "does not fit: device G needs 11534336 bytes (11.00 MiB) but has 10485760 bytes (10.00 MiB) available "
      "(free 10.00 MiB - reserve 0.00 MiB)");
}

/// Two GPUs with split bufts (-sm row, 10 MiB free each) and a CPU; one weight buffer per split buft
/// holding the given weights, and one plain G0 buffer of `g0_bytes`.
struct RowFixture {
  ModelGraphs m;
  PlacementOutcome o;
};

/// Sets the split both split bufts record (RecordTensorSplit's normalized -ts).
void SetSplit(RowFixture& f, std::vector<float> ts) {
  for (PlacedBuft& pb : f.o.placement.bufts)
    if (pb.name == "G0_Split" || pb.name == "G1_Split") pb.tensor_split = ts;
}

RowFixture MakeRow(uint64_t g0_bytes) {
  RowFixture f;
  f.o.devices = *MakeDeviceSet({testing::Gpu("G0", 10, "CUDA", false, true),
                                testing::Gpu("G1", 10, "CUDA", false, true), testing::Cpu()},
                               SplitMode::kRow, 0);
  InitPlacement(f.o.devices, true, &f.o.placement);
  auto buffer = [&](const std::string& buft, uint64_t size) {
    PlannedBuffer b;
    b.buft = f.o.placement.FindBuft(buft);
    b.device = f.o.placement.bufts[b.buft].device;
    b.name = buft;
    b.size = size;
    f.o.memory.buffers.push_back(b);
    return static_cast<int>(f.o.memory.buffers.size()) - 1;
  };
  auto weight = [&](const std::string& name, GgmlType type, int64_t ne0, int64_t ne1, int buf,
                    uint64_t offset) {
    GlobalTensor g;
    g.name = name;
    g.type = type;
    g.ne[0] = ne0;
    g.ne[1] = ne1;
    g.nbytes = TensorBytes(type, g.ne);
    g.buffer = buf;
    g.offset = offset;
    f.m.globals.push_back(g);
  };
  const int s0 = buffer("G0_Split", 36864 + 2 * 65536);
  const int s1 = buffer("G1_Split", 2048 * 1024);
  buffer("G0", g0_bytes);
  weight("blk.0.attn_q.weight", GgmlType::Q4_0, 256, 256, s0, 0);     // rows of 144 bytes, padded by 144
  weight("blk.0.ffn_up.weight", GgmlType::F32, 512, 64, s0, 36864);   // 64 rows: all on the last device
  weight("blk.0.ffn_up.weight", GgmlType::F32, 512, 64, s0, 36864);   // a second role of it: counted once
  weight("blk.1.ffn_down.weight", GgmlType::F16, 1024, 1024, s1, 0);  // ne0 % 512 == 0: no padding
  return f;
}

TEST(RowSplit, EachDeviceHoldsItsRowsOfEverySplitBuffer) {
  RowFixture f = MakeRow(1 << 20);
  SetSplit(f, {0.5f, 0.5f});
  auto shares = RowSplitShares(f.m, f.o);
  ASSERT_TRUE(shares.ok()) << shares.status().ToString();
  ASSERT_EQ(shares->size(), 2u);  // the plain G0 buffer is not split
  const SplitBufferShare& a = (*shares)[0];
  EXPECT_EQ(a.buffer, 0);
  EXPECT_EQ(a.device_bytes[0], 128u * 144 + 144);
  EXPECT_EQ(a.device_bytes[1], 128u * 144 + 144 + 64u * 2048);
  EXPECT_EQ(a.device_bytes[2], 0u);
  const SplitBufferShare& b = (*shares)[1];
  EXPECT_EQ(b.device_bytes[0], 512u * 2048);
  EXPECT_EQ(b.device_bytes[1], 512u * 2048);
  // -ts 3,1 moves rows to G0.
  SetSplit(f, {0.75f, 0.25f});
  auto uneven = RowSplitShares(f.m, f.o);
  ASSERT_TRUE(uneven.ok());
  EXPECT_EQ((*uneven)[1].device_bytes[0], 768u * 2048);
  EXPECT_EQ((*uneven)[1].device_bytes[1], 256u * 2048);
}

TEST(CheckFit, CountsEachDevicesShareOfASplitBufferNotTheWholeBuffer) {
  // G0: 9 MiB of its own buffer + its rows of the split buffers (1.02 MiB) exceed its 10 MiB.
  RowFixture f = MakeRow(9ull << 20);
  auto shares = RowSplitShares(f.m, f.o);  // nothing recorded: equal totals split evenly
  ASSERT_TRUE(shares.ok());
  // Without the shares, G0_Split and G1_Split count wholly for G0 and G1.
  auto whole = DeviceMemory(f.o);
  EXPECT_EQ(whole[0].needed, (9ull << 20) + 36864 + 2 * 65536);
  EXPECT_EQ(whole[1].needed, 2048u * 1024);
  f.o.split_shares = *shares;
  auto use = DeviceMemory(f.o);
  const uint64_t g0 = (9ull << 20) + 128 * 144 + 144 + 512 * 2048;
  const uint64_t g1 = 128 * 144 + 144 + 64 * 2048 + 512 * 2048;
  EXPECT_EQ(use[0].needed, g0);
  EXPECT_EQ(use[1].needed, g1);
  EXPECT_EQ(use[1].by_usage[static_cast<int>(BufferUsage::kWeights)], g1);  // its rows are weights
  EXPECT_EQ(use[0].needed + use[1].needed, (9ull << 20) + 2 * (128 * 144 + 144) + 64 * 2048 + 1024 * 2048);
  Status s = CheckFit(f.o);
  ASSERT_FALSE(s.ok());  // G0: 9 MiB + 1.02 MiB > 10 MiB (the whole-buffer count said 9.16 MiB: fits)
  EXPECT_NE(s.message().find("device G0 needs " + std::to_string(g0) + " bytes"), std::string::npos)
      << s.message();
  RowFixture small = MakeRow(8ull << 20);
  small.o.split_shares = *RowSplitShares(small.m, small.o);
  EXPECT_TRUE(CheckFit(small.o).ok());
}

}  // namespace
}  // namespace stowage::planner
