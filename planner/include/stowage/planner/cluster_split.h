// plan-model --cluster --split cost: pipeline stages (contiguous layer ranges per model device, so
// per host) chosen by a latency model from the manifests' figures instead of by free memory (the
// -ts rule of --split memory, the default). The choice is handed to the usual layer map as a -ts of
// layer counts, so that the plan is made exactly as a plan with that -ts.
//
// The model (after prima.cpp's Halda: the time of one generated token, the latency a user waits
// for, as the sum of its stages and hops):
//   * a layer on device d takes max(bytes it reads / d's memory bandwidth, its FLOPs / d's peak for
//     each weight's type) per token. Bytes read: its weights (of a MUL_MAT_ID weight, the share of
//     n_expert_used of n_expert); FLOPs: 2 per weight element of a MUL_MAT / MUL_MAT_ID (the used
//     experts). The peak of a weight's type is the manifest's peak_flops of that ggml type, else its
//     "f32" figure; a device with neither is taken as memory-bound. Attention over the KV cache
//     and the small ops are left out (the estimate is at an empty cache);
//   * an activation row (n_embd F32) that crosses from host a to host b takes latency_seconds +
//     bytes / bandwidth_bytes_per_second of the cluster file's link between a and b (either
//     direction), or without one, of each link through the hosts between them (a chain); devices
//     of one host exchange for free; the sampled token goes back to host 0
//     (4 bytes over the last host's link to host 0).
// Memory: a device's layers (their weights and KV cache) must fit its free memory less its reserve
// and less the largest compute and output buffers any model device holds in the memory split's
// plan (the compute buffer barely depends on how many layers a device holds). The fit check of the
// plan made with the chosen split then checks every buffer exactly.
//
// Why a dynamic program and no LP/ILP solver: stages are contiguous ranges over the model devices
// in their fixed order (host 0's GPUs, host 1's devices, ...; rank order is pipeline order), the
// cost is a sum of per-stage and per-hop terms and memory is a per-device bound, so the exact
// optimum is a shortest path over the states (layers placed so far, host of the last non-empty
// stage): O(devices * layers^2 * hosts) steps, well under a millisecond for a 671B model on three
// hosts of four GPUs. An ILP (GLPK, CBC) would find the same optimum with a dependency more.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stowage/planner/cluster.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/place_model.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// A model device as a stage candidate.
struct CostDevice {
  std::string name;                          ///< plan name, e.g. "MPI1:CPU"
  int host = 0;                              ///< its host (MPI rank)
  uint64_t capacity = UINT64_MAX;            ///< bytes its layers may take (UINT64_MAX: memory not reported)
  double memory_bandwidth = 0;               ///< bytes/s, > 0
  std::map<std::string, double> peak_flops;  ///< FLOP/s by ggml type name ("f32", "f16", ...)
};

/// One offloaded layer, in layer order.
struct CostLayer {
  int layer = 0;                        ///< il; n_layer is the output layer
  uint64_t bytes = 0;                   ///< weights + KV cache it puts on its device
  double bytes_read = 0;                ///< bytes of weights read per generated token
  std::map<std::string, double> flops;  ///< FLOPs per generated token by weight type name
};

/// A link's figures (cluster.h ClusterLink).
struct CostLink {
  double bandwidth = 0;  ///< bytes/s
  double latency = 0;    ///< seconds
};

/// What the split is chosen from.
struct CostSplitInput {
  std::vector<CostDevice> devices;  ///< the model devices in DeviceSet order
  std::vector<CostLayer> layers;    ///< the offloaded layers, in order
  int n_hosts = 1;
  /// links[a][b] (== links[b][a]): the link between hosts a and b; none: they cannot exchange.
  std::vector<std::vector<std::optional<CostLink>>> links;
  double activation_bytes = 0;  ///< one activation row crossing hosts per token (n_embd * 4)
};

/// A split and its estimate.
struct CostSplit {
  std::vector<int> layers_per_device;  ///< per CostSplitInput::devices entry; sums to layers.size()
  double seconds_per_token = 0;        ///< the model's estimate of the whole chain
  std::vector<double> stage_seconds;   ///< per device: its layers' time per token
  double link_seconds = 0;             ///< the hops' time per token
};

/// The device's time per token for layer `l` (the model above).
double CostLayerSeconds(const CostDevice& d, const CostLayer& l);

/// The estimate of a given split (layers_per_device per device, summing to in.layers.size()):
/// kInvalidArgument when the counts do not add up, a device's layers exceed its capacity or two
/// consecutive non-empty hosts have no link (the message names the device or the hosts).
Result<CostSplit> EstimateCostSplit(const CostSplitInput& in, const std::vector<int>& layers_per_device);

/// The split of least seconds_per_token whose stages fit their devices' capacity (the dynamic
/// program above; among splits of equal seconds to within rounding, the one of the least sum of
/// squared stage seconds: equal devices share the layers evenly). Errors: kResourceExhausted "no contiguous
/// split of the N offloaded layers fits the model devices' memory over the cluster's links" when none does;
/// kInvalidArgument "no contiguous split of the N offloaded layers: no link between hosts 0-1[, ...] in the
/// cluster file, expected one per pair of hosts a split crosses (or a chain of links)" when none would
/// even with unlimited memory (the pairs among host 0 and the devices' hosts that no link joins).
Result<CostSplit> SolveCostSplit(const CostSplitInput& in);

/// The input for `cluster`'s plan: its model devices (`memory_split.devices`, capacity from
/// DeviceMemory of `memory_split` less the largest compute + output bytes of a model device there),
/// the offloaded layers of `memory_split.layers` with their weights and KV tensors of `m.globals`,
/// the cluster's links and m.hp.n_embd. Errors (kInvalidArgument, naming the cluster file): a model
/// device without performance.memory_bandwidth in its manifest ("<file>: host 1 device CPU: no
/// performance.memory_bandwidth in its manifest, expected one for --split cost").
Result<CostSplitInput> MakeCostSplitInput(const Cluster& cluster, const ModelGraphs& m,
                                          const PlacementOutcome& memory_split);

/// The -ts that makes the layer map (AssignLayers) give model device i exactly
/// `layers_per_device[i]` of the offloaded layers, in order: the counts as proportions (their sum
/// is act_gpu_layers, so every split point falls on a layer boundary).
std::vector<float> TensorSplitOf(const std::vector<int>& layers_per_device);

/// --explain for a plan across hosts: one line per layer (input, repeating, output) saying which
/// host and device holds it and why: not offloaded (-ngl), the -ts rule's share (--split memory:
/// -ts, else free memory), or the cost split's stage with its estimate against the memory split's (`cost` and
/// `memory_estimate` given with --split cost). `o` is the outcome of the plan written.
std::vector<std::string> ExplainClusterLayers(const Cluster& cluster, const PlacementOutcome& o,
                                              const CostSplitInput* in, const CostSplit* cost,
                                              const CostSplit* memory_estimate);

}  // namespace stowage::planner
