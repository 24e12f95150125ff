// Bit-exact agreement with llama.cpp (test/data/golden-exact/README.md): with
// SessionOptions::llamacpp_numerics, a 240-token prompt decoded at once and 32 greedy tokens give
// the same tokens and every logit with the same bits as llama.cpp's CPU backend (the XXH64 of all
// of them equal to the stored one). Without the option the prompt's GEMM kernels sum in another
// order, and the quantized stories260K models drift apart after a rounding flip (checked too, so
// the option is shown to matter). The same for synthetic mixture-of-experts models (mixtral,
// qwen2moe; built here as gguf-synth writes them): their MUL_MAT_ID products in llama.cpp's order;
// for synthetic models of the newer architectures (qwen3, gemma2/gemma3 with sliding windows,
// soft-caps and a wrapped SWA ring, mistral3, smollm3, llama with YaRN / rope_freqs) and of the
// mixture-of-experts ones (qwen3moe, glm4moe, deepseek2, gpt-oss; gpt-oss's MXFP4 file; tied routing
// scores, ordered by ARGSORT as llama.cpp orders them); and single ops
// whose llama.cpp bits come from its builds' FMA contractions (GELU, YaRN ROPE, SCALE with bias).
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "ops.h"
#include "plan_probed.h"
#include "reduced_golden.h"
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
// the golden's context (n_ctx = n_batch = n_ubatch unless n_ubatch is given, flash attention as the
// golden's "flash_attn"; swa_full: an interleaved-SWA model's SWA cache of n_ctx cells),
// planned for this machine's CPU device as plan-model does (CPU_REPACK for Q4_0 / Q4_K with
// ne1 % 8 == 0, like llama.cpp's repack).
Outcome Generate(const std::string& model, const std::vector<int32_t>& prompt, int n_gen, bool numerics,
                 CpuIsa isa, uint32_t n_ctx = 512, bool flash_attn = false, int n_threads = 1,
                 uint32_t n_ubatch = 0, bool swa_full = false) {
  Outcome out;
  planner::ContextConfig cfg;
  cfg.n_ctx = cfg.n_batch = cfg.n_ubatch = n_ctx;
  if (n_ubatch != 0) cfg.n_ubatch = n_ubatch;
  cfg.swa_full = swa_full;
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

// The golden `g`'s procedure (its prompt, as many greedy tokens, its n_ctx and flash attention) on
// `model` with llamacpp_numerics at kernel level `isa`, expecting its greedy tokens and the XXH64 of
// its logits; returns what it got.
Outcome ExpectGoldenBits(const nlohmann::json& g, const std::string& model, CpuIsa isa, int n_threads = 1,
                         uint32_t n_ubatch = 0) {
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();
  const Outcome r = Generate(model, g["prompt_tokens"].get<std::vector<int32_t>>(), int(greedy.size()),
                             /*numerics=*/true, isa, g.value("n_ctx", 512u), g.value("flash_attn", false),
                             n_threads, n_ubatch);
  EXPECT_EQ(r.greedy, greedy);
  EXPECT_EQ(r.hash, g["logits_xxh64"].get<std::string>())
      << "some logit differs from llama.cpp's in some bit";
  return r;
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
  ExpectGoldenBits(g, model, v.isa);
  std::remove(model.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenExactMoe,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kMoeModels)),
                         [](const ::testing::TestParamInfo<GoldenExactMoe::ParamType>& i) {
                           return CaseName(std::get<0>(i.param).name, std::get<1>(i.param));
                         });

