// stowage-run: executes a plan (or plans on the fly for this machine) and generates text,
// measures perplexity, or benchmarks prompt processing and generation (llama-bench style).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "cli_numbers.h"
#include "from_probe.h"
#include "kl_divergence.h"
#include "llama_args.h"
#include "mapped_file_guard.h"
#include "planner_args.h"
#include "probed_machine.h"
#include "prompt_escapes.h"
#include "stdout_check.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/sampler.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"
#include "text_file.h"

using namespace stowage;

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The largest -t a Session accepts on this machine: 4x the hardware threads (CheckThreadCount,
/// session.h), so that -t is refused, and --help states its range, in the common wording.
int MaxThreads() { return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

/// Flushes stdout; false after printing FinishStdout's one line when the text cannot be written
/// (the stream's error state is then cleared, so main's FinishStdout does not print a second line).
/// Generation stops at the first lost write instead of computing text nobody can read.
bool FlushStdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
  const int err = errno;
  std::fprintf(stderr, "stowage-run: error: cannot write standard output: %s\n",
               err != 0 ? std::strerror(err) : "an earlier write failed");
  std::clearerr(stdout);
  return false;
}

// Ends the streamed text's line and flushes it before an error line on (unbuffered) stderr.
void EndStreamedLine() {
  std::printf("\n");
  FlushStdout();
}

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed comes before the error line when both go to one file
  std::fprintf(stderr, "stowage-run: %s\n", s.message().c_str());
  return 1;
}

/// Upper bound of token counts on the command line (-c, -b, -ub, -n, -p): 2^24.
constexpr int kMaxTokens = 16777216;
/// --seed's default, as llama.cpp's LLAMA_DEFAULT_SEED: a random seed for each run (printed).
constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;
/// Context of a generation planned on the fly without -c: llama-cli's default (common_params n_ctx).
constexpr uint32_t kDefaultGenerationContext = 4096;

struct Common {
  std::string model, plan;
  int threads = 0;
  uint32_t n_ctx = 0, n_batch = 2048, n_ubatch = 512;
  int n_gpu_layers = 0;
  std::string cache_type_k = "f16", cache_type_v = "f16";
  std::string flash_attn = "off";  ///< -fa: on, off or auto, normalized by tools::FlashAttnValue
  bool huge_pages = false;
  bool llamacpp_numerics = false;
  /// --cpu-isa: the highest CPU kernel level (avx512vnni, avx512, avx2, scalar; SessionOptions::cpu_max_isa)
  std::string cpu_isa = "avx512vnni";
  bool no_mmap = false, no_repack = false, no_kv_offload = false;
  bool no_fit_check = false;  ///< --no-fit-check: run a plan made on the fly that does not fit (a warning)
};

/// The model's tokenizer; what it accepted with llama.cpp's fallbacks is printed as warnings.
Result<Tokenizer> LoadTokenizer(const GgufFile& gguf) {
  auto tok = Tokenizer::FromGguf(gguf);
  if (tok.ok())
    for (const std::string& w : tok->warnings())
      std::fprintf(stderr, "stowage-run: warning: %s\n", w.c_str());
  return tok;
}

/// Plans the model for this machine (no plan file given): the probed devices (list-devices) as
/// manifests, planned by planner::Plan as plan-model plans, with plan-model's fit check.
Result<std::vector<uint8_t>> PlanOnTheFly(const GgufFile& gguf, const Common& c, bool quiet) {
  planner::PlanRequest request;
  request.context.n_ctx = c.n_ctx;
  request.context.n_batch = c.n_batch;
  request.context.n_ubatch = c.n_ubatch;
  auto tk = ParseGgmlType(c.cache_type_k);
  if (!tk.ok()) return InvalidArgument("--cache-type-k: " + tk.status().message());
  auto tv = ParseGgmlType(c.cache_type_v);
  if (!tv.ok()) return InvalidArgument("--cache-type-v: " + tv.status().message());
  request.context.type_k = *tk;
  request.context.type_v = *tv;
  request.flash_attn = tools::FlashAttnModeOf(c.flash_attn);
  request.fit = c.n_gpu_layers == tools::kAutoGpuLayers;
  request.placement.n_gpu_layers = request.fit ? 0 : c.n_gpu_layers;
  request.placement.use_mmap = !c.no_mmap;
  request.placement.no_repack = c.no_repack;
  request.placement.offload_kqv = !c.no_kv_offload;
  request.fit_check = !c.no_fit_check;
  request.flags = "stowage-run (planned on the fly for this machine)";
  // Probed GPUs numbered in probe order (CUDA0, CUDA1, ...), as plan-model does.
  STOWAGE_ASSIGN_OR_RETURN(
      std::vector<planner::DeviceManifest> machine,
      tools::ProbedManifests(ProbeDevices().devices, [](const ProbedDevice&) { return true; }));
  // The model's warnings always; llama.cpp's context and GPU warnings, the -ngl auto result and
  // -fa auto turning flash attention off unless quiet.
  auto print = [quiet](const planner::PlanMessage& msg) {
    using Kind = planner::PlanMessageKind;
    if (msg.kind == Kind::kWarning)
      std::fprintf(stderr, "stowage-run: warning: %s\n", msg.text.c_str());
    else if (quiet)
      return;
    else if (msg.kind == Kind::kContextOverflow || msg.kind == Kind::kGpuLayersIgnored)
      std::fprintf(stderr, "stowage-run: warning: %s\n", msg.text.c_str());
    else if (msg.kind == Kind::kFitSearched)
      std::fprintf(stderr, "stowage-run: -ngl auto: %d layers fit the GPUs\n", msg.n_gpu_layers);
    else if (msg.kind == Kind::kFlashAttnDisabled)
      std::fprintf(stderr, "%s\n", msg.text.c_str());
  };
  STOWAGE_ASSIGN_OR_RETURN(planner::PlanResult planned, planner::Plan(gguf, machine, request, print));
  // A plan that does not fit this machine's memory would otherwise be allocated (and its weights
  // repacked) before anything fails.
  if (!planned.fit.ok()) {
    if (!c.no_fit_check) return planned.fit;
    std::fflush(stdout);
    std::fprintf(stderr, "stowage-run: warning: %s (running anyway: --no-fit-check)\n",
                 planned.fit.message().c_str());
  }
  return std::move(planned.bytes);
}

/// The model file (-m), mapped once for everything this process reads from it (tokenizer,
/// planning on the fly, the session's weights), with a truncation of the file while it is in use
/// reported by name instead of a silent SIGBUS (mapped_file_guard.h).
Result<std::shared_ptr<const GgufFile>> OpenModel(const Common& c) {
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> gguf, GgufFile::Open(c.model));
  tools::GuardMappedFile("stowage-run", gguf->path(), gguf->bytes(), gguf->file_size());
  return gguf;
}

