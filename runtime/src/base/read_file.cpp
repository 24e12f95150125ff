#include "stowage/runtime/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace stowage {
namespace {

std::string TooLarge(const std::string& path, uint64_t size, uint64_t max_bytes, std::string_view what,
                     bool more) {
  return path + ": " + (more ? "more than " : "") + std::to_string(size) + " bytes, over the limit of " +
         std::to_string(max_bytes) + " bytes for " + std::string(what);
}

}  // namespace

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string_view what,
                                    bool allow_pipe) {
  // O_NONBLOCK: opening a FIFO without a writer would block; the descriptor is checked before use.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return IoError(path + ": not a regular file (a folder), expected " + std::string(what));
  const bool pipe = allow_pipe && S_ISFIFO(st.st_mode);
  // A pipe's reads wait for its writer again (one without a writer reads as empty, never blocks).
  if (pipe && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    return IoError(path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) && !pipe)
    return IoError(path + ": not a regular file (a device, FIFO or socket), expected " + std::string(what));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return ResourceExhausted(TooLarge(path, static_cast<uint64_t>(st.st_size), max_bytes, what, false));
  std::string out;
  out.resize(static_cast<size_t>(st.st_size));
  size_t used = 0;
  while (true) {
    if (used == out.size()) {  // the file is longer than its size said (growing, or /proc)
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t n = ::read(fd, &probe, 1);
        if (n == 0) break;
        if (n > 0) return ResourceExhausted(TooLarge(path, max_bytes, max_bytes, what, true));
        if (errno == EINTR) continue;
        return IoError(path + ": read error: " + std::strerror(errno));
      }
      out.resize(
          static_cast<size_t>(std::min<uint64_t>(max_bytes, std::max<uint64_t>(4096, out.size() * 2))));
    }
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path + ": read error: " + std::strerror(errno));
    }
    used += static_cast<size_t>(n);
  }
  out.resize(used);
  return out;
}

}  // namespace stowage