// arch-<name>.json: synthetic models of the newer architectures (test/data/golden-arch's models,
// whose gguf-synth arguments make_goldens.sh reads from there, on the 240-character prompt), each
// F32 and Q8_0. The spec below must write the file the golden was made from (its FNV-1a 64 is
// checked). gemma2 / gemma3 run a window of 8 under the prompt with soft-caps that bite; their SWA
// cache holds all 512 cells (llama.cpp's min(n_ctx, pad(n_swa + n_ubatch, 256))), so no cell is
// reused. arch-<name>-ring-f32.json: a window of 40 and n_ubatch 64 (the golden's "n_ubatch", with
// swa_full off), so the SWA cache has 256 cells that the 443-token prompt wraps: the cells are reused
// in llama.cpp's find_slot order.
struct ArchCase {
  const char* name;  // golden file without "arch-" and "-<type>.json"
  void (*spec)(synth::ModelSpec&);
  int n_threads = 1;  // this runtime's; llama.cpp's goldens are made with 1
  // When not 0, the prompt is also decoded in ubatches of this size (the SWA cache then as
  // llama-cli's, swa_full off), expecting the same bits: llama.cpp computes the golden's bits there
  // too (refexact's N_UBATCH, checked by hand for these models in both variants).
  uint32_t split_ubatch = 0;
};
void PrintTo(const ArchCase& c, std::ostream* os) { *os << c.name; }
void YarnFactor4(synth::ModelSpec& s) {  // --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16
  s.rope_scaling = "yarn";
  s.rope_scale = 4.0f;
  s.rope_scaling_orig_ctx = 16;
}
void Gemma2Caps(synth::ModelSpec& s) {  // --sliding-window 8 --attn-softcap 0.5 --final-softcap 2
  s.arch = "gemma2", s.n_swa = 8, s.attn_softcap = 0.5f, s.final_softcap = 2.0f;
}
// --n-layer 6 --sliding-window 8 --rope-freq-base 1000000 --rope-scaling linear --rope-scale 8
// --final-softcap 2 (tied: the tool's default for gemma3)
void Gemma3Rope(synth::ModelSpec& s) {
  s.arch = "gemma3", s.n_layer = 6, s.n_swa = 8, s.rope_freq_base = 1e6f, s.final_softcap = 2.0f;
  s.rope_scaling = "linear", s.rope_scale = 8.0f, s.tied_output = true;
}
const ArchCase kArchCases[] = {
    {"qwen3", [](synth::ModelSpec& s) { s.arch = "qwen3", s.head_dim = 32; }},
    {"gemma2", Gemma2Caps},
    {"gemma3", Gemma3Rope},
    {"mistral3",
     [](synth::ModelSpec& s) {
       YarnFactor4(s);
       s.arch = "mistral3", s.yarn_beta_slow = 0.25f, s.yarn_log_mul = 0.1f, s.attn_temp_scale = 0.5f;
     }},
    {"smollm3", [](synth::ModelSpec& s) { s.arch = "smollm3", s.n_layer = 8; }},
    {"llama-yarn", YarnFactor4},
    {"llama-ropefreqs", [](synth::ModelSpec& s) { s.rope_freqs = true, s.rope_original_ctx = 64; }},
};
// The mixture-of-experts architectures of test/data/golden-arch (its make_goldens.sh arguments):
// qwen3moe (softmax top-k, normalized weights), glm4moe (sigmoid routing with the selection bias,
// shared expert, partial rope, a NextN block skipped), deepseek2 (MLA, sigmoid routing with the
// expert-score bias, weights normalized and scaled, YaRN; its older MHA form; DeepSeek-V3's
// group-limited top-k) and gpt-oss (biased router, softmax over the
// chosen experts, ADD_ID, the clamped SwiGLU, attention sinks, a window of 8, YaRN). They run with 2
// threads, which split each expert's MUL_MAT_ID rows and the attention heads (llama.cpp's bits do not
// depend on the thread count, nor may this runtime's), and once more in ubatches of 64, whose
// MUL_MAT_IDs see other token groups per expert and whose attention a growing n_kv.
// --sliding-window 8 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16
void GptOssSpec(synth::ModelSpec& s) {
  YarnFactor4(s);
  s.arch = "gpt-oss", s.n_swa = 8;
}
// --n-layer 3 --head-dim 32 --n-expert 8 --n-expert-used 2 --qk-norm --seed 2
void Glm4MoeSpec(synth::ModelSpec& s) {
  s.arch = "glm4moe", s.n_layer = 3, s.head_dim = 32, s.n_expert = 8, s.n_expert_used = 2;
  s.qk_norm = true, s.seed = 2;
}
// --n-layer 3 --n-expert 8 --n-expert-used 2 --head-dim 24 --rope-scaling yarn --rope-scale 4
// --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 3
void DeepSeek2Spec(synth::ModelSpec& s) {
  YarnFactor4(s);
  s.arch = "deepseek2", s.n_layer = 3, s.n_expert = 8, s.n_expert_used = 2, s.head_dim = 24;
  s.yarn_log_mul = 0.1f, s.seed = 3;
}
const ArchCase kMoeArchCases[] = {
    {"qwen3moe",
     [](synth::ModelSpec& s) {
       s.arch = "qwen3moe", s.head_dim = 32, s.n_expert = 8, s.n_expert_used = 2, s.seed = 5;
     },
     2, 64},
    {"glm4moe", Glm4MoeSpec, 2, 64},
    {"deepseek2", DeepSeek2Spec, 2, 64},
    {"deepseek2-legacy",  // --mla-legacy --v-head-dim 16: one attn_kv_b, run as MHA (ROPE n_offs, REPEAT)
     [](synth::ModelSpec& s) { DeepSeek2Spec(s), s.mla_legacy = true, s.mla_v_head_dim = 16; }, 2, 64},
    {"deepseek2-groups",  // --n-expert 16 --n-expert-used 3 --n-expert-groups 4 --n-group-used 2 --seed 9
     [](synth::ModelSpec& s) {
       DeepSeek2Spec(s), s.n_expert = 16, s.n_expert_used = 3, s.n_expert_groups = 4, s.n_group_used = 2;
       s.seed = 9;
     },
     2, 64},
    {"gpt-oss", GptOssSpec, 2, 64},
};
const ArchCase kRingCases[] = {
    {"gemma2-ring", [](synth::ModelSpec& s) { Gemma2Caps(s), s.n_swa = 40; }},
    {"gemma3-ring", [](synth::ModelSpec& s) { Gemma3Rope(s), s.n_swa = 40; }},
};

