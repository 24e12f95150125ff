//===- GGMLDialect.td - the ggml dialect ------------------------*- tablegen -*-===//
//
// The `ggml` dialect mirrors ggml's compute graph (ggml/include/ggml.h): one op per ggml op
// (GGML_OP_*), tensors typed with ggml's element types and ggml's ne[0..3] shape order (ne0 is
// the innermost, contiguous dimension). Stowage imports a GGUF model into this dialect (func
// @pp, prompt processing, with n_tokens = n_ubatch and func @tg, token generation, with
// n_tokens = 1: llama.cpp's pp / tg graphs) and plans placement on it.
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_TD
#define STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def GGML_Dialect : Dialect {
  let name = "ggml";
  let cppNamespace = "::stowage::ggml";
  let summary = "ggml's tensor ops and element types, in ggml's ne[0..3] order";
  let description = [{
    Each op is one node of a ggml compute graph (ggml_cgraph) and keeps ggml's semantics: the
    shape rules of ggml's constructor (ggml.c `ggml_mul_mat`, `ggml_rope_ext`, ...) are the
    verifiers, the result element types are the ones ggml creates, and llama.cpp's node names
    (`attn_norm-0`, `Qcur-0`, `result_output`) are kept in an optional `name` string attribute.

    Types:
      * `!ggml.tensor<[ne0, ne1, ne2, ne3], elt>`: a ggml tensor; trailing dimensions of 1 may be
        omitted. A dimension is an integer or an affine form of the symbolic sizes the runtime
        binds per call: `n_tokens`, `n_kv`, `n_outputs`, `n_ctx`, `kv_head` (e.g. `n_tokens+3`,
        `n_tokens*64`, `n_kv+n_tokens`), the same model as the planner's DimExpr. `elt` is a
        plain ggml type (`f32`, `f16`, `bf16`, `f64`, `i8`, `i16`, `i32`, `i64`, as MLIR builtin
        types) or a quantized ggml block type (`q4_K`).
      * `!ggml.q4_0`, `!ggml.q4_K`, `!ggml.iq4_xs`, ...: ggml's block-quantized element types;
        each knows its block size (elements) and block bytes from ggml's type_traits table.

    Discardable attributes (set by the importer, checked by the dialect): on the module
    `ggml.arch` (string, general.architecture), `ggml.n_layer`, `ggml.n_ctx`, `ggml.n_ubatch`;
    on @pp / @tg `ggml.n_tokens`, `ggml.n_kv`, `ggml.n_outputs` (the bounds of the
    symbols) and, for models with a SWA cache, `ggml.n_kv_swa`; all integers >= 0.
  }];
  let useDefaultTypePrinterParser = 0;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Parses `!ggml.<block type name>` and `!ggml.tensor<...>`.
    ::mlir::Type parseType(::mlir::DialectAsmParser &parser) const override;
    /// Prints a type of this dialect in the form parseType reads.
    void printType(::mlir::Type type, ::mlir::DialectAsmPrinter &printer) const override;

  private:
    void registerTypes();
    void registerAttributes();
  public:
  }];
}

#endif // STOWAGE_DIALECT_GGML_IR_GGMLDIALECT_TD
