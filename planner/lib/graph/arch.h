// Internal: per-architecture weight tables (llama.cpp llama_model::load_tensors) and graph
// builders (llama.cpp Feb 2025 src/llama.cpp llm_build_context::build_<arch>), plus the shared
// pieces of llm_build_context they are made of.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model_loader.h"
#include "stowage/planner/arch_tensors.h"
#include "stowage/planner/graph_builder.h"

namespace stowage::planner {

/// llama.cpp's llama_layer: global ids of a block's weights, -1 when absent.
struct LayerWeights {
  int attn_norm = -1, attn_norm_b = -1;
  int wq = -1, wk = -1, wv = -1, wo = -1, wqkv = -1, bq = -1, bk = -1, bv = -1, bo = -1, bqkv = -1;
  // per-head RMS norm weights of Q and K before the rope (qwen3, gemma3)
  int attn_q_norm = -1, attn_k_norm = -1;
  // RMS norms of the attention and FFN outputs (gemma2, gemma3)
  int attn_post_norm = -1, ffn_post_norm = -1;
  int ffn_norm = -1, ffn_norm_b = -1;
  int ffn_gate = -1, ffn_up = -1, ffn_down = -1, ffn_gate_b = -1, ffn_up_b = -1, ffn_down_b = -1;
  // mixture of experts (merged ffn_*_exps tensors) and the shared expert (qwen2moe)
  int ffn_gate_inp = -1, ffn_gate_exps = -1, ffn_up_exps = -1, ffn_down_exps = -1;
  // gpt-oss: the router's and the experts' biases (one row per expert: ADD_ID) and the attention
  // sinks (one logit per head)
  int ffn_gate_inp_b = -1, ffn_gate_exps_b = -1, ffn_up_exps_b = -1, ffn_down_exps_b = -1;
  int attn_sinks = -1;
  int ffn_gate_inp_shexp = -1, ffn_gate_shexp = -1, ffn_up_shexp = -1, ffn_down_shexp = -1;
  // deepseek2's MLA (llama.cpp llama_layer wq_a, wq_b, attn_q_a_norm, wkv_a_mqa, attn_kv_a_norm,
  // wk_b, wv_b; wkv_b in files of the older form) and the experts' selection bias (exp_probs_b.bias)
  int wq_a = -1, wq_b = -1, attn_q_a_norm = -1, wkv_a_mqa = -1, attn_kv_a_norm = -1, wk_b = -1, wv_b = -1;
  int wkv_b = -1;
  int ffn_exp_probs_b = -1;
  // rope frequency factors: rope_freqs (llama 3.1), or rope_factors_long/short (longrope, phi3)
  int rope_freqs = -1, rope_long = -1, rope_short = -1;
  // mamba
  int ssm_in = -1, ssm_conv1d = -1, ssm_conv1d_b = -1, ssm_x = -1, ssm_dt = -1, ssm_dt_b = -1;
  int ssm_a = -1, ssm_d = -1, ssm_out = -1;
};

struct ModelWeights {
  int tok_embd = -1, output_norm = -1, output_norm_b = -1, output = -1, output_b = -1;
  std::vector<LayerWeights> layers;
};

/// The hyper-parameters of the tensor tables (arch_tensors.h) from the model's metadata: the
/// widths load_tensors uses (qwen2moe: n_ff_exp else n_ff / n_expert_used, n_ff_shexp else n_ff;
/// longrope when rope.scaling.type is longrope).
TensorDims DimsOf(const HParams& hp);

/// Creates an architecture's weights from its tensor table (arch_tensors.h), in the order the
/// loader asks for them (llama.cpp load_tensors' order, which fixes the global ids). Errors are kept
/// in the WeightLoader's status(): the WeightLoader's own, and an internal error for an
/// architecture or tensor name the tables do not have.
class TableLoader {
 public:
  TableLoader(WeightLoader& wl, const HParams& hp, const char* arch);
  /// WeightLoader::Create of table entry `name` with the table's shape, presence and consuming op:
  /// kInput tensors in layer -1 (LayerClass::kInput), kOutput in layer n_layer (kOutput), kLayer
  /// ones as "blk.<il>.<name>" in layer il (kRepeating), kEveryLayer ones under their global name
  /// in layer il, kDuplicated for il > 0. Returns the global id, or -1 when absent and optional.
  int operator()(const char* name, int il = -1);
  /// The shape of table entry `name` (empty when the table has no such entry).
  std::vector<int64_t> Shape(const char* name) const;
  const ArchTensorTable* table() const { return table_; }
  /// The model's n_layer (the output layer's index).
  int n_layer() const { return static_cast<int>(hp_.n_layer); }
  WeightLoader& loader() { return wl_; }

