// AVX-512 kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni + AVX2/FMA/F16C; only called at IsaLevel::kAvx512 and above, and the integer dots
// only at kAvx512Vnni). The integer dots use vpdpbusd (u8 x s8 -> s32, no saturation).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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
  auto ld = [](const fp16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  };
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
    const __m256i p =
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(qx), _mm256_sign_epi8(qy, qx));
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
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d)),
                          _mm256_cvtepi32_ps(_mm256_sub_epi32(p, c)), acc);
  }
  *s = Hsum256(acc);
}

// Q4_K . Q8_K with 512-bit registers. Per 32-byte chunk j of nibbles (sub-blocks 2j: low nibbles,
// 2j + 1: high nibbles), one zmm holds [chunk j | chunk j >> 4] & 0x0F, which lines up with the 64
// contiguous activations q8[64j .. 64j + 63]; vpmaddubsw gives int16 pair sums (|.| <= 2 * 15 * 128,
// no saturation) and vpdpwssd multiplies them by the sub-block scale (words 0-15: scale 2j, 16-31:
// scale 2j + 1) into int32 lanes, exactly. The mins term sum_j bsums[j] * min[j / 2] is 8 exact int32
// lanes (vpmaddwd). The float part is ggml's AVX2 ggml_vec_dot_q4_K_q8_K's, operation for operation
// (bit-identical to llama.cpp's CPU backend): the 16 int32 lanes fold into ggml's 8 (lane l: the
// elements e with e % 32 in [4l, 4l + 4)), acc = fma(d, float(lane), acc) per super-block; the mins
// fold into 4 lanes (sub-blocks 2q, 2q + 1), accm = fma(-dmin, float(lane), accm); the result is
// hsum_float_8(acc) + ((accm0 + accm2) + (accm1 + accm3)).
void VecDotQ4_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_K* x = static_cast<const BlockQ4_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004LL, 0x0004000400040004LL,
                                          0x0004000400040004LL, 0x0004000400040004LL);
  // Word permutations that spread scale 2j over words 0-15 and scale 2j + 1 over words 16-31.
  __m512i sidx[4];
  for (int j = 0; j < 4; ++j)
    sidx[j] = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(short(2 * j)),
                                      _mm512_set1_epi16(short(2 * j + 1)));
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    // The 8 six-bit scales and mins, four bytes at a time (ggml's kmask form).
    uint64_t u01;
    uint32_t u2;
    std::memcpy(&u01, x[i].scales, 8);
    std::memcpy(&u2, x[i].scales + 8, 4);
    const uint32_t u0 = uint32_t(u01), u1 = uint32_t(u01 >> 32);
    const uint64_t sc = (u0 & kmask1) | (uint64_t((u2 & kmask2) | (((u0 >> 6) & kmask3) << 4)) << 32);
    const uint64_t mn = (u1 & kmask1) | (uint64_t(((u2 >> 4) & kmask2) | (((u1 >> 6) & kmask3) << 4)) << 32);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(sc))));
    const __m128i mn8 = _mm_cvtsi64_si128(int64_t(mn));  // min j in byte j: widen [m0, m0, m1, m1, ..]
    const __m256i msum = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)),
                                           _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8)));
    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    __m512i ia = _mm512_setzero_si512(), ib = _mm512_setzero_si512();
    for (int j = 0; j < 4; j += 2) {
      const __m512i w0 = _mm512_and_si512(
          _mm512_srlv_epi16(
              _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 32 * j))),
              shift),
          m4);
      const __m512i w1 = _mm512_and_si512(
          _mm512_srlv_epi16(
              _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4 + 32 * j + 32))),
              shift),
          m4);
      const __m512i p0 = _mm512_maddubs_epi16(w0, _mm512_loadu_si512(q8 + 64 * j));
      const __m512i p1 = _mm512_maddubs_epi16(w1, _mm512_loadu_si512(q8 + 64 * j + 64));
      ia = _mm512_dpwssd_epi32(ia, p0, _mm512_permutexvar_epi16(sidx[j], sc16));
      ib = _mm512_dpwssd_epi32(ib, p1, _mm512_permutexvar_epi16(sidx[j + 1], sc16));
    }
    const float d = y[i].d * H2F(x[i].d);
    const float dmin = -y[i].d * H2F(x[i].dmin);
    const __m512i is = _mm512_add_epi32(ia, ib);
    const __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(is8), acc);
    const __m128i m4 = _mm_hadd_epi32(_mm256_castsi256_si128(msum), _mm256_extracti128_si256(msum, 1));
    accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(m4), accm);
  }
  accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
  accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
  *s = Hsum256(acc) + _mm_cvtss_f32(accm);
}

