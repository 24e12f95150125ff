// Block layouts, reference quantizers/dequantizers and vec_dot kernels of the CPU backend.
//
// Internal to the CPU backend (and its tests). Block layouts are ggml's on-disk layouts
// (ggml-common.h: block_q4_0 ... block_iq4_xs); they must match byte for byte because weights are
// read straight from the GGUF mapping. Reference quantizers follow ggml's quantize_row_*_ref and
// vec_dots follow ggml-cpu's generic quants.c, so results agree with llama.cpp's CPU backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stowage/runtime/ggml_types.h"

namespace stowage::cpu {

inline constexpr int kQK4_0 = 32, kQK4_1 = 32, kQK5_0 = 32, kQK5_1 = 32, kQK8_0 = 32, kQK8_1 = 32;
inline constexpr int kQK_K = 256;       ///< super-block size of the K-quants
inline constexpr int kKScaleSize = 12;  ///< packed 6-bit scales/mins of Q4_K/Q5_K
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_MXFP4 = 32;  ///< MXFP4 block (ggml-common.h QK_MXFP4)

using fp16_t = uint16_t;  ///< IEEE binary16 bits
using bf16_t = uint16_t;  ///< bfloat16 bits (upper half of an IEEE binary32)

struct BlockQ4_0 {
  fp16_t d;
  uint8_t qs[kQK4_0 / 2];
};
struct BlockQ4_1 {
  fp16_t d;
  fp16_t m;
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  fp16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
struct BlockQ5_1 {
  fp16_t d;
  fp16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
struct BlockQ8_0 {
  fp16_t d;
  int8_t qs[kQK8_0];
};
/// Q8_1: `s` = d * sum(qs), used by the Q4_1/Q5_1 dots for the min term.
struct BlockQ8_1 {
  fp16_t d;
  fp16_t s;
  int8_t qs[kQK8_1];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  fp16_t d;
  fp16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  fp16_t d;
};
struct BlockQ4_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  fp16_t d;
  fp16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  fp16_t d;
};
/// Q8_K: activations of the K-quant dots; bsums[j] = sum of qs[16j .. 16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
struct BlockIQ4_NL {
  fp16_t d;
  uint8_t qs[kQK4_NL / 2];
};
struct BlockIQ4_XS {
  fp16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
                  sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36,
              "legacy blocks");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292,
              "k blocks");
/// MXFP4 (OCP microscaling FP4, ggml-common.h block_mxfp4): one E8M0 scale byte, then 32 E2M1 codes,
/// element j in the low nibble of qs[j] and element j + 16 in its high nibble (the IQ4_NL order).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK_MXFP4 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136, "iq4 blocks");
static_assert(sizeof(BlockMXFP4) == 17, "mxfp4 block");

/// The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml-common.h kvalues_iq4nl).
extern const int8_t kValuesIQ4NL[16];
/// The 16 E2M1 values of MXFP4 doubled, so that they are integers (ggml-common.h kvalues_mxfp4:
/// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2); the scale is halved to match
/// (E8M0ToFloatHalf).
extern const int8_t kValuesMXFP4[16];

/// Half of the E8M0 scale `e`: 2^(e - 128) as binary32, e = 0 and 1 as the subnormals 2^-128 and
/// 2^-127 (ggml-impl.h ggml_e8m0_to_fp32_half, exact for every e; e = 255 gives 2^127, not NaN).
inline float E8M0ToFloatHalf(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// ---- Scalar conversions ------------------------------------------------------------------------

/// binary16 -> binary32, exact (subnormals, inf, NaN preserved).
float HalfToFloat(fp16_t h);
/// binary32 -> binary16, IEEE round-to-nearest-even (as F16C's _cvtss_sh with rounding mode 0).
fp16_t FloatToHalf(float f);
/// bfloat16 -> binary32 (exact).
inline float Bf16ToFloat(bf16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
/// binary32 -> bfloat16, round-to-nearest-even; NaNs are quieted (ggml_compute_fp32_to_bf16).
bf16_t FloatToBf16(float f);

// ---- Row conversions (n elements; n % block size == 0) ----------------------------------------

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n);
void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n);
void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n);
void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n);
/// IQ4_NL with ggml's best-scale search (quantize_row_iq4_nl_ref, no importance matrix).
/// IQ4_NL as ggml-cpu's from_float (quantize_row_iq4_nl_ref: one scale, no search): what CPY into an
/// IQ4_NL KV cache writes, and QuantizeRow(IQ4_NL).
void QuantizeRowIQ4_NL(const float* x, BlockIQ4_NL* y, int64_t n);
/// IQ4_NL as llama-quantize without an importance matrix (quantize_iq4_nl: 15 trial scales).
void QuantizeRowIQ4_NLSearch(const float* x, BlockIQ4_NL* y, int64_t n);
/// MXFP4 as ggml's quantize_row_mxfp4_ref (ggml-cpu's from_float and llama-quantize's MXFP4 without
/// an importance matrix): e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block), each value the
/// nearest doubled E2M1 level times E8M0ToFloatHalf(e), a tie to the lower index.
void QuantizeRowMXFP4(const float* x, BlockMXFP4* y, int64_t n);
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n);
/// Q8_K (MUL_MAT's activations for K-quants, ggml's quantize_row_q8_K). A 256-block holding a NaN
/// or +-inf gets d = NaN, qs = 0, bsums = 0 (ggml converts the NaN to an integer, undefined; we
/// propagate it: every dot with the block is NaN; see README "Non-finite activations").
void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n);
/// Activation quantizers of MUL_MAT: ggml-cpu's x86 quantize_row_q8_0 / _q8_1 semantics
/// (d = amax / 127, q = round_half_even(x * (127 / amax))); see quants.cpp for why. A 32-block
/// holding a NaN or +-inf gets d = NaN (and s = NaN for Q8_1), qs = 0.
void QuantizeRowQ8_0Act(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ8_1Act(const float* x, BlockQ8_1* y, int64_t n);

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n);
void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n);
void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n);
void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n);
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n);
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n);
void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n);
void DequantizeRowIQ4_XS(const BlockIQ4_XS* x, float* y, int64_t n);
/// ggml's dequantize_row_mxfp4: kValuesMXFP4[code] * E8M0ToFloatHalf(e).
void DequantizeRowMXFP4(const BlockMXFP4* x, float* y, int64_t n);

