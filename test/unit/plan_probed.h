// The plan plan-model makes for this machine's CPU (no --device): the probed CPU device as a
// manifest, planned by planner::Plan, the entry point plan-model and stowage-run call (CPU_REPACK
// for the weight types this CPU's repack buffer type takes, mmap, llama.cpp's defaults), serialized
// as plan-model writes it. The end-to-end tests run these plans, so they exercise the planner's
// buffer-type choices and the runtime's repacking, not only PlaceAllOnCpu (place_cpu.h)'s plain CPU
// buffers (plan_cpu.h).
// Header-only; link stowage_plan and stowage_manifest_probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/from_probe.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::test {

/// The serialized plan of the GGUF model at `model_path` for this machine's CPU with the context
/// `cfg` (n_ctx, n_batch, n_ubatch, flash_attn on or off, llamacpp_compat: feb25 unless set;
/// planner::Plan resolves and clamps it) and
/// placement flags `opt` (default: plan-model's defaults), generator flags `flags`. Serialized
/// whether or not it fits this machine's memory (plan-model --no-fit-check).
/// Errors: opening the GGUF, the probed manifest, planner::Plan's.
inline Result<std::vector<uint8_t>> PlanForThisCpu(const std::string& model_path,
                                                   const planner::ContextConfig& cfg,
                                                   const planner::PlacementOptions& opt = {},
                                                   const std::string& flags = "test") {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model_path));
  STOWAGE_ASSIGN_OR_RETURN(planner::DeviceManifest cpu,
                           planner::ManifestFromProbe(MakeCpuDevice(ProbeCpu())));
  planner::PlanRequest request;
  request.context = cfg;
  request.llamacpp_compat = cfg.llamacpp_compat;  // the context's (ContextConfig's default: feb25)
  request.flash_attn = cfg.flash_attn ? planner::FlashAttnMode::kOn : planner::FlashAttnMode::kOff;
  request.placement = opt;
  request.fit_check = false;
  request.flags = flags;
  STOWAGE_ASSIGN_OR_RETURN(planner::PlanResult planned, planner::Plan(*gguf, {cpu}, request));
  return std::move(planned.bytes);
}

}  // namespace stowage::test
