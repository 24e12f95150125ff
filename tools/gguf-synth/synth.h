// Synthetic GGUF models: random weights (seeded, reproducible) with llama.cpp's metadata keys and
// tensor names and shapes, for every architecture Stowage supports, at any size. Tests and
// benchmarks use them; --header-only files at real sizes (Llama-3-405B, DeepSeek-V3-like 671B)
// keep the data region a sparse hole and cost no disk.
//
// Sources of the rules:
//   tensors            the planner's tensor table of the architecture
//                      (stowage/planner/arch_tensors.h: llama.cpp's names, load_tensors' shapes), in
//                      its file order; output.weight unless tied (the mamba-2.8b preset ties, gemma
//                      always does), the rope factors with rope_freqs, never the optional biases
//   metadata keys      llama.cpp LLM_KV_NAMES: general.architecture, general.name,
//                      general.file_type, <arch>.context_length, .embedding_length, .block_count,
//                      .feed_forward_length, .attention.head_count(_kv), .attention.key_length /
//                      value_length, .attention.layer_norm_rms_epsilon, .attention.sliding_window (phi3),
//                      .rope.dimension_count, .rope.freq_base, .vocab_size, .expert_count,
//                      .expert_used_count, .expert_feed_forward_length, .expert_shared_feed_forward_length,
//                      .rope.scaling.{type,factor,original_context_length,yarn_beta_fast,yarn_beta_slow,
//                      yarn_log_multiplier} and .attention.temperature_scale (mistral3) when asked for,
//                      .ssm.{conv_kernel,inner_size,state_size,time_step_rank}, tokenizer.ggml.*
//
// Tensor types (as llama.cpp's quantizer does, llama-quant.cpp): 1-D tensors (norms, biases,
// ssm_d), ssm_a, ssm_conv1d, ffn_gate_inp (the router) and rope_freqs stay F32; every other weight
// gets `weight_type`, falling back to F16 where ne0 is not a multiple of the type's block size.
// MXFP4 is llama-quantize's MXFP4_MOE (general.file_type 38): the expert stacks (ne2 > 1) MXFP4,
// every other matrix Q8_0 (token_embd and output too), so a dense architecture gets no MXFP4;
// with `pure` (llama-quantize --pure) every matrix gets MXFP4. QuantMix::kQ4_K_M (weight_type Q4_K,
// general.file_type 15) picks each matrix's type as llama-quantize Q4_K_M does (llama.cpp 2026
// llama-quant.cpp llama_tensor_get_type_impl and tensor_type_fallback, categories by name as
// tensor_get_category): output.weight (token_embd.weight when tied) Q6_K (Q8_0 where ne0 % 256);
// the attention-V-like matrices (attn_v, attn_qkv, attn_kv_b; the i-th of n) Q6_K where
// use_more_bits(i, n), Q5_K instead of Q4_K in a model llama.cpp types 70B (llama or qwen2 with 80
// layers and GQA), Q8_0 with 8 experts; attn_k Q8_0 and attn_output Q5_K with 8 experts; ffn_down*
// (dense, shared and expert stacks) Q6_K in the layers where use_more_bits(layer, block_count);
// every other matrix (token_embd, attn_q_a/q_b, attn_kv_a_mqa, attn_k_b, attn_v_b, ffn_gate/up*)
// Q4_K; then a type whose block does not divide ne0 falls back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
// Q8_0, then F16). use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
// Data is produced for F32, F16, BF16, Q8_0 and Q4_0 (reference quantizers in ggml's scheme:
// quantize_row_q8_0_ref / quantize_row_q4_0_ref) and MXFP4 (the CPU backend's QuantizeRowMXFP4,
// quantize_row_mxfp4_ref: the bytes llama-quantize writes); any other ggml type needs header_only
// (its bytes are a hole, i.e. all-zero blocks).
//
// Values: weights uniform in +-1/sqrt(ne0) (fan-in), norms 1 +- 0.05, biases +-0.02, ssm_a =
// -(1..d_state) per row (Mamba's A init, stored as -exp(A_log)), ssm_d = 1, rope_freqs = Llama-3.1
// scaling factors (deterministic, from rope_scaling_*). Each tensor draws from its own splitmix64
// stream seeded by (seed, tensor name), so a tensor's bytes do not depend on the others.
//
// Vocabulary: with `vocab_from` the tokenizer.* keys of that GGUF are copied and n_vocab becomes its
// token count (e.g. stories260K.gguf's SPM vocab); otherwise a generated SPM ("llama") vocab:
// <unk>, <s>, </s>, the byte tokens <0x00>..<0xFF>, then pieces "▁a", "▁b", ... up to n_vocab.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf_writer.h"
#include "stowage/runtime/status.h"