/// Q4_K/Q5_K packed 6-bit scale `j` (0..7) and min (ggml get_scale_min_k4).
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

/// Q3_K: the twelve packed bytes of 6-bit scales -> 16 signed scales, already minus 32
/// (ggml's kmask1/kmask2 unpacking in dequantize_row_q3_K).
void UnpackQ3KScales(const uint8_t* packed, int8_t* out);

/// IQ4_XS: signed scale (ls - 32) of sub-block ib (0..7): 4 low bits in scales_l, 2 high bits in
/// scales_h (ggml dequantize_row_iq4_xs).
inline int IQ4XSScale(const BlockIQ4_XS& b, int ib) {
  return (((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b.scales_h >> 2 * ib) & 3) << 4)) - 32;
}

// ---- vec_dot: *s = dot(x, y) over n elements; x of the weight type, y of its vec_dot type -----

using VecDotFn = void (*)(int64_t n, float* s, const void* x, const void* y);
/// Converts n F32 values into a vec_dot type row.
using FromFloatFn = void (*)(const float* x, void* y, int64_t n);

namespace scalar {
void VecDotF32(int64_t n, float* s, const void* x, const void* y);
void VecDotF16(int64_t n, float* s, const void* x, const void* y);
void VecDotBF16(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_1Q8_1(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_1Q8_1(int64_t n, float* s, const void* x, const void* y);
void VecDotQ8_0Q8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotQ2_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ3_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ4_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ5_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotQ6_KQ8_K(int64_t n, float* s, const void* x, const void* y);
void VecDotIQ4_NLQ8_0(int64_t n, float* s, const void* x, const void* y);
void VecDotIQ4_XSQ8_K(int64_t n, float* s, const void* x, const void* y);
/// MXFP4 x Q8_0 in the scalar vec_dots' order: sumf = fma(float(block int sum), d_y * e_half, sumf)
/// (the order of ggml's repacked mxfp4_8x8 gemv/gemm, which CPU_REPACK runs on x86 with AVX2).
void VecDotMXFP4Q8_0(int64_t n, float* s, const void* x, const void* y);
}  // namespace scalar

}  // namespace stowage::cpu
