// A model file truncated while a tool reads it through a memory mapping: every read of a page past
// the file's new end faults with SIGBUS, which kills the process without a word (llama.cpp dies the
// same way). Session::Decode checks the file before each decode (GgufFile::CheckUnchanged); this
// handler covers the reads in between (weight upload and repacking at load, the kernels of a
// decode): a fault inside the guarded mapping prints one line naming the file and exits with status
// 1. Process-wide state, so it lives in the tools, not in the runtime library.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace stowage::tools {

namespace mapped_file_guard_detail {

/// The guarded mapping and the message parts, written before the handler can run (GuardMappedFile),
/// read only by the handler.
struct State {
  uintptr_t begin = 0, end = 0;
  char head[2048] = {0};  ///< "<tool>: <path>: changed or truncated while in use: byte "
  char tail[96] = {0};    ///< " of the N bytes mapped is no longer in the file\n"
  std::atomic<bool> reported{false};
};

inline State& Guarded() {
  static State s;
  return s;
}

/// Writes all of `s` to standard error, with write(2) only (async-signal-safe).
inline void WriteAll(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

inline void OnSigbus(int, siginfo_t* info, void*) {
  State& g = Guarded();
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0 && a >= g.begin && a < g.end) {
    // One line, however many threads fault at once; the others wait for _exit.
    if (g.reported.exchange(true)) {
      for (;;) pause();
    }
    char digits[24];
    size_t n = 0;
    uint64_t off = a - g.begin;
    do {
      digits[sizeof digits - 1 - n++] = static_cast<char>('0' + off % 10);
      off /= 10;
    } while (off != 0);
    WriteAll(g.head, std::strlen(g.head));
    WriteAll(digits + sizeof digits - n, n);
    WriteAll(g.tail, std::strlen(g.tail));
    _exit(1);
  }
  // Not a read of the guarded file (or a SIGBUS sent by kill): the default action. A fault repeats
  // when the handler returns and then kills the process as it would have without the handler.
  signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) raise(SIGBUS);
}

}  // namespace mapped_file_guard_detail

/// Guards the `size` bytes at `data`, the mapping of the file `path` (GgufFile::bytes() and
/// file_size()): from now on a SIGBUS raised by a read inside it, in any thread, prints
/// "<tool>: <path>: changed or truncated while in use: byte N of the M bytes mapped is no longer
/// in the file" on standard error and ends the process with exit status 1 (_exit: nothing else is
/// flushed or destroyed). A SIGBUS elsewhere keeps its default action. One mapping at a time: a
/// later call replaces the guarded range. Call it before any thread reads the mapping.
inline void GuardMappedFile(const char* tool, const std::string& path, const void* data, size_t size) {
  using namespace mapped_file_guard_detail;
  State& g = Guarded();
  const std::string shown = path.size() > 1800 ? path.substr(0, 1800) + "..." : path;
  std::snprintf(g.head, sizeof g.head, "%s: %s: changed or truncated while in use: byte ", tool,
                shown.c_str());
  std::snprintf(g.tail, sizeof g.tail, " of the %llu bytes mapped is no longer in the file\n",
                static_cast<unsigned long long>(size));
  g.begin = reinterpret_cast<uintptr_t>(data);
  g.end = g.begin + size;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace stowage::tools
