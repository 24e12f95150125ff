// mamba: weights as llama.cpp's load_tensors (LLM_ARCH_MAMBA) and the graph as build_mamba +
// llm_build_mamba + llm_build_copy_mask_state (llama.cpp Feb 2025). No attention and no KV: the
// cache holds two recurrent states per layer and cell (F32), the conv state cache_k_l<il>
// ((d_conv - 1) * d_inner per cell) and the ssm state cache_v_l<il> (d_state * d_inner per cell);
// a cell is a sequence (n_kv = cells in use, at most max(1, n_seq_max)). The worst-case graph is
// one sequence of n_tokens tokens (llama.cpp reserves with n_seqs = 1), so n_seqs is 1 here.
#include <algorithm>

#include "arch.h"

namespace stowage::planner {
namespace {

const DimExpr kC1 = DimExpr::Const(1);
DimExpr K(int64_t v) { return DimExpr::Const(v); }
constexpr int64_t kF32 = 4;  // bytes; recurrent states and activations are F32
constexpr int64_t kSeqs = 1;

// llm_build_copy_mask_state: gathers the states of the cells in use (inp_s_copy), zeroes those of
// new sequences (inp_s_mask), writes the states past n_seqs back and returns the first n_seqs.
int CopyMaskState(GraphBuilder& b, int s, int state_copy, int state_mask, int64_t n_state, int64_t kv_size) {
  int states = b.Reshape(s, {K(n_state), K(kv_size), kC1, kC1});
  states = b.GetRows(states, state_copy);
  states = b.Mul(states, state_mask);
  const DimExpr n_rest = DimExpr::Kv(n_state) + K(-n_state * kSeqs);  // n_state * (n_kv - n_seqs)
  b.Expand(b.Cpy(b.View1d(states, n_rest, K(kSeqs * n_state * kF32)),
                 b.View1d(s, n_rest, (DimExpr::KvHead() + K(kSeqs)) * (n_state * kF32))));
  return b.View2d(states, K(n_state), K(kSeqs), b.Nb(states)[1], DimExpr{});
}

}  // namespace

Status LoadMambaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, d_inner = hp.ssm_d_inner;
  if (2 * n_embd != d_inner)
    return InvalidArgument("mamba: ssm.inner_size " + std::to_string(d_inner) +
                           " is not 2 * embedding_length " + std::to_string(n_embd) +
                           " (only an expansion factor of 2 is supported, as in llama.cpp)");
  TableLoader t(wl, hp, "mamba");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings, duplicated to allow offloading
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = t("attn_norm.weight", il);
    l.ssm_in = t("ssm_in.weight", il);
    l.ssm_conv1d = t("ssm_conv1d.weight", il);
    l.ssm_conv1d_b = t("ssm_conv1d.bias", il);
    l.ssm_x = t("ssm_x.weight", il);
    l.ssm_dt = t("ssm_dt.weight", il);
    l.ssm_dt_b = t("ssm_dt.bias", il);
    l.ssm_a = t("ssm_a", il);
    l.ssm_d = t("ssm_d", il);
    l.ssm_out = t("ssm_out.weight", il);
  }
  return wl.status();
}