/// A session of the model `gguf` (OpenModel), for the plan given with --plan or one made on the fly.
Result<std::unique_ptr<Session>> OpenSession(const Common& c, const std::shared_ptr<const GgufFile>& gguf,
                                             bool quiet, bool profile_ops = false) {
  SessionOptions opts;
  opts.profile_ops = profile_ops;
  opts.n_threads = c.threads;
  opts.copy_mapped_weights_to_huge_pages = c.huge_pages;
  opts.llamacpp_numerics = c.llamacpp_numerics;
  opts.cpu_max_isa = c.cpu_isa == "scalar"   ? CpuIsa::kScalar
                     : c.cpu_isa == "avx2"   ? CpuIsa::kAvx2
                     : c.cpu_isa == "avx512" ? CpuIsa::kAvx512
                                             : CpuIsa::kAvx512Vnni;
  // A percentage on the terminal while weights load; nothing when stderr is not a terminal.
  static int last_pct = -1;
  if (!quiet && isatty(fileno(stderr)))
    opts.progress = [](float f) {
      const int pct = static_cast<int>(f * 100);
      if (pct != last_pct) {
        std::fprintf(stderr, "\rloading model: %3d%%%s", pct, pct >= 100 ? "\r                    \r" : "");
        last_pct = pct;
      }
    };
  if (!c.plan.empty()) return Session::Create(c.plan, gguf, opts);
  STOWAGE_ASSIGN_OR_RETURN(auto bytes, PlanOnTheFly(*gguf, c, quiet));
  return Session::CreateFromPlanBytes(std::move(bytes), gguf, opts);
}

void PrintBuffers(const Session& s) {
  std::fprintf(stderr, "memory allocated per buffer (planned == allocated):\n");
  std::fprintf(stderr, "  %-12s %-7s %-6s %14s\n", "buffer", "usage", "device", "size");
  for (const auto& b : s.Buffers())
    std::fprintf(stderr, "  %-12s %-7s %-6s %10.2f MiB%s%s\n", b.name.c_str(), b.usage.c_str(),
                 b.device.c_str(), b.allocated / 1048576.0, b.mapped ? " (mapped)" : "",
                 b.planned == b.allocated ? "" : "  MISMATCH with the plan");
}

