// qwen2 and qwen2moe: weights as llama.cpp's load_tensors (LLM_ARCH_QWEN2, LLM_ARCH_QWEN2MOE) and
// the graphs as build_qwen2 / build_qwen2moe (llama.cpp Feb 2025, or with ModelGraphs::llama2026
// 2026's fused SWIGLU and MoE form): QKV biases (required), NEOX rope without freq factors, kq_scale
// 1/sqrt(n_embd_head); qwen2moe adds a shared expert gated by sigmoid(ffn_gate_inp_shexp x) next to
// the routed experts.
#include <cmath>

#include "arch.h"

namespace stowage::planner {
namespace {

// The attention part shared by qwen2 and qwen2moe (tensors and graph are identical).
void LoadQwen2Attention(TableLoader& t, LayerWeights& l, int il) {
  LoadAttentionWeights(t, l, il);
  LoadQkvBiases(t, l, il);  // required
  l.ffn_norm = t("ffn_norm.weight", il);
}

}  // namespace

Status LoadQwen2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "qwen2");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings (Qwen2-0.5B/1.5B)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadQwen2Attention(t, l, il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
  }
  return wl.status();
}

Status BuildQwen2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  // llama.cpp 2026 build_ffn (qwen2, qwen3): LLM_FFN_SILU with a parallel gate is one SWIGLU
  const FfnOp op = m.llama2026 ? FfnOp::kSiluGlu : FfnOp::kSilu;
  return BuildAttentionFfnLayers(b, m, w, [&b, op](const LayerWeights& l, int cur, int ffn_inp, int il) {
    cur = BuildFfn(b, cur, l.ffn_up, -1, l.ffn_gate, -1, l.ffn_down, -1, op, FfnGate::kPar, il);
    b.Name(cur, "ffn_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    return cur;
  });
}

Status LoadQwen2MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  if (hp.n_expert == 0) return InvalidArgument("qwen2moe: n_expert must be > 0 (qwen2moe.expert_count)");
  if (hp.n_expert_used == 0)
    return InvalidArgument("qwen2moe: n_expert_used must be > 0 (qwen2moe.expert_used_count)");
  TableLoader t(wl, hp, "qwen2moe");  // expert widths: DimsOf (n_ff_exp, n_ff_shexp)
  LoadEmbeddingsAndOutput(t, w);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadQwen2Attention(t, l, il);
    l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
    l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
    l.ffn_down_exps = t("ffn_down_exps.weight", il);
    l.ffn_up_exps = t("ffn_up_exps.weight", il);
    l.ffn_gate_inp_shexp = t("ffn_gate_inp_shexp.weight", il);
    l.ffn_gate_shexp = t("ffn_gate_shexp.weight", il);
    l.ffn_down_shexp = t("ffn_down_shexp.weight", il);
    l.ffn_up_shexp = t("ffn_up_shexp.weight", il);
  }
  return wl.status();
}

Status BuildQwen2MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  // llama.cpp 2026 llama_model_qwen2moe::graph: build_moe_ffn's 2026 form (fused SWIGLU of the
  // experts, the weights expanded first) and build_ffn's SWIGLU for the shared expert.
  const bool l2026 = m.llama2026;
  MoeFfnOptions moe;
  moe.fused_glu = l2026;
  return BuildAttentionFfnLayers(b, m, w, [&](const LayerWeights& l, int cur, int ffn_inp, int il) {
    int moe_out = BuildMoeFfn(b, cur, l, hp.n_expert, hp.n_expert_used, moe, il);
    // Feb 2025 names `cur` (the ffn_norm output) "ffn_moe_out" here, not moe_out; mirrored.
    b.Name(l2026 ? moe_out : cur, "ffn_moe_out", il);
    // FFN shared expert
    const int gate_inp = b.MulMat(b.Global(l.ffn_gate_inp_shexp), cur);
    b.Name(gate_inp, "ffn_shexp_gate_inp", il);
    const int gate = b.Div(b.Silu(gate_inp), gate_inp);  // sigmoid(x) = silu(x) / x
    b.Name(gate, "ffn_shexp_gate", il);
    const int ffn = BuildFfn(b, cur, l.ffn_up_shexp, -1, l.ffn_gate_shexp, -1, l.ffn_down_shexp, -1,
                             l2026 ? FfnOp::kSiluGlu : FfnOp::kSilu, FfnGate::kPar, il);
    b.Name(ffn, "ffn_shexp", il);
    const int shexp_out = b.Mul(ffn, gate);
    b.Name(shexp_out, "ffn_shexp_out", il);
    moe_out = b.Add(moe_out, shexp_out);
    b.Name(moe_out, "ffn_out", il);
    const int out = b.Add(moe_out, ffn_inp);
    b.Name(out, "l_out", il);
    return out;
  });
}

}  // namespace stowage::planner