 private:
  WeightLoader& wl_;
  const HParams& hp_;
  const ArchTensorTable* table_;
  TensorDims dims_;
};

using LoadWeightsFn = Status (*)(WeightLoader& wl, const HParams& hp, ModelWeights& w);
using BuildGraphFn = Status (*)(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);

/// One supported architecture: its GGUF name (general.architecture), rope type
/// (llama.cpp llama_model_rope_type: -1 none, 0 normal, 2 NEOX), loader and graph builder, and
/// whether the builder follows llama.cpp 2026's graphs (sets Graph::unread_embd_ne0) rather than
/// Feb 2025's.
struct ArchSpec {
  const char* name;
  int rope_type;
  LoadWeightsFn load;
  BuildGraphFn build;
  bool llama2026 = false;
};

/// The table of supported architectures, in the order they are listed to users.
const std::vector<ArchSpec>& Architectures();

// Loaders (llama.cpp load_tensors cases) and builders (llm_build_context::build_<arch>).
Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildLlamaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// What the llama-style graphs of llama.cpp 2026 (mistral3, smollm3) add to build_llama's.
struct LlamaGraphOptions {
  /// smollm3's n_no_rope_layer_step: layers with (il + 1) % step == 0 have no rope (0: all do).
  int no_rope_layer_step = 0;
  /// mistral3 / llama 4 temperature tuning: Q times the inp_attn_scale input (BuildInpAttnScale,
  /// built after inp_pos as build_inp_attn_scale).
  bool attn_temperature = false;
  /// granite's rope switch (rope.scaling.finetuned false: no rope in any layer, no inp_pos).
  bool rope = true;
};
/// build_llama's graph (BuildLlamaAttentionBlock, the dense FFN or mixtral's MoE, the output) with
/// the options above; LlamaGraphOptions{} is BuildLlamaGraph. In the 2026 graphs
/// (ModelGraphs::llama2026: llama with --llamacpp-compat 2026, always mistral3, granite, smollm3) the
/// dense FFN is llama.cpp 2026 build_ffn's LLM_FFN_SILU with a parallel gate, one fused SWIGLU
/// (FfnOp::kSiluGlu) instead of Feb 2025's SILU and MUL.
Status BuildLlamaStyleGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w,
                            const LlamaGraphOptions& o);
