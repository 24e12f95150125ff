// plan-model --report: the deployment answers before anything is loaded (llama.cpp asks for the
// same in its issue "print the memory breakdown before loading"): per device the bytes of weights,
// KV cache, compute and output buffers against its free memory, reserve and --fit target, the
// headroom left, and the next thing that would move off it (the next layer, or for a MoE model the
// next layer's expert tensors); every device over its memory with its overrun.
//
// Every figure is the plan's own: the per-device bytes are DeviceMemory's (fit.h; the buffers the
// fit check counts, split shares of -sm row included), tensor bytes are GlobalTensor::nbytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/fit.h"
#include "stowage/planner/plan.h"

namespace stowage::tools {

/// What would move next off one device.
struct NextMove {
  /// "layer 7", "output layer", "blk.7 experts"; empty: nothing to move (the device holds nothing
  /// that a layer count or a tensor override moves).
  std::string what;
  std::vector<std::string> tensors;  ///< the tensors that would leave (weights, then KV cache)
  uint64_t bytes = 0;                ///< their GlobalTensor::nbytes, each stored tensor once
  /// The flag that moves exactly this: "-ngl 40" (the first GPU layer of the first model device),
  /// "-ot blk\.7\.ffn_(up|down|gate)_exps=CPU"; empty when no single flag moves only this.
  std::string flag;
};

/// One device's row of the report.
struct DeviceReport {
  planner::DeviceMemoryUse use;               ///< DeviceMemory's: needed, by_usage, available, reported
  std::string type;                           ///< "GPU", "ACCEL", "CPU"
  uint64_t total = 0, free = 0, reserve = 0;  ///< the manifest's (or --free's) bytes
  /// Bytes of its mapped weight buffers (CPU_Mapped: file pages, paged in from the model file as
  /// read; not in `use.needed`, as the fit check does not count them).
  uint64_t mapped = 0;
  uint64_t fit_target = 0;  ///< bytes --fit keeps free here (GPUs only, as CheckFit's margin)
  /// available - fit_target - needed, in bytes (negative: over the target, or over its memory).
  int64_t headroom = 0;
  /// "fits", "over fit target" (fits its memory, not the --fit target), "does not fit", "unused"
  /// (nothing planned there), "not reported" (memory.total 0: never checked).
  std::string status;
  NextMove next;  ///< GPUs holding a model layer only
};

/// The whole report.
struct DeploymentReport {
  std::string model;  ///< the GGUF path
  int n_gpu_layers = 0, n_layer = 0, act_gpu_layers = 0;
  int64_t n_ctx = 0;
  std::vector<DeviceReport> devices;  ///< in DeviceSet order (model devices, ACCEL, CPU)
  /// The next layer a larger -ngl would offload ("layer 5" with "-ngl 4"); what empty when every
  /// layer and the output are offloaded or the machine has no model device.
  NextMove next_offload;
  /// One line per device whose needed bytes exceed its available bytes: "does not fit: device CUDA0
  /// needs N bytes (X MiB) but has A bytes (Y MiB) available: over by O bytes (Z MiB)".
  std::vector<std::string> over;
};

/// The report of a plan made by planner::Plan from `model_path`, with --fit's margin `fit_target`
/// (bytes kept free on each GPU; the report's target, whether or not --fit chose -ngl).
DeploymentReport MakeDeploymentReport(const planner::PlanResult& planned, const std::string& model_path,
                                      uint64_t fit_target);

/// The readable table: a header line, one row per device (MiB with two decimals; "mapped" after
/// "total", since the fit check leaves it out), the "next off" line
/// of each device that has one, the next offload, then the "does not fit" lines or "fits: ...".
std::string DeploymentReportText(const DeploymentReport& r);

/// The same as one JSON object (bytes as integers; nlohmann::json, two-space indented, one trailing
/// newline): {"model", "n_gpu_layers", "n_layer", "n_ctx", "fits", "devices": [{"name", "type",
/// "weights", "kv", "compute", "output", "needed", "mapped", "free", "reserve", "available", "fit_target",
/// "headroom", "status", "next": {"what", "tensors", "bytes", "flag"} | null}], "next_offload",
/// "does_not_fit": [lines]}.
std::string DeploymentReportJson(const DeploymentReport& r);

}  // namespace stowage::tools
