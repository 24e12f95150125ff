// The plan plan-model makes for this machine's CPU (no --device): the probed CPU device as a
// manifest, the whole placement pipeline (planner::PlaceModel: CPU_REPACK for the weight types this
// CPU's repack buffer type takes, mmap, llama.cpp's defaults), serialized as plan-model writes it.
// The end-to-end tests run these plans, so they exercise the planner's buffer-type choices and the
// runtime's repacking, not only planner::PlaceAllOnCpu's plain CPU buffers (plan_cpu.h).
// Header-only; link stowage_plan_export, stowage_placement and stowage_manifest_probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "from_probe.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::test {

/// The serialized plan of the GGUF model at `model_path` for this machine's CPU with the context
/// `cfg` (n_ctx, n_batch, n_ubatch, flash_attn; BuildModelGraphs resolves and clamps it) and
/// placement flags `opt` (default: plan-model's defaults), generator flags `flags`.
/// Errors: opening the GGUF, building the graphs, the probed manifest, placement.
inline Result<std::vector<uint8_t>> PlanForThisCpu(const std::string& model_path,
                                                   const planner::ContextConfig& cfg,
                                                   const planner::PlacementOptions& opt = {},
                                                   const std::string& flags = "test") {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model_path));
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs graphs, planner::BuildModelGraphs(*gguf, cfg));
  STOWAGE_ASSIGN_OR_RETURN(planner::DeviceManifest cpu,
                           planner::ManifestFromProbe(MakeCpuDevice(ProbeCpu())));
  STOWAGE_ASSIGN_OR_RETURN(planner::PlacementOutcome placed, planner::PlaceModel(graphs, {cpu}, opt));
  return planner::SerializePlan(*gguf, graphs, placed.placement, placed.memory, flags);
}

}  // namespace stowage::test
