// fit: the fit check and llama.cpp 2026's --fit (FitParams).
#include "stowage/planner/fit.h"

#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/model_graphs.h"
#include "synth_gguf.h"
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

namespace stowage::planner {
namespace {

TEST(FitChoice, PrintsLlamaFitParamsArguments) {
  FitChoice c;
  c.n_ctx = 4096;
  EXPECT_EQ(c.Args(), "-c 4096 -ngl -1");
  c.n_gpu_layers = 48;
  c.tensor_split = {30, 18, 0};  // trailing zeros dropped, as llama-fit-params does
  c.overrides = {{"blk\\.14\\.ffn_(up|down|gate_up|gate)_(ch|)exps", "CPU"},
                 {"blk\\.15\\.ffn_down.*", "RPC1"}};
  EXPECT_EQ(c.Args(),
            "-c 4096 -ngl 48 -ts 30,18 -ot \"blk\\.14\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU,"
            "blk\\.15\\.ffn_down.*=RPC1\"");
  c.tensor_split = {48, 0};  // one device in use: no -ts
  c.overrides.clear();
  EXPECT_EQ(c.Args(), "-c 4096 -ngl 48");
}

/// Device memory of a plan of `gguf` with `choice` applied: what the fit promises to keep under
/// each device's free memory minus its margin.
std::vector<uint64_t> UsedWith(const GgufFile& gguf, const HParams& hp, ContextConfig cfg,
                               const std::vector<DeviceManifest>& machine, const FitChoice& choice) {
  cfg.n_ctx = choice.n_ctx;
  EXPECT_TRUE(ResolveContext(hp, gguf.path(), &cfg).ok());
  auto g = BuildModelGraphs(gguf, hp, cfg);
  EXPECT_TRUE(g.ok());
  PlacementOptions o;
  o.n_gpu_layers = choice.n_gpu_layers < 0 ? static_cast<int>(hp.n_layer) + 1 : choice.n_gpu_layers;
  o.tensor_split = choice.tensor_split;
  o.overrides = choice.overrides;
  auto out = PlaceModel(*g, machine, o);
  EXPECT_TRUE(out.ok()) << out.status().message();
  std::vector<uint64_t> used;
  for (const DeviceMemoryUse& u : DeviceMemory(*out))
    if (u.device < out->devices.n_model) used.push_back(u.needed);
  return used;
}

DeviceManifest GpuBytes(const std::string& name, uint64_t free) {
  DeviceManifest d = testing::Gpu(name, 1);
  d.memory_free = d.memory_total = free;
  return d;
}

class FitParamsTest : public ::testing::Test {
 protected:
  void Load(test::SynthGguf synth) {
    gguf_ = synth.Parse();
    ASSERT_TRUE(gguf_);
    auto hp = ReadHParams(*gguf_);
    ASSERT_TRUE(hp.ok()) << hp.status().message();
    hp_ = *hp;
    cfg_.n_ctx = 256;
    cfg_.n_batch = cfg_.n_ubatch = 64;
  }
  std::unique_ptr<GgufFile> gguf_;
  HParams hp_;
  ContextConfig cfg_;
};

TEST_F(FitParamsTest, DenseLayersFillTheDevicesBackToFront) {
  test::SynthParams p;
  p.n_layer = 8;
  p.n_embd = 256;
  p.n_ff = 512;
  Load(test::LlamaModel(p));
  const FitOptions margin0{{0}, 4096};
  // Room for everything: nothing changes.
  std::vector<DeviceManifest> machine = {GpuBytes("G0", 64 << 20), GpuBytes("G1", 64 << 20), testing::Cpu()};
  auto roomy = FitParams(*gguf_, hp_, cfg_, machine, {}, margin0);
  ASSERT_TRUE(roomy.ok()) << roomy.status().message();
  EXPECT_EQ(roomy->Args(), "-c 256 -ngl -1");
  // The memory of the whole model on one device, split over two that each hold about a third.
  const std::vector<uint64_t> whole =
      UsedWith(*gguf_, hp_, cfg_, {GpuBytes("G0", 64 << 20), testing::Cpu()}, *roomy);
  machine = {GpuBytes("G0", whole[0] / 3), GpuBytes("G1", whole[0] / 3), testing::Cpu()};
  auto c = FitParams(*gguf_, hp_, cfg_, machine, {}, margin0);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->failure.empty());
  ASSERT_EQ(c->tensor_split.size(), 2u);
  EXPECT_EQ(c->n_gpu_layers, static_cast<int>(c->tensor_split[0] + c->tensor_split[1]));
  EXPECT_GT(c->n_gpu_layers, 0);
  EXPECT_LT(c->n_gpu_layers, 9);
  EXPECT_TRUE(c->overrides.empty());  // whole layers only for a dense model
  const std::vector<uint64_t> used = UsedWith(*gguf_, hp_, cfg_, machine, *c);
  for (size_t i = 0; i < used.size(); ++i) EXPECT_LE(used[i], machine[i].memory_free) << i;
  // One more layer on the last device would not fit: the fit took the most it could.
  FitChoice more = *c;
  more.n_gpu_layers += 1;
  more.tensor_split[1] += 1;
  EXPECT_GT(UsedWith(*gguf_, hp_, cfg_, machine, more)[1], machine[1].memory_free);
  // A margin of the whole device leaves nothing to offload.
  auto none = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{whole[0]}, 4096});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->Args(), "-c 256 -ngl 0");  // -ts 0,0: trailing zeros dropped
}

