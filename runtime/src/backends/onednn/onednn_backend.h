// The ACCEL backend: MUL_MAT through oneDNN's matmul primitive on the CPU engine, beside the CPU
// backend (the role llama.cpp's BLAS / AMX backends play: an accelerator that shares host memory).
//
// What it runs (everything else stays on the CPU by the plan, see runtime/src/devices/
// onednn_probe.cpp for the device's op table):
//   MUL_MAT  src0 (weights) [K, N, ne02, ne03] F32, BF16 or F16 with contiguous rows,
//            src1 (activations) F32 [K, M, ne12, ne13] with any strides,
//            dst F32 [N, M, ne12, ne13] with nb0 = 4; ne12 % ne02 == 0 and ne13 % ne03 == 0
//            (ggml's GQA broadcast: src0 matrix i02 serves src1 matrices i12 / (ne12 / ne02)).
//   F32 weights: f32 x f32 -> f32. BF16 / F16 weights: src1 is first converted to the weight type
//   with the CPU backend's converters (ggml's vec_dot_type rule: BF16 -> BF16, F16 -> F16, rounded
//   to nearest even), then bf16 x bf16 -> f32 / f16 x f16 -> f32, accumulated by oneDNN in F32.
//   A weight type is available only when oneDNN can build that matmul on this CPU
//   (OneDnnSupportsMulMatType; BF16 needs AVX-512 in oneDNN 2.x, F16 needs AVX-512 FP16).
//
// Buffers: host memory (is_host() true), 64-byte aligned, weights kept in ggml's plain row layout.
// The plan gives this device the buffer type "CPU" (shared with the CPU backend, as ggml-blas does),
// so the CPU backend may read the same bytes: a oneDNN-blocked weight layout would need the tensor's
// shape at upload and a buffer type of its own (see the report of issue 7).
// CanAccess: every host buffer. Compute is synchronous. Threads: `n_threads` OpenMP threads per
// matmul (the oneDNN build here uses the OpenMP runtime; the count is set for the calling thread only).
#pragma once

#include <memory>

#include "backend.h"
#include "stowage/runtime/ggml_types.h"

namespace stowage::exec {

/// A oneDNN ACCEL backend named `name` (the plan's device name, e.g. "ONEDNN"). Never null.
std::unique_ptr<Backend> CreateOneDnnBackend(const std::string& name, int n_threads);

/// True when this build's oneDNN can run MUL_MAT with src0 of `type` and F32 src1 on this CPU
/// (F32 always; BF16 / F16 when a matmul primitive for that type can be created). Probed by creating
/// a small primitive descriptor; never fails.
bool OneDnnSupportsMulMatType(GgmlType type);

}  // namespace stowage::exec
