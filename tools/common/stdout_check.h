// A tool's exit status must say when its output was lost: a write to standard output can fail (a full
// disk, `> /dev/full`, a file size limit) without the tool noticing, because stdio buffers the text
// and reports the failure only through ferror/fflush.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

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

}  // namespace stowage::tools