// Q6_K . Q8_K with 512-bit registers. Per half (128 weights): one zmm of ql bytes 0-63 and the 32
// qh bytes in both 256-bit halves give a01 = [a0 | a1] and a23 = [a2 | a3] (6-bit values 0..63),
// which line up with q8[0..63] and q8[64..127] of the half. vpmaddubsw (|.| <= 2 * 63 * 128, no
// saturation), then vpdpwssd by the group scales (16 weights per scale: words 8g .. 8g + 7) into
// exact int32 lanes; q = a - 32 enters as -32 * sum_g scale[g] * bsums[g] (vpmaddwd, 8 lanes)
// subtracted from the lanes. The float part is ggml's AVX2 ggml_vec_dot_q6_K_q8_K's (bit-identical to
// llama.cpp's CPU backend): the lanes fold into ggml's 8 (lane l: the elements e with e % 32 in
// [4l, 4l + 4), and the correction of sub-blocks 2l, 2l + 1), acc = fma(d, float(lane), acc) per
// super-block, hsum_float_8 at the end.
void VecDotQ6_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ6_K* x = static_cast<const BlockQ6_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03);
  const long long k2 = 0x0002000200020002LL, k4 = 0x0004000400040004LL, k6 = 0x0006000600060006LL;
  const __m512i sh01 = _mm512_setr_epi64(0, 0, 0, 0, k2, k2, k2, k2);
  const __m512i sh23 = _mm512_setr_epi64(k4, k4, k4, k4, k6, k6, k6, k6);
  // Word permutations: for the zmm of groups 4q .. 4q + 3, words 8g' .. 8g' + 7 take scale 4q + g'.
  __m512i sidx[4];
  for (int q = 0; q < 4; ++q) {
    alignas(64) int16_t idx[32];
    for (int w = 0; w < 32; ++w) idx[w] = int16_t(4 * q + w / 8);
    sidx[q] = _mm512_load_si512(idx);
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i sc16y = _mm256_cvtepi8_epi16(sc8);
    const __m512i sc16 = _mm512_castsi256_si512(sc16y);
    const __m256i corr =
        _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)), sc16y);
    __m512i ia = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
    __m512i ib = _mm512_setzero_si512();
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, q8 += 128) {
      const __m512i l = _mm512_loadu_si512(ql);
      const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
      const __m512i a01 = _mm512_or_si512(
          _mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh01), m3), 4));
      const __m512i a23 =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh23), m3), 4));
      const __m512i p01 = _mm512_maddubs_epi16(a01, _mm512_loadu_si512(q8));
      const __m512i p23 = _mm512_maddubs_epi16(a23, _mm512_loadu_si512(q8 + 64));
      ia = _mm512_dpwssd_epi32(ia, p01, _mm512_permutexvar_epi16(sidx[2 * half], sc16));
      ib = _mm512_dpwssd_epi32(ib, p23, _mm512_permutexvar_epi16(sidx[2 * half + 1], sc16));
    }
    const __m512i is = _mm512_add_epi32(ia, ib);
    const __m256i is8 = _mm256_add_epi32(_mm512_castsi512_si256(is), _mm512_extracti64x4_epi64(is, 1));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * H2F(x[i].d)), _mm256_cvtepi32_ps(is8), acc);
  }
  *s = Hsum256(acc);
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
    const __m512i yhi =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
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

// MXFP4x8 (CPU_REPACK, ops.h RepackMXFP4) gemv with vpdpbusd: the Q4_0x8 one above with the codes
// turned into their levels + 12 (0..24, unsigned) by a byte shuffle and -12 * sum(y) as the start
// value; the float part is scalar::GemvMXFP4x8Q8_0's fma(sumi, e_half * d_y, acc) per block, so
// results are bit-identical to it.
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  alignas(16) static constexpr uint8_t kLevels12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                        12, 11, 10, 9,  8,  6,  4,  0};
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kLevels12)));
  const __m512i m4 = _mm512_set1_epi8(0x0F), twelve = _mm512_set1_epi8(12), zero = _mm512_setzero_si512();
  const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i k128 = _mm256_set1_epi32(128);
  constexpr size_t kBlock = 8 * sizeof(BlockMXFP4);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_MXFP4; ++b, x += kBlock) {
    const __m512i ylo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs)));
    const __m512i yhi =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
    const __m512i off = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, twelve, ylo), twelve, yhi);
    const __m512i start = _mm512_sub_epi32(zero, off);
    const __m512i v0 = _mm512_loadu_si512(x + 8), v1 = _mm512_loadu_si512(x + 72);  // rows 0-3, 4-7
    __m512i p0 = _mm512_dpbusd_epi32(start, _mm512_shuffle_epi8(table, _mm512_and_si512(v0, m4)), ylo);
    p0 = _mm512_dpbusd_epi32(p0, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4)),
                             yhi);
    __m512i p1 = _mm512_dpbusd_epi32(start, _mm512_shuffle_epi8(table, _mm512_and_si512(v1, m4)), ylo);
    p1 = _mm512_dpbusd_epi32(p1, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4)),
                             yhi);
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, static_cast<_MM_PERM_ENUM>(0x4E)));
    const __m256i sumi = _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows, u));
    // d_y * 2^(e - 128), rounded once (vscalefps): the scalar d_y * E8M0ToFloatHalf(e), whose
    // factor is exact, subnormal products included.
    uint64_t e8;
    std::memcpy(&e8, x, 8);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(e8)));
    const __m256 d =
        _mm256_scalef_ps(_mm256_set1_ps(H2F(y[b].d)), _mm256_cvtepi32_ps(_mm256_sub_epi32(e, k128)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
  }
  _mm256_storeu_ps(s, acc);
}

