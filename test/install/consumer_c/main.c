/* An out-of-tree C program against the installed runtime (pkg-config stowage): loads a plan, feeds
 * the prompt's token ids and generates greedily (the largest logit, the first one on a tie, as
 * stowage-run --temp 0), printing the generated ids on one line.
 *   consumer_c PLAN MODEL N_PREDICT PROMPT_ID... */
#include <stdio.h>
#include <stdlib.h>
#include <stowage/runtime/c_api.h>
#include <stowage/runtime/version.h>

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s PLAN MODEL N_PREDICT PROMPT_ID...\n", argv[0]);
    return 2;
  }
  fprintf(stderr, "consumer_c: stowage %s\n", stowage_version_string());
  const int n_predict = atoi(argv[3]);
  const size_t n_prompt = (size_t)(argc - 4);
  int32_t* prompt = malloc(n_prompt * sizeof *prompt);
  if (prompt == NULL) return 1;
  for (size_t i = 0; i < n_prompt; ++i) prompt[i] = (int32_t)atoi(argv[4 + i]);

  char err[512];
  stowage_session* s = NULL;
  if (stowage_session_create(argv[1], argv[2], 0, &s, err, sizeof err) != STOWAGE_OK) {
    fprintf(stderr, "consumer_c: %s\n", err);
    free(prompt);
    return 1;
  }
  int32_t token = 0;
  stowage_status st = stowage_decode(s, prompt, n_prompt, 0);
  for (int i = 0; st == STOWAGE_OK && i < n_predict; ++i) {
    size_t n_rows = 0;
    const float* logits = stowage_get_logits(s, &n_rows);
    const size_t n_vocab = stowage_n_vocab(s);
    size_t best = 0;
    for (size_t v = 1; v < n_vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    token = (int32_t)best;
    printf(i == 0 ? "%d" : " %d", token);
    if (i + 1 < n_predict) st = stowage_decode(s, &token, 1, 0);
  }
  printf("\n");
  if (st != STOWAGE_OK) fprintf(stderr, "consumer_c: %s\n", stowage_last_error(s));
  stowage_session_free(s);
  free(prompt);
  return st == STOWAGE_OK ? 0 : 1;
}
