// Kernel dispatch of the CPU backend: per weight type, its vec_dot type, the vec_dot and the
// F32 -> vec_dot-type row conversion, for a given instruction-set level. Internal.
#pragma once

#include <cmath>
#include <string>

#include "ops.h"
#include "quants.h"

namespace stowage::cpu {

struct TypeKernels {
  GgmlType vec_dot_type;   ///< the type src1 is converted to (ggml's vec_dot_type)
  VecDotFn vec_dot;        ///< dot(weight row, converted src1 row); nullptr: unsupported type
  FromFloatFn from_float;  ///< F32 -> vec_dot_type (nullptr when vec_dot_type is F32)
};

/// Kernels for weights of `type` at the best available level <= `isa`; nullptr when MulMat does
/// not support `type`.
const TypeKernels* GetTypeKernels(GgmlType type, IsaLevel isa);

/// The 8-row gemv of a CPU_REPACK layout (kLayoutQ4_0x8: x Q8_0, kLayoutQ4_Kx8: x Q8_K, kLayoutQ8_0x8,
/// kLayoutMXFP4x8: x Q8_0; writes s[0..7]) at the best level <= `isa` (the AVX-512 ones need VNNI); nullptr
/// for kLayoutPlain or an unknown layout (repack.cpp).
VecDotFn GetRepackedGemv(int layout, IsaLevel isa);

/// ops.h MulMat, for a MUL_MAT (`expert` false) or for one expert's columns of a MUL_MAT_ID
/// (`expert` true: with ctx.llamacpp_numerics the products then follow llama.cpp's MUL_MAT_ID
/// orders, see matmul.cpp). Same errors as MulMat.
Status MulMatImpl(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst,
                  bool expert);

/// True when MulMatIdFewCols takes an expert of `as` ([K, N, n_expert]) with `m` columns: a
/// quantized type and 0 < m < kGemmMinCols, where MulMatImpl(..., expert = true) runs the tiled
/// vec_dot (token generation: every chosen expert has one column).
bool MulMatIdFewColsExpert(const TensorView& as, int64_t m);

/// MUL_MAT_ID's products of every expert e that MulMatIdFewColsExpert(as, rows[e].size()) takes:
/// dst[:, s, t] = as[:, :, e] x b[:, s % b.ne1, t] for each r = t * n_used + s in rows[e]
/// (GroupRowsByExpert's lists), with the kernels and bits of MulMatImpl(..., expert = true) on the
/// gathered columns, but each b row converted once (gate / up's input is shared by all n_used
/// experts of a token) and one thread team for all those experts' row tiles (a fork / join per
/// MUL_MAT_ID instead of two per expert). Other experts are left alone. `as`, `b`, `dst` as
/// MulMatId checks them. Uses ctx.work. Errors: MulMatImpl's for one expert's product.
Status MulMatIdFewCols(ComputeContext& ctx, const TensorView& as, const TensorView& b,
                       const std::vector<std::vector<int64_t>>& rows, int64_t n_used, TensorView& dst);

/// "type[ne0,ne1,ne2,ne3]" for error messages (tensor_view.h).
using exec::ShapeString;

/// min(ctx.max_isa, DetectIsa()).
IsaLevel EffectiveIsa(const ComputeContext& ctx);

/// Byte offsets within one column of the Q4_Kx8 layout (ops.h RepackQ4_K: 8 rows x one super-block).
namespace q4_kx8 {
inline constexpr size_t kColBytes = 8 * sizeof(BlockQ4_K);  ///< 1152
inline constexpr size_t kD = 0, kDmin = 16, kScLo = 32, kScHi = 96, kQs = 128;
}  // namespace q4_kx8
/// Q8_0x8 (ops.h RepackQ8_0): bytes per block column of a group, offset of the quant chunks.
namespace q8_0x8 {
inline constexpr size_t kBlockBytes = 8 * sizeof(BlockQ8_0);  ///< 272
inline constexpr size_t kQs = 16;
}  // namespace q8_0x8
/// The 6-bit scales sc[r][j] and mins mn[r][j] (row r, sub-block j) of one Q4_Kx8 column.
void Q4_Kx8Scales(const uint8_t* col, uint8_t sc[8][8], uint8_t mn[8][8]);
/// Row r (0..7) of one Q4_Kx8 column as the plain ggml block it was repacked from (exact inverse of
/// RepackQ4_K; the GEMM path's pack reads the repacked layout through it).
void Q4_Kx8ToBlock(const uint8_t* col, int r, BlockQ4_K* out);

/// Row converters F32 -> F16 / BF16 (n elements).
void FromFloatF16(const float* x, void* y, int64_t n);
void FromFloatBF16(const float* x, void* y, int64_t n);

// SIMD translation units (compiled with their own -m flags; call only when the CPU has them).
namespace avx2 {
void VecDotF32(int64_t n, float* s, const void* x, const void* y);
void VecDotF16(int64_t n, float* s, const void* x, const void* y);
void VecDotBF16(int64_t n, float* s, const void* x, const void* y);
void VecDotQ8_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ6_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_1Q8_1(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_1Q8_1(int64_t n, float* s, const void* x, const void* y);
void VecDotQ2_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ3_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotIQ4_NLQ8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotIQ4_XSQ8_K(int64_t n, float* s, const void* x, const void* y);
/// ggml_vec_dot_mxfp4_q8_0's AVX2 order (even / odd blocks in two 8-lane accumulators).
void VecDotMXFP4Q8_0(int64_t n, float* s, const void* x, const void* y);
void FromFloatF16(const float* x, void* y, int64_t n);
/// QuantizeRowQ8_0Act / QuantizeRowQ8_1Act (quants.h) of n floats (n % 32 == 0) into n / 32
/// BlockQ8_0 / BlockQ8_1, byte-identical to them (non-finite blocks included).
void QuantizeRowQ8_0Act(const float* x, void* y, int64_t n);
void QuantizeRowQ8_1Act(const float* x, void* y, int64_t n);
/// QuantizeRowQ8_K of K floats into the kquants GEMM activation layout (gemm_kquants_layout.h:
/// 320 bytes per 256 elements), bit-identical to it (gemm_kquants_avx2.cpp).
void FromFloatQ8_KAct(const float* x, void* act, int64_t K);
/// Q4_0x8 repacked group (8 rows, nb blocks) times one Q8_0 row: s[0..7].
void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// Q4_Kx8 repacked group (8 rows, n/256 columns) times one Q8_K row: s[0..7], bit-identical to
/// scalar::GemvQ4_Kx8Q8_K.
void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* x, const void* y);
/// Q8_0x8 repacked group (8 rows, n/32 blocks) times one Q8_0 row: s[r] bit-identical to
/// avx2::VecDotQ8_0Q8_0 of row r (ggml's AVX2 order: 8 lanes, one fma per block, Hsum at the end).
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// MXFP4x8 repacked group (8 rows, n/32 blocks) times one Q8_0 row: s[0..7], bit-identical to
/// scalar::GemvMXFP4x8Q8_0 (and so to scalar::VecDotMXFP4Q8_0 of each row).
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* x, const void* y);
}  // namespace avx2
namespace avx512 {
void VecDotF32(int64_t n, float* s, const void* x, const void* y);
void VecDotF16(int64_t n, float* s, const void* x, const void* y);
void VecDotQ8_0Q8_0(int64_t n, float* s, const void* x, const void* y);  // VNNI when present
void VecDotQ4_0Q8_0(int64_t n, float* s, const void* x, const void* y);  // VNNI when present
void VecDotQ4_KQ8_K(int64_t n, float* s, const void* x, const void* y);  // VNNI when present
void VecDotQ6_KQ8_K(int64_t n, float* s, const void* x, const void* y);  // VNNI when present
/// Q4_0x8 repacked group (8 rows, n/32 blocks) times one Q8_0 row: s[0..7], bit-identical to
/// avx2::/scalar::GemvQ4_0x8Q8_0. Needs AVX512-VNNI (call only at IsaLevel::kAvx512Vnni).
void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// Q4_Kx8 repacked group times one Q8_K row: s[0..7], bit-identical to scalar::GemvQ4_Kx8Q8_K.
/// Needs AVX512-VNNI (call only at IsaLevel::kAvx512Vnni).
void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* x, const void* y);
/// Q8_0x8 repacked group (8 rows, n/32 blocks) times one Q8_0 row: s[r] bit-identical to
/// avx512::VecDotQ8_0Q8_0 of row r. Needs AVX512-VNNI (call only at IsaLevel::kAvx512Vnni).
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// MXFP4x8 repacked group (8 rows, n/32 blocks) times one Q8_0 row: s[0..7], bit-identical to
/// scalar::/avx2::GemvMXFP4x8Q8_0. Needs AVX512-VNNI (call only at IsaLevel::kAvx512Vnni).
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// The same as avx2::FromFloatQ8_KAct with 512-bit registers (gemm_kquants_avx512.cpp).
void FromFloatQ8_KAct(const float* x, void* act, int64_t K);
/// QuantizeRowQ8_0Act of K floats as the q8 GEMM's 40-byte records { int8 qs[32]; float d (its
/// fp16 value); int32 -z * sum(qs) } (gemm_q8_avx512.cpp), bit-identical to it.
void GemmQ8FromFloat(const float* x, void* act, int64_t K, int z);
/// One SOFT_MAX row of n contiguous floats (ggml_compute_forward_soft_max_f32 with
/// ggml_vec_soft_max_f32's AVX-512 structure): w = x * scale + slope * mask (mask: n contiguous F16
/// or F32 values, or nullptr), y = exp(w - max(w)) / sum, the sum in double over 16-lane float
/// partial sums, operation for operation (ggml_v_expf's algorithm for 16 lanes, expf for the last n % 16
/// elements, w = fma(slope, mask, x * scale)), so rows are bit-identical to llama.cpp's AVX-512 CPU
/// backend. y may alias x. `sink` (ggml_soft_max_add_sinks; nullptr: none) joins the max and adds
/// expf(*sink - max) to the sum, as ggml-cpu 2026. Returns the sum.
double SoftMaxRowF32(const float* x, const void* mask, bool mask_f16, float scale, float slope, float* y,
                     int64_t n, const float* sink = nullptr);
}  // namespace avx512

