// --split cost: pipeline stages by a latency model (cluster_split.h).
#include "stowage/planner/cluster_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "stowage/planner/fit.h"
#include "stowage/runtime/host_devices.h"

namespace stowage::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The seconds `bytes` take from host a to host b: over their link, else through the hosts between
// them link by link (a chain, as the shipped cluster files describe); infinity when a link is missing.
double HopSeconds(const CostSplitInput& in, int a, int b, double bytes) {
  if (a == b) return 0;
  if (const auto& l = in.links[static_cast<size_t>(a)][static_cast<size_t>(b)])
    return l->latency + bytes / l->bandwidth;
  if (std::abs(a - b) == 1) return kInf;
  double t = 0;
  for (int h = a; h != b; h += a < b ? 1 : -1) {
    const auto& l = in.links[static_cast<size_t>(h)][static_cast<size_t>(h + (a < b ? 1 : -1))];
    if (!l) return kInf;
    t += l->latency + bytes / l->bandwidth;
  }
  return t;
}

std::string Mib(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f MiB", bytes / 1048576.0);
  return s;
}

std::string Ms(double seconds) {
  char s[32];
  std::snprintf(s, sizeof s, "%.3f ms", seconds * 1e3);
  return s;
}

// A path's cost: the seconds per token, then (among equal ones, to within rounding) the sum of the
// squared stage seconds, so that equal devices share the layers evenly (what a pipelined prompt
// gains from) instead of in an arbitrary way.
struct PathCost {
  double seconds = kInf, balance = 0;
  bool Better(const PathCost& o) const {
    if (std::isinf(seconds) || std::isinf(o.seconds)) return !std::isinf(seconds);
    const double tol = 1e-9 * std::max(seconds, o.seconds);
    if (seconds < o.seconds - tol) return true;
    return seconds <= o.seconds + tol && balance < o.balance;
  }
};

}  // namespace

double CostLayerSeconds(const CostDevice& d, const CostLayer& l) {
  double compute = 0;
  for (const auto& [type, flops] : l.flops) {
    auto it = d.peak_flops.find(type);
    if (it == d.peak_flops.end()) it = d.peak_flops.find("f32");
    if (it != d.peak_flops.end()) compute += flops / it->second;
  }
  return std::max(l.bytes_read / d.memory_bandwidth, compute);
}

Result<CostSplit> EstimateCostSplit(const CostSplitInput& in, const std::vector<int>& layers_per_device) {
  if (layers_per_device.size() != in.devices.size())
    return InvalidArgument("a split of " + std::to_string(layers_per_device.size()) + " devices, expected " +
                           std::to_string(in.devices.size()));
  CostSplit s;
  s.layers_per_device = layers_per_device;
  s.stage_seconds.assign(in.devices.size(), 0.0);
  size_t at = 0;
  int last_host = 0;
  for (size_t d = 0; d < in.devices.size(); ++d) {
    const CostDevice& dev = in.devices[d];
    const int n = layers_per_device[d];
    if (n < 0 || at + static_cast<size_t>(n) > in.layers.size())
      return InvalidArgument("a split of " + std::to_string(at + std::max(n, 0)) + "+ layers, expected " +
                             std::to_string(in.layers.size()));
    if (n == 0) continue;
    uint64_t bytes = 0;
    for (size_t i = at; i < at + static_cast<size_t>(n); ++i) {
      bytes += in.layers[i].bytes;
      s.stage_seconds[d] += CostLayerSeconds(dev, in.layers[i]);
    }
    if (bytes > dev.capacity)
      return InvalidArgument("device " + dev.name + ": its " + std::to_string(n) + " layers take " +
                             Mib(bytes) + ", expected at most " + Mib(static_cast<double>(dev.capacity)));
    const double hop = HopSeconds(in, last_host, dev.host, in.activation_bytes);
    if (std::isinf(hop))
      return InvalidArgument("no link between hosts " + std::to_string(last_host) + " and " +
                             std::to_string(dev.host) +
                             " (nor through the hosts between them) in the cluster file");
    s.link_seconds += hop;
    last_host = dev.host;
    at += static_cast<size_t>(n);
  }
  if (at != in.layers.size())
    return InvalidArgument("a split of " + std::to_string(at) + " layers, expected " +
                           std::to_string(in.layers.size()));
  const double back = HopSeconds(in, last_host, 0, sizeof(int32_t));
  if (std::isinf(back))
    return InvalidArgument("no link between hosts " + std::to_string(last_host) +
                           " and 0 in the cluster file");
  s.link_seconds += back;
  s.seconds_per_token = s.link_seconds;
  for (double t : s.stage_seconds) s.seconds_per_token += t;
  return s;
}