Status LoadQwen2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildQwen2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
Status LoadQwen2MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildQwen2MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// qwen3's graph is BuildQwen2Graph (see arch_qwen3.cpp).
Status LoadQwen3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
/// qwen3moe (llama.cpp 2026 llama_model_qwen3moe): see arch_qwen3moe.cpp.
Status LoadQwen3MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildQwen3MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// glm4moe (llama.cpp 2026 llama_model_glm4_moe): see arch_glm4moe.cpp. ReadGlm4MoeHParams reads its
/// keys into hp (called by ReadHParams after the common keys): the trunk is block_count -
/// nextn_predict_layers blocks (hp->n_layer), the NextN blocks hp->n_layer_nextn.
Status ReadGlm4MoeHParams(const GgufFile& f, HParams* hp);
Status LoadGlm4MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildGlm4MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// smollm3 (llama.cpp 2026 llama_model_smollm3): see arch_smollm3.cpp.
Status LoadSmolLM3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildSmolLM3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// mistral3 (llama.cpp 2026 llama_model_mistral3, dense): see arch_mistral3.cpp. Granite's tensors
/// are the same (LoadMistral3Weights reads the table of hp.arch).
Status LoadMistral3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildMistral3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// granite (llama.cpp 2026 llama_model_granite, dense): BuildLlamaStyleGraph with its multipliers.
Status BuildGraniteGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
Status LoadPhi3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildPhi3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
Status LoadGemmaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildGemmaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// gemma2 and gemma3 (llama.cpp 2026): two loaders, one graph (see arch_gemma2.cpp).
Status LoadGemma2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status LoadGemma3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildGemma2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// deepseek2 (llama.cpp 2026 llama_model_deepseek2: absorbed MLA, or MHA for files of the older attn_kv_b
/// form): see arch_deepseek2.cpp.
Status LoadDeepSeek2Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildDeepSeek2Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
/// llama_model_deepseek2::load_arch_hparams after the common keys (ReadHParams): leading dense
/// layers (<= block_count), q_lora_rank (required but for the lite models: 26 or 27 layers, or 48
/// with 128256 tokens), kv_lora_rank (> 0), key_length_mla / value_length_mla (both or neither;
/// neither: the older attn_kv_b form, its heads head_count_kv = head_count, key_length > n_rot by an
/// even non-rotated part), each layer's tensors of that form only (attn_kv_b, or attn_k_b and
/// attn_v_b), the cache row of the absorbed form (head_count_kv 1, key_length kv_lora_rank + n_rot,
/// value_length kv_lora_rank, key_length_mla > n_rot), expert_feed_forward_length and expert_shared_count
/// (required), expert_weights_scale / _norm, expert_gating_func (absent: softmax, GLM 4.7 Lite's sigmoid; 1
/// or 2 else refused), experts when a layer past the leading ones has them, yarn_log_multiplier divided by
/// 0.1 (the converter's factor); attention.temperature_scale refused. One-line errors naming the key
/// (GgufFile::KeyError).
Status ReadDeepSeek2HParams(const GgufFile& f, HParams* hp);
/// gpt-oss (llama.cpp 2026 llama_model_openai_moe): see arch_gpt_oss.cpp.
Status LoadGptOssWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildGptOssGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);
Status LoadMambaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildMambaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);

/// Adds the cache globals cache_k_l<il> / cache_v_l<il> (llama.cpp llama_kv_cache_init): 1-D
/// tensors of n_embd_{k,v}_gqa * n_ctx elements of type_k / type_v; for recurrent models the conv
/// and ssm states, n_embd_{k,v}_s * max(1, n_seq_max) elements of F32; for MLA (HParams::is_mla,
/// llama.cpp 2026 llama_kv_cache) cache_k_l<il> only.
void AddKvCache(ModelGraphs& m);

// ---- shared pieces of llm_build_context (arch_common.cpp) ----

/// Kinds of llm_build_norm.
enum class NormKind { kLayer, kRms };
/// llm_ffn_op_type / llm_ffn_gate_type. kGeglu: LLM_FFN_GELU with a parallel gate as llama.cpp 2026
/// builds it, one fused GEGLU (ggml_geglu_split) instead of GELU and MUL (BuildFfn only); kSiluGlu
/// the same for LLM_FFN_SILU, one fused SWIGLU (ggml_swiglu_split) instead of SILU and MUL.
enum class FfnOp { kSilu, kGelu, kSwiglu, kGeglu, kSiluGlu };
enum class FfnGate { kSeq, kPar };

