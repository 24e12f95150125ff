#include "deploy_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "mib_text.h"
#include "stowage/planner/buft_select.h"
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

/// The next thing to leave GPU `d`: the experts of the lowest layer whose expert tensors it holds
/// (what llama.cpp 2026's --fit spills first, as -ot), else its lowest layer.
NextMove NextOff(const planner::PlanResult& p, int d, const std::string& cpu_buft) {
  const planner::ModelGraphs& m = p.graphs;
  const PlacementOutcome& o = p.outcome;
  const int n_layer = static_cast<int>(m.hp.n_layer);
  NextMove mv;
  // Expert tensors: --cpu-moe's pattern (one definition of "expert tensor").
  const std::regex experts(planner::CpuMoeOverrides(true, 0, cpu_buft).front().pattern);
  int first_expert = n_layer;
  for (const GlobalTensor& g : m.globals)
    if (g.kind == TensorKind::kWeight && g.layer >= 0 && g.layer < first_expert && GlobalDevice(o, g) == d &&
        std::regex_search(g.name, experts))
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
    mv.flag =
        "-ot " + planner::CpuMoeOverrides(false, first_expert + 1, cpu_buft).back().pattern + "=" + cpu_buft;
    return mv;
  }
  // One layer fewer (-ngl act - 1) moves the output layer to the CPU when every layer is offloaded,
  // else the first offloaded layer (i_gpu_start): named with its flag when d holds it; otherwise
  // d's lowest layer (with several GPUs the others' ranges shift by the split fractions).
  const auto& dev = o.layers.device;
  const int act = o.layers.act_gpu_layers;
  const int leaving = act == n_layer + 1 ? n_layer : o.layers.i_gpu_start;
  int il = -1;
  if (act > 0 && leaving < static_cast<int>(dev.size()) && dev[leaving] == d) {
    il = leaving;
    mv.flag = "-ngl " + std::to_string(act - 1);
  } else {
    const auto it = std::find(dev.begin(), dev.end(), d);
    if (it == dev.end()) return mv;
    il = static_cast<int>(it - dev.begin());
  }
  mv.what = LayerName(il, n_layer);
  AddTensors(m, [&](const GlobalTensor& g) { return g.layer == il && GlobalDevice(o, g) == d; }, &mv);
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
    d.type = DeviceTypeName(m.type);
    d.total = m.memory_total;
    d.free = m.memory_free;
    d.reserve = m.memory_reserve;
    for (const planner::PlannedBuffer& b : o.memory.buffers)
      if (b.mapped && o.placement.bufts[b.buft].device == u.device) d.mapped += b.size;
    const bool gpu = m.type == planner::DeviceType::kGpu && u.device != o.devices.cpu;
    d.fit_target = gpu ? fit_target : 0;  // CheckFit's margin: GPUs only
    d.headroom = static_cast<int64_t>(u.available) - static_cast<int64_t>(d.fit_target) -
                 static_cast<int64_t>(u.needed);
    if (!u.reported)
      d.status = "not reported";
    else if (u.needed > u.available)
      d.status = "does not fit";
    else if (u.needed + d.fit_target > u.available)
      d.status = "over fit target";
    else if (u.needed == 0)
      d.status = "unused";
    else
      d.status = "fits";
    if (gpu && u.needed > 0) d.next = NextOff(planned, u.device, cpu.default_buft.name);
    if (u.reported && u.needed > u.available) {
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
  static constexpr char kRow[] = "%-24s %-5s %10s %10s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n";
  std::string out = "deployment report: " + r.model + " (n_ctx " + std::to_string(r.n_ctx) + ", " +
                    std::to_string(r.act_gpu_layers) + "/" + std::to_string(r.n_layer + 1) +
                    " layers offloaded; MiB)\n";
  char line[512];
  std::snprintf(line, sizeof line, kRow, "device", "type", "weights", "KV", "compute", "output", "total",
                "mapped", "free", "reserve", "fit target", "headroom", "status");
  out += line;
  for (const DeviceReport& d : r.devices) {
    const auto* by = d.use.by_usage;
    std::snprintf(line, sizeof line, kRow, d.use.name.c_str(), d.type.c_str(),
                  Mib(by[static_cast<int>(BufferUsage::kWeights)]).c_str(),
                  Mib(by[static_cast<int>(BufferUsage::kKvCache)]).c_str(),
                  Mib(by[static_cast<int>(BufferUsage::kCompute)]).c_str(),
                  Mib(by[static_cast<int>(BufferUsage::kOutput)]).c_str(), Mib(d.use.needed).c_str(),
                  Mib(d.mapped).c_str(), d.use.reported ? Mib(d.free).c_str() : "-",
                  d.use.reported ? Mib(d.reserve).c_str() : "-", Mib(d.fit_target).c_str(),
                  d.use.reported ? MibText(static_cast<double>(d.headroom), true).c_str() : "-",
                  d.status.c_str());
    out += line;
  }
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
    const auto* by = d.use.by_usage;
    devices.push_back({{"name", d.use.name},
                       {"type", d.type},
                       {"weights", by[static_cast<int>(BufferUsage::kWeights)]},
                       {"kv", by[static_cast<int>(BufferUsage::kKvCache)]},
                       {"compute", by[static_cast<int>(BufferUsage::kCompute)]},
                       {"output", by[static_cast<int>(BufferUsage::kOutput)]},
                       {"needed", d.use.needed},
                       {"mapped", d.mapped},
                       {"free", d.free},
                       {"reserve", d.reserve},
                       {"available", d.use.available},
                       {"reported", d.use.reported},
                       {"fit_target", d.fit_target},
                       {"headroom", d.headroom},
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