Result<CostSplit> SolveCostSplit(const CostSplitInput& in) {
  const size_t nd = in.devices.size(), nl = in.layers.size();
  const size_t nh = static_cast<size_t>(std::max(in.n_hosts, 1));
  // Per device: prefix sums of its layer seconds and bytes.
  std::vector<std::vector<double>> secs(nd, std::vector<double>(nl + 1, 0.0));
  std::vector<uint64_t> bytes(nl + 1, 0);
  for (size_t i = 0; i < nl; ++i) bytes[i + 1] = bytes[i] + in.layers[i].bytes;
  for (size_t d = 0; d < nd; ++d)
    for (size_t i = 0; i < nl; ++i)
      secs[d][i + 1] = secs[d][i] + CostLayerSeconds(in.devices[d], in.layers[i]);
  // cost[j][h]: least seconds with layers [0, j) placed on the devices so far, the last non-empty
  // stage on host h (host 0 before any: the layers -ngl keeps and the input are there).
  // from[d][j][h]: the j before device d's stage that reached (j, h), or -1 when d took nothing.
  std::vector<std::vector<std::vector<int>>> from, from_host;
  PathCost best;
  size_t best_h = 0;
  // The dynamic programme; without `capacity` any device takes any number of layers (what the
  // links alone allow).
  auto solve = [&](bool capacity) {
    std::vector<std::vector<PathCost>> cost(nl + 1, std::vector<PathCost>(nh));
    cost[0][0] = PathCost{0, 0};
    from.assign(nd, std::vector<std::vector<int>>(nl + 1, std::vector<int>(nh, -1)));
    from_host = from;
    for (size_t d = 0; d < nd; ++d) {
      const CostDevice& dev = in.devices[d];
      const size_t hd = static_cast<size_t>(dev.host);
      std::vector<std::vector<PathCost>> next = cost;  // device d takes nothing
      for (size_t j = 0; j < nl; ++j)
        for (size_t h = 0; h < nh; ++h) {
          if (std::isinf(cost[j][h].seconds)) continue;
          const double hop = HopSeconds(in, static_cast<int>(h), dev.host, in.activation_bytes);
          if (std::isinf(hop)) continue;
          for (size_t k = j + 1; k <= nl && (!capacity || bytes[k] - bytes[j] <= dev.capacity); ++k) {
            const double stage = secs[d][k] - secs[d][j];
            const PathCost c{cost[j][h].seconds + hop + stage, cost[j][h].balance + stage * stage};
            if (c.Better(next[k][hd])) {
              next[k][hd] = c;
              from[d][k][hd] = static_cast<int>(j);
              from_host[d][k][hd] = static_cast<int>(h);
            }
          }
        }
      cost = std::move(next);
    }
    best = PathCost{};
    best_h = 0;
    for (size_t h = 0; h < nh; ++h) {
      const PathCost c{cost[nl][h].seconds + HopSeconds(in, static_cast<int>(h), 0, sizeof(int32_t)),
                       cost[nl][h].balance};
      if (c.Better(best)) best = c, best_h = h;
    }
  };
  solve(true);
  if (std::isinf(best.seconds)) {
    // Memory, or the links? Without the capacities a split that still fails lacks a link: name the
    // host pairs of model devices (and host 0, where the input and output are) with no path.
    solve(false);
    std::string missing;
    if (std::isinf(best.seconds)) {
      std::vector<int> hosts{0};
      for (const CostDevice& dev : in.devices)
        if (std::find(hosts.begin(), hosts.end(), dev.host) == hosts.end()) hosts.push_back(dev.host);
      for (size_t a = 0; a < hosts.size(); ++a)
        for (size_t b = a + 1; b < hosts.size(); ++b)
          if (std::isinf(HopSeconds(in, hosts[a], hosts[b], 0)))
            missing += std::string(missing.empty() ? "" : ", ") +
                       std::to_string(std::min(hosts[a], hosts[b])) + "-" +
                       std::to_string(std::max(hosts[a], hosts[b]));
    }
    if (!missing.empty())
      return InvalidArgument("no contiguous split of the " + std::to_string(nl) +
                             " offloaded layers: no link between hosts " + missing +
                             " in the cluster file, expected one per pair of hosts a split crosses (or a "
                             "chain of links)");
    return ResourceExhausted("no contiguous split of the " + std::to_string(nl) +
                             " offloaded layers fits the model devices' memory over the cluster's links");
  }
  std::vector<int> counts(nd, 0);
  size_t j = nl, h = best_h;
  for (size_t d = nd; d-- > 0;) {
    const int prev = from[d][j][h];
    if (prev < 0) continue;  // device d took nothing on the best path
    counts[d] = static_cast<int>(j) - prev;
    const size_t ph = static_cast<size_t>(from_host[d][j][h]);
    j = static_cast<size_t>(prev);
    h = ph;
  }
  return EstimateCostSplit(in, counts);
}

