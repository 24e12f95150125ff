// --explain: why every weight, KV cache tensor and node landed where it is (Placement::explain),
// as text or JSON.
#pragma once

#include <string>

#include "stowage/planner/graph.h"  // first: graph.h names stowage::GgmlOp unqualified
#include "stowage/planner/placement.h"

namespace stowage::planner {

/// One line per record: "<graph, or "tensor" for weights and KV> <subject>: <buft> on <device> -- <rule>" followed by
/// one indented "rejected <candidate>: <reason>" line per rejected candidate.
std::string ExplainText(const Placement& p);

/// {"records": [{"subject", "graph", "device", "buffer_type", "rule", "rejected": [{"candidate",
/// "reason"}]}]}, pretty-printed with 2 spaces. Weights and KV have graph "".
std::string ExplainJson(const Placement& p);

}  // namespace stowage::planner
