// deepseek2 (llama.cpp 2026 llama_model_deepseek2, absorbed MLA): the planned graph (MLA nodes, the
// one-head K cache without V, the leading dense layer, the routed experts with sigmoid gating, the
// expert-score bias and the weight scale, the shared experts), kq_scale with YaRN, and the bad input
// ReadDeepSeek2HParams refuses with one line naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "stowage/planner/model_graphs.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

using test::SynthGguf;

// A tiny deepseek2 file: 3 layers (the first dense), n_embd 64, 4 heads of 24 (16 nope + 8 rope),
// v 16, q LoRA 32 (0: attn_q), kv LoRA 32, 4 experts of 32 with 2 used, 1 shared, sigmoid gating,
// weights normalized and scaled by 2.5, the expert-score bias. `legacy`: the same model in the older
// form (files converted before the absorbed MLA): no key_length_mla / value_length_mla, every head
// cached (head_count_kv 4) with K heads of 16 + 8 and V heads of 16, one attn_kv_b [32, 4 * (16 +
// 16)] per layer instead of attn_k_b / attn_v_b.
SynthGguf DeepSeek2File(uint32_t q_lora = 32, uint32_t n_layer = 3, bool legacy = false) {
  SynthGguf g("deepseek2");
  const std::string a = "deepseek2.";
  g.U32(a + "context_length", 256);
  g.U32(a + "embedding_length", 64);
  g.U32(a + "block_count", n_layer);
  g.U32(a + "feed_forward_length", 96);
  g.U32(a + "attention.head_count", 4);
  g.U32(a + "attention.head_count_kv", legacy ? 4 : 1);
  g.U32(a + "attention.key_length", legacy ? 24 : 40);
  g.U32(a + "attention.value_length", legacy ? 16 : 32);
  if (!legacy) {
    g.U32(a + "attention.key_length_mla", 24);
    g.U32(a + "attention.value_length_mla", 16);
  }
  g.U32(a + "attention.q_lora_rank", q_lora);
  g.U32(a + "attention.kv_lora_rank", 32);
  g.U32(a + "rope.dimension_count", 8);
  g.F32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  g.U32(a + "vocab_size", 128);
  g.U32(a + "leading_dense_block_count", 1);
  g.U32(a + "expert_count", 4);
  g.U32(a + "expert_used_count", 2);
  g.U32(a + "expert_feed_forward_length", 32);
  g.U32(a + "expert_shared_count", 1);
  g.F32(a + "expert_weights_scale", 2.5f);
  g.Bool(a + "expert_weights_norm", true);
  g.U32(a + "expert_gating_func", 2);
  TensorDims d;
  d.n_embd = 64;
  d.n_vocab = 128;
  d.n_ff = 96;
  d.n_head = 4;
  d.n_head_kv = legacy ? 4 : 1;
  d.n_rot = 8;
  d.n_expert = 4;
  d.n_ff_exp = 32;
  d.n_ff_shexp = 32;
  d.n_lora_q = q_lora;
  d.n_lora_kv = 32;
  d.n_embd_head_k_mla = 24;
  d.n_embd_head_v_mla = 16;
  d.n_layer_dense_lead = 1;
  d.mla = !legacy;
  TensorFileOptions opts;
  opts.other_optional = true;  // exp_probs_b.bias
  test::AddTableTensors(g, "deepseek2", d, static_cast<int>(n_layer), opts, GgmlType::F32);
  return g;
}

Result<ModelGraphs> Build(SynthGguf& g, ContextConfig cfg = {}) {
  auto f = g.Parse();
  if (cfg.n_ctx == 0) cfg.n_ctx = 256;
  return BuildModelGraphs(*f, cfg);
}

bool HasNode(const Graph& g, GgmlOp op, const std::string& name) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [&](int n) { return g.tensors[n].op == op && g.tensors[n].name == name; });
}

std::string Error(SynthGguf& g) {
  auto m = Build(g);
  return m.ok() ? "(built)" : m.status().message();
}

