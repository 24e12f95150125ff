// GEMM family "q8", AVX2 kernel (formats: see gemm_q8.cpp; the same activation rows and panels as
// the scalar and AVX-512 levels). Compiled with -mavx2 -mfma -mf16c; called only on such CPUs.
//
// AVX2 has no vpdpbusd: `vpmaddubsw` multiplies the unsigned weight bytes by the signed activation
// bytes and adds pairs into int16 — saturating, so each int16 chain must stay below 32767:
//   Q4_0 (u < 16): 2 * 15 * 127 = 3810 per k-step: all 8 k-steps of a block in one int16 chain;
//   Q5_0 (u < 32): 2 * 31 * 127 = 7874 per k-step: chains of 4 k-steps;
// `vpmaddwd` with 1 widens the chains into int32 lanes (4 k of a row per lane), added to the
// accumulator that starts at the column's zero-point correction.
//   Q8_0, IQ4_NL (u = q + 128 < 256): signed bytes instead (KernelI8): vpmaddubsw(|q|, sign(x, q))
//   per k-step, widened at once (no zero point).
// Exact integer sums, then per block acc = fma(float(isum), dw * d, acc) per row — the scalar
// reference's operations, identical bits (the one-float-per-output order of gemm_q8.cpp; not the
// AVX2 vec_dots' 8-lane order, so these kernels are not used for batch-invariant products, except
// for kLayoutQ4_0x8 whose gemv has this order).
// Register blocking: 16 rows (two ymm halves) x 3 columns (2 for Q8_0 / IQ4_NL).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "keep_in_register.h"

namespace stowage::cpu::avx2 {
namespace {

constexpr int kActBlockBytes = 72;        // gemm_q8.cpp (corr_total at byte 68)
constexpr int kActBlockBytesMin = 40;     // gemm_q8.cpp (Q4_1/Q5_1: s at byte 36)
constexpr int kPanelBlockBytes = 576;     // gemm_q8.cpp
constexpr int kPanelBlockBytesMin = 640;  // gemm_q8.cpp (Q4_1/Q5_1: + float m[16])

inline __m256i Bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline float LoadF(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// The first nr (<= 16) of a column's 16 row results (two ymm halves) to out.
inline void StoreRows(float* out, __m256 lo, __m256 hi, int nr) {
  if (nr == 16) {
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
  } else {
    alignas(32) float tmp[16];
    _mm256_store_ps(tmp, lo);
    _mm256_store_ps(tmp + 8, hi);
    std::memcpy(out, tmp, size_t(nr) * sizeof(float));
  }
}

// One block's float step for a column: sum[h] = fma(float(acc[h]), dw_h * d, sum[h]) on the two
// 8-row halves (the panel's row scales dw at byte 512, the column's scale d at byte 32 of its
// activation block) — the scalar reference's operation.
inline void AddBlock(__m256 sum[2], const __m256i acc[2], const uint8_t* rec, const uint8_t* act) {
  const __m256 d = _mm256_set1_ps(LoadF(act + 32));
  const __m256 dw0 = _mm256_load_ps(reinterpret_cast<const float*>(rec + 512));
  const __m256 dw1 = _mm256_load_ps(reinterpret_cast<const float*>(rec + 512 + 32));
  sum[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[0]), _mm256_mul_ps(dw0, d), sum[0]);
  sum[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[1]), _mm256_mul_ps(dw1, d), sum[1]);
}

enum Mode { kU4 = 0, kU5 = 1 };

// kMin (Q4_1/Q5_1): no zero point, and the rows' mins times the column's s added per block.
template <int M, int NC, bool kMin>
void Columns(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
             size_t dst_stride, int nr) {
  constexpr int kRec = kMin ? kPanelBlockBytesMin : kPanelBlockBytes;
  __m256 sum[NC][2];
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) {
    sum[c][0] = _mm256_setzero_ps();
    sum[c][1] = _mm256_setzero_ps();
    a[c] = act + size_t(c) * act_stride;
  }
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t* rec = panel;
  for (int64_t b = 0; b < nb; ++b, rec += kRec) {
    // The int32 accumulators start after the first chain (the correction added then): live across
    // the int16 chains they spilled (Q4_0, 3 columns: 18 ymm).
    __m256i acc[NC][2];
    constexpr int kChain = M == kU5 ? 4 : 8;
    for (int s0 = 0; s0 < 8; s0 += kChain) {
      __m256i lo[NC][2];
      for (int c = 0; c < NC; ++c)
        for (int h = 0; h < 2; ++h) lo[c][h] = _mm256_setzero_si256();
      for (int s = s0; s < s0 + kChain; ++s) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 64 * s));
        const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 64 * s + 32));
        for (int c = 0; c < NC; ++c) {
          const __m256i x = Bcast32(a[c] + 4 * s);
          lo[c][0] = _mm256_add_epi16(lo[c][0], _mm256_maddubs_epi16(w0, x));
          lo[c][1] = _mm256_add_epi16(lo[c][1], _mm256_maddubs_epi16(w1, x));
          KeepInRegister(lo[c][0]);
          KeepInRegister(lo[c][1]);
        }
      }
      for (int c = 0; c < NC; ++c)
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_madd_epi16(lo[c][h], ones);
          if (s0 > 0)
            acc[c][h] = _mm256_add_epi32(acc[c][h], v);
          else
            acc[c][h] = kMin ? v : _mm256_add_epi32(Bcast32(a[c] + 68), v);
        }
    }
    for (int c = 0; c < NC; ++c) {
      AddBlock(sum[c], acc[c], rec, a[c]);
      if (kMin) {
        const __m256 sa = _mm256_set1_ps(LoadF(a[c] + 36));
        sum[c][0] = _mm256_fmadd_ps(_mm256_load_ps(reinterpret_cast<const float*>(rec + 576)), sa, sum[c][0]);
        sum[c][1] =
            _mm256_fmadd_ps(_mm256_load_ps(reinterpret_cast<const float*>(rec + 576 + 32)), sa, sum[c][1]);
      }
      a[c] += kMin ? kActBlockBytesMin : kActBlockBytes;
    }
  }
  for (int c = 0; c < NC; ++c) StoreRows(dst + size_t(c) * dst_stride, sum[c][0], sum[c][1], nr);
}

