// One tensor table per architecture (see arch_tensors.h): names from llama.cpp LLM_TENSOR_NAMES,
// shapes, presence and branches from its load_tensors (Feb 2025), in the order the converter
// writes them.
#include "stowage/planner/arch_tensors.h"

namespace stowage::planner {
namespace {

using D = const TensorDims&;
using V = std::vector<int64_t>;
using S = TensorScope;
using R = TensorRole;
using W = TensorWhen;
constexpr bool kReq = true, kOpt = false;

// The tables are laid out one tensor a line: clang-format would break the shape lambdas apart.
// clang-format off

// token_embd and output_norm, which every architecture has.
void AddEmbeddings(std::vector<ArchTensor>& t) {
  t.push_back({"token_embd.weight", S::kInput, [](D d) { return V{d.n_embd, d.n_vocab}; }, kReq, GgmlOp::GET_ROWS,
               R::kMatrix, W::kAlways});
  t.push_back({"output_norm.weight", S::kOutput, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::MUL, R::kNorm,
               W::kAlways});
}

// output.weight: required (phi3, qwen2moe) or optional, absent meaning tied embeddings (llama,
// qwen2, mamba: llama.cpp then duplicates token_embd as the output).
ArchTensor Output(bool required) {
  return {"output.weight", S::kOutput, [](D d) { return V{d.n_embd, d.n_vocab}; }, required, GgmlOp::MUL_MAT,
          R::kMatrix, W::kAlways};
}

ArchTensor Norm(const char* name) { return {name, S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways}; }

// The attention of qwen2 and qwen2moe: q and o n_embd wide, k and v n_embd_v_gqa, required biases.
void AddQwen2Attention(std::vector<ArchTensor>& t) {
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_q.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_k.bias", S::kLayer, [](D d) { return V{d.n_embd_v_gqa}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_v.bias", S::kLayer, [](D d) { return V{d.n_embd_v_gqa}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
}

// The dense gated FFN (llama, qwen2, qwen3, gemma): gate, down, up.
void AddDenseFfn(std::vector<ArchTensor>& t, W when) {
  t.push_back({"ffn_gate.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, when});
  t.push_back({"ffn_down.weight", S::kLayer, [](D d) { return V{d.n_ff, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, when});
  t.push_back({"ffn_up.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, when});
}

// rope_freqs (llama 3.1+), or rope_factors_long/short for longrope scaling: n_rot / 2 each, every
// layer's (llama, mistral3).
void AddRopeFactors(std::vector<ArchTensor>& t) {
  t.push_back({"rope_freqs.weight", S::kEveryLayer, [](D d) { return V{d.n_rot / 2}; }, kOpt, GgmlOp::ROPE, R::kRopeFreqs, W::kNotLongRope});
  t.push_back({"rope_factors_long.weight", S::kEveryLayer, [](D d) { return V{d.n_rot / 2}; }, kOpt, GgmlOp::ROPE, R::kRopeLong, W::kLongRope});
  t.push_back({"rope_factors_short.weight", S::kEveryLayer, [](D d) { return V{d.n_rot / 2}; }, kOpt, GgmlOp::ROPE, R::kRopeShort, W::kLongRope});
}

// llama.cpp 2026 create_tensor_qkv (mistral3, smollm3): q, k, v, their optional biases of the
// projections' widths, then the output projection.
void AddProjectionQkv(std::vector<ArchTensor>& t) {
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_k_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_q.bias", S::kLayer, [](D d) { return V{d.n_embd_q}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_k.bias", S::kLayer, [](D d) { return V{d.n_embd_k_gqa}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_v.bias", S::kLayer, [](D d) { return V{d.n_embd_v_gqa}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd_q, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
}

// LLM_ARCH_LLAMA (and mixtral: merged experts when n_expert > 0).
std::vector<ArchTensor> LlamaTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  AddRopeFactors(t);
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_k_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd_q, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  // optional biases (shapes as llama.cpp: n_embd for q and o, n_embd_gqa for k and v)
  t.push_back({"attn_q.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_k.bias", S::kLayer, [](D d) { return V{d.n_embd_v_gqa}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_v.bias", S::kLayer, [](D d) { return V{d.n_embd_v_gqa}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"attn_output.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kDense);
  // optional MLP biases
  t.push_back({"ffn_gate.bias", S::kLayer, [](D d) { return V{d.n_ff}; }, kOpt, GgmlOp::ADD, R::kBias, W::kDense});
  t.push_back({"ffn_down.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::ADD, R::kBias, W::kDense});
  t.push_back({"ffn_up.bias", S::kLayer, [](D d) { return V{d.n_ff}; }, kOpt, GgmlOp::ADD, R::kBias, W::kDense});
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kMoe});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kMoe});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kMoe});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kMoe});
  return t;
}

// LLM_ARCH_MISTRAL3 and LLM_ARCH_GRANITE (llama.cpp 2026 load_arch_tensors, dense; the same): llama's
// layout with q/k/v biases of the projections' widths (create_tensor_qkv) and an optional
// attn_output bias. The fused attn_qkv that create_tensor_qkv also accepts, and the MoE branches
// (granite's with shared experts; ReadHParams refuses expert_count > 0), are not in the table.
std::vector<ArchTensor> Mistral3Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  AddRopeFactors(t);
  t.push_back(Norm("attn_norm.weight"));
  AddProjectionQkv(t);
  t.push_back({"attn_output.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kAlways);
  t.push_back({"ffn_gate.bias", S::kLayer, [](D d) { return V{d.n_ff}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ffn_down.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ffn_up.bias", S::kLayer, [](D d) { return V{d.n_ff}; }, kOpt, GgmlOp::ADD, R::kBias, W::kAlways});
  return t;
}

// LLM_ARCH_SMOLLM3 (llama.cpp 2026 llama_model_smollm3::load_arch_tensors): llama's layer without
// rope factors, attn_output or MLP biases; q/k/v biases of the projections' widths optional
// (create_tensor_qkv; its fused attn_qkv is not in the table).
std::vector<ArchTensor> SmolLM3Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  t.push_back(Norm("attn_norm.weight"));
  AddProjectionQkv(t);
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kAlways);
  return t;
}

// LLM_ARCH_QWEN2
std::vector<ArchTensor> Qwen2Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));  // tied embeddings (Qwen2-0.5B/1.5B)
  AddQwen2Attention(t);
  AddDenseFfn(t, W::kAlways);
  return t;
}

// LLM_ARCH_QWEN3: qwen2 without the q/k/v biases, heads of n_embd_head_k (attn_q n_embd_q wide) and
// a per-head RMS norm weight of Q and K (attn_k_norm, attn_q_norm: n_embd_head_k each).
std::vector<ArchTensor> Qwen3Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));  // tied embeddings (Qwen3-0.6B..4B)
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_k_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd_q, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back({"attn_q_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kAlways);
  return t;
}

// LLM_ARCH_QWEN3MOE (llama.cpp 2026 llama_model_qwen3moe::load_arch_tensors): create_tensor_qkv's
// q/k/v (optional biases; its fused attn_qkv is not in the table) and attn_output, qwen3's q/k norms,
// then the router and the routed experts of width n_ff_exp (no shared expert).
std::vector<ArchTensor> Qwen3MoeTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  t.push_back(Norm("attn_norm.weight"));
  AddProjectionQkv(t);
  t.push_back({"attn_k_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back({"attn_q_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAlways});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  return t;
}

// LLM_ARCH_QWEN2MOE: routed experts of width n_ff_exp and a shared expert of width n_ff_shexp,
// gated by ffn_gate_inp_shexp.
std::vector<ArchTensor> Qwen2MoeTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kReq));
  AddQwen2Attention(t);
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAlways});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_gate_inp_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAlways});
  t.push_back({"ffn_gate_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ffn_down_shexp.weight", S::kLayer, [](D d) { return V{d.n_ff_shexp, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ffn_up_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  return t;
}

// LLM_ARCH_PHI3: fused attn_qkv, fused up projection [n_embd, 2 * n_ff] (gate and up), LongRoPE
// factors of n_embd_head / 2. llama.cpp marks attn_qkv not required but has no separate q/k/v path
// for phi3 (a missing one crashes there); it is required here so the error is a clear message.
std::vector<ArchTensor> Phi3Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kReq));
  t.push_back({"rope_factors_long.weight", S::kEveryLayer, [](D d) { return V{d.n_embd / d.n_head / 2}; }, kOpt, GgmlOp::ROPE, R::kRopeLong, W::kAlways});
  t.push_back({"rope_factors_short.weight", S::kEveryLayer, [](D d) { return V{d.n_embd / d.n_head / 2}; }, kOpt, GgmlOp::ROPE, R::kRopeShort, W::kAlways});
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_qkv.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd + 2 * d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  t.push_back({"ffn_up.weight", S::kLayer, [](D d) { return V{d.n_embd, 2 * d.n_ff}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ffn_down.weight", S::kLayer, [](D d) { return V{d.n_ff, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  return t;
}

// LLM_ARCH_GEMMA: no output.weight (the output is always token_embd), heads of n_embd_head_k.
std::vector<ArchTensor> GemmaTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_k_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd_q, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kAlways);
  return t;
}

// LLM_ARCH_GEMMA2 / LLM_ARCH_GEMMA3 (llama.cpp 2026 llama_model_gemma2 / gemma3::load_arch_tensors):
// gemma's layout with RMS norms after the attention and after the FFN (post_attention_norm,
// post_ffw_norm: LLM_TENSOR_ATTN_POST_NORM, LLM_TENSOR_FFN_POST_NORM); gemma3 adds per-head q/k norms (n_embd_head_k each) and an optional output.weight
// (absent: token_embd, duplicated). gemma3's optional dense_2/dense_3 projections belong to the
// embedding model and are not in the table.
std::vector<ArchTensor> Gemma2Tensors(bool gemma3) {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  if (gemma3) t.push_back(Output(kOpt));
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_k_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_v.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_embd_v_gqa}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_embd_q, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back(Norm("post_attention_norm.weight"));
  if (gemma3) {
    t.push_back({"attn_k_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
    t.push_back({"attn_q_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  }
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kAlways);
  t.push_back(Norm("post_ffw_norm.weight"));
  return t;
}

// deepseek2 (llama.cpp 2026 llama_model_deepseek2::load_arch_tensors), in its creation order: MLA
// attention (q LoRA or attn_q; the compressed KV attn_kv_a_mqa of kv_lora_rank + n_rot; the absorbed
// attn_k_b / attn_v_b, or attn_kv_b in older files), the leading layers' dense FFN, the other
// layers' router, optional expert-score bias, experts and shared experts (n_ff_shexp = n_ff_exp *
// expert_shared_count). The fused ffn_gate_up_exps is not read.
std::vector<ArchTensor> DeepSeek2Tensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"attn_q_a_norm.weight", S::kLayer, [](D d) { return V{d.n_lora_q}; }, kReq, GgmlOp::MUL, R::kNorm, W::kQLora});
  t.push_back({"attn_kv_a_norm.weight", S::kLayer, [](D d) { return V{d.n_lora_kv}; }, kReq, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back({"attn_q_a.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_lora_q}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kQLora});
  t.push_back({"attn_q_b.weight", S::kLayer, [](D d) { return V{d.n_lora_q, d.n_head * d.n_embd_head_k_mla}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kQLora});
  t.push_back({"attn_q.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_head * d.n_embd_head_k_mla}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kNoQLora});
  t.push_back({"attn_kv_a_mqa.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_lora_kv + d.n_rot}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"attn_k_b.weight", S::kLayer, [](D d) { return V{d.n_embd_head_k_mla - d.n_rot, d.n_lora_kv, d.n_head}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kMla});
  t.push_back({"attn_v_b.weight", S::kLayer, [](D d) { return V{d.n_lora_kv, d.n_embd_head_v_mla, d.n_head}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kMla});
  t.push_back({"attn_kv_b.weight", S::kLayer, [](D d) { return V{d.n_lora_kv, d.n_head * (d.n_embd_head_k_mla - d.n_rot + d.n_embd_head_v_mla)}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kNotMla});
  t.push_back({"attn_output.weight", S::kLayer, [](D d) { return V{d.n_head * d.n_embd_head_v_mla, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back(Norm("ffn_norm.weight"));
  AddDenseFfn(t, W::kLeadDense);
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAfterLead});
  t.push_back({"exp_probs_b.bias", S::kLayer, [](D d) { return V{d.n_expert}; }, kOpt, GgmlOp::ADD, R::kRouter, W::kAfterLead});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_gate_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_down_shexp.weight", S::kLayer, [](D d) { return V{d.n_ff_shexp, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_up_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  return t;
}

// glm4moe (llama.cpp 2026 llama_model_glm4_moe::load_arch_tensors), in its creation order:
// create_tensor_qkv (optional q/k/v biases) and attn_output, optional q/k norms, attn_post_norm (the
// FFN's norm), the leading layers' dense FFN, the other layers' router, expert-score bias, experts
// and shared expert (n_ff_shexp = n_ff_exp * expert_shared_count); in the NextN / MTP blocks after
// the trunk also nextn.eh_proj / enorm / hnorm and the optional embed_tokens / shared_head_head /
// shared_head_norm (read and skipped, as llama.cpp without load_mtp).
std::vector<ArchTensor> Glm4MoeTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));
  t.push_back(Norm("attn_norm.weight"));
  AddProjectionQkv(t);
  t.push_back({"attn_q_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kOpt, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back({"attn_k_norm.weight", S::kLayer, [](D d) { return V{d.n_embd_q / d.n_head}; }, kOpt, GgmlOp::MUL, R::kNorm, W::kAlways});
  t.push_back(Norm("post_attention_norm.weight"));
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAfterLead});
  t.push_back({"exp_probs_b.bias", S::kLayer, [](D d) { return V{d.n_expert}; }, kReq, GgmlOp::ADD, R::kRouter, W::kAfterLead});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_gate_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_down_shexp.weight", S::kLayer, [](D d) { return V{d.n_ff_shexp, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  t.push_back({"ffn_up_shexp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_shexp}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAfterLead});
  AddDenseFfn(t, W::kLeadDense);
  t.push_back({"nextn.eh_proj.weight", S::kLayer, [](D d) { return V{2 * d.n_embd, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kNextN});
  t.push_back({"nextn.enorm.weight", S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::MUL, R::kNorm, W::kNextN});
  t.push_back({"nextn.hnorm.weight", S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::MUL, R::kNorm, W::kNextN});
  t.push_back({"nextn.embed_tokens.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_vocab}; }, kOpt, GgmlOp::GET_ROWS, R::kMatrix, W::kNextN});
  t.push_back({"nextn.shared_head_head.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_vocab}; }, kOpt, GgmlOp::MUL_MAT, R::kMatrix, W::kNextN});
  t.push_back({"nextn.shared_head_norm.weight", S::kLayer, [](D d) { return V{d.n_embd}; }, kOpt, GgmlOp::MUL, R::kNorm, W::kNextN});
  return t;
}

// gpt-oss (llama.cpp 2026 llama_model_openai_moe::load_arch_tensors), in its creation order:
// create_tensor_qkv (optional q/k/v biases), the attention sinks (one logit per head, read by the
// soft_max: GGML_OP_SCALE in llama.cpp's tensor info), the biased router and experts (the expert
// biases one row per expert, read by ADD_ID) of width expert_feed_forward_length.
std::vector<ArchTensor> GptOssTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kReq));
  t.push_back(Norm("attn_norm.weight"));
  t.push_back(Norm("post_attention_norm.weight"));
  AddProjectionQkv(t);
  t.push_back({"attn_sinks.weight", S::kLayer, [](D d) { return V{d.n_head}; }, kReq, GgmlOp::SCALE, R::kBias, W::kAlways});
  t.push_back({"ffn_gate_inp.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT, R::kRouter, W::kAlways});
  t.push_back({"ffn_gate_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_down_exps.weight", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"ffn_up_exps.weight", S::kLayer, [](D d) { return V{d.n_embd, d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kMatrix, W::kAlways});
  t.push_back({"attn_output.bias", S::kLayer, [](D d) { return V{d.n_embd}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ffn_gate_inp.bias", S::kLayer, [](D d) { return V{d.n_expert}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ffn_gate_exps.bias", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kBias, W::kAlways});
  t.push_back({"ffn_down_exps.bias", S::kLayer, [](D d) { return V{d.n_embd, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kBias, W::kAlways});
  t.push_back({"ffn_up_exps.bias", S::kLayer, [](D d) { return V{d.n_ff_exp, d.n_expert}; }, kReq, GgmlOp::MUL_MAT_ID, R::kBias, W::kAlways});
  return t;
}

// LLM_ARCH_MAMBA: ssm_a and ssm_d have no ".weight" suffix.
std::vector<ArchTensor> MambaTensors() {
  std::vector<ArchTensor> t;
  AddEmbeddings(t);
  t.push_back(Output(kOpt));  // tied embeddings, duplicated to allow offloading
  t.push_back(Norm("attn_norm.weight"));
  t.push_back({"ssm_in.weight", S::kLayer, [](D d) { return V{d.n_embd, 2 * d.ssm_d_inner}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ssm_conv1d.weight", S::kLayer, [](D d) { return V{d.ssm_d_conv, d.ssm_d_inner}; }, kReq, GgmlOp::SSM_CONV, R::kConv, W::kAlways});
  t.push_back({"ssm_conv1d.bias", S::kLayer, [](D d) { return V{d.ssm_d_inner}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ssm_x.weight", S::kLayer, [](D d) { return V{d.ssm_d_inner, d.ssm_dt_rank + 2 * d.ssm_d_state}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ssm_dt.weight", S::kLayer, [](D d) { return V{d.ssm_dt_rank, d.ssm_d_inner}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  t.push_back({"ssm_dt.bias", S::kLayer, [](D d) { return V{d.ssm_d_inner}; }, kReq, GgmlOp::ADD, R::kBias, W::kAlways});
  t.push_back({"ssm_a", S::kLayer, [](D d) { return V{d.ssm_d_state, d.ssm_d_inner}; }, kReq, GgmlOp::SSM_SCAN, R::kSsmA, W::kAlways});
  t.push_back({"ssm_d", S::kLayer, [](D d) { return V{d.ssm_d_inner}; }, kReq, GgmlOp::MUL, R::kSsmD, W::kAlways});
  t.push_back({"ssm_out.weight", S::kLayer, [](D d) { return V{d.ssm_d_inner, d.n_embd}; }, kReq, GgmlOp::MUL_MAT, R::kMatrix, W::kAlways});
  return t;
}
// clang-format on

}  // namespace

TensorDims UniformHeadDims(int64_t n_embd, int64_t n_vocab, int64_t n_ff, int64_t n_head, int64_t n_head_kv,
                           int64_t head_dim) {
  TensorDims d;
  d.n_embd = n_embd;
  d.n_vocab = n_vocab;
  d.n_ff = n_ff;
  d.n_head = n_head;
  d.n_head_kv = n_head_kv;
  d.n_embd_q = head_dim * n_head;
  d.n_embd_k_gqa = d.n_embd_v_gqa = head_dim * n_head_kv;
  d.n_rot = head_dim;
  return d;
}

const ArchTensor* ArchTensorTable::Find(std::string_view name) const {
  for (const ArchTensor& t : tensors)
    if (name == t.name) return &t;
  return nullptr;
}

const std::vector<ArchTensorTable>& ArchTensorTables() {
  static const std::vector<ArchTensorTable> kTables = {
      {"llama", LlamaTensors()},         {"qwen2", Qwen2Tensors()},        {"qwen2moe", Qwen2MoeTensors()},
      {"qwen3", Qwen3Tensors()},         {"phi3", Phi3Tensors()},          {"gemma", GemmaTensors()},
      {"mamba", MambaTensors()},         {"mistral3", Mistral3Tensors()},  {"smollm3", SmolLM3Tensors()},
      {"granite", Mistral3Tensors()},    {"gemma2", Gemma2Tensors(false)}, {"gemma3", Gemma2Tensors(true)},
      {"deepseek2", DeepSeek2Tensors()}, {"gpt-oss", GptOssTensors()},     {"qwen3moe", Qwen3MoeTensors()},
      {"glm4moe", Glm4MoeTensors()},
  };
  return kTables;
}

const ArchTensorTable* FindArchTensorTable(std::string_view arch) {
  for (const ArchTensorTable& t : ArchTensorTables())
    if (arch == t.arch) return &t;
  return nullptr;
}

bool Applies(const ArchTensor& t, const TensorDims& d, int il) {
  switch (t.when) {
    case TensorWhen::kAlways:
      return true;
    case TensorWhen::kDense:
      return d.n_expert == 0;
    case TensorWhen::kMoe:
      return d.n_expert > 0;
    case TensorWhen::kNotLongRope:
      return !d.longrope;
    case TensorWhen::kLongRope:
      return d.longrope;
    case TensorWhen::kQLora:
      return d.n_lora_q > 0;
    case TensorWhen::kNoQLora:
      return d.n_lora_q == 0;
    case TensorWhen::kMla:
      return d.mla;
    case TensorWhen::kNotMla:
      return !d.mla;
    case TensorWhen::kLeadDense:
      return il < 0 ? d.n_layer_dense_lead > 0 : il < d.n_layer_dense_lead;
    case TensorWhen::kAfterLead:
      return il < 0 || il >= d.n_layer_dense_lead;
    case TensorWhen::kNextN:
      return d.n_layer_trunk > 0 && (il < 0 || il >= d.n_layer_trunk);
  }
  return false;
}

std::string TensorName(const ArchTensor& t, int il) {
  return t.scope == TensorScope::kLayer ? "blk." + std::to_string(il) + "." + t.name : std::string(t.name);
}

void ForEachFileTensor(const ArchTensorTable& table, const TensorDims& d, int n_layer,
                       const TensorFileOptions& opts,
                       const std::function<void(const ArchTensor& t, int il, const std::string& name,
                                                const std::vector<int64_t>& ne)>& fn) {
  auto kept = [&](const ArchTensor& t, int il) {
    if (!Applies(t, d, il)) return false;
    if (t.scope == TensorScope::kOutput && t.role == TensorRole::kMatrix) return opts.output;
    if (t.role == TensorRole::kRopeFreqs || t.role == TensorRole::kRopeLong ||
        t.role == TensorRole::kRopeShort)
      return opts.rope_factors;
    return t.required || opts.other_optional;
  };
  for (const ArchTensor& t : table.tensors)
    if (t.scope != TensorScope::kLayer && kept(t, -1)) fn(t, -1, TensorName(t, -1), t.shape(d));
  for (int il = 0; il < n_layer; ++il)
    for (const ArchTensor& t : table.tensors)
      if (t.scope == TensorScope::kLayer && kept(t, il)) fn(t, il, TensorName(t, il), t.shape(d));
}

}  // namespace stowage::planner
