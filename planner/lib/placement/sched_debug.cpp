// GGML_SCHED_DEBUG's split listing (ggml-backend.c ggml_backend_sched_print_assignments) of a
// scheduled graph: plan-model --debug-splits.
#include <cstdio>
#include <string>
#include <vector>

#include "stowage/planner/scheduler.h"

namespace stowage::planner {
namespace {

uint64_t NBytes(const Graph& g, int t) {
  const Bindings wc = g.WorstCase();
  int64_t ne[4];
  for (int i = 0; i < 4; ++i) ne[i] = wc.Eval(g.tensors[t].ne[i]);
  return TensorBytes(g.tensors[t].type, ne);
}

}  // namespace

std::string FormatGgmlSize(uint64_t bytes) {
  char buf[64];
  if (bytes >= 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%lluM", static_cast<unsigned long long>(bytes / 1024 / 1024));
  else
    std::snprintf(buf, sizeof buf, "%lluK", static_cast<unsigned long long>(bytes / 1024));
  return buf;
}

std::string FormatSchedSplitHeader(size_t index, const std::string& backend,
                                   const std::vector<SchedDebugInput>& inputs) {
  std::string out = "\n## SPLIT #" + std::to_string(index) + ": " + backend + " # " +
                    std::to_string(inputs.size()) + " inputs";
  if (!inputs.empty()) out += ": ";
  char size[16];
  for (const SchedDebugInput& in : inputs) {
    std::snprintf(size, sizeof size, "%5.5s", in.size.c_str());
    out += "[" + in.name + " (" + size + ")] ";
  }
  return out + "\n";
}

std::string FormatSchedDebug(const Graph& g, const Placement& p, int level) {
  std::string out;
  char line[512];
  auto be_name = [&](int b) { return b >= 0 ? p.backends[b].name : std::string("NULL"); };
  size_t cur_split = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (cur_split < g.splits.size() && static_cast<int>(i) == g.splits[cur_split].node_begin) {
      const Split& s = g.splits[cur_split];
      std::vector<SchedDebugInput> inputs;
      for (const auto& in : s.inputs)
        inputs.push_back({g.tensors[in.first].name, FormatGgmlSize(NBytes(g, in.first))});
      out += FormatSchedSplitHeader(cur_split, be_name(s.backend), inputs);
      ++cur_split;
    }
    const int t = g.nodes[i];
    const Tensor& x = g.tensors[t];
    if (IsViewOp(x.op) || level < 2) continue;
    std::snprintf(line, sizeof line, "node #%3zu (%10.10s): %20.20s (%5.5s) [%5.5s %8.8s]:", i,
                  GgmlOpName(x.op), x.name.c_str(), FormatGgmlSize(NBytes(g, t)).c_str(),
                  be_name(x.backend).c_str(), x.cause.c_str());
    out += line;
    for (int s : x.srcs) {
      if (s < 0) continue;
      const Tensor& y = g.tensors[s];
      // ggml has not recorded a backend for split input copies when it prints (NULL).
      const std::string b = y.kind == TensorKind::kSplitCopy ? std::string("NULL") : be_name(y.backend);
      std::snprintf(line, sizeof line, " %20.20s (%5.5s) [%5.5s %8.8s]", y.name.c_str(),
                    FormatGgmlSize(NBytes(g, s)).c_str(), b.c_str(), y.cause.c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace stowage::planner
