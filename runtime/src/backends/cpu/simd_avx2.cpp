// AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c; it is only
// called when DetectIsa() >= kAvx2). Integer parts are exact, so results match the scalar
// reference up to the float accumulation order.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels.h"
#include "quants.h"

namespace stowage::cpu::avx2 {
namespace {

inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int HsumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float H2F(fp16_t h) { return _cvtsh_ss(h); }

// Token generation reads every weight once from memory, one contiguous range per thread. The
// hardware prefetchers alone left the Q4_0x8 gemv at ~21 GB/s with 2 threads on a Zen 3 machine
// (the probe's plain read loop: ~22 GB/s), as its compute (~20 GB/s per thread in cache) did not
// overlap the misses well; a software prefetch kStreamAhead bytes ahead of the read position raised
// it to ~27-31 GB/s there (stowage-tgbench -c 4096; 0.85B q4_0 products per token 20 -> 15-16 ms).
// Issued once per kStep bytes consumed (one per 64-byte line of the step). Past the end of a thread's
// range it touches the next rows or the next tensor, which is harmless (prefetches do not fault);
// the address is formed as an integer, since pointer arithmetic past the end of the array would be
// undefined.
constexpr uintptr_t kStreamAhead = 4096;
template <uintptr_t kStep>
inline void PrefetchStream(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + kStreamAhead;
  for (uintptr_t o = 0; o < kStep; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), _MM_HINT_T0);
}

// Sum of 8 int32 lanes of (x * y) over 32 int8 pairs, x and y signed (|x| <= 127 or y != -128).
inline __m256i DotI8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// 32 nibbles of a Q4_0-style block: elements 0..15 (low nibbles) then 16..31 (high nibbles).
inline __m256i Nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

}  // namespace

// ggml_vec_dot_f32/_f16 structure (GGML_F32_STEP = 32 on AVX2): four 8-lane FMA accumulators over
// the first n & ~31 elements, reduced pairwise (GGML_F32x8_REDUCE), leftovers added one by one
// (F32: in float; F16: in double, like ggml). Keeping this order keeps results close to ggml's.
namespace {
inline float Reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  a0 = _mm256_add_ps(a0, a2);
  a1 = _mm256_add_ps(a1, a3);
  a0 = _mm256_add_ps(a0, a1);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}
// 32 bytes, 0xFF where bit j of the little-endian 32-bit word `bits` is set (byte j <-> bit j).
inline __m256i BitsToBytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i sel = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

// Signed 16-bit scale per 16-byte half: low lane a, high lane b (for maddubs -> madd by scale).
inline __m256i Scales16(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(int16_t(b)), _mm_set1_epi16(int16_t(a)));
}

// sum over 32 pairs of u8 x s8 (u8 <= 127 so pairs never saturate), as 8 int32 lanes.
inline __m256i DotU8I8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

}  // namespace

void VecDotF32(int64_t n, float* s, const void* vx, const void* vy) {
  const float* x = static_cast<const float*>(vx);
  const float* y = static_cast<const float*>(vy);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t np = n & ~int64_t(31);
  for (int64_t i = 0; i < np; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
  }
  float sum = Reduce4(a0, a1, a2, a3);
  for (int64_t i = np; i < n; ++i) sum += x[i] * y[i];
  *s = sum;
}

void VecDotF16(int64_t n, float* s, const void* vx, const void* vy) {
  const fp16_t* x = static_cast<const fp16_t*>(vx);
  const fp16_t* y = static_cast<const fp16_t*>(vy);
  auto ld = [](const fp16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t np = n & ~int64_t(31);
  for (int64_t i = 0; i < np; i += 32) {
    a0 = _mm256_fmadd_ps(ld(x + i), ld(y + i), a0);
    a1 = _mm256_fmadd_ps(ld(x + i + 8), ld(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(ld(x + i + 16), ld(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(ld(x + i + 24), ld(y + i + 24), a3);
  }
  double sum = Reduce4(a0, a1, a2, a3);
  for (int64_t i = np; i < n; ++i) sum += double(H2F(x[i]) * H2F(y[i]));
  *s = float(sum);
}

void VecDotBF16(int64_t n, float* s, const void* vx, const void* vy) {
  const bf16_t* x = static_cast<const bf16_t*>(vx);
  const bf16_t* y = static_cast<const bf16_t*>(vy);
  // bf16 -> f32 is a 16-bit left shift of the widened value.
  auto ld = [](const bf16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  };
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const int64_t np = n & ~int64_t(31);
  for (int64_t i = 0; i < np; i += 32) {
    a0 = _mm256_fmadd_ps(ld(x + i), ld(y + i), a0);
    a1 = _mm256_fmadd_ps(ld(x + i + 8), ld(y + i + 8), a1);
    a2 = _mm256_fmadd_ps(ld(x + i + 16), ld(y + i + 16), a2);
    a3 = _mm256_fmadd_ps(ld(x + i + 24), ld(y + i + 24), a3);
  }
  double sum = Reduce4(a0, a1, a2, a3);
  for (int64_t i = np; i < n; ++i) sum += double(Bf16ToFloat(x[i]) * Bf16ToFloat(y[i]));
  *s = float(sum);
}

void FromFloatF16(const float* x, void* vy, int64_t n) {
  fp16_t* y = static_cast<fp16_t*>(vy);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = FloatToHalf(x[i]);
}

namespace {
// One block of 32 floats quantized as QuantizeRowQ8_0Act / _Q8_1Act (quants.cpp): returns false for
// a block holding NaN or +-inf (the caller stores d = NaN, qs = 0, as they do); else stores the 32
// int8 values nearbyint(x * id) (vcvtps2dq rounds to nearest even under the default MXCSR, as
// nearbyintf), the block's amax and, when `sum` is given, the wrapping int32 sum of the converted
// values before narrowing (Q8_1's s, as ggml). Every step is the scalar one: identical bytes.
inline bool QuantizeBlock32(const float* x, int8_t* qs, float* amax_out, int32_t* sum = nullptr) {
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
  __m256 v[4], m = _mm256_setzero_ps();
  int bad = 0;
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    const __m256 a = _mm256_andnot_ps(sign, v[k]);
    bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ));  // !(|x| <= FLT_MAX)
    m = _mm256_max_ps(m, a);
  }
  if (bad) return false;
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  // |q| <= 127: the saturating packs are exact; they interleave 128-bit lanes, undone by one permute.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *amax_out = amax;
  if (sum != nullptr)
    *sum = HsumEpi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return true;
}
}  // namespace

void QuantizeRowQ8_0Act(const float* x, void* vy, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK8_0; ++i, x += kQK8_0) {
    float amax;
    if (!QuantizeBlock32(x, y[i].qs, &amax)) {
      y[i].d = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      continue;
    }
    y[i].d = FloatToHalf(amax / 127.f);
  }
}

void QuantizeRowQ8_1Act(const float* x, void* vy, int64_t n) {
  BlockQ8_1* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / kQK8_1; ++i, x += kQK8_1) {
    float amax;
    int32_t sum;
    if (!QuantizeBlock32(x, y[i].qs, &amax, &sum)) {
      y[i].d = y[i].s = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
      std::memset(y[i].qs, 0, sizeof y[i].qs);
      continue;
    }
    const float d = amax / 127.f;
    y[i].d = FloatToHalf(d);
    y[i].s = FloatToHalf(d * float(sum));
  }
}