// Q8_0x8 (CPU_REPACK, ops.h RepackQ8_0) gemv with vpdpbusd. Chunk t holds rows 2t and 2t + 1 as
// unsigned bytes q + 128, so one vpdpbusd against the activation block repeated in both halves gives
// each row's eight 4-element sums (dword lane 8h + l: row 2t + h, elements 4l .. 4l + 3), started at
// -128 * sum(y) of the same 4 elements: exactly the dwords avx512::VecDotQ8_0Q8_0 forms with
// |x| * sign(y, x). The float part is that vec_dot's too (per block acc = fma(d_x * d_y, float(sums),
// acc) on the row's 8 lanes, Hsum256 at the end), so each row's result is bit-identical to it; the
// 8 rows share the activation loads and the scale decode, and no per-block reduction is needed.
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
  // Scale lanes of chunk t: row 2t in lanes 0-7, row 2t + 1 in lanes 8-15.
  const __m512i sidx[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                           _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                           _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
                           _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += q8_0x8::kBlockBytes) {
    const __m512i yy = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs)));
    const __m512i start = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k128, yy));
    const __m512 d = _mm512_castps256_ps512(_mm256_mul_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))), _mm256_set1_ps(H2F(y[b].d))));
    const uint8_t* q = x + q8_0x8::kQs;
    acc0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(sidx[0], d),
                           _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, _mm512_loadu_si512(q), yy)), acc0);
    acc1 =
        _mm512_fmadd_ps(_mm512_permutexvar_ps(sidx[1], d),
                        _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, _mm512_loadu_si512(q + 64), yy)), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(sidx[2], d),
                           _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, _mm512_loadu_si512(q + 128), yy)),
                           acc2);
    acc3 = _mm512_fmadd_ps(_mm512_permutexvar_ps(sidx[3], d),
                           _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, _mm512_loadu_si512(q + 192), yy)),
                           acc3);
  }
  const __m512 acc[4] = {acc0, acc1, acc2, acc3};
  for (int t = 0; t < 4; ++t) {
    s[2 * t] = Hsum256(_mm512_castps512_ps256(acc[t]));
    s[2 * t + 1] = Hsum256(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1)));
  }
}

