//===- GGMLTypes.cpp - ggml element and tensor types ----------------------===//

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <tuple>

#include "mlir/IR/Builders.h"
#include "stowage/Dialect/GGML/IR/GGMLDialect.h"
#include "stowage/runtime/ggml_types.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

//===----------------------------------------------------------------------===//
// Dim, ElementCount
//===----------------------------------------------------------------------===//

namespace stowage::ggml {

StringRef symName(Sym sym) {
  switch (sym) {
  case Sym::n_tokens:
    return "n_tokens";
  case Sym::n_kv:
    return "n_kv";
  case Sym::n_outputs:
    return "n_outputs";
  case Sym::n_ctx:
    return "n_ctx";
  case Sym::kv_head:
    return "kv_head";
  case Sym::n_kv_swa:
    return "n_kv_swa";
  case Sym::kv_head_swa:
    return "kv_head_swa";
  }
  return "";
}

std::optional<Sym> symByName(StringRef name) {
  for (unsigned i = 0; i < kNumSyms; ++i)
    if (symName(static_cast<Sym>(i)) == name)
      return static_cast<Sym>(i);
  return std::nullopt;
}

// Two's-complement wrapping (defined, unlike signed overflow): a wrapped term gives a Dim no valid
// type holds, so the verifiers comparing it with a declared shape report a mismatch.
static int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
static int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

Dim Dim::operator+(const Dim &o) const {
  Dim r;
  r.c = wrapAdd(c, o.c);
  for (unsigned i = 0; i < kNumSyms; ++i)
    r.k[i] = wrapAdd(k[i], o.k[i]);
  return r;
}

Dim Dim::operator-(const Dim &o) const {
  Dim r;
  r.c = wrapSub(c, o.c);
  for (unsigned i = 0; i < kNumSyms; ++i)
    r.k[i] = wrapSub(k[i], o.k[i]);
  return r;
}

Dim Dim::scaled(int64_t f, bool &overflow) const {
  Dim r;
  overflow |= __builtin_mul_overflow(c, f, &r.c);
  for (unsigned i = 0; i < kNumSyms; ++i)
    overflow |= __builtin_mul_overflow(k[i], f, &r.k[i]);
  return r;
}

std::string Dim::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  bool first = true;
  for (unsigned i = 0; i < kNumSyms; ++i) {
    if (k[i] == 0)
      continue;
    // A negative coefficient is written `sym*-k` (the parser reads `+ sym*-k`).
    os << (first ? "" : "+") << symName(static_cast<Sym>(i));
    if (k[i] != 1)
      os << "*" << k[i];
    first = false;
  }
  if (first)
    os << c;
  else if (c > 0)
    os << "+" << c;
  else if (c < 0)
    os << c;
  return s;
}

llvm::hash_code hash_value(const Dim &dim) {
  return llvm::hash_combine(dim.c, llvm::hash_combine_range(dim.k.begin(), dim.k.end()));
}

void ElementCount::multiply(const Dim &dim) {
  auto mul = [&](int64_t v) {
    if (__builtin_mul_overflow(coeff, v, &coeff))
      overflow = true;
  };
  if (dim.isStatic()) {
    mul(dim.size());
    return;
  }
  // Pull the gcd of the terms (sign from the first symbolic term) into the coefficient. A term of
  // INT64_MIN (no int64 magnitude; dividing it by -1 traps) makes the count unrepresentable.
  if (dim.c == INT64_MIN || llvm::any_of(dim.k, [](int64_t v) { return v == INT64_MIN; })) {
    overflow = true;
    return;
  }
  int64_t g = std::llabs(dim.c);
  int64_t sign = 0;
  for (int64_t v : dim.k) {
    if (v == 0)
      continue;
    g = std::gcd(g, std::llabs(v));
    if (sign == 0)
      sign = v < 0 ? -1 : 1;
  }
  g *= sign;
  Dim factor = dim;
  factor.c /= g;
  for (int64_t &v : factor.k)
    v /= g;
  mul(g);
  factors.insert(llvm::upper_bound(factors, factor), factor);
}

