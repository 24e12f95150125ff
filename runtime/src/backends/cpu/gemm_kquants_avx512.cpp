// GEMM family "kquants", AVX-512 VNNI kernels (this file is compiled with -mavx512f/bw/vl/dq/vnni;
// the lookup in gemm_kquants.cpp returns these only at IsaLevel::kAvx512Vnni). Layouts and integer
// sums: see gemm_kquants.cpp. One zmm lane per panel row; per k-step of 4 elements one packed
// weight zmm (16 rows x 4 unsigned bytes) feeds NC columns through
// vpdpbusd(acc, w, broadcast of 4 activation bytes); per group the int32 dot is scaled by the rows'
// scales (vpmulld) into a super-block int32 sum; the zero-point terms (mins of Q2_K/Q4_K/Q5_K,
// -z * scale of Q3_K/Q6_K/IQ4_XS) come from vpdpwssd of packed int16 row pairs with the column's
// bsums.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "gemm.h"
#include "gemm_kquants_layout.h"
#include "kernels.h"
#include "quants.h"

namespace stowage::cpu::avx512 {
namespace {

using gemm_kq::kActBlockBytes;
using gemm_kq::kActBsums16;
using gemm_kq::kActBsums32;
using gemm_kq::kActD;
using gemm_kq::kQK;
using gemm_kq::Layout;
using gemm_kq::SmLayout16;
using gemm_kq::SmLayout32;
using gemm_kq::StoreZeroQsBlock;
using gemm_kq::SzLayout16;
using gemm_kq::SzLayout32;

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

// One super-block of NC columns: sumi[c] += sum_g sc_g * dot_g(q, a[c]) (a[c]: the column's
// activation record).
template <int NC, typename L>
inline void GroupDots(const uint8_t* panel, const uint8_t* const* a, __m512i* sumi) {
  constexpr int kSteps = kQK / L::kGroups / 4;
  for (int g = 0; g < L::kGroups; ++g) {
    const uint8_t* wq = panel + size_t(g) * kSteps * 64;
    __m512i dot[NC];
    for (int c = 0; c < NC; ++c) dot[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < kSteps; ++t) {
      const __m512i w = Ld(wq + t * 64);
      for (int c = 0; c < NC; ++c)
        dot[c] = _mm512_dpbusd_epi32(dot[c], w, Bcast32(a[c] + g * (kQK / L::kGroups) + t * 4));
    }
    const __m512i sc = Ld(panel + L::kSc + size_t(g) * 64);
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(dot[c], sc));
  }
}

// Scale-min panels (Q4_K/Q5_K: G = 32, Q2_K: G = 16).
template <int NC, typename L>
void ScaleMinCols(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
                  size_t dst_stride, int nr) {
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) a[c] = act + size_t(c) * act_stride;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += L::kBytes) {
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    GroupDots<NC, L>(panel, a, sumi);
    const __m512 d = _mm512_loadu_ps(panel + L::kD), dmin = _mm512_loadu_ps(panel + L::kDmin);
    for (int c = 0; c < NC; ++c) {
      __m512i summ = _mm512_setzero_si512();
      for (int p = 0; p < L::kGroups / 2; ++p)
        summ =
            _mm512_dpwssd_epi32(summ, Ld(panel + L::kPairs + p * 64), Bcast32(a[c] + L::kActBsums + p * 4));
      __m512 blk = _mm512_mul_ps(_mm512_cvtepi32_ps(sumi[c]), d);
      blk = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), dmin, blk);
      acc[c] = _mm512_fmadd_ps(blk, BcastF(a[c] + kActD), acc[c]);
      a[c] += kActBlockBytes;
    }
  }
  Store<NC>(acc, dst, dst_stride, nr);
}

