#include "stowage/runtime/c_api.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/sampler.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"

struct stowage_session {
  std::unique_ptr<stowage::Session> session;
  std::vector<float> logits;
  size_t n_rows = 0;
  std::vector<int32_t> row_of;  // the logits row of each token of the last batch, -1: none
  std::string last_error;
  std::optional<stowage::Tokenizer> tokenizer;
  stowage::Status tokenizer_status;  // why `tokenizer` is empty
  size_t n_batch = 0;                // tokens of the last successful batch (embeddings' rows)
};

struct stowage_sampler {
  stowage::SamplerChain chain;
  bool is_chain = false;
};

namespace {
stowage_status ToC(const stowage::Status& s) {
  return static_cast<stowage_status>(static_cast<int>(s.code()));
}
// Runs `f` with every exception turned into `error` and the session's last error (no exception
// crosses the C API).
template <typename R, typename F>
R Guarded(stowage_session* s, const char* fn, R error, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    if (s != nullptr) s->last_error = std::string(fn) + ": out of memory";
  } catch (const std::exception& e) {
    if (s != nullptr) s->last_error = std::string(fn) + ": " + e.what();
  }
  return error;
}
// A failed call's status, its message kept as the session's last error.
stowage_status Failed(stowage_session* s, const stowage::Status& st) {
  s->last_error = st.message();
  return ToC(st);
}
// The tokenizer, or INT32_MIN with its error as the session's last error.
const stowage::Tokenizer* TokenizerOf(stowage_session* s, const char* fn) {
  if (s->tokenizer) return &*s->tokenizer;
  s->last_error = std::string(fn) + ": " + s->tokenizer_status.message();
  return nullptr;
}
// Copies `items` (bytes or tokens: `unit`) into buf (capacity `length`), as llama_tokenize and
// llama_token_to_piece answer: their count, or -(their count) when it does not fit, or INT32_MIN
// when there are more than INT32_MAX.
template <typename C, typename T>
int32_t CopyOut(stowage_session* s, const char* fn, const C& items, T* buf, int32_t length,
                const char* unit) {
  if (items.size() > static_cast<size_t>(INT32_MAX)) {
    s->last_error =
        std::string(fn) + ": " + std::to_string(items.size()) + " " + unit + ", more than INT32_MAX";
    return INT32_MIN;
  }
  const auto n = static_cast<int32_t>(items.size());
  if (n > length) return -n;
  std::copy(items.begin(), items.end(), buf);
  return n;
}
// A state file call: `f` (the Session method) on a non-NULL session and path, its error kept.
template <typename F>
stowage_status StateCall(stowage_session* s, const char* fn, const char* path, F&& f) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;
  if (path == nullptr) return Failed(s, stowage::InvalidArgument(std::string(fn) + ": path is NULL"));
  return Guarded<stowage_status>(s, fn, STOWAGE_RESOURCE_EXHAUSTED, [&]() {
    const stowage::Status st = f(std::string(path));
    return st.ok() ? STOWAGE_OK : Failed(s, st);
  });
}
stowage_sampler* NewStep(const stowage::SamplerStep& step) {
  auto* h = new (std::nothrow) stowage_sampler();
  if (h == nullptr) return nullptr;
  try {
    h->chain.Add(step);
  } catch (const std::bad_alloc&) {
    delete h;
    return nullptr;
  }
  return h;
}
// A failed decode: its message kept as the session's last error, no logits kept.
stowage_status DecodeFailed(stowage_session* s, const stowage::Status& st) {
  s->last_error = st.message();
  s->n_rows = 0;
  s->row_of.clear();
  s->n_batch = 0;
  return ToC(st);
}
// Copies `st`'s message into err (err_size bytes, NUL-terminated, truncated) and returns its code.
stowage_status CopyError(const stowage::Status& st, char* err, size_t err_size) {
  if (err != nullptr && err_size > 0) {
    std::strncpy(err, st.message().c_str(), err_size - 1);
    err[err_size - 1] = '\0';
  }
  return ToC(st);
}
// The session constructors' common part: checks the arguments (`plan_given`: the plan pointer or
// path is usable), opens the model, creates the Session with `create(model, options)`, loads the
// tokenizer; errors as stowage_session_create documents, prefixed with `fn` for the arguments.
template <typename Create>
stowage_status CreateSession(const char* fn, bool plan_given, const char* model_path, int n_threads,
                             stowage_session** out, char* err, size_t err_size, Create&& create) {
  if (out != nullptr) *out = nullptr;
  if (!plan_given || model_path == nullptr || out == nullptr)
    return CopyError(
        stowage::InvalidArgument(std::string(fn) + ": the plan, model_path and out must not be NULL"), err,
        err_size);
  try {  // no exception crosses the C API (std::bad_alloc included)
    stowage::SessionOptions opts;
    opts.n_threads = n_threads;
    auto gguf = stowage::GgufFile::Open(model_path);
    if (!gguf.ok()) return CopyError(gguf.status(), err, err_size);
    std::shared_ptr<const stowage::GgufFile> model = std::move(gguf).value();
    auto s = create(model, opts);
    if (!s.ok()) return CopyError(s.status(), err, err_size);
    auto* h = new (std::nothrow) stowage_session();
    if (h == nullptr) return CopyError(stowage::ResourceExhausted("out of memory"), err, err_size);
    h->session = std::move(s).value();
    auto tok = stowage::Tokenizer::FromGguf(*model);
    if (tok.ok())
      h->tokenizer.emplace(std::move(tok).value());
    else
      h->tokenizer_status = tok.status();
    *out = h;
    return STOWAGE_OK;
  } catch (const std::bad_alloc&) {
    return CopyError(stowage::ResourceExhausted(std::string(fn) + ": out of memory"), err, err_size);
  } catch (const std::exception& e) {
    return CopyError(stowage::Internal(std::string(fn) + ": " + e.what()), err, err_size);
  }
}
}  // namespace

