// CUDA kernels of the GPU backend (kernels.cu), called by cuda_backend.cpp. Plain C++ header: no
// CUDA syntax, so the host code compiles with the C++ compiler.
//
// Every launcher enqueues its kernel on `stream` and returns cudaGetLastError() (launch errors
// only; execution errors surface at the next synchronization), or cudaErrorInvalidConfiguration
// without launching when the work exceeds CUDA's grid limits (2^31 - 1 blocks in x). Tensors are
// described by Tv (cuda_math.h) in ggml order (ne[0] innermost, nb[] byte strides); `data` is
// device memory (or mapped pinned host memory) of the current device. Semantics match the CPU kernels of
// runtime/src/backends/cpu/ops.h (same op names, same broadcasting and parameter rules); the launchers do not
// validate shapes: cuda_backend.cpp checks them first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda_math.h"  // Tv, Binary, Unary, Glu, RopeArgs and the per-element arithmetic

namespace stowage::cuda {

/// True when the kernels can dequantize `type` (GET_ROWS source, MUL_MAT weight): F32, F16, BF16,
/// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 (ggml's block layouts,
/// ggml-common.h; the CPU backend's MUL_MAT weight set).
bool KernelsCanDequantize(int type);
/// True for the block-quantized types of KernelsCanDequantize (32-element chunks, see MulMatVec).
bool IsQuantized(int type);

/// GET_ROWS: dst[:, i10, i11, i12] = dequant(src0[:, idx[i10, i11, i12], i11 % ne02, i12 % ne03]);
/// an index outside [0, ne01) yields a row of NaN (GetRowsElement), never a read outside src0, and
/// when `error` (device memory, 3 int32, zero when clear) is not null the first such index is
/// recorded there: error[0] = 1, error[1] = the index, error[2] = launch_id.
cudaError_t GetRows(const Tv& src0, const Tv& idx, const Tv& dst, int32_t* error, int32_t launch_id,
                    cudaStream_t stream);
/// ADD / MUL / DIV with ggml broadcasting of src1 (F32 or F16); src0, dst F32 of equal shape.
cudaError_t BinaryOp(Binary op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream);
/// SCALE (x * p0 + p1), SILU, GELU (tanh approximation), TANH, SIGMOID, CLAMP (to [p0, p1]), FILL
/// (p0). F32.
cudaError_t UnaryOp(Unary op, const Tv& a, const Tv& dst, float p0, float p1, cudaStream_t stream);
/// SWIGLU / GEGLU: split form (b.data != nullptr) or fused form (a holds [gate | value] per row).
cudaError_t GluOp(Glu op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream);
/// SWIGLU_OAI (cuda_math.h SwiGluOaiElement): a, b, dst F32 of equal shape.
cudaError_t SwiGluOai(const Tv& a, const Tv& b, const Tv& dst, float alpha, float limit, cudaStream_t stream);
/// ADD_ID (cuda_math.h AddIdElement): a, dst F32 [ne0, n_used, n_tokens], b F32 [ne0, n_expert],
/// ids I32 [n_used, n_tokens] on the device.
cudaError_t AddId(const Tv& a, const Tv& b, const Tv& ids, const Tv& dst, cudaStream_t stream);
/// CONCAT along `dim` (0..3; cuda_math.h ConcatElement): a, b, dst F32, any strides.
cudaError_t Concat(const Tv& a, const Tv& b, const Tv& dst, int dim, cudaStream_t stream);
/// SET_ROWS (cuda_math.h SetRowsElement): src F32 rows into dst (F32, F16 or BF16) at I32 or I64
/// (`idx_i64`) row indices on the device; an index outside dst's rows writes nothing.
cudaError_t SetRows(const Tv& src, const Tv& idx, bool idx_i64, const Tv& dst, cudaStream_t stream);
/// REPEAT (cuda_math.h RepeatElement): dst F32 tiled from a F32 (each dst dimension a multiple of a's).
cudaError_t Repeat(const Tv& a, const Tv& dst, cudaStream_t stream);
/// SUM_ROWS (cuda_math.h SumRowsThread): dst F32 [1, ne1, ne2, ne3] of a F32; one thread per row.
cudaError_t SumRows(const Tv& a, const Tv& dst, cudaStream_t stream);
/// ARGSORT (cuda_math.h Argsort*): dst I32 of src F32's shape gets each row's indices by value,
/// descending when `desc`, ties by index (cpu::ArgSort's stable order). One thread block per row, a
/// bitonic network in shared memory; rows of at most kArgsortMaxCols (else cudaErrorInvalidValue).
cudaError_t ArgSort(const Tv& src, const Tv& dst, bool desc, cudaStream_t stream);
/// RMS_NORM (rms = true) or NORM (two passes: mean, then centered squares) over ne0. F32. One
/// thread block per row, rows on grid.x.
cudaError_t NormOp(bool rms, const Tv& a, const Tv& dst, float eps, cudaStream_t stream);
/// RMS_NORM_MUL (Stowage's fused RMS_NORM + MUL): NormOp's RMS_NORM of a, each element times w's
/// (F32 or F16, broadcast as MUL's src1: cuda_math.h RmsNormMulElement). F32 a and dst of equal
/// shape; dst may be a. One thread block per row.
cudaError_t RmsNormMul(const Tv& a, const Tv& w, const Tv& dst, float eps, cudaStream_t stream);

/// ROPE: pos I32 [>= ne2] on the device; freq_factors F32 [>= n_dims/2] or nullptr.
cudaError_t Rope(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& dst,
                 const RopeArgs& a, cudaStream_t stream);
/// ROPE_SET_ROWS (Stowage's fused ROPE + SET_ROWS, llama.cpp 2026's K store): ROPE of src F32
/// [head_dim, n_head, n_tokens] (pos, freq_factors and `a` as Rope), each rotated element written
/// where SET_ROWS of the rotated rows [head_dim * n_head, n_tokens] at idx (I32 or I64, `idx_i64`,
/// on the device) writes it into dst (F32, F16 or BF16: cuda_math.h RopePutRows); nothing of src
/// is written out. An index outside dst's rows writes nothing (as SetRows).
cudaError_t RopeSetRows(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& idx,
                        bool idx_i64, const Tv& dst, const RopeArgs& a, cudaStream_t stream);
/// ROPE_CPY (Stowage's fused ROPE + CPY, Feb 2025's K store): ROPE of src F32 (as Rope), element l
/// of the result (ggml order) written to element l of dst (F32, F16 or BF16, any strides, as many
/// elements: cuda_math.h RopePutCopy).
cudaError_t RopeCpy(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& dst,
                    const RopeArgs& a, cudaStream_t stream);
/// SOFT_MAX_EXT: mask.data == nullptr for none; mask F16 or F32 broadcast over dims 2 and 3;
/// sinks (ggml_soft_max_add_sinks) F32 [ne2] on the device or nullptr.
cudaError_t SoftMax(const Tv& src, const Tv& mask, const float* sinks, const Tv& dst, float scale,
                    float max_bias, cudaStream_t stream);
/// FLASH_ATTN_EXT (cuda_math.h FlashAttn*): q F32 [D, n_tokens, n_head, ne3] with contiguous rows,
/// k [D, n_kv, n_head_kv, ne3k] and v [Dv, n_kv, ...] of a FaCacheType type (heads and ne3 divide
/// q's; Dv may differ from D: deepseek2's MLA), mask F16 [>= n_kv, >= n_tokens] or mask.data ==
/// nullptr, dst F32 [Dv, n_head, n_tokens, ne3]; a.sinks F32 [n_head] (ggml_flash_attn_ext_add_sinks)
/// or nullptr; Dv <= kFaMaxHeadDim. One warp per query row, 4 warps per block.
cudaError_t FlashAttn(const Tv& q, const Tv& k, const Tv& v, const Tv& mask, const Tv& dst,
                      const FlashAttnArgs& a, cudaStream_t stream);
/// CPY / CONT / DUP: element l (ggml order) of src to element l of dst; F32, F16, BF16 on both sides,
/// or F32/F16/BF16 src into Q8_0 / Q4_0 dst (rows of whole blocks; ggml's reference quantizers, as
/// the CPU backend's QuantizeRow: quantized KV caches).
cudaError_t Cpy(const Tv& src, const Tv& dst, cudaStream_t stream);

/// Quantized (or F16/BF16/F32) mat-vec: dst[n, m, i12, i13] = dot(w row (n, i12 / r2, i13 / r3),
/// x row (m, i12, i13)) with F32 activations (x.nb[0] == 4) and F32 accumulation. One warp per
/// weight row computes up to 8 columns m at once; grid.y covers the columns, grid.z the batch, in
/// several launches when either exceeds 65535 (ForEachMulMatVecLaunch).
cudaError_t MulMatVec(const Tv& w, const Tv& x, const Tv& dst, cudaStream_t stream);
/// MUL_MAT_GLU's mat-vec (Stowage's fused FFN-in, token generation): dst[n, m, i12, i13] =
/// GluValue(op, MulMatVec's dot of gate row n, MulMatVec's dot of up row n) with x row (m, i12,
/// i13); gate and up of one quantized type, shape and strides (MulMatVec's w), x and dst as
/// MulMatVec's. The same floats as MulMatVec into two products, then GluOp, in one launch per grid
/// piece (ForEachMulMatVecLaunch).
cudaError_t MulMatVecGlu(Glu op, const Tv& gate, const Tv& up, const Tv& x, const Tv& dst,
                         cudaStream_t stream);
/// MUL_MAT_ID for few tokens (cuda_math.h MulMatIdVecViews): dst [N, n_used, n_tokens] = for each
/// slot s and token t the mat-vec of expert ids[s, t] (ids I32 on the device) of as [K, N, n_expert]
/// (any kernels' type, rows contiguous) with b[:, s % ne11, t] (b.nb[0] == 4). One warp per weight
/// row as MulMatVec; grid.y the slots, grid.z the tokens (several launches beyond 65535). A column
/// whose id is outside the experts is NaN.
cudaError_t MulMatVecId(const Tv& as, const Tv& b, const Tv& ids, const Tv& dst, cudaStream_t stream);
/// MUL_MAT_ID's batched path: gathers the src1 columns of `pairs` (device memory, n = xg.ne[1]
/// entries t * n_used + s) into xg F32 [K, n] (MoeGatherElement), and scatters out F32 [N, n] into
/// dst (MoeScatterElement).
cudaError_t MoeGather(const Tv& b, const int32_t* pairs, int64_t n_used, const Tv& xg, cudaStream_t stream);
cudaError_t MoeScatter(const Tv& out, const int32_t* pairs, int64_t n_used, const Tv& dst,
                       cudaStream_t stream);
/// Dequantizes/converts `nrows` rows of `ne0` elements (row stride `nb1` bytes) of `type` into a
/// contiguous F16 matrix at `dst` (ne0 * nrows halves), for cuBLAS.
cudaError_t ToF16(int type, const void* src, int64_t ne0, int64_t nrows, int64_t nb1, void* dst,
                  cudaStream_t stream);

}  // namespace stowage::cuda