void VecDotQ8_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[ib].qs));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256 d = _mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotI8(qx, qy)), acc);
  }
  *s = HsumPs(acc);
}

void VecDotQ4_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_0* x = static_cast<const BlockQ4_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i off = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256i qx = _mm256_sub_epi8(Nibbles32(x[ib].qs), off);
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256 d = _mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotI8(qx, qy)), acc);
  }
  *s = HsumPs(acc);
}

void VecDotQ4_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_K* x = static_cast<const BlockQ4_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  // ggml's AVX2 ggml_vec_dot_q4_K_q8_K float order: acc = fma(d, float(lane), acc) per super-block
  // (lane l: the elements e with e % 32 in [4l, 4l + 4)); the mins in 4 lanes (sub-blocks 2q,
  // 2q + 1), accm = fma(-dmin, float(lane), accm); hsum_float_8(acc) + ((m0 + m2) + (m1 + m3)).
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(j, x[i].scales, &sc[j], &mn[j]);
    int32_t prod[4];
    for (int q = 0; q < 4; ++q)
      prod[q] = mn[2 * q] * (y[i].bsums[4 * q] + y[i].bsums[4 * q + 1]) +
                mn[2 * q + 1] * (y[i].bsums[4 * q + 2] + y[i].bsums[4 * q + 3]);
    __m256i isum = _mm256_setzero_si256();
    const uint8_t* q4 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    for (int j = 0; j < 4; ++j, q4 += 32, q8 += 64) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q4));
      const __m256i lo = _mm256_and_si256(v, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
      const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32));
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1]));
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    const float d = y[i].d * H2F(x[i].d), dmin = -y[i].d * H2F(x[i].dmin);
    accm = _mm_fmadd_ps(_mm_set1_ps(dmin),
                        _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(prod))), accm);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
  accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
  *s = HsumPs(acc) + _mm_cvtss_f32(accm);
}

void VecDotQ6_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ6_K* x = static_cast<const BlockQ6_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  // ggml's AVX2 float order: lane l (the elements e with e % 32 in [4l, 4l + 4)) minus 32 * the
  // correction of sub-blocks 2l, 2l + 1, acc = fma(d, float(lane), acc) per super-block,
  // hsum_float_8 at the end.
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    PrefetchStream<sizeof(BlockQ6_K)>(x + i);
    // q = a - 32 with a in 0..63: dot(q, y) = dot(a, y) - 32 * bsum, per lane as ggml's q8sclsub:
    // lane l = 32 * (sc[2l] * bsums[2l] + sc[2l + 1] * bsums[2l + 1]), one vpmaddwd.
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
    const __m256i corr =
        _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)),
                                            _mm256_cvtepi8_epi16(sc8)),
                          5);
    __m256i isum = _mm256_setzero_si256();
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* q8 = y[i].qs;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, q8 += 128) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
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
        // Words 0-7: scale j = 8 half + 2k, words 8-15: scale j + 1 (sub-blocks of 16 elements).
        const long long j = 8 * half + 2 * k;
        const __m256i scales = _mm256_cvtepi8_epi16(
            _mm_shuffle_epi8(sc8, _mm_set_epi64x(0x0101010101010101ll * (j + 1), 0x0101010101010101ll * j)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(a[k], yk), scales));
      }
    }
    isum = _mm256_sub_epi32(isum, corr);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * H2F(x[i].d)), _mm256_cvtepi32_ps(isum), acc);
  }
  *s = HsumPs(acc);
}

