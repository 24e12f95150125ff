// K-quants (Q2_K..Q6_K), Q8_K activations, the IQ4_NL / IQ4_XS non-linear quants and MXFP4: dequantizers
// and scalar vec_dots. Numerics: ggml-quants.c (dequantize_row_*, quantize_row_q8_K_ref) and
// ggml-cpu/quants.c (ggml_vec_dot_*_q8_K_generic). Integer parts are exact; only the float
// accumulation order may differ from ggml's SIMD paths.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "quants.h"

namespace stowage::cpu {

void QuantizeRowQ8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    bool nonfinite = false;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
      nonfinite |= !(ax <= FLT_MAX);
    }
    if (nonfinite) {
      // Not ggml (quantize_row_q8_K_ref skips a NaN in the comparison, then converts NaN to int):
      // a block with a NaN or +-inf gets d = NaN and qs = bsums = 0, so every dot with it is NaN
      // (see QuantizeRowQ8_0Act in quants.cpp).
      y[i].d = std::numeric_limits<float>::quiet_NaN();
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      continue;
    }
    if (!amax) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      continue;
    }
    const float iscale = -127.f / max;
    if (std::isinf(iscale)) {
      // |max| < 127 / FLT_MAX (~3.7e-37): every iscale * x is +-inf (or NaN for x = 0), which
      // ggml's nearest_int (the 1.5 * 2^23 bit trick) turns into -2^22 (or 0), stored as int8 0:
      // qs = bsums = 0 and d = 1 / iscale (a signed zero). A conversion of inf to int would be
      // undefined here.
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      std::memset(y[i].bsums, 0, sizeof y[i].bsums);
      y[i].d = 1 / iscale;
      continue;
    }
    for (int j = 0; j < kQK_K; ++j) {
      // ggml's nearest_int: round half to even (default FP rounding mode).
      const int v = int(std::nearbyintf(iscale * x[j]));
      y[i].qs[j] = int8_t(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = int16_t(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = HalfToFloat(x[i].d), min = HalfToFloat(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
        }
        shift += 2;
      }
      q += 32;
    }
  }
}

void UnpackQ3KScales(const uint8_t* packed, int8_t* out) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(out, aux, 16);
  for (int j = 0; j < 16; ++j) out[j] = int8_t(out[j] - 32);
}

namespace {

// Q3_K weights of one super-block as 256 signed values in -4..3 (element order).
void UnpackQ3K(const BlockQ3_K& b, int8_t* q8) {
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  for (int nn = 0; nn < kQK_K; nn += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) *q8++ = int8_t(((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4));
      shift += 2;
      m = uint8_t(m << 1);
    }
    q += 32;
  }
}

// Q4_K/Q5_K: scales and mins of the 8 sub-blocks of 32.
void UnpackK4Scales(const uint8_t* packed, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 8; ++j) GetScaleMinK4(j, packed, &sc[j], &mn[j]);
}
}  // namespace

void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d_all = HalfToFloat(x[i].d);
    int8_t scales[16], q[kQK_K];
    UnpackQ3KScales(x[i].scales, scales);
    UnpackQ3K(x[i], q);
    for (int j = 0; j < kQK_K; ++j) y[j] = d_all * float(scales[j / 16]) * float(q[j]);
    y += kQK_K;
  }
}

void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = HalfToFloat(x[i].d), min = HalfToFloat(x[i].dmin);
    uint8_t sc[8], mn[8];
    UnpackK4Scales(x[i].scales, sc, mn);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < 4; ++j, q += 32) {
      const float d1 = d * sc[2 * j], m1 = min * mn[2 * j];
      const float d2 = d * sc[2 * j + 1], m2 = min * mn[2 * j + 1];
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = HalfToFloat(x[i].d), min = HalfToFloat(x[i].dmin);
    uint8_t sc[8], mn[8];
    UnpackK4Scales(x[i].scales, sc, mn);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 4; ++j, ql += 32) {
      const float d1 = d * sc[2 * j], m1 = min * mn[2 * j];
      const float d2 = d * sc[2 * j + 1], m2 = min * mn[2 * j + 1];
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
  }
}

void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = HalfToFloat(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void DequantizeRowMXFP4(const BlockMXFP4* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, y += kQK_MXFP4) {
    const float d = E8M0ToFloatHalf(x[i].e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      y[j] = kValuesMXFP4[x[i].qs[j] & 0xF] * d;
      y[j + kQK_MXFP4 / 2] = kValuesMXFP4[x[i].qs[j] >> 4] * d;
    }
  }
}

void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_NL; ++i, y += kQK4_NL) {
    const float d = HalfToFloat(x[i].d);
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      y[j] = d * kValuesIQ4NL[x[i].qs[j] & 0xF];
      y[j + kQK4_NL / 2] = d * kValuesIQ4NL[x[i].qs[j] >> 4];
    }
  }
}

void DequantizeRowIQ4_XS(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = HalfToFloat(x[i].d);
    const uint8_t* qs = x[i].qs;
    for (int ib = 0; ib < kQK_K / 32; ++ib, qs += 16, y += 32) {
      const float dl = d * float(IQ4XSScale(x[i], ib));
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kValuesIQ4NL[qs[j] & 0xF];
        y[j + 16] = dl * kValuesIQ4NL[qs[j] >> 4];
      }
    }
  }
}

