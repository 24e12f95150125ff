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

Status ReadError(const std::string& path) { return IoError(path + ": read error: " + std::strerror(errno)); }

// Reads up to `n` bytes of `fd` into `dst` (fewer at the end of the file): the count read.
Result<size_t> ReadUpTo(int fd, char* dst, size_t n, const std::string& path) {
  size_t used = 0;
  while (used < n) {
    const ssize_t r = ::read(fd, dst + used, n - used);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadError(path);
    }
    used += static_cast<size_t>(r);
  }
  return used;
}

// The whole of `path` into a std::string or std::vector<uint8_t> (ReadRegularFileBytes).
template <typename Bytes>
Result<Bytes> ReadBounded(const std::string& path, const ReadRegularFileOptions& o) {
  const uint64_t max_bytes = o.max_bytes;
  const std::string_view what = o.what;
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
  const bool pipe = o.allow_pipe && S_ISFIFO(st.st_mode);
  // A pipe's reads wait for its writer again (one without a writer reads as empty, never blocks).
  if (pipe && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    return IoError(path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) && !pipe)
    return IoError(path + ": not a regular file (a device, FIFO or socket), expected " + std::string(what));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Bytes out;
  size_t used = 0;
  if (o.check_head) {  // the first bytes, before the size limit and the rest
    out.resize(static_cast<size_t>(std::min<uint64_t>(size, o.head_bytes)));
    STOWAGE_ASSIGN_OR_RETURN(used, ReadUpTo(fd, reinterpret_cast<char*>(out.data()), out.size(), path));
    STOWAGE_RETURN_IF_ERROR(o.check_head(reinterpret_cast<const uint8_t*>(out.data()), used, size));
  }
  if (size > max_bytes) return ResourceExhausted(TooLarge(path, size, max_bytes, what, false));
  out.resize(static_cast<size_t>(std::max<uint64_t>(size, used)));
  while (true) {
    if (used == out.size()) {  // the file is longer than its size said (growing, or /proc)
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t n = ::read(fd, &probe, 1);
        if (n == 0) break;
        if (n > 0) return ResourceExhausted(TooLarge(path, max_bytes, max_bytes, what, true));
        if (errno == EINTR) continue;
        return ReadError(path);
      }
      out.resize(
          static_cast<size_t>(std::min<uint64_t>(max_bytes, std::max<uint64_t>(4096, out.size() * 2))));
    }
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ReadError(path);
    }
    used += static_cast<size_t>(n);
  }
  out.resize(used);
  return out;
}

}  // namespace

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string_view what,
                                    bool allow_pipe) {
  ReadRegularFileOptions o;
  o.max_bytes = max_bytes;
  o.what = what;
  o.allow_pipe = allow_pipe;
  return ReadBounded<std::string>(path, o);
}

Result<std::vector<uint8_t>> ReadRegularFileBytes(const std::string& path,
                                                  const ReadRegularFileOptions& options) {
  return ReadBounded<std::vector<uint8_t>>(path, options);
}

}  // namespace stowage