/// The model-level weights every loader starts with, in this order: token_embd (input layer),
/// output_norm and the output matrix (output layer) as the table has them: output.weight when the
/// table lists it (required or not); token_embd again as the output when the table has no
/// output.weight (gemma) or an optional one is absent (tied embeddings: llama, qwen2, mamba),
/// created kDuplicated (llama.cpp TENSOR_DUPLICATED) so it can be placed with the output layer.
void LoadEmbeddingsAndOutput(TableLoader& t, ModelWeights& w);
/// The attention weights of a llama-style block (load_tensors, LLM_ARCH_LLAMA / GEMMA / QWEN2), created
/// in this order: attn_norm, attn_q, attn_k, attn_v, attn_output of layer il (shapes: the table's).
void LoadAttentionWeights(TableLoader& t, LayerWeights& l, int il);
/// The q/k/v biases in this order: attn_q.bias, attn_k.bias, attn_v.bias (the table says whether
/// they are required: optional for llama, required for qwen2).
void LoadQkvBiases(TableLoader& t, LayerWeights& l, int il);
/// llama.cpp 2026 create_tensor_qkv with the output projection (mistral3, smollm3), in this order:
/// attn_norm, attn_q, attn_k, attn_v, their biases (LoadQkvBiases), attn_output.
void LoadProjectionQkv(TableLoader& t, LayerWeights& l, int il);
/// Layer il's rope factors (requested by every layer, kDuplicated for il > 0: llama.cpp PR #7447,
/// #10026): rope_factors_long then _short for longrope scaling, else rope_freqs (llama 3.1+).
void LoadRopeFactors(TableLoader& t, const HParams& hp, LayerWeights& l, int il);

/// llm_build_inp_embd: inp_tokens (I32 [n_tokens]) -> GET_ROWS(tok_embd) named "inp_embd".
int BuildInpEmbd(GraphBuilder& b, int tok_embd);
/// build_inp_pos: "inp_pos" I32 [n_tokens].
int BuildInpPos(GraphBuilder& b);
/// build_inp_KQ_mask(_swa): "KQ_mask" / "KQ_mask_swa" F32 [n_kv, n_tokens].
/// Differs from llama.cpp: ne1 is n_tokens, not GGML_PAD(n_tokens, GGML_KQ_MASK_PAD = 64 in FEB25)
/// (DimExpr is affine). llama.cpp pads so GPU kernels do not read out of bounds (PR #5021); the
/// mask of llama.cpp's tg graph is therefore [n_kv, 64], 63 rows more than planned here.
/// With flash attention (m.cfg.flash_attn) the mask the attention reads is F16: for the llama.cpp
/// 2026 graphs (m.llama2026, build_attn_inp_kq_mask) the input itself is F16; for the Feb 2025 ones
/// it is ggml_cast(mask, F16), "KQ_mask (copy)", and that cast is returned (the input stays F32).
int BuildInpKqMask(GraphBuilder& b, const ModelGraphs& m, bool swa);
/// build_inp_out_ids: "inp_out_ids" I32 [n_outputs].
int BuildInpOutIds(GraphBuilder& b);
/// llm_build_norm: NORM or RMS_NORM, named "norm" when weighted, then MUL(w) ("norm_w" when a bias
/// follows) and ADD(bias); the caller names the result.
int BuildNorm(GraphBuilder& b, int x, int w, int bias, NormKind kind, float eps, int il);
/// Weights-only helper: MUL_MAT(w, x) named `name`, then ADD(bias) named `name` again.
int BuildMatMulBias(GraphBuilder& b, int w, int bias, int x, const char* name, int il);
/// llm_build_ffn (node names ffn_up, ffn_up_b, ffn_gate, ffn_gate_b, ffn_silu/ffn_gelu/ffn_mul,
/// ffn_gate_par, ffn_down); `gate` may be -1 (no gate); returns the unnamed result. kGeglu / kSiluGlu
/// (which need a gate and kPar, else -1) end the activation with GEGLU / SWIGLU(gate, up) named
/// "ffn_geglu" / "ffn_swiglu".
/// Differs from llama.cpp: a fused op is taken only when asked for (kGeglu, kSiluGlu); llama.cpp 2026
/// fuses every GELU/SILU parallel gate, Feb 2025 (which the other builders follow) none.
int BuildFfn(GraphBuilder& b, int x, int up, int up_b, int gate, int gate_b, int down, int down_b, FfnOp op,
             FfnGate type_gate, int il);
