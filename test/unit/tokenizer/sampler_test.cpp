#include "stowage/runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace stowage {
namespace {

std::vector<float> Logits() { return {0.5f, 2.0f, -1.0f, 1.9f, 0.0f, 1.0f, -3.0f, 1.5f}; }

TEST(Sampler, GreedyIsArgmax) {
  SamplerParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  const auto l = Logits();
  EXPECT_EQ(s.Sample(l.data(), static_cast<int>(l.size())), 1);
  std::vector<float> tie = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.Sample(tie.data(), 4), 1);  // first maximum
  std::vector<float> nan = {NAN, -1.0f, NAN};
  EXPECT_EQ(s.Sample(nan.data(), 3), 1);
}

TEST(Sampler, TopK1IsGreedy) {
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    Sampler s(p);
    const auto l = Logits();
    EXPECT_EQ(s.Sample(l.data(), static_cast<int>(l.size())), 1);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  p.seed = 99;
  Sampler c(p);
  const auto l = Logits();
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.Sample(l.data(), static_cast<int>(l.size())));
    tb.push_back(b.Sample(l.data(), static_cast<int>(l.size())));
    tc.push_back(c.Sample(l.data(), static_cast<int>(l.size())));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  a.Reseed(1234);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.Sample(l.data(), static_cast<int>(l.size())), ta[i]);
}

std::map<int32_t, int> Histogram(SamplerParams p, const std::vector<float>& l, int n) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.Sample(l.data(), static_cast<int>(l.size()))];
  return h;
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const int n = 20000;
  auto h = Histogram(p, l, n);
  EXPECT_NEAR(h[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(h[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(h[2] / double(n), 0.2, 0.02);
  // Temperature 0.5 squares the odds: 25:9:4.
  p.temperature = 0.5f;
  h = Histogram(p, l, n);
  EXPECT_NEAR(h[0] / double(n), 25.0 / 38, 0.02);
  EXPECT_NEAR(h[2] / double(n), 4.0 / 38, 0.02);
}

TEST(Sampler, TruncationKeepsOnlyAllowedTokens) {
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  auto h = Histogram(p, l, 5000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_GT(h[0], h[1]);
  EXPECT_GT(h[1], 0);
  p.top_k = 0;
  p.top_p = 0.75f;  // 0.5 alone is short of 0.75, 0.5 + 0.3 reaches it
  h = Histogram(p, l, 5000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  p.top_p = 1.0f;
  p.min_p = 0.2f;  // keeps p >= 0.1: ids 0, 1, 2
  h = Histogram(p, l, 5000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h[2], 0);
}

// Repetition penalties, probed through greedy picks (llama.cpp applies them before the
// temperature step, so they decide greedy decoding too). Logits: id 1 = 2.0, id 3 = 1.9.
TEST(Sampler, RepeatPenaltyDividesPositiveLogits) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.penalty_repeat = 1.1f;  // 2.0 / 1.1 = 1.82 < 1.9
  Sampler s(p);
  const auto l = Logits();
  const int n = static_cast<int>(l.size());
  EXPECT_EQ(s.Sample(l.data(), n), 1);
  s.Accept(1);
  EXPECT_EQ(s.Sample(l.data(), n), 3);
  s.Accept(3);  // 1.9 / 1.1 = 1.73 < 1.82
  EXPECT_EQ(s.Sample(l.data(), n), 1);
  EXPECT_EQ(l, Logits());  // the caller's row is not modified
  s.ResetHistory();
  EXPECT_EQ(s.Sample(l.data(), n), 1);
}

TEST(Sampler, RepeatPenaltyMultipliesNegativeLogits) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.penalty_repeat = 1.1f;
  Sampler s(p);
  const std::vector<float> l = {-1.0f, -1.05f};
  s.Accept(0);  // -1.0 * 1.1 = -1.1 < -1.05 (dividing would raise it to -0.91)
  EXPECT_EQ(s.Sample(l.data(), 2), 1);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.penalty_freq = 0.04f;  // per occurrence
  const auto l = Logits();
  const int n = static_cast<int>(l.size());
  Sampler f(p);
  f.Accept(1);
  EXPECT_EQ(f.Sample(l.data(), n), 1);  // 2.0 - 0.04 = 1.96 > 1.9
  f.Accept(1);
  f.Accept(1);
  EXPECT_EQ(f.Sample(l.data(), n), 3);  // 2.0 - 0.12 = 1.88 < 1.9
  p.penalty_freq = 0.0f;
  p.penalty_present = 0.15f;  // once, whatever the count
  Sampler pr(p);
  pr.Accept(1);
  EXPECT_EQ(pr.Sample(l.data(), n), 3);  // 1.85
  pr.Accept(3);                          // 1.75 < 1.85
  pr.Accept(3);
  EXPECT_EQ(pr.Sample(l.data(), n), 1);
}

TEST(Sampler, PenaltyWindowIsTheLastNTokens) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.penalty_repeat = 1.5f;
  p.penalty_last_n = 2;
  const auto l = Logits();
  const int n = static_cast<int>(l.size());
  Sampler s(p);
  s.Accept(1);
  s.Accept(0);
  EXPECT_EQ(s.Sample(l.data(), n), 3);  // 1 is in the window
  s.Accept(4);                          // 1 leaves it
  EXPECT_EQ(s.Sample(l.data(), n), 1);
  s.Accept(1);
  s.Accept(1);  // counted twice, still one division by penalty_repeat: 1.33
  EXPECT_EQ(s.Sample(l.data(), n), 3);
  // Disabled: a window of 0, or the neutral values (llama.cpp's defaults).
  p.penalty_last_n = 0;
  Sampler off(p);
  off.Accept(1);
  EXPECT_EQ(off.Sample(l.data(), n), 1);
  Sampler neutral(SamplerParams{});
  neutral.Reseed(3);
  SamplerParams d;
  d.seed = 3;
  Sampler plain(d);
  for (int i = 0; i < 50; ++i) {
    const int32_t t = neutral.Sample(l.data(), n);
    EXPECT_EQ(t, plain.Sample(l.data(), n));
    neutral.Accept(t);
  }
  // Ids outside the row (another vocabulary) are ignored.
  p.penalty_last_n = 4;
  Sampler s2(p);
  s2.Accept(-5);
  s2.Accept(1000);
  EXPECT_EQ(s2.Sample(l.data(), n), 1);
}

TEST(Sampler, PenaltiesLeaveMaskedTokensMasked) {
  SamplerParams p;
  p.temperature = 0.0f;
  p.penalty_repeat = -1.0f;  // would turn -inf into +inf
  Sampler s(p);
  std::vector<float> l = {0.5f, -INFINITY, 0.25f};
  s.Accept(1);
  EXPECT_EQ(s.Sample(l.data(), 3), 0);
}

TEST(Sampler, BadInput) {
  Sampler s(SamplerParams{});
  EXPECT_EQ(s.Sample(nullptr, 4), -1);
  const auto l = Logits();
  EXPECT_EQ(s.Sample(l.data(), 0), -1);
  std::vector<float> all_neg_inf(4, -INFINITY);
  EXPECT_EQ(s.Sample(all_neg_inf.data(), 4), -1);
  std::vector<float> pos_inf = {0.0f, INFINITY, 1.0f};
  EXPECT_EQ(s.Sample(pos_inf.data(), 3), 1);
}

}  // namespace
}  // namespace stowage
