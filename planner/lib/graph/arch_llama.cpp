// llama (and mixtral, which is llama with merged expert tensors): weights as llama.cpp's
// load_tensors (LLM_ARCH_LLAMA) and the graph as build_llama (llama.cpp Feb 2025), or with
// --llamacpp-compat 2026 (ModelGraphs::llama2026) with llama.cpp 2026's inputs, KV store and fused
// SWIGLU.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "llama");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings: the output reuses token_embd
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadAttentionWeights(t, l, il);
    LoadQkvBiases(t, l, il);  // optional
    l.bo = t("attn_output.bias", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    LoadRopeFactors(t, hp, l, il);
    if (hp.n_expert == 0) {
      l.ffn_gate = t("ffn_gate.weight", il);
      l.ffn_down = t("ffn_down.weight", il);
      l.ffn_up = t("ffn_up.weight", il);
      l.ffn_gate_b = t("ffn_gate.bias", il);  // optional MLP biases
      l.ffn_down_b = t("ffn_down.bias", il);
      l.ffn_up_b = t("ffn_up.bias", il);
    } else {
      l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
      l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
      l.ffn_down_exps = t("ffn_down_exps.weight", il);
      l.ffn_up_exps = t("ffn_up_exps.weight", il);
    }
  }
  return wl.status();
}

Status BuildLlamaStyleGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w,
                            const LlamaGraphOptions& o) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k;
  const float kq_scale = hp.f_attention_scale == 0.f ? 1.f / std::sqrt(float(hk)) : hp.f_attention_scale;
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  if (hp.f_embedding_scale != 0.f) inpL = b.Scale(inpL, hp.f_embedding_scale);  // granite
  const int inp_pos = o.rope ? BuildInpPos(b) : -1;
  const int attn_scale = o.attn_temperature ? BuildInpAttnScale(b) : -1;
  const int kq_mask = BuildInpKqMask(b, m, false);

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    const bool use_rope = o.rope && (o.no_rope_layer_step == 0 || (il + 1) % o.no_rope_layer_step != 0);
    int ffn_inp = -1;
    int cur = BuildLlamaAttentionBlock(b, m, l, il, inpL, use_rope ? inp_pos : -1, kq_mask, rc, hk, kq_scale,
                                       &ffn_inp, attn_scale);
    if (l.ffn_gate_inp < 0) {
      cur = BuildFfn(b, cur, l.ffn_up, l.ffn_up_b, l.ffn_gate, l.ffn_gate_b, l.ffn_down, l.ffn_down_b,
                     m.llama2026 ? FfnOp::kSiluGlu : FfnOp::kSilu, FfnGate::kPar, il);
      b.Name(cur, "ffn_out", il);
    } else {  // MoE branch (mixtral): softmax gating, normalized top-k weights
      MoeFfnOptions o;
      o.norm_w = true;
      o.fused_glu = m.llama2026;  // llama.cpp 2026 build_moe_ffn's form
      cur = BuildMoeFfn(b, cur, l, hp.n_expert, hp.n_expert_used, o, il);
      b.Name(cur, "ffn_moe_out", il);
    }
    if (hp.f_residual_scale != 0.f) cur = b.Scale(cur, hp.f_residual_scale);  // granite
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "ffn_out", il);
    b.Name(cur, "l_out", il);  // lctx.cvec.apply_to is the identity without a control vector
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

Status BuildLlamaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  return BuildLlamaStyleGraph(b, m, w, LlamaGraphOptions{});
}

}  // namespace stowage::planner