// llama.cpp 2026 build_moe_ffn's group-limited top-k (expert_group_count > 1): per MoE layer the
// selection probabilities [2 per group, 2 groups, n_tokens] masked to the best group (FILL -INFINITY,
// SET_ROWS of the kept group's rows) before the experts' top-k; planned without a warning. Without
// groups none of it.
TEST(DeepSeek2, GroupLimitedTopK) {
  SynthGguf g = DeepSeek2File();
  g.U32("deepseek2.expert_group_count", 2);
  g.U32("deepseek2.expert_group_used_count", 1);
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->hp.warnings.empty());
  const Graph& pp = m->pp;
  for (const char* l : {"-1", "-2"}) {
    const std::string layer(l);
    EXPECT_TRUE(HasNode(pp, GgmlOp::VIEW, "ffn_moe_group_topk" + layer)) << l;
    EXPECT_TRUE(HasNode(pp, GgmlOp::RESHAPE, "ffn_moe_probs_masked" + layer)) << l;
  }
  const auto count = [&](const Graph& gr, GgmlOp op) {
    return std::count_if(gr.nodes.begin(), gr.nodes.end(), [&](int n) { return gr.tensors[n].op == op; });
  };
  EXPECT_EQ(count(pp, GgmlOp::FILL), 2);  // one per MoE layer
  // the kept rows into the -INFINITY fill, and each of the 3 layers' K rows into its cache (cpy_k)
  EXPECT_EQ(count(pp, GgmlOp::SET_ROWS), 2 + 3);
  EXPECT_EQ(count(pp, GgmlOp::ARGSORT), 6);  // each group's top 2, the groups' top, the experts' top-k
  for (int n : pp.nodes) {
    const Tensor& t = pp.tensors[n];
    if (t.op == GgmlOp::FILL) {
      ASSERT_EQ(t.fparams.size(), 1u);
      EXPECT_EQ(t.fparams[0], -INFINITY);
      EXPECT_EQ(m->pp.WorstCase().Eval(t.ne[0]), 2);  // experts per group
      EXPECT_EQ(m->pp.WorstCase().Eval(t.ne[1]), 2);  // groups
    }
    // the experts' top-k reads the masked probabilities
    if (t.op == GgmlOp::ARGSORT && t.name.rfind("ffn_moe_argsort", 0) == 0)
      EXPECT_EQ(pp.tensors[t.srcs[0]].name.rfind("ffn_moe_probs_masked", 0), 0u) << t.name;
  }
  SynthGguf plain = DeepSeek2File();
  auto p = Build(plain);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(count(p->pp, GgmlOp::FILL), 0);
  EXPECT_EQ(count(p->pp, GgmlOp::ARGSORT), 2);
}

TEST(DeepSeek2, CacheIsOneKRowPerTokenWithoutV) {
  SynthGguf g = DeepSeek2File();
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (int il = 0; il < 3; ++il) {
    const int k = m->FindGlobal("cache_k_l" + std::to_string(il));
    ASSERT_GE(k, 0);
    EXPECT_EQ(m->globals[k].ne[0], 40 * 256);  // (kv_lora_rank 32 + n_rot 8) x 256 cells
    EXPECT_EQ(m->globals[k].nbytes, 40u * 256u * 2u);
    EXPECT_LT(m->FindGlobal("cache_v_l" + std::to_string(il)), 0);
  }
}

// llama.cpp 2026 llama_kv_cache::cpy_k: each layer's K rows (Kcur, kv_lora_rank + n_rot wide) are
// SET_ROWS'd into the rows of its cache at the "attn_inp_k_idxs" cells, with and without flash
// attention; no CPY into a view of the cache (Feb 2025's store) and no V index input (no V cache).
TEST(DeepSeek2, KRowsSetIntoTheCacheAtTheIndexInput) {
  for (bool fa : {false, true}) {
    SynthGguf g = DeepSeek2File();
    ContextConfig cfg;
    cfg.flash_attn = fa;
    auto m = Build(g, cfg);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Graph& pp = m->pp;
    const auto input = [&](const std::string& name) {
      for (int l : pp.leafs)
        if (pp.tensors[l].kind == TensorKind::kInput && pp.tensors[l].name == name) return l;
      return -1;
    };
    const int idxs = input("attn_inp_k_idxs");
    ASSERT_GE(idxs, 0);
    EXPECT_EQ(input("attn_inp_v_idxs"), -1);
    int stores = 0;
    for (int n : pp.nodes) {
      const Tensor& t = pp.tensors[n];
      EXPECT_NE(t.op, GgmlOp::CPY) << t.name;
      if (t.op != GgmlOp::SET_ROWS || t.srcs[1] != idxs) continue;
      const Tensor& rows = pp.tensors[t.srcs[2]];  // the cache as rows (ggml_set_rows' a)
      ASSERT_EQ(rows.view_src >= 0 ? pp.tensors[rows.view_src].global : -1,
                m->FindGlobal("cache_k_l" + std::to_string(stores)));
      EXPECT_EQ(pp.WorstCase().Eval(rows.ne[0]), 40);  // kv_lora_rank 32 + n_rot 8
      EXPECT_EQ(pp.WorstCase().Eval(rows.ne[1]), 256);
      ++stores;
    }
    EXPECT_EQ(stores, 3) << (fa ? "with" : "without") << " flash attention";
  }
}

