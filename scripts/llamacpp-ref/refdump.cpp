// Reference dump: runs a GGUF model through the fetched llama.cpp (CPU; fetch.sh builds this file
// against it) and prints JSON with the prompt tokens (BOS added), the logits of every prompt
// position (full vocabulary), N greedy tokens and their text as hex bytes; the format of
// ../shared/tools/llamacpp-ref/refdump, which the goldens under test/data were made with. Or, with
// --load-only, it only loads the model and creates the context and prints llama.cpp's log lines
// (model buffers, KV cache, compute buffers) to compare with plan-model's. See README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama-ext.h"
#include "llama.h"
#include "ref_common.h"

namespace {

const char kTool[] = "refdump";

const char kUsage[] =
    "usage: refdump [OPTIONS] MODEL PROMPT N [THREADS]\n"
    "       refdump --load-only [--no-alloc] [OPTIONS] MODEL\n"
    "Decodes PROMPT (BOS added) in one batch with every position's logits, then N greedy tokens one\n"
    "at a time; prints JSON: prompt_tokens, prompt_logits, greedy, greedy_bytes_hex.\n"
    "Options (defaults: the shared refdump's, which made the goldens):\n"
    "  --threads N       threads (default 2; also the optional 4th argument)\n"
    "  --n-ctx N         context size (default 256)\n"
    "  --n-batch N       logical batch (default n_ctx)\n"
    "  --n-ubatch N      physical batch (default n_batch)\n"
    "  --fa on|off|auto  flash attention (default auto, llama.cpp's default: on for the CPU)\n"
    "  --ctk T, --ctv T  K / V cache type: ggml type name (f16, q8_0, q4_0, iq4_nl, ...) or id\n"
    "  --no-mmap         read the weights into allocated buffers (llama.cpp --no-mmap)\n"
    "  --n-seq N         sequences kept at once (llama_context_params n_seq_max, llama.cpp -np;\n"
    "                    default 1); the decode runs sequence 0\n"
    "  --kv-unified      one KV cache shared by the sequences (llama.cpp -kvu; default off)\n"
    "  --no-swa-full     the SWA cache of min(n_ctx, n_swa * n_seq + n_ubatch) cells padded to 256\n"
    "                    (llama_context_default_params' swa_full is true; llama.cpp's tools turn it off)\n"
    "  --log             llama.cpp's log lines on stderr (default: none)\n"
    "  --load-only       load MODEL and create the context (with the options above), print llama.cpp's\n"
    "                    log lines on stdout, decode nothing; PROMPT and N are not taken\n"
    "  --no-alloc        with --load-only: llama.cpp's no_alloc (metadata only, simulated allocations,\n"
    "                    no mmap): no weights read, no model / KV / compute buffer allocated, so it\n"
    "                    runs on header-only files and under a memory limit (ulimit -v); llama.cpp\n"
    "                    prints 0.00 MiB for the dummy model and KV buffers, so the simulated sizes\n"
    "                    per buffer type follow (llama_get_memory_breakdown)\n"
    "  --verbose         with --load-only: also llama.cpp's debug lines\n"
    "Environment: REF_BACKEND_DIR (the CPU backends' folder; default the fetched package's),\n"
    "LLAMA_ATTN_ROT_DISABLE=1 (llama.cpp 2026: no rotation of quantized K/V caches).\n";

struct Options {
  std::string model, prompt;
  int n_gen = 0;
  int threads = 2;
  uint32_t n_ctx = 256, n_batch = 0, n_ubatch = 0, n_seq = 1;
  bool kv_unified = false, no_swa_full = false;
  bool fa_set = false;
  llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
  bool ctk_set = false, ctv_set = false;
  ggml_type ctk = GGML_TYPE_F16, ctv = GGML_TYPE_F16;
  bool no_mmap = false, log = false, load_only = false, no_alloc = false, verbose = false;
};

Options Parse(int argc, char** argv) {
  Options o;
  const long long kMax32 = 0x7fffffff;
  const std::vector<const char*> pos =
      ref::ParseArgs(kTool, kUsage, argc, argv, [&](const std::string& a, auto& value) {
        if (a == "--threads") {
          o.threads = int(ref::ParseInt(kTool, "--threads", value(), 1, 1024));
        } else if (a == "--n-ctx") {
          o.n_ctx = uint32_t(ref::ParseInt(kTool, "--n-ctx", value(), 1, kMax32));
        } else if (a == "--n-batch") {
          o.n_batch = uint32_t(ref::ParseInt(kTool, "--n-batch", value(), 1, kMax32));
        } else if (a == "--n-ubatch") {
          o.n_ubatch = uint32_t(ref::ParseInt(kTool, "--n-ubatch", value(), 1, kMax32));
        } else if (a == "--fa") {
          const std::string v = value();
          o.fa_set = true;
          if (v == "on")
            o.fa = LLAMA_FLASH_ATTN_TYPE_ENABLED;
          else if (v == "off")
            o.fa = LLAMA_FLASH_ATTN_TYPE_DISABLED;
          else if (v == "auto")
            o.fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
          else
            ref::Usage(kTool, "--fa: expected on, off or auto, got '" + v + "'");
        } else if (a == "--ctk") {
          o.ctk = ref::ParseType(kTool, "--ctk", value());
          o.ctk_set = true;
        } else if (a == "--ctv") {
          o.ctv = ref::ParseType(kTool, "--ctv", value());
          o.ctv_set = true;
        } else if (a == "--n-seq") {
          o.n_seq = uint32_t(ref::ParseInt(kTool, "--n-seq", value(), 1, 256));
        } else if (a == "--kv-unified") {
          o.kv_unified = true;
        } else if (a == "--no-swa-full") {
          o.no_swa_full = true;
        } else if (a == "--no-mmap") {
          o.no_mmap = true;
        } else if (a == "--log") {
          o.log = true;
        } else if (a == "--load-only") {
          o.load_only = true;
        } else if (a == "--no-alloc") {
          o.no_alloc = true;
        } else if (a == "--verbose") {
          o.verbose = true;
        } else {
          return false;
        }
        return true;
      });
  if (o.no_alloc && !o.load_only) ref::Usage(kTool, "--no-alloc goes with --load-only");
  if (o.load_only) {
    if (pos.size() != 1)
      ref::Usage(kTool, "--load-only takes one argument, MODEL; got " + std::to_string(pos.size()));
    o.model = pos[0];
  } else {
    if (pos.size() < 3 || pos.size() > 4)
      ref::Usage(kTool,
                 "expected MODEL PROMPT N [THREADS], got " + std::to_string(pos.size()) + " arguments");
    o.model = pos[0];
    o.prompt = pos[1];
    o.n_gen = int(ref::ParseInt(kTool, "N", pos[2], 0, 1 << 20));
    if (pos.size() == 4) o.threads = int(ref::ParseInt(kTool, "THREADS", pos[3], 1, 1024));
  }
  if (o.n_batch == 0) o.n_batch = o.n_ctx;
  if (o.n_ubatch == 0) o.n_ubatch = o.n_batch;
  return o;
}

// Log sinks. Dump mode: nothing, or everything on stderr (--log). Load-only: stdout, debug lines
// only with --verbose (a continuation line follows its line's level).
struct LogState {
  FILE* out = nullptr;
  bool debug = false;
  bool last_shown = true;
};

void LogSink(ggml_log_level level, const char* text, void* user) {
  auto* s = static_cast<LogState*>(user);
  if (s->out == nullptr) return;
  if (level != GGML_LOG_LEVEL_CONT) s->last_shown = level != GGML_LOG_LEVEL_DEBUG || s->debug;
  if (!s->last_shown) return;
  std::fputs(text, s->out);
  std::fflush(s->out);
}

// A JSON string body: quotes, backslashes and control characters escaped (other bytes as they are).
std::string JsonEscape(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
    } else {
      r += char(c);
    }
  }
  return r;
}

