// MXFP4 models against llama.cpp 2026-09-28 (test/data/mxfp4, README.md there): a synthetic Mixtral
// quantized by llama-quantize's MXFP4_MOE (experts MXFP4, other matrices Q8_0) and a dense llama with
// every matrix MXFP4 (pure), each with llama.cpp's logits of an 82-token prompt.
// - QuantizerEqualsLlamaCpp: cpu::QuantizeRow(MXFP4) of gguf-synth's F32 tensors gives the bytes
//   llama-quantize wrote for every MXFP4 tensor (quantize_row_mxfp4_ref), and gguf-synth --type mxfp4
//   (--pure for the dense llama) writes every tensor of llama-quantize's file, type and bytes.
// - MatchesLlamaCpp: the plan for this CPU (CPU_REPACK takes the MXFP4 matrices with ne1 % 8 == 0, as
//   llama.cpp's mxfp4_8x8 repack) decodes the prompt within the quantized tolerance of golden-arch
//   (0.30), with and without llamacpp_numerics, and within 2e-5 (the golden's printed digits) with
//   it; the greedy tokens equal llama.cpp's.
// - SwappedHalvesMissTheGolden: the same files with each MXFP4 block's element halves swapped (low
//   and high nibbles exchanged: the layout bug a dequantizer could make) miss the golden by more than
//   the tolerance, so the tolerance does tell a correct MXFP4 decoding from a wrong one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops.h"
#include "reduced_golden.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

constexpr float kTol = 0.30f;  // golden_arch_test's tolerance of quantized models

struct Case {
  const char* name;  // test/data/mxfp4/<name>.gguf and .json
  const char* arch;
  uint32_t n_ff, n_expert, n_expert_used;  // gguf-synth's (0: its defaults)
};

const Case kCases[] = {{"mixtral-mxfp4", "mixtral", 64, 4, 2}, {"llama-mxfp4", "llama", 0, 0, 0}};

std::string DataPath(const Case& c, const char* ext) {
  return std::string(STOWAGE_TEST_DATA_DIR) + "/mxfp4/" + c.name + ext;
}

