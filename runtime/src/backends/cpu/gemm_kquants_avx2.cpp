// GEMM family "kquants", AVX2 kernels (this file is compiled with -mavx2 -mfma -mf16c; the lookup in
// gemm_kquants.cpp returns them at IsaLevel::kAvx2). Same panels and activation records as the
// scalar and AVX-512 code (see gemm_kquants.cpp); packing is the scalar code's.
//
// Without VNNI, a k-step of 8 rows (one ymm: 8 rows x 4 unsigned bytes) times one column is
// vpmaddubsw (u8 x s8 -> adjacent pairs summed in int16) with the broadcast activation bytes. The
// int16 pair sums of up to kChunk consecutive k-steps are added in int16 (no saturation: kChunk is
// chosen per type so that kChunk * 2 * q_max * 127 <= 32767), then vpmaddwd with the row's group
// scale repeated in both int16 halves multiplies and adds the two pair sums of a row into its
// int32 lane: the group scaling costs nothing extra. Types whose single vpmaddubsw could saturate
// (IQ4_XS: q up to 241) have no AVX2 kernel.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "gemm.h"
#include "gemm_kquants_layout.h"
#include "keep_in_register.h"

namespace stowage::cpu::avx2 {
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

inline __m256i Ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i Bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256 BcastF(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_ps(v);
}

// NC columns x 16 rows (two halves of 8 rows). kChunk: k-steps summed in int16 before vpmaddwd.
template <int NC, typename L, int kChunk>
void Cols(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
          size_t dst_stride, int nr) {
  constexpr int kSteps = kQK / L::kGroups / 4;
  static_assert(kSteps % kChunk == 0, "chunks tile a group");
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) a[c] = act + size_t(c) * act_stride;
  __m256 acc[NC][2];
  for (int c = 0; c < NC; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += L::kBytes) {
    __m256i sumi[NC][2];
    for (int c = 0; c < NC; ++c)
      for (int h = 0; h < 2; ++h) sumi[c][h] = _mm256_setzero_si256();
    for (int g = 0; g < L::kGroups; ++g) {
      __m256i scp[2];  // (sc, sc) int16 pairs of the 8 rows
      for (int h = 0; h < 2; ++h) {
        const __m256i sc = Ld(panel + L::kSc + size_t(g) * 64 + h * 32);
        scp[h] = _mm256_blend_epi16(sc, _mm256_slli_epi32(sc, 16), 0xAA);
      }
      for (int t0 = 0; t0 < kSteps; t0 += kChunk) {
        const uint8_t* wq = panel + size_t(g * kSteps + t0) * 64;
        for (int c = 0; c < NC; ++c) {
          __m256i p16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
          for (int t = 0; t < kChunk; ++t) {
            const __m256i av = Bcast32(a[c] + (g * kSteps + t0 + t) * 4);
            for (int h = 0; h < 2; ++h) {
              p16[h] = _mm256_add_epi16(p16[h], _mm256_maddubs_epi16(Ld(wq + t * 64 + h * 32), av));
              KeepInRegister(p16[h]);  // keep_in_register.h: no reassociated tree on the stack
            }
          }
          for (int h = 0; h < 2; ++h) {
            sumi[c][h] = _mm256_add_epi32(sumi[c][h], _mm256_madd_epi16(p16[h], scp[h]));
            KeepInRegister(sumi[c][h]);
          }
        }
      }
    }
    for (int c = 0; c < NC; ++c) {
      const __m256 dc = BcastF(a[c] + kActD);
      for (int h = 0; h < 2; ++h) {
        // zero-point term: sum over group pairs of (t_2p, t_2p+1) . (bsum_2p, bsum_2p+1)
        __m256i sumt = _mm256_setzero_si256();
        for (int p = 0; p < L::kGroups / 2; ++p)
          sumt = _mm256_add_epi32(sumt, _mm256_madd_epi16(Ld(panel + L::kPairs + p * 64 + h * 32),
                                                          Bcast32(a[c] + L::kActBsums + p * 4)));
        const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(panel + L::kD) + 8 * h);
        if constexpr (L::kMin) {
          const __m256 dmin = _mm256_loadu_ps(reinterpret_cast<const float*>(panel + L::kDmin) + 8 * h);
          __m256 blk = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi[c][h]), d);
          blk = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sumt), dmin, blk);
          acc[c][h] = _mm256_fmadd_ps(blk, dc, acc[c][h]);
        } else {
          const __m256i s = _mm256_add_epi32(sumi[c][h], sumt);
          acc[c][h] = _mm256_fmadd_ps(_mm256_mul_ps(d, dc), _mm256_cvtepi32_ps(s), acc[c][h]);
        }
      }
      a[c] += kActBlockBytes;
    }
  }
  for (int c = 0; c < NC; ++c) {
    float* out = dst + size_t(c) * dst_stride;
    if (nr == kGemmPanelRows) {
      _mm256_storeu_ps(out, acc[c][0]);
      _mm256_storeu_ps(out + 8, acc[c][1]);
    } else {
      alignas(32) float tmp[16];
      _mm256_store_ps(tmp, acc[c][0]);
      _mm256_store_ps(tmp + 8, acc[c][1]);
      std::memcpy(out, tmp, size_t(nr) * sizeof(float));
    }
  }
}

