// The model graph IR of the planner: plain C++ (no MLIR), mirroring a ggml compute graph.
//
// A ModelGraphs holds the global tensors (weights from the GGUF file, KV cache tensors) and two
// graphs named as llama.cpp names them (llama_context's gf_pp / n_splits_pp / n_splits_tg,
// llama-bench's pp / tg tests): `pp`, prompt processing (n_tokens = n_ubatch, a whole ubatch of the
// prompt at once), and `tg`, token generation (n_tokens = 1, one generated token), both built for the worst
// case n_kv = n_ctx, as llama.cpp reserves them (llama_init_from_model). For recurrent models (mamba) n_kv
// counts state cells (worst case max(1, n_seq_max)) and the ubatch is one sequence, as in llama.cpp's
// worst-case reserve. Shapes are DimExpr: affine in the symbols n_tokens, n_kv, kv_head and n_outputs (and,
// for interleaved sliding-window models, n_kv_swa and kv_head_swa of the SWA cache), so that the runtime can
// bind them per call while the plan stays static.
//
// GraphBuilder mirrors ggml's tensor constructors (ggml_mul_mat, ggml_view_3d, ggml_cpy, ...):
// result shapes, view strides and the `src` order follow ggml.h, and Expand() orders nodes as
// ggml_build_forward_expand does (depth-first, sources left to right, post-order), so node names
// ("attn_norm-0", "kq-0", "l_out-3") and node order match llama.cpp's graph and split counts can be
// compared with llama.cpp's.
//
// The placement (PlaceModel, place_model.h) fills the `placement` fields (buffer, offset, backend,
// cause); the plan exporter serializes everything.
//
// Ops and tensor types are the project's shared enums stowage::GgmlOp and stowage::GgmlType
// (runtime/include/stowage/runtime/ggml_ops.h, ggml_types.h), included here; manifest.h's
// planner::GgmlOp is an alias of the same type, so planner headers can be included in any order.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"

namespace stowage::planner {

/// Value = c + tokens*n_tokens + kv*n_kv + kv_head*kv_head + outputs*n_outputs
///         + kv_swa*n_kv_swa + kv_head_swa*kv_head_swa.
/// n_kv_swa and kv_head_swa are the SWA cache's own n_kv and kv_head (interleaved sliding-window
/// models, llama_kv_cache_iswa: the SWA layers' K/V views and KQ_mask_swa); 0 elsewhere.
struct DimExpr {
  int64_t c = 0, tokens = 0, kv = 0, kv_head = 0, outputs = 0, kv_swa = 0, kv_head_swa = 0;