extern "C" {

stowage_status stowage_session_create(const char* plan_path, const char* model_path, int n_threads,
                                      stowage_session** out, char* err, size_t err_size) {
  return CreateSession(
      "stowage_session_create", plan_path != nullptr, model_path, n_threads, out, err, err_size,
      [&](std::shared_ptr<const stowage::GgufFile> model, const stowage::SessionOptions& opts) {
        return stowage::Session::Create(plan_path, std::move(model), opts);
      });
}

stowage_status stowage_session_create_from_plan_buffer(const void* plan, size_t plan_size,
                                                       const char* model_path, int n_threads,
                                                       stowage_session** out, char* err, size_t err_size) {
  return CreateSession(
      "stowage_session_create_from_plan_buffer", plan != nullptr || plan_size == 0, model_path, n_threads,
      out, err, err_size,
      [&](std::shared_ptr<const stowage::GgufFile> model, const stowage::SessionOptions& opts) {
        const auto* bytes = static_cast<const uint8_t*>(plan);
        return stowage::Session::CreateFromPlanBytes(std::vector<uint8_t>(bytes, bytes + plan_size),
                                                     std::move(model), opts);
      });
}

stowage_status stowage_decode(stowage_session* s, const int32_t* tokens, size_t n_tokens, int all_logits) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;  // no session to hold a message
  auto fail = [s](const stowage::Status& st) { return DecodeFailed(s, st); };
  if (tokens == nullptr && n_tokens > 0)
    return fail(stowage::InvalidArgument("stowage_decode: tokens is NULL"));
  // Checked before the tokens are copied: a huge n_tokens (an underflowed count) must neither
  // allocate nor form a pointer past the caller's array.
  const size_t room = static_cast<size_t>(s->session->n_ctx() - s->session->n_past());
  if (n_tokens > room)
    return fail(stowage::OutOfRange("context full: " + std::to_string(s->session->n_past()) +
                                    " tokens in the cache + " + std::to_string(n_tokens) + " new > n_ctx " +
                                    std::to_string(s->session->n_ctx())));
  try {
    std::vector<int32_t> t(tokens, tokens + n_tokens);
    stowage::Status st = s->session->Decode(t, all_logits != 0, &s->logits);
    if (!st.ok()) return fail(st);
  } catch (const std::bad_alloc&) {
    return fail(stowage::ResourceExhausted("stowage_decode: out of memory"));
  } catch (const std::exception& e) {
    return fail(stowage::Internal(std::string("stowage_decode: ") + e.what()));
  }
  s->n_rows = all_logits ? n_tokens : 1;
  s->n_batch = n_tokens;
  s->row_of.assign(n_tokens, -1);
  for (size_t i = 0; i < n_tokens; ++i)
    if (all_logits || i + 1 == n_tokens) s->row_of[i] = all_logits ? static_cast<int32_t>(i) : 0;
  s->last_error.clear();
  return STOWAGE_OK;
}

