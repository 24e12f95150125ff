// -ngl's integer values as llama.cpp 2026 reads them (common.h: "-1 is auto, <= -2 is all"), for
// every planner front end (plan-model's and stowage-run's -ngl, the planner's C API).
#pragma once

#include <cstdint>

#include "stowage/planner/place_model.h"

namespace stowage::planner {

/// n_gpu_layers standing for "auto": --fit chooses the layers (PlanRequest::fit).
inline constexpr int kAutoGpuLayers = -1;

/// The n_gpu_layers an integer -ngl `ngl` asks for: kAllGpuLayers (every layer and the output) for
/// any value <= -2, `ngl` itself otherwise (kAutoGpuLayers for -1; a count above kAllGpuLayers is
/// returned as is for the caller to refuse, "expected a layer count from 0 to 1048576").
constexpr int64_t GpuLayersOf(int64_t ngl) { return ngl <= -2 ? kAllGpuLayers : ngl; }

}  // namespace stowage::planner