// Scale-zero panels (Q6_K/Q3_K: G = 16, IQ4_XS: G = 32): the zero-point term starts the sum.
template <int NC, typename L>
void ScaleZeroCols(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
                   size_t dst_stride, int nr) {
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) a[c] = act + size_t(c) * act_stride;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += L::kBytes) {
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    for (int p = 0; p < L::kGroups / 2; ++p) {
      const __m512i t = Ld(panel + L::kPairs + p * 64);
      for (int c = 0; c < NC; ++c)
        sumi[c] = _mm512_dpwssd_epi32(sumi[c], t, Bcast32(a[c] + L::kActBsums + p * 4));
    }
    GroupDots<NC, L>(panel, a, sumi);
    const __m512 d = _mm512_loadu_ps(panel + L::kD);
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
void RunCols(const ColsFn* fns, int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
             float* dst, size_t dst_stride, int nr) {
  const int64_t nb = K / kQK;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kMaxNc <= nc; c += kMaxNc)
    fns[kMaxNc](nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
  if (c < nc)
    fns[nc - c](nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
}

template <template <int, typename> class F, typename L>
struct Fns {
  static constexpr ColsFn kFns[] = {nullptr,      F<1, L>::Run, F<2, L>::Run, F<3, L>::Run, F<4, L>::Run,
                                    F<5, L>::Run, F<6, L>::Run, F<7, L>::Run, F<8, L>::Run};
};
template <int NC, typename L>
struct ScaleMin {
  static void Run(int64_t nb, const uint8_t* p, const uint8_t* a, size_t as, float* d, size_t ds, int nr) {
    ScaleMinCols<NC, L>(nb, p, a, as, d, ds, nr);
  }
};
template <int NC, typename L>
struct ScaleZero {
  static void Run(int64_t nb, const uint8_t* p, const uint8_t* a, size_t as, float* d, size_t ds, int nr) {
    ScaleZeroCols<NC, L>(nb, p, a, as, d, ds, nr);
  }
};

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
    auto hi = [&](int shift) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), m2), 4);
    };
    St256(v + 0, _mm256_or_si256(_mm256_and_si256(l0, m4), hi(0)));
    St256(v + 32, _mm256_or_si256(_mm256_and_si256(l1, m4), hi(2)));
    St256(v + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), hi(4)));
    St256(v + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), hi(6)));
  }
}

// Panel metadata of row r exactly as gemm_kquants.cpp's PutMeta writes it: group scales sc[] as
// int32, zero-point factors t[] as int16 pairs, d (and dmin) as floats.
template <typename L, typename S, typename T>
inline void PutMeta(const S* sc, const T* t, fp16_t dh, fp16_t dminh, int r, uint8_t* blk) {
  for (int g = 0; g < L::kGroups; ++g) {
    const int32_t v = sc[g];
    std::memcpy(blk + L::kSc + (size_t(g) * kGemmPanelRows + r) * 4, &v, 4);
  }
  for (int p = 0; p < L::kGroups / 2; ++p) {
    const uint32_t v = uint32_t(uint16_t(t[2 * p])) | uint32_t(uint16_t(t[2 * p + 1])) << 16;
    std::memcpy(blk + L::kPairs + (size_t(p) * kGemmPanelRows + r) * 4, &v, 4);
  }
  const float d = _cvtsh_ss(dh);
  std::memcpy(blk + L::kD + size_t(r) * 4, &d, 4);
  if (L::kBytes - L::kD == 128) {
    const float dmin = _cvtsh_ss(dminh);
    std::memcpy(blk + L::kDmin + size_t(r) * 4, &dmin, 4);
  }
}

// Q4_K/Q5_K: the 6-bit scales and mins decoded four at a time (ggml's kmask form of
// get_scale_min_k4): bytes 0..7 of u = scales, 8..15 = mins.
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
  PutMeta<SmLayout32>(b, b + 8, x.d, x.dmin, r, blk);
}
void MetaQ4_K(const BlockQ4_K& x, int r, uint8_t* blk) { MetaScaleMin(x, r, blk); }
void MetaQ5_K(const BlockQ5_K& x, int r, uint8_t* blk) { MetaScaleMin(x, r, blk); }
void MetaQ2_K(const BlockQ2_K& x, int r, uint8_t* blk) {
  uint8_t sc[16], mn[16];
  for (int g = 0; g < 16; ++g) {
    sc[g] = x.scales[g] & 0xF;
    mn[g] = x.scales[g] >> 4;
  }
  PutMeta<SmLayout16>(sc, mn, x.d, x.dmin, r, blk);
}
template <typename L>
inline void MetaScaleZero(const int8_t* sc, int zero, fp16_t d, int r, uint8_t* blk) {
  int t[L::kGroups];
  for (int g = 0; g < L::kGroups; ++g) t[g] = -zero * sc[g];
  PutMeta<L>(sc, t, d, 0, r, blk);
}
void MetaQ6_K(const BlockQ6_K& x, int r, uint8_t* blk) {
  MetaScaleZero<SzLayout16>(x.scales, 32, x.d, r, blk);
}
void MetaQ3_K(const BlockQ3_K& x, int r, uint8_t* blk) {
  int8_t sc[16];
  UnpackQ3KScales(x.scales, sc);  // kquants.cpp (baseline code)
  MetaScaleZero<SzLayout16>(sc, 4, x.d, r, blk);
}
void MetaIQ4_XS(const BlockIQ4_XS& x, int r, uint8_t* blk) {
  int8_t sc[8];  // ls - 32: 4 low bits in scales_l, 2 high bits in scales_h (ggml dequantize_row_iq4_xs)
  for (int ib = 0; ib < 8; ++ib)
    sc[ib] =
        int8_t((((x.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((x.scales_h >> 2 * ib) & 3) << 4)) - 32);
  MetaScaleZero<SzLayout32>(sc, 128, x.d, r, blk);
}

// Q2_K: element 128 h + 32 j + l = bits 2j..2j+1 of qs[32 h + l].
void UnpackQ2_K(const BlockQ2_K& x, uint8_t* v) {
  const __m256i m2 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = Ld256(x.qs + 32 * h);
    for (int j = 0; j < 4; ++j)
      St256(v + 128 * h + 32 * j, _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2));
  }
}

