// A tool's output file never replaces one of its inputs: writing a result over the model it reads
// (gguf-dump M.gguf --save-header M.gguf, stowage-run -m M.gguf --dump-logits M.gguf) would destroy
// the model, and an atomic write would do it just as surely as a truncating one.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/status.h"

namespace stowage::tools {

/// Refuses the output file `out` of option `flag` when it is one of `inputs` (the same file after
/// following symbolic links, SameFile; an empty input is skipped, an output that does not exist yet
/// is never an input). Errors: kInvalidArgument "<flag> <out> is the input <input>: it would be
/// replaced (write <what> to another file)".
inline Status CheckOutputIsNotInput(std::string_view flag, const std::string& out,
                                    std::initializer_list<const std::string*> inputs, std::string_view what) {
  for (const std::string* input : inputs)
    if (!input->empty() && !out.empty() && SameFile(out, *input))
      return InvalidArgument(std::string(flag) + " " + out + " is the input " + *input +
                             ": it would be replaced (write " + std::string(what) + " to another file)");
  return Status::Ok();
}

}  // namespace stowage::tools