TEST(DeepSeek2, GraphHasMlaDenseLeadAndRoutedExperts) {
  SynthGguf g = DeepSeek2File();
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& pp = m->pp;
  // q LoRA, the absorbed q_nope, the concatenated Q and K, the decompression by attn_v_b
  EXPECT_TRUE(HasNode(pp, GgmlOp::MUL_MAT, "q_nope_absorbed-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::CONCAT, "Qcur-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::CONCAT, "Kcur-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::ROPE, "k_pe-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::ROPE, "q_pe-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::CONT, "v_cont-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::MUL_MAT, "kqv_mla-1"));
  // layer 0 dense, layers 1 and 2 routed: sigmoid, bias for the selection, norm and scale
  EXPECT_TRUE(HasNode(pp, GgmlOp::MUL_MAT, "ffn_gate-0"));
  EXPECT_FALSE(HasNode(pp, GgmlOp::MUL_MAT, "ffn_moe_logits-0"));
  for (const char* l : {"-1", "-2"}) {
    EXPECT_TRUE(HasNode(pp, GgmlOp::SIGMOID, std::string("ffn_moe_probs") + l)) << l;
    EXPECT_TRUE(HasNode(pp, GgmlOp::ADD, std::string("ffn_moe_probs_biased") + l)) << l;
    EXPECT_TRUE(HasNode(pp, GgmlOp::DIV, std::string("ffn_moe_weights_norm") + l)) << l;
    EXPECT_TRUE(HasNode(pp, GgmlOp::SCALE, std::string("ffn_moe_weights_scaled") + l)) << l;
    EXPECT_TRUE(HasNode(pp, GgmlOp::ADD, std::string("ffn_out") + l)) << l;  // experts + shared experts
  }
  // flash attention over the same cache: FLASH_ATTN_EXT then attn_v_b
  ContextConfig fa;
  fa.flash_attn = true;
  SynthGguf g2 = DeepSeek2File();
  auto f = Build(g2, fa);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(f->cfg.flash_attn);
  EXPECT_TRUE(HasNode(f->pp, GgmlOp::MUL_MAT, "fattn_mla-1"));
  // without q LoRA: attn_q, no attn_q_a
  SynthGguf g3 = DeepSeek2File(/*q_lora=*/0);
  auto n = Build(g3);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_GE(n->FindGlobal("blk.0.attn_q.weight"), 0);
  EXPECT_LT(n->FindGlobal("blk.0.attn_q_a.weight"), 0);
}

// kq_scale = mscale^2 / sqrt(key_length_mla): 1/sqrt(24) without YaRN; with YaRN factor 4 and
// yarn_log_multiplier 0.1 (1 after the converter's 0.1 is cancelled) mscale = 1 + 0.1 ln 4.
TEST(DeepSeek2, KqScale) {
  for (const bool yarn : {false, true}) {
    SynthGguf g = DeepSeek2File();
    if (yarn) {
      g.Str("deepseek2.rope.scaling.type", "yarn");
      g.F32("deepseek2.rope.scaling.factor", 4.0f);
      g.U32("deepseek2.rope.scaling.original_context_length", 64);
      g.F32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
    }
    auto m = Build(g);
    ASSERT_TRUE(m.ok()) << m.status().message();
    float scale = -1.f;
    for (int n : m->pp.nodes) {
      const Tensor& t = m->pp.tensors[n];
      if (t.op == GgmlOp::SOFT_MAX && t.name == "kq_soft_max-0")
        scale = t.fparams[0];  // SOFT_MAX: scale, max_bias
    }
    const float mscale = yarn ? 1.0f + 0.1f * std::log(4.0f) : 1.0f;
    EXPECT_NEAR(scale, mscale * mscale / std::sqrt(24.0f), 1e-6f) << yarn;
  }
}

