// Reference sampler chains: applies llama.cpp's samplers (llama_sampler_init_*, chained with
// llama_sampler_chain_add) to a fixed row of 32 logits, logit[i] = 3 sin(1.3 i) (float), and prints
// per case a line "case NAME" and one line "id logit p" per candidate left, in llama.cpp's order,
// then "selected ID" (-1 when no step picked). The penalties case first accepts 3, 5, 5, 7.
// Usage: refsampler   (REF_BACKEND_DIR as for refdump; make_goldens.sh builds and runs it)
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "llama.h"

namespace {
constexpr int kVocab = 32;

void Run(const char* name, const std::function<void(llama_sampler*)>& add, bool accept = false) {
  llama_sampler* c = llama_sampler_chain_init(llama_sampler_chain_default_params());
  add(c);
  if (accept)
    for (llama_token t : {3, 5, 5, 7}) llama_sampler_accept(c, t);
  std::vector<llama_token_data> d(kVocab);
  for (int i = 0; i < kVocab; ++i) d[i] = {i, 3.0f * std::sin(1.3f * static_cast<float>(i)), 0.0f};
  llama_token_data_array cur{d.data(), d.size(), -1, false};
  llama_sampler_apply(c, &cur);
  std::printf("case %s\n", name);
  for (size_t i = 0; i < cur.size; ++i)
    std::printf("%d %.9g %.9g\n", cur.data[i].id, cur.data[i].logit, cur.data[i].p);
  std::printf("selected %d\n", cur.selected >= 0 ? cur.data[cur.selected].id : -1);
  llama_sampler_free(c);
}
}  // namespace

int main() {
  Run("top_k", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_top_k(5)); });
  Run("top_p", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_top_p(0.8f, 1)); });
  Run("top_p_min_keep",
      [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_top_p(0.3f, 6)); });
  Run("min_p", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_min_p(0.2f, 1)); });
  Run("min_p_min_keep",
      [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_min_p(0.99f, 3)); });
  Run("temp", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_temp(0.7f)); });
  Run("temp_zero", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_temp(0.0f)); });
  Run("greedy", [](llama_sampler* c) { llama_sampler_chain_add(c, llama_sampler_init_greedy()); });
  Run(
      "penalties",
      [](llama_sampler* c) {
        llama_sampler_chain_add(c, llama_sampler_init_penalties(kVocab, 4, 1.3f, 0.1f, 0.2f));
      },
      /*accept=*/true);
  Run(
      "default_chain",
      [](llama_sampler* c) {
        llama_sampler_chain_add(c, llama_sampler_init_penalties(kVocab, 64, 1.1f, 0.f, 0.f));
        llama_sampler_chain_add(c, llama_sampler_init_top_k(10));
        llama_sampler_chain_add(c, llama_sampler_init_top_p(0.9f, 1));
        llama_sampler_chain_add(c, llama_sampler_init_min_p(0.05f, 1));
        llama_sampler_chain_add(c, llama_sampler_init_temp(0.7f));
        llama_sampler_chain_add(c, llama_sampler_init_greedy());
      },
      /*accept=*/true);
  Run("min_p_then_top_p", [](llama_sampler* c) {
    llama_sampler_chain_add(c, llama_sampler_init_min_p(0.1f, 1));
    llama_sampler_chain_add(c, llama_sampler_init_top_p(0.5f, 1));
  });
  return 0;
}
