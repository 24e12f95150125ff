// The plan the multi-device runtime tests execute: a shared model placed on the machine of
// ../shared/golden/placement (two RPC GPU-type devices rpc0/rpc1 + llama.cpp's CPU manifest, from
// `manifest_dir`), or on the CPU alone, with the placement options of a golden configuration, and
// serialized as plan-model writes it. Header-only; link stowage_plan_export and the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::test {

/// Plans `model` (n_ctx 256, the given n_ubatch) with -ngl `ngl`, split mode `sm`, main GPU
/// `main_gpu`; `flags` is recorded in the plan. cpu_only: the CPU manifest alone. `pp_splits`, when
/// given, receives the pp graph's split count. Errors: opening the GGUF or a manifest,
/// building the graphs, placement.
inline Result<std::vector<uint8_t>> PlanGoldenPlacement(const std::string& manifest_dir,
                                                        const std::string& model, int ngl,
                                                        planner::SplitMode sm, int main_gpu,
                                                        const std::string& flags, bool cpu_only,
                                                        uint32_t n_ubatch = planner::ContextConfig{}.n_ubatch,
                                                        int* pp_splits = nullptr) {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model));
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.n_ubatch = n_ubatch;
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs m, planner::BuildModelGraphs(*gguf, cfg));
  std::vector<planner::DeviceManifest> machine;
  if (!cpu_only)
    for (const char* f : {"rpc0.json", "rpc1.json"}) {
      STOWAGE_ASSIGN_OR_RETURN(auto d, planner::LoadManifestFile(manifest_dir + "/" + f));
      machine.push_back(std::move(d));
    }
  STOWAGE_ASSIGN_OR_RETURN(auto cpu, planner::LoadManifestFile(manifest_dir + "/llamacpp-cpu.json"));
  machine.push_back(std::move(cpu));
  planner::PlacementOptions opt;
  opt.n_gpu_layers = ngl;
  opt.split_mode = sm;
  opt.main_gpu = main_gpu;
  STOWAGE_ASSIGN_OR_RETURN(auto outcome, planner::PlaceModel(m, machine, opt));
  if (pp_splits) *pp_splits = static_cast<int>(m.pp.splits.size());
  return planner::SerializePlan(*gguf, m, outcome.placement, outcome.memory, flags);
}

}  // namespace stowage::test