/// The text of a file given with -f (the prompt, or perplexity's text) as llama.cpp's common -f
/// handler reads it: the whole file, one final newline dropped, then the escapes expanded unless
/// --no-escape (common_params_parse_ex). Unlike llama.cpp, the file must be a regular file or a
/// pipe (`-f /dev/stdin`) of at most tools::kMaxTextFileBytes (256 MiB): a device (/dev/zero) or
/// folder, or more text, is one error naming it, what it should be (`what`) and the limit hit
/// (tools::ReadTextFile). A FIFO is read without waiting for its writer: one with no writer (nothing
/// read) is refused as such, rather than read as an empty file or waited on forever.
Result<std::string> ReadTextFile(const std::string& file, const char* what, bool escape) {
  if (file.empty()) return IoError("-f '': no file name (expected " + std::string(what) + ")");
  Result<std::string> read = IoError(file);
  try {
    read = tools::ReadTextFile(file, what);
  } catch (const std::bad_alloc&) {  // the text takes up to tools::kMaxTextFileBytes
    return ResourceExhausted(file + ": out of memory while reading it, expected " + std::string(what));
  }
  STOWAGE_ASSIGN_OR_RETURN(std::string text, std::move(read));
  // A FIFO is opened without waiting for a writer (waiting could hang forever): one that gave no
  // bytes is said to be one, not an empty file; start its writer first (`-f /dev/stdin` from a pipe).
  struct stat st;
  if (text.empty() && ::stat(file.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
    return IoError(file +
                   ": a FIFO or pipe with no writer (nothing was read; start the writer before stowage-run), "
                   "expected " +
                   std::string(what));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!escape) return text;
  try {
    return tools::ProcessEscapes(text);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(file + ": out of memory while reading it, expected " + std::string(what));
  }
}

/// What Generate prints besides the generated text (llama-cli's switches).
struct GenerateDisplay {
  bool quiet = false;           ///< -q: only the text
  bool show_prompt = true;      ///< --no-display-prompt clears it
  bool verbose_prompt = false;  ///< --verbose-prompt: the prompt's tokens on stderr
};

/// The most bytes of text one token of `tok` can stand for, when tokenizing drops no byte of the
/// text: then a text of N bytes makes at least N / result tokens, and one longer than n_ctx times
/// the result cannot fit a context of n_ctx tokens, which is known before it is tokenized (a
/// 100 MB prompt would otherwise take gigabytes to tokenize). The bound holds for SPM and BPE
/// vocabularies that have a token for every byte (SPM's byte fallback "<0xNN>", BPE's byte
/// alphabet), as llama.cpp then emits a byte's token rather than dropping it, and no token strips
/// the whitespace next to it (phi-3's special tokens, kTokenAttrLstrip/Rstrip); a token's raw text
/// (TokenText) is never shorter than the bytes it stands for ("▁" for a space, "<0x0A>", "Ġ").
/// 0 when the bound does not hold (WPM drops whitespace and accents; a vocabulary missing a byte).
int64_t MaxTextBytesPerToken(const Tokenizer& tok) {
  if (tok.type() == VocabType::kWpm) return 0;
  bool byte_token[256] = {};
  int64_t longest = 0;
  for (int32_t t = 0; t < tok.n_vocab(); ++t) {
    if ((tok.TokenAttrs(t) & (kTokenAttrLstrip | kTokenAttrRstrip)) != 0) return 0;
    longest = std::max<int64_t>(longest, static_cast<int64_t>(tok.TokenText(t).size()));
    // A byte's own token: SPM's "<0xNN>" (byte) or BPE's byte-alphabet entry (normal), not a
    // user-defined or control token that happens to spell one byte.
    if ((tok.TokenAttrs(t) & (kTokenAttrNormal | kTokenAttrByte)) == 0) continue;
    const std::string piece = tok.TokenToPiece(t, /*special=*/false);
    if (piece.size() == 1) byte_token[static_cast<unsigned char>(piece[0])] = true;
  }
  for (bool b : byte_token)
    if (!b) return 0;
  return longest;
}

/// `prompt_source` names the prompt in messages: the -f file, or "the prompt (-p)".
int Generate(const Common& c, const std::string& prompt_source, const std::string& prompt, int n_predict,
             SamplerParams sp, bool ignore_eos, const GenerateDisplay& display) {
  const bool quiet = display.quiet;
  if (sp.seed == kRandomSeed) sp.seed = std::random_device{}();
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  auto tok = LoadTokenizer(**gguf);
  if (!tok.ok()) return Fail(tok.status());
  auto session = OpenSession(c, *gguf, quiet);
  if (!session.ok()) return Fail(session.status());
  Session& s = **session;
  const char* const ctx_hint = c.plan.empty() ? "-c" : "the plan's; re-plan with plan-model -c";
  // A prompt too long for the context is refused from its length before it is tokenized, which
  // keeps memory bounded (MaxTextBytesPerToken); the token count below catches the rest.
  if (const int64_t per_token = MaxTextBytesPerToken(*tok);
      per_token > 0 && static_cast<int64_t>(prompt.size()) > s.n_ctx() * per_token)
    return Fail(OutOfRange(prompt_source + ": a prompt of " + std::to_string(prompt.size()) +
                           " bytes exceeds the context of " + std::to_string(s.n_ctx()) + " tokens (" +
                           ctx_hint + "): it makes at least " +
                           std::to_string((static_cast<int64_t>(prompt.size()) + per_token - 1) / per_token) +
                           " tokens, as no token of the vocabulary stands for more than " +
                           std::to_string(per_token) + " bytes"));
  std::vector<int32_t> tokens;
  try {
    tokens = tok->Tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  } catch (const std::bad_alloc&) {
    return Fail(ResourceExhausted(prompt_source + ": out of memory while tokenizing a prompt of " +
                                  std::to_string(prompt.size()) + " bytes"));
  }
  if (tokens.empty()) return Fail(InvalidArgument("the prompt is empty (no tokens)"));
  const int64_t room = s.n_ctx() - static_cast<int64_t>(tokens.size());
  if (room < 0)
    return Fail(OutOfRange("prompt of " + std::to_string(tokens.size()) + " tokens exceeds the context of " +
                           std::to_string(s.n_ctx()) + " tokens (" +
                           (c.plan.empty() ? "-c" : "the plan's; re-plan with plan-model -c") + ")"));
  // As llama-cli: -n -1 generates until an end-of-generation token, and any -n stops when the
  // context is full (no context shift), saying so.
  const bool to_context_end = n_predict < 0 || n_predict > room;
  if (to_context_end) n_predict = static_cast<int>(room);
  // --repeat-last-n -1: the whole context (llama.cpp common).
  if (sp.penalty_last_n < 0)
    sp.penalty_last_n = static_cast<int32_t>(std::min<int64_t>(s.n_ctx(), INT32_MAX));
  // --ignore-eos: end-of-generation tokens are never sampled (llama.cpp: a logit bias of -inf).
  std::vector<int32_t> eog;
  if (ignore_eos)
    for (int32_t id = 0; id < tok->n_vocab() && id < s.n_vocab(); ++id)
      if (tok->IsEog(id)) eog.push_back(id);
  Sampler sampler(sp);
  for (int32_t t : tokens) sampler.Accept(t);  // the prompt counts for the penalties, as in llama-cli
  if (!quiet && sp.temperature > 0) std::fprintf(stderr, "sampler seed: %u\n", sp.seed);  // as llama.cpp
  if (display.verbose_prompt) {  // llama-cli's format
    std::fprintf(stderr, "main: prompt: '%s'\n", prompt.c_str());
    std::fprintf(stderr, "main: number of tokens in prompt = %zu\n", tokens.size());
    for (int32_t t : tokens) std::fprintf(stderr, "%6d -> '%s'\n", t, tok->TokenToPiece(t, true).c_str());
    std::fprintf(stderr, "\n");
  }
  if (display.show_prompt) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);  // all of it: a NUL (\x00) does not end it
    if (!FlushStdout()) return 1;
  }
  std::vector<float> logits;
  const auto t0 = Clock::now();
  if (Status st = s.Decode(tokens, false, &logits); !st.ok()) {
    EndStreamedLine();
    return Fail(st);
  }
  const auto t1 = Clock::now();
  int generated = 0;
  bool eog_reached = false;
  for (; generated < n_predict; ++generated) {
    for (int32_t id : eog) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    const int32_t next = sampler.Sample(logits.data(), static_cast<int>(s.n_vocab()));
    if (next < 0) {  // Sampler: no logit is a number above -inf
      EndStreamedLine();
      return Fail(DataLoss(c.model + ": the logits at position " +
                           std::to_string(tokens.size() + generated - 1) +
                           " are all NaN or -inf, so no token can be sampled (the model's weights or "
                           "hyper-parameters produce non-finite values)"));
    }
    sampler.Accept(next);
    if (tok->IsEog(next)) {
      eog_reached = true;
      break;
    }
    std::printf("%s", tok->TokenToPiece(next, false).c_str());
    if (!FlushStdout()) return 1;
    if (generated + 1 == n_predict) {
      ++generated;
      break;
    }
    if (Status st = s.Decode({next}, false, &logits); !st.ok()) {
      EndStreamedLine();
      return Fail(st);
    }
  }
  const auto t2 = Clock::now();
  std::printf("\n");
  if (!FlushStdout()) return 1;
  if (!quiet && to_context_end && !eog_reached)
    std::fprintf(
        stderr,
        "stowage-run: context full (%lld tokens) and context shift is not supported => stopping (%s)\n",
        static_cast<long long>(s.n_ctx()),
        c.plan.empty() ? "-c for a larger context" : "re-plan with plan-model -c");
  if (!quiet) {
    std::fprintf(stderr, "\nload time   = %8.2f ms\n", s.load_seconds() * 1e3);
    std::fprintf(stderr, "prompt eval = %8.2f ms / %zu tokens (%8.2f tokens per second)\n",
                 Seconds(t0, t1) * 1e3, tokens.size(), tokens.size() / std::max(Seconds(t0, t1), 1e-9));
    std::fprintf(stderr, "generation  = %8.2f ms / %d tokens (%8.2f tokens per second)\n",
                 Seconds(t1, t2) * 1e3, generated, generated / std::max(Seconds(t1, t2), 1e-9));
    PrintBuffers(s);
  }
  return 0;
}

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
int FailNonFiniteLogits(const Common& c, int64_t chunk, int64_t pos, bool line_open) {
  if (line_open) EndStreamedLine();
  return Fail(DataLoss(
      c.model + ": chunk " + std::to_string(chunk + 1) + ", position " + std::to_string(pos) +
      ": the logits are not finite numbers (the model's weights or hyper-parameters produce NaN or inf)"));
}

