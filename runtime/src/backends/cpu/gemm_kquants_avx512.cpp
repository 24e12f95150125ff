// GEMM family "kquants", AVX-512 VNNI kernels (this file is compiled with -mavx512f/bw/vl/dq/vnni;
// the lookup in gemm_kquants.cpp returns these only when CpuHasAvx512Vnni()). Layouts and integer
// sums: see gemm_kquants.cpp. One zmm lane per panel row; per k-step of 4 elements one packed
// weight zmm (16 rows x 4 unsigned bytes) feeds NC columns through
// vpdpbusd(acc, w, {1to16} broadcast of 4 activation bytes); per sub-block the int32 dot is scaled
// by the rows' scales (vpmulld) into a super-block int32 sum; the zero-point terms (Q4_K/Q5_K mins,
// Q6_K's -32) come from vpdpwssd of packed int16 row pairs with the column's bsums.
#include <immintrin.h>

#include <cstring>

#include "gemm.h"

namespace stowage::cpu::avx512 {
namespace {

// Must match gemm_kquants.cpp.
constexpr int kQK = 256;
constexpr size_t kActBlockBytes = 320;
constexpr size_t kActBsums16 = 256, kActBsums32 = 288, kActD = 304;
constexpr size_t kSmSc = 4096, kSmMins = 4608, kSmD = 4864, kSmDmin = 4928, kSmBlockBytes = 4992;
constexpr size_t kQ6Sc = 4096, kQ6Nsc = 5120, kQ6D = 5632, kQ6BlockBytes = 5696;

inline __m512i Bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512 BcastF(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_ps(v);
}
inline __m512i Ld(const uint8_t* p) { return _mm512_loadu_si512(p); }

template <int NC>
inline void Store(const __m512* acc, float* dst, size_t dst_stride, int nr) {
  if (nr == kGemmPanelRows) {
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(dst + size_t(c) * dst_stride, acc[c]);
  } else {
    const __mmask16 m = __mmask16((1u << nr) - 1);
    for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(dst + size_t(c) * dst_stride, m, acc[c]);
  }
}

template <int NC>
void ScaleMinCols(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
                  size_t dst_stride, int nr) {
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) a[c] = act + size_t(c) * act_stride;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += kSmBlockBytes) {
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* wq = panel + size_t(j) * 8 * 64;
      __m512i dot[NC];
      for (int c = 0; c < NC; ++c) dot[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        const __m512i w = Ld(wq + t * 64);
        for (int c = 0; c < NC; ++c) dot[c] = _mm512_dpbusd_epi32(dot[c], w, Bcast32(a[c] + j * 32 + t * 4));
      }
      const __m512i sc = Ld(panel + kSmSc + size_t(j) * 64);
      for (int c = 0; c < NC; ++c) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(dot[c], sc));
    }
    const __m512 d = _mm512_loadu_ps(panel + kSmD), dmin = _mm512_loadu_ps(panel + kSmDmin);
    for (int c = 0; c < NC; ++c) {
      __m512i summ = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p)
        summ = _mm512_dpwssd_epi32(summ, Ld(panel + kSmMins + p * 64), Bcast32(a[c] + kActBsums32 + p * 4));
      __m512 blk = _mm512_mul_ps(_mm512_cvtepi32_ps(sumi[c]), d);
      blk = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), dmin, blk);
      acc[c] = _mm512_fmadd_ps(blk, BcastF(a[c] + kActD), acc[c]);
      a[c] += kActBlockBytes;
    }
  }
  Store<NC>(acc, dst, dst_stride, nr);
}

