/* Stowage runtime C API: load a plan for a GGUF model, tokenize, decode token batches of one or
 * several sequences, edit the KV cache, read logits and embeddings, sample with a sampler chain,
 * save and restore the state, detokenize, free. Modelled on llama.h (llama.cpp 2026).
 *
 * Errors: every function that can fail returns a stowage_status (0 = OK; the codes mirror
 * stowage::StatusCode, stowage_status_name names them) or, for the functions that return a count or
 * a token, a documented error value; none aborts. The one-line message of a session's last failed
 * call is available from stowage_last_error(session) (for stowage_session_create failures it is
 * written into the caller's buffer instead). No exception crosses this API (every entry point
 * catches, std::bad_alloc included, as STOWAGE_RESOURCE_EXHAUSTED).
 * Thread-safety: a session is not thread-safe (one thread at a time, any thread); the same holds for
 * a sampler; distinct sessions and samplers are independent (no global state). Tokenizer functions
 * (stowage_tokenize, stowage_token_to_piece, stowage_detokenize) only read the vocabulary but write
 * the session's last error: call them from the session's thread too.
 * Ownership: the session owns everything it returns (logits and embeddings pointers stay valid until
 * the next decode, reset, state load, stowage_set_embeddings or free of that session); the caller
 * owns what it passes in (arrays and strings are read during the call only) and every buffer it
 * asks a function to fill.
 * Units: token ids are int32; positions are int32 token positions within their sequence; logits are
 * float32, n_vocab per row; embeddings float32, n_embd per row; text is UTF-8 bytes, not
 * NUL-terminated unless a function says so.
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

/* "ok", "invalid argument", "out of range", ... (stowage::StatusCodeName); "unknown" for a value
 * outside the enum. A static string: never freed. */
const char* stowage_status_name(stowage_status status);

typedef struct stowage_session stowage_session;

/* Loads `plan_path` (made by plan-model) for `model_path` with `n_threads` CPU threads (0 = all),
 * and the model's tokenizer (a vocabulary the tokenizer does not support does not fail the session:
 * the tokenizer functions then fail with its error). On success *out is a new session (free it with
 * stowage_session_free). On failure *out is NULL and, when err != NULL, the one-line message is
 * copied into err (err_size bytes, NUL-terminated, truncated to fit). Errors: a NULL path or out
 * (STOWAGE_INVALID_ARGUMENT); those of Session::Create (a missing or malformed file, a plan made for
 * another model: STOWAGE_FAILED_PRECONDITION, an absent device: STOWAGE_UNAVAILABLE, memory:
 * STOWAGE_RESOURCE_EXHAUSTED). */
stowage_status stowage_session_create(const char* plan_path, const char* model_path, int n_threads,
                                      stowage_session** out, char* err, size_t err_size);

/* As stowage_session_create, with the plan's bytes in memory (plan_size bytes at `plan`, e.g. made by
 * stowage_plan_model_buffer of the planner's C API, stowage/planner/c_api.h, or read by the caller);
 * the bytes are copied, so the caller may free them when the call returns. Errors: as
 * stowage_session_create; a NULL `plan` with plan_size > 0 is STOWAGE_INVALID_ARGUMENT, an empty or
 * malformed plan the plan loader's error. */