stowage_status stowage_decode_batch(stowage_session* s, const stowage_batch* batch) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;  // no session to hold a message
  auto fail = [s](const stowage::Status& st) { return DecodeFailed(s, st); };
  if (batch == nullptr || batch->token == nullptr)
    return fail(stowage::InvalidArgument("stowage_decode_batch: batch or batch->token is NULL"));
  if (batch->n_tokens <= 0)
    return fail(stowage::InvalidArgument("stowage_decode_batch: n_tokens " + std::to_string(batch->n_tokens) +
                                         " (at least one token is needed)"));
  // Checked before the arrays are read: more tokens than cells cannot fit whatever they hold.
  if (batch->n_tokens > s->session->n_ctx())
    return fail(stowage::OutOfRange("stowage_decode_batch: n_tokens " + std::to_string(batch->n_tokens) +
                                    " > n_ctx " + std::to_string(s->session->n_ctx())));
  try {
    const auto n = static_cast<size_t>(batch->n_tokens);
    std::vector<stowage::BatchToken> b(n);
    std::vector<int32_t> next;  // pos NULL: each sequence's next position
    for (size_t i = 0; i < n; ++i) {
      b[i].token = batch->token[i];
      b[i].seq_id = batch->seq_id != nullptr ? batch->seq_id[i] : 0;
      b[i].logits = batch->logits != nullptr ? batch->logits[i] != 0 : i + 1 == n;
      if (batch->pos != nullptr) {
        b[i].pos = batch->pos[i];
      } else if (b[i].seq_id >= 0 && b[i].seq_id < s->session->n_seq_ids()) {
        const auto q = static_cast<size_t>(b[i].seq_id);
        if (next.size() <= q) next.resize(q + 1, -2);
        if (next[q] == -2) next[q] = s->session->SeqPosMax(b[i].seq_id) + 1;
        b[i].pos = next[q]++;
      }  // an invalid seq_id is refused by DecodeBatch
    }
    stowage::Status st = s->session->DecodeBatch(b, &s->logits);
    if (!st.ok()) return fail(st);
    s->row_of.assign(n, -1);
    int32_t rows = 0;
    for (size_t i = 0; i < n; ++i)
      if (b[i].logits) s->row_of[i] = rows++;
    s->n_rows = static_cast<size_t>(rows);
    s->n_batch = n;
  } catch (const std::bad_alloc&) {
    return fail(stowage::ResourceExhausted("stowage_decode_batch: out of memory"));
  } catch (const std::exception& e) {
    return fail(stowage::Internal(std::string("stowage_decode_batch: ") + e.what()));
  }
  s->last_error.clear();
  return STOWAGE_OK;
}

const float* stowage_get_logits_ith(const stowage_session* s, int32_t i) {
  if (s == nullptr || s->n_rows == 0) return nullptr;
  const auto n_vocab = static_cast<size_t>(s->session->n_vocab());
  if (i < 0) {  // from the end of the returned rows
    const int64_t r = static_cast<int64_t>(s->n_rows) + i;
    return r >= 0 ? s->logits.data() + static_cast<size_t>(r) * n_vocab : nullptr;
  }
  if (static_cast<size_t>(i) >= s->row_of.size() || s->row_of[static_cast<size_t>(i)] < 0) return nullptr;
  return s->logits.data() + static_cast<size_t>(s->row_of[static_cast<size_t>(i)]) * n_vocab;
}

namespace {
// A KV operation's status, its message kept as the session's last error.
stowage_status KvResult(stowage_session* s, const stowage::Status& st) {
  if (!st.ok()) s->last_error = st.message();
  return ToC(st);
}
}  // namespace

