// The perplexity subcommand, as llama-perplexity: the perplexity of a text file, writing
// llama-perplexity's --kl-divergence-base file on request, and --kl-divergence's comparison of the
// model with such a file (the file format and statistics: kl_divergence.h).
#pragma once

#include <cstdint>
#include <string>

#include "run_common.h"

namespace stowage::run {

/// perplexity's context (chunk size) when planning on the fly without -c: llama-perplexity's
/// (llama.cpp 2026 tools/perplexity: params.n_ctx = 512 before the command line is read).
inline constexpr uint32_t kPerplexityContext = 512;

/// llama-perplexity's score of `text` (the -f file `file` as ReadTextFile reads it): chunks of n_ctx
/// tokens (-c when planning on the fly, even where the context is padded beyond it; else the plan's), each
/// starting with BOS, the second half of each scored; at most `max_chunks` chunks
/// (< 0: all). Prints "[1]ppl,[2]ppl,..." and "Final estimate: PPL = X +/- E" as llama-perplexity.
/// With `kl_base` (not empty), also writes llama-perplexity's --kl-divergence-base file there: the
/// tokens and every scored position's log-probabilities (kl_divergence.h), atomically. With
/// `output_type` 1 (llama-perplexity --ppl-output-type 1) each chunk prints a line instead: the
/// position of the first token of its batch of n_batch / n_ctx chunks (llama-perplexity evaluates
/// that many chunks in one batch), the perplexity so far, the mean negative log-likelihood and its
/// standard error ("%8d  %.4f  %f  %f"). Returns the
/// exit status (errors: one line on stderr, status 1): a context under 3 tokens, a text of fewer
/// than 2 * n_ctx tokens, logits that are not finite, the base file's write errors.
int Perplexity(const CommonOptions& c, const std::string& file, const std::string& text, int max_chunks,
               const std::string& kl_base, int output_type = 0);

/// llama-perplexity --kl-divergence: evaluates the model on the chunks of the base file `base_path`
/// (its tokens and n_ctx, not a text) and compares each scored position's distribution with the
/// base's (kl_divergence.h). Prints llama.cpp's table line per chunk, then its statistics. Without
/// --plan or -c (`ctx_given`) the context is planned as the file's n_ctx; a smaller context is an
/// error, a larger one evaluates the file's chunks in it (as llama.cpp). `max_chunks` >= 0 scores
/// only the first ones. Returns the exit status (errors: one line on stderr, status 1).
int KlDivergence(CommonOptions c, bool ctx_given, const std::string& base_path, int max_chunks);

}  // namespace stowage::run