/// llama-perplexity's score of `text` (the -f file as ReadTextFile reads it): chunks of n_ctx
/// tokens, each starting with BOS, the second half of each scored; at most `max_chunks` chunks
/// (< 0: all). Prints "[1]ppl,[2]ppl,..." and "Final estimate: PPL = X +/- E" as llama-perplexity.
/// With `kl_base` (not empty), also writes llama-perplexity's --kl-divergence-base file there: the
/// tokens and every scored position's log-probabilities (kl_divergence.h), atomically.
int Perplexity(const Common& c, const std::string& file, const std::string& text, int max_chunks,
               const std::string& kl_base) {
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  auto tok = LoadTokenizer(**gguf);
  if (!tok.ok()) return Fail(tok.status());
  auto session = OpenSession(c, *gguf, true);
  if (!session.ok()) return Fail(session.status());
  Session& s = **session;
  std::vector<int32_t> all;
  try {
    all = tok->Tokenize(text, true, false);
  } catch (const std::bad_alloc&) {
    return Fail(ResourceExhausted(file + ": out of memory while tokenizing " + std::to_string(text.size()) +
                                  " bytes of text"));
  }
  const int64_t n_ctx = s.n_ctx();
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
    if (Status st = EvaluateChunk(s, *tok, chunk, &logits); !st.ok()) return Fail(st);
    for (int64_t i = n_ctx / 2; i + 1 < n_ctx; ++i) {
      const float* row = logits.data() + i * nv;
      double token_nll;
      if (base) {  // llama-perplexity's NLL is then the one its encoder computes (in float)
        token_nll = tools::EncodeLogProbs(row, static_cast<int32_t>(nv), chunk[i + 1],
                                          records.data() + (i - n_ctx / 2) * tools::KlRecordSize(nv));
      } else {
        const float mx = *std::max_element(row, row + nv);
        double sum = 0;
        for (int64_t v = 0; v < nv; ++v) sum += std::exp(double(row[v]) - mx);
        token_nll = -(double(row[chunk[i + 1]]) - mx - std::log(sum));
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
    std::printf("[%lld]%.4f,", static_cast<long long>(k + 1), std::exp(nll / count));
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

/// llama-perplexity --kl-divergence: evaluates the model on the chunks of the base file `base_path`
/// (its tokens and n_ctx, not a text) and compares each scored position's distribution with the
/// base's (kl_divergence.h). Prints llama.cpp's table line per chunk, then its statistics. Without
/// --plan or -c the context is planned as the file's n_ctx; a smaller context is an error, a larger
/// one evaluates the file's chunks in it (as llama.cpp). `max_chunks` >= 0 scores only the first ones.
int KlDivergence(Common c, bool ctx_given, const std::string& base_path, int max_chunks) {
  auto base = tools::KlBaseReader::Open(base_path);
  if (!base.ok()) return Fail(base.status());
  const tools::KlBaseHeader h = base->header();
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  auto tok = LoadTokenizer(**gguf);
  if (!tok.ok()) return Fail(tok.status());
  if (c.plan.empty() && !ctx_given) c.n_ctx = static_cast<uint32_t>(h.n_ctx);
  auto session = OpenSession(c, *gguf, true);
  if (!session.ok()) return Fail(session.status());
  Session& s = **session;
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
    if (Status st = EvaluateChunk(s, *tok, chunk, &logits); !st.ok()) return Fail(st);
    for (int64_t i = first; i + 1 < n_ctx; ++i) {
      const tools::KlTokenResult r =
          tools::AccumulateKlDivergence(logits.data() + i * nv, static_cast<int32_t>(nv),
                                        records.data() + (i - first) * nr, chunk[i + 1], &sums);
      if (!std::isfinite(r.nll)) return FailNonFiniteLogits(c, k, i, false);
      kld_values.push_back(static_cast<float>(r.kld));
      p_diff_values.push_back(r.p_diff);
    }
    // llama.cpp prints the table header before every chunk's line.
    std::printf("\n%s\n%s\n", tools::KlChunkHeader(), tools::FormatKlChunkLine(k + 1, sums).c_str());
    if (!FlushStdout()) return 1;
  }
  std::printf("\n%s",
              tools::FormatKlStatistics(sums, std::move(kld_values), std::move(p_diff_values)).c_str());
  return 0;
}

/// llama.cpp's name of a general.file_type value (llama_model_ftype_name), as llama-bench's model
/// column shows it; "ftype N" for values it does not know, "?" when the key is absent.
std::string FtypeName(int64_t ftype) {
  static const std::pair<int, const char*> kNames[] = {{0, "all F32"},
                                                       {1, "F16"},
                                                       {2, "Q4_0"},
                                                       {3, "Q4_1"},
                                                       {7, "Q8_0"},
                                                       {8, "Q5_0"},
                                                       {9, "Q5_1"},
                                                       {10, "Q2_K - Medium"},
                                                       {11, "Q3_K - Small"},
                                                       {12, "Q3_K - Medium"},
                                                       {13, "Q3_K - Large"},
                                                       {14, "Q4_K - Small"},
                                                       {15, "Q4_K - Medium"},
                                                       {16, "Q5_K - Small"},
                                                       {17, "Q5_K - Medium"},
                                                       {18, "Q6_K"},
                                                       {19, "IQ2_XXS - 2.0625 bpw"},
                                                       {20, "IQ2_XS - 2.3125 bpw"},
                                                       {21, "Q2_K - Small"},
                                                       {22, "IQ3_XS - 3.3 bpw"},
                                                       {23, "IQ3_XXS - 3.0625 bpw"},
                                                       {24, "IQ1_S - 1.5625 bpw"},
                                                       {25, "IQ4_NL - 4.5 bpw"},
                                                       {26, "IQ3_S - 3.4375 bpw"},
                                                       {27, "IQ3_S mix - 3.66 bpw"},
                                                       {28, "IQ2_S - 2.5 bpw"},
                                                       {29, "IQ2_M - 2.7 bpw"},
                                                       {30, "IQ4_XS - 4.25 bpw"},
                                                       {31, "IQ1_M - 1.75 bpw"},
                                                       {32, "BF16"},
                                                       {36, "TQ1_0 - 1.69 bpw ternary"},
                                                       {37, "TQ2_0 - 2.06 bpw ternary"},
                                                       {38, "MXFP4 MoE"}};
  if (ftype < 0) return "?";
  for (const auto& [v, name] : kNames)
    if (v == ftype) return name;
  return "ftype " + std::to_string(ftype);
}

/// llama-bench's model column: "<arch> <size class> <ftype>"; the size class is llama.cpp's
/// per-architecture table (LLM_TYPE_*), which Stowage does not keep, so this is "<arch> <ftype>".
std::string ModelDescription(const GgufFile& gguf) {
  const std::string arch = gguf.GetStringOr("general.architecture", "?").value();
  const auto ftype = gguf.GetU32Or("general.file_type", UINT32_MAX);
  std::string model_desc = arch + " ";
  if (ftype.ok() && *ftype != UINT32_MAX) {
    model_desc += FtypeName(*ftype);
  } else {
    // No general.file_type: llama_model_loader guesses it from the most common tensor type.
    std::map<GgmlType, int> count;
    for (const auto& t : gguf.tensors()) ++count[t.type];
    GgmlType most = GgmlType::F32;
    int best = -1;
    for (const auto& [t, n] : count)
      if (n > best) {
        best = n;
        most = t;
      }
    static const std::pair<GgmlType, int> kGuess[] = {
        {GgmlType::F32, 0},   {GgmlType::F16, 1},     {GgmlType::BF16, 32},  {GgmlType::Q4_0, 2},
        {GgmlType::Q4_1, 3},  {GgmlType::Q5_0, 8},    {GgmlType::Q5_1, 9},   {GgmlType::Q8_0, 7},
        {GgmlType::Q2_K, 10}, {GgmlType::Q3_K, 12},   {GgmlType::Q4_K, 15},  {GgmlType::Q5_K, 17},
        {GgmlType::Q6_K, 18}, {GgmlType::IQ4_NL, 25}, {GgmlType::IQ4_XS, 30}};
    int64_t guessed = -1;
    for (const auto& [t, f] : kGuess)
      if (t == most) guessed = f;
    model_desc += guessed >= 0 ? FtypeName(guessed) + " (guessed)" : "?";
  }
  return model_desc;
}

// The op profile of one bench test as a markdown table (per token, largest first).
void PrintProfile(const std::vector<OpProfileEntry>& rows, const std::string& graph, const char* test, int n,
                  int reps) {
  double total = 0;
  for (const auto& e : rows)
    if (e.graph == graph && e.op == "(ubatch)") total = e.seconds;
  if (total <= 0) return;
  const double tokens = double(n) * reps;
  std::printf("\nprofile %s%d (host wall time per token, mean of %d repetitions; %% of the ubatch time):\n",
              test, n, reps);
  std::printf(
      "| op | backend | calls/token | us/token | %% |\n| -- | ------- | ----------: | -------: | --: |\n");
  for (const auto& e : rows) {
    if (e.graph != graph) continue;
    std::printf("| %s | %s | %.2f | %.2f | %.1f |\n", e.op.c_str(),
                e.backend.empty() ? "-" : e.backend.c_str(), e.calls / tokens, e.seconds / tokens * 1e6,
                100.0 * e.seconds / total);
  }
}

/// One llama-bench test: n_prompt tokens in one batch (pp) or n_gen tokens one at a time (tg), at
/// `threads` threads; `tps` holds one tokens/s figure per repetition.
struct BenchTest {
  int threads = 0;
  int n_prompt = 0;
  int n_gen = 0;
  std::vector<double> tps;
  std::vector<OpProfileEntry> profile;
  double Mean() const {
    double m = 0;
    for (double v : tps) m += v;
    return tps.empty() ? 0 : m / tps.size();
  }
  double Sd() const {
    const double m = Mean();
    double var = 0;
    for (double v : tps) var += (v - m) * (v - m);
    return tps.size() > 1 ? std::sqrt(var / (tps.size() - 1)) : 0;
  }
};

/// llama-bench's test name: "pp512", "tg128", "pp512+tg128".
std::string TestName(const BenchTest& t) {
  if (t.n_prompt > 0 && t.n_gen > 0)
    return "pp" + std::to_string(t.n_prompt) + "+tg" + std::to_string(t.n_gen);
  return t.n_prompt > 0 ? "pp" + std::to_string(t.n_prompt) : "tg" + std::to_string(t.n_gen);
}

/// llama-bench's list values: "512", "128,256,512", "1-4" (first to last), "1-8+2" (step 2),
/// "1-64*2" (times 2). Errors name the option and the item.
Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& name, int lo, int hi) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  auto num = [&](const std::string& v, int* x) -> bool {
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return false;
    *x = std::stoi(v);
    return *x >= lo && *x <= hi;
  };
  while (std::getline(ss, item, ',')) {
    const auto bad = [&]() {
      return InvalidArgument(name + ": expected an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + " or a range first-last[+step|*factor], found '" +
                             tools::ShownValue(item) + "'");
    };
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!num(item, &first)) return bad();
      out.push_back(first);
      continue;
    }
    const size_t op = item.find_first_of("+*", dash);
    if (!num(item.substr(0, dash), &first) ||
        !num(item.substr(dash + 1, op == std::string::npos ? std::string::npos : op - dash - 1), &last) ||
        last < first)
      return bad();
    const bool times = op != std::string::npos && item[op] == '*';
    int step = 1;
    if (op != std::string::npos &&
        (!num(item.substr(op + 1), &step) || step < (times ? 2 : 1) || (times && first < 1)))
      return bad();
    for (int64_t v = first; v <= last; v = times ? v * step : v + step) {
      out.push_back(static_cast<int>(v));
      if (out.size() > 4096) return InvalidArgument(name + ": '" + item + "' makes more than 4096 values");
    }
  }
  if (out.empty()) return InvalidArgument(name + ": no value");
  return out;
}

