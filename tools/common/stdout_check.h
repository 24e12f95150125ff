// A tool's exit status must say when its output was lost: a write to standard output can fail (a full
// disk, `> /dev/full`, a file size limit) without the tool noticing, because stdio buffers the text
// and reports the failure only through ferror/fflush. RunTool also turns an escaping standard
// exception (out of memory) into one error line instead of an abort, and makes a write past the
// file size limit (`ulimit -f`) an error the tool reports instead of a silent SIGXFSZ death.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>

namespace stowage::tools {

/// Flushes std::cout and stdout. When that flush or any earlier write to standard output failed,
/// prints one line "<tool>: error: cannot write standard output: <reason>" on stderr and returns 1;
/// otherwise returns `rc` (the tool's own exit status). Call it as the last thing of main:
/// `return FinishStdout("plan-dump", Run(argc, argv));`.
inline int FinishStdout(const char* tool, int rc) {
  errno = 0;
  std::cout.flush();
  const bool flush_failed = std::fflush(stdout) != 0;
  const int err = errno;
  if (!flush_failed && !std::ferror(stdout) && std::cout.good()) return rc;
  std::fprintf(stderr, "%s: error: cannot write standard output: %s\n", tool,
               err != 0 ? std::strerror(err) : "an earlier write failed");
  return 1;
}

/// True when `path` is this process's standard output: /dev/stdout, /dev/fd/1, /proc/self/fd/1,
/// or the file standard output is redirected to. A tool writing its result there prints its log
/// and status lines on standard error instead, so that the result stays whole.
inline bool IsStandardOutput(const std::string& path) {
  if (path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1") return true;
  struct stat a, b;
  return ::stat(path.c_str(), &a) == 0 && ::fstat(1, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino && S_ISREG(a.st_mode);
}

/// The whole of a tool's main: runs `run(argc, argv)` and returns FinishStdout(tool, its status).
/// Libraries report errors as Status; what can still escape is the standard library's own
/// exceptions (std::bad_alloc when a request exceeds memory). Those end in one line
/// "<tool>: error: out of memory" or "<tool>: error: internal error: <what>" and exit status 1,
/// never an abort. SIGXFSZ is ignored first: a write past RLIMIT_FSIZE (`ulimit -f`) then fails
/// with EFBIG ("File too large"), which the file writers (AtomicFile: one line naming the file, no
/// partial file left) and FinishStdout report, where the default action killed the tool silently.
template <typename Run>
int RunTool(const char* tool, Run run, int argc, char** argv) {
  std::signal(SIGXFSZ, SIG_IGN);
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", tool);
    rc = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: internal error: %s\n", tool, e.what());
    rc = 1;
  }
  return FinishStdout(tool, rc);
}

}  // namespace stowage::tools
