//===- GGMLDialect.cpp - the ggml dialect ---------------------------------===//

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;
using namespace stowage::ggml;

#include "stowage/Dialect/GGML/IR/GGMLDialect.cpp.inc"
#include "stowage/Dialect/GGML/IR/GGMLEnums.cpp.inc"

void GGMLDialect::initialize() {
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "stowage/Dialect/GGML/IR/GGMLOps.cpp.inc"
      >();
}

