//===- ImportPlan.h - plan file -> ggml and place dialects ----------------===//
//
// The plan importer: the placed graphs of a plan file (runtime/schema/plan.fbs, as plan-model
// writes it) become the module importModelGraphs (ImportModelGraphs.h) makes of a placed GGUF
// import: func @pp and func @tg in the ggml dialect, one op per graph node in the plan's node
// order, and the placement in the place dialect (devices, buffer types of weights and caches,
// backend and cause of every node and input, each split a place.split region whose inputs are
// place.copy ops). The plan is decoded into the planner's graph form (planner/graph.h), which
// the plan mirrors field for field, and imported by importModelGraphs: one op builder per ggml
// op for both importers. The dialect verifiers then check every node of the plan: its shape
// rule over the symbols' ranges, its parameters and its sources.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_IMPORT_IMPORTPLAN_H
#define STOWAGE_COMPILER_IMPORT_IMPORTPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

namespace stowage::compiler {

/// Reads the plan file `path` through the runtime's plan verifier (stowage::PlanFile::Load with
/// every check: a plan the runtime refuses is refused here with the same one-line message) and
/// imports its graphs (see the file comment). The module records `ggml.arch`
/// (Plan.model.architecture), `ggml.n_layer`, `ggml.n_ctx` and `ggml.n_ubatch` (Plan.context) and
/// `place.devices` (Plan.devices); graph 0 is @pp and graph 1 is @tg (n_tokens = n_outputs = 1, or
/// up to n_seq_max with several sequences), as the runtime runs them.
///
/// Buffer types are those of the plan's buffers (Buffer.buft, the device of the buffer): a weight
/// or cache gets the buffer type of its buffer; a buffer type is `split` when named
/// "<device>_Split", `default` when it is named as its device (the manifests' default buffer
/// types, "CPU", "CUDA0") or holds the compute buffer of a backend of its device (an accelerator
/// whose default is "CPU"), `host` for another buffer type of a GPU (CUDA_Host, which also holds
/// the CPU backend's compute buffer), `extra` for another one of the CPU (CPU_REPACK), as
/// getBufferTypeAttr names the planner's. A weight whose GGUF name an earlier weight of the plan
/// already has is `duplicated` (the tied output reading token_embd.weight).
///
/// Errors (emitted at a location naming `path`, result null): the verifier's message (kDataLoss
/// "<path>: <field>: <what>", or reading errors); a plan without the two graphs; and the
/// errors of importModelGraphs (a node whose op has no dialect op, a verifier failure naming
/// the node).
mlir::OwningOpRef<mlir::ModuleOp> importPlanFile(mlir::MLIRContext *context, llvm::StringRef path);

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_IMPORT_IMPORTPLAN_H
