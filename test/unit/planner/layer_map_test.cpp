// assign-layers: device set, buffer-type lists and the layer map on hand-written manifests.
#include "stowage/planner/layer_map.h"

#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "test_manifests.h"

namespace stowage::planner {
namespace {

using testing::Accel;
using testing::Cpu;
using testing::Gpu;
using testing::OneDnnLike;

std::vector<std::string> Names(const DeviceSet& ds, const std::vector<int>& devs) {
  std::vector<std::string> out;
  for (int d : devs) out.push_back(ds.devices[d].name);
  return out;
}

std::vector<std::string> BuftNames(const BuftList& l) {
  std::vector<std::string> out;
  for (const auto& e : l) out.push_back(e.buft);
  return out;
}

TEST(DeviceSet, OrdersModelDevicesRpcFirstThenAccelThenCpu) {
  auto ds =
      MakeDeviceSet({Cpu(), Gpu("CUDA0", 100, "CUDA"), Accel(), Gpu("RPC[a]", 100)}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  ASSERT_EQ(ds->devices.size(), 4u);
  EXPECT_EQ(ds->devices[0].name, "RPC[a]");
  EXPECT_EQ(ds->devices[1].name, "CUDA0");
  EXPECT_EQ(ds->devices[2].name, "BLAS");
  EXPECT_EQ(ds->devices[3].name, "CPU");
  EXPECT_EQ(ds->n_model, 2);
  EXPECT_EQ(ds->cpu, 3);
}

TEST(DeviceSet, SplitModeNoneKeepsMainGpuOnly) {
  auto ds = MakeDeviceSet({Gpu("A", 1), Gpu("B", 1), Cpu()}, SplitMode::kNone, 1);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->n_model, 1);
  EXPECT_EQ(ds->devices[0].name, "B");
  EXPECT_EQ(ds->unused, std::vector<std::string>{"A"});
  auto bad = MakeDeviceSet({Gpu("A", 1), Cpu()}, SplitMode::kNone, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "invalid value for main_gpu: 1 (available devices: 1; valid: 0 (A))");
}

TEST(DeviceSet, MainGpuMustNameAModelDeviceInEveryMode) {
  for (SplitMode mode : {SplitMode::kNone, SplitMode::kLayer, SplitMode::kRow}) {
    EXPECT_TRUE(MakeDeviceSet({Gpu("A", 1), Gpu("B", 1), Cpu()}, mode, 1).ok());
    auto bad = MakeDeviceSet({Gpu("A", 1), Gpu("B", 1), Cpu()}, mode, 7);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(),
              "invalid value for main_gpu: 7 (available devices: 2; valid: 0 to 1 (A, B))");
    auto negative = MakeDeviceSet({Gpu("A", 1), Cpu()}, mode, -1);
    ASSERT_FALSE(negative.ok());
    EXPECT_EQ(negative.status().message(),
              "invalid value for main_gpu: -1 (available devices: 1; valid: 0 (A))");
    auto cpu_only = MakeDeviceSet({Cpu()}, mode, 3);
    ASSERT_FALSE(cpu_only.ok());
    EXPECT_EQ(
        cpu_only.status().message(),
        std::string("invalid value for main_gpu: 3 (available devices: 0)") +
            (mode == SplitMode::kNone ? "; -sm none runs on the one GPU -mg picks, and there is none" : ""));
  }
  // Without model devices the default 0 is fine unless -sm none needs one.
  EXPECT_TRUE(MakeDeviceSet({Cpu()}, SplitMode::kLayer, 0).ok());
  EXPECT_TRUE(MakeDeviceSet({Cpu()}, SplitMode::kRow, 0).ok());
  EXPECT_FALSE(MakeDeviceSet({Cpu()}, SplitMode::kNone, 0).ok());
}

TEST(DeviceSet, NeedsExactlyOneCpu) {
  EXPECT_FALSE(MakeDeviceSet({Gpu("A", 1)}, SplitMode::kLayer, 0).ok());
  EXPECT_FALSE(MakeDeviceSet({Cpu(), Cpu()}, SplitMode::kLayer, 0).ok());
}

TEST(BuftLists, CpuListIsAccelThenExtraThenFirstHostThenCpu) {
  // The BLAS-like device shares the CPU buft and is skipped; the first model device with a host
  // buft contributes it (FEB25 order: extra before host).
  auto ds = MakeDeviceSet({Gpu("G0", 1, "CUDA"), Gpu("G1", 1, "CUDA", /*host=*/true), Accel(), Cpu()},
                          SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, false, false, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"CPU_REPACK", "G1_Host", "CPU"}));
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, true, false, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"CPU_REPACK", "CPU"}));
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, true, true, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"CPU"}));
  const BuftList cpu = MakeCpuBuftList(*ds, false, false, LlamacppCompat::kFeb25);
  EXPECT_EQ(cpu[1].device, 1);  // the host buft is asked through its GPU
}

