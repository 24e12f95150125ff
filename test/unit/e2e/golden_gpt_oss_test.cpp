// gpt-oss against llama.cpp 2026-09-28 (test/data/golden-arch/gpt-oss-*.json, make_goldens.sh): a
// tiny synthetic model (2 layers: layer 0 sliding-window with a window of 8, far shorter than the
// 82-token prompt, layer 1 global; 4 experts of which 2 are used; YaRN factor 4 over 16) decoded in
// F32 and Q8_0, with and without flash attention, within golden_arch_test's tolerances; and the
// features shown to matter: without the attention sinks (set to -1e30, which gives each head's
// softmax no extra logit) or without the window (wider than the prompt) the logits miss the golden
// by more than twice the F32 tolerance.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "objapi_edit.h"
#include "reduced_golden.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

// The goldens' model: gguf-synth --arch gpt-oss --type <type> --sliding-window 8 --rope-scaling yarn
// --rope-scale 4 --rope-orig-ctx 16.
synth::ModelSpec GoldenSpec(GgmlType type) {
  synth::ModelSpec s;
  s.arch = "gpt-oss";
  s.weight_type = type;
  s.n_swa = 8;
  s.rope_scaling = "yarn";
  s.rope_scale = 4.0f;
  s.rope_scaling_orig_ctx = 16;
  return s;
}

nlohmann::json LoadGolden(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-arch/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

// The golden's prompt decoded by `model` on the plan for this CPU, with or without flash attention.
std::vector<float> DecodePrompt(const nlohmann::json& golden, const std::string& model, bool flash_attn) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.flash_attn = flash_attn;
  std::vector<float> logits;
  auto plan = test::PlanForThisCpu(model, cfg);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) {
    auto s = Session::CreateFromPlanBytes(*plan, model);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      Status st =
          (*s)->Decode(golden["prompt_tokens"].get<std::vector<int32_t>>(), /*all_logits=*/true, &logits);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
  return logits;
}

// The prompt's logits of `spec`'s model (its sinks set to `sinks` unless NaN), planned with or
// without flash attention; the model file must be the golden's unless `edited`.
std::vector<float> PromptLogits(const nlohmann::json& golden, const synth::ModelSpec& spec, bool flash_attn,
                                float sinks, bool edited) {
  const std::string model = ::testing::TempDir() + "golden_gpt_oss_" + std::to_string(getpid()) + ".gguf";
  Status st = synth::WriteModel(spec, model);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!edited) EXPECT_EQ(test::FileFnv1a64(model), golden["model_fnv1a64"].get<std::string>());
  if (!std::isnan(sinks))
    EXPECT_EQ(test::EditF32Tensors(model, {"attn_sinks"}, [sinks](float) { return sinks; }), 2);
  std::vector<float> logits = DecodePrompt(golden, model, flash_attn);
  std::remove(model.c_str());
  return logits;
}

constexpr float kF32Tol = 0.02f, kQuantTol = 0.30f;  // golden_arch_test's

TEST(GoldenGptOss, MatchesLlamaCpp) {
  const struct {
    const char* golden;
    GgmlType type;
    bool fa;
  } cases[] = {{"gpt-oss-f32", GgmlType::F32, false},
               {"gpt-oss-f32", GgmlType::F32, true},
               {"gpt-oss-q8_0", GgmlType::Q8_0, false},
               {"gpt-oss-q8_0", GgmlType::Q8_0, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.golden) + (c.fa ? " -fa on" : ""));
    const nlohmann::json golden = LoadGolden(c.golden);
    const auto prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
    const std::vector<float> logits = PromptLogits(golden, GoldenSpec(c.type), c.fa, NAN, false);
    test::ExpectMatchesReducedGolden(golden, logits, prompt.size(), golden["n_vocab"].get<int>(),
                                     c.type == GgmlType::F32 ? kF32Tol : kQuantTol, c.golden);
  }
}

// gpt-oss as it is shipped: the F32 golden model quantized by llama-quantize's MXFP4_MOE (ftype 38:
// the experts MXFP4, the other matrices Q8_0; test/data/golden-arch/gpt-oss-mxfp4.gguf, the file
// llama.cpp decoded), with and without flash attention; greedy tokens equal.
TEST(GoldenGptOss, Mxfp4ExpertsMatchLlamaCpp) {
  const nlohmann::json golden = LoadGolden("gpt-oss-mxfp4");
  const std::string model = std::string(STOWAGE_TEST_DATA_DIR) + "/golden-arch/gpt-oss-mxfp4.gguf";
  ASSERT_EQ(test::FileFnv1a64(model), golden["model_fnv1a64"].get<std::string>());
  const auto prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
  const int n_vocab = golden["n_vocab"].get<int>();
  for (bool fa : {false, true}) {
    SCOPED_TRACE(fa ? "-fa on" : "-fa off");
    test::ExpectMatchesReducedGolden(golden, DecodePrompt(golden, model, fa), prompt.size(), n_vocab,
                                     kQuantTol, "gpt-oss-mxfp4");
  }
  auto s = test::NewGoldenSession(model, n_vocab);
  ASSERT_TRUE(s);
  std::vector<float> logits;
  ASSERT_TRUE(s->Decode(prompt, true, &logits).ok());
  test::ExpectGreedyMatchesGolden(golden, *s, logits.data() + (prompt.size() - 1) * n_vocab, n_vocab);
}

