// Bit-exact agreement with llama.cpp (test/data/golden-exact/README.md): with
// SessionOptions::llamacpp_numerics, a 240-token prompt decoded at once and 32 greedy tokens give
// the same tokens and every logit with the same bits as llama.cpp's CPU backend (the XXH64 of all
// of them equal to the stored one). Without the option the prompt's GEMM kernels sum in another
// order, and the quantized stories260K models drift apart after a rounding flip (checked too, so
// the option is shown to matter). The same for synthetic mixture-of-experts models (mixtral,
// qwen2moe; built here as gguf-synth writes them): their MUL_MAT_ID products in llama.cpp's order.
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "ops.h"
#include "plan_probed.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

struct Outcome {
  std::vector<int32_t> greedy;
  std::string hash;
};

// The golden's procedure on this runtime: one Decode of the prompt with all logits, then greedy, in
// the golden's context (n_ctx = n_batch = n_ubatch, flash attention as the golden's "flash_attn"),
// planned for this machine's CPU device as plan-model does (CPU_REPACK for Q4_0 / Q4_K with
// ne1 % 8 == 0, like llama.cpp's repack).
Outcome Generate(const std::string& model, const std::vector<int32_t>& prompt, int n_gen, bool numerics,
                 CpuIsa isa, uint32_t n_ctx = 512, bool flash_attn = false, int n_threads = 1) {
  Outcome out;
  planner::ContextConfig cfg;
  cfg.n_ctx = cfg.n_batch = cfg.n_ubatch = n_ctx;
  cfg.flash_attn = flash_attn;
  auto plan = test::PlanForThisCpu(model, cfg, planner::PlacementOptions{}, "test golden-exact");
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return out;
  SessionOptions opts;
  opts.n_threads = n_threads;
  opts.llamacpp_numerics = numerics;
  opts.cpu_max_isa = isa;
  auto s = Session::CreateFromPlanBytes(*plan, model, opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return out;
  const int64_t nv = (*s)->n_vocab();
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  std::vector<float> logits;
  Status st = (*s)->Decode(prompt, /*all_logits=*/true, &logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  XXH64_update(h, logits.data(), logits.size() * sizeof(float));
  std::vector<float> cur(logits.end() - nv, logits.end());
  for (int g = 0; g < n_gen && st.ok(); ++g) {
    const int32_t t = int32_t(std::max_element(cur.begin(), cur.end()) - cur.begin());
    out.greedy.push_back(t);
    st = (*s)->Decode({t}, /*all_logits=*/false, &cur);
    EXPECT_TRUE(st.ok()) << st.ToString();
    XXH64_update(h, cur.data(), cur.size() * sizeof(float));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64_digest(h)));
  XXH64_freeState(h);
  out.hash = hex;
  return out;
}

// The llama.cpp CPU variants the goldens stand for, and the kernel level that reproduces each:
// - `zen4` (AVX-512 VNNI + BF16; the folder's top level): the AVX-512 VNNI kernels
//   (CpuIsa::kAvx512Vnni), on CPUs with VNNI (Cascade Lake and later Intel, Zen 4/5);
// - `skylakex` (AVX-512 without VNNI): llama.cpp's skylakex library computes the zen4 bits on every
//   model here (checked with make_goldens.sh's refexact offered only that library), so the same
//   goldens, reproduced by the AVX-512 kernels without VNNI (CpuIsa::kAvx512) on any AVX-512 CPU: a
//   VNNI machine stands in for a Skylake-X;
// - `haswell` (AVX2 + FMA + F16C; haswell/): the AVX2 kernels (CpuIsa::kAvx2), on any AVX2 CPU.
// Which of them run here is derived from this CPU's level (cpu::DetectIsa), never assumed.
struct Variant {
  const char* name;
  const char* subdir;
  CpuIsa isa;
};
constexpr Variant kZen4{"zen4", "", CpuIsa::kAvx512Vnni};
constexpr Variant kSkylakeX{"skylakex", "", CpuIsa::kAvx512};
constexpr Variant kHaswell{"haswell", "haswell/", CpuIsa::kAvx2};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

/// Empty when this CPU can run the variant's kernels, else why the case is skipped.
std::string CannotRun(const Variant& v) {
  const cpu::IsaLevel have = cpu::DetectIsa();
  if (int(have) >= int(v.isa)) return "";
  const char* has = have >= cpu::IsaLevel::kAvx512 ? "AVX-512 without VNNI"
                    : have >= cpu::IsaLevel::kAvx2 ? "AVX2 but no AVX-512"
                                                   : "no AVX2";
  return std::string("the ") + v.name + " kernels need " +
         (v.isa == CpuIsa::kAvx512Vnni ? "AVX-512 VNNI"
          : v.isa == CpuIsa::kAvx512   ? "AVX-512"
                                       : "AVX2 + FMA + F16C") +
         "; this CPU has " + has;
}

nlohmann::json ReadGolden(const Variant& v, const std::string& file) {
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-exact/" + v.subdir + file);
  EXPECT_TRUE(in.good()) << "golden-exact/" << v.subdir << file << " missing";
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json();
}

std::string CaseName(const std::string& variant, const std::string& model) {
  std::string n = variant + "_" + model;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

// A golden of the folder: its prompt set ("" = prompt.txt, 240 tokens at n_ctx 512, 32 greedy
// tokens; "long/" = prompt-long.txt, golden-long's prompt of 96 tokens (70 with the 32000-word
// vocabulary) at n_ctx 256, 24 greedy tokens: golden_long_test's setting, whose GEMM chunks and n_kv
// differ) and model. The long set runs this runtime with 2 threads: llama.cpp's bits do not depend
// on its thread count (refexact with 1 and 2 threads gives the same logits on these models), and
// neither may Stowage's, whose threads split the rows of each product and the heads of attention.
struct Case {
  const char* set;
  const char* model;
  int n_threads() const { return std::string(set) == "long/" ? 2 : 1; }
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.set << c.model; }

constexpr Case kCases[] = {{"", "stories260K"},
                           {"", "stories260K-F16"},
                           {"", "stories260K-Q8_0"},
                           {"", "stories260K-Q4_0"},
                           {"", "stories260K-Q4_K_M"},
                           {"", "llama-2-tiny-random"},
                           {"", "tiny-tied-f32"},
                           {"", "tiny8-untied-q4_0"},
                           {"", "synth-Q4_K_M"},
                           {"", "synth-Q6_K"},
                           {"", "synth-IQ4_XS"},
                           {"long/", "stories260K"},
                           {"long/", "stories260K-F16"},
                           {"long/", "stories260K-Q8_0"},
                           {"long/", "stories260K-Q4_0"},
                           {"long/", "stories260K-Q4_K_M"},
                           {"long/", "llama-2-tiny-random"},
                           {"long/", "tiny-tied-f32"},
                           {"long/", "tiny-tied-q4_0"},
                           {"long/", "tiny-untied-q4_0"},
                           {"long/", "tiny8-untied-q4_0"},
                           {"long/", "synth-Q4_K_M"},
                           {"long/", "synth-Q6_K"},
                           {"long/", "synth-IQ4_XS"}};

class GoldenExact : public ::testing::TestWithParam<std::tuple<Variant, Case>> {};

TEST_P(GoldenExact, LlamaCppNumericsGivesLlamaCppsBits) {
  const Variant v = std::get<0>(GetParam());
  const Case c = std::get<1>(GetParam());
  const std::string name = c.model;
  const std::string model = test::ModelPath(name + ".gguf");
  if (!test::FileExists(model)) GTEST_SKIP() << "skipped: " << model << " not found (shared models absent)";
  if (const std::string why = CannotRun(v); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json g = ReadGolden(v, std::string(c.set) + name + ".json");
  ASSERT_FALSE(g.is_null());
  const auto prompt = g["prompt_tokens"].get<std::vector<int32_t>>();
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();
  const uint32_t n_ctx = g["n_ctx"].get<uint32_t>();
  const bool flash_attn = g.value("flash_attn", false);
  const Outcome r =
      Generate(model, prompt, int(greedy.size()), /*numerics=*/true, v.isa, n_ctx, flash_attn, c.n_threads());
  EXPECT_EQ(r.greedy, greedy);
  EXPECT_EQ(r.hash, g["logits_xxh64"].get<std::string>())
      << "some logit differs from llama.cpp's in some bit";
  if (std::string(c.set).empty() && (name == "stories260K-Q8_0" || name == "stories260K-Q4_0")) {
    // The default kernels: another summation order in the prompt's GEMM, another result.
    const Outcome d =
        Generate(model, prompt, int(greedy.size()), /*numerics=*/false, v.isa, n_ctx, flash_attn);
    EXPECT_NE(d.hash, r.hash) << "the default mode gave llama.cpp's bits too: is the option still needed?";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenExact,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kCases)),
                         [](const ::testing::TestParamInfo<GoldenExact::ParamType>& i) {
                           const Case& c = std::get<1>(i.param);
                           return CaseName(std::get<0>(i.param).name, std::string(c.set) + c.model);
                         });

// moe-<name>.json: `gguf-synth --arch A --type T` (A, T in the file) with gguf-synth's defaults
// (2 layers, n_embd 64, 8 experts of which 2 used for mixtral, 4 + a shared expert for qwen2moe), so
// every expert multiplies many prompt columns at once. On this runtime Q8_0/Q4_0 experts are
// repacked (CPU_REPACK) and Q8_0 ones are not in llama.cpp: the bits must agree all the same.
constexpr const char* kMoeModels[] = {"mixtral-f32",  "mixtral-f16",  "mixtral-q8_0",
                                      "mixtral-q4_0", "qwen2moe-f16", "qwen2moe-q8_0"};

class GoldenExactMoe : public ::testing::TestWithParam<std::tuple<Variant, const char*>> {};

TEST_P(GoldenExactMoe, LlamaCppNumericsGivesLlamaCppsBits) {
  const Variant v = std::get<0>(GetParam());
  const std::string name = std::get<1>(GetParam());
  if (const std::string why = CannotRun(v); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json g = ReadGolden(v, "moe-" + name + ".json");
  ASSERT_FALSE(g.is_null());
  synth::ModelSpec spec;
  spec.arch = g["synth_arch"].get<std::string>();
  auto type = ParseGgmlType(g["synth_type"].get<std::string>());
  ASSERT_TRUE(type.ok()) << type.status().ToString();
  spec.weight_type = *type;
  const std::string model = ::testing::TempDir() + "golden_exact_moe_" + v.name + "_" + name + "_" +
                            std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  const std::string fnv = test::FileFnv1a64(model);
  if (fnv != g["model_fnv1a64"].get<std::string>()) {
    std::remove(model.c_str());
    FAIL()
        << "the synthetic model differs from the one the golden was made from: regenerate (make_goldens.sh)";
  }
  const auto prompt = g["prompt_tokens"].get<std::vector<int32_t>>();
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();
  const Outcome r = Generate(model, prompt, int(greedy.size()), /*numerics=*/true, v.isa);
  std::remove(model.c_str());
  EXPECT_EQ(r.greedy, greedy);
  EXPECT_EQ(r.hash, g["logits_xxh64"].get<std::string>())
      << "some logit differs from llama.cpp's in some bit";
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenExactMoe,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kMoeModels)),
                         [](const ::testing::TestParamInfo<GoldenExactMoe::ParamType>& i) {
                           return CaseName(std::get<0>(i.param).name, std::get<1>(i.param));
                         });

}  // namespace
}  // namespace stowage
