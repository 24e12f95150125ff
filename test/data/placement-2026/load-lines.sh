#!/bin/sh
# Reads a llama.cpp 2026 or plan-model (llama.cpp 2026 mode, -v) loader log on standard input and
# prints the lines that follow from the plan, in their order, for load-log-vs-llamacpp.test: every
# line of load_tensors, done_getting_tensors, llama_context, llama_kv_cache(_iswa), sched_reserve
# and resolve_fused_ops, llama_model_loader's warnings and the overridden weights' debug lines.
# Left out: the timing line "sched_reserve: reserve took ... ms, sched copies = N", and the graph
# line's node count (shown as "nodes = N"; that test says why).
grep -E '^(llama_model_loader|load_tensors|done_getting_tensors|llama_context|llama_kv_cache|llama_kv_cache_iswa|sched_reserve|resolve_fused_ops): |^tensor .* buffer type overridden' |
  grep -v '^sched_reserve: reserve took' | sed -E 's/nodes = [0-9]+/nodes = N/'
