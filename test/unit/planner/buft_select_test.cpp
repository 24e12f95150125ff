// select-weight-buft and place-kv on hand-written weights and manifests.
#include "stowage/planner/buft_select.h"

#include <gtest/gtest.h>

#include <regex>

#include "stowage/planner/explain.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/kv_place.h"
#include "test_manifests.h"

namespace stowage::planner {
namespace {

using testing::Cpu;
using testing::Gpu;
using testing::OneDnnLike;

GlobalTensor W(const std::string& name, GgmlType type, std::vector<int64_t> ne, int layer, LayerClass cls,
               stowage::GgmlOp op, bool dup = false) {
  GlobalTensor g;
  g.name = name;
  g.type = type;
  for (size_t i = 0; i < ne.size(); ++i) g.ne[i] = ne[i];
  g.nbytes = TensorBytes(type, g.ne);
  g.layer = layer;
  g.layer_class = cls;
  g.consumer_op = op;
  g.duplicated = dup;
  return g;
}

/// One-layer model: token_embd (input), attn_norm and attn_q of layer 0, output_norm and a tied
/// output (token_embd again, DUPLICATED) in the output layer, and the KV cache of layer 0.
ModelGraphs TinyModel() {
  ModelGraphs m;
  m.hp.n_layer = 1;
  m.hp.n_head = 4;
  m.hp.n_embd_head_v = 64;
  m.globals.push_back(
      W("token_embd.weight", GgmlType::Q4_0, {256, 512}, -1, LayerClass::kInput, stowage::GgmlOp::GET_ROWS));
  m.globals.push_back(
      W("blk.0.attn_norm.weight", GgmlType::F32, {256}, 0, LayerClass::kRepeating, stowage::GgmlOp::MUL));
  m.globals.push_back(W("blk.0.attn_q.weight", GgmlType::Q4_0, {256, 256}, 0, LayerClass::kRepeating,
                        stowage::GgmlOp::MUL_MAT));
  m.globals.push_back(
      W("output_norm.weight", GgmlType::F32, {256}, 1, LayerClass::kOutput, stowage::GgmlOp::MUL));
  m.globals.push_back(W("token_embd.weight", GgmlType::Q4_0, {256, 512}, 1, LayerClass::kOutput,
                        stowage::GgmlOp::MUL_MAT, true));
  GlobalTensor k =
      W("cache_k_l0", GgmlType::F16, {128 * 256}, 0, LayerClass::kRepeating, stowage::GgmlOp::NONE);
  k.kind = TensorKind::kKvCache;
  m.globals.push_back(k);
  return m;
}

struct Fixture {
  DeviceSet ds;
  LayerMap lm;
  Placement p;
};

Fixture Make(std::vector<DeviceManifest> devs, int ngl, bool mmap) {
  Fixture s;
  s.ds = *MakeDeviceSet(devs, SplitMode::kLayer, 0);
  s.lm = *AssignLayers(s.ds, 1, ngl, {});
  InitPlacement(s.ds, mmap, &s.p);
  return s;
}

std::string BuftOf(const Fixture& s, int g) { return s.p.bufts[s.p.global_buft[g]].name; }

TEST(SelectWeightBufts, CpuOnlyRepacksQ4_0MatmulsAndCountsTheRest) {
  ModelGraphs m = TinyModel();
  Fixture s = Make({Cpu()}, 0, true);
  MovedSummary moved;
  ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
  EXPECT_EQ(BuftOf(s, 0), "CPU");  // GET_ROWS: the repack buft refuses
  EXPECT_EQ(BuftOf(s, 1), "CPU");
  EXPECT_EQ(BuftOf(s, 2), "CPU_REPACK");  // Q4_0 MUL_MAT, ne1 % 8 == 0
  EXPECT_EQ(BuftOf(s, 3), "CPU");
  EXPECT_EQ(BuftOf(s, 4), "CPU_REPACK");  // the tied output is a MUL_MAT weight of the output layer
  EXPECT_EQ(s.p.global_buft[5], -1);      // KV is left to PlaceKvCache
  EXPECT_EQ(moved.count, 3);
  EXPECT_EQ(moved.tensor, "token_embd.weight");
  EXPECT_EQ(moved.type, "q4_0");
  EXPECT_EQ(moved.from, "CPU_REPACK");
  EXPECT_EQ(moved.to, "CPU");
}

TEST(SelectWeightBufts, HostBuftWithMmapBecomesCpu) {
  for (bool mmap : {true, false}) {
    ModelGraphs m = TinyModel();
    Fixture s = Make({Gpu("G", 100, "CUDA", /*host=*/true), Cpu()}, 0, mmap);
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
    // CPU list (FEB25): CPU_REPACK, G_Host, CPU. The norm takes G_Host, or CPU with mmap.
    EXPECT_EQ(BuftOf(s, 1), mmap ? "CPU" : "G_Host");
    EXPECT_EQ(BuftOf(s, 2), "CPU_REPACK");
  }
}

TEST(SelectWeightBufts, OffloadedOutputGetsItsOwnCopyOfTiedEmbeddings) {
  ModelGraphs m = TinyModel();
  Fixture s = Make({Gpu("G", 100), Cpu()}, 99, true);
  MovedSummary moved;
  ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
  EXPECT_EQ(BuftOf(s, 0), "CPU");
  EXPECT_EQ(BuftOf(s, 4), "G");
  EXPECT_EQ(BuftOf(s, 2), "G");
  EXPECT_EQ(moved.count, 1);  // only token_embd (input layer: CPU list, GET_ROWS)
}

/// TinyModel with F32 matmul weights (attn_q and the tied token_embd).
ModelGraphs TinyF32Model() {
  ModelGraphs m = TinyModel();
  for (auto& g : m.globals)
    if (g.kind == TensorKind::kWeight) {
      g.type = GgmlType::F32;
      g.nbytes = TensorBytes(g.type, g.ne);
    }
  return m;
}

TEST(SelectWeightBufts, AccelBuftTakesTheMatmulWeightsItSupports) {
  ModelGraphs m = TinyF32Model();
  Fixture s = Make({OneDnnLike(), Cpu()}, 0, true);
  MovedSummary moved;
  ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
  EXPECT_EQ(BuftOf(s, 0), "CPU");     // GET_ROWS table: never in ONEDNN
  EXPECT_EQ(BuftOf(s, 1), "CPU");     // MUL norm
  EXPECT_EQ(BuftOf(s, 2), "ONEDNN");  // F32 MUL_MAT
  EXPECT_EQ(BuftOf(s, 3), "CPU");
  // Tied embeddings: the output's MUL_MAT copy in ONEDNN, the input's GET_ROWS table in CPU; two
  // bufts, two copies (llama.cpp shares a duplicated tensor only within one buft).
  EXPECT_EQ(BuftOf(s, 4), "ONEDNN");
  EXPECT_EQ(moved.count, 3);
  EXPECT_EQ(moved.from, "ONEDNN");
  // Q4_0 weights: the ACCEL refuses them, CPU_REPACK takes the matmul.
  ModelGraphs q = TinyModel();
  Fixture s2 = Make({OneDnnLike(), Cpu()}, 0, true);
  ASSERT_TRUE(SelectWeightBufts(q, s2.ds, s2.lm, {}, &s2.p, &moved).ok());
  EXPECT_EQ(BuftOf(s2, 2), "CPU_REPACK");
  EXPECT_EQ(BuftOf(s2, 4), "CPU_REPACK");
  EXPECT_EQ(BuftOf(s2, 0), "CPU");
  // Without the ACCEL device (--device excluding it): today's choice.
  ModelGraphs f = TinyF32Model();
  Fixture s3 = Make({Cpu()}, 0, true);
  ASSERT_TRUE(SelectWeightBufts(f, s3.ds, s3.lm, {}, &s3.p, &moved).ok());
  EXPECT_EQ(BuftOf(s3, 2), "CPU");
  EXPECT_EQ(BuftOf(s3, 4), "CPU");
}

TEST(SelectWeightBufts, OverridesDecideFirst) {
  ModelGraphs m = TinyModel();
  Fixture s = Make({Gpu("G", 100), Cpu()}, 99, true);
  WeightBuftOptions o;
  o.overrides = {{"attn_q", "CPU"}, {"attn_norm", "G"}, {"output_norm", "G"}};
  MovedSummary moved;
  ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, o, &s.p, &moved).ok());
  EXPECT_EQ(BuftOf(s, 2), "CPU_REPACK");  // "CPU" selects from the CPU list (llama.cpp #14990)
  EXPECT_EQ(BuftOf(s, 1), "G");
  EXPECT_EQ(moved.count, 2);  // token_embd and the overridden attn_q
  o.overrides = {{"attn_q", "cpu"}};
  Status bad = SelectWeightBufts(m, s.ds, s.lm, o, &s.p, &moved);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "unknown buffer type 'cpu' in -ot 'attn_q=cpu' (available: G, CPU)");
}

