// llama: weights as llama.cpp's load_tensors (LLM_ARCH_LLAMA) and the graph as build_llama
// (llama.cpp Feb 2025, non-flash-attention path; FFN as SILU(gate) * up, llm_build_ffn PAR).
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab, n_ff = hp.n_ff;
  const int64_t n_embd_q = int64_t(hp.n_embd_head_k) * hp.n_head;
  const int L = static_cast<int>(hp.n_layer);
  w.tok_embd = wl.Create("token_embd.weight", {n_embd, n_vocab}, -1, LayerClass::kInput, GgmlOp::GET_ROWS);
  w.output_norm = wl.Create("output_norm.weight", {n_embd}, L, LayerClass::kOutput, GgmlOp::MUL);
  w.output = wl.Create("output.weight", {n_embd, n_vocab}, L, LayerClass::kOutput, GgmlOp::MUL_MAT, kNotRequired);
  if (w.output < 0 && wl.status().ok())  // tied embeddings: the output reuses token_embd
    w.output = wl.Create("token_embd.weight", {n_embd, n_vocab}, L, LayerClass::kOutput, GgmlOp::MUL_MAT, kDuplicated);
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    LayerWeights& l = w.layers[il];
    const auto R = LayerClass::kRepeating;
    l.attn_norm = wl.Create(Blk(il, "attn_norm.weight"), {n_embd}, il, R, GgmlOp::MUL);
    l.wq = wl.Create(Blk(il, "attn_q.weight"), {n_embd, n_embd_q}, il, R, GgmlOp::MUL_MAT);
    l.wk = wl.Create(Blk(il, "attn_k.weight"), {n_embd, hp.n_embd_k_gqa()}, il, R, GgmlOp::MUL_MAT);
    l.wv = wl.Create(Blk(il, "attn_v.weight"), {n_embd, hp.n_embd_v_gqa()}, il, R, GgmlOp::MUL_MAT);
    l.wo = wl.Create(Blk(il, "attn_output.weight"), {n_embd_q, n_embd}, il, R, GgmlOp::MUL_MAT);
    l.bq = wl.Create(Blk(il, "attn_q.bias"), {n_embd_q}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bk = wl.Create(Blk(il, "attn_k.bias"), {hp.n_embd_k_gqa()}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bv = wl.Create(Blk(il, "attn_v.bias"), {hp.n_embd_v_gqa()}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.bo = wl.Create(Blk(il, "attn_output.bias"), {n_embd}, il, R, GgmlOp::MUL_MAT, kNotRequired);
    l.ffn_norm = wl.Create(Blk(il, "ffn_norm.weight"), {n_embd}, il, R, GgmlOp::MUL);
    // rope_freqs is requested by every layer, duplicated for il > 0 (llama.cpp PR #7447 / #10026).
    l.rope_freqs = wl.Create("rope_freqs.weight", {hp.n_rot / 2}, il, R, GgmlOp::ROPE,
                             kNotRequired | (il != 0 ? kDuplicated : 0));
    if (hp.n_expert == 0) {
      l.ffn_gate = wl.Create(Blk(il, "ffn_gate.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
      l.ffn_down = wl.Create(Blk(il, "ffn_down.weight"), {n_ff, n_embd}, il, R, GgmlOp::MUL_MAT);
      l.ffn_up = wl.Create(Blk(il, "ffn_up.weight"), {n_embd, n_ff}, il, R, GgmlOp::MUL_MAT);
    } else {
      l.ffn_gate_inp = wl.Create(Blk(il, "ffn_gate_inp.weight"), {n_embd, hp.n_expert}, il, R, GgmlOp::MUL_MAT);
      l.ffn_gate_exps = wl.Create(Blk(il, "ffn_gate_exps.weight"), {n_embd, n_ff, hp.n_expert}, il, R, GgmlOp::MUL_MAT_ID);
      l.ffn_down_exps = wl.Create(Blk(il, "ffn_down_exps.weight"), {n_ff, n_embd, hp.n_expert}, il, R, GgmlOp::MUL_MAT_ID);
      l.ffn_up_exps = wl.Create(Blk(il, "ffn_up_exps.weight"), {n_embd, n_ff, hp.n_expert}, il, R, GgmlOp::MUL_MAT_ID);
    }
  }
  return wl.status();
}

namespace {

// llm_build_norm (RMS) + the caller's name for the weighted result.
int BuildRmsNorm(GraphBuilder& b, int x, int weight, float eps, const char* name, int il) {
  int cur = b.RmsNorm(x, eps);
  b.Name(cur, "norm", il);
  cur = b.Mul(cur, b.Global(weight));
  b.Name(cur, name, il);
  return cur;
}

int MatMulBias(GraphBuilder& b, int w, int bias, int x, const char* name, int il) {
  int cur = b.MulMat(b.Global(w), x);
  b.Name(cur, name, il);
  if (bias >= 0) {
    cur = b.Add(cur, b.Global(bias));
    b.Name(cur, name, il);
  }
  return cur;
}

}  // namespace

Status BuildLlamaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t n_ctx = m.cfg.n_ctx;
  const int64_t hk = hp.n_embd_head_k, hv = hp.n_embd_head_v;
  const int64_t n_head = hp.n_head, n_head_kv = hp.n_head_kv;
  const DimExpr T = DimExpr::Tokens(), KV = DimExpr::Kv(), C1 = DimExpr::Const(1);
  auto K = [](int64_t v) { return DimExpr::Const(v); };
  const float kq_scale = hp.f_attention_scale == 0.f ? 1.f / std::sqrt(float(hk)) : hp.f_attention_scale;
  RopeConfig rc;
  rc.n_dims = static_cast<int>(hp.n_rot);
  rc.mode = hp.rope_type;
  rc.n_ctx_orig = static_cast<int>(hp.n_ctx_train);
  rc.freq_base = hp.rope_freq_base;
  rc.freq_scale = hp.rope_freq_scale;

  const int inp_tokens = b.Input("inp_tokens", GgmlType::I32, {T, C1, C1, C1});
  int inpL = b.GetRows(b.Global(w.tok_embd), inp_tokens);
  b.Name(inpL, "inp_embd", -1);
  const int inp_pos = b.Input("inp_pos", GgmlType::I32, {T, C1, C1, C1});
  const int kq_mask = b.Input("KQ_mask", GgmlType::F32, {KV, T, C1, C1});

  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    const LayerWeights& l = w.layers[il];
    const int inpSA = inpL;
    int cur = BuildRmsNorm(b, inpL, l.attn_norm, hp.f_norm_rms_eps, "attn_norm", il);

    int Q = MatMulBias(b, l.wq, l.bq, cur, "Qcur", il);
    int Kc = MatMulBias(b, l.wk, l.bk, cur, "Kcur", il);
    int V = MatMulBias(b, l.wv, l.bv, cur, "Vcur", il);
    const int freq = l.rope_freqs >= 0 ? b.Global(l.rope_freqs) : -1;
    Q = b.RopeExt(b.Reshape(Q, {K(hk), K(n_head), T, C1}), inp_pos, freq, rc);
    b.Name(Q, "Qcur", il);
    Kc = b.RopeExt(b.Reshape(Kc, {K(hk), K(n_head_kv), T, C1}), inp_pos, freq, rc);
    b.Name(Kc, "Kcur", il);

    // llm_build_kv: expand q, k, v, then store K and V (transposed) into the cache at kv_head.
    b.Expand(Q);
    b.Expand(Kc);
    b.Expand(V);
    const int kcache = b.Global(m.FindGlobal("cache_k_l" + std::to_string(il)));
    const int vcache = b.Global(m.FindGlobal("cache_v_l" + std::to_string(il)));
    const int64_t k_row = static_cast<int64_t>(RowSize(m.cfg.type_k, hp.n_embd_k_gqa()));
    const int64_t v_el = static_cast<int64_t>(GetTypeTraits(m.cfg.type_v).type_size);
    int k_view = b.View(kcache, {T * hp.n_embd_k_gqa(), C1, C1, C1}, {DimExpr{}, DimExpr{}, DimExpr{}},
                        DimExpr::KvHead(k_row));
    b.Name(k_view, "k_cache_view", il);
    b.Expand(b.Cpy(Kc, k_view));
    const int vt = b.Transpose(b.Reshape(V, {K(hp.n_embd_v_gqa()), T, C1, C1}));
    int v_view = b.View(vcache, {T, K(hp.n_embd_v_gqa()), C1, C1}, {K(n_ctx * v_el), DimExpr{}, DimExpr{}},
                        DimExpr::KvHead(v_el));
    b.Name(v_view, "v_cache_view", il);
    b.Expand(b.Cpy(vt, v_view));

    // llm_build_kqv
    const int q = b.Permute(Q, 0, 2, 1, 3);
    const int k = b.View(kcache, {K(hk), KV, K(n_head_kv), C1},
                         {K(k_row), K(static_cast<int64_t>(RowSize(m.cfg.type_k, hk))), DimExpr{}}, DimExpr{});
    b.Name(k, "k", il);
    int kq = b.MulMat(k, q);
    b.Name(kq, "kq", il);
    kq = b.SoftMaxExt(kq, kq_mask, kq_scale, hp.f_max_alibi_bias);
    b.Name(kq, "kq_soft_max_ext", il);
    const int v = b.View(vcache, {KV, K(hv), K(n_head_kv), C1}, {K(v_el * n_ctx), K(v_el * n_ctx * hv), DimExpr{}},
                         DimExpr{});
    b.Name(v, "v", il);
    const int kqv = b.MulMat(v, kq);
    b.Name(kqv, "kqv", il);
    const int merged = b.Permute(kqv, 0, 2, 1, 3);
    b.Name(merged, "kqv_merged", il);
    cur = b.Cont(merged, {K(hv * n_head), T, C1, C1});
    b.Name(cur, "kqv_merged_cont", il);
    b.Expand(cur);
    cur = b.MulMat(b.Global(l.wo), cur);
    if (l.bo >= 0) {
      b.Name(cur, "kqv_wo", il);
      cur = b.Add(cur, b.Global(l.bo));
    }
    b.Name(cur, "kqv_out", il);

    int residual = inpSA;
    if (il == static_cast<int>(hp.n_layer) - 1) {
      // skip computing output for unused tokens
      const int ids = b.Input("inp_out_ids", GgmlType::I32, {DimExpr::Outputs(), C1, C1, C1});
      cur = b.GetRows(cur, ids);
      residual = b.GetRows(inpSA, ids);
    }
    const int ffn_inp = b.Add(cur, residual);
    b.Name(ffn_inp, "ffn_inp", il);
    cur = BuildRmsNorm(b, ffn_inp, l.ffn_norm, hp.f_norm_rms_eps, "ffn_norm", il);
    if (l.ffn_up < 0) return Unimplemented(hp.arch + ": mixture-of-experts FFN is not built by this graph builder yet");
    const int up = b.MulMat(b.Global(l.ffn_up), cur);
    b.Name(up, "ffn_up", il);
    int gate = b.MulMat(b.Global(l.ffn_gate), cur);
    b.Name(gate, "ffn_gate", il);
    gate = b.Silu(gate);
    b.Name(gate, "ffn_silu", il);
    cur = b.Mul(gate, up);
    b.Name(cur, "ffn_gate_par", il);
    cur = b.MulMat(b.Global(l.ffn_down), cur);
    b.Name(cur, "ffn_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  int cur = BuildRmsNorm(b, inpL, w.output_norm, hp.f_norm_rms_eps, "result_norm", -1);
  cur = b.MulMat(b.Global(w.output), cur);
  b.Name(cur, "result_output", -1);
  b[cur].is_output = true;
  b.Expand(cur);
  return b.status();
}

}  // namespace stowage::planner