// Q4_Kx8 (CPU_REPACK, ops.h RepackQ4_K) gemv with vpdpbusd. Per column (super-block b of 8 rows):
// - the 64 scales and 64 mins decode in two zmm: lo & 15 | ((hi >> {0,2}) & 3) << 4 (scales, byte
//   8j + r) and lo >> 4 | ((hi >> {4,6}) & 3) << 4 (mins, byte 8r + j);
// - each 64-byte chunk t holds 8 bytes of each row: its low nibbles are 8 consecutive elements of
//   sub-block 2i (i = t / 4), its high nibbles the same positions of sub-block 2i + 1, so one
//   vpdpbusd per nibble half with the matching 8 activation bytes broadcast to every row gives dword
//   lane 2r + h (row r, element half h). Four chunks complete a sub-block pair; a lane then holds 16
//   products (|.| <= 16 * 15 * 128 < 2^15), so vpdpwssd with the row's scale in the low word of the
//   lane (high word 0) adds scale * dot exactly;
// - the mins term sum_j mn[r][j] * (bsums[2j] + bsums[2j+1]) is vpmaddwd of the row-major mins
//   with the eight 32-element sums, reduced to one dword per row.
// The float part is the scalar reference's (acc = fma(sumi, d * d_y, acc), accm likewise with dmin)
// on 8 lanes, so the result is bit-identical to scalar::GemvQ4_Kx8Q8_K.
namespace {
// kSb: the float part per 64-element sub-block pair instead of per super-block (llama.cpp's
// q4_K_8x8 GEMM order; see kernels.h GemvQ4_Kx8Q8_KSb).
template <bool kSb>
void GemvQ4_Kx8(int64_t n, float* s, const void* vx, const void* vy) {
  namespace L = q4_kx8;
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03), zero = _mm512_setzero_si512();
  const long long k2 = 0x0002000200020002LL, k4 = 0x0004000400040004LL, k6 = 0x0006000600060006LL;
  const __m512i sh_sc = _mm512_setr_epi64(0, 0, 0, 0, k2, k2, k2, k2);
  const __m512i sh_mn = _mm512_setr_epi64(k4, k4, k4, k4, k6, k6, k6, k6);
  // Word permutations: dword lane 2r + h takes scale word 8j' + r (j' = j % 4) in its low word.
  __m512i sidx[4];
  for (int jj = 0; jj < 4; ++jj) {
    alignas(64) int16_t idx[32];
    for (int w = 0; w < 32; ++w) idx[w] = int16_t(w % 2 == 0 ? 8 * jj + w / 4 : 0);
    sidx[jj] = _mm512_load_si512(idx);
  }
  constexpr __mmask32 kLowWords = 0x55555555u;
  // After the mins reduction, 128-bit lane q holds row q in dword 0 and row q + 4 in dword 1.
  const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b, x += L::kColBytes) {
    const __m256 dy = _mm256_set1_ps(y[b].d);
    const __m256 d =
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + L::kD))), dy);
    const __m256 dm =
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + L::kDmin))), dy);
    const __m512i lo = _mm512_loadu_si512(x + L::kScLo);
    const __m512i hi =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + L::kScHi)));
    const __m512i sc = _mm512_or_si512(
        _mm512_and_si512(lo, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hi, sh_sc), m2), 4));
    const __m512i mn =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo, 4), m4),
                        _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hi, sh_mn), m2), 4));
    const __m512i sc16[2] = {_mm512_cvtepu8_epi16(_mm512_castsi512_si256(sc)),
                             _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sc, 1))};
    // Mins: the 32-element activation sums as 8 words, repeated in each 128-bit lane.
    const __m256i bs32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)),
                                           _mm256_set1_epi16(1));
    const __m256i bsw = _mm256_permute4x64_epi64(_mm256_packs_epi32(bs32, bs32), 0x08);
    const __m512i bsv = _mm512_broadcast_i32x4(_mm256_castsi256_si128(bsw));
    const __m512i p0 = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(mn)), bsv);  // rows 0-3
    const __m512i p1 = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(mn, 1)), bsv);  // 4-7
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, static_cast<_MM_PERM_ENUM>(0x4E)));
    const __m256i summ = _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows, u));

    const uint8_t* q = x + L::kQs;
    const int8_t* a = y[b].qs;
    __m512i isl = zero, ish = zero;
    for (int i = 0; i < 4; ++i) {
      __m512i zl = zero, zh = zero;
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(q + 64 * (4 * i + c));
        long long al, ah;
        std::memcpy(&al, a + 64 * i + 8 * c, 8);
        std::memcpy(&ah, a + 64 * i + 32 + 8 * c, 8);
        zl = _mm512_dpbusd_epi32(zl, _mm512_and_si512(v, m4), _mm512_set1_epi64(al));
        zh = _mm512_dpbusd_epi32(zh, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), _mm512_set1_epi64(ah));
      }
      const __m512i& s16 = sc16[i / 2];
      if (kSb) isl = ish = zero;
      isl = _mm512_dpwssd_epi32(isl, zl, _mm512_maskz_permutexvar_epi16(kLowWords, sidx[(2 * i) % 4], s16));
      ish =
          _mm512_dpwssd_epi32(ish, zh, _mm512_maskz_permutexvar_epi16(kLowWords, sidx[(2 * i + 1) % 4], s16));
      if (kSb) {  // this sub-block pair's sums: rows in order; its mins: lanes 4r + i of p0 / p1
        const __m512i is = _mm512_add_epi32(isl, ish);
        const __m256i sumi = _mm512_cvtepi64_epi32(_mm512_add_epi32(is, _mm512_srli_epi64(is, 32)));
        const __m512i pick = _mm512_add_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_set1_epi32(i));
        const __m256i mins = _mm512_castsi512_si256(_mm512_permutex2var_epi32(p0, pick, p1));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), dm, accm);
      }
    }
    if (!kSb) {
      const __m512i is = _mm512_add_epi32(isl, ish);
      const __m256i sumi = _mm512_cvtepi64_epi32(_mm512_add_epi32(is, _mm512_srli_epi64(is, 32)));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
      accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), dm, accm);
    }
  }
  _mm256_storeu_ps(s, _mm256_sub_ps(acc, accm));
}
}  // namespace

void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<false>(n, s, vx, vy); }
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<true>(n, s, vx, vy); }

}  // namespace stowage::cpu::avx512

// ---- SOFT_MAX row (contiguous) ------------------------------------------------------------------

namespace stowage::cpu::avx512 {
namespace {

// exp(x) for 16 lanes with the algorithm and constants of ggml's AVX-512 ggml_v_expf (ggml-cpu/vec.h,
// itself from Arm's optimized-routines expf), so every lane is bit-identical to llama.cpp's CPU
// backend: n = round(x / ln2) by the 1.5 * 2^23 shifter, b = x - n ln2 in two fused steps (ln2 split
// as 0x1.62e4p-1 + 0x1.7f7d1cp-20), exp(b) - 1 by a degree-5 polynomial evaluated as
// (c1 b + 1) + u ((c3 b + c2) + u (c5 b + c4)) with u = b * b, scaled by 2^n with vscalefps; lanes
// with |n| > 192 give +inf (n > 0) or 0 (n <= 0, which includes -inf). NaN stays NaN.
inline __m512 GgmlExp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi = _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
  const __m512 mid = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
  const __m512 lo = _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f));
  const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(hi, u, mid), u, lo);
  const __m512 res = _mm512_scalef_ps(j, n);
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (big == 0) return res;
  const __mmask16 nonpos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 alt = _mm512_mask_blend_ps(nonpos, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, res, alt);
}

}  // namespace

