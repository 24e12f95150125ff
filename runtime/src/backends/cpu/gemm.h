// Register-blocked GEMM path of MUL_MAT for prompt processing (many src1 columns). Internal.
//
// ggml's CPU MUL_MAT computes every dst element with one vec_dot (one src0 row x one src1 row);
// for a prompt that re-reads each weight row once per token and spends most of the time in
// horizontal reductions. The GEMM path instead packs a panel of kGemmPanelRows consecutive src0
// rows into a layout where one SIMD register holds the same k of 16 rows (row-interleaved), and a
// micro-kernel multiplies that panel with a chunk of src1 columns held in registers, so each
// packed weight load feeds several columns and each broadcast activation feeds 16 rows (with
// AVX-512 VNNI: `vpdpbusd zmm, zmm, m32bcst` — 64 int8 multiply-adds per instruction).
//
// Driver contract (matmul.cpp): for MUL_MAT with enough src1 columns (see kGemmMinCols) and a
// weight type that has GemmKernels at the effective ISA level,
//   1. every src1 row (K floats) is converted once per call with `from_float` into an activation
//      row of act_row_bytes(K) bytes (the family's own format, aligned to 64 bytes);
//   2. src0 is cut into panels of kGemmPanelRows rows (the last one may be short: nr < 16); a
//      thread packs a panel with `pack` into its own scratch (panel_bytes(K), 64-byte aligned) and
//      then runs `kernel` over column chunks of the converted src1;
//   3. `kernel` writes dst[c * dst_stride + r] for r < nr, c < nc.
// Numerics: activation quantization equals ggml's (the same quantized integers and the same scale
// values as the vec_dot path's QuantizeRowQ8_0Act / QuantizeRowQ8_1Act / QuantizeRowQ8_K, including
// their rule for blocks with a NaN/inf: d = NaN, qs = 0; or the same fp16/bf16 rounding for F16/BF16
// weights); integer sums are exact; only the float
// accumulation order may differ from the vec_dot path (tests bound the difference).
//
// Families (each in its own files, each with a scalar reference and SIMD levels):
//   gemm_q8*.cpp      Q8_0, Q4_0 (plain and kLayoutQ4_0x8), Q5_0, IQ4_NL, Q4_1, Q5_1
//   gemm_kquants*.cpp Q2_K, Q3_K, Q4_K (plain and kLayoutQ4_Kx8), Q5_K, Q6_K, IQ4_XS
//   gemm_float*.cpp   F32, F16, BF16
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops.h"

namespace stowage::cpu {

/// Rows per packed weight panel (one AVX-512 register of int32/f32 lanes).
inline constexpr int kGemmPanelRows = 16;
/// Fewest src1 columns M (= src1.ne[1], per src1 matrix; ne12 and ne13 do not count) for which the
/// driver uses the GEMM path; below it (token generation, including its GQA-broadcast attention
/// products) the vec_dot/gemv path runs.
inline constexpr int64_t kGemmMinCols = 8;

struct GemmKernels {
  /// F32 -> one activation row of K elements (K a multiple of the weight type's block size).
  void (*from_float)(const float* x, void* act, int64_t K);
  /// Bytes of one activation row (a multiple of 64, so consecutive rows stay 64-byte aligned).
  size_t (*act_row_bytes)(int64_t K);
  /// Bytes of one packed panel of kGemmPanelRows rows of K elements.
  size_t (*panel_bytes)(int64_t K);
  /// Packs nr (1..kGemmPanelRows) rows of src0 into `panel`. `w` points at the first row in the
  /// layout `layout` (kLayoutPlain: ggml rows `row_stride` bytes apart; kLayoutQ4_0x8 / kLayoutQ4_Kx8:
  /// the RepackQ4_0 / RepackQ4_K layout, `w` at the start of an 8-row group, row_stride = the plain
  /// RowSize(type, K)). Rows
  /// nr..15 of the panel are filled so that they compute finite values (they are not stored).
  void (*pack)(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
  /// dst[c * dst_stride + r] = dot(panel row r, activation row c) for r < nr, c < nc (any nc >= 1).
  /// `act` is the first activation row, act_stride bytes between rows; dst_stride in floats.
  void (*kernel)(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                 size_t dst_stride, int nr);
};

/// The GEMM kernels of one family for weights of `type` (and `layout`) at the best level <= isa;
/// nullptr when the family has none (the driver then uses vec_dot). Each family implements its own
/// lookup; GetGemmKernels asks them in turn.
/// With `batch_invariant` (ComputeContext::batch_invariant), only kernels whose results equal the
/// vec_dot/gemv path's bit for bit, column by column, are returned: the q8 family's (gemm_q8.cpp:
/// its 8-lane kernels at AVX-512 VNNI, kLayoutQ4_0x8 and the scalar level everywhere); none of the
/// kquants and float families (their GEMMs sum in another order than the vec_dots: those products
/// take the vec_dot path).
const GemmKernels* GetGemmKernelsQ8(GgmlType type, int layout, IsaLevel isa, bool batch_invariant = false);
const GemmKernels* GetGemmKernelsKQuants(GgmlType type, int layout, IsaLevel isa);
const GemmKernels* GetGemmKernelsFloat(GgmlType type, int layout, IsaLevel isa);

inline const GemmKernels* GetGemmKernels(GgmlType type, int layout, IsaLevel isa,
                                         bool batch_invariant = false) {
  if (const GemmKernels* k = GetGemmKernelsQ8(type, layout, isa, batch_invariant)) return k;
  if (batch_invariant) return nullptr;
  if (const GemmKernels* k = GetGemmKernelsKQuants(type, layout, isa)) return k;
  return GetGemmKernelsFloat(type, layout, isa);
}

}  // namespace stowage::cpu
