//===- GGMLDialect.h - the ggml dialect, its types and attributes ---------===//
//
// Declares the `ggml` dialect (see GGMLDialect.td for its description), the dimension model of
// its tensor type (static sizes and linear forms of one symbolic size) and the generated types and
// enum attributes. Ops are in GGMLOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H
#define STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Types.h"

namespace stowage::ggml {

/// A symbolic size that the runtime binds per call. `none` marks a static dimension.
/// n_tokens: tokens of the ubatch (n_ubatch for @prefill, 1 for @decode); n_kv: KV cells the
/// attention reads; n_outputs: tokens whose logits are returned; n_ctx: the KV cache size.
enum class Sym : uint8_t { none = 0, n_tokens, n_kv, n_outputs, n_ctx };

/// The textual name of `sym` ("n_tokens"); "" for Sym::none.
llvm::StringRef symName(Sym sym);
/// The symbol named `name`, or std::nullopt.
std::optional<Sym> symByName(llvm::StringRef name);

/// One dimension ne[i] of a ggml tensor: a static size (sym == none, size = offset) or the
/// linear form coeff * sym + offset (coeff >= 1). Written `42`, `n_tokens`, `n_tokens*64`,
/// `n_tokens+3`, `n_ctx*1024-8`.
struct Dim {
  Sym sym = Sym::none;
  int64_t coeff = 0;
  int64_t offset = 0;

  /// The static dimension `size`.
  static Dim of(int64_t size) { return Dim{Sym::none, 0, size}; }
  /// The symbolic dimension coeff * sym + offset.
  static Dim symbolic(Sym sym, int64_t coeff = 1, int64_t offset = 0) {
    return Dim{sym, coeff, offset};
  }
  bool isStatic() const { return sym == Sym::none; }
  /// The size of a static dimension (requires isStatic()).
  int64_t size() const { return offset; }
  /// True when this is the static size `n`.
  bool is(int64_t n) const { return isStatic() && offset == n; }
  bool operator==(const Dim &o) const {
    return sym == o.sym && coeff == o.coeff && offset == o.offset;
  }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  bool operator<(const Dim &o) const;
  /// The textual form (see above).
  std::string str() const;
};

llvm::hash_code hash_value(const Dim &dim);

/// The product of dimensions, kept as coeff * (product of symbolic factors), each factor a Dim
/// with a symbol. Two counts compare equal when coefficient and factor multiset are equal; this
/// proves equality of element counts for every binding of the symbols (it may fail to prove
/// equalities such as 2 * (n_tokens+1) == 2*n_tokens + 2, which ggml graphs do not need).
struct ElementCount {
  int64_t coeff = 1;
  llvm::SmallVector<Dim, 4> factors;  // sorted; each has sym != none and, if offset is 0, coeff 1
  bool overflow = false;

  /// Multiplies by one dimension.
  void multiply(const Dim &dim);
  bool isStatic() const { return factors.empty(); }
  bool operator==(const ElementCount &o) const {
    return !overflow && !o.overflow && coeff == o.coeff && factors == o.factors;
  }
  bool operator!=(const ElementCount &o) const { return !(*this == o); }
  /// The count as one Dim when it is linear in one symbol (at most one factor), else nullopt.
  std::optional<Dim> asDim() const;
  /// E.g. "4096*n_tokens", "32000", "n_kv*n_tokens*32".
  std::string str() const;
};

/// Sum of two dimensions when it is a Dim (static + anything, or the same symbol), else nullopt.
std::optional<Dim> addDims(const Dim &a, const Dim &b);

/// True when `type` is a valid element type of a ggml tensor: builtin f32, f16, bf16, f64,
/// signless i8, i16, i32, i64, or a !ggml block type.
bool isGgmlElementType(mlir::Type type);

}  // namespace stowage::ggml

#include "stowage/Dialect/GGML/IR/GGMLDialect.h.inc"
#include "stowage/Dialect/GGML/IR/GGMLEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLTypes.h.inc"

#endif  // STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H
