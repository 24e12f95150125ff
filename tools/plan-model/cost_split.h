// plan-model --split cost (planner/cluster_split.h): the memory split's plan, then the split of
// least estimated time per token within each device's memory.
#pragma once

#include <cstdio>
#include <optional>

#include "stowage/planner/cluster.h"
#include "stowage/planner/cluster_split.h"
#include "stowage/planner/plan.h"

namespace stowage::tools {

/// What --split cost chose, and the memory split it was compared with.
struct CostSplitChoice {
  planner::CostSplitInput input;
  planner::CostSplit split;
  /// The memory split's estimate by the same model; none when its layers exceed a device's
  /// capacity as the cost model counts it or its hosts have no link.
  std::optional<planner::CostSplit> memory;
};

/// Plans `request` on `machine` (the cluster's devices) with the memory split (no plan file, no
/// fit check), builds the cost model's input from it and solves it; prints one line to `log`
/// ("plan-model: --split cost: -ts 0,9,8: ..."). Errors: Plan's, MakeCostSplitInput's,
/// SolveCostSplit's (prefixed "--split cost: ").
Result<CostSplitChoice> ChooseCostSplit(const GgufFile& gguf,
                                        const std::vector<planner::DeviceManifest>& machine,
                                        const planner::Cluster& cluster, planner::PlanRequest request,
                                        FILE* log);

}  // namespace stowage::tools
