// gpt-oss's ops on the CPU backend: ADD_ID and SWIGLU_OAI (ops_gpt_oss.cpp) against their ggml-cpu
// element formulas, SOFT_MAX with attention sinks (ops_softmax.cpp, ggml_soft_max_add_sinks)
// against a double softmax with one more logit per head, at every ISA level; the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "test_util.h"

namespace stowage::cpu {
namespace {

TEST(CpuGptOss, AddIdAddsTheChosenExpertsBiasRows) {
  const int64_t ne0 = 37, n_used = 4, n_tokens = 5, n_expert = 8;
  kt::Tensor a(GgmlType::F32, ne0, n_used, n_tokens), b(GgmlType::F32, ne0, n_expert),
      ids(GgmlType::I32, n_used, n_tokens), dst(GgmlType::F32, ne0, n_used, n_tokens);
  kt::Fill(a, 1);
  kt::Fill(b, 2);
  for (int64_t i = 0; i < n_used * n_tokens; ++i) ids.i32()[i] = int32_t((i * 5 + 3) % n_expert);
  ComputeContext ctx = kt::Ctx(2);
  ASSERT_TRUE(AddId(ctx, a.v, b.v, ids.v, dst.v).ok());
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t s = 0; s < n_used; ++s)
      for (int64_t i = 0; i < ne0; ++i)
        ASSERT_EQ(float(dst.at(i, s, t)), float(a.at(i, s, t)) + float(b.at(i, ids.i32()[t * n_used + s])));
  // In place (ggml_add_id may reuse a).
  ASSERT_TRUE(AddId(ctx, a.v, b.v, ids.v, a.v).ok());
  EXPECT_EQ(std::vector<float>(a.f32(), a.f32() + ne0 * n_used * n_tokens),
            std::vector<float>(dst.f32(), dst.f32() + ne0 * n_used * n_tokens));
  // An id outside the experts, and ids of the wrong shape.
  ids.i32()[7] = int32_t(n_expert);
  Status st = AddId(ctx, a.v, b.v, ids.v, dst.v);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(), "ADD_ID: id 8 at [3, 1] is outside [0, 8)");
  kt::Tensor short_ids(GgmlType::I32, n_used, n_tokens - 1);
  EXPECT_EQ(AddId(ctx, a.v, b.v, short_ids.v, dst.v).code(), StatusCode::kInvalidArgument);
}

TEST(CpuGptOss, SwiGluOaiClampsAndGates) {
  const int64_t ne0 = 19, ne1 = 6;
  kt::Tensor a(GgmlType::F32, ne0, ne1), b(GgmlType::F32, ne0, ne1), dst(GgmlType::F32, ne0, ne1);
  kt::Fill(a, 3, -12.f, 12.f);  // beyond the limit on both sides
  kt::Fill(b, 4, -12.f, 12.f);
  const float alpha = 1.702f, limit = 7.f;
  ComputeContext ctx = kt::Ctx(1);
  ASSERT_TRUE(SwiGluOai(ctx, a.v, b.v, dst.v, alpha, limit).ok());
  int clamped = 0;
  for (int64_t i = 0; i < ne0 * ne1; ++i) {
    const float g = a.f32()[i], u = b.f32()[i];
    clamped += g > limit || std::fabs(u) > limit;
    const float x = std::min(g, limit), y = std::clamp(u, -limit, limit);
    ASSERT_EQ(dst.f32()[i], x / (1.f + std::exp(alpha * (-x))) * (y + 1.f)) << i;
  }
  EXPECT_GT(clamped, 10);
  // Without the clamp (a limit beyond every value) the result moves: the limit matters.
  kt::Tensor unclamped(GgmlType::F32, ne0, ne1);
  ASSERT_TRUE(SwiGluOai(ctx, a.v, b.v, unclamped.v, alpha, 1e30f).ok());
  EXPECT_NE(std::vector<float>(unclamped.f32(), unclamped.f32() + ne0 * ne1),
            std::vector<float>(dst.f32(), dst.f32() + ne0 * ne1));
  kt::Tensor narrow(GgmlType::F32, ne0 - 1, ne1);
  EXPECT_EQ(SwiGluOai(ctx, a.v, narrow.v, dst.v, alpha, limit).code(), StatusCode::kInvalidArgument);
}

TEST(CpuGptOss, SoftMaxWithSinks) {
  const int64_t n_kv = 45, n_tokens = 3, n_head = 4;
  kt::Tensor x(GgmlType::F32, n_kv, n_tokens, n_head), mask(GgmlType::F16, n_kv, n_tokens),
      sinks(GgmlType::F32, n_head), y(GgmlType::F32, n_kv, n_tokens, n_head);
  kt::Fill(x, 5, -4.f, 4.f);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = 0; c < n_kv; ++c)
      mask.u16()[t * n_kv + c] = Fp32ToFp16(c <= n_kv - n_tokens + t ? 0.f : -INFINITY);
  const float sink_values[] = {-2.f, 0.5f, 3.f, 9.f};  // below and above the rows' maxima
  std::copy(std::begin(sink_values), std::end(sink_values), sinks.f32());
  const float scale = 0.7f;
  for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    ComputeContext ctx = kt::Ctx(2);
    ctx.max_isa = isa;
    ASSERT_TRUE(SoftMax(ctx, x.v, mask.v, y.v, scale, 0.f, sinks.v).ok());
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t t = 0; t < n_tokens; ++t) {
        double mx = sink_values[h], sum = 0, total = 0;
        std::vector<double> w(static_cast<size_t>(n_kv));
        for (int64_t c = 0; c < n_kv; ++c) {
          w[size_t(c)] = x.at(c, t, h) * scale + mask.at(c, t);
          mx = std::max(mx, w[size_t(c)]);
        }
        for (double v : w) sum += std::exp(v - mx);
        sum += std::exp(sink_values[h] - mx);
        for (int64_t c = 0; c < n_kv; ++c) {
          ASSERT_NEAR(y.at(c, t, h), std::exp(w[size_t(c)] - mx) / sum, 2e-7)
              << "isa " << int(isa) << " h " << h << " t " << t << " c " << c;
          total += y.at(c, t, h);
        }
        // The sink's share is what the row lacks of 1.
        EXPECT_NEAR(1.0 - total, std::exp(sink_values[h] - mx) / sum, 1e-6);
      }
  }
  // The sinks matter: without them every row sums to 1.
  ComputeContext ctx = kt::Ctx(1);
  kt::Tensor plain(GgmlType::F32, n_kv, n_tokens, n_head);
  ASSERT_TRUE(SoftMax(ctx, x.v, mask.v, plain.v, scale, 0.f).ok());
  EXPECT_GT(std::fabs(plain.at(0, 0, 3) - y.at(0, 0, 3)), 1e-3);
  kt::Tensor wrong(GgmlType::F32, n_head + 1);
  const Status st = SoftMax(ctx, x.v, mask.v, y.v, scale, 0.f, wrong.v);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("must be contiguous F32 [n_head = 4]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace stowage::cpu
