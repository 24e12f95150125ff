// -sm tensor split states (llama.cpp 2026 llama_meta_device_get_split_state); see sm_tensor.h.
#include "stowage/planner/sm_tensor.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "stowage/runtime/ggml_types.h"

namespace stowage::planner {
namespace {

/// What a tensor name says: the layer ("blk.<il>." or "cache_<k|v>_l<il>"; -1 for model-level
/// tensors) and the rest of the name ("attn_q.weight"; "cache_k" / "cache_v" for caches).
struct NameParts {
  int il = -1;
  std::string rest;
};

NameParts SplitName(const std::string& name) {
  NameParts p;
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string::npos) {
      p.il = std::atoi(name.substr(4, dot - 4).c_str());
      p.rest = name.substr(dot + 1);
      return p;
    }
  } else if (name.rfind("cache_", 0) == 0) {
    const size_t l = name.find("_l", 6);
    if (l != std::string::npos) {
      p.il = std::atoi(name.c_str() + l + 2);
      p.rest = name.substr(0, l);
      return p;
    }
  }
  p.rest = name;
  return p;
}

bool In(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

/// The tensor kinds llama_meta_device_get_split_state tells apart (its regex patterns).
enum class Kind {
  kQWeight,
  kKvWeight,
  kQkvWeight,
  kQBias,
  kKvBias,
  kQkvBias,
  kQkNorm,
  kKvCache,
  kSinks,
  kAttnOut,
  kAttnOutBias,
  kAttnGate,
  kFfnUpGate,
  kFfnUpGateBias,
  kFfnGateUp,
  kFfnDown,
  kFfnDownBias,
  kFfnDownExpsBias,
  kOutput,
  kOutputBias,
  kOther,
};

Kind KindOf(const NameParts& p) {
  const std::string& r = p.rest;
  if (p.il < 0) {
    if (r == "output.weight") return Kind::kOutput;
    if (r == "output.bias") return Kind::kOutputBias;
    return Kind::kOther;
  }
  if (r == "cache_k" || r == "cache_v") return Kind::kKvCache;
  if (r == "attn_q.weight") return Kind::kQWeight;
  if (In(r, {"attn_k.weight", "attn_v.weight"})) return Kind::kKvWeight;
  if (r == "attn_qkv.weight") return Kind::kQkvWeight;
  if (r == "attn_q.bias") return Kind::kQBias;
  if (In(r, {"attn_k.bias", "attn_v.bias"})) return Kind::kKvBias;
  if (r == "attn_qkv.bias") return Kind::kQkvBias;
  if (In(r, {"attn_q_norm.weight", "attn_k_norm.weight"})) return Kind::kQkNorm;
  if (r == "attn_sinks.weight") return Kind::kSinks;
  if (r == "attn_output.weight") return Kind::kAttnOut;
  if (r == "attn_output.bias") return Kind::kAttnOutBias;
  if (r == "attn_gate.weight") return Kind::kAttnGate;
  if (In(r, {"ffn_up.weight", "ffn_up_exps.weight", "ffn_gate.weight", "ffn_gate_exps.weight"})) {
    return Kind::kFfnUpGate;
  }
  if (In(r, {"ffn_up.bias", "ffn_up_exps.bias", "ffn_gate.bias", "ffn_gate_exps.bias"}))
    return Kind::kFfnUpGateBias;
  if (In(r, {"ffn_gate_up.weight", "ffn_gate_up_exps.weight"})) return Kind::kFfnGateUp;
  if (In(r, {"ffn_down.weight", "ffn_down_exps.weight"})) return Kind::kFfnDown;
  if (r == "ffn_down.bias") return Kind::kFfnDownBias;
  if (r == "ffn_down_exps.bias") return Kind::kFfnDownExpsBias;
  return Kind::kOther;
}

int64_t BlockSize(GgmlType t) { return GetTypeTraits(t).block_size; }

/// The tensor whose type sets the granularity (tensor_config::tensor_axis_0): "blk.<il>.<suffix>",
/// else "blk.<il>.<fallback>"; `t` itself when suffix is empty.
Result<const GlobalTensor*> AxisTensor(const ModelGraphs& m, const GlobalTensor& t, int il,
                                       const char* suffix, const char* fallback) {
  if (suffix == nullptr) return &t;
  const std::string prefix = "blk." + std::to_string(il) + ".";
  int g = m.FindGlobal(prefix + suffix);
  if (g < 0 && fallback != nullptr) g = m.FindGlobal(prefix + fallback);
  if (g < 0) {
    return InvalidArgument("sm tensor: " + t.name + ": expected " + prefix + suffix +
                           (fallback ? std::string(" or ") + prefix + fallback : std::string()) +
                           ", found none");
  }
  return &m.globals[g];
}

}  // namespace