int Bench(Common c, bool ctx_given, const std::vector<int>& prompts, const std::vector<int>& gens,
          const std::vector<std::pair<int, int>>& pgs, std::vector<int> thread_list, int reps,
          bool json_summary, const std::string& format, bool profile) {
  int max_p = *std::max_element(prompts.begin(), prompts.end());
  const int max_n = *std::max_element(gens.begin(), gens.end());
  for (const auto& [n_p, n_g] : pgs) max_p = std::max(max_p, n_p + n_g);  // a -pg test fills both
  // Without -c, a context just large enough for the largest test (-c 0: the model's training context).
  if (!ctx_given) c.n_ctx = static_cast<uint32_t>(std::max(max_p, max_n) + 8);
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  uint64_t size = 0, params = 0;
  for (const auto& t : (*gguf)->tensors()) {
    size += t.nbytes;
    params += static_cast<uint64_t>(t.nelements());
  }
  const std::string model_desc = ModelDescription(**gguf);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  for (int& t : thread_list)
    if (t <= 0) t = hw;

  // Every test runs before anything is printed: an error is then the only output. llama-bench's
  // order: per thread count, each -p (pp test), then each -n (tg test).
  std::vector<BenchTest> tests;
  std::string backend;  // the devices holding the plan's buffers ("CPU", "ONEDNN,CPU", "CUDA0,CPU")
  for (int threads : thread_list) {
    Common ct = c;
    ct.threads = threads;
    auto session = OpenSession(ct, *gguf, true, profile);
    if (!session.ok()) return Fail(session.status());
    Session& s = **session;
    backend.clear();
    for (const auto& b : s.Buffers())
      if (("," + backend + ",").find("," + b.device + ",") == std::string::npos)
        backend += (backend.empty() ? "" : ",") + b.device;
    for (const auto& [name, n] : {std::pair<const char*, int>{"-p/--n-prompt", max_p}, {"-n/--n-gen", max_n}})
      if (n > s.n_ctx())
        return Fail(OutOfRange(std::string(name) + " " + std::to_string(n) + " exceeds the context of " +
                               std::to_string(s.n_ctx()) + " tokens (" +
                               (c.plan.empty() ? "-c" : "the plan's; re-plan with plan-model -c") + ")"));
    // One test: a prompt of n_p tokens in one batch, then n_g tokens one at a time (pp: n_g = 0,
    // tg: n_p = 0, llama-bench's -pg: both; tokens/s counts both).
    auto run = [&](int n_p, int n_g) -> Status {
      BenchTest t;
      t.threads = threads;
      t.n_prompt = n_p;
      t.n_gen = n_g;
      std::vector<float> logits;
      const int n = n_p + n_g;
      for (int r = 0; r < reps + 1; ++r) {  // first run is a warm-up
        s.Reset();
        if (r == 1) s.ResetOpProfile();
        std::vector<int32_t> toks(static_cast<size_t>(n), 1);
        for (int i = 0; i < n; ++i) toks[i] = (i * 7 + 3) % static_cast<int>(s.n_vocab());
        const auto t0 = Clock::now();
        if (n_p > 0)
          STOWAGE_RETURN_IF_ERROR(
              s.Decode(std::vector<int32_t>(toks.begin(), toks.begin() + n_p), false, &logits));
        for (int i = n_p; i < n; ++i) STOWAGE_RETURN_IF_ERROR(s.Decode({toks[i]}, false, &logits));
        if (r > 0) t.tps.push_back(n / Seconds(t0, Clock::now()));
      }
      t.profile = s.OpProfile();
      tests.push_back(std::move(t));
      return Status::Ok();
    };
    for (int n : prompts)
      if (n > 0)
        if (Status st = run(n, 0); !st.ok()) return Fail(st.WithPrefix("pp" + std::to_string(n)));
    for (int n : gens)
      if (n > 0)
        if (Status st = run(0, n); !st.ok()) return Fail(st.WithPrefix("tg" + std::to_string(n)));
    for (const auto& [n_p, n_g] : pgs)
      if (Status st = run(n_p, n_g); !st.ok())
        return Fail(st.WithPrefix("pp" + std::to_string(n_p) + "+tg" + std::to_string(n_g)));
  }

  if (json_summary) {  // the benchmark harness's one line (scripts/bench-vs-llamacpp.sh)
    double r[2][2] = {{0, 0}, {0, 0}};
    for (const auto& t : tests) {
      const int k = t.n_prompt > 0 ? 0 : 1;
      r[k][0] = t.Mean();
      r[k][1] = t.Sd();
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        "{\"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg_tps\": %.3f, \"tg_sd\": %.3f, \"maxrss_kib\": %ld}\n",
        r[0][0], r[0][1], r[1][0], r[1][1], ru.ru_maxrss);
    return 0;
  }
  if (format == "json" || format == "jsonl") {
    // llama-bench's field names for what Stowage knows.
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& t : tests) {
      nlohmann::ordered_json j;
      j["model_filename"] = c.model;
      j["model_type"] = model_desc;
      j["model_size"] = size;
      j["model_n_params"] = params;
      j["backends"] = backend;
      j["n_threads"] = t.threads;
      j["n_prompt"] = t.n_prompt;
      j["n_gen"] = t.n_gen;
      j["avg_ts"] = t.Mean();
      j["stddev_ts"] = t.Sd();
      j["samples_ts"] = t.tps;
      // A path that is not UTF-8 prints its bad bytes as U+FFFD (as plan-dump --json).
      if (format == "jsonl")
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      else
        all.push_back(std::move(j));
    }
    if (format == "json")
      std::printf("%s\n", all.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  if (format == "csv") {
    // RFC 4180 quoting, as llama-bench's escape_csv: a '"' inside a field is doubled.
    auto quoted = [](const std::string& v) {
      std::string q = "\"";
      for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      return q + "\"";
    };
    std::printf(
        "model_filename,model_type,model_size,model_n_params,backends,n_threads,n_prompt,n_gen,avg_ts,stddev_"
        "ts\n");
    for (const auto& t : tests)
      std::printf("%s,%s,%llu,%llu,%s,%d,%d,%d,%.6f,%.6f\n", quoted(c.model).c_str(),
                  quoted(model_desc).c_str(), static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(params), quoted(backend).c_str(), t.threads, t.n_prompt,
                  t.n_gen, t.Mean(), t.Sd());
    return 0;
  }
  // Sizes as llama-bench prints them: MiB / M below 1 GiB / 1 B, GiB / B above.
  char size_s[32], params_s[32];
  if (size < (1ull << 30))
    std::snprintf(size_s, sizeof size_s, "%.2f MiB", size / 1048576.0);
  else
    std::snprintf(size_s, sizeof size_s, "%.2f GiB", size / 1073741824.0);
  if (params < 1000000000ull)
    std::snprintf(params_s, sizeof params_s, "%.2f M", params / 1e6);
  else
    std::snprintf(params_s, sizeof params_s, "%.2f B", params / 1e9);
  std::printf("| model | size | params | backend | threads | test | t/s |\n");
  std::printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: |\n");
  for (const auto& t : tests)
    std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", model_desc.c_str(), size_s, params_s,
                backend.c_str(), t.threads, TestName(t).c_str(), t.Mean(), t.Sd());
  if (profile)
    for (const auto& t : tests) {
      // A prompt of n tokens runs the "pp" graph (one token: "tg", as llama.cpp's graphs).
      if (t.n_prompt > 0 && t.n_gen > 0) continue;  // a -pg test mixes both graphs
      if (t.n_prompt > 0)
        PrintProfile(t.profile, t.n_prompt == 1 ? "tg" : "pp", "pp", t.n_prompt, reps);
      else
        PrintProfile(t.profile, "tg", "tg", t.n_gen, reps);
    }
  return 0;
}

}  // namespace

