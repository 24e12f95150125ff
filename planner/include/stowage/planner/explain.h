// --explain: why every weight, KV cache tensor and node landed where it is (Placement::explain),
// as text or JSON.
#pragma once

#include <string>

#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"

namespace stowage::planner {

/// One line per record: "<graph, or "tensor" for weights and KV> <subject>: <buft> on <device> -- <rule>"
/// followed by one indented "rejected <candidate>: <reason>" line per rejected candidate.
std::string ExplainText(const Placement& p);

/// {"records": [{"subject", "graph", "device", "buffer_type", "rule", "code", "rejected": [{"candidate",
/// "reason"}]}]}, pretty-printed with 2 spaces. Weights and KV have graph ""; "code" is
/// ExplainRuleCode of the record's rule code.
std::string ExplainJson(const Placement& p);

/// The name of a rule code: the place dialect's cause code for weights and KV cache tensors
/// ("load.head", "load.fallback", "load.override", "load.override.cpu", "load.mmap", "load.dup",
/// "kv.layer", "kv.nkvo"), "node" for graph nodes (their cause code is Tensor::cause), "" for kUnset.
const char* ExplainRuleCode(ExplainRule code);

}  // namespace stowage::planner
