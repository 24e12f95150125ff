// Helpers shared by the backend tests: random tensors in host memory, ggml-layout views, and the
// comparison of a backend's MUL_MAT with the CPU backend's.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend.h"
#include "ops.h"
#include "stowage/runtime/device_probe.h"

namespace stowage::test {

/// A supports_op query (stowage/runtime/op_rules.h) for `op` with these tensors.
inline OpQuery Query(GgmlOp op, TensorDesc dst, std::vector<TensorDesc> src) {
  OpQuery q;
  q.op = op;
  q.dst = std::move(dst);
  q.src = std::move(src);
  return q;
}

/// A host tensor: owned bytes plus a contiguous ggml view over them.
struct HostTensor {
  std::vector<uint8_t> bytes;
  cpu::TensorView v;
};

/// Contiguous tensor of `type` and shape `ne`, filled with uniform(-1, 1) values (converted to
/// `type`; quantized types through QuantizeRow).
inline HostTensor RandomTensor(GgmlType type, std::array<int64_t, 4> ne, uint32_t seed) {
  HostTensor t;
  t.v.type = type;
  for (int i = 0; i < 4; ++i) t.v.ne[i] = ne[i];
  cpu::SetContiguousStrides(t.v);
  t.bytes.assign(t.v.nb[3] * ne[3] + 64, 0);
  t.v.data = t.bytes.data();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> row(ne[0]);
  for (int64_t r = 0; r < t.v.nrows(); ++r) {
    for (auto& x : row) x = u(rng);
    const int64_t i1 = r % ne[1], i2 = (r / ne[1]) % ne[2], i3 = r / (ne[1] * ne[2]);
    uint8_t* dst = t.bytes.data() + i3 * t.v.nb[3] + i2 * t.v.nb[2] + i1 * t.v.nb[1];
    (void)cpu::QuantizeRow(type, row.data(), dst, ne[0]);
  }
  return t;
}

/// Zeroed F32 tensor of shape `ne`.
inline HostTensor ZeroF32(std::array<int64_t, 4> ne) {
  HostTensor t;
  t.v.type = GgmlType::F32;
  for (int i = 0; i < 4; ++i) t.v.ne[i] = ne[i];
  cpu::SetContiguousStrides(t.v);
  t.bytes.assign(t.v.nb[3] * ne[3] + 64, 0);
  t.v.data = t.bytes.data();
  return t;
}

inline exec::NodeCall MulMatCall(const cpu::TensorView& a, const cpu::TensorView& b,
                                 const cpu::TensorView& d) {
  exec::NodeCall c;
  c.op = GgmlOp::MUL_MAT;
  c.name = "mul_mat";
  c.src[0] = a;
  c.src[1] = b;
  c.has_src[0] = c.has_src[1] = true;
  c.dst = d;
  return c;
}

/// Largest |x - y| / (tol_abs + tol_rel * |y|) over two F32 tensors of equal contiguous shape.
inline double MaxScaledError(const cpu::TensorView& x, const cpu::TensorView& y, double tol_abs,
                             double tol_rel) {
  double worst = 0;
  for (int64_t i3 = 0; i3 < x.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < x.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < x.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < x.ne[0]; ++i0) {
          float a, b;
          std::memcpy(
              &a, static_cast<uint8_t*>(x.data) + i3 * x.nb[3] + i2 * x.nb[2] + i1 * x.nb[1] + i0 * x.nb[0],
              4);
          std::memcpy(
              &b, static_cast<uint8_t*>(y.data) + i3 * y.nb[3] + i2 * y.nb[2] + i1 * y.nb[1] + i0 * y.nb[0],
              4);
          if (std::isnan(a) || std::isnan(b)) return INFINITY;
          worst =
              std::max(worst, std::fabs(double(a) - double(b)) / (tol_abs + tol_rel * std::fabs(double(b))));
        }
  return worst;
}

}  // namespace stowage::test
