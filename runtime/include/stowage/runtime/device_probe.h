// Probing this machine's devices: the runtime's backend registry as `list-devices` shows it.
//
// What is probed (ggml-backend's device model, reference/llamacpp-placement.md §1):
//   * the CPU: model name (/proc/cpuinfo "model name", else the CPUID brand string), logical and
//     physical cores (/proc/cpuinfo "physical id"/"core id"), ISA features by CPUID (+ XGETBV for
//     the OS-enabled register state: AVX, AVX-512 and AMX need it), memory by sysinfo(2)
//     (total = totalram; free = MemAvailable from /proc/meminfo, else freeram);
//   * oneDNN (only when built with STOWAGE_HAVE_ONEDNN): an ACCEL device reporting dnnl_version()
//     and the effective CPU ISA (dnnl_get_effective_cpu_isa);
//   * CUDA (only when built with STOWAGE_HAVE_CUDA): one GPU device per cudaGetDeviceCount, with
//     cudaGetDeviceProperties and cudaMemGetInfo. "No CUDA device" (no driver, no GPU) is a note in
//     the report, not an error.
//
// Each probed device carries what its backend in this build can run: an op-support table in the
// rule language of stowage/runtime/op_rules.h (ProbedDevice::op_support, extra buffer types with
// their own rules). DeviceDesc::SupportsOp answers from those tables; the planner's manifest writer
// (list-devices --emit-manifest) writes the same rules, and a unit test checks both answers agree
// for every op and type pair.
//
// This header has no planner dependency; ops are the shared GgmlOp (stowage/runtime/ggml_ops.h).
// Shapes are in ggml order (ne[0] innermost); sizes in bytes. Probing reads /proc and CPUID and
// keeps no global state; results are plain values (thread-compatible).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stowage/runtime/device_desc.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/op_rules.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// x86 ISA features that matter to ggml-style kernels. All false on other architectures.
/// Source of the bits: Intel SDM vol. 2A, CPUID leaves 1 and 7 (sub-leaves 0 and 1); a feature
/// that needs OS-saved register state (AVX*, AVX-512*, AMX) is reported only when XCR0 enables it.
struct CpuFeatures {
  bool sse3 = false, ssse3 = false, fma = false, f16c = false, avx = false, avx2 = false;
  bool avx_vnni = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_vbmi = false, avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;

  /// Names of the present features, lower-case, in the order above ("avx2", "avx512_vnni", ...).
  std::vector<std::string> Names() const;
};

/// Facts about the host CPU and memory.
struct CpuInfo {
  std::string model_name;  ///< "AMD EPYC 9654 96-Core Processor" (empty if unknown)
  std::string vendor;      ///< CPUID vendor string ("GenuineIntel", "AuthenticAMD")
  int logical_cores = 0;   ///< online logical processors (sysconf _SC_NPROCESSORS_ONLN)
  int physical_cores = 0;  ///< distinct (physical id, core id) pairs; = logical if unknown
  CpuFeatures features;
  uint64_t memory_total = 0;  ///< bytes (sysinfo totalram * mem_unit)
  uint64_t memory_free = 0;   ///< bytes (MemAvailable, else sysinfo freeram)
};

/// Probes the CPU and host memory. Never fails: unknown fields stay empty/zero.
CpuInfo ProbeCpu();

/// Reads the CPU's ISA features (CPUID + XGETBV). All false on non-x86 builds.
CpuFeatures ProbeCpuFeatures();

// ---- what a probed device can run ---------------------------------------------------------------

// Queries, rules and tables are the op-support rule language (stowage/runtime/op_rules.h); the
// device itself is described as the planner's manifests describe one (stowage/runtime/device_desc.h).

/// One device of this machine, as its backend in this build sees it: its description (DeviceDesc;
/// op_support starts with the device's framing, view ops and ggml-cpu's refusal of sources in
/// non-host buffers, and goes on with the backend's own rules; nothing else is supported) and facts
/// for display.
struct ProbedDevice : DeviceDesc {
  /// Facts for display and --json, in order (e.g. {"isa", "avx2 fma f16c"}, {"cores", "16"}).
  std::vector<std::pair<std::string, std::string>> properties;
};

/// The result of probing: devices in ggml registry order (GPUs, then ACCEL, then the CPU last) and
/// notes about backends that were built but found nothing ("CUDA: no CUDA device: ...") or not
/// built at all ("oneDNN: not built").
struct ProbeReport {
  std::vector<ProbedDevice> devices;
  std::vector<std::string> notes;
};

/// Probes every backend of this build. Never fails; problems become notes.
ProbeReport ProbeDevices();

/// The CPU device of this build for `cpu` (its op table is the CPU backend's own, exec::CpuOpRules,
/// runtime/src/backends/cpu/cpu_op_table.h, with the kernels' weight types; CPU_REPACK extra buffer type for
/// Q4_0 MUL_MAT weights with ne1 % 8 == 0 when the CPU has AVX2, like ggml's 8x8 repack).
ProbedDevice MakeCpuDevice(const CpuInfo& cpu);

/// What the CUDA probe reads for one GPU (cudaGetDeviceProperties + cudaMemGetInfo).
struct CudaDeviceInfo {
  int index = 0;              ///< CUDA device ordinal -> device name "CUDA<index>"
  std::string name;           ///< cudaDeviceProp::name ("NVIDIA H200")
  uint64_t memory_total = 0;  ///< bytes (cudaMemGetInfo total)
  uint64_t memory_free = 0;   ///< bytes (cudaMemGetInfo free)
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;  ///< "domain:bus:device" (lower-case hex)
  /// Weight types the CUDA backend multiplies and gathers (exec::CudaSupportsWeightType);
  /// empty = the CPU backend's set.
  std::vector<GgmlType> weight_types;
  /// (src, dst) type pairs its CPY/CONT/DUP convert (exec::CudaSupportsCpy); empty = those of the
  /// backend's op table (exec::CudaCopyPairs).
  std::vector<std::pair<GgmlType, GgmlType>> cpy_types;
};

/// The GPU device of this build for one CUDA GPU: buffer types CUDA<i> (alignment 128), CUDA_Host
/// (pinned, host) and CUDA<i>_Split (-sm row), caps async/host_buffer/events (ggml-cuda),
/// offload_op for batches >= 32; its op table is the CUDA backend's own (exec::CudaOpRules,
/// runtime/src/backends/cuda/cuda_op_table.h) with `info`'s weight and copy types, after a rule
/// accepting the view ops.
/// Separate from the probe so it can be tested without a GPU.
ProbedDevice MakeCudaDevice(const CudaDeviceInfo& info);

/// The devices of this build's backends without probing hardware, in ggml registry order: a CUDA
/// device ("CUDA0") whose weight and copy types are the CUDA backend's own answers (as ProbeDevices
/// gives them for a GPU) when built with CUDA, the oneDNN ACCEL device for `cpu` when built with
/// oneDNN, then the CPU device for `cpu`. Their SupportsOp is the backends' supports_op, callable
/// without a GPU (for checking op tables against the backends).
std::vector<ProbedDevice> BackendDevicesOfThisBuild(const CpuInfo& cpu);

}  // namespace stowage