// ggml_compute_forward_soft_max_f32 / ggml_vec_soft_max_f32 (AVX-512), operation for operation.
double SoftMaxRowF32(const float* x, const void* mask, bool mask_f16, float scale, float slope, float* y,
                     int64_t n, const float* sink) {
  // 1) w = x * scale, then w = fma(slope, mask, w) (ggml's `wp[i] += slope * mp[i]`, contracted),
  //    and the row max.
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  const __m512 vs = _mm512_set1_ps(scale), vsl = _mm512_set1_ps(slope);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 w = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
    if (mask) {
      const __m512 m = mask_f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                      static_cast<const uint16_t*>(mask) + i)))
                                : _mm512_loadu_ps(static_cast<const float*>(mask) + i);
      w = _mm512_fmadd_ps(vsl, m, w);
    }
    _mm512_storeu_ps(y + i, w);
    vmax = _mm512_max_ps(vmax, w);
  }
  float max = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) {
    float w = x[i] * scale;
    if (mask)
      w = std::fma(
          slope,
          mask_f16 ? HalfToFloat(static_cast<const uint16_t*>(mask)[i]) : static_cast<const float*>(mask)[i],
          w);
    y[i] = w;
    max = std::max(max, w);
  }
  if (sink) max = std::max(max, *sink);
  // 2) y = exp(w - max): 16 lanes at a time with GgmlExp16, each group's float sum added to a
  //    double; the last n % 16 elements with expf, one by one.
  double sum = 0.0;
  const __m512 vm = _mm512_set1_ps(max);
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = GgmlExp16(_mm512_sub_ps(_mm512_loadu_ps(y + i), vm));
    _mm512_storeu_ps(y + i, e);
    sum += double(_mm512_reduce_add_ps(e));
  }
  for (; i < n; ++i) {
    const float e = std::exp(y[i] - max);
    sum += double(e);
    y[i] = e;
  }
  if (sink) sum += double(std::exp(*sink - max));
  // 3) normalize by float(1 / sum).
  const float inv = float(1.0 / sum);
  const __m512 vinv = _mm512_set1_ps(inv);
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), vinv));
  for (; i < n; ++i) y[i] *= inv;
  return sum;
}

}  // namespace stowage::cpu::avx512

// ---- SILU / SWIGLU rows (contiguous) ------------------------------------------------------------

namespace stowage::cpu::avx512 {
namespace {

// silu(x) = x / (1 + exp(-x)) for 16 lanes as ggml_v_silu (AVX-512): -x as 0 - x, GgmlExp16, a
// correctly rounded add and divide — bit-identical to llama.cpp's CPU backend for every finite x
// (and NaN -> NaN, +inf -> +inf). -inf gives -0 here (ggml: -inf / inf = NaN), the scalar
// reference's value.
inline __m512 Silu16(__m512 x) {
  const __m512 e = GgmlExp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
  const __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), y,
                              _mm512_set1_ps(-0.0f));
}

// ggml_silu_f32, which ggml's row loops use for the last n % 16 elements.
inline float SiluScalar(float x) { return x == -INFINITY ? -0.0f : x / (1.0f + std::exp(-x)); }

}  // namespace

void SiluRowF32(int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Silu16(_mm512_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = SiluScalar(x[i]);
}

void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_mul_ps(Silu16(_mm512_loadu_ps(a + i)), _mm512_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = SiluScalar(a[i]) * b[i];
}

}  // namespace stowage::cpu::avx512

// ---- attention-shaped F16 gemv (token generation) -------------------------------------------------

