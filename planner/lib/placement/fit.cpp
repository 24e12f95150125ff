#include "stowage/planner/fit.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "stowage/runtime/row_split.h"  // the split rules the CUDA backend applies

namespace stowage::planner {

Result<std::vector<SplitBufferShare>> RowSplitShares(const ModelGraphs& m, const PlacementOutcome& o) {
  const DeviceSet& ds = o.devices;
  std::vector<SplitBufferShare> out;
  for (size_t bi = 0; bi < o.memory.buffers.size(); ++bi) {
    const PlannedBuffer& b = o.memory.buffers[bi];
    if (b.usage != BufferUsage::kWeights || b.mapped) continue;
    const PlacedBuft& pb = o.placement.bufts[b.buft];
    const DeviceManifest& owner = ds.devices[pb.device];
    if (!owner.split_buft || owner.split_buft->name != pb.name) continue;
    // The devices the split spreads over: the model devices of the owner's backend with a split buft.
    std::vector<int> devs;
    std::vector<uint64_t> totals;
    for (int i = 0; i < ds.n_model; ++i) {
      const DeviceManifest& d = ds.devices[i];
      if (d.backend != owner.backend || !d.split_buft) continue;
      devs.push_back(i);
      totals.push_back(d.memory_total);
    }
    if (devs.empty())
      return Internal("split buffer " + b.name + " has no model device of backend " + owner.backend);
    // The split the plan records for this buft (RecordTensorSplit: one proportion per device above,
    // or empty for ggml's default), which is what the runtime's split buffer receives: the fit check
    // counts the rows the runtime will really put on each device.
    const std::vector<float> starts = exec::RowSplitStarts(pb.tensor_split, totals);
    SplitBufferShare share;
    share.buffer = static_cast<int>(bi);
    share.device_bytes.assign(ds.devices.size(), 0);
    std::vector<uint64_t> seen;  // offsets of stored tensors (a duplicated weight shares one copy)
    for (const GlobalTensor& g : m.globals) {
      if (g.kind != TensorKind::kWeight || g.buffer != static_cast<int>(bi)) continue;
      if (std::find(seen.begin(), seen.end(), g.offset) != seen.end()) continue;
      seen.push_back(g.offset);
      const int64_t nrows = g.ne[1] * g.ne[2] * g.ne[3];
      const uint64_t row_bytes = RowSize(g.type, g.ne[0]);
      const uint64_t pad = g.ne[0] % kMatrixRowPadding != 0
                               ? RowSize(g.type, kMatrixRowPadding - g.ne[0] % kMatrixRowPadding)
                               : 0;
      for (size_t k = 0; k < devs.size(); ++k) {
        int64_t lo = 0, hi = 0;
        exec::RowSplit(nrows, starts, kRowSplitRounding, static_cast<int>(k), &lo, &hi);
        if (hi > lo) share.device_bytes[devs[k]] += static_cast<uint64_t>(hi - lo) * row_bytes + pad;
      }
    }
    out.push_back(std::move(share));
  }
  return out;
}

int BufferDevice(const PlacementOutcome& o, int buffer) {
  const PlannedBuffer& b = o.memory.buffers[buffer];
  if (b.mapped) return kNoDevice;
  if (std::any_of(o.split_shares.begin(), o.split_shares.end(),
                  [&](const SplitBufferShare& s) { return s.buffer == buffer; }))
    return kSplitShares;
  const DeviceSet& ds = o.devices;
  const PlacedBuft& pb = o.placement.bufts[b.buft];
  // ACCEL devices (ggml's BLAS, AMX; here ONEDNN) keep their buffers in host memory, like the CPU
  // (their manifests report the same host memory): counted once, for the CPU, so that weights on
  // ONEDNN plus the CPU's KV cache and compute buffers are checked together.
  const bool host = pb.is_host || (pb.device >= 0 && ds.devices[pb.device].type == DeviceType::kAccel);
  return host ? ds.cpu : pb.device;
}

std::vector<DeviceMemoryUse> DeviceMemory(const PlacementOutcome& o) {
  const DeviceSet& ds = o.devices;
  std::vector<DeviceMemoryUse> out(ds.devices.size());
  for (size_t d = 0; d < ds.devices.size(); ++d) {
    const DeviceManifest& m = ds.devices[d];
    out[d].device = static_cast<int>(d);
    out[d].name = m.name;
    out[d].available = m.UsableMemory();
    out[d].reported = m.memory_total > 0;
  }
  for (size_t bi = 0; bi < o.memory.buffers.size(); ++bi) {
    const PlannedBuffer& b = o.memory.buffers[bi];
    const int usage = static_cast<int>(b.usage);
    const int d = BufferDevice(o, static_cast<int>(bi));
    if (d == kNoDevice) continue;
    if (d == kSplitShares) {
      const auto share =
          std::find_if(o.split_shares.begin(), o.split_shares.end(),
                       [&](const SplitBufferShare& s) { return s.buffer == static_cast<int>(bi); });
      for (size_t k = 0; k < out.size() && k < share->device_bytes.size(); ++k) {
        out[k].needed += share->device_bytes[k];
        out[k].by_usage[usage] += share->device_bytes[k];
      }
      continue;
    }
    out[d].needed += b.size;
    out[d].by_usage[usage] += b.size;
  }
  return out;
}

Status CheckFit(const PlacementOutcome& o, bool devices_only, uint64_t margin) {
  const auto use = DeviceMemory(o);
  for (const auto& u : use) {
    const DeviceManifest& m = o.devices.devices[u.device];
    const bool gpu = m.type == DeviceType::kGpu && u.device != o.devices.cpu;
    const uint64_t keep = gpu ? margin : 0;
    if (!u.reported || u.needed + keep <= u.available) continue;
    if (devices_only && !gpu) continue;
    char target[64] = "";  // the --fit-target margin, when one is kept
    if (keep > 0) std::snprintf(target, sizeof target, " + %.2f MiB --fit-target", keep / 1048576.0);
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "does not fit: device %s needs %llu bytes (%.2f MiB)%s but has %llu bytes (%.2f MiB) available "
        "(free %.2f MiB - reserve %.2f MiB)",
        u.name.c_str(), static_cast<unsigned long long>(u.needed), u.needed / 1048576.0, target,
        static_cast<unsigned long long>(u.available), u.available / 1048576.0, m.memory_free / 1048576.0,
        m.memory_reserve / 1048576.0);
    return ResourceExhausted(buf);
  }
  return Status::Ok();
}