TEST(WeightBuftSupported, RepackNeedsRowsMultipleOf8AndFailsClearlyForUnknownOps) {
  const DeviceManifest cpu = Cpu();
  const BufferType& repack = cpu.extra_bufts.at(0);
  HParams hp;
  std::string why;
  auto w = W("w", GgmlType::Q4_0, {256, 12}, 0, LayerClass::kRepeating, stowage::GgmlOp::MUL_MAT);
  EXPECT_FALSE(*WeightBuftSupported(hp, w, stowage::GgmlOp::MUL_MAT, repack, cpu, &why));
  EXPECT_EQ(why, "CPU does not support MUL_MAT(q4_0 [256, 12] in CPU_REPACK, f32 [256, 512])");
  w.ne[1] = 16;
  EXPECT_TRUE(*WeightBuftSupported(hp, w, stowage::GgmlOp::MUL_MAT, repack, cpu, nullptr));
  EXPECT_TRUE(*WeightBuftSupported(hp, w, stowage::GgmlOp::NONE, repack, cpu, nullptr));
  EXPECT_FALSE(WeightBuftSupported(hp, w, stowage::GgmlOp::SOFT_MAX, repack, cpu, nullptr).ok());
}

TEST(TensorOverrides, ParseAndMoePatterns) {
  auto o = ParseTensorOverrides("exps=CPU,blk\\.0\\.=RPC[127.0.0.1:50052]");
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[1].pattern, "blk\\.0\\.");
  EXPECT_EQ((*o)[1].buft, "RPC[127.0.0.1:50052]");
  EXPECT_FALSE(ParseTensorOverrides("exps").ok());
  EXPECT_FALSE(ParseTensorOverrides("=CPU").ok());
  EXPECT_FALSE(ParseTensorOverrides("a=CPU,").ok());
  auto first = ParseTensorOverrides("a=b=c");  // split at the first '=' as llama.cpp
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)[0].pattern, "a");
  EXPECT_EQ((*first)[0].buft, "b=c");
  const auto moe = CpuMoeOverrides(false, 2, "CPU");
  ASSERT_EQ(moe.size(), 2u);
  const std::regex re(moe[1].pattern);
  EXPECT_TRUE(std::regex_search("blk.1.ffn_up_exps.weight", re));
  EXPECT_FALSE(std::regex_search("blk.11.ffn_up_exps.weight", re));  // anchored by "\."
  EXPECT_EQ(CpuMoeOverrides(true, 0, "CPU").size(), 1u);
}

