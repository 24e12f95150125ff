// Synthetic GGUF models: see synth.h for the sources of names, shapes, keys and values.
#include "synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>

#include "quants.h"
#include "stowage/planner/arch_tensors.h"
#include "stowage/runtime/gguf.h"

namespace stowage::synth {
namespace {

constexpr uint32_t kMaxGeneratedVocab = 1u << 22;  // real vocabularies stay below 300k tokens

// --- random numbers: one splitmix64 stream per tensor --------------------------------------------

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t StreamSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  uint64_t s = seed ^ h;
  return SplitMix(s);
}

// Uniform in [-1, 1).
float Uniform(uint64_t& s) {
  return static_cast<float>(static_cast<double>(SplitMix(s) >> 11) * 0x1.0p-52 - 1.0);
}

// --- how each tensor's values are made ----------------------------------------------------------

enum class Init { kWeight, kNorm, kBias, kSsmA, kOnes, kRopeFreqs, kRopeLong, kRopeShort };

struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type;
  Init init;
};

bool CanGenerate(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q8_0 ||
         t == GgmlType::Q4_0 || t == GgmlType::MXFP4;
}

// llama.cpp llama_ftype for a model whose weights are mostly `t` (llama.h LLAMA_FTYPE_*); -1 when
// there is no single matching value.
int FileType(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return 0;
    case GgmlType::F16:
      return 1;
    case GgmlType::Q4_0:
      return 2;
    case GgmlType::Q4_1:
      return 3;
    case GgmlType::Q8_0:
      return 7;
    case GgmlType::Q5_0:
      return 8;
    case GgmlType::Q5_1:
      return 9;
    case GgmlType::Q2_K:
      return 10;
    case GgmlType::Q3_K:
      return 11;  // Q3_K_S
    case GgmlType::Q4_K:
      return 14;  // Q4_K_S
    case GgmlType::Q5_K:
      return 16;  // Q5_K_S
    case GgmlType::Q6_K:
      return 18;
    case GgmlType::IQ2_XXS:
      return 19;
    case GgmlType::IQ2_XS:
      return 20;
    case GgmlType::IQ3_XXS:
      return 23;
    case GgmlType::IQ1_S:
      return 24;
    case GgmlType::IQ4_NL:
      return 25;
    case GgmlType::IQ3_S:
      return 26;
    case GgmlType::IQ2_S:
      return 28;
    case GgmlType::IQ4_XS:
      return 30;
    case GgmlType::IQ1_M:
      return 31;
    case GgmlType::BF16:
      return 32;
    case GgmlType::TQ1_0:
      return 36;
    case GgmlType::TQ2_0:
      return 37;
    case GgmlType::MXFP4:
      return 38;  // MXFP4_MOE
    default:
      return -1;
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

bool IsMoe(const std::string& arch) {
  return arch == "mixtral" || arch == "qwen2moe" || arch == "qwen3moe" || arch == "deepseek2" ||
         arch == "glm4moe" || arch == "gpt-oss";
}

void Fill(const TensorPlan& p, const ModelSpec& s, float* x, int64_t n) {
  uint64_t rng = StreamSeed(s.seed, p.name);
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.ne[0]));
  switch (p.init) {
    case Init::kWeight:
      for (int64_t i = 0; i < n; ++i) x[i] = scale * Uniform(rng);
      break;
    case Init::kNorm:
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f + 0.05f * Uniform(rng);
      break;
    case Init::kBias:
      for (int64_t i = 0; i < n; ++i) x[i] = 0.02f * Uniform(rng);
      break;
    case Init::kOnes:
      for (int64_t i = 0; i < n; ++i) x[i] = 1.0f;
      break;
    case Init::kSsmA:
      for (int64_t i = 0; i < n; ++i) x[i] = -static_cast<float>(i % p.ne[0] + 1);
      break;
    case Init::kRopeFreqs: {
      const uint32_t hd = s.head_dim;
      std::vector<float> f =
          Llama3RopeFactors(hd, s.rope_freq_base, s.rope_scaling_factor, s.rope_low_freq_factor,
                            s.rope_high_freq_factor, s.rope_original_ctx);
      for (int64_t i = 0; i < n; ++i) x[i] = f[static_cast<size_t>(i)];
      break;
    }
    // phi3 LongRoPE factors (Phi-3.5 style: 1 for the fastest dims, growing for the slow ones;
    // long factors grow far more): long 1 .. 4, short 1 .. 1.5, linear over the n_rot/2 dims.
    case Init::kRopeLong:
    case Init::kRopeShort: {
      const float top = p.init == Init::kRopeLong ? 3.0f : 0.5f;
      for (int64_t i = 0; i < n; ++i)
        x[i] = 1.0f + top * static_cast<float>(i) / static_cast<float>(std::max<int64_t>(1, n - 1));
      break;
    }
  }
}

Status Encode(const TensorPlan& p, const ModelSpec& s, uint8_t* dst, uint64_t nbytes) {
  int64_t n = 1;
  for (int64_t d : p.ne) n *= d;
  std::unique_ptr<float[]> x(new (std::nothrow) float[static_cast<size_t>(n)]);
  if (!x)
    return ResourceExhausted("gguf-synth: tensor '" + p.name + "': cannot allocate " + std::to_string(n) +
                             " floats");
  Fill(p, s, x.get(), n);
  switch (p.type) {
    case GgmlType::F32:
      std::memcpy(dst, x.get(), static_cast<size_t>(n) * 4);
      break;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = p.type == GgmlType::F16 ? Fp32ToFp16(x[i]) : Fp32ToBf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case GgmlType::Q8_0:
      QuantizeQ8_0(x.get(), dst, n);
      break;
    case GgmlType::Q4_0:
      QuantizeQ4_0(x.get(), dst, n);
      break;
    case GgmlType::MXFP4:  // the CPU backend's quantize_row_mxfp4_ref, which llama-quantize runs
      cpu::QuantizeRowMXFP4(x.get(), reinterpret_cast<cpu::BlockMXFP4*>(dst), n);
      break;
    default:
      return Internal("gguf-synth: no generator for type " + std::string(GgmlTypeName(p.type)));
  }
  (void)nbytes;
  return Status::Ok();
}

