// The CPU-only plan the runtime tests execute: every weight, KV cache tensor and node on the CPU
// (place_cpu.h PlaceAllOnCpu), memory planned and serialized as plan-model writes it, without a device
// manifest. Header-only; link stowage_plan_export (and the planner libraries it brings).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "place_cpu.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/placement.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::test {

/// The serialized CPU-only plan of the GGUF model at `model_path` for the context `cfg` (n_ctx,
/// n_batch, n_ubatch, ...; BuildModelGraphs clamps n_batch and n_ubatch), weights mapped from the
/// file when `use_mmap` (else in an allocated CPU buffer), generator flags `flags`. `edit`, when
/// given, changes the placement before memory planning (e.g. a test that renames the device).
/// Errors: opening the GGUF, building the graphs, planning memory.
inline Result<std::vector<uint8_t>> PlanCpu(const std::string& model_path, const planner::ContextConfig& cfg,
                                            bool use_mmap,
                                            const std::function<void(planner::Placement&)>& edit = nullptr,
                                            const std::string& flags = "test") {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model_path));
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs graphs, planner::BuildModelGraphs(*gguf, cfg));
  planner::Placement p = PlaceAllOnCpu(graphs, use_mmap);
  if (edit) edit(p);
  planner::MemoryPlan mem;
  STOWAGE_RETURN_IF_ERROR(planner::PlanMemory(graphs, p, &mem));
  return planner::SerializePlan(*gguf, graphs, p, mem, flags);
}

/// The serialized CPU-only plan of the GGUF model at `model_path` with context `n_ctx` (n_batch and
/// n_ubatch: planner::ContextConfig's defaults, clamped as BuildModelGraphs does), mmap on, generator
/// flags `flags`. `edit`, when given, changes the placement before memory planning (e.g. a test that
/// renames the device). Errors: opening the GGUF, building the graphs, planning memory.
inline Result<std::vector<uint8_t>> PlanCpu(const std::string& model_path, uint32_t n_ctx,
                                            const std::function<void(planner::Placement&)>& edit = nullptr,
                                            const std::string& flags = "test") {
  planner::ContextConfig cfg;
  cfg.n_ctx = n_ctx;
  return PlanCpu(model_path, cfg, /*use_mmap=*/true, edit, flags);
}

}  // namespace stowage::test