/// GemvQ4_Kx8Q8_KSb (each level): the same dots with the float part per 64-element sub-block pair
/// (acc = fma(pair's int sum, d * d_y, acc), accm likewise with its mins) instead of per super-block:
/// the order of llama.cpp's ggml_gemm_q4_K_8x8_q8_K (AVX2 and AVX-512), which it runs for the
/// prompt's src1 rows in groups of 4 (its gemv, per super-block, for the rest and for one token).
namespace avx512 {
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* x, const void* y);
}  // namespace avx512
namespace avx2 {
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* x, const void* y);
}  // namespace avx2
namespace scalar {
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* x, const void* y);
/// Reference for the repacked layout: s[r] = dot(row r of the 8-row group, y), r = 0..7.
void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// Reference for the Q4_Kx8 layout: s[r] = dot(row r of the 8-row group, y), r = 0..7, from the plain
/// vec_dot's exact integer sums (float part: see repack.cpp).
void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* x, const void* y);
/// Reference for the Q8_0x8 layout: s[r] bit-identical to scalar::VecDotQ8_0Q8_0 of row r.
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* x, const void* y);
/// Reference for the MXFP4x8 layout: s[r] bit-identical to scalar::VecDotMXFP4Q8_0 of row r.
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* x, const void* y);
}  // namespace scalar

