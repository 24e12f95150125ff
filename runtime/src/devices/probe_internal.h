// Backend-specific probes, compiled only when their backend is built (see runtime/cmake/devices.cmake).
#pragma once

#include "stowage/runtime/device_probe.h"

namespace stowage::devices_internal {

/// The oneDNN ACCEL device: shares the CPU buffer type; runs MUL_MAT with contiguous F32/BF16
/// weights and F32 activations for batches >= 32 (the ACCEL backend's contract, DESIGN.md).
ProbedDevice MakeOneDnnDevice(const CpuInfo& cpu);

/// Appends one device per CUDA GPU, or a note ("CUDA: no CUDA device (...)").
void ProbeCuda(ProbeReport& report);

}  // namespace stowage::devices_internal
