// Reference side of iswa-ring (README.md): llama.cpp (node-llama-cpp 3.22.1, 2026-09-28) decodes the
// 400 token ids RingToken(0..399) of a tiny gemma2 at n_ctx 512, n_batch 512, n_ubatch 16, flash
// attention off, 1 thread, in two llama_decode calls (the first FIRST tokens, then the rest) with
// every position's logits, and prints the XXH64 (seed 0) of all logits as little-endian float32
// bytes. swa_full is llama_context_params.swa_full (0: the SWA cache of GGML_PAD(8 + 16, 256) = 256
// cells, which the sequence wraps; 1: 512 cells).
// Usage: ref_ring MODEL FIRST SWA_FULL   (REF_BACKEND_DIR: the directory of the ggml backends)
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static void Quiet(ggml_log_level, const char*, void*) {}

// The test's token ids (iswa_test.cpp RingToken): in [3, 64), no special token.
static int RingToken(int i) { return 3 + (i * 7 + i * i) % 61; }

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ref_ring MODEL FIRST SWA_FULL\n");
    return 2;
  }
  llama_log_set(Quiet, nullptr);
  if (const char* dir = std::getenv("REF_BACKEND_DIR"))
    ggml_backend_load_all_from_path(dir);
  else
    ggml_backend_load_all();
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) return 1;
  const int first = std::atoi(argv[2]), n_all = 400;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = 512;
  cp.n_ubatch = 16;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.swa_full = std::atoi(argv[3]) != 0;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  for (int pos = 0; pos < n_all;) {
    const int n = pos == 0 ? first : n_all - first;
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
      b.token[i] = RingToken(pos + i);
      b.pos[i] = pos + i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) return 1;
    for (int i = 0; i < n; ++i) XXH64_update(h, llama_get_logits_ith(ctx, i), sizeof(float) * size_t(nv));
    llama_batch_free(b);
    pos += n;
  }
  std::printf("%016llx\n", static_cast<unsigned long long>(XXH64_digest(h)));
  XXH64_freeState(h);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
