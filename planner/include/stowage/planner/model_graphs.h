// Building the prefill and decode graphs of a GGUF model (llama.cpp's llama_model::load_tensors
// + the architecture's graph builder, from the metadata alone: weight data is never read).
#pragma once

#include <string>
#include <vector>

#include "stowage/planner/graph.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Architectures with a graph builder ("llama", ...).
std::vector<std::string> SupportedArchitectures();

/// Reads hyper-parameters (llama.cpp LLM_KV keys of `general.architecture`).
/// Errors: kNotFound (missing key, naming it), kUnimplemented (unknown architecture, listing the
/// supported ones), kInvalidArgument (inconsistent values such as n_embd % n_head != 0).
Result<HParams> ReadHParams(const GgufFile& gguf);

/// Builds globals (weights with their role and consuming op, KV cache tensors), the "pp" graph
/// (n_tokens = min(n_ctx, n_ubatch), n_outputs = n_tokens) and the "tg" graph (n_tokens = 1),
/// both with n_kv = n_ctx, as llama.cpp reserves them.
/// Errors (one line, naming the file and tensor): a missing tensor, a wrong shape or type
/// ("tensor 'blk.0.attn_q.weight' has wrong shape; expected [64, 64], got [64, 32]"), split-tensor
/// MoE files, unknown architectures. Tensors the architecture does not consume are listed in
/// ModelGraphs::unused_tensors (llama.cpp: "wrong number of tensors").
Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const ContextConfig& cfg);

}  // namespace stowage::planner
