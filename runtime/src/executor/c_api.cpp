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
  std::string last_error;
};

namespace {
stowage_status ToC(const stowage::Status& s) {
  return static_cast<stowage_status>(static_cast<int>(s.code()));
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
  auto fail = [&](const stowage::Status& st) {
    s->last_error = st.message();
    s->n_rows = 0;
    return ToC(st);
  };
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
  s->last_error.clear();
  return STOWAGE_OK;
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
