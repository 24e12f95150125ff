// CPU kernels of the mamba graph (ops_ssm.cpp): CONCAT, SSM_CONV and SSM_SCAN against double-
// precision references written from the recurrences (not from the kernels' loops) on random odd
// shapes, with strided (non-contiguous) sources, several sequences, and error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace stowage::cpu {
namespace {
using kt::Fill;
using kt::Tensor;

ComputeContext Ctx() {
  ComputeContext c;
  c.n_threads = 2;
  return c;
}

// A view of `t` with ne0 reduced to `ne0` (rows keep their padding: non-contiguous).
TensorView Narrow(const Tensor& t, int64_t ne0) {
  TensorView v = t.v;
  v.ne[0] = ne0;
  return v;
}

double AtF(const TensorView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return *reinterpret_cast<const float*>(static_cast<const char*>(v.data) + i0 * v.nb[0] + i1 * v.nb[1] +
                                         i2 * v.nb[2] + i3 * v.nb[3]);
}

TEST(CpuConcat, EveryDimWithStridedSources) {
  std::mt19937 rng(3);
  for (int i = 0; i < 24; ++i) {
    const int dim = i % 4;
    const bool transposed_b = i % 3 == 0;  // b as a transposed view (mamba: the new columns, dim 0)
    int64_t ne[4] = {1 + int64_t(rng() % 7), 1 + int64_t(rng() % 5), 1 + int64_t(rng() % 4),
                     1 + int64_t(rng() % 3)};
    int64_t bne[4] = {ne[0], ne[1], ne[2], ne[3]};
    bne[dim] = 1 + int64_t(rng() % 6);
    Tensor a(GgmlType::F32, ne[0] + 2, ne[1], ne[2], ne[3]);  // padded rows: a is not contiguous
    Fill(a, 10 + i);
    const TensorView av = Narrow(a, ne[0]);
    // b's storage holds [bne1, bne0, ...]; the transposed view swaps dims 0 and 1 back.
    Tensor b = transposed_b ? Tensor(GgmlType::F32, bne[1], bne[0], bne[2], bne[3])
                            : Tensor(GgmlType::F32, bne[0], bne[1], bne[2], bne[3]);
    Fill(b, 50 + i);
    TensorView bv = b.v;
    if (transposed_b) {
      std::swap(bv.ne[0], bv.ne[1]);
      std::swap(bv.nb[0], bv.nb[1]);
    }
    int64_t dne[4] = {ne[0], ne[1], ne[2], ne[3]};
    dne[dim] += bne[dim];
    Tensor dst(GgmlType::F32, dne[0], dne[1], dne[2], dne[3]);
    auto ctx = Ctx();
    Status st = Concat(ctx, av, bv, dst.v, dim);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int64_t i3 = 0; i3 < dne[3]; ++i3)
      for (int64_t i2 = 0; i2 < dne[2]; ++i2)
        for (int64_t i1 = 0; i1 < dne[1]; ++i1)
          for (int64_t i0 = 0; i0 < dne[0]; ++i0) {
            int64_t j[4] = {i0, i1, i2, i3};
            const bool from_a = j[dim] < ne[dim];
            if (!from_a) j[dim] -= ne[dim];
            const double want = AtF(from_a ? av : bv, j[0], j[1], j[2], j[3]);
            ASSERT_EQ(dst.at(i0, i1, i2, i3), want)
                << "dim " << dim << (transposed_b ? " (b transposed)" : "");
          }
  }
  Tensor a(GgmlType::F32, 3, 2), b(GgmlType::F32, 3, 3), d(GgmlType::F32, 6, 2);
  auto ctx = Ctx();
  EXPECT_EQ(Concat(ctx, a.v, b.v, d.v, 0).code(), StatusCode::kInvalidArgument);  // ne1 differs
  EXPECT_EQ(Concat(ctx, a.v, a.v, d.v, 4).code(), StatusCode::kInvalidArgument);
}

TEST(CpuSsmConv, RandomShapes) {
  std::mt19937 rng(4);
  for (int i = 0; i < 16; ++i) {
    // The last case is large enough for the threaded path (>= 8192 multiply-adds).
    const int64_t d_conv = 1 + int64_t(rng() % 5), d_inner = i == 15 ? 901 : 1 + int64_t(rng() % 37),
                  n_t = 1 + int64_t(rng() % 11), n_s = 1 + int64_t(rng() % 3);
    Tensor sx(GgmlType::F32, d_conv - 1 + n_t + 1, d_inner, n_s);  // one column of padding per row
    Tensor c(GgmlType::F32, d_conv, d_inner);
    Fill(sx, 100 + i);
    Fill(c, 200 + i);
    Tensor dst(GgmlType::F32, d_inner, n_t, n_s);
    auto ctx = Ctx();
    Status st = SsmConv(ctx, Narrow(sx, d_conv - 1 + n_t), c.v, dst.v);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // Causal depthwise convolution: output t of channel r sees inputs t .. t + d_conv - 1 of the
    // concatenated [state | new columns] row, the newest with the last kernel tap.
    for (int64_t s = 0; s < n_s; ++s)
      for (int64_t t = 0; t < n_t; ++t)
        for (int64_t r = 0; r < d_inner; ++r) {
          double want = 0;
          for (int64_t k = 0; k < d_conv; ++k) want += sx.at(t + k, r, s) * c.at(k, r);
          ASSERT_NEAR(dst.at(r, t, s), want, 1e-5) << "r " << r << " t " << t << " s " << s;
        }
  }
  Tensor sx(GgmlType::F32, 6, 4), c(GgmlType::F32, 4, 5), d(GgmlType::F32, 4, 3);
  auto ctx = Ctx();
  EXPECT_EQ(SsmConv(ctx, sx.v, c.v, d.v).code(), StatusCode::kInvalidArgument);  // d_inner 5 vs 4
}

