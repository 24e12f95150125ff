// The SWA cache of interleaved sliding-window models (llama.cpp 2026 llama_kv_cache_iswa; gemma2,
// gemma3): its planned size (size_swa = GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256), n_ctx with
// --swa-full), the plan fields that carry it (schema version 3) and the verifier's refusals of bad
// values, and the session's ring cache against the full-size cache on a sequence longer than the
// ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "objapi_edit.h"
#include "objapi_plan_generated.h"
#include "ops.h"  // cpu::DetectIsa
#include "plan_cpu.h"
#include "plan_probed.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "synth.h"

namespace stowage {
namespace {

namespace bp = ::objapi::plan;

// ---- planned sizes -----------------------------------------------------------------------------

/// A gemma2-like model's hyper-parameters: 4 layers alternating SWA / global, window `n_swa`.
planner::HParams Gemma2HParams(uint32_t n_swa) {
  planner::HParams hp;
  hp.arch = "gemma2";
  hp.n_layer = 4;
  hp.n_embd = 256;
  hp.n_head = 4;
  hp.n_head_kv = 2;
  hp.n_embd_head_k = hp.n_embd_head_v = 64;
  hp.n_ctx_train = 8192;
  hp.n_swa = n_swa;
  hp.swa_layers = {1, 0, 1, 0};
  return hp;
}

/// ResolveContext's n_ctx and n_ctx_swa for `hp` at context `n_ctx`, ubatch `n_ubatch`.
std::pair<uint32_t, uint32_t> Resolved(const planner::HParams& hp, uint32_t n_ctx, uint32_t n_ubatch,
                                       bool swa_full = false, uint32_t n_batch = 2048) {
  planner::ContextConfig cfg;
  cfg.n_ctx = n_ctx;
  cfg.n_ubatch = n_ubatch;
  cfg.n_batch = n_batch;
  cfg.swa_full = swa_full;
  const Status st = planner::ResolveContext(hp, "model.gguf", &cfg);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return {cfg.n_ctx, cfg.n_ctx_swa};
}

TEST(IswaPlan, SwaCacheSizeFollowsLlamaKvCacheIswa) {
  const planner::HParams g8 = Gemma2HParams(8), g4096 = Gemma2HParams(4096);
  // n_swa + n_ubatch below n_ctx: padded to 256.
  EXPECT_EQ(Resolved(g8, 512, 16).second, 256u);
  EXPECT_EQ(Resolved(g4096, 8192, 512).second, 4608u);  // 4608, a multiple of 256
  // n_ctx below the threshold n_swa + n_ubatch: the SWA cache is as large as the base cache.
  EXPECT_EQ(Resolved(g4096, 4096, 512).second, 4096u);
  EXPECT_EQ(Resolved(g4096, 1024, 512).second, 1024u);
  // --swa-full: n_ctx whatever the window.
  EXPECT_EQ(Resolved(g8, 512, 16, /*swa_full=*/true).second, 512u);
  EXPECT_EQ(Resolved(g4096, 8192, 512, /*swa_full=*/true).second, 8192u);
  // n_ubatch counts: a larger ubatch needs a larger ring (after n_ubatch <= n_batch).
  EXPECT_EQ(Resolved(g4096, 16384, 16).second, 4352u);                            // 4112 -> 4352
  EXPECT_EQ(Resolved(g4096, 16384, 2048).second, 6144u);                          // 6144
  EXPECT_EQ(Resolved(g4096, 16384, 2048, false, /*n_batch=*/256).second, 4352u);  // ubatch 256
  EXPECT_EQ(Resolved(g8, 4096, 300).second, 512u);                                // 308 -> 512
}

TEST(IswaPlan, ContextPaddedTo256AndNoSwaCacheElsewhere) {
  // llama.cpp 2026 pads n_ctx to 256 for every model; the interleaved-SWA architectures follow it.
  EXPECT_EQ(Resolved(Gemma2HParams(8), 300, 16), std::make_pair(512u, 256u));
  planner::HParams llama = Gemma2HParams(0);
  llama.arch = "llama";
  llama.swa_layers.clear();
  EXPECT_EQ(Resolved(llama, 300, 16), std::make_pair(320u, 0u));  // Feb 2025: padded to 32
  planner::HParams phi3 = llama;  // phi3's window is over the one full-size cache
  phi3.arch = "phi3";
  phi3.n_swa = 2047;
  EXPECT_EQ(Resolved(phi3, 4096, 512).second, 0u);
}

// ---- a tiny gemma2 ----------------------------------------------------------------------------

/// A random-weight gemma2 of 2 layers (layer 0 sliding-window, layer 1 global), window `n_swa`,
/// written under the test's temporary folder; its training context gguf-synth's 2048, or the window
/// when wider (a window above context_length is refused).
std::string Gemma2Model(uint32_t n_swa, const std::string& name) {
  synth::ModelSpec spec;
  spec.arch = "gemma2";
  spec.n_vocab = 64;
  spec.n_swa = n_swa;
  spec.n_ctx = std::max(spec.n_ctx, n_swa);
  spec.seed = 7;
  const std::string path = ::testing::TempDir() + "/iswa_" + name + ".gguf";
  const Status st = synth::WriteModel(spec, path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

/// The CPU plan of `model` at n_ctx 512, n_ubatch 16 (n_ctx_swa 256 for window 8), flash attention
/// as given, F32 K and V
/// cache: with F16 ones, a last-bit difference of a softmax probability (the ring sums its cells in
/// another order) can round to another F16 value, 2^-11 apart, in the KQV product.
std::vector<uint8_t> Plan(const std::string& model, bool swa_full, bool flash_attn = false) {
  planner::ContextConfig cfg;
  cfg.flash_attn = flash_attn;
  cfg.type_k = cfg.type_v = GgmlType::F32;
  cfg.n_ctx = 512;
  cfg.n_batch = 512;
  cfg.n_ubatch = 16;
  cfg.swa_full = swa_full;
  auto plan = test::PlanCpu(model, cfg, /*use_mmap=*/true);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : std::vector<uint8_t>{};
}

TEST(IswaPlan, SwaLayersHaveTheSmallerCacheAndTheirOwnSymbols) {
  const std::string model = Gemma2Model(8, "sizes");
  const std::vector<uint8_t> bytes = Plan(model, false);
  ASSERT_FALSE(bytes.empty());
  std::unique_ptr<bp::PlanT> p = bp::UnPackPlan(bytes.data());
  EXPECT_EQ(p->schema_version, kPlanSchemaVersionSwa);
  EXPECT_EQ(p->context->n_ctx, 512u);
  EXPECT_EQ(p->context->n_ctx_swa, 256u);
  const int64_t width = 2 * 16;  // n_head_kv 2 x head size 16 (n_embd 64 / 4 heads)
  for (const auto& t : p->tensors) {
    if (t->name == "cache_k_l0" || t->name == "cache_v_l0") EXPECT_EQ(t->ne[0], width * 256) << t->name;
    if (t->name == "cache_k_l1" || t->name == "cache_v_l1") EXPECT_EQ(t->ne[0], width * 512) << t->name;
  }
  for (const auto& g : p->graphs) {
    EXPECT_EQ(g->max_kv_swa, 256);
    for (const auto& t : g->tensors) {
      // The SWA layer's K view and the SWA mask span n_kv_swa; the global layer's K view n_kv.
      if (t->name == "k-0" || t->name == "KQ_mask_swa") {
        const size_t d = t->name == "k-0" ? 1 : 0;  // k [head, n_kv, heads], mask [n_kv, n_tokens]
        ASSERT_EQ(t->ne_swa.size(), 4u) << t->name;
        EXPECT_EQ(t->ne_swa[d].kv_swa(), 1) << t->name;
        EXPECT_EQ(t->ne[d].kv(), 0) << t->name;
      }
      if (t->name == "k-1" || t->name == "KQ_mask") EXPECT_TRUE(t->ne_swa.empty()) << t->name;
    }
  }
  // --swa-full: both caches of n_ctx cells (the SWA cache still its own, with its own symbols).
  std::unique_ptr<bp::PlanT> full = bp::UnPackPlan(Plan(model, true).data());
  EXPECT_EQ(full->context->n_ctx_swa, 512u);
  EXPECT_TRUE(full->context->swa_full);
}

// ---- the verifier on the SWA fields ------------------------------------------------------------

class IswaVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Gemma2Model(8, "verify");
    plan_ = Plan(model_, false);
    ASSERT_FALSE(plan_.empty());
    ASSERT_TRUE(Load(plan_).ok()) << Load(plan_).ToString();
  }
  /// The plan with `edit` applied (object API round trip), sealed again.
  std::vector<uint8_t> Edit(const std::function<void(bp::PlanT&)>& edit) const {
    std::vector<uint8_t> out = test::EditPlan(plan_, edit);
    EXPECT_FALSE(out.empty());
    return out;
  }
  /// The verifier, then the checks against the model (as Session runs them).
  Status Load(const std::vector<uint8_t>& bytes) const {
    auto plan = PlanFile::FromBytes(bytes, "p.plan");
    if (!plan.ok()) return plan.status();
    auto gguf = GgufFile::Open(model_);
    if (!gguf.ok()) return gguf.status();
    return CheckPlanAgainstModel(**plan, **gguf);
  }
  /// Expects `bytes` refused with one line containing `what`.
  void ExpectRefused(const std::vector<uint8_t>& bytes, const std::string& what) const {
    const Status st = Load(bytes);
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
  std::string model_;
  std::vector<uint8_t> plan_;
};

TEST_F(IswaVerify, SwaCacheAboveTheContextIsRefused) {
  ExpectRefused(Edit([](bp::PlanT& p) { p.context->n_ctx_swa = 768; }),
                "p.plan: context.n_ctx_swa: expected n_ctx 512, or from n_ubatch 16 to n_ctx, found 768");
}

TEST_F(IswaVerify, SwaCacheBelowAUbatchIsRefused) {
  ExpectRefused(Edit([](bp::PlanT& p) { p.context->n_ctx_swa = 8; }), "found 8");
}

TEST_F(IswaVerify, RingBelowTheWindowPlusAUbatchIsRefusedWithTheModel) {
  // 20 cells hold a ubatch of 16 but not the window of 8 besides it.
  ExpectRefused(Edit([](bp::PlanT& p) { p.context->n_ctx_swa = 20; }),
                "context.n_ctx_swa 20 is below the sliding window 8");
}

TEST_F(IswaVerify, SwaCacheInAVersion2PlanIsRefused) {
  ExpectRefused(Edit([](bp::PlanT& p) { p.schema_version = 2; }),
                "p.plan: schema_version: expected >= 3 for a SWA cache (context.n_ctx_swa 256), found 2");
}

TEST_F(IswaVerify, WorstCaseBelowTheSwaCacheIsRefused) {
  ExpectRefused(Edit([](bp::PlanT& p) { p.graphs[1]->max_kv_swa = 128; }),
                "graphs[1].max_kv_swa: expected at least context.n_ctx_swa 256, found 128");
}

TEST_F(IswaVerify, SwaSymbolsWithoutASwaCacheAreRefused) {
  ExpectRefused(
      Edit([](bp::PlanT& p) { p.context->n_ctx_swa = 0; }),
      ".ne_swa: expected no SWA cache symbols (n_kv_swa, kv_head_swa) in a plan without a SWA cache");
}

TEST_F(IswaVerify, SwaTermsOfTheWrongLengthAreRefused) {
  ExpectRefused(Edit([](bp::PlanT& p) {
                  for (auto& t : p.graphs[0]->tensors)
                    if (t->name == "k-0") t->ne_swa.pop_back();
                }),
                ".ne_swa: expected 4 dims, found 3");
}

TEST_F(IswaVerify, SwaViewPastItsCacheIsRefused) {
  // The SWA layer's K view read by the attention (llama.cpp 2026's view of the cache per stream,
  // then reshaped to heads and permuted into k-0) moved n_kv_swa rows on: at n_kv_swa = 256 it
  // leaves the 256-cell cache. (gemma2's K / V stores are SET_ROWS at the cells of an index input,
  // llama.cpp 2026's, so no store view has a kv_head_swa offset.)
  int edited = 0;
  const std::vector<uint8_t> moved = Edit([&edited](bp::PlanT& p) {
    for (auto& g : p.graphs)
      for (auto& t : g->tensors)
        if (t->name == "cache_k_l0 (view)" && !t->view_nb.empty()) {
          t->view_offset_swa = std::make_unique<bp::DimExprSwa>(t->view_nb[0].c(), 0);
          ++edited;
        }
  });
  ASSERT_GT(edited, 0) << "no strided view of cache_k_l0: the graph changed, update the test";
  ExpectRefused(moved, "cache_k_l0 (view)");
}

// ---- the ring against the full-size cache -----------------------------------------------------

/// Logits of every position of `tokens`, decoded in ubatches of the given sizes (cycled), with the
/// plan `plan` of `model`.
std::vector<float> DecodeAll(const std::string& model, const std::vector<uint8_t>& plan,
                             const std::vector<int32_t>& tokens, const std::vector<int>& chunks) {
  SessionOptions opts;
  opts.n_threads = 2;
  auto s = Session::CreateFromPlanBytes(plan, model, opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<float> all, logits;
  size_t i = 0;
  for (size_t c = 0; i < tokens.size(); ++c) {
    const size_t n = std::min<size_t>(chunks[c % chunks.size()], tokens.size() - i);
    const Status st =
        (*s)->Decode(std::vector<int32_t>(tokens.begin() + i, tokens.begin() + i + n), true, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    all.insert(all.end(), logits.begin(), logits.end());
    i += n;
  }
  return all;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(IswaRing, SameLogitsAsTheFullSizeCacheBeyondTheRing) {
  const std::string model = Gemma2Model(8, "ring");
  const std::vector<uint8_t> ring = Plan(model, false), full = Plan(model, true);
  ASSERT_FALSE(ring.empty());
  ASSERT_FALSE(full.empty());
  // 400 tokens: the 256-cell ring wraps once and a half. Ubatches of 40 (split into 16s), 1, 7
  // and 13 tokens: several cross the ring's end and run as two sub-ubatches.
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(400);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 64);
  const std::vector<int> chunks = {40, 1, 7, 13};
  const std::vector<float> a = DecodeAll(model, ring, tokens, chunks);
  const std::vector<float> b = DecodeAll(model, full, tokens, chunks);
  ASSERT_EQ(a.size(), tokens.size() * 64);
  EXPECT_LE(MaxAbsDiff(a, b), 1e-4f);
  // The same sequence in other ubatches gives the same logits too.
  EXPECT_LE(MaxAbsDiff(a, DecodeAll(model, ring, tokens, {16})), 1e-4f);

  // The window matters at this tolerance: the same weights with a window of 2048 (the model's
  // whole context_length, the widest a file may declare: every past
  // token visible, as a ring that did not mask p - pos >= n_swa would see the ones it holds) give
  // other logits.
  const std::string wide = Gemma2Model(2048, "ring_wide");
  EXPECT_GT(MaxAbsDiff(a, DecodeAll(wide, Plan(wide, true), tokens, chunks)), 1e-2f);

  // With flash attention (FLASH_ATTN_EXT over the untransposed SWA cache, n_kv_swa padded to 256).
  const std::vector<float> fa = DecodeAll(model, Plan(model, false, true), tokens, chunks);
  EXPECT_LE(MaxAbsDiff(fa, DecodeAll(model, Plan(model, true, true), tokens, chunks)), 1e-4f);
}

// ---- llama.cpp's bits beyond the ring ---------------------------------------------------------

/// The token ids of the ring goldens (test/data/iswa-ring/ref_ring.cpp RingToken): in [3, 64).
int32_t RingToken(int i) { return 3 + (i * 7 + i * i) % 61; }

/// The golden XXH64 of `variant` and `type` (test/data/iswa-ring/ring.txt); "" when absent.
std::string RingGolden(const std::string& variant, const std::string& type, int swa_full, int first) {
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/iswa-ring/ring.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string v, t, hash;
    int sf = -1, fi = -1;
    f >> v >> t >> sf >> fi >> hash;
    if (v == variant && t == type && sf == swa_full && fi == first) return hash;
  }
  return "";
}

// With --llamacpp-numerics the ring gives llama.cpp's bits on a sequence that wraps it: llama.cpp's
// find_slot puts position p of one sequence in cell p % size_swa too (it reuses the SWA-masked cell
// after the head), and a ubatch that crosses the ring's end (first = 8: the ubatch of positions
// 248..263), which llama.cpp computes in one graph over two runs of cells and this runtime as two
// sub-ubatches, has the same bits where the products are computed row by row. Goldens of llama.cpp
// 2026-09-28's zen4 and haswell CPU libraries (make_golden.sh; llama.cpp's own logits are the same
// for both cache sizes and both splits); each ISA level this CPU has is checked.
TEST(IswaRing, LlamaCppBitsBeyondTheRing) {
  struct Variant {
    const char* name;
    CpuIsa isa;
  };
  const cpu::IsaLevel have = cpu::DetectIsa();
  for (const char* type : {"f32", "q8_0"}) {
    synth::ModelSpec spec;  // gguf-synth --arch gemma2 --n-vocab 64 --sliding-window 8 --type TYPE
    spec.arch = "gemma2";
    spec.n_vocab = 64;
    spec.n_swa = 8;
    spec.weight_type = std::string(type) == "f32" ? GgmlType::F32 : GgmlType::Q8_0;
    const std::string model = ::testing::TempDir() + "/iswa_golden_" + type + ".gguf";
    ASSERT_TRUE(synth::WriteModel(spec, model).ok());
    for (const Variant& v : {Variant{"zen4", CpuIsa::kAvx512Vnni}, Variant{"haswell", CpuIsa::kAvx2}}) {
      if (int(have) < int(v.isa)) continue;  // this CPU cannot run the variant's kernels
      for (int swa_full = 0; swa_full < 2; ++swa_full)
        for (int first : {16, 8}) {
          const std::string want = RingGolden(v.name, type, swa_full, first);
          ASSERT_FALSE(want.empty()) << v.name << " " << type;
          planner::ContextConfig cfg;
          cfg.n_ctx = cfg.n_batch = 512;
          cfg.n_ubatch = 16;
          cfg.swa_full = swa_full == 1;
          auto plan = test::PlanForThisCpu(model, cfg);
          ASSERT_TRUE(plan.ok()) << plan.status().ToString();
          SessionOptions opts;
          opts.n_threads = 1;
          opts.llamacpp_numerics = true;
          opts.cpu_max_isa = v.isa;
          auto s = Session::CreateFromPlanBytes(*plan, model, opts);
          ASSERT_TRUE(s.ok()) << s.status().ToString();
          std::vector<float> all, logits;
          for (int pos = 0; pos < 400;) {
            const int n = pos == 0 ? first : 400 - first;
            std::vector<int32_t> ids(n);
            for (int i = 0; i < n; ++i) ids[i] = RingToken(pos + i);
            ASSERT_TRUE((*s)->Decode(ids, true, &logits).ok());
            all.insert(all.end(), logits.begin(), logits.end());
            pos += n;
          }
          char hex[17];
          std::snprintf(hex, sizeof hex, "%016llx",
                        static_cast<unsigned long long>(Xxh64(all.data(), all.size() * sizeof(float))));
          EXPECT_EQ(std::string(hex), want)
              << v.name << " " << type << " swa_full " << swa_full << " first " << first;
        }
    }
  }
}

// ---- attention sinks and SWIGLU_OAI: schema version 4 -----------------------------------------

// A tiny gpt-oss (interleaved SWA, attention sinks, SWIGLU_OAI) is written as version 4 whether its
// sinks go to SOFT_MAX or to FLASH_ATTN_EXT; edited down to version 3 it is refused in one line
// naming the node (a version-3 runtime would run it without the sinks), and a version this runtime
// does not know is refused in one line. The gemma2 plans above (SWA, no sinks) stay version 3.
TEST(SinksPlan, GptOssPlansAreVersion4AndOlderVersionsAreRefused) {
  synth::ModelSpec spec;
  spec.arch = "gpt-oss";
  spec.n_vocab = 64;
  spec.n_swa = 8;
  spec.seed = 7;
  const std::string model = ::testing::TempDir() + "/sinks_gpt_oss.gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  auto load = [&](const std::vector<uint8_t>& bytes) {
    auto plan = PlanFile::FromBytes(bytes, "p.plan");
    if (!plan.ok()) return plan.status();
    auto gguf = GgufFile::Open(model);
    if (!gguf.ok()) return gguf.status();
    return CheckPlanAgainstModel(**plan, **gguf);
  };
  for (bool fa : {false, true}) {
    SCOPED_TRACE(fa ? "flash attention" : "soft_max");
    const std::vector<uint8_t> bytes = Plan(model, false, fa);
    ASSERT_FALSE(bytes.empty());
    std::unique_ptr<bp::PlanT> p = bp::UnPackPlan(bytes.data());
    EXPECT_EQ(p->schema_version, kPlanSchemaVersionSinks);
    EXPECT_TRUE(load(bytes).ok()) << load(bytes).ToString();
    const std::string op = fa ? "FLASH_ATTN_EXT" : "SOFT_MAX";
    const Status v3 = load(test::EditPlan(bytes, [](bp::PlanT& q) { q.schema_version = 3; }));
    ASSERT_FALSE(v3.ok());
    EXPECT_NE(v3.message().find(
                  "p.plan: schema_version: expected >= 4 for attention sinks / SWIGLU_OAI (graphs[0]"),
              std::string::npos)
        << v3.message();
    EXPECT_NE(v3.message().find(op + "), found 3"), std::string::npos) << v3.message();
    EXPECT_EQ(v3.message().find('\n'), std::string::npos) << v3.message();
    const Status v7 = load(test::EditPlan(bytes, [](bp::PlanT& q) { q.schema_version = 7; }));
    EXPECT_EQ(v7.message(), "p.plan: schema_version: this runtime reads plans up to version 6, found 7");
  }
  // Without sinks (the node's source dropped), SWIGLU_OAI alone still needs version 4.
  const std::vector<uint8_t> bytes = Plan(model, false, false);
  const Status no_sinks = load(test::EditPlan(bytes, [](bp::PlanT& q) {
    q.schema_version = 3;
    for (auto& g : q.graphs)
      for (auto& t : g->tensors)
        if (t->op == static_cast<uint16_t>(GgmlOp::SOFT_MAX) && t->srcs.size() > 2) t->srcs.resize(2);
  }));
  ASSERT_FALSE(no_sinks.ok());
  EXPECT_NE(no_sinks.message().find("SWIGLU_OAI), found 3"), std::string::npos) << no_sinks.message();
}

}  // namespace
}  // namespace stowage
