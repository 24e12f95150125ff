// Reference side of the golden-exact data (see README.md): llama.cpp of npm node-llama-cpp@3.21.1
// decodes PROMPT (tokenized by llama.cpp, BOS added) in one llama_decode with every position's
// logits, then N greedy tokens one llama_decode each; prints JSON with the prompt tokens, the
// greedy tokens and the XXH64 (seed 0) of every logit as little-endian float32 bytes, in that
// order: the prompt rows, then one row after each greedy token. 1 thread; flash attention off
// unless FA is "on" (llama.cpp 2026's default, -fa auto, turns it on for the CPU). n_batch = N_CTX,
// n_ubatch = N_UBATCH (default N_CTX). Interleaved-SWA models get a full-size SWA cache
// (llama_context_default_params' swa_full = true) unless N_UBATCH is given: then llama-cli's default
// swa_full = false, a SWA cache of min(n_ctx, pad(n_swa + n_ubatch, 256)) cells, which a prompt
// longer than it wraps (its cells are reused).
// Usage: refexact MODEL PROMPT N N_CTX [off|on [N_UBATCH]]   (REF_BACKEND_DIR: the ggml backends' folder)
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static void Quiet(ggml_log_level, const char*, void*) {}

int main(int argc, char** argv) {
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr, "usage: refexact MODEL PROMPT N N_CTX [off|on [N_UBATCH]]\n");
    return 2;
  }
  const bool flash_attn = argc >= 6 && std::string(argv[5]) == "on";
  llama_log_set(Quiet, nullptr);
  if (const char* dir = std::getenv("REF_BACKEND_DIR"))
    ggml_backend_load_all_from_path(dir);
  else
    ggml_backend_load_all();
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const std::string prompt = argv[2];
  std::vector<llama_token> toks(prompt.size() + 8);
  toks.resize(size_t(llama_tokenize(vocab, prompt.c_str(), int32_t(prompt.size()), toks.data(),
                                    int32_t(toks.size()), true, false)));
  const int n_gen = std::atoi(argv[3]);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = uint32_t(std::atoi(argv[4]));
  if (argc == 7) {
    cp.n_ubatch = uint32_t(std::atoi(argv[6]));
    cp.swa_full = false;
  }
  cp.n_threads = cp.n_threads_batch = 1;
  cp.flash_attn_type = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int nv = llama_vocab_n_tokens(vocab);
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  const int n = int(toks.size());
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int j = 0; j < n; ++j) {
    b.token[j] = toks[size_t(j)];
    b.pos[j] = j;
    b.n_seq_id[j] = 1;
    b.seq_id[j][0] = 0;
    b.logits[j] = 1;
  }
  b.n_tokens = n;
  if (llama_decode(ctx, b) != 0) return 1;
  for (int j = 0; j < n; ++j) XXH64_update(h, llama_get_logits_ith(ctx, j), sizeof(float) * size_t(nv));
  std::vector<float> cur(llama_get_logits_ith(ctx, n - 1), llama_get_logits_ith(ctx, n - 1) + nv);
  llama_batch_free(b);
  std::vector<int> greedy;
  for (int g = 0; g < n_gen; ++g) {
    int t = 0;
    for (int v = 1; v < nv; ++v)
      if (cur[size_t(v)] > cur[size_t(t)]) t = v;
    greedy.push_back(t);
    llama_batch b1 = llama_batch_init(1, 0, 1);
    b1.token[0] = t;
    b1.pos[0] = n + g;
    b1.n_seq_id[0] = 1;
    b1.seq_id[0][0] = 0;
    b1.logits[0] = 1;
    b1.n_tokens = 1;
    if (llama_decode(ctx, b1) != 0) return 1;
    const float* lg = llama_get_logits_ith(ctx, 0);
    cur.assign(lg, lg + nv);
    XXH64_update(h, lg, sizeof(float) * size_t(nv));
    llama_batch_free(b1);
  }
  std::printf(
      "{\"source\": \"refexact (test/data/golden-exact) on libllama of node-llama-cpp@3.21.1, CPU, "
      "flash attention %s, 1 thread\",\n \"n_ctx\": %s, \"flash_attn\": %s, \"n_vocab\": %d,\n ",
      flash_attn ? "on" : "off", argv[4], flash_attn ? "true" : "false", nv);
  if (argc == 7) std::printf("\"n_ubatch\": %u, \"swa_full\": false,\n ", cp.n_ubatch);
  std::printf("\"prompt_tokens\": [");
  for (int i = 0; i < n; ++i) std::printf("%s%d", i ? "," : "", toks[size_t(i)]);
  std::printf("],\n \"greedy\": [");
  for (size_t i = 0; i < greedy.size(); ++i) std::printf("%s%d", i ? "," : "", greedy[i]);
  std::printf("],\n \"logits_xxh64\": \"%016llx\"}\n", static_cast<unsigned long long>(XXH64_digest(h)));
  XXH64_freeState(h);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
