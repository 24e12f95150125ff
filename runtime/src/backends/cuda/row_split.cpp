#include "stowage/runtime/row_split.h"

#include <algorithm>
#include <utility>

namespace stowage::exec {

namespace {

// cum[i] = sum(w[0..i)) / sum(w) in double, stored as float; equal shares when sum(w) is 0.
std::vector<float> StartsFromWeights(std::vector<double> w) {
  double total = 0.0;
  for (double v : w) total += v;
  if (!(total > 0.0)) {
    std::fill(w.begin(), w.end(), 1.0);
    total = static_cast<double>(w.size());
  }
  std::vector<float> cum(w.size(), 0.f);
  double acc = 0.0;
  for (size_t i = 0; i < w.size(); ++i) {
    cum[i] = static_cast<float>(acc / total);  // ggml keeps the split as float
    acc += w[i];
  }
  return cum;
}

// The first n proportions, missing and negative ones as 0.
std::vector<double> ClampedProportions(const std::vector<float>& proportions, size_t n) {
  std::vector<double> w(n, 0.0);
  for (size_t i = 0; i < n && i < proportions.size(); ++i) w[i] = proportions[i] > 0.f ? proportions[i] : 0.0;
  return w;
}

bool AnyPositive(const std::vector<double>& w) {
  return std::any_of(w.begin(), w.end(), [](double v) { return v > 0.0; });
}

}  // namespace

std::vector<float> RowSplitStarts(const std::vector<float>& tensor_split,
                                  const std::vector<uint64_t>& total_memory) {
  std::vector<double> w = ClampedProportions(tensor_split, total_memory.size());
  if (!AnyPositive(w))
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(total_memory[i]);
  return StartsFromWeights(std::move(w));
}

std::vector<float> CumulativeSplit(const std::vector<float>& proportions, int n) {
  return StartsFromWeights(ClampedProportions(proportions, static_cast<size_t>(std::max(n, 0))));
}

std::vector<float> SplitProportions(const std::vector<float>& tensor_split,
                                    const std::vector<uint64_t>& total_memory) {
  const bool any_positive =
      std::any_of(tensor_split.begin(), tensor_split.end(), [](float x) { return x > 0.f; });
  if (any_positive) return tensor_split;
  std::vector<float> p;
  for (uint64_t m : total_memory) p.push_back(static_cast<float>(m));
  return p;
}

int64_t RowRounding(const std::vector<float>& cum, const std::vector<int>& compute_capability) {
  int64_t r = 0;
  const size_t n = cum.size();
  for (size_t id = 0; id < n; ++id) {
    const float next = id + 1 < n ? cum[id + 1] : 1.f;
    if (cum[id] >= next) continue;  // empty share
    const int cc = id < compute_capability.size() ? compute_capability[id] : 0;
    r = std::max<int64_t>(r, cc >= 700 ? 128 : 64);  // mmq_y (NVIDIA: get_mmq_y_host)
  }
  return r;
}

void RowSplit(int64_t nrows, const std::vector<float>& cum, int64_t rounding, int id, int64_t* lo,
              int64_t* hi) {
  const int n = static_cast<int>(cum.size());
  if (rounding < 1) rounding = 1;
  // int64 * float is a float product in ggml (nrows*tensor_split[id]); the same here.
  *lo = id == 0 ? 0 : static_cast<int64_t>(static_cast<float>(nrows) * cum[static_cast<size_t>(id)]);
  *lo -= *lo % rounding;
  if (id == n - 1) {
    *hi = nrows;
  } else {
    *hi = static_cast<int64_t>(static_cast<float>(nrows) * cum[static_cast<size_t>(id) + 1]);
    *hi -= *hi % rounding;
  }
  if (*hi < *lo) *hi = *lo;
}

}  // namespace stowage::exec
