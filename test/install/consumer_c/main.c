/* An out-of-tree C program against the installed runtime (pkg-config stowage), as llama.cpp's simple
 * examples use llama.h: tokenizes each prompt (special tokens added and parsed, as stowage-run),
 * decodes all the prompts in one batch, one sequence each (plan-model -np N -kvu for N prompts),
 * then generates for every sequence at once, one batch per step, each with its own sampler chain
 * (repetition penalties over the last 64 tokens at 1.1, then greedy: what stowage-run --temp 0
 * --repeat-penalty 1.1 samples), until an end-of-generation token or N_PREDICT tokens, and prints
 * each sequence's text on its own line (the pieces of its tokens, as stowage-run -q
 * --no-display-prompt prints them). The token ids go to stderr.
 *   consumer_c PLAN MODEL N_PREDICT PROMPT [PROMPT...]
 * Built with -DCONSUMER_PLAN_ON_THE_FLY against the planner (pkg-config stowage-planner), it plans
 * the model on the fly instead (stowage/planner/c_api.h: plan-model's defaults with a context of
 * N_CTX tokens and two sequences sharing one KV cache, as plan-model -c N_CTX -np 2 -kvu):
 *   consumer_c_planned N_CTX MODEL N_PREDICT PROMPT [PROMPT...] */
#include <stdio.h>
#include <stdlib.h>
#include <stowage/runtime/c_api.h>
#ifdef CONSUMER_PLAN_ON_THE_FLY
#include <stowage/planner/c_api.h>
#endif
#include <stowage/runtime/version.h>
#include <string.h>

#define MAX_SEQ 8

typedef struct {
  int32_t* prompt;
  int32_t n_prompt;
  stowage_sampler* chain;
  char* text;
  size_t text_len;
  int32_t last; /* the last token, decoded in the next step */
  int32_t row;  /* its index in the last batch (the logits to sample) */
  int32_t n_gen;
  int done;
} sequence;

static int append_piece(stowage_session* s, sequence* q, int32_t token) {
  char buf[64];
  int32_t n = stowage_token_to_piece(s, token, buf, (int32_t)sizeof buf, 0, 0);
  if (n < 0) return 0; /* a piece longer than 64 bytes: not in this vocabulary */
  char* t = realloc(q->text, q->text_len + (size_t)n + 1);
  if (t == NULL) return 0;
  memcpy(t + q->text_len, buf, (size_t)n);
  q->text = t;
  q->text_len += (size_t)n;
  q->text[q->text_len] = '\0';
  return 1;
}

static stowage_sampler* make_chain(void) {
  stowage_sampler* c = stowage_sampler_chain_init();
  if (c == NULL) return NULL;
  if (stowage_sampler_chain_add(c, stowage_sampler_init_penalties(64, 1.1f, 0.0f, 0.0f)) != STOWAGE_OK ||
      stowage_sampler_chain_add(c, stowage_sampler_init_greedy()) != STOWAGE_OK) {
    stowage_sampler_free(c);
    return NULL;
  }
  return c;
}