// U8 (Q8_0, IQ4_NL: u = q + 128) with signed bytes instead of nibbles: q = u ^ 0x80, and
// vpmaddubsw(|q|, sign(x, q)) = the pair sums of q * x, at most 2 * 128 * 127 = 32512 in magnitude
// (activations are in [-127, 127]), widened at once by vpmaddwd with 1. The int32 lanes are then
// sum(q * x) itself (no zero-point correction): the same integers as the nibble chains plus the
// correction, so the same float bits. Half the int16 registers of the nibble form: the nibble
// kernel spilled its chains to the stack (0.85B Q8_0 pp on an AVX2-only Zen 3: 73 t/s at 2 threads,
// half of Q4_0's).
template <int NC>
void ColumnsI8(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
               size_t dst_stride, int nr) {
  __m256 sum[NC][2];
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) {
    sum[c][0] = _mm256_setzero_ps();
    sum[c][1] = _mm256_setzero_ps();
    a[c] = act + size_t(c) * act_stride;
  }
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80));
  const uint8_t* rec = panel;
  for (int64_t b = 0; b < nb; ++b, rec += kPanelBlockBytes) {
    __m256i acc[NC][2];
    for (int c = 0; c < NC; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i q0 =
          _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 64 * s)), k80);
      const __m256i q1 =
          _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + 64 * s + 32)), k80);
      const __m256i u0 = _mm256_abs_epi8(q0), u1 = _mm256_abs_epi8(q1);
      for (int c = 0; c < NC; ++c) {
        const __m256i x = Bcast32(a[c] + 4 * s);
        acc[c][0] = _mm256_add_epi32(
            acc[c][0], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(x, q0)), ones));
        acc[c][1] = _mm256_add_epi32(
            acc[c][1], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(x, q1)), ones));
        KeepInRegister(acc[c][0]);
        KeepInRegister(acc[c][1]);
      }
    }
    for (int c = 0; c < NC; ++c) {
      AddBlock(sum[c], acc[c], rec, a[c]);
      a[c] += kActBlockBytes;
    }
  }
  for (int c = 0; c < NC; ++c) StoreRows(dst + size_t(c) * dst_stride, sum[c][0], sum[c][1], nr);
}

void KernelI8(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
              size_t dst_stride, int nr) {
  constexpr int kCols =
      2;  // measured on Zen 3: 1, 2 and 3 columns within the noise; 2 needs fewest registers
  const int64_t nb = K / 32;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kCols <= nc; c += kCols)
    ColumnsI8<kCols>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride,
                     nr);
  for (; c < nc; ++c)
    ColumnsI8<1>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
}

template <int M, bool kMin = false>
void Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
            size_t dst_stride, int nr) {
  constexpr int kCols = 3;  // measured: U4 2 -> 3 columns: 168 -> 186 GOPS
  const int64_t nb = K / 32;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kCols <= nc; c += kCols)
    Columns<M, kCols, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                            dst_stride, nr);
  if (nc - c == 2)
    Columns<M, 2, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                        dst_stride, nr);
  else if (nc - c == 1)
    Columns<M, 1, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                        dst_stride, nr);
}

}  // namespace

void GemmQ8KernelU4(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Kernel<kU4>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelU5(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  Kernel<kU5>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelU8(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr) {
  KernelI8(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

void GemmQ8KernelMinU4(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr) {
  Kernel<kU4, true>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelMinU5(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr) {
  Kernel<kU5, true>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

}  // namespace stowage::cpu::avx2
