#include "row_split.h"

#include <algorithm>

namespace stowage::exec {

std::vector<float> CumulativeSplit(const std::vector<float>& proportions, int n) {
  std::vector<float> p(static_cast<size_t>(std::max(n, 0)), 0.f);
  for (int i = 0; i < n && i < static_cast<int>(proportions.size()); ++i)
    p[static_cast<size_t>(i)] = std::max(0.f, proportions[static_cast<size_t>(i)]);
  float total = 0.f;
  for (float v : p) total += v;
  if (total <= 0.f) {
    for (auto& v : p) v = 1.f;
    total = static_cast<float>(n);
  }
  std::vector<float> cum(p.size(), 0.f);
  float acc = 0.f;
  for (size_t i = 0; i < p.size(); ++i) {
    cum[i] = acc / total;
    acc += p[i];
  }
  return cum;
}

std::vector<float> SplitProportions(const std::vector<float>& tensor_split, const std::vector<uint64_t>& total_memory) {
  const bool all_zero = std::all_of(tensor_split.begin(), tensor_split.end(), [](float x) { return x == 0.f; });
  if (!all_zero) return tensor_split;
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

void RowSplit(int64_t nrows, const std::vector<float>& cum, int64_t rounding, int id, int64_t* lo, int64_t* hi) {
  const int n = static_cast<int>(cum.size());
  if (rounding < 1) rounding = 1;
  // int64 * float is a float product in ggml (nrows*tensor_split[id]); the same here.
  *lo = id == 0 ? 0 : static_cast<int64_t>(static_cast<float>(nrows) * cum[static_cast<size_t>(id)]);
  *lo -= *lo % rounding;
  if (id == n - 1) {
    *hi = nrows;
  } else {
    *hi = static_cast<int64_t>(static_cast<float>(nrows) * cum[static_cast<size_t>(id + 1)]);
    *hi -= *hi % rounding;
  }
  if (*hi < *lo) *hi = *lo;
}

}  // namespace stowage::exec
