// CPU backend kernels: the ggml ops the supported architectures need, in ggml's numeric scheme.
//
// Contract (internal to the runtime; the executor calls these):
// - Tensors are TensorView: ggml layout, ne[0] innermost, nb[i] byte strides (nb[0] = type size
//   for plain types, block size for quantized rows), unused dims are 1.
// - Every op computes `dst` from its sources; dst is preallocated by the caller with the shape
//   ggml's constructor gives. Ops use up to `ctx.n_threads` threads (OpenMP) and the caller's
//   scratch buffer `ctx.work` (grown as needed) — no global state.
// - Numerics follow ggml's CPU backend: MUL_MAT converts/quantizes src1 (activations) to the
//   weight type's vec_dot type (F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/
//   IQ4_NL -> Q8_0 (Q4_1/Q5_1 -> Q8_1), K-quants and IQ4_XS -> Q8_K) and accumulates like ggml's
//   vec_dot, so logits agree with llama.cpp. FP16<->FP32 conversions are IEEE round-to-nearest.
// - Errors (unsupported type combination) are reported with a Status; no assert, no abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/status.h"

namespace stowage::cpu {

/// Weight layouts a TensorView may carry (TensorView::layout).
enum : int {
  kLayoutPlain = 0,   ///< ggml's layout: rows of blocks as in the GGUF file
  /// CPU_REPACK Q4_0 (see RepackQ4_0): groups of 8 rows interleaved block by block; only MulMat
  /// (as src0) reads it. nb[] keep describing the plain layout's strides (row = RowSize(Q4_0, ne0)),
  /// and the repacked tensor has exactly the plain tensor's size.
  kLayoutQ4_0x8 = 1,
};

struct TensorView {
  void* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  size_t nb[4] = {0, 0, 0, 0};
  int layout = kLayoutPlain;  ///< kLayoutPlain or kLayoutQ4_0x8 (weights repacked by RepackQ4_0)

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  bool is_contiguous() const;
};

/// Fills nb[] for a contiguous tensor of `type` and shape ne[].
void SetContiguousStrides(TensorView& t);

/// Instruction-set levels of the kernels, chosen at run time from CPUID.
enum class IsaLevel : int {
  kScalar = 0,  ///< baseline x86-64 (or any other CPU): the reference code
  kAvx2 = 1,    ///< AVX2 + FMA + F16C
  kAvx512 = 2,  ///< AVX-512 F/BW/VL (+ VNNI when the CPU has it)
};

/// The best level this CPU supports (CPUID + XGETBV; cached after the first call).
IsaLevel DetectIsa();
/// True when the CPU has AVX-512 VNNI (vpdpbusd); the AVX-512 integer dots use it then.
bool CpuHasAvx512Vnni();

/// Per-call execution context: thread count and a reusable scratch buffer.
struct ComputeContext {
  int n_threads = 1;
  std::vector<uint8_t> work;
  /// Highest kernel level to use: the detected level is capped by this (tests force kScalar to
  /// compare SIMD paths against the reference).
  IsaLevel max_isa = IsaLevel::kAvx512;
};

// ---- Ops (ggml semantics; shapes in ggml order) -------------------------------------------

/// GET_ROWS: dst[:, i, j] = src0[:, idx[i, j], j] converted to F32. src0 any supported weight type
/// [ne0, n_rows, ne2], idx I32 [n, ne2], dst F32 [ne0, n, ne2].
Status GetRows(ComputeContext& ctx, const TensorView& src0, const TensorView& idx, TensorView& dst);

/// MUL_MAT: dst = src0^T-style product as ggml_mul_mat: src0 [K, N, ne02, ne03] (any supported
/// type), src1 F32 [K, M, ne12, ne13] (may be non-contiguous: permuted views), dst F32 [N, M, ne12,
/// ne13]; src0 is broadcast over dims 2,3 (ne12 % ne02 == 0). dst[n, m] = dot(src0 row n, src1 row m).
Status MulMat(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);

/// RMS_NORM over ne0: dst = x / sqrt(mean(x^2) + eps). F32 in/out.
Status RmsNorm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps);
/// NORM over ne0: dst = (x - mean) / sqrt(var + eps). F32.
Status Norm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps);

/// Binary ops with ggml broadcasting (src1 repeated to src0's shape; src1 may be F32 or F16).
Status Add(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);
Status Mul(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);

/// SCALE: dst = x * s + b.
Status Scale(ComputeContext& ctx, const TensorView& src, TensorView& dst, float s, float b);

/// Unary ops (F32): SILU x*sigmoid(x), GELU (ggml's tanh approximation, as ggml_gelu).
Status Silu(ComputeContext& ctx, const TensorView& src, TensorView& dst);
Status Gelu(ComputeContext& ctx, const TensorView& src, TensorView& dst);
/// GLU SWIGLU: dst = silu(a) * b (a, b same shape F32). GEGLU likewise with gelu.
Status SwiGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst);
Status GeGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst);

