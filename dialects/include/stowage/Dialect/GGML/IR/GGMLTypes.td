//===- GGMLTypes.td - ggml element and tensor types ------------*- tablegen -*-===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLTYPES_TD
#define STOWAGE_DIALECT_GGML_IR_GGMLTYPES_TD

include "stowage/Dialect/GGML/IR/GGMLDialect.td"

class GGML_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<GGML_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def GGML_BlockType : TypeDef<GGML_Dialect, "Block"> {
  // No mnemonic: the dialect parses and prints it by its ggml name (`!ggml.q4_K`).
  let typeName = "ggml.block";
  let summary = "a ggml block-quantized element type";
  let description = [{
    One of ggml's quantized types (enum ggml_type: q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q2_K ..
    q8_K, iq2_xxs .. iq4_xs, iq1_m, tq1_0, tq2_0, mxfp4, nvfp4, q1_0). `block_size` elements are
    stored in `block_bytes` bytes (ggml's type_traits `blck_size` / `type_size`, taken from
    stowage_base's ggml_types.h table, so the two can never disagree). The parameter is ggml's
    type id, which is also the GGUF on-disk id.

    Written with its ggml name, e.g. `!ggml.q4_K` (256 elements in 144 bytes) or, inside a
    tensor type, `!ggml.tensor<[4096, 4096], q4_K>`.
  }];
  let parameters = (ins "uint32_t":$typeId);
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Elements per block (ggml's blck_size), e.g. 32 for q4_0, 256 for q4_K.
    int64_t getBlockSize() const;
    /// Bytes per block (ggml's type_size), e.g. 18 for q4_0, 144 for q4_K.
    uint64_t getBlockBytes() const;
    /// ggml's type name, e.g. "q4_K".
    ::llvm::StringRef getTypeName() const;
    /// The block type named `name` (exact ggml spelling), or a null type when `name` is not a
    /// quantized ggml type.
    static BlockType getByName(::mlir::MLIRContext *context, ::llvm::StringRef name);
  }];
}

def GGML_TensorType : GGML_Type<"Tensor", "tensor"> {
  let summary = "a ggml tensor: ne[0..3] (ne0 innermost) and a ggml element type";
  let description = [{
    A ggml tensor of exactly four dimensions in ggml's order: ne0 is the innermost (contiguous)
    dimension, i.e. the length of a row; ne1 counts rows, ne2 and ne3 are batch dimensions
    (ggml_new_tensor_4d). The textual form lists ne0 first and may drop trailing 1s:

      !ggml.tensor<[4096, 32000], q4_K>     // token_embd of a Llama-2-7B (ne0 = n_embd)
      !ggml.tensor<[4096, n_tokens], f32>   // activations of a ubatch
      !ggml.tensor<[n_kv, n_tokens], f16>   // KQ_mask
      !ggml.tensor<[n_tokens+3, 5120], f32> // mamba's conv input (d_conv - 1 + n_tokens)

    A dimension is a non-negative integer or an affine form c + k1*s1 + k2*s2 ... of the
    symbolic sizes n_tokens, n_kv, n_outputs, n_ctx and kv_head (written `n_tokens*64+3`; a
    negative coefficient as `+ n_tokens*-2`). The element type is a builtin f32, f16, bf16, f64,
    i8, i16, i32 or i64, or a !ggml block type; for a block type, ne0 must be a static multiple
    of the block size (ggml_row_size).
  }];
  let parameters = (ins
    ArrayRefParameter<"::stowage::ggml::Dim", "ne[0..3]">:$shape,
    "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// ne[i], i in [0, 4).
    ::stowage::ggml::Dim getNe(unsigned i) const { return getShape()[i]; }
    /// True when no dimension is symbolic.
    bool hasStaticShape() const;
    /// Number of elements as a symbolic product (ggml_nelements).
    ::stowage::ggml::ElementCount getNumElements() const;
    /// Bytes of a contiguous tensor of this type (ggml_nbytes), or std::nullopt when a
    /// dimension is symbolic.
    std::optional<uint64_t> getStaticBytes() const;
    /// Bytes of one element, or of one block for block types (ggml_type_size).
    uint64_t getElementBytes() const;
    /// Elements per block: 1 for plain types (ggml_blck_size).
    int64_t getBlockSize() const;
    /// ggml's name of the element type ("f32", "q4_K").
    std::string getElementTypeName() const;
    /// The same tensor type with another shape.
    TensorType withShape(::llvm::ArrayRef<::stowage::ggml::Dim> shape) const {
      return TensorType::get(getContext(), shape, getElementType());
    }
    /// Shape as text in the textual form's order, e.g. "[288, n_tokens, 1, 1]".
    std::string shapeString() const;
  }];
}

//===----------------------------------------------------------------------===//
// Attributes: affine dimensions for view strides and offsets
//===----------------------------------------------------------------------===//

def GGML_DimAttr : AttrDef<GGML_Dialect, "Dim"> {
  let mnemonic = "dim";
  let summary = "one affine size in bytes or elements (a view's offset)";
  let description = [{
    An affine form of the symbols n_tokens, n_kv, n_outputs, n_ctx, kv_head, as in a tensor
    dimension. Written `#ggml.dim<kv_head*256>`; ggml.view prints it bare.
  }];
  let parameters = (ins "::stowage::ggml::Dim":$value);
  let hasCustomAssemblyFormat = 1;
}

def GGML_DimsAttr : AttrDef<GGML_Dialect, "Dims"> {
  let mnemonic = "dims";
  let summary = "a list of affine sizes (a view's byte strides nb1..nb3)";
  let description = [{
    Written `#ggml.dims<[256, n_ctx*2, 8192]>`; ggml.view prints the list bare.
  }];
  let parameters = (ins ArrayRefParameter<"::stowage::ggml::Dim", "sizes">:$values);
  let hasCustomAssemblyFormat = 1;
}

#endif // STOWAGE_DIALECT_GGML_IR_GGMLTYPES_TD
