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

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync, rename.
/// Never leaves a partly written file. Errors: kIoError naming the path and the OS error.
Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace stowage::planner
