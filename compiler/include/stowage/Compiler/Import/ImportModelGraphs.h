//===- ImportModelGraphs.h - planner graphs / GGUF -> ggml dialect --------===//
//
// The importer: the planner's model graphs of a GGUF file (planner/graph.h, built from the GGUF
// metadata alone by planner::BuildModelGraphs) become a module with two functions in the ggml
// dialect:
//
//   module attributes {ggml.arch = "llama", ggml.n_layer = 5, ggml.n_ctx = 512, ...} {
//     func.func @pp() -> ... attributes {ggml.n_tokens = 512, ggml.n_kv = 512}
//     func.func @tg() -> ...  attributes {ggml.n_tokens = 1, ggml.n_kv = 512}
//   }
//
// The functions carry the planner's graph names (planner/graph.h), llama.cpp's: @pp, prompt
// processing, keeps n_tokens and n_outputs symbolic (any ubatch up to n_ubatch; the bound is the
// function's ggml.n_tokens attribute); @tg, token generation, binds n_tokens = n_outputs = 1 (with
// several sequences, -np N, its N tokens and outputs stay symbolic, bounded as @pp's). n_kv
// and kv_head stay symbolic in both. Each graph node becomes one op, in ggml's graph order, with
// llama.cpp's node name in its `name` attribute; weights are ggml.weight leaves naming their GGUF
// tensor, graph inputs ggml.input, KV cache tensors ggml.kv_cache. The functions return the graph
// outputs (`result_output`); KV stores are ggml.cpy ops, which write memory and are never
// erased.
//
// Differences from llama.cpp's ggml graph are those of the planner's graph builders (see
// planner/graph_builder.h); the importer itself adds none.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_IMPORT_IMPORTMODELGRAPHS_H
#define STOWAGE_COMPILER_IMPORT_IMPORTMODELGRAPHS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "stowage/Dialect/GGML/IR/GGMLDialect.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/fit.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/placement.h"
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/StringRef.h"

namespace stowage::compiler {

/// Imports `graphs` into a new module (see the file comment). `loc` is used for diagnostics;
/// each op gets a NameLoc with its node name around a NameLoc with its graph's name ("pp", "tg")
/// around `loc`. Loads the ggml, place and func dialects
/// into `context`.
///
/// With `placement` (the result of planner::PlaceModel on `graphs`), the module also records the
/// placement in the place dialect: `place.devices` on the module; `place.buft` on each weight and
/// cache; `place.backend` and `place.cause` (the scheduler's cause code) on each node and input;
/// and each graph's splits as `place.split` regions, in order, whose split inputs are `place.copy`
/// ops (named `<backend>#<source>#0` as ggml names them) and whose values used later are yielded.
///
/// Errors (emitted on `context`'s diagnostic engine, result null): a node whose op has no ggml
/// dialect op (naming the op and the node), a shape that is not affine in the symbols, and any
/// verifier failure of the built module (which means the planner's graph and the dialect's
/// ggml rules disagree, naming the node).
mlir::OwningOpRef<mlir::ModuleOp> importModelGraphs(mlir::MLIRContext *context,
                                                    const planner::ModelGraphs &graphs,
                                                    mlir::Location loc,
                                                    const planner::Placement *placement = nullptr);

/// The dialect's form of a planner dimension: the same affine form over n_tokens, n_kv, kv_head,
/// n_outputs, n_kv_swa and kv_head_swa, except that `bindTokens` / `bindOutputs` bind n_tokens /
/// n_outputs to 1 (@tg of one token and one output: its n_tokens terms are folded into the
/// constant).
ggml::Dim toDialectDim(const planner::DimExpr &e, bool bindTokens, bool bindOutputs);

/// The location importModelGraphs gives the op of graph tensor `id` (its index in
/// planner::Graph::tensors): `loc` fused with `id` as an i32 metadata attribute. The exporter
/// (ExportModelGraphs.h) numbers the tensors of the ops that keep it as the graph they came from
/// did; a pass that replaces an op gives the new op a location of its own.
mlir::Location getTensorLoc(mlir::Location loc, int id);

/// The graph tensor id a location made by getTensorLoc records; std::nullopt for any other
/// location (an op made by a pass, or IR parsed without its debug locations).
std::optional<int> getImportedTensorId(mlir::Location loc);

/// The place dialect's form of Placement::bufts[buft]: its kind is `split` for a "<dev>_Split"
/// buffer type, `default` for a device's default, `host` for a GPU's pinned host buffer type
/// (CUDA_Host), `extra` otherwise (CPU_REPACK).
place::BufferTypeAttr getBufferTypeAttr(mlir::MLIRContext *context, const planner::Placement &p,
                                        int buft);

/// What to place an imported GGUF on (planner::Plan), for importGgufFile.
struct ImportPlacement {
  /// Devices of the machine: registry keys or manifest files, comma-separated; must include a
  /// CPU device (the scheduler's last backend).
  std::string devices;
  /// Registry folders searched for keys, in order.
  std::vector<std::string> registry_dirs;
  /// -ngl, -sm, -ts, -ot, mmap, ... with llama.cpp's defaults.
  planner::PlacementOptions options;
  /// llama.cpp's -fa auto (planner::FlashAttnMode::kAuto): planned with flash attention, kept when
  /// every layer's FLASH_ATTN_EXT runs on the layer's device, else planned again without; the
  /// config's flash_attn is then ignored and the module records the decision (stowage.import).
  bool flash_attn_auto = false;
  /// llama.cpp's -ngl auto, plan-model's --fit: the layers, split and overrides are chosen as
  /// llama.cpp 2026's common_fit_params chooses them, keeping `fit_target` bytes free on every GPU
  /// (planner::Plan with PlanRequest::fit, planner::FitPlanParams), reported as a remark.
  bool fit = false;
  uint64_t fit_target = planner::kDefaultFitTargetBytes;
};

/// Opens the GGUF file `path`, builds its model graphs with `config` (planner::BuildModelGraphs:
/// weights are not read), places them when `placement` is given (planner::Plan, the entry point
/// plan-model calls, without its fit check: the devices are checked first, then the model), and
/// imports them. Tensors of the
/// file that the architecture does not use are reported as warnings ("model has unused tensor
/// ..."), as llama.cpp does.
/// Errors (emitted, result null): unreadable or malformed file, unknown architecture (listing the
/// supported ones), missing tensor or wrong shape or type (naming the tensor), split-tensor MoE
/// files, a device list without a CPU or naming unknown devices, the placement's errors, and the
/// errors of importModelGraphs.
mlir::OwningOpRef<mlir::ModuleOp> importGgufFile(mlir::MLIRContext *context, llvm::StringRef path,
                                                 const planner::ContextConfig &config,
                                                 const ImportPlacement *placement = nullptr);

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_IMPORT_IMPORTMODELGRAPHS_H
