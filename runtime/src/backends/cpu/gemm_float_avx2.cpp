// GEMM family "float", AVX2 + FMA + F16C level (formats and numerics: gemm_float.cpp). Built with
// -mavx2 -mfma -mf16c; called only when DetectIsa() >= kAvx2.
//
// Micro-kernel: the 16 panel rows are two ymm (rows 0..7, 8..15); per k two aligned panel loads and
// one broadcast per column feed two fused multiply-adds per column (16 ymm: 12 accumulators for 6
// columns, 2 panel vectors, 1 broadcast). Each dst element is one accumulator lane updated in
// increasing k, bit-identical to the scalar reference.
#include <immintrin.h>

#include <cstring>

#include "gemm.h"
#include "quants.h"

namespace stowage::cpu::avx2 {
namespace {

constexpr int kP = kGemmPanelRows;

// An odd number of 64-byte lines: the kernels read one element of kCols rows at a time, and rows a
// multiple of 4 KiB apart would all fall into the same L1 set (8 ways) and evict each other.
size_t ActRowBytes(int64_t K) {
  const size_t lines = (size_t(K) * sizeof(float) + 63) / 64;
  return (lines | 1) * 64;
}
size_t PanelBytes(int64_t K) { return size_t(K) * kP * sizeof(float); }

void FromFloatF32(const float* x, void* act, int64_t K) { std::memcpy(act, x, size_t(K) * sizeof(float)); }

void FromFloatF16Rounded(const float* x, void* act, int64_t K) {
  float* a = static_cast<float*>(act);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(a + k, _mm256_cvtph_ps(h));
  }
  for (; k < K; ++k) a[k] = HalfToFloat(FloatToHalf(x[k]));
}

void FromFloatBF16Rounded(const float* x, void* act, int64_t K) {
  float* a = static_cast<float*>(act);
  for (int64_t k = 0; k < K; ++k) a[k] = Bf16ToFloat(FloatToBf16(x[k]));
}

// Converts 8 consecutive elements of one weight row to F32.
struct LoadF32 {
  static __m256 Load(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static float One(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct LoadF16 {
  static __m256 Load(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float One(const uint8_t* row, int64_t k) {
    fp16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return HalfToFloat(h);
  }
};
struct LoadBF16 {
  static __m256 Load(const uint8_t* row, int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float One(const uint8_t* row, int64_t k) {
    bf16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Bf16ToFloat(h);
  }
};

// In-register transpose: r[i] holds row i, columns 0..7 -> r[j] holds column j, rows 0..7.
inline void Transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // within each 128-bit half H of u[4i + j]: rows 4i..4i+3 of column 4H + j
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

template <typename L>
void Pack(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  float* p = static_cast<float*>(panel);
  const int64_t K8 = K & ~int64_t(7);
  for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7: one ymm per k
    const uint8_t* rows[8];
    for (int i = 0; i < 8; ++i)
      rows[i] = static_cast<const uint8_t*>(w) + size_t(8 * h + i < nr ? 8 * h + i : 0) * row_stride;
    for (int64_t k = 0; k < K8; k += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) v[i] = 8 * h + i < nr ? L::Load(rows[i], k) : _mm256_setzero_ps();
      Transpose8(v);
      for (int j = 0; j < 8; ++j) _mm256_store_ps(p + (k + j) * kP + 8 * h, v[j]);
    }
    for (int64_t k = K8; k < K; ++k)
      for (int i = 0; i < 8; ++i) p[k * kP + 8 * h + i] = 8 * h + i < nr ? L::One(rows[i], k) : 0.0f;
  }
}

// dst[0..nr) = (lo, hi) lanes 0..nr-1.
inline void Store16(float* d, __m256 lo, __m256 hi, int nr) {
  if (nr >= kP) {
    _mm256_storeu_ps(d, lo);
    _mm256_storeu_ps(d + 8, hi);
    return;
  }
  alignas(32) float t[kP];
  _mm256_store_ps(t, lo);
  _mm256_store_ps(t + 8, hi);
  std::memcpy(d, t, size_t(nr) * sizeof(float));
}

// Up to 6 columns in named accumulators (GCC keeps arrays of __m256 accumulators in memory here,
// storing all of them every k).
template <int NC>
inline void Tile(int64_t K, const float* __restrict p, const uint8_t* act, size_t act_stride, float* dst,
                 size_t dst_stride, int nr) {
  static_assert(NC >= 1 && NC <= 6, "16 ymm: 12 accumulators, 2 panel vectors, 1 broadcast");
  const __m256 z = _mm256_setzero_ps();
  __m256 l0 = z, h0 = z, l1 = z, h1 = z, l2 = z, h2 = z, l3 = z, h3 = z, l4 = z, h4 = z, l5 = z, h5 = z;
  const float* a0 = reinterpret_cast<const float*>(act);
  const float* a1 = reinterpret_cast<const float*>(act + act_stride * (NC > 1 ? 1 : 0));
  const float* a2 = reinterpret_cast<const float*>(act + act_stride * (NC > 2 ? 2 : 0));
  const float* a3 = reinterpret_cast<const float*>(act + act_stride * (NC > 3 ? 3 : 0));
  const float* a4 = reinterpret_cast<const float*>(act + act_stride * (NC > 4 ? 4 : 0));
  const float* a5 = reinterpret_cast<const float*>(act + act_stride * (NC > 5 ? 5 : 0));
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_load_ps(p + k * kP), w1 = _mm256_load_ps(p + k * kP + 8);
    __m256 b = _mm256_broadcast_ss(a0 + k);
    l0 = _mm256_fmadd_ps(w0, b, l0);
    h0 = _mm256_fmadd_ps(w1, b, h0);
    if constexpr (NC > 1) {
      b = _mm256_broadcast_ss(a1 + k);
      l1 = _mm256_fmadd_ps(w0, b, l1);
      h1 = _mm256_fmadd_ps(w1, b, h1);
    }
    if constexpr (NC > 2) {
      b = _mm256_broadcast_ss(a2 + k);
      l2 = _mm256_fmadd_ps(w0, b, l2);
      h2 = _mm256_fmadd_ps(w1, b, h2);
    }
    if constexpr (NC > 3) {
      b = _mm256_broadcast_ss(a3 + k);
      l3 = _mm256_fmadd_ps(w0, b, l3);
      h3 = _mm256_fmadd_ps(w1, b, h3);
    }
    if constexpr (NC > 4) {
      b = _mm256_broadcast_ss(a4 + k);
      l4 = _mm256_fmadd_ps(w0, b, l4);
      h4 = _mm256_fmadd_ps(w1, b, h4);
    }
    if constexpr (NC > 5) {
      b = _mm256_broadcast_ss(a5 + k);
      l5 = _mm256_fmadd_ps(w0, b, l5);
      h5 = _mm256_fmadd_ps(w1, b, h5);
    }
  }
  Store16(dst, l0, h0, nr);
  if constexpr (NC > 1) Store16(dst + dst_stride, l1, h1, nr);
  if constexpr (NC > 2) Store16(dst + 2 * dst_stride, l2, h2, nr);
  if constexpr (NC > 3) Store16(dst + 3 * dst_stride, l3, h3, nr);
  if constexpr (NC > 4) Store16(dst + 4 * dst_stride, l4, h4, nr);
  if constexpr (NC > 5) Store16(dst + 5 * dst_stride, l5, h5, nr);
}

constexpr int kCols = 6;

template <int NC>
void TailTile(int n, int64_t K, const float* p, const uint8_t* act, size_t act_stride, float* dst,
              size_t dst_stride, int nr) {
  if constexpr (NC > 0) {
    if (n == NC) return Tile<NC>(K, p, act, act_stride, dst, dst_stride, nr);
    TailTile<NC - 1>(n, K, p, act, act_stride, dst, dst_stride, nr);
  }
}

void Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
            size_t dst_stride, int nr) {
  const float* p = static_cast<const float*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  int c = 0;
  for (; c + kCols <= nc; c += kCols) {
    Tile<kCols>(K, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, nr);
  }
  if (c < nc) {
    TailTile<kCols - 1>(nc - c, K, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                        dst_stride, nr);
  }
}

const GemmKernels kF32 = {FromFloatF32, ActRowBytes, PanelBytes, Pack<LoadF32>, Kernel};
const GemmKernels kF16 = {FromFloatF16Rounded, ActRowBytes, PanelBytes, Pack<LoadF16>, Kernel};
const GemmKernels kBF16 = {FromFloatBF16Rounded, ActRowBytes, PanelBytes, Pack<LoadBF16>, Kernel};

}  // namespace

const GemmKernels* GemmKernelsFloat(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return &kF32;
    case GgmlType::F16:
      return &kF16;
    case GgmlType::BF16:
      return &kBF16;
    default:
      return nullptr;
  }
}

}  // namespace stowage::cpu::avx2