const char* SmAxisName(SmAxis axis) {
  switch (axis) {
    case SmAxis::k0:
      return "0";
    case SmAxis::k1:
      return "1";
    case SmAxis::k2:
      return "2";
    case SmAxis::k3:
      return "3";
    case SmAxis::kMirrored:
      return "mirrored";
    case SmAxis::kPartial:
      return "partial";
  }
  return "?";
}

int64_t SmSplitState::DeviceElements(int n_devices, int j) const {
  int64_t n = 0;
  for (size_t s = 0; s < segments.size(); ++s) n += ne[s * n_devices + j] * segments[s].second;
  return n;
}

bool ArchSupportsSmTensor(std::string_view arch) {
  // llm_arch_supports_sm_tensor's exclusions, by their GGUF architecture names.
  static constexpr std::array<std::string_view, 30> kRefused = {
      "grok",       "mpt",        "plamo2",     "minicpm3", "gemma3n",     "mamba",          "mamba2",
      "jamba",      "falcon-h1",  "olmo2",      "olmoe",    "deepseek2",   "deepseek32",     "hy_v4",
      "dots3note",  "glm-dsa",    "bitnet",     "t5",       "nemotron_h",  "nemotron_h_moe", "granitehybrid",
      "minimax-01", "minimax-m2", "minimax-m3", "mistral4", "kimi-linear", "bailingmoe3",    "kimi-k3",
      "qwen3tts",   "qwen4exp"};
  return std::find(kRefused.begin(), kRefused.end(), arch) == kRefused.end();
}

std::string SmTensorRefusal(std::string_view arch) {
  return "LLAMA_SPLIT_MODE_TENSOR not implemented for architecture '" + std::string(arch) + "'";
}

