// The planner's C API (stowage/planner/c_api.h) as a library user meets it: the plan made on the fly
// is planner::Plan's for this machine with the fields as given (byte for byte but the probed free
// memory), a session made
// from it decodes as one made from the same plan written to a file, and every bad argument is one
// clear error. On stories260K.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "objapi_edit.h"
#include "scratch_dir.h"
#include "stowage/planner/c_api.h"
#include "stowage/planner/from_probe.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/read_file.h"
#include "test_paths.h"

namespace stowage {
namespace {

// `plan` with its devices' free memory (and the digests of their probed manifests, which cover it)
// cleared: what the probe reads of it changes between two probes, the rest of a plan made for this
// machine does not.
std::vector<uint8_t> WithoutFreeMemory(const std::vector<uint8_t>& plan) {
  if (plan.empty()) return plan;
  return test::EditPlan(plan, [](::objapi::plan::PlanT& p) {
    for (auto& d : p.devices) {
      d->memory_free = 0;
      d->manifest_digest.clear();  // the probed manifest's digest covers its free memory
    }
  });
}

class PlannerCApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model_))
      GTEST_SKIP() << "skipped: " << model_ << " not found (shared models absent)";
    params_ = stowage_plan_default_params();
    params_.n_ctx = 64;
    params_.n_seq_max = 2;
    params_.kv_unified = 1;
    params_.n_gpu_layers = 0;
  }
  std::vector<uint8_t> Buffer(const stowage_plan_params& p, stowage_status want = STOWAGE_OK) {
    void* plan = nullptr;
    size_t size = 0;
    char err[512] = "";
    EXPECT_EQ(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err), want) << err;
    last_error_ = err;
    std::vector<uint8_t> bytes(static_cast<const uint8_t*>(plan), static_cast<const uint8_t*>(plan) + size);
    stowage_plan_buffer_free(plan);
    return bytes;
  }
  // The last token's logits after decoding "Once upon a time" in session `s`.
  static std::vector<float> Logits(stowage_session* s) {
    std::vector<int32_t> ids(32);
    const int32_t n = stowage_tokenize(s, "Once upon a time", -1, ids.data(), 32, 1, 0);
    EXPECT_GT(n, 0);
    EXPECT_EQ(stowage_decode(s, ids.data(), static_cast<size_t>(n), 0), STOWAGE_OK) << stowage_last_error(s);
    size_t rows = 0;
    const float* l = stowage_get_logits(s, &rows);
    EXPECT_EQ(rows, 1u);
    return l != nullptr ? std::vector<float>(l, l + stowage_n_vocab(s)) : std::vector<float>{};
  }
  test::ScratchDir dir_{"stowage-planner-c-api"};
  std::string model_, last_error_;
  stowage_plan_params params_{};
};

TEST_F(PlannerCApiTest, DefaultsAreThePlannersDefaults) {
  const stowage_plan_params d = stowage_plan_default_params();
  const planner::LlamacppDefaults want = planner::LlamacppDefaultsOf(planner::kDefaultLlamacppCompat);
  EXPECT_EQ(d.n_ctx, want.n_ctx);
  EXPECT_EQ(d.n_gpu_layers, want.fit ? -1 : 0);
  EXPECT_EQ(d.flash_attn, want.flash_attn == planner::FlashAttnMode::kAuto ? STOWAGE_FLASH_ATTN_AUTO
                          : want.flash_attn == planner::FlashAttnMode::kOn ? STOWAGE_FLASH_ATTN_ON
                                                                           : STOWAGE_FLASH_ATTN_OFF);
  EXPECT_EQ(d.llamacpp_compat, planner::kDefaultLlamacppCompat == planner::LlamacppCompat::kFeb25
                                   ? STOWAGE_LLAMACPP_COMPAT_FEB25
                                   : STOWAGE_LLAMACPP_COMPAT_2026);
  EXPECT_EQ(d.n_batch, 2048u);
  EXPECT_EQ(d.n_ubatch, 512u);
  EXPECT_EQ(d.n_seq_max, 1u);
  EXPECT_EQ(d.kv_unified, 0);
  EXPECT_EQ(d.use_mmap, 1);
  EXPECT_EQ(d.offload_kqv, 1);
  EXPECT_EQ(d.fit_check, 1);
  EXPECT_EQ(d.cache_type_k, nullptr);
  EXPECT_EQ(d.log, nullptr);
}

