//===- Pipeline.h - the compiler's pass pipeline and its driver -----------===//
//
// The compiler stage of planning, after placement (../shared/DESIGN.md "Data flow"):
//
//   planner::Plan (placement, splits, memory; llama.cpp's semantics, no MLIR)
//     -> importModelGraphs (ImportModelGraphs.h: the placed graphs as ggml / place IR)
//     -> buildStowagePipeline's passes (rewrites inside a split: same backend, same inputs)
//     -> exportModelGraphs (ExportModelGraphs.h: the IR as the plan's executable graphs)
//     -> planner::PlanMemory (the memory plan of the exported graphs: ggml-alloc's rules)
//     -> planner::SerializePlan -> the runtime's plan verifier (stowage::PlanFile)
//
// plan-model runs it on every plan it writes (-O0 skips it) and stowage-run on the plans it
// makes on the fly; stowage-opt --stowage-pipeline runs the passes on any module. The placement,
// the splits and the split inputs are the planner's: no pass changes them.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_PIPELINE_H
#define STOWAGE_COMPILER_PIPELINE_H

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/Pass/PassManager.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::compiler {

/// Options of the pipeline (none yet: every pass runs where its rules allow).
struct PipelineOptions {};

/// Adds the compiler's rewriting passes, in order, to `pm` (a pass manager on the module). With
/// no rewriting pass the exported plan is byte-identical to the planner's.
void buildStowagePipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers --stowage-pipeline (buildStowagePipeline with default options) for stowage-opt.
void registerStowagePipeline();

/// A plan the compiler made (CompilePlan).
struct CompiledPlan {
  /// The plan file's bytes (planner::SerializePlan of the exported graphs and their memory plan),
  /// accepted by the runtime's plan verifier (PlanFile::FromBytes, every check).
  std::vector<uint8_t> bytes;
  /// planner::CheckPlanFit of the exported plan's memory (the compute buffers may differ from the
  /// planner's): Ok, or kResourceExhausted "<model>: does not fit: device ...".
  Status fit;
};

/// Runs the compiler stage on `planned` (planner::Plan's result for `gguf`, placed and
/// memory-planned; not changed): imports its graphs with their placement, runs
/// buildStowagePipeline's passes, exports the graphs, plans memory again for them
/// (planner::PlanMemory, so planned == allocated stays exact), serializes the plan with `flags`
/// (planner::SerializePlan) and verifies it as the runtime does.
/// Errors (kInternal, one line "compiler: <what>", naming the node where there is one): the
/// importer's (a planned graph the dialect's verifiers refuse), a pass's, the exporter's,
/// PlanMemory's and the plan verifier's.
Result<CompiledPlan> CompilePlan(const GgufFile &gguf, const planner::PlanResult &planned,
                                 const std::string &flags, const PipelineOptions &options = {});

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_PIPELINE_H