/// llama_expert_gating_func_type: how build_moe_ffn turns the router logits into probabilities.
enum class MoeGating {
  kSoftmax,  ///< SOFT_MAX over the experts (mixtral, qwen2moe, qwen3moe)
  kSigmoid,  ///< SIGMOID of each logit (glm4moe, deepseek-v3)
  /// SOFTMAX_WEIGHT (gpt-oss): the top-k of the raw logits, the weights a SOFT_MAX over the chosen
  /// ones ("ffn_moe_weights_softmax")
  kSoftmaxWeight,
};
/// The behaviour of BuildMoeFfn beyond its weights (llama.cpp build_moe_ffn's arguments).
struct MoeFfnOptions {
  /// type_op: the experts' activation (kSilu or kGelu).
  FfnOp op = FfnOp::kSilu;
  MoeGating gating = MoeGating::kSoftmax;
  /// exp_probs_b: global id of the expert-selection bias [n_expert] (DeepSeek-V3, glm4moe; -1: none),
  /// added to the probabilities for the top-k only.
  int exp_probs_b = -1;
  /// norm_w: the selected weights divided by their sum (ffn_moe_weights_sum / _norm).
  bool norm_w = false;
  /// w_scale (expert_weights_scale): the weights times it (SCALE "ffn_moe_weights_scaled") unless 0 or 1.
  float w_scale = 0.f;
  /// llama.cpp 2026's form: the gate activation and the up product as one fused GLU (SWIGLU / GEGLU
  /// of gate and up, "ffn_moe_swiglu" / "ffn_moe_geglu") instead of SILU / GELU then MUL
  /// ("ffn_moe_gate_par", Feb 2025), and 2026's node order: the weights expanded before the experts
  /// (ggml_build_forward_expand(gf, weights)), the weighted experts ("ffn_moe_weighted") and every
  /// expert view before their sum; with norm_w the weight sum clamped to [2^-14, INFINITY]
  /// ("ffn_moe_weights_sum_clamped") before the division.
  bool fused_glu = false;
  /// LLM_FFN_SWIGLU_OAI_MOE (gpt-oss): the experts' activation is ggml_swiglu_oai(gate, up, 1.702, 7)
  /// ("ffn_moe_swiglu_oai") instead of o.op's.
  bool swiglu_oai = false;
  /// Group-limited routing (hparams n_expert_groups / n_group_used, DeepSeek-V3): with more than one
  /// group, only the experts of the n_group_used groups whose two best selection probabilities sum
  /// highest take part in the top-k; the others' selection probabilities become -INFINITY.
  int64_t n_expert_groups = 0, n_group_used = 0;
};
/// llm_build_moe_ffn over layer l's ffn_gate_inp and ffn_{up,gate,down}_exps: logits (MUL_MAT,
/// [n_expert, n_tokens]) -> probs (o.gating) -> selection probs (probs + o.exp_probs_b
/// "ffn_moe_probs_biased" when given; the weights still come from
/// the unbiased probs) -> with o.n_expert_groups > 1 the group mask (llama.cpp 2026: the selection
/// probs reshaped [n_expert / n_groups, n_groups, n_tokens], each group's top-2 (argsort + view)
/// gathered (GET_ROWS of a [1, n_per_group, n_groups, n_tokens] view) and summed (SUM_ROWS), the
/// top n_group_used groups "ffn_moe_group_topk", their rows (GET_ROWS) stored (SET_ROWS) into
/// FILL(-INFINITY) of the grouped shape, reshaped [n_expert, n_tokens] "ffn_moe_probs_masked") -> top-k
/// (argsort + view, [n_expert_used, n_tokens]) -> GET_ROWS of the selected probs [1, n_used, n_tokens]
/// (o.norm_w: over their sum, with o.fused_glu clamped to [2^-14, INFINITY]; o.w_scale) -> MUL_MAT_ID up/gate
/// -> activation -> MUL_MAT_ID down -> MUL(weights) -> sum of the n_used expert views. Returns the
/// unnamed result [n_embd, n_tokens].
int BuildMoeFfn(GraphBuilder& b, int x, const LayerWeights& l, int64_t n_expert, int64_t n_expert_used,
                const MoeFfnOptions& o, int il);
