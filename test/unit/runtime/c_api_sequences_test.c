/* The C API's batches of several sequences and KV cache operations, from C99:
 *   c_api_sequences_test PLAN MODEL
 * PLAN is a plan of MODEL (stories260K) for 4 sequences sharing one cache (plan-model -np 4 -kvu).
 * Two sequences decoded interleaved in one batch give each the logits it gets alone (within 1e-2:
 * the attention sums run over both sequences' cells in other SIMD lanes, see session.h); a tail
 * removed and decoded again and a shared prompt give the same bits; bad input gets its status and
 * a message. Exit 0 when every check passes, 1 otherwise (each failure printed). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stowage/runtime/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static float max_diff(const float* a, const float* b, size_t n) {
  float d = 0;
  size_t i;
  for (i = 0; i < n; ++i) d = fmaxf(d, fabsf(a[i] - b[i]));
  return d;
}

/* A batch of one token: t at position *p (p NULL: the sequence's next) of sequence *q, logits. */
static stowage_batch one_token(const int32_t* t, const int32_t* p, const int32_t* q) {
  stowage_batch b;
  memset(&b, 0, sizeof b);
  b.n_tokens = 1;
  b.token = t;
  b.pos = p;
  b.seq_id = q;
  return b;
}

int main(int argc, char** argv) {
  static const int32_t a[6] = {1, 403, 407, 261, 378, 300};
  static const int32_t b[4] = {1, 87, 45, 310};
  char err[512];
  stowage_session* s = NULL;
  stowage_session* alone = NULL;
  stowage_batch batch;
  int32_t tok[10], seq[10];
  int8_t want[10];
  float first[512], again[512], rows_alone_a[6 * 512], rows_alone_b[4 * 512];
  size_t n_vocab, n_rows, i;
  int k;
  if (argc != 3) {
    fprintf(stderr, "usage: c_api_sequences_test PLAN MODEL\n");
    return 2;
  }
  if (stowage_session_create(argv[1], argv[2], 2, &s, err, sizeof err) != STOWAGE_OK ||
      stowage_session_create(argv[1], argv[2], 2, &alone, err, sizeof err) != STOWAGE_OK) {
    fprintf(stderr, "session: %s\n", err);
    return 1;
  }
  n_vocab = stowage_n_vocab(s);
  CHECK(n_vocab == 512);
  CHECK(stowage_n_seq_max(s) == 4);
  CHECK(stowage_n_seq_ids(s) == 256);

  /* Each sequence alone (sequence 0 of a session of its own), every position's logits. */
  memset(&batch, 0, sizeof batch);
  for (i = 0; i < 6; ++i) want[i] = 1;
  batch.n_tokens = 6;
  batch.token = a;
  batch.logits = want;
  CHECK(stowage_decode_batch(alone, &batch) == STOWAGE_OK);
  CHECK(stowage_get_logits(alone, &n_rows) != NULL && n_rows == 6);
  memcpy(rows_alone_a, stowage_get_logits(alone, &n_rows), sizeof rows_alone_a);
  stowage_kv_clear(alone);
  batch.n_tokens = 4;
  batch.token = b;
  CHECK(stowage_decode_batch(alone, &batch) == STOWAGE_OK);
  memcpy(rows_alone_b, stowage_get_logits(alone, &n_rows), sizeof rows_alone_b);

  /* Interleaved: a0 b0 a1 b1 a2 b2 a3 b3 a4 a5 in sequences 0 and 1, positions left to the session
   * (pos NULL: each sequence's next ones). */
  for (i = 0, k = 0; i < 6; ++i) {
    tok[k] = a[i], seq[k] = 0, want[k] = 1, ++k;
    if (i < 4) tok[k] = b[i], seq[k] = 1, want[k] = 1, ++k;
  }
  batch.n_tokens = 10;
  batch.token = tok;
  batch.pos = NULL;
  batch.seq_id = seq;
  batch.logits = want;
  CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
  CHECK(stowage_kv_seq_pos_max(s, 0) == 5 && stowage_kv_seq_pos_max(s, 1) == 3);
  for (i = 0, k = 0; i < 6; ++i) {
    CHECK(max_diff(stowage_get_logits_ith(s, k), rows_alone_a + i * n_vocab, n_vocab) <= 1e-2f);
    ++k;
    if (i < 4) {
      CHECK(max_diff(stowage_get_logits_ith(s, k), rows_alone_b + i * n_vocab, n_vocab) <= 1e-2f);
      ++k;
    }
  }
  CHECK(stowage_get_logits_ith(s, -1) == stowage_get_logits_ith(s, 9));
  CHECK(stowage_get_logits_ith(s, 10) == NULL);

  /* Only the last token's logits (logits NULL); the others' rows are NULL. */
  {
    static const int32_t next[2] = {17, 18};
    static const int32_t next_seq[2] = {1, 1};
    memset(&batch, 0, sizeof batch);
    batch.n_tokens = 2;
    batch.token = next;
    batch.seq_id = next_seq;
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
    CHECK(stowage_get_logits_ith(s, 0) == NULL);
    CHECK(stowage_get_logits_ith(s, 1) != NULL);
    CHECK(stowage_kv_seq_pos_max(s, 1) == 5);
  }

  /* Remove sequence 1's tail and decode it again: the same bits. */
  {
    static const int32_t t[1] = {19};
    static const int32_t one[1] = {1};
    batch = one_token(t, NULL, one);
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
    memcpy(first, stowage_get_logits_ith(s, 0), sizeof first);
    CHECK(stowage_kv_seq_rm(s, 1, 6, -1) == STOWAGE_OK);
    CHECK(stowage_kv_seq_pos_max(s, 1) == 5);
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
    memcpy(again, stowage_get_logits_ith(s, 0), sizeof again);
    CHECK(memcmp(first, again, sizeof first) == 0);
  }

  /* A shared prompt: sequences 2 and then 3 continue sequence 0's cells; removed, sequence 2's
   * token leaves its cell empty for sequence 3's, which sees the same cells: the same bits. */
  {
    static const int32_t t[1] = {42};
    static const int32_t p[1] = {6};
    int32_t q[1] = {2};
    CHECK(stowage_kv_seq_cp(s, 0, 2, -1, -1) == STOWAGE_OK);
    CHECK(stowage_kv_seq_pos_min(s, 2) == 0 && stowage_kv_seq_pos_max(s, 2) == 5);
    batch = one_token(t, p, q);
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
    memcpy(first, stowage_get_logits_ith(s, 0), sizeof first);
    CHECK(stowage_kv_seq_rm(s, 2, -1, -1) == STOWAGE_OK);
    CHECK(stowage_kv_seq_pos_max(s, 2) == -1 && stowage_kv_seq_pos_max(s, 0) == 5);
    CHECK(stowage_kv_seq_cp(s, 0, 3, -1, -1) == STOWAGE_OK);
    q[0] = 3;
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_OK);
    CHECK(memcmp(first, stowage_get_logits_ith(s, 0), sizeof first) == 0);
  }

  /* Bad input: a status and a one-line message; the cache unchanged. */
  {
    static const int32_t t[1] = {5};
    static const int32_t bad_seq[1] = {300};
    batch = one_token(t, NULL, bad_seq);
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_INVALID_ARGUMENT);
    CHECK(strcmp(stowage_last_error(s), "decode: token 0: seq_id 300 outside [0, 256)") == 0);
    CHECK(stowage_get_logits_ith(s, 0) == NULL);
    CHECK(stowage_decode_batch(s, NULL) == STOWAGE_INVALID_ARGUMENT);
    CHECK(strcmp(stowage_last_error(s), "stowage_decode_batch: batch or batch->token is NULL") == 0);
    batch.n_tokens = 0;
    CHECK(stowage_decode_batch(s, &batch) == STOWAGE_INVALID_ARGUMENT);
    CHECK(stowage_decode_batch(NULL, &batch) == STOWAGE_INVALID_ARGUMENT);
    CHECK(stowage_kv_seq_rm(s, 999, -1, -1) == STOWAGE_INVALID_ARGUMENT);
    CHECK(strcmp(stowage_last_error(s), "SeqRm: seq_id 999 outside [-1, 256)") == 0);
    CHECK(stowage_kv_seq_cp(s, -1, 0, -1, -1) == STOWAGE_INVALID_ARGUMENT);
    CHECK(stowage_kv_seq_rm(NULL, 0, -1, -1) == STOWAGE_INVALID_ARGUMENT);
    CHECK(stowage_kv_seq_pos_max(NULL, 0) == -1);
    CHECK(stowage_n_seq_ids(NULL) == 0);
    CHECK(stowage_kv_seq_pos_max(s, 0) == 5 && stowage_kv_seq_pos_max(s, 3) == 6);
  }

  /* Clear: every sequence gone. */
  stowage_kv_clear(s);
  CHECK(stowage_kv_seq_pos_max(s, 0) == -1 && stowage_kv_seq_pos_max(s, 1) == -1);
  CHECK(stowage_n_past(s) == 0);
  stowage_session_free(s);
  stowage_session_free(alone);
  if (failures == 0) printf("c_api_sequences_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
