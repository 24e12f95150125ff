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
#include "quants.h"

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

// ---- packing: quants unpacked per row into tmp[16][256] (one unsigned byte per element, element
// order), then interleaved by 16x16 dword transposes (k-step s of the 16 rows -> 64 bytes).

inline __m256i Ld256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void St256(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

void UnpackQ4_K(const BlockQ4_K& x, uint8_t* v) {
  const __m256i m4 = _mm256_set1_epi8(0xF);
  for (int i = 0; i < 4; ++i) {
    const __m256i q = Ld256(x.qs + 32 * i);
    St256(v + 64 * i, _mm256_and_si256(q, m4));
    St256(v + 64 * i + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
  }
}

void UnpackQ5_K(const BlockQ5_K& x, uint8_t* v) {
  const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
  const __m256i qh = Ld256(x.qh);
  for (int i = 0; i < 4; ++i) {
    const __m256i q = Ld256(x.qs + 32 * i);
    // bit j of qh[l] is the fifth bit of sub-block j (16-bit shifts: bits crossing into the lower
    // byte sit above bit 0 and are masked off)
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), one), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i + 1), one), 4);
    St256(v + 64 * i, _mm256_or_si256(_mm256_and_si256(q, m4), h0));
    St256(v + 64 * i + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1));
  }
}

void UnpackQ6_K(const BlockQ6_K& x, uint8_t* v) {
  const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h, v += 128) {
    const __m256i l0 = Ld256(x.ql + 64 * h), l1 = Ld256(x.ql + 64 * h + 32), qh = Ld256(x.qh + 32 * h);
    auto hi = [&](int shift) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), m2), 4); };
    St256(v + 0, _mm256_or_si256(_mm256_and_si256(l0, m4), hi(0)));
    St256(v + 32, _mm256_or_si256(_mm256_and_si256(l1, m4), hi(2)));
    St256(v + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), hi(4)));
    St256(v + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), hi(6)));
  }
}

// Scales/mins/d/dmin as gemm_kquants::PackScaleMinMeta writes them; the 6-bit scales and mins are
// decoded four at a time (ggml's kmask form of get_scale_min_k4): bytes 0..7 of u = scales,
// 8..15 = mins.
template <typename Block>
void MetaScaleMin(const Block& x, int r, uint8_t* blk) {
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, x.scales, 12);
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t m0 = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = m0;
  u[0] &= kmask1;
  uint8_t b[16];
  std::memcpy(b, u, 16);
  for (int j = 0; j < 8; ++j) {
    const int32_t sc = b[j];
    std::memcpy(blk + kSmSc + (size_t(j) * kGemmPanelRows + r) * 4, &sc, 4);
  }
  for (int p = 0; p < 4; ++p) {
    const uint32_t mm = uint32_t(b[8 + 2 * p]) | uint32_t(b[9 + 2 * p]) << 16;
    std::memcpy(blk + kSmMins + (size_t(p) * kGemmPanelRows + r) * 4, &mm, 4);
  }
  const float d = _cvtsh_ss(x.d), dmin = _cvtsh_ss(x.dmin);
  std::memcpy(blk + kSmD + size_t(r) * 4, &d, 4);
  std::memcpy(blk + kSmDmin + size_t(r) * 4, &dmin, 4);
}
void MetaQ4_K(const BlockQ4_K& x, int r, uint8_t* blk) { MetaScaleMin(x, r, blk); }
void MetaQ5_K(const BlockQ5_K& x, int r, uint8_t* blk) { MetaScaleMin(x, r, blk); }
// Scale16 panel metadata as gemm_kquants.cpp's PackScale16Meta writes it.
void MetaScale16(const int8_t* scales, int zero, fp16_t dh, int r, uint8_t* blk) {
  for (int g = 0; g < 16; ++g) {
    const int32_t sc = scales[g];
    std::memcpy(blk + kQ6Sc + (size_t(g) * kGemmPanelRows + r) * 4, &sc, 4);
  }
  for (int p = 0; p < 8; ++p) {
    const uint32_t nsc =
        uint32_t(uint16_t(-zero * scales[2 * p])) | uint32_t(uint16_t(-zero * scales[2 * p + 1])) << 16;
    std::memcpy(blk + kQ6Nsc + (size_t(p) * kGemmPanelRows + r) * 4, &nsc, 4);
  }
  const float d = _cvtsh_ss(dh);
  std::memcpy(blk + kQ6D + size_t(r) * 4, &d, 4);
}
void MetaQ6_K(const BlockQ6_K& x, int r, uint8_t* blk) { MetaScale16(x.scales, 32, x.d, r, blk); }
void MetaQ3_K(const BlockQ3_K& x, int r, uint8_t* blk) {
  int8_t sc[16];
  UnpackQ3KScales(x.scales, sc);  // kquants.cpp (baseline code)
  MetaScale16(sc, 4, x.d, r, blk);
}