stowage_status stowage_session_create_from_plan_buffer(const void* plan, size_t plan_size,
                                                       const char* model_path, int n_threads,
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

/* The model's vocabulary size (floats per logits row) and the plan's context (KV cache cells); 0 for
 * s NULL. */
size_t stowage_n_vocab(const stowage_session* s);
size_t stowage_n_ctx(const stowage_session* s);
/* Tokens of sequence 0 in the KV cache (stowage_kv_seq_pos_max(s, 0) + 1): where stowage_decode
 * appends. */
size_t stowage_n_past(const stowage_session* s);
/* Clears the KV cache. */
void stowage_reset(stowage_session* s);
/* ---- Embeddings (llama_set_embeddings, llama_get_embeddings_ith / _seq) ---------------------- */

/* Pooling of embeddings per sequence (llama_pooling_type's values; RANK is not supported). NONE:
 * one embedding per token; MEAN: the mean of a sequence's token embeddings in the batch; CLS: its
 * token of the smallest position; LAST: of the largest. */
typedef enum {
  STOWAGE_POOLING_NONE = 0,
  STOWAGE_POOLING_MEAN = 1,
  STOWAGE_POOLING_CLS = 2,
  STOWAGE_POOLING_LAST = 3,
} stowage_pooling_type;

/* Turns embeddings on (enabled != 0) or off for the following decodes, with `pooling`
 * (Session::SetEmbeddings). An embedding is the output of the model's final norm (llama.cpp's t_embd,
 * "result_norm"), n_embd floats. While on, every token of a batch is computed as an output (as
 * llama.cpp does), but stowage_get_logits* still return only the rows that were asked for. Errors:
 * s NULL (STOWAGE_INVALID_ARGUMENT, no message); a pooling outside the enum
 * (STOWAGE_INVALID_ARGUMENT); a plan whose graphs have no result_norm (STOWAGE_UNIMPLEMENTED).
 * Embeddings of an earlier decode are dropped. */
stowage_status stowage_set_embeddings(stowage_session* s, int enabled, stowage_pooling_type pooling);
/* The width of an embedding (the model's n_embd); 0 for s NULL. */
size_t stowage_n_embd(const stowage_session* s);
/* The embedding of token i of the last decode's batch (pooling NONE; llama_get_embeddings_ith):
 * n_embd floats; i < 0 counts from the end of the batch (-1: its last token). NULL when embeddings
 * are off, pooling is not NONE, i is out of range, or the last decode failed. */
const float* stowage_get_embeddings_ith(const stowage_session* s, int32_t i);
/* The pooled embedding of sequence seq_id from the last decode (pooling MEAN / CLS / LAST;
 * llama_get_embeddings_seq): n_embd floats. NULL when that decode had no token of the sequence,
 * pooling is NONE, embeddings are off, or the decode failed. */
const float* stowage_get_embeddings_seq(const stowage_session* s, int32_t seq_id);

/* ---- Tokenizer (llama_tokenize, llama_token_to_piece, llama_detokenize) ---------------------- */

/* Converts text (text_len bytes of UTF-8; text_len < 0: up to its NUL) to token ids in `tokens`
 * (n_tokens_max entries), as llama_tokenize: add_special != 0 adds what the vocabulary asks for
 * (BOS when it adds one, EOS likewise; BERT's [CLS] ... [SEP]); parse_special != 0 also reads
 * control tokens written in the text ("<s>", "<|im_start|>"; user-defined tokens are always read).
 * Returns the number of tokens written; when more than n_tokens_max are needed, nothing useful is
 * written and the return is -(the number needed): call again with a buffer that large (tokens may
 * be NULL with n_tokens_max 0 to ask). Errors, INT32_MIN with stowage_last_error set: s NULL (no
 * message), text NULL, n_tokens_max < 0 or tokens NULL with n_tokens_max > 0, a result of more
 * than INT32_MAX tokens, the session's vocabulary not supported by the tokenizer (its one-line
 * error). */
int32_t stowage_tokenize(stowage_session* s, const char* text, int32_t text_len, int32_t* tokens,
                         int32_t n_tokens_max, int add_special, int parse_special);
/* Writes the bytes of token `token` into buf (length bytes; not NUL-terminated), as
 * llama_token_to_piece: SentencePiece's U+2581 as a space, byte tokens as their byte; up to
 * `lstrip` leading spaces removed; control tokens as their text when special != 0, else nothing.
 * Returns the number of bytes written, or -(the number needed) when length is too small. A piece
 * may be part of a UTF-8 sequence: concatenate pieces before displaying. Errors, INT32_MIN with
 * stowage_last_error set: s NULL (no message), buf NULL with length > 0, length < 0, a vocabulary
 * the tokenizer does not support. An id outside [0, n_vocab) gives 0 bytes (llama.cpp asserts). */
int32_t stowage_token_to_piece(stowage_session* s, int32_t token, char* buf, int32_t length, int32_t lstrip,
                               int special);
/* Converts n_tokens tokens back to text in `text` (text_len_max bytes; not NUL-terminated), as
 * llama_detokenize: remove_special != 0 drops the BOS / EOS the vocabulary adds; unparse_special != 0
 * writes control tokens' text. Returns the number of bytes written, or -(the number needed) when
 * text_len_max is too small. Errors, INT32_MIN with stowage_last_error set: s NULL (no message),
 * tokens NULL with n_tokens > 0, n_tokens < 0, text NULL with text_len_max > 0, a vocabulary the
 * tokenizer does not support. */
int32_t stowage_detokenize(stowage_session* s, const int32_t* tokens, int32_t n_tokens, char* text,
                           int32_t text_len_max, int remove_special, int unparse_special);
/* The vocabulary's beginning-of-sequence, end-of-sequence and end-of-turn tokens; -1 when it has
 * none (or s is NULL, or the tokenizer failed). */
int32_t stowage_token_bos(const stowage_session* s);
int32_t stowage_token_eos(const stowage_session* s);
int32_t stowage_token_eot(const stowage_session* s);
/* 1 when `token` ends a generation (EOS, end of turn, and the texts llama.cpp treats so), else 0. */
int stowage_token_is_eog(const stowage_session* s, int32_t token);

/* ---- Sampler chain (llama_sampler_chain_*, llama_sampler_init_*) ----------------------------- */

/* A sampler: a chain (stowage_sampler_chain_init) or one step (stowage_sampler_init_*), as
 * llama_sampler. A chain applies its steps in the order they were added to the candidates of one
 * row of logits, each with llama.cpp 2026's semantics (src/llama-sampler.cpp; differences on
 * purpose in stowage/runtime/sampler.h: NaN and -inf logits are no candidates, ties sort by id, a
 * platform-independent uniform draw), and must end with a step that picks a token: greedy or dist.
 * Owned by the caller: free with stowage_sampler_free (a step added to a chain is owned by the
 * chain). Not thread-safe; one per sequence (each keeps its accepted tokens and its generator). */
typedef struct stowage_sampler stowage_sampler;

/* An empty chain; NULL when out of memory. */
stowage_sampler* stowage_sampler_chain_init(void);
/* Appends `step` (a sampler made by stowage_sampler_init_*) to `chain`, which takes ownership of it
 * in every case (on error it is freed). Errors: chain or step NULL, chain not a chain, step a chain
 * (STOWAGE_INVALID_ARGUMENT). */
stowage_status stowage_sampler_chain_add(stowage_sampler* chain, stowage_sampler* step);
/* The number of steps of a chain (1 for a step, 0 for NULL). */
int32_t stowage_sampler_chain_n(const stowage_sampler* chain);
/* Steps; each returns NULL when out of memory.
 * greedy: the largest logit (the first on ties). dist: a draw from the softmax of what is left, with
 * a std::mt19937 seeded with `seed`. temp: logits / t; t <= 0 keeps only the largest. top_k: the k
 * largest (k <= 0: all). top_p: the smallest set of most probable tokens reaching probability p, at
 * least min_keep (p >= 1: all). min_p: tokens of probability >= p times the largest one's, at least
 * min_keep (p <= 0: all). penalties: a token accepted c > 0 times among the last `last_n` accepted
 * ones gets its logit divided by `repeat` (multiplied when <= 0), minus c * freq + present (last_n
 * <= 0: off). */
stowage_sampler* stowage_sampler_init_greedy(void);
stowage_sampler* stowage_sampler_init_dist(uint32_t seed);
stowage_sampler* stowage_sampler_init_temp(float t);
stowage_sampler* stowage_sampler_init_top_k(int32_t k);
stowage_sampler* stowage_sampler_init_top_p(float p, size_t min_keep);
stowage_sampler* stowage_sampler_init_min_p(float p, size_t min_keep);
stowage_sampler* stowage_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present);
/* Samples a token from the logits of token idx of the session's last decode (as
 * stowage_get_logits_ith: idx < 0 counts from the end of the returned rows), as llama_sampler_sample;
 * it does not accept the token (call stowage_sampler_accept). Returns the token id, or -1 with
 * stowage_last_error set: s or smpl NULL (no message when s is NULL), no logits for idx, every logit
 * NaN or -inf, a chain without greedy or dist. */
