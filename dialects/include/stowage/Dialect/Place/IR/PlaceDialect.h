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

} // namespace stowage::place

#endif // STOWAGE_DIALECT_PLACE_IR_PLACEDIALECT_H