TEST(PlaceKvCache, FollowsLayerDeviceOrCpuWithNkvo) {
  for (bool offload : {true, false}) {
    ModelGraphs m = TinyModel();
    Fixture s = Make({Gpu("G", 100), Cpu()}, 99, true);
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
    ASSERT_TRUE(PlaceKvCache(m, s.ds, s.lm, offload, &s.p).ok());
    EXPECT_EQ(BuftOf(s, 5), offload ? "G" : "CPU");
  }
}

/// The rule code as the text says it (how the MLIR pass derived it before ExplainEntry had a code):
/// override > mmap > shared copy > head/fallback.
const char* CodeFromText(const ExplainEntry& e) {
  if (e.rule.rfind("override '", 0) == 0)
    return e.rule.find("first supported entry of the CPU list") != std::string::npos ? "load.override.cpu"
                                                                                     : "load.override";
  if (e.rule.find("; mmap: ") != std::string::npos) return "load.mmap";
  if (e.rule.find("; shares the copy already in ") != std::string::npos) return "load.dup";
  if (e.rule.rfind("KV cache of layer", 0) == 0) return "kv.layer";
  if (e.rule.rfind("-nkvo:", 0) == 0) return "kv.nkvo";
  return e.rejected.empty() ? "load.head" : "load.fallback";
}