/// The expert keys of the llama.cpp 2026 MoE architectures with shared experts (deepseek2, glm4moe),
/// into hp: expert_feed_forward_length (required, > 0) and expert_shared_count (required; n_ff_shexp
/// = their product), expert_weights_scale (finite; absent: 0, no scaling), expert_weights_norm
/// (absent: false) and expert_gating_func (1 softmax, 2 sigmoid; 0 or absent: `default_gating`).
/// Errors name the file and key (GgufFile::KeyError).
Status ReadSharedExpertRouting(const GgufFile& f, int default_gating, HParams* hp);
/// The FFN of the llama.cpp 2026 MoE graphs with leading dense layers and shared experts (deepseek2,
/// glm4moe) for layer il of input `cur` (the FFN norm's output): below hp.n_layer_dense_lead the
/// dense SwiGLU FFN (BuildFfn of ffn_up / ffn_gate / ffn_down), else BuildMoeFfn with `o`, the
/// layer's selection bias l.ffn_exp_probs_b and hp's expert groups (n_expert_groups, n_group_used), named
/// "ffn_moe_out", plus the shared experts (BuildFfn of ffn_{up,gate,down}_shexp, named `shexp_name`:
/// deepseek2 "ffn_shexp", glm4moe "ffn_shexp_out"; none when the layer has no ffn_up_shexp) added to it.
/// Returns the FFN output, named "ffn_out". The dense and the shared experts' FFN end in llama.cpp
/// 2026 build_ffn's fused SWIGLU (FfnOp::kSiluGlu).
int BuildLeadDenseMoeFfn(GraphBuilder& b, const HParams& hp, const LayerWeights& l, int cur, MoeFfnOptions o,
                         const char* shexp_name, int il);
/// The rope configuration of the graphs (llama.cpp 2026 llama_context cparams): freq base and scale
/// (1 for scaling type none), n_ctx_orig (n_ctx_orig_yarn), YaRN's ext_factor (1 for yarn, else 0),
/// beta_fast / beta_slow (hp.yarn_beta_*) and attn_factor: rope.scaling.attn_factor, times for
/// yarn get_mscale(factor, 1) (over get_mscale(factor, yarn_log_multiplier) when that is set;
/// deepseek2: get_mscale(factor, m) / get_mscale(factor, yarn_log_multiplier), m the multiplier
/// unless it is 1)
/// / (1 + 0.1 ln factor), factor = 1 / freq_scale, cancelling ggml rope_yarn's own mscale.
RopeConfig MakeRopeConfig(const ModelGraphs& m);
/// The rope of an interleaved-SWA model's sliding-window layers (llama.cpp 2026
/// llama_model::get_rope_freq_base / _scale): MakeRopeConfig with hp.rope_freq_base_swa and
/// hp.rope_freq_scale_swa (gemma2, gemma3, gpt-oss; the global layers take MakeRopeConfig's).
RopeConfig MakeSwaRopeConfig(const ModelGraphs& m);
/// The masks of llama.cpp 2026 build_attn_inp_kv_iswa: *kq_mask ("KQ_mask") when some layer is
/// global, *kq_mask_swa ("KQ_mask_swa") when some layer slides (hp.is_swa); -1 for a mask no layer
/// reads, as ggml leaves it out of the graph.
void BuildIswaMasks(GraphBuilder& b, const ModelGraphs& m, int* kq_mask, int* kq_mask_swa);
/// build_rope_factors: rope_freqs if present, else rope_long when n_ctx / n_seq_max exceeds
/// n_ctx_orig_yarn, else rope_short; -1 when none (leaf id otherwise).
int BuildRopeFactors(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l);
/// Logit soft-capping cap * tanh(x / cap) as llama.cpp builds it: SCALE(1/cap) named `scaled`,
/// TANH named `tanh`, SCALE(cap) named `capped` (an empty name leaves the node unnamed); shape of x.
int BuildSoftCap(GraphBuilder& b, int x, float cap, const char* scaled, const char* tanh, const char* capped,
                 int il);
