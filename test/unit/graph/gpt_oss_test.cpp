// gpt-oss (llama.cpp 2026 llama_model_openai_moe): the planned graph (attention sinks on the soft_max
// and on flash attention, alternating sliding-window layers with their masks, caches and rope
// bases, the biased router, the softmax over the chosen experts, the experts' biases as ADD_ID, the
// clamped SwiGLU, the unused tokens dropped after the last layer) and the bad input refused with
// one line naming the tensor or key.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/ggml_op_params.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

using test::SynthGguf;

// A tiny gpt-oss file: 2 layers (0 sliding-window, 1 global), n_embd 64, 4 heads of 16, 2 KV heads,
// 4 experts of 32 with 2 used, window 8, rope.freq_base_swa 5000 against the global 10000.
SynthGguf GptOssFile() {
  SynthGguf g("gpt-oss");
  const std::string a = "gpt-oss.";
  g.U32(a + "context_length", 256);
  g.U32(a + "embedding_length", 64);
  g.U32(a + "block_count", 2);
  g.U32(a + "feed_forward_length", 64);
  g.U32(a + "attention.head_count", 4);
  g.U32(a + "attention.head_count_kv", 2);
  g.F32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  g.U32(a + "vocab_size", 128);
  g.U32(a + "expert_count", 4);
  g.U32(a + "expert_used_count", 2);
  g.U32(a + "expert_feed_forward_length", 32);
  g.U32(a + "attention.sliding_window", 8);
  g.F32(a + "rope.freq_base_swa", 5000.f);
  TensorDims d = UniformHeadDims(64, 128, 64, 4, 2, 16);
  d.n_expert = 4;
  d.n_ff_exp = 32;
  test::AddTableTensors(g, "gpt-oss", d, 2, TensorFileOptions{}, GgmlType::F32);
  return g;
}

Result<ModelGraphs> Build(SynthGguf& g, bool flash_attn = false) {
  auto f = g.Parse();
  ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.flash_attn = flash_attn;
  return BuildModelGraphs(*f, cfg);
}

// The node of `op` named `name`, or -1.
int Node(const Graph& g, GgmlOp op, const std::string& name) {
  for (int n : g.nodes)
    if (g.tensors[n].op == op && g.tensors[n].name == name) return n;
  return -1;
}

TEST(GptOss, AttentionWithSinksOverTheInterleavedCaches) {
  SynthGguf g = GptOssFile();
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->hp.is_swa(0));
  EXPECT_FALSE(m->hp.is_swa(1));
  const Graph& pp = m->pp;
  for (int il : {0, 1}) {
    const int sm = Node(pp, GgmlOp::SOFT_MAX, "kq_soft_max_ext-" + std::to_string(il));
    ASSERT_GE(sm, 0) << il;
    const auto& srcs = pp.tensors[sm].srcs;
    ASSERT_EQ(srcs.size(), 3u) << il;  // kq, mask, sinks
    EXPECT_EQ(pp.tensors[srcs[1]].name, il == 0 ? "KQ_mask_swa" : "KQ_mask") << il;
    EXPECT_EQ(pp.tensors[srcs[2]].global, m->FindGlobal("blk." + std::to_string(il) + ".attn_sinks.weight"));
    auto sp = DecodeSoftMax(OpParamsRef(pp.tensors[sm].iparams, pp.tensors[sm].fparams));
    ASSERT_TRUE(sp.ok());
    EXPECT_FLOAT_EQ(sp->scale, 0.25f);  // 1 / sqrt(n_rot 16)
    // the SWA layer ropes with rope.freq_base_swa
    const int q = Node(pp, GgmlOp::ROPE, "Qcur-" + std::to_string(il));
    ASSERT_GE(q, 0);
    auto rp = DecodeRope(OpParamsRef(pp.tensors[q].iparams, pp.tensors[q].fparams));
    ASSERT_TRUE(rp.ok());
    EXPECT_EQ(rp->freq_base, il == 0 ? 5000.f : 10000.f) << il;
    EXPECT_EQ(rp->mode, 2);  // NEOX
  }
  // the SWA cache (layer 0) and the base cache (layer 1): 256 cells each at this n_ctx
  EXPECT_EQ(m->cfg.n_ctx_swa, 256u);
  // flash attention: the sinks are FLASH_ATTN_EXT's fifth source
  SynthGguf g2 = GptOssFile();
  auto f = Build(g2, /*flash_attn=*/true);
  ASSERT_TRUE(f.ok()) << f.status().message();
  int n_fa = 0;
  for (int n : f->pp.nodes) {
    const Tensor& t = f->pp.tensors[n];
    if (t.op != GgmlOp::FLASH_ATTN_EXT) continue;
    ASSERT_EQ(t.srcs.size(), 5u);
    EXPECT_EQ(f->pp.tensors[t.srcs[4]].global,
              f->FindGlobal("blk." + std::to_string(n_fa) + ".attn_sinks.weight"));
    ++n_fa;
  }
  EXPECT_EQ(n_fa, 2);
}