// Q4_0x8 gemv: per 32-byte load the nibbles of rows 2k (low half) and 2k + 1 (high half); the -8
// offset enters as the pair sums of 8 * y (one vpmaddubsw pair per block, shared by the 8 rows)
// subtracted in int16 (|.| <= 7680 + 4096), so the int32 sums need no horizontal sum of y. The
// vphaddd tree leaves the rows in the order 0 2 4 6 1 3 5 7, which the scales follow (one vpermps
// per block, off the integer chain) and the result is permuted back once. Per block and row the
// float operation is the scalar reference's fma(float(sumi), d_x * d_y, acc): identical bits.
void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1), eight = _mm256_set1_epi8(8);
  const __m256i to_hadd_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i from_hadd_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += 8 * sizeof(BlockQ4_0)) {
    PrefetchStream<8 * sizeof(BlockQ4_0)>(x);
    const __m256i ylo =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs)));
    const __m256i yhi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
    const __m256i c16 = _mm256_add_epi16(_mm256_maddubs_epi16(eight, ylo), _mm256_maddubs_epi16(eight, yhi));
    __m256i p[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 + 32 * k));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
      p[k] = _mm256_madd_epi16(_mm256_sub_epi16(s16, c16), ones);
    }
    const __m256i sumi = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256 dx = _mm256_permutevar8x32_ps(
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))), to_hadd_order);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dx, _mm256_set1_ps(H2F(y[b].d))), acc);
  }
  _mm256_storeu_ps(s, _mm256_permutevar8x32_ps(acc, from_hadd_order));
}

// MXFP4x8 (CPU_REPACK, ops.h RepackMXFP4) gemv: as the Q4_0x8 one, each 32-byte load holds rows
// 2k (low half) and 2k + 1 (high half); a byte shuffle turns the codes into their levels plus 12
// (0..24, unsigned: vpmaddubsw takes them as they are; the pair sums stay below 2 * 24 * 127 * 2),
// and 12 * the activation's pair sums come off once per block, as Q4_0x8's 8 does. One hadd tree
// gives the 8 rows' exact block sums; acc = fma(float(isum), e_half * d_y, acc) per row:
// scalar::GemvMXFP4x8Q8_0's operations, so the bits equal it.
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  alignas(16) static constexpr uint8_t kLevels12[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                        12, 11, 10, 9,  8,  6,  4,  0};
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1), twelve = _mm256_set1_epi8(12);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kLevels12)));
  const __m256i to_hadd_order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i from_hadd_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  // E8M0ToFloatHalf on 8 lanes: (e - 1) << 23, or 0x00200000 << e for e < 2.
  const __m256i two = _mm256_set1_epi32(2), one = _mm256_set1_epi32(1), sub = _mm256_set1_epi32(0x00200000);
  constexpr size_t kBlock = 8 * sizeof(BlockMXFP4);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_MXFP4; ++b, x += kBlock) {
    PrefetchStream<kBlock>(x);
    const __m256i ylo =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs)));
    const __m256i yhi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
    const __m256i c16 =
        _mm256_add_epi16(_mm256_maddubs_epi16(twelve, ylo), _mm256_maddubs_epi16(twelve, yhi));
    __m256i p[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 + 32 * k));
      const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
      const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
      p[k] = _mm256_madd_epi16(_mm256_sub_epi16(s16, c16), ones);
    }
    const __m256i sumi = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    uint64_t e8;
    std::memcpy(&e8, x, 8);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(e8)));
    const __m256i bits = _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(e, one), 23),
                                            _mm256_sllv_epi32(sub, e), _mm256_cmpgt_epi32(two, e));
    const __m256 dx = _mm256_permutevar8x32_ps(_mm256_castsi256_ps(bits), to_hadd_order);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dx, _mm256_set1_ps(H2F(y[b].d))), acc);
  }
  _mm256_storeu_ps(s, _mm256_permutevar8x32_ps(acc, from_hadd_order));
}

// Q8_0x8 (CPU_REPACK, ops.h RepackQ8_0) gemv: row r's block is 32 stored bytes q + 128, turned back
// into q with one xor, then VecDotQ8_0Q8_0's operations per row (DotI8, one fma per block on the
// row's 8 lanes, HsumPs at the end), so each row is bit-identical to it. The 8 rows share the
// activation load and the scale decode (one vcvtph2ps for the 8 scales).
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[8];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += q8_0x8::kBlockBytes) {
    PrefetchStream<q8_0x8::kBlockBytes>(x);
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))),
                                   _mm256_set1_ps(H2F(y[b].d)));
    for (int r = 0; r < 8; ++r) {
      const __m256i qx = _mm256_xor_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + q8_0x8::kQs + 32 * r)), k80);
      const __m256 dr = _mm256_permutevar8x32_ps(d, _mm256_set1_epi32(r));
      acc[r] = _mm256_fmadd_ps(dr, _mm256_cvtepi32_ps(DotI8(qx, qy)), acc[r]);
    }
  }
  for (int r = 0; r < 8; ++r) s[r] = HsumPs(acc[r]);
}

