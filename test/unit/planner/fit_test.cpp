// fit: the -ngl search.
#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "stowage/planner/fit.h"

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
  o.devices = *MakeDeviceSet({testing::Gpu("G", 10, "CUDA", /*host=*/true), testing::Cpu()}, SplitMode::kLayer, 0);
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
  auto use = DeviceMemory(o);
  EXPECT_EQ(use[0].needed, 6ull << 20);
  EXPECT_EQ(use[1].needed, 50ull << 20);
  EXPECT_FALSE(use[1].reported);  // the CPU manifest reports no memory: never checked
  EXPECT_TRUE(CheckFit(o).ok());
  buf("G", 5, false);
  Status s = CheckFit(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "does not fit: device G needs 11534336 bytes (11.00 MiB) but has 10485760 bytes (10.00 MiB) available "
            "(free 10.00 MiB - reserve 0.00 MiB)");
}

}  // namespace
}  // namespace stowage::planner
