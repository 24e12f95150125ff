// Shared pieces of llama.cpp's llm_build_context (Feb 2025 src/llama.cpp): graph inputs,
// llm_build_norm, llm_build_ffn, llm_build_moe_ffn, llm_build_kv (+ kv_store, kqv), the output; and
// the pieces several build_<arch> / load_tensors cases repeat (attention weights, q/k/v + rope, the
// last layer's output rows, the llama/qwen2/qwen3 attention block).
#include <algorithm>
#include <cmath>

#include "arch.h"
#include "stowage/planner/model_graphs.h"

namespace stowage::planner {
namespace {
const DimExpr kT = DimExpr::Tokens(), kKV = DimExpr::Kv(), kC1 = DimExpr::Const(1);
DimExpr K(int64_t v) { return DimExpr::Const(v); }
}  // namespace

int CacheGlobal(const ModelGraphs& m, bool k, int il) {
  return m.FindGlobal((k ? "cache_k_l" : "cache_v_l") + std::to_string(il));
}

TensorDims DimsOf(const HParams& hp) {
  TensorDims d;
  d.n_embd = hp.n_embd;
  d.n_vocab = hp.n_vocab;
  d.n_ff = hp.n_ff;
  d.n_head = hp.n_head;
  d.n_head_kv = hp.n_head_kv;
  d.n_embd_q = int64_t(hp.n_embd_head_k) * hp.n_head;
  d.n_embd_k_gqa = hp.n_embd_k_gqa();
  d.n_embd_v_gqa = hp.n_embd_v_gqa();
  d.n_rot = hp.n_rot;
  d.n_expert = hp.n_expert;
  d.n_ff_exp = hp.n_ff_exp ? hp.n_ff_exp : (hp.n_expert_used ? hp.n_ff / hp.n_expert_used : 0);
  d.n_ff_shexp = hp.n_ff_shexp ? hp.n_ff_shexp : hp.n_ff;
  d.ssm_d_conv = hp.ssm_d_conv;
  d.ssm_d_inner = hp.ssm_d_inner;
  d.ssm_d_state = hp.ssm_d_state;
  d.ssm_dt_rank = hp.ssm_dt_rank;
  d.longrope = hp.rope_scaling_type == 3;
  d.n_lora_q = hp.n_lora_q;
  d.n_lora_kv = hp.n_lora_kv;
  d.n_embd_head_k_mla = hp.n_embd_head_k_mla();
  d.n_embd_head_v_mla = hp.n_embd_head_v_mla();
  d.n_layer_dense_lead = hp.n_layer_dense_lead;
  d.mla = hp.is_mla();
  if (hp.n_layer_nextn > 0) d.n_layer_trunk = hp.n_layer;
  return d;
}

TableLoader::TableLoader(WeightLoader& wl, const HParams& hp, const char* arch)
    : wl_(wl), hp_(hp), table_(FindArchTensorTable(arch)), dims_(DimsOf(hp)) {
  if (table_ == nullptr) wl_.Fail(Internal(std::string("no tensor table for architecture '") + arch + "'"));
}

int TableLoader::operator()(const char* name, int il) {
  const ArchTensor* t = table_ != nullptr ? table_->Find(name) : nullptr;
  if (t == nullptr) {
    wl_.Fail(Internal(std::string("the tensor table of ") + (table_ ? table_->arch : "?") + " has no '" +
                      name + "'"));
    return -1;
  }
  unsigned flags = t->required ? kRequired : kNotRequired;
  int layer = il;
  LayerClass cls = LayerClass::kRepeating;
  switch (t->scope) {
    case TensorScope::kInput:
      layer = -1, cls = LayerClass::kInput;
      break;
    case TensorScope::kOutput:
      layer = static_cast<int>(hp_.n_layer), cls = LayerClass::kOutput;
      break;
    case TensorScope::kLayer:
      break;
    case TensorScope::kEveryLayer:
      flags |= il != 0 ? unsigned{kDuplicated} : 0u;
      break;
  }
  return wl_.Create(TensorName(*t, il), t->shape(dims_), layer, cls, t->op, flags);
}

std::vector<int64_t> TableLoader::Shape(const char* name) const {
  const ArchTensor* t = table_ != nullptr ? table_->Find(name) : nullptr;
  return t != nullptr ? t->shape(dims_) : std::vector<int64_t>{};
}

void LoadEmbeddingsAndOutput(TableLoader& t, ModelWeights& w) {
  w.tok_embd = t("token_embd.weight");
  w.output_norm = t("output_norm.weight");
  const ArchTensor* output = t.table() != nullptr ? t.table()->Find("output.weight") : nullptr;
  if (output != nullptr) w.output = t("output.weight");
  WeightLoader& wl = t.loader();
  if (output == nullptr || (!output->required && w.output < 0 && wl.status().ok()))
    w.output = wl.Create("token_embd.weight", t.Shape("token_embd.weight"), t.n_layer(), LayerClass::kOutput,
                         GgmlOp::MUL_MAT, kDuplicated);
}

void LoadAttentionWeights(TableLoader& t, LayerWeights& l, int il) {
  l.attn_norm = t("attn_norm.weight", il);
  l.wq = t("attn_q.weight", il);
  l.wk = t("attn_k.weight", il);
  l.wv = t("attn_v.weight", il);
  l.wo = t("attn_output.weight", il);
}

void LoadQkvBiases(TableLoader& t, LayerWeights& l, int il) {
  l.bq = t("attn_q.bias", il);
  l.bk = t("attn_k.bias", il);
  l.bv = t("attn_v.bias", il);
}

void LoadProjectionQkv(TableLoader& t, LayerWeights& l, int il) {
  l.attn_norm = t("attn_norm.weight", il);
  l.wq = t("attn_q.weight", il);
  l.wk = t("attn_k.weight", il);
  l.wv = t("attn_v.weight", il);
  LoadQkvBiases(t, l, il);
  l.wo = t("attn_output.weight", il);
}

void LoadRopeFactors(TableLoader& t, const HParams& hp, LayerWeights& l, int il) {
  if (hp.rope_scaling_type == 3) {
    l.rope_long = t("rope_factors_long.weight", il);
    l.rope_short = t("rope_factors_short.weight", il);
  } else {
    l.rope_freqs = t("rope_freqs.weight", il);
  }
}

int BuildInpEmbd(GraphBuilder& b, int tok_embd) {
  const int inp_tokens = b.Input("inp_tokens", GgmlType::I32, {kT, kC1, kC1, kC1});
  const int cur = b.GetRows(b.Global(tok_embd), inp_tokens);
  b.Name(cur, "inp_embd", -1);
  return cur;
}

int BuildInpPos(GraphBuilder& b) { return b.Input("inp_pos", GgmlType::I32, {kT, kC1, kC1, kC1}); }

int BuildInpKqMask(GraphBuilder& b, const ModelGraphs& m, bool swa) {
  // llama.cpp 2026 build_attn_inp_kv_iswa: KQ_mask_swa spans the SWA cache's cells (n_kv_swa) when
  // the model has one, read by the layers for which UsesSwaCache holds; phi3's spans the one cache.
  const DimExpr n_kv = swa && m.cfg.n_ctx_swa > 0 ? DimExpr::KvSwa() : kKV;
  const char* name = swa ? "KQ_mask_swa" : "KQ_mask";
  // llama.cpp 2026 build_attn_inp_kq_mask: an F16 input with flash attention, else F32.
  if (m.llama2026)
    return b.Input(name, m.cfg.flash_attn ? GgmlType::F16 : GgmlType::F32, {n_kv, kT, kC1, kC1});
  // Feb 2025 build_inp_KQ_mask: flash_attn ? ggml_cast(mask, GGML_TYPE_F16) : mask
  const int mask = b.Input(name, GgmlType::F32, {n_kv, kT, kC1, kC1});
  return m.cfg.flash_attn ? b.Cast(mask, GgmlType::F16) : mask;
}

int BuildInpAttnScale(GraphBuilder& b) {
  return b.Input("inp_attn_scale", GgmlType::F32, {kC1, kC1, kT, kC1});
}

int BuildInpOutIds(GraphBuilder& b) {
  return b.Input("inp_out_ids", GgmlType::I32, {DimExpr::Outputs(), kC1, kC1, kC1});
}

int BuildNorm(GraphBuilder& b, int x, int w, int bias, NormKind kind, float eps, int il) {
  int cur = kind == NormKind::kRms ? b.RmsNorm(x, eps) : b.Norm(x, eps);
  if (w >= 0 || bias >= 0) b.Name(cur, "norm", il);
  if (w >= 0) {
    cur = b.Mul(cur, b.Global(w));
    if (bias >= 0) b.Name(cur, "norm_w", il);
  }
  if (bias >= 0) cur = b.Add(cur, b.Global(bias));
  return cur;
}

int BuildMatMulBias(GraphBuilder& b, int w, int bias, int x, const char* name, int il) {
  int cur = b.MulMat(b.Global(w), x);
  b.Name(cur, name, il);
  if (bias >= 0) {
    cur = b.Add(cur, b.Global(bias));
    b.Name(cur, name, il);
  }
  return cur;
}

int BuildFfn(GraphBuilder& b, int x, int up, int up_b, int gate, int gate_b, int down, int down_b, FfnOp op,
             FfnGate type_gate, int il) {
  int tmp = up >= 0 ? b.MulMat(b.Global(up), x) : x;
  b.Name(tmp, "ffn_up", il);
  if (up_b >= 0) {
    tmp = b.Add(tmp, b.Global(up_b));
    b.Name(tmp, "ffn_up_b", il);
  }
  int cur = tmp;
  if (gate >= 0) {
    cur = b.MulMat(b.Global(gate), type_gate == FfnGate::kSeq ? tmp : x);
    b.Name(cur, "ffn_gate", il);
    if (gate_b >= 0) {
      cur = b.Add(cur, b.Global(gate_b));
      b.Name(cur, "ffn_gate_b", il);
    }
  }
  switch (op) {
    case FfnOp::kSilu:
      cur = b.Silu(cur);
      b.Name(cur, "ffn_silu", il);
      break;
    case FfnOp::kGelu:
      cur = b.Gelu(cur);
      b.Name(cur, "ffn_gelu", il);
      break;
    case FfnOp::kGeglu:
    case FfnOp::kSiluGlu:
      // llama.cpp 2026 build_ffn, LLM_FFN_GELU / LLM_FFN_SILU with a parallel gate: one fused GEGLU /
      // SWIGLU (act(gate) * up) instead of the activation and the gate's MUL.
      if (gate < 0 || type_gate != FfnGate::kPar) return -1;
      cur = op == FfnOp::kGeglu ? b.GeGluSplit(cur, tmp) : b.SwiGluSplit(cur, tmp);
      b.Name(cur, op == FfnOp::kGeglu ? "ffn_geglu" : "ffn_swiglu", il);
      type_gate = FfnGate::kSeq;
      break;
    case FfnOp::kSwiglu: {
      // Project to 2*n_ff and split in halves: x0 = cont(view(cur, 0)), x1 = cont(view(cur, n_ff)).
      const Shape ne = b[cur].ne;
      if (!ne[0].is_const()) return -1;
      const int64_t split = ne[0].c / 2;
      const DimExpr nb1 = b.Nb(cur)[1];
      const int64_t el = static_cast<int64_t>(GetTypeTraits(b[cur].type).type_size);
      const int v0 = b.View2d(cur, K(split), ne[1], nb1, DimExpr{});
      int x0 = b.Cont(v0, b[v0].ne);
      const int v1 = b.View2d(cur, K(split), ne[1], nb1, K(split * el));
      const int x1 = b.Cont(v1, b[v1].ne);
      x0 = b.Silu(x0);
      b.Name(cur, "ffn_silu", il);  // llama.cpp names `cur` (the projection) here, not x0
      cur = b.Mul(x0, x1);
      b.Name(cur, "ffn_mul", il);
      break;
    }
  }
  if (type_gate == FfnGate::kPar) {
    cur = b.Mul(cur, tmp);
    b.Name(cur, "ffn_gate_par", il);
  }
  if (down >= 0) cur = b.MulMat(b.Global(down), cur);
  if (down_b >= 0) {
    b.Name(cur, "ffn_down", il);
    cur = b.Add(cur, b.Global(down_b));
  }
  return cur;
}

int BuildMoeFfn(GraphBuilder& b, int x, const LayerWeights& l, int64_t n_expert, int64_t n_expert_used,
                const MoeFfnOptions& o, int il) {
  const DimExpr n_embd = b[x].ne[0], n_tokens = b[x].ne[1];
  int logits = b.MulMat(b.Global(l.ffn_gate_inp), x);  // [n_expert, n_tokens]
  b.Name(logits, "ffn_moe_logits", il);
  if (l.ffn_gate_inp_b >= 0) {  // gpt-oss's router bias
    logits = b.Add(logits, b.Global(l.ffn_gate_inp_b));
    b.Name(logits, "ffn_moe_logits_biased", il);
  }
  const int probs = o.gating == MoeGating::kSigmoid         ? b.Sigmoid(logits)
                    : o.gating == MoeGating::kSoftmaxWeight ? logits
                                                            : b.SoftMax(logits);  // [n_expert, n_tokens]
  b.Name(probs, "ffn_moe_probs", il);
  int selection_probs = probs;
  if (o.exp_probs_b >= 0) {  // DeepSeek-V3's selection bias; the weights stay unbiased
    selection_probs = b.Add(probs, b.Global(o.exp_probs_b));
    b.Name(selection_probs, "ffn_moe_probs_biased", il);
  }
  if (o.n_expert_groups > 1) {  // keep the experts of the n_group_used best groups
    const DimExpr n_groups = K(o.n_expert_groups), per_group = K(n_expert / o.n_expert_groups);
    const int groups = b.Reshape(selection_probs, {per_group, n_groups, n_tokens, kC1});
    int scores = b.TopK(groups, 2);  // [2, n_groups, n_tokens]
    scores = b.GetRows(b.Reshape(groups, {kC1, per_group, n_groups, n_tokens}),
                       scores);                                              // [1, 2, n_groups, n_tokens]
    scores = b.SumRows(b.Reshape(scores, {K(2), n_groups, n_tokens, kC1}));  // [1, n_groups, n_tokens]
    scores = b.Reshape(scores, {n_groups, n_tokens, kC1, kC1});
    const int kept_groups = b.TopK(scores, static_cast<int>(o.n_group_used));  // [n_group_used, n_tokens]
    b.Name(kept_groups, "ffn_moe_group_topk", il);
    const int kept = b.GetRows(groups, kept_groups);  // [per_group, n_group_used, n_tokens]
    selection_probs = b.SetRows(b.Fill(groups, -INFINITY), kept, kept_groups);
    selection_probs = b.Reshape(selection_probs, {K(n_expert), n_tokens, kC1, kC1});
    b.Name(selection_probs, "ffn_moe_probs_masked", il);
  }
  const int selected = b.TopK(selection_probs, static_cast<int>(n_expert_used));  // [n_expert_used, n_tokens]
  b.Name(b[selected].srcs[0], "ffn_moe_argsort", il);
  b.Name(selected, "ffn_moe_topk", il);
  int weights =
      b.GetRows(b.Reshape(probs, {kC1, K(n_expert), n_tokens, kC1}), selected);  // [1, n_used, n_tokens]
  b.Name(weights, "ffn_moe_weights", il);
  if (o.gating == MoeGating::kSoftmaxWeight) {  // the softmax over the chosen experts' logits
    weights = b.SoftMax(b.Reshape(weights, {K(n_expert_used), n_tokens, kC1, kC1}));
    weights = b.Reshape(weights, {kC1, K(n_expert_used), n_tokens, kC1});
    b.Name(weights, "ffn_moe_weights_softmax", il);
  }
  if (o.norm_w) {
    weights = b.Reshape(weights, {K(n_expert_used), n_tokens, kC1, kC1});
    int sum = b.SumRows(weights);  // [1, n_tokens]
    b.Name(sum, "ffn_moe_weights_sum", il);
    if (o.fused_glu) {  // llama.cpp 2026: no division by zero, F16's smallest normal at least
      sum = b.Clamp(sum, 0x1p-14f, INFINITY);
      b.Name(sum, "ffn_moe_weights_sum_clamped", il);
    }
    weights = b.Div(weights, sum);  // [n_expert_used, n_tokens]
    b.Name(weights, "ffn_moe_weights_norm", il);
    weights = b.Reshape(weights, {kC1, K(n_expert_used), n_tokens, kC1});
  }
  if (o.w_scale != 0.f && o.w_scale != 1.f) {
    weights = b.Scale(weights, o.w_scale);
    b.Name(weights, "ffn_moe_weights_scaled", il);
  }
  if (o.fused_glu) b.Expand(weights);  // llama.cpp 2026: "call early so that topk-moe can be used"
  const int cur = b.Reshape(x, {n_embd, kC1, n_tokens, kC1});
  int up = b.MulMatId(b.Global(l.ffn_up_exps), cur, selected);  // [n_ff, n_expert_used, n_tokens]
  b.Name(up, "ffn_moe_up", il);
  if (l.ffn_up_exps_b >= 0) {  // gpt-oss: the chosen experts' bias rows
    up = b.AddId(up, b.Global(l.ffn_up_exps_b), selected);
    b.Name(up, "ffn_moe_up_biased", il);
  }
  int gate = b.MulMatId(b.Global(l.ffn_gate_exps), cur, selected);  // [n_ff, n_expert_used, n_tokens]
  b.Name(gate, "ffn_moe_gate", il);
  if (l.ffn_gate_exps_b >= 0) {
    gate = b.AddId(gate, b.Global(l.ffn_gate_exps_b), selected);
    b.Name(gate, "ffn_moe_gate_biased", il);
  }
  const bool gelu = o.op == FfnOp::kGelu;
  int par = -1;        // [n_ff, n_expert_used, n_tokens]
  if (o.swiglu_oai) {  // LLM_FFN_SWIGLU_OAI_MOE: build_moe_ffn's constants
    par = b.SwiGluOai(gate, up, 1.702f, 7.0f);
    b.Name(par, "ffn_moe_swiglu_oai", il);
  } else if (o.fused_glu) {
    par = gelu ? b.GeGluSplit(gate, up) : b.SwiGluSplit(gate, up);
    b.Name(par, gelu ? "ffn_moe_geglu" : "ffn_moe_swiglu", il);
  } else {
    gate = gelu ? b.Gelu(gate) : b.Silu(gate);
    b.Name(gate, gelu ? "ffn_moe_gelu" : "ffn_moe_silu", il);
    par = b.Mul(up, gate);
    b.Name(par, "ffn_moe_gate_par", il);
  }
  int experts = b.MulMatId(b.Global(l.ffn_down_exps), par, selected);  // [n_embd, n_expert_used, n_tokens]
  b.Name(experts, "ffn_moe_down", il);
  if (l.ffn_down_exps_b >= 0) {
    experts = b.AddId(experts, b.Global(l.ffn_down_exps_b), selected);
    b.Name(experts, "ffn_moe_down_biased", il);
  }
  experts = b.Mul(experts, weights);
  if (o.fused_glu) {
    b.Name(experts, "ffn_moe_weighted", il);
    b.Expand(experts);
  }
  // aggregate experts: views [n_embd, n_tokens] with stride nb[2], offset i*nb[1]
  const auto nb = b.Nb(experts);
  std::vector<int> views;
  for (int64_t i = 0; i < n_expert_used; ++i) {
    views.push_back(b.View2d(experts, n_embd, n_tokens, nb[2], nb[1] * i));
    if (o.fused_glu) b.Expand(views.back());
  }
  int moe_out = views[0];
  for (int64_t i = 1; i < n_expert_used; ++i) moe_out = b.Add(moe_out, views[i]);
  if (n_expert_used == 1) moe_out = b.Cont(moe_out, b[moe_out].ne);  // avoid a non-contiguous result
  return moe_out;
}

Status ReadSharedExpertRouting(const GgufFile& f, int default_gating, HParams* hp) {
  const std::string p = hp->arch + ".";
  STOWAGE_ASSIGN_OR_RETURN(hp->n_ff_exp, f.GetU32(p + "expert_feed_forward_length"));
  if (hp->n_ff_exp == 0) return f.KeyError(p + "expert_feed_forward_length", "a positive width", "0");
  STOWAGE_ASSIGN_OR_RETURN(hp->n_expert_shared, f.GetU32(p + "expert_shared_count"));
  hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
  STOWAGE_ASSIGN_OR_RETURN(hp->expert_weights_scale, f.GetF32Or(p + "expert_weights_scale", 0.f));
  if (!std::isfinite(hp->expert_weights_scale))
    return f.KeyError(p + "expert_weights_scale", "a finite scale", "a NaN or infinite one");
  STOWAGE_ASSIGN_OR_RETURN(hp->expert_weights_norm, f.GetBoolOr(p + "expert_weights_norm", false));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t gating, f.GetU32Or(p + "expert_gating_func", 0));
  hp->expert_gating_func = gating == 0 ? default_gating : static_cast<int>(gating);
  if (hp->expert_gating_func != 1 && hp->expert_gating_func != 2)
    return f.KeyError(p + "expert_gating_func", "1 (softmax) or 2 (sigmoid)", std::to_string(gating));
  return Status::Ok();
}

