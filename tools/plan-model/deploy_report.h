// plan-model --report: the deployment answers before anything is loaded (llama.cpp asks for the
// same in its issue "print the memory breakdown before loading"): per device the bytes of weights,
// KV cache, compute and output buffers against its free memory, reserve and --fit target, what is
// left, and the next thing that would move off it (the next layer, or for a MoE model the next
// layer's expert tensors) with the flag that moves it; every device over its memory with its overrun.
//
// Every figure is the plan's own: the per-device bytes are DeviceMemory's (fit.h; the buffers the
// fit check counts, split shares of -sm row included), tensor bytes are GlobalTensor::nbytes. The
// words and numbers: left = free - reserve - total (below 0: over its memory by exactly the "does
// not fit" line's overrun); headroom = left - fit target (below 0: over the --fit target).
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
  /// The flags that move exactly this (the layer map recomputed with them moves this layer and no
  /// other): "-ngl 40" (the layer one layer fewer leaves), "-ts 3,6" (layer counts per model device:
  /// a layer at the edge of the device's range to its neighbour), "-ngl 39 -ts 4,4";
  /// "-ot blk\.7\.ffn_(up|down|gate)_exps=CPU" for experts (to the CPU of the device's own host:
  /// "=MPI1:CPU" off MPI1:CUDA0); empty when none of these moves only this.
  std::string flag;
};

/// One device's row of the report.
struct DeviceReport {
  planner::DeviceMemoryUse use;  ///< DeviceMemory's: needed, by_usage, available, reported
  /// "GPU", "ACCEL", "CPU"; a host's CPU in a plan across hosts ("MPI1:CPU", a GPU-type model device
  /// for the planner, cluster.h) is "CPU".
  std::string type;
  int host = 0;  ///< the host (MPI rank) of a plan across hosts, HostOfDevice; 0 otherwise
  /// The row's bytes by BufferUsage and their sum: `use`'s, except for an ACCEL device, whose
  /// buffers are host memory that DeviceMemory counts for the CPU: there the buffers of its own
  /// buffer types (the load log's "ONEDNN model buffer"), which the CPU row counts too.
  uint64_t held[4] = {0, 0, 0, 0};
  uint64_t held_total = 0;
  /// The device whose free memory `held` is checked against: its own name, the CPU's for ACCEL.
  std::string memory_of;
  uint64_t total = 0, free = 0, reserve = 0;  ///< the manifest's (or --free's) bytes
  /// Bytes of its mapped weight buffers (CPU_Mapped: file pages, paged in from the model file as
  /// read; not in `use.needed`, as the fit check does not count them).
  uint64_t mapped = 0;
  uint64_t fit_target = 0;  ///< bytes --fit keeps free here (GPUs only, as CheckFit's margin)
  /// use.available - use.needed = free - reserve - total, in bytes; below 0 the device does not fit
  /// and -left is its overrun ("over by"). Not meaningful where memory_of is another device.
  int64_t left = 0;
  /// left - fit_target, in bytes: what --fit could still place here (below 0: over the target).
  int64_t headroom = 0;
  /// "fits", "over fit target" (fits its memory, not the --fit target), "does not fit", "unused"
  /// (nothing planned there), "not reported" (memory.total 0: never checked), "in CPU memory" (an
  /// ACCEL device's buffers, checked in the CPU's row).
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
/// "total", since the fit check leaves it out; "-" where a figure does not apply), a line saying
/// what left and headroom count, the "next off" line of each device that has one, the next
/// offload, then the "does not fit" lines or "fits: ...".
std::string DeploymentReportText(const DeploymentReport& r);

/// The same as one JSON object (bytes as integers; nlohmann::json, two-space indented, one trailing
/// newline): {"model", "n_ctx", "n_layer", "n_gpu_layers", "offloaded_layers", "fits", "devices":
/// [{"name", "type", "host", "weights", "kv", "compute", "output", "needed" (their sum: held),
/// "memory_of", "mapped", "free", "reserve", "available" (free - reserve), "reported", "fit_target",
/// "left" (available - needed), "headroom" (left - fit_target), "status", "next": {"what", "tensors",
/// "bytes", "flag"} | null}], "next_offload", "does_not_fit": [lines]}; "left" and "headroom" are
/// null where memory_of is another device (ACCEL).
std::string DeploymentReportJson(const DeploymentReport& r);

}  // namespace stowage::tools
