//===- FuseCommon.h - what every fusion pass checks -----------------------===//
//
// The legality rules the fusion passes (Fuse*.cpp) share: a fusion rewrites ops of one
// place.split only (same backend, same split inputs and results: the placement, the splits and
// their inputs stay the planner's), and only where the backend that runs the split has the fused
// op. "Has the op" is the backend's own op table as its manifest states it (the table
// `list-devices --emit-manifest` writes for this build's CPU and CUDA backends: exec::CpuOpRules,
// exec::CudaOpRules), asked with the fused node's types and shapes. Devices without a Stowage
// backend table (oneDNN, RPC) get no fused ops.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_TRANSFORMS_FUSECOMMON_H
#define STOWAGE_COMPILER_TRANSFORMS_FUSECOMMON_H

#include <map>
#include <optional>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/op_rules.h"

namespace stowage::compiler {

/// The split that holds `op` (its parent op), or a null op when `op` is not directly inside one.
place::SplitOp enclosingSplit(mlir::Operation *op);

/// Why `first` and `last` may not become one op, or "" when they may as far as placement goes: both
/// directly inside the same place.split.
std::string splitRefusal(mlir::Operation *first, mlir::Operation *last);

/// Answers "does the backend of this split run op X with these tensors" for one module: the
/// module's `place.devices` name each backend's device and type; a CPU device asks the CPU
/// backend's table, a GPU named CUDA<i> the CUDA backend's. Devices are built once per name.
class BackendOps {
public:
  explicit BackendOps(mlir::ModuleOp module);

  /// "" when the backend of `split` runs `query` (OpQuery::op with its destination and sources),
  /// else why not ("backend 'ONEDNN' has no Stowage op table", "backend 'CPU' does not run
  /// RMS_NORM_MUL with these tensors").
  std::string refusal(place::SplitOp split, const OpQuery &query);

  /// The tensor description of `value` for an op query: its element type and shape, the
  /// function's worst-case n_tokens / n_kv / n_outputs (its ggml.* attributes) substituted, and
  /// for a weight or KV cache its buffer type (place.buft). std::nullopt when a dimension cannot be
  /// evaluated or the element type is not a ggml type.
  std::optional<TensorDesc> describe(mlir::Value value) const;

private:
  const ProbedDevice *deviceOf(llvm::StringRef name);

  mlir::ModuleOp module_;
  std::map<std::string, std::optional<ProbedDevice>> devices_;
};

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_TRANSFORMS_FUSECOMMON_H