/// llm_build_kv: expands q, k, v; stores k and v (transposed without flash attention) into
/// cache_k/v_l<il> at kv_head (k_cache_view, v_cache_view); then llm_build_kqv (q, k, kq,
/// kq_soft_max_ext, v, kqv, kqv_merged, kqv_merged_cont; with flash attention q, k, v and one
/// FLASH_ATTN_EXT reshaped to [n_embd_head_v * n_head, n_tokens]), wo, wo_b as kqv_wo, and names the
/// result "kqv_out". With hp.attn_soft_cap (gemma2) the scores are soft-capped as build_attn_mha
/// does: FLASH_ATTN_EXT's logit_softcap = f_attn_logit_softcapping, else BuildSoftCap of kq
/// (kq_scaled_1, kq_tanh, kq_scaled_2) before the softmax. `sinks` (gpt-oss's attn_sinks, -1: none)
/// joins the softmax as one more logit per head (SOFT_MAX's src 2, FLASH_ATTN_EXT's src 4).
/// With m.llama2026 it is llama.cpp 2026 build_attn's graph: V given as rows [n_embd_v_gqa,
/// n_tokens] reshaped to heads first, q, v, k expanded in that order, the SET_ROWS store, and Q and
/// the caches viewed per stream (view_4d) and permuted (build_attn_mha).
int BuildKv(GraphBuilder& b, const ModelGraphs& m, int wo, int wo_b, int k_cur, int v_cur, int q_cur,
            int kq_mask, float kq_scale, int il, int sinks = -1);
/// llama.cpp 2026 llama_kv_cache::cpy_k / cpy_v: SET_ROWS of the ubatch's K rows (k_cur
/// [n_embd_head_k, n_head_kv, n_tokens], contiguous) into cache `kcache` (a leaf of the
/// cache_k_l<il> global, kv_cells rows of n_embd_k_gqa) at the cells of the "attn_inp_k_idxs" input
/// (I64 [n_tokens], "_swa" for the SWA cache; filled by the runtime with the ubatch's cells), then V
/// (v_cur heads [n_embd_head_v, n_head_kv, n_tokens], contiguous or a view of wider rows) into
/// `vcache` at "attn_inp_v_idxs": rows with flash attention, else element by element into the
/// transposed cache (one index per element). `vcache` -1: K only (MLA's one cache).
void BuildKvStoreSetRows(GraphBuilder& b, const ModelGraphs& m, int kcache, int vcache, int k_cur, int v_cur,
                         bool swa_cache, int64_t kv_cells);
/// The q, k, v projections of build_llama / build_gemma / build_qwen2 in this order:
/// BuildMatMulBias(wq, bq) "Qcur", (wk, bk) "Kcur", (wv, bv) "Vcur" of `cur` (a bias of -1: none).
void BuildQkv(GraphBuilder& b, const LayerWeights& l, int cur, int il, int* q, int* k, int* v);
/// ROPE_EXT of `x` reshaped to [head_dim, n_heads, n_tokens, 1] at positions `inp_pos` with freq
/// factors `rope_factors` (-1: none), named `name`: the Qcur / Kcur rope of the llama-style builders.
int BuildRopeHeads(GraphBuilder& b, int x, int64_t head_dim, int64_t n_heads, int inp_pos, int rope_factors,
                   const RopeConfig& rc, const char* name, int il);
/// BuildRopeHeads with a per-head RMS norm before the rope when `head_norm` >= 0 (qwen3's
/// attn_q_norm / attn_k_norm; llama.cpp build_qwen3): `x` reshaped to [head_dim, n_heads, n_tokens, 1],
/// BuildNorm(RMS, weight head_norm [head_dim], `eps`) over each head named "<name>_normed", then
/// ROPE_EXT named `name`. With head_norm -1 it is BuildRopeHeads, node for node. With `inp_pos` -1
/// there is no rope (smollm3's no-rope layers): the reshaped (or normed) heads are named `name`.
int BuildNormRopeHeads(GraphBuilder& b, int x, int64_t head_dim, int64_t n_heads, int head_norm, float eps,
                       int inp_pos, int rope_factors, const RopeConfig& rc, const char* name, int il);
