// Every architecture gguf-synth writes (tensors from the planner's tensor tables, its own metadata
// keys) builds, consumes every tensor, and every weight is read by nodes of the op its
// GlobalTensor::consumer_op says (what placement relies on). Also the shared real models.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/gguf_writer.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage::planner {
namespace {

/// For every weight global: the ops of the nodes that read it in `g`. Errors are returned as text
/// lines "<weight>: read by <OP> (<node>), expected <OP>".
std::vector<std::string> ConsumerMismatches(const ModelGraphs& m, const Graph& g, std::map<int, int>* reads) {
  std::vector<std::string> out;
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    for (int s : t.srcs) {
      if (s < 0) continue;
      const Tensor& src = g.tensors[s];
      if (src.kind != TensorKind::kWeight) continue;
      (*reads)[src.global]++;
      const GlobalTensor& gt = m.globals[src.global];
      // gpt-oss's attention sinks: llama.cpp's tensor info (LLM_TENSOR_INFOS, which decides their
      // buffer type) names GGML_OP_SCALE, while the graph reads them as SOFT_MAX's / FLASH_ATTN_EXT's
      // sinks source; placement follows the tensor info.
      const bool sinks = gt.consumer_op == GgmlOp::SCALE &&
                         gt.name.find(".attn_sinks.") != std::string::npos &&
                         (t.op == GgmlOp::SOFT_MAX || t.op == GgmlOp::FLASH_ATTN_EXT);
      if (gt.consumer_op != t.op && !sinks)
        out.push_back(gt.name + ": read by " + GgmlOpName(t.op) + " (" + t.name + "), expected " +
                      GgmlOpName(gt.consumer_op));
    }
  }
  return out;
}

void CheckModel(const GgufFile& f, const std::string& what) {
  auto m = BuildModelGraphs(f, {});
  ASSERT_TRUE(m.ok()) << what << ": " << m.status().message();
  for (const Graph* g : {&m->pp, &m->tg}) {
    std::map<int, int> reads;
    EXPECT_EQ(ConsumerMismatches(*m, *g, &reads), std::vector<std::string>{}) << what << " " << g->name;
    for (size_t i = 0; i < m->globals.size(); ++i) {
      const GlobalTensor& gt = m->globals[i];
      if (gt.kind != TensorKind::kWeight) continue;
      // only one of the longrope factor pairs is used, chosen by the context size
      const bool optional = gt.name == "rope_factors_long.weight" || gt.name == "rope_factors_short.weight";
      if (!optional)
        EXPECT_GT(reads[static_cast<int>(i)], 0) << what << " " << g->name << ": " << gt.name << " unread";
    }
    // every node has a result and no symbolic dimension is negative at the worst case
    const Bindings b = g->WorstCase();
    for (int n : g->nodes)
      for (int d = 0; d < 4; ++d)
        EXPECT_GE(b.Eval(g->tensors[n].ne[d]), 0) << what << " " << g->tensors[n].name;
  }
}

TEST(GraphSynth, EveryArchitectureOfGgufSynth) {
  for (const std::string& arch : synth::SupportedArchs()) {
    for (bool tied : {false, true}) {
      synth::ModelSpec spec;
      spec.arch = arch;
      spec.tied_output = tied;
      spec.n_vocab = 64;
      GgufWriter w;
      ASSERT_TRUE(synth::BuildModel(spec, &w).ok()) << arch;
      auto bytes = w.WriteToBuffer();
      ASSERT_TRUE(bytes.ok()) << arch;
      auto f = GgufFile::Parse(bytes->data(), bytes->size(), arch + ".gguf");
      ASSERT_TRUE(f.ok()) << f.status().message();
      // What llama.cpp refuses, refused the same way: phi3 and qwen2moe (Feb 2025) and gpt-oss
      // (2026) without output.weight (their load_tensors have no tied-output fallback). gguf-synth writes
      // phi3.attention.sliding_window as convert_hf_to_gguf does (graph_arch_test covers a file
      // without it).
      if ((arch == "qwen2moe" || arch == "phi3" || arch == "gpt-oss") &&
          (*f)->FindTensor("output.weight") == nullptr) {
        auto m = BuildModelGraphs(**f, {});
        ASSERT_FALSE(m.ok());
        EXPECT_EQ(m.status().message(), arch + ".gguf: missing tensor 'output.weight'");
        continue;
      }
      if (arch == "phi3") {
        const GgufValue* swa = (*f)->Find("phi3.attention.sliding_window");
        ASSERT_NE(swa, nullptr);
      }
      CheckModel(**f, arch + (tied ? " (tied)" : ""));
    }
  }
}

TEST(GraphSynth, Llama31RopeFreqs) {
  synth::ModelSpec spec;
  spec.rope_freqs = true;
  GgufWriter w;
  ASSERT_TRUE(synth::BuildModel(spec, &w).ok());
  auto bytes = w.WriteToBuffer();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::Parse(bytes->data(), bytes->size(), "llama31.gguf");
  ASSERT_TRUE(f.ok());
  CheckModel(**f, "llama rope_freqs");
}

TEST(GraphSynth, SharedModels) {
  for (const char* name : {"stories260K.gguf", "stories260K-Q4_K_M.gguf", "tiny-tied-q4_0.gguf",
                           "tiny8-untied-q4_0.gguf", "llama-2-tiny-random.gguf", "synth-IQ4_XS.gguf"}) {
    const std::string path = test::ModelPath(name);
    STOWAGE_REQUIRE_FILE(path);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    CheckModel(**f, name);
  }
}

