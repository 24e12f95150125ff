// Shared checks of the reduced llama.cpp goldens (test/data/golden-long, test/data/golden-arch: the
// top 5 (id, logit) of every prompt position, the logits of some vocabulary ids at some positions,
// greedy tokens; made by ../shared/tools/llamacpp-ref's refdump, see golden_long_test.cpp) against a
// runtime Session on the plan plan-model makes for this machine's CPU (test/unit/plan_probed.h: the
// planner's CPU_REPACK choices included). Header-only, for the e2e tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan_probed.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"

namespace stowage::test {

/// A session of `model` on the plan for this machine's CPU with n_ctx 256 (n_batch and n_ubatch:
/// planner::ContextConfig's defaults, clamped to it; null after a reported failure); its n_vocab
/// must be `n_vocab`.
inline std::unique_ptr<Session> NewGoldenSession(const std::string& model, int n_vocab) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  auto plan = PlanForThisCpu(model, cfg);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return nullptr;
  auto session = Session::CreateFromPlanBytes(*plan, model);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return nullptr;
  EXPECT_EQ((*session)->n_vocab(), n_vocab);
  return std::move(*session);
}

/// Checks `logits` (n_prompt rows of n_vocab, ggml order: row i = prompt position i) against the
/// reduced golden: top-1 of every position equal to llama.cpp's or a near-tie (our top-1 among its
/// top 5 within `tol` of its best), and the stored logits (ids x positions) within `tol`. Prints the
/// max difference under `name`.
inline void ExpectMatchesReducedGolden(const nlohmann::json& golden, const std::vector<float>& logits,
                                       size_t n_prompt, int n_vocab, float tol, const char* name) {
  ASSERT_EQ(logits.size(), n_prompt * size_t(n_vocab));
  const auto& top5 = golden["top5"];
  ASSERT_EQ(top5.size(), n_prompt);
  for (size_t i = 0; i < n_prompt; ++i) {
    const float* row = logits.data() + i * n_vocab;
    const int ours = int(std::max_element(row, row + n_vocab) - row);
    const int want = top5[i][0][0].get<int>();
    if (ours == want) continue;
    const float best = top5[i][0][1].get<float>();
    bool near_tie = false;
    for (const auto& e : top5[i])
      if (e[0].get<int>() == ours && best - e[1].get<float>() <= tol) near_tie = true;
    EXPECT_TRUE(near_tie) << "prompt position " << i << ": top-1 " << ours << ", llama.cpp " << want
                          << " (not a near-tie within " << tol << ")";
  }
  const auto ids = golden["ids"].get<std::vector<int>>();
  const auto positions = golden["positions"].get<std::vector<size_t>>();
  float max_diff = 0;
  for (size_t j = 0; j < positions.size(); ++j) {
    const auto want = golden["logits"][j].get<std::vector<float>>();
    ASSERT_EQ(want.size(), ids.size());
    const float* row = logits.data() + positions[j] * n_vocab;
    for (size_t v = 0; v < ids.size(); ++v) max_diff = std::max(max_diff, std::fabs(row[ids[v]] - want[v]));
  }
  EXPECT_LE(max_diff, tol) << "max |logit difference| over the stored positions and ids";
  std::printf("[ %s ] max |logit diff| vs llama.cpp = %.5f\n", name, max_diff);
}

/// Max |logit - golden| over the reduced golden's stored positions and ids (`logits`: n_prompt rows
/// of golden["n_vocab"]).
inline float MaxDiffToReducedGolden(const nlohmann::json& golden, const std::vector<float>& logits) {
  const size_t n_vocab = golden["n_vocab"].get<size_t>();
  const auto ids = golden["ids"].get<std::vector<size_t>>();
  const auto positions = golden["positions"].get<std::vector<size_t>>();
  float d = 0;
  for (size_t j = 0; j < positions.size(); ++j) {
    const auto want = golden["logits"][j].get<std::vector<float>>();
    for (size_t v = 0; v < ids.size(); ++v)
      d = std::max(d, std::fabs(logits[positions[j] * n_vocab + ids[v]] - want[v]));
  }
  return d;
}