Result<SmSplitState> SmTensorSplitState(const ModelGraphs& m, const GlobalTensor& t, int n_devices,
                                        const std::vector<float>& tensor_split) {
  const HParams& hp = m.hp;
  const NameParts p = SplitName(t.name);
  const Kind kind = KindOf(p);
  const int n = n_devices;

  // tensor_config: axis and the tensor whose type sets the granularity
  SmSplitState s;
  const char* suffix = nullptr;
  const char* fallback = nullptr;
  switch (kind) {
    case Kind::kQWeight:
    case Kind::kKvWeight:
    case Kind::kQkvWeight:
    case Kind::kAttnGate:
      s.axis = SmAxis::k1, suffix = "attn_output.weight", fallback = "ssm_out.weight";
      break;
    case Kind::kQBias:
    case Kind::kKvBias:
    case Kind::kQkvBias:
      s.axis = SmAxis::k0, suffix = "attn_output.weight", fallback = "ssm_out.weight";
      break;
    case Kind::kQkNorm:
      s.axis = t.ne[1] == 1 ? SmAxis::kMirrored : SmAxis::k1, suffix = "attn_output.weight";
      break;
    case Kind::kKvCache:
    case Kind::kSinks:
      s.axis = SmAxis::k0, suffix = "attn_output.weight";
      break;
    case Kind::kAttnOut:
      s.axis = SmAxis::k0;
      break;
    case Kind::kFfnUpGate:
    case Kind::kFfnGateUp:
      s.axis = SmAxis::k1, suffix = "ffn_down.weight", fallback = "ffn_down_exps.weight";
      break;
    case Kind::kFfnUpGateBias:
    case Kind::kFfnDown:
      s.axis = SmAxis::k0, suffix = "ffn_down.weight", fallback = "ffn_down_exps.weight";
      break;
    case Kind::kFfnDownExpsBias:
      s.axis = SmAxis::kPartial, suffix = "ffn_down_exps.weight";
      break;
    case Kind::kOutput:
      s.axis = SmAxis::k1;
      break;
    case Kind::kOutputBias:
      s.axis = SmAxis::k0;
      break;
    case Kind::kAttnOutBias:
    case Kind::kFfnDownBias:
    case Kind::kOther:
      s.axis = SmAxis::kMirrored;
      break;
  }
  if (s.axis == SmAxis::kMirrored) {
    s.segments = {{0, 1}};
    return s;
  }
  const int il = p.il < 0 ? 0 : p.il;
  STOWAGE_ASSIGN_OR_RETURN(const GlobalTensor* axis_t, AxisTensor(m, t, il, suffix, fallback));
  if (s.axis == SmAxis::kPartial) {
    // every device holds the whole bias; its share of the sum follows ffn_down_exps's split
    s.segments = {{0, 1}};
    return s;
  }

  // rotation: layers of the same kind (SWA or not) take turns with the rounding remainder
  if (p.il >= 0) {
    int il_eff = 0;
    for (int prev = 0; prev < p.il; ++prev) il_eff += hp.is_swa(prev) == hp.is_swa(p.il);
    s.rotation = il_eff % n;
  } else {
    s.rotation = static_cast<int>(hp.n_layer % n);
  }

  // segments (get_split_segments); a cache's axis is its row of n_embd_gqa (see sm_tensor.h)
  const int axis = static_cast<int>(s.axis);
  const int64_t ne_axis =
      kind == Kind::kKvCache ? (p.rest == "cache_k" ? hp.n_embd_k_gqa() : hp.n_embd_v_gqa()) : t.ne[axis];
  const int64_t n_embd_q_all = int64_t{hp.n_head} * hp.n_embd_head_k;
  if (kind == Kind::kQkvWeight || kind == Kind::kQkvBias) {
    const int64_t gqa = hp.n_embd_v_gqa();
    if (ne_axis != n_embd_q_all + 2 * gqa) {
      return InvalidArgument("sm tensor: " + t.name + ": ne[" + std::to_string(axis) + "]: expected " +
                             std::to_string(n_embd_q_all + 2 * gqa) + ", found " + std::to_string(ne_axis));
    }
    s.segments = {{n_embd_q_all, 1}, {gqa, 2}};
  } else if (kind == Kind::kFfnGateUp) {
    s.segments = {{ne_axis / 2, 2}};
  } else if (kind == Kind::kFfnUpGate && p.rest.rfind("ffn_up", 0) == 0 && ne_axis == 2 * int64_t{hp.n_ff}) {
    s.segments = {{hp.n_ff, 2}};  // a fused up + gate named "up" (phi3)
  } else {
    s.segments = {{ne_axis, 1}};
  }

  // granularity (get_split_granularity), for attention layers
  const int64_t blck = BlockSize(axis_t->type);
  std::vector<int64_t> gran(s.segments.size(), 1);
  const bool attention = kind == Kind::kQWeight || kind == Kind::kKvWeight || kind == Kind::kQkvWeight ||
                         kind == Kind::kQBias || kind == Kind::kKvBias || kind == Kind::kQkvBias ||
                         kind == Kind::kKvCache || kind == Kind::kSinks || kind == Kind::kAttnOut ||
                         kind == Kind::kAttnGate;
  if (attention && hp.n_head_kv > 0) {
    const int64_t n_gqa = hp.n_head / hp.n_head_kv;
    const int64_t n_embd_q = n_gqa * hp.n_embd_head_k;
    int64_t blck_perf = blck;
    while (blck_perf < 128 && blck_perf * n < n_embd_q) blck_perf *= 2;
    const int64_t g_q = std::lcm(n_embd_q, blck_perf);
    const int64_t g_kv = g_q / n_gqa;
    switch (kind) {
      case Kind::kSinks:
        gran = {g_q / hp.n_embd_head_k};
        break;
      case Kind::kQWeight:
      case Kind::kQBias:
      case Kind::kAttnOut:
        gran = {g_q};
        break;
      case Kind::kAttnGate:
        gran = {t.ne[1] == hp.n_head ? g_q / hp.n_embd_head_k : g_q};
        break;
      case Kind::kKvWeight:
      case Kind::kKvBias:
      case Kind::kKvCache:
        gran = {g_kv};
        break;
      default:
        gran = {g_q, g_kv};
        break;  // fused QKV
    }
  } else if (kind == Kind::kFfnUpGate || kind == Kind::kFfnUpGateBias || kind == Kind::kFfnGateUp ||
             kind == Kind::kFfnDown) {
    std::fill(gran.begin(), gran.end(), std::lcm(blck, int64_t{128}));
  }

  // the slices: -ts proportions rotated, each boundary rounded down to the granularity
  std::vector<float> scan(n);
  for (int j = 0; j < n; ++j) {
    const size_t src = static_cast<size_t>((j + s.rotation) % n);
    scan[j] = (src < tensor_split.size() ? tensor_split[src] : 0.f) + (j > 0 ? scan[j - 1] : 0.f);
  }
  s.ne.assign(s.segments.size() * n, 0);
  for (size_t is = 0; is < s.segments.size(); ++is) {
    const int64_t ne_s = s.segments[is].first;
    int64_t low = 0;
    int j = 0;
    for (; j < n - 1; ++j) {
      int64_t high = scan.back() == 0.f
                         ? ne_s * (j + 1) / n
                         : static_cast<int64_t>(static_cast<float>(ne_s) * scan[j] / scan.back());
      high -= high % gran[is];
      s.ne[is * n + (j + s.rotation) % n] = high - low;
      low = high;
    }
    s.ne[is * n + (j + s.rotation) % n] = ne_s - low;
  }
  // a slice must hold whole blocks of the tensor's own type along axis 0
  const int64_t own_blck = BlockSize(t.type);
  if (s.axis == SmAxis::k0 && own_blck > 1) {
    for (int64_t e : s.ne) {
      if (e % own_blck != 0) {
        return InvalidArgument("sm tensor: " + t.name + ": slice of " + std::to_string(e) +
                               " elements on axis 0: expected a multiple of " + GgmlTypeName(t.type) +
                               "'s block of " + std::to_string(own_blck));
      }
    }
  }
  return s;
}