Result<CostSplitInput> MakeCostSplitInput(const Cluster& cluster, const ModelGraphs& m,
                                          const PlacementOutcome& memory_split) {
  CostSplitInput in;
  const DeviceSet& ds = memory_split.devices;
  in.n_hosts = static_cast<int>(cluster.hosts.size());
  in.activation_bytes = static_cast<double>(m.hp.n_embd) * sizeof(float);
  in.links.assign(cluster.hosts.size(), std::vector<std::optional<CostLink>>(cluster.hosts.size()));
  for (const ClusterLink& l : cluster.links) {
    const CostLink c{l.bandwidth_bytes_per_second, l.latency_seconds};
    in.links[static_cast<size_t>(l.host_a)][static_cast<size_t>(l.host_b)] = c;
    in.links[static_cast<size_t>(l.host_b)][static_cast<size_t>(l.host_a)] = c;
  }
  const std::vector<DeviceMemoryUse> use = DeviceMemory(memory_split);
  uint64_t overhead = 0;  // the largest compute + output bytes of a model device
  for (const DeviceMemoryUse& u : use)
    if (u.device < ds.n_model)
      overhead = std::max(overhead, u.by_usage[static_cast<int>(BufferUsage::kCompute)] +
                                        u.by_usage[static_cast<int>(BufferUsage::kOutput)]);
  for (int i = 0; i < ds.n_model; ++i) {
    const DeviceManifest& d = ds.devices[static_cast<size_t>(i)];
    CostDevice c;
    c.name = d.name;
    c.host = HostOfDevice(d.name);
    if (!d.performance.memory_bandwidth)
      return InvalidArgument(
          cluster.path + ": host " + std::to_string(c.host) + " device " +
          std::string(LocalDeviceName(d.name)) +
          ": no performance.memory_bandwidth in its manifest, expected one for --split cost");
    c.memory_bandwidth = d.performance.memory_bandwidth->value;
    for (const auto& [type, f] : d.performance.peak_flops) c.peak_flops[type] = f.value;
    for (const DeviceMemoryUse& u : use)
      if (u.device == i && u.reported) c.capacity = u.available > overhead ? u.available - overhead : 0;
    in.devices.push_back(std::move(c));
  }
  const int n_layer = static_cast<int>(m.hp.n_layer);
  std::vector<CostLayer> layers(static_cast<size_t>(n_layer) + 1);
  for (int il = 0; il <= n_layer; ++il) layers[static_cast<size_t>(il)].layer = il;
  const double used_share =
      m.hp.n_expert > 0 ? static_cast<double>(m.hp.n_expert_used) / static_cast<double>(m.hp.n_expert) : 1.0;
  for (const GlobalTensor& g : m.globals) {
    if (g.layer < 0 || g.layer > n_layer) continue;
    CostLayer& l = layers[static_cast<size_t>(g.layer)];
    if (g.kind == TensorKind::kKvCache) {
      l.bytes += g.nbytes;
      continue;
    }
    if (g.kind != TensorKind::kWeight) continue;
    l.bytes += g.nbytes;
    const double share = g.consumer_op == GgmlOp::MUL_MAT_ID ? used_share : 1.0;
    l.bytes_read += static_cast<double>(g.nbytes) * share;
    if (g.consumer_op == GgmlOp::MUL_MAT || g.consumer_op == GgmlOp::MUL_MAT_ID)
      l.flops[GgmlTypeName(g.type)] +=
          2.0 * static_cast<double>(g.ne[0]) * static_cast<double>(g.ne[1] * g.ne[2] * g.ne[3]) * share;
  }
  for (int il = 0; il <= n_layer; ++il)
    if (memory_split.layers.device[static_cast<size_t>(il)] < ds.n_model)
      in.layers.push_back(std::move(layers[static_cast<size_t>(il)]));
  return in;
}

