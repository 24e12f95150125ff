// Backend-specific probes, compiled only when their backend is built (see CMakeLists.txt here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/runtime/device_probe.h"

namespace stowage::devices_internal {

/// A buffer type of a probed device: `name`, `alignment` (bytes), `is_host`; ggml's default
/// max_size, no rules.
BufferType Buft(std::string name, uint64_t alignment, bool is_host);

/// A probed device's op-support table (ProbedDevice::op_support; nothing else supported): view ops
/// (NONE, RESHAPE, VIEW, PERMUTE, TRANSPOSE) accepted, with any sources when
/// `view_ops_any_buffer`, else only when no source is in a non-host buffer; then, when
/// `srcs_must_be_host`, any op with a source in a non-host buffer refused (ggml-cpu's supports_op);
/// then the backend's own rules `backend`.
OpSupportTable DeviceTable(bool view_ops_any_buffer, bool srcs_must_be_host, std::vector<OpRule> backend);

/// The oneDNN ACCEL device: its own weight buffer type ONEDNN (not host; weights reordered at load
/// into oneDNN's blocked matmul layout) whose contiguous F32/BF16 MUL_MAT weights it runs at any
/// batch; MUL_MAT with host weights from batch 32 on (offload_op); F32 activations (the ACCEL
/// backend's contract, runtime/src/backends/onednn).
ProbedDevice MakeOneDnnDevice(const CpuInfo& cpu);

/// Sets info.weight_types to the CUDA backend's own answer (exec::CudaSupportsWeightType); its copy
/// types are its op table's (info.cpy_types stays empty). Needs no GPU.
void AddCudaBackendTypes(CudaDeviceInfo& info);

/// Appends one device per CUDA GPU, or a note ("CUDA: no CUDA device (...)").
void ProbeCuda(ProbeReport& report);

}  // namespace stowage::devices_internal