TEST(BuftLists, CpuList2026IsAccelThenFirstHostThenExtraThenCpu) {
  // llama.cpp 2026 make_cpu_buft_list: the GPU host buft before the CPU's extra bufts, so a
  // weight of the CPU list is pinned host memory (not repacked) when a GPU offers it.
  auto ds = MakeDeviceSet({Gpu("G0", 1, "CUDA"), Gpu("G1", 1, "CUDA", /*host=*/true), OneDnnLike(), Cpu()},
                          SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, false, false, LlamacppCompat::k2026)),
            (std::vector<std::string>{"ONEDNN", "G1_Host", "CPU_REPACK", "CPU"}));
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, true, false, LlamacppCompat::k2026)),
            (std::vector<std::string>{"ONEDNN", "CPU_REPACK", "CPU"}));
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, false, true, LlamacppCompat::k2026)),
            (std::vector<std::string>{"ONEDNN", "G1_Host", "CPU"}));
}

TEST(BuftLists, GpuListHasSplitBuftOnlyInRowMode) {
  auto ds = MakeDeviceSet({Gpu("G0", 1, "CUDA", false, /*split=*/true), Cpu(false)}, SplitMode::kRow, 0);
  ASSERT_TRUE(ds.ok());
  const BuftList cpu = MakeCpuBuftList(*ds, false, false, LlamacppCompat::kFeb25);
  EXPECT_EQ(BuftNames(MakeGpuBuftList(*ds, 0, SplitMode::kRow, cpu)),
            (std::vector<std::string>{"G0_Split", "G0", "CPU"}));
  EXPECT_EQ(BuftNames(MakeGpuBuftList(*ds, 0, SplitMode::kLayer, cpu)),
            (std::vector<std::string>{"G0", "CPU"}));
}

TEST(BuftLists, InitPlacementRegistersEachBuftOnceAndCpuComputeUsesHostBuft) {
  auto ds = MakeDeviceSet({Gpu("G0", 1, "CUDA", true), Accel(), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  Placement p;
  InitPlacement(*ds, true, &p);
  std::vector<std::string> names;
  for (const auto& b : p.bufts) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"G0", "G0_Host", "CPU_REPACK", "CPU"}));
  ASSERT_EQ(p.backends.size(), 3u);
  EXPECT_EQ(p.bufts[p.backends[0].compute_buft].name, "G0");
  EXPECT_EQ(p.bufts[p.backends[1].compute_buft].name, "CPU");      // BLAS
  EXPECT_EQ(p.bufts[p.backends[2].compute_buft].name, "G0_Host");  // CPU backend: host buft of device 0
  EXPECT_FALSE(p.bufts[2].repack.empty());
}

TEST(BuftLists, AccelWithItsOwnBuftLeadsTheCpuListAndComputesIntoTheCpuBuft) {
  auto ds = MakeDeviceSet({OneDnnLike(), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, false, false, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"ONEDNN", "CPU_REPACK", "CPU"}));
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds, false, true, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"ONEDNN", "CPU"}));
  Placement p;
  InitPlacement(*ds, true, &p);
  std::vector<std::string> names;
  for (const auto& b : p.bufts) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ONEDNN", "CPU_REPACK", "CPU"}));
  EXPECT_FALSE(p.bufts[0].is_host);
  EXPECT_TRUE(p.bufts[0].repack.empty());  // the ACCEL backend converts on upload itself (WriteTensor)
  EXPECT_EQ(p.devices[p.bufts[0].device].name, "ONEDNN");
  ASSERT_EQ(p.backends.size(), 2u);
  // Both backends compute into the CPU buft: the ACCEL results are host memory the CPU reads.
  EXPECT_EQ(p.bufts[p.backends[0].compute_buft].name, "CPU");
  EXPECT_EQ(p.bufts[p.backends[1].compute_buft].name, "CPU");
  // With a GPU in front, the CPU list still starts with the ACCEL buft (FEB25: ACCEL first).
  auto ds2 = MakeDeviceSet({Gpu("G0", 1, "CUDA", /*host=*/true), OneDnnLike(), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds2.ok());
  EXPECT_EQ(BuftNames(MakeCpuBuftList(*ds2, false, false, LlamacppCompat::kFeb25)),
            (std::vector<std::string>{"ONEDNN", "CPU_REPACK", "G0_Host", "CPU"}));
}

struct LayerCase {
  int ngl;
  std::vector<float> ts;
  std::vector<std::string> expect;  // layer 0..7, output
};

