// The op profile (SessionOptions::profile_ops): seconds and calls per graph, backend and op.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "session_impl.h"

namespace stowage {

int Session::Impl::ProfRow(const std::string& graph, const std::string& backend, const std::string& op) {
  for (size_t i = 0; i < prof_rows.size(); ++i)
    if (prof_rows[i].graph == graph && prof_rows[i].backend == backend && prof_rows[i].op == op)
      return int(i);
  OpProfileEntry e;
  e.graph = graph;
  e.backend = backend;
  e.op = op;
  prof_rows.push_back(e);
  return int(prof_rows.size() - 1);
}

void Session::Impl::ProfAdd(int row, std::chrono::steady_clock::time_point t0) {
  prof_rows[size_t(row)].calls += 1;
  prof_rows[size_t(row)].seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<OpProfileEntry> Session::OpProfile() const {
  std::vector<OpProfileEntry> rows;
  for (const OpProfileEntry& e : impl_->prof_rows)
    if (e.calls > 0) rows.push_back(e);
  std::stable_sort(rows.begin(), rows.end(), [](const OpProfileEntry& a, const OpProfileEntry& b) {
    return a.graph != b.graph ? a.graph < b.graph : a.seconds > b.seconds;
  });
  return rows;
}

void Session::ResetOpProfile() {
  for (OpProfileEntry& e : impl_->prof_rows) {
    e.calls = 0;
    e.seconds = 0;
  }
}

}  // namespace stowage
