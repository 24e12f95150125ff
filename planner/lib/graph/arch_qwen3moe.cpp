// qwen3moe (llama.cpp 2026 llama_model_qwen3moe): qwen3's attention (q/k/v of create_tensor_qkv with
// optional biases, a per-head RMS norm of Q and K before the NEOX rope) and in every layer a routed
// mixture of experts without a shared expert: softmax gating, top expert_used_count of
// expert_count experts, their weights normalized by their sum, experts expert_feed_forward_length
// wide (else feed_forward_length / expert_used_count), the gate and up products as one SWIGLU.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadQwen3MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "qwen3moe");  // expert width: DimsOf (n_ff_exp)
  LoadEmbeddingsAndOutput(t, w);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadProjectionQkv(t, l, il);
    l.attn_k_norm = t("attn_k_norm.weight", il);
    l.attn_q_norm = t("attn_q_norm.weight", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
    l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
    l.ffn_down_exps = t("ffn_down_exps.weight", il);
    l.ffn_up_exps = t("ffn_up_exps.weight", il);
  }
  return wl.status();
}

// llama_model_qwen3moe::graph: BuildAttentionFfnLayers (qwen3's attention block with q/k norms)
// with the experts ("ffn_moe_out") added to the residual ("l_out").
Status BuildQwen3MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  MoeFfnOptions moe;
  moe.norm_w = true;
  moe.fused_glu = true;
  return BuildAttentionFfnLayers(b, m, w, [&](const LayerWeights& l, int cur, int ffn_inp, int il) {
    cur = BuildMoeFfn(b, cur, l, hp.n_expert, hp.n_expert_used, moe, il);
    b.Name(cur, "ffn_moe_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    return cur;
  });
}

}  // namespace stowage::planner
