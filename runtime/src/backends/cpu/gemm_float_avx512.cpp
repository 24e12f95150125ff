// GEMM family "float", AVX-512F level (formats and numerics: gemm_float.cpp). Built with the
// AVX-512 flags; called only when DetectIsa() >= kAvx512.
//
// Micro-kernel: the 16 panel rows are the 16 lanes of one zmm; per k one aligned panel load feeds
// kCols fused multiply-adds, one per column, whose activation operand is a 4-byte broadcast from
// memory ({1to16}). No horizontal sums: accumulator c holds dst rows 0..15 of column c. Each dst
// element is one accumulator updated in increasing k, bit-identical to the scalar reference.
#include <immintrin.h>

#include <cstring>

#include "gemm.h"
#include "quants.h"

namespace stowage::cpu::avx512 {
namespace {

constexpr int kP = kGemmPanelRows;
static_assert(kP == 16, "one zmm per panel k");

// An odd number of 64-byte lines: the kernels read one element of kCols rows at a time, and rows a
// multiple of 4 KiB apart would all fall into the same L1 set (8 ways) and evict each other.
size_t ActRowBytes(int64_t K) {
  const size_t lines = (size_t(K) * sizeof(float) + 63) / 64;
  return (lines | 1) * 64;
}
size_t PanelBytes(int64_t K) { return size_t(K) * kP * sizeof(float); }

// ---- activations -------------------------------------------------------------------------------

void FromFloatF32(const float* x, void* act, int64_t K) { std::memcpy(act, x, size_t(K) * sizeof(float)); }

void FromFloatF16Rounded(const float* x, void* act, int64_t K) {
  float* a = static_cast<float*>(act);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(a + k, _mm512_cvtph_ps(h));
  }
  for (; k < K; ++k) a[k] = HalfToFloat(FloatToHalf(x[k]));
}

// Round to nearest even at bit 16, NaNs quieted (ggml_compute_fp32_to_bf16), kept as F32.
inline __m512 RoundBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(64 << 16)));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int(0xFFFF0000u))));
}

void FromFloatBF16Rounded(const float* x, void* act, int64_t K) {
  float* a = static_cast<float*>(act);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) _mm512_storeu_ps(a + k, RoundBf16(_mm512_loadu_ps(x + k)));
  for (; k < K; ++k) a[k] = Bf16ToFloat(FloatToBf16(x[k]));
}

// ---- packing -----------------------------------------------------------------------------------

// In-register transpose: r[i] holds row i, columns 0..15 -> r[j] holds column j, rows 0..15.
inline void Transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Within each 128-bit lane L of u[4i + j]: rows 4i..4i+3 of column 4L + j.
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);  // u[j].L0 L2, u[4+j].L0 L2
    const __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);  // lanes 1, 3
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v0, v2, 0x88);       // column j
    r[8 + j] = _mm512_shuffle_f32x4(v0, v2, 0xDD);   // column 8 + j
    r[4 + j] = _mm512_shuffle_f32x4(v1, v3, 0x88);   // column 4 + j
    r[12 + j] = _mm512_shuffle_f32x4(v1, v3, 0xDD);  // column 12 + j
  }
}