namespace scalar {

void VecDotQ2_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ2_K* x = static_cast<const BlockQ2_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * HalfToFloat(x[i].d);
    const float dmin = y[i].d * HalfToFloat(x[i].dmin);
    int isum = 0, is = 0;
    for (int k = 0; k < kQK_K / 128; ++k) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const int d = sc[is++] & 0xF;
          int isuml = 0;
          for (int l = 16 * half; l < 16 * half + 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
          isum += d * isuml;
        }
        shift += 2;
        q8 += 32;
      }
      q2 += 32;
    }
    sumf += dall * float(isum) - dmin * float(summs);
  }
  *s = sumf;
}

void VecDotQ3_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ3_K* x = static_cast<const BlockQ3_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t scales[16], q[kQK_K];
    UnpackQ3KScales(x[i].scales, scales);
    UnpackQ3K(x[i], q);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[g * 16 + l] * y[i].qs[g * 16 + l];
      isum += scales[g] * dot;
    }
    sumf += HalfToFloat(x[i].d) * y[i].d * float(isum);
  }
  *s = sumf;
}

void VecDotQ4_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_K* x = static_cast<const BlockQ4_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sc[8], mn[8];
    UnpackK4Scales(x[i].scales, sc, mn);
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * mn[j / 2];
    int isum = 0;
    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int j = 0; j < 4; ++j, q4 += 32, q8 += 64) {
      int lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (q4[l] & 0xF) * q8[l];
        hi += (q4[l] >> 4) * q8[l + 32];
      }
      isum += sc[2 * j] * lo + sc[2 * j + 1] * hi;
    }
    const float d = HalfToFloat(x[i].d) * y[i].d;
    const float dmin = HalfToFloat(x[i].dmin) * y[i].d;
    sumf += d * float(isum) - dmin * float(summs);
  }
  *s = sumf;
}

void VecDotQ5_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_K* x = static_cast<const BlockQ5_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sc[8], mn[8];
    UnpackK4Scales(x[i].scales, sc, mn);
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * mn[j / 2];
    int isum = 0;
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 4; ++j, ql += 32, q8 += 64) {
      int lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) * q8[l];
        hi += ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) * q8[l + 32];
      }
      isum += sc[2 * j] * lo + sc[2 * j + 1] * hi;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
    const float d = HalfToFloat(x[i].d) * y[i].d;
    const float dmin = HalfToFloat(x[i].dmin) * y[i].d;
    sumf += d * float(isum) - dmin * float(summs);
  }
  *s = sumf;
}

void VecDotQ6_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ6_K* x = static_cast<const BlockQ6_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t q[kQK_K];
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = q;
    for (int nn = 0; nn < kQK_K; nn += 128) {
      for (int l = 0; l < 32; ++l) {
        a[l + 0] = int8_t(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = int8_t(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      a += 128;
      ql += 64;
      qh += 32;
    }
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[g * 16 + l] * y[i].qs[g * 16 + l];
      isum += x[i].scales[g] * dot;
    }
    sumf += HalfToFloat(x[i].d) * y[i].d * float(isum);
  }
  *s = sumf;
}

void VecDotIQ4_NLQ8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockIQ4_NL* x = static_cast<const BlockIQ4_NL*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    const float d = HalfToFloat(y[ib].d) * HalfToFloat(x[ib].d);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      sumi1 += y[ib].qs[j] * kValuesIQ4NL[x[ib].qs[j] & 0xF];
      sumi2 += y[ib].qs[j + kQK4_NL / 2] * kValuesIQ4NL[x[ib].qs[j] >> 4];
    }
    sumf = std::fma(float(sumi1 + sumi2), d, sumf);
  }
  *s = sumf;
}

void VecDotMXFP4Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockMXFP4* x = static_cast<const BlockMXFP4*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK_MXFP4; ++ib) {
    const float d = HalfToFloat(y[ib].d) * E8M0ToFloatHalf(x[ib].e);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      sumi1 += y[ib].qs[j] * kValuesMXFP4[x[ib].qs[j] & 0xF];
      sumi2 += y[ib].qs[j + kQK_MXFP4 / 2] * kValuesMXFP4[x[ib].qs[j] >> 4];
    }
    sumf = std::fma(float(sumi1 + sumi2), d, sumf);
  }
  *s = sumf;
}

void VecDotIQ4_XSQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d4d8 = HalfToFloat(x[i].d) * y[i].d;
    const uint8_t* qs = x[i].qs;
    const int8_t* q8 = y[i].qs;
    // Float accumulation per sub-block of 32, as ggml's generic ggml_vec_dot_iq4_xs_q8_K.
    for (int ib = 0; ib < kQK_K / 32; ++ib, qs += 16, q8 += 32) {
      int s1 = 0, s2 = 0;
      for (int j = 0; j < 16; ++j) {
        s1 += q8[j] * kValuesIQ4NL[qs[j] & 0xF];
        s2 += q8[j + 16] * kValuesIQ4NL[qs[j] >> 4];
      }
      sumf += d4d8 * float(IQ4XSScale(x[i], ib)) * float(s1 + s2);
    }
  }
  *s = sumf;
}

void VecDotIQ4_XSQ8_KIqp(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      int s1 = 0;
      for (int j = 0; j < 16; ++j)
        s1 += y[i].qs[32 * ib + j] * kValuesIQ4NL[x[i].qs[16 * ib + j] & 0xF] +
              y[i].qs[32 * ib + j + 16] * kValuesIQ4NL[x[i].qs[16 * ib + j] >> 4];
      isum += IQ4XSScale(x[i], ib) * s1;
    }
    sumf = std::fma(float(isum), HalfToFloat(x[i].d) * y[i].d, sumf);
  }
  *s = sumf;
}

}  // namespace scalar
}  // namespace stowage::cpu