// IQ4_XS: kvalues_iq4nl[nibble] + 128 by a byte shuffle (element 32 ib + j: low nibble of
// qs[16 ib + j], 32 ib + 16 + j: high nibble).
void UnpackIQ4_XS(const BlockIQ4_XS& x, uint8_t* v) {
  alignas(16) uint8_t lut[16];
  for (int i = 0; i < 16; ++i) lut[i] = uint8_t(kValuesIQ4NL[i] + 128);
  const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(lut)), m4 = _mm_set1_epi8(0xF);
  for (int ib = 0; ib < 8; ++ib) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs + 16 * ib));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(v + 32 * ib), _mm_shuffle_epi8(table, _mm_and_si128(q, m4)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(v + 32 * ib + 16),
                     _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4)));
  }
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
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88),
                  w0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88),
                  w1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    _mm512_storeu_si512(out + 64 * (0 + e), _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_storeu_si512(out + 64 * (8 + e), _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_storeu_si512(out + 64 * (4 + e), _mm512_shuffle_i32x4(w0, w1, 0x88));
    _mm512_storeu_si512(out + 64 * (12 + e), _mm512_shuffle_i32x4(w0, w1, 0xDD));
  }
}

// Same bytes as the scalar Pack of gemm_kquants.cpp (rows nr..15 all zero).
// kQ4_Kx8: `w` is in the Q4_Kx8 layout (RepackQ4_K; an 8-row group per 8 * row_stride bytes), whose
// rows are read back as plain blocks (Q4_Kx8ToBlock).
template <typename Block, size_t kBlockBytes, void (*kUnpack)(const Block&, uint8_t*),
          void (*kMeta)(const Block&, int, uint8_t*), bool kQ4_Kx8 = false>
void PackRows(int64_t K, const void* w, size_t row_stride, int nr, void* panel) {
  alignas(64) uint8_t tmp[kGemmPanelRows][kQK];
  if (nr < kGemmPanelRows) std::memset(tmp[nr], 0, size_t(kGemmPanelRows - nr) * kQK);
  uint8_t* blk = static_cast<uint8_t*>(panel);
  for (int64_t b = 0; b < K / kQK; ++b, blk += kBlockBytes) {
    if (nr < kGemmPanelRows) std::memset(blk + kQK * kGemmPanelRows, 0, kBlockBytes - kQK * kGemmPanelRows);
    for (int r = 0; r < nr; ++r) {
      if constexpr (kQ4_Kx8) {
        static_assert(std::is_same_v<Block, BlockQ4_K>, "Q4_Kx8 holds Q4_K rows");
        const uint8_t* col =
            static_cast<const uint8_t*>(w) + size_t(r / 8) * 8 * row_stride + size_t(b) * q4_kx8::kColBytes;
        if (r % 8 == 0)  // one stream per 8-row group: prefetch ~3 columns ahead
          for (size_t off = 0; off < q4_kx8::kColBytes; off += 64)
            _mm_prefetch(reinterpret_cast<const char*>(col) + 3 * q4_kx8::kColBytes + off, _MM_HINT_T0);
        BlockQ4_K x;
        Q4_Kx8ToBlock(col, r % 8, &x);
        kUnpack(x, tmp[r]);
        kMeta(x, r, blk);
      } else {
        const Block& x =
            reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * row_stride)[b];
        // 16 row streams at once: prefetch each ~3 super-blocks ahead (the hardware prefetchers do
        // not follow that many; the weights come from DRAM once per MUL_MAT)
        const char* ahead = reinterpret_cast<const char*>(&x + 3);
        for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
        kUnpack(x, tmp[r]);
        kMeta(x, r, blk);
      }
    }
    for (int s0 = 0; s0 < kQK / 4; s0 += 16) Transpose16x16(&tmp[0][4 * s0], blk + 64 * s0);
  }
}

}  // namespace