/// Codes of the weight and KV records in globals order (the token_embd copy of the output layer is
/// subject "token_embd.weight (output)").
std::vector<std::string> Codes(const Placement& p) {
  std::vector<std::string> out;
  for (const auto& e : p.explain) {
    EXPECT_STREQ(ExplainRuleCode(e.code), CodeFromText(e)) << e.subject << ": " << e.rule;
    out.push_back(ExplainRuleCode(e.code));
  }
  return out;
}

TEST(ExplainRule, EveryWeightAndKvRecordCarriesTheCodeItsTextSays) {
  using V = std::vector<std::string>;
  {  // CPU only: GET_ROWS and MUL skip CPU_REPACK (fallback), Q4_0 MUL_MATs take it (head).
    ModelGraphs m = TinyModel();
    Fixture s = Make({Cpu()}, 0, true);
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
    ASSERT_TRUE(PlaceKvCache(m, s.ds, s.lm, true, &s.p).ok());
    EXPECT_EQ(Codes(s.p),
              (V{"load.fallback", "load.fallback", "load.head", "load.fallback", "load.head", "kv.layer"}));
  }
  {  // --no-repack: the tied output shares token_embd's CPU copy; -nkvo.
    ModelGraphs m = TinyModel();
    Fixture s = Make({Cpu()}, 0, true);
    WeightBuftOptions o;
    o.no_repack = true;
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, o, &s.p, &moved).ok());
    ASSERT_TRUE(PlaceKvCache(m, s.ds, s.lm, false, &s.p).ok());
    EXPECT_EQ(Codes(s.p), (V{"load.head", "load.head", "load.head", "load.head", "load.dup", "kv.nkvo"}));
  }
  {  // A GPU host buft with mmap: the CPU-list weights that chose G_Host are mapped instead.
    ModelGraphs m = TinyModel();
    Fixture s = Make({Gpu("G", 100, "CUDA", /*host=*/true), Cpu()}, 0, true);
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, {}, &s.p, &moved).ok());
    EXPECT_EQ(Codes(s.p), (V{"load.mmap", "load.mmap", "load.head", "load.mmap", "load.head"}));
  }
  {  // Overrides win over every other reason, also when mmap then replaces a host buft.
    ModelGraphs m = TinyModel();
    Fixture s = Make({Gpu("G", 100, "CUDA", /*host=*/true), Cpu()}, 99, true);
    WeightBuftOptions o;
    o.overrides = {{"attn_q", "CPU"}, {"attn_norm", "G"}, {"output_norm", "CPU"}};
    MovedSummary moved;
    ASSERT_TRUE(SelectWeightBufts(m, s.ds, s.lm, o, &s.p, &moved).ok());
    EXPECT_EQ(Codes(s.p),
              (V{"load.mmap", "load.override", "load.override.cpu", "load.override.cpu", "load.head"}));
    EXPECT_EQ(BuftOf(s, 3), "CPU");  // output_norm: CPU list -> G_Host -> mmap -> CPU
    EXPECT_NE(s.p.explain[3].rule.find("; mmap: "), std::string::npos);
  }
}

TEST(ExplainRule, CodesAreNamedLikeThePlaceDialectAndShownInJson) {
  EXPECT_STREQ(ExplainRuleCode(ExplainRule::kUnset), "");
  EXPECT_STREQ(ExplainRuleCode(ExplainRule::kWeightOverrideCpu), "load.override.cpu");
  EXPECT_STREQ(ExplainRuleCode(ExplainRule::kWeightShared), "load.dup");
  EXPECT_STREQ(ExplainRuleCode(ExplainRule::kKvNoOffload), "kv.nkvo");
  EXPECT_STREQ(ExplainRuleCode(ExplainRule::kNode), "node");
  Placement p;
  ExplainEntry e;
  e.subject = "w";
  e.rule = "first entry";
  e.code = ExplainRule::kWeightFallback;
  p.explain.push_back(e);
  EXPECT_NE(ExplainJson(p).find("\"rule\": \"first entry\",\n      \"code\": \"load.fallback\""),
            std::string::npos)
      << ExplainJson(p);
  EXPECT_EQ(ExplainText(p), "tensor w:  on  -- first entry\n");  // the text is unchanged
}

}  // namespace
}  // namespace stowage::planner
