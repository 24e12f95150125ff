// The tensor tables (stowage/planner/arch_tensors.h) are the one description of each
// architecture's tensors: for every architecture gguf-synth writes, the file's tensors are exactly
// the table's (names; shapes as the loader checks them against the table), and the planner's
// loader consumes every one of them; files carrying every optional tensor of the table (the tests'
// synth_gguf) load too, so every table entry has a loader that reads it.
#include "stowage/planner/arch_tensors.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/gguf_writer.h"
#include "synth.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

// name -> shape (ggml order, trailing 1s dropped) of every tensor of `f`.
Shapes FileTensors(const GgufFile& f) {
  Shapes out;
  for (const auto& t : f.tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    out[t.name] = ne;
  }
  return out;
}

// Loads `f` and checks that every tensor of the file is a weight global of the planner with the
// file's shape, i.e. the loader asked for it (with the table's shape) and consumed it; but for the
// tensors of blocks from `skipped_from` on (glm4moe's NextN blocks), which it skips: no global.
void ExpectLoaderConsumesAll(const GgufFile& f, const std::string& what, int skipped_from = -1) {
  auto m = BuildModelGraphs(f, {});
  ASSERT_TRUE(m.ok()) << what << ": " << m.status().message();
  Shapes loaded;
  for (const GlobalTensor& g : m->globals) {
    if (g.kind != TensorKind::kWeight) continue;
    std::vector<int64_t> ne(g.ne, g.ne + 4);
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    loaded[g.name] = ne;
  }
  Shapes want = FileTensors(f);
  if (skipped_from >= 0)
    for (auto it = want.begin(); it != want.end();)
      it = it->first.rfind("blk.", 0) == 0 && std::stoi(it->first.substr(4)) >= skipped_from ? want.erase(it)
                                                                                             : std::next(it);
  EXPECT_EQ(loaded, want) << what;
}