// ---- SILU / SWIGLU rows ---------------------------------------------------------------------------
// One contiguous F32 row: silu(x) = x / (1 + exp(-x)) (ggml_silu_f32), and GLU's y = silu(a) * b
// (ggml_swiglu_split: silu on the gate a, times the up projection b). n >= 0 elements; y may alias
// x (resp. a or b) exactly (in-place); partial overlap is not supported. Special values at every
// level: NaN -> NaN, +inf -> +inf, -inf -> -0 (ggml: NaN), x >= 88 -> x, x < -88.72 -> -0 (the
// scalar formula underflows there; the SIMD levels give -0 or a value below 3e-37 in magnitude),
// never an overflow to inf/NaN for finite x. The SIMD levels compute ggml_vec_silu_f32 /
// ggml_vec_swiglu_f32 of llama.cpp's build for that level operation for operation (ggml_v_expf's
// algorithm on full vectors, expf on the rest), so they stay within 2e-6 relative (or 1e-30
// absolute) of the scalar reference (test/unit/cpu/cpu_simd_test.cpp measures it) and equal
// llama.cpp's values bit for bit.

/// Row kernel: y[i] = silu(x[i]), i < n.
using SiluRowFn = void (*)(int64_t n, const float* x, float* y);
/// Row kernel: y[i] = silu(a[i]) * b[i], i < n.
using SwiGluRowFn = void (*)(int64_t n, const float* a, const float* b, float* y);