template <int NC>
void Q6_KCols(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst, size_t dst_stride,
              int nr) {
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) a[c] = act + size_t(c) * act_stride;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += kQ6BlockBytes) {
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      const __m512i nsc = Ld(panel + kQ6Nsc + p * 64);
      for (int c = 0; c < NC; ++c) sumi[c] = _mm512_dpwssd_epi32(sumi[c], nsc, Bcast32(a[c] + kActBsums16 + p * 4));
    }
    for (int g = 0; g < 16; ++g) {
      const uint8_t* wq = panel + size_t(g) * 4 * 64;
      __m512i dot[NC];
      for (int c = 0; c < NC; ++c) dot[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        const __m512i w = Ld(wq + t * 64);
        for (int c = 0; c < NC; ++c) dot[c] = _mm512_dpbusd_epi32(dot[c], w, Bcast32(a[c] + g * 16 + t * 4));
      }
      const __m512i sc = Ld(panel + kQ6Sc + size_t(g) * 64);
      for (int c = 0; c < NC; ++c) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(dot[c], sc));
    }
    const __m512 d = _mm512_loadu_ps(panel + kQ6D);
    for (int c = 0; c < NC; ++c) {
      acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d, BcastF(a[c] + kActD)), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
      a[c] += kActBlockBytes;
    }
  }
  Store<NC>(acc, dst, dst_stride, nr);
}

using ColsFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*, size_t, int);

// Column chunks of kMaxNc, then one chunk of the remainder.
template <int kMaxNc>
void RunCols(const ColsFn* fns, int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
             size_t dst_stride, int nr) {
  const int64_t nb = K / kQK;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kMaxNc <= nc; c += kMaxNc)
    fns[kMaxNc](nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
  if (c < nc) fns[nc - c](nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
}

constexpr ColsFn kScaleMinFns[] = {nullptr,         ScaleMinCols<1>, ScaleMinCols<2>, ScaleMinCols<3>, ScaleMinCols<4>,
                                   ScaleMinCols<5>, ScaleMinCols<6>, ScaleMinCols<7>, ScaleMinCols<8>};
constexpr ColsFn kQ6_KFns[] = {nullptr,     Q6_KCols<1>, Q6_KCols<2>, Q6_KCols<3>, Q6_KCols<4>,
                               Q6_KCols<5>, Q6_KCols<6>, Q6_KCols<7>, Q6_KCols<8>};

}  // namespace

// QuantizeRowQ8_K (kquants.cpp) into the activation layout, bit-identical to it: amax = max |x|,
// `max` = the first element of that magnitude, iscale = -127 / max, q = min(127, round half to even
// (iscale * x)) (vcvtps2dq in the default rounding mode = nearbyintf), d = 1 / iscale; all-zero
// blocks get d = 0. (NaN inputs are not reproduced: the scalar loop skips them, vmaxps does not.)
void FromFloatQ8_KAct(const float* x, void* act, int64_t K) {
  uint8_t* out = static_cast<uint8_t*>(act);
  for (int64_t b = 0; b < K / kQK; ++b, x += kQK, out += kActBlockBytes) {
    __m512 v[16];
    __m512 amax16 = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) {
      v[i] = _mm512_loadu_ps(x + 16 * i);
      amax16 = _mm512_max_ps(amax16, _mm512_abs_ps(v[i]));
    }
    const float amax = _mm512_reduce_max_ps(amax16);
    std::memset(out + kActD + 4, 0, kActBlockBytes - kActD - 4);
    if (!(amax > 0)) {
      std::memset(out, 0, kActD + 4);
      continue;
    }
    const __m512 am = _mm512_set1_ps(amax);
    float max = 0;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), am, _CMP_EQ_OQ);
      if (m) {
        max = x[16 * i + __builtin_ctz(m)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i lim = _mm512_set1_epi32(127);
    int16_t bs16[16];
    for (int i = 0; i < 16; ++i) {
      const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, v[i])), lim);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * i), _mm512_cvtepi32_epi8(q));
      bs16[i] = int16_t(_mm512_reduce_add_epi32(q));
    }
    int16_t bs32[8];
    for (int j = 0; j < 8; ++j) bs32[j] = int16_t(bs16[2 * j] + bs16[2 * j + 1]);
    std::memcpy(out + kActBsums16, bs16, sizeof bs16);
    std::memcpy(out + kActBsums32, bs32, sizeof bs32);
    const float d = 1 / iscale;
    std::memcpy(out + kActD, &d, 4);
  }
}

void GemmKernelScaleMinVnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                            size_t dst_stride, int nr) {
  RunCols<8>(kScaleMinFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

void GemmKernelQ6_KVnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                        size_t dst_stride, int nr) {
  RunCols<8>(kQ6_KFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

}  // namespace stowage::cpu::avx512