// gguf-synth --type mxfp4 (the CPU backend's MXFP4 quantizer) writes the tensors llama-quantize's
// MXFP4_MOE wrote into gpt-oss-mxfp4.gguf from the F32 model, byte for byte (the six expert stacks
// MXFP4, the other matrices Q8_0), and that file plans, runs and matches the MXFP4 golden.
TEST(GoldenGptOss, SynthMxfp4IsLlamaQuantizes) {
  const std::string model =
      ::testing::TempDir() + "golden_gpt_oss_mxfp4_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(GoldenSpec(GgmlType::MXFP4), model).ok());
  EXPECT_EQ(test::ExpectSameTensors(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-arch/gpt-oss-mxfp4.gguf",
                                    model, GgmlType::MXFP4),
            6);
  const nlohmann::json golden = LoadGolden("gpt-oss-mxfp4");
  test::ExpectMatchesReducedGolden(golden, DecodePrompt(golden, model, false), golden["prompt_tokens"].size(),
                                   golden["n_vocab"].get<int>(), kQuantTol, "gpt-oss-mxfp4 (gguf-synth)");
  std::remove(model.c_str());
}

TEST(GoldenGptOss, GreedyAndTokenByToken) {
  const nlohmann::json golden = LoadGolden("gpt-oss-f32");
  const std::string model = ::testing::TempDir() + "golden_gpt_oss_g_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(GoldenSpec(GgmlType::F32), model).ok());
  test::ExpectGreedyAndTokenByToken(golden, model, 0.05f, "gpt-oss-f32");
  std::remove(model.c_str());
}

// The clamp of the SwiGLU (limit 7): gpt-oss-clamp-f32.json is llama.cpp's logits of the F32 golden
// model with its experts' gate and up matrices times 32 (exact), so that the gate and up values pass
// the limit. Stowage matches it; the same plan with every SWIGLU_OAI node's limit raised to 1e30 (a
// plan edit: the graph builder writes build_moe_ffn's constant) misses it by more than twice the F32
// tolerance.
TEST(GoldenGptOss, ClampMatters) {
  const nlohmann::json golden = LoadGolden("gpt-oss-clamp-f32");
  const std::string model = ::testing::TempDir() + "golden_gpt_oss_c_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(GoldenSpec(GgmlType::F32), model).ok());
  EXPECT_EQ(test::ScaleF32Tensors(model, {"ffn_gate_exps.weight", "ffn_up_exps.weight"}, 32.f), 4);
  ASSERT_EQ(test::FileFnv1a64(model), golden["model_fnv1a64"].get<std::string>());
  const auto prompt = golden["prompt_tokens"].get<std::vector<int32_t>>();
  const int n_vocab = golden["n_vocab"].get<int>();
  test::ExpectMatchesReducedGolden(golden, DecodePrompt(golden, model, false), prompt.size(), n_vocab,
                                   kF32Tol, "gpt-oss-clamp-f32");
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  auto plan = test::PlanForThisCpu(model, cfg);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  int n_edited = 0;
  const std::vector<uint8_t> unclamped = test::EditPlan(*plan, [&n_edited](::objapi::plan::PlanT& p) {
    for (auto& g : p.graphs)
      for (auto& t : g->tensors)
        if (t->op == static_cast<uint16_t>(GgmlOp::SWIGLU_OAI) && t->fparams.size() == 2) {
          t->fparams[1] = 1e30f;  // {alpha, limit}
          ++n_edited;
        }
  });
  ASSERT_FALSE(unclamped.empty());
  EXPECT_EQ(n_edited, 4);  // 2 layers x (pp, tg)
  auto s = Session::CreateFromPlanBytes(unclamped, model);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> logits;
  ASSERT_TRUE((*s)->Decode(prompt, true, &logits).ok());
  const float d = test::MaxDiffToReducedGolden(golden, logits);
  std::printf("[ gpt-oss-clamp-f32 ] max |logit diff| vs llama.cpp without the SwiGLU clamp %.5f\n", d);
  EXPECT_GT(d, 2 * kF32Tol);
  std::remove(model.c_str());
}

TEST(GoldenGptOss, SinksAndWindowMatter) {
  const nlohmann::json golden = LoadGolden("gpt-oss-f32");
  // Sinks at -1e30: exp(sink - max) is 0, as if the model had none.
  const float no_sinks = test::MaxDiffToReducedGolden(
      golden, PromptLogits(golden, GoldenSpec(GgmlType::F32), false, -1e30f, true));
  // The same through flash attention's sink step.
  const float no_sinks_fa = test::MaxDiffToReducedGolden(
      golden, PromptLogits(golden, GoldenSpec(GgmlType::F32), true, -1e30f, true));
  // A window wider than the prompt: layer 0 sees every earlier token.
  synth::ModelSpec wide = GoldenSpec(GgmlType::F32);
  wide.n_swa = 128;
  const float no_window = test::MaxDiffToReducedGolden(golden, PromptLogits(golden, wide, false, NAN, true));
  std::printf(
      "[ gpt-oss-f32 ] max |logit diff| vs llama.cpp without sinks %.5f (-fa on %.5f), without the window "
      "%.5f\n",
      no_sinks, no_sinks_fa, no_window);
  EXPECT_GT(no_sinks, 2 * kF32Tol);
  EXPECT_GT(no_sinks_fa, 2 * kF32Tol);
  EXPECT_GT(no_window, 2 * kF32Tol);
}

}  // namespace
}  // namespace stowage