std::vector<std::string> UnreportedMemoryWarnings(const PlacementOutcome& o) {
  std::vector<std::string> out;
  for (const DeviceMemoryUse& u : DeviceMemory(o)) {
    const DeviceManifest& m = o.devices.devices[u.device];
    if (u.reported || u.needed == 0 || m.type != DeviceType::kGpu) continue;
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.2f MiB", u.needed / 1048576.0);
    out.push_back("device " + u.name + " did not report memory (" +
                  (m.source_path.empty() ? std::string("probed") : m.source_path) +
                  ": memory.total 0): the " + mib +
                  " planned on it were not checked against its free memory");
  }
  return out;
}

std::string FitChoice::Args() const {
  std::string s = "-c " + std::to_string(n_ctx) + " -ngl " + std::to_string(n_gpu_layers);
  size_t nd = tensor_split.size();
  while (nd > 1 && tensor_split[nd - 1] == 0.0f) --nd;  // llama-fit-params drops trailing zeros
  for (size_t i = 0; nd > 1 && i < nd; ++i)
    s += (i == 0 ? " -ts " : ",") + std::to_string(static_cast<uint32_t>(tensor_split[i]));
  for (size_t i = 0; i < overrides.size(); ++i)
    s += (i == 0 ? " -ot \"" : ",") + overrides[i].pattern + "=" + overrides[i].buft;
  if (!overrides.empty()) s += "\"";
  return s;
}

