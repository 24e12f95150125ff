// phi3: weights as llama.cpp's load_tensors (LLM_ARCH_PHI3) and the graph as build_phi3
// (llama.cpp Feb 2025): fused attn_qkv split by three views (each made contiguous), NEOX rope with
// rope_factors_long/short (chosen by context size), Q scaled before attention (kq_scale 1), the
// KQ_mask_swa input when a sliding window is set, and a fused up projection [n_embd, 2*n_ff] split
// by SWIGLU (llm_build_ffn LLM_FFN_SWIGLU, LLM_FFN_SEQ, no gate tensor).
// With ModelGraphs::llama2026 it is llama.cpp 2026's llama_model_phi3::graph: build_qkv's three
// 3-D views of attn_qkv (heads, not made contiguous) roped in place of the reshapes, the plain
// KQ_mask (2026 disables Phi SWA: load_arch_hparams sets n_swa 0) and build_ffn's LLM_FFN_SWIGLU
// as one ggml_swiglu of the up projection.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadPhi3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "phi3");
  LoadEmbeddingsAndOutput(t, w);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = t("attn_norm.weight", il);
    l.wqkv = t("attn_qkv.weight", il);
    l.wo = t("attn_output.weight", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
    l.rope_long = t("rope_factors_long.weight", il);
    l.rope_short = t("rope_factors_short.weight", il);
  }
  return wl.status();
}

Status BuildPhi3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t n_embd = hp.n_embd, n_embd_gqa = hp.n_embd_v_gqa(), hd = hp.n_embd_head_v;
  const DimExpr T = DimExpr::Tokens(), C1 = DimExpr::Const(1);
  auto K = [](int64_t v) { return DimExpr::Const(v); };
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  // Phi-4 has no sliding window (n_swa == 0) and uses the plain mask; so does every phi3 in 2026.
  const int kq_mask = BuildInpKqMask(b, m, hp.n_swa != 0 && !m.llama2026);

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    int residual = inpL;
    const int rope_factors = BuildRopeFactors(b, m, l);
    const int attn_norm =
        BuildNorm(b, inpL, l.attn_norm, l.attn_norm_b, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(attn_norm, "attn_norm", il);

    int cur = b.MulMat(b.Global(l.wqkv), attn_norm);
    b.Name(cur, "wqkv", il);
    const DimExpr nb1 = b.Nb(cur)[1];
    const int64_t f = sizeof(float);
    int Q = -1, Kc = -1, V = -1;
    if (m.llama2026) {
      // build_qkv (reshape): [hd, heads, n_tokens] views of each part of the fused rows
      const int64_t offs[3] = {0, f * n_embd, f * (n_embd + n_embd_gqa)};
      const int64_t heads[3] = {hp.n_head, hp.n_head_kv, hp.n_head_kv};
      int* parts[3] = {&Q, &Kc, &V};
      for (int i = 0; i < 3; ++i)
        *parts[i] = b.View3d(cur, K(hd), K(heads[i]), T, K(f * hd), nb1, K(offs[i]));
    } else {
      Q = b.Cont(b.View2d(cur, K(n_embd), T, nb1, K(0)), {K(n_embd), T, C1, C1});
      Kc = b.Cont(b.View2d(cur, K(n_embd_gqa), T, nb1, K(f * n_embd)), {K(n_embd_gqa), T, C1, C1});
      V = b.Cont(b.View2d(cur, K(n_embd_gqa), T, nb1, K(f * (n_embd + n_embd_gqa))),
                 {K(n_embd_gqa), T, C1, C1});
    }
    b.Name(Q, "Qcur", il);
    b.Name(Kc, "Kcur", il);
    b.Name(V, "Vcur", il);
    if (!m.llama2026) {
      Q = b.Reshape(Q, {K(hd), K(hp.n_head), T, C1});
      Kc = b.Reshape(Kc, {K(hd), K(hp.n_head_kv), T, C1});
    }
    Q = b.RopeExt(Q, inp_pos, rope_factors, rc);
    b.Name(Q, "Qcur", il);
    Q = b.Scale(Q, 1.0f / std::sqrt(float(hd)));
    b.Name(Q, "Qcur", il);
    Kc = b.RopeExt(Kc, inp_pos, rope_factors, rc);
    b.Name(Kc, "Kcur", il);
    cur = BuildKv(b, m, l.wo, l.bo, Kc, V, Q, kq_mask, 1.0f, il);

    SkipUnusedOutputs(b, m, il, &cur, &residual);
    cur = b.Add(cur, residual);
    residual = cur;
    cur = BuildNorm(b, cur, l.ffn_norm, l.ffn_norm_b, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "ffn_norm", il);
    if (m.llama2026) {  // build_ffn LLM_FFN_SWIGLU: ggml_swiglu of the [2 * n_ff] rows
      cur = b.MulMat(b.Global(l.ffn_up), cur);
      b.Name(cur, "ffn_up", il);
      cur = b.SwiGlu(cur);
      b.Name(cur, "ffn_swiglu", il);
      cur = b.MulMat(b.Global(l.ffn_down), cur);
    } else {
      cur = BuildFfn(b, cur, l.ffn_up, -1, -1, -1, l.ffn_down, -1, FfnOp::kSwiglu, FfnGate::kSeq, il);
    }
    b.Name(cur, "ffn_out", il);
    cur = b.Add(residual, cur);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
