//===- GGMLDialect.h - the ggml dialect, its types and attributes ---------===//
//
// Declares the `ggml` dialect (see GGMLDialect.td for its description), the dimension model of
// its tensor type (static sizes and affine forms of the symbolic sizes n_tokens, n_kv, n_outputs,
// n_ctx, kv_head), the generated types, enums and attributes. Ops are in GGMLOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H
#define STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace stowage::ggml {

/// A symbolic size that the runtime binds per call. n_tokens: tokens of the ubatch (n_ubatch
/// for @pp, 1 for @tg); n_kv: KV cells the attention reads; n_outputs: tokens whose
/// logits are returned; n_ctx: the KV cache size; kv_head: the first KV cell the ubatch writes
/// (it appears in view offsets); n_kv_swa and kv_head_swa: the same two for the SWA cache of an
/// interleaved sliding-window model (its sliding-window layers' K/V views and KQ_mask_swa). Same
/// symbols as the planner's DimExpr (planner/graph.h).
enum class Sym : uint8_t { n_tokens = 0, n_kv, n_outputs, n_ctx, kv_head, n_kv_swa, kv_head_swa };
inline constexpr unsigned kNumSyms = 7;

/// The textual name of `sym` ("n_tokens").
llvm::StringRef symName(Sym sym);
/// The symbol named `name`, or std::nullopt.
std::optional<Sym> symByName(llvm::StringRef name);

/// One dimension ne[i] of a ggml tensor (or a byte stride or offset of a view): an affine form
/// c + sum_s k[s] * s of the symbols. Static when every k[s] is 0. Written `42`, `n_tokens`,
/// `n_tokens*64`, `n_tokens+3`, `n_kv+n_tokens`, `kv_head*256`, `n_ctx*1024-8`.
struct Dim {
  int64_t c = 0;
  std::array<int64_t, kNumSyms> k{};

  /// The static dimension `size`.
  static Dim of(int64_t size) {
    Dim d;
    d.c = size;
    return d;
  }
  /// The dimension coeff * sym + offset.
  static Dim symbolic(Sym sym, int64_t coeff = 1, int64_t offset = 0) {
    Dim d;
    d.c = offset;
    d.k[static_cast<unsigned>(sym)] = coeff;
    return d;
  }
  /// True when no symbol appears (the size is known at compile time).
  bool isStatic() const {
    for (int64_t v : k)
      if (v != 0)
        return false;
    return true;
  }
  /// The value of a static dimension (requires isStatic()).
  int64_t size() const { return c; }
  /// True when this is the static size `n`.
  bool is(int64_t n) const { return isStatic() && c == n; }
  /// Coefficient of `sym`.
  int64_t coeff(Sym sym) const { return k[static_cast<unsigned>(sym)]; }
  /// Structural equality: equal for every binding of the symbols.
  bool operator==(const Dim &o) const { return c == o.c && k == o.k; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  /// A total order for canonical factor lists (not a comparison of sizes).
  bool operator<(const Dim &o) const { return k != o.k ? k < o.k : c < o.c; }
  /// Term-wise sum and difference (e.g. concat sizes, d_conv - 1 + n_tokens); a term that
  /// overflows int64 wraps (two's complement), giving a Dim that matches no valid declared shape.
  Dim operator+(const Dim &o) const;
  Dim operator-(const Dim &o) const;
  /// Scales every term by `f`; sets `overflow` on int64 overflow.
  Dim scaled(int64_t f, bool &overflow) const;
  /// The textual form (see above).
  std::string str() const;
};

/// Hash for MLIR's type and attribute uniquing.
llvm::hash_code hash_value(const Dim &dim);

/// The product of dimensions, kept as coeff * (product of symbolic factors); each factor is a
/// symbolic Dim divided by the gcd of its terms (n_tokens*4+12 is 4 * (n_tokens+3)). Two counts
/// compare equal when coefficient and factor multiset are equal: this proves equality for every
/// binding of the symbols (and may fail to prove equalities that need expanding a product of
/// two sums, which ggml graphs do not use).
struct ElementCount {
  int64_t coeff = 1;
  llvm::SmallVector<Dim, 4> factors; // sorted
  bool overflow = false;

  /// Multiplies by one dimension (sets `overflow` when the coefficient leaves int64).
  void multiply(const Dim &dim);
  /// True when the count is the number `coeff`.
  bool isStatic() const { return factors.empty(); }
  bool operator==(const ElementCount &o) const {
    return !overflow && !o.overflow && coeff == o.coeff && factors == o.factors;
  }
  bool operator!=(const ElementCount &o) const { return !(*this == o); }
  /// The count as one Dim when it is affine (at most one symbolic factor), else std::nullopt.
  std::optional<Dim> asDim() const;
  /// E.g. "n_tokens*4096", "32000", "32*n_kv*n_tokens", "4*(n_tokens+3)*n_kv"; a count with a
  /// single factor prints as one affine form ("n_tokens*4+12").
  std::string str() const;
};

/// Parses a Dim in its textual form (see Dim).
mlir::ParseResult parseDim(mlir::AsmParser &parser, Dim &dim);

/// True when `type` is a valid element type of a ggml tensor: builtin f32, f16, bf16, f64,
/// signless i8, i16, i32, i64, or a !ggml block type.
bool isGgmlElementType(mlir::Type type);

} // namespace stowage::ggml

#include "stowage/Dialect/GGML/IR/GGMLDialect.h.inc"
#include "stowage/Dialect/GGML/IR/GGMLEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "stowage/Dialect/GGML/IR/GGMLTypes.h.inc"

#endif // STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_H
