#include "perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kl_divergence.h"
#include "model_session.h"
#include "planner_args.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::run {
namespace {

/// One chunk as llama-perplexity evaluates it: a fresh KV cache, the chunk's first token replaced by
/// BOS when the vocabulary adds one (the text's token stays in the caller's copy), and the logits of
/// every position (chunk.size() x n_vocab).
Status EvaluateChunk(Session& s, const Tokenizer& tok, std::vector<int32_t> chunk,
                     std::vector<float>* logits) {
  if (tok.add_bos()) chunk[0] = tok.bos();
  s.Reset();
  return s.Decode(chunk, true, logits);
}

/// The error of a scored position whose logits are NaN or inf: a PPL or KLD of nan/inf says nothing.
/// `line_open`: stdout's last line is not ended yet (perplexity's "[1]ppl," line).
int FailNonFiniteLogits(const CommonOptions& c, int64_t chunk, int64_t pos, bool line_open) {
  if (line_open) EndStreamedLine();
  return Fail(DataLoss(
      c.model + ": chunk " + std::to_string(chunk + 1) + ", position " + std::to_string(pos) +
      ": the logits are not finite numbers (the model's weights or hyper-parameters produce NaN or inf)"));
}

// The negative log-likelihood (nats) of `token` under the softmax of `row`'s n_vocab logits, as
// llama-perplexity's log_softmax without a base file: the exponentials in float (expf of the float
// difference to the largest logit), summed in double, the result in double.
double TokenNll(const float* row, int64_t nv, int32_t token) {
  const float mx = *std::max_element(row, row + nv);
  double sum = 0;
  for (int64_t v = 0; v < nv; ++v) sum += std::exp(row[v] - mx);
  return -(double(row[token] - mx) - std::log(sum));
}

}  // namespace

int Perplexity(const CommonOptions& c, const std::string& file, const std::string& text, int max_chunks,
               const std::string& kl_base, int output_type) {
  auto loaded = LoadModel(c, true);
  if (!loaded.ok()) return Fail(loaded.status());
  const Tokenizer& tok = loaded->tokenizer;
  Session& s = *loaded->session;
  std::vector<int32_t> all;
  try {
    all = tok.Tokenize(text, true, false);
  } catch (const std::bad_alloc&) {
    return Fail(ResourceExhausted(file + ": out of memory while tokenizing " + std::to_string(text.size()) +
                                  " bytes of text"));
  }
  // The chunk size is the context asked for (llama-perplexity's params.n_ctx), not the context the
  // session got: llama.cpp 2026 pads the latter to 256 cells with flash attention (so does a plan
  // made on the fly for it). With --plan or -c 0 it is the session's.
  const int64_t n_ctx = c.plan.empty() && c.n_ctx > 0 ? std::min<int64_t>(c.n_ctx, s.n_ctx()) : s.n_ctx();
  if (n_ctx < 3)
    return Fail(InvalidArgument(
        "perplexity: a context of " + std::to_string(n_ctx) +
        " tokens is too small to score a token (the second half of each chunk is scored; use -c 3 or more)"));
  // As llama-perplexity: at least two contexts of text.
  if (static_cast<int64_t>(all.size()) < 2 * n_ctx)
    return Fail(InvalidArgument(file + ": " + std::to_string(all.size()) +
                                " tokens; perplexity with a context of " + std::to_string(n_ctx) +
                                " needs at least " + std::to_string(2 * n_ctx) +
                                " (use a longer text or a smaller -c)"));
  int64_t n_chunk = static_cast<int64_t>(all.size()) / n_ctx;
  if (max_chunks >= 0) n_chunk = std::min<int64_t>(n_chunk, max_chunks);
  const int64_t nv = s.n_vocab();
  // The base file: header and tokens now, each chunk's records as it is scored, made visible at the end.
  std::optional<tools::KlBaseWriter> base;
  std::vector<uint16_t> records;
  if (!kl_base.empty()) {
    const tools::KlBaseHeader h{static_cast<int32_t>(n_ctx), static_cast<int32_t>(nv),
                                static_cast<int32_t>(n_chunk)};
    auto w = tools::KlBaseWriter::Create(kl_base, h,
                                         std::vector<int32_t>(all.begin(), all.begin() + n_chunk * n_ctx));
    if (!w.ok()) return Fail(w.status());
    base.emplace(std::move(*w));
    records.resize(static_cast<size_t>(tools::KlScoredPerChunk(n_ctx) * tools::KlRecordSize(nv)));
    std::fprintf(stderr, "perplexity: saving all logits to %s\n",
                 kl_base.c_str());  // llama-perplexity's line
  }
  std::fprintf(stderr, "perplexity: calculating perplexity over %lld chunks, n_ctx=%lld\n",
               static_cast<long long>(n_chunk), static_cast<long long>(n_ctx));
  // As llama-perplexity: each chunk starts with BOS; score the second half of every chunk.
  double nll = 0, nll2 = 0;  // sums of the scored tokens' negative log-likelihood and its square
  int64_t count = 0;
  std::vector<float> logits;
  for (int64_t k = 0; k < n_chunk; ++k) {
    const std::vector<int32_t> chunk(all.begin() + k * n_ctx, all.begin() + (k + 1) * n_ctx);
    if (Status st = EvaluateChunk(s, tok, chunk, &logits); !st.ok()) return Fail(st);
    for (int64_t i = n_ctx / 2; i + 1 < n_ctx; ++i) {
      const float* row = logits.data() + i * nv;
      double token_nll;
      if (base) {  // llama-perplexity's NLL is then the one its encoder computes (in float)
        token_nll = tools::EncodeLogProbs(row, static_cast<int32_t>(nv), chunk[i + 1],
                                          records.data() + (i - n_ctx / 2) * tools::KlRecordSize(nv));
      } else {
        token_nll = TokenNll(row, nv, chunk[i + 1]);
      }
      if (!std::isfinite(token_nll)) return FailNonFiniteLogits(c, k, i, true);
      nll += token_nll;
      nll2 += token_nll * token_nll;
      ++count;
    }
    if (base)
      if (Status st = base->WriteChunk(records); !st.ok()) {
        EndStreamedLine();
        return Fail(st);
      }
    if (output_type == 1) {
      // llama-perplexity's batch of n_seq = n_batch / n_ctx chunks starts at chunk k - k % n_seq.
      const int64_t n_seq = std::max<int64_t>(1, static_cast<int64_t>(c.n_batch) / n_ctx);
      const double av = nll / count;
      double av2 = nll2 / count - av * av;
      if (av2 > 0) av2 = std::sqrt(av2 / (count - 1));
      std::printf("%8lld  %.4f  %f  %f\n", static_cast<long long>((k - k % n_seq) * n_ctx), std::exp(av), av,
                  av2);
    } else {
      std::printf("[%lld]%.4f,", static_cast<long long>(k) + 1, std::exp(nll / count));
    }
    std::fflush(stdout);
  }
  if (base)
    if (Status st = base->Commit(); !st.ok()) {
      EndStreamedLine();
      return Fail(st);
    }
  // llama-perplexity's uncertainty: the standard error of the mean NLL, times the perplexity.
  const double mean = nll / count, ppl = std::exp(mean);
  double var = nll2 / count - mean * mean;
  const double err = var > 0 && count > 1 ? std::sqrt(var / (count - 1)) * ppl : 0.0;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  return 0;
}

