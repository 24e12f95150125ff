// tools/common/mapped_file_guard.h: a read of a model file truncated while mapped ends the process
// with one line naming the file and exit status 1, in any thread; a SIGBUS elsewhere stays fatal.
#include "mapped_file_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "scratch_dir.h"
#include "stowage/runtime/gguf.h"
#include "synth.h"

namespace stowage {
namespace {

class MappedFileGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    model_ = scratch_.File("m.gguf");
    synth::ModelSpec spec;
    spec.n_embd = 256;  // tensors of several pages each
    spec.n_ff = 512;
    ASSERT_TRUE(synth::WriteModel(spec, model_).ok());
  }
  /// In the child of a death test: opens the model, guards its mapping, truncates the file to its
  /// header and reads the last tensor's first byte (past the new end), in a worker thread when
  /// `in_thread`. Exits with 2 if nothing faulted.
  void ReadAfterTruncation(bool in_thread) {
    auto g = GgufFile::Open(model_);
    if (!g.ok()) std::_Exit(3);
    const GgufFile& f = **g;
    tools::GuardMappedFile("tool", f.path(), f.bytes(), f.file_size());
    if (truncate(model_.c_str(), static_cast<off_t>(f.data_offset())) != 0) std::_Exit(4);
    const uint8_t* p = f.TensorData(f.tensors().back());
    volatile uint8_t sink = 0;
    if (in_thread) {
      std::thread t([&] { sink = *p; });
      t.join();
    } else {
      sink = *p;
    }
    (void)sink;
    std::_Exit(2);
  }
  test::ScratchDir scratch_{"stowage-guard"};
  std::string model_;
};

TEST_F(MappedFileGuardTest, ReadPastTheTruncatedEndIsOneLineNamingTheFile) {
  EXPECT_EXIT(ReadAfterTruncation(false), ::testing::ExitedWithCode(1),
              "^tool: " + scratch_.path() +
                  "/m\\.gguf: changed or truncated while in use: byte [0-9]+ of the [0-9]+ bytes "
                  "mapped is no longer in the file\n$");
}

TEST_F(MappedFileGuardTest, ReadInAWorkerThread) {
  EXPECT_EXIT(ReadAfterTruncation(true), ::testing::ExitedWithCode(1),
              "m\\.gguf: changed or truncated while in use: byte [0-9]+ of the [0-9]+ bytes mapped");
}

// A SIGBUS that is not a read of the guarded file keeps its default action (the process dies of it).
TEST_F(MappedFileGuardTest, OtherFaultsStayFatal) {
  EXPECT_EXIT(
      {
        auto g = GgufFile::Open(model_);
        if (!g.ok()) std::_Exit(3);
        tools::GuardMappedFile("tool", (*g)->path(), (*g)->bytes(), (*g)->file_size());
        // Another file, mapped and truncated: not the model.
        const std::string other = scratch_.File("other");
        const int fd = open(other.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ftruncate(fd, 1 << 16) != 0) std::_Exit(4);
        auto* m = static_cast<volatile uint8_t*>(mmap(nullptr, 1 << 16, PROT_READ, MAP_SHARED, fd, 0));
        std::remove(other.c_str());
        if (ftruncate(fd, 0) != 0) std::_Exit(5);
        (void)m[1 << 15];
        std::_Exit(2);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace stowage
