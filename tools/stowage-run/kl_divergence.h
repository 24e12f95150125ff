// llama-perplexity's KL-divergence mode, as llama.cpp's examples/perplexity/perplexity.cpp does it
// (Feb 2025, commit c392e5094): the base file of quantized log-probabilities that
// `perplexity --kl-divergence-base FILE` writes, and the statistics with which
// `perplexity --kl-divergence --kl-divergence-base FILE` compares another model against it.
// Users compare e.g. a quantized model against its F32/F16 original, and a base written by
// llama-perplexity can be read here (and the other way round).
//
// The base file (llama.cpp writes it with std::ostream::write, so in the machine's byte order:
// little-endian on every machine either project runs on; this code assumes a little-endian host):
//
//   offset 0    char[8]   "_logits_"                             (magic, no terminating NUL)
//   offset 8    int32     n_ctx                                  tokens per chunk
//   offset 12   int32     n_vocab                                logits per position
//   offset 16   int32     n_chunk                                chunks in the file
//   offset 20   int32     tokens[n_chunk * n_ctx]                the text's tokens, chunk after chunk,
//                                                                as tokenized (the evaluation replaces a
//                                                                chunk's first token by BOS, not the file)
//   then, for each chunk, KlScoredPerChunk(n_ctx) = n_ctx - 1 - n_ctx/2 records of
//               uint16    record[KlRecordSize(n_vocab)]          one per scored position i in
//                                                                [n_ctx/2, n_ctx - 1): the distribution
//                                                                over the token at i + 1
//
// A record (llama.cpp's log_softmax with a uint16_t* output):
//   record[0..1]  float  scale         (max_logit - min_logit) / 65535
//   record[2..3]  float  min_log_prob  the log-probability (nats) that q = 0 stands for
//   record[4 + v] uint16 q[v]          log p(v) ~= scale * q[v] + min_log_prob, for v < n_vocab
//   one uint16 of padding (0) when n_vocab is odd, so a record is a whole number of floats' size.
// min_logit is the row's smallest logit, but at least max_logit - 16: tokens 16 nats or more below
// the top one all get q = 0 (the KL sum then skips log-probabilities at or below -16).
//
// Threading: none inside; every function works on caller-owned memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/status.h"

