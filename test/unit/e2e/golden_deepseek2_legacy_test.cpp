// deepseek2 files of the older form (one attn_kv_b per layer, no key_length_mla / value_length_mla)
// against llama.cpp (test/data/golden-arch/deepseek2-legacy-*.json, make_goldens.sh), which runs them
// as MHA (llama_model_deepseek2::graph without is_mla): the tiny model of the absorbed-MLA goldens
// (3 layers, the first dense, q LoRA 32, kv LoRA 32, heads of 16 + an 8-wide rope part, 8 sigmoid-routed
// experts of which 2 are used, YaRN factor 4 over 16 with yarn_log_multiplier 0.1, seed 3) in the older
// form with V heads of 16, decoded in F32 and Q8_0 (with and without flash attention, which llama.cpp
// keeps for K heads of 24 and V heads of 16) within golden_arch_test's tolerances, greedy tokens
// equal, prompt at once as token by token; and the rope offset shown to matter: the same plan with
// its query ROPEs' n_offs dropped (the heads' first 8 dims roped instead of their last 8) misses the
// golden by more than twice the F32 tolerance.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "objapi_edit.h"
#include "reduced_golden.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

// The goldens' model: gguf-synth --arch deepseek2 --mla-legacy --type <type> --n-layer 3 --n-expert 8
// --n-expert-used 2 --head-dim 24 --v-head-dim 16 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16
// --yarn-log-mul 0.1 --seed 3.
synth::ModelSpec GoldenSpec(GgmlType type) {
  synth::ModelSpec s;
  s.arch = "deepseek2";
  s.mla_legacy = true;
  s.weight_type = type;
  s.seed = 3;
  s.n_layer = 3;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.head_dim = 24;
  s.mla_v_head_dim = 16;
  s.rope_scaling = "yarn";
  s.rope_scale = 4.0f;
  s.rope_scaling_orig_ctx = 16;
  s.yarn_log_mul = 0.1f;
  return s;
}

nlohmann::json LoadGolden(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-arch/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

// Writes the golden's model (checked to be the file llama.cpp decoded) to a temporary path.
std::string WriteGoldenModel(const nlohmann::json& golden, GgmlType type, const char* tag) {
  const std::string model =
      ::testing::TempDir() + "golden_deepseek2_legacy_" + tag + std::to_string(getpid()) + ".gguf";
  const Status st = synth::WriteModel(GoldenSpec(type), model);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(test::FileFnv1a64(model), golden["model_fnv1a64"].get<std::string>());
  return model;
}

// The prompt's logits of the session of `plan` over `model`.
std::vector<float> Decode(const nlohmann::json& golden, const std::vector<uint8_t>& plan,
                          const std::string& model) {
  std::vector<float> logits;
  auto s = Session::CreateFromPlanBytes(plan, model);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return logits;
  const Status st =
      (*s)->Decode(golden["prompt_tokens"].get<std::vector<int32_t>>(), /*all_logits=*/true, &logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return logits;
}

std::vector<uint8_t> Plan(const std::string& model, bool flash_attn) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.flash_attn = flash_attn;
  auto plan = test::PlanForThisCpu(model, cfg);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : std::vector<uint8_t>();
}

constexpr float kF32Tol = 0.02f, kQuantTol = 0.30f;  // golden_arch_test's

TEST(GoldenDeepSeek2Legacy, MatchesLlamaCpp) {
  const struct {
    const char* golden;
    GgmlType type;
    bool fa;
  } cases[] = {{"deepseek2-legacy-f32", GgmlType::F32, false},
               {"deepseek2-legacy-f32", GgmlType::F32, true},
               {"deepseek2-legacy-q8_0", GgmlType::Q8_0, false},
               {"deepseek2-legacy-q8_0", GgmlType::Q8_0, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.golden) + (c.fa ? " -fa on" : ""));
    const nlohmann::json golden = LoadGolden(c.golden);
    const std::string model = WriteGoldenModel(golden, c.type, "m_");
    const std::vector<float> logits = Decode(golden, Plan(model, c.fa), model);
    test::ExpectMatchesReducedGolden(golden, logits, golden["prompt_tokens"].size(),
                                     golden["n_vocab"].get<int>(),
                                     c.type == GgmlType::F32 ? kF32Tol : kQuantTol, c.golden);
    std::remove(model.c_str());
  }
}

TEST(GoldenDeepSeek2Legacy, GreedyAndTokenByToken) {
  const nlohmann::json golden = LoadGolden("deepseek2-legacy-f32");
  const std::string model = WriteGoldenModel(golden, GgmlType::F32, "g_");
  test::ExpectGreedyAndTokenByToken(golden, model, 0.05f, "deepseek2-legacy-f32");
  std::remove(model.c_str());
}

// The query heads are roped over their last n_rot dims (ROPE n_offs = qk_nope, ggml_rope_set_offset):
// the plan with those ROPEs' fourth parameter dropped (n_offs 0: the first n_rot dims roped) misses
// llama.cpp by more than twice the F32 tolerance.
TEST(GoldenDeepSeek2Legacy, RopeOffsetMatters) {
  const nlohmann::json golden = LoadGolden("deepseek2-legacy-f32");
  const std::string model = WriteGoldenModel(golden, GgmlType::F32, "r_");
  const std::vector<uint8_t> plan = Plan(model, false);
  ASSERT_FALSE(plan.empty());
  int n_edited = 0;
  const std::vector<uint8_t> no_offset = test::EditPlan(plan, [&n_edited](::objapi::plan::PlanT& p) {
    for (auto& g : p.graphs)
      for (auto& t : g->tensors)
        if (t->op == static_cast<uint16_t>(GgmlOp::ROPE) && t->iparams.size() == 4) {
          t->iparams.pop_back();  // {n_dims, mode, n_ctx_orig, n_offs}
          ++n_edited;
        }
  });
  ASSERT_FALSE(no_offset.empty());
  EXPECT_EQ(n_edited, 6);  // 3 layers x (pp, tg)
  const float with = test::MaxDiffToReducedGolden(golden, Decode(golden, plan, model));
  const float without = test::MaxDiffToReducedGolden(golden, Decode(golden, no_offset, model));
  std::printf("[ deepseek2-legacy-f32 ] max |logit diff| vs llama.cpp %.5f, without the rope offset %.5f\n",
              with, without);
  EXPECT_LE(with, kF32Tol);
  EXPECT_GT(without, 2 * kF32Tol);
  std::remove(model.c_str());
}

}  // namespace
}  // namespace stowage