// Q4_Kx8 (CPU_REPACK, ops.h RepackQ4_K) gemv with vpmaddubsw: each 64-byte chunk of a column holds 8
// bytes per row (low nibbles: sub-block 2i, high nibbles: 2i + 1, i = chunk / 4); the matching 8
// activation bytes are broadcast to every row, and the int16 pair sums of the four chunks of a
// sub-block (|.| <= 4 * 2 * 15 * 128 < 2^15) are multiplied by the row's scale (vpmaddwd with the
// scale in every word of the row) into exact int32 lanes. Scales and mins decode as in the AVX-512
// gemv (two ymm each); the mins term is vpmaddwd of the row-major mins with the 32-element sums. The
// float part is the scalar reference's, so the result is bit-identical to scalar::GemvQ4_Kx8Q8_K.
namespace {
// kSb: the float part per 64-element sub-block pair (llama.cpp's q4_K_8x8 GEMM order).
template <bool kSb>
void GemvQ4_Kx8(int64_t n, float* s, const void* vx, const void* vy) {
  namespace L = q4_kx8;
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  // Bytes of one sub-block's 8 scales -> words 4r' + w = scale of row r' (rows 0-3 / rows 4-7).
  const __m128i spread0 = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m128i spread1 = _mm_setr_epi8(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
  const __m256i perm_m = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b, x += L::kColBytes) {
    PrefetchStream<L::kColBytes>(x);
    const __m256 dy = _mm256_set1_ps(y[b].d);
    const __m256 d =
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + L::kD))), dy);
    const __m256 dm =
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + L::kDmin))), dy);
    const __m256i lo0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + L::kScLo));
    const __m256i lo1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + L::kScLo + 32));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + L::kScHi));
    auto high2 = [&](int shift) {
      return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, shift), m2), 4);
    };
    alignas(32) uint8_t sc[64];  // byte 8j + r
    _mm256_store_si256(reinterpret_cast<__m256i*>(sc), _mm256_or_si256(_mm256_and_si256(lo0, m4), high2(0)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(sc + 32),
                       _mm256_or_si256(_mm256_and_si256(lo1, m4), high2(2)));
    const __m256i mn0 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4), high2(4));  // rows 0-3
    const __m256i mn1 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4), high2(6));  // rows 4-7
    // Mins: the 32-element activation sums as 8 words, in both 128-bit lanes.
    const __m256i bs32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)),
                                           _mm256_set1_epi16(1));
    const __m256i bsv = _mm256_permute4x64_epi64(_mm256_packs_epi32(bs32, bs32), 0x88);
    auto mins = [&](__m128i m) { return _mm256_madd_epi16(_mm256_cvtepu8_epi16(m), bsv); };  // 2 rows x 4
    const __m256i h1 =
        _mm256_hadd_epi32(mins(_mm256_castsi256_si128(mn0)), mins(_mm256_extracti128_si256(mn0, 1)));
    const __m256i h2 =
        _mm256_hadd_epi32(mins(_mm256_castsi256_si128(mn1)), mins(_mm256_extracti128_si256(mn1, 1)));
    const __m256i summ = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(h1, h2), perm_m);
    // Per sub-block pair (kSb): row r's mins of pair i, from the 2-rows-x-4 madd lanes.
    alignas(32) int32_t mpair[8][4];
    if (kSb) {
      const __m256i mm[4] = {mins(_mm256_castsi256_si128(mn0)), mins(_mm256_extracti128_si256(mn0, 1)),
                             mins(_mm256_castsi256_si128(mn1)), mins(_mm256_extracti128_si256(mn1, 1))};
      for (int k = 0; k < 4; ++k) {
        alignas(32) int32_t t[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(t), mm[k]);
        for (int q = 0; q < 4; ++q) {
          mpair[2 * k][q] = t[q];
          mpair[2 * k + 1][q] = t[4 + q];
        }
      }
    }

    const uint8_t* q = x + L::kQs;
    const int8_t* a = y[b].qs;
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();  // rows 0-3 / 4-7, lane 2r' + h
    for (int i = 0; i < 4; ++i) {
      if (kSb) acc0 = acc1 = _mm256_setzero_si256();
      __m256i l0 = _mm256_setzero_si256(), l1 = l0, h0 = l0, hh1 = l0;
      for (int c = 0; c < 4; ++c) {
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * (4 * i + c)));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * (4 * i + c) + 32));
        long long al, ah;
        std::memcpy(&al, a + 64 * i + 8 * c, 8);
        std::memcpy(&ah, a + 64 * i + 32 + 8 * c, 8);
        const __m256i yl = _mm256_set1_epi64x(al), yh = _mm256_set1_epi64x(ah);
        l0 = _mm256_add_epi16(l0, _mm256_maddubs_epi16(_mm256_and_si256(v0, m4), yl));
        l1 = _mm256_add_epi16(l1, _mm256_maddubs_epi16(_mm256_and_si256(v1, m4), yl));
        h0 = _mm256_add_epi16(h0, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m4), yh));
        hh1 = _mm256_add_epi16(hh1, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m4), yh));
      }
      const __m128i sl = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * (2 * i)));
      const __m128i sh = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * (2 * i + 1)));
      acc0 =
          _mm256_add_epi32(acc0, _mm256_madd_epi16(l0, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sl, spread0))));
      acc1 =
          _mm256_add_epi32(acc1, _mm256_madd_epi16(l1, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sl, spread1))));
      acc0 =
          _mm256_add_epi32(acc0, _mm256_madd_epi16(h0, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sh, spread0))));
      acc1 =
          _mm256_add_epi32(acc1, _mm256_madd_epi16(hh1, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sh, spread1))));
      if (kSb) {
        const __m256i sumi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc0, acc1), 0xD8);
        const __m256i mins_i = _mm256_setr_epi32(mpair[0][i], mpair[1][i], mpair[2][i], mpair[3][i],
                                                 mpair[4][i], mpair[5][i], mpair[6][i], mpair[7][i]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins_i), dm, accm);
      }
    }
    // hadd: [r0 r1 r4 r5 | r2 r3 r6 r7] -> rows in order.
    if (!kSb) {
      const __m256i sumi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc0, acc1), 0xD8);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, acc);
      accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), dm, accm);
    }
  }
  _mm256_storeu_ps(s, _mm256_sub_ps(acc, accm));
}
}  // namespace

void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<false>(n, s, vx, vy); }
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<true>(n, s, vx, vy); }

void VecDotQ5_0Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_0* x = static_cast<const BlockQ5_0*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const __m256i bit4 = _mm256_set1_epi8(0x10), off = _mm256_set1_epi8(16);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, 4);
    const __m256i q = _mm256_or_si256(Nibbles32(x[ib].qs), _mm256_and_si256(BitsToBytes(qh), bit4));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256 d = _mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotI8(_mm256_sub_epi8(q, off), qy)), acc);
  }
  *s = HsumPs(acc);
}