int BuildLeadDenseMoeFfn(GraphBuilder& b, const HParams& hp, const LayerWeights& l, int cur, MoeFfnOptions o,
                         const char* shexp_name, int il) {
  if (il < static_cast<int>(hp.n_layer_dense_lead)) {
    cur = BuildFfn(b, cur, l.ffn_up, -1, l.ffn_gate, -1, l.ffn_down, -1, FfnOp::kSiluGlu, FfnGate::kPar, il);
  } else {
    o.exp_probs_b = l.ffn_exp_probs_b;
    o.n_expert_groups = hp.n_expert_groups;
    o.n_group_used = hp.n_group_used;
    const int moe_out = BuildMoeFfn(b, cur, l, hp.n_expert, hp.n_expert_used, o, il);
    b.Name(moe_out, "ffn_moe_out", il);
    if (l.ffn_up_shexp < 0) {
      cur = moe_out;
    } else {
      const int shexp = BuildFfn(b, cur, l.ffn_up_shexp, -1, l.ffn_gate_shexp, -1, l.ffn_down_shexp, -1,
                                 FfnOp::kSiluGlu, FfnGate::kPar, il);
      b.Name(shexp, shexp_name, il);
      cur = b.Add(moe_out, shexp);
    }
  }
  b.Name(cur, "ffn_out", il);
  return cur;
}

