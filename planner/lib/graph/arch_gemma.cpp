// gemma: weights as llama.cpp's load_tensors (LLM_ARCH_GEMMA) and the graph as build_gemma
// (llama.cpp Feb 2025): the embeddings are scaled by sqrt(n_embd) ("inp_scaled"), NEOX rope, Q
// scaled by 1/sqrt(n_embd_head_k) before attention (kq_scale 1), GELU FFN with a parallel gate,
// and the output always reuses token_embd (duplicated so it can be offloaded).
// Gemma's RMS norm multiplies by (1 + weight); llama.cpp's converter adds the 1 to every
// "*norm.weight" (convert_hf_to_gguf GemmaModel.modify_tensors), so the graph is a plain MUL.
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadGemmaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "gemma");
  LoadEmbeddingsAndOutput(t, w);  // no output.weight: always token_embd
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadAttentionWeights(t, l, il);
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
  }
  return wl.status();
}

Status BuildGemmaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k;
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  inpL = b.Scale(inpL, std::sqrt(float(hp.n_embd)));
  b.Name(inpL, "inp_scaled", -1);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, m, false);

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "attn_norm", il);
    int Q = -1, Kc = -1, V = -1;
    BuildQkv(b, l, cur, il, &Q, &Kc, &V);  // no biases: plain MUL_MATs
    Q = BuildRopeHeads(b, Q, hk, hp.n_head, inp_pos, -1, rc, "Qcur", il);
    Q = b.Scale(Q, 1.0f / std::sqrt(float(hk)));
    b.Name(Q, "Qcur_scaled", il);
    Kc = BuildRopeHeads(b, Kc, hk, hp.n_head_kv, inp_pos, -1, rc, "Kcur", il);
    cur = BuildKv(b, m, l.wo, -1, Kc, V, Q, kq_mask, 1.0f, il);
    SkipUnusedOutputs(b, m, il, &cur, &inpL);
    const int sa_out = b.Add(cur, inpL);
    b.Name(sa_out, "sa_out", il);
    cur = BuildNorm(b, sa_out, l.ffn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "ffn_norm", il);
    cur = BuildFfn(b, cur, l.ffn_up, -1, l.ffn_gate, -1, l.ffn_down, -1, FfnOp::kGelu, FfnGate::kPar, il);
    b.Name(cur, "ffn_out", il);
    cur = b.Add(cur, sa_out);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
