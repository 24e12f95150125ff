// One verifier: what PlanFile accepts (plan-dump's "verified", --check-memory, --seal) is exactly
// what Session accepts before it creates backends and allocates, and what CheckPlanAgainstModel
// adds is what it checks against the model (plan-dump -m). And the loader refuses a file that is
// not a plan, or too large to be one, from its first bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "plan_cpu.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "test_paths.h"

namespace stowage {
namespace {

/// The verifier's verdict as plan-dump -m gives it: PlanFile, then the plan against the model.
Status Verified(const std::vector<uint8_t>& bytes, const GgufFile& model) {
  auto plan = PlanFile::FromBytes(bytes, "<plan in memory>");  // the name Session gives it
  if (!plan.ok()) return plan.status();
  return CheckPlanAgainstModel(**plan, model);
}

/// Decodes a 5-token prompt (pp graph), then single tokens (tg graph) until the context is full.
Status RunToFullContext(Session& s) {
  std::vector<float> logits;
  STOWAGE_RETURN_IF_ERROR(s.Decode({1, 403, 407, 261, 378}, false, &logits));
  while (s.n_past() < s.n_ctx()) STOWAGE_RETURN_IF_ERROR(s.Decode({42}, false, &logits));
  return Status::Ok();
}

/// Byte mutations of a real plan, each sealed again as plan-dump --seal does (SealPlan: the
/// checksum recomputed), so that they reach the checks after the checksum. For every one, the
/// verifier accepts iff Session::CreateFromPlanBytes does, except where the session refuses for
/// this machine (a planned device absent, memory it cannot allocate), which no check of the file
/// alone can know. Every plan both accept runs to a full context without an error.
void ExpectVerifierAgreesWithSession(const std::string& model, const std::vector<uint8_t>& plan,
                                     uint64_t seed) {
  auto gguf = GgufFile::Open(model);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  ASSERT_TRUE(Verified(plan, **gguf).ok()) << Verified(plan, **gguf).ToString();
  SessionOptions opts;
  opts.n_threads = 1;
  std::mt19937_64 rng(seed);
  int sealed = 0, refused_by_both = 0, accepted_by_both = 0, machine = 0, ran_to_the_end = 0;
  for (int m = 0; m < 250; ++m) {
    std::vector<uint8_t> bad = plan;
    const size_t at = 8 + rng() % (bad.size() - 8);  // past the identifier: mutations reach the content
    bad[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    sealed += SealPlan(bad.data(), bad.size()).ok();
    const Status verified = Verified(bad, **gguf);
    auto session = Session::CreateFromPlanBytes(bad, model, opts);
    const std::string what = "mutation " + std::to_string(m) + " (byte " + std::to_string(at) +
                             "): verifier: " + verified.ToString() +
                             "; session: " + (session.ok() ? "OK" : session.status().ToString());
    if (!session.ok() && (session.status().code() == StatusCode::kUnavailable ||
                          session.status().code() == StatusCode::kResourceExhausted)) {
      ++machine;
      continue;
    }
    EXPECT_EQ(verified.ok(), session.ok()) << what;
    if (!verified.ok() && !session.ok()) {
      ++refused_by_both;
      // The same check refuses it, with the same one line.
      EXPECT_EQ(verified.message(), session.status().message()) << what;
    }
    accepted_by_both += verified.ok() && session.ok();
    // What the verifier accepts also runs: a prompt, then one token at a time until the context is
    // full, so every kv_head the session binds is reached (tensors sized by kv_head failed only
    // mid-generation, past the load).
    if (verified.ok() && session.ok()) {
      const Status ran = RunToFullContext(**session);
      EXPECT_TRUE(ran.ok()) << what << "; run: " << ran.ToString();
      ran_to_the_end += ran.ok();
    }
  }
  // The mutations exercise the checks after the checksum, and some survive them all.
  EXPECT_GT(sealed, 150);
  EXPECT_GT(refused_by_both, 50);
  EXPECT_GT(accepted_by_both, 0);
  EXPECT_EQ(ran_to_the_end, accepted_by_both);
  (void)machine;
}

class PlanVerify : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model_))
      GTEST_SKIP() << "skipped: " << model_ << " not found (shared models absent)";
  }
  std::string model_;
};

TEST_F(PlanVerify, AcceptsExactlyWhatTheSessionAcceptsMappedWeights) {
  auto plan = test::PlanCpu(model_, 32);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ExpectVerifierAgreesWithSession(model_, *plan, 20261204);
}

TEST_F(PlanVerify, AcceptsExactlyWhatTheSessionAcceptsAllocatedWeights) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 64;
  cfg.n_batch = 32;
  cfg.n_ubatch = 32;
  auto plan = test::PlanCpu(model_, cfg, /*use_mmap=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ExpectVerifierAgreesWithSession(model_, *plan, 77);
}

// ---- the header before the bytes --------------------------------------------------------------

/// A sparse file of `size` bytes starting with `head`, in a fresh temporary folder.
std::string SparseFile(const std::string& head, uint64_t size) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/plan-verify-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return "";
  const bool ok =
      write(fd, head.data(), head.size()) == ssize_t(head.size()) && ftruncate(fd, off_t(size)) == 0;
  close(fd);
  if (!ok) unlink(path.c_str());
  return ok ? path : "";
}

// A 3 GB file that is not a plan (a GGUF's first bytes): refused from its identifier. Read whole,
// it took seconds and 3 GB of memory before the same message.
TEST(PlanHeader, LargeFileThatIsNotAPlanIsRefusedByItsIdentifier) {
  const std::string path = SparseFile(std::string("GGUF\x03\0\0\0", 8), uint64_t(3) << 30);
  ASSERT_FALSE(path.empty());
  for (const Status& st : {PlanFile::Load(path).status(), ReadPlanBytes(path).status()}) {
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    EXPECT_EQ(st.message(), path +
                                ": file identifier: expected \"STWP\" at byte 4, found "
                                "\"\\x03\\x00\\x00\\x00\" (not a Stowage plan)");
  }
  unlink(path.c_str());
}

// A file with the identifier but larger than any plan: refused from its size (it was read whole and
// then failed the flatbuffers verifier).
TEST(PlanHeader, FileLargerThanTheLimitIsRefusedBySize) {
  const std::string path = SparseFile(std::string("\x10\0\0\0STWP", 8), kMaxPlanFileSize + 1);
  ASSERT_FALSE(path.empty());
  for (const Status& st : {PlanFile::Load(path).status(), ReadPlanBytes(path).status()}) {
    EXPECT_EQ(st.code(), StatusCode::kDataLoss);
    EXPECT_EQ(
        st.message(),
        path + ": file size: expected a plan of at most 1073741824 bytes (1 GiB), found 1073741825 bytes");
  }
  unlink(path.c_str());
}

}  // namespace
}  // namespace stowage
