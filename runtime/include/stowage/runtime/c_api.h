/* Stowage runtime C API: load a plan for a GGUF model, decode token batches of one or several
 * sequences, edit the KV cache, read logits, free.
 *
 * Errors: every function that can fail returns a stowage_status (0 = OK) and never aborts; the
 * message of the last error of a session is available from stowage_last_error(session) (or, for
 * stowage_session_create failures, written into the caller's buffer). No exceptions cross this API.
 * Thread-safety: a session is not thread-safe (one thread at a time, any thread); distinct sessions
 * are independent (no global state).
 * Ownership: the session owns everything it returns (logits pointers stay valid until the next
 * decode, reset or free of that session); the caller owns what it passes in (batch arrays are read
 * during the call only).
 * Units: token ids are int32; positions are int32 token positions within their sequence; logits are
 * float32, n_vocab per row.
 * Sequences: a plan keeps n_seq_max sequences (plan-model -np N, llama.cpp's n_seq_max); with -kvu
 * they share one KV cache of n_ctx cells (llama.cpp's unified cache) and a token attends only to its
 * own sequence's cells. stowage_decode appends to sequence 0; stowage_decode_batch takes tokens of
 * several sequences (llama_decode of a llama_batch). */
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

/* A batch for stowage_decode_batch, as llama.h's llama_batch with one sequence per token: n_tokens
 * entries in each array that is not NULL. Owned by the caller; read during the call only.
 * - token: token ids in [0, n_vocab); required.
 * - pos: each token's position in its sequence; NULL: the sequence's next positions in batch order
 *   (stowage_kv_seq_pos_max + 1 on, as llama_batch_allocr fills them).
 * - seq_id: each token's sequence in [0, stowage_n_seq_ids); NULL: all in sequence 0.
 * - logits: non-zero to return the token's logits; NULL: the last token's only.
 * The tokens of one sequence must have consecutive positions (any order in the batch) starting at
 * stowage_kv_seq_pos_max + 1 when the sequence is in the cache (llama.cpp 2026's rule). */
typedef struct {
  int32_t n_tokens;
  const int32_t* token;
  const int32_t* pos;
  const int32_t* seq_id;
  const int8_t* logits;
} stowage_batch;

/* Evaluates a batch of one or more sequences (Session::DecodeBatch): the tokens are stored in the
 * KV cache, each ubatch of the plan's n_ubatch tokens in a run of empty cells, and the logits of the
 * tokens that ask for them are kept (stowage_get_logits_ith). Errors: s NULL
 * (STOWAGE_INVALID_ARGUMENT, no message); batch or batch->token NULL, n_tokens <= 0, a token id,
 * sequence id or position out of range, positions of a sequence not consecutive
 * (STOWAGE_INVALID_ARGUMENT); more tokens than empty cells ("context full") or no run of empty
 * cells for a ubatch ("KV cache full") (STOWAGE_OUT_OF_RANGE); a failed kernel or copy (its code).
 * On error the KV cache is as before the call and no logits are kept. */
stowage_status stowage_decode_batch(stowage_session* s, const stowage_batch* batch);

/* Logits of the last stowage_decode / stowage_decode_batch: *n_rows rows of n_vocab floats, the
 * tokens that asked for them in batch order; valid until the next decode. */
const float* stowage_get_logits(const stowage_session* s, size_t* n_rows);
/* The logits of token i of the last decode's batch (llama_get_logits_ith): n_vocab floats; i < 0
 * counts from the end of the returned rows (-1: the last row). NULL when that token asked for no
 * logits, i is out of range, or the last decode failed. */
const float* stowage_get_logits_ith(const stowage_session* s, int32_t i);

/* KV cache operations (llama.h's llama_memory_*). p0 < 0 means from position 0, p1 < 0 to the end.
 * stowage_kv_seq_rm: removes sequence seq_id's tokens at positions [p0, p1); seq_id -1: of every
 * sequence. Cells shared with another sequence (stowage_kv_seq_cp) stay for it. Errors:
 * STOWAGE_INVALID_ARGUMENT (s NULL, seq_id out of range); STOWAGE_FAILED_PRECONDITION when the plan
 * cannot drop part of a sequence (a recurrent state: whole sequences only, where llama.cpp returns
 * false; a sliding-window ring whose needed cells were overwritten); the cache is unchanged then. */
stowage_status stowage_kv_seq_rm(stowage_session* s, int32_t seq_id, int32_t p0, int32_t p1);
/* Makes sequence dst share sequence src's cells at positions [p0, p1) (no K/V is copied: one
 * unified cache). Errors: STOWAGE_INVALID_ARGUMENT (s NULL, an id out of range). */
stowage_status stowage_kv_seq_cp(stowage_session* s, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Largest / smallest position of seq_id in the KV cache; -1 when it has none (or s is NULL, or
 * the id is out of range). */
int32_t stowage_kv_seq_pos_max(const stowage_session* s, int32_t seq_id);
int32_t stowage_kv_seq_pos_min(const stowage_session* s, int32_t seq_id);
/* Empties the KV cache of every sequence (llama_memory_clear); the same as stowage_reset. */
void stowage_kv_clear(stowage_session* s);
/* The plan's n_seq_max (plan-model -np), and the sequence ids stowage_decode_batch accepts:
 * [0, stowage_n_seq_ids): 256 with a unified KV cache (-kvu), else n_seq_max. 0 for s NULL. */
size_t stowage_n_seq_max(const stowage_session* s);
size_t stowage_n_seq_ids(const stowage_session* s);

size_t stowage_n_vocab(const stowage_session* s);
size_t stowage_n_ctx(const stowage_session* s);
/* Tokens of sequence 0 in the KV cache (stowage_kv_seq_pos_max(s, 0) + 1): where stowage_decode
 * appends. */
size_t stowage_n_past(const stowage_session* s);
/* Clears the KV cache. */
void stowage_reset(stowage_session* s);
/* Message of the session's last failed call (decode, decode_batch, kv_seq_rm, kv_seq_cp); "" after a
 * decode that succeeded (or before any); stowage_reset leaves it as it is. A NULL session gives "".
 * Valid until the next call on the session. */
const char* stowage_last_error(const stowage_session* s);
/* Frees the session and all its memory; NULL is allowed. */
void stowage_session_free(stowage_session* s);

#ifdef __cplusplus
}
#endif

#endif /* STOWAGE_RUNTIME_C_API_H_ */
