// A backend's runtime supports_op agrees with the manifest it emits (DESIGN.md: "A backend's
// runtime supports_op and its emitted manifest must agree"), for every op and type pair, over
// buffer, shape, contiguity and batch variations. Also: emitted manifests parse and register.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "stowage/planner/from_probe.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/device_probe.h"
#include "support_comparison.h"

namespace stowage::planner {
namespace {

using support_check::CompareAll;
using support_check::Comparison;

std::vector<ProbedDevice> DevicesUnderTest() {
  std::vector<ProbedDevice> devs = ProbeDevices().devices;
  CpuInfo no_avx2;  // a CPU without AVX2 has no CPU_REPACK
  no_avx2.model_name = "baseline x86-64";
  devs.push_back(MakeCpuDevice(no_avx2));
  CpuInfo avx2 = no_avx2;
  avx2.model_name = "AVX2 x86-64";
  avx2.features.avx = avx2.features.avx2 = avx2.features.fma = true;
  devs.push_back(MakeCpuDevice(avx2));
  CudaDeviceInfo gpu;  // what the CUDA probe would build for an H200 (tested without a GPU)
  gpu.index = 1;
  gpu.name = "NVIDIA H200";
  gpu.memory_total = 150754820096ull;
  gpu.memory_free = 150000000000ull;
  gpu.cc_major = 9;
  devs.push_back(MakeCudaDevice(gpu));
  gpu.index = 2;  // with explicit backend types: fewer weights, copies per source type
  gpu.weight_types = {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0};
  gpu.cpy_types = {
      {GgmlType::F32, GgmlType::F16}, {GgmlType::F32, GgmlType::Q8_0}, {GgmlType::BF16, GgmlType::F32}};
  devs.push_back(MakeCudaDevice(gpu));
  return devs;
}

TEST(ProbeAgreement, RuntimeSupportsOpEqualsEmittedManifest) {
  for (const auto& dev : DevicesUnderTest()) {
    auto m = ManifestFromProbe(dev);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    // Compare against the manifest as the planner would read it from disk.
    auto parsed = ParseManifest(SerializeManifest(*m), LocalManifestKey(dev) + ".json");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    DeviceManifest inst = parsed->WithIndex(0);
    Comparison c = CompareAll(dev, inst);
    EXPECT_EQ(c.mismatches, 0u) << c.first_mismatch;
    EXPECT_GT(c.supported, 1000u) << dev.name << ": the comparison must exercise supported queries";
    EXPECT_LT(c.supported, c.queries / 2) << dev.name << ": and unsupported ones";
  }
}

TEST(ProbeAgreement, CudaManifestIsIndexedLikeGgml) {
  CudaDeviceInfo gpu;
  gpu.index = 3;
  gpu.name = "NVIDIA H200";
  gpu.memory_total = 1000;
  gpu.memory_free = 900;
  auto m = ManifestFromProbe(MakeCudaDevice(gpu));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->name, "CUDA{index}");
  EXPECT_EQ(m->default_buft.name, "CUDA{index}");
  EXPECT_EQ(m->host_buft->name, "CUDA_Host");
  EXPECT_EQ(m->split_buft->name, "CUDA{index}_Split");
  EXPECT_TRUE(m->caps.host_buffer);
  ASSERT_TRUE(m->offload_op.has_value());
  DeviceManifest d0 = m->WithIndex(0);
  EXPECT_EQ(d0.name, "CUDA0");
  EXPECT_TRUE(d0.SupportsBuft("CUDA0", false));
  EXPECT_TRUE(d0.SupportsBuft("CUDA0_Split", false));
  EXPECT_FALSE(d0.SupportsBuft("CPU", true));
  EXPECT_EQ(LocalManifestKey(MakeCudaDevice(gpu)), "local-cuda3");
}

TEST(ProbeAgreement, ComparisonDetectsADivergentManifest) {
  CpuInfo avx2;
  avx2.features.avx = avx2.features.avx2 = true;
  ProbedDevice dev = MakeCpuDevice(avx2);
  auto m = ManifestFromProbe(dev);
  ASSERT_TRUE(m.ok());
  // Drop the "source in a non-host buffer" refusal: the manifest now accepts ops on GPU buffers.
  auto& rules = m->op_support.rules;
  size_t before = rules.size();
  rules.erase(std::remove_if(rules.begin(), rules.end(),
                             [](const OpRule& r) { return r.all_srcs_host == false && !r.supported; }),
              rules.end());
  ASSERT_EQ(rules.size(), before - 1);
  EXPECT_GT(CompareAll(dev, *m).mismatches, 0u);
  // Drop the repack buffer type's rules: Q4_0 weights in CPU_REPACK are no longer accepted.
  auto m2 = ManifestFromProbe(dev);
  ASSERT_TRUE(m2.ok());
  ASSERT_EQ(m2->extra_bufts.size(), 1u);
  m2->extra_bufts[0].supports_op.clear();
  EXPECT_GT(CompareAll(dev, *m2).mismatches, 0u);
}

TEST(ProbeAgreement, EmittedManifestsRegister) {
  char tmpl[] = "/tmp/stowage-emit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::vector<std::string> keys;
  for (const auto& dev : ProbeDevices().devices) {
    auto m = ManifestFromProbe(dev);
    ASSERT_TRUE(m.ok());
    std::string key = LocalManifestKey(dev);
    std::ofstream(dir + "/" + key + ".json") << SerializeManifest(*m);
    keys.push_back(key);
  }
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(keys.back(), "local-cpu");  // the CPU is probed last, like ggml's registry
  auto reg = Registry::Open({dir});
  ASSERT_TRUE(reg.ok());
  std::string list;
  for (const auto& k : keys) list += (list.empty() ? "" : ",") + k;
  auto devs = reg->MakeDevices(list);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  EXPECT_EQ(devs->back().name, "CPU");
  EXPECT_GT(devs->back().memory_total, 0u);
  for (const auto& k : keys) std::remove((dir + "/" + k + ".json").c_str());
  rmdir(dir.c_str());
}

TEST(CpuProbe, FeaturesAreConsistent) {
  CpuInfo cpu = ProbeCpu();
  EXPECT_GT(cpu.logical_cores, 0);
  EXPECT_GE(cpu.logical_cores, cpu.physical_cores);
  EXPECT_GT(cpu.memory_total, 0u);
  EXPECT_LE(cpu.memory_free, cpu.memory_total);
  const CpuFeatures& f = cpu.features;
  // Implications the CPUID/XGETBV logic guarantees.
  if (f.avx2) EXPECT_TRUE(f.avx);
  if (f.avx512bw || f.avx512vl || f.avx512_vnni) EXPECT_TRUE(f.avx512f);
  if (f.avx512f) EXPECT_TRUE(f.avx);
  // The compiler's view of this machine agrees with CPUID for the common features.
  __builtin_cpu_init();
  EXPECT_EQ(f.avx2, __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(f.avx512f, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(f.fma, __builtin_cpu_supports("fma") != 0);
  // /proc/cpuinfo flags agree as well.
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += " ";
    EXPECT_EQ(f.avx2, line.find(" avx2 ") != std::string::npos);
    EXPECT_EQ(f.avx512_vnni, line.find(" avx512_vnni ") != std::string::npos);
    EXPECT_EQ(f.avx512_bf16, line.find(" avx512_bf16 ") != std::string::npos);
    EXPECT_EQ(f.amx_int8, line.find(" amx_int8 ") != std::string::npos);
    break;
  }
}

}  // namespace
}  // namespace stowage::planner