TEST(CpuSsmScan, RandomShapesAgainstTheRecurrence) {
  std::mt19937 rng(5);
  for (int i = 0; i < 12; ++i) {
    const int64_t d_state = 1 + int64_t(rng() % 17), d_inner = i == 11 ? 777 : 1 + int64_t(rng() % 13),
                  n_t = 1 + int64_t(rng() % 9), n_s = 1 + int64_t(rng() % 3);
    Tensor s(GgmlType::F32, d_state, d_inner, n_s);
    Tensor x(GgmlType::F32, d_inner, n_t, n_s);
    Tensor dt(GgmlType::F32, d_inner, n_t, n_s);
    Tensor A(GgmlType::F32, d_state, d_inner);
    Tensor bc(GgmlType::F32, 2 * d_state + 1, n_t, n_s);  // B and C as strided views of one tensor
    Fill(s, 300 + i);
    Fill(x, 400 + i);
    Fill(dt, 500 + i, -4.f, 24.f);  // both softplus branches (dt > 20 passes through)
    Fill(A, 600 + i, -3.f, -0.1f);
    Fill(bc, 700 + i);
    TensorView B = bc.v, C = bc.v;
    B.ne[0] = C.ne[0] = d_state;
    C.data = bc.f32() + d_state + 1;
    Tensor dst(GgmlType::F32, d_inner * n_t * n_s + d_state * d_inner * n_s);
    auto ctx = Ctx();
    Status st = SsmScan(ctx, s.v, x.v, dt.v, A.v, B, C, dst.v);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto at = [](const TensorView& v, int64_t i0, int64_t i1, int64_t i2) {
      return double(*reinterpret_cast<const float*>(static_cast<const char*>(v.data) + i0 * v.nb[0] +
                                                    i1 * v.nb[1] + i2 * v.nb[2]));
    };
    // h_t = exp(delta * A) * h_{t-1} + delta * B_t * x_t, y_t = C_t . h_t, delta = softplus(dt).
    for (int64_t q = 0; q < n_s; ++q)
      for (int64_t r = 0; r < d_inner; ++r) {
        std::vector<double> h(d_state);
        for (int64_t k = 0; k < d_state; ++k) h[k] = s.at(k, r, q);
        for (int64_t t = 0; t < n_t; ++t) {
          const double d = dt.at(r, t, q);
          const double delta = d > 20 ? d : std::log(1 + std::exp(d));
          double y = 0;
          for (int64_t k = 0; k < d_state; ++k) {
            h[k] = std::exp(delta * A.at(k, r)) * h[k] + delta * at(B, k, t, q) * x.at(r, t, q);
            y += at(C, k, t, q) * h[k];
          }
          ASSERT_NEAR(dst.f32()[(q * n_t + t) * d_inner + r], y, 1e-4 * (1 + std::fabs(y)))
              << "y r " << r << " t " << t;
        }
        for (int64_t k = 0; k < d_state; ++k)
          ASSERT_NEAR(dst.f32()[d_inner * n_t * n_s + (q * d_inner + r) * d_state + k], h[k],
                      1e-4 * (1 + std::fabs(h[k])))
              << "final state";
      }
  }
  Tensor s(GgmlType::F32, 4, 3), x(GgmlType::F32, 3, 2), A(GgmlType::F32, 4, 3), B(GgmlType::F32, 4, 2);
  Tensor small(GgmlType::F32, 10);
  auto ctx = Ctx();
  EXPECT_EQ(SsmScan(ctx, s.v, x.v, x.v, A.v, B.v, B.v, small.v).code(),
            StatusCode::kInvalidArgument);  // dst too small
  Tensor A2(GgmlType::F32, 4, 4), dst(GgmlType::F32, 18);
  EXPECT_EQ(SsmScan(ctx, s.v, x.v, x.v, A2.v, B.v, B.v, dst.v).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(SsmScan(ctx, s.v, x.v, x.v, A.v, B.v, B.v, dst.v).ok());
}

}  // namespace
}  // namespace stowage::cpu
