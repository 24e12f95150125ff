// GEMM family "q8", AVX-512 VNNI kernels (formats and float orders: see gemm_q8.cpp). Compiled with
// -mavx512* -mavx512vnni; called only when the CPU has AVX512-VNNI.
//
// Register blocking: 16 panel rows (one zmm of int32 / f32 lanes) x NC columns. vpdpbusd multiplies
// the packed unsigned weights of one k-step s (4 elements of each of the 16 rows) by 4 broadcast
// signed activation bytes (folded into the instruction's {1to16} memory operand), starting from a
// zero-point correction (a broadcast load), so every int32 lane is an exact integer sum.
//   Kernel / KernelMin (one float per output): the 8 k-steps of a block in one int32 chain from corr_total,
//   then
//     per column one cvtdq2ps, one multiply of the 16 row scales by the broadcast column scale and
//     one FMA into the column's float accumulator — the scalar reference's operations in the same
//     order, so results are bit-identical to it (and, for kLayoutQ4_0x8, to the Q4_0x8 gemv).
//   KernelLanes / KernelMinLanes (batch-invariant products of plain layouts): ggml's AVX2 vec_dot per output
//   — lane s of the output
//     is a float accumulator of its own (one zmm per k-step s and column: 8 x NC accumulators),
//     acc[s] = fma(dw * d, float(k-step int sum), acc[s]) per block, ggml's hsum_float_8 tree at the
//     end; the min types add their scalar chain summ = fma(m, s, summ) (ggml_vec_dot_q4_1_q8_1) to
//     the reduced lanes. Bit-identical to this project's AVX2/AVX-512 vec_dots, hence to a column
//     multiplied alone.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops.h"
#include "quants.h"

namespace stowage::cpu::avx512 {
namespace {

constexpr int kActBlockBytes = 72;        // gemm_q8.cpp: { qs[32]; float d; int32 corr[8]; int32 corr_total }
constexpr int kActBlockBytesMin = 40;     // gemm_q8.cpp: { qs[32]; float d; float s } (Q4_1/Q5_1)
constexpr int kPanelBlockBytes = 576;     // gemm_q8.cpp
constexpr int kPanelBlockBytesMin = 640;  // gemm_q8.cpp (Q4_1/Q5_1: + float m[16])

inline int32_t Load32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float LoadF(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// acc += the 16 lanes' 4 unsigned bytes of w times the 4 signed bytes at p (broadcast). GCC does not
// fold _mm512_set1_epi32(load) into vpdpbusd's m32bcst operand (it emits a separate
// vpbroadcastd), so the embedded-broadcast form is written out.
inline __m512i DpbusdBcast(__m512i acc, __m512i w, const uint8_t* p) {
#if defined(__GNUC__)
  __asm__("vpdpbusd %[m]%{1to16%}, %[w], %[acc]"
          : [acc] "+v"(acc)
          : [w] "v"(w), [m] "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
#else
  return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(Load32(p)));
#endif
}

// ---- one float per output ----

// Blocks [0, nb) of `panel` / `act` for NC columns; the float accumulators start at 0 (first) or
// at dst's values (a later K chunk: the same fma chain continued, so chunking changes no bit).
// kMin (Q4_1/Q5_1 records): no zero point (the chain starts at 0), and after the block's fma a
// second one adds the rows' mins times the column's s.
template <int NC, bool kMin>
void Columns(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
             size_t dst_stride, __mmask16 mask, bool first) {
  constexpr int kRec = kMin ? kPanelBlockBytesMin : kPanelBlockBytes;
  __m512 sum[NC];
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) {
    sum[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, dst + size_t(c) * dst_stride);
    a[c] = act + size_t(c) * act_stride;
  }
  const uint8_t* rec = panel;
  for (int64_t b = 0; b < nb; ++b, rec += kRec) {
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c)
      acc[c] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(Load32(a[c] + 68));
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_load_si512(reinterpret_cast<const void*>(rec + 64 * s));
      for (int c = 0; c < NC; ++c) acc[c] = DpbusdBcast(acc[c], w, a[c] + 4 * s);
    }
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(rec + 512));
    for (int c = 0; c < NC; ++c) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(LoadF(a[c] + 32)));
      sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[c]), scale, sum[c]);
      if (kMin)
        sum[c] = _mm512_fmadd_ps(_mm512_load_ps(reinterpret_cast<const float*>(rec + 576)),
                                 _mm512_set1_ps(LoadF(a[c] + 36)), sum[c]);
      a[c] += kMin ? kActBlockBytesMin : kActBlockBytes;
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(dst + size_t(c) * dst_stride, mask, sum[c]);
}