namespace scalar {
/// Reference: x / (1.0f + expf(-x)) per element, exactly ops_elementwise.cpp's SiluF32, except x = -inf gives
/// -0 (the formula gives -inf / inf = NaN there).
void SiluRowF32(int64_t n, const float* x, float* y);
/// Reference: SiluRowF32's value of a[i], times b[i] (one float multiply).
void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y);
}  // namespace scalar
namespace avx2 {
/// 8 lanes as ggml_v_silu (AVX2 + FMA: ggml_v_expf's algorithm, a true divide), the last n % 8
/// elements as ggml_silu_f32: bit-identical to llama.cpp's AVX2 CPU backend for finite x
/// (simd_avx2.cpp).
void SiluRowF32(int64_t n, const float* x, float* y);
void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y);
/// avx512::SoftMaxRowF32 with ggml's AVX2 structure (8-lane groups, horizontal float sums added
/// to a double), bit-identical to llama.cpp's AVX2 CPU backend.
double SoftMaxRowF32(const float* x, const void* mask, bool mask_f16, float scale, float slope, float* y,
                     int64_t n, const float* sink = nullptr);
}  // namespace avx2
namespace avx512 {
/// 16 lanes as ggml_v_silu (AVX-512), the last n % 16 elements as ggml_silu_f32: bit-identical to
/// llama.cpp's AVX-512 CPU backend for finite x (simd_avx512.cpp).
void SiluRowF32(int64_t n, const float* x, float* y);
void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y);
}  // namespace avx512

// ---- IQ4_XS in the order of llama.cpp 2026's batched "iqp" kernels ------------------------------
/// dot(IQ4_XS row, Q8_K row) with one float accumulator: sumf = fma(float(super-block int sum),
/// d_x * d_y, sumf) per super-block — the order of ggml-cpu/iqp.cpp, which llama.cpp 2026 runs for
/// IQ4_XS weights (2D) with >= 8 src1 columns (ComputeContext::llamacpp_numerics follows it).
namespace scalar {
void VecDotIQ4_XSQ8_KIqp(int64_t n, float* s, const void* x, const void* y);
}  // namespace scalar
namespace avx2 {
void VecDotIQ4_XSQ8_KIqp(int64_t n, float* s, const void* x, const void* y);
}  // namespace avx2

