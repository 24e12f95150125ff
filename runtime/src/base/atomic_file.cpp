#include "stowage/runtime/atomic_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace stowage {
namespace {

std::string Dirname(const std::string& p) {
  const size_t slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

Status OsError(const std::string& path, const std::string& what, int e) {
  return IoError(path + ": " + what + ": " + std::strerror(e));
}

// Follows symbolic links from `path` to the name that will be written (the last link's target,
// which need not exist yet).
Result<std::string> ResolveLinks(const std::string& path) {
  std::string p = path;
  for (int i = 0; i < 40; ++i) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) return OsError(path, "cannot read the symbolic link " + p, errno);
    std::string target(buf, static_cast<size_t>(n));
    p = (!target.empty() && target[0] == '/') ? target : Dirname(p) + "/" + target;
  }
  return IoError(path + ": too many levels of symbolic links");
}

}  // namespace

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  if (path.empty()) return IoError("output path is empty");
  AtomicFile f;
  f.path_ = path;
  STOWAGE_ASSIGN_OR_RETURN(f.dest_, ResolveLinks(path));
  struct stat st;
  if (::stat(f.dest_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return IoError(path + ": is a folder, expected a file name");
    if (!S_ISREG(st.st_mode)) {  // FIFO, character or block device, socket: write in place
      f.fd_ = ::open(f.dest_.c_str(), O_WRONLY | O_CLOEXEC);
      if (f.fd_ < 0) return OsError(path, "cannot open for writing", errno);
      f.in_place_ = true;
      return f;
    }
  }
  const std::string dir = Dirname(f.dest_);
  f.fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (f.fd_ >= 0) {
    f.unnamed_ = true;
    return f;
  }
  const int e = errno;
  if (e == ENOENT || e == ENOTDIR) return OsError(path, "cannot create a file in the folder " + dir, e);
  // No O_TMPFILE on this file system (EOPNOTSUPP, EISDIR on old kernels, ...): a named temporary.
  f.named_tmp_ = f.dest_ + ".tmp.XXXXXX";
  f.fd_ = ::mkostemp(&f.named_tmp_[0], O_CLOEXEC);
  if (f.fd_ < 0) {
    const int e2 = errno;
    f.named_tmp_.clear();
    return OsError(path, "cannot create a temporary file in " + dir, e2);
  }
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept { *this = std::move(o); }

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    Discard();
    path_ = std::move(o.path_);
    dest_ = std::move(o.dest_);
    named_tmp_ = std::move(o.named_tmp_);
    fd_ = o.fd_;
    in_place_ = o.in_place_;
    unnamed_ = o.unnamed_;
    committed_ = o.committed_;
    o.fd_ = -1;
    o.named_tmp_.clear();
    o.committed_ = true;
  }
  return *this;
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !named_tmp_.empty()) ::unlink(named_tmp_.c_str());
  named_tmp_.clear();
}

Status AtomicFile::Write(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd_, p + done, size - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return OsError(path_, "write failed", errno);
    }
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_ < 0 || committed_) return FailedPrecondition(path_ + ": AtomicFile::Commit called twice");
  if (in_place_) {
    const int rc = ::close(fd_);
    fd_ = -1;
    committed_ = true;
    if (rc != 0) return OsError(path_, "cannot close", errno);
    return Status::Ok();
  }
  if (::fsync(fd_) != 0) return OsError(path_, "cannot flush", errno);
  if (::fchmod(fd_, 0644) != 0) return OsError(path_, "cannot set permissions", errno);
  if (unnamed_) {
    // Give the unnamed file a unique temporary name, then rename it over the destination:
    // linkat cannot replace an existing file.
    std::random_device rd;
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; attempt < 100 && named_tmp_.empty(); ++attempt) {
      const std::string name = dest_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd() & 0xffffff);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        named_tmp_ = name;
      } else if (errno != EEXIST) {
        // Without /proc: AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH).
        if (::linkat(fd_, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) {
          named_tmp_ = name;
        } else if (errno != EEXIST) {
          return OsError(path_, "cannot link the finished file into its folder", errno);
        }
      }
    }
    if (named_tmp_.empty()) return IoError(path_ + ": cannot find a free temporary name");
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    return OsError(path_, "cannot close", errno);
  }
  fd_ = -1;
  if (::rename(named_tmp_.c_str(), dest_.c_str()) != 0)
    return OsError(path_, "cannot rename the temporary file into place", errno);
  named_tmp_.clear();
  committed_ = true;
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const void* data, size_t size) {
  STOWAGE_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  STOWAGE_RETURN_IF_ERROR(f.Write(data, size));
  return f.Commit();
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace stowage