RopeConfig MakeRopeConfig(const ModelGraphs& m) {
  const HParams& hp = m.hp;
  RopeConfig rc;
  rc.n_dims = static_cast<int>(hp.n_rot);
  rc.mode = hp.rope_type;
  // llama.cpp 2026 llama_context's cparams: n_ctx_orig_yarn falls back to n_ctx_train; freq scale 1
  // when the scaling type is none; yarn_ext_factor 1 for yarn, else 0 (the hparams' -1 = unset).
  rc.n_ctx_orig = static_cast<int>(hp.n_ctx_orig_yarn != 0 ? hp.n_ctx_orig_yarn : hp.n_ctx_train);
  rc.freq_base = hp.rope_freq_base;
  rc.freq_scale = hp.rope_scaling_type == 0 ? 1.f : hp.rope_freq_scale;
  rc.ext_factor = hp.rope_scaling_type == 2 ? 1.f : 0.f;
  rc.attn_factor = 1.f;  // hparams.yarn_attn_factor
  if (rc.ext_factor != 0.f) {
    // YaRN's attention factor get_mscale(factor, mscale) / get_mscale(factor, log_mul) (with
    // rope.scaling.yarn_log_multiplier, mscale 1), else get_mscale(factor, 1); then cancelled by
    // 1 / (1 + 0.1 ln factor), which ggml's rope_yarn multiplies in again when ext_factor != 0.
    auto get_mscale = [](float scale, float mscale) {
      return scale <= 1.0f ? 1.0f : (0.1f * mscale * std::log(scale) + 1.0f);
    };
    const float factor = 1.0f / rc.freq_scale;
    // deepseek2: mscale = mscale_all_dims when that is not 1 (DeepSeek-V2-Lite's config)
    const float mscale = hp.arch == "deepseek2" && hp.rope_yarn_log_mul != 1.0f ? hp.rope_yarn_log_mul : 1.0f;
    rc.attn_factor = hp.rope_yarn_log_mul != 0.f
                         ? get_mscale(factor, mscale) / get_mscale(factor, hp.rope_yarn_log_mul)
                         : get_mscale(factor, 1.0f);
    rc.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  rc.attn_factor *= hp.rope_attn_factor;
  rc.beta_fast = hp.yarn_beta_fast;
  rc.beta_slow = hp.yarn_beta_slow;
  return rc;
}

RopeConfig MakeSwaRopeConfig(const ModelGraphs& m) {
  RopeConfig rc = MakeRopeConfig(m);
  rc.freq_base = m.hp.rope_freq_base_swa;
  rc.freq_scale = m.hp.rope_freq_scale_swa;
  return rc;
}

void BuildIswaMasks(GraphBuilder& b, const ModelGraphs& m, int* kq_mask, int* kq_mask_swa) {
  bool any_global = false;
  for (uint32_t il = 0; il < m.hp.n_layer; ++il) any_global = any_global || !m.hp.is_swa(il);
  *kq_mask = any_global ? BuildInpKqMask(b, m, false) : -1;
  *kq_mask_swa = m.hp.iswa() ? BuildInpKqMask(b, m, true) : -1;
}

int BuildRopeFactors(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l) {
  if (l.rope_freqs >= 0) return b.Global(l.rope_freqs);
  const uint32_t n_ctx_per_seq = m.cfg.n_ctx / std::max<uint32_t>(1, m.cfg.n_seq_max);
  const uint32_t n_ctx_orig = m.hp.n_ctx_orig_yarn != 0 ? m.hp.n_ctx_orig_yarn : m.hp.n_ctx_train;
  const int chosen = n_ctx_per_seq > n_ctx_orig ? l.rope_long : l.rope_short;
  return chosen >= 0 ? b.Global(chosen) : -1;
}

int BuildSoftCap(GraphBuilder& b, int x, float cap, const char* scaled, const char* tanh, const char* capped,
                 int il) {
  auto name = [&](int t, const char* n) {
    if (*n != '\0') b.Name(t, n, il);
  };
  int cur = b.Scale(x, 1.0f / cap);
  name(cur, scaled);
  cur = b.Tanh(cur);
  name(cur, tanh);
  cur = b.Scale(cur, cap);
  name(cur, capped);
  return cur;
}

namespace {

/// Feb 2025 llm_build_kv_store: K rows CPY'd into the cache at kv_head; V rows at kv_head with flash
/// attention, else V transposed at column kv_head.
template <typename KvHead>
void BuildKvStoreCpy(GraphBuilder& b, const ModelGraphs& m, int kcache, int vcache, int k_cur, int v_cur,
                     KvHead kv_head, int64_t k_row, int64_t v_row, int64_t v_el, int64_t kv_cells, int il) {
  const HParams& hp = m.hp;
  const int k_view = b.View1d(kcache, kT * hp.n_embd_k_gqa(), kv_head(k_row));
  b.Name(k_view, "k_cache_view", il);
  b.Expand(b.Cpy(k_cur, k_view));
  if (m.cfg.flash_attn) {
    const int v_view = b.View1d(vcache, kT * hp.n_embd_v_gqa(), kv_head(v_row));
    b.Name(v_view, "v_cache_view", il);
    b.Expand(b.Cpy(v_cur, v_view));
  } else {
    const int v_view = b.View2d(vcache, kT, K(hp.n_embd_v_gqa()), K(kv_cells * v_el), kv_head(v_el));
    const int vt = b.Transpose(v_cur);
    b.Name(v_view, "v_cache_view", il);
    b.Expand(b.Cpy(vt, v_view));
  }
}

/// The graph's input named `name` (I64 [ne0]), made on first use: llama.cpp 2026's KV index inputs
/// are one per cache and graph, read by every layer of that cache.
int KvIdxsInput(GraphBuilder& b, const std::string& name, DimExpr ne0) {
  const int id = b.FindInput(name);
  return id >= 0 ? id : b.Input(name, GgmlType::I64, {ne0, kC1, kC1, kC1});
}

}  // namespace

void BuildKvStoreSetRows(GraphBuilder& b, const ModelGraphs& m, int kcache, int vcache, int k_cur, int v_cur,
                         bool swa_cache, int64_t kv_cells) {
  const HParams& hp = m.hp;
  const int64_t n_k = hp.n_embd_k_gqa(), n_v = hp.n_embd_v_gqa();
  const bool fa = m.cfg.flash_attn;
  const std::string sfx = swa_cache ? "_swa" : "";
  // build_input_k_idxs / build_input_v_idxs: a cell index per token, per V element without flash
  // attention (the V cache is transposed: element j of token i goes to j * kv_size + cell).
  const int k_idxs = KvIdxsInput(b, "attn_inp_k_idxs" + sfx, kT);
  const int v_idxs =
      vcache >= 0 ? KvIdxsInput(b, "attn_inp_v_idxs" + sfx, fa ? kT : DimExpr::Tokens(n_v)) : -1;
  const int k_rows = b.Reshape(kcache, {K(n_k), K(kv_cells), kC1, kC1});
  b.Expand(b.SetRows(k_rows, b.Reshape(k_cur, {K(n_k), kT, kC1, kC1}), k_idxs));
  if (vcache < 0) return;
  // V heads that are a view of wider rows (phi3's fused attn_qkv): cpy_v's 2-D view of them (the
  // rows at the view's stride) with flash attention, else ggml_cont_2d.
  const bool v_view = b[v_cur].op == GgmlOp::VIEW;
  if (fa) {
    const int v_rows = b.Reshape(vcache, {K(n_v), K(kv_cells), kC1, kC1});
    const int v_src = v_view ? b.View2d(v_cur, K(n_v), kT, b[v_cur].view_nb[1], DimExpr{})
                             : b.Reshape(v_cur, {K(n_v), kT, kC1, kC1});
    b.Expand(b.SetRows(v_rows, v_src, v_idxs));
  } else {
    const int v_elems = b.Reshape(vcache, {kC1, K(n_v * kv_cells), kC1, kC1});
    const Shape rows = {K(n_v), kT, kC1, kC1};
    const int v_flat = b.Reshape(v_view ? b.Cont(v_cur, rows) : b.Reshape(v_cur, rows),
                                 {kC1, DimExpr::Tokens(n_v), kC1, kC1});
    b.Expand(b.SetRows(v_elems, v_flat, v_idxs));
  }
}

int BuildKv(GraphBuilder& b, const ModelGraphs& m, int wo, int wo_b, int k_cur, int v_cur, int q_cur,
            int kq_mask, float kq_scale, int il, int sinks) {
  const HParams& hp = m.hp;
  // The layer's cache and its symbols: the SWA cache (n_ctx_swa cells, n_kv_swa, kv_head_swa) for
  // a sliding-window layer of an interleaved-SWA model (UsesSwaCache), else n_ctx, n_kv, kv_head.
  const bool swa_cache = UsesSwaCache(m, static_cast<uint32_t>(il));
  const int64_t kv_cells = KvCacheCells(m, static_cast<uint32_t>(il));
  const DimExpr n_kv = swa_cache ? DimExpr::KvSwa() : kKV;
  auto kv_head = [swa_cache](int64_t k) { return swa_cache ? DimExpr::KvHeadSwa(k) : DimExpr::KvHead(k); };
  const int64_t hk = hp.n_embd_head_k, hv = hp.n_embd_head_v;
  const int64_t n_head = hp.n_head, n_head_kv = hp.n_head_kv;
  if (m.llama2026 && !b[v_cur].ne[1].is_const()) {
    // llama.cpp 2026 build_qkv hands build_attn V as heads: reshape_3d [hv, n_head_kv, n_tokens]
    v_cur = b.Reshape(v_cur, {K(hv), K(n_head_kv), b[v_cur].ne[1], kC1});
  }
  // these nodes are added to the graph together so that they are not reordered (fewer splits);
  // llama.cpp 2026 build_attn expands K last ("to enable rope fusion which directly writes into k-v
  // cache")
  b.Expand(q_cur);
  b.Expand(m.llama2026 ? v_cur : k_cur);
  b.Expand(m.llama2026 ? k_cur : v_cur);

  // llm_build_kv_store: K rows at kv_head; V rows at kv_head with flash attention, else V
  // transposed at column kv_head.
  const int kcache = b.Global(CacheGlobal(m, true, il));
  const int vcache = b.Global(CacheGlobal(m, false, il));
  const bool fa = m.cfg.flash_attn;
  const int64_t k_row = static_cast<int64_t>(RowSize(m.cfg.type_k, hp.n_embd_k_gqa()));
  const int64_t v_row = static_cast<int64_t>(RowSize(m.cfg.type_v, hp.n_embd_v_gqa()));
  const int64_t v_el = static_cast<int64_t>(GetTypeTraits(m.cfg.type_v).type_size);
  if (m.llama2026) {
    BuildKvStoreSetRows(b, m, kcache, vcache, k_cur, v_cur, swa_cache, kv_cells);
  } else {
    BuildKvStoreCpy(b, m, kcache, vcache, k_cur, v_cur, kv_head, k_row, v_row, v_el, kv_cells, il);
  }

  // llm_build_kqv. A 3-D view [e0, e1, e2] of a cache with strides s1, s2; llama.cpp 2026
  // (build_attn_mha over llama_kv_cache::get_k / get_v) views the cache per stream as [e0, e2, e1,
  // n_stream] (view_4d, one stream here, of stride s_stream) and permutes it (0, 2, 1, 3): the same
  // strides in two nodes. It views Q per stream too before permuting it.
  auto cache_view = [&](int cache, DimExpr e0, DimExpr e1, DimExpr e2, int64_t s1, int64_t s2,
                        int64_t s_stream) {
    if (!m.llama2026) return b.View3d(cache, e0, e1, e2, K(s1), K(s2), DimExpr{});
    return b.Permute(b.View(cache, {e0, e2, e1, kC1}, {K(s2), K(s1), K(s_stream)}, DimExpr{}), 0, 2, 1, 3);
  };
  const int64_t hk_row = static_cast<int64_t>(RowSize(m.cfg.type_k, hk));
  const int64_t hv_row = static_cast<int64_t>(RowSize(m.cfg.type_v, hv));
  int q = q_cur;
  if (m.llama2026) {
    const auto nb = b.Nb(q_cur);
    q = b.View(q_cur, b[q_cur].ne, {nb[1], nb[2], nb[3]}, DimExpr{});
  }
  q = b.Permute(q, 0, 2, 1, 3);
  b.Name(q, "q", il);
  const int k = cache_view(kcache, K(hk), n_kv, K(n_head_kv), k_row, hk_row, k_row * kv_cells);
  b.Name(k, "k", il);
  int cur = -1;
  if (fa) {
    // split cached v into n_head heads (not transposed)
    const int v = cache_view(vcache, K(hv), n_kv, K(n_head_kv), v_row, hv_row, v_row * kv_cells);
    b.Name(v, "v", il);
    // ggml_flash_attn_ext(q, k, v, kq_mask, kq_scale, f_max_alibi_bias, softcap) with
    // ggml_flash_attn_ext_set_prec(GGML_PREC_F32); the reshape is unnamed in llama.cpp. The
    // attention soft-cap (gemma2) is the kernel's logit_softcap parameter (build_attn_mha).
    const float softcap = hp.attn_soft_cap ? hp.f_attn_logit_softcapping : 0.0f;
    cur = b.FlashAttnExt(q, k, v, kq_mask, kq_scale, hp.f_max_alibi_bias, softcap,
                         /*prec=*/1, sinks >= 0 ? b.Global(sinks) : -1);  // GGML_PREC_F32
    cur = b.Reshape(cur, {K(hv * n_head), b[q_cur].ne[2], kC1, kC1});
  } else {
    int kq = b.MulMat(k, q);
    b.Name(kq, "kq", il);
    if (hp.attn_soft_cap)
      kq = BuildSoftCap(b, kq, hp.f_attn_logit_softcapping, "kq_scaled_1", "kq_tanh", "kq_scaled_2", il);
    kq = b.SoftMaxExt(kq, kq_mask, kq_scale, hp.f_max_alibi_bias, sinks >= 0 ? b.Global(sinks) : -1);
    b.Name(kq, "kq_soft_max_ext", il);
    // the transposed cache: element j of cell c at j * kv_cells + c
    const int64_t v_col = v_el * kv_cells;
    const int v = cache_view(vcache, n_kv, K(hv), K(n_head_kv), v_col, v_col * hv, v_col * hp.n_embd_v_gqa());
    b.Name(v, "v", il);
    const int kqv = b.MulMat(v, kq);
    b.Name(kqv, "kqv", il);
    const int merged = b.Permute(kqv, 0, 2, 1, 3);
    b.Name(merged, "kqv_merged", il);
    cur = b.Cont(merged, {K(hv * n_head), b[q_cur].ne[2], kC1, kC1});
    b.Name(cur, "kqv_merged_cont", il);
  }
  b.Expand(cur);
  if (wo >= 0) cur = b.MulMat(b.Global(wo), cur);
  if (wo_b >= 0) {
    b.Name(cur, "kqv_wo", il);
    cur = b.Add(cur, b.Global(wo_b));
  }
  b.Name(cur, "kqv_out", il);
  return cur;
}

void BuildQkv(GraphBuilder& b, const LayerWeights& l, int cur, int il, int* q, int* k, int* v) {
  *q = BuildMatMulBias(b, l.wq, l.bq, cur, "Qcur", il);
  *k = BuildMatMulBias(b, l.wk, l.bk, cur, "Kcur", il);
  *v = BuildMatMulBias(b, l.wv, l.bv, cur, "Vcur", il);
}

int BuildRopeHeads(GraphBuilder& b, int x, int64_t head_dim, int64_t n_heads, int inp_pos, int rope_factors,
                   const RopeConfig& rc, const char* name, int il) {
  return BuildNormRopeHeads(b, x, head_dim, n_heads, -1, 0.f, inp_pos, rope_factors, rc, name, il);
}

int BuildNormRopeHeads(GraphBuilder& b, int x, int64_t head_dim, int64_t n_heads, int head_norm, float eps,
                       int inp_pos, int rope_factors, const RopeConfig& rc, const char* name, int il) {
  int cur = b.Reshape(x, {K(head_dim), K(n_heads), kT, kC1});
  if (head_norm >= 0) {
    cur = BuildNorm(b, cur, head_norm, -1, NormKind::kRms, eps, il);
    b.Name(cur, std::string(name) + "_normed", il);
  }
  if (inp_pos >= 0) cur = b.RopeExt(cur, inp_pos, rope_factors, rc);
  b.Name(cur, name, il);
  return cur;
}

void SkipUnusedOutputs(GraphBuilder& b, const ModelGraphs& m, int il, int* cur, int* residual) {
  if (il != static_cast<int>(m.hp.n_layer) - 1) return;
  const int ids = BuildInpOutIds(b);
  *cur = b.GetRows(*cur, ids);
  *residual = b.GetRows(*residual, ids);
}

int BuildLlamaAttentionBlock(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l, int il, int inpL,
                             int inp_pos, int kq_mask, const RopeConfig& rc, int64_t head_dim, float kq_scale,
                             int* ffn_inp, int attn_scale) {
  const HParams& hp = m.hp;
  int inpSA = inpL;
  int cur = BuildNorm(b, inpL, l.attn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
  b.Name(cur, "attn_norm", il);
  // self-attention; rope freq factors for llama 3 (none for llama 2 and qwen2)
  const int rope_factors = BuildRopeFactors(b, m, l);
  int Q = -1, Kc = -1, V = -1;
  BuildQkv(b, l, cur, il, &Q, &Kc, &V);
  Q = BuildNormRopeHeads(b, Q, head_dim, hp.n_head, l.attn_q_norm, hp.f_norm_rms_eps, inp_pos, rope_factors,
                         rc, "Qcur", il);
  Kc = BuildNormRopeHeads(b, Kc, head_dim, hp.n_head_kv, l.attn_k_norm, hp.f_norm_rms_eps, inp_pos,
                          rope_factors, rc, "Kcur", il);
  if (attn_scale >= 0) {
    Q = b.Mul(Q, attn_scale);
    b.Name(Q, "Qcur_attn_temp_scaled", il);
  }
  cur = BuildKv(b, m, l.wo, l.bo, Kc, V, Q, kq_mask, kq_scale, il);
  SkipUnusedOutputs(b, m, il, &cur, &inpSA);
  if (hp.f_residual_scale != 0.f) cur = b.Scale(cur, hp.f_residual_scale);  // granite
  *ffn_inp = b.Add(cur, inpSA);
  b.Name(*ffn_inp, "ffn_inp", il);
  cur = BuildNorm(b, *ffn_inp, l.ffn_norm, -1, NormKind::kRms, hp.f_norm_rms_eps, il);
  b.Name(cur, "ffn_norm", il);
  return cur;
}

int BuildOutput(GraphBuilder& b, const ModelGraphs& m, const ModelWeights& w, int x, NormKind kind) {
  const float eps = kind == NormKind::kRms ? m.hp.f_norm_rms_eps : m.hp.f_norm_eps;
  int cur = BuildNorm(b, x, w.output_norm, w.output_norm_b, kind, eps, -1);
  b.Name(cur, "result_norm", -1);
  cur = b.MulMat(b.Global(w.output), cur);
  if (w.output_b >= 0) {
    b.Name(cur, "result_output_no_bias", -1);
    cur = b.Add(cur, b.Global(w.output_b));
  }
  // llama.cpp 2026 gemma2/gemma3: final logit soft-capping (unnamed steps)
  if (m.hp.f_final_logit_softcapping != 0.f)
    cur = BuildSoftCap(b, cur, m.hp.f_final_logit_softcapping, "", "", "", -1);
  if (m.hp.f_logit_scale != 0.f) cur = b.Scale(cur, 1.0f / m.hp.f_logit_scale);  // granite
  b.Name(cur, "result_output", -1);
  b[cur].is_output = true;
  b.Expand(cur);
  return cur;
}

}  // namespace stowage::planner