  static DimExpr Const(int64_t v) { return {v, 0, 0, 0, 0}; }
  static DimExpr Tokens(int64_t k = 1) { return {0, k, 0, 0, 0}; }
  static DimExpr Kv(int64_t k = 1) { return {0, 0, k, 0, 0}; }
  static DimExpr KvHead(int64_t k = 1) { return {0, 0, 0, k, 0}; }
  static DimExpr Outputs(int64_t k = 1) { return {0, 0, 0, 0, k}; }
  static DimExpr KvSwa(int64_t k = 1) { return {0, 0, 0, 0, 0, k, 0}; }
  static DimExpr KvHeadSwa(int64_t k = 1) { return {0, 0, 0, 0, 0, 0, k}; }
  bool is_const() const {
    return tokens == 0 && kv == 0 && kv_head == 0 && outputs == 0 && kv_swa == 0 && kv_head_swa == 0;
  }
  DimExpr operator+(const DimExpr& o) const {
    return {
        c + o.c,           tokens + o.tokens,          kv + o.kv, kv_head + o.kv_head, outputs + o.outputs,
        kv_swa + o.kv_swa, kv_head_swa + o.kv_head_swa};
  }
  /// Scales by a constant.
  DimExpr operator*(int64_t k) const {
    return {c * k, tokens * k, kv * k, kv_head * k, outputs * k, kv_swa * k, kv_head_swa * k};
  }
  bool operator==(const DimExpr& o) const {
    return c == o.c && tokens == o.tokens && kv == o.kv && kv_head == o.kv_head && outputs == o.outputs &&
           kv_swa == o.kv_swa && kv_head_swa == o.kv_head_swa;
  }
  bool operator!=(const DimExpr& o) const { return !(*this == o); }
};

/// Concrete values of the symbols.
struct Bindings {
  int64_t n_tokens = 1, n_kv = 1, kv_head = 0, n_outputs = 1, n_kv_swa = 0, kv_head_swa = 0;
  int64_t Eval(const DimExpr& e) const {
    return e.c + e.tokens * n_tokens + e.kv * n_kv + e.kv_head * kv_head + e.outputs * n_outputs +
           e.kv_swa * n_kv_swa + e.kv_head_swa * kv_head_swa;
  }
};

using Shape = std::array<DimExpr, 4>;

/// llama.cpp's layer classes of a weight (llm_tensor_info layer, LLM_TENSOR_LAYER_*).
enum class LayerClass : uint8_t { kInput, kRepeating, kOutput };

enum class TensorKind : uint8_t { kWeight = 0, kKvCache = 1, kInput = 2, kIntermediate = 3, kSplitCopy = 4 };

/// A weight or KV cache tensor, shared by both graphs.
struct GlobalTensor {
  std::string name;  ///< GGUF name for weights ("blk.0.attn_q.weight"); "cache_k_l0" for KV
  TensorKind kind = TensorKind::kWeight;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nbytes = 0;
  uint64_t gguf_offset = 0;  ///< weights: absolute file offset of the data
  int layer = -1;            ///< -1: input layer; n_layer: output layer; else the block
  LayerClass layer_class = LayerClass::kRepeating;
  GgmlOp consumer_op = GgmlOp::NONE;  ///< the op that reads it (llm_tensor_info op; bias -> ADD)
  bool duplicated = false;            ///< requested again under another role (tied output, rope_freqs)
  /// A weight group (made by the compiler's stowage-fuse-mul-mat-qkv, never by the graph
  /// builders): the globals whose rows this weight holds, in order (weights of one type and ne0,
  /// ne2 = ne3 = 1; ne1 is the sum of theirs). It has no file data of its own (gguf_offset 0):
  /// PlanMemory lays its parts out back to back and the group is their union, or, for parts in
  /// the mapped file that are not adjacent there, a copy in an allocated buffer the loader fills.
  std::vector<int> parts;
  // Placement (filled by PlaceModel):
  int buffer = -1;
  uint64_t offset = 0;
};

/// One tensor of a graph.
struct Tensor {
  std::string name;
  TensorKind kind = TensorKind::kIntermediate;
  int global = -1;  ///< index into ModelGraphs::globals for weights and KV
  GgmlType type = GgmlType::F32;
  Shape ne{DimExpr::Const(1), DimExpr::Const(1), DimExpr::Const(1), DimExpr::Const(1)};
  GgmlOp op = GgmlOp::NONE;
  std::vector<int> srcs;  ///< graph tensor ids in ggml src order; -1 = absent optional src
  std::vector<int32_t> iparams;
  std::vector<float> fparams;
  int view_src = -1;                 ///< memory owner for views (RESHAPE/VIEW/PERMUTE/TRANSPOSE/CPY result)
  DimExpr view_offset;               ///< VIEW only: byte offset into view_src
  std::array<DimExpr, 3> view_nb{};  ///< VIEW only: nb1..nb3 in bytes
  int layer = -1;                    ///< il of the callback that named it (-1: none)
  bool is_output = false;            ///< graph output (result_output)
  // Placement (filled by PlaceModel):
  int backend = -1;
  std::string cause;
  int buffer = -1;
  uint64_t offset = 0;
};

struct Split {
  int backend = -1;
  int node_begin = 0, node_end = 0;         ///< indices into Graph::nodes
  std::vector<std::pair<int, int>> inputs;  ///< (source tensor, its copy in this backend)
};

struct Graph {
  std::string name;  ///< "pp" or "tg"
  int64_t max_tokens = 1, max_kv = 1, max_outputs = 1;
  int64_t max_kv_swa = 0;  ///< worst-case n_kv_swa: ContextConfig::n_ctx_swa (0 without a SWA cache)
  /// llama.cpp 2026 build_inp_embd builds both input paths into the graph (ggml_build_forward_select):
  /// besides inp_tokens, the vector-embeddings input "inp_embd", F32 [unread_embd_ne0, n_tokens], a
  /// graph input leaf that no node reads. ggml-alloc allocates every leaf first (after inp_tokens)
  /// and frees a tensor only after its last reader, so it holds its bytes for the whole graph. No
  /// tensor stands for it here (the runtime neither fills nor reads it); the memory planner reserves
  /// its bytes. 0: Feb 2025 graphs (one input path).
  int64_t unread_embd_ne0 = 0;
  std::vector<Tensor> tensors;
  std::vector<int> nodes;  ///< ggml graph order (op results, views included)
  std::vector<int> leafs;  ///< weights, KV caches, inputs
  std::vector<Split> splits;