void VecDotQ4_1Q8_1(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ4_1* x = static_cast<const BlockQ4_1*>(vx);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(vy);
  __m256 acc = _mm256_setzero_ps();
  float summ = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256 d = _mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotU8I8(Nibbles32(x[ib].qs), qy)), acc);
    summ = std::fma(H2F(x[ib].m), H2F(y[ib].s), summ);  // ggml: summs += m * s, contracted
  }
  *s = HsumPs(acc) + summ;
}

void VecDotQ5_1Q8_1(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_1* x = static_cast<const BlockQ5_1*>(vx);
  const BlockQ8_1* y = static_cast<const BlockQ8_1*>(vy);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  float summ = 0;
  for (int64_t ib = 0; ib < n / kQK8_1; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, 4);
    const __m256i q = _mm256_or_si256(Nibbles32(x[ib].qs), _mm256_and_si256(BitsToBytes(qh), bit4));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256 d = _mm256_set1_ps(H2F(x[ib].d) * H2F(y[ib].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(DotU8I8(q, qy)), acc);
    summ = std::fma(H2F(x[ib].m), H2F(y[ib].s), summ);  // ggml: summs += m * s, contracted
  }
  *s = HsumPs(acc) + summ;
}

namespace {
// The levels of a 16-entry codebook for 32 nibbles (low nibbles = elements 0..15, high = 16..31)
// via a byte shuffle.
inline __m256i CodebookValues(const int8_t* levels, const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  return _mm256_shuffle_epi8(table, Nibbles32(qs));
}
inline __m256i IQ4Values(const uint8_t* qs) { return CodebookValues(kValuesIQ4NL, qs); }

// ggml_vec_dot_iq4_nl_q8_0's / ggml_vec_dot_mxfp4_q8_0's AVX2 order (a 16-level codebook, one scale
// per 32-block): even blocks in one 8-lane accumulator, odd blocks in another, hsum of their sum; a
// last odd block added as sumf = fma(float(isum), d, sumf). Scale(x) is the weight block's scale.
template <typename Block, const int8_t* kLevels, float (*Scale)(const Block&)>
void VecDotCodebookQ8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const Block* x = static_cast<const Block*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  const int64_t nb = n / 32;
  __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
  int64_t ib = 0;
  for (; ib + 1 < nb; ib += 2) {
    const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const __m256i qy2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib + 1].qs));
    const __m256 d1 = _mm256_set1_ps(H2F(y[ib].d) * Scale(x[ib]));
    const __m256 d2 = _mm256_set1_ps(H2F(y[ib + 1].d) * Scale(x[ib + 1]));
    acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(DotI8(CodebookValues(kLevels, x[ib].qs), qy1)), acc1);
    acc2 = _mm256_fmadd_ps(d2, _mm256_cvtepi32_ps(DotI8(CodebookValues(kLevels, x[ib + 1].qs), qy2)), acc2);
  }
  float sumf = HsumPs(_mm256_add_ps(acc1, acc2));
  for (; ib < nb; ++ib) {
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[ib].qs));
    const int isum = HsumEpi32(DotI8(CodebookValues(kLevels, x[ib].qs), qy));
    sumf = std::fma(float(isum), H2F(y[ib].d) * Scale(x[ib]), sumf);
  }
  *s = sumf;
}
float IQ4_NLScale(const BlockIQ4_NL& b) { return H2F(b.d); }
float MXFP4Scale(const BlockMXFP4& b) { return E8M0ToFloatHalf(b.e); }
}  // namespace

// (llama.cpp's batched IQ4_NL path, tinyBLAS_Q0_AVX, uses one accumulator instead, and so does this
// project's GEMM for IQ4_NL: like llama.cpp's, an IQ4_NL product is not batch-invariant.)
void VecDotIQ4_NLQ8_0(int64_t n, float* s, const void* vx, const void* vy) {
  VecDotCodebookQ8_0<BlockIQ4_NL, kValuesIQ4NL, IQ4_NLScale>(n, s, vx, vy);
}
// (llama.cpp has no batched path for plain MXFP4: every column takes this vec_dot.)
void VecDotMXFP4Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  VecDotCodebookQ8_0<BlockMXFP4, kValuesMXFP4, MXFP4Scale>(n, s, vx, vy);
}

namespace {
// The 8 exact int32 lanes of one IQ4_XS super-block's dot (lane l: the elements e with e % 32 in
// [4l, 4l + 4), each sub-block's sums times its scale).
inline __m256i IQ4XSLanes(const BlockIQ4_XS& x, const BlockQ8_K& y) {
  __m256i isum = _mm256_setzero_si256();
  for (int ib = 0; ib < kQK_K / 32; ++ib) {
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 32 * ib));
    isum = _mm256_add_epi32(
        isum, _mm256_mullo_epi32(DotI8(IQ4Values(x.qs + 16 * ib), qy), _mm256_set1_epi32(IQ4XSScale(x, ib))));
  }
  return isum;
}
}  // namespace

void VecDotIQ4_XSQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  // Per-lane float accumulation across super-blocks, reduced once at the end (as ggml's AVX2
  // ggml_vec_dot_iq4_xs_q8_K).
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m256i isum = IQ4XSLanes(x[i], y[i]);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
  }
  *s = HsumPs(acc);
}

// The order of llama.cpp 2026's batched "iqp" kernels (ggml-cpu/iqp.cpp, >= 8 src1 columns): one
// float per output, sumf = fma(float(super-block int sum), d * d_y, sumf).
void VecDotIQ4_XSQ8_KIqp(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i)
    sumf = std::fma(float(HsumEpi32(IQ4XSLanes(x[i], y[i]))), H2F(x[i].d) * y[i].d, sumf);
  *s = sumf;
}