constexpr int kCols = 8;
// Blocks per K chunk: the chunk of the panel (kChunkBlocks * 576 bytes) stays in L1 while every
// column group of the call passes over it; the next chunk continues from the stored sums.
constexpr int64_t kChunkBlocks = 32;

template <bool kMin>
void Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
            size_t dst_stride, int nr) {
  constexpr int kRec = kMin ? kPanelBlockBytesMin : kPanelBlockBytes;
  constexpr int kAct = kMin ? kActBlockBytesMin : kActBlockBytes;
  const int64_t nb = K / 32;
  const __mmask16 mask = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1u);
  if (nb == 0) {  // K = 0: an empty dot is 0 (the chunk loop below would store nothing)
    for (int c = 0; c < nc; ++c)
      _mm512_mask_storeu_ps(dst + size_t(c) * dst_stride, mask, _mm512_setzero_ps());
    return;
  }
  for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
    const int64_t cb = std::min(kChunkBlocks, nb - b0);
    const bool first = b0 == 0;
    const uint8_t* p = static_cast<const uint8_t*>(panel) + size_t(b0) * kRec;
    const uint8_t* a = static_cast<const uint8_t*>(act) + size_t(b0) * kAct;
    float* d = dst;
    int c = 0;
    for (; c + kCols <= nc; c += kCols, a += kCols * act_stride, d += kCols * dst_stride)
      Columns<kCols, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
    switch (nc - c) {
      case 1:
        Columns<1, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 2:
        Columns<2, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 3:
        Columns<3, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 4:
        Columns<4, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 5:
        Columns<5, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 6:
        Columns<6, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      case 7:
        Columns<7, kMin>(cb, p, a, act_stride, d, dst_stride, mask, first);
        break;
      default:
        break;
    }
  }
}

// ---- ggml's 8-lane vec_dot order (plain layouts) ----

// ggml's hsum_float_8 on lanes held in eight registers (one per k-step s): the sum of each of the
// 16 rows is ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
// (Arguments by value: an array argument would take the accumulators' address and make GCC keep
// them in memory across the loop.)
inline __m512 Hsum8(__m512 l0, __m512 l1, __m512 l2, __m512 l3, __m512 l4, __m512 l5, __m512 l6, __m512 l7) {
  const __m512 t0 = _mm512_add_ps(l4, l0), t1 = _mm512_add_ps(l5, l1);
  const __m512 t2 = _mm512_add_ps(l6, l2), t3 = _mm512_add_ps(l7, l3);
  return _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
}

// The whole of K for NC columns (the lanes cannot continue through dst, so there is no K chunking;
// the panel is re-read from L2 by each column group).
template <int NC, bool kMin>
void LaneColumns(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
                 size_t dst_stride, __mmask16 mask) {
  constexpr int kRec = kMin ? kPanelBlockBytesMin : kPanelBlockBytes;
  constexpr int kAct = kMin ? kActBlockBytesMin : kActBlockBytes;
  __m512 acc[NC][8];
  __m512 summ[NC];
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) {
    for (int s = 0; s < 8; ++s) acc[c][s] = _mm512_setzero_ps();
    summ[c] = _mm512_setzero_ps();
    a[c] = act + size_t(c) * act_stride;
  }
  const __m512i magic_i = _mm512_set1_epi32(0x4B400000);
  const __m512 magic_f = _mm512_set1_ps(12582912.0f);
  const uint8_t* rec = panel;
  for (int64_t b = 0; b < nb; ++b, rec += kRec) {
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(rec + 512));
    __m512 dv[NC];
    for (int c = 0; c < NC; ++c) dv[c] = _mm512_mul_ps(dw, _mm512_set1_ps(LoadF(a[c] + 32)));
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_load_si512(reinterpret_cast<const void*>(rec + 64 * s));
      for (int c = 0; c < NC; ++c) {
        // The int32 chain starts at corr[s] + 0x4B400000 (kMin: 0x4B400000): its bits are then the
        // float 1.5 * 2^23 + isum exactly (|isum| < 2^22), and one subtraction (an FADD-pipe op)
        // replaces vcvtdq2ps, which competes with vpdpbusd and the FMA for the same two pipes.
        const __m512i start = kMin ? magic_i : _mm512_set1_epi32(Load32(a[c] + 36 + 4 * s));
        const __m512 f =
            _mm512_castsi512_ps(_mm512_dpbusd_epi32(start, w, _mm512_set1_epi32(Load32(a[c] + 4 * s))));
        acc[c][s] = _mm512_fmadd_ps(dv[c], _mm512_sub_ps(f, magic_f), acc[c][s]);
      }
    }
    if (kMin) {
      const __m512 m = _mm512_load_ps(reinterpret_cast<const float*>(rec + 576));
      for (int c = 0; c < NC; ++c) summ[c] = _mm512_fmadd_ps(m, _mm512_set1_ps(LoadF(a[c] + 36)), summ[c]);
    }
    for (int c = 0; c < NC; ++c) a[c] += kAct;
  }
  for (int c = 0; c < NC; ++c) {
    __m512 r = Hsum8(acc[c][0], acc[c][1], acc[c][2], acc[c][3], acc[c][4], acc[c][5], acc[c][6], acc[c][7]);
    if (kMin) r = _mm512_add_ps(r, summ[c]);
    _mm512_mask_storeu_ps(dst + size_t(c) * dst_stride, mask, r);
  }
}