namespace {

/// The part of a layer whose tensors stay on its device when the layer overflows
/// (common_layer_fraction_t).
enum class LayerFraction { kAttn = 1, kUp = 2, kGate = 3, kMoe = 4 };

/// The tensors of layer `il` that overflow with fraction `lf` (common/fit.cpp get_overflow_pattern).
std::string OverflowPattern(uint32_t il, LayerFraction lf) {
  const std::string blk = "blk\\." + std::to_string(il) + "\\.";
  switch (lf) {
    case LayerFraction::kAttn:
      return blk + "ffn_(gate|up|gate_up|down).*";
    case LayerFraction::kUp:
      return blk + "ffn_(gate|gate_up|down).*";
    case LayerFraction::kGate:
      return blk + "ffn_down.*";
    case LayerFraction::kMoe:
      break;
  }
  return blk + "ffn_(up|down|gate_up|gate)_(ch|)exps";
}

/// Layers of one device: n_layer in all, of which n_part partial (the first of them overflowing by
/// `overflow`, the others their MoE tensors). common/fit.cpp's ngl_t.
struct DeviceLayers {
  uint32_t n_layer = 0;
  uint32_t n_part = 0;
  LayerFraction overflow = LayerFraction::kMoe;
  uint32_t n_full() const { return n_layer - n_part; }
};

/// common_params_fit_impl's state: the model, the request and the measurements.
class FitSearch {
 public:
  FitSearch(const GgufFile& gguf, const HParams& hp, const ContextConfig& asked,
            const std::vector<DeviceManifest>& machine, const PlacementOptions& opt)
      : gguf_(gguf), hp_(hp), asked_(asked), machine_(machine), opt_(opt) {}

  /// Per model device: the bytes of its buffers (weights, KV, compute, output held there) and of
  /// its weights, and its free memory, for a plan of context `n_ctx` with placement `o`.
  /// With no model device, llama.cpp fits host memory: host_used is the bytes of the host
  /// buffer types' buffers (KV, compute, output, unmapped weights; not CPU_REPACK, an extra buffer
  /// type of the CPU device: common_get_device_memory_data_impl), host_free the CPU's memory.
  struct Measured {
    std::vector<int64_t> used, model, free;
    int64_t host_used = 0, host_free = 0;
    bool host_reported = true;  ///< false: the CPU manifest reports no memory (never fitted)
  };
  Result<Measured> Measure(uint32_t n_ctx, const PlacementOptions& o) {
    auto it = graphs_.find(n_ctx);
    if (it == graphs_.end()) {
      ContextConfig cfg = asked_;
      cfg.n_ctx = n_ctx;
      STOWAGE_RETURN_IF_ERROR(ResolveContext(hp_, gguf_.path(), &cfg));
      STOWAGE_ASSIGN_OR_RETURN(ModelGraphs built, BuildModelGraphs(gguf_, hp_, cfg));
      it = graphs_.emplace(n_ctx, std::move(built)).first;
    }
    ModelGraphs g = it->second;
    STOWAGE_ASSIGN_OR_RETURN(PlacementOutcome out, PlaceModel(g, machine_, o));
    const std::vector<DeviceMemoryUse> use = DeviceMemory(out);
    Measured m;
    for (int d = 0; d < out.devices.n_model; ++d) {
      m.used.push_back(static_cast<int64_t>(use[d].needed));
      m.model.push_back(static_cast<int64_t>(use[d].by_usage[static_cast<int>(BufferUsage::kWeights)]));
      m.free.push_back(static_cast<int64_t>(use[d].available));
    }
    for (const PlannedBuffer& b : out.memory.buffers)
      if (!b.mapped && out.placement.bufts[b.buft].is_host) m.host_used += static_cast<int64_t>(b.size);
    m.host_free = static_cast<int64_t>(use[out.devices.cpu].available);
    m.host_reported = use[out.devices.cpu].reported;
    return m;
  }

 private:
  const GgufFile& gguf_;
  const HParams& hp_;
  const ContextConfig& asked_;
  const std::vector<DeviceManifest>& machine_;
  const PlacementOptions& opt_;
  std::map<uint32_t, ModelGraphs> graphs_;  // built once per context size
};

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

std::string Mib(int64_t bytes) { return std::to_string(bytes / (1024 * 1024)); }

/// The false-position step of common/fit.cpp: delta * (target - mem) / (mem_high - mem), converted
/// to uint32_t as there (a negative quotient wraps), clamped to [1, delta - 1].
uint32_t StepSize(uint32_t delta, int64_t target, int64_t mem, int64_t mem_high) {
  uint32_t step = static_cast<uint32_t>(int64_t{delta} * (target - mem) / (mem_high - mem));
  step = std::max(step, uint32_t{1});
  return std::min(step, delta - 1);
}

}  // namespace