namespace stowage::tools {

/// The file's first 8 bytes.
inline constexpr char kKlBaseMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
/// Bytes before the tokens: magic, n_ctx, n_vocab, n_chunk.
inline constexpr int64_t kKlBaseHeaderBytes = 20;

/// uint16 values in one record: 2 * ceil(n_vocab / 2) + 4 (llama.cpp's `nv`).
inline int64_t KlRecordSize(int64_t n_vocab) { return 2 * ((n_vocab + 1) / 2) + 4; }
/// Records per chunk: the second half of the chunk, less its last position (which predicts a token
/// outside the chunk), as llama-perplexity scores it.
inline int64_t KlScoredPerChunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

/// Encodes one row of `n_vocab` logits into `record` (KlRecordSize(n_vocab) uint16, padding
/// included) and returns the negative log-likelihood (nats) of `token`, computed as llama.cpp does
/// (max_logit + log(sum exp(logit - max_logit)) - logit[token], in float).
/// Mirrors perplexity.cpp log_softmax(n_vocab, logits, uint16_t * log_prob, tok). One difference:
/// a code that would round above 65535 (not reachable with finite logits) is clamped to 65535.
double EncodeLogProbs(const float* logits, int32_t n_vocab, int32_t token, uint16_t* record);

/// The log-probability (nats) that `record` stores for token `v` (< n_vocab).
float DecodeLogProb(const uint16_t* record, int32_t v);
/// The record's scale and min_log_prob (the two floats of its header).
float RecordScale(const uint16_t* record);
float RecordMinLogProb(const uint16_t* record);

/// Running sums over the scored tokens (llama.cpp's kl_divergence_result): Q is the evaluated
/// model, base the file's; nll values are in nats, p values are probabilities in [0, 1].
struct KlDivergenceSums {
  double sum_nll = 0, sum_nll2 = 0;            ///< NLL of the text's token under Q, and its square
  double sum_nll_base = 0, sum_nll_base2 = 0;  ///< the same under the base
  double sum_nll_nll_base = 0;                 ///< product of the two (their covariance)
  double sum_kld = 0, sum_kld2 = 0;            ///< KL(base || Q) per token, and its square
  double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;  ///< dp = p_Q(token) - p_base(token)
  float max_p_diff = 0;                                     ///< largest |dp|
  size_t n_same_top = 0;                                    ///< tokens whose most likely token agrees
  size_t count = 0;                                         ///< tokens scored
};

/// One scored token's values.
struct KlTokenResult {
  double kld = 0;  ///< KL(base || Q) = sum_v p_base(v) (log p_base(v) - log p_Q(v)), v with log p_base > -16
  float p_diff = 0;  ///< p_Q(token) - p_base(token)
  float nll = 0;     ///< -log p_Q(token); not finite when the logits are not
};

/// Compares one row of Q's logits with the base `record` for the text's `token` (< n_vocab) and
/// adds the result to `sums`. The top tokens are the first index of the largest value (Q's logits,
/// the base's decoded log-probabilities). Mirrors perplexity.cpp log_softmax(n_vocab, logits,
/// const uint16_t * base_log_prob, tok, kld), float arithmetic included.
KlTokenResult AccumulateKlDivergence(const float* logits, int32_t n_vocab, const uint16_t* record,
                                     int32_t token, KlDivergenceSums* sums);

/// The table header llama.cpp prints before every chunk's line (no newline).
const char* KlChunkHeader();
/// One chunk's line of kl_divergence (1-based `chunk`; running values over every token so far):
/// PPL(Q) ± unc, ln(PPL(Q)/PPL(base)) ± unc, mean KLD ± unc, RMS dp ± unc %, same top p ± unc %.
/// No newline.
std::string FormatKlChunkLine(int64_t chunk, const KlDivergenceSums& sums);
/// kl_divergence's final "====== Perplexity statistics ======", "KL divergence statistics" and
/// "Token probability statistics" sections, lines ending in '\n'. `kld_values` and `p_diff_values`
/// hold every scored token's KlTokenResult (sorted here). Empty when fewer than 100 tokens were
/// scored, as llama.cpp ("we do not wish to do statistics on so few values"). The KLD quantiles
/// are llama-perplexity's of the compat: `feb25` (Feb 2025) prints the 99.0% line twice where 95.0%
/// was meant and no 90.0% or 0.1%; otherwise (2026, llama-perplexity 3.22.1) 99.9, 99.0, 95.0,
/// 90.0, median, 10.0, 5.0, 1.0 and 0.1%.
std::string FormatKlStatistics(const KlDivergenceSums& sums, std::vector<float> kld_values,
                               std::vector<float> p_diff_values, bool feb25);

/// The three int32 fields after the magic.
struct KlBaseHeader {
  int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
};

/// Writes a base file through an AtomicFile: nothing appears at `path` unless every chunk was
/// written and Commit() succeeded (a failed or interrupted run leaves the old file, or none).
/// Use: Create (header and tokens), WriteChunk once per chunk in order, Commit.
class KlBaseWriter {
 public:
  /// `tokens` holds header.n_chunk * header.n_ctx tokens. Errors: kIoError naming `path`;
  /// kInvalidArgument when the sizes disagree or n_ctx < 3.
  static Result<KlBaseWriter> Create(const std::string& path, const KlBaseHeader& header,
                                     const std::vector<int32_t>& tokens);
  /// `records`: KlScoredPerChunk(n_ctx) * KlRecordSize(n_vocab) uint16.
  Status WriteChunk(const std::vector<uint16_t>& records);
  /// Errors: kFailedPrecondition when fewer chunks than n_chunk were written; kIoError.
  Status Commit();

 private:
  KlBaseWriter(AtomicFile file, KlBaseHeader header) : file_(std::move(file)), header_(header) {}
  AtomicFile file_;
  KlBaseHeader header_;
  int64_t chunks_written_ = 0;
};

/// Reads a base file: the header and tokens at Open, the records one chunk at a time. Every error is
/// one line naming the file, the byte offset and the field, and what was expected.
class KlBaseReader {
 public:
  /// Reads and checks the header and tokens: the magic, n_ctx >= 3, n_vocab >= 1, n_chunk >= 1,
  /// every token in [0, n_vocab), and (for a regular file) that the size is exactly what the header
  /// says. A pipe or FIFO is read too (`/dev/stdin`), opened without waiting for a writer: one that
  /// gives no byte is refused as a FIFO with no writer, at once (llama-perplexity's ifstream would
  /// block); a device, socket or folder is refused before any read. Errors: kIoError (cannot open,
  /// not a regular file, a FIFO with no writer, read error), kDataLoss (wrong magic, truncated, a size
  /// that disagrees with the header, a token out of range, a field out of range).
  static Result<KlBaseReader> Open(const std::string& path);

  const KlBaseHeader& header() const { return header_; }
  /// n_chunk * n_ctx tokens, as the file stores them.
  const std::vector<int32_t>& tokens() const { return tokens_; }

  /// Reads the next chunk's records (KlScoredPerChunk(n_ctx) * KlRecordSize(n_vocab) uint16);
  /// chunks come in file order. Errors: kDataLoss when the file ends early or a record's scale or
  /// min_log_prob is not a finite number; kIoError.
  Status ReadChunk(std::vector<uint16_t>* records);

 private:
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  KlBaseReader(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  /// Reads `size` bytes at the current offset; `what` names the field for a truncation message.
  Status ReadExact(void* data, size_t size, const std::string& what);

  std::string path_;
  std::unique_ptr<std::FILE, CloseFile> f_;
  int64_t offset_ = 0;
  int64_t chunks_read_ = 0;
  KlBaseHeader header_;
  std::vector<int32_t> tokens_;
};

}  // namespace stowage::tools