namespace stowage::cpu::avx512 {
namespace {

// Lane c of the result = horizontal sum of v[c] (c < 16), by a transpose/add tree: 15 adds and 30
// shuffles for 16 dots instead of one 4-step reduction each. Summation order per dot: the 16 lanes
// are added pairwise (lane q + q+8 at level 1, then +4, +2, +1), a fixed order at every call.
// Level 4 leaves input slot 4e + q in output lane 4q + e, so the inputs are read transposed.
inline __m512 Reduce16(const __m512* v) {
  auto slot = [&](int s) { return v[(s % 4) * 4 + s / 4]; };
  __m512 w[8];
  for (int i = 0; i < 8; ++i) {  // 256-bit halves: slot 2i in the low half, 2i+1 in the high one
    const __m512 a = slot(2 * i), b = slot(2 * i + 1);
    w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  __m512 u[4];
  for (int i = 0; i < 4; ++i)  // 128-bit lane q: slot 4i + q
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xDD));
  __m512 t[2];
  for (int i = 0; i < 2; ++i)  // lane q: 2 partials of slot 8i + q, 2 of slot 8i + 4 + q
    t[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Rows are prefetched (into L2: _MM_HINT_T1 measured better than T0, cold KQ n_kv 2000 333 -> 229
// us) kPfRows ahead at the offset being read: the next block of KQ rows, the next
// row groups of KQV's long rows (the cache data comes from memory: the weights streamed through the
// caches since the previous token). Prefetches past the last row are harmless (they never fault).
constexpr size_t kPfRows = 16;

// R rows x H heads = 16 dots per pass; accumulator c = h * R + r. Rows past nrows reuse the last
// row (their results are dropped). The K tail (K % 16) is loaded with zero-masking.
template <int R, int H>
void GemvF16HeadsRH(int64_t K, int64_t nrows, const char* x, size_t ldx, const float* y, size_t ldy, float* s,
                    size_t lds) {
  static_assert(R * H == 16, "16 accumulators");
  const int64_t kfull = K & ~int64_t(15);
  const __mmask16 tail = __mmask16((1u << (K & 15)) - 1u);
  const size_t pf = kPfRows * ldx;
  for (int64_t i0 = 0; i0 < nrows; i0 += R) {
    const fp16_t* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = reinterpret_cast<const fp16_t*>(x + size_t(std::min<int64_t>(i0 + r, nrows - 1)) * ldx);
    __m512 acc[16];
    for (int c = 0; c < 16; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kfull; k += 16) {
      if ((k & 31) == 0)  // one prefetch per 64 bytes of the rows kPfRows ahead
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(xr[r] + k) + pf, _MM_HINT_T1);
      __m512 xv[R];
      for (int r = 0; r < R; ++r)
        xv[r] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[r] + k)));
      for (int h = 0; h < H; ++h) {
        const __m512 yv = _mm512_loadu_ps(y + size_t(h) * ldy + k);
        for (int r = 0; r < R; ++r) acc[h * R + r] = _mm512_fmadd_ps(xv[r], yv, acc[h * R + r]);
      }
    }
    if (tail) {
      __m512 xv[R];
      for (int r = 0; r < R; ++r) xv[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, xr[r] + kfull));
      for (int h = 0; h < H; ++h) {
        const __m512 yv = _mm512_maskz_loadu_ps(tail, y + size_t(h) * ldy + kfull);
        for (int r = 0; r < R; ++r) acc[h * R + r] = _mm512_fmadd_ps(xv[r], yv, acc[h * R + r]);
      }
    }
    const __m512 res = Reduce16(acc);
    const int64_t nr = std::min<int64_t>(R, nrows - i0);
    if (H == 1) {
      _mm512_mask_storeu_ps(s + i0, __mmask16((1u << nr) - 1u), res);
    } else {  // head h's R results are lanes h * R .. h * R + R - 1, in row order
      alignas(64) float tmp[16];
      _mm512_store_ps(tmp, res);
      if (nr == R) {
        for (int h = 0; h < H; ++h)
          std::memcpy(s + size_t(h) * lds + size_t(i0), tmp + h * R, R * sizeof(float));
      } else {
        for (int h = 0; h < H; ++h)
          for (int64_t r = 0; r < nr; ++r) s[size_t(h) * lds + size_t(i0 + r)] = tmp[h * R + r];
      }
    }
  }
}

}  // namespace

void GemvF16Heads(int64_t K, int64_t nrows, const void* x, size_t ldx, int64_t nh, const float* y, size_t ldy,
                  float* s, size_t lds) {
  const char* xb = static_cast<const char*>(x);
  int64_t h = 0;
  for (; h + 4 <= nh; h += 4)
    GemvF16HeadsRH<4, 4>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
  for (; h + 2 <= nh; h += 2)
    GemvF16HeadsRH<8, 2>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
  for (; h < nh; ++h)
    GemvF16HeadsRH<16, 1>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
}

}  // namespace stowage::cpu::avx512

// RMS_NORM's eight double partial sums (kernels.h SumSquares8): one lane per i % 8.
namespace stowage::cpu::avx512 {
void SumSquares8(int64_t n8, const float* x, double part[8]) {
  __m512d acc = _mm512_loadu_pd(part);
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_mul_ps(v, v)));
  }
  _mm512_storeu_pd(part, acc);
}
}  // namespace stowage::cpu::avx512

// ---- Flash attention's F16 accumulator (kernels.h MadF16 / ScaleF16) ------------------------------

