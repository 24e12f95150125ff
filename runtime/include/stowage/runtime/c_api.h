/* Stowage runtime C API: load a plan for a GGUF model, decode token batches, read logits, free.
 *
 * Errors: every function that can fail returns a stowage_status (0 = OK) and never aborts; the
 * message of the last error of a session is available from stowage_last_error(session) (or, for
 * stowage_session_create failures, written into the caller's buffer). No exceptions cross this API.
 * Thread-safety: a session is not thread-safe; distinct sessions are independent (no global state).
 * Units: token ids are int32; logits are float32, n_vocab per row. */
#ifndef STOWAGE_RUNTIME_C_API_H_
#define STOWAGE_RUNTIME_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors stowage::StatusCode. */
typedef enum {
  STOWAGE_OK = 0,
  STOWAGE_INVALID_ARGUMENT = 1,
  STOWAGE_OUT_OF_RANGE = 2,
  STOWAGE_NOT_FOUND = 3,
  STOWAGE_ALREADY_EXISTS = 4,
  STOWAGE_DATA_LOSS = 5,
  STOWAGE_FAILED_PRECONDITION = 6,
  STOWAGE_RESOURCE_EXHAUSTED = 7,
  STOWAGE_UNIMPLEMENTED = 8,
  STOWAGE_UNAVAILABLE = 9,
  STOWAGE_INTERNAL = 10,
  STOWAGE_IO_ERROR = 11,
} stowage_status;

typedef struct stowage_session stowage_session;

/* Loads `plan_path` (made by plan-model) for `model_path` with `n_threads` CPU threads (0 = all).
 * On success *out is a new session (free it with stowage_session_free). On failure *out is NULL and,
 * when err != NULL, the one-line message is copied into err (err_size bytes, NUL-terminated). */
stowage_status stowage_session_create(const char* plan_path, const char* model_path, int n_threads,
                                      stowage_session** out, char* err, size_t err_size);

/* Evaluates n_tokens tokens at the end of the session's sequence. all_logits != 0 keeps the logits
 * of every token (n_tokens rows), else of the last token only (one row). Errors: s NULL
 * (STOWAGE_INVALID_ARGUMENT, no message: there is no session to hold it); tokens NULL with
 * n_tokens > 0, n_tokens 0 or a token id outside [0, n_vocab) (STOWAGE_INVALID_ARGUMENT);
 * stowage_n_past + n_tokens > stowage_n_ctx (STOWAGE_OUT_OF_RANGE, checked before `tokens` is
 * read); a failed kernel or copy (its code). On error the sequence is as before the call
 * (stowage_n_past unchanged; for recurrent models see Session::Decode: reset first). */
stowage_status stowage_decode(stowage_session* s, const int32_t* tokens, size_t n_tokens, int all_logits);

/* Logits of the last stowage_decode: *n_rows rows of n_vocab floats, valid until the next decode. */
const float* stowage_get_logits(const stowage_session* s, size_t* n_rows);

size_t stowage_n_vocab(const stowage_session* s);
size_t stowage_n_ctx(const stowage_session* s);
/* Tokens in the KV cache. */
size_t stowage_n_past(const stowage_session* s);
/* Clears the KV cache. */
void stowage_reset(stowage_session* s);
/* Message of the session's last stowage_decode when it failed, "" after one that succeeded (or
 * before any); stowage_reset leaves it as it is. A NULL session gives "". */
const char* stowage_last_error(const stowage_session* s);
/* Frees the session and all its memory; NULL is allowed. */
void stowage_session_free(stowage_session* s);

#ifdef __cplusplus
}
#endif

#endif /* STOWAGE_RUNTIME_C_API_H_ */
