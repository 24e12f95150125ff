#include "deploy_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "host_cpu.h"
#include "mib_text.h"
#include "stowage/planner/buft_select.h"
#include "stowage/planner/cluster_split.h"
#include "stowage/planner/layer_map.h"
#include "stowage/runtime/host_devices.h"

namespace stowage::tools {
namespace {

using planner::BufferUsage;
using planner::GlobalTensor;
using planner::PlacementOutcome;
using planner::TensorKind;

std::string Mib(uint64_t bytes) { return MibText(static_cast<double>(bytes)); }

/// The device a global's bytes count for (BufferDevice of its buffer), kNoDevice when it has none.
int GlobalDevice(const PlacementOutcome& o, const GlobalTensor& g) {
  if (g.buffer < 0) return planner::kNoDevice;
  return planner::BufferDevice(o, g.buffer);
}

/// Adds the tensors of `globals` that `pick` selects to `mv`, each stored tensor once (a duplicated
/// weight sharing a copy in the same buffer counts once).
template <typename Pick>
void AddTensors(const planner::ModelGraphs& m, const Pick& pick, NextMove* mv) {
  std::vector<std::pair<int, uint64_t>> seen;  // (buffer, offset)
  for (TensorKind kind : {TensorKind::kWeight, TensorKind::kKvCache}) {
    for (const GlobalTensor& g : m.globals) {
      if (g.kind != kind || !pick(g)) continue;
      const std::pair<int, uint64_t> at{g.buffer, g.offset};
      if (g.buffer >= 0 && std::find(seen.begin(), seen.end(), at) != seen.end()) continue;
      seen.push_back(at);
      mv->tensors.push_back(g.name);
      mv->bytes += g.nbytes;
    }
  }
}

std::string LayerName(int il, int n_layer) {
  return il == n_layer ? std::string("output layer") : "layer " + std::to_string(il);
}

/// The CPU buffer type of device `d`'s own host: host 0's CPU's, or for a device of host h >= 1
/// that host's CPU device's ("MPI1:CPU"); empty when the plan has no such device.
std::string HostCpuBuft(const planner::DeviceSet& ds, int d) {
  const planner::DeviceManifest& cpu = ds.devices[ds.cpu];
  const int h = HostOfDevice(ds.devices[d].name);
  if (h == 0) return cpu.default_buft.name;
  for (const planner::DeviceManifest& m : ds.devices)
    if (HostOfDevice(m.name) == h && IsHostCpu(m.name, cpu.name)) return m.default_buft.name;
  return "";
}

/// A change of -ngl / -ts and the one layer it moves.
struct LayerMove {
  int layer = -1;
  std::string flag;
};

/// Layer counts per model device of the layer map (the output layer counted as a layer): as -ts
/// (TensorSplitOf) they give exactly this map.
std::vector<int> LayerCounts(const planner::LayerMap& lm, int n_model) {
  std::vector<int> counts(static_cast<size_t>(n_model), 0);
  for (int dev : lm.device)
    if (dev < n_model) ++counts[static_cast<size_t>(dev)];
  return counts;
}

std::string TsFlag(const std::vector<int>& counts) {
  std::string s = "-ts ";
  for (size_t i = 0; i < counts.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(counts[i]);
  return s;
}

/// The layer that -ngl `ngl` with tensor split `ts` moves off device `d`, when the layer map
/// recomputed with them (AssignLayers, as the plan's) differs from the plan's in that one layer.
std::optional<int> MovesOneOff(const planner::PlanResult& p, int d, int ngl, const std::vector<int>& ts) {
  const PlacementOutcome& o = p.outcome;
  auto lm = planner::AssignLayers(o.devices, p.graphs.hp.n_layer, ngl,
                                  ts.empty() ? p.placement.tensor_split : planner::TensorSplitOf(ts),
                                  p.graphs.cfg.llamacpp_compat);
  if (!lm.ok() || lm->device.size() != o.layers.device.size()) return std::nullopt;
  std::optional<int> moved;
  for (size_t il = 0; il < lm->device.size(); ++il) {
    if (lm->device[il] == o.layers.device[il]) continue;
    if (moved || o.layers.device[il] != d) return std::nullopt;
    moved = static_cast<int>(il);
  }
  return moved;
}

/// The layer of model device `d` that a change of -ngl or -ts moves off it and no other layer with
/// it: one layer fewer (-ngl act - 1); the same with -ts keeping the other devices' counts; the
/// lowest layer of d's range to the device below it or its highest to the device above (-ts
/// counts, -ngl unchanged). Empty `flag` when none does (the lowest layer then).
LayerMove NextLayerOff(const planner::PlanResult& p, int d) {
  const planner::LayerMap& lm = p.outcome.layers;
  const int n_model = p.outcome.devices.n_model;
  const int act = lm.act_gpu_layers;
  const std::vector<int> counts = LayerCounts(lm, n_model);
  const auto lo_it = std::find(lm.device.begin(), lm.device.end(), d);
  const int lo = static_cast<int>(lo_it - lm.device.begin());
  const int hi = static_cast<int>(lm.device.rend() - std::find(lm.device.rbegin(), lm.device.rend(), d)) - 1;
  const auto is_model = [&](int il) {
    return il >= 0 && il < static_cast<int>(lm.device.size()) && lm.device[il] < n_model;
  };
  if (act > 0) {
    const std::string ngl = "-ngl " + std::to_string(act - 1);
    if (auto il = MovesOneOff(p, d, act - 1, {})) return {*il, ngl};
    std::vector<int> fewer = counts;
    --fewer[static_cast<size_t>(d)];
    if (auto il = MovesOneOff(p, d, act - 1, fewer)) return {*il, ngl + " " + TsFlag(fewer)};
  }
  for (const auto& [il, to] : {std::pair<int, int>{lo, lo - 1}, {hi, hi + 1}}) {
    if (!is_model(to)) continue;
    std::vector<int> shifted = counts;
    --shifted[static_cast<size_t>(d)];
    ++shifted[static_cast<size_t>(lm.device[to])];
    if (MovesOneOff(p, d, lm.n_gpu_layers, shifted) == il) return {il, TsFlag(shifted)};
  }
  return {lo, ""};
}

/// The next thing to leave model device `d`: the experts of the lowest layer whose expert tensors
/// it holds (what llama.cpp 2026's --fit spills first, as -ot to the CPU of d's host), else a layer
/// (NextLayerOff).
NextMove NextOff(const planner::PlanResult& p, int d) {
  const planner::ModelGraphs& m = p.graphs;
  const PlacementOutcome& o = p.outcome;
  const int n_layer = static_cast<int>(m.hp.n_layer);
  NextMove mv;
  // Expert tensors: --cpu-moe's pattern (one definition of "expert tensor"); on a host's own CPU
  // they are where a spill would put them.
  const planner::DeviceManifest& cpu = o.devices.devices[o.devices.cpu];
  const std::string cpu_buft = HostCpuBuft(o.devices, d);
  const std::regex experts(planner::CpuMoeOverrides(true, 0, cpu.default_buft.name).front().pattern);
  int first_expert = n_layer;
  if (!IsHostCpu(o.devices.devices[d].name, cpu.name))
    for (const GlobalTensor& g : m.globals)
      if (g.kind == TensorKind::kWeight && g.layer >= 0 && g.layer < first_expert &&
          GlobalDevice(o, g) == d && std::regex_search(g.name, experts))
        first_expert = g.layer;
  if (first_expert < n_layer) {
    mv.what = "blk." + std::to_string(first_expert) + " experts";
    AddTensors(
        m,
        [&](const GlobalTensor& g) {
          return g.kind == TensorKind::kWeight && g.layer == first_expert && GlobalDevice(o, g) == d &&
                 std::regex_search(g.name, experts);
        },
        &mv);
    if (!cpu_buft.empty())
      mv.flag = "-ot " + planner::CpuMoeOverrides(false, first_expert + 1, cpu_buft).back().pattern + "=" +
                cpu_buft;
    return mv;
  }
  if (std::find(o.layers.device.begin(), o.layers.device.end(), d) == o.layers.device.end()) return mv;
  const LayerMove next = NextLayerOff(p, d);
  mv.what = LayerName(next.layer, n_layer);
  mv.flag = next.flag;
  AddTensors(m, [&](const GlobalTensor& g) { return g.layer == next.layer && GlobalDevice(o, g) == d; }, &mv);
  return mv;
}

/// The layer one more -ngl would offload: i_gpu_start - 1, or the output layer once every
/// repeating layer is offloaded.
NextMove NextOffload(const planner::PlanResult& p) {
  const PlacementOutcome& o = p.outcome;
  const int n_layer = static_cast<int>(p.graphs.hp.n_layer);
  NextMove mv;
  if (o.devices.n_model == 0 || o.layers.act_gpu_layers >= n_layer + 1) return mv;
  const int il = o.layers.i_gpu_start > 0 ? o.layers.i_gpu_start - 1 : n_layer;
  mv.what = LayerName(il, n_layer);
  AddTensors(p.graphs, [&](const GlobalTensor& g) { return g.layer == il; }, &mv);
  mv.flag = "-ngl " + std::to_string(o.layers.act_gpu_layers + 1);
  return mv;
}

nlohmann::ordered_json MoveJson(const NextMove& mv) {
  if (mv.what.empty()) return nullptr;
  return {{"what", mv.what}, {"tensors", mv.tensors}, {"bytes", mv.bytes}, {"flag", mv.flag}};
}

}  // namespace

DeploymentReport MakeDeploymentReport(const planner::PlanResult& planned, const std::string& model_path,
                                      uint64_t fit_target) {
  const PlacementOutcome& o = planned.outcome;
  DeploymentReport r;
  r.model = model_path;
  r.n_layer = static_cast<int>(planned.graphs.hp.n_layer);
  r.n_gpu_layers = o.layers.n_gpu_layers;
  r.act_gpu_layers = o.layers.act_gpu_layers;
  r.n_ctx = planned.graphs.cfg.n_ctx;
  const planner::DeviceManifest& cpu = o.devices.devices[o.devices.cpu];
  for (const planner::DeviceMemoryUse& u : planner::DeviceMemory(o)) {
    const planner::DeviceManifest& m = o.devices.devices[u.device];
    DeviceReport d;
    d.use = u;
    d.host = HostOfDevice(m.name);
    d.type = IsHostCpu(m.name, cpu.name) ? DeviceTypeName(planner::DeviceType::kCpu) : DeviceTypeName(m.type);
    d.total = m.memory_total;
    d.free = m.memory_free;
    d.reserve = m.memory_reserve;
    for (const planner::PlannedBuffer& b : o.memory.buffers)
      if (b.mapped && o.placement.bufts[b.buft].device == u.device) d.mapped += b.size;
    // An ACCEL device's buffers are host memory (DeviceMemory counts them for the CPU): its row
    // shows the buffers of its own buffer types, checked in the CPU's row.
    const bool accel = m.type == planner::DeviceType::kAccel;
    d.memory_of = accel ? cpu.name : u.name;
    std::copy(u.by_usage, u.by_usage + 4, d.held);
    if (accel)
      for (const planner::PlannedBuffer& b : o.memory.buffers)
        if (!b.mapped && o.placement.bufts[b.buft].device == u.device)
          d.held[static_cast<int>(b.usage)] += b.size;
    for (uint64_t bytes : d.held) d.held_total += bytes;
    const bool gpu = m.type == planner::DeviceType::kGpu && u.device != o.devices.cpu;
    d.fit_target = gpu ? fit_target : 0;  // CheckFit's margin: GPUs only
    d.left = static_cast<int64_t>(u.available) - static_cast<int64_t>(u.needed);
    d.headroom = d.left - static_cast<int64_t>(d.fit_target);
    if (accel)
      d.status = d.held_total > 0 ? "in CPU memory" : "unused";
    else if (!u.reported)
      d.status = "not reported";
    else if (d.left < 0)
      d.status = "does not fit";
    else if (d.headroom < 0)
      d.status = "over fit target";
    else if (u.needed == 0)
      d.status = "unused";
    else
      d.status = "fits";
    if (gpu && u.needed > 0) d.next = NextOff(planned, u.device);
    if (u.reported && d.left < 0) {
      const uint64_t over = u.needed - u.available;
      char buf[384];
      std::snprintf(buf, sizeof buf,
                    "does not fit: device %s needs %llu bytes (%s MiB) but has %llu bytes (%s MiB) "
                    "available: over by %llu bytes (%s MiB)",
                    u.name.c_str(), static_cast<unsigned long long>(u.needed), Mib(u.needed).c_str(),
                    static_cast<unsigned long long>(u.available), Mib(u.available).c_str(),
                    static_cast<unsigned long long>(over), Mib(over).c_str());
      r.over.push_back(buf);
    }
    r.devices.push_back(std::move(d));
  }
  r.next_offload = NextOffload(planned);
  return r;
}

std::string DeploymentReportText(const DeploymentReport& r) {
  static constexpr char kRow[] = "%-24s %-5s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n";
  std::string out = "deployment report: " + r.model + " (n_ctx " + std::to_string(r.n_ctx) + ", " +
                    std::to_string(r.act_gpu_layers) + "/" + std::to_string(r.n_layer + 1) +
                    " layers offloaded; MiB)\n";
  char line[512];
  std::snprintf(line, sizeof line, kRow, "device", "type", "weights", "KV", "compute", "output", "total",
                "mapped", "free", "reserve", "left", "fit target", "headroom", "status");
  out += line;
  bool accel_held = false;
  for (const DeviceReport& d : r.devices) {
    const bool own = d.use.reported && d.memory_of == d.use.name;  // its own memory, checked
    accel_held = accel_held || (d.memory_of != d.use.name && d.held_total > 0);
    std::snprintf(line, sizeof line, kRow, d.use.name.c_str(), d.type.c_str(),
                  Mib(d.held[static_cast<int>(BufferUsage::kWeights)]).c_str(),
                  Mib(d.held[static_cast<int>(BufferUsage::kKvCache)]).c_str(),
                  Mib(d.held[static_cast<int>(BufferUsage::kCompute)]).c_str(),
                  Mib(d.held[static_cast<int>(BufferUsage::kOutput)]).c_str(), Mib(d.held_total).c_str(),
                  Mib(d.mapped).c_str(), own ? Mib(d.free).c_str() : "-", own ? Mib(d.reserve).c_str() : "-",
                  own ? MibText(static_cast<double>(d.left), true).c_str() : "-", Mib(d.fit_target).c_str(),
                  own ? MibText(static_cast<double>(d.headroom), true).c_str() : "-", d.status.c_str());
    out += line;
  }
  out +=
      "left = free - reserve - total (below 0: over its memory by that much); headroom = left - fit target "
      "(below 0: over the --fit target)";
  out += accel_held ? "; an ACCEL device's buffers are host memory, in the CPU's total too\n" : "\n";
  // A plan across hosts (plan-model --cluster): what each host (MPI rank) holds in all.
  int n_hosts = 1;
  for (const DeviceReport& d : r.devices) n_hosts = std::max(n_hosts, HostOfDevice(d.use.name) + 1);
  for (int h = 0; n_hosts > 1 && h < n_hosts; ++h) {
    uint64_t by[4] = {0, 0, 0, 0}, total = 0;
    for (const DeviceReport& d : r.devices) {
      if (HostOfDevice(d.use.name) != h) continue;
      for (int u = 0; u < 4; ++u) by[u] += d.use.by_usage[u];  // BufferUsage order
      total += d.use.needed;
    }
    out += "host " + std::to_string(h) + " (MPI rank " + std::to_string(h) + "): weights " + Mib(by[0]) +
           ", KV " + Mib(by[1]) + ", compute " + Mib(by[2]) + ", output " + Mib(by[3]) + ", total " +
           Mib(total) + " MiB\n";
  }
  auto move_line = [](const std::string& head, const NextMove& mv) {
    std::string s =
        head + mv.what + " (" + std::to_string(mv.tensors.size()) + " tensors, " + Mib(mv.bytes) + " MiB";
    if (!mv.flag.empty()) s += ": " + mv.flag;
    return s + ")\n";
  };
  for (const DeviceReport& d : r.devices)
    if (!d.next.what.empty()) out += move_line("next off " + d.use.name + ": ", d.next);
  if (!r.next_offload.what.empty()) out += move_line("next to offload: ", r.next_offload);
  for (const std::string& l : r.over) out += l + "\n";
  if (r.over.empty()) out += "fits: every device that reports its memory\n";
  return out;
}

std::string DeploymentReportJson(const DeploymentReport& r) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const DeviceReport& d : r.devices) {
    const bool own = d.memory_of == d.use.name;
    devices.push_back(
        {{"name", d.use.name},
         {"type", d.type},
         {"host", d.host},
         {"weights", d.held[static_cast<int>(BufferUsage::kWeights)]},
         {"kv", d.held[static_cast<int>(BufferUsage::kKvCache)]},
         {"compute", d.held[static_cast<int>(BufferUsage::kCompute)]},
         {"output", d.held[static_cast<int>(BufferUsage::kOutput)]},
         {"needed", d.held_total},
         {"memory_of", d.memory_of},
         {"mapped", d.mapped},
         {"free", d.free},
         {"reserve", d.reserve},
         {"available", d.use.available},
         {"reported", d.use.reported},
         {"fit_target", d.fit_target},
         {"left", own ? nlohmann::ordered_json(d.left) : nlohmann::ordered_json(nullptr)},
         {"headroom", own ? nlohmann::ordered_json(d.headroom) : nlohmann::ordered_json(nullptr)},
         {"status", d.status},
         {"next", MoveJson(d.next)}});
  }
  const nlohmann::ordered_json j = {{"model", r.model},
                                    {"n_ctx", r.n_ctx},
                                    {"n_layer", r.n_layer},
                                    {"n_gpu_layers", r.n_gpu_layers},
                                    {"offloaded_layers", r.act_gpu_layers},
                                    {"fits", r.over.empty()},
                                    {"devices", devices},
                                    {"next_offload", MoveJson(r.next_offload)},
                                    {"does_not_fit", r.over}};
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace stowage::tools