// The hyper-parameters of the planner's tensor tables for `s` (head sizes all head_dim).
planner::TensorDims SpecDims(const ModelSpec& s) {
  planner::TensorDims d =
      planner::UniformHeadDims(s.n_embd, s.n_vocab, s.n_ff, s.n_head, s.n_head_kv, s.head_dim);
  d.n_expert = s.n_expert;
  d.n_ff_exp = s.n_ff_exp;
  d.n_ff_shexp = s.n_ff_shexp;
  d.ssm_d_conv = s.ssm_d_conv;
  d.ssm_d_inner = s.ssm_d_inner;
  d.ssm_d_state = s.ssm_d_state;
  d.ssm_dt_rank = s.ssm_dt_rank;
  if (s.arch == "deepseek2") {
    d.n_rot = s.mla_rope_dim;
    d.n_lora_q = s.q_lora_rank;
    d.n_lora_kv = s.kv_lora_rank;
    d.n_embd_head_k_mla = s.head_dim;
    d.n_embd_head_v_mla = s.mla_v_head_dim;
    d.n_layer_dense_lead = s.n_dense_lead;
    d.mla = !s.mla_legacy;
    d.n_ff_shexp = int64_t{s.n_ff_exp} * s.n_expert_shared;
  }
  if (s.arch == "glm4moe") {
    d.n_rot = s.rope_dim;
    d.n_layer_dense_lead = s.n_dense_lead;
    d.n_ff_shexp = int64_t{s.n_ff_exp} * s.n_expert_shared;
    if (s.n_nextn > 0) d.n_layer_trunk = s.n_layer;
  }
  return d;
}

// llama-quantize's tensor categories (llama.cpp 2026 llama-quant.cpp tensor_get_category): by name.
enum class QuantCategory {
  kTokenEmbd,
  kAttnQ,
  kAttnV,
  kAttnK,
  kAttnQkv,
  kAttnKvB,
  kAttnOutput,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOutput,
  kOther
};

QuantCategory QuantCategoryOf(std::string_view name) {
  using C = QuantCategory;
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (name == "output.weight") return C::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return C::kTokenEmbd;
  if (has("attn_qkv.weight")) return C::kAttnQkv;
  if (has("attn_kv_b.weight")) return C::kAttnKvB;
  if (has("attn_v.weight")) return C::kAttnV;
  if (has("attn_k.weight")) return C::kAttnK;
  if (has("attn_q.weight")) return C::kAttnQ;
  if (has("attn_output.weight")) return C::kAttnOutput;
  if (has("ffn_up")) return C::kFfnUp;
  if (has("ffn_gate")) return C::kFfnGate;
  if (has("ffn_down")) return C::kFfnDown;
  return C::kOther;
}

// llama-quant.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama-quant.cpp tensor_type_fallback: a type whose block does not divide ne0 becomes its 32-block
// sibling, and F16 where that does not divide ne0 either.
GgmlType QuantFallback(GgmlType t, int64_t ne0) {
  if (ne0 % GetTypeTraits(t).block_size == 0) return t;
  switch (t) {
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      t = GgmlType::Q8_0;
      break;
    default:
      break;
  }
  return ne0 % GetTypeTraits(t).block_size == 0 ? t : GgmlType::F16;
}

// Whether llama.cpp's load_hparams types the model 70B (llama with GQA, qwen2: 80 layers), which
// llama-quantize gives more bits in attn_v.
bool IsLlamaCpp70B(const ModelSpec& s) {
  return s.n_layer == 80 && ((s.arch == "llama" && s.n_head != s.n_head_kv) || s.arch == "qwen2");
}

// llama-quantize Q4_K_M's types for the matrices of `t` (marked by `matrix`), in the order it visits
// them (layer by layer: the file order of the planner's tables), as synth.h lists the rules.
void AssignQ4KMTypes(const ModelSpec& s, int n_layer_all, const std::vector<bool>& matrix,
                     const std::vector<int>& layer, std::vector<TensorPlan>& t) {
  using C = QuantCategory;
  const bool tied =
      std::none_of(t.begin(), t.end(), [](const TensorPlan& p) { return p.name == "output.weight"; });
  int n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const C c = QuantCategoryOf(t[i].name);
    if (matrix[i] && (c == C::kAttnV || c == C::kAttnQkv || c == C::kAttnKvB)) ++n_attn_v;
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if (!matrix[i]) continue;
    const C c = QuantCategoryOf(t[i].name);
    const int64_t ne0 = t[i].ne[0];
    GgmlType ty = GgmlType::Q4_K;
    if (c == C::kOutput || (tied && c == C::kTokenEmbd)) {
      ty = ne0 % GetTypeTraits(GgmlType::Q4_K).block_size != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
    } else if (c == C::kAttnV || c == C::kAttnQkv || c == C::kAttnKvB) {
      if (UseMoreBits(i_attn_v, n_attn_v)) ty = GgmlType::Q6_K;
      if (IsLlamaCpp70B(s) && ty == GgmlType::Q4_K) ty = GgmlType::Q5_K;
      if (s.n_expert == 8) ty = GgmlType::Q8_0;
      ++i_attn_v;
    } else if (c == C::kAttnK) {
      if (s.n_expert == 8) ty = GgmlType::Q8_0;
    } else if (c == C::kFfnDown) {
      // with experts the layer comes from the name (layer_info), otherwise from the count
      if (UseMoreBits(s.n_expert > 1 ? layer[i] : i_ffn_down, n_layer_all)) ty = GgmlType::Q6_K;
      ++i_ffn_down;
    } else if (c == C::kAttnOutput) {
      if (s.n_expert == 8) ty = GgmlType::Q5_K;
    }
    t[i].type = QuantFallback(ty, ne0);
  }
}