TEST(DeepSeek2, BadInputIsOneLineNamingTheKey) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* want;
  };
  for (const Case& c : {
           Case{"deepseek2.attention.kv_lora_rank", 0,
                "key 'deepseek2.attention.kv_lora_rank': expected a positive rank (the compressed KV width), "
                "found 0"},
           Case{"deepseek2.leading_dense_block_count", 4,
                "key 'deepseek2.leading_dense_block_count': expected at most deepseek2.block_count 3, found "
                "4"},
           Case{"deepseek2.attention.head_count_kv", 4,
                "key 'deepseek2.attention.head_count_kv': expected 1 (MLA caches one compressed KV head), "
                "found 4"},
           Case{"deepseek2.attention.key_length", 32,
                "key 'deepseek2.attention.key_length': expected 40 (kv_lora_rank 32 + rope.dimension_count "
                "8), found 32"},
           Case{"deepseek2.expert_gating_func", 3,
                "key 'deepseek2.expert_gating_func': expected 1 (softmax) or 2 (sigmoid), found 3"},
       }) {
    SynthGguf g = DeepSeek2File();
    g.Set(c.key, GgufMetaValue::U32(c.value));
    const std::string e = Error(g);
    EXPECT_NE(e.find(c.want), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // expert groups: more used than there are, or a count that does not divide the experts, refused
  {
    SynthGguf g = DeepSeek2File();
    g.U32("deepseek2.expert_group_count", 2);
    g.U32("deepseek2.expert_group_used_count", 3);
    EXPECT_NE(Error(g).find("key 'deepseek2.expert_group_used_count': expected 1..1 (fewer than "
                            "deepseek2.expert_group_count 2), found 3"),
              std::string::npos)
        << Error(g);
  }
  {
    SynthGguf g = DeepSeek2File();
    g.U32("deepseek2.expert_group_count", 3);
    g.U32("deepseek2.expert_group_used_count", 1);
    EXPECT_NE(
        Error(g).find("key 'deepseek2.expert_group_count': expected a divisor of deepseek2.expert_count "
                      "4, found 3"),
        std::string::npos)
        << Error(g);
  }
  // only one of the MLA head sizes; neither (the pre-absorption attn_kv_b form) is not supported
  {
    SynthGguf g = DeepSeek2File();
    g.DropKey("deepseek2.attention.value_length_mla");
    EXPECT_NE(Error(g).find("key 'deepseek2.attention.value_length_mla'"), std::string::npos) << Error(g);
    g.DropKey("deepseek2.attention.key_length_mla");  // the keys of the older form, the absorbed tensors
    EXPECT_NE(Error(g).find("tensor 'blk.0.attn_k_b.weight': expected attn_kv_b "
                            "(deepseek2.attention.key_length_mla / value_length_mla are absent: the older "
                            "form), found the absorbed form's attn_k_b"),
              std::string::npos)
        << Error(g);
  }
  // q_lora_rank is required but for the lite models (27 layers)
  {
    SynthGguf g = DeepSeek2File();
    g.DropKey("deepseek2.attention.q_lora_rank");
    EXPECT_NE(Error(g).find("deepseek2.attention.q_lora_rank"), std::string::npos) << Error(g);
  }
}

// The older form (llama.cpp 2026 llama_model_deepseek2::graph without is_mla) runs as MHA: a K and
// a V cache of every head (K heads of qk_nope 16 + n_rot 8, V heads of 16) as llama_kv_cache sizes
// them, attn_kv_b decompressing kv_cmpr into K's non-rotated part and V, Q roped over its last 8
// dims (ROPE n_offs 16), the k_pe head repeated over the 4 heads and joined to K; kq_scale
// 1/sqrt(24).
TEST(DeepSeek2Legacy, KAndVCachesOfEveryHead) {
  SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->hp.is_mla());
  for (int il = 0; il < 3; ++il) {
    const int k = m->FindGlobal("cache_k_l" + std::to_string(il));
    const int v = m->FindGlobal("cache_v_l" + std::to_string(il));
    ASSERT_GE(k, 0);
    ASSERT_GE(v, 0);
    EXPECT_EQ(m->globals[k].nbytes, 24u * 4u * 256u * 2u);  // F16
    EXPECT_EQ(m->globals[v].nbytes, 16u * 4u * 256u * 2u);
  }
  EXPECT_GE(m->FindGlobal("blk.0.attn_kv_b.weight"), 0);
  EXPECT_LT(m->FindGlobal("blk.0.attn_k_b.weight"), 0);
}

