// Planning on the fly: stowage-run without --plan plans the model for this machine, as plan-model
// would for the probed devices.
#pragma once

#include <cstdint>
#include <vector>

#include "run_common.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::run {

/// Plans `gguf` for this machine (no plan file given): the probed devices (list-devices) as
/// manifests, planned by planner::Plan as plan-model plans them (context, -ngl with "auto" as
/// --fit, -ctk/-ctv, -fa, --no-mmap, --no-repack, --no-kv-offload of `c`), with plan-model's fit
/// check, and, when built with MLIR, through the compiler's pipeline at `c`'s -O level as
/// plan-model's (compiler/CompilePlan.h; -O0 skips it, -O1 runs it without rewriting passes, -O2,
/// tools::kDefaultOptLevel, with them). Returns the serialized plan. Prints the model's warnings on stderr
/// always; llama.cpp's context and GPU warnings, the -ngl auto result and -fa auto turning flash attention
/// off unless `quiet`. A plan that does not fit is the planner's error, or with --no-fit-check a warning.
/// `tokenizer_loaded`: the caller loaded the model's tokenizer already (LoadModel), so planning
/// does not validate it again (PlanRequest::tokenizer_loaded).
/// Errors: an unknown -ctk/-ctv type (naming the flag), the device probe's, the planner's, the
/// compiler's.
Result<std::vector<uint8_t>> PlanOnTheFly(const GgufFile& gguf, const CommonOptions& c, bool quiet,
                                          bool tokenizer_loaded = false);

}  // namespace stowage::run
