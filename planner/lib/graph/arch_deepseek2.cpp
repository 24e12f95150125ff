// deepseek2 (DeepSeek-V2/V3/R1 and the files that keep the architecture): hyper-parameters, weights
// and graph as llama.cpp 2026 llama_model_deepseek2 (load_arch_hparams, load_arch_tensors, graph).
//
// Multi-head latent attention in the absorbed form the reference runs for current files (attn_k_b /
// attn_v_b, key_length_mla / value_length_mla set): Q from attn_q or the q LoRA (attn_q_a,
// attn_q_a_norm, attn_q_b), split per head into a "nope" part, absorbed into the compressed space
// by attn_k_b, and a roped part; the compressed KV (attn_kv_a_mqa: kv_lora_rank values, RMS-normed,
// and n_rot roped ones shared by every head) is the one cached K row per token (one KV head of
// kv_lora_rank + n_rot); V is the first kv_lora_rank values of the same cells (a view, no V cache),
// and attn_v_b decompresses the attention's result per head before attn_output. Files of the older
// form (one attn_kv_b per layer, no key_length_mla / value_length_mla; many DeepSeek-V2/V3/R1 files)
// run as the reference runs them, as MHA: attn_kv_b decompresses kv_cmpr into every head's non-rotated
// K part and V, the one roped k_pe head is repeated over the heads and joined to them, Q is roped over
// its last n_rot dims (ggml_rope_set_offset), and the cache is a regular K / V cache of heads
// qk_nope + n_rot and v wide.
//
// FFN: the first leading_dense_block_count layers a dense SwiGLU, the others routed experts
// (BuildMoeFfn: softmax or sigmoid gating, the expert-score bias exp_probs_b, weights normalized and
// scaled by expert_weights_scale, group-limited with expert_group_count > 1: DeepSeek-V3 / R1's 8
// groups of which 4 are used) plus the shared experts' FFN.
#include <cmath>

#include "arch.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/gguf_vocab.h"