int32_t stowage_sampler_sample(stowage_sampler* smpl, stowage_session* s, int32_t idx);
/* Records `token` as the sequence's next token for the penalties (llama_sampler_accept: the
 * prompt's tokens and each sampled one). NULL is allowed. Out of memory, the accepted tokens are
 * forgotten (the windows restart empty). */
void stowage_sampler_accept(stowage_sampler* smpl, int32_t token);
/* Forgets the accepted tokens and restarts the dist generators from their seeds. NULL is allowed. */
void stowage_sampler_reset(stowage_sampler* smpl);
/* Frees a sampler (a chain with its steps); NULL is allowed. */
void stowage_sampler_free(stowage_sampler* smpl);

/* ---- State (llama_state_save_file / llama_state_load_file) ----------------------------------- */

/* Writes the session's state to `path` (atomically: a complete file or none): a header (magic
 * "STWSTATE", format version, the model's identity as a plan records it: file size and header hash,
 * model_identity.h), the KV cache's cells (each cell's position and sequences, the SWA ring's) and
 * the bytes of every KV cache buffer (and a recurrent model's state). The sequences' n_past follow
 * from the cells. Logits, embeddings and samplers are not saved. Errors: s or path NULL
 * (STOWAGE_INVALID_ARGUMENT, no message when s is NULL); a failed write (STOWAGE_IO_ERROR). */
