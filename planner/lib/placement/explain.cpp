#include "stowage/planner/explain.h"

#include <nlohmann/json.hpp>

namespace stowage::planner {
namespace {

std::pair<std::string, std::string> SplitRejected(const std::string& r) {
  const size_t c = r.find(": ");
  if (c == std::string::npos) return {r, ""};
  return {r.substr(0, c), r.substr(c + 2)};
}

}  // namespace

const char* ExplainRuleCode(ExplainRule code) {
  switch (code) {
    case ExplainRule::kUnset:
      return "";
    case ExplainRule::kWeightHead:
      return "load.head";
    case ExplainRule::kWeightFallback:
      return "load.fallback";
    case ExplainRule::kWeightOverride:
      return "load.override";
    case ExplainRule::kWeightOverrideCpu:
      return "load.override.cpu";
    case ExplainRule::kWeightMmap:
      return "load.mmap";
    case ExplainRule::kWeightShared:
      return "load.dup";
    case ExplainRule::kKvLayer:
      return "kv.layer";
    case ExplainRule::kKvNoOffload:
      return "kv.nkvo";
    case ExplainRule::kNode:
      return "node";
  }
  return "";
}

std::string ExplainText(const Placement& p) {
  std::string out;
  for (const auto& e : p.explain) {
    out += (e.graph.empty() ? std::string("tensor") : e.graph) + " " + e.subject + ": " + e.buft + " on " +
           e.device + " -- " + e.rule + "\n";
    for (const auto& r : e.rejected) out += "    rejected " + r + "\n";
  }
  return out;
}

std::string ExplainJson(const Placement& p) {
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const auto& e : p.explain) {
    nlohmann::ordered_json j;
    j["subject"] = e.subject;
    j["graph"] = e.graph;
    j["device"] = e.device;
    j["buffer_type"] = e.buft;
    j["rule"] = e.rule;
    j["code"] = ExplainRuleCode(e.code);
    j["rejected"] = nlohmann::ordered_json::array();
    for (const auto& r : e.rejected) {
      auto [cand, reason] = SplitRejected(r);
      j["rejected"].push_back({{"candidate", cand}, {"reason", reason}});
    }
    records.push_back(std::move(j));
  }
  nlohmann::ordered_json root;
  root["records"] = std::move(records);
  return root.dump(2) + "\n";
}

}  // namespace stowage::planner