void VecDotQ2_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ2_K* x = static_cast<const BlockQ2_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m3 = _mm256_set1_epi8(3);
  // ggml's AVX2 ggml_vec_dot_q2_K_q8_K float order: per super-block acc = fma(-dmin, float(mins
  // lane), acc) (lane l: sub-blocks 2l, 2l + 1), then acc = fma(d, float(lane), acc) (lane l: the
  // elements e with e % 32 in [4l, 4l + 4)); hsum_float_8 at the end.
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* sc = x[i].scales;
    const __m128i mins8 = _mm_and_si128(
        _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)), 4), _mm_set1_epi8(0x0F));
    const __m256i prod = _mm256_madd_epi16(_mm256_cvtepi8_epi16(mins8),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)));
    const float dall = y[i].d * H2F(x[i].d), dmin = -y[i].d * H2F(x[i].dmin);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
    __m256i isum = _mm256_setzero_si256();
    for (int k = 0; k < 2; ++k) {
      const __m256i q2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * k));
      for (int j = 0; j < 4; ++j) {
        const int is = 8 * k + 2 * j;
        const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), m3);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 128 * k + 32 * j));
        isum = _mm256_add_epi32(
            isum, _mm256_madd_epi16(_mm256_maddubs_epi16(v, qy), Scales16(sc[is] & 0xF, sc[is + 1] & 0xF)));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(isum), acc);
  }
  *s = HsumPs(acc);
}

void VecDotQ3_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ3_K* x = static_cast<const BlockQ3_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  // ggml's AVX2 float order: acc = fma(d, float(lane), acc) per super-block (lane l: the elements e
  // with e % 32 in [4l, 4l + 4)), hsum_float_8 at the end.
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc[16];
    UnpackQ3KScales(x[i].scales, sc);
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].hmask));
    __m256i isum = _mm256_setzero_si256();
    for (int k = 0; k < 2; ++k) {
      const __m256i q3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * k));
      for (int j = 0; j < 4; ++j) {
        const int bit = 4 * k + j, is = 8 * k + 2 * j;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q3, 2 * j), m3);
        const __m256i sel = _mm256_set1_epi8(char(1 << bit));
        const __m256i hclear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, sel), _mm256_setzero_si256());
        const __m256i q = _mm256_sub_epi8(low, _mm256_and_si256(hclear, four));  // -4..3
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 128 * k + 32 * j));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(qy, q));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, Scales16(sc[is], sc[is + 1])));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * H2F(x[i].d)), _mm256_cvtepi32_ps(isum), acc);
  }
  *s = HsumPs(acc);
}

void VecDotQ5_KQ8_K(int64_t n, float* s, const void* vx, const void* vy) {
  const BlockQ5_K* x = static_cast<const BlockQ5_K*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  // ggml's AVX2 float order: acc = fma(d, float(lane), acc) per super-block (lane l: the elements e
  // with e % 32 in [4l, 4l + 4)); the mins as a scalar chain summs = fma(float(sum), -dmin, summs);
  // hsum_float_8(acc) + summs at the end.
  __m256 acc = _mm256_setzero_ps();
  float summf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(j, x[i].scales, &sc[j], &mn[j]);
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * mn[j / 2];
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh));
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * j));
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), h0);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1);
      const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * j));
      const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * j + 32));
      isum = _mm256_add_epi32(isum,
                              _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j])));
      isum = _mm256_add_epi32(
          isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const float d = y[i].d * H2F(x[i].d), dmin = -y[i].d * H2F(x[i].dmin);
    summf = std::fma(float(summs), dmin, summf);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  *s = HsumPs(acc) + summf;
}

// RMS_NORM's eight double partial sums (kernels.h SumSquares8): lanes 0-3 and 4-7 of each group of
// 8 floats, squared in float, widened, added in order.
void SumSquares8(int64_t n8, const float* x, double part[8]) {
  __m256d lo = _mm256_loadu_pd(part), hi = _mm256_loadu_pd(part + 4);
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  _mm256_storeu_pd(part, lo);
  _mm256_storeu_pd(part + 4, hi);
}

void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 yf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_fmadd_ps(xf, vv, yf), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    const __m128 xf = _mm_cvtph_ps(_mm_cvtsi32_si128(x[i]));
    const __m128 yf = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));
    y[i] = fp16_t(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_fmadd_ss(xf, _mm_set_ss(v), yf), _MM_FROUND_TO_NEAREST_INT), 0));
  }
}

void ScaleF16(int64_t n, fp16_t* y, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 yf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_mul_ps(yf, vv), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    const __m128 yf = _mm_cvtph_ps(_mm_cvtsi32_si128(y[i]));
    y[i] =
        fp16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_mul_ss(yf, _mm_set_ss(v)), _MM_FROUND_TO_NEAREST_INT), 0));
  }
}

void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks) {
  FlashF16RowsWith(MadF16, ScaleF16, D, n, nh, scores, lds, v, cells, v_stride, acc, ldacc, out, ldo, sinks);
}

void CvtF32F16Strided(int64_t n, const char* src, size_t src_stride, char* dst, size_t dst_stride) {
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, src + size_t(i) * src_stride, 4);
    const uint16_t h = uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT), 0));
    std::memcpy(dst + size_t(i) * dst_stride, &h, 2);
  }
}

}  // namespace stowage::cpu::avx2

// ---- SILU / SWIGLU rows (contiguous) ------------------------------------------------------------