int KlDivergence(CommonOptions c, bool ctx_given, const std::string& base_path, int max_chunks) {
  auto base = tools::KlBaseReader::Open(base_path);
  if (!base.ok()) return Fail(base.status());
  const tools::KlBaseHeader h = base->header();
  if (c.plan.empty() && !ctx_given) c.n_ctx = static_cast<uint32_t>(h.n_ctx);
  auto loaded = LoadModel(c, true);
  if (!loaded.ok()) return Fail(loaded.status());
  const Tokenizer& tok = loaded->tokenizer;
  Session& s = *loaded->session;
  // The logits' width, as perplexity writes n_vocab.
  if (s.n_vocab() != h.n_vocab)
    return Fail(DataLoss(base_path + ": offset 12: n_vocab " + std::to_string(h.n_vocab) +
                         " of the base, but the model " + c.model + " has " + std::to_string(s.n_vocab()) +
                         " tokens (the base must come from a model with the same vocabulary)"));
  if (h.n_ctx > s.n_ctx())
    return Fail(OutOfRange(base_path + ": offset 8: n_ctx " + std::to_string(h.n_ctx) +
                           ": the base was computed with a context of " + std::to_string(h.n_ctx) +
                           " tokens, while the current context is " + std::to_string(s.n_ctx()) + " (" +
                           (c.plan.empty() ? "increase it with -c, or leave -c out to use the file's"
                                           : "re-plan with plan-model -c " + std::to_string(h.n_ctx)) +
                           ")"));
  const int64_t n_ctx = h.n_ctx, nv = h.n_vocab, nr = tools::KlRecordSize(nv), first = n_ctx / 2;
  int64_t n_chunk = h.n_chunk;
  if (max_chunks >= 0) n_chunk = std::min<int64_t>(n_chunk, max_chunks);
  std::fprintf(stderr, "kl_divergence: %lld chunks of n_ctx=%lld from %s (n_vocab %lld)\n",
               static_cast<long long>(n_chunk), static_cast<long long>(n_ctx), base_path.c_str(),
               static_cast<long long>(nv));
  tools::KlDivergenceSums sums;
  std::vector<float> kld_values, p_diff_values, logits;
  std::vector<uint16_t> records;
  for (int64_t k = 0; k < n_chunk; ++k) {
    if (Status st = base->ReadChunk(&records); !st.ok()) return Fail(st);
    const std::vector<int32_t> chunk(base->tokens().begin() + k * n_ctx,
                                     base->tokens().begin() + (k + 1) * n_ctx);
    if (Status st = EvaluateChunk(s, tok, chunk, &logits); !st.ok()) return Fail(st);
    for (int64_t i = first; i + 1 < n_ctx; ++i) {
      const tools::KlTokenResult r =
          tools::AccumulateKlDivergence(logits.data() + i * nv, static_cast<int32_t>(nv),
                                        records.data() + (i - first) * nr, chunk[i + 1], &sums);
      if (!std::isfinite(r.nll)) return FailNonFiniteLogits(c, k, i, false);
      kld_values.push_back(static_cast<float>(r.kld));
      p_diff_values.push_back(r.p_diff);
    }
    // llama.cpp prints the table header once, after the first batch of chunks (llama.cpp 2026
    // tools/perplexity kl_divergence: i == 0), then a line per chunk.
    if (k == 0) std::printf("\n%s\n", tools::KlChunkHeader());
    std::printf("%s\n", tools::FormatKlChunkLine(k + 1, sums).c_str());
    if (!FlushStdout()) return 1;
  }
  // The KLD quantiles follow the compat (a plan given with --plan: the default's).
  const bool feb25 = tools::LlamacppCompatOf(c.llamacpp_compat) == planner::LlamacppCompat::kFeb25;
  std::printf(
      "\n%s",
      tools::FormatKlStatistics(sums, std::move(kld_values), std::move(p_diff_values), feb25).c_str());
  return 0;
}

}  // namespace stowage::run