stowage_status stowage_kv_seq_rm(stowage_session* s, int32_t seq_id, int32_t p0, int32_t p1) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;
  return KvResult(s, s->session->SeqRm(seq_id, p0, p1));
}

stowage_status stowage_kv_seq_cp(stowage_session* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;
  return KvResult(s, s->session->SeqCp(src, dst, p0, p1));
}

int32_t stowage_kv_seq_pos_max(const stowage_session* s, int32_t seq_id) {
  return s ? s->session->SeqPosMax(seq_id) : -1;
}
int32_t stowage_kv_seq_pos_min(const stowage_session* s, int32_t seq_id) {
  return s ? s->session->SeqPosMin(seq_id) : -1;
}
void stowage_kv_clear(stowage_session* s) { stowage_reset(s); }
size_t stowage_n_seq_max(const stowage_session* s) {
  return s ? static_cast<size_t>(s->session->n_seq_max()) : 0;
}
size_t stowage_n_seq_ids(const stowage_session* s) {
  return s ? static_cast<size_t>(s->session->n_seq_ids()) : 0;
}

const float* stowage_get_logits(const stowage_session* s, size_t* n_rows) {
  if (n_rows != nullptr) *n_rows = s ? s->n_rows : 0;
  return s && s->n_rows ? s->logits.data() : nullptr;
}

size_t stowage_n_vocab(const stowage_session* s) {
  return s ? static_cast<size_t>(s->session->n_vocab()) : 0;
}
size_t stowage_n_ctx(const stowage_session* s) { return s ? static_cast<size_t>(s->session->n_ctx()) : 0; }
size_t stowage_n_past(const stowage_session* s) { return s ? static_cast<size_t>(s->session->n_past()) : 0; }
void stowage_reset(stowage_session* s) {
  if (s) s->session->Reset();
}
const char* stowage_last_error(const stowage_session* s) { return s ? s->last_error.c_str() : ""; }
void stowage_session_free(stowage_session* s) { delete s; }

const char* stowage_status_name(stowage_status status) {
  if (status < STOWAGE_OK || status > STOWAGE_IO_ERROR) return "unknown";
  return stowage::StatusCodeName(static_cast<stowage::StatusCode>(status));
}

// ---- Embeddings ----

stowage_status stowage_set_embeddings(stowage_session* s, int enabled, stowage_pooling_type pooling) {
  if (s == nullptr) return STOWAGE_INVALID_ARGUMENT;
  const stowage::Status st =
      s->session->SetEmbeddings(enabled != 0, static_cast<stowage::PoolingType>(pooling));
  return st.ok() ? STOWAGE_OK : Failed(s, st);
}

size_t stowage_n_embd(const stowage_session* s) { return s ? static_cast<size_t>(s->session->n_embd()) : 0; }

const float* stowage_get_embeddings_ith(const stowage_session* s, int32_t i) {
  if (s == nullptr) return nullptr;
  const std::vector<float>& e = s->session->Embeddings();
  const auto ne = static_cast<size_t>(s->session->n_embd());
  if (e.empty() || ne == 0 || e.size() != s->n_batch * ne) return nullptr;
  const int64_t r = i < 0 ? static_cast<int64_t>(s->n_batch) + i : i;
  if (r < 0 || r >= static_cast<int64_t>(s->n_batch)) return nullptr;
  return e.data() + static_cast<size_t>(r) * ne;
}

const float* stowage_get_embeddings_seq(const stowage_session* s, int32_t seq_id) {
  return s ? s->session->SeqEmbeddings(seq_id) : nullptr;
}

// ---- Tokenizer ----

