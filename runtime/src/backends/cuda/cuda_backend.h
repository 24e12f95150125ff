// The GPU backend: CUDA kernels (kernels.cu) and cuBLAS on one device, like ggml-cuda.
//
// Buffer types (ggml-cuda's names):
//   CUDA<i>        device memory of device i (cudaMalloc); not host-visible; Write/Read copy on the
//                  backend's stream and wait.
//   CUDA_Host      pinned host memory (cudaMallocHost): is_host, read by the CPU backend; the GPU
//                  backend does not compute on it (ggml-cuda's supports_buft), the plan copies.
//   CUDA<i>_Split  a row-split weight buffer (-sm row): weights are written into pinned host staging;
//                  at their first MUL_MAT each 2-D weight's rows are distributed over the devices by
//                  the tensor split (RowSplit) and each device multiplies its rows (split_views.h):
//                  the peers first (src1 copied with cudaMemcpyPeerAsync after an event of the main
//                  stream, results gathered into dst's columns with cudaMemcpy3DPeerAsync), then the
//                  main device's rows, then the main stream waits for every peer's event.
// Ops (everything that the llama-family graphs need; each checked like the CPU kernels, other
// combinations return kUnimplemented): GET_ROWS (rows of F32/F16/BF16/Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q2_K/
// Q3_K/Q4_K/Q5_K/Q6_K/IQ4_NL/IQ4_XS/MXFP4, the CPU backend's weight set; I32 ids), RMS_NORM, NORM, ADD, MUL
// (F32 or F16 src1, ggml broadcasting), SCALE, SILU, GELU, TANH, SWIGLU, GEGLU (split and fused), ROPE (modes
// 0 and 2, freq factors, YaRN), SOFT_MAX (F16/F32 mask, ALiBi, sinks), FLASH_ATTN_EXT (F32/F16/BF16/Q8_0/Q4_0
// K and V, F16 mask, ALiBi, logit soft-capping, sinks; one warp per query row), SWIGLU_OAI and ADD_ID
// (gpt-oss), CPY/CONT/DUP between F32, F16, BF16 (any strides) and into Q8_0 / Q4_0 (quantized KV cache,
// ggml's reference rounding), MUL_MAT: F32 weights by cuBLAS SGEMM-class GemmEx, F16/BF16 weights by GemmEx
// with src1 converted to the weight type, quantized weights (the GET_ROWS types) by a warp-per-row mat-vec
// kernel for ne11 <= 8 and by dequantization to F16 + GemmEx above (ggml-cuda's dequantize + cuBLAS path).
// Accumulation is F32 throughout. Streams: one per backend (and one per peer device for split weights);
// Compute enqueues, Synchronize waits. Split-input copies are asynchronous (Backend::WriteAsync / ReadAsync:
// cudaMemcpyAsync on the stream, for CUDA<i> buffers of this device) and ordered with events (RecordEvent: a
// cudaEvent_t recorded on the stream; WaitEvent: cudaStreamWaitEvent, also for another device's event;
// Event::HostWait: cudaEventSynchronize). Errors name the CUDA call and cudaGetErrorString. An out-of-range
// GET_ROWS index cannot be seen before the kernel runs (the ids are on the device): its row becomes NaN and
// the next Synchronize returns kOutOfRange naming the node and the index. The kernels' arithmetic is in
// cuda_math.h, tested on the CPU by cuda_math_test; see README.md for what only a GPU run verifies.
#pragma once

#include <memory>
#include <vector>

#include "backend.h"
#include "stowage/runtime/row_split.h"  // RowSplit, RowSplitStarts, RowRounding

namespace stowage::exec {

/// Number of CUDA devices; 0 when cudaGetDeviceCount fails (no driver, no GPU).
int CudaDeviceCount();

/// A backend for CUDA device `device` (named "CUDA<device>"), or nullptr when that device does not
/// exist or cannot be initialized (stream / cuBLAS handle creation failed).
std::unique_ptr<Backend> CreateCudaBackend(int device);

/// True when the CUDA backend runs MUL_MAT with src0 (weights) of `type`, F32 src1 and dst, and
/// GET_ROWS from rows of `type` (the same dequantizers): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
/// Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4. Needs no device.
bool CudaSupportsWeightType(GgmlType type);
/// True when the CUDA backend's CPY/CONT/DUP copies `src` into `dst`: F32/F16/BF16 into F32, F16,
/// BF16, Q8_0 or Q4_0. Needs no device.
bool CudaSupportsCpy(GgmlType src, GgmlType dst);

}  // namespace stowage::exec
