/* Reference side of scripts/bench-vs-llamacpp.sh: llama.cpp (the npm libllama) on the same model
 * and thread count as stowage-run bench. pp: one batch of N_PROMPT tokens, logits of the last token
 * only (as llama-bench); tg: N_GEN single-token decodes. Prints one JSON line:
 * {"pp_tps": mean, "pp_sd": sd, "tg_tps": mean, "tg_sd": sd, "maxrss_kib": peak resident KiB}.
 * Built by the script against the fetched headers and libraries (not part of the CMake build).
 * Usage: llama_bench_ref MODEL N_PROMPT N_GEN THREADS REPS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level l, const char* t, void* u) {
  (void)l;
  (void)t;
  (void)u;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int decode(struct llama_context* ctx, int n, int pos0, int n_vocab) {
  struct llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) {
    b.token[i] = (i * 7 + 3) % n_vocab;
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = i == n - 1;
  }
  b.n_tokens = n;
  int rc = llama_decode(ctx, b);
  llama_batch_free(b);
  return rc;
}

static void stats(const double* v, int n, double* mean, double* sd) {
  double m = 0, s = 0;
  for (int i = 0; i < n; i++) m += v[i];
  m /= n;
  for (int i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
  *mean = m;
  *sd = n > 1 ? sqrt(s / (n - 1)) : 0;
}

int main(int argc, char** argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: llama_bench_ref MODEL N_PROMPT N_GEN THREADS REPS\n");
    return 2;
  }
  const int n_prompt = atoi(argv[2]), n_gen = atoi(argv[3]), n_thr = atoi(argv[4]), reps = atoi(argv[5]);
  llama_log_set(quiet, NULL);
  const char* dir = getenv("REF_BACKEND_DIR");
  if (dir)
    ggml_backend_load_all_from_path(dir);
  else
    ggml_backend_load_all();
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    fprintf(stderr, "llama_bench_ref: cannot load %s\n", argv[1]);
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_prompt + n_gen + 16;
  cp.n_batch = n_prompt > 0 ? n_prompt : 512; /* N_PROMPT 0: generation only */
  cp.n_ubatch = cp.n_batch;
  cp.n_threads = n_thr;
  cp.n_threads_batch = n_thr;
  /* Flash attention as the Stowage side runs (REF_FA: 0 off, 1 on; default off, Stowage's and llama.cpp
     FEB25's default; this library's own default is auto, which turns it on for the CPU). */
  const char* fa = getenv("REF_FA");
  cp.flash_attn_type = (fa && atoi(fa) == 1) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    fprintf(stderr, "llama_bench_ref: cannot create a context\n");
    return 1;
  }
  double pp[64], tg[64];
  if (reps > 63) return 2;
  for (int r = 0; r <= reps; r++) { /* r == 0 is a warm-up */
    llama_memory_clear(llama_get_memory(ctx), 1);
    double t0 = now();
    if (n_prompt > 0 && decode(ctx, n_prompt, 0, n_vocab)) return 1;
    double t1 = now();
    llama_memory_clear(llama_get_memory(ctx), 1);
    double t2 = now();
    for (int i = 0; i < n_gen; i++)
      if (decode(ctx, 1, i, n_vocab)) return 1;
    double t3 = now();
    if (r > 0) {
      pp[r - 1] = n_prompt / (t1 - t0);
      tg[r - 1] = n_gen / (t3 - t2);
    }
  }
  double ppm, pps, tgm, tgs;
  stats(pp, reps, &ppm, &pps);
  stats(tg, reps, &tgm, &tgs);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("{\"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg_tps\": %.3f, \"tg_sd\": %.3f, \"maxrss_kib\": %ld}\n", ppm,
         pps, tgm, tgs, ru.ru_maxrss);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