// ---- F32/F16 products in llamafile's tinyBLAS order ----------------------------------------------
/// d[c * ldd + r] = dot(weight row r, activation row c) for r < nr, c < nc, in the order of
/// llamafile's tinyBLAS (ggml-cpu/llamafile/sgemm.cpp), which llama.cpp's CPU backend uses for F32
/// and F16 weights with K % KN == 0 and >= 2 columns: one KN-lane float accumulator per output
/// (KN = 16 at AVX-512, 8 at AVX2), acc = fma(w[k..k+KN), a[k..k+KN), acc) for k = 0, KN, ...,
/// then tinyBLAS's hsum (AVX-512: _mm512_reduce_add_ps; AVX2: hsum_float_8's tree). Weights: F16
/// (`f16`) or F32 rows ldw bytes apart; activations: F32 rows lda floats apart (for F16 weights
/// already rounded to F16, as ggml converts src1 to its vec_dot type). K % KN == 0.
namespace avx512 {
void MatMulLlamafile(int64_t K, bool f16, const void* w, size_t ldw, int64_t nr, const float* a, size_t lda,
                     int64_t nc, float* d, size_t ldd);
}  // namespace avx512
namespace avx2 {
void MatMulLlamafile(int64_t K, bool f16, const void* w, size_t ldw, int64_t nr, const float* a, size_t lda,
                     int64_t nc, float* d, size_t ldd);
}  // namespace avx2

// ---- ROPE rotation ----------------------------------------------------------------------------------
/// Rotates the first n_dims floats of a contiguous row by the (cos, sin) pairs of `cache`
/// (cache[i0], cache[i0 + 1] for pair i0 / 2): pairs (x[i0], x[i0 + 1]) (normal mode) or
/// (x[i0 / 2], x[i0 / 2 + n_dims / 2]) (neox), y0 = fma(x0, cos, -(x1 * sin)),
/// y1 = fma(x0, sin, x1 * cos) — ggml's rotate_pairs as GCC contracts it. y may alias x. Elements
/// from n_dims on are not touched.
using RopeRotateFn = void (*)(int64_t n_dims, bool neox, const float* cache, const float* x, float* y);
namespace scalar {
void RopeRotate(int64_t n_dims, bool neox, const float* cache, const float* x, float* y);
}  // namespace scalar
namespace avx2 {
void RopeRotate(int64_t n_dims, bool neox, const float* cache, const float* x, float* y);
}  // namespace avx2

// ---- RMS_NORM sums of squares, strided F32 -> F16 stores ---------------------------------------

/// Row kernel of RMS_NORM: part[k] += double(x[i] * x[i]) for every i < n8 with i % 8 == k, in
/// increasing i (the square in float, as ggml's `(ggml_float)(x[i00] * x[i00])`, the sum in
/// double). n8 is a multiple of 8 (>= 0). Every level gives the scalar reference's bits: the eight
/// partial sums are independent double lanes added in the same order.
using SumSquares8Fn = void (*)(int64_t n8, const float* x, double part[8]);

/// Strided F32 -> F16 conversion: *(fp16_t*)(dst + i * dst_stride) = FloatToHalf(*(const float*)
/// (src + i * src_stride)) for i < n (IEEE round to nearest even, F16C's vcvtps2ph). The transposed
/// V-cache store of token generation (CPY of n_embd_v_gqa one-element rows, n_ctx * 2 bytes apart).
/// Every level gives the same bits.
using CvtF32F16StridedFn = void (*)(int64_t n, const char* src, size_t src_stride, char* dst,
                                    size_t dst_stride);

/// y[i] = f16(f32(x[i]) * v + f32(y[i])) for i < n, one fused multiply-add and one
/// round-to-nearest-even per element (ggml_vec_mad_f16; flash attention's F16 accumulator).
using MadF16Fn = void (*)(int64_t n, fp16_t* y, const fp16_t* x, float v);
/// y[i] = f16(f32(y[i]) * v) (ggml_vec_scale_f16).
using ScaleF16Fn = void (*)(int64_t n, fp16_t* y, float v);
/// Flash attention's online softmax and F16 V sum for `nh` query rows sharing the V rows (ggml_
/// compute_forward_flash_attn_ext_f16 with an F16 V cache, from its scores on), for each row h:
/// acc = 0 (D F16 values), M = -inf, S = 0; for c < n in order, s = scores[h * lds + c]; when
/// s > M: ms = exp(M - s), M = s, acc = f16(acc * ms); else vs = exp(s - M); then acc = f16(v_c *
/// vs + acc) (one FMA, one rounding per element) and S = fma(S, ms, vs). v_c is the row of D F16
/// values at v + cells[c] * v_stride bytes. Writes out[h * ldo + d] = (f32(acc[d]) * ms) * (1 / S)
/// with ms = FlashSinkStep(sinks[h], M, S) when `sinks` (nh values) is given, else ms = 1 (n = 0
/// without sinks: NaN, as ggml). `acc` is scratch: nh rows of D F16 values, ldacc apart.
using FlashF16RowsFn = void (*)(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds,
                                const char* v, const int32_t* cells, size_t v_stride, fp16_t* acc,
                                size_t ldacc, float* out, size_t ldo, const float* sinks);

