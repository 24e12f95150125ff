// gemma2 and gemma3 (text model): weights as llama.cpp's (2026) llama_model_gemma2 /
// llama_model_gemma3::load_arch_tensors and one graph for both as their graph constructors build
// it: the embeddings scaled by sqrt(n_embd) ("inp_scaled"), NEOX rope with the SWA layers' own
// base and scale (rope.freq_base_swa), gemma3's per-head RMS norms of Q and K before the rope,
// Q scaled by f_attention_scale (kq_scale 1), RMS norms after the attention and after the FFN,
// the fused GEGLU FFN (build_ffn LLM_FFN_GELU, LLM_FFN_PAR), attention soft-capping (gemma2:
// BuildKv) and the final logit soft-cap (BuildOutput).
// Interleaved sliding-window attention (llama_kv_cache_iswa): the layers with hp.is_swa(il) read the
// KQ_mask_swa input, the others KQ_mask; BuildKv keeps a SWA layer's K/V in the SWA cache
// (UsesSwaCache, model_graphs.h), the others' in the base cache.
// As for gemma, llama.cpp's converter adds the 1 of Gemma's (1 + weight) RMS norm to every
// "*norm.weight", so every norm is a plain MUL.
#include <cmath>

#include "arch.h"

namespace stowage::planner {
namespace {

// The one loader of both: gemma3 asks for its q/k norms (the table's order is the loader's).
Status LoadGemma2Or3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w, const char* arch) {
  TableLoader t(wl, hp, arch);
  const bool gemma3 = hp.arch == "gemma3";
  LoadEmbeddingsAndOutput(t, w);  // gemma2: token_embd; gemma3: output.weight, else token_embd
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadAttentionWeights(t, l, il);
    l.attn_post_norm = t("post_attention_norm.weight", il);
    if (gemma3) {
      l.attn_k_norm = t("attn_k_norm.weight", il);
      l.attn_q_norm = t("attn_q_norm.weight", il);
    }
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_post_norm = t("post_ffw_norm.weight", il);
  }
  return wl.status();
}

}  // namespace

Status LoadGemma2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  return LoadGemma2Or3Weights(wl, hp, w, "gemma2");
}

Status LoadGemma3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  return LoadGemma2Or3Weights(wl, hp, w, "gemma3");
}

Status BuildGemma2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k;
  const float eps = hp.f_norm_rms_eps;
  // llama_model::get_rope_freq_base / _scale: the SWA layers' train values, the others cparams'
  const RopeConfig rc = MakeRopeConfig(m), rc_swa = MakeSwaRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  inpL = b.Scale(inpL, std::sqrt(float(hp.n_embd)));
  b.Name(inpL, "inp_scaled", -1);
  const int inp_pos = BuildInpPos(b);
  int kq_mask = -1, kq_mask_swa = -1;
  BuildIswaMasks(b, m, &kq_mask, &kq_mask_swa);
  const int L = static_cast<int>(hp.n_layer);

  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    const bool swa = hp.is_swa(static_cast<uint32_t>(il));
    const RopeConfig& rcl = swa ? rc_swa : rc;
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "attn_norm", il);
    int Q = -1, Kc = -1, V = -1;
    BuildQkv(b, l, cur, il, &Q, &Kc, &V);
    Q = BuildNormRopeHeads(b, Q, hk, hp.n_head, l.attn_q_norm, eps, inp_pos, -1, rcl, "Qcur", il);
    Kc = BuildNormRopeHeads(b, Kc, hk, hp.n_head_kv, l.attn_k_norm, eps, inp_pos, -1, rcl, "Kcur", il);
    Q = b.Scale(Q, hp.f_attention_scale);
    b.Name(Q, "Qcur_scaled", il);
    cur = BuildKv(b, m, l.wo, -1, Kc, V, Q, swa ? kq_mask_swa : kq_mask, 1.0f, il);
    SkipUnusedOutputs(b, m, il, &cur, &inpL);
    cur = BuildNorm(b, cur, l.attn_post_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "attn_post_norm", il);
    const int sa_out = b.Add(cur, inpL);
    b.Name(sa_out, "sa_out", il);
    cur = BuildNorm(b, sa_out, l.ffn_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "ffn_norm", il);
    cur = BuildFfn(b, cur, l.ffn_up, -1, l.ffn_gate, -1, l.ffn_down, -1, FfnOp::kGeglu, FfnGate::kPar, il);
    b.Name(cur, "ffn_out", il);
    cur = BuildNorm(b, cur, l.ffn_post_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, "ffn_post_norm", il);
    cur = b.Add(cur, sa_out);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
