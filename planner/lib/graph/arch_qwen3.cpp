// qwen3 (dense): weights as llama.cpp's load_tensors (LLM_ARCH_QWEN3). Its graph (build_qwen3) is
// build_qwen2's without the q/k/v biases and with a per-head RMS norm of Q and K before the rope
// (attn_q_norm, attn_k_norm; eps attention.layer_norm_rms_epsilon): BuildQwen2Graph builds it, as
// BuildLlamaAttentionBlock applies the layer's q/k norms (BuildNormRopeHeads) and biases only when
// present.
#include "arch.h"

namespace stowage::planner {

Status LoadQwen3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "qwen3");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings (Qwen3-0.6B..4B)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadAttentionWeights(t, l, il);
    l.attn_k_norm = t("attn_k_norm.weight", il);
    l.attn_q_norm = t("attn_q_norm.weight", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
  }
  return wl.status();
}

}  // namespace stowage::planner
