//===- CompilePlan.h - the compiler stage of planning, for the tools ------===//
//
// The compiler stage on a planned model, behind a header without MLIR types, so that a tool
// (plan-model, stowage-run) calls it without compiling MLIR headers: import -> the pipeline
// (Pipeline.h) -> export -> memory plan -> plan file -> the runtime's verifier. The tools use it
// only when built with MLIR (STOWAGE_HAVE_COMPILER); the runtime library never links it.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_COMPILEPLAN_H
#define STOWAGE_COMPILER_COMPILEPLAN_H

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/planner/plan.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::compiler {

/// Options of the pipeline (buildStowagePipeline, Pipeline.h): every pass it runs rewrites only
/// where its rules allow.
struct PipelineOptions {
  /// The rewriting passes (buildStowagePipeline's: the fusions of Fuse*.cpp, e.g. RMS_NORM + MUL ->
  /// RMS_NORM_MUL, and ElideCont.cpp). false: none of them runs, so the exported plan is the
  /// planner's byte for byte.
  bool fuse = true;
};

/// A plan the compiler made (CompilePlan).
struct CompiledPlan {
  /// The plan file's bytes (planner::SerializePlan of the exported graphs and their memory plan),
  /// accepted by the runtime's plan verifier (PlanFile::FromBytes, every check).
  std::vector<uint8_t> bytes;
  /// planner::CheckPlanFit of the exported plan's memory (the compute buffers may differ from the
  /// planner's): Ok, or kResourceExhausted "<model>: does not fit: device ...".
  Status fit;
  /// Empty when the plan went through the compiler. Else why it did not: the importer's one line
  /// for a planned graph the dialects cannot represent (e.g. a view of a quantized KV cache whose
  /// ne0 is symbolic, -ctk q8_0); `bytes` and `fit` are then the planner's plan (planned.bytes,
  /// planned.fit), as -O0 writes it.
  std::string not_compiled;
};

/// Runs the compiler stage on `planned` (planner::Plan's result for `gguf`, placed and
/// memory-planned; not changed): imports its graphs with their placement, runs
/// buildStowagePipeline's passes (with `options`), exports the graphs, plans memory again for them
/// (planner::PlanMemory, so planned == allocated stays exact), serializes the plan with `flags`
/// (planner::SerializePlan) and verifies it as the runtime does.
/// A planned graph the importer refuses is not an error: the result is the planner's plan with
/// CompiledPlan::not_compiled set ("compiler: import: graph pp node '...': ...").
/// Errors (kInternal, one line "compiler: <what>", naming the node where there is one): a pass's,
/// the exporter's, PlanMemory's and the plan verifier's.
Result<CompiledPlan> CompilePlan(const GgufFile &gguf, const planner::PlanResult &planned,
                                 const std::string &flags, const PipelineOptions &options = {});

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_COMPILEPLAN_H