int32_t stowage_tokenize(stowage_session* s, const char* text, int32_t text_len, int32_t* tokens,
                         int32_t n_tokens_max, int add_special, int parse_special) {
  if (s == nullptr) return INT32_MIN;
  static const char* fn = "stowage_tokenize";
  return Guarded<int32_t>(s, fn, INT32_MIN, [&]() -> int32_t {
    if (text == nullptr || n_tokens_max < 0 || (tokens == nullptr && n_tokens_max > 0)) {
      s->last_error = std::string(fn) + ": text NULL, n_tokens_max " + std::to_string(n_tokens_max) +
                      " < 0, or tokens NULL with n_tokens_max > 0";
      return INT32_MIN;
    }
    const stowage::Tokenizer* tok = TokenizerOf(s, fn);
    if (tok == nullptr) return INT32_MIN;
    const size_t len = text_len < 0 ? std::strlen(text) : static_cast<size_t>(text_len);
    const std::vector<int32_t> ids =
        tok->Tokenize(std::string_view(text, len), add_special != 0, parse_special != 0);
    return CopyOut(s, fn, ids, tokens, n_tokens_max, "tokens");
  });
}

int32_t stowage_token_to_piece(stowage_session* s, int32_t token, char* buf, int32_t length, int32_t lstrip,
                               int special) {
  if (s == nullptr) return INT32_MIN;
  static const char* fn = "stowage_token_to_piece";
  return Guarded<int32_t>(s, fn, INT32_MIN, [&]() -> int32_t {
    if (length < 0 || (buf == nullptr && length > 0)) {
      s->last_error = std::string(fn) + ": length " + std::to_string(length) + " < 0 or buf NULL";
      return INT32_MIN;
    }
    const stowage::Tokenizer* tok = TokenizerOf(s, fn);
    if (tok == nullptr) return INT32_MIN;
    std::string piece = tok->TokenToPiece(token, special != 0);
    size_t skip = 0;  // llama_token_to_piece: up to lstrip leading spaces
    while (lstrip > 0 && skip < piece.size() && piece[skip] == ' ') {
      ++skip;
      --lstrip;
    }
    return CopyOut(s, fn, piece.substr(skip), buf, length, "bytes");
  });
}

int32_t stowage_detokenize(stowage_session* s, const int32_t* tokens, int32_t n_tokens, char* text,
                           int32_t text_len_max, int remove_special, int unparse_special) {
  if (s == nullptr) return INT32_MIN;
  static const char* fn = "stowage_detokenize";
  return Guarded<int32_t>(s, fn, INT32_MIN, [&]() -> int32_t {
    if (n_tokens < 0 || (tokens == nullptr && n_tokens > 0) || text_len_max < 0 ||
        (text == nullptr && text_len_max > 0)) {
      s->last_error = std::string(fn) + ": n_tokens " + std::to_string(n_tokens) + " or text_len_max " +
                      std::to_string(text_len_max) + " < 0, or a NULL array with a positive size";
      return INT32_MIN;
    }
    const stowage::Tokenizer* tok = TokenizerOf(s, fn);
    if (tok == nullptr) return INT32_MIN;
    const std::vector<int32_t> ids(tokens, tokens + n_tokens);
    return CopyOut(s, fn, tok->Detokenize(ids, remove_special != 0, unparse_special != 0), text, text_len_max,
                   "bytes");
  });
}

int32_t stowage_token_bos(const stowage_session* s) {
  return s && s->tokenizer ? s->tokenizer->bos() : stowage::kTokenNull;
}
int32_t stowage_token_eos(const stowage_session* s) {
  return s && s->tokenizer ? s->tokenizer->eos() : stowage::kTokenNull;
}
int32_t stowage_token_eot(const stowage_session* s) {
  return s && s->tokenizer ? s->tokenizer->eot() : stowage::kTokenNull;
}
int stowage_token_is_eog(const stowage_session* s, int32_t token) {
  return s && s->tokenizer && s->tokenizer->IsEog(token) ? 1 : 0;
}

// ---- Sampler chain ----

stowage_sampler* stowage_sampler_chain_init(void) {
  auto* h = new (std::nothrow) stowage_sampler();
  if (h != nullptr) h->is_chain = true;
  return h;
}

stowage_status stowage_sampler_chain_add(stowage_sampler* chain, stowage_sampler* step) {
  const bool ok = chain != nullptr && step != nullptr && chain->is_chain && !step->is_chain;
  stowage_status st = ok ? STOWAGE_OK : STOWAGE_INVALID_ARGUMENT;
  if (ok) {
    try {
      chain->chain.Add(step->chain.step(0));
    } catch (const std::bad_alloc&) {
      st = STOWAGE_RESOURCE_EXHAUSTED;
    }
  }
  if (step != chain) delete step;  // the chain owns it in every case
  return st;
}

