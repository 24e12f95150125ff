#include "stowage/planner/model_graphs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>

#include "arch.h"
#include "stowage/runtime/gguf_attn_temperature.h"
#include "stowage/runtime/gguf_sliding_window.h"
#include "stowage/runtime/gguf_vocab.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::planner {

const std::vector<ArchSpec>& Architectures() {
  // rope types: llama.cpp llama_model_rope_type (LLAMA_ROPE_TYPE_NONE -1, NORM 0, NEOX 2)
  static const std::vector<ArchSpec> kArchs = {
      {"llama", 0, LoadLlamaWeights, BuildLlamaGraph},
      {"qwen2", 2, LoadQwen2Weights, BuildQwen2Graph},
      {"qwen2moe", 2, LoadQwen2MoeWeights, BuildQwen2MoeGraph},
      {"qwen3", 2, LoadQwen3Weights, BuildQwen2Graph, true},  // build_qwen3: qwen2's graph + q/k norms
      {"qwen3moe", 2, LoadQwen3MoeWeights, BuildQwen3MoeGraph, true},
      {"glm4moe", 2, LoadGlm4MoeWeights, BuildGlm4MoeGraph, true},
      {"mistral3", 0, LoadMistral3Weights, BuildMistral3Graph, true},
      {"smollm3", 0, LoadSmolLM3Weights, BuildSmolLM3Graph, true},
      {"granite", 0, LoadMistral3Weights, BuildGraniteGraph, true},  // granite's tensors are mistral3's
      {"phi3", 2, LoadPhi3Weights, BuildPhi3Graph},
      {"gemma", 2, LoadGemmaWeights, BuildGemmaGraph},
      {"gemma2", 2, LoadGemma2Weights, BuildGemma2Graph, true},
      // gemma3: gemma2's graph + q/k norms, optional soft-caps
      {"gemma3", 2, LoadGemma3Weights, BuildGemma2Graph, true},
      {"deepseek2", 0, LoadDeepSeek2Weights, BuildDeepSeek2Graph, true},
      {"gpt-oss", 2, LoadGptOssWeights, BuildGptOssGraph, true},
      {"mamba", -1, LoadMambaWeights, BuildMambaGraph},
  };
  return kArchs;
}

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> out;
  for (const ArchSpec& a : Architectures()) out.push_back(a.name);
  return out;
}

