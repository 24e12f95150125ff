// GEMM family "float" (see gemm.h): F32, F16 and BF16 weights. This file: the lookup, the formats
// shared by every level, and the scalar reference kernels.
//
// Numerics (as ggml's vec_dot_type): F16 weights take activations rounded to F16, BF16 weights
// activations rounded to BF16 (round to nearest even, NaN quieted as ggml_compute_fp32_to_bf16),
// F32 weights plain F32. Products of two F16 (11-bit significands) or two BF16 (8-bit) values are
// exact in F32; every level computes each dst element with ONE F32 accumulator updated by a fused
// multiply-add per k in increasing k (acc = fma(w[r][k], a[c][k], acc)), so all levels are
// bit-identical to the scalar reference. Only the order differs from the vec_dot path (which keeps
// ggml's 4 x 16 lane partial sums, or a double sum at the scalar level).
//
// Formats (the same at every level, so a panel packed by one level feeds any level's kernel):
//   activation row: K floats (the F16/BF16-rounded values stored as F32, so the kernels broadcast
//                   them straight from memory), padded to an odd number of 64-byte lines;
//   packed panel:   K groups of kGemmPanelRows floats, group k = rows 0..15 at column k (one zmm);
//                   rows nr..15 are zero (finite results unless an activation is inf/NaN; those
//                   rows are never stored).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gemm.h"
#include "quants.h"

namespace stowage::cpu {

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
namespace avx512 {
/// The AVX-512 kernels of the float family for `type` (F32/F16/BF16), nullptr otherwise
/// (gemm_float_avx512.cpp). Call only when DetectIsa() >= kAvx512.
const GemmKernels* GemmKernelsFloat(GgmlType type);
}  // namespace avx512
namespace avx2 {
/// The AVX2+FMA+F16C kernels of the float family (gemm_float_avx2.cpp). Call only when
/// DetectIsa() >= kAvx2.
const GemmKernels* GemmKernelsFloat(GgmlType type);
}  // namespace avx2
#endif

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
  for (int64_t k = 0; k < K; ++k) a[k] = HalfToFloat(FloatToHalf(x[k]));
}
void FromFloatBF16Rounded(const float* x, void* act, int64_t K) {
  float* a = static_cast<float*>(act);
  for (int64_t k = 0; k < K; ++k) a[k] = Bf16ToFloat(FloatToBf16(x[k]));
}

template <typename Load>
void PackRows(int64_t K, const void* w, size_t row_stride, int nr, void* panel, Load load) {
  float* p = static_cast<float*>(panel);
  std::memset(p, 0, PanelBytes(K));
  for (int r = 0; r < nr; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w) + size_t(r) * row_stride;
    for (int64_t k = 0; k < K; ++k) p[k * kP + r] = load(row, k);
  }
}

void PackF32(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows(K, w, row_stride, nr, panel, [](const uint8_t* row, int64_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  });
}
void PackF16(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows(K, w, row_stride, nr, panel, [](const uint8_t* row, int64_t k) {
    fp16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return HalfToFloat(h);
  });
}
void PackBF16(int64_t K, const void* w, size_t row_stride, int nr, int, void* panel) {
  PackRows(K, w, row_stride, nr, panel, [](const uint8_t* row, int64_t k) {
    bf16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return Bf16ToFloat(h);
  });
}

// acc + w * a rounded once, as fma(w, a, acc), for each weight type's values. A multiply then an
// add equals the fma whenever the product w * a is exact in F32: always for F16 x F16 (11-bit
// significands give at most 22 bits; magnitudes within [2^-48, 65504^2], inside F32's normal
// range); for BF16 x BF16 (8-bit significands) unless the product leaves the normal range. The
// multiply-add is several times faster than std::fma, a libm call at baseline x86-64 flags
// (software emulation on CPUs without FMA).
struct MacF32 {
  static float Mac(float w, float a, float acc) { return std::fma(w, a, acc); }
};
struct MacF16 {
  static float Mac(float w, float a, float acc) { return acc + w * a; }
};
struct MacBF16 {
  static float Mac(float w, float a, float acc) {
    const float p = w * a;
    const float m = std::fabs(p);
    if ((m >= std::numeric_limits<float>::min() && m <= std::numeric_limits<float>::max()) ||
        (p == 0.0f && (w == 0.0f || a == 0.0f))) {
      return acc + p;  // the exact product
    }
    return std::fma(w, a, acc);  // underflow, overflow, inf, NaN
  }
};

// Reference kernel: per column, 16 accumulators (one per panel row), one fused multiply-add per k
// in increasing k.
template <typename M>
void KernelRef(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
               size_t dst_stride, int nr) {
  const float* p = static_cast<const float*>(panel);
  for (int c = 0; c < nc; ++c) {
    const float* a =
        reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) + size_t(c) * act_stride);
    float acc[kP] = {};
    for (int64_t k = 0; k < K; ++k) {
      const float ak = a[k];
      for (int r = 0; r < kP; ++r) acc[r] = M::Mac(p[k * kP + r], ak, acc[r]);
    }
    for (int r = 0; r < nr; ++r) dst[size_t(c) * dst_stride + size_t(r)] = acc[r];
  }
}

const GemmKernels kScalarF32 = {FromFloatF32, ActRowBytes, PanelBytes, PackF32, KernelRef<MacF32>};
const GemmKernels kScalarF16 = {FromFloatF16Rounded, ActRowBytes, PanelBytes, PackF16, KernelRef<MacF16>};
const GemmKernels kScalarBF16 = {FromFloatBF16Rounded, ActRowBytes, PanelBytes, PackBF16, KernelRef<MacBF16>};

}  // namespace

const GemmKernels* GetGemmKernelsFloat(GgmlType type, int layout, IsaLevel isa) {
  if (layout != kLayoutPlain) return nullptr;
  if (type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16) return nullptr;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  const IsaLevel level = IsaLevel(std::min(int(isa), int(DetectIsa())));
  if (level >= IsaLevel::kAvx512) {
    if (const GemmKernels* k = avx512::GemmKernelsFloat(type)) return k;
  }
  if (level >= IsaLevel::kAvx2) {
    if (const GemmKernels* k = avx2::GemmKernelsFloat(type)) return k;
  }
#else
  (void)isa;
#endif
  switch (type) {
    case GgmlType::F32:
      return &kScalarF32;
    case GgmlType::F16:
      return &kScalarF16;
    default:
      return &kScalarBF16;
  }
}

}  // namespace stowage::cpu