uint64_t SmDeviceBytes(const GlobalTensor& t, const SmSplitState& s, int n_devices, int j) {
  if (s.axis == SmAxis::kMirrored || s.axis == SmAxis::kPartial) return t.nbytes;
  const int64_t share = s.DeviceElements(n_devices, j);
  if (t.kind == TensorKind::kKvCache) {
    const int64_t width = s.segments[0].first * s.segments[0].second;
    if (width == 0) return 0;
    return RowSize(t.type, share) * static_cast<uint64_t>(t.ne[0] / width);
  }
  int64_t ne[4] = {t.ne[0], t.ne[1], t.ne[2], t.ne[3]};
  ne[static_cast<int>(s.axis)] = share;
  return TensorBytes(t.type, ne);
}

Result<SmTensorPlan> PlanSmTensor(const ModelGraphs& m, int n_devices,
                                  const std::vector<float>& tensor_split) {
  if (n_devices < 1) return InvalidArgument("LLAMA_SPLIT_MODE_TENSOR needs >= 1 devices");
  if (!ArchSupportsSmTensor(m.hp.arch)) return Unimplemented(SmTensorRefusal(m.hp.arch));
  SmTensorPlan plan;
  plan.n_devices = n_devices;
  plan.weight_bytes.assign(n_devices, 0);
  plan.kv_bytes.assign(n_devices, 0);
  plan.mirrored_bytes.assign(n_devices, 0);
  plan.states.reserve(m.globals.size());
  for (const GlobalTensor& g : m.globals) {
    STOWAGE_ASSIGN_OR_RETURN(SmSplitState s, SmTensorSplitState(m, g, n_devices, tensor_split));
    // the input layer (token embeddings) stays on the CPU, as with every split mode
    if ((g.kind != TensorKind::kKvCache && g.duplicated) || (g.kind == TensorKind::kWeight && g.layer < 0)) {
      plan.states.push_back(std::move(s));  // the same bytes requested again (tied output)
      continue;
    }
    for (int j = 0; j < n_devices; ++j) {
      const uint64_t b = SmDeviceBytes(g, s, n_devices, j);
      (g.kind == TensorKind::kKvCache ? plan.kv_bytes : plan.weight_bytes)[j] += b;
      if (g.kind != TensorKind::kKvCache && (s.axis == SmAxis::kMirrored || s.axis == SmAxis::kPartial)) {
        plan.mirrored_bytes[j] += b;
      }
    }
    if (g.kind != TensorKind::kKvCache &&
        (SplitName(g.name).rest == "attn_output.weight" || SplitName(g.name).rest == "ffn_down.weight" ||
         SplitName(g.name).rest == "ffn_down_exps.weight")) {
      ++plan.n_allreduce;
    }
    plan.states.push_back(std::move(s));
  }
  if (m.FindGlobal("output.weight") >= 0 || m.FindGlobal("token_embd.weight") >= 0) ++plan.n_allreduce;
  return plan;
}

