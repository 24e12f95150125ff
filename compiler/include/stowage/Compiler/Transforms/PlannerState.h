//===- PlannerState.h - the planner's state, reconstructed from a module --===//
//
// The placement passes (Passes.td: stowage-assign-layers -> stowage-select-weight-buft ->
// stowage-place-kv -> stowage-schedule -> stowage-plan-memory -> stowage-export-plan) each call
// one step of the planner (planner/, plain C++). The planner's steps need whole-model state
// (ModelGraphs, DeviceSet, LayerMap, Placement). That state is not kept beside the IR; it is
// reconstructed from the module at each pass:
//
//   * `stowage.import` (written by the importer): the GGUF path and the resolved context
//     (n_ctx, n_batch, n_ubatch, type_k, type_v, n_seq_max); the graphs are rebuilt from the file's
//     metadata (planner::BuildModelGraphs; weights are not read).
//   * `stowage.plan`: the options each pass ran with (devices, registry, n_gpu_layers, ...).
//   * `stowage.stage`: the last pass that ran; each pass requires its predecessor.
//
// The earlier steps are re-run with their recorded options (the planner is deterministic) and
// their outcome is checked against what they wrote on the IR (stowage.layers, place.buft of
// weights and caches, the place.split regions, stowage.n_copies, stowage.buffers): an IR edited
// between passes is an error naming the first difference, never silently replanned.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_TRANSFORMS_PLANNERSTATE_H
#define STOWAGE_COMPILER_TRANSFORMS_PLANNERSTATE_H

#include <memory>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "stowage/planner/place_model.h"
#include "stowage/runtime/gguf.h"
#include "llvm/ADT/StringRef.h"

namespace stowage::compiler {

/// Module attributes of the placement passes (the `stowage` prefix belongs to no dialect).
inline constexpr llvm::StringLiteral kImportAttr = "stowage.import";
inline constexpr llvm::StringLiteral kStageAttr = "stowage.stage";
inline constexpr llvm::StringLiteral kPlanOptionsAttr = "stowage.plan";
inline constexpr llvm::StringLiteral kLayersAttr = "stowage.layers";
inline constexpr llvm::StringLiteral kMovedAttr = "stowage.moved";
inline constexpr llvm::StringLiteral kBuffersAttr = "stowage.buffers";
/// Written by stowage-schedule: ggml_backend_sched's n_copies (4 with pipeline parallelism,
/// planner::PipelineParallelism, else 1).
inline constexpr llvm::StringLiteral kNCopiesAttr = "stowage.n_copies";
/// Op attributes of stowage-plan-memory: index into stowage.buffers and byte offset in it.
inline constexpr llvm::StringLiteral kBufferAttr = "stowage.buffer";
inline constexpr llvm::StringLiteral kOffsetAttr = "stowage.offset";

/// The steps, in pipeline order; a module's stage is the last step that ran.
enum class PlanStage { kImported, kLayers, kWeights, kKvCache, kScheduled, kMemory };

/// The pass name of a stage ("stowage-assign-layers", ...; "import" for kImported).
llvm::StringRef stageName(PlanStage stage);

/// Options of all steps as recorded in `stowage.plan`; missing keys keep llama.cpp's defaults.
struct RecordedOptions {
  std::string devices;                    ///< registry keys or manifest files, comma-separated
  std::vector<std::string> registry_dirs; ///< searched before the shipped registry
  planner::PlacementOptions placement;
};

/// Reads `stowage.plan` of `module` (absent: defaults; absent keys: their defaults). An entry of
/// another type than writeRecordedOptions writes (an edited record) is an error emitted at the
/// module naming `pass` and the key.
mlir::FailureOr<RecordedOptions> readRecordedOptions(mlir::ModuleOp module, llvm::StringRef pass);

/// Writes all of `options` to `stowage.plan`.
void writeRecordedOptions(mlir::ModuleOp module, const RecordedOptions &options);

/// Sets `stowage.stage` to `stage`.
void setStage(mlir::ModuleOp module, PlanStage stage);

/// Checks that the last step run on `module` is `previous` (the step before `pass`). Emits on
/// the module's location: "<pass>: the module was not imported with --import-gguf (no
/// stowage.import)", "<pass>: run <previous> first (the module's last placement step is <s>)",
/// and for the first pass "<pass>: the module is already placed (its last placement step is
/// <s>); start from a fresh import".
mlir::LogicalResult requireStage(mlir::ModuleOp module, PlanStage previous, llvm::StringRef pass);

/// The devices of `options.devices` (registry keys, looked up in options.registry_dirs then the
/// shipped registry, or manifest files), in that order. Errors, emitted on the module's location
/// prefixed with `pass`: the registry's and the manifests' (one line each), no devices, a list
/// without a CPU device (the scheduler's last backend; a pass does not probe the machine it runs
/// on, as plan-model does).
mlir::FailureOr<std::vector<planner::DeviceManifest>>
makeMachine(mlir::ModuleOp module, const RecordedOptions &options, llvm::StringRef pass);

/// The planner's whole-model state after a step.
struct PlannerState {
  std::unique_ptr<GgufFile> gguf;
  planner::ModelGraphs graphs;
  /// The outcome of planner::PlaceModelStep for each step up to the one reconstructed (devices,
  /// layers, placement, moved, memory, node counts, split shares): PlaceModel's, step by step.
  planner::PlacementOutcome outcome;
  /// Index into outcome.placement.explain of the first weight record (SelectWeightBufts' records
  /// follow in ModelGraphs::globals order, one per weight).
  size_t weight_explain_begin = 0;
};

/// Reconstructs the state of `module` after `upTo` with `options` (see the file comment): opens
/// the GGUF of `stowage.import`, rebuilds the graphs, and runs PlaceModel's steps up to `upTo`
/// (planner::PlaceModelStep, the code PlaceModel runs), checking after each step that already ran
/// on the IR (stage >= step) that the IR records the same outcome. Errors are emitted on the
/// module's location prefixed with `pass`: the planner's errors (one line each, e.g. an unknown
/// device), a missing or malformed stowage.import, and "<pass>: the IR differs from what <step>
/// decides with the recorded options: <what>".
mlir::FailureOr<std::unique_ptr<PlannerState>>
reconstructPlannerState(mlir::ModuleOp module, PlanStage upTo, const RecordedOptions &options,
                        llvm::StringRef pass);

/// The graph tensor id of every op of `func` that stands for one (nodes, split copies, inputs,
/// weights, caches), matched by name (the k-th op named X is the k-th tensor named X in leaf,
/// node, copy order, which is the importer's creation order). Ops it cannot match are absent.
llvm::DenseMap<mlir::Operation *, int> matchGraphTensors(mlir::Operation *func,
                                                         const planner::Graph &graph);

/// The ModelGraphs::globals index of a weight (gguf name, layer) or cache (name); -1 if absent.
int findGlobal(const planner::ModelGraphs &graphs, llvm::StringRef name, int layer);

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_TRANSFORMS_PLANNERSTATE_H