namespace stowage::planner {
namespace {

const DimExpr kT = DimExpr::Tokens(), kKV = DimExpr::Kv(), kC1 = DimExpr::Const(1);
DimExpr K(int64_t v) { return DimExpr::Const(v); }

// The older form's attention (llama_model_deepseek2::graph without is_mla, build_attn over
// llm_graph_input_attn_kv): `q` [hk, n_head, n_tokens], `kv_cmpr` the normed compressed KV
// [kv_lora_rank, n_tokens], `k_pe` the roped rope part [n_rot, 1, n_tokens]; returns the attention
// output after attn_output (BuildKv), [n_embd, n_tokens].
int BuildMhaAttention(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l, int q, int kv_cmpr,
                      int k_pe, int inp_pos, int kq_mask, const RopeConfig& rc, float kq_scale, int il) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k, hv = hp.n_embd_head_v, n_rot = hp.n_rot, nope = hk - n_rot;
  const int64_t n_head = hp.n_head;
  const int64_t f32 = static_cast<int64_t>(GetTypeTraits(GgmlType::F32).type_size);
  const int kv = b.MulMat(b.Global(l.wkv_b), kv_cmpr);  // [n_head * (nope + hv), n_tokens]
  b.Name(kv, "kv", il);
  const int64_t kv_row = (nope + hv) * f32;
  const int k_nope = b.View3d(kv, K(nope), K(n_head), kT, K(kv_row), K(kv_row * n_head), DimExpr{});
  b.Name(k_nope, "k_nope_view", il);
  int v_cur = b.View3d(kv, K(hv), K(n_head), kT, K(kv_row), K(kv_row * n_head), K(nope * f32));
  b.Name(v_cur, "Vcur_view", il);
  v_cur = b.Cont(v_cur, b[v_cur].ne);
  b.Name(v_cur, "Vcur_cont", il);
  RopeConfig tail = rc;  // only the last n_rot dims of each head rotate
  tail.n_offs = static_cast<int>(nope);
  const int q_cur = b.RopeExt(q, inp_pos, -1, tail);
  b.Name(q_cur, "Qcur", il);
  const int k_pe_heads = b.Repeat(k_pe, {K(n_rot), K(n_head), kT, kC1});
  const int k_cur = b.Concat(k_nope, k_pe_heads, 0);  // [hk, n_head, n_tokens]
  b.Name(k_cur, "Kcur", il);
  // V as heads [hv, n_head, n_tokens], as build_attn takes it (BuildKv's store merges the heads)
  return BuildKv(b, m, l.wo, -1, k_cur, v_cur, q_cur, kq_mask, kq_scale, il);
}

// The attention of one layer (llama_model_deepseek2::graph, build_attn): `cur` is the normed input
// [n_embd, n_tokens]; the query and the compressed KV as both forms build them, then the absorbed
// MLA (is_mla: build_attn over llm_graph_input_attn_k with v_mla) or BuildMhaAttention; returns the
// attention output after attn_output, [n_embd, n_tokens].
int BuildMlaAttention(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l, int cur, int inp_pos,
                      int kq_mask, const RopeConfig& rc, float kq_scale, int il) {
  const HParams& hp = m.hp;
  const int64_t hk = hp.n_embd_head_k_mla(), n_rot = hp.n_rot, nope = hk - n_rot;
  const int64_t kv_lora = hp.n_lora_kv, n_head = hp.n_head;
  const int64_t f32 = static_cast<int64_t>(GetTypeTraits(GgmlType::F32).type_size);
  int q = -1;
  if (l.wq_a >= 0) {  // q LoRA
    q = b.MulMat(b.Global(l.wq_a), cur);
    b.Name(q, "q", il);
    q = BuildNorm(b, q, l.attn_q_a_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(q, "q", il);
    q = b.MulMat(b.Global(l.wq_b), q);
  } else {
    q = b.MulMat(b.Global(l.wq), cur);
  }
  b.Name(q, "q", il);
  q = b.Reshape(q, {K(hk), K(n_head), kT, kC1});  // [hk, n_head, n_tokens]
  b.Name(q, "q", il);

  // the compressed KV [kv_lora + n_rot, n_tokens]: kv_cmpr (its first kv_lora_rank rows) and k_pe
  const int kv_cmpr_pe = b.MulMat(b.Global(l.wkv_a_mqa), cur);
  b.Name(kv_cmpr_pe, "kv_cmpr_pe", il);
  const int64_t kv_row = (kv_lora + n_rot) * f32;
  int kv_cmpr = b.View2d(kv_cmpr_pe, K(kv_lora), kT, K(kv_row), DimExpr{});
  b.Name(kv_cmpr, "kv_cmpr", il);
  int k_pe = b.View3d(kv_cmpr_pe, K(n_rot), kC1, kT, K(kv_row), K(kv_row), K(kv_lora * f32));
  b.Name(k_pe, "k_pe", il);
  k_pe = b.RopeExt(k_pe, inp_pos, -1, rc);
  b.Name(k_pe, "k_pe", il);
  kv_cmpr = BuildNorm(b, kv_cmpr, l.attn_kv_a_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
  b.Name(kv_cmpr, "kv_cmpr", il);
  if (!hp.is_mla()) return BuildMhaAttention(b, m, l, q, kv_cmpr, k_pe, inp_pos, kq_mask, rc, kq_scale, il);

  // Q: the nope part absorbed by attn_k_b into the compressed space, the rope part roped
  const int64_t q_row = hk * f32;
  int q_nope = b.View3d(q, K(nope), K(n_head), kT, K(q_row), K(q_row * n_head), DimExpr{});
  b.Name(q_nope, "q_nope", il);
  int q_pe = b.View3d(q, K(n_rot), K(n_head), kT, K(q_row), K(q_row * n_head), K(nope * f32));
  b.Name(q_pe, "q_pe", il);
  q_pe = b.RopeExt(q_pe, inp_pos, -1, rc);
  b.Name(q_pe, "q_pe", il);
  q_nope = b.Permute(q_nope, 0, 2, 1, 3);  // [nope, n_tokens, n_head]
  b.Name(q_nope, "q_nope_perm", il);
  int q_abs = b.MulMat(b.Global(l.wk_b), q_nope);  // [kv_lora, n_tokens, n_head]
  b.Name(q_abs, "q_nope_absorbed", il);
  q_abs = b.Permute(q_abs, 0, 2, 1, 3);  // [kv_lora, n_head, n_tokens]
  b.Name(q_abs, "q_nope_absorbed_perm", il);
  const int q_cur = b.Concat(q_abs, q_pe, 0);  // [kv_lora + n_rot, n_head, n_tokens]
  b.Name(q_cur, "Qcur", il);
  kv_cmpr = b.Reshape(kv_cmpr, {K(kv_lora), kC1, kT, kC1});
  b.Name(kv_cmpr, "kv_cmpr_reshape", il);
  const int k_cur = b.Concat(kv_cmpr, k_pe, 0);  // [kv_lora + n_rot, 1, n_tokens]
  b.Name(k_cur, "Kcur", il);
  const int v_cur = kv_cmpr;
  b.Name(v_cur, "Vcur", il);

  // build_attn (llm_graph_input_attn_k): K rows SET_ROWS'd into the cache (cpy_k); V a view of it
  b.Expand(q_cur);
  b.Expand(v_cur);
  b.Expand(k_cur);
  const int64_t hkv = hp.n_embd_head_k;  // kv_lora + n_rot: the cached row
  const int kcache = b.Global(CacheGlobal(m, true, il));
  const int64_t k_row = static_cast<int64_t>(RowSize(m.cfg.type_k, hkv));
  const int64_t kv_cells = KvCacheCells(m, static_cast<uint32_t>(il));
  BuildKvStoreSetRows(b, m, kcache, -1, k_cur, -1, false, kv_cells);
  // build_attn_mha: Q viewed per stream and permuted; get_k's per-stream view [hkv, 1, n_kv] of the
  // cache and V's [kv_lora, 1, n_kv] view of that view, each permuted to [.., n_kv, 1] (one stream)
  const auto qnb = b.Nb(q_cur);
  const int qp = b.Permute(b.View(q_cur, b[q_cur].ne, {qnb[1], qnb[2], qnb[3]}, DimExpr{}), 0, 2, 1, 3);
  b.Name(qp, "q", il);  // [hkv, n_tokens, n_head]
  const std::array<DimExpr, 3> cell_nb = {K(k_row), K(k_row), K(k_row * kv_cells)};
  const int k_cells = b.View(kcache, {K(hkv), kC1, kKV, kC1}, cell_nb, DimExpr{});
  const int k = b.Permute(k_cells, 0, 2, 1, 3);  // [hkv, n_kv, 1]
  b.Name(k, "k", il);
  const int v = b.Permute(b.View(k_cells, {K(kv_lora), kC1, kKV, kC1}, cell_nb, DimExpr{}), 0, 2, 1, 3);
  b.Name(v, "v", il);  // [kv_lora, n_kv, 1]
  const int64_t hv = hp.n_embd_head_v_mla();
  int out = -1;
  if (m.cfg.flash_attn) {
    out = b.FlashAttnExt(qp, k, v, kq_mask, kq_scale, hp.f_max_alibi_bias, 0.0f, /*prec=*/1);
    out = b.Permute(out, 0, 2, 1, 3);       // [kv_lora, n_tokens, n_head]
    out = b.MulMat(b.Global(l.wv_b), out);  // [hv, n_tokens, n_head]
    b.Name(out, "fattn_mla", il);
    out = b.Permute(out, 0, 2, 1, 3);  // [hv, n_head, n_tokens]
    out = b.Cont(out, b[out].ne);
    out = b.Reshape(out, {K(hv * n_head), kT, kC1, kC1});
  } else {
    int kq = b.MulMat(k, qp);  // [n_kv, n_tokens, n_head]
    b.Name(kq, "kq", il);
    kq = b.SoftMaxExt(kq, kq_mask, kq_scale, hp.f_max_alibi_bias);
    b.Name(kq, "kq_soft_max", il);
    const int vt = b.Transpose(v);
    const int v_cont = b.Cont(vt, b[vt].ne);  // [n_kv, kv_lora, 1]
    b.Name(v_cont, "v_cont", il);
    int kqv = b.MulMat(v_cont, kq);  // [kv_lora, n_tokens, n_head]
    b.Name(kqv, "kqv", il);
    kqv = b.MulMat(b.Global(l.wv_b), kqv);  // [hv, n_tokens, n_head]
    b.Name(kqv, "kqv_mla", il);
    out = b.Permute(kqv, 0, 2, 1, 3);  // [hv, n_head, n_tokens]
    out = b.Cont(out, {K(hv * n_head), kT, kC1, kC1});
  }
  b.Expand(out);
  b.Name(out, "kqv_out", il);
  return b.MulMat(b.Global(l.wo), out);
}

// Each layer has the attention weights of the form the keys say: attn_kv_b without key_length_mla /
// value_length_mla (the older form), attn_k_b and attn_v_b with them; a layer with both or neither is
// refused naming its tensor (before the loader's missing / unused tensor errors, which would name
// only one side).
Status CheckDeepSeek2AttentionForm(const GgufFile& f, const HParams& hp) {
  const std::string mla_keys = hp.arch + ".attention.key_length_mla / value_length_mla";
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    const std::string kv_b = blk + "attn_kv_b.weight", k_b = blk + "attn_k_b.weight",
                      v_b = blk + "attn_v_b.weight";
    const bool has_kv_b = f.FindTensor(kv_b) != nullptr;
    const char* absorbed = f.FindTensor(k_b) ? "attn_k_b" : f.FindTensor(v_b) ? "attn_v_b" : nullptr;
    if (has_kv_b && absorbed)
      return f.TensorError(kv_b,
                           std::string("one attention form per layer: attn_kv_b (the older form) or ") +
                               "attn_k_b / attn_v_b (the absorbed one)",
                           std::string("both (") + blk + absorbed + ".weight too)");
    if (hp.is_mla() && has_kv_b)
      return f.TensorError(kv_b, "attn_k_b / attn_v_b (" + mla_keys + " are set: the absorbed form)",
                           "the older form's attn_kv_b");
    if (!hp.is_mla() && absorbed)
      return f.TensorError(blk + absorbed + ".weight",
                           "attn_kv_b (" + mla_keys + " are absent: the older form)",
                           "the absorbed form's " + std::string(absorbed));
    if (!has_kv_b && !absorbed)
      return f.TensorError(hp.is_mla() ? k_b : kv_b,
                           "attn_kv_b (the older form) or attn_k_b and attn_v_b (with " + mla_keys + ")",
                           "neither");
  }
  return Status::Ok();
}

}  // namespace

Status ReadDeepSeek2HParams(const GgufFile& f, HParams* hp) {
  const std::string p = hp->arch + ".";
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_vocab, GgufVocabularySize(f));
  // lite variants (DeepSeek-V2-Lite, GigaChat3-10B-A1.8B, Kanana-2-30B-A3B) have no q LoRA key
  const bool is_lite = hp->n_layer == 27 || hp->n_layer == 26 || (hp->n_layer == 48 && n_vocab == 128256);
  STOWAGE_ASSIGN_OR_RETURN(hp->n_layer_dense_lead, f.GetU32Or(p + "leading_dense_block_count", 0));
  if (hp->n_layer_dense_lead > hp->n_layer)
    return f.KeyError(p + "leading_dense_block_count",
                      "at most " + p + "block_count " + std::to_string(hp->n_layer),
                      std::to_string(hp->n_layer_dense_lead));
  if (!is_lite) {
    STOWAGE_ASSIGN_OR_RETURN(hp->n_lora_q, f.GetU32(p + "attention.q_lora_rank"));
  }
  STOWAGE_ASSIGN_OR_RETURN(hp->n_lora_kv, f.GetU32(p + "attention.kv_lora_rank"));
  if (hp->n_lora_kv == 0)
    return f.KeyError(p + "attention.kv_lora_rank", "a positive rank (the compressed KV width)", "0");
  STOWAGE_ASSIGN_OR_RETURN(hp->n_embd_head_k_mla_impl, f.GetU32Or(p + "attention.key_length_mla", 0));
  STOWAGE_ASSIGN_OR_RETURN(hp->n_embd_head_v_mla_impl, f.GetU32Or(p + "attention.value_length_mla", 0));
  if ((hp->n_embd_head_k_mla_impl == 0) != (hp->n_embd_head_v_mla_impl == 0))
    return f.KeyError(
        p + (hp->n_embd_head_k_mla_impl == 0 ? "attention.key_length_mla" : "attention.value_length_mla"),
        "a positive head size, set together with the other of key_length_mla / value_length_mla "
        "(llama_hparams::is_mla)",
        "0 or absent");
  STOWAGE_RETURN_IF_ERROR(CheckDeepSeek2AttentionForm(f, *hp));
  if (!hp->is_mla()) {  // the older form: MHA heads of qk_nope + n_rot and v, one per query head
    if (hp->n_head_kv != hp->n_head)
      return f.KeyError(
          p + "attention.head_count_kv",
          std::to_string(hp->n_head) + " (attention.head_count: the older form caches every head)",
          std::to_string(hp->n_head_kv));
    if (hp->n_embd_head_k <= hp->n_rot)
      return f.KeyError(p + "attention.key_length",
                        "more than rope.dimension_count " + std::to_string(hp->n_rot) +
                            " (a non-rotated part of at least 1)",
                        std::to_string(hp->n_embd_head_k));
    if ((hp->n_embd_head_k - hp->n_rot) % 2 != 0)
      return f.KeyError(p + "attention.key_length",
                        "rope.dimension_count " + std::to_string(hp->n_rot) +
                            " plus an even non-rotated part (ggml_rope_set_offset's offset is even)",
                        std::to_string(hp->n_embd_head_k));
  } else {
    // the cache row of the absorbed form: one KV head of kv_lora_rank + n_rot, V its first kv_lora_rank
    const uint32_t want_k = hp->n_lora_kv + hp->n_rot;
    if (hp->n_head_kv != 1)
      return f.KeyError(p + "attention.head_count_kv", "1 (MLA caches one compressed KV head)",
                        std::to_string(hp->n_head_kv));
    if (hp->n_embd_head_k != want_k)
      return f.KeyError(p + "attention.key_length",
                        std::to_string(want_k) + " (kv_lora_rank " + std::to_string(hp->n_lora_kv) +
                            " + rope.dimension_count " + std::to_string(hp->n_rot) + ")",
                        std::to_string(hp->n_embd_head_k));
    if (hp->n_embd_head_v != hp->n_lora_kv)
      return f.KeyError(p + "attention.value_length", std::to_string(hp->n_lora_kv) + " (kv_lora_rank)",
                        std::to_string(hp->n_embd_head_v));
    if (hp->n_embd_head_k_mla_impl <= hp->n_rot)
      return f.KeyError(p + "attention.key_length_mla",
                        "more than rope.dimension_count " + std::to_string(hp->n_rot) +
                            " (a non-rotated part of at least 1)",
                        std::to_string(hp->n_embd_head_k_mla_impl));
  }
  // no gating key: softmax for DeepSeek V2 / V2.5 files written before it, sigmoid for GLM 4.7 Lite
  STOWAGE_RETURN_IF_ERROR(ReadSharedExpertRouting(
      f, ((hp->n_layer == 47 || hp->n_layer == 48) && n_vocab == 154880) ? 2 : 1, hp));
  if (hp->n_layer_dense_lead < hp->n_layer && hp->n_expert == 0)
    return f.KeyError(p + "expert_count",
                      "a positive count (layers from leading_dense_block_count " +
                          std::to_string(hp->n_layer_dense_lead) + " on have experts)",
                      "0 or absent");
  // [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: the converter's 0.1 factor cancelled
  STOWAGE_ASSIGN_OR_RETURN(const float log_mul, f.GetF32Or(p + "rope.scaling.yarn_log_multiplier", 0.f));
  if (!std::isfinite(log_mul) || log_mul < 0.f)
    return f.KeyError(p + "rope.scaling.yarn_log_multiplier", "a finite multiplier >= 0",
                      std::to_string(log_mul));
  hp->rope_yarn_log_mul = log_mul / 0.1f;
  STOWAGE_ASSIGN_OR_RETURN(const float temp, f.GetF32Or(p + "attention.temperature_scale", 0.f));
  if (temp != 0.f)
    return Unimplemented(
        f.path() + ": key '" + p +
        "attention.temperature_scale': deepseek2's temperature tuning (mistral-large) is not "
        "supported yet (expected 0 or absent)");
  return Status::Ok();
}

