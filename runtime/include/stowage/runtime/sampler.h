// Sampler: picks the next token from a row of logits (greedy, or temperature sampling after
// top-k / top-p / min-p truncation), in the order of llama.cpp's default sampler chain
// (common_sampler: penalties -> top_k -> top_p -> min_p -> temperature -> dist). The repetition
// penalties look at the tokens passed to Accept (the prompt's and the generated ones, as llama-cli
// accepts both).
//
// Determinism: random draws come from a std::mt19937 owned by the Sampler and seeded explicitly
// (SamplerParams::seed); the uniform variate is built from two 32-bit draws in a fixed way, so a
// given seed and logits sequence yields the same tokens on every platform. No global state.
//
// Thread-safety: a Sampler is not thread-safe (Sample advances its generator); use one Sampler per
// sequence. Copying a Sampler copies its generator state.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stowage {

/// Sampling settings. Defaults are llama.cpp's (common_params_sampling).
struct SamplerParams {
  /// Softmax temperature applied after truncation. <= 0 selects greedy decoding (argmax of the
  /// logits, lowest id on ties; the other settings are then ignored).
  float temperature = 0.8f;
  /// Keep only the k highest logits; <= 0 or >= n_vocab keeps all. top_k = 1 is greedy.
  int32_t top_k = 40;
  /// Nucleus sampling: keep the smallest set of most probable tokens whose probabilities (softmax
  /// of the untempered logits left by top_k) sum to at least top_p; >= 1 disables it.
  float top_p = 0.95f;
  /// Keep tokens whose probability is at least min_p times the most probable one's (on the
  /// untempered logits left by the previous steps); <= 0 disables it.
  float min_p = 0.05f;
  /// Seed of the std::mt19937 generator.
  uint32_t seed = 0;
  /// Repetition penalties (llama.cpp llama_sampler_penalties), applied to the logits before every
  /// other step, greedy included: each token that occurs c > 0 times among the last
  /// `penalty_last_n` accepted tokens has its logit divided by `penalty_repeat` when positive or
  /// multiplied by it when <= 0, then lowered by c * penalty_freq + penalty_present. The window
  /// counts tokens (a -inf logit, a masked token, is left alone); <= 0 disables the penalties (llama.cpp's
  /// -1, "the context size", is resolved by the caller, who knows the context). repeat 1 and freq = present =
  /// 0 (the defaults) disable them as well.
  int32_t penalty_last_n = 64;
  float penalty_repeat = 1.0f;
  float penalty_freq = 0.0f;
  float penalty_present = 0.0f;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams params);

  /// Picks a token id in [0, n_vocab) from `logits` (n_vocab floats, one per token, as the
  /// model's output row; not modified). NaN logits count as -infinity. Returns -1 when
  /// n_vocab <= 0, logits is null, or no logit is finite or +infinity.
  int32_t Sample(const float* logits, int n_vocab);

  /// Records `token` as the sequence's next token for the repetition penalties (llama.cpp
  /// common_sampler_accept): the prompt's tokens and then each generated one, in order. Only the
  /// last penalty_last_n are kept; a no-op when the penalties are disabled.
  void Accept(int32_t token);

  /// Forgets the accepted tokens (a new sequence); the random generator is kept.
  void ResetHistory();

  /// Restarts the random generator from `seed` (as a new Sampler with that seed).
  void Reseed(uint32_t seed);

  const SamplerParams& params() const { return params_; }

 private:
  /// A uniform double in [0, 1) from two 32-bit draws (53 random bits).
  double Uniform();

  /// True when the parameters make the repetition penalties change logits.
  bool PenaltiesOn() const;

  SamplerParams params_;
  std::mt19937 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch: (logit, id), reused per call
  std::deque<int32_t> history_;                        // the last penalty_last_n accepted tokens
  std::unordered_map<int32_t, int32_t> counts_;        // occurrences of each token in history_
  std::vector<float> penalized_;                       // scratch: the logits after the penalties
};

}  // namespace stowage