nlohmann::json Golden(const Case& c) {
  std::ifstream in(DataPath(c, ".json"));
  EXPECT_TRUE(in.good()) << DataPath(c, ".json");
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

// Prompt logits of `model` on the plan for this CPU.
std::vector<float> PromptLogits(const std::string& model, const nlohmann::json& golden, bool numerics,
                                std::unique_ptr<Session>* keep = nullptr) {
  const int n_vocab = golden["n_vocab"].get<int>();
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  auto plan = test::PlanForThisCpu(model, cfg);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return {};
  SessionOptions opts;
  opts.llamacpp_numerics = numerics;
  auto session = Session::CreateFromPlanBytes(*plan, model, opts);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  EXPECT_EQ((*session)->n_vocab(), n_vocab);
  std::vector<float> logits;
  const Status st = (*session)->Decode(golden["prompt_tokens"].get<std::vector<int32_t>>(), true, &logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (keep) *keep = std::move(*session);
  return logits;
}

class GoldenMXFP4 : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenMXFP4, QuantizerEqualsLlamaCpp) {
  const Case c = GetParam();
  synth::ModelSpec spec;
  spec.arch = c.arch;
  spec.weight_type = GgmlType::F32;
  if (c.n_ff) spec.n_ff = c.n_ff;
  spec.n_expert = c.n_expert;
  spec.n_expert_used = c.n_expert_used;
  const std::string f32 =
      ::testing::TempDir() + "golden_mxfp4_" + c.name + "_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(spec, f32).ok());
  auto src = GgufFile::Open(f32);
  auto ref = GgufFile::Open(DataPath(c, ".gguf"));
  ASSERT_TRUE(src.ok() && ref.ok());
  int n_mxfp4 = 0;
  for (const GgufTensorInfo& t : (*ref)->tensors()) {
    if (t.type != GgmlType::MXFP4) continue;
    ++n_mxfp4;
    const GgufTensorInfo* s = nullptr;
    for (const GgufTensorInfo& u : (*src)->tensors())
      if (u.name == t.name) s = &u;
    ASSERT_NE(s, nullptr) << t.name;
    ASSERT_EQ(s->type, GgmlType::F32) << t.name;
    ASSERT_EQ(s->nelements(), t.nelements()) << t.name;
    const int64_t n = t.nelements();
    std::vector<uint8_t> got(RowSize(GgmlType::MXFP4, n));
    const float* x = reinterpret_cast<const float*>((*src)->bytes() + (*src)->data_offset() + s->offset);
    ASSERT_TRUE(cpu::QuantizeRow(GgmlType::MXFP4, x, got.data(), n).ok());
    EXPECT_EQ(std::memcmp(got.data(), (*ref)->bytes() + (*ref)->data_offset() + t.offset, got.size()), 0)
        << t.name << ": cpu::QuantizeRow(MXFP4) differs from llama-quantize's bytes";
  }
  EXPECT_EQ(n_mxfp4, std::string(c.arch) == "mixtral" ? 6 : 16);  // the experts; every matrix
  std::remove(f32.c_str());
  // gguf-synth --type mxfp4 (--pure for the dense model) writes llama-quantize's file
  spec.weight_type = GgmlType::MXFP4;
  spec.pure = std::string(c.arch) == "llama";
  ASSERT_TRUE(synth::WriteModel(spec, f32).ok());
  EXPECT_EQ(test::ExpectSameTensors(DataPath(c, ".gguf"), f32, GgmlType::MXFP4), n_mxfp4);
  std::remove(f32.c_str());
}

TEST_P(GoldenMXFP4, MatchesLlamaCpp) {
  const Case c = GetParam();
  const nlohmann::json golden = Golden(c);
  ASSERT_FALSE(golden.is_null());
  const std::string model = DataPath(c, ".gguf");
  ASSERT_EQ(test::FileFnv1a64(model), golden["model_fnv1a64"].get<std::string>()) << model;
  const int n_vocab = golden["n_vocab"].get<int>();
  const size_t n_prompt = golden["prompt_tokens"].size();
  for (bool numerics : {false, true}) {
    SCOPED_TRACE(numerics ? "llamacpp_numerics" : "default numerics");
    std::unique_ptr<Session> s;
    const std::vector<float> logits = PromptLogits(model, golden, numerics, &s);
    ASSERT_TRUE(s);
    test::ExpectMatchesReducedGolden(golden, logits, n_prompt, n_vocab, kTol, c.name);
    // The golden ran without flash attention, as these plans: with llamacpp_numerics every stored
    // logit is llama.cpp's to the 6 significant digits refdump prints (measured: 5e-6, half a last
    // digit, by default too).
    const float d = test::MaxDiffToReducedGolden(golden, logits);
    std::printf("[ %s ] %s: max |logit diff| = %.3g\n", c.name, numerics ? "llamacpp_numerics" : "default",
                d);
    if (numerics) EXPECT_LE(d, 2e-5f);
    test::ExpectGreedyMatchesGolden(golden, *s, logits.data() + (n_prompt - 1) * size_t(n_vocab), n_vocab);
  }
}

TEST_P(GoldenMXFP4, SwappedHalvesMissTheGolden) {
  const Case c = GetParam();
  const nlohmann::json golden = Golden(c);
  ASSERT_FALSE(golden.is_null());
  const std::string model =
      ::testing::TempDir() + "golden_mxfp4_swapped_" + c.name + "_" + std::to_string(getpid()) + ".gguf";
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(DataPath(c, ".gguf"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    auto f = GgufFile::Open(DataPath(c, ".gguf"));
    ASSERT_TRUE(f.ok());
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      if (t.type != GgmlType::MXFP4) continue;
      uint8_t* p = bytes.data() + (*f)->data_offset() + t.offset;
      for (int64_t b = 0; b < t.nelements() / 32; ++b)
        for (int j = 0; j < 16; ++j) {
          uint8_t& q = p[17 * b + 1 + j];
          q = uint8_t((q >> 4) | (q << 4));
        }
    }
  }
  {
    std::ofstream out(model, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  const float d = test::MaxDiffToReducedGolden(golden, PromptLogits(model, golden, false));
  std::printf("[ %s ] swapped halves: max |logit diff| = %.5f\n", c.name, d);
  EXPECT_GT(d, 2 * kTol) << "the model with swapped MXFP4 halves still matches the golden";
  std::remove(model.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenMXFP4, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.name;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace stowage