// Q3_K: element 128 h + 32 j + l = bits 2j..2j+1 of qs[32 h + l] | bit (4 h + j) of hmask[l] << 2.
void UnpackQ3_K(const BlockQ3_K& x, uint8_t* v) {
  const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  const __m256i hm = Ld256(x.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = Ld256(x.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2);
      const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one), 2);
      St256(v + 128 * h + 32 * j, _mm256_or_si256(lo, hi));
    }
  }
}

// out + 64 s = dword s of the 16 rows in + kQK r (s = 0..15): a 16x16 transpose of 32-bit elements
// (unpack 32 / unpack 64 within 128-bit lanes, then two 128-bit lane shuffles).
inline void Transpose16x16(const uint8_t* in, uint8_t* out) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    const __m512i a = Ld(in + size_t(2 * i) * kQK), b = Ld(in + size_t(2 * i + 1) * kQK);
    t[2 * i] = _mm512_unpacklo_epi32(a, b);
    t[2 * i + 1] = _mm512_unpackhi_epi32(a, b);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + e], lane l: rows 4g..4g+3 of element 4l + e
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), w0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88), w1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    _mm512_storeu_si512(out + 64 * (0 + e), _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_storeu_si512(out + 64 * (8 + e), _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_storeu_si512(out + 64 * (4 + e), _mm512_shuffle_i32x4(w0, w1, 0x88));
    _mm512_storeu_si512(out + 64 * (12 + e), _mm512_shuffle_i32x4(w0, w1, 0xDD));
  }
}

// Same bytes as the scalar Pack of gemm_kquants.cpp (rows nr..15 all zero).
template <typename Block, size_t kBlockBytes, void (*kUnpack)(const Block&, uint8_t*),
          void (*kMeta)(const Block&, int, uint8_t*)>
void PackRows(int64_t K, const void* w, size_t row_stride, int nr, void* panel) {
  alignas(64) uint8_t tmp[kGemmPanelRows][kQK];
  if (nr < kGemmPanelRows) std::memset(tmp[nr], 0, size_t(kGemmPanelRows - nr) * kQK);
  uint8_t* blk = static_cast<uint8_t*>(panel);
  for (int64_t b = 0; b < K / kQK; ++b, blk += kBlockBytes) {
    if (nr < kGemmPanelRows) std::memset(blk + kQK * kGemmPanelRows, 0, kBlockBytes - kQK * kGemmPanelRows);
    for (int r = 0; r < nr; ++r) {
      const Block& x = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * row_stride)[b];
      kUnpack(x, tmp[r]);
      kMeta(x, r, blk);
    }
    for (int s0 = 0; s0 < kQK / 4; s0 += 16) Transpose16x16(&tmp[0][4 * s0], blk + 64 * s0);
  }
}

}  // namespace

void PackQ3_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ3_K, kQ6BlockBytes, UnpackQ3_K, MetaQ3_K>(K, w, row_stride, nr, panel);
}
void PackQ4_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ4_K, kSmBlockBytes, UnpackQ4_K, MetaQ4_K>(K, w, row_stride, nr, panel);
}
void PackQ5_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ5_K, kSmBlockBytes, UnpackQ5_K, MetaQ5_K>(K, w, row_stride, nr, panel);
}
void PackQ6_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ6_K, kQ6BlockBytes, UnpackQ6_K, MetaQ6_K>(K, w, row_stride, nr, panel);
}

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
