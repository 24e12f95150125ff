// mistral3 (Ministral 3, Mistral Small 3.1+ text models in GGUF): weights as llama.cpp 2026
// llama_model_mistral3::load_arch_tensors and the graph as llama_model_mistral3::graph: llama's
// layer (the shared attention block) with YaRN keys of its own (ReadHParams) and, when
// attention.temperature_scale is set, Q multiplied by the per-token temperature factor of the
// inp_attn_scale input (llama 4 temperature tuning) before the attention. Dense only: ReadHParams
// refuses experts.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadMistral3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "mistral3");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings when output.weight is absent
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    // create_tensor_qkv: q, k, v, then their optional biases; then the output projection
    l.attn_norm = t("attn_norm.weight", il);
    l.wq = t("attn_q.weight", il);
    l.wk = t("attn_k.weight", il);
    l.wv = t("attn_v.weight", il);
    LoadQkvBiases(t, l, il);
    l.wo = t("attn_output.weight", il);
    l.bo = t("attn_output.bias", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    if (hp.rope_scaling_type == 3) {
      l.rope_long = t("rope_factors_long.weight", il);
      l.rope_short = t("rope_factors_short.weight", il);
    } else {
      l.rope_freqs = t("rope_freqs.weight", il);
    }
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
    l.ffn_gate_b = t("ffn_gate.bias", il);
    l.ffn_down_b = t("ffn_down.bias", il);
    l.ffn_up_b = t("ffn_up.bias", il);
  }
  return wl.status();
}

Status BuildMistral3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k;
  const float kq_scale = hp.f_attention_scale == 0.f ? 1.f / std::sqrt(float(hk)) : hp.f_attention_scale;
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int attn_scale = hp.f_attn_temp_scale != 0.f ? BuildInpAttnScale(b) : -1;
  const int kq_mask = BuildInpKqMask(b, m, false);

  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    const LayerWeights& l = w.layers[il];
    int ffn_inp = -1;
    int cur =
        BuildLlamaAttentionBlock(b, m, l, il, inpL, inp_pos, kq_mask, rc, hk, kq_scale, &ffn_inp, attn_scale);
    cur = BuildFfn(b, cur, l.ffn_up, l.ffn_up_b, l.ffn_gate, l.ffn_gate_b, l.ffn_down, l.ffn_down_b,
                   FfnOp::kSilu, FfnGate::kPar, il);
    b.Name(cur, "ffn_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "ffn_out", il);
    b.Name(cur, "l_out", il);  // build_cvec is the identity without a control vector
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
