//===- PlaceDialect.h - the placement dialect -----------------------------===//
//
// Declares the `place` dialect: attributes for devices, buffer types, backends and placement
// causes, and the split / yield / copy ops (see PlaceOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_PLACE_IR_PLACEDIALECT_H
#define STOWAGE_DIALECT_PLACE_IR_PLACEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringRef.h"

#include "stowage/Dialect/Place/IR/PlaceDialect.h.inc"
#include "stowage/Dialect/Place/IR/PlaceEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "stowage/Dialect/Place/IR/PlaceAttrs.h.inc"

#define GET_OP_CLASSES
#include "stowage/Dialect/Place/IR/PlaceOps.h.inc"

namespace stowage::place {

/// Discardable attribute names the placement passes attach to ggml ops.
inline constexpr llvm::StringLiteral kBuftAttr = "place.buft";       ///< BufferTypeAttr
inline constexpr llvm::StringLiteral kBackendAttr = "place.backend"; ///< BackendAttr
inline constexpr llvm::StringLiteral kCauseAttr = "place.cause";     ///< CauseAttr
inline constexpr llvm::StringLiteral kDeviceAttr = "place.device";   ///< DeviceAttr
inline constexpr llvm::StringLiteral kDevicesAttr = "place.devices"; ///< array of DeviceAttr

/// True when `code` is one of the cause codes listed in CauseAttr's description ("1.wgt<i>"
/// with a source index 0..9, ggml's GGML_MAX_SRC).
bool isKnownCauseCode(llvm::StringRef code);

/// Checks that `backend`, used by `op` (a place.backend attribute, a split's or a copy's backend),
/// names a device of the machine: of the `place.devices` of the nearest module around `op` (or `op`
/// itself) that has them; a scheduler backend runs on its device and has its name
/// (ggml_backend_sched's backends are the model's devices and the CPU). Success when no module
/// lists devices. Error on `op`: "backend 'CUDA9' is not a device of the module (place.devices:
/// ONEDNN, CPU)".
mlir::LogicalResult verifyBackendIsDevice(mlir::Operation *op, BackendAttr backend);

} // namespace stowage::place

#endif // STOWAGE_DIALECT_PLACE_IR_PLACEDIALECT_H
