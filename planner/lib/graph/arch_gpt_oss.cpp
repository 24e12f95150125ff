// gpt-oss (GGUF general.architecture "gpt-oss"; llama.cpp 2026 llama_model_openai_moe): weights in
// load_arch_tensors' order, and its graph: RMS attn_norm, q/k/v projections with optional biases,
// NEOX rope (YaRN as MakeRopeConfig; the sliding-window layers with rope.freq_base_swa, default
// the global base), attention over the interleaved-SWA cache (alternating layers, pattern period
// 2: the even layers slide) with one learned sink logit per head (attn_sinks: ggml_soft_max_add_sinks
// / ggml_flash_attn_ext_add_sinks) and kq_scale 1 / sqrt(n_rot), the output projection's bias,
// the residual, RMS post_attention_norm, and the mixture of experts of build_moe_ffn with a biased
// router, the top-k of the raw logits and the softmax over the chosen ones
// (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT), biased experts (ADD_ID) and the clamped SwiGLU
// (LLM_FFN_SWIGLU_OAI_MOE), then the residual. Unlike build_llama, the unused tokens are dropped
// after the last layer (cparams.embeddings_nextn_masked is false by default), not inside it.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadGptOssWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "gpt-oss");
  LoadEmbeddingsAndOutput(t, w);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = t("attn_norm.weight", il);
    l.attn_post_norm = t("post_attention_norm.weight", il);
    l.wq = t("attn_q.weight", il);
    l.wk = t("attn_k.weight", il);
    l.wv = t("attn_v.weight", il);
    LoadQkvBiases(t, l, il);
    l.wo = t("attn_output.weight", il);
    l.attn_sinks = t("attn_sinks.weight", il);
    l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
    l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
    l.ffn_down_exps = t("ffn_down_exps.weight", il);
    l.ffn_up_exps = t("ffn_up_exps.weight", il);
    l.bo = t("attn_output.bias", il);
    l.ffn_gate_inp_b = t("ffn_gate_inp.bias", il);
    l.ffn_gate_exps_b = t("ffn_gate_exps.bias", il);
    l.ffn_down_exps_b = t("ffn_down_exps.bias", il);
    l.ffn_up_exps_b = t("ffn_up_exps.bias", il);
  }
  return wl.status();
}

Status BuildGptOssGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const float eps = hp.f_norm_rms_eps;
  const int64_t n_rot = hp.n_rot;
  // llama_model::get_rope_freq_base / _scale: the SWA layers' train values, the others cparams'
  const RopeConfig rc = MakeRopeConfig(m), rc_swa = MakeSwaRopeConfig(m);
  MoeFfnOptions moe;
  moe.gating = MoeGating::kSoftmaxWeight;
  moe.swiglu_oai = true;
  moe.w_scale = hp.expert_weights_scale;
  moe.fused_glu = true;  // llama.cpp 2026's node order

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  int kq_mask = -1, kq_mask_swa = -1;
  BuildIswaMasks(b, m, &kq_mask, &kq_mask_swa);
  const int L = static_cast<int>(hp.n_layer);
  const int inp_out_ids = BuildInpOutIds(b);

  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    const bool swa = hp.is_swa(static_cast<uint32_t>(il));
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "attn_norm", il);
    int Q = -1, Kc = -1, V = -1;
    BuildQkv(b, l, cur, il, &Q, &Kc, &V);
    Q = BuildRopeHeads(b, Q, n_rot, hp.n_head, inp_pos, -1, swa ? rc_swa : rc, "Qcur", il);
    Kc = BuildRopeHeads(b, Kc, n_rot, hp.n_head_kv, inp_pos, -1, swa ? rc_swa : rc, "Kcur", il);
    cur = BuildKv(b, m, l.wo, l.bo, Kc, V, Q, swa ? kq_mask_swa : kq_mask, 1.0f / std::sqrt(float(n_rot)), il,
                  l.attn_sinks);
    b.Name(cur, "attn_out", il);
    const int ffn_inp = b.Add(cur, inpL);
    b.Name(ffn_inp, "ffn_inp", il);
    cur = BuildNorm(b, ffn_inp, l.attn_post_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "attn_post_norm", il);
    cur = BuildMoeFfn(b, cur, l, hp.n_expert, hp.n_expert_used, moe, il);
    b.Name(cur, "ffn_moe_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  inpL = b.GetRows(inpL, inp_out_ids);
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
