// qwen2 and qwen2moe: weights as llama.cpp's load_tensors (LLM_ARCH_QWEN2, LLM_ARCH_QWEN2MOE) and
// the graphs as build_qwen2 / build_qwen2moe (llama.cpp Feb 2025): QKV biases (required), NEOX
// rope without freq factors, kq_scale 1/sqrt(n_embd_head); qwen2moe adds a shared expert gated by
// sigmoid(ffn_gate_inp_shexp x) next to the routed experts.
#include <cmath>

#include "arch.h"

namespace stowage::planner {
namespace {

// The attention part shared by qwen2 and qwen2moe (tensors and graph are identical).
void LoadQwen2Attention(WeightLoader& wl, const HParams& hp, LayerWeights& l, int il) {
  const int64_t n_embd = hp.n_embd, n_embd_gqa = hp.n_embd_v_gqa();
  const auto R = LayerClass::kRepeating;
  LoadAttentionWeights(wl, l, il, n_embd, n_embd, n_embd_gqa, n_embd_gqa);
  LoadQkvBiases(wl, l, il, n_embd, n_embd_gqa, kRequired);
  l.ffn_norm = wl.Create(Blk(il, "ffn_norm.weight"), {n_embd}, il, R, GgmlOp::MUL);
}

// build_qwen2 / build_qwen2moe, which differ only in the FFN: the inputs; per layer the attention
// block up to the FFN norm (BuildLlamaAttentionBlock without rope factors, head size n_embd_head_v,
// kq_scale 1/sqrt(head size)), then `ffn(l, cur = ffn_norm output, ffn_inp = residual, il)`, which
// returns the layer output l_out; then the output.
template <typename Ffn>
Status BuildQwen2Layers(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w, Ffn ffn) {
  const int64_t hd = m.hp.n_embd_head_v;
  const RopeConfig rc = MakeRopeConfig(m);
  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, m, false);
  for (int il = 0; il < static_cast<int>(m.hp.n_layer); ++il) {
    const LayerWeights& l = w.layers[il];
    int ffn_inp = -1;
    const int cur = BuildLlamaAttentionBlock(b, m, l, il, inpL, inp_pos, kq_mask, rc, hd, 1.0f / std::sqrt(float(hd)),
                                             &ffn_inp);
    inpL = ffn(l, cur, ffn_inp, il);
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace

Status LoadQwen2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff;
  const int L = static_cast<int>(hp.n_layer);
  const auto R = LayerClass::kRepeating;
  LoadEmbeddingsAndOutput(wl, hp, w, OutputWeight::kTokEmbdIfAbsent);  // tied embeddings (Qwen2-0.5B/1.5B)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    LayerWeights& l = w.layers[il];
    LoadQwen2Attention(wl, hp, l, il);
    l.ffn_gate = wl.Create(Blk(il, "ffn_gate.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
    l.ffn_down = wl.Create(Blk(il, "ffn_down.weight"), {n_ff, n_embd}, il, R, GgmlOp::MUL_MAT);
    l.ffn_up = wl.Create(Blk(il, "ffn_up.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
  }
  return wl.status();
}

Status BuildQwen2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  return BuildQwen2Layers(b, m, w, [&b](const LayerWeights& l, int cur, int ffn_inp, int il) {
    cur = BuildFfn(b, cur, l.ffn_up, -1, l.ffn_gate, -1, l.ffn_down, -1, FfnOp::kSilu, FfnGate::kPar, il);
    b.Name(cur, "ffn_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    return cur;
  });
}

Status LoadQwen2MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, E = hp.n_expert;
  const int L = static_cast<int>(hp.n_layer);
  const auto R = LayerClass::kRepeating;
  if (hp.n_expert == 0) return InvalidArgument("qwen2moe: n_expert must be > 0 (qwen2moe.expert_count)");
  if (hp.n_expert_used == 0) return InvalidArgument("qwen2moe: n_expert_used must be > 0 (qwen2moe.expert_used_count)");
  // llama.cpp load_tensors: expert width n_ff_exp (else n_ff / n_expert_used), shared n_ff_shexp (else n_ff)
  const int64_t n_ff_exp = hp.n_ff_exp ? hp.n_ff_exp : hp.n_ff / hp.n_expert_used;
  const int64_t n_ff_shexp = hp.n_ff_shexp ? hp.n_ff_shexp : hp.n_ff;
  LoadEmbeddingsAndOutput(wl, hp, w, OutputWeight::kRequired);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    LayerWeights& l = w.layers[il];
    LoadQwen2Attention(wl, hp, l, il);
    l.ffn_gate_inp = wl.Create(Blk(il, "ffn_gate_inp.weight"), {n_embd, E}, il, R, GgmlOp::MUL_MAT);
    l.ffn_gate_exps = wl.Create(Blk(il, "ffn_gate_exps.weight"), {n_embd, n_ff_exp, E}, il, R, GgmlOp::MUL_MAT_ID);
    l.ffn_down_exps = wl.Create(Blk(il, "ffn_down_exps.weight"), {n_ff_exp, n_embd, E}, il, R, GgmlOp::MUL_MAT_ID);
    l.ffn_up_exps = wl.Create(Blk(il, "ffn_up_exps.weight"), {n_embd, n_ff_exp, E}, il, R, GgmlOp::MUL_MAT_ID);
    l.ffn_gate_inp_shexp = wl.Create(Blk(il, "ffn_gate_inp_shexp.weight"), {n_embd}, il, R, GgmlOp::MUL_MAT);
    l.ffn_gate_shexp = wl.Create(Blk(il, "ffn_gate_shexp.weight"), {n_embd, n_ff_shexp}, il, R, GgmlOp::MUL_MAT);
    l.ffn_down_shexp = wl.Create(Blk(il, "ffn_down_shexp.weight"), {n_ff_shexp, n_embd}, il, R, GgmlOp::MUL_MAT);
    l.ffn_up_shexp = wl.Create(Blk(il, "ffn_up_shexp.weight"), {n_embd, n_ff_shexp}, il, R, GgmlOp::MUL_MAT);
  }
  return wl.status();
}

Status BuildQwen2MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  return BuildQwen2Layers(b, m, w, [&b, &hp](const LayerWeights& l, int cur, int ffn_inp, int il) {
    int moe_out = BuildMoeFfn(b, cur, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, hp.n_expert,
                              hp.n_expert_used, FfnOp::kSilu, /*norm_w=*/false, il);
    // llama.cpp names `cur` (the ffn_norm output) "ffn_moe_out" here, not moe_out; mirrored.
    b.Name(cur, "ffn_moe_out", il);
    // FFN shared expert
    const int gate_inp = b.MulMat(b.Global(l.ffn_gate_inp_shexp), cur);
    b.Name(gate_inp, "ffn_shexp_gate_inp", il);
    const int gate = b.Div(b.Silu(gate_inp), gate_inp);  // sigmoid(x) = silu(x) / x
    b.Name(gate, "ffn_shexp_gate", il);
    const int ffn = BuildFfn(b, cur, l.ffn_up_shexp, -1, l.ffn_gate_shexp, -1, l.ffn_down_shexp, -1, FfnOp::kSilu,
                             FfnGate::kPar, il);
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
