//===- GGMLDialect.cpp - the ggml dialect ---------------------------------===//

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;
using namespace stowage::ggml;

#include "stowage/Dialect/GGML/IR/GGMLDialect.cpp.inc"
#include "stowage/Dialect/GGML/IR/GGMLEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLAttrs.cpp.inc"

void GGMLDialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "stowage/Dialect/GGML/IR/GGMLOps.cpp.inc"
      >();
}

void GGMLDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "stowage/Dialect/GGML/IR/GGMLAttrs.cpp.inc"
      >();
}