// A copy of a small gguf-synth llama model whose `key` (a u32) is set to `value`, header only.
std::string WithU32(const std::string& key, uint32_t value) {
  synth::ModelSpec spec;
  spec.arch = "llama";
  spec.n_layer = 2;
  spec.n_embd = 64;
  spec.n_head = 4;
  spec.n_head_kv = 4;
  spec.n_ff = 128;
  spec.n_vocab = 64;
  spec.header_only = true;
  const std::string dir = ::testing::TempDir();
  GgufWriter base;
  EXPECT_TRUE(synth::BuildModel(spec, &base).ok());
  EXPECT_TRUE(base.WriteFile(dir + "/hp-base.gguf").ok());
  auto f = GgufFile::Open(dir + "/hp-base.gguf");
  EXPECT_TRUE(f.ok()) << f.status().message();
  GgufWriter w;
  for (const auto& kv : (*f)->kvs())
    EXPECT_TRUE(
        w.AddKV(kv.key, kv.key == key ? GgufMetaValue::U32(value) : GgufMetaValue::FromValue(kv.value)).ok());
  const std::string path = dir + "/hp-" + key + ".gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

TEST(HParams, LayerCountAboveLlamaCppMaximumIsRefused) {
  // block_count 2^32-1 made the planner allocate per-layer tables until std::bad_alloc.
  for (uint32_t n : {513u, 10000000u, 4294967295u}) {
    const std::string path = WithU32("llama.block_count", n);
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto hp = ReadHParams(**f);
    ASSERT_FALSE(hp.ok());
    const std::string at =
        "key 'llama.block_count': expected at most 512 layers (llama.cpp LLAMA_MAX_LAYERS), found ";
    EXPECT_EQ(hp.status().message().substr(hp.status().message().find("key '")), at + std::to_string(n));
    EXPECT_EQ(hp.status().message().rfind(path + ": offset ", 0), 0u) << hp.status().message();
  }
  auto f = GgufFile::Open(WithU32("llama.block_count", 512));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(ReadHParams(**f).ok());
}

TEST(HParams, ResolveContextAsLlamaInitFromModel) {
  HParams hp;
  hp.arch = "llama";
  hp.n_ctx_train = 1000;
  ContextConfig cfg;  // n_ctx 0: the model's, padded to 32; n_batch clamped to n_ctx
  ASSERT_TRUE(ResolveContext(hp, "m.gguf", &cfg).ok());
  EXPECT_EQ(cfg.n_ctx, 1024u);
  EXPECT_EQ(cfg.n_batch, 1024u);
  EXPECT_EQ(cfg.n_ubatch, 512u);
  cfg = ContextConfig{};
  cfg.n_ctx = 128;
  cfg.n_batch = 16;  // below GGML_KQ_MASK_PAD (64 in FEB25 ggml.h): raised to 64
  cfg.n_ubatch = 512;
  ASSERT_TRUE(ResolveContext(hp, "m.gguf", &cfg).ok());
  EXPECT_EQ(cfg.n_ctx, 128u);
  EXPECT_EQ(cfg.n_batch, 64u);
  EXPECT_EQ(cfg.n_ubatch, 64u);
  cfg = ContextConfig{};
  cfg.n_ctx = 32;  // min(n_ctx, n_batch) first, then the raise: n_batch 64 > n_ctx, as llama.cpp
  cfg.n_ubatch = 16;
  ASSERT_TRUE(ResolveContext(hp, "m.gguf", &cfg).ok());
  EXPECT_EQ(cfg.n_batch, 64u);
  EXPECT_EQ(cfg.n_ubatch, 16u);

  // context_length 2^32-1 wrapped to n_ctx 0 in the padding and gave an unusable plan.
  hp.n_ctx_train = 4294967295u;
  cfg = ContextConfig{};
  Status s = ResolveContext(hp, "m.gguf", &cfg);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "m.gguf: llama.context_length 4294967295 exceeds the largest context Stowage plans "
            "(16777216 tokens); give a context size (-c; stowage-opt: --gguf-n-ctx)");
  cfg.n_ctx = 4096;  // an explicit -c overrides the model's value
  EXPECT_TRUE(ResolveContext(hp, "m.gguf", &cfg).ok());
  cfg = ContextConfig{};
  cfg.n_ctx = kMaxContextTokens + 1;
  s = ResolveContext(hp, "m.gguf", &cfg);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "m.gguf: context size 16777217 exceeds the largest context Stowage plans (16777216 tokens); "
            "expected at most that (-c, or llama.context_length times the sequences)");
}

TEST(HParams, KvCacheTypesAsLlamaCpp) {
  HParams hp;
  hp.arch = "llama";
  hp.n_ctx_train = 512;
  auto with = [&](GgmlType k, GgmlType v) {
    ContextConfig cfg;
    cfg.type_k = k;
    cfg.type_v = v;
    return ResolveContext(hp, "m.gguf", &cfg);
  };
  for (GgmlType k : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL})
    EXPECT_TRUE(with(k, GgmlType::F16).ok()) << GgmlTypeName(k);
  Status s = with(GgmlType::F16, GgmlType::Q8_0);
  EXPECT_EQ(s.message(),
            "V cache quantization requires flash_attn (llama.cpp); -ctv q8_0 needs -fa on (or use f16, "
            "bf16 or f32)");
  s = with(GgmlType::Q4_K, GgmlType::F16);
  EXPECT_EQ(s.message(),
            "unsupported KV cache type q4_K (llama.cpp accepts f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, "
            "q5_0, q5_1)");
  hp.arch = "mamba";  // recurrent states are F32 whatever -ctv says (llama_init_from_model)
  EXPECT_TRUE(with(GgmlType::F16, GgmlType::Q8_0).ok());
}

}  // namespace
}  // namespace stowage::planner
