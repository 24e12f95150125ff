//===- CompilePlan.cpp - import -> passes -> export of a planned model ----===//

#include <string>
#include <utility>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "stowage/Compiler/CompilePlan.h"
#include "stowage/Compiler/Export/ExportModelGraphs.h"
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/Compiler/Pipeline.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/plan.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace stowage::compiler {
namespace {

/// "graph <g> node '<n>': " of an op's location (ImportModelGraphs.h's NameLocs), or "".
std::string locationPrefix(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && fused.getLocations().size() == 1)
    loc = fused.getLocations().front();
  auto node = dyn_cast<NameLoc>(loc);
  if (!node)
    return "";
  std::string prefix;
  if (auto graph = dyn_cast<NameLoc>(node.getChildLoc()))
    prefix = "graph " + graph.getName().str() + " ";
  return prefix + "node '" + node.getName().str() + "': ";
}

} // namespace

Result<CompiledPlan> CompilePlan(const GgufFile &gguf, const planner::PlanResult &planned,
                                 const std::string &flags, const PipelineOptions &options) {
  MLIRContext context(MLIRContext::Threading::DISABLED);
  std::string error;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = locationPrefix(diag.getLocation()) + diag.str();
    return success();
  });
  auto fail = [&](const char *stage) {
    return Internal("compiler: " + std::string(stage) + ": " +
                    (error.empty() ? std::string("failed") : error));
  };
  planner::ModelGraphs graphs = planned.graphs;
  planner::PlacementOutcome outcome = planned.outcome;
  OwningOpRef<ModuleOp> module =
      importModelGraphs(&context, graphs, UnknownLoc::get(&context), &outcome.placement);
  if (!module) {
    // A graph the dialects cannot represent yet: the planner's plan, as -O0 writes it.
    CompiledPlan kept;
    kept.bytes = planned.bytes;
    kept.fit = planned.fit;
    kept.not_compiled = fail("import").message();
    return kept;
  }
  PassManager pm(&context);
  buildStowagePipeline(pm, options);
  if (failed(pm.run(*module)))
    return fail("pipeline");
  if (failed(exportModelGraphs(*module, &graphs, &outcome.placement)))
    return fail("export");
  if (Status st = planner::PlanMemory(graphs, outcome.placement, &outcome.memory); !st.ok())
    return Internal("compiler: memory plan: " + st.message());
  CompiledPlan out;
  out.fit = planner::CheckPlanFit(gguf, outcome);
  out.bytes = planner::SerializePlan(gguf, graphs, outcome.placement, outcome.memory, flags);
  // The runtime's one verifier: the exported plan is one the runtime runs.
  if (auto verified = PlanFile::FromBytes(out.bytes, gguf.path() + " (compiled plan)");
      !verified.ok())
    return Internal("compiler: plan verifier: " + verified.status().message());
  return out;
}

} // namespace stowage::compiler