int32_t stowage_sampler_chain_n(const stowage_sampler* chain) {
  return chain ? static_cast<int32_t>(chain->chain.size()) : 0;
}

stowage_sampler* stowage_sampler_init_greedy(void) { return NewStep(stowage::SamplerStep::Greedy()); }
stowage_sampler* stowage_sampler_init_dist(uint32_t seed) {
  return NewStep(stowage::SamplerStep::Dist(seed));
}
stowage_sampler* stowage_sampler_init_temp(float t) { return NewStep(stowage::SamplerStep::Temperature(t)); }
stowage_sampler* stowage_sampler_init_top_k(int32_t k) { return NewStep(stowage::SamplerStep::TopK(k)); }
stowage_sampler* stowage_sampler_init_top_p(float p, size_t min_keep) {
  return NewStep(stowage::SamplerStep::TopP(p, min_keep));
}
stowage_sampler* stowage_sampler_init_min_p(float p, size_t min_keep) {
  return NewStep(stowage::SamplerStep::MinP(p, min_keep));
}
stowage_sampler* stowage_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present) {
  return NewStep(stowage::SamplerStep::Penalties(last_n, repeat, freq, present));
}

int32_t stowage_sampler_sample(stowage_sampler* smpl, stowage_session* s, int32_t idx) {
  if (s == nullptr) return -1;
  static const char* fn = "stowage_sampler_sample";
  return Guarded<int32_t>(s, fn, -1, [&]() -> int32_t {
    if (smpl == nullptr) {
      s->last_error = std::string(fn) + ": smpl is NULL";
      return -1;
    }
    const float* row = stowage_get_logits_ith(s, idx);
    if (row == nullptr) {
      s->last_error = std::string(fn) + ": no logits for token " + std::to_string(idx) +
                      " of the last decode (it asked for none, it is out of range, or the decode failed)";
      return -1;
    }
    const int32_t t = smpl->chain.Sample(row, static_cast<int>(s->session->n_vocab()));
    if (t < 0)
      s->last_error = std::string(fn) +
                      ": no token picked (every logit NaN or -inf, or the chain has no greedy or dist step)";
    return t;
  });
}

void stowage_sampler_accept(stowage_sampler* smpl, int32_t token) {
  if (smpl == nullptr) return;
  try {
    smpl->chain.Accept(token);
  } catch (const std::bad_alloc&) {
    smpl->chain.ClearHistory();  // the windows restart empty rather than count wrongly
  }
}
void stowage_sampler_reset(stowage_sampler* smpl) {
  if (smpl != nullptr) smpl->chain.Reset();
}
void stowage_sampler_free(stowage_sampler* smpl) { delete smpl; }

// ---- State ----

stowage_status stowage_state_save_file(stowage_session* s, const char* path) {
  return StateCall(s, "stowage_state_save_file", path,
                   [&](const std::string& p) { return s->session->SaveState(p); });
}

stowage_status stowage_state_load_file(stowage_session* s, const char* path) {
  return StateCall(s, "stowage_state_load_file", path, [&](const std::string& p) {
    stowage::Status st = s->session->LoadState(p);
    if (st.ok()) {  // the logits of the last decode belong to the state before
      s->n_rows = 0;
      s->row_of.clear();
      s->n_batch = 0;
    }
    return st;
  });
}

stowage_status stowage_state_seq_save_file(stowage_session* s, const char* path, int32_t seq_id) {
  return StateCall(s, "stowage_state_seq_save_file", path,
                   [&](const std::string& p) { return s->session->SaveSeqState(seq_id, p); });
}

stowage_status stowage_state_seq_load_file(stowage_session* s, const char* path, int32_t dest_seq_id) {
  return StateCall(s, "stowage_state_seq_load_file", path,
                   [&](const std::string& p) { return s->session->LoadSeqState(dest_seq_id, p); });
}

}  // extern "C"
