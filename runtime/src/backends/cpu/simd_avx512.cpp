// AVX-512 kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni + AVX2/FMA/F16C; only called when DetectIsa() == kAvx512, and the integer dots only
// when CpuHasAvx512Vnni()). The integer dots use vpdpbusd (u8 x s8 -> s32, no saturation).
#include <immintrin.h>

#include <cstring>

#include "kernels.h"
#include "quants.h"

namespace stowage::cpu::avx512 {
namespace {

inline float H2F(fp16_t h) { return _cvtsh_ss(h); }

inline float Hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

// ggml_vec_dot_f32/_f16 structure (GGML_F32_STEP = 64 on AVX-512): four 16-lane accumulators
// over n & ~63 elements, pairwise reduction, leftovers one by one (F32 in float, F16 in double).
namespace {
inline float Reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  a0 = _mm512_add_ps(a0, a2);
  a1 = _mm512_add_ps(a1, a3);
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}
}  // namespace

void VecDotF32(int64_t n, float* s, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t np = n & ~int64_t(63);
  for (int64_t i = 0; i < np; i += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
  }
  float sum = Reduce4(a0, a1, a2, a3);
  for (int64_t i = np; i < n; ++i) sum += x[i] * y[i];
  *s = sum;
}

void VecDotF16(int64_t n, float* s, const void* vx, const void* vy) {
  const fp16_t* x = static_cast<const fp16_t*>(vx);
  const fp16_t* y = static_cast<const fp16_t*>(vy);
  auto ld = [](const fp16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); };
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t np = n & ~int64_t(63);
  for (int64_t i = 0; i < np; i += 64) {
    a0 = _mm512_fmadd_ps(ld(x + i), ld(y + i), a0);
    a1 = _mm512_fmadd_ps(ld(x + i + 16), ld(y + i + 16), a1);
    a2 = _mm512_fmadd_ps(ld(x + i + 32), ld(y + i + 32), a2);
    a3 = _mm512_fmadd_ps(ld(x + i + 48), ld(y + i + 48), a3);
  }
  double sum = Reduce4(a0, a1, a2, a3);
  for (int64_t i = np; i < n; ++i) sum += double(H2F(x[i]) * H2F(y[i]));
  *s = float(sum);
}

void VecDotQ8_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[ib].qs));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    // |x| as u8 times sign(x)*y as s8 (|x| = 128 for -128 is fine for vpdpbusd).
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(qx), _mm256_sign_epi8(qy, qx));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d)), _mm256_cvtepi32_ps(p), acc);
  }
  *s = Hsum256(acc);
}

void VecDotQ4_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_0* x = static_cast<const BlockQ4_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[ib].qs));
    const __m256i qx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4);  // 0..15
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    // dot(q - 8, y) = dot(q, y) - dot(8, y)
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qx, qy);
    const __m256i c = _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, qy);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d)), _mm256_cvtepi32_ps(_mm256_sub_epi32(p, c)), acc);
  }
  *s = Hsum256(acc);
}

