// Reading a whole input file with a bound: the tools' text inputs (a prompt or perplexity text
// given with -f), the planner's device manifests and plan files (ReadPlanBytes, plan.h). A path that is not a
// regular file (/dev/zero, /dev/urandom, a FIFO, a folder, a socket) is refused before anything is read, so
// such a path can neither make the reader run forever nor block it; a file larger than the caller's limit is
// refused from its size before it is read, and one that grows while it is read (a log being
// written, a /proc file that reports size 0) is refused once the limit is passed. Memory use is
// therefore at most the limit, whatever the path names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/status.h"

namespace stowage {

/// The bytes of the regular file `path` (symbolic links followed), at most `max_bytes` of them.
/// `what` says what the file should be, for messages ("a text file with the prompt (-f)", "a
/// manifest file (.json)"). With `allow_pipe`, a pipe or FIFO is read too, up to the same limit
/// (`-f /dev/stdin` with a pipe, as llama-cli reads it; a FIFO without a writer reads as empty, it
/// does not block). Errors, each one line naming `path`:
///   kIoError "<path>: cannot open: No such file or directory" (and the other open/stat errors);
///   kIoError "<path>: not a regular file (a folder), expected <what>";
///   kIoError "<path>: not a regular file (a device, FIFO or socket), expected <what>" (/dev/zero,
///     /dev/urandom, a FIFO unless `allow_pipe`; the wording of the plan and GGUF readers);
///   kResourceExhausted "<path>: N bytes, over the limit of M bytes for <what>" (a pipe or a file
///     longer than its size said: "more than M bytes, over the limit of M bytes ...");
///   kIoError "<path>: read error: <OS error>".
Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string_view what,
                                    bool allow_pipe = false);

/// How ReadRegularFileBytes reads a file: ReadRegularFile's limit, description and pipe rule, and
/// an optional check of the file's first bytes.
struct ReadRegularFileOptions {
  uint64_t max_bytes = 0;  ///< at most this many bytes are read (or held in memory)
  std::string_view what;   ///< what the file should be, for messages
  bool allow_pipe = false;
  /// When set, called once the file is known to be a regular file (or an allowed pipe), before the
  /// size limit is applied and before the rest is read, with its first min(size, head_bytes) bytes
  /// (`n`, fewer when the file got shorter meanwhile) and its size in bytes (st_size; 0 for a
  /// pipe): a file of the wrong kind is refused in its own words after one small read, however
  /// large it is. Its error is returned as it is.
  std::function<Status(const uint8_t* head, size_t n, uint64_t size)> check_head;
  size_t head_bytes = 0;
};

/// ReadRegularFile for binary files: the bytes of `path` under `options`, with ReadRegularFile's
/// errors (`options.what` in them) and those of `options.check_head`.
Result<std::vector<uint8_t>> ReadRegularFileBytes(const std::string& path,
                                                  const ReadRegularFileOptions& options);

}  // namespace stowage
