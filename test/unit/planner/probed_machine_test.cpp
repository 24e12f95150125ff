// planner::ManifestsFromProbe (from_probe.h): probed GPUs are numbered in probe order (CUDA0, CUDA1, ...).
#include <gtest/gtest.h>

#include "stowage/planner/from_probe.h"
#include "stowage/planner/graph.h"

namespace stowage::planner {
namespace {

CudaDeviceInfo Gpu(int index, const std::string& name, uint64_t gib) {
  CudaDeviceInfo g;
  g.index = index;
  g.name = name;
  g.memory_total = gib << 30;
  g.memory_free = (gib << 30) / 2;
  g.cc_major = 9;
  return g;
}

std::vector<ProbedDevice> Machine() {
  CpuInfo cpu;
  cpu.features.avx = cpu.features.avx2 = true;
  // ggml registry order: the GPUs, then the CPU last.
  return {MakeCudaDevice(Gpu(0, "NVIDIA H200", 141)), MakeCudaDevice(Gpu(1, "NVIDIA H100", 80)),
          MakeCudaDevice(Gpu(2, "NVIDIA RTX 4090", 24)), MakeCpuDevice(cpu)};
}

TEST(ManifestsFromProbe, NumbersGpusInProbeOrder) {
  auto all = ManifestsFromProbe(Machine());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 4u);
  for (int i = 0; i < 3; ++i) {
    const planner::DeviceManifest& d = (*all)[i];
    const std::string cuda = "CUDA" + std::to_string(i);
    EXPECT_EQ(d.name, cuda);
    EXPECT_EQ(d.default_buft.name, cuda);
    ASSERT_TRUE(d.split_buft.has_value());
    EXPECT_EQ(d.split_buft->name, cuda + "_Split");
    ASSERT_TRUE(d.host_buft.has_value());
    EXPECT_EQ(d.host_buft->name, "CUDA_Host");  // one pinned host buffer type for all GPUs (ggml-cuda)
    EXPECT_TRUE(d.SupportsBuft(cuda, false));
    EXPECT_FALSE(d.IsIndexed());
  }
  EXPECT_EQ((*all)[1].description.find("H100") != std::string::npos, true) << (*all)[1].description;
  EXPECT_EQ((*all)[1].memory_total, 80ull << 30);
  EXPECT_FALSE((*all)[0].SupportsBuft("CUDA1", false));  // each device reads its own buffers only
  EXPECT_EQ((*all)[3].name, "CPU");
}

TEST(ManifestsFromProbe, SkippedDevicesTakeNoIndex) {
  const std::vector<ProbedDevice> probed = Machine();
  auto cpu_only =
      ManifestsFromProbe(probed, [](const ProbedDevice& d) { return d.type == DeviceType::kCpu; });
  ASSERT_TRUE(cpu_only.ok());
  ASSERT_EQ(cpu_only->size(), 1u);
  EXPECT_EQ((*cpu_only)[0].name, "CPU");
  auto not_first = ManifestsFromProbe(probed, [&](const ProbedDevice& d) { return &d != &probed[0]; });
  ASSERT_TRUE(not_first.ok());
  ASSERT_EQ(not_first->size(), 3u);
  EXPECT_EQ((*not_first)[0].name, "CUDA0");
  EXPECT_NE((*not_first)[0].description.find("H100"), std::string::npos);
  EXPECT_EQ((*not_first)[1].name, "CUDA1");
}

}  // namespace
}  // namespace stowage::planner
