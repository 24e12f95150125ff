// AtomicFile / WriteFileAtomic: what each kind of destination ends up holding, and that an
// interrupted or failed write leaves nothing at the destination or in its folder.
#include "stowage/runtime/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace stowage {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stowage-atomic-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::set<std::string> Entries() const {
    std::set<std::string> out;
    DIR* d = ::opendir(dir_.c_str());
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
    ::closedir(d);
    return out;
  }
  static std::string Read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static Status Write(const std::string& p, const std::string& text) {
    return WriteFileAtomic(p, text.data(), text.size());
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, WritesANewFileAndReplacesAnOldOneWhole) {
  ASSERT_TRUE(Write(Path("a.plan"), "first version").ok());
  EXPECT_EQ(Read(Path("a.plan")), "first version");
  ASSERT_TRUE(Write(Path("a.plan"), "v2").ok());
  EXPECT_EQ(Read(Path("a.plan")), "v2");
  EXPECT_EQ(Entries(), (std::set<std::string>{"a.plan"}));  // no temporary left
}

TEST_F(AtomicFileTest, NewFilesFollowTheUmaskAndReplacedFilesKeepTheirMode) {
  const mode_t old = ::umask(077);
  ASSERT_TRUE(Write(Path("private.plan"), "x").ok());
  ::umask(022);
  ASSERT_TRUE(Write(Path("shared.plan"), "x").ok());
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat(Path("private.plan").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(Path("shared.plan").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::chmod(Path("shared.plan").c_str(), 0640), 0);
  ASSERT_TRUE(Write(Path("shared.plan"), "replaced").ok());  // a replaced file keeps its 0640
  ASSERT_EQ(::stat(Path("shared.plan").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(Read(Path("shared.plan")), "replaced");
}

TEST_F(AtomicFileTest, ANameNearNameMaxWorks) {
  const std::string name(250, 'x');  // NAME_MAX is 255: the temporary must not be longer
  ASSERT_TRUE(Write(Path(name), "long").ok());
  EXPECT_EQ(Read(Path(name)), "long");
  EXPECT_EQ(Entries(), (std::set<std::string>{name}));
}

TEST_F(AtomicFileTest, OwnDescriptorPathsWriteToTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // /proc/self/fd/N of a pipe: written into the pipe (it resolved to "pipe:[...]" as a path before).
  const Status s = Write("/proc/self/fd/" + std::to_string(fds[1]), "into the pipe");
  ASSERT_TRUE(s.ok()) << s.message();
  ::close(fds[1]);
  char buf[64] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "into the pipe");
  // /dev/fd/N of a file opened for appending (as `>> log`): appended, the log is kept.
  const int log = ::open(Path("log.txt").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(log, 0);
  ASSERT_EQ(::write(log, "earlier\n", 8), 8);
  ASSERT_TRUE(Write("/dev/fd/" + std::to_string(log), "plan").ok());
  ::close(log);
  EXPECT_EQ(Read(Path("log.txt")), "earlier\nplan");
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesTheOldFileAndNoTemporary) {
  ASSERT_TRUE(Write(Path("a.plan"), "old").ok());
  {
    auto f = AtomicFile::Create(Path("a.plan"));
    ASSERT_TRUE(f.ok()) << f.status().message();
    ASSERT_TRUE(f->Write("new, but never committed", 24).ok());
  }
  EXPECT_EQ(Read(Path("a.plan")), "old");
  EXPECT_EQ(Entries(), (std::set<std::string>{"a.plan"}));
}

TEST_F(AtomicFileTest, AKilledWriterLeavesNothing) {
  const int probe = ::open(dir_.c_str(), O_TMPFILE | O_WRONLY, 0644);
  if (probe < 0)
    GTEST_SKIP() << dir_
                 << ": no O_TMPFILE on this file system (a killed writer would leave a named temporary)";
  ::close(probe);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto f = AtomicFile::Create(Path("big.gguf"));
    if (!f.ok()) ::_exit(2);
    (void)f->Write("partial", 7);
    ::raise(SIGKILL);  // as an interrupted gguf-synth or plan-model
    ::_exit(3);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
  // O_TMPFILE: the unnamed file dies with the process.
  EXPECT_TRUE(Entries().empty());
}

TEST_F(AtomicFileTest, FollowsSymbolicLinksAndKeepsTheLink) {
  ASSERT_EQ(::symlink("target.plan", Path("link.plan").c_str()), 0);  // dangling: target created
  ASSERT_TRUE(Write(Path("link.plan"), "through the link").ok());
  EXPECT_EQ(Read(Path("target.plan")), "through the link");
  struct stat st;
  ASSERT_EQ(::lstat(Path("link.plan").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_TRUE(Write(Path("link.plan"), "again").ok());
  EXPECT_EQ(Read(Path("target.plan")), "again");
  EXPECT_EQ(Entries(), (std::set<std::string>{"link.plan", "target.plan"}));
}

TEST_F(AtomicFileTest, SymbolicLinkLoopIsAnError) {
  ASSERT_EQ(::symlink("b", Path("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", Path("b").c_str()), 0);
  const Status s = Write(Path("a"), "x");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("too many levels of symbolic links"), std::string::npos) << s.message();
}

TEST_F(AtomicFileTest, WritesIntoAFifoInPlace) {
  ASSERT_EQ(::mkfifo(Path("pipe").c_str(), 0644), 0);
  std::string got;
  std::thread reader([&] { got = Read(Path("pipe")); });
  const Status s = Write(Path("pipe"), "streamed plan");
  reader.join();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(got, "streamed plan");
  struct stat st;
  ASSERT_EQ(::lstat(Path("pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));  // still a FIFO, not replaced by a regular file
}

TEST_F(AtomicFileTest, DeviceIsWrittenInPlaceAndItsErrorReported) {
  EXPECT_TRUE(Write("/dev/null", "discarded").ok());
  struct stat st;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  const Status s = Write("/dev/full", "x");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("/dev/full: write failed: No space left on device"), std::string::npos)
      << s.message();
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(AtomicFileTest, FolderAndMissingFolderAreErrors) {
  Status s = Write(dir_, "x");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("is a folder"), std::string::npos) << s.message();
  s = Write(Path("missing/x.plan"), "x");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("missing/x.plan: cannot create a file in the folder"), std::string::npos)
      << s.message();
  EXPECT_TRUE(Entries().empty());
}

TEST_F(AtomicFileTest, SameFileComparesInodes) {
  ASSERT_TRUE(Write(Path("m.gguf"), "model").ok());
  ASSERT_EQ(::symlink("m.gguf", Path("alias.gguf").c_str()), 0);
  EXPECT_TRUE(SameFile(Path("m.gguf"), Path("alias.gguf")));
  EXPECT_TRUE(SameFile(Path("m.gguf"), dir_ + "/./m.gguf"));
  EXPECT_FALSE(SameFile(Path("m.gguf"), Path("other.plan")));  // does not exist
  ASSERT_TRUE(Write(Path("other.plan"), "model").ok());
  EXPECT_FALSE(SameFile(Path("m.gguf"), Path("other.plan")));  // same bytes, another file
}

}  // namespace
}  // namespace stowage
