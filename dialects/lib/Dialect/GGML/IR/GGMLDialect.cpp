//===- GGMLDialect.cpp - the ggml dialect ---------------------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "llvm/ADT/TypeSwitch.h"

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

LogicalResult GGMLDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == "ggml.arch") {
    auto s = dyn_cast<StringAttr>(value);
    if (!s || s.getValue().empty())
      return op->emitOpError() << "attribute 'ggml.arch' must be a non-empty string, got " << value;
    return success();
  }
  static constexpr llvm::StringLiteral kCounts[] = {"ggml.n_layer",  "ggml.n_ctx", "ggml.n_ubatch",
                                                    "ggml.n_tokens", "ggml.n_kv",  "ggml.n_outputs",
                                                    "ggml.n_kv_swa"};
  if (llvm::is_contained(kCounts, name)) {
    auto i = dyn_cast<IntegerAttr>(value);
    if (!i || i.getValue().isNegative())
      return op->emitOpError() << "attribute '" << name << "' must be an integer >= 0, got "
                               << value;
    return success();
  }
  return op->emitOpError() << "unknown ggml attribute '" << name
                           << "' (expected ggml.arch, ggml.n_layer, ggml.n_ctx, ggml.n_ubatch, "
                              "ggml.n_tokens, ggml.n_kv, ggml.n_outputs or ggml.n_kv_swa)";
}

namespace stowage::ggml {

Attribute DimAttr::parse(AsmParser &parser, Type) {
  Dim value;
  if (parser.parseLess() || parseDim(parser, value) || parser.parseGreater())
    return {};
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
  for (auto [i, d] : llvm::enumerate(getValues()))
    printer << (i ? ", " : "") << d.str();
  printer << "]>";
}

} // namespace stowage::ggml