Status BuildMambaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const int64_t n_embd = hp.n_embd;
  const int64_t d_conv = hp.ssm_d_conv, d_inner = hp.ssm_d_inner, d_state = hp.ssm_d_state,
                dt_rank = hp.ssm_dt_rank;
  const int64_t kv_size = std::max<int64_t>(1, m.cfg.n_seq_max);
  const DimExpr T = DimExpr::Tokens(), KV = DimExpr::Kv();

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int state_copy = b.Input("inp_s_copy", GgmlType::I32, {KV, kC1, kC1, kC1});
  const int state_mask = b.Input("inp_s_mask", GgmlType::F32, {kC1, KV, kC1, kC1});

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "attn_norm", il);

    // ---- llm_build_mamba ----
    const int conv_states_all = b.Global(CacheGlobal(m, true, il));
    const int ssm_states_all = b.Global(CacheGlobal(m, false, il));
    int conv = CopyMaskState(b, conv_states_all, state_copy, state_mask, hp.n_embd_k_s(), kv_size);
    conv = b.Reshape(conv, {K(d_conv - 1), K(d_inner), K(kSeqs), kC1});
    int ssm = CopyMaskState(b, ssm_states_all, state_copy, state_mask, hp.n_embd_v_s(), kv_size);
    ssm = b.Reshape(ssm, {K(d_state), K(d_inner), K(kSeqs), kC1});

    // {n_embd, n_tokens} => {n_embd, n_seq_tokens, n_seqs}
    cur = b.Reshape(cur, {K(n_embd), T, K(kSeqs), kC1});
    // {n_embd, 2*d_inner} @ {n_embd, n_seq_tokens, n_seqs} => {2*d_inner, n_seq_tokens, n_seqs}
    const int xz = b.MulMat(b.Global(l.ssm_in), cur);
    const auto xz_nb = b.Nb(xz);
    int x = b.View3d(xz, K(d_inner), T, K(kSeqs), xz_nb[1], xz_nb[2], DimExpr{});
    const int z = b.View3d(xz, K(d_inner), T, K(kSeqs), xz_nb[1], xz_nb[2], K(d_inner * kF32));

    // conv: {d_conv - 1 + n_seq_tokens, d_inner, n_seqs}; the last d_conv - 1 columns go back to the state
    const int conv_x = b.Concat(conv, b.Transpose(x), 0);
    const auto cx_nb = b.Nb(conv_x);
    const int last_conv = b.View3d(conv_x, K(d_conv - 1), K(d_inner), K(kSeqs), cx_nb[1], cx_nb[2], T * kF32);
    b.Expand(b.Cpy(last_conv, b.View1d(conv_states_all, K((d_conv - 1) * d_inner * kSeqs),
                                       DimExpr::KvHead((d_conv - 1) * d_inner * kF32))));
    x = b.SsmConv(conv_x, b.Global(l.ssm_conv1d));
    x = b.Add(x, b.Global(l.ssm_conv1d_b));
    x = b.Silu(x);

    // ssm: {d_inner, dt_rank + 2*d_state} @ x => x_db, split into dt, B, C
    const int x_db = b.MulMat(b.Global(l.ssm_x), x);
    const auto db_nb = b.Nb(x_db);
    int dt = b.View3d(x_db, K(dt_rank), T, K(kSeqs), db_nb[1], db_nb[2], DimExpr{});
    int B = b.View3d(x_db, K(d_state), T, K(kSeqs), db_nb[1], db_nb[2], K(kF32 * dt_rank));
    int C = b.View3d(x_db, K(d_state), T, K(kSeqs), db_nb[1], db_nb[2], K(kF32 * (dt_rank + d_state)));
    if (hp.ssm_dt_b_c_rms) {  // FalconMamba
      dt = b.RmsNorm(dt, hp.f_norm_rms_eps);
      B = b.RmsNorm(B, hp.f_norm_rms_eps);
      C = b.RmsNorm(C, hp.f_norm_rms_eps);
    }
    dt = b.MulMat(b.Global(l.ssm_dt), dt);
    dt = b.Add(dt, b.Global(l.ssm_dt_b));
    const int y_ssm = b.SsmScan(ssm, x, dt, b.Global(l.ssm_a), B, C);
    const auto x_nb = b.Nb(x);
    // store last states (they follow y in y_ssm)
    b.Expand(b.Cpy(
        b.View1d(y_ssm, K(d_state * d_inner * kSeqs), x_nb[3]),
        b.View1d(ssm_states_all, K(d_state * d_inner * kSeqs), DimExpr::KvHead(d_state * d_inner * kF32))));
    int y = b.View3d(y_ssm, K(d_inner), T, K(kSeqs), x_nb[1], x_nb[2], DimExpr{});
    y = b.Add(y, b.Mul(x, b.Global(l.ssm_d)));
    y = b.Mul(y, b.Silu(b.Cont(z, b[z].ne)));
    cur = b.MulMat(b.Global(l.ssm_out), y);
    cur = b.Reshape(cur, {K(n_embd), T, kC1, kC1});
    b.Name(cur, "mamba_out", il);
    // ---- end llm_build_mamba ----

    SkipUnusedOutputs(b, m, il, &cur, &inpL);
    cur = b.Add(cur, inpL);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