int Run(int argc, char** argv) {
  CLI::App app{"stowage-run: execute a Stowage plan and generate text", "stowage-run"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(0, 1);
  Common c;
  std::string prompt;
  int n_predict = 64;
  SamplerParams sp;
  bool quiet = false;
  auto add_common = [&c](CLI::App* a) {
    a->add_option("-m,--model", c.model, "GGUF model file")->required();
    a->add_option("--plan", c.plan,
                  "plan file made by plan-model (default: plan on the fly for this machine)");
    a->add_option("-t,--threads", c.threads, "CPU threads (0 = all hardware threads; at most 4x them)")
        ->check(tools::IntegerIn(0, MaxThreads()));
    a->add_option("-c,--ctx-size", c.n_ctx,
                  "context size when planning on the fly (0 = the model's training context; default: 4096 "
                  "tokens to generate text, as llama-cli; the model's for perplexity; the largest -p or -n + "
                  "8 for bench)")
        ->check(tools::IntegerIn(0, kMaxTokens))
        ->default_str("");  // "not given": the default depends on the subcommand (above), not 0
    a->add_option("-b,--batch-size", c.n_batch, "logical batch size when planning on the fly")
        ->check(tools::IntegerIn(1, kMaxTokens));
    a->add_option("--ubatch-size", c.n_ubatch, "physical batch size when planning on the fly")
        ->check(tools::IntegerIn(1, kMaxTokens));
    a->add_option("--n-gpu-layers", c.n_gpu_layers,
                  "layers to offload when planning on the fly: N, 'all' or <= -2, 'auto' or -1 (fit to the "
                  "GPUs' free memory, as plan-model --fit)")
        ->transform(tools::GpuLayersValue());
    a->add_option("--cache-type-k", c.cache_type_k,
                  "KV cache type for K when planning on the fly (f16, f32, bf16, q8_0, q4_0, q4_1, iq4_nl, "
                  "q5_0, q5_1)");
    a->add_option(
        "--cache-type-v", c.cache_type_v,
        "KV cache type for V when planning on the fly (f16, f32, bf16; the quantized ones need -fa on)");
    a->add_option(
         "--flash-attn", c.flash_attn,
         "flash attention when planning on the fly: on, off (the default), or auto (on unless a layer's "
         "attention would run on another device than the layer, as plan-model)")
        ->transform(tools::FlashAttnValue());
    a->add_flag("--no-mmap", c.no_mmap,
                "when planning on the fly: load weights into allocated buffers instead of mapping the file");
    a->add_flag("--no-repack", c.no_repack, "when planning on the fly: no CPU_REPACK buffer type");
    a->add_flag("--no-kv-offload", c.no_kv_offload, "when planning on the fly: KV cache on the CPU");
    a->add_flag(
        "--no-fit-check", c.no_fit_check,
        "when planning on the fly: run even when the plan does not fit this machine's memory (a warning "
        "instead of plan-model's error)");
    a->add_flag(
        "--huge-pages", c.huge_pages,
        "copy mapped weights into transparent huge pages at load (faster token generation; the weights "
        "then take anonymous memory instead of the shared page cache)");
    a->add_flag("--llamacpp-numerics", c.llamacpp_numerics,
                "CPU matrix products sum in llama.cpp's CPU orders in prompt processing too, so logits and "
                "greedy text stay bit-identical to llama.cpp's over long prompts (slower prompt processing)");
    a->add_option(
         "--cpu-isa", c.cpu_isa,
         "highest instruction set of the CPU kernels: avx512vnni (the default: the best the CPU has), "
         "avx512 (AVX-512 without VNNI, as a Skylake-X), avx2 (llama.cpp's haswell variant, as a Zen 3) or "
         "scalar; never above what the CPU supports")
        ->check(CLI::IsMember({"avx512vnni", "avx512", "avx2", "scalar"}));
  };
  add_common(&app);
  auto* prompt_opt = app.add_option("-p,--prompt", prompt, "prompt text");
  std::string prompt_file;
  app.add_option(
         "-f,--file", prompt_file,
         "a file whose text is the prompt (one final newline is dropped, as llama-cli; a regular file of at "
         "most 256 MiB)")
      ->excludes(prompt_opt);
  bool escape = true;
  app.add_flag("-e,--escape,!--no-escape", escape,
               "expand \\n, \\r, \\t, \\', \\\", \\\\ and \\xHH in the prompt (llama.cpp's default; "
               "--no-escape keeps them)");
  bool ignore_eos = false;
  app.add_flag("--ignore-eos", ignore_eos, "never sample an end-of-generation token (generate -n tokens)");
  GenerateDisplay display;
  bool no_display_prompt = false;
  app.add_flag("--no-display-prompt", no_display_prompt, "do not echo the prompt before the generated text");
  app.add_flag("--verbose-prompt", display.verbose_prompt,
               "print the prompt's tokens (id -> piece) on stderr before generating");
  app.add_option("-n,--n-predict", n_predict,
                 "tokens to generate (-1 = until the end of text or a full context)")
      ->check(tools::IntegerIn(-1, kMaxTokens));
  app.add_option("--temp", sp.temperature, "temperature (<= 0 = greedy)")->check(tools::NumberIn(-1e4, 1e4));
  app.add_option("--top-k", sp.top_k, "top-k (0 = off)")->check(tools::IntegerIn(-2147483647, 2147483647));
  app.add_option("--top-p", sp.top_p, "top-p (1 = off)")->check(tools::NumberIn(0, 1));
  app.add_option("--min-p", sp.min_p, "min-p (0 = off)")->check(tools::NumberIn(0, 1));
  app.add_option("--repeat-last-n", sp.penalty_last_n,
                 "last n tokens (prompt included) the penalties look at (0 = off, -1 = the context)")
      ->check(tools::IntegerIn(-1, 2147483647));
  app.add_option("--repeat-penalty", sp.penalty_repeat,
                 "divide a repeated token's logit by this (a logit <= 0 is multiplied by it; 1 = off)")
      ->check(tools::PositiveNumberUpTo(1e4));
  app.add_option("--presence-penalty", sp.penalty_present,
                 "subtract this from the logit of a repeated token (0 = off)")
      ->check(tools::NumberIn(-1e4, 1e4));
  app.add_option("--frequency-penalty", sp.penalty_freq,
                 "subtract this times its count from the logit of a repeated token (0 = off)")
      ->check(tools::NumberIn(-1e4, 1e4));
  int64_t seed = -1;
  app.add_option("-s,--seed", seed, "random seed (-1 or 4294967295: a random seed, printed)")
      ->check(tools::IntegerIn(-1, UINT32_MAX));
  app.add_flag("-q,--quiet", quiet, "print only the text");

  auto* ppl = app.add_subcommand("perplexity", "perplexity of a text file (llama-perplexity style)");
  ppl->footer(
      "Also takes the options before the subcommand: -m, --plan, -t, -c, -b, -ub, -ngl, -ctk, -ctv, "
      "--huge-pages, --llamacpp-numerics, --cpu-isa, --no-escape.");
  std::string text_file;
  ppl->add_option(
      "-f,--file", text_file,
      "text file (one final newline dropped and escapes expanded, as llama-perplexity; a regular file of "
      "at most 256 MiB); required, except with --kl-divergence");
  std::string kl_base;
  ppl->add_option(
      "--kl-divergence-base,--save-all-logits", kl_base,
      "base file of log-probabilities (llama-perplexity's format): written while scoring -f, or read "
      "by --kl-divergence");
  bool kl_divergence = false;
  ppl->add_flag(
      "--kl-divergence", kl_divergence,
      "compare the model's distributions with the --kl-divergence-base file's (its tokens and n_ctx; -f is "
      "not read): KL divergence, PPL ratio, top token agreement, as llama-perplexity");
  int max_chunks = -1;
  ppl->add_option("--chunks", max_chunks, "score at most this many chunks (-1 = all)")
      ->check(tools::IntegerIn(-1, 2147483647) &
              CLI::Validator(
                  [](std::string& v) {
                    return v == "0" ? std::string(
                                          "expected a chunk count from 1 to 2147483647 or -1 (all), found 0 "
                                          "(no chunk to score)")
                                    : std::string();
                  },
                  ""));
  auto* bench = app.add_subcommand("bench", "llama-bench style table: pp and tg speed");
  bench->footer(
      "Also takes the options before the subcommand: -m, --plan, -t, -c, -b, -ub, -ngl, -ctk, -ctv, "
      "--huge-pages, --llamacpp-numerics, --cpu-isa.");
  std::string n_prompt_list = "512", n_gen_list = "128", threads_list;  // llama-bench's defaults
  int reps = 5;
  bench->add_option(
      "-p,--n-prompt", n_prompt_list,
      "prompt tokens of the pp tests (0 = none); as llama-bench, a list: 128,512 or 64-512*2 or 1-4+1");
  bench->add_option("-n,--n-gen", n_gen_list, "generated tokens of the tg tests (0 = none); a list as -p");
  bench->add_option("-t,--threads", threads_list, "CPU threads (0 = all); a list as -p, one session each");
  std::vector<std::string> pg_list;
  bench
      ->add_option(
          "--pg", pg_list,
          "pp,tg: a prompt of pp tokens then tg generated ones in one test (llama-bench -pg; repeatable)")
      ->allow_extra_args(false);
  bench->add_option("-r,--repetitions", reps, "repetitions")->check(tools::IntegerIn(1, 1000000));
  std::string bench_format = "md";
  bench
      ->add_option("-o,--output", bench_format,
                   "output format: md, csv, json, jsonl (llama-bench's field names)")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}));
  bool bench_json = false;
  bench->add_flag(
      "--json", bench_json,
      "one JSON line for the benchmark harness: pp/tg tokens per second (mean, sd) and peak resident "
      "KiB (one value of -p, -n and -t)");
  bool bench_profile = false;
  bench
      ->add_flag(
          "--profile", bench_profile,
          "after the table, host time per op and per token of each test (every node timed; not with --json)")
      ->excludes("--json");
  ppl->fallthrough();
  bench->fallthrough();

  if (int rc = tools::ParseWithAliases(app, argc, argv,
                                       {{"-ub", "--ubatch-size"},
                                        {"-ngl", "--n-gpu-layers"},
                                        {"-ctk", "--cache-type-k"},
                                        {"-ctv", "--cache-type-v"},
                                        {"-nr", "--no-repack"},
                                        {"-nkvo", "--no-kv-offload"},
                                        {"-pg", "--pg"},
                                        {"-fa", "--flash-attn"}});
      rc >= 0)
    return rc;
  sp.seed = seed < 0 ? kRandomSeed : static_cast<uint32_t>(seed);
  // With --plan the context, batch sizes and offload are the plan's: refuse flags that would be ignored.
  if (!c.plan.empty())
    for (const char* name :
         {"--ctx-size", "--batch-size", "--ubatch-size", "--n-gpu-layers", "--cache-type-k", "--cache-type-v",
          "--flash-attn", "--no-mmap", "--no-repack", "--no-kv-offload", "--no-fit-check"})
      if (app.count(name) > 0)
        return Fail(InvalidArgument(std::string(name) +
                                    " applies only when planning on the fly; the plan given with "
                                    "--plan fixes it (re-plan with plan-model)"));
  // The subcommands take the common options, not generation's prompt and sampler flags: given,
  // they are refused rather than ignored.
  if (*ppl || *bench)
    for (const char* name :
         {"--prompt", "--file", "--n-predict", "--temp", "--top-k", "--top-p", "--min-p", "--seed",
          "--repeat-last-n", "--repeat-penalty", "--presence-penalty", "--frequency-penalty", "--ignore-eos",
          "--no-display-prompt", "--verbose-prompt"})
      if (app.count(name) > 0)
        return Fail(InvalidArgument(std::string(name) + " applies to text generation, not to " +
                                    (*ppl ? "perplexity" : "bench")));
  if (*ppl) {
    const bool has_base = ppl->count("--kl-divergence-base") > 0;
    if (has_base && kl_base.empty()) return Fail(InvalidArgument("--kl-divergence-base '': no file name"));
    if (kl_divergence) {
      if (!has_base)
        return Fail(InvalidArgument(
            "--kl-divergence needs --kl-divergence-base FILE: the log-probabilities of the base "
            "model, written by perplexity -f TEXT --kl-divergence-base FILE"));
      if (ppl->count("--file") > 0)  // llama-perplexity ignores it too
        std::fprintf(stderr,
                     "stowage-run: note: --kl-divergence takes its tokens from %s; -f %s is not read\n",
                     kl_base.c_str(), text_file.c_str());
      return KlDivergence(c, app.count("--ctx-size") > 0, kl_base, max_chunks);
    }
    if (ppl->count("--file") == 0)
      return Fail(InvalidArgument(
          "perplexity: -f/--file is required (the text to score; only --kl-divergence reads its "
          "tokens from --kl-divergence-base)"));
    // The base file replaces what is at its path: never one of the inputs.
    for (const std::string* input : {&c.model, &c.plan, &text_file})
      if (has_base && !input->empty() && SameFile(kl_base, *input))
        return Fail(InvalidArgument("--kl-divergence-base " + kl_base + " is the input " + *input +
                                    ": it would be replaced (write the base to another file)"));
    if (has_base && tools::IsStandardOutput(kl_base))
      return Fail(
          InvalidArgument("--kl-divergence-base " + kl_base +
                          " is standard output, where the perplexity is printed: write the base to a file"));
    auto text = ReadTextFile(text_file, "a text file to score (perplexity -f)", escape);
    if (!text.ok()) return Fail(text.status());
    return Perplexity(c, text_file, *text, max_chunks, kl_base);
  }
  if (*bench) {
    // At most kMaxTokens - 8: a context planned on the fly is the largest value + 8.
    auto prompts = ParseIntList(n_prompt_list, "-p/--n-prompt", 0, kMaxTokens - 8);
    if (!prompts.ok()) return Fail(prompts.status());
    auto gens = ParseIntList(n_gen_list, "-n/--n-gen", 0, kMaxTokens - 8);
    if (!gens.ok()) return Fail(gens.status());
    std::vector<int> threads{c.threads};
    if (bench->count("--threads") > 0) {
      auto t = ParseIntList(threads_list, "-t/--threads", 0, MaxThreads());
      if (!t.ok()) return Fail(t.status());
      threads = *t;
    }
    std::vector<std::pair<int, int>> pgs;
    for (const std::string& v : pg_list) {
      const size_t comma = v.find(',');
      auto pp = ParseIntList(v.substr(0, comma), "-pg", 1, kMaxTokens / 2);
      auto tg = comma == std::string::npos
                    ? Result<std::vector<int>>(InvalidArgument("-pg: '" + v + "' is not pp,tg"))
                    : ParseIntList(v.substr(comma + 1), "-pg", 1, kMaxTokens / 2);
      if (!pp.ok() || !tg.ok() || pp->size() != 1 || tg->size() != 1)
        return Fail(
            InvalidArgument("-pg: '" + v + "' is not pp,tg (two token counts >= 1, e.g. -pg 512,128)"));
      pgs.push_back({pp->front(), tg->front()});
    }
    const auto none = [](const std::vector<int>& v) {
      return std::all_of(v.begin(), v.end(), [](int x) { return x == 0; });
    };
    if (none(*prompts) && none(*gens) && pgs.empty())
      return Fail(InvalidArgument("bench: nothing to measure (-p/--n-prompt and -n/--n-gen are both 0)"));
    if (bench_json && (prompts->size() > 1 || gens->size() > 1 || threads.size() > 1 || !pgs.empty()))
      return Fail(InvalidArgument("bench: --json takes one value of -p, -n and -t (use -o json for lists)"));
    if (bench_json && bench->count("--output") > 0)
      return Fail(InvalidArgument("bench: --json and -o/--output exclude each other"));
    if (bench_profile && bench_format != "md")
      return Fail(
          InvalidArgument("bench: --profile prints markdown tables after the results: only with -o md"));
    // The session's limit, checked for every value before the first test runs.
    for (int t : threads)
      if (Status st = CheckThreadCount(t, "-t/--threads:"); !st.ok()) return Fail(st);
    return Bench(c, app.count("--ctx-size") > 0, *prompts, *gens, pgs, threads, reps, bench_json,
                 bench_format, bench_profile);
  }
  const bool from_file = app.count("--file") > 0;
  if (from_file) {
    auto text = ReadTextFile(prompt_file, "a text file with the prompt (-f)", escape);
    if (!text.ok()) return Fail(text.status());
    prompt = std::move(*text);
  } else if (escape) {
    prompt = tools::ProcessEscapes(prompt);
  }
  if (prompt.empty())
    return Fail(InvalidArgument(!from_file
                                    ? "-p/--prompt is required (an empty prompt has no tokens to evaluate)"
                                    : prompt_file + ": the prompt file is empty (no tokens to evaluate)"));
  if (c.plan.empty() && app.count("--ctx-size") == 0) c.n_ctx = kDefaultGenerationContext;
  display.quiet = quiet;
  display.show_prompt = !no_display_prompt;
  return Generate(c, from_file ? prompt_file : std::string("the prompt (-p)"), prompt, n_predict, sp,
                  ignore_eos, display);
}

// A lost write to standard output (> /dev/full, a full disk) is exit status 1 with one line.
int main(int argc, char** argv) { return tools::RunTool("stowage-run", Run, argc, argv); }