stowage_status stowage_state_save_file(stowage_session* s, const char* path);
/* Restores a state written by stowage_state_save_file for the same model and plan; decoding after it
 * gives the logits the saving session would have given, bit for bit. Errors (the session unchanged,
 * a one-line message naming the file and the offset, expected vs found): s or path NULL
 * (STOWAGE_INVALID_ARGUMENT); not a state file or another format version (STOWAGE_DATA_LOSS); a
 * state of another model or of a plan with other KV buffers or context (STOWAGE_FAILED_PRECONDITION);
 * a truncated file (STOWAGE_DATA_LOSS); an unreadable file (STOWAGE_IO_ERROR / STOWAGE_NOT_FOUND).
 * The last decode's logits and embeddings are dropped. */
stowage_status stowage_state_load_file(stowage_session* s, const char* path);
/* One sequence's state (llama_state_seq_save_file / _load_file; Session::SaveSeqState /
 * LoadSeqState): its positions and its cells' K/V bytes, behind the model identity. Save errors: s
 * or path NULL, seq_id out of range (STOWAGE_INVALID_ARGUMENT); a plan with a recurrent state or a
 * SWA cache (STOWAGE_UNIMPLEMENTED: save the whole state); a failed write (STOWAGE_IO_ERROR). Load
 * replaces sequence dest_seq_id, storing the saved cells in the first empty ones; errors (the cache
 * unchanged, one line naming the file and offset): those of stowage_state_load_file, and
 * STOWAGE_OUT_OF_RANGE when the cache has too few empty cells. */
stowage_status stowage_state_seq_save_file(stowage_session* s, const char* path, int32_t seq_id);
stowage_status stowage_state_seq_load_file(stowage_session* s, const char* path, int32_t dest_seq_id);

/* Message of the session's last failed call (any function above that takes the session and reports
 * an error); "" after a decode that succeeded (or before any); stowage_reset leaves it as it is. A
 * NULL session gives "". Valid until the next call on the session. */
const char* stowage_last_error(const stowage_session* s);
/* Frees the session and all its memory; NULL is allowed. */
void stowage_session_free(stowage_session* s);

#ifdef __cplusplus
}
#endif

#endif /* STOWAGE_RUNTIME_C_API_H_ */