namespace {

const ArchSpec* FindArch(const std::string& name) {
  for (const ArchSpec& a : Architectures())
    if (name == a.name) return &a;
  return nullptr;
}

// llama.cpp llama_rope_scaling_type_from_string; -1 for an unknown name.
int RopeScalingType(const std::string& s) {
  if (s == "none") return 0;
  if (s == "linear") return 1;
  if (s == "yarn") return 2;
  if (s == "longrope") return 3;
  return -1;
}

std::string FloatText(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

// A float hyper-parameter as llama.cpp's load_hparams reads it (get_key; `def` when absent, required
// when `def` is empty), refused with its key and offset when the graphs cannot compute with it:
// not finite, below `min`, or equal to it unless `min_ok` (`rule` says what is expected).
Result<float> ReadFloat(const GgufFile& f, const std::string& key, std::optional<float> def, float min,
                        bool min_ok, const std::string& rule) {
  STOWAGE_ASSIGN_OR_RETURN(const float v, def ? f.GetF32Or(key, *def) : f.GetF32(key));
  if (!std::isfinite(v) || v < min || (v == min && !min_ok)) return f.KeyError(key, rule, FloatText(v));
  return v;
}

// A float the graphs divide by (a soft-cap, granite's logit_scale, the rope scaling factor):
// ReadFloat's rule with min 0, and above 0 a finite reciprocal (a denormal such as 1e-45 gives
// 1/x = inf in a node's parameters, which the plan verifier refuses once the plan is written).
Result<float> ReadDivisor(const GgufFile& f, const std::string& key, std::optional<float> def, bool zero_ok,
                          const std::string& rule) {
  STOWAGE_ASSIGN_OR_RETURN(const float v, ReadFloat(f, key, def, 0.f, zero_ok, rule));
  if (v > 0.f && !std::isfinite(1.f / v))
    return f.KeyError(
        key,
        rule + " with a finite reciprocal (above " + FloatText(1.0 / std::numeric_limits<float>::max()) + ")",
        FloatText(v));
  return v;
}

// A norm epsilon: ggml's NORM and RMS_NORM assert eps >= 0 (llama.cpp aborts on a NaN or negative
// one); one above kLargeNormEps is accepted with a warning, as it scales every activation toward 0,
// and so is 0 (llama.cpp runs it), which turns a row of zeros into 0/0 = NaN.
Result<float> ReadNormEps(const GgufFile& f, const std::string& key, std::optional<float> def,
                          std::vector<std::string>* warnings) {
  // Real models use 1e-6 to 1e-5; 1 already rivals the mean square of unit activations.
  constexpr float kLargeNormEps = 1.0f;
  STOWAGE_ASSIGN_OR_RETURN(const float eps,
                           ReadFloat(f, key, def, 0.f, true, "a finite epsilon >= 0 (ggml's norms)"));
  if (eps > kLargeNormEps)
    warnings->push_back(
        f.KeyError(key, "a small epsilon (models use 1e-6 to 1e-5)",
                   FloatText(eps) + ", which scales the activations toward 0 and flattens the logits")
            .message());
  if (eps == 0.f)
    warnings->push_back(f.KeyError(key, "a small positive epsilon (models use 1e-6 to 1e-5)",
                                   "0, which makes the norm of a row of zeros 0/0 = NaN")
                            .message());
  return eps;
}

// A rope base (ROPE's theta is pos * freq_base^(-2i/n_rot) * freq_scale, ggml rope): 0 or below, or
// not finite, makes every rotated value NaN and is refused; below 1 the frequencies grow with the
// dimension instead of falling, accepted with a warning (llama.cpp runs it).
Result<float> ReadRopeBase(const GgufFile& f, const std::string& key, float def,
                           std::vector<std::string>* warnings) {
  STOWAGE_ASSIGN_OR_RETURN(const float base, ReadFloat(f, key, def, 0.f, false, "a finite base > 0"));
  if (base < 1.f)
    warnings->push_back(
        f.KeyError(key, "a base >= 1 (models use 1e4 to 1e7)",
                   FloatText(base) + ", which makes the rotation faster for higher dimensions")
            .message());
  return base;
}

// "the head size N (<where it comes from>" for messages, the caller closing the parenthesis:
// attention.key_length, else llama.cpp's n_embd_head_k = n_embd / n_head (load_hparams), so that
// a changed embedding_length or head_count is named with its value.
std::string HeadSizeText(const GgufFile& f, const std::string& p, const HParams& hp) {
  const std::string n = "the head size " + std::to_string(hp.n_embd_head_k) + " (";
  if (f.Find(p + "attention.key_length") != nullptr) return n + p + "attention.key_length";
  return n + p + "embedding_length " + std::to_string(hp.n_embd) + " / " + p + "attention.head_count " +
         std::to_string(hp.n_head);
}

// The runtime's tokenizer check (Tokenizer::Validate, the tokenizer's own loading) for a model
// that has a vocabulary: a model without one (no tokenizer.ggml.tokens and tokenizer.ggml.model
// absent, "none" or "no_vocab"; llama.cpp LLAMA_VOCAB_TYPE_NONE, sized by <arch>.vocab_size) is
// planned for callers that feed token ids, as before.
Status CheckTokenizer(const GgufFile& f) {
  STOWAGE_ASSIGN_OR_RETURN(const std::string model, f.GetStringOr("tokenizer.ggml.model", ""));
  const bool no_vocab = model.empty() || model == "none" || model == "no_vocab";
  if (f.Find("tokenizer.ggml.tokens") == nullptr && no_vocab) return Status::Ok();
  return Tokenizer::Validate(f);
}

// llama.cpp load_swa_pattern: attention.sliding_window_pattern as an array of bools (or int32 /
// uint32, as get_arr takes them) of one entry per layer, else as a period n (set_swa_pattern: il is
// SWA when n == 0 or il % n < n - 1), else `default_period`. Differs from llama.cpp: an array of
// another length than block_count is refused (llama.cpp leaves the layers past it global).
Status ReadSwaPattern(const GgufFile& f, uint32_t default_period, HParams* hp) {
  const std::string key = hp->arch + ".attention.sliding_window_pattern";
  hp->swa_layers.assign(hp->n_layer, 0);
  const GgufValue* found = f.Find(key);
  if (found != nullptr && found->is_array()) {
    const GgufValue& v = *found;
    const bool type_ok = v.elem_type == GgufValueType::BOOL || v.elem_type == GgufValueType::INT32 ||
                         v.elem_type == GgufValueType::UINT32;
    if (!type_ok || v.count != hp->n_layer)
      return f.KeyError(
          key,
          "an array of " + std::to_string(hp->n_layer) + " bools (" + hp->arch + ".block_count) or a period",
          "an array of " + std::to_string(v.count) + " " + GgufValueTypeName(v.elem_type));
    for (uint32_t il = 0; il < hp->n_layer; ++il) hp->swa_layers[il] = v.ArrayI64(il) != 0 ? 1 : 0;
    return Status::Ok();
  }
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t period, f.GetU32Or(key, default_period));
  // Differs from llama.cpp, which runs it: a period in the file past block_count leaves no global
  // layer (the default period is not checked: a model of fewer layers has no global one).
  if (found != nullptr && period > hp->n_layer)
    return f.KeyError(key,
                      "a period from 0 to " + hp->arch + ".block_count " + std::to_string(hp->n_layer) +
                          " (0: every layer sliding-window)",
                      std::to_string(period));
  for (uint32_t il = 0; il < hp->n_layer; ++il)
    hp->swa_layers[il] = (period == 0 || il % period < period - 1) ? 1 : 0;
  return Status::Ok();
}

// llama.cpp (2026) llama_model_openai_moe::load_arch_hparams: expert_feed_forward_length and
// attention.sliding_window (both required), the SWA pattern (period 2: the even layers slide),
// rope.freq_base_swa (default the global base; the SWA layers keep the global scale); every
// layer routes to experts (build_moe_ffn asserts n_expert_used > 0).
Status ReadGptOssHParams(const GgufFile& f, HParams* hp) {
  const std::string p = hp->arch + ".";
  if (hp->n_expert == 0)
    return f.KeyError(p + "expert_count", "a positive expert count (gpt-oss routes every layer to experts)",
                      "0 or absent");
  STOWAGE_ASSIGN_OR_RETURN(hp->n_ff_exp, f.GetU32(p + "expert_feed_forward_length"));
  if (hp->n_ff_exp == 0) return f.KeyError(p + "expert_feed_forward_length", "a positive expert width", "0");
  STOWAGE_ASSIGN_OR_RETURN(hp->n_swa, f.GetU32(p + "attention.sliding_window"));
  if (hp->n_swa == 0)
    return f.KeyError(p + "attention.sliding_window",
                      "a positive window (gpt-oss alternates sliding-window and global layers)", "0");
  STOWAGE_RETURN_IF_ERROR(ReadSwaPattern(f, 2, hp));
  hp->rope_freq_base_swa = hp->rope_freq_base;
  hp->rope_freq_scale_swa = hp->rope_freq_scale;
  STOWAGE_ASSIGN_OR_RETURN(hp->rope_freq_base_swa,
                           ReadRopeBase(f, p + "rope.freq_base_swa", hp->rope_freq_base_swa, &hp->warnings));
  return Status::Ok();
}

// llama.cpp (2026) llama_model_gemma2 / llama_model_gemma3::load_arch_hparams: the sliding window
// (GgufSlidingWindow, the runtime's reading: gemma2 attention.sliding_window, default 4096, pattern
// period 2; gemma3: SWA only when the key is present and > 0, period 6), the SWA layers' rope base
// (rope.freq_base_swa; gemma2 defaults to the global base and scale, gemma3 to 10000 and 1), the
// soft-caps (gemma2: attention 50 and final 30 by default; gemma3: final only, 0 = off) and the
// query scale by model type (gemma_pytorch config: 1/sqrt(n_embd / n_head) for the 27B models,
// gemma2 46 layers and gemma3 62, else 1/sqrt(n_embd_head_k); attention.scale is not read).
Status ReadGemmaHParams(const GgufFile& f, HParams* hp) {
  const std::string p = hp->arch + ".";
  const bool gemma2 = hp->arch == "gemma2";
  const std::string window_key = p + "attention.sliding_window";
  STOWAGE_ASSIGN_OR_RETURN(const std::optional<uint32_t> n_swa, GgufSlidingWindow(f));
  hp->n_swa = n_swa.value_or(0);
  if (gemma2 && hp->n_swa == 0)
    return f.KeyError(window_key, "a positive window (gemma2 alternates sliding-window and global layers)",
                      "0");
  // Differs from llama.cpp, which runs it: a window wider than the training context never slides.
  if (f.Find(window_key) != nullptr && hp->n_ctx_train > 0 && hp->n_swa > hp->n_ctx_train)
    return f.KeyError(window_key,
                      "a window of at most " + p + "context_length " + std::to_string(hp->n_ctx_train),
                      std::to_string(hp->n_swa));
  if (hp->n_swa > 0) STOWAGE_RETURN_IF_ERROR(ReadSwaPattern(f, gemma2 ? 2 : 6, hp));
  hp->rope_freq_base_swa = gemma2 ? hp->rope_freq_base : 10000.f;
  hp->rope_freq_scale_swa = gemma2 ? hp->rope_freq_scale : 1.f;
  STOWAGE_ASSIGN_OR_RETURN(hp->rope_freq_base_swa,
                           ReadRopeBase(f, p + "rope.freq_base_swa", hp->rope_freq_base_swa, &hp->warnings));
  hp->attn_soft_cap = gemma2;
  if (gemma2) {
    STOWAGE_ASSIGN_OR_RETURN(hp->f_attn_logit_softcapping,
                             ReadDivisor(f, p + "attn_logit_softcapping", 50.f, false, "a finite cap > 0"));
  }
  STOWAGE_ASSIGN_OR_RETURN(hp->f_final_logit_softcapping,
                           ReadDivisor(f, p + "final_logit_softcapping", gemma2 ? 30.f : 0.f, !gemma2,
                                       gemma2 ? "a finite cap > 0" : "a finite cap >= 0 (0: off)"));
  const bool is_27b = hp->n_layer == (gemma2 ? 46u : 62u);
  hp->f_attention_scale =
      is_27b ? 1.0f / std::sqrt(float(hp->n_embd / hp->n_head)) : 1.0f / std::sqrt(float(hp->n_embd_head_k));
  return Status::Ok();
}

}  // namespace

