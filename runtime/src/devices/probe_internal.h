// Backend-specific probes, compiled only when their backend is built (see runtime/cmake/devices.cmake).
#pragma once

#include "stowage/runtime/device_probe.h"

namespace stowage::devices_internal {

/// The oneDNN ACCEL device: its own weight buffer type ONEDNN (not host; weights reordered at load
/// into oneDNN's blocked matmul layout) whose contiguous F32/BF16 MUL_MAT weights it runs at any
/// batch; MUL_MAT with host weights from batch 32 on (offload_op); F32 activations (the ACCEL
/// backend's contract, runtime/src/backends/onednn).
ProbedDevice MakeOneDnnDevice(const CpuInfo& cpu);

/// Sets info.weight_types and info.cpy_types to the CUDA backend's own answers
/// (exec::CudaSupportsWeightType / CudaSupportsCpy); needs no GPU.
void AddCudaBackendTypes(CudaDeviceInfo& info);

/// Appends one device per CUDA GPU, or a note ("CUDA: no CUDA device (...)").
void ProbeCuda(ProbeReport& report);

}  // namespace stowage::devices_internal
