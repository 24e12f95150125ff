// The model file's mapping: mapped once per process when the caller shares its GgufFile with the
// Session, a failed mapping that says why, and a file truncated or rewritten while its weights are
// read in place reported by name instead of a SIGBUS.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "plan_cpu.h"
#include "scratch_dir.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "synth.h"

namespace stowage {
namespace {

/// The mappings of `path` in this process (/proc/self/maps): lines of the file that continue each
/// other (same file, adjacent addresses and offsets: one mapping split by madvise) count once.
int MappingsOf(const std::string& path) {
  char real[4096];
  if (realpath(path.c_str(), real) == nullptr) return -1;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int count = 0;
  unsigned long long prev_end = 0, prev_off_end = 0;
  while (std::getline(maps, line)) {
    unsigned long long start = 0, end = 0, off = 0;
    char perms[8], dev[16];
    unsigned long long inode = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &off, dev, &inode,
                    &name_at) < 6)
      continue;
    if (name_at <= 0 || line.substr(static_cast<size_t>(name_at)) != real) continue;
    if (!(start == prev_end && off == prev_off_end)) ++count;
    prev_end = end;
    prev_off_end = off + (end - start);
  }
  return count;
}

class MappedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    model_ = scratch_.File("m.gguf");
    synth::ModelSpec spec;  // a 2-layer llama with F32 weights and its own vocabulary
    ASSERT_TRUE(synth::WriteModel(spec, model_).ok());
    auto plan = test::PlanCpu(model_, 32);  // weights mapped from the file (CPU_Mapped)
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = std::move(*plan);
    opts_.n_threads = 1;
  }
  std::shared_ptr<const GgufFile> Open() {
    auto g = GgufFile::Open(model_);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? std::shared_ptr<const GgufFile>(std::move(*g)) : nullptr;
  }
  test::ScratchDir scratch_{"stowage-mapped"};
  const std::string dir_ = scratch_.path();
  std::string model_;
  std::vector<uint8_t> plan_;
  SessionOptions opts_;
};

// stowage-run maps the model for its tokenizer and its plan made on the fly; the Session used to map
// it again (and the planner a third time), so a 40 GB model needed 2-3x its size of address space.
TEST_F(MappedModelTest, SessionSharesTheCallersMapping) {
  auto gguf = Open();
  ASSERT_NE(gguf, nullptr);
  EXPECT_EQ(MappingsOf(model_), 1);
  {  // what a session opened by path does next to the caller's GgufFile: the file mapped twice
    auto by_path = Session::CreateFromPlanBytes(plan_, model_, opts_);
    ASSERT_TRUE(by_path.ok()) << by_path.status().ToString();
    EXPECT_EQ(MappingsOf(model_), 2);
  }
  auto s = Session::CreateFromPlanBytes(plan_, gguf, opts_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(MappingsOf(model_), 1);
  std::vector<float> logits;
  ASSERT_TRUE((*s)->Decode({1, 5, 9}, false, &logits).ok());
  // The session keeps the mapping alive after the caller lets go of it.
  gguf.reset();
  EXPECT_EQ(MappingsOf(model_), 1);
  ASSERT_TRUE((*s)->Decode({7}, false, &logits).ok());
  s->reset();
  EXPECT_EQ(MappingsOf(model_), 0);

  // From a plan file too.
  const std::string plan_path = dir_ + "/m.plan";
  {
    std::ofstream out(plan_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(plan_.data()), static_cast<std::streamsize>(plan_.size()));
  }
  gguf = Open();
  auto fs = Session::Create(plan_path, gguf, opts_);
  std::remove(plan_path.c_str());
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(MappingsOf(model_), 1);
  EXPECT_FALSE(Session::CreateFromPlanBytes(plan_, std::shared_ptr<const GgufFile>(), opts_).ok());
}

// A file truncated while its weights are read in place: the next decode would fault with SIGBUS
// (as llama.cpp does); it is refused with the file named.
TEST_F(MappedModelTest, DecodeRefusesAFileTruncatedWhileInUse) {
  auto s = Session::CreateFromPlanBytes(plan_, Open(), opts_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> logits;
  ASSERT_TRUE((*s)->Decode({1, 5, 9}, false, &logits).ok());
  struct stat st;
  ASSERT_EQ(stat(model_.c_str(), &st), 0);
  ASSERT_EQ(truncate(model_.c_str(), 4096), 0);
  const Status d = (*s)->Decode({7}, false, &logits);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.code(), StatusCode::kDataLoss);
  EXPECT_EQ(d.message(), model_ + ": changed or truncated while in use: " + std::to_string(st.st_size) +
                             " bytes were mapped, the file now has 4096 bytes");
  EXPECT_EQ(d.message().find('\n'), std::string::npos);
}

// Rewritten in place (same size, new modification time): the mapped weights changed under the reader.
TEST_F(MappedModelTest, DecodeRefusesAFileRewrittenWhileInUse) {
  auto s = Session::CreateFromPlanBytes(plan_, Open(), opts_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  struct timeval later[2];
  gettimeofday(&later[0], nullptr);
  later[0].tv_sec += 10;
  later[1] = later[0];
  ASSERT_EQ(utimes(model_.c_str(), later), 0);
  std::vector<float> logits;
  const Status d = (*s)->Decode({1}, false, &logits);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message(),
            model_ + ": changed while in use: modified since it was opened (its modification time changed)");
}

// A plan that copies every weight at load (--no-mmap) does not read the file afterwards: a
// truncated file is no error then.
TEST_F(MappedModelTest, AnUnmappedPlanIgnoresTheFileAfterLoad) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 32;
  auto copied = test::PlanCpu(model_, cfg, /*use_mmap=*/false);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  auto s = Session::CreateFromPlanBytes(*copied, Open(), opts_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(truncate(model_.c_str(), 0), 0);
  std::vector<float> logits;
  EXPECT_TRUE((*s)->Decode({1, 5}, false, &logits).ok());
}

// A mapping refused for lack of address space says so, with the limit (ulimit -v), in one line.
TEST_F(MappedModelTest, MapFailureSaysWhy) {
  struct stat st;
  ASSERT_EQ(stat(model_.c_str(), &st), 0);
  const std::string big = dir_ + "/big.gguf";
  {
    std::ofstream out(big, std::ios::binary);
    out << "GGUF";
  }
  const off_t size = off_t(64) << 30;  // 64 GiB, sparse: more than the limit set below
  ASSERT_EQ(truncate(big.c_str(), size), 0);
  EXPECT_EXIT(
      {
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = rlim_t(32) << 30;
        if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(3);
        auto g = GgufFile::Open(big);
        std::fprintf(stderr, "%s\n", g.ok() ? "mapped" : g.status().message().c_str());
        std::_Exit(g.ok() ? 2 : 1);
      },
      ::testing::ExitedWithCode(1),
      "big.gguf: cannot map its 68719476736 bytes \\(65536 MiB\\): Cannot allocate memory \\(the address "
      "space of "
      "this process is limited to 32768 MiB: ulimit -v\\)");
  std::remove(big.c_str());
}

}  // namespace
}  // namespace stowage
