// ReadRegularFile / ReadRegularFileBytes: the bounded reader of the tools' text files, the planner's
// manifests and plan files. A path
// that is not a regular file (/dev/zero, a FIFO, a folder) is refused before anything is read, and a
// file over the limit from its size: no read runs forever or blocks.
#include "stowage/runtime/read_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "scratch_dir.h"

namespace stowage {
namespace {

class ReadFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  std::string Write(const std::string& name, const std::string& bytes) { return scratch_.Write(name, bytes); }
  test::ScratchDir scratch_{"read_file_test"};
  const std::string dir_ = scratch_.path();
};

TEST_F(ReadFileTest, ReadsARegularFileWhole) {
  const std::string p = Write("a.txt", std::string("hello\0world\n", 12));
  auto r = ReadRegularFile(p, 100, "a text file");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, std::string("hello\0world\n", 12));
  auto empty = ReadRegularFile(Write("e.txt", ""), 0, "a text file");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  auto exact = ReadRegularFile(Write("x.txt", "12345"), 5, "a text file");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(*exact, "12345");
}

// Without the bound, /dev/zero and /dev/urandom were read until memory ran out.
TEST_F(ReadFileTest, RefusesDevicesAtOnce) {
  for (const char* dev : {"/dev/zero", "/dev/urandom", "/dev/null"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = ReadRegularFile(dev, 1 << 20, "a text file with the prompt (-f)");
    ASSERT_FALSE(r.ok()) << dev;
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_EQ(r.status().message(),
              std::string(dev) +
                  ": not a regular file (a device, FIFO or socket), expected a text file with the "
                  "prompt (-f)");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
}

// A FIFO without a writer would block the open and the read: refused, or with allow_pipe read as
// empty; a pipe with a writer is read up to the limit (-f /dev/stdin).
TEST_F(ReadFileTest, FifosAndPipes) {
  const std::string p = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  auto r = ReadRegularFile(p, 1 << 20, "a manifest file (.json)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            p + ": not a regular file (a device, FIFO or socket), expected a manifest file (.json)");
  auto empty = ReadRegularFile(p, 1 << 20, "a text file", /*allow_pipe=*/true);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(*empty, "");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "0123456789", 10), 10);
  close(fds[1]);
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  auto over = ReadRegularFile(path, 4, "a text file", /*allow_pipe=*/true);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), path + ": more than 4 bytes, over the limit of 4 bytes for a text file");
  auto rest = ReadRegularFile(path, 100, "a text file", /*allow_pipe=*/true);  // a new descriptor, same pipe
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_EQ(*rest, "56789");  // what the first read left (it took the limit and one byte more)
  close(fds[0]);
  // Devices are refused with allow_pipe too.
  EXPECT_FALSE(ReadRegularFile("/dev/zero", 1 << 20, "a text file", /*allow_pipe=*/true).ok());
}

TEST_F(ReadFileTest, RefusesAFolderAndAMissingFile) {
  auto dir = ReadRegularFile(dir_, 1 << 20, "a text file");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), dir_ + ": not a regular file (a folder), expected a text file");
  auto missing = ReadRegularFile(dir_ + "/missing.txt", 1 << 20, "a text file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), dir_ + "/missing.txt: cannot open: No such file or directory");
}

// The size is checked before reading (a sparse 2 GiB file costs nothing to make or to refuse).
TEST_F(ReadFileTest, RefusesAFileOverTheLimitFromItsSize) {
  const std::string p = dir_ + "/big.json";
  {
    std::ofstream f(p, std::ios::binary);
  }
  ASSERT_EQ(truncate(p.c_str(), off_t{2} << 30), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ReadRegularFile(p, 4 << 20, "a manifest file (.json)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            p + ": 2147483648 bytes, over the limit of 4194304 bytes for a manifest file (.json)");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  auto one_over = ReadRegularFile(Write("six.txt", "123456"), 5, "a text file");
  ASSERT_FALSE(one_over.ok());
  EXPECT_EQ(one_over.status().message(),
            dir_ + "/six.txt: 6 bytes, over the limit of 5 bytes for a text file");
}

// A file whose size says 0 but has more (/proc files) is read up to the limit, then refused.
TEST_F(ReadFileTest, BoundsAFileLongerThanItsSize) {
  auto r = ReadRegularFile("/proc/self/maps", 1 << 20, "a text file");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->empty());
  auto small = ReadRegularFile("/proc/self/maps", 16, "a text file");
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().message(),
            "/proc/self/maps: more than 16 bytes, over the limit of 16 bytes for a text file");
}

// ReadRegularFileBytes: the first bytes are checked before the size limit and before the rest is
// read (a large file of the wrong kind costs one small read), with the check's own error.
TEST_F(ReadFileTest, BytesChecksTheHeadFirst) {
  ReadRegularFileOptions o;
  o.max_bytes = 8;
  o.what = "a test file";
  o.head_bytes = 4;
  size_t seen_n = 0;
  uint64_t seen_size = 0;
  o.check_head = [&](const uint8_t* head, size_t n, uint64_t size) {
    seen_n = n;
    seen_size = size;
    return n >= 2 && head[0] == 'O' && head[1] == 'K' ? Status::Ok() : DataLoss("bad head");
  };
  auto ok = ReadRegularFileBytes(Write("ok.bin", "OK\x01\x02\x03"), o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<uint8_t>{'O', 'K', 1, 2, 3}));
  EXPECT_EQ(seen_n, 4u);
  EXPECT_EQ(seen_size, 5u);
  // Over the limit and of the wrong kind: the head check speaks first.
  auto bad = ReadRegularFileBytes(Write("bad.bin", "NO, and far too long"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message(), "bad head");
  // The right kind but over the limit: the limit's error.
  const std::string big = Write("big.bin", "OK, but far too long");
  auto over = ReadRegularFileBytes(big, o);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), big + ": 20 bytes, over the limit of 8 bytes for a test file");
  // Shorter than the head: the check sees what there is.
  auto shorter = ReadRegularFileBytes(Write("one.bin", "O"), o);
  EXPECT_FALSE(shorter.ok());
  EXPECT_EQ(seen_n, 1u);
  // Not a regular file: refused before the check, in ReadRegularFile's words.
  auto dir = ReadRegularFileBytes(dir_, o);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), dir_ + ": not a regular file (a folder), expected a test file");
}
}  // namespace
}  // namespace stowage
