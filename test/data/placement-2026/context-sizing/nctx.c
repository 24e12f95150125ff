#include <stdio.h>
#include <stdlib.h>

#include "llama.h"
int main(int argc, char** argv) {
  ggml_backend_load_all_from_path(getenv("REF_BACKEND_DIR"));
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* m = llama_model_load_from_file(argv[1], mp);
  if (!m) return 1;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = atoi(argv[2]);
  cp.flash_attn_type = atoi(argv[3]);
  cp.n_batch = 2048;
  cp.n_ubatch = 512;
  struct llama_context* c = llama_init_from_model(m, cp);
  if (!c) return 2;
  printf("n_ctx=%u n_batch=%u n_ubatch=%u\n", llama_n_ctx(c), llama_n_batch(c), llama_n_ubatch(c));
  return 0;
}
