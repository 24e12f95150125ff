#include "generate.h"

#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hosts.h"
#include "model_session.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"
#include "stowage/runtime/transport.h"

namespace stowage::run {
namespace {

// Ctrl+C while generating: llama-cli 2026 prints its timing summary, then exits 130. The handler can
// only set a flag (async-signal-safe), which the generation loop reads once per token; the flag is
// process-wide because a signal is. SA_RESETHAND: a second Ctrl+C (in a long prompt, between token
// checks) ends the process at once, as before.
volatile std::sig_atomic_t interrupt_requested = 0;
extern "C" void RequestInterrupt(int) { interrupt_requested = 1; }

/// SIGINT caught while it lives, also when it was ignored at start (as llama-cli's sigaction: a
/// background job of a script gets it ignored), then the old disposition back.
class InterruptCatcher {
 public:
  InterruptCatcher() {
    struct sigaction sa = {};
    sa.sa_handler = RequestInterrupt;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    interrupt_requested = 0;
    installed_ = ::sigaction(SIGINT, &sa, &old_) == 0;
  }
  ~InterruptCatcher() {
    if (installed_) ::sigaction(SIGINT, &old_, nullptr);
  }
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;
  bool interrupted() const { return interrupt_requested != 0; }

 private:
  struct sigaction old_ = {};
  bool installed_ = false;
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

// The prompt's tokens (BOS and special tokens as llama-cli adds and parses them), refused when
// they cannot fit a context of n_ctx tokens: from the prompt's byte length before it is tokenized
// when MaxTextBytesPerToken proves it (which keeps memory bounded), else from the token count.
Result<std::vector<int32_t>> TokenizePrompt(const CommonOptions& c, const Tokenizer& tok, int64_t n_ctx,
                                            const GenerateOptions& g) {
  const std::string& prompt = g.prompt;
  if (const int64_t per_token = MaxTextBytesPerToken(tok);
      per_token > 0 && static_cast<int64_t>(prompt.size()) > n_ctx * per_token)
    return OutOfRange(g.prompt_source + ": a prompt of " + std::to_string(prompt.size()) +
                      " bytes exceeds the context of " + std::to_string(n_ctx) + " tokens (" +
                      ContextHint(c) + "): it makes at least " +
                      std::to_string((static_cast<int64_t>(prompt.size()) + per_token - 1) / per_token) +
                      " tokens, as no token of the vocabulary stands for more than " +
                      std::to_string(per_token) + " bytes");
  std::vector<int32_t> tokens;
  try {
    tokens = tok.Tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(g.prompt_source + ": out of memory while tokenizing a prompt of " +
                             std::to_string(prompt.size()) + " bytes");
  }
  if (tokens.empty()) return InvalidArgument("the prompt is empty (no tokens)");
  if (static_cast<int64_t>(tokens.size()) > n_ctx)
    return OutOfRange("prompt of " + std::to_string(tokens.size()) + " tokens exceeds the context of " +
                      std::to_string(n_ctx) + " tokens (" + ContextHint(c) + ")");
  return tokens;
}

// llama-cli's --verbose-prompt lines: the prompt, its token count, and each token with its piece.
void PrintVerbosePrompt(const Tokenizer& tok, const std::string& prompt, const std::vector<int32_t>& tokens) {
  std::fprintf(stderr, "main: prompt: '%s'\n", prompt.c_str());
  std::fprintf(stderr, "main: number of tokens in prompt = %zu\n", tokens.size());
  for (int32_t t : tokens) std::fprintf(stderr, "%6d -> '%s'\n", t, tok.TokenToPiece(t, true).c_str());
  std::fprintf(stderr, "\n");
}

// The times of loading, prompt evaluation (t0 to t1) and generation (t1 to t2), then the buffers
// (those of `host` alone under mpirun, -1: all).
void PrintTimings(const Session& s, Clock::time_point t0, Clock::time_point t1, Clock::time_point t2,
                  size_t n_prompt, int generated, int host) {
  std::fprintf(stderr, "\nload time   = %8.2f ms\n", s.load_seconds() * 1e3);
  std::fprintf(stderr, "prompt eval = %8.2f ms / %zu tokens (%8.2f tokens per second)\n",
               Seconds(t0, t1) * 1e3, n_prompt, n_prompt / std::max(Seconds(t0, t1), 1e-9));
  std::fprintf(stderr, "generation  = %8.2f ms / %d tokens (%8.2f tokens per second)\n",
               Seconds(t1, t2) * 1e3, generated, generated / std::max(Seconds(t1, t2), 1e-9));
  PrintBuffers(s, host);
}

}  // namespace

int Generate(const CommonOptions& c, GenerateOptions g) {
  SamplerParams& sp = g.sampler;
  if (sp.seed == kRandomSeed) sp.seed = std::random_device{}();
  auto loaded = LoadModel(c, g.quiet);
  if (!loaded.ok()) return Fail(loaded.status());
  const Tokenizer& tok = loaded->tokenizer;
  Session& s = *loaded->session;
  auto prompt_tokens = TokenizePrompt(c, tok, s.n_ctx(), g);
  if (!prompt_tokens.ok()) return Fail(prompt_tokens.status());
  const std::vector<int32_t>& tokens = *prompt_tokens;
  const int64_t room = s.n_ctx() - static_cast<int64_t>(tokens.size());
  // As llama-cli: -n -1 generates until an end-of-generation token, and any -n stops when the
  // context is full (no context shift), saying so.
  int n_predict = g.n_predict;
  const bool to_context_end = n_predict < 0 || n_predict > room;
  if (to_context_end) n_predict = static_cast<int>(room);
  // --repeat-last-n -1: the whole context (llama.cpp common).
  if (sp.penalty_last_n < 0)
    sp.penalty_last_n = static_cast<int32_t>(std::min<int64_t>(s.n_ctx(), INT32_MAX));
  // --ignore-eos: end-of-generation tokens are never sampled (llama.cpp: a logit bias of -inf).
  std::vector<int32_t> eog;
  if (g.ignore_eos)
    for (int32_t id = 0; id < tok.n_vocab() && id < s.n_vocab(); ++id)
      if (tok.IsEog(id)) eog.push_back(id);
  Sampler sampler(sp);
  for (int32_t t : tokens) sampler.Accept(t);  // the prompt counts for the penalties, as in llama-cli
  if (!g.quiet && sp.temperature > 0) std::fprintf(stderr, "sampler seed: %u\n", sp.seed);  // as llama.cpp
  if (g.verbose_prompt) PrintVerbosePrompt(tok, g.prompt, tokens);
  if (g.show_prompt) {
    std::fwrite(g.prompt.data(), 1, g.prompt.size(), stdout);  // all of it: a NUL (\x00) does not end it
    if (!FlushStdout()) return 1;
  }
  auto dump = LogitsDump::Open(c, loaded->output_host, g.dump_logits);
  if (!dump.ok()) return Fail(dump.status());
  std::vector<float> logits;
  const auto t0 = Clock::now();
  if (Status st = s.Decode(tokens, false, &logits); !st.ok()) {
    EndStreamedLine();
    return Fail(st);
  }
  if (Status st = dump->Append(logits); !st.ok()) return Fail(st);
  const auto t1 = Clock::now();
  int generated = 0;
  bool eog_reached = false;
  // Across hosts every rank must take the same steps: only a single process stops on Ctrl+C.
  std::optional<InterruptCatcher> interrupt;
  if (!c.transport) interrupt.emplace();
  for (; generated < n_predict; ++generated) {
    if (interrupt && interrupt->interrupted()) break;
    for (int32_t id : eog) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    // Across hosts, the host holding the logits samples and the others take its token (hosts.h).
    auto shared =
        ShareToken(c, loaded->output_host, sampler.Sample(logits.data(), static_cast<int>(s.n_vocab())),
                   static_cast<uint64_t>(generated));
    if (!shared.ok()) return Fail(shared.status());
    const int32_t next = *shared;
    if (next < 0) {  // Sampler: no logit is a number above -inf
      EndStreamedLine();
      return Fail(DataLoss(c.model + ": the logits at position " +
                           std::to_string(tokens.size() + generated - 1) +
                           " are all NaN or -inf, so no token can be sampled (the model's weights or "
                           "hyper-parameters produce non-finite values)"));
    }
    sampler.Accept(next);
    if (tok.IsEog(next)) {
      eog_reached = true;
      break;
    }
    std::printf("%s", tok.TokenToPiece(next, false).c_str());
    if (!FlushStdout()) return 1;
    if (generated + 1 == n_predict) {
      ++generated;
      break;
    }
    if (Status st = s.Decode({next}, false, &logits); !st.ok()) {
      EndStreamedLine();
      return Fail(st);
    }
    if (Status st = dump->Append(logits); !st.ok()) return Fail(st);
  }
  const auto t2 = Clock::now();
  if (interrupt && interrupt->interrupted()) {  // the summary, no --dump-logits file, exit status 130
    std::printf("\n");
    if (!FlushStdout()) return 1;
    if (!g.quiet) PrintTimings(s, t0, t1, t2, tokens.size(), generated, -1);
    std::fprintf(stderr, "stowage-run: interrupted\n");
    return 128 + SIGINT;
  }
  if (Status st = dump->Commit(); !st.ok()) {
    EndStreamedLine();
    return Fail(st);
  }
  std::printf("\n");
  if (!FlushStdout()) return 1;
  if (!g.quiet && to_context_end && !eog_reached)
    std::fprintf(
        stderr,
        "stowage-run: context full (%lld tokens) and context shift is not supported => stopping (%s)\n",
        static_cast<long long>(s.n_ctx()),
        c.plan.empty() ? "-c for a larger context" : "re-plan with plan-model -c");
  if (!g.quiet) PrintTimings(s, t0, t1, t2, tokens.size(), generated, c.transport ? c.transport->rank() : -1);
  return 0;
}

}  // namespace stowage::run
