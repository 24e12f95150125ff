// Building the pp and tg graphs (graph.h) of a GGUF model (llama.cpp's llama_model::load_tensors
// + the architecture's graph builder, from the metadata alone: weight data is never read).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Architectures with a graph builder, in the order error messages list them: llama (also
/// mixtral: llama with merged ffn_*_exps), qwen2, qwen2moe, qwen3, qwen3moe, mistral3, phi3, gemma, gemma2,
/// gemma3, mamba.
std::vector<std::string> SupportedArchitectures();

/// Reads hyper-parameters (llama.cpp LLM_KV keys of `general.architecture`) and validates them, so
/// that no plan is made that the runtime would refuse or compute NaN or flat logits with; the
/// one reader plan-model, stowage-run (planning on the fly), fit and stowage-opt's import share.
/// n_vocab is GgufVocabularySize's (gguf_vocab.h), which the tokenizer uses too. A model with a
/// vocabulary (tokenizer.ggml.tokens present, or tokenizer.ggml.model other than "none" /
/// "no_vocab") must also pass the runtime tokenizer's own load (Tokenizer::Validate): what
/// stowage-run's tokenizer refuses (unsupported or missing tokenizer.ggml.model, gpt2 without
/// merges, short scores or token_type, duplicate tokens, keys of the wrong type, ...) is refused
/// here with its message; a model without a vocabulary is planned from <arch>.vocab_size.
/// Errors: kNotFound (missing key, naming it), kUnimplemented (unknown architecture, listing the
/// supported ones; an unsupported tokenizer). Values refused in GgufFile::KeyError's format
/// ("<file>: offset <N>: key '<k>': expected <...>, found <...>"), naming the key at fault and the
/// values of the other keys its rule uses: embedding_length 0 or not a multiple of
/// attention.head_count; attention.head_count 0 (attention archs); attention.head_count_kv not a
/// divisor of head_count (llama.cpp n_gqa); key_length / value_length 0, value_length != the K
/// head size (build_llama/qwen2/phi3 assert it); rope.dimension_count != the head size on llama
/// (llama.cpp "invalid n_rot") and qwen2/qwen2moe/qwen3 (their builders assert it), 0, odd or above the
/// head size on any rope arch (ggml's ROPE rotates pairs of a head's dimensions; the CPU op asserts
/// it, the runtime refuses 0), the head size named with where it comes from ("the head size 8
/// (llama.embedding_length 32 / llama.attention.head_count 4...)" or "(...attention.key_length"));
/// rope.freq_base not finite or <= 0; rope.scaling.type unknown; rope.scaling.factor not finite or
/// < 0; rope.scaling.attn_factor not finite or <= 0; layer_norm(_rms)_epsilon not finite or < 0
/// (ggml's norms assert eps >= 0); attention.scale not finite or < 0; block_count 0 or above
/// llama.cpp's LLAMA_MAX_LAYERS (512; llama.cpp refuses it when it reads the per-layer keys,
/// load_hparams, get_key_or_arr: "n > N_MAX"); expert_used_count 0 with experts or above
/// expert_count; a mamba ssm.* size 0; gemma2's attention.sliding_window 0, a gemma2/gemma3
/// attention.sliding_window_pattern array not of block_count bools (or int32 / uint32),
/// attn_logit_softcapping / final_logit_softcapping / rope.freq_base_swa not finite or <= 0 (gemma3's
/// final cap may be 0: off); refused where llama.cpp runs them: a gemma2/gemma3
/// attention.sliding_window above context_length, a sliding_window_pattern period above
/// block_count, an expert_count on the dense qwen3, smollm3, gemma2 and gemma3. Accepted with a line
/// in HParams::warnings (llama.cpp runs them; no model has them): an epsilon above 1 or of 0 (a row
/// of zeros normalizes to 0/0 = NaN), rope.freq_base or rope.freq_base_swa below 1 (the frequencies
/// grow with the dimension). With `check_tokenizer` false
/// the tokenizer is not validated: for a caller that loaded it already (stowage-run's
/// Tokenizer::FromGguf, which refuses what Tokenizer::Validate refuses).
Result<HParams> ReadHParams(const GgufFile& gguf, bool check_tokenizer = true);

/// llama.cpp's LLAMA_MAX_LAYERS (llama-hparams.h): the most layers a model may have.
inline constexpr uint32_t kMaxLayers = 512;

/// The largest context (tokens) Stowage plans: the range of -c in plan-model and stowage-run.
inline constexpr uint32_t kMaxContextTokens = 1u << 24;

/// ggml's GGML_KQ_MASK_PAD in Feb 2025 (ggml.h): llama_init_from_model raises n_batch to it.
inline constexpr uint32_t kKqMaskPad = 64;

/// llama_kv_cache_get_padding (Feb 2025 src/llama.cpp): the multiple n_ctx and the per-call n_kv
/// are padded to, in cells: 256 with flash attention, else 32.
inline uint32_t KvPadding(const ContextConfig& cfg) { return cfg.flash_attn ? 256u : 32u; }

