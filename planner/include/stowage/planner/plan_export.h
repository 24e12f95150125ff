// Serializing a placed and memory-planned model into a plan file (runtime/schema/plan.fbs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Builds the flatbuffer of a plan. `flags` records the planner's command line.
std::vector<uint8_t> SerializePlan(const GgufFile& gguf, const ModelGraphs& m, const Placement& p,
                                   const MemoryPlan& mem, const std::string& flags);

// Plan files are written with stowage::WriteFileAtomic (stowage/runtime/atomic_file.h).

}  // namespace stowage::planner
