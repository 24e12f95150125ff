// SamplerChain against llama.cpp 2026's samplers: their output on one row (test/data/golden-sampler,
// made by llama.cpp's own llama_sampler_* chains) candidate for candidate, and cases worked out by
// hand on small rows: the chain's order matters, top-p keeps at least min_keep, min-p is relative
// to the most probable token, temperature <= 0 keeps the maximum, the penalties' window.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "stowage/runtime/sampler.h"

namespace stowage {
namespace {

std::vector<int32_t> Ids(const std::vector<TokenData>& cur) {
  std::vector<int32_t> ids;
  for (const TokenData& t : cur) ids.push_back(t.id);
  return ids;
}

// log-probabilities of 0.5, 0.25, 0.15, 0.1 on ids 3, 0, 2, 1.
const std::vector<float> kRow = {std::log(0.25f), std::log(0.1f), std::log(0.15f), std::log(0.5f)};

TEST(SamplerChain, TopPKeepsTheNucleusAndAtLeastMinKeep) {
  SamplerChain c;
  c.Add(SamplerStep::TopP(0.7f));  // 0.5 + 0.25 = 0.75 >= 0.7: two tokens
  std::vector<TokenData> cur;
  EXPECT_EQ(c.Sample(kRow.data(), 4, &cur), -1);  // no picking step
  EXPECT_EQ(Ids(cur), (std::vector<int32_t>{3, 0}));
  EXPECT_NEAR(cur[0].p, 0.5f, 1e-6f);
  SamplerChain k3;
  k3.Add(SamplerStep::TopP(0.4f, 3));  // 0.5 alone reaches 0.4, min_keep 3 keeps three
  k3.Sample(kRow.data(), 4, &cur);
  EXPECT_EQ(Ids(cur), (std::vector<int32_t>{3, 0, 2}));
  SamplerChain off;
  off.Add(SamplerStep::TopP(1.0f));  // p >= 1: nothing removed, order unchanged
  off.Sample(kRow.data(), 4, &cur);
  EXPECT_EQ(Ids(cur), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(SamplerChain, MinPIsRelativeToTheMostProbable) {
  SamplerChain c;
  c.Add(SamplerStep::MinP(0.3f));  // p >= 0.3 * 0.5 = 0.15: ids 0 (0.25), 2 (0.15), 3 (0.5)
  std::vector<TokenData> cur;
  c.Sample(kRow.data(), 4, &cur);
  EXPECT_EQ(Ids(cur), (std::vector<int32_t>{0, 2, 3}));  // unsorted: id order kept, as llama.cpp
  SamplerChain keep;
  keep.Add(SamplerStep::MinP(0.9f, 2));  // only 3 passes; min_keep 2 adds the next most probable
  keep.Sample(kRow.data(), 4, &cur);
  EXPECT_EQ(Ids(cur), (std::vector<int32_t>{3, 0}));
}

TEST(SamplerChain, OrderOfTheStepsMatters) {
  // Penalty on token 3 (logit log 0.5 < 0: multiplied by 3 -> log(0.125)) then top-k 1 picks 0;
  // top-k 1 first keeps 3 alone, and the penalty cannot bring 0 back.
  SamplerChain pen_first, k_first;
  pen_first.Add(SamplerStep::Penalties(8, 3.0f, 0.f, 0.f));
  pen_first.Add(SamplerStep::TopK(1));
  pen_first.Add(SamplerStep::Greedy());
  k_first.Add(SamplerStep::TopK(1));
  k_first.Add(SamplerStep::Penalties(8, 3.0f, 0.f, 0.f));
  k_first.Add(SamplerStep::Greedy());
  pen_first.Accept(3);
  k_first.Accept(3);
  EXPECT_EQ(pen_first.Sample(kRow.data(), 4), 0);
  EXPECT_EQ(k_first.Sample(kRow.data(), 4), 3);
  // The window: after 8 other tokens, 3 is out of it.
  for (int i = 0; i < 8; ++i) pen_first.Accept(1);
  EXPECT_EQ(pen_first.Sample(kRow.data(), 4), 3);
  pen_first.Reset();
  EXPECT_EQ(pen_first.Sample(kRow.data(), 4), 3);
}

TEST(SamplerChain, TemperatureZeroKeepsTheMaximumAndDistPicksIt) {
  SamplerChain c;
  c.Add(SamplerStep::Temperature(0.f));
  c.Add(SamplerStep::Dist(7));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c.Sample(kRow.data(), 4), 3);
  // Greedy: the first maximum in id order.
  SamplerChain g;
  g.Add(SamplerStep::Greedy());
  const std::vector<float> tie = {1.f, 3.f, 3.f, NAN};
  EXPECT_EQ(g.Sample(tie.data(), 4), 1);
  const std::vector<float> none = {-INFINITY, NAN};
  EXPECT_EQ(g.Sample(none.data(), 2), -1);
}

TEST(SamplerChain, DistFollowsTheSoftmaxAndTheSeed) {
  SamplerChain a, b;
  a.Add(SamplerStep::Dist(11));
  b.Add(SamplerStep::Dist(11));
  std::vector<int> hist(4, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t t = a.Sample(kRow.data(), 4);
    ASSERT_EQ(t, b.Sample(kRow.data(), 4));
    ++hist[static_cast<size_t>(t)];
  }
  EXPECT_NEAR(hist[3] / double(n), 0.5, 0.02);
  EXPECT_NEAR(hist[0] / double(n), 0.25, 0.02);
  EXPECT_NEAR(hist[1] / double(n), 0.1, 0.02);
}

// llama.cpp's chains on its row (refsampler.cpp): every case's candidates (ids in llama.cpp's order,
// logits bit for bit, probabilities within float rounding) and the picked token.
TEST(SamplerChain, EqualsLlamaCppOnItsRow) {
  struct Case {
    std::vector<TokenData> cur;
    int32_t selected = -1;
  };
  std::map<std::string, Case> want;
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-sampler/chains.txt");
  ASSERT_TRUE(in.good());
  std::string line, name;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string w;
    f >> w;
    if (w == "case") {
      f >> name;
    } else if (w == "selected") {
      f >> want[name].selected;
    } else {
      TokenData t;
      t.id = std::stoi(w);
      std::string logit;
      f >> logit >> t.p;
      t.logit = std::stof(logit);  // "-inf" too
      want[name].cur.push_back(t);
    }
  }
  using S = SamplerStep;
  const std::map<std::string, std::vector<S>> chains = {
      {"top_k", {S::TopK(5)}},
      {"top_p", {S::TopP(0.8f)}},
      {"top_p_min_keep", {S::TopP(0.3f, 6)}},
      {"min_p", {S::MinP(0.2f)}},
      {"min_p_min_keep", {S::MinP(0.99f, 3)}},
      {"temp", {S::Temperature(0.7f)}},
      {"temp_zero", {S::Temperature(0.f)}},
      {"greedy", {S::Greedy()}},
      {"penalties", {S::Penalties(4, 1.3f, 0.1f, 0.2f)}},
      {"default_chain",
       {S::Penalties(64, 1.1f, 0.f, 0.f), S::TopK(10), S::TopP(0.9f), S::MinP(0.05f), S::Temperature(0.7f),
        S::Greedy()}},
      {"min_p_then_top_p", {S::MinP(0.1f), S::TopP(0.5f)}},
  };
  ASSERT_EQ(want.size(), chains.size());
  std::vector<float> row(32);
  for (int i = 0; i < 32; ++i) row[static_cast<size_t>(i)] = 3.0f * std::sin(1.3f * static_cast<float>(i));
  for (const auto& [case_name, steps] : chains) {
    SCOPED_TRACE(case_name);
    SamplerChain c;
    for (const S& st : steps) c.Add(st);
    if (case_name == "penalties" || case_name == "default_chain")
      for (int32_t t : {3, 5, 5, 7}) c.Accept(t);
    std::vector<TokenData> cur;
    const int32_t picked = c.Sample(row.data(), 32, &cur);
    const Case& w = want.at(case_name);
    EXPECT_EQ(picked, w.selected);
    ASSERT_EQ(cur.size(), w.cur.size());
    for (size_t i = 0; i < cur.size(); ++i) {
      EXPECT_EQ(cur[i].id, w.cur[i].id) << i;
      EXPECT_EQ(cur[i].logit, w.cur[i].logit) << i;
      EXPECT_NEAR(cur[i].p, w.cur[i].p, 1e-6f) << i;
    }
  }
}

// Sampler is the default chain: top-k 1 is greedy, temperature 0 too.
TEST(SamplerChain, SamplerIsTheDefaultChain) {
  SamplerParams p;
  p.temperature = 0.f;
  p.penalty_repeat = 3.0f;
  Sampler s(p);
  s.Accept(3);
  EXPECT_EQ(s.Sample(kRow.data(), 4), 0);  // penalties before greedy
  s.ResetHistory();
  EXPECT_EQ(s.Sample(kRow.data(), 4), 3);
}

}  // namespace
}  // namespace stowage
