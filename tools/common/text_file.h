// The text files the tools read whole: stowage-run's prompt (-f) and perplexity's text (perplexity
// -f). One bound for all of them, so that a path such as /dev/zero or a multi-gigabyte file is
// refused with one line instead of being read until memory runs out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stowage/runtime/read_file.h"

namespace stowage::tools {

/// The largest text file a tool reads: 256 MiB. A prompt fills at most the largest context
/// (2^24 tokens, about 64 MiB of English text) and llama-perplexity's usual texts are a few MiB
/// (wikitext-2's test split: 1.3 MiB); 256 MiB of text is about 64 M tokens.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{256} << 20;

/// The bytes of the text file `path`: a regular file, or a pipe (`-f /dev/stdin`, as llama-cli),
/// of at most kMaxTextFileBytes; `what` says what it should be ("a text file with the prompt (-f)").
/// Errors: ReadRegularFile's (one line naming the file; a device such as /dev/zero or a folder, or a
/// file over the limit, saying which limit).
inline Result<std::string> ReadTextFile(const std::string& path, std::string_view what) {
  return ReadRegularFile(path, kMaxTextFileBytes, what, /*allow_pipe=*/true);
}

}  // namespace stowage::tools