void VecDotQ4_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_K* x = static_cast<const BlockQ4_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    // The 8 six-bit scales and mins (GetScaleMinK4 for j = 0..7), four bytes at a time as
    // ggml's ggml_vec_dot_q4_K_q8_K: scales in sc[0..1], mins in mn[0..1].
    uint32_t u[3];
    std::memcpy(u, x[i].scales, 12);
    const uint32_t sc[2] = {u[0] & kmask1, (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4)};
    const uint32_t mn[2] = {u[1] & kmask1, ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4)};
    // summs = sum_j bsums[j] * min[j / 2], as 8 partial dwords.
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(mn[1]), int(mn[0])));
    const __m256i msum = _mm256_madd_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)),
        _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16)));
    __m256i isum = _mm256_setzero_si256();
    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int j = 0; j < 4; ++j, q4 += 32, q8 += 64) {
      const uint32_t scw = sc[j / 2] >> (16 * (j % 2));  // scales 2j, 2j + 1 in bytes 0, 1
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4));
      const __m256i lo = _mm256_and_si256(v, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const __m256i p0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), lo,
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8)));
      const __m256i p1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), hi,
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32)));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p0, _mm256_set1_epi32(int(scw & 0xFF))));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p1, _mm256_set1_epi32(int((scw >> 8) & 0xFF))));
    }
    // One reduction for both integer sums: [isum, summs, isum, summs].
    const __m256i h = _mm256_hadd_epi32(isum, msum);
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    r = _mm_hadd_epi32(r, r);
    const int isum_s = _mm_cvtsi128_si32(r), summs = _mm_extract_epi32(r, 1);
    const float d = H2F(x[i].d) * y[i].d;
    const float dmin = H2F(x[i].dmin) * y[i].d;
    sumf += d * float(isum_s) - dmin * float(summs);
  }
  *s = sumf;
}

void VecDotQ6_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ6_K* x = static_cast<const BlockQ6_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    // q = a - 32: dot(q, y) = dot(a, y) - 32 * sum_g scale[g] * bsums[g]; the correction starts
    // the accumulator (8 partial dwords, bsums x scales by vpmaddwd).
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)), sc16);
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, q8 += 128, sc += 8) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      const __m256i sc32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)));  // 8 scales
      __m256i a[4];
      a[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
      a[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
      a[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
      a[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
      for (int k = 0; k < 4; ++k) {
        const __m256i yk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32 * k));
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a[k], yk);  // lanes 0-3: group 2k, 4-7: 2k+1
        const __m256i scales = _mm256_permutevar8x32_epi32(sc32, _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1,
                                                                                  2 * k + 1, 2 * k + 1, 2 * k + 1));
        isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, scales));
      }
    }
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
    r = _mm_hadd_epi32(r, r);
    r = _mm_hadd_epi32(r, r);
    sumf += H2F(x[i].d) * y[i].d * float(_mm_cvtsi128_si32(r));
  }
  *s = sumf;
}

// Q4_0x8 (CPU_REPACK) gemv with vpdpbusd: each 64-byte load holds the 16 quant bytes of 4 rows, so
// one vpdpbusd per nibble half yields 4 partial dwords per row; the -8 offset of the nibbles enters
// as the accumulator's start value -8 * sum(y) (per dword position, identical for every row). The
// integer sums are exact, and the float part is the scalar reference's fma(sumi, d_x * d_y, acc)
// per block, so results are bit-identical to scalar::/avx2::GemvQ4_0x8Q8_0.
void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  // After the reduction, 128-bit lane L holds row L in dword 0 and row L + 4 in dword 1.
  const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += 8 * sizeof(BlockQ4_0)) {
    const __m512i ylo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs)));
    const __m512i yhi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
    const __m512i off = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, ylo), eight, yhi);
    const __m512i start = _mm512_sub_epi32(zero, off);
    const __m512i v0 = _mm512_loadu_si512(x + 16), v1 = _mm512_loadu_si512(x + 80);  // rows 0-3, 4-7
    __m512i p0 = _mm512_dpbusd_epi32(start, _mm512_and_si512(v0, m4), ylo);
    p0 = _mm512_dpbusd_epi32(p0, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4), yhi);
    __m512i p1 = _mm512_dpbusd_epi32(start, _mm512_and_si512(v1, m4), ylo);
    p1 = _mm512_dpbusd_epi32(p1, _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4), yhi);
    // Per lane: [a0+a2, b0+b2, a1+a3, b1+b3], then add the swapped 64-bit halves.
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, static_cast<_MM_PERM_ENUM>(0x4E)));
    const __m256i sumi = _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows, u));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))),
                                   _mm256_set1_ps(H2F(y[b].d)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
  }
  _mm256_storeu_ps(s, acc);
}

}  // namespace stowage::cpu::avx512
