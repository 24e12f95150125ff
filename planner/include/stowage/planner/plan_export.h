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

/// A weight's slice of its file tensor (plan.fbs TensorSlice): elements [begin, begin + ne[axis])
/// along `axis` of a file tensor of shape full_ne; axis -1: the whole tensor (no slice recorded).
struct TensorSliceRecord {
  int axis = -1;
  int64_t begin = 0;
  int64_t full_ne[4] = {1, 1, 1, 1};
};

/// One rank's plan of a tensor split across MPI ranks (plan-model --cluster -sm tensor).
struct TensorSplitRank {
  int rank = 0, n_ranks = 1;
  std::vector<TensorSliceRecord> slices;               ///< per ModelGraphs::globals index
  std::vector<std::vector<uint8_t>> other_rank_plans;  ///< rank 0 only: ranks 1.., sealed plans
};

/// Builds the flatbuffer of a plan. `flags` records the planner's command line. With `tp`, a
/// rank's plan of a tensor split across ranks (schema_version 6): its weights' slices, tp_rank,
/// tp_n_ranks and (rank 0) the other ranks' plans nested.
std::vector<uint8_t> SerializePlan(const GgufFile& gguf, const ModelGraphs& m, const Placement& p,
                                   const MemoryPlan& mem, const std::string& flags,
                                   const TensorSplitRank* tp = nullptr);

// Plan files are written with stowage::WriteFileAtomic (stowage/runtime/atomic_file.h).

}  // namespace stowage::planner