namespace stowage::synth {

/// How the matrices' types are chosen: kNone gives every matrix `weight_type` (MXFP4: MXFP4_MOE's
/// split); kQ4_K_M is llama-quantize's Q4_K_M (weight_type must be Q4_K; the rules above).
enum class QuantMix { kNone, kQ4_K_M };

/// Everything that defines a synthetic model. Zero means "derive the default" where noted.
struct ModelSpec {
  /// llama, qwen2, phi3, gemma, mamba, qwen2moe, qwen3, mistral3, smollm3, granite, gemma2, gemma3,
  /// qwen3moe, deepseek2, gpt-oss, glm4moe, or
  /// mixtral (written as architecture "llama" with merged expert tensors, as llama.cpp's Mixtral files are).
  std::string arch = "llama";
  std::string name;  ///< general.name; default "synthetic-<arch>"
  uint32_t n_layer = 2;
  uint32_t n_embd = 64;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 0;  ///< 0: n_embd / n_head
  uint32_t n_ff = 128;
  uint32_t n_vocab = 512;      ///< 3..4194304 for the generated vocab; ignored with vocab_from
  uint32_t n_ctx = 2048;       ///< <arch>.context_length
  uint32_t n_expert = 0;       ///< MoE archs: experts per layer (mixtral 8, qwen2moe/qwen3moe 4 by default)
  uint32_t n_expert_used = 0;  ///< MoE archs: experts per token (default 2)
  uint32_t n_ff_exp = 0;       ///< qwen2moe, qwen3moe: expert FFN width (default n_ff / n_expert_used)
  uint32_t n_ff_shexp = 0;     ///< qwen2moe: shared expert FFN width (default n_ff)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;  ///< no output.weight (gemma: always; mamba: the mamba-2.8b preset
                             ///< and the gguf-synth tool tie by default)
  bool rope_freqs = false;   ///< llama: add rope_freqs.weight with Llama-3.1 scaling factors;
                             ///< phi3: rope_factors_long/short.weight {hd/2} (LongRoPE; long
                             ///< 1 .. 4, short 1 .. 1.5, linear; llama.cpp uses long when n_ctx
                             ///< per sequence exceeds the training context)
  float rope_scaling_factor = 8.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  uint32_t rope_original_ctx = 8192;
  /// RoPE scaling keys (llama.cpp load_hparams), each written only when set: rope.scaling.type
  /// ("" = no key: llama.cpp's default "linear"), rope.scaling.factor (0 = no key),
  /// rope.scaling.original_context_length (0 = no key), and mistral3's
  /// rope.scaling.yarn_beta_fast / yarn_beta_slow (< 0 = no key) and yarn_log_multiplier (0 = no key).
  std::string rope_scaling;
  float rope_scale = 0.0f;
  uint32_t rope_scaling_orig_ctx = 0;
  float yarn_beta_fast = -1.0f, yarn_beta_slow = -1.0f, yarn_log_mul = 0.0f;
  /// deepseek2 (MLA; written with n_head_kv 1, head_dim as key_length_mla): attention.q_lora_rank
  /// (0: attn_q, no q LoRA), kv_lora_rank, the rope part of a head (rope.dimension_count) and
  /// value_length_mla (0: head_dim); attention.key_length / value_length are kv_lora_rank + rope_dim /
  /// kv_lora_rank (the cache row). leading_dense_block_count, expert_shared_count (experts
  /// expert_feed_forward_length = n_ff_exp wide, default n_ff / n_expert_used), expert_weights_scale
  /// (0: no key), expert_weights_norm, expert_gating_func (1 softmax, 2 sigmoid), expert_group_count /
  /// expert_group_used_count (0: no key) and the expert-score bias exp_probs_b.bias.
  uint32_t q_lora_rank = 32, kv_lora_rank = 32, mla_rope_dim = 8, mla_v_head_dim = 0;
  /// deepseek2 in the older form (files converted before the absorbed MLA): one attn_kv_b per layer
  /// instead of attn_k_b / attn_v_b, no key_length_mla / value_length_mla; head_count_kv n_head,
  /// key_length head_dim and value_length the v head (llama.cpp 2026 runs it as MHA).
  bool mla_legacy = false;
  uint32_t n_dense_lead = 1, n_expert_shared = 1, expert_gating_func = 2;
  uint32_t n_expert_groups = 0, n_group_used = 0;
  float expert_weights_scale = 2.5f;
  bool expert_weights_norm = true, exp_probs_b = true;
  /// glm4moe (which takes deepseek2's expert keys above, its bias always written): the rotated part of
  /// a head (rope.dimension_count; 0: head_dim / 2, GLM-4.5's partial_rotary_factor), per-head q/k
  /// norms (GLM-4.5 has them, GLM-4.5-Air not), q/k/v biases (both have them), and n_nextn NextN / MTP
  /// blocks after the n_layer trunk ones (nextn_predict_layers; block_count n_layer + n_nextn).
  uint32_t rope_dim = 0, n_nextn = 1;
  bool qk_norm = false, qkv_bias = true;
  /// mistral3: attention.temperature_scale (0 = no key: no temperature tuning).
  float attn_temp_scale = 0.0f;
  /// granite: logit_scale (always written for granite; llama.cpp requires it), residual_scale,
  /// embedding_scale and attention.scale (0 = no key). Defaults: Granite-3.3-8B's.
  float logit_scale = 16.0f, residual_scale = 0.22f, embedding_scale = 12.0f, attention_scale = 0.0078125f;
  /// phi3, gemma2, gemma3: <arch>.attention.sliding_window. convert_hf_to_gguf always writes it
  /// (Phi-3-mini-4k: 2047, 0 for Phi-4; Gemma-2: 4096; Gemma-3: 512 or 1024) and llama.cpp (Feb 2025
  /// load_hparams) refuses a phi3 file without it.
  uint32_t n_swa = 2047;
  bool swa_key = true;  ///< false omits the key (phi3 files converted before llama.cpp PR #8931)
  /// gemma2, gemma3: attention.sliding_window_pattern as a period (llama.cpp set_swa_pattern: every
  /// n-th layer global); 0 = no key (llama.cpp's defaults 2 and 6; the converters do not write it).
  uint32_t swa_period = 0;
  /// gemma2: attn_logit_softcapping and final_logit_softcapping (Gemma-2: 50 and 30, always
  /// written); gemma3: final_logit_softcapping when not 0 (Gemma-3 has none). final_softcap < 0:
  /// the architecture's default (gemma2 30, gemma3 0).
  float attn_softcap = 50.0f, final_softcap = -1.0f;
  /// gemma3: rope.freq_base_swa (the sliding-window layers' base; Gemma-3: 10000); 0 = no key.
  float rope_freq_base_swa = 10000.0f;
  uint32_t ssm_d_conv = 4;    ///< mamba
  uint32_t ssm_d_inner = 0;   ///< mamba: default 2 * n_embd
  uint32_t ssm_d_state = 16;  ///< mamba
  uint32_t ssm_dt_rank = 0;   ///< mamba: default ceil(n_embd / 16)
  GgmlType weight_type = GgmlType::F32;
  QuantMix mix = QuantMix::kNone;  ///< kQ4_K_M: llama-quantize Q4_K_M's per-tensor types (header_only)
  bool pure = false;  ///< MXFP4: every matrix MXFP4 (llama-quantize --pure), not MXFP4_MOE's split
  uint64_t seed = 1;
  bool header_only = false;  ///< data region left a sparse hole (any ggml type allowed)
  std::string vocab_from;    ///< GGUF whose tokenizer.* keys are copied ("" = generated vocab)
};

/// The architectures `arch` accepts, in the order of the messages ("llama, qwen2, ...").
const std::vector<std::string>& SupportedArchs();

/// Presets at real sizes: llama3-8b, llama3-70b, llama3-405b (126 layers, rope_freqs),
/// mixtral-8x7b, deepseek-v3-like, mamba-2.8b; weight type F16 unless the caller changes it, but for
/// deepseek-v3-like: DeepSeek-V3 671B (its config.json) as llama.cpp 2026's convert_hf_to_gguf writes
/// it (deepseek2, absorbed MLA with attn_k_b / attn_v_b, MTP layer dropped) and llama-quantize Q4_K_M
/// quantizes it (QuantMix::kQ4_K_M, so header_only): 61 layers of which the first 3 dense, n_embd
/// 7168, n_ff 18432, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128 + qk_rope 64, v 128,
/// 256 experts of 2048 (8 used, in 8 groups of which 4 used) and 1 shared, sigmoid gating with the
/// expert-score bias, weights normalized and scaled by 2.5, YaRN 40 over 4096 (beta 32 / 1, log
/// multiplier 0.1 as the converter writes it), rope base 10000, rms eps 1e-6, 129280 tokens,
/// n_ctx 163840; 1086 tensors, 671B parameters, 404.49 GB of tensor data.
/// Errors: kInvalidArgument naming the preset and listing the known ones.
Result<ModelSpec> Preset(std::string_view name);
const std::vector<std::string>& PresetNames();

/// Fills the derived defaults (head_dim, MoE counts, mamba sizes, name) and checks the spec:
/// known arch, positive sizes, n_embd % n_head, n_head % n_head_kv, n_expert_used <= n_expert,
/// a data type that can be generated unless header_only, QuantMix::kQ4_K_M only with weight_type
/// Q4_K. Errors: kInvalidArgument, one line.
Result<ModelSpec> Resolve(ModelSpec spec);

/// Adds the model's metadata and tensors (with generators, or holes when header_only) to `w`,
/// which must be empty. `spec` is resolved first. Errors: as Resolve; kIoError / kDataLoss when
/// vocab_from cannot be read.
Status BuildModel(const ModelSpec& spec, GgufWriter* w);

/// Sets spec->weight_type and spec->mix from a weight type name: "q4_K_M" (any case: Q4_K with
/// QuantMix::kQ4_K_M) or a ggml type name (ParseGgmlType, QuantMix::kNone). Errors: ParseGgmlType's.
Status SetWeightType(std::string_view name, ModelSpec* spec);

/// BuildModel + GgufWriter::WriteFile (atomic).
Status WriteModel(const ModelSpec& spec, const std::string& path);

// Building blocks, exposed for tests.
/// IEEE binary16 / bfloat16 bits of `f`, round to nearest even (ggml_fp32_to_fp16 / _bf16).
uint16_t Fp32ToFp16(float f);
uint16_t Fp32ToBf16(float f);
/// Reference quantizers in ggml's block layout: `n` floats (a multiple of 32) into n/32 blocks of
/// 34 bytes (Q8_0: fp16 d, 32 x int8) or 18 bytes (Q4_0: fp16 d, 16 bytes of nibbles).
void QuantizeQ8_0(const float* x, uint8_t* out, int64_t n);
void QuantizeQ4_0(const float* x, uint8_t* out, int64_t n);
/// Llama-3.1 rope scaling factors (n_rot / 2 values) as convert_hf_to_gguf.py computes them.
std::vector<float> Llama3RopeFactors(uint32_t n_rot, float freq_base, float factor, float low_freq_factor,
                                     float high_freq_factor, uint32_t original_ctx);

}  // namespace stowage::synth
