// Helpers of the CPU kernel tests: owned tensors, random fills, double-precision references.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops.h"
#include "quants.h"

namespace stowage::cpu::kt {

/// A tensor that owns its bytes; `v` views them (contiguous unless the test changes nb).
struct Tensor {
  std::vector<uint8_t> buf;
  TensorView v;
  Tensor(GgmlType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
    v.type = type;
    v.ne[0] = ne0;
    v.ne[1] = ne1;
    v.ne[2] = ne2;
    v.ne[3] = ne3;
    SetContiguousStrides(v);
    buf.assign(v.nb[3] * size_t(ne3) + 64, 0);
    v.data = buf.data();
  }
  float* f32() { return reinterpret_cast<float*>(buf.data()); }
  uint16_t* u16() { return reinterpret_cast<uint16_t*>(buf.data()); }
  int32_t* i32() { return reinterpret_cast<int32_t*>(buf.data()); }
  /// Element (i0..i3) of an F32/F16 tensor through the view's strides, as double.
  double at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    const uint8_t* p =
        static_cast<const uint8_t*>(v.data) + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
    if (v.type == GgmlType::F16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Fp16ToFp32(h);
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
};

inline void FillUniform(std::vector<float>& x, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& f : x) f = d(rng);
}

/// Fills an F32 or F16 tensor (contiguous) with uniform values in [lo, hi).
inline void Fill(Tensor& t, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> x(size_t(t.v.nelements()));
  FillUniform(x, seed, lo, hi);
  if (t.v.type == GgmlType::F32)
    std::memcpy(t.buf.data(), x.data(), x.size() * 4);
  else
    for (size_t i = 0; i < x.size(); ++i) t.u16()[i] = Fp32ToFp16(x[i]);
}

inline float RoundF16(float x) { return Fp16ToFp32(Fp32ToFp16(x)); }

/// Random bytes with sane fp16 scales where each block type keeps them (the kernels must agree on
/// any bits; used for types without a reference quantizer here).
inline std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t bytes = RowSize(type, n), bs = GetTypeTraits(type).type_size;
  std::vector<uint8_t> out(bytes);
  for (auto& b : out) b = uint8_t(rng());
  std::uniform_real_distribution<float> d(0.001f, 0.05f);
  auto put = [&](size_t off, float v) {
    const uint16_t h = Fp32ToFp16(v);
    std::memcpy(&out[off], &h, 2);
  };
  for (size_t o = 0; o < bytes; o += bs) {
    switch (type) {
      case GgmlType::Q2_K:
        put(o + 80, d(rng));
        put(o + 82, d(rng));
        break;
      case GgmlType::Q3_K:
        put(o + 108, d(rng));
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put(o, d(rng));
        put(o + 2, d(rng));
        break;
      case GgmlType::Q6_K:
        put(o + 208, d(rng));
        break;
      case GgmlType::IQ4_NL:
      case GgmlType::IQ4_XS:
        put(o, d(rng));
        break;
      case GgmlType::MXFP4:  // E8M0 scale byte: 2^-7 .. 2^0 (with the doubled levels)
        out[o] = uint8_t(121 + rng() % 8);
        break;
      default:
        break;
    }
  }
  return out;
}

/// A compute context with `n_threads` OpenMP threads per op (the kernels' tests run 2 unless they
/// compare thread counts).
inline ComputeContext Ctx(int n_threads = 2) {
  ComputeContext c;
  c.n_threads = n_threads;
  return c;
}

}  // namespace stowage::cpu::kt