TEST_F(PlannerCApiTest, PlanIsThePlannersForThisMachine) {
  for (stowage_llamacpp_compat compat : {STOWAGE_LLAMACPP_COMPAT_FEB25, STOWAGE_LLAMACPP_COMPAT_2026}) {
    stowage_plan_params p = params_;
    p.llamacpp_compat = compat;
    p.flash_attn = STOWAGE_FLASH_ATTN_ON;
    p.cache_type_v = "f32";
    p.n_ubatch = 32;
    const std::vector<uint8_t> got = Buffer(p);
    ASSERT_FALSE(got.empty()) << last_error_;

    planner::PlanRequest request;
    request.llamacpp_compat = compat == STOWAGE_LLAMACPP_COMPAT_FEB25 ? planner::LlamacppCompat::kFeb25
                                                                      : planner::LlamacppCompat::k2026;
    request.flash_attn = planner::FlashAttnMode::kOn;
    request.context.n_ctx = 64;
    request.context.n_ubatch = 32;
    request.context.n_seq_max = 2;
    request.context.kv_unified = true;
    request.context.type_v = GgmlType::F32;
    request.flags = "stowage_plan_model (planned on the fly for this machine)";
    auto gguf = GgufFile::Open(model_);
    ASSERT_TRUE(gguf.ok());
    auto machine = planner::ManifestsFromProbe(ProbeDevices().devices);
    ASSERT_TRUE(machine.ok());
    auto want = planner::Plan(**gguf, *machine, request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    EXPECT_EQ(WithoutFreeMemory(got), WithoutFreeMemory(want->bytes)) << "compat " << compat;
    // Each field reaches the plan: another value gives another plan.
    p.cache_type_v = nullptr;
    EXPECT_NE(WithoutFreeMemory(Buffer(p)), WithoutFreeMemory(got));
  }
}

TEST_F(PlannerCApiTest, PlannedSessionDecodesAsThePlanFile) {
  const std::string path = dir_.File("m.plan");
  char err[512] = "";
  ASSERT_EQ(stowage_plan_model(model_.c_str(), &params_, path.c_str(), err, sizeof err), STOWAGE_OK) << err;
  ReadRegularFileOptions read;
  read.what = "plan";
  read.max_bytes = 1 << 30;
  auto file = ReadRegularFileBytes(path, read);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(WithoutFreeMemory(*file), WithoutFreeMemory(Buffer(params_)));

  stowage_session* from_file = nullptr;
  ASSERT_EQ(stowage_session_create(path.c_str(), model_.c_str(), 2, &from_file, err, sizeof err), STOWAGE_OK)
      << err;
  stowage_session* planned = nullptr;
  ASSERT_EQ(stowage_session_create_planned(model_.c_str(), &params_, 2, &planned, err, sizeof err),
            STOWAGE_OK)
      << err;
  EXPECT_EQ(stowage_n_seq_max(planned), 2u);
  EXPECT_EQ(stowage_n_ctx(planned), stowage_n_ctx(from_file));
  const std::vector<float> a = Logits(from_file), b = Logits(planned);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  stowage_session_free(from_file);
  stowage_session_free(planned);
}

TEST_F(PlannerCApiTest, LogReceivesThePlannersLines) {
  std::vector<std::string> lines;
  stowage_plan_params p = params_;
  p.n_ctx = 4096;  // above stories260K's training context of 2048: llama.cpp's overflow warning
  p.n_seq_max = 1;
  p.kv_unified = 0;
  p.log = [](const char* line, void* user) { static_cast<std::vector<std::string>*>(user)->push_back(line); };
  p.log_user_data = &lines;
  ASSERT_FALSE(Buffer(p).empty()) << last_error_;
  bool overflow = false;
  for (const std::string& l : lines)
    overflow = overflow || l.find("possible training context overflow") != std::string::npos;
  EXPECT_TRUE(overflow) << "lines: " << ::testing::PrintToString(lines);
  p.log = nullptr;
  EXPECT_FALSE(Buffer(p).empty());  // no log: planned the same, silently
}

TEST_F(PlannerCApiTest, PlanThatDoesNotFitIsRefusedUnlessFitCheckIsOff) {
  // tiny8 (8 layers, 2 KV heads of 64) with f32 caches of the largest context: 8 KiB of KV cache a
  // token, 128 GiB in all.
  const std::string tiny8 = test::ModelPath("tiny8-untied-q4_0.gguf");
  if (!test::FileExists(tiny8)) GTEST_SKIP() << "skipped: " << tiny8 << " not found";
  const uint64_t kv_bytes = uint64_t{16777216} * 8 * 2 * 128 * 4;
  for (const ProbedDevice& d : ProbeDevices().devices)
    if (d.type == DeviceType::kCpu && d.memory_free > kv_bytes)
      GTEST_SKIP() << "skipped: this machine has " << d.memory_free
                   << " bytes free, more than the test's KV cache";
  stowage_plan_params p = params_;
  p.n_ctx = 16777216;
  p.n_seq_max = 1;
  p.kv_unified = 0;
  p.cache_type_k = p.cache_type_v = "f32";
  model_ = tiny8;
  EXPECT_TRUE(Buffer(p, STOWAGE_RESOURCE_EXHAUSTED).empty());
  EXPECT_NE(last_error_.find("does not fit"), std::string::npos) << last_error_;
  p.fit_check = 0;
  EXPECT_FALSE(Buffer(p).empty()) << last_error_;
}

TEST_F(PlannerCApiTest, BadArgumentsAreOneLineErrors) {
  char err[512] = "";
  void* plan = nullptr;
  size_t size = 1;
  auto check = [&](stowage_status got, stowage_status want, const std::string& needle) {
    EXPECT_EQ(got, want) << err;
    EXPECT_NE(std::string(err).find(needle), std::string::npos) << "'" << err << "' lacks '" << needle << "'";
    EXPECT_EQ(std::string(err).find('\n'), std::string::npos) << err;
  };
  check(stowage_plan_model_buffer(nullptr, &params_, &plan, &size, err, sizeof err), STOWAGE_INVALID_ARGUMENT,
        "model_path is NULL");
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(size, 0u);
  check(stowage_plan_model(model_.c_str(), &params_, nullptr, err, sizeof err), STOWAGE_INVALID_ARGUMENT,
        "plan_path is NULL");
  const std::string missing = dir_.File("absent.gguf");
  check(stowage_plan_model(missing.c_str(), &params_, dir_.File("x.plan").c_str(), err, sizeof err),
        STOWAGE_IO_ERROR, missing);
  EXPECT_FALSE(test::FileExists(dir_.File("x.plan")));

  stowage_plan_params p = params_;
  p.cache_type_k = "q9_9";
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "stowage_plan_params.cache_type_k");
  EXPECT_NE(std::string(err).find("q8_0"), std::string::npos) << "the accepted types are listed: " << err;
  p = params_;
  p.flash_attn = static_cast<stowage_flash_attn>(7);
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "stowage_plan_params.flash_attn");
  p = params_;
  p.llamacpp_compat = static_cast<stowage_llamacpp_compat>(2);
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "stowage_plan_params.llamacpp_compat");
  p = params_;
  p.n_seq_max = 0;
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "stowage_plan_params.n_seq_max");
  // Above LLAMA_MAX_SEQ: the range, not a context-size error.
  p.n_seq_max = 100000;
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "stowage_plan_params.n_seq_max: expected 1 to 256 sequences, found 100000");
  for (uint32_t stowage_plan_params::* field :
       {&stowage_plan_params::n_batch, &stowage_plan_params::n_ubatch}) {
    p = params_;
    p.*field = 0;
    check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
          STOWAGE_INVALID_ARGUMENT,
          field == &stowage_plan_params::n_batch
              ? "stowage_plan_params.n_batch: expected 1 or more tokens, found 0"
              : "stowage_plan_params.n_ubatch: expected 1 or more tokens, found 0");
  }
  p = params_;
  p.n_gpu_layers = (1 << 20) + 1;
  check(stowage_plan_model_buffer(model_.c_str(), &p, &plan, &size, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT,
        "stowage_plan_params.n_gpu_layers: expected a layer count from 0 to 1048576");
  // -ngl's rule (plan-model's too): any value <= -2 is every layer and the output, as 'all'.
  p = params_;
  p.n_gpu_layers = -12345;
  void* neg = nullptr;
  size_t neg_size = 0;
  ASSERT_EQ(stowage_plan_model_buffer(model_.c_str(), &p, &neg, &neg_size, err, sizeof err), STOWAGE_OK)
      << err;
  p.n_gpu_layers = 1 << 20;
  void* all = nullptr;
  size_t all_size = 0;
  ASSERT_EQ(stowage_plan_model_buffer(model_.c_str(), &p, &all, &all_size, err, sizeof err), STOWAGE_OK)
      << err;
  EXPECT_EQ(std::string(static_cast<char*>(neg), neg_size), std::string(static_cast<char*>(all), all_size));
  stowage_plan_buffer_free(neg);
  stowage_plan_buffer_free(all);
  // A folder that does not exist: the write's error, and nothing left behind.
  const std::string bad = dir_.File("no/such/dir/m.plan");
  check(stowage_plan_model(model_.c_str(), &params_, bad.c_str(), err, sizeof err), STOWAGE_IO_ERROR,
        "no/such/dir");

  stowage_session* s = reinterpret_cast<stowage_session*>(&size);
  check(stowage_session_create_planned(missing.c_str(), &params_, 1, &s, err, sizeof err), STOWAGE_IO_ERROR,
        missing);
  EXPECT_EQ(s, nullptr);
  check(stowage_session_create_planned(model_.c_str(), &params_, 1, nullptr, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "out is NULL");
  // The runtime's buffer constructor: a buffer that is not a plan.
  const char junk[] = "not a plan";
  check(stowage_session_create_from_plan_buffer(junk, sizeof junk, model_.c_str(), 1, &s, err, sizeof err),
        STOWAGE_DATA_LOSS, "not a Stowage plan");
  EXPECT_EQ(s, nullptr);
  check(stowage_session_create_from_plan_buffer(nullptr, 4, model_.c_str(), 1, &s, err, sizeof err),
        STOWAGE_INVALID_ARGUMENT, "must not be NULL");
}

}  // namespace
}  // namespace stowage