Status LoadDeepSeek2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "deepseek2");
  LoadEmbeddingsAndOutput(t, w);  // output.weight, else token_embd (tied)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    l.attn_norm = t("attn_norm.weight", il);
    if (hp.n_lora_q > 0) l.attn_q_a_norm = t("attn_q_a_norm.weight", il);
    l.attn_kv_a_norm = t("attn_kv_a_norm.weight", il);
    if (hp.n_lora_q > 0) {
      l.wq_a = t("attn_q_a.weight", il);
      l.wq_b = t("attn_q_b.weight", il);
    } else {
      l.wq = t("attn_q.weight", il);
    }
    l.wkv_a_mqa = t("attn_kv_a_mqa.weight", il);
    if (hp.is_mla()) {
      l.wk_b = t("attn_k_b.weight", il);
      l.wv_b = t("attn_v_b.weight", il);
    } else {
      l.wkv_b = t("attn_kv_b.weight", il);
    }
    l.wo = t("attn_output.weight", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    if (il < static_cast<int>(hp.n_layer_dense_lead)) {
      l.ffn_gate = t("ffn_gate.weight", il);
      l.ffn_down = t("ffn_down.weight", il);
      l.ffn_up = t("ffn_up.weight", il);
    } else {
      l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
      l.ffn_exp_probs_b = t("exp_probs_b.bias", il);
      l.ffn_down_exps = t("ffn_down_exps.weight", il);
      l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
      l.ffn_up_exps = t("ffn_up_exps.weight", il);
      l.ffn_gate_shexp = t("ffn_gate_shexp.weight", il);
      l.ffn_down_shexp = t("ffn_down_shexp.weight", il);
      l.ffn_up_shexp = t("ffn_up_shexp.weight", il);
    }
  }
  return wl.status();
}