  Bindings WorstCase() const { return {max_tokens, max_kv, 0, max_outputs, max_kv_swa, 0}; }
  /// Finds a tensor by name; -1 when absent.
  int Find(const std::string& name) const;
};

/// Hyper-parameters the graph builders read (llama.cpp llama_hparams subset), from GGUF keys
/// "<arch>.*" (llama.cpp llama-arch.cpp LLM_KV names).
struct HParams {
  std::string arch;
  uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  uint32_t n_embd_head_k = 0, n_embd_head_v = 0, n_rot = 0, n_ctx_train = 0;
  uint32_t n_expert = 0, n_expert_used = 0;
  float f_norm_eps = 1e-5f, f_norm_rms_eps = 1e-5f;
  float rope_freq_base = 10000.f, rope_freq_scale = 1.f;
  int rope_type = 0;  ///< 0 normal, 2 NEOX (llama_model_rope_type)
  float f_attention_scale = 0.f;
  float f_max_alibi_bias = 0.f;
  // MoE (qwen2moe): expert and shared-expert FFN widths; 0 = derived as llama.cpp load_tensors does
  uint32_t n_ff_exp = 0, n_ff_shexp = 0;
  // Sliding-window attention: 0 = none. phi3 (Feb 2025 semantics): every layer reads the
  // KQ_mask_swa input over the one full-size cache. Interleaved SWA (llama.cpp 2026
  // llama_hparams::swa_type STANDARD, load_swa_pattern; gemma2, gemma3): the layers with
  // is_swa(il) read KQ_mask_swa and keep their K/V in llama_kv_cache_iswa's SWA cache, the others
  // read KQ_mask over the base cache.
  uint32_t n_swa = 0;
  /// Per layer (n_layer entries, 1 = sliding-window layer) for interleaved-SWA architectures; empty
  /// for all others (phi3 included). Set from attention.sliding_window_pattern: an array of bools,
  /// else a period n (llama_hparams::set_swa_pattern: layer il is SWA when n == 0 or
  /// il % n < n - 1), else the architecture's default period (gemma2 2, gemma3 6).
  std::vector<uint8_t> swa_layers;
  /// Rope of the SWA layers (llama.cpp rope_freq_base_train_swa / rope_freq_scale_train_swa:
  /// rope.freq_base_swa, else gemma2 the global values, gemma3 10000 and 1).
  float rope_freq_base_swa = 10000.f, rope_freq_scale_swa = 1.f;
  /// Logit soft-capping, cap * tanh(x / cap) (gemma2): over the attention scores when
  /// attn_soft_cap (attn_logit_softcapping, default 50), over the output logits when
  /// f_final_logit_softcapping != 0 (final_logit_softcapping: gemma2 default 30, gemma3 0 = off).
  bool attn_soft_cap = false;
  float f_attn_logit_softcapping = 50.f, f_final_logit_softcapping = 0.f;
  // RoPE scaling (llama.cpp llama_hparams *_train fields and llama_context's cparams rules)
  int rope_scaling_type = 1;     ///< llama_rope_scaling_type: 0 none, 1 linear, 2 yarn, 3 longrope
  uint32_t n_ctx_orig_yarn = 0;  ///< rope.scaling.original_context_length, else n_ctx_train
  float rope_attn_factor = 1.f;  ///< rope.scaling.attn_factor
  bool rope_finetuned = false;   ///< rope.scaling.finetuned (granite: true by default; false = no rope)
  /// YaRN (llama.cpp 2026 llama_hparams rope_yarn_log_mul, yarn_beta_fast / yarn_beta_slow): the
  /// ramp's corrections and the log multiplier of the attention factor (llama_context's
  /// get_mscale); read for mistral3 (rope.scaling.yarn_log_multiplier / yarn_beta_fast /
  /// yarn_beta_slow), the defaults elsewhere as llama.cpp.
  float rope_yarn_log_mul = 0.f;
  float yarn_beta_fast = 32.f, yarn_beta_slow = 1.f;
  /// Attention temperature tuning (llama.cpp 2026 f_attn_temp_scale, n_attn_temp_floor_scale,
  /// f_attn_temp_offset; build_inp_attn_scale): Q is multiplied per token by
  /// log(floor((pos + offset) / floor_scale) + 1) * scale + 1 when the scale is not 0 (mistral3:
  /// attention.temperature_scale, floor_scale n_ctx_orig_yarn, offset 0).
  float f_attn_temp_scale = 0.f, f_attn_temp_offset = 0.f;
  uint32_t n_attn_temp_floor_scale = 0;
  /// Granite's multipliers (llama.cpp 2026 llama_model_granite): the token embeddings scaled by
  /// f_embedding_scale, the attention and FFN outputs by f_residual_scale before their residual
  /// adds, the logits by 1 / f_logit_scale; 0 = not applied (every other architecture).
  float f_embedding_scale = 0.f, f_residual_scale = 0.f, f_logit_scale = 0.f;
  /// deepseek2 (llama.cpp 2026 llama_model_deepseek2): multi-head latent attention. n_lora_q is
  /// attention.q_lora_rank (0: one attn_q instead of attn_q_a / attn_q_a_norm / attn_q_b), n_lora_kv
  /// attention.kv_lora_rank (the compressed KV width); n_embd_head_k_mla_impl / _v_mla_impl are
  /// attention.key_length_mla / value_length_mla, both set in files with the absorbed attn_k_b /
  /// attn_v_b (is_mla), both 0 in older files with attn_kv_b (heads then n_embd_head_k / _v wide).
  uint32_t n_lora_q = 0, n_lora_kv = 0, n_embd_head_k_mla_impl = 0, n_embd_head_v_mla_impl = 0;
  /// Leading dense layers (leading_dense_block_count: layers il < n_layer_dense_lead have a dense FFN,
  /// the others experts) and shared experts (expert_shared_count: one FFN n_ff_exp * count wide).
  uint32_t n_layer_dense_lead = 0, n_expert_shared = 0;
  /// NextN / MTP blocks after the n_layer trunk blocks (glm4moe nextn_predict_layers; llama.cpp 2026
  /// hparams.n_layer_nextn): the file's block_count is n_layer + n_layer_nextn; their tensors are
  /// skipped (TENSOR_SKIP without load_mtp) and they get no KV cache.
  uint32_t n_layer_nextn = 0;
  /// Expert routing (llama.cpp 2026 build_moe_ffn): gating function (expert_gating_func: 1 softmax,
  /// 2 sigmoid; llama_expert_gating_func_type), the selected weights normalized by their sum
  /// (expert_weights_norm) and scaled by expert_weights_scale (0 or 1: not scaled); group-limited
  /// top-k (expert_group_count > 1: the experts in n_expert_groups groups, the top n_group_used
  /// groups by the sum of their two best scores kept, expert_group_used_count).
  int expert_gating_func = 0;
  bool expert_weights_norm = false;
  float expert_weights_scale = 0.f;
  uint32_t n_expert_groups = 0, n_group_used = 0;
  // SSM (mamba)
  uint32_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_dt_rank = 0;
  bool ssm_dt_b_c_rms = false;  ///< ssm.dt_b_c_rms (FalconMamba): RMS norm on dt, B and C
  /// Values ReadHParams accepted but that make a model useless (e.g. an RMS norm epsilon of 1e30,
  /// which flattens every logit), one line each in GgufFile::KeyError's format, for the tools to
  /// print as warnings.
  std::vector<std::string> warnings;
  uint32_t n_embd_k_gqa() const { return n_embd_head_k * n_head_kv; }
  uint32_t n_embd_v_gqa() const { return n_embd_head_v * n_head_kv; }
  /// llama_hparams::is_mla: the absorbed MLA form (key_length_mla and value_length_mla set); its
  /// cache holds one K row of n_embd_head_k = kv_lora_rank + n_rot per token (n_head_kv 1) and no V.
  bool is_mla() const { return n_embd_head_k_mla_impl != 0 && n_embd_head_v_mla_impl != 0; }
  /// llama_hparams::n_embd_head_k_mla / _v_mla: the heads' sizes as MHA (the MLA keys, else the
  /// K / V head sizes).
  uint32_t n_embd_head_k_mla() const { return is_mla() ? n_embd_head_k_mla_impl : n_embd_head_k; }
  uint32_t n_embd_head_v_mla() const { return is_mla() ? n_embd_head_v_mla_impl : n_embd_head_v; }
  /// Recurrent conv-state width per cell (llama_hparams::n_embd_k_s): (d_conv - 1) * d_inner.
  uint32_t n_embd_k_s() const { return (ssm_d_conv > 0 ? ssm_d_conv - 1 : 0) * ssm_d_inner; }
  /// Recurrent ssm-state width per cell (llama_hparams::n_embd_v_s): d_state * d_inner.
  uint32_t n_embd_v_s() const { return ssm_d_state * ssm_d_inner; }
  /// True for architectures whose cache holds recurrent states instead of K/V (mamba).
  bool recurrent() const { return arch == "mamba"; }
  /// llama_hparams::is_swa: layer il is an interleaved sliding-window layer (see swa_layers).
  bool is_swa(uint32_t il) const { return il < swa_layers.size() && swa_layers[il] != 0; }
  /// Any interleaved SWA layer: the cache is split as llama_kv_cache_iswa (base + SWA cache).
  bool iswa() const {
    for (uint8_t s : swa_layers)
      if (s != 0) return true;
    return false;
  }
};

/// Context parameters that shape the graphs (llama_context_params subset).
/// Which llama.cpp a plan follows (plan-model --llamacpp-compat).
enum class LlamacppCompat {
  /// llama.cpp of February 2025 (build 4748, the seed's era; ../shared/golden/placement): its
  /// make_cpu_buft_list order and CPU_REPACK types, and Feb 2025's graphs for the architectures
  /// that predate 2026 (ArchSpec::llama2026 false).
  kFeb25,
  /// llama.cpp of 2026-09-28 (node-llama-cpp 3.22.1): the 2026 buffer-type list order (ACCEL, GPU
  /// host, CPU extra, CPU; make_cpu_buft_list), the 2026 CPU_REPACK types of llama.cpp-named CPU
  /// devices (ggml-cpu repack.cpp ggml_repack_get_optimal_repack_type), and llama.cpp 2026's graph
  /// rules (the unread inp_embd input, the SET_ROWS KV store, the F16 KQ mask, ggml-alloc's
  /// free-block rules) for every architecture.
  k2026,
};

struct ContextConfig {
  uint32_t n_ctx =
      0;  ///< 0: the model's n_ctx_train; padded to a multiple of 32, 256 with flash attention (as llama.cpp)
  uint32_t n_batch = 2048;
  uint32_t n_ubatch = 512;
  GgmlType type_k = GgmlType::F16;
  GgmlType type_v = GgmlType::F16;
  /// llama_context_params.flash_attn (-fa): attention as one FLASH_ATTN_EXT per layer over an
  /// untransposed V cache, and an F16 copy of KQ_mask (llama.cpp Feb 2025 llm_build_kqv).
  bool flash_attn = false;
  /// Sequences kept at once (llama_context_params n_seq_max, -np; 1 to 256). Recurrent models (mamba)
  /// get one state cell per sequence: their cache size is max(1, n_seq_max) instead of n_ctx. With
  /// several, llama.cpp 2026's sched_reserve sizes the graphs: tg of n_seq_max tokens and outputs,
  /// pp of min(n_ctx, n_ubatch) tokens rounded up to a multiple of n_seq_max (as many outputs as
  /// before the rounding).
  uint32_t n_seq_max = 1;
  /// llama_context_params.n_outputs_max: the most outputs (logit rows) one ubatch may ask for, and
  /// so the outputs of the pp graph llama.cpp 2026's sched_reserve sizes (min(n_tokens,
  /// n_outputs_max)); 0: n_batch, llama.cpp's default (llama-cli, llama-completion, llama-perplexity).
  /// llama-server sets it to its slots, n_parallel (server_output_limits, without speculative
  /// decoding). Feb 2025 has no such limit (the pp graph's outputs are its tokens).
  uint32_t n_outputs_max = 0;
  /// llama.cpp -kvu (llama_context_params.kv_unified): one KV cache of n_ctx cells shared by the
  /// sequences. Without it llama.cpp keeps one stream of GGML_PAD(n_ctx / n_seq_max, 256) cells per
  /// sequence, which ResolveContext refuses for n_seq_max > 1 (graphs with a stream dimension are
  /// not built).
  bool kv_unified = false;
  /// llama.cpp --swa-full (llama_context_params.swa_full): the SWA cache of an interleaved-SWA model
  /// gets n_ctx cells like the base cache instead of llama_kv_cache_iswa's
  /// GGML_PAD(min(n_ctx, n_swa * n_seq_max + n_ubatch), 256).
  bool swa_full = false;
  /// Resolved (ResolveContext): the cells of the SWA cache of an interleaved-SWA model
  /// (HParams::iswa), llama_kv_cache_iswa's size_swa = GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256)
  /// (kv_unified off, llama.cpp's default), n_ctx with swa_full; 0 for every other model.
  uint32_t n_ctx_swa = 0;
  /// The llama.cpp whose graphs and buffer-type rules the plan follows (ModelGraphs::llama2026 is
  /// set for every architecture with k2026).
  LlamacppCompat llamacpp_compat = LlamacppCompat::kFeb25;
};

struct ModelGraphs {
  HParams hp;
  ContextConfig cfg;  ///< resolved (n_ctx filled in and padded, n_ubatch <= n_batch, F32 states for mamba)
  std::vector<GlobalTensor> globals;
  Graph pp;  ///< prompt processing: n_tokens = min(n_ctx, n_ubatch)
  Graph tg;  ///< token generation: n_tokens = 1
  /// flash attention was asked for but ResolveContext turned it off (K and V head sizes differ).
  bool flash_attn_forced_off = false;
  /// The graphs follow llama.cpp 2026's (ArchSpec::llama2026, or cfg.llamacpp_compat k2026), not
  /// Feb 2025's: with flash attention its KQ masks are F16 inputs (BuildInpKqMask), and the memory plan
  /// follows ggml-alloc's free-block rules exactly (memory_plan.h).
  bool llama2026 = false;

  int FindGlobal(const std::string& name) const;
};

}  // namespace stowage::planner
