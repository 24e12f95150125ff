#include "stowage/runtime/atomic_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

// "/dev/stdout", "/dev/fd/N", "/proc/self/fd/N": the descriptor the path names, else -1. Such a
// path is this process's open file, wherever it points (a pipe, or a log opened with >>).
int OwnDescriptor(const std::string& p) {
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const size_t n = std::strlen(prefix);
    if (p.compare(0, n, prefix) != 0 || p.size() == n || p.size() > n + 9) continue;
    int fd = 0;
    for (size_t i = n; i < p.size(); ++i) {
      if (p[i] < '0' || p[i] > '9') return -1;
      fd = fd * 10 + (p[i] - '0');
    }
    return fd;
  }
  return -1;
}

// The process's umask, without changing it (/proc/self/status "Umask:", Linux 4.7+); 022 else.
mode_t CurrentUmask() {
  FILE* f = std::fopen("/proc/self/status", "re");
  unsigned mask = 022;
  if (f != nullptr) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr)
      if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
    std::fclose(f);
  }
  return static_cast<mode_t>(mask & 0777);
}

}  // namespace

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  if (path.empty()) return IoError("output path is empty");
  AtomicFile f;
  f.path_ = path;
  if (const int own = OwnDescriptor(path); own >= 0) {  // this process's own descriptor: in place
    f.fd_.v = ::fcntl(own, F_DUPFD_CLOEXEC, 0);
    if (f.fd_.v < 0) return OsError(path, "cannot use the descriptor", errno);
    f.in_place_ = true;
    return f;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // FIFO, character or block device, socket (also through links): written in place.
    f.fd_.v = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (f.fd_.v < 0) return OsError(path, "cannot open for writing", errno);
    f.in_place_ = true;
    return f;
  }
  STOWAGE_ASSIGN_OR_RETURN(f.dest_, ResolveLinks(path));
  if (::stat(f.dest_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return IoError(path + ": is a folder, expected a file name");
    f.replaces_ = true;  // keep the replaced file's permissions and owner
    f.old_mode_ = st.st_mode & 07777;
    f.old_uid_ = st.st_uid;
    f.old_gid_ = st.st_gid;
  }
  const std::string dir = Dirname(f.dest_);
  f.fd_.v = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);  // 0666 minus the umask
  if (f.fd_.v >= 0) {
    f.unnamed_ = true;
    return f;
  }
  const int e = errno;
  if (e == ENOENT || e == ENOTDIR) return OsError(path, "cannot create a file in the folder " + dir, e);
  // No O_TMPFILE on this file system (EOPNOTSUPP, EISDIR on old kernels, ...): a named temporary,
  // with a short name (a destination name near NAME_MAX must still leave room for it).
  std::string tmpl = dir + "/.stowage-tmp-XXXXXX";
  f.fd_.v = ::mkostemp(&tmpl[0], O_CLOEXEC);
  if (f.fd_.v < 0) return OsError(path, "cannot create a temporary file in " + dir, errno);
  f.named_tmp_.path = tmpl;
  if (!f.replaces_ && ::fchmod(f.fd_.v, 0666 & ~CurrentUmask()) != 0)  // mkostemp made it 0600
    return OsError(path, "cannot set permissions", errno);
  return f;
}

AtomicFile::Fd& AtomicFile::Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    Close();
    v = o.v;
    o.v = -1;
  }
  return *this;
}

int AtomicFile::Fd::Close() {
  const int rc = v >= 0 ? ::close(v) : 0;
  v = -1;
  return rc;
}

AtomicFile::TempName& AtomicFile::TempName::operator=(TempName&& o) noexcept {
  if (this != &o) {
    Remove();
    path = std::move(o.path);
    o.path.clear();
  }
  return *this;
}

void AtomicFile::TempName::Remove() {
  if (!path.empty()) ::unlink(path.c_str());
  path.clear();
}

Status AtomicFile::Write(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd_.v, p + done, size - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return OsError(path_, "write failed", errno);
    }
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_.v < 0) return FailedPrecondition(path_ + ": AtomicFile::Commit called twice");
  if (in_place_) {
    if (fd_.Close() != 0) return OsError(path_, "cannot close", errno);
    return Status::Ok();
  }
  if (::fsync(fd_.v) != 0) return OsError(path_, "cannot flush", errno);
  if (replaces_) {  // as cp into an existing file: its permissions (and owner, where allowed) stay
    if (::fchmod(fd_.v, old_mode_) != 0) return OsError(path_, "cannot set permissions", errno);
    (void)!::fchown(fd_.v, old_uid_, old_gid_);  // only root may give a file away; not an error
  }
  if (unnamed_) {
    // Give the unnamed file a unique, short temporary name, then rename it over the destination:
    // linkat cannot replace an existing file.
    std::random_device rd;
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_.v);
    const std::string dir = Dirname(dest_);
    for (int attempt = 0; attempt < 100 && named_tmp_.path.empty(); ++attempt) {
      const std::string name =
          dir + "/.stowage-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd() & 0xffffff);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        named_tmp_.path = name;
      } else if (errno != EEXIST) {
        // Without /proc: AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH).
        if (::linkat(fd_.v, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) {
          named_tmp_.path = name;
        } else if (errno != EEXIST) {
          return OsError(path_, "cannot link the finished file into its folder", errno);
        }
      }
    }
    if (named_tmp_.path.empty()) return IoError(path_ + ": cannot find a free temporary name");
  }
  if (fd_.Close() != 0) return OsError(path_, "cannot close", errno);
  if (::rename(named_tmp_.path.c_str(), dest_.c_str()) != 0)
    return OsError(path_, "cannot rename the temporary file into place", errno);
  named_tmp_.path.clear();  // it is the destination now
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