/// Resolves `cfg` in place as llama_init_from_model (Feb 2025) does: flash_attn is forced off when
/// the model's K and V head sizes differ (llama.cpp warns "flash_attn requires n_embd_head_k ==
/// n_embd_head_v - forcing off"); n_ctx 0 takes the model's n_ctx_train, then n_ctx is padded up to
/// a multiple of KvPadding (llama_kv_cache_get_padding); n_batch is min(n_batch, n_ctx), raised to kKqMaskPad
/// when below it (llama.cpp warns "n_batch is less than GGML_KQ_MASK_PAD - increasing to 64"), and n_ubatch
/// is clamped to n_batch. Interleaved sliding-window models (hp.iswa(), architectures that follow
/// llama.cpp 2026) have n_ctx padded to 256 as llama.cpp 2026's llama_context does, and their SWA
/// cache size in cfg->n_ctx_swa: llama_kv_cache_iswa's GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256),
/// n_ctx with swa_full (0 for other models). With cfg->llamacpp_compat k2026, as llama.cpp 2026's
/// llama_context: n_batch = min(n_ctx, n_batch) and n_ubatch = min(n_batch, n_ubatch) on the asked
/// n_ctx, then n_ctx padded to 256 whatever the attention, and no kKqMaskPad floor. Errors
/// (kInvalidArgument): n_ctx (given or the model's context_length) above kMaxContextTokens, naming `path`;
/// n_batch or n_ubatch 0.
Status ResolveContext(const HParams& hp, const std::string& path, ContextConfig* cfg);

/// A -ctk / -ctv value: the ggml type named `name` when it is one of the KV cache types llama.cpp
/// accepts (common/arg.cpp kv_cache_types: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; the
/// list ResolveContext checks). Errors: kInvalidArgument "expected a KV cache type (f32, f16, ...),
/// found 'NAME'".
Result<GgmlType> ParseKvCacheType(std::string_view name);

/// The cells of layer `il`'s KV cache in `m` (resolved): max(1, n_seq_max) state cells for a
/// recurrent model, cfg.n_ctx_swa for a sliding-window layer of an interleaved-SWA model (its
/// K/V live in the SWA cache), else cfg.n_ctx.
int64_t KvCacheCells(const ModelGraphs& m, uint32_t il);

/// True when layer `il` of `m` keeps its K/V in the SWA cache (llama_kv_cache_iswa's filter_swa:
/// hparams.is_swa(il)) and its attention reads the SWA symbols n_kv_swa / kv_head_swa and
/// KQ_mask_swa over that cache. Phi3's sliding window (one full cache) is not one.
inline bool UsesSwaCache(const ModelGraphs& m, uint32_t il) { return m.cfg.n_ctx_swa > 0 && m.hp.is_swa(il); }

/// Builds globals (weights with their role and consuming op, KV cache tensors), the "pp" graph
/// (n_tokens = min(n_ctx, n_ubatch), n_outputs = n_tokens) and the "tg" graph (n_tokens = 1),
/// both with n_kv = n_ctx (n_ctx padded to KvPadding), as llama.cpp reserves them. Each graph mirrors
/// llama.cpp's (Feb 2025) build_<arch> op for op with its node names. Recurrent models (mamba):
/// the cache holds F32 conv/ssm states, cache_k_l<il> / cache_v_l<il>, of max(1, n_seq_max) cells,
/// and n_kv counts cells. Where the graphs differ from llama.cpp's: KQ_mask's ne1 is n_tokens, not
/// padded to kKqMaskPad (64; the tg graph's mask is [n_kv, 1] where llama.cpp's is [n_kv, 64]); no LoRA or
/// control-vector nodes; with cfg.flash_attn the attention is llama.cpp's -fa graph (FLASH_ATTN_EXT,
/// untransposed V cache, F16 KQ_mask copy); ggml_top_k is ARGSORT + VIEW as in ggml of Feb 2025 (newer ggml
/// has a TOP_K op). Errors (one line, naming the file and tensor or key): a missing tensor, a wrong shape or
/// type
/// ("tensor 'blk.0.attn_q.weight' has wrong shape; expected [64, 64], got [64, 32]", "... has wrong
/// type; expected f32, got f16"), split-tensor MoE files (kUnimplemented), unknown architectures
/// (kUnimplemented, listing the supported ones), missing or inconsistent hyper-parameters
/// (llama.cpp's load_hparams rules, e.g. phi3 without attention.sliding_window, mamba with
/// ssm.inner_size != 2 * embedding_length). A tensor the architecture does not read is refused, as
/// llama.cpp's done_getting_tensors refuses it ("wrong number of tensors"): "<file>: offset <N>:
/// tensor 'outptu.weight': expected only tensors architecture llama reads, found one nothing reads
/// ..." (GgufFile::TensorError), or, for a block past block_count, "wrong number of tensors: tensor
/// 'blk.7...' belongs to block 7 but llama.block_count is 2".
Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const ContextConfig& cfg);

/// BuildModelGraphs from the hyper-parameters `hp` that ReadHParams(gguf) returned, for a caller
/// that read them already (planner::Plan): the metadata and the tokenizer are validated once per
/// planning run, not again here. Errors: BuildModelGraphs's, but ReadHParams's.
Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const HParams& hp, const ContextConfig& cfg);

}  // namespace stowage::planner