TEST(LayerMap, UpperBoundOnCumulativeFractions) {
  // Two devices of 512 and 256 MiB free (splits 2/3, 1), 8 layers (reference §2.3 worked examples).
  auto ds = MakeDeviceSet({Gpu("R0", 512), Gpu("R1", 256), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  const std::string C = "CPU", A = "R0", B = "R1";
  const std::vector<LayerCase> cases = {
      {0, {}, {C, C, C, C, C, C, C, C, C}},      {4, {}, {C, C, C, C, A, A, A, B, C}},
      {99, {}, {A, A, A, A, A, A, B, B, B}},  // 6/9 == 512/768 exactly: layer 6 goes to the next device
      {99, {1, 1}, {A, A, A, A, A, B, B, B, B}}, {9, {0, 1}, {B, B, B, B, B, B, B, B, B}},
  };
  for (const auto& c : cases) {
    auto lm = AssignLayers(*ds, 8, c.ngl, c.ts);
    ASSERT_TRUE(lm.ok());
    EXPECT_EQ(Names(*ds, lm->device), c.expect) << "ngl " << c.ngl;
  }
}

TEST(LayerMap, Llama2026CountsTheOutputLayerFirst) {
  // llama.cpp 2026 load_tensors: i_gpu_start = n_layer + 1 - ngl, so -ngl 1 is the output layer
  // alone and -ngl 4 the output and the last three layers; -ngl 0 and 99 as in Feb 2025.
  auto ds = MakeDeviceSet({Gpu("R0", 512), Gpu("R1", 256), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  const std::string C = "CPU", A = "R0", B = "R1";
  const std::vector<LayerCase> cases = {
      {0, {}, {C, C, C, C, C, C, C, C, C}},
      {1, {0, 1}, {C, C, C, C, C, C, C, C, B}},
      {4, {}, {C, C, C, C, C, A, A, A, B}},
      {99, {}, {A, A, A, A, A, A, B, B, B}},
  };
  for (const auto& c : cases) {
    auto lm = AssignLayers(*ds, 8, c.ngl, c.ts, LlamacppCompat::k2026);
    ASSERT_TRUE(lm.ok());
    EXPECT_EQ(Names(*ds, lm->device), c.expect) << "ngl " << c.ngl;
  }
  // Feb 2025: -ngl 1 is the last repeating layer, the output stays on the CPU.
  auto feb25 = AssignLayers(*ds, 8, 1, {0, 1});
  ASSERT_TRUE(feb25.ok());
  EXPECT_EQ(Names(*ds, feb25->device), (std::vector<std::string>{C, C, C, C, C, C, C, B, C}));
}

TEST(LayerMap, NoModelDevicesMeansEverythingOnCpu) {
  auto ds = MakeDeviceSet({Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  auto lm = AssignLayers(*ds, 3, 99, {});
  ASSERT_TRUE(lm.ok());
  EXPECT_EQ(lm->act_gpu_layers, 0);
  EXPECT_EQ(Names(*ds, lm->device), (std::vector<std::string>{"CPU", "CPU", "CPU", "CPU"}));
}

TEST(LayerMap, RejectsTooManyProportions) {
  auto ds = MakeDeviceSet({Gpu("R0", 1), Cpu()}, SplitMode::kLayer, 0);
  ASSERT_TRUE(ds.ok());
  auto lm = AssignLayers(*ds, 2, 9, {1, 1});
  ASSERT_FALSE(lm.ok());
  EXPECT_EQ(lm.status().message(), "-ts has 2 values but there are only 1 model devices");
}

TEST(SplitMode, Parses) {
  EXPECT_EQ(*ParseSplitMode("row"), SplitMode::kRow);
  EXPECT_EQ(*ParseSplitMode("none"), SplitMode::kNone);
  EXPECT_FALSE(ParseSplitMode("Row").ok());
}

TEST(TensorSplit, ParsesCommasAndSlashes) {
  EXPECT_EQ(*ParseTensorSplit("3,1"), (std::vector<float>{3.f, 1.f}));
  EXPECT_EQ(*ParseTensorSplit("1/3"), (std::vector<float>{1.f, 3.f}));
  EXPECT_EQ(*ParseTensorSplit(" 0.5 ,0/2"), (std::vector<float>{0.5f, 0.f, 2.f}));
  EXPECT_EQ(*ParseTensorSplit("7"), (std::vector<float>{7.f}));
  EXPECT_TRUE(ParseTensorSplit("")->empty());
}

TEST(TensorSplit, RejectsWhatIsNotANonNegativeNumber) {
  struct Bad {
    const char* text;
    const char* item;  // "item N 'x'"
  };
  for (const Bad& b :
       {Bad{"3,x", "item 2 'x'"}, Bad{"1,-1", "item 2 '-1'"}, Bad{"3,,1", "item 2 ''"},
        Bad{"3,", "item 2 ''"}, Bad{"/1", "item 1 ''"}, Bad{"3x", "item 1 '3x'"}, Bad{"inf", "item 1 'inf'"},
        Bad{"nan/1", "item 1 'nan'"}, Bad{"1e99", "item 1 '1e99'"}}) {
    auto r = ParseTensorSplit(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              std::string("invalid tensor split '") + b.text + "': " + b.item +
                  " is not a non-negative number (expected proportions such as 3,1 or 3/1)");
  }
}

}  // namespace
}  // namespace stowage::planner