void PackQ2_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ2_K, SmLayout16::kBytes, UnpackQ2_K, MetaQ2_K>(K, w, row_stride, nr, panel);
}
void PackQ3_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ3_K, SzLayout16::kBytes, UnpackQ3_K, MetaQ3_K>(K, w, row_stride, nr, panel);
}
void PackQ4_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout == kLayoutQ4_Kx8) {
    PackRows<BlockQ4_K, SmLayout32::kBytes, UnpackQ4_K, MetaQ4_K, true>(K, w, row_stride, nr, panel);
    return;
  }
  PackRows<BlockQ4_K, SmLayout32::kBytes, UnpackQ4_K, MetaQ4_K>(K, w, row_stride, nr, panel);
}
void PackQ5_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ5_K, SmLayout32::kBytes, UnpackQ5_K, MetaQ5_K>(K, w, row_stride, nr, panel);
}
void PackQ6_K(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockQ6_K, SzLayout16::kBytes, UnpackQ6_K, MetaQ6_K>(K, w, row_stride, nr, panel);
}
void PackIQ4_XS(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows<BlockIQ4_XS, SzLayout32::kBytes, UnpackIQ4_XS, MetaIQ4_XS>(K, w, row_stride, nr, panel);
}

// QuantizeRowQ8_K (kquants.cpp) into the activation layout, bit-identical to it: amax = max |x|,
// `max` = the first element of that magnitude, iscale = -127 / max, q = min(127, round half to even
// (iscale * x)) (vcvtps2dq in the default rounding mode = nearbyintf), d = 1 / iscale; all-zero
// blocks get d = 0; a block with a NaN or +-inf gets d = NaN and qs = bsums = 0, as in
// QuantizeRowQ8_K.
void FromFloatQ8_KAct(const float* x, void* act, int64_t K) {
  uint8_t* out = static_cast<uint8_t*>(act);
  const __m512 big = _mm512_set1_ps(FLT_MAX);
  for (int64_t b = 0; b < K / kQK; ++b, x += kQK, out += kActBlockBytes) {
    __m512 v[16];
    __m512 amax16 = _mm512_setzero_ps();
    __mmask16 nonfinite = 0;
    for (int i = 0; i < 16; ++i) {
      v[i] = _mm512_loadu_ps(x + 16 * i);
      const __m512 a = _mm512_abs_ps(v[i]);
      amax16 = _mm512_max_ps(amax16, a);
      nonfinite |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ);  // NaN (unordered) or inf
    }
    std::memset(out + kActD + 4, 0, kActBlockBytes - kActD - 4);
    if (nonfinite) {
      const float d = std::numeric_limits<float>::quiet_NaN();
      std::memset(out, 0, kActD);
      std::memcpy(out + kActD, &d, 4);
      continue;
    }
    const float amax = _mm512_reduce_max_ps(amax16);
    if (!(amax > 0)) {
      StoreZeroQsBlock(out, 0.0f);
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
    if (std::isinf(iscale)) {  // |max| < 127 / FLT_MAX: as QuantizeRowQ8_K (every product +-inf / NaN -> 0)
      StoreZeroQsBlock(out, 1 / iscale);
      continue;
    }
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i lim = _mm512_set1_epi32(127), low = _mm512_set1_epi32(-128);
    int16_t bs16[16];
    for (int i = 0; i < 16; ++i) {
      // Clamped to [-128, 127] (the lower bound a no-op for finite x; defensive against
      // vcvtps2dq's INT_MIN), so bsums are sums of exactly the stored int8.
      const __m512i q =
          _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, v[i])), lim), low);
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

void GemmKernelScaleMin32Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                              float* dst, size_t dst_stride, int nr) {
  RunCols<8>(Fns<ScaleMin, SmLayout32>::kFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelScaleMin16Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                              float* dst, size_t dst_stride, int nr) {
  RunCols<8>(Fns<ScaleMin, SmLayout16>::kFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelScaleZero16Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                               float* dst, size_t dst_stride, int nr) {
  RunCols<8>(Fns<ScaleZero, SzLayout16>::kFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelScaleZero32Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                               float* dst, size_t dst_stride, int nr) {
  RunCols<8>(Fns<ScaleZero, SzLayout32>::kFns, K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

}  // namespace stowage::cpu::avx512
