// AVX-512 kernels (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// -mavx512vnni + AVX2/FMA/F16C; only called when DetectIsa() == kAvx512, and the integer dots only
// when CpuHasAvx512Vnni()). The integer dots use vpdpbusd (u8 x s8 -> s32, no saturation).
#include <immintrin.h>

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

}  // namespace stowage::cpu::avx512
