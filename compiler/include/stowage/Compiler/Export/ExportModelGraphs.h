//===- ExportModelGraphs.h - ggml and place dialects -> planner graphs ----===//
//
// The exporter: the module importModelGraphs made of placed graphs (ImportModelGraphs.h), after
// the compiler's passes (Pipeline.h), back into the planner's graph form (planner/graph.h), which
// the plan file mirrors field for field (planner::SerializePlan). What the IR says is what is
// exported:
//
//   - graph nodes: the ggml ops of each function in block order (inside each place.split in
//     order), their sources the ops' operands, their names the `name` attributes, their types and
//     shapes the result types, their backends the enclosing split's (or `place.backend`);
//   - leafs: the ggml.weight, ggml.input and ggml.kv_cache ops;
//   - splits: the place.split ops, each with the nodes inside it; split inputs: the place.copy ops
//     inside a split (copy 0; with pipeline parallelism the copies 1..n-1 too), and the graph
//     inputs' copies: the place.copy ops at function level;
//   - graph outputs: the values func.return returns.
//
// An op keeps the tensor number its location records (getImportedTensorId: the planner's tensor
// id), so a module no pass changed exports the graphs it was imported from exactly (the plan is
// byte-identical, which plan-model's round trip test checks). Fields the dialect does not carry
// come from the tensor an op was imported from when it is still the same ggml op: the op
// parameters (ggml_op_params.h encoding), the view strides and offset, the symbolic form of
// @tg's n_tokens / n_outputs (bound to 1 there) when the type is unchanged, the layer and the
// planner's own cause markers. An op a pass made (no imported tensor id, or another op kind) is
// exported from the IR alone; its layer is its first source's.
//
// Buffers and offsets of the exported tensors are reset: the caller plans memory again
// (planner::PlanMemory) from the exported graphs.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_EXPORT_EXPORTMODELGRAPHS_H
#define STOWAGE_COMPILER_EXPORT_EXPORTMODELGRAPHS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"

namespace stowage::compiler {

/// Exports functions @pp and @tg of `module` into `graphs->pp` and `graphs->tg` and, with
/// pipeline parallelism, their copies into `placement->copies` (see the file comment). On entry
/// `graphs` and `placement` hold what the module was imported from (importModelGraphs's
/// arguments): the globals, the placement's backends and buffer types, and the graphs whose
/// tensors the ops' locations number. On failure both are unchanged.
///
/// Errors (emitted at the op, naming it): a function missing; an op outside the ggml and place
/// dialects; a leaf a pass made (weights, caches and inputs are the model's); an op a pass made
/// whose kind takes op parameters (the dialect op has no encoding here: the exporter needs one
/// for each such op); a dimension over a symbol the plan has no term for (n_ctx); a node outside
/// every split of a placed function; splits that are not the imported graph's (another count,
/// another backend, other split inputs: the placement and the splits are the planner's, a pass
/// rewrites only inside a split).
mlir::LogicalResult exportModelGraphs(mlir::ModuleOp module, planner::ModelGraphs *graphs,
                                      planner::Placement *placement);

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_EXPORT_EXPORTMODELGRAPHS_H