Result<HParams> ReadHParams(const GgufFile& f, bool check_tokenizer) {
  HParams hp;
  STOWAGE_ASSIGN_OR_RETURN(hp.arch, f.GetString("general.architecture"));
  const ArchSpec* spec = FindArch(hp.arch);
  if (spec == nullptr) {
    std::string list;
    for (const auto& a : SupportedArchitectures()) list += (list.empty() ? "" : ", ") + a;
    return Unimplemented(f.path() + ": unknown model architecture '" + hp.arch + "' (supported: " + list +
                         ")");
  }
  hp.rope_type = spec->rope_type;
  const bool attention = !hp.recurrent();
  const std::string p = hp.arch + ".";
  // llama.cpp load_hparams: common keys (head counts and n_ff are optional for non-transformers)
  STOWAGE_ASSIGN_OR_RETURN(hp.n_ctx_train, f.GetU32(p + "context_length"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_embd, f.GetU32(p + "embedding_length"));
  if (hp.n_embd == 0) return f.KeyError(p + "embedding_length", "a positive width", "0");
  STOWAGE_ASSIGN_OR_RETURN(hp.n_layer, f.GetU32(p + "block_count"));
  if (hp.n_layer == 0) return f.KeyError(p + "block_count", "a positive layer count", "0");
  if (hp.n_layer > kMaxLayers)
    return f.KeyError(p + "block_count",
                      "at most " + std::to_string(kMaxLayers) + " layers (llama.cpp LLAMA_MAX_LAYERS)",
                      std::to_string(hp.n_layer));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_expert, f.GetU32Or(p + "expert_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_expert_used, f.GetU32Or(p + "expert_used_count", 0));
  // llama.cpp load_hparams: "model has expert layers but no expert layers are used"
  if ((hp.n_expert > 0 && hp.n_expert_used == 0) || hp.n_expert_used > hp.n_expert)
    return f.KeyError(p + "expert_used_count",
                      hp.n_expert > 0 ? "1.." + std::to_string(hp.n_expert) + " (" + p + "expert_count " +
                                            std::to_string(hp.n_expert) + ")"
                                      : "0 (" + p + "expert_count is 0 or absent)",
                      std::to_string(hp.n_expert_used));
  // llama.cpp 2026 load_hparams: group-limited routing (build_moe_ffn keeps the experts of the
  // n_group_used best of n_expert_groups groups; its asserts as errors)
  STOWAGE_ASSIGN_OR_RETURN(hp.n_expert_groups, f.GetU32Or(p + "expert_group_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_group_used, f.GetU32Or(p + "expert_group_used_count", 0));
  if (hp.n_expert_groups > 0 && hp.n_expert_groups >= std::max(hp.n_expert, 1u))
    return f.KeyError(p + "expert_group_count",
                      hp.n_expert > 0
                          ? "fewer groups than " + p + "expert_count " + std::to_string(hp.n_expert)
                          : "0 (" + p + "expert_count is 0 or absent)",
                      std::to_string(hp.n_expert_groups));
  if (hp.n_expert_groups > 1 && hp.n_expert % hp.n_expert_groups != 0)
    return f.KeyError(p + "expert_group_count",
                      "a divisor of " + p + "expert_count " + std::to_string(hp.n_expert),
                      std::to_string(hp.n_expert_groups));
  if (hp.n_expert_groups > 1 && (hp.n_group_used == 0 || hp.n_group_used >= hp.n_expert_groups))
    return f.KeyError(p + "expert_group_used_count",
                      "1.." + std::to_string(hp.n_expert_groups - 1) + " (fewer than " + p +
                          "expert_group_count " + std::to_string(hp.n_expert_groups) + ")",
                      std::to_string(hp.n_group_used));
  if (attention) {
    STOWAGE_ASSIGN_OR_RETURN(hp.n_ff, f.GetU32(p + "feed_forward_length"));
    STOWAGE_ASSIGN_OR_RETURN(hp.n_head, f.GetU32(p + "attention.head_count"));
  } else {
    STOWAGE_ASSIGN_OR_RETURN(hp.n_ff, f.GetU32Or(p + "feed_forward_length", 0));
    STOWAGE_ASSIGN_OR_RETURN(hp.n_head, f.GetU32Or(p + "attention.head_count", 0));
  }
  STOWAGE_ASSIGN_OR_RETURN(hp.n_head_kv, f.GetU32Or(p + "attention.head_count_kv", hp.n_head));

  // rope scaling (llama.cpp load_hparams; the llama 3.1 scaling itself is the rope_freqs tensor)
  // granite: "uses rope_finetuned as a switch for rope, so default to true" (load_arch_hparams)
  STOWAGE_ASSIGN_OR_RETURN(hp.rope_finetuned,
                           f.GetBoolOr(p + "rope.scaling.finetuned", hp.arch == "granite"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_ctx_orig_yarn,
                           f.GetU32Or(p + "rope.scaling.original_context_length", hp.n_ctx_train));
  STOWAGE_ASSIGN_OR_RETURN(hp.rope_freq_base, ReadRopeBase(f, p + "rope.freq_base", 10000.f, &hp.warnings));
  STOWAGE_ASSIGN_OR_RETURN(std::string scaling, f.GetStringOr(p + "rope.scaling.type", "linear"));
  hp.rope_scaling_type = RopeScalingType(scaling);
  if (hp.rope_scaling_type < 0)
    return f.KeyError(p + "rope.scaling.type", "none, linear, yarn or longrope", "'" + scaling + "'");
  // rope.scaling.factor, else the old key name rope.scale_linear; 0 means no scaling
  const std::string scale_key =
      p + (f.Find(p + "rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear");
  STOWAGE_ASSIGN_OR_RETURN(const float scale_factor,
                           ReadDivisor(f, scale_key, 0.f, true, "a finite factor >= 0 (0: no scaling)"));
  // Differs from llama.cpp, which runs it: YaRN's attention factor is cancelled by
  // 1 / (1 + 0.1 ln factor) (llama_context), infinite at e^-10 and negative below; YaRN stretches
  // the context (transformers' rope validation wants a factor >= 1).
  if (hp.rope_scaling_type == 2 && scale_factor > 0.f && scale_factor < 1.f)
    return f.KeyError(scale_key, "a factor >= 1 with " + p + "rope.scaling.type yarn (0: no scaling)",
                      FloatText(scale_factor));
  hp.rope_freq_scale = scale_factor == 0.f ? 1.f : 1.f / scale_factor;
  STOWAGE_ASSIGN_OR_RETURN(hp.rope_attn_factor, ReadFloat(f, p + "rope.scaling.attn_factor", 1.f, 0.f, false,
                                                          "a finite factor > 0"));
  if (hp.arch == "mistral3") {
    // llama_model_mistral3::load_arch_hparams: the YaRN keys, and the temperature tuning (one reading
    // with the runtime, which fills inp_attn_scale: gguf_attn_temperature.h)
    STOWAGE_ASSIGN_OR_RETURN(hp.yarn_beta_fast, ReadFloat(f, p + "rope.scaling.yarn_beta_fast", 32.f, 0.f,
                                                          true, "a finite correction >= 0"));
    STOWAGE_ASSIGN_OR_RETURN(hp.yarn_beta_slow, ReadFloat(f, p + "rope.scaling.yarn_beta_slow", 1.f, 0.f,
                                                          true, "a finite correction >= 0"));
    STOWAGE_ASSIGN_OR_RETURN(hp.rope_yarn_log_mul,
                             ReadFloat(f, p + "rope.scaling.yarn_log_multiplier", 0.f, 0.f, true,
                                       "a finite multiplier >= 0 (0: none)"));
    STOWAGE_ASSIGN_OR_RETURN(const AttnTemperature temp, GgufAttnTemperature(f));
    hp.f_attn_temp_scale = temp.scale;
    hp.n_attn_temp_floor_scale = temp.floor_scale;
    hp.f_attn_temp_offset = temp.offset;
    if (hp.n_expert > 0)
      return Unimplemented(f.path() + ": key '" + p + "expert_count': mistral3 with experts (" +
                           std::to_string(hp.n_expert) +
                           ") is not supported yet (the dense model only: expected 0 or absent)");
  }

  // llama.cpp's qwen3, smollm3, gemma2 and gemma3 are dense (it ignores the key; qwen3moe is an
  // architecture of its own): an expert count there contradicts the file's architecture.
  if (hp.n_expert > 0 &&
      (hp.arch == "qwen3" || hp.arch == "smollm3" || hp.arch == "gemma2" || hp.arch == "gemma3"))
    return f.KeyError(p + "expert_count", "0 or absent (" + hp.arch + " is a dense architecture)",
                      std::to_string(hp.n_expert));

  if (hp.arch == "granite") {
    // llama_model_granite::load_arch_hparams: logit_scale required, the others optional (0: none)
    STOWAGE_ASSIGN_OR_RETURN(hp.f_logit_scale,
                             ReadDivisor(f, p + "logit_scale", std::nullopt, false, "a finite scale > 0"));
    STOWAGE_ASSIGN_OR_RETURN(hp.f_residual_scale, ReadFloat(f, p + "residual_scale", 0.f, 0.f, true,
                                                            "a finite scale >= 0 (0: none)"));
    STOWAGE_ASSIGN_OR_RETURN(hp.f_embedding_scale, ReadFloat(f, p + "embedding_scale", 0.f, 0.f, true,
                                                             "a finite scale >= 0 (0: none)"));
    if (hp.n_expert > 0)
      return Unimplemented(f.path() + ": key '" + p + "expert_count': granite with experts (" +
                           std::to_string(hp.n_expert) +
                           ") is not supported yet (the dense model only: expected 0 or absent)");
  }

  if (hp.n_head > 0) {
    // the default head size n_embd / n_head needs a divisor; files with both head sizes (GLM-4.5-Air:
    // 4096 wide, 96 heads of 128) need none
    if (hp.n_embd % hp.n_head != 0 &&
        (f.Find(p + "attention.key_length") == nullptr || f.Find(p + "attention.value_length") == nullptr))
      return f.KeyError(p + "embedding_length",
                        "a multiple of " + p + "attention.head_count " + std::to_string(hp.n_head),
                        std::to_string(hp.n_embd));
    // llama.cpp: n_gqa = n_head / n_head_kv (grouped-query attention shares each K/V head).
    if (hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0)
      return f.KeyError(p + "attention.head_count_kv",
                        "a divisor of " + p + "attention.head_count " + std::to_string(hp.n_head),
                        std::to_string(hp.n_head_kv));
    STOWAGE_ASSIGN_OR_RETURN(hp.n_embd_head_k, f.GetU32Or(p + "attention.key_length", hp.n_embd / hp.n_head));
    STOWAGE_ASSIGN_OR_RETURN(hp.n_embd_head_v,
                             f.GetU32Or(p + "attention.value_length", hp.n_embd / hp.n_head));
    if (hp.n_embd_head_k == 0) return f.KeyError(p + "attention.key_length", "a positive head size", "0");
    if (hp.n_embd_head_v == 0) return f.KeyError(p + "attention.value_length", "a positive head size", "0");
    STOWAGE_ASSIGN_OR_RETURN(hp.n_rot, f.GetU32Or(p + "rope.dimension_count", hp.n_embd_head_k));
    // llama.cpp load_hparams ("invalid n_rot") for llama; build_qwen2/qwen2moe/qwen3 assert it. The
    // message names where the head size comes from: a changed embedding_length or head_count
    // shows here as well.
    if ((hp.arch == "llama" || hp.arch == "qwen2" || hp.arch == "qwen2moe" || hp.arch == "qwen3" ||
         hp.arch == "qwen3moe" || hp.arch == "mistral3" || hp.arch == "smollm3" || hp.arch == "granite") &&
        hp.n_rot != hp.n_embd_head_k)
      return f.KeyError(p + "rope.dimension_count",
                        HeadSizeText(f, p, hp) + "; " +
                            (hp.arch == "llama" ? "llama.cpp: invalid n_rot)"
                                                : "build_" + hp.arch + " asserts n_rot == head size)"),
                        std::to_string(hp.n_rot));
    // ggml's ROPE rotates pairs of the first n_rot dimensions of each head (the CPU op asserts
    // n_dims % 2 == 0 and n_dims <= ne0; the runtime's ROPE refuses 0 as well; llama.cpp checks
    // n_rot only for llama-like archs, then aborts in the graph).
    if (hp.rope_type >= 0 && (hp.n_rot == 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.n_embd_head_k))
      return f.KeyError(p + "rope.dimension_count", "an even count from 2 to " + HeadSizeText(f, p, hp) + ")",
                        std::to_string(hp.n_rot));
    // build_llama/qwen2/qwen2moe/phi3 assert equal K and V head sizes
    if (hp.arch != "gemma" && hp.arch != "gemma2" && hp.arch != "gemma3" && hp.arch != "deepseek2" &&
        hp.n_embd_head_k != hp.n_embd_head_v)
      return f.KeyError(p + "attention.value_length",
                        HeadSizeText(f, p, hp) + "; build_" + hp.arch + " asserts equal K and V head sizes)",
                        std::to_string(hp.n_embd_head_v));
  } else if (attention) {
    return f.KeyError(p + "attention.head_count", "a positive head count", "0");
  }

  // arch-specific keys; every supported architecture requires the RMS norm epsilon
  STOWAGE_ASSIGN_OR_RETURN(
      hp.f_norm_rms_eps, ReadNormEps(f, p + "attention.layer_norm_rms_epsilon", std::nullopt, &hp.warnings));
  STOWAGE_ASSIGN_OR_RETURN(hp.f_norm_eps,
                           ReadNormEps(f, p + "attention.layer_norm_epsilon", 1e-5f, &hp.warnings));
  STOWAGE_ASSIGN_OR_RETURN(hp.f_attention_scale, ReadFloat(f, p + "attention.scale", 0.f, 0.f, true,
                                                           "a finite scale >= 0 (0: 1/sqrt(head size))"));
  // llama_model_qwen3moe: "n_expert must be > 0" (load_arch_tensors); every layer has experts
  if (hp.arch == "qwen3moe" && hp.n_expert == 0)
    return f.KeyError(p + "expert_count",
                      "a positive expert count (" + hp.arch + " routes every layer to experts)",
                      "0 or absent");
  if (hp.arch == "qwen2moe" || hp.arch == "qwen3moe") {
    STOWAGE_ASSIGN_OR_RETURN(hp.n_ff_exp, f.GetU32Or(p + "expert_feed_forward_length", 0));
    STOWAGE_ASSIGN_OR_RETURN(hp.n_ff_shexp, f.GetU32Or(p + "expert_shared_feed_forward_length", 0));
  }
  if (hp.arch == "phi3") {
    // llama.cpp: the key, or the default of a Phi-3 file written before it existed; else refused
    STOWAGE_ASSIGN_OR_RETURN(const std::optional<uint32_t> n_swa, GgufSlidingWindow(f));
    if (!n_swa)
      return InvalidArgument(f.path() + ": missing key '" + p +
                             "attention.sliding_window' (invalid value for sliding_window)");
    hp.n_swa = *n_swa;
  }
  if (hp.arch == "gemma2" || hp.arch == "gemma3") STOWAGE_RETURN_IF_ERROR(ReadGemmaHParams(f, &hp));
  if (hp.arch == "deepseek2") STOWAGE_RETURN_IF_ERROR(ReadDeepSeek2HParams(f, &hp));
  if (hp.arch == "glm4moe") STOWAGE_RETURN_IF_ERROR(ReadGlm4MoeHParams(f, &hp));
  if (hp.arch == "gpt-oss") STOWAGE_RETURN_IF_ERROR(ReadGptOssHParams(f, &hp));
  if (hp.arch == "mamba") {
    STOWAGE_ASSIGN_OR_RETURN(hp.ssm_d_conv, f.GetU32(p + "ssm.conv_kernel"));
    STOWAGE_ASSIGN_OR_RETURN(hp.ssm_d_inner, f.GetU32(p + "ssm.inner_size"));
    STOWAGE_ASSIGN_OR_RETURN(hp.ssm_d_state, f.GetU32(p + "ssm.state_size"));
    STOWAGE_ASSIGN_OR_RETURN(hp.ssm_dt_rank, f.GetU32(p + "ssm.time_step_rank"));
    STOWAGE_ASSIGN_OR_RETURN(hp.ssm_dt_b_c_rms, f.GetBoolOr(p + "ssm.dt_b_c_rms", false));
    const std::pair<const char*, uint32_t> ssm[] = {{"ssm.conv_kernel", hp.ssm_d_conv},
                                                    {"ssm.inner_size", hp.ssm_d_inner},
                                                    {"ssm.state_size", hp.ssm_d_state},
                                                    {"ssm.time_step_rank", hp.ssm_dt_rank}};
    for (const auto& [key, value] : ssm)
      if (value == 0) return f.KeyError(p + key, "a positive size", "0");
  }
  STOWAGE_ASSIGN_OR_RETURN(hp.n_vocab, GgufVocabularySize(f));
  if (check_tokenizer) STOWAGE_RETURN_IF_ERROR(CheckTokenizer(f));
  return hp;
}

int64_t KvCacheCells(const ModelGraphs& m, uint32_t il) {
  if (m.hp.recurrent()) return std::max<int64_t>(1, m.cfg.n_seq_max);
  return UsesSwaCache(m, il) ? m.cfg.n_ctx_swa : m.cfg.n_ctx;
}

void AddKvCache(ModelGraphs& m) {
  // llama_init_from_model: recurrent models keep max(1, n_seq_max) F32 state cells (ggml_ssm_conv
  // and ggml_ssm_scan need F32); attention models n_ctx cells of type_k / type_v, except the
  // sliding-window layers of an interleaved-SWA model, whose K/V live in llama_kv_cache_iswa's
  // SWA cache of n_ctx_swa cells (KvCacheCells). MLA (llama.cpp 2026 llama_kv_cache, is_mla) keeps
  // only K: one row of kv_lora_rank + n_rot per cell, V being a view of it.
  const bool rec = m.hp.recurrent();
  const int n_caches = m.hp.is_mla() ? 1 : 2;
  for (uint32_t il = 0; il < m.hp.n_layer; ++il) {
    const int64_t kv_size = KvCacheCells(m, il);
    for (int kv = 0; kv < n_caches; ++kv) {
      GlobalTensor g;
      g.name = (kv == 0 ? "cache_k_l" : "cache_v_l") + std::to_string(il);
      g.kind = TensorKind::kKvCache;
      g.type = rec ? GgmlType::F32 : (kv == 0 ? m.cfg.type_k : m.cfg.type_v);
      const int64_t width = rec ? (kv == 0 ? m.hp.n_embd_k_s() : m.hp.n_embd_v_s())
                                : (kv == 0 ? m.hp.n_embd_k_gqa() : m.hp.n_embd_v_gqa());
      g.ne[0] = width * kv_size;
      g.nbytes = RowSize(g.type, g.ne[0]);
      g.layer = static_cast<int>(il);
      g.consumer_op = GgmlOp::NONE;
      m.globals.push_back(std::move(g));
    }
  }
}

namespace {

// llama.cpp common/arg.cpp kv_cache_types: the types -ctk / -ctv accept.
constexpr GgmlType kKvCacheTypes[] = {GgmlType::F32,    GgmlType::F16,  GgmlType::BF16,
                                      GgmlType::Q8_0,   GgmlType::Q4_0, GgmlType::Q4_1,
                                      GgmlType::IQ4_NL, GgmlType::Q5_0, GgmlType::Q5_1};

std::string KvCacheTypeNames() {
  std::string names;
  for (GgmlType t : kKvCacheTypes) names += (names.empty() ? "" : ", ") + std::string(GgmlTypeName(t));
  return names;
}

bool IsKvCacheType(GgmlType t) {
  return std::find(std::begin(kKvCacheTypes), std::end(kKvCacheTypes), t) != std::end(kKvCacheTypes);
}

}  // namespace

Result<GgmlType> ParseKvCacheType(std::string_view name) {
  Result<GgmlType> t = ParseGgmlType(name);
  if (!t.ok() || !IsKvCacheType(*t))
    return InvalidArgument("expected a KV cache type (" + KvCacheTypeNames() + "), found '" +
                           std::string(name) + "'");
  return t;
}

Status ResolveContext(const HParams& hp, const std::string& path, ContextConfig* cfg) {
  if (cfg->n_ubatch == 0 || cfg->n_batch == 0)
    return InvalidArgument("n_batch and n_ubatch must be positive");
  for (GgmlType t : {cfg->type_k, cfg->type_v})
    if (!IsKvCacheType(t))
      return InvalidArgument(std::string("unsupported KV cache type ") + GgmlTypeName(t) +
                             " (llama.cpp accepts " + KvCacheTypeNames() + ")");
  // llama_init_from_model (Feb 2025): flash attention needs equal K and V head sizes ("forcing
  // off", a warning; BuildModelGraphs records it in ModelGraphs::flash_attn_forced_off); a
  // quantized V cache needs flash attention.
  // deepseek2's K and V heads differ (MLA: by the rope part; the older form: qk_nope + qk_rope
  // against v_head_dim); llama.cpp 2026 keeps flash attention for them (its kernels take K and V
  // heads of different widths).
  if (cfg->flash_attn && hp.n_embd_head_k != hp.n_embd_head_v && hp.arch != "deepseek2")
    cfg->flash_attn = false;
  if (!hp.recurrent() && !cfg->flash_attn && GetTypeTraits(cfg->type_v).block_size > 1)
    return InvalidArgument(std::string("V cache quantization requires flash_attn (llama.cpp); -ctv ") +
                           GgmlTypeName(cfg->type_v) + " needs -fa on (or use f16, bf16 or f32)");
  if (cfg->n_ctx == 0) {
    if (hp.n_ctx_train > kMaxContextTokens)
      return InvalidArgument(path + ": " + hp.arch + ".context_length " + std::to_string(hp.n_ctx_train) +
                             " exceeds the largest context Stowage plans (" +
                             std::to_string(kMaxContextTokens) +
                             " tokens); give a context size (-c; stowage-opt: --gguf-n-ctx)");
    if (hp.n_ctx_train == 0)
      return InvalidArgument(path + ": " + hp.arch +
                             ".context_length is 0; give a context size (-c; stowage-opt: --gguf-n-ctx)");
    cfg->n_ctx = hp.n_ctx_train;
  }
  if (cfg->n_ctx > kMaxContextTokens)
    return InvalidArgument(path + ": context size " + std::to_string(cfg->n_ctx) +
                           " exceeds the largest context Stowage plans (" +
                           std::to_string(kMaxContextTokens) + " tokens); expected at most that (-c, or " +
                           hp.arch + ".context_length times the sequences)");
  // llama_init_from_model pads n_ctx to llama_kv_cache_get_padding (256 with flash attention,
  // else 32) because kv_self.n is padded during inference; n_batch <= n_ctx, then raised to at least
  // GGML_KQ_MASK_PAD (64 in FEB25 ggml.h; "n_batch is less than GGML_KQ_MASK_PAD - increasing").
  // Interleaved-SWA models follow llama.cpp 2026, whose llama_context pads n_ctx to 256 whatever
  // the attention.
  // llama.cpp 2026 llama_context: n_batch = min(n_ctx, n_batch) (causal attention) and n_ubatch =
  // min(n_batch, n_ubatch) on the asked n_ctx, then n_ctx = GGML_PAD(n_ctx, 256) whatever the
  // attention; no GGML_KQ_MASK_PAD floor.
  if (cfg->llamacpp_compat == LlamacppCompat::k2026) {
    cfg->n_batch = std::min(cfg->n_ctx, cfg->n_batch);
    cfg->n_ubatch = std::min(cfg->n_ubatch, cfg->n_batch);
    cfg->n_ctx = (cfg->n_ctx + 255) / 256 * 256;
  } else {
    const uint32_t pad = hp.iswa() ? 256u : KvPadding(*cfg);  // kMaxContextTokens is a multiple of it
    cfg->n_ctx = (cfg->n_ctx + pad - 1) / pad * pad;
    cfg->n_batch = std::max<uint32_t>(std::min(cfg->n_ctx, cfg->n_batch), kKqMaskPad);
    cfg->n_ubatch = std::min(cfg->n_ubatch, cfg->n_batch);
  }
  // Sequences (llama.cpp 2026 llama_context): 1 to LLAMA_MAX_SEQ. Several without a unified
  // cache get one KV stream each (n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) cells, n_ctx
  // rounded to n_seq_max streams), whose attention graphs carry a stream dimension (K views and
  // KQ_mask [n_kv, n_tokens / n_stream, 1, n_stream]) not built here. A recurrent model keeps a
  // state cell per sequence instead (no KV streams).
  cfg->n_seq_max = std::max<uint32_t>(1, cfg->n_seq_max);
  if (cfg->n_seq_max > kMaxSequences)
    return InvalidArgument(path + ": n_seq_max " + std::to_string(cfg->n_seq_max) + " exceeds " +
                           std::to_string(kMaxSequences) + " (LLAMA_MAX_SEQ)");
  if (cfg->n_seq_max > 1 && !cfg->kv_unified && !hp.recurrent())
    return Unimplemented(
        path + ": -np " + std::to_string(cfg->n_seq_max) +
        " without -kvu: one KV stream per sequence (llama.cpp's n_ctx_seq = n_ctx / n_seq_max "
        "cells each) is not planned; add -kvu (one cache of n_ctx cells shared by the "
        "sequences, llama-server's)");
  // llama_kv_cache_iswa: size_swa = GGML_PAD(min(size_base, n_swa * (unified ? n_seq_max : 1) +
  // n_ubatch), 256) with kv_unified off (llama.cpp's default), size_base with --swa-full. n_ctx is
  // a multiple of 256 here, so size_swa <= n_ctx, and below n_ctx it is >= n_swa + n_ubatch (the
  // session's ring relies on it).
  cfg->n_ctx_swa = 0;
  if (hp.iswa()) {
    const uint64_t seqs = cfg->kv_unified ? cfg->n_seq_max : 1;
    const uint64_t want = std::min<uint64_t>(cfg->n_ctx, uint64_t{hp.n_swa} * seqs + cfg->n_ubatch);
    cfg->n_ctx_swa = cfg->swa_full ? cfg->n_ctx : static_cast<uint32_t>((want + 255) / 256 * 256);
  }
  return Status::Ok();
}

Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const ContextConfig& cfg) {
  STOWAGE_ASSIGN_OR_RETURN(const HParams hp, ReadHParams(gguf));
  return BuildModelGraphs(gguf, hp, cfg);
}

Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const HParams& hp, const ContextConfig& cfg) {
  ModelGraphs m;
  m.hp = hp;
  const ArchSpec* spec = FindArch(m.hp.arch);
  m.cfg = cfg;
  STOWAGE_RETURN_IF_ERROR(ResolveContext(m.hp, gguf.path(), &m.cfg));
  m.flash_attn_forced_off = cfg.flash_attn && !m.cfg.flash_attn;
  m.cfg.n_seq_max = std::max<uint32_t>(1, m.cfg.n_seq_max);
  if (m.hp.recurrent()) {
    m.cfg.type_k = m.cfg.type_v = GgmlType::F32;  // llama_init_from_model forces F32 states
  } else {
    for (GgmlType t : {m.cfg.type_k, m.cfg.type_v}) {
      const int64_t bs = GetTypeTraits(t).block_size;
      if ((m.hp.n_embd_head_k % bs) != 0)
        return InvalidArgument(gguf.path() + ": KV cache type " + GgmlTypeName(t) +
                               " needs a head size divisible by " + std::to_string(bs) +
                               ", found n_embd_head_k " + std::to_string(m.hp.n_embd_head_k));
    }
  }
  // Split-tensor MoE files (one tensor per expert, pre-2024 llama.cpp) are not supported.
  if (m.hp.n_expert > 0) {
    for (const char* old : {"blk.0.ffn_gate.0.weight", "blk.0.ffn_up.0.weight", "blk.0.ffn_down.0.weight"}) {
      if (gguf.FindTensor(old) != nullptr)
        return Unimplemented(gguf.path() + ": split-tensor MoE file (one tensor per expert, e.g. '" + old +
                             "'): re-convert it with merged ffn_*_exps tensors");
    }
  }

  WeightLoader wl(gguf, m);
  ModelWeights w;
  if (Status s = spec->load(wl, m.hp, w); !s.ok()) {
    if (s.message().rfind(gguf.path(), 0) == 0) return s;
    return Status(s.code(), gguf.path() + ": " + s.message());
  }
  // A tensor the architecture does not read: llama.cpp's done_getting_tensors refuses the file
  // ("wrong number of tensors"); ignoring it would, e.g., make a model whose output.weight is
  // misspelled silently tied. Tensors of blocks past block_count are named as such: the metadata
  // and the tensors disagree about the model's depth (load_tensors creates only n_layer blocks).
  const std::vector<std::string> unused = wl.Unused();
  for (const std::string& u : unused) {
    unsigned long block = 0;
    char* end = nullptr;
    if (u.rfind("blk.", 0) != 0) continue;
    block = std::strtoul(u.c_str() + 4, &end, 10);
    const uint32_t n_blocks = m.hp.n_layer + m.hp.n_layer_nextn;  // the file's block_count
    if (end == u.c_str() + 4 || *end != '.' || block < n_blocks) continue;
    return InvalidArgument(gguf.path() + ": wrong number of tensors: tensor '" + u + "' belongs to block " +
                           std::to_string(block) + " but " + m.hp.arch + ".block_count is " +
                           std::to_string(n_blocks));
  }
  if (!unused.empty()) {
    const size_t n_tensors = gguf.tensors().size();
    return gguf.TensorError(
        unused.front(), "only tensors architecture " + m.hp.arch + " reads",
        "one nothing reads" +
            (unused.size() > 1 ? " (and " + std::to_string(unused.size() - 1) + " more)" : "") +
            "; llama.cpp: wrong number of tensors; expected " + std::to_string(n_tensors) + ", got " +
            std::to_string(n_tensors - unused.size()));
  }
  AddKvCache(m);
  // The recurrent models (mamba) keep Feb 2025's graphs: ggml-alloc's exact rules over their state
  // copies give overlapping offsets (plan-dump --check-memory) that the plan verifier refuses.
  m.llama2026 = spec->llama2026 || (m.cfg.llamacpp_compat == LlamacppCompat::k2026 && !m.hp.recurrent());

  const int64_t n_ctx = m.cfg.n_ctx;
  // llama.cpp 2026 sched_reserve with several sequences (a transformer's): pp of min(n_ctx,
  // n_ubatch) tokens rounded up to a multiple of n_seq_max (graph_reserve, for ubatch_reserve's
  // equal sequences) of which min(n_ctx, n_ubatch) are outputs, tg of one token and output per
  // sequence; with one, min(n_ctx, n_ubatch) and 1 as llama.cpp Feb 2025. llama.cpp 2026 reserves
  // the pp graph with at most n_outputs_max outputs (min(n_tokens, cparams.n_outputs_max)).
  const int64_t n_seqs = m.hp.recurrent() ? 1 : m.cfg.n_seq_max;
  const int64_t pp_ubatch = std::min<int64_t>(n_ctx, m.cfg.n_ubatch);
  const int64_t pp_tokens = (pp_ubatch + n_seqs - 1) / n_seqs * n_seqs;
  const int64_t pp_outputs =
      m.cfg.n_outputs_max > 0 && m.llama2026 ? std::min<int64_t>(pp_ubatch, m.cfg.n_outputs_max) : pp_ubatch;
  const int64_t max_kv = m.hp.recurrent() ? m.cfg.n_seq_max : n_ctx;
  struct Spec {
    Graph* g;
    const char* name;
    int64_t tokens, outputs;
  };
  for (const Spec& s : {Spec{&m.pp, "pp", pp_tokens, pp_outputs}, Spec{&m.tg, "tg", n_seqs, n_seqs}}) {
    s.g->name = s.name;
    s.g->max_tokens = s.tokens;
    s.g->max_kv = max_kv;
    s.g->max_kv_swa = m.cfg.n_ctx_swa;
    s.g->max_outputs = s.outputs;
    s.g->unread_embd_ne0 = m.llama2026 ? m.hp.n_embd : 0;
    GraphBuilder b(*s.g, m);
    STOWAGE_RETURN_IF_ERROR(spec->build(b, m, w));
  }
  return m;
}

}  // namespace stowage::planner