std::optional<Dim> ElementCount::asDim() const {
  if (overflow || factors.size() > 1)
    return std::nullopt;
  if (factors.empty())
    return Dim::of(coeff);
  bool ovf = false;
  Dim d = factors.front().scaled(coeff, ovf);
  if (ovf)
    return std::nullopt;
  return d;
}

std::string ElementCount::str() const {
  if (overflow)
    return "<overflow>";
  // A single factor folds back into one affine form ("n_tokens*4+12").
  if (factors.size() == 1)
    if (std::optional<Dim> d = asDim())
      return d->str();
  std::string s;
  llvm::raw_string_ostream os(s);
  bool first = true;
  if (coeff != 1 || factors.empty()) {
    os << coeff;
    first = false;
  }
  for (const Dim &f : factors) {
    if (!first)
      os << "*";
    first = false;
    bool monomial = f.c == 0 && llvm::count_if(f.k, [](int64_t v) { return v != 0; }) == 1;
    if (monomial)
      os << f.str();
    else
      os << "(" << f.str() << ")";
  }
  return s;
}

bool isGgmlElementType(Type type) {
  if (type.isF32() || type.isF16() || type.isBF16() || type.isF64())
    return true;
  if (auto it = dyn_cast<IntegerType>(type))
    return it.isSignless() && (it.getWidth() == 8 || it.getWidth() == 16 || it.getWidth() == 32 ||
                               it.getWidth() == 64);
  return llvm::isa<BlockType>(type);
}

} // namespace stowage::ggml

#define GET_TYPEDEF_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLTypes.cpp.inc"

