#include "stowage/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stowage {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool ByLogit(const TokenData& a, const TokenData& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Candidates [0, n) sorted by logit, descending (llama_token_data_array_partial_sort_inplace).
void SortFirst(std::vector<TokenData>& cur, size_t n, bool* sorted) {
  if (*sorted) return;
  std::partial_sort(cur.begin(), cur.begin() + static_cast<std::ptrdiff_t>(n), cur.end(), ByLogit);
  if (n == cur.size()) *sorted = true;
}

// The softmax of the candidates' logits into p (llama_sampler_softmax_impl without sorting); with
// +infinity logits the first of them takes all the mass (llama.cpp's softmax gives NaN there).
void Softmax(std::vector<TokenData>& cur) {
  float max_l = kNegInf;
  for (const TokenData& t : cur) max_l = std::max(max_l, t.logit);
  if (std::isinf(max_l) && max_l > 0) {
    bool first = true;
    for (TokenData& t : cur) {
      t.p = first && t.logit == max_l ? 1.f : 0.f;
      first = first && t.p == 0.f;
    }
    return;
  }
  float sum = 0.f;
  for (TokenData& t : cur) sum += t.p = std::exp(t.logit - max_l);
  for (TokenData& t : cur) t.p /= sum;
}

// A uniform double in [0, 1) from two 32-bit draws (53 random bits).
double Uniform(std::mt19937& rng) {
  const uint64_t hi = rng();
  const uint64_t lo = rng();
  return static_cast<double>(((hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);  // / 2^53
}

bool PenaltiesOn(const SamplerStep& s) {
  return s.last_n > 0 && (s.repeat != 1.0f || s.freq != 0.0f || s.present != 0.0f);
}

}  // namespace

namespace {
SamplerStep MakeStep(SamplerStep::Kind kind, float value = 0, size_t min_keep = 1) {
  SamplerStep s;
  s.kind = kind;
  s.value = value;
  s.min_keep = min_keep;
  return s;
}
}  // namespace

SamplerStep SamplerStep::Greedy() { return MakeStep(Kind::kGreedy); }
SamplerStep SamplerStep::Dist(uint32_t seed) {
  SamplerStep s = MakeStep(Kind::kDist);
  s.seed = seed;
  return s;
}
SamplerStep SamplerStep::Temperature(float t) { return MakeStep(Kind::kTemperature, t); }
SamplerStep SamplerStep::TopK(int32_t k) {
  SamplerStep s = MakeStep(Kind::kTopK);
  s.k = k;
  return s;
}
SamplerStep SamplerStep::TopP(float p, size_t min_keep) { return MakeStep(Kind::kTopP, p, min_keep); }
SamplerStep SamplerStep::MinP(float p, size_t min_keep) { return MakeStep(Kind::kMinP, p, min_keep); }
SamplerStep SamplerStep::Penalties(int32_t last_n, float repeat, float freq, float present) {
  SamplerStep s = MakeStep(Kind::kPenalties);
  s.last_n = last_n;
  s.repeat = repeat;
  s.freq = freq;
  s.present = present;
  return s;
}

void SamplerChain::Add(const SamplerStep& step) {
  State st;
  st.step = step;
  st.rng.seed(step.seed);
  steps_.push_back(std::move(st));
}

void SamplerChain::Accept(int32_t token) {
  for (State& st : steps_) {
    if (st.step.kind != SamplerStep::Kind::kPenalties || !PenaltiesOn(st.step)) continue;
    st.history.push_back(token);
    ++st.counts[token];
    while (st.history.size() > static_cast<size_t>(st.step.last_n)) {
      auto it = st.counts.find(st.history.front());
      if (--it->second == 0) st.counts.erase(it);
      st.history.pop_front();
    }
  }
}

void SamplerChain::ClearHistory() {
  for (State& st : steps_) {
    st.history.clear();
    st.counts.clear();
  }
}

void SamplerChain::Reset() {
  ClearHistory();
  for (State& st : steps_) st.rng.seed(st.step.seed);
}

void SamplerChain::Reseed(uint32_t seed) {
  for (State& st : steps_)
    if (st.step.kind == SamplerStep::Kind::kDist) {
      st.step.seed = seed;
      st.rng.seed(seed);
    }
}

int32_t SamplerChain::Sample(const float* logits, int n_vocab, std::vector<TokenData>* out) {
  cur_.clear();
  if (logits == nullptr || n_vocab <= 0) return -1;
  for (int i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i]) && logits[i] != kNegInf) cur_.push_back({i, logits[i], 0.f});
  bool sorted = false;
  int64_t selected = -1;
  for (State& st : steps_) {
    const SamplerStep& s = st.step;
    if (cur_.empty()) break;
    switch (s.kind) {
      case SamplerStep::Kind::kGreedy:
        selected = 0;
        for (size_t i = 1; i < cur_.size(); ++i)
          if (cur_[i].logit > cur_[static_cast<size_t>(selected)].logit) selected = static_cast<int64_t>(i);
        break;
      case SamplerStep::Kind::kDist: {
        Softmax(cur_);
        // llama_sampler_dist_apply: the first candidate where the running sum reaches u * sum.
        const double u = Uniform(st.rng);
        double run = 0.0;
        selected = static_cast<int64_t>(cur_.size()) - 1;
        for (size_t i = 0; i < cur_.size(); ++i) {
          run += cur_[i].p;
          if (run > u) {
            selected = static_cast<int64_t>(i);
            break;
          }
        }
        break;
      }
      case SamplerStep::Kind::kTemperature:
        if (s.value > 0.f) {
          for (TokenData& t : cur_) t.logit /= s.value;
        } else {  // llama_sampler_temp_impl: the first largest logit stays, the rest -inf
          size_t max_i = 0;
          for (size_t i = 1; i < cur_.size(); ++i)
            if (cur_[i].logit > cur_[max_i].logit) max_i = i;
          for (size_t i = 0; i < cur_.size(); ++i)
            if (i != max_i) cur_[i].logit = kNegInf;
        }
        break;
      case SamplerStep::Kind::kTopK:
        if (s.k > 0) {
          const size_t k = std::min(static_cast<size_t>(s.k), cur_.size());
          SortFirst(cur_, k, &sorted);
          cur_.resize(k);
          sorted = true;
        }
        break;
      case SamplerStep::Kind::kTopP: {
        if (s.value >= 1.0f) break;
        Softmax(cur_);
        SortFirst(cur_, cur_.size(), &sorted);
        float cum = 0.f;
        size_t last = cur_.size();
        for (size_t i = 0; i < cur_.size(); ++i) {
          cum += cur_[i].p;
          if (cum >= s.value && i + 1 >= s.min_keep) {
            last = i + 1;
            break;
          }
        }
        cur_.resize(last);
        break;
      }
      case SamplerStep::Kind::kMinP: {
        if (s.value <= 0.f) break;
        // Sorted: the candidates stay in their order; llama.cpp's unsorted path keeps the order too.
        float max_l = kNegInf;
        for (const TokenData& t : cur_) max_l = std::max(max_l, t.logit);
        const float min_logit = max_l + std::log(s.value);
        size_t kept = 0;
        for (const TokenData& t : cur_) kept += t.logit >= min_logit ? 1 : 0;
        if (kept < std::max<size_t>(s.min_keep, 1)) {  // llama.cpp's sorted fallback: the first min_keep
          SortFirst(cur_, cur_.size(), &sorted);
          size_t i = 1;
          while (i < cur_.size() && (cur_[i].logit >= min_logit || i < s.min_keep)) ++i;
          cur_.resize(i);
        } else {
          cur_.erase(std::remove_if(cur_.begin(), cur_.end(),
                                    [&](const TokenData& t) { return t.logit < min_logit; }),
                     cur_.end());
        }
        break;
      }
      case SamplerStep::Kind::kPenalties:
        if (!PenaltiesOn(s) || st.counts.empty()) break;
        for (TokenData& t : cur_) {
          const auto it = st.counts.find(t.id);
          // A token a step masked to -inf stays masked (a repeat penalty below 1 must not unmask it).
          if (it == st.counts.end() || t.logit == kNegInf) continue;
          t.logit = t.logit <= 0.0f ? t.logit * s.repeat : t.logit / s.repeat;
          t.logit -= static_cast<float>(it->second) * s.freq + s.present;
        }
        sorted = false;
        break;
    }
    // NaN from an infinite logit divided by an infinite temperature must not reach the softmax.
    for (TokenData& t : cur_)
      if (std::isnan(t.logit)) t.logit = kNegInf;
  }
  if (out != nullptr) *out = cur_;
  if (selected < 0 || static_cast<size_t>(selected) >= cur_.size()) return -1;
  return cur_[static_cast<size_t>(selected)].id;
}

Sampler::Sampler(SamplerParams params) : params_(params) {
  chain_.Add(SamplerStep::Penalties(params.penalty_last_n, params.penalty_repeat, params.penalty_freq,
                                    params.penalty_present));
  // Greedy when the temperature is not a positive number: `!(t > 0)` also catches a NaN
  // temperature, which would otherwise turn every weight into NaN.
  if (!(params.temperature > 0.0f) || params.top_k == 1) {
    chain_.Add(SamplerStep::Greedy());
    return;
  }
  chain_.Add(SamplerStep::TopK(params.top_k));
  chain_.Add(SamplerStep::TopP(params.top_p));
  chain_.Add(SamplerStep::MinP(params.min_p));
  chain_.Add(SamplerStep::Temperature(params.temperature));
  chain_.Add(SamplerStep::Dist(params.seed));
}

int32_t Sampler::Sample(const float* logits, int n_vocab) { return chain_.Sample(logits, n_vocab); }
void Sampler::Accept(int32_t token) { chain_.Accept(token); }
void Sampler::ResetHistory() { chain_.ClearHistory(); }
void Sampler::Reseed(uint32_t seed) {
  params_.seed = seed;
  chain_.Reseed(seed);
}

}  // namespace stowage