namespace stowage::cpu::avx2 {
namespace {

// exp(x) for 8 lanes with the algorithm and constants of ggml's AVX2 ggml_v_expf (ggml-cpu/vec.h, from
// Arm's optimized-routines expf), bit-identical to llama.cpp's CPU backend built for AVX2: n =
// round(x / ln2) by the 1.5 * 2^23 shifter z, b = x - n ln2 in two fused steps, exp(b) - 1 as
// (c1 b) + u ((c3 b + c2) + u (c5 b + c4)) with u = b * b, times k = 2^n built from z's bits as
// k + k * poly; lanes with |n| > 126 rebuild the scale from two factors s1 * s2 (no overflow in
// between), and |n| > 192 gives s1 * s1 (+inf for n > 0, 0 otherwise).
inline __m256 GgmlExp8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(absn, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
  const __m256 mid = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
  const __m256 j =
      _mm256_fmadd_ps(_mm256_fmadd_ps(hi, u, mid), u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (!_mm256_movemask_ps(c)) return _mm256_fmadd_ps(j, k, k);
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(int(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled =
      _mm256_blendv_ps(_mm256_fmadd_ps(k, j, k), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1), c);
  return _mm256_blendv_ps(scaled, _mm256_mul_ps(s1, s1), d);
}

// silu(x) = x / (1 + exp(-x)) for 8 lanes as ggml_v_silu (AVX2): -x as 0 - x, GgmlExp8, a correctly
// rounded add and divide — bit-identical to llama.cpp's AVX2 CPU backend for every finite x (NaN ->
// NaN, +inf -> +inf); -inf gives -0 (ggml: NaN), the scalar reference's value.
inline __m256 Silu8(__m256 x) {
  const __m256 e = GgmlExp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  const __m256 y = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_blendv_ps(y, _mm256_set1_ps(-0.0f), _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}

// ggml_silu_f32, which ggml's row loops use for the last n % 8 elements.
inline float SiluScalar(float x) { return x == -INFINITY ? -0.0f : x / (1.0f + std::exp(-x)); }

}  // namespace

void SiluRowF32(int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Silu8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = SiluScalar(x[i]);
}

void SwiGluRowF32(int64_t n, const float* a, const float* b, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(Silu8(_mm256_loadu_ps(a + i)), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = SiluScalar(a[i]) * b[i];
}

// ggml_compute_forward_soft_max_f32 / ggml_vec_soft_max_f32 (AVX2), operation for operation.
double SoftMaxRowF32(const float* x, const void* mask, bool mask_f16, float scale, float slope, float* y,
                     int64_t n, const float* sink) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    float w = x[i] * scale;
    if (mask)
      w = std::fma(
          slope,
          mask_f16 ? _cvtsh_ss(static_cast<const uint16_t*>(mask)[i]) : static_cast<const float*>(mask)[i],
          w);
    y[i] = w;
    max = std::max(max, w);
  }
  if (sink) max = std::max(max, *sink);
  double sum = 0.0;
  const __m256 vm = _mm256_set1_ps(max);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = GgmlExp8(_mm256_sub_ps(_mm256_loadu_ps(y + i), vm));
    _mm256_storeu_ps(y + i, e);
    sum += double(HsumPs(e));
  }
  for (; i < n; ++i) {
    const float e = std::exp(y[i] - max);
    sum += double(e);
    y[i] = e;
  }
  if (sink) sum += double(std::exp(*sink - max));
  const float inv = float(1.0 / sum);
  for (i = 0; i < n; ++i) y[i] *= inv;
  return sum;
}

}  // namespace stowage::cpu::avx2

// ---- attention-shaped F16 gemv (token generation) -------------------------------------------------

namespace stowage::cpu::avx2 {
namespace {

// Lane c of the result = horizontal sum of v[c] (c < 8), by a transpose/add tree (7 adds, 14
// shuffles for 8 dots). Per dot the 8 lanes are added in a fixed pairwise order (lane q + q+4, then
// +2, +1). Level 3 leaves input slot 2e + q in output lane 4q + e, so the inputs are read transposed.
inline __m256 Reduce8(const __m256* v) {
  auto slot = [&](int s) { return v[(s % 2) * 4 + s / 2]; };
  __m256 w[4];
  for (int i = 0; i < 4; ++i) {  // 128-bit halves: slot 2i low, 2i+1 high
    const __m256 a = slot(2 * i), b = slot(2 * i + 1);
    w[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  __m256 t[2];
  for (int i = 0; i < 2; ++i)  // half q: 2 partials of slot 4i + q, 2 of slot 4i + 2 + q
    t[i] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Rows are prefetched into L2 16 rows ahead at the offset being read (as the AVX-512 kernel).
constexpr size_t kPfRows = 16;

// R rows x H heads = 8 dots per pass; accumulator c = h * R + r. Rows past nrows reuse the last row
// (results dropped). The K tail (K % 8) goes through zero-padded copies.
template <int R, int H>
void GemvF16HeadsRH(int64_t K, int64_t nrows, const char* x, size_t ldx, const float* y, size_t ldy, float* s,
                    size_t lds) {
  static_assert(R * H == 8, "8 accumulators");
  const int64_t kfull = K & ~int64_t(7);
  const int rem = int(K & 7);
  alignas(32) float ytail[H][8] = {};
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < rem; ++k) ytail[h][k] = y[size_t(h) * ldy + size_t(kfull + k)];
  const size_t pf = kPfRows * ldx;
  for (int64_t i0 = 0; i0 < nrows; i0 += R) {
    const fp16_t* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = reinterpret_cast<const fp16_t*>(x + size_t(std::min<int64_t>(i0 + r, nrows - 1)) * ldx);
    __m256 acc[8];
    for (int c = 0; c < 8; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kfull; k += 8) {
      if ((k & 31) == 0)  // one prefetch per 64 bytes of the rows kPfRows ahead
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(xr[r] + k) + pf, _MM_HINT_T1);
      __m256 xv[R];
      for (int r = 0; r < R; ++r)
        xv[r] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xr[r] + k)));
      for (int h = 0; h < H; ++h) {
        const __m256 yv = _mm256_loadu_ps(y + size_t(h) * ldy + k);
        for (int r = 0; r < R; ++r) acc[h * R + r] = _mm256_fmadd_ps(xv[r], yv, acc[h * R + r]);
      }
    }
    if (rem) {
      __m256 xv[R];
      for (int r = 0; r < R; ++r) {
        alignas(16) fp16_t xt[8] = {};
        std::memcpy(xt, xr[r] + kfull, size_t(rem) * sizeof(fp16_t));
        xv[r] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(xt)));
      }
      for (int h = 0; h < H; ++h) {
        const __m256 yv = _mm256_load_ps(ytail[h]);
        for (int r = 0; r < R; ++r) acc[h * R + r] = _mm256_fmadd_ps(xv[r], yv, acc[h * R + r]);
      }
    }
    alignas(32) float tmp[8];  // head h's R results: lanes h * R .. h * R + R - 1, in row order
    _mm256_store_ps(tmp, Reduce8(acc));
    const int64_t nr = std::min<int64_t>(R, nrows - i0);
    if (nr == R) {
      for (int h = 0; h < H; ++h)
        std::memcpy(s + size_t(h) * lds + size_t(i0), tmp + h * R, R * sizeof(float));
    } else {
      for (int h = 0; h < H; ++h)
        for (int64_t r = 0; r < nr; ++r) s[size_t(h) * lds + size_t(i0 + r)] = tmp[h * R + r];
    }
  }
}

}  // namespace

