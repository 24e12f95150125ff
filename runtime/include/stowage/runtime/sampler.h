// Samplers: pick the next token from a row of logits.
//
// SamplerChain is llama.cpp's llama_sampler_chain: steps applied in the order they were added to
// the candidate tokens (id, logit, p), each as its llama_sampler_init_* does in llama.cpp 2026
// (src/llama-sampler.cpp): penalties, top-k, top-p, min-p, temperature, and a last step that picks a
// token, greedy or dist (a draw from the softmax of what is left). Sampler is the fixed chain of
// llama.cpp's default sampler (common_sampler: penalties -> top_k -> top_p -> min_p -> temperature
// -> dist, or penalties -> greedy at temperature <= 0) made from SamplerParams, as stowage-run uses
// it. The repetition penalties look at the tokens passed to Accept (the prompt's and the generated
// ones, as llama-cli accepts both).
//
// Differences from llama.cpp, on purpose: NaN logits count as -infinity and tokens of logit
// -infinity are no candidates (a row without any finite or +infinity logit samples -1, where
// llama.cpp picks token 0); the penalties leave a -infinity logit alone (llama.cpp turns it into
// +infinity with a repeat penalty below 1); ties in sorting keep the lower id first (llama.cpp's
// partial sort leaves their order unspecified); the first +infinity logit is picked by dist over every
// other (llama.cpp's softmax gives NaN). Determinism: dist draws from a std::mt19937 seeded explicitly,
// turned into a uniform double in a fixed way (two 32-bit draws, 53 bits), so a seed and a sequence
// of rows give the same tokens on every platform (llama.cpp's std::uniform_real_distribution is
// implementation-defined). No global state.
//
// Thread-safety: neither class is thread-safe (Sample advances the generator, Accept the history);
// use one per sequence. Copies are independent (generator state and history copied).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stowage {

/// A candidate token (llama.cpp llama_token_data): its id, logit, and probability where a step set it.
struct TokenData {
  int32_t id = 0;
  float logit = 0;
  float p = 0;
};

/// One step of a SamplerChain, made by the static functions below (llama.cpp's
/// llama_sampler_init_* of the same name); the fields are that step's parameters.
struct SamplerStep {
  enum class Kind { kGreedy, kDist, kTemperature, kTopK, kTopP, kMinP, kPenalties };
  Kind kind = Kind::kGreedy;
  float value = 0;      ///< temperature, top-p's p, min-p's p
  int32_t k = 0;        ///< top-k's k
  size_t min_keep = 1;  ///< top-p / min-p: keep at least this many (0 counts as 1)
  uint32_t seed = 0;    ///< dist
  int32_t last_n = 0;   ///< penalties: the window of accepted tokens
  float repeat = 1, freq = 0, present = 0;

  /// Picks the candidate of the largest logit (the first in the current order: the lowest id
  /// unless a step sorted them).
  static SamplerStep Greedy();
  /// Picks a candidate at random from the softmax of the logits left, with a std::mt19937 seeded
  /// with `seed` (every Reset restarts it there).
  static SamplerStep Dist(uint32_t seed);
  /// Divides every logit by `t`; t <= 0 keeps only the largest logit (others to -infinity, as
  /// llama_sampler_temp_impl), so that a following dist picks it.
  static SamplerStep Temperature(float t);
  /// Keeps the k largest logits (sorted, descending); k <= 0 keeps all (no-op).
  static SamplerStep TopK(int32_t k);
  /// Keeps the smallest set of the most probable candidates (softmax of the logits left) whose
  /// probabilities sum to at least p, and at least min_keep; p >= 1 is a no-op.
  static SamplerStep TopP(float p, size_t min_keep = 1);
  /// Keeps the candidates whose probability is at least p times the most probable one's (logit >=
  /// max logit + log p), at least min_keep; p <= 0 is a no-op.
  static SamplerStep MinP(float p, size_t min_keep = 1);
  /// llama_sampler_penalties: a token accepted c > 0 times among the last `last_n` accepted tokens
  /// has its logit divided by `repeat` when positive, multiplied when <= 0, then lowered by
  /// c * freq + present. last_n <= 0 (llama.cpp's -1 "the context" is the caller's to resolve),
  /// or repeat 1 with freq = present = 0, disables it.
  static SamplerStep Penalties(int32_t last_n, float repeat, float freq, float present);
};

/// llama.cpp's llama_sampler_chain: steps applied in order to the candidates of one row of logits.
class SamplerChain {
 public:
  SamplerChain() = default;
  /// Appends `step` (llama_sampler_chain_add).
  void Add(const SamplerStep& step);
  /// The number of steps, and step `i` (< size()) as added (a dist step's seed as Reseed left it).
  size_t size() const { return steps_.size(); }
  const SamplerStep& step(size_t i) const { return steps_[i].step; }

  /// Applies the steps to `logits` (n_vocab floats, one per token; not modified) and returns the
  /// token the last picking step (greedy, dist) selected. Returns -1 when logits is null,
  /// n_vocab <= 0, no logit is finite or +infinity, or no step picks a token (a chain without
  /// greedy or dist; llama.cpp asserts there). `cur` (may be null) receives the candidates left
  /// after the last step, with the probabilities the last softmax gave (llama_token_data_array).
  int32_t Sample(const float* logits, int n_vocab, std::vector<TokenData>* cur = nullptr);

  /// Records `token` as accepted (llama_sampler_accept): every penalties step keeps its window.
  void Accept(int32_t token);
  /// llama_sampler_reset: forgets the accepted tokens and restarts every dist step from its seed.
  void Reset();
  /// Forgets the accepted tokens only (the generators keep their state).
  void ClearHistory();
  /// Restarts every dist step's generator from `seed` (its seed becomes `seed`).
  void Reseed(uint32_t seed);

 private:
  struct State {
    SamplerStep step;
    std::mt19937 rng;                             // dist
    std::deque<int32_t> history;                  // penalties: the last last_n accepted tokens
    std::unordered_map<int32_t, int32_t> counts;  // penalties: occurrences in history
  };
  std::vector<State> steps_;
  std::vector<TokenData> cur_;  // scratch, reused per call
};

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

/// llama.cpp's default sampler (common_sampler) as a SamplerChain built from SamplerParams:
/// penalties -> top_k -> top_p -> min_p -> temperature -> dist(seed), or penalties -> greedy when
/// the temperature is not positive or top_k is 1.
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
  SamplerParams params_;
  SamplerChain chain_;  // the steps SamplerParams selects
};

}  // namespace stowage