// The tensor list of one model: the architecture's table (planner arch_tensors.h) in file order,
// output.weight unless tied, the rope factors when asked for, no optional biases.
std::vector<TensorPlan> PlanTensors(const ModelSpec& s) {
  std::vector<TensorPlan> t;
  std::vector<bool> matrix;  // QuantMix::kQ4_K_M: the matrices, whose types come after the list
  std::vector<int> layer;
  const int n_layer_all = static_cast<int>(s.n_layer + (s.arch == "glm4moe" ? s.n_nextn : 0));
  const planner::ArchTensorTable* table =
      planner::FindArchTensorTable(s.arch == "mixtral" ? "llama" : s.arch);
  if (table == nullptr) return t;  // Resolve accepts only SupportedArchs(), which all have a table
  planner::TensorFileOptions opts;
  opts.output = !s.tied_output;
  opts.rope_factors = s.rope_freqs;
  opts.other_optional = (s.arch == "deepseek2" && s.exp_probs_b) || s.arch == "glm4moe";  // filtered below
  planner::ForEachFileTensor(
      *table, SpecDims(s), n_layer_all, opts,
      [&](const planner::ArchTensor& at, int il, const std::string& name, const std::vector<int64_t>& ne) {
        using R = planner::TensorRole;
        if (s.arch == "glm4moe" && !at.required && at.scope == planner::TensorScope::kLayer) {
          // the optional block tensors glm4moe's spec asks for
          const std::string n = at.name;
          const bool qk = n == "attn_q_norm.weight" || n == "attn_k_norm.weight";
          const bool bias = n == "attn_q.bias" || n == "attn_k.bias" || n == "attn_v.bias";
          if (!(qk && s.qk_norm) && !(bias && s.qkv_bias) && n != "nextn.shared_head_norm.weight") return;
        }
        if (s.arch == "glm4moe" && s.n_expert_shared == 0 &&
            std::string(at.name).find("_shexp.") != std::string::npos)
          return;  // expert_shared_count 0: no shared expert
        GgmlType ty = GgmlType::F32;
        Init init = Init::kWeight;
        switch (at.role) {
          case R::kMatrix:
            ty = s.weight_type;
            // llama-quant MXFP4_MOE: the expert stacks (ne2 > 1) MXFP4, every other matrix (token_embd
            // and output included) Q8_0
            if (ty == GgmlType::MXFP4 && !s.pure && !(ne.size() > 2 && ne[2] > 1)) ty = GgmlType::Q8_0;
            if (ne[0] % GetTypeTraits(ty).block_size != 0) ty = GgmlType::F16;  // llama-quant's fallback
            break;
          case R::kNorm:
            init = Init::kNorm;
            break;
          case R::kBias:
            init = Init::kBias;
            break;
          case R::kRouter:
          case R::kConv:
            break;
          case R::kSsmA:
            init = Init::kSsmA;
            break;
          case R::kSsmD:
            init = Init::kOnes;
            break;
          case R::kRopeFreqs:
            init = Init::kRopeFreqs;
            break;
          case R::kRopeLong:
            init = Init::kRopeLong;
            break;
          case R::kRopeShort:
            init = Init::kRopeShort;
            break;
        }
        t.push_back({name, ne, ty, init});
        matrix.push_back(at.role == R::kMatrix);
        layer.push_back(il);
      });
  if (s.mix == QuantMix::kQ4_K_M) AssignQ4KMTypes(s, n_layer_all, matrix, layer, t);
  return t;
}

// A generated SPM vocabulary (see synth.h).
Status AddGeneratedVocab(const ModelSpec& s, GgufWriter* w) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(s.n_vocab);
  auto push = [&](std::string tok, float score, int32_t type) {
    if (tokens.size() < s.n_vocab) {
      tokens.push_back(std::move(tok));
      scores.push_back(score);
      types.push_back(type);
    }
  };
  // llama.cpp llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte.
  push("<unk>", 0.0f, 2);
  push("<s>", 0.0f, 3);
  push("</s>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    push(buf, 0.0f, 6);
  }
  for (uint32_t i = 0; tokens.size() < s.n_vocab; ++i) {
    std::string word;
    for (uint32_t k = i;; k = k / 26 - 1) {
      word.insert(word.begin(), static_cast<char>('a' + k % 26));
      if (k < 26) break;
    }
    push("\xE2\x96\x81" + word, -static_cast<float>(i + 1), 1);  // "▁" (U+2581) marks a word start
  }
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.model", GgufMetaValue::Str("llama")));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.tokens", GgufMetaValue::ArrayStr(tokens)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.scores", GgufMetaValue::ArrayF32(scores)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.token_type", GgufMetaValue::ArrayI32(types)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.unknown_token_id", GgufMetaValue::U32(0)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.bos_token_id", GgufMetaValue::U32(1)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("tokenizer.ggml.eos_token_id", GgufMetaValue::U32(2)));
  return Status::Ok();
}

}  // namespace

// --- numeric building blocks --------------------------------------------------------------------

uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7FFFFFu;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xFFu);
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0u));  // inf / nan
  const int32_t e = exp - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (e <= 0) {                                                 // subnormal half (or zero)
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is correct
  return static_cast<uint16_t>(sign | h);
}

uint16_t Fp32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void QuantizeQ8_0(const float* x, uint8_t* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = Fp32ToFp16(d);
    std::memcpy(out, &dh, 2);
    for (int j = 0; j < 32; ++j)
      out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[j] * id)));
  }
}

