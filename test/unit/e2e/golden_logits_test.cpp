// End to end against llama.cpp: plan each golden model for the CPU, execute the plan, and compare
// the logits of every prompt position and the greedy continuation with ../shared/golden/logits.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "plan_probed.h"
#include "stowage/runtime/session.h"
#include "test_paths.h"

namespace stowage {
namespace {

struct Case {
  const char* model;
  float tol;                         // max |logit - golden| (0.02 for F32/F16 models, 0.25 for quantized)
  bool flash_attn = false;           // llama.cpp -fa on: FLASH_ATTN_EXT over an untransposed V cache
  GgmlType type_kv = GgmlType::F16;  // K and V cache type
  uint32_t n_ubatch = 512;           // below the prompt length: the prompt is decoded in several ubatches
  /// With flash attention: the golden in test/data/golden-fa (llama.cpp -fa on; README.md there).
  const char* golden_fa = nullptr;
  std::optional<GgmlType> type_v;  // the V cache type when it differs from type_kv
  /// The llama.cpp the plan follows (--llamacpp-compat; Today): 2026's graphs (inp_embd input,
  /// SET_ROWS KV store, F16 KQ mask input, fused SWIGLU) compute the same logits.
  planner::LlamacppCompat compat = planner::LlamacppCompat::kFeb25;
};

/// `c` planned as llama.cpp 2026 plans it.
Case Today(Case c) {
  c.compat = planner::LlamacppCompat::k2026;
  return c;
}

std::string CaseName(const Case& c) {
  std::string n = c.model;
  n = n.substr(0, n.size() - 5);
  if (c.type_kv != GgmlType::F16) n += std::string("_kv_") + GgmlTypeName(c.type_kv);
  if (c.type_v) n += std::string("_v_") + GgmlTypeName(*c.type_v);
  if (c.n_ubatch != 512) n += "_ub" + std::to_string(c.n_ubatch);
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class GoldenLogits : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenLogits, PromptLogitsAndGreedy) {
  const Case c = GetParam();
  const std::string model = test::ModelPath(c.model);
  const std::string golden_path =
      c.golden_fa ? std::string(STOWAGE_TEST_DATA_DIR) + "/golden-fa/" + c.golden_fa + ".json"
                  : test::GoldenDir() + "/logits/" +
                        std::string(c.model).substr(0, std::string(c.model).size() - 5) + ".json";
  STOWAGE_REQUIRE_FILE(model);
  STOWAGE_REQUIRE_FILE(golden_path);
  std::ifstream in(golden_path);
  const nlohmann::json golden = nlohmann::json::parse(in);
  const std::vector<int32_t> prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> greedy = golden["greedy"].get<std::vector<int32_t>>();
  const int n_vocab = golden["n_vocab"].get<int>();

  planner::ContextConfig cfg;
  cfg.n_ctx = 64;
  cfg.flash_attn = c.flash_attn;
  cfg.type_k = cfg.type_v = c.type_kv;
  if (c.type_v) cfg.type_v = *c.type_v;
  cfg.n_ubatch = c.n_ubatch;
  cfg.llamacpp_compat = c.compat;
  auto plan = test::PlanForThisCpu(model, cfg);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto session = Session::CreateFromPlanBytes(*plan, model);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Session& s = **session;
  ASSERT_EQ(s.n_vocab(), n_vocab);
  for (const auto& b : s.Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;

  std::vector<float> logits;
  Status st = s.Decode(prompt, /*all_logits=*/true, &logits);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto& gl = golden["prompt_logits"];
  ASSERT_EQ(gl.size(), prompt.size());
  float max_diff = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::vector<float> want = gl[i].get<std::vector<float>>();
    ASSERT_EQ(want.size(), static_cast<size_t>(n_vocab));
    const float* got = logits.data() + i * n_vocab;
    int top_got = 0, top_want = 0;
    for (int v = 0; v < n_vocab; ++v) {
      max_diff = std::max(max_diff, std::fabs(got[v] - want[v]));
      if (got[v] > got[top_got]) top_got = v;
      if (want[v] > want[top_want]) top_want = v;
    }
    EXPECT_EQ(top_got, top_want) << "top-1 differs at prompt position " << i;
  }
  EXPECT_LE(max_diff, c.tol) << "max |logit difference| over all prompt positions";
  std::printf("[ %s ] max |logit diff| = %.5f\n", c.model, max_diff);

  // Greedy continuation.
  int32_t next = 0;
  {
    const float* last = logits.data() + (prompt.size() - 1) * n_vocab;
    next = static_cast<int32_t>(std::max_element(last, last + n_vocab) - last);
  }
  std::vector<int32_t> got_greedy;
  for (size_t k = 0; k < greedy.size(); ++k) {
    got_greedy.push_back(next);
    std::vector<float> l;
    st = s.Decode({next}, false, &l);
    ASSERT_TRUE(st.ok()) << st.ToString();
    next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  }
  if (std::string(c.model).rfind("stories260K", 0) == 0) EXPECT_EQ(got_greedy, greedy);
}

INSTANTIATE_TEST_SUITE_P(
    Models, GoldenLogits,
    ::testing::Values(Case{"stories260K.gguf", 0.02f}, Case{"stories260K-F16.gguf", 0.02f},
                      Case{"stories260K-Q8_0.gguf", 0.25f}, Case{"stories260K-Q4_0.gguf", 0.25f},
                      Case{"stories260K-Q4_K_M.gguf", 0.25f}, Case{"llama-2-tiny-random.gguf", 0.02f},
                      Case{"tiny-tied-f32.gguf", 0.02f}, Case{"tiny-tied-q4_0.gguf", 0.25f},
                      Case{"tiny-untied-q4_0.gguf", 0.25f}, Case{"tiny8-untied-q4_0.gguf", 0.25f},
                      Case{"synth-Q4_K_M.gguf", 0.25f}, Case{"synth-Q6_K.gguf", 0.25f},
                      Case{"synth-Q2_K.gguf", 0.25f}, Case{"synth-IQ4_XS.gguf", 0.25f}),
    [](const ::testing::TestParamInfo<Case>& i) { return CaseName(i.param); });

// Flash attention (llama.cpp -fa on) against llama.cpp's own -fa on results (test/data/golden-fa):
// the same tolerances. Its F16 V accumulator moves near-tied logits (tiny8-untied-q4_0's top two at
// prompt position 3 are 0.002 apart and swap in llama.cpp too).
INSTANTIATE_TEST_SUITE_P(
    FlashAttn, GoldenLogits,
    ::testing::Values(Case{"stories260K.gguf", 0.02f, true, GgmlType::F16, 512, "stories260K"},
                      Case{"stories260K-F16.gguf", 0.02f, true, GgmlType::F16, 512, "stories260K-F16"},
                      Case{"stories260K-Q8_0.gguf", 0.25f, true, GgmlType::F16, 512, "stories260K-Q8_0"},
                      Case{"stories260K-Q4_0.gguf", 0.25f, true, GgmlType::F16, 512, "stories260K-Q4_0"},
                      Case{"stories260K-Q4_K_M.gguf", 0.25f, true, GgmlType::F16, 512, "stories260K-Q4_K_M"},
                      Case{"tiny-tied-f32.gguf", 0.02f, true, GgmlType::F16, 512, "tiny-tied-f32"},
                      Case{"tiny8-untied-q4_0.gguf", 0.25f, true, GgmlType::F16, 512, "tiny8-untied-q4_0"},
                      // quantized KV caches (a quantized V needs flash attention in llama.cpp); the
                      // goldens without llama.cpp 2026's attention rotation (README.md), so the F32
                      // model's tolerance holds
                      Case{"tiny-tied-f32.gguf", 0.02f, true, GgmlType::Q8_0, 512, "tiny-tied-f32-kv-q8_0"},
                      Case{"tiny-tied-f32.gguf", 0.02f, true, GgmlType::Q4_0, 512, "tiny-tied-f32-kv-q4_0"},
                      Case{"tiny-tied-f32.gguf", 0.02f, true, GgmlType::F16, 512, "tiny-tied-f32-v-iq4_nl",
                           GgmlType::IQ4_NL},
                      // the prompt in ubatches of 4 tokens, and an F32 KV cache (the F32 accumulator)
                      Case{"stories260K.gguf", 0.02f, true, GgmlType::F16, 4, "stories260K"},
                      Case{"stories260K.gguf", 0.02f, true, GgmlType::F32, 512, "stories260K"}),
    [](const ::testing::TestParamInfo<Case>& i) { return CaseName(i.param); });

// The same goldens with plans of llama.cpp 2026's graphs (plan-model --llamacpp-compat 2026): one
// model of each weight type, without and with flash attention, the same tolerances.
INSTANTIATE_TEST_SUITE_P(
    Models2026, GoldenLogits,
    ::testing::Values(Today(Case{"stories260K.gguf", 0.02f}), Today(Case{"stories260K-Q8_0.gguf", 0.25f}),
                      Today(Case{"stories260K-Q4_0.gguf", 0.25f}),
                      Today(Case{"llama-2-tiny-random.gguf", 0.02f}),
                      Today(Case{"tiny-tied-f32.gguf", 0.02f}), Today(Case{"tiny8-untied-q4_0.gguf", 0.25f}),
                      Today(Case{"synth-Q4_K_M.gguf", 0.25f}), Today(Case{"synth-Q2_K.gguf", 0.25f}),
                      Today(Case{"synth-IQ4_XS.gguf", 0.25f})),
    [](const ::testing::TestParamInfo<Case>& i) { return CaseName(i.param); });
INSTANTIATE_TEST_SUITE_P(FlashAttn2026, GoldenLogits,
                         ::testing::Values(Today(Case{"stories260K.gguf", 0.02f, true, GgmlType::F16, 512,
                                                      "stories260K"}),
                                           Today(Case{"tiny8-untied-q4_0.gguf", 0.25f, true, GgmlType::F16,
                                                      512, "tiny8-untied-q4_0"})),
                         [](const ::testing::TestParamInfo<Case>& i) { return CaseName(i.param); });

}  // namespace
}  // namespace stowage