int main(int argc, char** argv) {
  if (argc < 5 || argc - 4 > MAX_SEQ) {
#ifdef CONSUMER_PLAN_ON_THE_FLY
    fprintf(stderr, "usage: %s N_CTX MODEL N_PREDICT PROMPT [PROMPT...] (at most %d prompts)\n", argv[0],
            MAX_SEQ);
#else
    fprintf(stderr, "usage: %s PLAN MODEL N_PREDICT PROMPT [PROMPT...] (at most %d prompts)\n", argv[0],
            MAX_SEQ);
#endif
    return 2;
  }
  fprintf(stderr, "consumer_c: stowage %s\n", stowage_version_string());
  const int n_predict = atoi(argv[3]);
  const int n_seq = argc - 4;
  char err[512];
  stowage_session* s = NULL;
#ifdef CONSUMER_PLAN_ON_THE_FLY
  stowage_plan_params params = stowage_plan_default_params();
  params.n_ctx = (uint32_t)atoi(argv[1]);
  params.n_seq_max = 2;
  params.kv_unified = 1;
  const stowage_status created = stowage_session_create_planned(argv[2], &params, 0, &s, err, sizeof err);
#else
  const stowage_status created = stowage_session_create(argv[1], argv[2], 0, &s, err, sizeof err);
#endif
  if (created != STOWAGE_OK) {
    fprintf(stderr, "consumer_c: %s\n", err);
    return 1;
  }
  sequence seq[MAX_SEQ];
  memset(seq, 0, sizeof seq);
  int ok = 1;
  int32_t n_batch = 0;
  for (int k = 0; ok && k < n_seq; ++k) {
    sequence* q = &seq[k];
    const char* p = argv[4 + k];
    /* llama_tokenize's negotiation: ask for the size, then tokenize into a buffer that large. */
    const int32_t need = -stowage_tokenize(s, p, -1, NULL, 0, 1, 1);
    q->prompt = malloc((size_t)(need > 0 ? need : 1) * sizeof(int32_t));
    q->chain = make_chain();
    ok = need > 0 && q->prompt != NULL && q->chain != NULL;
    if (ok) q->n_prompt = stowage_tokenize(s, p, -1, q->prompt, need, 1, 1);
    ok = ok && q->n_prompt == need;
    for (int32_t i = 0; ok && i < q->n_prompt; ++i) stowage_sampler_accept(q->chain, q->prompt[i]);
    n_batch += q->n_prompt;
  }
  /* One batch of every prompt, each in its own sequence; logits for each prompt's last token. */
  int32_t* tok = malloc((size_t)(n_batch > n_seq ? n_batch : n_seq) * sizeof(int32_t));
  int32_t* sid = malloc((size_t)(n_batch > n_seq ? n_batch : n_seq) * sizeof(int32_t));
  int8_t* want = malloc((size_t)(n_batch > n_seq ? n_batch : n_seq));
  ok = ok && tok != NULL && sid != NULL && want != NULL;
  stowage_status st = STOWAGE_OK;
  if (ok) {
    int32_t b = 0;
    for (int k = 0; k < n_seq; ++k)
      for (int32_t i = 0; i < seq[k].n_prompt; ++i, ++b) {
        tok[b] = seq[k].prompt[i];
        sid[b] = k;
        want[b] = (int8_t)(i + 1 == seq[k].n_prompt);
        if (want[b]) seq[k].row = b;
      }
    stowage_batch batch = {b, tok, NULL, sid, want};
    st = stowage_decode_batch(s, &batch);
  }
  for (int step = 0; ok && st == STOWAGE_OK && step < n_predict; ++step) {
    int32_t b = 0;
    for (int k = 0; k < n_seq; ++k) {
      sequence* q = &seq[k];
      if (q->done) continue;
      const int32_t next = stowage_sampler_sample(q->chain, s, q->row);
      if (next < 0) {
        ok = 0;
        break;
      }
      stowage_sampler_accept(q->chain, next);
      fprintf(stderr, "sequence %d: generated %d\n", k, next);
      ++q->n_gen;
      if (stowage_token_is_eog(s, next) || q->n_gen == n_predict) q->done = 1;
      if (!stowage_token_is_eog(s, next) && !append_piece(s, q, next)) ok = 0;
      if (q->done) continue;
      tok[b] = next;
      sid[b] = k;
      want[b] = 1;
      q->row = b++;
    }
    if (!ok || b == 0) break;
    stowage_batch batch = {b, tok, NULL, sid, want};
    st = stowage_decode_batch(s, &batch);
  }
  if (st != STOWAGE_OK || !ok) fprintf(stderr, "consumer_c: failed: %s\n", stowage_last_error(s));
  for (int k = 0; k < n_seq; ++k) {
    printf("%s\n", seq[k].text != NULL ? seq[k].text : "");
    free(seq[k].prompt);
    free(seq[k].text);
    stowage_sampler_free(seq[k].chain);
  }
  free(tok);
  free(sid);
  free(want);
  stowage_session_free(s);
  return st == STOWAGE_OK && ok ? 0 : 1;
}