std::vector<float> TensorSplitOf(const std::vector<int>& layers_per_device) {
  return std::vector<float>(layers_per_device.begin(), layers_per_device.end());
}

std::vector<std::string> ExplainClusterLayers(const Cluster& cluster, const PlacementOutcome& o,
                                              const CostSplitInput* in, const CostSplit* cost,
                                              const CostSplit* memory_estimate) {
  std::vector<std::string> out;
  const DeviceSet& ds = o.devices;
  const LayerMap& lm = o.layers;
  const int n_layer = static_cast<int>(lm.device.size()) - 1;
  auto host_of = [&](int dev) {
    const int h = HostOfDevice(ds.devices[static_cast<size_t>(dev)].name);
    return "host " + std::to_string(h) + " '" + cluster.hosts[static_cast<size_t>(h)].name + "'";
  };
  // Each model device's range of offloaded layers.
  std::vector<int> first(ds.devices.size(), -1), last(ds.devices.size(), -1);
  for (int il = 0; il <= n_layer; ++il) {
    const int d = lm.device[static_cast<size_t>(il)];
    if (first[static_cast<size_t>(d)] < 0) first[static_cast<size_t>(d)] = il;
    last[static_cast<size_t>(d)] = il;
  }
  if (cost && memory_estimate)
    out.push_back("cluster: --split cost: " + Ms(cost->seconds_per_token) + " per generated token (stages " +
                  Ms(cost->seconds_per_token - cost->link_seconds) + ", hops " + Ms(cost->link_seconds) +
                  "), the memory split " + Ms(memory_estimate->seconds_per_token) + " (stages " +
                  Ms(memory_estimate->seconds_per_token - memory_estimate->link_seconds) + ", hops " +
                  Ms(memory_estimate->link_seconds) + ")");
  size_t item = 0;  // index into in->layers of the next offloaded layer
  out.push_back("layer input: " + host_of(ds.cpu) + " " + ds.devices[static_cast<size_t>(ds.cpu)].name +
                ": the input layer stays on host 0's CPU (llama.cpp load_tensors)");
  for (int il = 0; il <= n_layer; ++il) {
    const int d = lm.device[static_cast<size_t>(il)];
    const std::string name = il == n_layer ? "output" : std::to_string(il);
    std::string why;
    if (d >= ds.n_model) {
      why = "not offloaded (-ngl " + std::to_string(lm.n_gpu_layers) + ": layers before " +
            std::to_string(lm.i_gpu_start) + (il == n_layer ? " and the output" : "") +
            " stay on host 0's CPU)";
    } else {
      const int hi = last[static_cast<size_t>(d)];
      const std::string range = "layers " + std::to_string(first[static_cast<size_t>(d)]) + ".." +
                                (hi == n_layer ? "output" : std::to_string(hi));
      if (cost && in && item < in->layers.size()) {
        const CostDevice& cd = in->devices[static_cast<size_t>(d)];
        why =
            "--split cost: stage " + range + " (" + Ms(cost->stage_seconds[static_cast<size_t>(d)]) +
            " per token); this layer " + Ms(CostLayerSeconds(cd, in->layers[item])) + " here, " +
            Mib(static_cast<double>(in->layers[item].bytes)) + " of weights and KV (device capacity " +
            (cd.capacity == UINT64_MAX ? std::string("unreported") : Mib(static_cast<double>(cd.capacity))) +
            ")";
      } else {
        char share[32];
        std::snprintf(share, sizeof share, "%.1f%%",
                      100.0 * (lm.splits[static_cast<size_t>(d)] -
                               (d > 0 ? lm.splits[static_cast<size_t>(d) - 1] : 0.f)));
        why = "--split memory: the -ts rule (-ts, else free memory) gives " +
              ds.devices[static_cast<size_t>(d)].name + " " + share + " of the " +
              std::to_string(lm.act_gpu_layers) + " offloaded layers: " + range;
      }
      ++item;
    }
    out.push_back("layer " + name + ": " + host_of(d) + " " + ds.devices[static_cast<size_t>(d)].name + ": " +
                  why);
  }
  return out;
}

}  // namespace stowage::planner