std::unique_ptr<GgufFile> Synth(const synth::ModelSpec& spec, std::vector<uint8_t>* bytes) {
  GgufWriter w;
  Status s = synth::BuildModel(spec, &w);
  EXPECT_TRUE(s.ok()) << s.message();
  auto buf = w.WriteToBuffer();
  EXPECT_TRUE(buf.ok());
  *bytes = std::move(*buf);
  auto f = GgufFile::Parse(bytes->data(), bytes->size(), spec.arch + ".gguf");
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(ArchTensors, EveryArchitectureHasATable) {
  for (const std::string& arch : SupportedArchitectures()) {
    const ArchTensorTable* t = FindArchTensorTable(arch);
    ASSERT_NE(t, nullptr) << arch;
    std::set<std::string> names;
    for (const ArchTensor& e : t->tensors)
      EXPECT_TRUE(names.insert(e.name).second) << arch << ": " << e.name << " twice";
  }
  for (const std::string& arch : synth::SupportedArchs())
    EXPECT_NE(FindArchTensorTable(arch == "mixtral" ? "llama" : arch), nullptr) << arch;
}

// gguf-synth's file of every architecture holds exactly the table's tensors (every entry that
// applies, output.weight and the rope factors included, the optional biases gguf-synth never
// writes left out), and the loader consumes each with the table's shape.
TEST(ArchTensors, GgufSynthWritesTheTableAndTheLoaderReadsIt) {
  std::vector<std::pair<std::string, bool>> cases;  // (arch, deepseek2's older attn_kv_b form)
  for (const std::string& arch : synth::SupportedArchs()) cases.push_back({arch, false});
  cases.push_back({"deepseek2", true});
  for (const auto& [arch, mla_legacy] : cases) {
    SCOPED_TRACE(arch + (mla_legacy ? " (--mla-legacy)" : ""));
    synth::ModelSpec spec;
    spec.arch = arch;
    spec.mla_legacy = mla_legacy;
    spec.header_only = true;
    spec.tied_output = false;
    spec.rope_freqs =
        arch == "llama" || arch == "mixtral" || arch == "phi3" || arch == "mistral3" || arch == "granite";
    spec.qk_norm = true;  // glm4moe's optional q/k norms
    std::vector<uint8_t> bytes;
    auto f = Synth(spec, &bytes);
    ASSERT_NE(f, nullptr) << arch;

    const ArchTensorTable* table = FindArchTensorTable(arch == "mixtral" ? "llama" : arch);
    ASSERT_NE(table, nullptr) << arch;
    TensorDims d;
    d.n_expert = arch == "mixtral" || arch == "qwen2moe" ? 1 : 0;  // only the branch matters here
    if (arch == "deepseek2") {  // q LoRA, attn_k_b/attn_v_b (older form: attn_kv_b), leading dense layers
      d.n_lora_q = spec.q_lora_rank;
      d.mla = !mla_legacy;
      d.n_layer_dense_lead = spec.n_dense_lead;
    }
    const bool glm = arch == "glm4moe";  // gguf-synth's glm4moe: q/k/v biases and q/k norms, a NextN block
    if (glm) {
      d.n_layer_dense_lead = spec.n_dense_lead;
      d.n_layer_trunk = spec.n_layer;
    }
    const uint32_t n_blocks = spec.n_layer + (glm ? spec.n_nextn : 0);
    std::set<std::string> want;
    for (const ArchTensor& t : table->tensors) {
      if (!Applies(t, d) || (!glm && t.role == TensorRole::kBias && !t.required)) continue;
      if (glm && !t.required && t.role == TensorRole::kMatrix && t.scope == TensorScope::kLayer)
        continue;  // the NextN block's embed_tokens / shared_head_head, not written
      if (t.scope == TensorScope::kLayer) {
        for (uint32_t il = 0; il < n_blocks; ++il)
          if (Applies(t, d, static_cast<int>(il))) want.insert(TensorName(t, static_cast<int>(il)));
      } else {
        want.insert(t.name);
      }
    }
    std::set<std::string> got;
    for (const auto& t : f->tensors()) got.insert(t.name);
    EXPECT_EQ(got, want) << arch;
    ExpectLoaderConsumesAll(*f, arch, glm ? static_cast<int>(spec.n_layer) : -1);
  }
}

// Files with every tensor of a table, the optional ones included: every entry is read by the loader.
TEST(ArchTensors, LoaderReadsEveryOptionalTensor) {
  test::SynthParams p;
  std::map<std::string, std::set<std::string>> covered;  // per architecture
  struct Case {
    const char* arch;
    const char* what;
    uint32_t n_expert;
    bool longrope;
  };
  for (const Case& c : {Case{"llama", "llama dense", 0, false}, Case{"llama", "llama moe", 4, false},
                        Case{"llama", "llama longrope", 0, true}, Case{"mistral3", "mistral3", 0, false},
                        Case{"mistral3", "mistral3 longrope", 0, true}, Case{"smollm3", "smollm3", 0, false},
                        Case{"granite", "granite", 0, false}, Case{"granite", "granite longrope", 0, true},
                        Case{"qwen3moe", "qwen3moe", 4, false}, Case{"gpt-oss", "gpt-oss", 4, false}}) {
    const std::string a = c.arch;
    test::SynthGguf g(a);
    g.U32(a + ".context_length", p.n_ctx);
    g.U32(a + ".embedding_length", p.n_embd);
    g.U32(a + ".block_count", p.n_layer);
    g.U32(a + ".vocab_size", p.n_vocab);
    g.U32(a + ".feed_forward_length", p.n_ff);
    g.U32(a + ".attention.head_count", p.n_head);
    g.U32(a + ".attention.head_count_kv", p.n_head_kv);
    g.F32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    if (c.n_expert) {
      g.U32(a + ".expert_count", c.n_expert);
      g.U32(a + ".expert_used_count", 2);
    }
    if (c.longrope) g.Str(a + ".rope.scaling.type", "longrope");
    if (a == "granite") g.F32(a + ".logit_scale", 16.0f);  // required by llama_model_granite
    if (a == "gpt-oss") {                                  // required by llama_model_openai_moe
      g.U32(a + ".expert_feed_forward_length", p.n_ff / 2);
      g.U32(a + ".attention.sliding_window", 8);
    }
    TensorDims d = UniformHeadDims(p.n_embd, p.n_vocab, p.n_ff, p.n_head, p.n_head_kv, p.n_embd / p.n_head);
    d.n_expert = c.n_expert;
    d.n_ff_exp = c.n_expert ? p.n_ff / 2 : 0;  // qwen3moe: n_ff / expert_used_count without the width key
    d.longrope = c.longrope;
    TensorFileOptions all;
    all.rope_factors = all.other_optional = true;
    test::AddTableTensors(g, a, d, static_cast<int>(p.n_layer), all, GgmlType::F32);
    auto f = g.Parse();
    ExpectLoaderConsumesAll(*f, c.what);
    // every entry that applies is in the file
    for (const ArchTensor& t : FindArchTensorTable(a)->tensors) {
      if (!Applies(t, d)) continue;
      EXPECT_NE(f->FindTensor(TensorName(t, 0)), nullptr) << c.what << ": " << t.name;
      covered[a].insert(t.name);
    }
  }
  // the cases cover every entry of the llama, mistral3, smollm3, granite, qwen3moe and gpt-oss tables (the
  // other tables have no optional tensors but output.weight, the rope factors and deepseek2's
  // exp_probs_b.bias, which gguf-synth writes and GgufSynthWritesTheTableAndTheLoaderReadsIt covers)
  for (const auto& [arch, names] : covered)
    EXPECT_EQ(names.size(), FindArchTensorTable(arch)->tensors.size());
  for (const ArchTensorTable& table : ArchTensorTables()) {
    if (covered.count(table.arch) != 0) continue;
    for (const ArchTensor& t : table.tensors)
      EXPECT_TRUE(t.required || t.scope == TensorScope::kOutput || t.role == TensorRole::kRopeLong ||
                  t.role == TensorRole::kRopeShort ||
                  (std::string(table.arch) == "deepseek2" && std::string(t.name) == "exp_probs_b.bias") ||
                  // glm4moe's: gguf-synth writes the biases, q/k norms and shared_head_norm
                  // (GgufSynthWritesTheTableAndTheLoaderReadsIt); the NextN block's are skipped anyway
                  std::string(table.arch) == "glm4moe")
          << table.arch << ": " << t.name;
  }
  // phi3 with its LongRoPE factors
  auto phi3 = test::Phi3Model(p, /*rope_factors=*/true).Parse();
  ExpectLoaderConsumesAll(*phi3, "phi3 rope factors");
}

// A tensor the table describes but the file lacks is refused by the loader with the table's name,
// and one of the wrong shape with the table's shape.
TEST(ArchTensors, LoaderChecksTheTableShape) {
  test::SynthParams p;
  auto g = test::Qwen2Model(p);
  g.Replace("blk.1.attn_k.bias", {p.n_embd});
  auto f = g.Parse();
  auto m = BuildModelGraphs(*f, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "qwen2.gguf: tensor 'blk.1.attn_k.bias' has wrong shape; expected [32], got [64]");
}

}  // namespace
}  // namespace stowage::planner