// Loads 16 consecutive elements of one weight row as F32.
struct LoadF32 {
  static __m512 Load(const uint8_t* row, int64_t k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static float One(const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct LoadF16 {
  static __m512 Load(const uint8_t* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static float One(const uint8_t* row, int64_t k) {
    fp16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return HalfToFloat(h);
  }
};
struct LoadBF16 {
  static __m512 Load(const uint8_t* row, int64_t k) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static float One(const uint8_t* row, int64_t k) {
    bf16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Bf16ToFloat(h);
  }
};

template <typename L>
void Pack(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  float* p = static_cast<float*>(panel);
  const uint8_t* rows[kP];
  for (int r = 0; r < kP; ++r) rows[r] = static_cast<const uint8_t*>(w) + size_t(r < nr ? r : 0) * row_stride;
  const int64_t K16 = K & ~int64_t(15);
  for (int64_t k = 0; k < K16; k += 16) {
    __m512 v[16];
    for (int r = 0; r < kP; ++r) v[r] = r < nr ? L::Load(rows[r], k) : _mm512_setzero_ps();
    Transpose16(v);
    for (int j = 0; j < 16; ++j) _mm512_store_ps(p + (k + j) * kP, v[j]);
  }
  for (int64_t k = K16; k < K; ++k) {
    alignas(64) float col[kP];
    for (int r = 0; r < kP; ++r) col[r] = r < nr ? L::One(rows[r], k) : 0.0f;
    _mm512_store_ps(p + k * kP, _mm512_load_ps(col));
  }
}

// ---- micro-kernel ------------------------------------------------------------------------------

// Up to 8 columns in named accumulators: with arrays GCC zeroes a stack copy (rep stos) and
// stores and reloads every accumulator around the loop, ~15% of a K = 64 (attention) tile.
template <int NC>
inline void Tile(int64_t K, const float* __restrict p, const uint8_t* act, size_t act_stride, float* dst,
                 size_t dst_stride, __mmask16 mask) {
  static_assert(NC >= 1 && NC <= 8, "8 accumulators");
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  auto row = [&](int c) { return reinterpret_cast<const float*>(act + act_stride * size_t(c < NC ? c : 0)); };
  const float *a0 = row(0), *a1 = row(1), *a2 = row(2), *a3 = row(3), *a4 = row(4), *a5 = row(5),
              *a6 = row(6), *a7 = row(7);
  for (int64_t k = 0; k < K; ++k) {
    const __m512 w = _mm512_load_ps(p + k * kP);
    c0 = _mm512_fmadd_ps(w, _mm512_set1_ps(a0[k]), c0);
    if constexpr (NC > 1) c1 = _mm512_fmadd_ps(w, _mm512_set1_ps(a1[k]), c1);
    if constexpr (NC > 2) c2 = _mm512_fmadd_ps(w, _mm512_set1_ps(a2[k]), c2);
    if constexpr (NC > 3) c3 = _mm512_fmadd_ps(w, _mm512_set1_ps(a3[k]), c3);
    if constexpr (NC > 4) c4 = _mm512_fmadd_ps(w, _mm512_set1_ps(a4[k]), c4);
    if constexpr (NC > 5) c5 = _mm512_fmadd_ps(w, _mm512_set1_ps(a5[k]), c5);
    if constexpr (NC > 6) c6 = _mm512_fmadd_ps(w, _mm512_set1_ps(a6[k]), c6);
    if constexpr (NC > 7) c7 = _mm512_fmadd_ps(w, _mm512_set1_ps(a7[k]), c7);
  }
  _mm512_mask_storeu_ps(dst, mask, c0);
  if constexpr (NC > 1) _mm512_mask_storeu_ps(dst + dst_stride, mask, c1);
  if constexpr (NC > 2) _mm512_mask_storeu_ps(dst + 2 * dst_stride, mask, c2);
  if constexpr (NC > 3) _mm512_mask_storeu_ps(dst + 3 * dst_stride, mask, c3);
  if constexpr (NC > 4) _mm512_mask_storeu_ps(dst + 4 * dst_stride, mask, c4);
  if constexpr (NC > 5) _mm512_mask_storeu_ps(dst + 5 * dst_stride, mask, c5);
  if constexpr (NC > 6) _mm512_mask_storeu_ps(dst + 6 * dst_stride, mask, c6);
  if constexpr (NC > 7) _mm512_mask_storeu_ps(dst + 7 * dst_stride, mask, c7);
}

// 16 rows x 8 columns: 8 accumulators (8..11 columns measured best with the row pointers in GPRs;
// 14/20/24 columns spilled them and fell from 110 to 94/77/72 GFLOPS).
constexpr int kCols = 8;

template <int NC>
void TailTile(int n, int64_t K, const float* p, const uint8_t* act, size_t act_stride, float* dst,
              size_t dst_stride, __mmask16 mask) {
  if constexpr (NC > 0) {
    if (n == NC) return Tile<NC>(K, p, act, act_stride, dst, dst_stride, mask);
    TailTile<NC - 1>(n, K, p, act, act_stride, dst, dst_stride, mask);
  }
}

void Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
            size_t dst_stride, int nr) {
  const float* p = static_cast<const float*>(panel);
  const uint8_t* a = static_cast<const uint8_t*>(act);
  const __mmask16 mask = nr >= kP ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  int c = 0;
  for (; c + kCols <= nc; c += kCols) {
    Tile<kCols>(K, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride, dst_stride, mask);
  }
  if (c < nc) {
    TailTile<kCols - 1>(nc - c, K, p, a + size_t(c) * act_stride, act_stride, dst + size_t(c) * dst_stride,
                        dst_stride, mask);
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

}  // namespace stowage::cpu::avx512