/// The attention sink of a row after its last key (ggml-cpu 2026 ggml_compute_forward_flash_attn_ext_f16,
/// ggml_flash_attn_ext_add_sinks): the sink logit joins the online softmax without a value. Returns
/// the factor the F32 accumulator is multiplied by before the division (ms = expf(m - sink) when the
/// sink is a new maximum, else 1) and updates sum (fma(sum, ms, 1), resp. sum + expf(sink - m)).
inline float FlashSinkStep(float sink, float m, float& sum) {
  if (sink > m) {
    const float ms = std::exp(m - sink);
    sum = std::fma(sum, ms, 1.0f);
    return ms;
  }
  sum = std::fma(sum, 1.0f, std::exp(sink - m));
  return 1.0f;
}

/// FlashF16Rows with the accumulator in memory, through `mad` and `scale` (the kernels of one level):
/// the scalar and AVX2 levels, and AVX-512 above D = 128. Compiled at the baseline level.
void FlashF16RowsWith(MadF16Fn mad, ScaleF16Fn scale, int64_t D, int64_t n, int64_t nh, const float* scores,
                      size_t lds, const char* v, const int32_t* cells, size_t v_stride, fp16_t* acc,
                      size_t ldacc, float* out, size_t ldo, const float* sinks);

namespace scalar {
void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v);
void ScaleF16(int64_t n, fp16_t* y, float v);
void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks);
void SumSquares8(int64_t n8, const float* x, double part[8]);
void CvtF32F16Strided(int64_t n, const char* src, size_t src_stride, char* dst, size_t dst_stride);
}  // namespace scalar
namespace avx2 {
/// 8 lanes per step with F16C conversions and FMA; the tail element by element. Needs AVX2+FMA+F16C.
void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v);
void ScaleF16(int64_t n, fp16_t* y, float v);
/// One row at a time: MadF16 / ScaleF16 per cell, the accumulator in memory.
void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks);
/// Two 4-lane double accumulators (lanes 0-3 and 4-7). Needs AVX2.
void SumSquares8(int64_t n8, const float* x, double part[8]);
/// One scalar vcvtps2ph per element. Needs F16C.
void CvtF32F16Strided(int64_t n, const char* src, size_t src_stride, char* dst, size_t dst_stride);
}  // namespace avx2
namespace avx512 {
/// One 8-lane double accumulator (vcvtps2pd of 8 float squares). Needs AVX-512 F.
void SumSquares8(int64_t n8, const float* x, double part[8]);
/// 16 lanes per step, the tail in one masked step. Needs AVX-512 F/BW/VL.
void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v);
void ScaleF16(int64_t n, fp16_t* y, float v);
/// D <= 128: the accumulators stay in registers (widened F16 values, rounded through vcvtps2ph
/// after every step), 4 rows at a time up to D = 64, 2 up to 128, each V row loaded once for them;
/// larger D: MadF16 / ScaleF16 per cell. The next V rows are prefetched.
void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks);
}  // namespace avx512

// ---- Level dispatch of the row kernels above ----------------------------------------------------