namespace stowage::cpu::avx512 {

void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v) {
  const __m512 vv = _mm512_set1_ps(v);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m512 yf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i)));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(y + i),
        _mm512_cvtps_ph(_mm512_fmadd_ps(xf, vv, yf), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) {  // the tail in one masked step: the same per-element operations
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 xf = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i));
    const __m512 yf = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, y + i));
    _mm256_mask_storeu_epi16(
        y + i, m,
        _mm512_cvtps_ph(_mm512_fmadd_ps(xf, vv, yf), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

void ScaleF16(int64_t n, fp16_t* y, float v) {
  const __m512 vv = _mm512_set1_ps(v);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 yf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i)));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(y + i),
        _mm512_cvtps_ph(_mm512_mul_ps(yf, vv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 yf = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, y + i));
    _mm256_mask_storeu_epi16(
        y + i, m, _mm512_cvtps_ph(_mm512_mul_ps(yf, vv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

namespace {

// The accumulators of NH heads in NV zmm registers each (16 widened F16 values per register; the
// last `tail` lanes of the last register masked). Each V row is loaded once for the NH heads, whose
// F16 round trips (vcvtps2ph + vcvtph2ps, a dependency chain per head) then overlap. Same
// per-element operations as MadF16 / ScaleF16.
template <int NV, int NH>
void FlashF16RowRegs(int64_t D, int64_t n, const float* scores, size_t lds, const char* v,
                     const int32_t* cells, size_t v_stride, float* out, size_t ldo, const float* sinks) {
  const __mmask16 last =
      (D % 16) ? static_cast<__mmask16>((1u << (D % 16)) - 1u) : static_cast<__mmask16>(0xFFFF);
  auto mask_of = [&](int i) { return i == NV - 1 ? last : static_cast<__mmask16>(0xFFFF); };
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  constexpr int64_t kChunk = 64, kAhead = 16;
  __m512 a[NH][NV];
  for (int h = 0; h < NH; ++h)
    for (int i = 0; i < NV; ++i) a[h][i] = _mm512_setzero_ps();
  float m[NH], sum[NH];
  for (int h = 0; h < NH; ++h) m[h] = -INFINITY, sum[h] = 0.0f;
  float ms[NH][kChunk], vs[NH][kChunk];
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t cn = std::min(kChunk, n - c0);
    // The softmax weights depend only on the scores: computed first (the exp calls would otherwise
    // spill the accumulator registers at every cell), in the same order with the same arguments.
    for (int h = 0; h < NH; ++h) {
      const float* sc = scores + size_t(h) * lds + c0;
      for (int64_t c = 0; c < cn; ++c) {
        const float s = sc[c];
        ms[h][c] = 1.0f;
        vs[h][c] = 1.0f;
        if (s > m[h]) {
          ms[h][c] = std::exp(m[h] - s);
          m[h] = s;
        } else {
          vs[h][c] = std::exp(s - m[h]);
        }
        sum[h] = std::fma(sum[h], ms[h][c], vs[h][c]);  // fused, as ggml's x86 builds contract it
      }
    }
    for (int64_t c = 0; c < cn; ++c) {
      if (c0 + c + kAhead < n) {  // the cache rows were evicted since the last token
        const char* p = v + size_t(cells[c0 + c + kAhead]) * v_stride;
        for (int64_t o = 0; o < D * 2; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
      }
      const fp16_t* row = reinterpret_cast<const fp16_t*>(v + size_t(cells[c0 + c]) * v_stride);
      __m512 x[NV];
      for (int i = 0; i < NV; ++i) x[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask_of(i), row + 16 * i));
      for (int h = 0; h < NH; ++h) {
        if (ms[h][c] != 1.0f) {  // a new maximum; scaling the F16 values by exactly 1 would change nothing
          const __m512 vm = _mm512_set1_ps(ms[h][c]);
          for (int i = 0; i < NV; ++i)
            a[h][i] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(a[h][i], vm), kRound));
        }
        const __m512 vv = _mm512_set1_ps(vs[h][c]);
        for (int i = 0; i < NV; ++i)
          a[h][i] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_fmadd_ps(x[i], vv, a[h][i]), kRound));
      }
    }
  }
  // a holds F16 values widened exactly: out = f32(acc) * (1 / S), as the memory versions.
  for (int h = 0; h < NH; ++h) {
    const __m512 ms = _mm512_set1_ps(sinks ? FlashSinkStep(sinks[h], m[h], sum[h]) : 1.0f);
    const __m512 inv = _mm512_set1_ps(1.0f / sum[h]);
    for (int i = 0; i < NV; ++i)
      _mm512_mask_storeu_ps(out + size_t(h) * ldo + 16 * i, mask_of(i),
                            _mm512_mul_ps(_mm512_mul_ps(a[h][i], ms), inv));
  }
}

// Heads in groups of NH (then one at a time) with the accumulators in registers.
template <int NV, int NH>
void FlashF16RowsRegs(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                      const int32_t* cells, size_t v_stride, float* out, size_t ldo, const float* sinks) {
  int64_t h = 0;
  for (; h + NH <= nh; h += NH)
    FlashF16RowRegs<NV, NH>(D, n, scores + size_t(h) * lds, lds, v, cells, v_stride, out + size_t(h) * ldo,
                            ldo, sinks ? sinks + h : nullptr);
  for (; h < nh; ++h)
    FlashF16RowRegs<NV, 1>(D, n, scores + size_t(h) * lds, lds, v, cells, v_stride, out + size_t(h) * ldo,
                           ldo, sinks ? sinks + h : nullptr);
}

}  // namespace

