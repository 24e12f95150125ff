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

namespace stowage::ggml {

Attribute DimAttr::parse(AsmParser &parser, Type) {
  Dim value;
  if (parser.parseLess() || parseDim(parser, value) || parser.parseGreater()) return {};
  return DimAttr::get(parser.getContext(), value);
}

void DimAttr::print(AsmPrinter &printer) const { printer << "<" << getValue().str() << ">"; }

Attribute DimsAttr::parse(AsmParser &parser, Type) {
  SmallVector<Dim> values;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() { return parseDim(parser, values.emplace_back()); }) ||
      parser.parseGreater())
    return {};
  return DimsAttr::get(parser.getContext(), values);
}

void DimsAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  for (auto [i, d] : llvm::enumerate(getValues())) printer << (i ? ", " : "") << d.str();
  printer << "]>";
}

}  // namespace stowage::ggml
