// llama (and mixtral, which is llama with merged expert tensors): weights as llama.cpp's
// load_tensors (LLM_ARCH_LLAMA) and the graph as build_llama (llama.cpp Feb 2025,
// non-flash-attention path).
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab, n_ff = hp.n_ff;
  const int64_t n_embd_q = int64_t(hp.n_embd_head_k) * hp.n_head;
  const int64_t n_embd_gqa = hp.n_embd_v_gqa();
  const int L = static_cast<int>(hp.n_layer);
  const auto R = LayerClass::kRepeating;
  w.tok_embd = wl.Create("token_embd.weight", {n_embd, n_vocab}, -1, LayerClass::kInput, GgmlOp::GET_ROWS);
  w.output_norm = wl.Create("output_norm.weight", {n_embd}, L, LayerClass::kOutput, GgmlOp::MUL);
  w.output = wl.Create("output.weight", {n_embd, n_vocab}, L, LayerClass::kOutput, GgmlOp::MUL_MAT, kNotRequired);
  if (w.output < 0 && wl.status().ok())  // tied embeddings: the output reuses token_embd
    w.output = wl.Create("token_embd.weight", {n_embd, n_vocab}, L, LayerClass::kOutput, GgmlOp::MUL_MAT, kDuplicated);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = wl.Create(Blk(il, "attn_norm.weight"), {n_embd}, il, R, GgmlOp::MUL);
    l.wq = wl.Create(Blk(il, "attn_q.weight"), {n_embd, n_embd_q}, il, R, GgmlOp::MUL_MAT);
    l.wk = wl.Create(Blk(il, "attn_k.weight"), {n_embd, hp.n_embd_k_gqa()}, il, R, GgmlOp::MUL_MAT);
    l.wv = wl.Create(Blk(il, "attn_v.weight"), {n_embd, hp.n_embd_v_gqa()}, il, R, GgmlOp::MUL_MAT);
    l.wo = wl.Create(Blk(il, "attn_output.weight"), {n_embd_q, n_embd}, il, R, GgmlOp::MUL_MAT);
    // optional bias tensors (shapes as llama.cpp: n_embd for q/o, n_embd_gqa for k/v)
    l.bq = wl.Create(Blk(il, "attn_q.bias"), {n_embd}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bk = wl.Create(Blk(il, "attn_k.bias"), {n_embd_gqa}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bv = wl.Create(Blk(il, "attn_v.bias"), {n_embd_gqa}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bo = wl.Create(Blk(il, "attn_output.bias"), {n_embd}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.ffn_norm = wl.Create(Blk(il, "ffn_norm.weight"), {n_embd}, il, R, GgmlOp::MUL);
    // Rope factors are requested by every layer and duplicated for il > 0 (llama.cpp PR #7447,
    // #10026): rope_factors_long/short for longrope scaling, else rope_freqs (llama 3.1+).
    const unsigned dup = kNotRequired | (il != 0 ? unsigned{kDuplicated} : 0u);
    if (hp.rope_scaling_type == 3) {
      l.rope_long = wl.Create("rope_factors_long.weight", {hp.n_rot / 2}, il, R, GgmlOp::ROPE, dup);
      l.rope_short = wl.Create("rope_factors_short.weight", {hp.n_rot / 2}, il, R, GgmlOp::ROPE, dup);
    } else {
      l.rope_freqs = wl.Create("rope_freqs.weight", {hp.n_rot / 2}, il, R, GgmlOp::ROPE, dup);
    }
    if (hp.n_expert == 0) {
      l.ffn_gate = wl.Create(Blk(il, "ffn_gate.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
      l.ffn_down = wl.Create(Blk(il, "ffn_down.weight"), {n_ff, n_embd}, il, R, GgmlOp::MUL_MAT);
      l.ffn_up = wl.Create(Blk(il, "ffn_up.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
      // optional MLP bias
      l.ffn_gate_b = wl.Create(Blk(il, "ffn_gate.bias"), {n_ff}, il, R, GgmlOp::MUL_MAT, kNotRequired);
      l.ffn_down_b = wl.Create(Blk(il, "ffn_down.bias"), {n_embd}, il, R, GgmlOp::MUL_MAT, kNotRequired);
      l.ffn_up_b = wl.Create(Blk(il, "ffn_up.bias"), {n_ff}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    } else {
      const int64_t E = hp.n_expert;
      l.ffn_gate_inp = wl.Create(Blk(il, "ffn_gate_inp.weight"), {n_embd, E}, il, R, GgmlOp::MUL_MAT);
      l.ffn_gate_exps = wl.Create(Blk(il, "ffn_gate_exps.weight"), {n_embd, n_ff, E}, il, R, GgmlOp::MUL_MAT_ID);
      l.ffn_down_exps = wl.Create(Blk(il, "ffn_down_exps.weight"), {n_ff, n_embd, E}, il, R, GgmlOp::MUL_MAT_ID);
      l.ffn_up_exps = wl.Create(Blk(il, "ffn_up_exps.weight"), {n_embd, n_ff, E}, il, R, GgmlOp::MUL_MAT_ID);
    }
  }
  return wl.status();
}

Status BuildLlamaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k;
  const DimExpr T = DimExpr::Tokens(), C1 = DimExpr::Const(1);
  auto K = [](int64_t v) { return DimExpr::Const(v); };
  const float kq_scale = hp.f_attention_scale == 0.f ? 1.f / std::sqrt(float(hk)) : hp.f_attention_scale;
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, false);

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    int inpSA = inpL;
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "attn_norm", il);

    // self-attention; rope freq factors for llama 3 (none for llama 2)
    const int rope_factors = BuildRopeFactors(b, m, l);
    int Q = BuildMatMulBias(b, l.wq, l.bq, cur, "Qcur", il);
    int Kc = BuildMatMulBias(b, l.wk, l.bk, cur, "Kcur", il);
    const int V = BuildMatMulBias(b, l.wv, l.bv, cur, "Vcur", il);
    Q = b.RopeExt(b.Reshape(Q, {K(hk), K(hp.n_head), T, C1}), inp_pos, rope_factors, rc);
    b.Name(Q, "Qcur", il);
    Kc = b.RopeExt(b.Reshape(Kc, {K(hk), K(hp.n_head_kv), T, C1}), inp_pos, rope_factors, rc);
    b.Name(Kc, "Kcur", il);
    cur = BuildKv(b, m, l.wo, l.bo, Kc, V, Q, kq_mask, kq_scale, il);

    if (il == L - 1) {  // skip computing output for unused tokens
      const int ids = BuildInpOutIds(b);
      cur = b.GetRows(cur, ids);
      inpSA = b.GetRows(inpSA, ids);
    }
    const int ffn_inp = b.Add(cur, inpSA);
    b.Name(ffn_inp, "ffn_inp", il);

    cur = BuildNorm(b, ffn_inp, l.ffn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "ffn_norm", il);
    if (l.ffn_gate_inp < 0) {
      cur = BuildFfn(b, cur, l.ffn_up, l.ffn_up_b, l.ffn_gate, l.ffn_gate_b, l.ffn_down, l.ffn_down_b, FfnOp::kSilu,
                     FfnGate::kPar, il);
      b.Name(cur, "ffn_out", il);
    } else {  // MoE branch (mixtral): softmax gating, normalized top-k weights
      cur = BuildMoeFfn(b, cur, l.ffn_gate_inp, l.ffn_up_exps, l.ffn_gate_exps, l.ffn_down_exps, hp.n_expert,
                        hp.n_expert_used, FfnOp::kSilu, /*norm_w=*/true, il);
      b.Name(cur, "ffn_moe_out", il);
    }
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "ffn_out", il);
    b.Name(cur, "l_out", il);  // lctx.cvec.apply_to is the identity without a control vector
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