// The weight type of an arch case and its golden file's suffix.
struct WeightType {
  GgmlType type;
  const char* suffix;
};
void PrintTo(const WeightType& w, std::ostream* os) { *os << w.suffix; }
constexpr WeightType kF32{GgmlType::F32, "f32"}, kQ8_0{GgmlType::Q8_0, "q8_0"};

class GoldenExactArch : public ::testing::TestWithParam<std::tuple<Variant, ArchCase, WeightType>> {};

TEST_P(GoldenExactArch, LlamaCppNumericsGivesLlamaCppsBits) {
  const Variant v = std::get<0>(GetParam());
  const ArchCase c = std::get<1>(GetParam());
  const WeightType w = std::get<2>(GetParam());
  if (const std::string why = CannotRun(v); !why.empty()) GTEST_SKIP() << why;
  const std::string name = std::string(c.name) + "-" + w.suffix;
  const nlohmann::json g = ReadGolden(v, "arch-" + name + ".json");
  ASSERT_FALSE(g.is_null());
  synth::ModelSpec spec;
  spec.weight_type = w.type;
  c.spec(spec);
  const std::string model = ::testing::TempDir() + "golden_exact_arch_" + v.name + "_" + name + "_" +
                            std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  const std::string fnv = test::FileFnv1a64(model);
  if (fnv != g["model_fnv1a64"].get<std::string>()) {
    std::remove(model.c_str());
    FAIL() << "the synthetic model differs from the one the golden was made from (gguf-synth "
           << g["synth_args"].get<std::string>() << "): regenerate (make_goldens.sh)";
  }
  const auto prompt = g["prompt_tokens"].get<std::vector<int32_t>>();
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();
  const uint32_t n_ubatch = g.value("n_ubatch", 0u);
  const Outcome r = ExpectGoldenBits(g, model, v.isa, c.n_threads, n_ubatch);
  if (c.split_ubatch != 0) {
    SCOPED_TRACE("in ubatches of " + std::to_string(c.split_ubatch));
    ExpectGoldenBits(g, model, v.isa, c.n_threads, c.split_ubatch);
  }
  if (n_ubatch != 0) {
    // The same ubatches with a SWA cache of n_ctx cells (nothing wraps): other bits, so the ring's
    // cell order is what the golden checks.
    const Outcome full = Generate(model, prompt, int(greedy.size()), /*numerics=*/true, v.isa, 512, false, 1,
                                  n_ubatch, /*swa_full=*/true);
    EXPECT_NE(full.hash, r.hash) << "a full-size SWA cache gave the ring's bits too";
  }
  std::remove(model.c_str());
}