void QuantizeQ4_0(const float* x, uint8_t* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
    float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = Fp32ToFp16(d);
    std::memcpy(out, &dh, 2);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
      out[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

std::vector<float> Llama3RopeFactors(uint32_t n_rot, float freq_base, float factor, float low_freq_factor,
                                     float high_freq_factor, uint32_t original_ctx) {
  const double pi = 3.14159265358979323846;
  const double low_wavelen = original_ctx / static_cast<double>(low_freq_factor);
  const double high_wavelen = original_ctx / static_cast<double>(high_freq_factor);
  std::vector<float> out;
  for (uint32_t i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(freq_base), static_cast<double>(i) / n_rot);
    const double wavelen = 2 * pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double smooth = (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// --- specs ----------------------------------------------------------------------------------------

const std::vector<std::string>& SupportedArchs() {
  static const std::vector<std::string> archs = {
      "llama",   "qwen2",   "phi3",   "gemma",  "mamba",    "qwen2moe",  "mixtral", "qwen3",  "mistral3",
      "smollm3", "granite", "gemma2", "gemma3", "qwen3moe", "deepseek2", "gpt-oss", "glm4moe"};
  return archs;
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = {"llama3-8b",    "llama3-70b",       "llama3-405b",
                                                 "mixtral-8x7b", "deepseek-v3-like", "mamba-2.8b"};
  return names;
}

Result<ModelSpec> Preset(std::string_view name) {
  ModelSpec s;
  s.weight_type = GgmlType::F16;
  s.name = std::string(name);
  auto llama3 = [&](uint32_t layers, uint32_t embd, uint32_t heads, uint32_t ff) {
    s.arch = "llama";
    s.n_layer = layers;
    s.n_embd = embd;
    s.n_head = heads;
    s.n_head_kv = 8;
    s.n_ff = ff;
    s.n_vocab = 128256;
    s.n_ctx = 8192;
    s.rope_freq_base = 500000.0f;
  };
  if (name == "llama3-8b") {
    llama3(32, 4096, 32, 14336);
  } else if (name == "llama3-70b") {
    llama3(80, 8192, 64, 28672);
  } else if (name == "llama3-405b") {
    llama3(126, 16384, 128, 53248);  // Llama 3.1 405B: 131072 context via rope_freqs scaling
    s.n_ctx = 131072;
    s.rope_freqs = true;
  } else if (name == "mixtral-8x7b") {
    s.arch = "mixtral";
    s.n_layer = 32;
    s.n_embd = 4096;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 14336;
    s.n_vocab = 32000;
    s.n_ctx = 32768;
    s.rope_freq_base = 1e6f;
    s.n_expert = 8;
    s.n_expert_used = 2;
  } else if (name == "deepseek-v3-like") {  // DeepSeek-V3's config.json, converted and quantized (synth.h)
    s.arch = "deepseek2";
    s.n_layer = 61;
    s.n_dense_lead = 3;
    s.n_embd = 7168;
    s.n_head = 128;
    s.head_dim = 192;  // qk_nope_head_dim 128 + qk_rope_head_dim 64
    s.mla_rope_dim = 64;
    s.mla_v_head_dim = 128;
    s.q_lora_rank = 1536;
    s.kv_lora_rank = 512;
    s.n_ff = 18432;
    s.n_ff_exp = 2048;
    s.n_expert = 256;
    s.n_expert_used = 8;
    s.n_expert_shared = 1;
    s.n_expert_groups = 8;
    s.n_group_used = 4;
    s.expert_gating_func = 2;  // sigmoid
    s.expert_weights_scale = 2.5f;
    s.expert_weights_norm = true;
    s.exp_probs_b = true;
    s.n_vocab = 129280;
    s.n_ctx = 163840;
    s.rope_freq_base = 10000.0f;
    s.rms_eps = 1e-6f;
    s.rope_scaling = "yarn";
    s.rope_scale = 40.0f;
    s.rope_scaling_orig_ctx = 4096;
    s.yarn_beta_fast = 32.0f;
    s.yarn_beta_slow = 1.0f;
    s.yarn_log_mul = 0.1f;  // 0.1 * mscale_all_dim, as convert_hf_to_gguf writes it
    s.weight_type = GgmlType::Q4_K;
    s.mix = QuantMix::kQ4_K_M;
  } else if (name == "mamba-2.8b") {
    s.arch = "mamba";
    s.n_layer = 64;
    s.n_embd = 2560;
    s.n_head = 0;
    s.n_head_kv = 0;
    s.n_ff = 0;
    s.n_vocab = 50280;
    s.n_ctx = 1048576;
    s.ssm_d_inner = 5120;
    s.ssm_d_state = 16;
    s.ssm_d_conv = 4;
    s.ssm_dt_rank = 160;
    s.tied_output = true;
  } else {
    return InvalidArgument("gguf-synth: unknown preset '" + std::string(name) +
                           "' (known: " + Join(PresetNames()) + ")");
  }
  return s;
}

// deepseek2's defaults and checks (the planner's ReadDeepSeek2HParams rules, so that a written file
// plans): one KV head, experts (4 of which 2 used by default) of n_ff_exp, leading dense layers up to
// n_layer, a rope part below the head, groups that divide the experts.
Status ResolveDeepSeek2(ModelSpec& s) {
  s.n_head_kv = s.mla_legacy ? s.n_head : 1;  // the older form's cache has every head
  if (s.mla_v_head_dim == 0) s.mla_v_head_dim = s.head_dim;
  if (s.n_expert == 0) s.n_expert = 4;
  if (s.n_expert_used == 0) s.n_expert_used = std::min<uint32_t>(2, s.n_expert);
  if (s.n_ff_exp == 0) s.n_ff_exp = std::max<uint32_t>(1, s.n_ff / s.n_expert_used);
  auto bad = [&](const std::string& what) { return InvalidArgument("gguf-synth: deepseek2: " + what); };
  if (s.n_expert_used > s.n_expert)
    return bad("n_expert_used " + std::to_string(s.n_expert_used) + " exceeds n_expert " +
               std::to_string(s.n_expert));
  if (s.kv_lora_rank == 0) return bad("kv_lora_rank must be positive");
  if (s.mla_rope_dim == 0 || s.mla_rope_dim % 2 != 0 || s.mla_rope_dim >= s.head_dim)
    return bad("the rope part (" + std::to_string(s.mla_rope_dim) +
               ") must be even, positive and below head_dim " + std::to_string(s.head_dim));
  if (s.n_dense_lead > s.n_layer)
    return bad("n_dense_lead " + std::to_string(s.n_dense_lead) + " exceeds n_layer " +
               std::to_string(s.n_layer));
  if (s.expert_gating_func != 1 && s.expert_gating_func != 2)
    return bad("expert_gating_func must be 1 (softmax) or 2 (sigmoid)");
  if (s.n_expert_groups > 1 &&
      (s.n_expert % s.n_expert_groups != 0 || s.n_group_used == 0 || s.n_group_used >= s.n_expert_groups))
    return bad("expert groups " + std::to_string(s.n_expert_groups) + " (used " +
               std::to_string(s.n_group_used) + ") must divide n_expert " + std::to_string(s.n_expert) +
               " and use 1..groups-1");
  return Status::Ok();
}

Result<ModelSpec> Resolve(ModelSpec s) {
  const auto& archs = SupportedArchs();
  if (std::find(archs.begin(), archs.end(), s.arch) == archs.end())
    return InvalidArgument("gguf-synth: unknown architecture '" + s.arch + "' (supported: " + Join(archs) +
                           ")");
  if (s.name.empty()) s.name = "synthetic-" + s.arch;
  auto positive = [&](const char* what, uint32_t v) -> Status {
    if (v == 0)
      return InvalidArgument(std::string("gguf-synth: ") + what + " must be positive for " + s.arch);
    return Status::Ok();
  };
  STOWAGE_RETURN_IF_ERROR(positive("n_layer", s.n_layer));
  if (s.n_layer > 512)  // llama.cpp's LLAMA_MAX_LAYERS: a deeper model would not load
    return InvalidArgument("gguf-synth: n_layer " + std::to_string(s.n_layer) +
                           " exceeds llama.cpp's maximum of 512 layers (LLAMA_MAX_LAYERS)");
  if (!(s.rope_freq_base > 0.f) || !std::isfinite(s.rope_freq_base))
    return InvalidArgument("gguf-synth: rope_freq_base must be a positive finite number, found " +
                           std::to_string(s.rope_freq_base));
  STOWAGE_RETURN_IF_ERROR(positive("n_embd", s.n_embd));
  STOWAGE_RETURN_IF_ERROR(positive("n_ctx", s.n_ctx));
  if (s.vocab_from.empty() && (s.n_vocab < 3 || s.n_vocab > kMaxGeneratedVocab))
    return InvalidArgument("gguf-synth: n_vocab must be 3.." + std::to_string(kMaxGeneratedVocab) +
                           " for a generated vocab (<unk>, <s>, </s>, bytes, pieces), found " +
                           std::to_string(s.n_vocab));
  // llama.cpp: gemma's and gemma2's output is token_embd
  if (s.arch == "gemma" || s.arch == "gemma2") s.tied_output = true;
  const bool gemma23 = s.arch == "gemma2" || s.arch == "gemma3";
  if (s.final_softcap < 0.f) s.final_softcap = s.arch == "gemma2" ? 30.0f : 0.0f;
  if (!gemma23 && s.arch != "gpt-oss" && s.swa_period != 0)
    return InvalidArgument("gguf-synth: a sliding window pattern is gemma2's, gemma3's and gpt-oss's, not " +
                           s.arch + "'s");
  // plan-model refuses these (ReadHParams): a window above the training context, a period past
  // the layers (no global layer left)
  if (gemma23 && s.n_swa > s.n_ctx)
    return InvalidArgument("gguf-synth: " + s.arch + "'s sliding window " + std::to_string(s.n_swa) +
                           " exceeds n_ctx " + std::to_string(s.n_ctx) + " (give a window of at most n_ctx)");
  if ((gemma23 || s.arch == "gpt-oss") && s.swa_period > s.n_layer)
    return InvalidArgument("gguf-synth: the sliding window pattern's period " + std::to_string(s.swa_period) +
                           " exceeds n_layer " + std::to_string(s.n_layer) +
                           " (no global layer would be left)");
  if (gemma23 && (!(s.attn_softcap > 0.f) || !std::isfinite(s.attn_softcap) || !(s.final_softcap >= 0.f) ||
                  !std::isfinite(s.final_softcap) || (s.arch == "gemma2" && s.final_softcap == 0.f)))
    return InvalidArgument(
        "gguf-synth: soft-caps must be finite and positive (gemma3's final one may be 0), found " +
        std::to_string(s.attn_softcap) + " and " + std::to_string(s.final_softcap));
  if (s.arch == "mamba") {
    if (s.ssm_d_inner == 0) s.ssm_d_inner = 2 * s.n_embd;
    if (s.ssm_dt_rank == 0) s.ssm_dt_rank = (s.n_embd + 15) / 16;
    STOWAGE_RETURN_IF_ERROR(positive("ssm_d_state", s.ssm_d_state));
    STOWAGE_RETURN_IF_ERROR(positive("ssm_d_conv", s.ssm_d_conv));
    s.n_head = s.n_head_kv = 0;
    s.n_ff = 0;
    s.head_dim = 0;
    s.n_expert = s.n_expert_used = 0;
    if (s.rope_freqs)
      return InvalidArgument("gguf-synth: rope_freqs needs an attention architecture, not mamba");
  } else {
    STOWAGE_RETURN_IF_ERROR(positive("n_head", s.n_head));
    STOWAGE_RETURN_IF_ERROR(positive("n_head_kv", s.n_head_kv));
    STOWAGE_RETURN_IF_ERROR(positive("n_ff", s.n_ff));
    if (s.head_dim == 0) {
      if (s.n_embd % s.n_head != 0)
        return InvalidArgument("gguf-synth: n_embd " + std::to_string(s.n_embd) +
                               " is not a multiple of n_head " + std::to_string(s.n_head));
      s.head_dim = s.n_embd / s.n_head;
    }
    if (s.head_dim % 2 != 0)
      return InvalidArgument("gguf-synth: head_dim must be even for RoPE, found " +
                             std::to_string(s.head_dim));
    if (s.n_head % s.n_head_kv != 0)
      return InvalidArgument("gguf-synth: n_head " + std::to_string(s.n_head) +
                             " is not a multiple of n_head_kv " + std::to_string(s.n_head_kv));
    if (s.rope_freqs && s.arch != "llama" && s.arch != "mixtral" && s.arch != "phi3" &&
        s.arch != "mistral3" && s.arch != "granite")
      return InvalidArgument(
          "gguf-synth: rope_freqs (Llama-3 rope scaling; phi3: LongRoPE factors) applies to llama, mistral3, "
          "granite and phi3, not " +
          s.arch);
    if (!s.rope_scaling.empty() && s.rope_scaling != "none" && s.rope_scaling != "linear" &&
        s.rope_scaling != "yarn" && s.rope_scaling != "longrope")
      return InvalidArgument("gguf-synth: rope scaling type must be none, linear, yarn or longrope, found '" +
                             s.rope_scaling + "'");
    // deepseek2 files carry the yarn keys too (convert_hf_to_gguf writes them from the rope config)
    if (s.arch != "mistral3" &&
        (s.attn_temp_scale != 0.0f ||
         (s.arch != "deepseek2" &&
          (s.yarn_beta_fast >= 0.0f || s.yarn_beta_slow >= 0.0f || s.yarn_log_mul != 0.0f))))
      return InvalidArgument(
          "gguf-synth: the yarn beta / log multiplier keys and the attention temperature scale are "
          "mistral3's (llama.cpp reads them for it), not " +
          s.arch + "'s");
    if (IsMoe(s.arch)) {
      if (s.n_expert == 0) s.n_expert = s.arch == "mixtral" ? 8 : 4;
      if (s.n_expert_used == 0) s.n_expert_used = std::min<uint32_t>(2, s.n_expert);
      if (s.n_expert_used > s.n_expert)
        return InvalidArgument("gguf-synth: n_expert_used " + std::to_string(s.n_expert_used) +
                               " exceeds n_expert " + std::to_string(s.n_expert));
      if (s.arch == "qwen2moe" || s.arch == "qwen3moe" || s.arch == "gpt-oss" || s.arch == "glm4moe") {
        if (s.n_ff_exp == 0) s.n_ff_exp = std::max<uint32_t>(1, s.n_ff / s.n_expert_used);
      }
      if (s.arch == "qwen2moe" && s.n_ff_shexp == 0) s.n_ff_shexp = s.n_ff;
    } else if (s.n_expert != 0 || s.n_expert_used != 0) {
      return InvalidArgument(
          "gguf-synth: experts need a mixture-of-experts architecture (mixtral, qwen2moe or qwen3moe), not " +
          s.arch);
    }
  }
  if (s.arch == "deepseek2") STOWAGE_RETURN_IF_ERROR(ResolveDeepSeek2(s));
  if (s.mla_legacy && s.arch != "deepseek2")
    return InvalidArgument("gguf-synth: the older MLA form (attn_kv_b) is deepseek2's, not " + s.arch + "'s");
  if (s.arch == "glm4moe") {
    if (s.rope_dim == 0) s.rope_dim = s.head_dim / 2;
    if (s.rope_dim % 2 != 0 || s.rope_dim > s.head_dim)
      return InvalidArgument("gguf-synth: glm4moe: the rope part (" + std::to_string(s.rope_dim) +
                             ") must be even and at most head_dim " + std::to_string(s.head_dim));
    if (s.n_dense_lead > s.n_layer)
      return InvalidArgument("gguf-synth: glm4moe: n_dense_lead " + std::to_string(s.n_dense_lead) +
                             " exceeds n_layer " + std::to_string(s.n_layer));
    if (s.expert_gating_func != 1 && s.expert_gating_func != 2)
      return InvalidArgument("gguf-synth: glm4moe: expert_gating_func must be 1 (softmax) or 2 (sigmoid)");
  }
  if (!IsValidGgmlType(static_cast<uint32_t>(s.weight_type)))
    return InvalidArgument("gguf-synth: invalid weight type id " +
                           std::to_string(static_cast<uint32_t>(s.weight_type)));
  if (s.mix == QuantMix::kQ4_K_M && s.weight_type != GgmlType::Q4_K)
    return InvalidArgument(std::string("gguf-synth: the q4_K_M mixture needs weight type q4_K, found ") +
                           GgmlTypeName(s.weight_type));
  if (!s.header_only && (!CanGenerate(s.weight_type) || s.mix != QuantMix::kNone))
    return InvalidArgument(
        std::string("gguf-synth: weight type ") +
        (s.mix == QuantMix::kQ4_K_M ? "q4_K_M" : GgmlTypeName(s.weight_type)) +
        " has no generator (f32, f16, bf16, q8_0, q4_0); use --header-only for other types");
  return s;
}

Status SetWeightType(std::string_view name, ModelSpec* spec) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "q4_k_m") {
    spec->weight_type = GgmlType::Q4_K;
    spec->mix = QuantMix::kQ4_K_M;
    return Status::Ok();
  }
  STOWAGE_ASSIGN_OR_RETURN(spec->weight_type, ParseGgmlType(name));
  spec->mix = QuantMix::kNone;
  return Status::Ok();
}

// The expert keys of the architectures with shared experts (deepseek2, glm4moe; the planner's
// ReadSharedExpertRouting): widths, the shared count and the routing (the scale only when not 0).
Status AddSharedExpertKeys(const ModelSpec& s, const std::string& arch, GgufWriter* w) {
  auto key = [&](const char* k) { return arch + "." + k; };
  using V = GgufMetaValue;
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_feed_forward_length"), V::U32(s.n_ff_exp)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_shared_count"), V::U32(s.n_expert_shared)));
  if (s.expert_weights_scale != 0.0f)
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_weights_scale"), V::F32(s.expert_weights_scale)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_weights_norm"), V::Bool(s.expert_weights_norm)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_gating_func"), V::U32(s.expert_gating_func)));
  return Status::Ok();
}