TEST(GptOss, BiasedExpertsWithSoftmaxWeightsAndTheClampedSwiGlu) {
  SynthGguf g = GptOssFile();
  auto m = Build(g);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& pp = m->pp;
  for (const std::string l : {"-0", "-1"}) {
    // the router's bias, added to the logits, which are also the selection's scores (no softmax)
    const int logits = Node(pp, GgmlOp::ADD, "ffn_moe_probs" + l);
    ASSERT_GE(logits, 0) << l;
    EXPECT_EQ(pp.tensors[pp.tensors[logits].srcs[0]].name, "ffn_moe_logits" + l);
    // the weights: a softmax over the chosen experts' logits
    const int w = Node(pp, GgmlOp::RESHAPE, "ffn_moe_weights_softmax" + l);
    ASSERT_GE(w, 0) << l;
    EXPECT_EQ(pp.tensors[pp.tensors[w].srcs[0]].op, GgmlOp::SOFT_MAX);
    // the experts' biases, one row per chosen expert
    for (const char* b : {"ffn_moe_up_biased", "ffn_moe_gate_biased", "ffn_moe_down_biased"}) {
      const int n = Node(pp, GgmlOp::ADD_ID, b + l);
      ASSERT_GE(n, 0) << b << l;
      EXPECT_EQ(pp.tensors[pp.tensors[n].srcs[2]].name, "ffn_moe_topk" + l);
    }
    const int act = Node(pp, GgmlOp::SWIGLU_OAI, "ffn_moe_swiglu_oai" + l);
    ASSERT_GE(act, 0) << l;
    auto p = DecodeSwiGluOai(OpParamsRef(pp.tensors[act].iparams, pp.tensors[act].fparams));
    ASSERT_TRUE(p.ok());
    EXPECT_FLOAT_EQ(p->alpha, 1.702f);
    EXPECT_FLOAT_EQ(p->limit, 7.f);
  }
  // the unused tokens are dropped after the last layer: result_norm reads GET_ROWS(l_out-1)
  int rows = -1;
  for (int n : pp.nodes)
    if (pp.tensors[n].op == GgmlOp::GET_ROWS && pp.tensors[pp.tensors[n].srcs[0]].name == "l_out-1") rows = n;
  EXPECT_GE(rows, 0);
}

TEST(GptOss, BadInputIsAOneLineError) {
  struct Bad {
    void (*edit)(SynthGguf&);
    const char* message;
  };
  const Bad cases[] = {
      {[](SynthGguf& g) { g.Replace("blk.1.attn_sinks.weight", {8}); },
       "gpt-oss.gguf: tensor 'blk.1.attn_sinks.weight' has wrong shape; expected [4], got [8]"},
      {[](SynthGguf& g) {
         g.DropKey("gpt-oss.expert_count");
         g.DropKey("gpt-oss.expert_used_count");
       },
       "gpt-oss.gguf: key 'gpt-oss.expert_count': expected a positive expert count (gpt-oss routes every "
       "layer "
       "to experts), found 0 or absent"},
      {[](SynthGguf& g) { g.DropKey("gpt-oss.expert_feed_forward_length"); },
       "gpt-oss.gguf: missing key 'gpt-oss.expert_feed_forward_length'"},
      {[](SynthGguf& g) { g.DropKey("gpt-oss.attention.sliding_window"); },
       "gpt-oss.gguf: missing key 'gpt-oss.attention.sliding_window'"},
  };
  for (const Bad& c : cases) {
    SynthGguf g = GptOssFile();
    c.edit(g);
    auto m = Build(g);
    ASSERT_FALSE(m.ok()) << c.message;
    EXPECT_EQ(m.status().message(), c.message);
  }
}

}  // namespace
}  // namespace stowage::planner