Result<SmRankShares> SmTensorRankShares(const ModelGraphs& m, const SmTensorPlan& plan, int rank) {
  const int n = plan.n_devices;
  SmRankShares out;
  out.slices.resize(m.globals.size());
  // per layer: heads (attn_q rows / head size), KV heads (attn_k rows), FFN columns (ffn_up rows)
  auto agree = [&](uint32_t* have, int64_t found, const GlobalTensor& g, const char* what) -> Status {
    if (found <= 0)
      return InvalidArgument("tensor split across ranks: " + g.name + ": rank " + std::to_string(rank) +
                             " gets no " + what + " (expected at least one over " + std::to_string(n) +
                             " ranks)");
    if (*have != 0 && *have != found)
      return InvalidArgument("tensor split across ranks: " + g.name + ": rank " + std::to_string(rank) +
                             " gets " + std::to_string(found) + " " + what + ", expected " +
                             std::to_string(*have) + " as in layer 0 (split evenly over the ranks)");
    *have = static_cast<uint32_t>(found);
    return Status::Ok();
  };
  for (size_t i = 0; i < m.globals.size(); ++i) {
    const GlobalTensor& g = m.globals[i];
    const SmSplitState& s = plan.states[i];
    const NameParts p = SplitName(g.name);
    const Kind kind = KindOf(p);
    if (s.axis == SmAxis::kMirrored || kind == Kind::kOutput || kind == Kind::kOutputBias) continue;
    if (s.axis == SmAxis::kPartial || s.segments.size() != 1 || s.segments[0].second != 1 ||
        kind == Kind::kSinks || kind == Kind::kAttnGate || p.rest.find("_exps") != std::string::npos) {
      return InvalidArgument("tensor split across ranks: " + g.name +
                             ": expected Q/K/V/O and dense FFN weights split by heads and columns, found a " +
                             (s.axis == SmAxis::kPartial
                                  ? std::string("partial sum")
                                  : "split of axis " + std::string(SmAxisName(s.axis))) +
                             " the ranks cannot run as separate models");
    }
    // the slices in the state's order: device (k + rotation) % n holds the k-th
    int64_t begin = 0;
    for (int k = 0; (k + s.rotation) % n != rank; ++k) begin += s.ne[(k + s.rotation) % n];
    const int64_t count = s.ne[rank];
    out.slices[i] = {s.axis, begin, count};
    if (g.kind == TensorKind::kKvCache) continue;
    if (kind == Kind::kQWeight)
      STOWAGE_RETURN_IF_ERROR(agree(&out.n_head, count / m.hp.n_embd_head_k, g, "attention heads"));
    if (p.rest == "attn_k.weight")
      STOWAGE_RETURN_IF_ERROR(agree(&out.n_head_kv, count / m.hp.n_embd_head_k, g, "KV heads"));
    if (p.rest == "ffn_up.weight") STOWAGE_RETURN_IF_ERROR(agree(&out.n_ff, count, g, "FFN columns"));
  }
  return out;
}

}  // namespace stowage::planner