Result<FitChoice> FitParams(const GgufFile& gguf, const HParams& hp, const ContextConfig& asked,
                            const std::vector<DeviceManifest>& machine, const PlacementOptions& opt,
                            const FitOptions& fit) {
  for (const DeviceManifest& d : machine)
    if (d.type == DeviceType::kGpu && d.memory_total == 0)
      return InvalidArgument("--fit: device " + d.name + " did not report memory (" +
                             (d.source_path.empty() ? std::string("probed") : d.source_path) +
                             ": memory.total 0), so --fit cannot size it: give its free memory (--free " +
                             d.name + "=SIZE) or -ngl N");
  if (asked.n_ctx == 0) {  // the model's context_length, refused as ResolveContext refuses it
    ContextConfig train = asked;
    STOWAGE_RETURN_IF_ERROR(ResolveContext(hp, gguf.path(), &train));
  }
  FitChoice c;
  FitSearch search(gguf, hp, asked, machine, opt);
  auto say = [&](std::string line) { c.log.push_back(std::move(line)); };
  STOWAGE_ASSIGN_OR_RETURN(const DeviceSet ds, MakeDeviceSet(machine, opt.split_mode, opt.main_gpu));
  const size_t nd = static_cast<size_t>(ds.n_model);
  const uint32_t hp_ngl = hp.n_layer;
  const uint32_t hp_nex = hp.n_expert;
  const uint32_t n_seq_max = std::max<uint32_t>(1, asked.n_seq_max);
  const uint32_t n_streams = asked.kv_unified ? 1 : n_seq_max;
  const bool n_ctx_auto = asked.n_ctx == 0;
  const uint32_t n_ctx_max =
      static_cast<uint32_t>(std::min<uint64_t>(uint64_t{hp.n_ctx_train} * n_seq_max, UINT32_MAX));
  const uint32_t n_ctx_min_total =
      static_cast<uint32_t>(std::min<uint64_t>(uint64_t{fit.n_ctx_min} * n_streams, UINT32_MAX));
  c.n_ctx = n_ctx_auto ? n_ctx_max : asked.n_ctx;
  const int all_layers = static_cast<int>(hp_ngl) + 1;
  // No model device: nothing to offload (-ngl 0); only an automatic context is fitted, to the host
  // memory with the first margin (common_params_fit_impl's nd == 0 branch).
  const bool host_only = nd == 0;
  if (host_only) c.n_gpu_layers = 0;
  auto used_of = [&](const FitSearch::Measured& m) { return host_only ? m.host_used : Sum(m.used); };

  // step 1: every layer offloaded, as given.
  PlacementOptions full = opt;
  full.n_gpu_layers = all_layers;
  STOWAGE_ASSIGN_OR_RETURN(const FitSearch::Measured dmds_full, search.Measure(c.n_ctx, full));
  std::vector<int64_t> margins(std::max<size_t>(nd, 1), static_cast<int64_t>(kDefaultFitTargetBytes));
  for (size_t id = 0; id < margins.size(); ++id)
    if (fit.margins.size() == 1)
      margins[id] = static_cast<int64_t>(fit.margins[0]);
    else if (id < fit.margins.size())
      margins[id] = static_cast<int64_t>(fit.margins[id]);
  const int64_t sum_free = host_only ? dmds_full.host_free : Sum(dmds_full.free);
  const int64_t sum_projected_used = used_of(dmds_full);
  const int64_t sum_projected_model = Sum(dmds_full.model);
  const int64_t sum_projected_free = sum_free - sum_projected_used;
  const int64_t sum_margins = Sum(margins);
  if (host_only) {
    if (!dmds_full.host_reported) return c;
    say("projected to use " + Mib(sum_projected_used) + " MiB of host memory vs. " + Mib(sum_free) +
        " MiB of total host memory");
    if (sum_projected_free >= margins[0]) {
      say("will leave " + Mib(sum_projected_free) + " >= " + Mib(margins[0]) +
          " MiB of system memory, no changes needed");
      return c;
    }
  } else {
    say("projected to use " + Mib(sum_projected_used) + " MiB of device memory vs. " + Mib(sum_free) +
        " MiB of free device memory");
    bool changes_needed = false;
    for (size_t id = 0; id < nd; ++id)
      if (dmds_full.free[id] - dmds_full.used[id] < margins[id]) changes_needed = true;
    if (!changes_needed) {
      say(nd == 1 ? "will leave " + Mib(dmds_full.free[0] - dmds_full.used[0]) + " >= " + Mib(margins[0]) +
                        " MiB of free device memory, no changes needed"
                  : std::string("targets for free memory can be met on all devices, no changes needed"));
      return c;
    }
  }

  // step 2: a smaller context, when it is automatic.
  if (sum_projected_free - sum_margins < 0) {
    if (!n_ctx_auto) {
      say("context size set by user to " + std::to_string(c.n_ctx) + " -> no change");
    } else if (n_ctx_max <= n_ctx_min_total) {
      say(fit.n_ctx_min == UINT32_MAX
              ? "user has requested full context size of " + std::to_string(n_ctx_max) + " -> no change"
              : "default model context size is " + std::to_string(n_ctx_max) +
                    " which is <= the min. context size of " + std::to_string(n_ctx_min_total) +
                    " -> no change");
    } else {
      int64_t sum_used_target = sum_free - sum_margins;
      if (nd > 1) {
        // whole layers (dense) or whole tensors (MoE, about a third of a layer) per device: keep
        // slightly more than half a layer / tensor per device back.
        const int64_t model_per_layer = sum_projected_model / hp_ngl;
        sum_used_target -= static_cast<int64_t>(nd + 1) * model_per_layer / (hp_nex == 0 ? 2 : 6);
      }
      c.n_ctx = n_ctx_min_total;
      STOWAGE_ASSIGN_OR_RETURN(const FitSearch::Measured min_ctx, search.Measure(c.n_ctx, full));
      const int64_t sum_used_min_ctx = used_of(min_ctx);
      if (sum_used_target > sum_used_min_ctx) {
        c.n_ctx += static_cast<uint32_t>(int64_t{n_ctx_max - n_ctx_min_total} *
                                         (sum_used_target - sum_used_min_ctx) /
                                         (sum_projected_used - sum_used_min_ctx));
        const uint32_t align = 256 * n_streams;  // CUDA's rounding, whole streams
        c.n_ctx = std::max(c.n_ctx - c.n_ctx % align, n_ctx_min_total);
        const int64_t bytes_per_ctx = (sum_projected_used - sum_used_min_ctx) / (n_ctx_max - n_ctx_min_total);
        say("context size reduced from " + std::to_string(n_ctx_max) + " to " + std::to_string(c.n_ctx) +
            " -> need " + Mib(int64_t{n_ctx_max - c.n_ctx} * bytes_per_ctx) + " MiB less memory in total");
        if (nd <= 1) {
          say("entire model can be fit by reducing context");
          return c;
        }
      } else {
        say("context size reduced from " + std::to_string(n_ctx_max) + " to " + std::to_string(c.n_ctx) +
            " -> need " + Mib(sum_projected_used - sum_used_min_ctx) + " MiB less memory in total");
      }
    }
  }

  if (host_only) {
    c.failure = "was unable to fit model into system memory by reducing context, abort";
    return c;
  }

  // The parameters the fit may change must be unset (common_params_fit_exception: kept as they are).
  if (nd > 1 &&
      std::any_of(opt.tensor_split.begin(), opt.tensor_split.end(), [](float f) { return f != 0.0f; })) {
    c.failure = "model_params::tensor_split already set by user, abort";
    return c;
  }
  if (nd > 1 && opt.split_mode == SplitMode::kRow) {
    c.failure = "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort";
    return c;
  }
  if (!opt.overrides.empty()) {
    c.failure = "model_params::tensor_buft_overrides already set by user, abort";
    return c;
  }

  const std::string cpu_buft = ds.devices[ds.cpu].default_buft.name;
  // n_gpu_layers, tensor split and overrides of a layout (set_ngl_tensor_split_tbo).
  auto apply = [&](const std::vector<DeviceLayers>& ngl, const std::vector<std::string>& overflow_bufts,
                   PlacementOptions* o, FitChoice* out) {
    uint32_t n_gpu = 0;
    std::vector<float> ts;
    for (size_t id = 0; id < nd; ++id) {
      n_gpu += ngl[id].n_layer;
      if (nd > 1) ts.push_back(static_cast<float>(ngl[id].n_layer));
    }
    o->n_gpu_layers = static_cast<int>(n_gpu);
    o->tensor_split = ts;
    o->overrides.clear();
    uint32_t il0 = hp_ngl + 1 - n_gpu;
    for (size_t id = 0; id < nd; ++id) {
      il0 += ngl[id].n_full();
      for (uint32_t il = il0; il < il0 + ngl[id].n_part; ++il)
        o->overrides.push_back({OverflowPattern(il, il == il0 ? ngl[id].overflow : LayerFraction::kMoe),
                                il == il0 ? overflow_bufts[id] : cpu_buft});
      il0 += ngl[id].n_part;
    }
    if (out) {
      out->n_gpu_layers = o->n_gpu_layers;
      out->tensor_split = ts;
      out->overrides = o->overrides;
    }
  };
  auto memory_for = [&](const std::vector<DeviceLayers>& ngl,
                        const std::vector<std::string>& overflow_bufts) -> Result<std::vector<int64_t>> {
    PlacementOptions o = opt;
    apply(ngl, overflow_bufts, &o, nullptr);
    STOWAGE_ASSIGN_OR_RETURN(FitSearch::Measured m, search.Measure(c.n_ctx, o));
    return m.used;
  };

  int64_t global_surplus_cpu_moe = 0;
  if (hp_nex > 0) {
    PlacementOptions o = full;
    o.overrides = {{"blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps", cpu_buft}};
    STOWAGE_ASSIGN_OR_RETURN(const FitSearch::Measured cpu_moe, search.Measure(c.n_ctx, o));
    for (size_t id = 0; id < nd; ++id)
      global_surplus_cpu_moe += cpu_moe.free[id] - (cpu_moe.used[id] + margins[id]);
    say(global_surplus_cpu_moe > 0
            ? "with only dense weights in device memory there is a total surplus of " +
                  Mib(global_surplus_cpu_moe) + " MiB"
            : "with only dense weights in device memory there is still a total deficit of " +
                  Mib(-global_surplus_cpu_moe) + " MiB");
  }
  std::vector<int64_t> targets(nd);
  for (size_t id = 0; id < nd; ++id) targets[id] = dmds_full.free[id] - margins[id];
  std::vector<std::string> overflow_bufts(nd, cpu_buft);
  std::vector<DeviceLayers> ngl(nd);
  STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem, memory_for(ngl, overflow_bufts));
  auto device_line = [&](size_t id) {
    say("  - " + ds.devices[id].name + ": " + std::to_string(ngl[id].n_layer) + " layers (" +
        std::to_string(ngl[id].n_part) + " overflowing), " + Mib(mem[id]) + " MiB used, " +
        Mib(dmds_full.free[id] - mem[id]) + " MiB free");
  };

  // step 3: devices filled back to front with (for MoE: dense-only) layers, by false position; the
  // last device holds the output layer, which cannot be partial.
  for (size_t idp = nd; idp-- > 0;) {
    const size_t id = idp;
    uint32_t n_unassigned = hp_ngl + 1;
    for (size_t jd = id + 1; jd < nd; ++jd) n_unassigned -= ngl[jd].n_layer;
    std::vector<DeviceLayers> high = ngl;
    high[id].n_layer = n_unassigned;
    if (hp_nex > 0) high[id].n_part = id < nd - 1 ? high[id].n_layer : high[id].n_layer - 1;
    if (high[id].n_layer > 0) {
      STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem_high, memory_for(high, overflow_bufts));
      if (mem_high[id] > targets[id]) {
        uint32_t delta = high[id].n_layer - ngl[id].n_layer;
        while (delta > 1) {
          const uint32_t step = StepSize(delta, targets[id], mem[id], mem_high[id]);
          std::vector<DeviceLayers> test = ngl;
          test[id].n_layer += step;
          if (hp_nex > 0) test[id].n_part += id == nd - 1 && test[id].n_part == 0 ? step - 1 : step;
          STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem_test, memory_for(test, overflow_bufts));
          if (mem_test[id] <= targets[id]) {
            ngl = test;
            mem = mem_test;
          } else {
            high = test;
            mem_high = mem_test;
          }
          delta = high[id].n_layer - ngl[id].n_layer;
        }
      } else {
        ngl = high;
        mem = mem_high;
      }
    }
    say("  - " + ds.devices[id].name + ": " + std::to_string(ngl[id].n_layer) + " layers, " + Mib(mem[id]) +
        " MiB used, " + Mib(dmds_full.free[id] - mem[id]) + " MiB free");
  }
  PlacementOptions chosen = opt;
  if (hp_nex == 0 || global_surplus_cpu_moe <= 0) {
    apply(ngl, overflow_bufts, &chosen, &c);
    return c;
  }

  // step 4 (MoE whose dense weights fit): dense-only layers at the back become full layers at the
  // front, device by device, with one more layer partly overflowing to the next device / the CPU.
  size_t id_dense_start = nd;
  for (size_t idp = nd; idp-- > 0;) {
    if (ngl[idp].n_layer == 0) break;
    id_dense_start = idp;
  }
  say("converting dense-only layers to full layers and filling them front-to-back with overflow to next "
      "device/system memory:");
  for (size_t id = 0; id <= id_dense_start && id_dense_start < nd; ++id) {
    std::vector<DeviceLayers> high = ngl;
    for (size_t jd = id_dense_start; jd < nd; ++jd) {
      const uint32_t n_layer_move = jd < nd - 1 ? high[jd].n_layer : high[jd].n_layer - 1;
      high[id].n_layer += n_layer_move;
      high[jd].n_layer -= n_layer_move;
      high[jd].n_part = 0;
    }
    size_t id_dense_start_high = nd - 1;
    STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem_high, memory_for(high, overflow_bufts));
    if (mem_high[id] > targets[id]) {
      uint32_t delta = high[id].n_full() - ngl[id].n_full();
      while (delta > 1) {
        const uint32_t step = StepSize(delta, targets[id], mem[id], mem_high[id]);
        std::vector<DeviceLayers> test = ngl;
        size_t start_test = id_dense_start;
        uint32_t n_converted = 0;
        for (; start_test < nd; ++start_test) {
          const uint32_t n_convert = std::min(step - n_converted, test[start_test].n_part);
          test[start_test].n_layer -= n_convert;
          test[start_test].n_part -= n_convert;
          test[id].n_layer += n_convert;
          n_converted += n_convert;
          if (test[start_test].n_part > 0) break;
        }
        STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem_test, memory_for(test, overflow_bufts));
        if (mem_test[id] <= targets[id]) {
          ngl = test;
          mem = mem_test;
          id_dense_start = start_test;
        } else {
          high = test;
          mem_high = mem_test;
          id_dense_start_high = start_test;
        }
        delta = high[id].n_full() - ngl[id].n_full();
      }
    } else {
      ngl = high;
      mem = mem_high;
      id_dense_start = id_dense_start_high;
    }

    // at least part of one more layer
    if (id_dense_start < nd && ngl[id_dense_start].n_layer > (id < nd - 1 ? 0u : 1u)) {
      std::vector<DeviceLayers> test = ngl;
      size_t start_test = id_dense_start;
      test[start_test].n_layer--;
      test[start_test].n_part--;
      test[id].n_layer++;
      test[id].n_part++;
      if (test[start_test].n_part == 0) start_test++;
      std::vector<std::string> overflow_test = overflow_bufts;
      if (id < nd - 1) overflow_test[id] = ds.devices[id + 1].default_buft.name;
      auto fits = [&](const std::vector<int64_t>& m) {
        return m[id] < targets[id] && (id + 1 == nd || m[id + 1] < targets[id + 1]);
      };
      auto take = [&](std::vector<int64_t> m) {
        ngl = test;
        overflow_bufts = overflow_test;
        mem = std::move(m);
        id_dense_start = start_test;
      };
      test[id].overflow = LayerFraction::kUp;
      STOWAGE_ASSIGN_OR_RETURN(std::vector<int64_t> mem_test, memory_for(test, overflow_test));
      if (fits(mem_test)) {
        take(mem_test);
        test[id].overflow = LayerFraction::kGate;
        STOWAGE_ASSIGN_OR_RETURN(mem_test, memory_for(test, overflow_test));
        if (fits(mem_test)) take(mem_test);
      } else {
        test[id].overflow = LayerFraction::kAttn;
        STOWAGE_ASSIGN_OR_RETURN(mem_test, memory_for(test, overflow_test));
        if (fits(mem_test)) take(mem_test);
      }
    }
    device_line(id);
  }
  for (size_t id = id_dense_start + 1; id < nd; ++id) device_line(id);
  apply(ngl, overflow_bufts, &chosen, &c);
  return c;
}

}  // namespace stowage::planner