template <bool kMin>
void KernelLanes(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                 size_t dst_stride, int nr) {
  // 8 NC accumulators + NC column scales (+ NC mins chains) + the weights: 3 columns fit the 32
  // registers (2 for the min types).
  constexpr int kLaneCols = kMin ? 2 : 3;
  const int64_t nb = K / 32;
  const __mmask16 mask = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1u);
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kLaneCols <= nc; c += kLaneCols)
    LaneColumns<kLaneCols, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                                 dst_stride, mask);
  if (nc - c == 2)
    LaneColumns<2, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                         dst_stride, mask);
  else if (nc - c == 1)
    LaneColumns<1, kMin>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                         dst_stride, mask);
}

}  // namespace

void GemmQ8Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                  size_t dst_stride, int nr) {
  Kernel<false>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelMin(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                     size_t dst_stride, int nr) {
  Kernel<true>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelLanes(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr) {
  KernelLanes<false>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}
void GemmQ8KernelMinLanes(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                          float* dst, size_t dst_stride, int nr) {
  KernelLanes<true>(K, panel, act, act_stride, nc, dst, dst_stride, nr);
}

// Non-finite blocks as QuantizeRowQ8_0Act (quants.cpp): a NaN or +-inf element gives d = NaN,
// qs = 0 and a zero correction, so every dot with the block is NaN.
void GemmQ8FromFloat(const float* x, void* act, int64_t K, int z) {
  uint8_t* out = static_cast<uint8_t*>(act);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 big = _mm512_set1_ps(FLT_MAX);
  const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < K / 32; ++b, x += 32, out += kActBlockBytes) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const __m512 a0 = _mm512_andnot_ps(sign, x0), a1 = _mm512_andnot_ps(sign, x1);
    // !(|x| <= FLT_MAX): NaN (unordered) or inf.
    if (_mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ)) {
      const float d = std::numeric_limits<float>::quiet_NaN();
      std::memset(out, 0, 32);
      std::memcpy(out + 32, &d, 4);
      const int32_t corr8[9] = {0x4B400000, 0x4B400000, 0x4B400000, 0x4B400000, 0x4B400000,
                                0x4B400000, 0x4B400000, 0x4B400000, 0};  // corr[8] (biased), corr_total
      std::memcpy(out + 36, corr8, sizeof corr8);
      continue;
    }
    const __m512 m = _mm512_max_ps(a0, a1);
    const float amax = _mm512_reduce_max_ps(m);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    const float d = HalfToFloat(FloatToHalf(amax / 127.f));
    // cvtps2dq rounds to nearest even (default MXCSR), as nearbyint in QuantizeRowQ8_0Act.
    // Clamped to the int8 range before narrowing (a no-op for finite x: |q| <= 127; defensive
    // against vcvtps2dq's INT_MIN), so the correction is the sum of exactly the stored int8.
    const __m512i q0 =
        _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id))), lo), hi);
    const __m512i q1 =
        _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id))), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(q1));
    // corr[s] = -z * (sum of the 4 bytes of k-step s): vpdpbusd of 1s with the stored bytes.
    const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out));
    const __m256i corr = _mm256_mullo_epi32(
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), qs), _mm256_set1_epi32(-z));
    const __m128i c4 = _mm_add_epi32(_mm256_castsi256_si128(corr), _mm256_extracti128_si256(corr, 1));
    const __m128i c2 = _mm_add_epi32(c4, _mm_shuffle_epi32(c4, 0x4E));
    const int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(c2, _mm_shuffle_epi32(c2, 0xB1)));
    std::memcpy(out + 32, &d, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 36),
                        _mm256_add_epi32(corr, _mm256_set1_epi32(0x4B400000)));
    std::memcpy(out + 68, &total, 4);
  }
}

}  // namespace stowage::cpu::avx512