// llama_model_deepseek2::graph (is_mla): inputs (embeddings, inp_pos, KQ_mask); per layer attn_norm,
// BuildMlaAttention, the last layer's output rows, ffn_inp, ffn_norm, the dense FFN ("ffn_out") or
// the experts ("ffn_moe_out") plus the shared experts ("ffn_shexp", "ffn_out"), "l_out"; the output.
// kq_scale: mscale^2 / sqrt(n_embd_head_k_mla), mscale = attn_factor (cancelled YaRN adjustment
// undone) * (1 + 0.1 * yarn_log_multiplier * ln(1 / freq_scale)).
Status BuildDeepSeek2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  const RopeConfig rc = MakeRopeConfig(m);
  const float ln_factor = std::log(1.0f / rc.freq_scale);
  const float attn_factor_org = rc.attn_factor * (1.0f + 0.1f * ln_factor);
  const float mscale = attn_factor_org * (1.0f + 0.1f * hp.rope_yarn_log_mul * ln_factor);
  const float kq_scale = mscale * mscale / std::sqrt(float(hp.n_embd_head_k_mla()));
  MoeFfnOptions moe;
  moe.gating = hp.expert_gating_func == 2 ? MoeGating::kSigmoid : MoeGating::kSoftmax;
  moe.norm_w = hp.expert_weights_norm;
  moe.w_scale = hp.expert_weights_scale;
  moe.fused_glu = true;
  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, m, false);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    const LayerWeights& l = w.layers[il];
    int inpSA = inpL;
    int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "attn_norm", il);
    cur = BuildMlaAttention(b, m, l, cur, inp_pos, kq_mask, rc, kq_scale, il);
    SkipUnusedOutputs(b, m, il, &cur, &inpSA);
    const int ffn_inp = b.Add(cur, inpSA);
    b.Name(ffn_inp, "ffn_inp", il);
    cur = BuildNorm(b, ffn_inp, l.ffn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
    b.Name(cur, "ffn_norm", il);
    cur = BuildLeadDenseMoeFfn(b, hp, l, cur, moe, "ffn_shexp", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    inpL = cur;
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
