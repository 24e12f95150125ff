//===- GGMLOps.h - ops of the ggml dialect ---------------------------------===//
//
// The generated op classes (see GGMLOps.td for each op's semantics, shapes and verifier rules)
// and helpers shared by the importer and the passes.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLOPS_H
#define STOWAGE_DIALECT_GGML_IR_GGMLOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "stowage/Dialect/GGML/IR/GGMLDialect.h"

namespace stowage::ggml {

/// Name of the optional string attribute that holds a node's ggml tensor name ("Qcur-0").
inline constexpr llvm::StringLiteral kNodeNameAttr = "name";

/// Op trait of every ggml op: its optional `name` attribute is a string.
template <typename ConcreteType>
class NodeName : public mlir::OpTrait::TraitBase<ConcreteType, NodeName> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    mlir::Attribute name = op->getAttr(kNodeNameAttr);
    if (name && !llvm::isa<mlir::StringAttr>(name))
      return op->emitOpError() << "attribute 'name' (the ggml tensor name) must be a string, got "
                               << name;
    return mlir::success();
  }
};

} // namespace stowage::ggml

namespace stowage {
struct RopeParams;
} // namespace stowage

#define GET_OP_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLOps.h.inc"

namespace stowage::ggml {

/// The ggml tensor name of `op` (its `name` attribute), or "" when it has none.
llvm::StringRef getNodeName(mlir::Operation *op);

/// True when `value` is known not to be contiguous in memory: the result of ggml.transpose, of
/// ggml.permute with non-identity axes, or of ggml.view with strides other than the packed ones
/// (ggml_is_contiguous would be false for it).
bool isKnownNonContiguous(mlir::Value value);

/// ROPE's parameters (stowage/runtime/ggml_op_params.h RopeParams, as the plan encodes them) from
/// the attributes of a ggml.rope or of the fused ggml.rope_set_rows / ggml.rope_cpy.
::stowage::RopeParams getRopeParams(RopeOp op);
::stowage::RopeParams getRopeParams(RopeSetRowsOp op);
::stowage::RopeParams getRopeParams(RopeCpyOp op);

} // namespace stowage::ggml

#endif // STOWAGE_DIALECT_GGML_IR_GGMLOPS_H