void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks) {
  switch ((D + 15) / 16) {
    case 1:
      return FlashF16RowsRegs<1, 4>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 2:
      return FlashF16RowsRegs<2, 4>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 3:
      return FlashF16RowsRegs<3, 4>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 4:
      return FlashF16RowsRegs<4, 4>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 5:
      return FlashF16RowsRegs<5, 2>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 6:
      return FlashF16RowsRegs<6, 2>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 7:
      return FlashF16RowsRegs<7, 2>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    case 8:
      return FlashF16RowsRegs<8, 2>(D, n, nh, scores, lds, v, cells, v_stride, out, ldo, sinks);
    default:
      break;
  }
  // larger heads: the accumulator in memory
  FlashF16RowsWith(MadF16, ScaleF16, D, n, nh, scores, lds, v, cells, v_stride, acc, ldacc, out, ldo, sinks);
}

}  // namespace stowage::cpu::avx512

// ---- llamafile tinyBLAS order for F32/F16 weights (kernels.h MatMulLlamafile) -------------------

namespace stowage::cpu::avx512 {
namespace {

// RM weight rows (F32, ldw floats apart) x RN activation columns: one 16-lane accumulator per
// output, fma per 16 k, _mm512_reduce_add_ps at the end (tinyBLAS's hsum).
template <int RM, int RN>
void Tile(int64_t K, const float* w, size_t ldw, const float* a, size_t lda, float* d, size_t ldd) {
  __m512 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    __m512 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = _mm512_loadu_ps(w + size_t(r) * ldw + k);
    for (int c = 0; c < RN; ++c) {
      const __m512 av = _mm512_loadu_ps(a + size_t(c) * lda + k);
      for (int r = 0; r < RM; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], av, acc[r][c]);
    }
  }
  for (int c = 0; c < RN; ++c)
    for (int r = 0; r < RM; ++r) d[size_t(c) * ldd + size_t(r)] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int RM>
void RowTile(int64_t K, const float* w, size_t ldw, const float* a, size_t lda, int64_t nc, float* d,
             size_t ldd) {
  constexpr int kRN = 6;
  int64_t c = 0;
  for (; c + kRN <= nc; c += kRN)
    Tile<RM, kRN>(K, w, ldw, a + size_t(c) * lda, lda, d + size_t(c) * ldd, ldd);
  for (; c < nc; ++c) Tile<RM, 1>(K, w, ldw, a + size_t(c) * lda, lda, d + size_t(c) * ldd, ldd);
}

}  // namespace

void MatMulLlamafile(int64_t K, bool f16, const void* w, size_t ldw, int64_t nr, const float* a, size_t lda,
                     int64_t nc, float* d, size_t ldd) {
  constexpr int kRM = 4;
  // Columns in blocks that stay in L2 (kColBlock * K floats) while every row tile passes over them;
  // the loop order changes no result (each output is one accumulator chain).
  constexpr int64_t kColBlock = 48;
  const char* wb = static_cast<const char*>(w);
  // F16 rows are widened once per row tile and column block (exact) instead of once per column tile.
  std::vector<float> wf(f16 ? size_t(kRM) * size_t(K) : 0);
  for (int64_t c0 = 0; c0 < nc; c0 += kColBlock) {
    const int64_t ncb = std::min(kColBlock, nc - c0);
    const float* ab = a + size_t(c0) * lda;
    float* db = d + size_t(c0) * ldd;
    for (int64_t r = 0; r < nr; r += kRM) {
      const int rm = int(std::min<int64_t>(kRM, nr - r));
      const float* wr;
      size_t ldf;
      if (f16) {
        for (int i = 0; i < rm; ++i) {
          const uint16_t* src = reinterpret_cast<const uint16_t*>(wb + size_t(r + i) * ldw);
          for (int64_t k = 0; k < K; k += 16)
            _mm512_storeu_ps(&wf[size_t(i) * size_t(K) + size_t(k)],
                             _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k))));
        }
        wr = wf.data();
        ldf = size_t(K);
      } else {
        wr = reinterpret_cast<const float*>(wb + size_t(r) * ldw);
        ldf = ldw / sizeof(float);
      }
      float* dr = db + size_t(r);
      switch (rm) {
        case 4:
          RowTile<4>(K, wr, ldf, ab, lda, ncb, dr, ldd);
          break;
        case 3:
          RowTile<3>(K, wr, ldf, ab, lda, ncb, dr, ldd);
          break;
        case 2:
          RowTile<2>(K, wr, ldf, ab, lda, ncb, dr, ldd);
          break;
        default:
          RowTile<1>(K, wr, ldf, ab, lda, ncb, dr, ldd);
          break;
      }
    }
  }
}

}  // namespace stowage::cpu::avx512