std::string ArchCaseName(const ::testing::TestParamInfo<GoldenExactArch::ParamType>& i) {
  return CaseName(std::get<0>(i.param).name,
                  std::string(std::get<1>(i.param).name) + "_" + std::get<2>(i.param).suffix);
}
INSTANTIATE_TEST_SUITE_P(Models, GoldenExactArch,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kArchCases), ::testing::Values(kF32, kQ8_0)),
                         ArchCaseName);
INSTANTIATE_TEST_SUITE_P(Moe, GoldenExactArch,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kMoeArchCases),
                                            ::testing::Values(kF32, kQ8_0)),
                         ArchCaseName);
// arch-gpt-oss-mxfp4.json: gpt-oss as it is shipped, the F32 model above quantized by llama.cpp's
// quantize MXFP4_MOE (the experts MXFP4, the other matrices Q8_0; stored as
// test/data/golden-arch/gpt-oss-mxfp4.gguf since gguf-synth writes MXFP4 only header-only). The plan
// for this CPU repacks the experts (CPU_REPACK MXFP4x8, as llama.cpp's mxfp4_8x8_q8_0), so their
// MUL_MAT_ID runs the repacked gemv / GEMM in llama.cpp's order.
class GoldenExactMxfp4 : public ::testing::TestWithParam<Variant> {};