// deepseek2's keys beyond the common ones (convert_hf_to_gguf DeepseekV2Model): the MLA ranks and
// head sizes, the experts and their routing. rope.dimension_count, key_length and value_length are
// the MLA rope part and cache row (BuildModel writes head_dim there for the other architectures).
Status AddDeepSeek2Keys(const ModelSpec& s, GgufWriter* w) {
  auto key = [](const char* k) { return std::string("deepseek2.") + k; };
  using V = GgufMetaValue;
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("leading_dense_block_count"), V::U32(s.n_dense_lead)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.q_lora_rank"), V::U32(s.q_lora_rank)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.kv_lora_rank"), V::U32(s.kv_lora_rank)));
  if (s.mla_legacy) {  // the MHA heads themselves (convert_hf_to_gguf before the absorbed form)
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.key_length"), V::U32(s.head_dim)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.value_length"), V::U32(s.mla_v_head_dim)));
  } else {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.key_length"), V::U32(s.kv_lora_rank + s.mla_rope_dim)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.value_length"), V::U32(s.kv_lora_rank)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.key_length_mla"), V::U32(s.head_dim)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.value_length_mla"), V::U32(s.mla_v_head_dim)));
  }
  STOWAGE_RETURN_IF_ERROR(AddSharedExpertKeys(s, "deepseek2", w));
  if (s.n_expert_groups != 0) {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_group_count"), V::U32(s.n_expert_groups)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_group_used_count"), V::U32(s.n_group_used)));
  }
  return Status::Ok();
}

