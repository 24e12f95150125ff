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
// CompilePlan (CompilePlan.h) runs it on a planned model: plan-model on every plan it writes
// (-O0 skips it), stowage-run on the plans it makes on the fly; stowage-opt --stowage-pipeline
// runs the passes on any module. The placement, the splits and the split inputs are the
// planner's: no pass changes them.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_PIPELINE_H
#define STOWAGE_COMPILER_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "stowage/Compiler/CompilePlan.h" // PipelineOptions

namespace stowage::compiler {

/// Adds the compiler's rewriting passes, in order, to `pm` (a pass manager on the module). With
/// no rewriting pass the exported plan is byte-identical to the planner's.
void buildStowagePipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers --stowage-pipeline (buildStowagePipeline with default options) for stowage-opt.
void registerStowagePipeline();

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_PIPELINE_H