/// The row kernels one instruction-set level runs (row_kernels.cpp holds the table: one row per
/// IsaLevel). A kernel without code of its own at a level is the one of the level below: RopeRotate
/// and CvtF32F16Strided are AVX2 code at the AVX-512 levels, and VNNI adds no row kernel.
/// Bits per level: SumSquares8, CvtF32F16Strided, MadF16, ScaleF16 and FlashF16Rows give the scalar
/// reference's bits at every level; RopeRotate too (hardware FMA at AVX2 and above, std::fma
/// through libm at the scalar level); SiluRow / SwiGluRow are each level's llama.cpp bits (within
/// 2e-6 relative of the scalar reference, see the SILU section).
struct RowKernels {
  SiluRowFn silu_row;
  SwiGluRowFn swiglu_row;
  RopeRotateFn rope_rotate;
  SumSquares8Fn sum_squares8;
  CvtF32F16StridedFn cvt_f32_f16_strided;
  MadF16Fn mad_f16;
  ScaleF16Fn scale_f16;
  FlashF16RowsFn flash_f16_rows;
};
/// The row kernels of level min(isa, DetectIsa()) (every entry non-null; never a level this CPU
/// lacks). Thread-safe: an immutable table.
const RowKernels& GetRowKernels(IsaLevel isa);

/// MUL_MAT_GLU's GLU over `n` adjacent elements of one row: y[i] from gate[i] and up[i] with the
/// bits of the op(s) `glu` names over a dense row (SwiGlu, GeGlu, Silu then Mul, Gelu then Mul;
/// ctx's isa cap and llamacpp_numerics as they use them). Bit-identical to them on a piece of a row
/// that starts at a multiple of 16 (the row kernels' SIMD chunks: 16 at AVX-512, 8 at AVX2). y may
/// be gate.
void GluRow(const ComputeContext& ctx, MulMatGluKind glu, int64_t n, const float* gate, const float* up,
            float* y);

// ---- Attention-shaped F16 gemv (token generation: KQ and KQV of an F16 KV cache) ----------------
// s[h * lds + i] = sum_k x_i[k] * y_h[k] for rows i < nrows and heads h < nh: x_i = the K F16 values
// at (const char*)x + i * ldx (one K-cache row for KQ, one V-cache row of a head for KQV), y_h = the
// K floats at y + h * ldy (the query / softmax row of q head h, already rounded to F16 -- ggml's
// vec_dot_type for F16 weights is F16 -- and held as F32), s: F32 with lds floats between heads.
// The nh heads share the rows (GQA: the q heads of one kv head): a row is read from memory once
// per call for all of them (converted once per group of up to 4 heads). Products and sums in F32:
// FMA accumulation over 16-lane (AVX-512) / 8-lane (AVX2) chunks, the K tail zero-padded, then one
// transpose/add tree per 16 / 8 dots; the result differs from VecDotF16's (ggml_vec_dot_f16: 4
// accumulators, leftovers in double) by summation order only. Any K >= 0 and nrows >= 0; x rows
// need no alignment. Call only at a level the CPU has.
using GemvF16HeadsFn = void (*)(int64_t K, int64_t nrows, const void* x, size_t ldx, int64_t nh,
                                const float* y, size_t ldy, float* s, size_t lds);
namespace avx2 {
/// AVX2 + FMA + F16C: 8 dots (rows x heads = 2x4, 4x2 or 8x1) per pass.
void GemvF16Heads(int64_t K, int64_t nrows, const void* x, size_t ldx, int64_t nh, const float* y, size_t ldy,
                  float* s, size_t lds);
/// y[i] = x[i] rounded to F16 (round to nearest even, as FromFloatF16) and widened back, i < n.
void RoundRowF16(const float* x, float* y, int64_t n);
}  // namespace avx2
namespace avx512 {
/// AVX-512 F/BW/VL: 16 dots (rows x heads = 4x4, 8x2 or 16x1) per pass, masked K tail.
void GemvF16Heads(int64_t K, int64_t nrows, const void* x, size_t ldx, int64_t nh, const float* y, size_t ldy,
                  float* s, size_t lds);
}  // namespace avx512

}  // namespace stowage::cpu