TEST(DeepSeek2Legacy, GraphIsMhaWithARotatedTail) {
  SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& pp = m->pp;
  EXPECT_TRUE(HasNode(pp, GgmlOp::MUL_MAT, "kv-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::CONT, "Vcur_cont-1"));
  EXPECT_TRUE(HasNode(pp, GgmlOp::CONCAT, "Kcur-1"));
  EXPECT_FALSE(HasNode(pp, GgmlOp::MUL_MAT, "q_nope_absorbed-1"));
  int qcur = -1, kcur = -1;
  for (int n : pp.nodes) {
    if (pp.tensors[n].name == "Qcur-1") qcur = n;
    if (pp.tensors[n].name == "Kcur-1") kcur = n;
  }
  ASSERT_GE(qcur, 0);
  ASSERT_GE(kcur, 0);
  // ROPE of the whole query heads [24, 4, n_tokens] with n_offs 16 (its fourth integer parameter)
  const Tensor& q = pp.tensors[qcur];
  EXPECT_EQ(q.op, GgmlOp::ROPE);
  ASSERT_EQ(q.iparams.size(), 4u);
  EXPECT_EQ(q.iparams[0], 8);
  EXPECT_EQ(q.iparams[3], 16);
  EXPECT_EQ(q.ne[0], DimExpr::Const(24));
  // K = CONCAT(k_nope view, REPEAT(roped k_pe [8, 1, n_tokens]) [8, 4, n_tokens])
  const Tensor& k = pp.tensors[kcur];
  ASSERT_EQ(k.srcs.size(), 2u);
  const Tensor& rep = pp.tensors[k.srcs[1]];
  EXPECT_EQ(rep.op, GgmlOp::REPEAT);
  EXPECT_EQ(rep.ne[1], DimExpr::Const(4));
  EXPECT_EQ(pp.tensors[rep.srcs[0]].name, "k_pe-1");
  EXPECT_EQ(pp.tensors[k.srcs[0]].name, "k_nope_view-1");
  float scale = -1.f;
  for (int n : pp.nodes)
    if (pp.tensors[n].op == GgmlOp::SOFT_MAX && pp.tensors[n].name == "kq_soft_max_ext-0")
      scale = pp.tensors[n].fparams[0];
  EXPECT_NEAR(scale, 1.0f / std::sqrt(24.0f), 1e-6f);
}

// One attention form per file: keys and tensors of the older form or of the absorbed one; a layer
// with both or neither, and heads the older form cannot cache, are refused in one line naming the
// tensor or key.
TEST(DeepSeek2Legacy, BadInputIsOneLineNamingTheTensorOrKey) {
  auto expect = [](SynthGguf& g, const std::string& want) {
    const std::string e = Error(g);
    EXPECT_NE(e.find(want), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  {  // both forms in one layer
    SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
    g.Tensor("blk.1.attn_k_b.weight", {16, 32, 4});
    expect(g,
           "tensor 'blk.1.attn_kv_b.weight': expected one attention form per layer: attn_kv_b (the older "
           "form) or attn_k_b / attn_v_b (the absorbed one), found both (blk.1.attn_k_b.weight too)");
  }
  {  // neither
    SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
    g.Drop("blk.2.attn_kv_b.weight");
    expect(g,
           "tensor 'blk.2.attn_kv_b.weight': expected attn_kv_b (the older form) or attn_k_b and attn_v_b "
           "(with deepseek2.attention.key_length_mla / value_length_mla), found neither");
  }
  {  // the older form's tensor in a file with the MLA keys
    SynthGguf g = DeepSeek2File();
    g.Drop("blk.0.attn_k_b.weight");
    g.Drop("blk.0.attn_v_b.weight");
    g.Tensor("blk.0.attn_kv_b.weight", {32, 4 * (16 + 16)});
    expect(g,
           "tensor 'blk.0.attn_kv_b.weight': expected attn_k_b / attn_v_b "
           "(deepseek2.attention.key_length_mla / value_length_mla are set: the absorbed form), found the "
           "older form's attn_kv_b");
  }
  {  // fewer cached heads than query heads
    SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
    g.Set("deepseek2.attention.head_count_kv", GgufMetaValue::U32(1));
    expect(g,
           "key 'deepseek2.attention.head_count_kv': expected 4 (attention.head_count: the older form "
           "caches every head), found 1");
  }
  {  // no non-rotated part
    SynthGguf g = DeepSeek2File(32, 3, /*legacy=*/true);
    g.Set("deepseek2.attention.key_length", GgufMetaValue::U32(8));
    expect(g, "key 'deepseek2.attention.key_length': expected more than rope.dimension_count 8");
  }
}

}  // namespace
}  // namespace stowage::planner
