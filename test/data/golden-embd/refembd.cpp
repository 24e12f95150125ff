// Reference embeddings: runs a GGUF model through llama.cpp's CPU library with embeddings on and
// prints the prompt's tokens and the embeddings as text: line 1 the token ids, then one line of
// n_embd floats per token (pooling 0, none) or one line (pooling 1 mean, 2 cls, 3 last) of the
// sequence's pooled embedding.
// Usage: refembd MODEL "PROMPT" POOLING [threads]   (REF_BACKEND_DIR as for refdump)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
static void quiet(ggml_log_level, const char *, void *) {}
int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: refembd MODEL PROMPT POOLING [threads]\n");
    return 2;
  }
  llama_log_set(quiet, nullptr);
  if (const char *dir = getenv("REF_BACKEND_DIR"))
    ggml_backend_load_all_from_path(dir);
  else
    ggml_backend_load_all();
  llama_backend_init();
  llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    fprintf(stderr, "load failed\n");
    return 1;
  }
  const llama_vocab *vocab = llama_model_get_vocab(model);
  const std::string prompt = argv[2];
  const int pooling = atoi(argv[3]);
  const int n_thr = argc > 4 ? atoi(argv[4]) : 2;
  std::vector<llama_token> toks(prompt.size() + 8);
  const int n = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), true, false);
  toks.resize(n);
  auto cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_ubatch = 256;
  cp.n_threads = n_thr;
  cp.n_threads_batch = n_thr;
  cp.embeddings = true;
  cp.pooling_type = (enum llama_pooling_type)pooling;
  llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    fprintf(stderr, "context failed\n");
    return 1;
  }
  const int n_embd = llama_model_n_embd(model);
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) {
    batch.token[i] = toks[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch)) {
    fprintf(stderr, "decode failed\n");
    return 1;
  }
  for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", toks[i]);
  printf("\n");
  const int rows = pooling == 0 ? n : 1;
  for (int r = 0; r < rows; r++) {
    const float *e = pooling == 0 ? llama_get_embeddings_ith(ctx, r) : llama_get_embeddings_seq(ctx, 0);
    if (!e) {
      fprintf(stderr, "no embeddings\n");
      return 1;
    }
    for (int j = 0; j < n_embd; j++) printf("%s%.9g", j ? " " : "", e[j]);
    printf("\n");
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