/// ROPE parameters (ggml_rope_ext).
struct RopeParams {
  int n_dims = 0;           ///< rotated dims (<= ne0)
  int mode = 0;             ///< 0 = normal (adjacent pairs), 2 = NEOX (halves)
  int n_ctx_orig = 0;
  float freq_base = 10000.f;
  float freq_scale = 1.f;
  float ext_factor = 0.f;
  float attn_factor = 1.f;
  float beta_fast = 32.f;
  float beta_slow = 1.f;
};
/// ROPE: src F32 [head_dim, n_head, n_tokens], pos I32 [n_tokens], optional freq_factors F32
/// [n_dims/2] (data == nullptr when absent), dst like src. Same math as ggml's rope_f32 (YaRN
/// corrections included).
Status Rope(ComputeContext& ctx, const TensorView& src, const TensorView& pos, const TensorView& freq_factors,
            TensorView& dst, const RopeParams& p);

/// SOFT_MAX_EXT: dst = softmax(x * scale + mask (+ ALiBi slope * mask when max_bias > 0)) over ne0.
/// src F32 [n_kv, n_tokens, n_head], mask F16 or F32 [n_kv, >= n_tokens] (data == nullptr: none).
Status SoftMax(ComputeContext& ctx, const TensorView& src, const TensorView& mask, TensorView& dst, float scale,
               float max_bias);

/// CPY / CONT: element-wise copy with conversion F32 -> F32/F16/BF16/Q8_0/Q4_0 (quantized targets
/// need contiguous rows) and F16 -> F32; any strides on both sides; shapes must have equal element
/// counts (CPY) — the copy walks src in row-major ggml order and writes dst in the same order.
Status Cpy(ComputeContext& ctx, const TensorView& src, TensorView& dst);

// ---- Quant helpers (also used by tests and other backends) ----------------------------------

/// Dequantizes/converts `n` elements of one row of `type` into F32 (ggml's dequantize_row_* /
/// to_float). Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K,
/// Q6_K, Q8_K, IQ4_NL, IQ4_XS. Errors: kInvalidArgument when n % block_size != 0, kUnimplemented for
/// other types. `dst` holds n floats.
Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
/// Quantizes/converts `n` F32 values into `type` (reference quantizers, as ggml's
/// quantize_row_*_ref; llama-quantize uses the same ones without an imatrix, so the bytes match).
/// Supported targets: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K. `dst` holds
/// RowSize(type, n) bytes. Errors: kInvalidArgument when n % block_size != 0, kUnimplemented for
/// other targets (the K-quant and IQ quantizers, which need importance search, are not here).
Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

/// IEEE binary16 <-> binary32 (round-to-nearest-even; NaN stays NaN, overflow gives infinity).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);

/// The vec_dot type MUL_MAT converts src1 to for weights of `type` (ggml's type_traits_cpu
/// vec_dot_type). Errors: kUnimplemented for weight types this backend cannot multiply.
Result<GgmlType> VecDotType(GgmlType type);

/// True when MulMat accepts src0 of `type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
/// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), for the backend's supports_op.
bool SupportsMulMatType(GgmlType type);

// ---- CPU_REPACK ---------------------------------------------------------------------------------

/// True when `src` (a Q4_0 weight, plain layout, contiguous) can be repacked: ne1 % 8 == 0 and
/// ne0 % 32 == 0 (llama.cpp's CPU_REPACK rule for Q4_0 8x8 on AVX2, ggml-cpu/repack.cpp).
bool CanRepackQ4_0(const TensorView& src);

/// Repacks a Q4_0 weight [K, N, ne2, ne3] into the Q4_0x8 layout at `dst` (RowSize(Q4_0, K) * N *
/// ne2 * ne3 bytes, must not alias src). Each group of 8 consecutive rows g (rows 8g .. 8g+7 of one
/// (i2, i3) matrix) becomes K/32 consecutive 144-byte blocks, one per block column b:
///   { uint16 d[8] (fp16 scale of row 8g+r, block b); uint8 qs[8][16] (row 8g+r's qs of block b) }
/// so the 8 rows' blocks of one column sit side by side (a 32-byte load holds two rows' quants).
/// Group g of matrix (i2, i3) starts at i3*nb[3] + i2*nb[2] + 8g*nb[1]: the repacked tensor has the
/// plain tensor's size and strides. The result views as a TensorView with the same type/ne/nb and
/// layout = kLayoutQ4_0x8. Errors: kInvalidArgument when !CanRepackQ4_0(src) (names the reason).
Status RepackQ4_0(const TensorView& src, void* dst);

}  // namespace stowage::cpu
