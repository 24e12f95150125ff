#include "stowage/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stowage {
namespace {

float Sanitize(float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }

}  // namespace

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) {}

bool Sampler::PenaltiesOn() const {
  return params_.penalty_last_n > 0 &&
         (params_.penalty_repeat != 1.0f || params_.penalty_freq != 0.0f || params_.penalty_present != 0.0f);
}

void Sampler::Accept(int32_t token) {
  if (!PenaltiesOn()) return;
  history_.push_back(token);
  ++counts_[token];
  while (history_.size() > static_cast<size_t>(params_.penalty_last_n)) {
    auto it = counts_.find(history_.front());
    if (--it->second == 0) counts_.erase(it);
    history_.pop_front();
  }
}

void Sampler::ResetHistory() {
  history_.clear();
  counts_.clear();
}

void Sampler::Reseed(uint32_t seed) {
  params_.seed = seed;
  rng_.seed(seed);
}

double Sampler::Uniform() {
  const uint64_t hi = rng_();
  const uint64_t lo = rng_();
  return static_cast<double>(((hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);  // / 2^53
}

int32_t Sampler::Sample(const float* logits, int n_vocab) {
  if (logits == nullptr || n_vocab <= 0) return -1;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // Repetition penalties on a copy of the row (llama.cpp llama_sampler_penalties_apply).
  if (PenaltiesOn() && !counts_.empty()) {
    penalized_.assign(logits, logits + n_vocab);
    for (const auto& [id, count] : counts_) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = penalized_[static_cast<size_t>(id)];
      // A token masked to -inf (--ignore-eos) stays masked: a negative penalty would turn it into
      // +inf (llama.cpp's logit-bias step runs first and has that flaw).
      if (l == kNegInf) continue;
      l = l <= 0.0f ? l * params_.penalty_repeat : l / params_.penalty_repeat;
      l -= static_cast<float>(count) * params_.penalty_freq + params_.penalty_present;
    }
    logits = penalized_.data();
  }

  // Greedy: first maximum (llama.cpp llama_sampler_greedy).
  int32_t best = -1;
  float best_logit = kNegInf;
  for (int i = 0; i < n_vocab; ++i) {
    const float l = Sanitize(logits[i]);
    if (l > best_logit) {
      best_logit = l;
      best = i;
    }
  }
  // Greedy when the temperature is not a positive number: `!(t > 0)` also catches a NaN
  // temperature, which would otherwise turn every weight into NaN and make the draw below fall
  // through to the least likely kept candidate.
  if (best < 0 || !(params_.temperature > 0.0f) || params_.top_k == 1) return best;
  if (std::isinf(best_logit)) return best;  // +inf dominates every other token

  // Candidates sorted by logit, descending (ties: lower id first).
  candidates_.clear();
  for (int i = 0; i < n_vocab; ++i) {
    const float l = Sanitize(logits[i]);
    if (l != kNegInf) candidates_.push_back({l, i});
  }
  auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t n = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(n);

  // Probabilities of the untempered logits for top-p and min-p.
  const float max_logit = candidates_[0].first;
  std::vector<double> probs(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i)
    sum += probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit));
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i] / sum;
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (params_.min_p > 0.0f) {
    // probs[0] is the maximum (= 1 before normalisation).
    size_t keep = 1;
    while (keep < n && probs[keep] >= params_.min_p * probs[0]) ++keep;
    n = keep;
  }

  // Temperature, then one draw from the renormalised distribution.
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    total += probs[i] = std::exp(static_cast<double>(candidates_[i].first - max_logit) / params_.temperature);
  }
  const double u = Uniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += probs[i];
    if (u < cum) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace stowage