TEST_F(FitParamsTest, MoeExpertsSpillWithOverrides) {
  test::SynthParams p;
  p.n_layer = 6;
  p.n_embd = 128;
  p.n_expert = 16;
  p.n_expert_used = 2;
  Load(test::Qwen3MoeModel(p, 32, 256));
  std::vector<DeviceManifest> machine = {GpuBytes("G0", 1ull << 30), testing::Cpu()};
  auto roomy = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{0}, 4096});
  ASSERT_TRUE(roomy.ok());
  const uint64_t whole = UsedWith(*gguf_, hp_, cfg_, machine, *roomy)[0];
  machine[0].memory_free = machine[0].memory_total = whole / 2;
  auto c = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{0}, 4096});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_gpu_layers, 7);  // every layer: the dense weights fit, the experts of some spill
  ASSERT_FALSE(c->overrides.empty());
  for (const TensorOverride& o : c->overrides) EXPECT_NE(o.pattern.find("blk\\."), std::string::npos);
  EXPECT_LE(UsedWith(*gguf_, hp_, cfg_, machine, *c)[0], machine[0].memory_free);
  // A user's -ot: llama.cpp's fit gives up and keeps the parameters.
  PlacementOptions ot;
  ot.overrides = {{"ffn_down", "CPU"}};
  auto failed = FitParams(*gguf_, hp_, cfg_, machine, ot, FitOptions{{0}, 4096});
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->failure, "model_params::tensor_buft_overrides already set by user, abort");
  EXPECT_EQ(failed->n_gpu_layers, -1);
}

TEST_F(FitParamsTest, AnAutomaticContextShrinksFirst) {
  test::SynthParams p;
  p.n_layer = 4;
  p.n_ctx = 8192;
  Load(test::LlamaModel(p));
  cfg_.n_ctx = 0;  // the model's: 8192
  std::vector<DeviceManifest> machine = {GpuBytes("G0", 1ull << 30), testing::Cpu()};
  auto full = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{0}, 1024});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->Args(), "-c 8192 -ngl -1");
  const uint64_t at_max = UsedWith(*gguf_, hp_, cfg_, machine, *full)[0];
  FitChoice min_ctx = *full;
  min_ctx.n_ctx = 1024;
  const uint64_t at_min = UsedWith(*gguf_, hp_, cfg_, machine, min_ctx)[0];
  machine[0].memory_free = machine[0].memory_total = (at_max + at_min) / 2;
  auto c = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{0}, 1024});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->n_gpu_layers, -1);  // the whole model still offloaded
  EXPECT_LT(c->n_ctx, 8192u);
  EXPECT_GE(c->n_ctx, 1024u);
  EXPECT_EQ(c->n_ctx % 256, 0u);
  EXPECT_LE(UsedWith(*gguf_, hp_, cfg_, machine, *c)[0], machine[0].memory_free);
  // -c 0 given explicitly (n_ctx_min UINT32_MAX): the context stays, layers go instead.
  auto kept = FitParams(*gguf_, hp_, cfg_, machine, {}, FitOptions{{0}, UINT32_MAX});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->n_ctx, 8192u);
  EXPECT_LT(kept->n_gpu_layers, 5);
  EXPECT_GE(kept->n_gpu_layers, 0);
}

}  // namespace
}  // namespace stowage::planner
