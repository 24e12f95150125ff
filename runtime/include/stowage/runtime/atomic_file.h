// Writing an output file so that no reader, and no interrupted run, ever leaves a partly written
// file at its path: the bytes go to an unnamed file (Linux O_TMPFILE) in the destination's folder,
// which is given its name only when everything is written and synced. A process killed before that
// (SIGINT, SIGKILL, out of memory) leaves nothing behind. On a file system without O_TMPFILE a
// named temporary `.stowage-tmp-XXXXXX` in that folder is used instead (removed on every error; a killed
// process can leave it).
//
// How the destination is resolved (as `cp` writes to its target):
//   - /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N are this process's descriptor N,
//     written in place (a pipe, or a log opened with >>, keeps its offset and append mode);
//   - an existing non-regular file that is not a folder (a FIFO, a character device such as
//     /dev/null, a socket), also through links, is opened and written in place: there is no file
//     to replace, and renaming over it would destroy the device node;
//   - a symbolic link is followed (up to 40 links); the link itself stays and points to the new file;
//   - a folder is an error.
// Permissions: a new file gets 0666 minus the umask (as open(2) with O_CREAT); a replaced file
// keeps its permissions, and its owner where the process may set it. Temporary names are short
// (".stowage-tmp-<pid>-<n>" in the destination's folder), so any valid destination name works.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stowage/runtime/status.h"

namespace stowage {

class AtomicFile {
 public:
  /// Opens the temporary file for `path` (or `path` itself, for a FIFO or device).
  /// Errors (kIoError, naming `path`): the folder does not exist or is not writable, `path` is a
  /// folder, a symbolic link loop, or the OS error of open.
  static Result<AtomicFile> Create(const std::string& path);

  AtomicFile(AtomicFile&&) noexcept = default;
  AtomicFile& operator=(AtomicFile&&) noexcept = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Discards what was written unless Commit() succeeded (closes the descriptor, removes a
  /// named temporary).
  ~AtomicFile() = default;

  /// The descriptor to write to (write, pwrite, ftruncate); owned by this object.
  int fd() const { return fd_.v; }
  /// True when the bytes go straight to their destination (a FIFO, device or own descriptor):
  /// only sequential Write()s work there (no seeking, no ftruncate).
  bool in_place() const { return in_place_; }
  /// The path given to Create, for messages.
  const std::string& path() const { return path_; }

  /// Writes `size` bytes at the current position, retrying short writes and EINTR.
  /// Errors: kIoError with the OS error (e.g. "No space left on device").
  Status Write(const void* data, size_t size);

  /// Makes the file visible at the destination: fsync, permissions (see above), then rename over the
  /// destination in one step (the old file, if any, stays whole until then). After an error the
  /// destination is as it was before. For a FIFO or device: only closes it. Call once.
  Status Commit();

 private:
  /// A descriptor closed when it goes (moved-from: -1).
  struct Fd {
    int v = -1;
    Fd() = default;
    Fd(Fd&& o) noexcept : v(o.v) { o.v = -1; }
    Fd& operator=(Fd&& o) noexcept;
    ~Fd() { Close(); }
    int Close();  ///< close(2)'s result; 0 when already closed
  };
  /// A temporary file's name, removed when it goes unless released (moved-from: empty).
  struct TempName {
    std::string path;
    TempName() = default;
    TempName(TempName&& o) noexcept : path(std::move(o.path)) { o.path.clear(); }
    TempName& operator=(TempName&& o) noexcept;
    ~TempName() { Remove(); }
    void Remove();
  };

  AtomicFile() = default;

  std::string path_;       // as given
  std::string dest_;       // the destination after following symbolic links
  TempName named_tmp_;     // the named temporary (fallback without O_TMPFILE, or linked at Commit)
  Fd fd_;                  // closed once committed
  bool in_place_ = false;  // FIFO / device / own descriptor: written directly
  bool unnamed_ = false;   // O_TMPFILE
  bool replaces_ = false;  // an existing regular file is replaced: keep its mode and owner
  unsigned old_mode_ = 0;
  unsigned old_uid_ = 0, old_gid_ = 0;
};

/// Writes `size` bytes to `path` through an AtomicFile. Errors: as AtomicFile.
Status WriteFileAtomic(const std::string& path, const void* data, size_t size);
inline Status WriteFileAtomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  return WriteFileAtomic(path, bytes.data(), bytes.size());
}

/// True when `a` and `b` name the same existing file (same device and inode, after following
/// symbolic links); false when either does not exist. Tools use it to refuse an output path that
/// is one of their inputs (plan-model -o M.gguf -m M.gguf would replace the model).
bool SameFile(const std::string& a, const std::string& b);

}  // namespace stowage
