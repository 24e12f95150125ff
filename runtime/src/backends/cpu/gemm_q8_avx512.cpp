// GEMM family "q8", AVX-512 VNNI kernel (formats: see gemm_q8.cpp). Compiled with -mavx512*
// -mavx512vnni; called only when the CPU has AVX512-VNNI.
//
// Register blocking: 16 panel rows (one zmm of int32 / f32 lanes) x kCols columns. Per block of 32
// elements: the int32 accumulators start at the column's zero-point correction (a broadcast
// load), 8 vpdpbusd per column (packed unsigned weights x 4 broadcast signed activation bytes,
// folded into the instruction's {1to16} memory operand), then per column one cvtdq2ps, one
// multiply of the 16 row scales by the broadcast column scale and one FMA into the float
// accumulator — the scalar reference's operations in the same order, so results are bit-identical.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace stowage::cpu::avx512 {
namespace {

constexpr int kActBlockBytes = 40;     // gemm_q8.cpp
constexpr int kPanelBlockBytes = 576;  // gemm_q8.cpp

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

template <int NC>
void Columns(int64_t nb, const uint8_t* panel, const uint8_t* act, size_t act_stride, float* dst,
             size_t dst_stride, __mmask16 mask) {
  __m512 sum[NC];
  const uint8_t* a[NC];
  for (int c = 0; c < NC; ++c) {
    sum[c] = _mm512_setzero_ps();
    a[c] = act + size_t(c) * act_stride;
  }
  const uint8_t* rec = panel;
  for (int64_t b = 0; b < nb; ++b, rec += kPanelBlockBytes) {
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_set1_epi32(Load32(a[c] + 36));
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_load_si512(reinterpret_cast<const void*>(rec + 64 * s));
      for (int c = 0; c < NC; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], w, _mm512_set1_epi32(Load32(a[c] + 4 * s)));
    }
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(rec + 512));
    for (int c = 0; c < NC; ++c) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(LoadF(a[c] + 32)));
      sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[c]), scale, sum[c]);
      a[c] += kActBlockBytes;
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(dst + size_t(c) * dst_stride, mask, sum[c]);
}

constexpr int kCols = 8;

}  // namespace

void GemmQ8Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                  size_t dst_stride, int nr) {
  const int64_t nb = K / 32;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  const __mmask16 mask = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1u);
  int c = 0;
  for (; c + kCols <= nc; c += kCols)
    Columns<kCols>(nb, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, mask);
  const int rest = nc - c;
  a += size_t(c) * act_stride;
  dst += size_t(c) * dst_stride;
  switch (rest) {
    case 1: Columns<1>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 2: Columns<2>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 3: Columns<3>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 4: Columns<4>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 5: Columns<5>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 6: Columns<6>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    case 7: Columns<7>(nb, p, a, act_stride, dst, dst_stride, mask); break;
    default: break;
  }
}

}  // namespace stowage::cpu::avx512