/// Replaces every element x of the F32 tensors of `model` whose names contain one of `names` by
/// f(x), in place (offsets from the file's own header); returns how many tensors it changed. For
/// the tests that turn a feature off in a golden's model (weights doubled, sinks removed).
inline int EditF32Tensors(const std::string& model, const std::vector<std::string>& names,
                          const std::function<float(float)>& f) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // file offset, element count
  {
    auto gguf = GgufFile::Open(model);
    EXPECT_TRUE(gguf.ok()) << gguf.status().ToString();
    if (!gguf.ok()) return 0;
    for (const GgufTensorInfo& t : (*gguf)->tensors())
      for (const std::string& n : names)
        if (t.name.find(n) != std::string::npos) {
          EXPECT_EQ(t.type, GgmlType::F32) << t.name;
          spans.emplace_back((*gguf)->data_offset() + t.offset, static_cast<uint64_t>(t.nelements()));
        }
  }
  std::fstream file(model, std::ios::in | std::ios::out | std::ios::binary);
  EXPECT_TRUE(file.good());
  for (const auto& [off, n] : spans) {
    std::vector<float> w(n);
    file.seekg(static_cast<std::streamoff>(off));
    file.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(n * sizeof(float)));
    for (float& x : w) x = f(x);
    file.seekp(static_cast<std::streamoff>(off));
    file.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(n * sizeof(float)));
  }
  EXPECT_TRUE(file.good());
  return static_cast<int>(spans.size());
}

/// Expects every tensor of the GGUF `want` in the GGUF `got` under its name with the same type, shape
/// and bytes, and no other tensor in `got` (for gguf-synth files against llama-quantize's); returns
/// how many of them have type `count` (0 after a failure to open either).
inline int ExpectSameTensors(const std::string& want, const std::string& got, GgmlType count) {
  auto w = GgufFile::Open(want);
  auto g = GgufFile::Open(got);
  EXPECT_TRUE(w.ok() && g.ok()) << want << ", " << got;
  if (!w.ok() || !g.ok()) return 0;
  EXPECT_EQ((*w)->tensors().size(), (*g)->tensors().size());
  int n = 0;
  for (const GgufTensorInfo& t : (*w)->tensors()) {
    const GgufTensorInfo* u = (*g)->FindTensor(t.name);
    if (u == nullptr) {
      ADD_FAILURE() << got << ": no tensor " << t.name;
      continue;
    }
    EXPECT_EQ(u->type, t.type) << t.name;
    EXPECT_TRUE(std::equal(t.ne, t.ne + 4, u->ne)) << t.name;
    if (u->type != t.type || u->nbytes != t.nbytes) continue;
    EXPECT_EQ(std::memcmp((*w)->TensorData(t), (*g)->TensorData(*u), t.nbytes), 0)
        << t.name << ": bytes differ";
    n += t.type == count;
  }
  return n;
}

/// EditF32Tensors multiplying by `factor`.
inline int ScaleF32Tensors(const std::string& model, const std::vector<std::string>& names, float factor) {
  return EditF32Tensors(model, names, [factor](float x) { return x * factor; });
}

/// Greedy continuation after the prompt whose last logits row is `last` (n_vocab values): decodes
/// golden["greedy"].size() tokens one by one on `s` and expects them equal to the golden's.
inline void ExpectGreedyMatchesGolden(const nlohmann::json& golden, Session& s, const float* last,
                                      int n_vocab) {
  const auto greedy = golden["greedy"].get<std::vector<int32_t>>();
  int32_t next = int32_t(std::max_element(last, last + n_vocab) - last);
  std::vector<int32_t> got;
  for (size_t k = 0; k < greedy.size(); ++k) {
    got.push_back(next);
    std::vector<float> l;
    Status st = s.Decode({next}, false, &l);
    ASSERT_TRUE(st.ok()) << st.ToString();
    next = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  }
  EXPECT_EQ(got, greedy);
}

/// The golden's prompt decoded by `model` (NewGoldenSession) at once, its greedy continuation
/// expected equal to the golden's (ExpectGreedyMatchesGolden), and token by token on a second
/// session: the two runs' logits within `tol` of each other (no routing near-tie that the batch
/// and the single tokens would settle differently). Prints the difference under `name`.
inline void ExpectGreedyAndTokenByToken(const nlohmann::json& golden, const std::string& model, float tol,
                                        const char* name) {
  const int n_vocab = golden["n_vocab"].get<int>();
  const auto prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
  auto batch = NewGoldenSession(model, n_vocab);
  auto single = NewGoldenSession(model, n_vocab);
  ASSERT_TRUE(batch && single);
  std::vector<float> a, b;
  ASSERT_TRUE(batch->Decode(prompt, true, &a).ok());
  ExpectGreedyMatchesGolden(golden, *batch, a.data() + (prompt.size() - 1) * n_vocab, n_vocab);
  for (int32_t t : prompt) {
    std::vector<float> l;
    ASSERT_TRUE(single->Decode({t}, true, &l).ok());
    b.insert(b.end(), l.begin(), l.end());
  }
  ASSERT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  EXPECT_LE(d, tol) << "prompt at once vs token by token";
  std::printf("[ %s ] max |logit diff| prompt at once vs token by token = %.5f\n", name, d);
}

}  // namespace stowage::test