namespace stowage::ggml {

//===----------------------------------------------------------------------===//
// BlockType
//===----------------------------------------------------------------------===//

LogicalResult BlockType::verify(function_ref<InFlightDiagnostic()> emitError, uint32_t typeId) {
  if (!stowage::IsValidGgmlType(typeId))
    return emitError() << "ggml type id " << typeId << " is not a valid ggml type";
  if (!stowage::GetTypeTraits(static_cast<stowage::GgmlType>(typeId)).is_quantized)
    return emitError() << "ggml type '"
                       << stowage::GgmlTypeName(static_cast<stowage::GgmlType>(typeId))
                       << "' is not block-quantized; use the builtin type";
  return success();
}

int64_t BlockType::getBlockSize() const {
  return stowage::GetTypeTraits(static_cast<stowage::GgmlType>(getTypeId())).block_size;
}

uint64_t BlockType::getBlockBytes() const {
  return stowage::GetTypeTraits(static_cast<stowage::GgmlType>(getTypeId())).type_size;
}

StringRef BlockType::getTypeName() const {
  return stowage::GgmlTypeName(static_cast<stowage::GgmlType>(getTypeId()));
}

BlockType BlockType::getByName(MLIRContext *context, StringRef name) {
  auto parsed = stowage::ParseGgmlType(std::string_view(name.data(), name.size()));
  if (!parsed.ok())
    return {};
  const auto &traits = stowage::GetTypeTraits(parsed.value());
  // ParseGgmlType ignores case; the textual form uses ggml's exact spelling ("q4_K").
  if (!traits.is_quantized || name != traits.name)
    return {};
  return BlockType::get(context, static_cast<uint32_t>(parsed.value()));
}

//===----------------------------------------------------------------------===//
// TensorType
//===----------------------------------------------------------------------===//

static std::string elementTypeName(Type type) {
  if (auto block = llvm::dyn_cast<BlockType>(type))
    return block.getTypeName().str();
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

LogicalResult TensorType::verify(function_ref<InFlightDiagnostic()> emitError, ArrayRef<Dim> shape,
                                 Type elementType) {
  if (shape.size() != 4)
    return emitError() << "a ggml tensor has 4 dimensions ne[0..3], got " << shape.size();
  for (auto [i, d] : llvm::enumerate(shape))
    if (d.isStatic() && d.size() < 0)
      return emitError() << "ne" << i << " = " << d.size() << " is negative";
  if (!isGgmlElementType(elementType))
    return emitError() << "element type " << elementType
                       << " is not a ggml type (f32, f16, bf16, f64, i8, i16, i32, i64 or a "
                          "!ggml block type)";
  if (auto block = llvm::dyn_cast<BlockType>(elementType)) {
    // ggml_row_size: a row holds whole blocks.
    if (!shape[0].isStatic())
      return emitError() << "ne0 of a " << block.getTypeName() << " tensor must be static (got "
                         << shape[0].str() << ")";
    if (shape[0].size() % block.getBlockSize() != 0)
      return emitError() << "ne0 = " << shape[0].size() << " is not a multiple of "
                         << block.getTypeName() << "'s block size " << block.getBlockSize();
  }
  return success();
}

bool TensorType::hasStaticShape() const {
  return llvm::all_of(getShape(), [](const Dim &d) { return d.isStatic(); });
}

ElementCount TensorType::getNumElements() const {
  ElementCount n;
  for (const Dim &d : getShape())
    n.multiply(d);
  return n;
}

uint64_t TensorType::getElementBytes() const {
  Type e = getElementType();
  if (auto block = llvm::dyn_cast<BlockType>(e))
    return block.getBlockBytes();
  return (e.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t TensorType::getBlockSize() const {
  if (auto block = llvm::dyn_cast<BlockType>(getElementType()))
    return block.getBlockSize();
  return 1;
}

std::optional<uint64_t> TensorType::getStaticBytes() const {
  ElementCount n = getNumElements();
  if (!n.isStatic() || n.overflow)
    return std::nullopt;
  uint64_t blocks = static_cast<uint64_t>(n.coeff) / getBlockSize();
  uint64_t bytes;
  if (__builtin_mul_overflow(blocks, getElementBytes(), &bytes))
    return std::nullopt;
  return bytes;
}

std::string TensorType::getElementTypeName() const { return elementTypeName(getElementType()); }

std::string TensorType::shapeString() const {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(getShape())) {
    if (i)
      s += ", ";
    s += d.str();
  }
  return s + "]";
}

/// term ::= integer | sym (`*` integer)?
static ParseResult parseTerm(AsmParser &parser, Dim &dim, bool allowNegative) {
  int64_t value = 0;
  SMLoc loc = parser.getCurrentLocation();
  OptionalParseResult intResult = parser.parseOptionalInteger(value);
  if (intResult.has_value()) {
    if (failed(*intResult))
      return failure();
    if (value < 0 && !allowNegative)
      return parser.emitError(loc, "write a negative constant as `- n`, not `+ -n`");
    if (__builtin_add_overflow(dim.c, value, &dim.c))
      return parser.emitError(loc, "dimension constant overflows int64");
    return success();
  }
  StringRef name;
  if (parser.parseOptionalKeyword(&name))
    return parser.emitError(loc, "expected a dimension: an integer or one of n_tokens, n_kv, "
                                 "n_outputs, n_ctx, kv_head, n_kv_swa, kv_head_swa");
  std::optional<Sym> sym = symByName(name);
  if (!sym)
    return parser.emitError(loc, "unknown symbolic dimension '")
           << name
           << "' (expected n_tokens, n_kv, n_outputs, n_ctx, kv_head, n_kv_swa or "
              "kv_head_swa)";
  int64_t coeff = 1;
  if (succeeded(parser.parseOptionalStar()) && parser.parseInteger(coeff))
    return failure();
  int64_t &k = dim.k[static_cast<unsigned>(*sym)];
  if (__builtin_add_overflow(k, coeff, &k))
    return parser.emitError(loc, "coefficient of '") << name << "' overflows int64";
  return success();
}

/// dim ::= term ((`+` term) | negative-integer)*
ParseResult parseDim(AsmParser &parser, Dim &dim) {
  dim = Dim();
  if (parseTerm(parser, dim, /*allowNegative=*/true))
    return failure();
  while (true) {
    if (succeeded(parser.parseOptionalPlus())) {
      if (parseTerm(parser, dim, /*allowNegative=*/false))
        return failure();
      continue;
    }
    int64_t negative = 0;
    SMLoc loc = parser.getCurrentLocation();
    OptionalParseResult neg = parser.parseOptionalInteger(negative);
    if (!neg.has_value())
      return success();
    if (failed(*neg))
      return failure();
    if (negative >= 0)
      return parser.emitError(loc, "expected '+' or '-' between terms");
    if (__builtin_add_overflow(dim.c, negative, &dim.c))
      return parser.emitError(loc, "dimension constant overflows int64");
  }
}

/// `<` `[` dim (`,` dim)* `]` `,` element-type `>`; trailing 1s may be omitted.
Type TensorType::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<Dim, 4> shape;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square,
                                     [&]() { return parseDim(parser, shape.emplace_back()); }) ||
      parser.parseComma())
    return {};
  if (shape.empty() || shape.size() > 4) {
    parser.emitError(loc, "a ggml tensor has 1 to 4 dimensions, got ") << shape.size();
    return {};
  }
  while (shape.size() < 4)
    shape.push_back(Dim::of(1));
  Type element;
  StringRef keyword;
  SMLoc eltLoc = parser.getCurrentLocation();
  // A builtin type (f32, i32, ...) or, as a bare keyword, a block type name (q4_K).
  OptionalParseResult builtin = parser.parseOptionalType(element);
  if (builtin.has_value()) {
    if (failed(*builtin))
      return {};
  } else {
    if (parser.parseKeyword(&keyword))
      return {};
    element = BlockType::getByName(parser.getContext(), keyword);
    if (!element) {
      parser.emitError(eltLoc, "unknown ggml element type '") << keyword << "'";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(), shape, element);
}

void TensorType::print(AsmPrinter &printer) const {
  ArrayRef<Dim> shape = getShape();
  size_t n = shape.size();
  while (n > 1 && shape[n - 1].is(1))
    --n;
  printer << "<[";
  for (size_t i = 0; i < n; ++i)
    printer << (i ? ", " : "") << shape[i].str();
  printer << "], ";
  if (auto block = llvm::dyn_cast<BlockType>(getElementType()))
    printer << block.getTypeName();
  else
    printer.printType(getElementType());
  printer << ">";
}

//===----------------------------------------------------------------------===//
// Dialect type hooks
//===----------------------------------------------------------------------===//

void GGMLDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "stowage/Dialect/GGML/IR/GGMLTypes.cpp.inc"
      >();
}

Type GGMLDialect::parseType(DialectAsmParser &parser) const {
  SMLoc loc = parser.getCurrentLocation();
  StringRef mnemonic;
  Type type;
  // The generated parser reads the keyword; it leaves unknown ones (block type names) in
  // `mnemonic`.
  OptionalParseResult result = generatedTypeParser(parser, &mnemonic, type);
  if (result.has_value())
    return succeeded(*result) ? type : Type();
  if (BlockType block = BlockType::getByName(getContext(), mnemonic)) {
    if (succeeded(parser.parseOptionalLess())) {
      parser.emitError(loc, "block type '") << mnemonic << "' takes no parameters";
      return {};
    }
    return block;
  }
  parser.emitError(loc, "unknown ggml type '")
      << mnemonic << "' (expected 'tensor' or a quantized ggml type such as q4_K)";
  return {};
}

void GGMLDialect::printType(Type type, DialectAsmPrinter &printer) const {
  if (auto block = llvm::dyn_cast<BlockType>(type)) {
    printer << block.getTypeName();
    return;
  }
  (void)generatedTypePrinter(type, printer);
}

} // namespace stowage::ggml
