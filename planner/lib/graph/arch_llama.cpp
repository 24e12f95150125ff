// llama (and mixtral, which is llama with merged expert tensors): weights as llama.cpp's
// load_tensors (LLM_ARCH_LLAMA) and the graph as build_llama (llama.cpp Feb 2025,
// non-flash-attention path).
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff;
  const int64_t n_embd_q = int64_t(hp.n_embd_head_k) * hp.n_head;
  const int64_t n_embd_gqa = hp.n_embd_v_gqa();
  const int L = static_cast<int>(hp.n_layer);
  const auto R = LayerClass::kRepeating;
  LoadEmbeddingsAndOutput(wl, hp, w, OutputWeight::kTokEmbdIfAbsent);  // tied embeddings: the output reuses token_embd
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    LayerWeights& l = w.layers[il];
    LoadAttentionWeights(wl, l, il, n_embd, n_embd_q, hp.n_embd_k_gqa(), hp.n_embd_v_gqa());
    // optional bias tensors (shapes as llama.cpp: n_embd for q/o, n_embd_gqa for k/v)
    LoadQkvBiases(wl, l, il, n_embd, n_embd_gqa, kNotRequired);
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
  const float kq_scale = hp.f_attention_scale == 0.f ? 1.f / std::sqrt(float(hk)) : hp.f_attention_scale;
  const RopeConfig rc = MakeRopeConfig(m);

  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, m, false);

  const int L = static_cast<int>(hp.n_layer);
  for (int il = 0; il < L; ++il) {
    const LayerWeights& l = w.layers[il];
    int ffn_inp = -1;
    int cur = BuildLlamaAttentionBlock(b, m, l, il, inpL, inp_pos, kq_mask, rc, hk, kq_scale, &ffn_inp);
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
