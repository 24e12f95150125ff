// The ACCEL backend: MUL_MAT through oneDNN's matmul primitive on the CPU engine, beside the CPU
// backend (the role llama.cpp's AMX backend plays: an accelerator on host memory whose weights live
// in a buffer type of its own, in the layout its kernels prefer, reordered at load).
//
// What it runs (everything else stays on the CPU by the plan, see runtime/src/devices/
// onednn_probe.cpp for the device's op table):
//   MUL_MAT  src0 (weights) [K, N, ne02, ne03] F32, BF16 or F16 with contiguous rows (plain
//            layout), or a 2-D [K, N] weight in kLayoutOneDnnBlocked (ONEDNN buffer type),
//            src1 (activations) F32 [K, M, ne12, ne13] with any strides,
//            dst F32 [N, M, ne12, ne13] with nb0 = 4; ne12 % ne02 == 0 and ne13 % ne03 == 0
//            (ggml's GQA broadcast: src0 matrix i02 serves src1 matrices i12 / (ne12 / ne02)).
//   F32 weights: f32 x f32 -> f32. BF16 / F16 weights: src1 is first converted to the weight type
//   with the CPU backend's converters (ggml's vec_dot_type rule: BF16 -> BF16, F16 -> F16, rounded
//   to nearest even), then bf16 x bf16 -> f32 / f16 x f16 -> f32, accumulated by oneDNN in F32.
//   A weight type is available only when oneDNN can build that matmul on this CPU
//   (OneDnnSupportsMulMatType; BF16 needs AVX-512 in oneDNN 2.x, F16 needs AVX-512 FP16).
//
// Buffer types (the plan names them; the backend allocates both):
//   "ONEDNN": the device's weight buffer type (llama.cpp's AMX buffer type plays this role). Not
//     host memory to the planner (is_host() false: no other backend reads it, the file mapping is
//     never used for it). Upload (Buffer::WriteTensor) reorders a 2-D MUL_MAT weight of a type
//     oneDNN multiplies here into the blocked layout oneDNN's matmul chooses for it
//     (OneDnnWeightLayoutFor; layout kLayoutOneDnnBlocked), when that layout's size does not exceed
//     the plain tensor's (the plan sized the buffer from plain sizes); every other tensor is stored
//     as is (kLayoutPlain). MUL_MAT reads both.
//   any other name ("CPU"): 64-byte aligned host memory (is_host() true).
// CanAccess: every host buffer and this backend's ONEDNN buffers. Compute is synchronous.
// Threads: `n_threads` OpenMP threads per matmul / reorder (the oneDNN build here uses the OpenMP
// runtime; the count is set for the calling thread only).
#pragma once

#include <memory>
#include <string>

#include "backend.h"
#include "stowage/runtime/ggml_types.h"

namespace stowage::exec {

/// TensorView::layout of a weight the ONEDNN buffer type stored in oneDNN's blocked matmul layout
/// (OneDnnWeightLayoutFor(type, ne0, ne1).blocked). Distinct from the CPU backend's layouts
/// (cpu::kLayoutPlain = 0, cpu::kLayoutQ4_0x8 = 1); only this backend reads it.
inline constexpr int kLayoutOneDnnBlocked = 0x100;

/// The ONEDNN buffer type's name (the device's default buffer type in its manifest).
inline constexpr const char* kOneDnnBuft = "ONEDNN";

/// How the ONEDNN buffer type stores a 2-D weight [K = ne0, N = ne1] of `type`.
struct OneDnnWeightLayout {
  bool blocked = false;        ///< reordered into oneDNN's blocked layout (kLayoutOneDnnBlocked)
  uint64_t plain_bytes = 0;    ///< RowSize(type, K) * N
  uint64_t blocked_bytes = 0;  ///< size of oneDNN's preferred weight layout (0 when oneDNN has none)
  std::string format;          ///< oneDNN's preferred layout in words ("blocked: inner blocks 16a64b"),
                               ///< "plain" when it prefers ggml's layout, "" when no matmul exists
};

/// The layout oneDNN's matmul primitive prefers for weights [K, N] of `type` (F32, BF16, F16 where a
/// matmul exists here) with F32 results: the weights memory descriptor of a matmul created with
/// format_tag::any for the weights and M = 512 rows of activations (oneDNN 2.x picks its brgemm
/// kernel and the same weight layout for every fixed M; a runtime M would give the plain gemm
/// kernel). blocked = the layout differs from ggml's plain rows and takes at most plain_bytes.
/// Deterministic for a given oneDNN build and CPU; `blocked` is false for other types, K or N < 1.
OneDnnWeightLayout OneDnnWeightLayoutFor(GgmlType type, int64_t K, int64_t N);

/// A oneDNN ACCEL backend named `name` (the plan's device name, e.g. "ONEDNN"). Never null.
std::unique_ptr<Backend> CreateOneDnnBackend(const std::string& name, int n_threads);

/// True when this build's oneDNN can run MUL_MAT with src0 of `type` and F32 src1 on this CPU
/// (F32 always; BF16 / F16 when a matmul primitive for that type can be created). Probed by creating
/// a small primitive descriptor; never fails.
bool OneDnnSupportsMulMatType(GgmlType type);

}  // namespace stowage::exec