TEST_P(GoldenExactMxfp4, LlamaCppNumericsGivesLlamaCppsBits) {
  const Variant v = GetParam();
  if (const std::string why = CannotRun(v); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json g = ReadGolden(v, "arch-gpt-oss-mxfp4.json");
  ASSERT_FALSE(g.is_null());
  const std::string model = std::string(STOWAGE_TEST_DATA_DIR) + "/golden-arch/gpt-oss-mxfp4.gguf";
  ASSERT_EQ(test::FileFnv1a64(model), g["model_fnv1a64"].get<std::string>())
      << model << " differs from the file the golden was made from: regenerate (make_goldens.sh)";
  ExpectGoldenBits(g, model, v.isa);
}

INSTANTIATE_TEST_SUITE_P(GptOss, GoldenExactMxfp4, ::testing::Values(kZen4, kSkylakeX, kHaswell),
                         [](const ::testing::TestParamInfo<Variant>& i) {
                           return std::string(i.param.name);
                         });

// arch-glm4moe-ties-f32.json: tied routing scores, which the top-k's ARGSORT orders. glm4moe-f32 with
// 32 experts (2 used), its routers times 1000 and its selection bias times 0 (make_goldens.sh), so
// that sigmoid(logit) is exactly 1 for about half of each token's experts: the 2 chosen are the
// first two of ggml-cpu's argsort (std::sort, whose introsort reorders ties above 16 elements)
// among them, and each counts fully (weight 0.5 after the norm). With llamacpp_numerics the
// runtime's ARGSORT sorts the same way; its default stable sort picks other experts.
class GoldenExactTies : public ::testing::TestWithParam<Variant> {};

TEST_P(GoldenExactTies, ArgsortOrdersTiesAsLlamaCpp) {
  const Variant v = GetParam();
  if (const std::string why = CannotRun(v); !why.empty()) GTEST_SKIP() << why;
  const nlohmann::json g = ReadGolden(v, "arch-glm4moe-ties-f32.json");
  ASSERT_FALSE(g.is_null());
  synth::ModelSpec spec;
  spec.weight_type = GgmlType::F32;
  Glm4MoeSpec(spec);
  spec.n_expert = 32;
  const std::string model =
      ::testing::TempDir() + "golden_exact_ties_" + v.name + "_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(synth::WriteModel(spec, model).ok());
  // blocks 1-2 and the NextN block 3
  EXPECT_EQ(test::ScaleF32Tensors(model, {"ffn_gate_inp"}, 1000.f), 3);
  EXPECT_EQ(test::ScaleF32Tensors(model, {"exp_probs_b"}, 0.f), 3);
  const std::string fnv = test::FileFnv1a64(model);
  if (fnv != g["model_fnv1a64"].get<std::string>()) {
    std::remove(model.c_str());
    FAIL() << "the edited synthetic model differs from the one the golden was made from: regenerate "
              "(make_goldens.sh)";
  }
  ExpectGoldenBits(g, model, v.isa);
  const auto greedy = g["greedy"].get<std::vector<int32_t>>();
  const Outcome d = Generate(model, g["prompt_tokens"].get<std::vector<int32_t>>(), int(greedy.size()),
                             /*numerics=*/false, v.isa);
  std::remove(model.c_str());
  EXPECT_NE(d.greedy, greedy) << "the default (stable) order of ties chose llama.cpp's experts too";
}

INSTANTIATE_TEST_SUITE_P(Glm4Moe, GoldenExactTies, ::testing::Values(kZen4, kSkylakeX, kHaswell),
                         [](const ::testing::TestParamInfo<Variant>& i) {
                           return std::string(i.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(SwaRing, GoldenExactArch,
                         ::testing::Combine(::testing::Values(kZen4, kSkylakeX, kHaswell),
                                            ::testing::ValuesIn(kRingCases), ::testing::Values(kF32)),
                         ArchCaseName);

// Single ops whose llama.cpp bits come from GCC's FMA contractions in its x86 builds, which the
// CPU kernels follow only with llamacpp_numerics: the values below are what libggml-cpu-zen4.so and
// -haswell.so of node-llama-cpp 3.21.1 compute (ggml_gelu, ggml_geglu_split, ggml_rope_ext with
// YaRN, ggml_scale_bias; scripts/diff-vs-llamacpp.sh compares them on random and exhaustive inputs).
// The default mode differs in each, so the option is what makes them agree; at every kernel level.
uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
cpu::TensorView F32View(std::vector<float>& v, int64_t ne0, int64_t ne1 = 1) {
  cpu::TensorView t;
  t.data = v.data();
  t.type = GgmlType::F32;
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = t.ne[3] = 1;
  t.nb[0] = 4, t.nb[1] = 4 * ne0, t.nb[2] = t.nb[3] = 4 * ne0 * ne1;
  return t;
}

TEST(GoldenExactOps, FmaContractionsOfLlamaCppsBuilds) {
  for (int level = 0; level <= int(cpu::DetectIsa()); ++level)  // every kernel level this CPU has
    for (bool numerics : {true, false}) {
      SCOPED_TRACE(std::string(numerics ? "llamacpp_numerics" : "default") + ", level " +
                   std::to_string(level));
      cpu::ComputeContext ctx;
      ctx.llamacpp_numerics = numerics;
      ctx.max_isa = cpu::IsaLevel(level);
      // GELU's fp16 table: 1 + 0.044715 x^2 as fma(0.044715 x, x, 1) changes one entry, x = -1.99902.
      std::vector<float> x = {-0x1.ffcp+0f}, y(1);
      cpu::TensorView xv = F32View(x, 1), yv = F32View(y, 1);
      ASSERT_TRUE(cpu::Gelu(ctx, xv, yv).ok());
      EXPECT_EQ(y[0] == -0x1.74cp-5f, numerics) << "GELU(-1.99902) = " << y[0];
      // GEGLU: a gate <= -10 gives +0 (ggml_vec_geglu_f32), not 0 * g = -0.
      std::vector<float> gate = {-12.f}, up = {-1.f};
      cpu::TensorView gv = F32View(gate, 1), uv = F32View(up, 1);
      ASSERT_TRUE(cpu::GeGlu(ctx, gv, uv, yv).ok());
      EXPECT_EQ(Bits(y[0]) == 0u, numerics) << "GEGLU(-12, -1) = " << y[0];
      // SCALE with a bias: fma(x, s, b) (ggml_vec_mad1_f32); x = 1/10, s = 0.3, b = -1.
      x = {1.0f / 10};
      ASSERT_TRUE(cpu::Scale(ctx, xv, yv, 0.3f, -1.f).ok());
      EXPECT_EQ(Bits(y[0]) == 0xbf7851ebu, numerics) << "SCALE = " << y[0];
      // ROPE with YaRN (freq_scale 1/4, ext_factor 1, attn_factor 0.9, beta_slow 0.25: the ramp takes
      // values between 0 and 1): the angle fma(theta_interp, 1 - mix, theta_extrap * mix) and the
      // magnitude fma(0.1, log(1 / freq_scale), 1), one row of 16 at position 6 (two of its angles round
      // apart without the contraction).
      const uint32_t want[2][16] = {
          {0xbdd2932a, 0x3f104568, 0x3f9039a2, 0x3f1bfc41, 0x3f44fd1e, 0x3fec6bf2, 0xbff1ba8d, 0x3ffb292b,
           0x40160255, 0xc021bb14, 0x40336c6f, 0x40459bc3, 0xc0557ed9, 0x40653a4a, 0x40761180, 0xc0831c9c},
          {0x3ecbe9bb, 0x40270100, 0xbdc9d9da, 0xbf95ae70, 0x3faa56a7, 0x3fc29345, 0xbfe64906, 0x40034b66,
           0x4012452d, 0x3e04b518, 0x403ad6f8, 0x40416c8e, 0xc053e5d4, 0x40660301, 0x4075c581, 0xc0832394}};
      int same = 0;  // of the 32 values
      for (int mode : {0, 2}) {
        std::vector<float> q(16), r(16);
        for (int i = 0; i < 16; ++i) q[size_t(i)] = 0.25f * float(i + 1) * (i % 3 ? 1.f : -1.f);
        int32_t pos = 6;
        cpu::TensorView pv;
        pv.data = &pos;
        pv.type = GgmlType::I32;
        pv.ne[0] = pv.ne[1] = pv.ne[2] = pv.ne[3] = 1;
        pv.nb[0] = pv.nb[1] = pv.nb[2] = pv.nb[3] = 4;
        cpu::TensorView qv = F32View(q, 16), rv = F32View(r, 16);
        cpu::RopeParams p;
        p.n_dims = 16, p.mode = mode, p.n_ctx_orig = 16, p.freq_scale = 0.25f, p.ext_factor = 1.f;
        p.attn_factor = 0.9f, p.beta_slow = 0.25f;
        ASSERT_TRUE(cpu::Rope(ctx, qv, pv, cpu::TensorView(), rv, p).ok());
        for (int i = 0; i < 16; ++i) same += Bits(r[size_t(i)]) == want[mode / 2][i];
      }
      if (numerics)
        EXPECT_EQ(same, 32) << "ROPE with YaRN";
      else
        EXPECT_LT(same, 32) << "ROPE with YaRN: the default mode gave llama.cpp's bits too";
    }
}

// ARGSORT's order of ties (the top-k of the MoE router): what libggml-cpu-zen4.so / -haswell.so of
// node-llama-cpp 3.21.1 give for rows of 32 (ggml_argsort, descending): all equal, and values 1 at
// i % 3 == 0 else 0.5. Its std::sort reorders ties above 16 elements, so its top-2 of 32 equal scores
// are experts 16 and 31; the default mode sorts stably (0 and 1).
TEST(GoldenExactOps, ArgsortOrdersTiesAsGgmlCpu) {
  const int32_t want[2][32] = {{16, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                0,  15, 14, 13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1},
                               {30, 3,  18, 21, 6,  27, 0,  9,  15, 24, 12, 25, 20, 22, 23, 16,
                                26, 28, 29, 31, 19, 17, 14, 13, 11, 10, 8,  7,  5,  4,  2,  1}};
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = 1.f, x[size_t(32 + i)] = i % 3 == 0 ? 1.f : 0.5f;
  for (bool numerics : {true, false}) {
    SCOPED_TRACE(numerics ? "llamacpp_numerics" : "default");
    cpu::ComputeContext ctx;
    ctx.llamacpp_numerics = numerics;
    std::vector<int32_t> ids(64);
    cpu::TensorView xv = F32View(x, 32, 2), iv = F32View(x, 32, 2);
    iv.data = ids.data();
    iv.type = GgmlType::I32;
    ASSERT_TRUE(cpu::ArgSort(ctx, xv, iv, /*order=*/1).ok());
    for (int r = 0; r < 2; ++r) {
      const std::vector<int32_t> got(ids.begin() + 32 * r, ids.begin() + 32 * (r + 1));
      const std::vector<int32_t> ggml(want[r], want[r] + 32);
      if (numerics) {
        EXPECT_EQ(got, ggml) << "row " << r;
      } else {
        EXPECT_NE(got, ggml) << "row " << r << ": the stable order gave ggml-cpu's too";
        EXPECT_TRUE(std::is_sorted(got.begin(), got.begin() + (r == 0 ? 32 : 11))) << "row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace stowage