template <typename L, int kChunk>
void Run(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
         size_t dst_stride, int nr) {
  const int64_t nb = K / kQK;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + 2 <= nc; c += 2)
    Cols<2, L, kChunk>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                       dst_stride, nr);
  if (c < nc)
    Cols<1, L, kChunk>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                       dst_stride, nr);
}

inline int HsumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

// QuantizeRowQ8_K (kquants.cpp) into the activation layout, bit-identical to it (same rules as
// avx512::FromFloatQ8_KAct: first element of the largest magnitude sets the sign, vcvtps2dq rounds
// half to even like nearbyintf, min 127; a block with a NaN or +-inf gets d = NaN, qs = bsums = 0).
void FromFloatQ8_KAct(const float* x, void* act, int64_t K) {
  uint8_t* out = static_cast<uint8_t*>(act);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 big = _mm256_set1_ps(FLT_MAX);
  for (int64_t b = 0; b < K / kQK; ++b, x += kQK, out += kActBlockBytes) {
    __m256 am8 = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) {
      const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));
      am8 = _mm256_max_ps(am8, a);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ));  // NaN (unordered) or inf
    }
    if (_mm256_movemask_ps(bad)) {
      const float d = std::numeric_limits<float>::quiet_NaN();
      std::memset(out, 0, kActBlockBytes);
      std::memcpy(out + kActD, &d, 4);
      continue;
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am8), _mm256_extractf128_ps(am8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    std::memset(out + kActD + 4, 0, kActBlockBytes - kActD - 4);
    if (!(amax > 0)) {
      StoreZeroQsBlock(out, 0.0f);
      continue;
    }
    const __m256 am = _mm256_set1_ps(amax);
    float max = 0;
    for (int i = 0; i < 32; ++i) {
      const int m = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), am, _CMP_EQ_OQ));
      if (m) {
        max = x[8 * i + __builtin_ctz(unsigned(m))];
        break;
      }
    }
    const float iscale = -127.f / max;
    if (std::isinf(iscale)) {  // |max| < 127 / FLT_MAX: as QuantizeRowQ8_K (every product +-inf / NaN -> 0)
      StoreZeroQsBlock(out, 1 / iscale);
      continue;
    }
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i lim = _mm256_set1_epi32(127), low = _mm256_set1_epi32(-128);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int16_t bs16[16];
    for (int i = 0; i < 8; ++i) {  // 32 elements: 4 x 8 int32 -> 32 int8
      __m256i q[4];
      // Clamped to [-128, 127] (the lower bound a no-op for finite x; defensive against
      // vcvtps2dq's INT_MIN) so bsums are sums of exactly the stored (saturated) int8.
      for (int j = 0; j < 4; ++j)
        q[j] = _mm256_max_epi32(
            _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + 32 * i + 8 * j))), lim),
            low);
      const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * i), _mm256_permutevar8x32_epi32(p8, order));
      bs16[2 * i] = int16_t(HsumEpi32(_mm256_add_epi32(q[0], q[1])));
      bs16[2 * i + 1] = int16_t(HsumEpi32(_mm256_add_epi32(q[2], q[3])));
    }
    int16_t bs32[8];
    for (int j = 0; j < 8; ++j) bs32[j] = int16_t(bs16[2 * j] + bs16[2 * j + 1]);
    std::memcpy(out + kActBsums16, bs16, sizeof bs16);
    std::memcpy(out + kActBsums32, bs32, sizeof bs32);
    const float d = 1 / iscale;
    std::memcpy(out + kActD, &d, 4);
  }
}

// kChunk (|int16 sum| <= kChunk x 2 x q_max x 127): Q4_K 4 (15240; 8 would fit but its longer add
// chain measured slower), Q5_K 4 (31496), Q6_K 2 (32004), Q3_K and Q2_K a whole group of 16 (4).
void GemmKernelQ4_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Run<SmLayout32, 4>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelQ5_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Run<SmLayout32, 4>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelQ2_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Run<SmLayout16, 4>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelQ3_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Run<SzLayout16, 4>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmKernelQ6_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Run<SzLayout16, 2>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

}  // namespace stowage::cpu::avx2
