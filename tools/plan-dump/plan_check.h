// An independent check of a plan's compute-buffer offsets (plan-dump --check-memory; breaker
// tests): no two graph tensors that are live at the same time share a byte of a compute buffer.
//
// It re-derives liveness from the plan file alone (not from the planner's memory pass), with
// ggml-alloc's rules as the planner documents them (memory_plan.h; ggml-alloc.c
// ggml_gallocr_alloc_graph_impl, ggml-backend.cpp ggml_backend_sched_split_graph, FEB25):
//   time 2*i+1 is node i (ggml graph order, Graph.nodes); time 2*b is the start of the split whose
//   first node is b, when its input copies are made (before node b runs);
//   born:  graph leafs and tensors of kind Input at the start (-1); a split input copy at its
//          split's start (with Plan.n_copies > 1 every instance of a graph input or split input is
//          allocated first, at -1); a node at 2*i+1;
//   dies:  at its last read: a node reading a tensor or any view of it (Graph.tensors srcs, views
//          resolved to the tensor that owns the memory), a split copying it (2*b); never when no
//          node reads it (ggml frees only sources: a graph output stays) or, with n_copies > 1,
//          when it is an instance of a graph input or split input (ggml flags them INPUT|OUTPUT);
//   allowed sharing: a node written in place over its first source when that read is the
//          source's last (ggml_gallocr's in-place reuse).
// Only tensors that own compute-buffer memory are checked: graph tensors with a buffer of usage
// Compute, not views (view_src) and not weights / KV cache (global). Sizes are the contiguous
// bytes at the graph's worst case (n_tokens = max_tokens, n_kv = max_kv, kv_head = 0,
// n_outputs = max_outputs), as the planner sizes them.
#pragma once

#include <string>
#include <vector>

#include "stowage/plan/plan_generated.h"

namespace stowage::tools {

struct MemoryCheckReport {
  int tensors_checked = 0;              ///< memory-owning compute tensors, all graphs
  std::vector<std::string> conflicts;   ///< one line each: graph, buffer, the two tensors, bytes, lifetimes
};

/// Checks every graph of the verified plan `p` (stowage::PlanFile::root()). At most `max_conflicts`
/// lines are collected (the count of the rest is appended as a last line). Never fails otherwise:
/// tensors whose size cannot be computed are reported as conflicts.
MemoryCheckReport CheckComputeMemory(const plan::Plan& p, size_t max_conflicts = 20);

}  // namespace stowage::tools
