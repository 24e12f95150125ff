#include "stowage/runtime/c_api.h"

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "stowage/runtime/session.h"

struct stowage_session {
  std::unique_ptr<stowage::Session> session;
  std::vector<float> logits;
  size_t n_rows = 0;
  std::vector<int32_t> row_of;  // the logits row of each token of the last batch, -1: none
  std::string last_error;
};

namespace {
stowage_status ToC(const stowage::Status& s) {
  return static_cast<stowage_status>(static_cast<int>(s.code()));
}
// A failed decode: its message kept as the session's last error, no logits kept.
stowage_status DecodeFailed(stowage_session* s, const stowage::Status& st) {
  s->last_error = st.message();
  s->n_rows = 0;
  s->row_of.clear();
  return ToC(st);
}
}  // namespace

extern "C" {

stowage_status stowage_session_create(const char* plan_path, const char* model_path, int n_threads,
                                      stowage_session** out, char* err, size_t err_size) {
  if (out != nullptr) *out = nullptr;
  auto fail = [&](const stowage::Status& st) {
    if (err != nullptr && err_size > 0) {
      std::strncpy(err, st.message().c_str(), err_size - 1);
      err[err_size - 1] = '\0';
    }
    return ToC(st);
  };
  if (plan_path == nullptr || model_path == nullptr || out == nullptr)
    return fail(
        stowage::InvalidArgument("stowage_session_create: plan_path, model_path and out must not be NULL"));
  try {  // no exception crosses the C API (std::bad_alloc included)
    stowage::SessionOptions opts;
    opts.n_threads = n_threads;
    auto s = stowage::Session::Create(plan_path, model_path, opts);
    if (!s.ok()) return fail(s.status());
    auto* h = new (std::nothrow) stowage_session();
    if (h == nullptr) return fail(stowage::ResourceExhausted("out of memory"));
    h->session = std::move(s).value();
    *out = h;
    return STOWAGE_OK;
  } catch (const std::bad_alloc&) {
    return fail(stowage::ResourceExhausted("stowage_session_create: out of memory"));
  } catch (const std::exception& e) {
    return fail(stowage::Internal(std::string("stowage_session_create: ") + e.what()));
  }
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

}  // extern "C"
