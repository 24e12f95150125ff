//===- Passes.h - Stowage compiler passes ---------------------------------===//
//
// Passes of the compiler (see Passes.td for each pass's description and options).
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_COMPILER_TRANSFORMS_PASSES_H
#define STOWAGE_COMPILER_TRANSFORMS_PASSES_H

#include <cstdint>
#include <optional>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "stowage/Dialect/GGML/IR/GGMLDialect.h"

namespace stowage::compiler {

#define GEN_PASS_DECL
#include "stowage/Compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "stowage/Compiler/Transforms/Passes.h.inc"

/// Values of the symbols for evaluating dimensions (negative: unknown).
struct SymbolBindings {
  int64_t n_tokens = -1, n_kv = -1, n_outputs = -1, n_ctx = -1, kv_head = 0;
  int64_t n_kv_swa = -1, kv_head_swa = 0; ///< the SWA cache's (interleaved sliding-window models)
};

/// The value of `dim` under `bindings`, or std::nullopt when a symbol it uses is unknown.
std::optional<int64_t> evaluateDim(const ggml::Dim &dim, const SymbolBindings &bindings);

/// ggml_nbytes of a contiguous tensor of `type` under `bindings` (bytes), or std::nullopt when a
/// dimension cannot be evaluated.
std::optional<uint64_t> tensorBytes(ggml::TensorType type, const SymbolBindings &bindings);

} // namespace stowage::compiler

#endif // STOWAGE_COMPILER_TRANSFORMS_PASSES_H