// ---- packing (same panel bytes as gemm_q8.cpp's scalar PackPlain / PackQ4_0) ------------------

namespace stowage::cpu::avx512 {
namespace {

// Packs nb blocks of 16 rows: `row(r, b, &d)` returns row r's 32 unsigned values of block b (and
// its fp16 scale); rows >= nr are zero (u = 0, dw = +0). The 16 x 8 dword transpose: Z_i holds rows
// i (low half) and i + 8 (high half); two unpack rounds transpose 4 x 4 dwords inside each 128-bit
// lane, a two-source qword permute assembles the 16 rows of each dword column s.
template <class RowFn>
void PackBlocks(int64_t nb, int nr, uint8_t* panel, RowFn row) {
  alignas(32) uint16_t d16[16];
  const __m512i idx_lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i idx_hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* rec = panel + size_t(b) * kPanelBlockBytes;
    __m512i z[8];
    for (int i = 0; i < 8; ++i) {
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
      d16[i] = 0;
      d16[i + 8] = 0;
      if (i < nr) lo = row(i, b, &d16[i]);
      if (i + 8 < nr) hi = row(i + 8, b, &d16[i + 8]);
      z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    __m512i u[4], v[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i* q = z + 4 * h;
      const __m512i t0 = _mm512_unpacklo_epi32(q[0], q[1]), t1 = _mm512_unpackhi_epi32(q[0], q[1]);
      const __m512i t2 = _mm512_unpacklo_epi32(q[2], q[3]), t3 = _mm512_unpackhi_epi32(q[2], q[3]);
      __m512i* o = h == 0 ? u : v;
      o[0] = _mm512_unpacklo_epi64(t0, t2);
      o[1] = _mm512_unpackhi_epi64(t0, t2);
      o[2] = _mm512_unpacklo_epi64(t1, t3);
      o[3] = _mm512_unpackhi_epi64(t1, t3);
    }
    for (int j = 0; j < 4; ++j) {
      _mm512_store_si512(reinterpret_cast<void*>(rec + 64 * j),
                         _mm512_permutex2var_epi64(u[j], idx_lo, v[j]));
      _mm512_store_si512(reinterpret_cast<void*>(rec + 64 * (4 + j)),
                         _mm512_permutex2var_epi64(u[j], idx_hi, v[j]));
    }
    _mm512_store_ps(reinterpret_cast<float*>(rec + 512),
                    _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d16))));
  }
}

// Weights are read once per panel, usually from DRAM: each row stream is prefetched this far ahead
// (the hardware prefetchers do not follow 16 interleaved row streams well).
constexpr int kPrefetchBytes = 512;

inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

}  // namespace

void GemmQ8PackQ8_0(int64_t K, const void* w, size_t row_stride, int nr, void* panel) {
  const uint8_t* base = static_cast<const uint8_t*>(w);
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  PackBlocks(K / 32, nr, static_cast<uint8_t*>(panel), [&](int r, int64_t b, uint16_t* d) {
    const uint8_t* blk = base + size_t(r) * row_stride + size_t(b) * 34;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
    std::memcpy(d, blk, 2);
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), flip);
  });
}

void GemmQ8PackQ4_0(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  const uint8_t* base = static_cast<const uint8_t*>(w);
  if (layout == kLayoutQ4_0x8) {
    PackBlocks(K / 32, nr, static_cast<uint8_t*>(panel), [&](int r, int64_t b, uint16_t* d) {
      const uint8_t* blk = base + size_t(r / 8) * 8 * row_stride + size_t(b) * 144;
      if (r % 8 < 3)
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + 64 * (r % 8), _MM_HINT_T0);
      std::memcpy(d, blk + 2 * (r % 8), 2);
      return UnpackNibbles(blk + 16 + 16 * (r % 8));
    });
  } else {
    PackBlocks(K / 32, nr, static_cast<uint8_t*>(panel), [&](int r, int64_t b, uint16_t* d) {
      const uint8_t* blk = base + size_t(r) * row_stride + size_t(b) * 18;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
      std::memcpy(d, blk, 2);
      return UnpackNibbles(blk + 2);
    });
  }
}

}  // namespace stowage::cpu::avx512