int Argmax(const float* lg, int n_vocab) {
  int best = 0;
  for (int v = 1; v < n_vocab; v++)
    if (lg[v] > lg[best]) best = v;
  return best;
}

// A batch of n tokens of sequence 0 at positions pos0, pos0 + 1, ..., every one with its logits.
llama_batch MakeBatch(const llama_token* toks, int n, int pos0) {
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) {
    b.token[i] = toks[i];
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = n;
  return b;
}

void PrintBreakdown(const llama_context* ctx) {
  const double mib = 1024.0 * 1024.0;
  std::printf("refdump: no_alloc: simulated buffer sizes per buffer type (llama_get_memory_breakdown):\n");
  for (const auto& [buft, mb] : llama_get_memory_breakdown(ctx)) {
    const char* name = ggml_backend_buft_name(buft);
    std::printf("refdump: %12s model buffer size = %10.2f MiB\n", name, mb.model / mib);
    std::printf("refdump: %12s context (KV, recurrent state) size = %10.2f MiB\n", name, mb.context / mib);
    std::printf("refdump: %12s compute buffer size = %10.2f MiB\n", name, mb.compute / mib);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  LogState log;
  if (o.load_only) {
    log.out = stdout;
    log.debug = o.verbose;
  } else if (o.log) {
    log.out = stderr;
    log.debug = o.verbose;
  }
  llama_log_set(LogSink, &log);
  ref::LoadBackends();
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  if (o.no_mmap || o.no_alloc)
    mp.load_mode = LLAMA_LOAD_MODE_NONE;  // no_alloc maps nothing (as common/fit.cpp)
  mp.no_alloc = o.no_alloc;
  if (o.load_only)
    std::printf("refdump: node-llama-cpp %s, %s%s\n", REF_NLC_VERSION, o.model.c_str(),
                o.no_alloc ? " (no_alloc)" : "");
  llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
  if (model == nullptr) {
    std::fprintf(stderr, "refdump: %s: load failed%s\n", o.model.c_str(),
                 o.log || o.load_only ? "" : " (--log shows llama.cpp's reason)");
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = o.n_ctx;
  cp.n_batch = o.n_batch;
  cp.n_ubatch = o.n_ubatch;
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.n_seq_max = o.n_seq;
  cp.kv_unified = o.kv_unified;
  if (o.no_swa_full) cp.swa_full = false;
  if (o.fa_set) cp.flash_attn_type = o.fa;
  if (o.ctk_set) cp.type_k = o.ctk;
  if (o.ctv_set) cp.type_v = o.ctv;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) {
    std::fprintf(stderr, "refdump: %s: context creation failed (n_ctx %u, n_batch %u, n_ubatch %u)\n",
                 o.model.c_str(), o.n_ctx, o.n_batch, o.n_ubatch);
    llama_model_free(model);
    return 1;
  }
  if (o.load_only) {
    if (o.no_alloc) PrintBreakdown(ctx);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
  }

  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> toks(o.prompt.size() + 8);
  const int n = llama_tokenize(vocab, o.prompt.c_str(), int32_t(o.prompt.size()), toks.data(),
                               int32_t(toks.size()), true, false);
  if (n <= 0) {
    std::fprintf(stderr, "refdump: the prompt gave no tokens (llama_tokenize: %d)\n", n);
    return 1;
  }
  toks.resize(size_t(n));
  const int n_vocab = llama_vocab_n_tokens(vocab);
  llama_batch batch = MakeBatch(toks.data(), n, 0);
  if (llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "refdump: decode of the %d prompt tokens failed (n_ctx %u, n_batch %u)\n", n,
                 o.n_ctx, o.n_batch);
    return 1;
  }
  std::printf("{\"model\": \"%s\", \"prompt\": \"%s\", \"n_vocab\": %d,\n \"prompt_tokens\": [",
              JsonEscape(o.model).c_str(), JsonEscape(o.prompt).c_str(), n_vocab);
  for (int i = 0; i < n; i++) std::printf("%s%d", i ? ", " : "", toks[size_t(i)]);
  std::printf("],\n \"prompt_logits\": [\n");
  for (int i = 0; i < n; i++) {
    const float* lg = llama_get_logits_ith(ctx, i);
    std::printf("  [");
    for (int v = 0; v < n_vocab; v++) std::printf("%s%.6g", v ? ", " : "", lg[v]);
    std::printf("]%s\n", i + 1 < n ? "," : "");
  }
  std::printf(" ],\n \"greedy\": [");
  llama_token cur = Argmax(llama_get_logits_ith(ctx, n - 1), n_vocab);
  std::string text;
  for (int g = 0; g < o.n_gen; g++) {
    std::printf("%s%d", g ? ", " : "", cur);
    char buf[256];
    const int k = llama_token_to_piece(vocab, cur, buf, sizeof buf, 0, false);
    if (k > 0) text.append(buf, size_t(k));
    llama_batch one = MakeBatch(&cur, 1, n + g);
    const bool ok = llama_decode(ctx, one) == 0;
    llama_batch_free(one);
    if (!ok) {
      std::fprintf(stderr, "refdump: decode of greedy token %d failed (n_ctx %u)\n", g, o.n_ctx);
      return 1;
    }
    cur = Argmax(llama_get_logits_ith(ctx, 0), n_vocab);
  }
  // The text as hex bytes: a piece may be a partial UTF-8 sequence.
  std::printf("],\n \"greedy_bytes_hex\": \"");
  for (unsigned char c : text) std::printf("%02x", c);
  std::printf("\"}\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
