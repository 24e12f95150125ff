// plan-model --split cost (cost_split.h).
#include "cost_split.h"

#include <string>

#include "stowage/runtime/host_devices.h"

namespace stowage::tools {

Result<CostSplitChoice> ChooseCostSplit(const GgufFile& gguf,
                                        const std::vector<planner::DeviceManifest>& machine,
                                        const planner::Cluster& cluster, planner::PlanRequest request,
                                        FILE* log) {
  request.serialize = false;
  request.fit_check = false;
  STOWAGE_ASSIGN_OR_RETURN(planner::PlanResult memory_split, planner::Plan(gguf, machine, request, nullptr));
  const planner::PlacementOutcome& o = memory_split.outcome;
  CostSplitChoice c;
  STOWAGE_ASSIGN_OR_RETURN(c.input, planner::MakeCostSplitInput(cluster, memory_split.graphs, o));
  auto solved = planner::SolveCostSplit(c.input);
  if (!solved.ok()) return solved.status().WithPrefix("--split cost");
  c.split = std::move(*solved);
  std::vector<int> memory_counts(static_cast<size_t>(o.devices.n_model), 0);
  for (int d : o.layers.device)
    if (d < o.devices.n_model) ++memory_counts[static_cast<size_t>(d)];
  auto m = planner::EstimateCostSplit(c.input, memory_counts);
  if (m.ok()) c.memory = std::move(*m);
  std::string ts, stages;
  for (size_t d = 0; d < c.split.layers_per_device.size(); ++d) {
    ts += (d ? "," : "") + std::to_string(c.split.layers_per_device[d]);
    const int h = HostOfDevice(c.input.devices[d].name);
    stages += std::string(d ? ", " : "") + c.input.devices[d].name + " (host '" +
              cluster.hosts[static_cast<size_t>(h)].name + "') " +
              std::to_string(c.split.layers_per_device[d]);
  }
  std::fprintf(log, "plan-model: --split cost: -ts %s: %s; %.3f ms per token estimated", ts.c_str(),
               stages.c_str(), c.split.seconds_per_token * 1e3);
  if (c.memory)
    std::fprintf(log, " (the memory split: %.3f ms)\n", c.memory->seconds_per_token * 1e3);
  else
    std::fprintf(log, " (the memory split not estimated: %s)\n", m.status().message().c_str());
  return c;
}

}  // namespace stowage::tools
