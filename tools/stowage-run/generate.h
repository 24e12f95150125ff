// Text generation (stowage-run without a subcommand), as llama-cli: the prompt is evaluated in one
// batch, then tokens are sampled and printed one at a time.
#pragma once

#include <string>

#include "run_common.h"
#include "stowage/runtime/sampler.h"

namespace stowage::run {

/// What to generate and what to print besides the text (llama-cli's switches).
struct GenerateOptions {
  std::string prompt;           ///< the prompt's text, escapes already expanded; not empty
  std::string prompt_source;    ///< names the prompt in messages: the -f file, or "the prompt (-p)"
  int n_predict = 64;           ///< tokens to generate; -1: until an end-of-generation token
  SamplerParams sampler;        ///< seed kRandomSeed: a random seed for this run (printed)
  bool ignore_eos = false;      ///< --ignore-eos: never sample an end-of-generation token
  bool quiet = false;           ///< -q: only the text
  bool show_prompt = true;      ///< --no-display-prompt clears it
  bool verbose_prompt = false;  ///< --verbose-prompt: the prompt's tokens on stderr
  std::string dump_logits;      ///< --dump-logits FILE: every decode's logits (hosts.h DumpLogits)
};

/// Loads the model and a session (LoadModel), then generates as llama-cli: the prompt echoed
/// (unless !show_prompt), up to n_predict tokens streamed to stdout, stopping at an
/// end-of-generation token or a full context (said on stderr; no context shift). Unless quiet, the
/// load, prompt and generation times and the session's buffers follow on stderr. A prompt that
/// cannot fit the context is refused before it is tokenized when its byte length proves it.
/// Returns the exit status (errors: one line on stderr, status 1).
int Generate(const CommonOptions& c, GenerateOptions g);

}  // namespace stowage::run