/// The last layer's "skip computing output for unused tokens" of every build_<arch>: when il is the
/// last layer, *cur and then *residual become GET_ROWS of themselves by the inp_out_ids input
/// (BuildInpOutIds); other layers leave both unchanged.
void SkipUnusedOutputs(GraphBuilder& b, const ModelGraphs& m, int il, int* cur, int* residual);
/// The layer of build_llama, build_qwen2, build_qwen3 (and the 2026 mistral3, smollm3) up to the FFN
/// norm, node for node (`inp_pos` -1: a layer without rope, as BuildNormRopeHeads): attn_norm
/// (RMS), the rope factors (BuildRopeFactors, after attn_norm: -1 when the layer has none, as qwen2),
/// BuildQkv, BuildNormRopeHeads of Q (n_head heads, norm l.attn_q_norm) and K (n_head_kv heads, norm
/// l.attn_k_norm) of `head_dim` (the norms -1 but for qwen3), BuildKv with l.wo, l.bo
/// and `kq_scale`, SkipUnusedOutputs, ffn_inp = ADD(attention, layer input) named "ffn_inp", and
/// ffn_norm (RMS), the attention output scaled by hp.f_residual_scale first when set (granite).
/// Returns ffn_norm; *ffn_inp gets the residual for the FFN. With `attn_scale` >= 0
/// (the "inp_attn_scale" input, F32 [1, 1, n_tokens]: llama 4 temperature tuning, mistral3) the
/// roped Q is multiplied by it before the attention, named "Qcur_attn_temp_scaled".
int BuildLlamaAttentionBlock(GraphBuilder& b, const ModelGraphs& m, const LayerWeights& l, int il, int inpL,
                             int inp_pos, int kq_mask, const RopeConfig& rc, int64_t head_dim, float kq_scale,
                             int* ffn_inp, int attn_scale = -1);
/// build_inp_attn_scale (llama.cpp 2026): the "inp_attn_scale" input, F32 [1, 1, n_tokens], one
/// temperature factor per token (the runtime fills it from the model's hp.f_attn_temp_* keys).
int BuildInpAttnScale(GraphBuilder& b);
/// Final llm_build_norm (named "result_norm") and lm_head (named "result_output", graph output),
/// soft-capped by BuildSoftCap when hp.f_final_logit_softcapping != 0 (gemma2, gemma3), scaled by
/// 1 / hp.f_logit_scale when that is set (granite).
int BuildOutput(GraphBuilder& b, const ModelGraphs& m, const ModelWeights& w, int x, NormKind kind);

/// Global id of the cache tensor "cache_k_l<il>" (k = true) or "cache_v_l<il>".
int CacheGlobal(const ModelGraphs& m, bool k, int il);

/// The layers of the llama-style graphs whose blocks differ only in the FFN (build_qwen2 /
/// build_qwen2moe / build_qwen3, llama.cpp 2026 qwen3moe and glm4moe): the inputs (embeddings,
/// inp_pos, KQ_mask); per layer the attention block up to the FFN norm (BuildLlamaAttentionBlock
/// without rope factors, head size n_embd_head_v, kq_scale 1/sqrt(head size)), then `ffn(l, cur =
/// the FFN norm's output, ffn_inp = the residual, il)`, which returns the layer output l_out; then
/// BuildOutput (RMS).
template <typename Ffn>
Status BuildAttentionFfnLayers(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w, Ffn ffn) {
  const int64_t hd = m.hp.n_embd_head_v;
  const RopeConfig rc = MakeRopeConfig(m);
  int inpL = BuildInpEmbd(b, w.tok_embd);
  const int inp_pos = BuildInpPos(b);
  const int kq_mask = BuildInpKqMask(b, m, false);
  for (int il = 0; il < static_cast<int>(m.hp.n_layer); ++il) {
    const LayerWeights& l = w.layers[il];
    int ffn_inp = -1;
    const int cur = BuildLlamaAttentionBlock(b, m, l, il, inpL, inp_pos, kq_mask, rc, hd,
                                             1.0f / std::sqrt(float(hd)), &ffn_inp);
    inpL = ffn(l, cur, ffn_inp, il);
  }
  BuildOutput(b, m, w, inpL, NormKind::kRms);
  return b.status();
}

}  // namespace stowage::planner