void GemvF16Heads(int64_t K, int64_t nrows, const void* x, size_t ldx, int64_t nh, const float* y, size_t ldy,
                  float* s, size_t lds) {
  const char* xb = static_cast<const char*>(x);
  int64_t h = 0;
  for (; h + 4 <= nh; h += 4)
    GemvF16HeadsRH<2, 4>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
  for (; h + 2 <= nh; h += 2)
    GemvF16HeadsRH<4, 2>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
  for (; h < nh; ++h)
    GemvF16HeadsRH<8, 1>(K, nrows, xb, ldx, y + size_t(h) * ldy, ldy, s + size_t(h) * lds, lds);
}

// y = x rounded to F16 and back (FromFloatF16's rounding: vcvtps2ph to nearest even), n floats.
void RoundRowF16(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) y[i] = H2F(FloatToHalf(x[i]));
}

}  // namespace stowage::cpu::avx2

// ---- ROPE rotation (kernels.h RopeRotate; -mfma makes std::fma one instruction) -------------------

namespace stowage::cpu::avx2 {

#include "rope_rotate.inc"  // NOLINT(build/include): one copy per level

}  // namespace stowage::cpu::avx2

// ---- llamafile tinyBLAS order for F32/F16 weights (kernels.h MatMulLlamafile) -------------------

namespace stowage::cpu::avx2 {
namespace {

inline __m256 LoadRow8(const void* w, bool f16, int64_t k) {
  return f16 ? _mm256_cvtph_ps(
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + k)))
             : _mm256_loadu_ps(static_cast<const float*>(w) + k);
}

template <int RM, int RN>
void Tile(int64_t K, bool f16, const char* w, size_t ldw, const float* a, size_t lda, float* d, size_t ldd) {
  __m256 acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 8) {
    __m256 wv[RM];
    for (int r = 0; r < RM; ++r) wv[r] = LoadRow8(w + size_t(r) * ldw, f16, k);
    for (int c = 0; c < RN; ++c) {
      const __m256 av = _mm256_loadu_ps(a + size_t(c) * lda + k);
      for (int r = 0; r < RM; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], av, acc[r][c]);
    }
  }
  for (int c = 0; c < RN; ++c)
    for (int r = 0; r < RM; ++r) d[size_t(c) * ldd + size_t(r)] = HsumPs(acc[r][c]);
}

}  // namespace

void MatMulLlamafile(int64_t K, bool f16, const void* w, size_t ldw, int64_t nr, const float* a, size_t lda,
                     int64_t nc, float* d, size_t ldd) {
  const char* wb = static_cast<const char*>(w);
  constexpr int kRM = 3, kRN = 4;
  int64_t r = 0;
  for (; r + kRM <= nr; r += kRM) {
    int64_t c = 0;
    for (; c + kRN <= nc; c += kRN)
      Tile<kRM, kRN>(K, f16, wb + size_t(r) * ldw, ldw, a + size_t(c) * lda, lda,
                     d + size_t(c) * ldd + size_t(r), ldd);
    for (; c < nc; ++c)
      Tile<kRM, 1>(K, f16, wb + size_t(r) * ldw, ldw, a + size_t(c) * lda, lda,
                   d + size_t(c) * ldd + size_t(r), ldd);
  }
  for (; r < nr; ++r) {
    int64_t c = 0;
    for (; c + kRN <= nc; c += kRN)
      Tile<1, kRN>(K, f16, wb + size_t(r) * ldw, ldw, a + size_t(c) * lda, lda,
                   d + size_t(c) * ldd + size_t(r), ldd);
    for (; c < nc; ++c)
      Tile<1, 1>(K, f16, wb + size_t(r) * ldw, ldw, a + size_t(c) * lda, lda, d + size_t(c) * ldd + size_t(r),
                 ldd);
  }
}

}  // namespace stowage::cpu::avx2
