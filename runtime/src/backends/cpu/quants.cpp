// FP16/BF16 conversions, legacy block quants (Q4_0..Q8_1) and their scalar vec_dots.
// Numerics: ggml's quantize_row_*_ref / dequantize_row_* (ggml-quants.c) and the generic vec_dots
// of ggml-cpu/quants.c and vec.cpp.
#include "quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels.h"

namespace stowage::cpu {
namespace {
inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

const int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t kValuesMXFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float HalfToFloat(fp16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in binary32.
    const float v = float(mant) * 5.9604644775390625e-08f;
    return FromBits(Bits(v) | sign);
  }
  if (exp == 31) return FromBits(sign | 0x7F800000u | (mant << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

fp16_t FloatToHalf(float f) {
  uint32_t x = Bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u;   // NaN -> quiet NaN
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5 makes the FPU round to a multiple of
    // 2^-24 (half's subnormal step) with round-to-nearest-even; the low bits are the mantissa.
    const float a = FromBits(x) + 0.5f;
    return uint16_t(sign | (Bits(a) - 0x3F000000u));
  }
  x += 0xFFFu + ((x >> 13) & 1u);                     // round to nearest even at bit 13
  return uint16_t(sign | ((x - 0x38000000u) >> 13));  // rebias exponent 127 -> 15
}

bf16_t FloatToBf16(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16_t((u >> 16) | 64u);  // quiet NaN
  return bf16_t((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

// ---- quantize (reference) ----------------------------------------------------------------------

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, int64_t n) {
  const int qk = kQK4_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < qk; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[qk / 2 + j] * id;
      const uint8_t xi0 = uint8_t(std::min<int8_t>(15, int8_t(x0 + 8.5f)));
      const uint8_t xi1 = uint8_t(std::min<int8_t>(15, int8_t(x1 + 8.5f)));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

namespace {

// Index of the IQ4_NL level nearest to x (levels ascending; a tie goes to the upper one unless x
// is strictly closer to the lower), as ggml's best_index_int8.
int NearestIQ4NL(float x) {
  const int8_t* v = kValuesIQ4NL;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

}  // namespace

// One block of 32 (ggml-quants.c quantize_row_iq4_nl_impl with super_block_size = block_size = 32,
// no importance matrix: weights x^2). With `search` (ntry 7, quantize_iq4_nl: llama-quantize) a first
// scale -max / kvalues[0] from the element of largest magnitude, 2*7+1 trial scales around it
// keeping the one of least weighted squared error, the final levels chosen with that scale. Without
// (ntry -1, quantize_row_iq4_nl_ref: ggml-cpu's from_float, which CPY into an IQ4_NL KV cache runs)
// the levels of the first scale max / kvalues[0] and the least-squares scale for them. An all-zero
// block (|x| < 1e-15) gets scale 0 and level nearest(0) (ggml leaves those nibbles unset; they
// dequantize to 0 either way).
void QuantizeRowIQ4_NLImpl(const float* x, BlockIQ4_NL* y, int64_t n, bool search) {
  constexpr int qk = kQK4_NL;
  const int ntry = search ? 7 : -1;
  const int8_t* v = kValuesIQ4NL;
  for (int64_t ib = 0; ib < n / qk; ++ib, x += qk) {
    float w[qk];
    uint8_t l[qk];
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < qk; ++j) {
      w[j] = x[j] * x[j];
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    float d = 0.f;
    for (int j = 0; j < qk; ++j) l[j] = static_cast<uint8_t>(NearestIQ4NL(0.f));
    if (amax >= 1e-15f) {  // ggml's GROUP_MAX_EPS: an all-zero block keeps scale 0
      d = ntry > 0 ? -max / v[0] : max / v[0];
      float id = 1.f / d;
      float sumqx = 0.f, sumq2 = 0.f;
      for (int j = 0; j < qk; ++j) {
        l[j] = static_cast<uint8_t>(NearestIQ4NL(id * x[j]));
        const float q = v[l[j]];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
      }
      d = sumqx / sumq2;
      float best = d * sumqx;
      for (int itry = -ntry; itry <= ntry; ++itry) {
        id = (itry + v[0]) / max;
        sumqx = sumq2 = 0.f;
        for (int j = 0; j < qk; ++j) {
          const float q = v[NearestIQ4NL(id * x[j])];
          sumqx += w[j] * q * x[j];
          sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
      if (ntry > 0) {  // the levels again, for the chosen scale
        const float idf = d != 0.f ? 1.f / d : 0.f;
        for (int j = 0; j < qk; ++j) l[j] = static_cast<uint8_t>(NearestIQ4NL(idf * x[j]));
      }
    }
    y[ib].d = FloatToHalf(d);
    for (int j = 0; j < qk / 2; ++j) y[ib].qs[j] = static_cast<uint8_t>(l[j] | (l[j + qk / 2] << 4));
  }
}

void QuantizeRowIQ4_NL(const float* x, BlockIQ4_NL* y, int64_t n) { QuantizeRowIQ4_NLImpl(x, y, n, false); }
void QuantizeRowIQ4_NLSearch(const float* x, BlockIQ4_NL* y, int64_t n) {
  QuantizeRowIQ4_NLImpl(x, y, n, true);
}

void QuantizeRowMXFP4(const float* x, BlockMXFP4* y, int64_t n) {
  // The nearest level, the first (lowest index) of equally near ones (ggml best_index_mxfp4).
  auto best = [](float v, float d) {
    int bi = 0;
    float be = std::fabs(kValuesMXFP4[0] * d - v);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(kValuesMXFP4[i] * d - v);
      if (err < be) {
        bi = i;
        be = err;
      }
    }
    return uint8_t(bi);
  };
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, x += kQK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
    // ggml converts floor(log2(amax)) + 125 to uint8_t directly; clamped here so that a block below
    // 2^-125 (ggml: out of range) gets e = 0 and one above 2^130 e = 255 instead of wrapping.
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
    y[i].e = uint8_t(std::min(255.0f, std::max(0.0f, e)));
    const float d = E8M0ToFloatHalf(y[i].e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j)
      y[i].qs[j] = uint8_t(best(x[j], d) | (best(x[j + kQK_MXFP4 / 2], d) << 4));
  }
}

void QuantizeRowQ4_1(const float* x, BlockQ4_1* y, int64_t n) {
  const int qk = kQK4_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < qk; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[qk / 2 + j] - min) * id;
      const uint8_t xi0 = uint8_t(std::min<int8_t>(15, int8_t(x0 + 0.5f)));
      const uint8_t xi1 = uint8_t(std::min<int8_t>(15, int8_t(x1 + 0.5f)));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* x, BlockQ5_0* y, int64_t n) {
  const int qk = kQK5_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < qk; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[qk / 2 + j] * id;
      const uint8_t xi0 = uint8_t(std::min<int8_t>(31, int8_t(x0 + 16.5f)));
      const uint8_t xi1 = uint8_t(std::min<int8_t>(31, int8_t(x1 + 16.5f)));
      y[i].qs[j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void QuantizeRowQ5_1(const float* x, BlockQ5_1* y, int64_t n) {
  const int qk = kQK5_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < qk; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    y[i].m = FloatToHalf(min);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[j] - min) * id, x1 = (x[qk / 2 + j] - min) * id;
      const uint8_t xi0 = uint8_t(x0 + 0.5f), xi1 = uint8_t(x1 + 0.5f);
      y[i].qs[j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof qh);
  }
}

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, int64_t n) {
  const int qk = kQK8_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f;
    for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    for (int j = 0; j < qk; ++j) y[i].qs[j] = int8_t(std::roundf(x[j] * id));
  }
}

void QuantizeRowQ8_1(const float* x, BlockQ8_1* y, int64_t n) {
  const int qk = kQK8_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f;
    for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = FloatToHalf(d);
    int sum = 0;
    for (int j = 0; j < qk / 2; ++j) {
      y[i].qs[j] = int8_t(std::roundf(x[j] * id));
      y[i].qs[qk / 2 + j] = int8_t(std::roundf(x[qk / 2 + j] * id));
      sum += y[i].qs[j] + y[i].qs[qk / 2 + j];
    }
    y[i].s = FloatToHalf(float(sum) * d);
  }
}

// ggml-cpu's x86 quantize_row_q8_0 / _q8_1 (the from_float MUL_MAT uses for activations on
// AVX/AVX2/AVX-512 builds): multiplier 127 / amax instead of 1 / (amax / 127), and
// round-half-to-even (_mm256_round_ps(_MM_ROUND_NEAREST)) instead of roundf. On the shared models
// this reproduces llama.cpp's logits exactly where the reference rounding does not: activations
// that went through earlier quantized layers hit exact .5 ties often.
//
// Non-finite activations (not ggml: its quantizers drop a NaN in the amax comparison and convert
// it to int8 by an undefined float->int conversion): a block with a NaN or +-inf element gets
// d = NaN and qs = 0 (Q8_1: s = NaN), so every dot with it is NaN (NaN in -> NaN out, per block;
// an inf block gave NaN before too: inf * 0). The GEMM families' SIMD from_float follow the same
// rule (gemm.h).
//
// A block whose amax is so small that 127 / amax overflows (amax < 127 / FLT_MAX, ~3.7e-37) has
// id = inf, so x * id is +-inf or NaN: converted as x86's vcvtps2dq (INT32_MIN) and then narrowed
// with signed saturation (vpackssdw/vpacksswb), i.e. -128, as ggml's x86 quantizers and the SIMD ones
// here; Q8_1's sum is taken over the int32 values before narrowing, with wrap-around (ggml's
// hsum_i32_8 of the vcvtps2dq results: 32 * INT32_MIN wraps to 0). Its fp16 d is 0, so the block
// contributes 0 either way; a C cast would be undefined there.
namespace {
inline int32_t ActToInt32(float v) {
  const float r = std::nearbyint(v);
  return r >= -2147483648.f && r < 2147483648.f ? int32_t(r) : INT32_MIN;
}
inline int8_t SaturateInt8(int32_t i) { return int8_t(std::clamp<int32_t>(i, -128, 127)); }
}  // namespace

void QuantizeRowQ8_0Act(const float* x, BlockQ8_0* y, int64_t n) {
  const int qk = kQK8_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f;
    bool nonfinite = false;
    for (int j = 0; j < qk; ++j) {
      const float ax = std::fabs(x[j]);
      amax = std::max(amax, ax);
      nonfinite |= !(ax <= FLT_MAX);
    }
    if (nonfinite) {
      y[i].d = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      continue;
    }
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = FloatToHalf(amax / 127.f);
    for (int j = 0; j < qk; ++j) y[i].qs[j] = SaturateInt8(ActToInt32(x[j] * id));
  }
}

void QuantizeRowQ8_1Act(const float* x, BlockQ8_1* y, int64_t n) {
  const int qk = kQK8_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f;
    bool nonfinite = false;
    for (int j = 0; j < qk; ++j) {
      const float ax = std::fabs(x[j]);
      amax = std::max(amax, ax);
      nonfinite |= !(ax <= FLT_MAX);
    }
    if (nonfinite) {  // see QuantizeRowQ8_0Act
      y[i].d = y[i].s = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      continue;
    }
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = FloatToHalf(d);
    uint32_t sum = 0;  // wraps as the int32 lanes of ggml's sum (see above)
    for (int j = 0; j < qk; ++j) {
      const int32_t q = ActToInt32(x[j] * id);
      y[i].qs[j] = SaturateInt8(q);
      sum += static_cast<uint32_t>(q);
    }
    int32_t isum;
    std::memcpy(&isum, &sum, sizeof isum);
    y[i].s = FloatToHalf(d * float(isum));
  }
}

// ---- dequantize --------------------------------------------------------------------------------

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n) {
  const int qk = kQK4_0;
  for (int64_t i = 0; i < n / qk; ++i, y += qk) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < qk / 2; ++j) {
      y[j] = float((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + qk / 2] = float((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n) {
  const int qk = kQK4_1;
  for (int64_t i = 0; i < n / qk; ++i, y += qk) {
    const float d = HalfToFloat(x[i].d), m = HalfToFloat(x[i].m);
    for (int j = 0; j < qk / 2; ++j) {
      y[j] = float(x[i].qs[j] & 0x0F) * d + m;
      y[j + qk / 2] = float(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n) {
  const int qk = kQK5_0;
  for (int64_t i = 0; i < n / qk; ++i, y += qk) {
    const float d = HalfToFloat(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    for (int j = 0; j < qk / 2; ++j) {
      const uint8_t xh0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh1 = uint8_t(((qh >> (j + 12))) & 0x10);
      y[j] = float(((x[i].qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + qk / 2] = float(((x[i].qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

void DequantizeRowQ5_1(const BlockQ5_1* x, float* y, int64_t n) {
  const int qk = kQK5_1;
  for (int64_t i = 0; i < n / qk; ++i, y += qk) {
    const float d = HalfToFloat(x[i].d), m = HalfToFloat(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    for (int j = 0; j < qk / 2; ++j) {
      const uint8_t xh0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh1 = uint8_t(((qh >> (j + 12))) & 0x10);
      y[j] = float((x[i].qs[j] & 0x0F) | xh0) * d + m;
      y[j + qk / 2] = float((x[i].qs[j] >> 4) | xh1) * d + m;
    }
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n) {
  const int qk = kQK8_0;
  for (int64_t i = 0; i < n / qk; ++i, y += qk) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < qk; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

// ---- scalar vec_dots ---------------------------------------------------------------------------
// The block quants' dots accumulate one float per dot, sumf = fma(float(block int sum), dx * dy,
// sumf) per block (the min types then sumf = fma(m, s, sumf)): the order of the scalar GEMM kernels
// (gemm_q8.cpp), so the scalar level is batch-invariant too.

namespace scalar {

void VecDotF32(int64_t n, float* s, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  double sum = 0.0;  // ggml_float accumulation, as ggml_vec_dot_f32's scalar path
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * y[i]);
  *s = float(sum);
}

void VecDotF16(int64_t n, float* s, const void* vx, const void* vy) {
  const fp16_t* x = static_cast<const fp16_t*>(vx);
  const fp16_t* y = static_cast<const fp16_t*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(HalfToFloat(x[i]) * HalfToFloat(y[i]));
  *s = float(sum);
}

void VecDotBF16(int64_t n, float* s, const void* vx, const void* vy) {
  const bf16_t* x = static_cast<const bf16_t*>(vx);
  const bf16_t* y = static_cast<const bf16_t*>(vy);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(Bf16ToFloat(x[i]) * Bf16ToFloat(y[i]));
  *s = float(sum);
}

void VecDotQ4_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_0* x = static_cast<const BlockQ4_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const int qk = kQK8_0;
  float sumf = 0;
  for (int64_t ib = 0; ib < n / qk; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const int v0 = (x[ib].qs[j] & 0x0F) - 8;
      const int v1 = (x[ib].qs[j] >> 4) - 8;
      sumi0 += v0 * y[ib].qs[j];
      sumi1 += v1 * y[ib].qs[j + qk / 2];
    }
    sumf = std::fma(float(sumi0 + sumi1), HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d), sumf);
  }
  *s = sumf;
}

void VecDotQ4_1Q8_1(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_1* x = static_cast<const BlockQ4_1*>(vx);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(vy);
  const int qk = kQK8_1;
  float sumf = 0;
  for (int64_t ib = 0; ib < n / qk; ++ib) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < qk / 2; ++j) {
      sumi0 += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
      sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + qk / 2];
    }
    sumf = std::fma(float(sumi0 + sumi1), HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d), sumf);
    sumf = std::fma(HalfToFloat(x[ib].m), HalfToFloat(y[ib].s), sumf);
  }
  *s = sumf;
}

void VecDotQ5_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_0* x = static_cast<const BlockQ5_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const int qk = kQK8_0;
  float sumf = 0;
  for (int64_t ib = 0; ib < n / qk; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const uint8_t xh0 = uint8_t(((qh & (1u << (j + 0))) >> (j + 0)) << 4);
      const uint8_t xh1 = uint8_t((qh & (1u << (j + 16))) >> (j + 12));
      const int x0 = int8_t(((x[ib].qs[j] & 0x0F) | xh0) - 16);
      const int x1 = int8_t(((x[ib].qs[j] >> 4) | xh1) - 16);
      sumi0 += x0 * y[ib].qs[j];
      sumi1 += x1 * y[ib].qs[j + qk / 2];
    }
    sumf = std::fma(float(sumi0 + sumi1), HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d), sumf);
  }
  *s = sumf;
}

void VecDotQ5_1Q8_1(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_1* x = static_cast<const BlockQ5_1*>(vx);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(vy);
  const int qk = kQK8_1;
  float sumf = 0;
  for (int64_t ib = 0; ib < n / qk; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, sizeof qh);
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const uint8_t xh0 = uint8_t(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh1 = uint8_t(((qh >> (j + 12))) & 0x10);
      sumi0 += ((x[ib].qs[j] & 0x0F) | xh0) * y[ib].qs[j];
      sumi1 += ((x[ib].qs[j] >> 4) | xh1) * y[ib].qs[j + qk / 2];
    }
    sumf = std::fma(float(sumi0 + sumi1), HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d), sumf);
    sumf = std::fma(HalfToFloat(x[ib].m), HalfToFloat(y[ib].s), sumf);
  }
  *s = sumf;
}

void VecDotQ8_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const int qk = kQK8_0;
  float sumf = 0;
  for (int64_t ib = 0; ib < n / qk; ++ib) {
    int sumi = 0;
    for (int j = 0; j < qk; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
    sumf = std::fma(float(sumi), HalfToFloat(x[ib].d) * HalfToFloat(y[ib].d), sumf);
  }
  *s = sumf;
}

}  // namespace scalar
}  // namespace stowage::cpu

// ---- SILU / SWIGLU rows: scalar reference (kernels.h; row_kernels.cpp dispatches) ----------------

namespace stowage::cpu {
namespace scalar {
namespace {
inline float SiluRef(float x) {
  if (x == -std::numeric_limits<float>::infinity()) return -0.0f;  // the formula: -inf / inf = NaN
  return x / (1.0f + std::exp(-x));
}
}  // namespace

void SiluRowF32(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = SiluRef(x[i]);
}

void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = SiluRef(a[i]) * b[i];
}
}  // namespace scalar

namespace scalar {
void SumSquares8(int64_t n8, const float* x, double part[8]) {
  for (int64_t i = 0; i < n8; i += 8)
    for (int k = 0; k < 8; ++k) part[k] += double(x[i + k] * x[i + k]);
}

void CvtF32F16Strided(int64_t n, const char* src, size_t src_stride, char* dst, size_t dst_stride) {
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, src + size_t(i) * src_stride, 4);
    const fp16_t h = FloatToHalf(v);
    std::memcpy(dst + size_t(i) * dst_stride, &h, 2);
  }
}
}  // namespace scalar

}  // namespace stowage::cpu

// ---- ROPE rotation: scalar reference (kernels.h; row_kernels.cpp dispatches) ----------------------

namespace stowage::cpu {
namespace scalar {

#include "rope_rotate.inc"  // NOLINT(build/include): one copy per level

}  // namespace scalar

}  // namespace stowage::cpu