// glm4moe's keys beyond the common ones (convert_hf_to_gguf Glm4MoeModel): the leading dense blocks,
// the experts and their routing, the NextN blocks.
Status AddGlm4MoeKeys(const ModelSpec& s, GgufWriter* w) {
  auto key = [](const char* k) { return std::string("glm4moe.") + k; };
  using V = GgufMetaValue;
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("leading_dense_block_count"), V::U32(s.n_dense_lead)));
  STOWAGE_RETURN_IF_ERROR(AddSharedExpertKeys(s, "glm4moe", w));
  if (s.n_nextn != 0) STOWAGE_RETURN_IF_ERROR(w->AddKV(key("nextn_predict_layers"), V::U32(s.n_nextn)));
  return Status::Ok();
}

Status BuildModel(const ModelSpec& in, GgufWriter* w) {
  if (w->n_kv() != 0 || w->n_tensors() != 0)
    return InvalidArgument("gguf-synth: BuildModel needs an empty writer");
  STOWAGE_ASSIGN_OR_RETURN(ModelSpec s, Resolve(in));

  std::unique_ptr<GgufFile> vocab;
  if (!s.vocab_from.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(vocab, GgufFile::Open(s.vocab_from));
    STOWAGE_ASSIGN_OR_RETURN(std::vector<std::string_view> toks,
                             vocab->GetStringArray("tokenizer.ggml.tokens"));
    s.n_vocab = static_cast<uint32_t>(toks.size());
    if (s.n_vocab == 0)
      return InvalidArgument("gguf-synth: " + s.vocab_from + ": tokenizer.ggml.tokens is empty");
  }

  const std::string a = s.arch == "mixtral" ? std::string("llama") : s.arch;  // llama.cpp's name
  auto key = [&](const char* k) { return a + "." + k; };
  STOWAGE_RETURN_IF_ERROR(w->AddKV("general.architecture", GgufMetaValue::Str(a)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV("general.name", GgufMetaValue::Str(s.name)));
  const int ftype = s.mix == QuantMix::kQ4_K_M ? 15 : FileType(s.weight_type);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  if (ftype >= 0)
    STOWAGE_RETURN_IF_ERROR(w->AddKV("general.file_type", GgufMetaValue::U32(static_cast<uint32_t>(ftype))));
  if (GetTypeTraits(s.weight_type).is_quantized)
    STOWAGE_RETURN_IF_ERROR(w->AddKV("general.quantization_version", GgufMetaValue::U32(2)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("context_length"), GgufMetaValue::U32(s.n_ctx)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("embedding_length"), GgufMetaValue::U32(s.n_embd)));
  STOWAGE_RETURN_IF_ERROR(
      w->AddKV(key("block_count"), GgufMetaValue::U32(s.n_layer + (s.arch == "glm4moe" ? s.n_nextn : 0))));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("feed_forward_length"), GgufMetaValue::U32(s.n_ff)));
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.head_count"), GgufMetaValue::U32(s.n_head)));
  if (s.arch == "mamba") {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("ssm.conv_kernel"), GgufMetaValue::U32(s.ssm_d_conv)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("ssm.inner_size"), GgufMetaValue::U32(s.ssm_d_inner)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("ssm.state_size"), GgufMetaValue::U32(s.ssm_d_state)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("ssm.time_step_rank"), GgufMetaValue::U32(s.ssm_dt_rank)));
  } else {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.head_count_kv"), GgufMetaValue::U32(s.n_head_kv)));
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("rope.dimension_count"), GgufMetaValue::U32(s.arch == "deepseek2" ? s.mla_rope_dim
                                                                 : s.arch == "glm4moe" ? s.rope_dim
                                                                                       : s.head_dim)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("rope.freq_base"), GgufMetaValue::F32(s.rope_freq_base)));
    if (s.arch != "deepseek2" && (s.arch == "gemma" || s.arch == "gemma2" || s.arch == "gemma3" ||
                                  s.head_dim * s.n_head != s.n_embd)) {
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.key_length"), GgufMetaValue::U32(s.head_dim)));
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.value_length"), GgufMetaValue::U32(s.head_dim)));
    }
  }
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.layer_norm_rms_epsilon"), GgufMetaValue::F32(s.rms_eps)));
  if (!s.rope_scaling.empty())
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("rope.scaling.type"), GgufMetaValue::Str(s.rope_scaling)));
  if (s.rope_scale != 0.0f)
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("rope.scaling.factor"), GgufMetaValue::F32(s.rope_scale)));
  if (s.rope_scaling_orig_ctx != 0)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("rope.scaling.original_context_length"), GgufMetaValue::U32(s.rope_scaling_orig_ctx)));
  if (s.yarn_beta_fast >= 0.0f)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("rope.scaling.yarn_beta_fast"), GgufMetaValue::F32(s.yarn_beta_fast)));
  if (s.yarn_beta_slow >= 0.0f)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("rope.scaling.yarn_beta_slow"), GgufMetaValue::F32(s.yarn_beta_slow)));
  if (s.yarn_log_mul != 0.0f)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("rope.scaling.yarn_log_multiplier"), GgufMetaValue::F32(s.yarn_log_mul)));
  if (s.attn_temp_scale != 0.0f)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("attention.temperature_scale"), GgufMetaValue::F32(s.attn_temp_scale)));
  if (s.arch == "granite") {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("logit_scale"), GgufMetaValue::F32(s.logit_scale)));
    if (s.residual_scale != 0.0f)
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("residual_scale"), GgufMetaValue::F32(s.residual_scale)));
    if (s.embedding_scale != 0.0f)
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("embedding_scale"), GgufMetaValue::F32(s.embedding_scale)));
    if (s.attention_scale != 0.0f)
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.scale"), GgufMetaValue::F32(s.attention_scale)));
  }
  const bool gemma23 = s.arch == "gemma2" || s.arch == "gemma3";
  if ((s.arch == "phi3" || gemma23 || s.arch == "gpt-oss") && s.swa_key)
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attention.sliding_window"), GgufMetaValue::U32(s.n_swa)));
  if (s.swa_period != 0)
    STOWAGE_RETURN_IF_ERROR(
        w->AddKV(key("attention.sliding_window_pattern"), GgufMetaValue::U32(s.swa_period)));
  if (s.arch == "gemma2") {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("attn_logit_softcapping"), GgufMetaValue::F32(s.attn_softcap)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("final_logit_softcapping"), GgufMetaValue::F32(s.final_softcap)));
  }
  if (s.arch == "gemma3") {
    if (s.final_softcap != 0.0f)
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("final_logit_softcapping"), GgufMetaValue::F32(s.final_softcap)));
    if (s.rope_freq_base_swa != 0.0f)
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("rope.freq_base_swa"), GgufMetaValue::F32(s.rope_freq_base_swa)));
  }
  STOWAGE_RETURN_IF_ERROR(w->AddKV(key("vocab_size"), GgufMetaValue::U32(s.n_vocab)));
  if (s.arch == "deepseek2") STOWAGE_RETURN_IF_ERROR(AddDeepSeek2Keys(s, w));
  if (s.arch == "glm4moe") STOWAGE_RETURN_IF_ERROR(AddGlm4MoeKeys(s, w));
  if (IsMoe(s.arch)) {
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_count"), GgufMetaValue::U32(s.n_expert)));
    STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_used_count"), GgufMetaValue::U32(s.n_expert_used)));
    if (s.arch == "qwen2moe" || s.arch == "qwen3moe" || s.arch == "gpt-oss")
      STOWAGE_RETURN_IF_ERROR(w->AddKV(key("expert_feed_forward_length"), GgufMetaValue::U32(s.n_ff_exp)));
    if (s.arch == "qwen2moe") {
      STOWAGE_RETURN_IF_ERROR(
          w->AddKV(key("expert_shared_feed_forward_length"), GgufMetaValue::U32(s.n_ff_shexp)));
    }
  }
  if (vocab) {
    for (const auto& kv : vocab->kvs())
      if (kv.key.rfind("tokenizer.", 0) == 0)
        STOWAGE_RETURN_IF_ERROR(w->AddKV(kv.key, GgufMetaValue::FromValue(kv.value)));
  } else {
    STOWAGE_RETURN_IF_ERROR(AddGeneratedVocab(s, w));
  }

  for (TensorPlan& p : PlanTensors(s)) {
    GgufTensorFill fill;
    if (!s.header_only) {
      fill = [p, s](uint8_t* dst, uint64_t nbytes) { return Encode(p, s, dst, nbytes); };
    }
    STOWAGE_RETURN_IF_ERROR(w->AddTensor(p.name, p.type, p.ne, std::move(fill)));
  }
  return Status::Ok();
}

Status WriteModel(const ModelSpec& spec, const std::string& path) {
  GgufWriter w;
  STOWAGE_RETURN_IF_ERROR(BuildModel(spec, &w));
  return w.WriteFile(path);
}

}  // namespace stowage::synth
