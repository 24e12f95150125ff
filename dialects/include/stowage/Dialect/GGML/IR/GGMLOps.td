//===- GGMLOps.td - ggml ops -----------------------------------*- tablegen -*-===//
//
// One op per ggml op. Shapes are written in ggml's order (ne0 innermost). Each verifier checks
// what ggml's constructor in ggml/src/ggml.c asserts (cited per op), with symbolic dimensions
// compared structurally (n_tokens equals n_tokens; n_tokens and n_kv are never assumed equal).
// Every op may carry a `name` string attribute: the ggml tensor name llama.cpp gives the node
// (`Qcur-0`, `ffn_out-3`, `result_output`).
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_GGML_IR_GGMLOPS_TD
#define STOWAGE_DIALECT_GGML_IR_GGMLOPS_TD

include "stowage/Dialect/GGML/IR/GGMLTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def GGML_RopeModeEnum : I32EnumAttr<"RopeMode", "ggml's rope mode (GGML_ROPE_TYPE_*)", [
    I32EnumAttrCase<"normal", 0>,
    I32EnumAttrCase<"neox", 2>]> {
  let cppNamespace = "::stowage::ggml";
}

def GGML_GluOpEnum : I32EnumAttr<"GluKind", "ggml's gated linear unit (enum ggml_glu_op)", [
    I32EnumAttrCase<"reglu", 0>,
    I32EnumAttrCase<"geglu", 1>,
    I32EnumAttrCase<"swiglu", 2>,
    I32EnumAttrCase<"swiglu_oai", 3>,
    I32EnumAttrCase<"geglu_erf", 4>,
    I32EnumAttrCase<"geglu_quick", 5>]> {
  let cppNamespace = "::stowage::ggml";
}

def GGML_MulMatGluKindEnum : I32EnumAttr<"MulMatGluKind",
    "the GLU of ggml.mul_mat_glu: the op or ops it replaces (runtime MulMatGluKind)", [
    I32EnumAttrCase<"swiglu", 0>,
    I32EnumAttrCase<"geglu", 1>,
    I32EnumAttrCase<"silu_mul", 2>,
    I32EnumAttrCase<"gelu_mul", 3>]> {
  let cppNamespace = "::stowage::ggml";
}

def GGML_SortOrderEnum : I32EnumAttr<"SortOrder", "ggml's sort order (enum ggml_sort_order)", [
    I32EnumAttrCase<"asc", 0>,
    I32EnumAttrCase<"desc", 1>]> {
  let cppNamespace = "::stowage::ggml";
}

def GGML_CacheKindEnum : I32EnumAttr<"CacheKind", "kind of a per-layer cache tensor", [
    I32EnumAttrCase<"k", 0>,
    I32EnumAttrCase<"v", 1>,
    I32EnumAttrCase<"r", 2>,
    I32EnumAttrCase<"s", 3>]> {
  let cppNamespace = "::stowage::ggml";
}

// Any !ggml.tensor. Declared as a plain constraint (not the TypeDef) so that the textual form
// always spells `!ggml.tensor<...>` in full.
def GGML_Tensor : Type<CPred<"::llvm::isa<::stowage::ggml::TensorType>($_self)">,
                       "ggml tensor", "::stowage::ggml::TensorType">;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// Every ggml op may carry `name` (its ggml tensor name); the trait checks it is a string.
def GGML_NodeName : NativeOpTrait<"NodeName"> {
  let cppNamespace = "::stowage::ggml";
}

class GGML_Op<string mnemonic, list<Trait> traits = []>
    : Op<GGML_Dialect, mnemonic, !listconcat(traits, [Pure, GGML_NodeName])> {
  let hasVerifier = 1;
}

// An op that writes memory it does not own (CPY into a view of the KV cache): never erased as
// dead code.
class GGML_WriteOp<string mnemonic, list<Trait> traits = []>
    : Op<GGML_Dialect, mnemonic,
         !listconcat(traits, [MemoryEffects<[MemWrite]>, GGML_NodeName])> {
  let hasVerifier = 1;
}

// Ops with one tensor operand and a result of its shape and type (ggml_dup_tensor(a)).
class GGML_UnaryOp<string mnemonic, string ggmlOp, string what>
    : GGML_Op<mnemonic> {
  let summary = ggmlOp # ": " # what;
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

// ADD, MUL, DIV: elementwise with b repeated over a (ggml_can_repeat(b, a)); result like a.
class GGML_BinaryOp<string mnemonic, string ggmlOp, string what>
    : GGML_Op<mnemonic> {
  let summary = ggmlOp # ": " # what # " with broadcast of b over a";
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Leaves: weights, graph inputs, caches
//===----------------------------------------------------------------------===//

def GGML_WeightOp : GGML_Op<"weight"> {
  let summary = "a model weight: the GGUF tensor `gguf_name`";
  let description = [{
    A leaf holding the data of GGUF tensor `gguf_name` (a tensor info of the model file), with
    the file's type and ne[0..3]. The placement passes give it a buffer type; the runtime maps or
    uploads its bytes from the GGUF data section.

    `layer` is llama.cpp's layer of the weight (llm_tensor_info): -1 for the input layer
    (token_embd), n_layer for the output layer (output, output_norm), the block index otherwise;
    it selects the buffer-type list (reference/llamacpp-placement.md §2.4). `duplicated` marks a
    second use of the same GGUF tensor in another role (llama.cpp's TENSOR_DUPLICATED: the tied
    output matrix read from token_embd, rope_freqs of layers > 0): the loader shares it within
    one buffer type and copies it across buffer types.

    Example:
      %w = ggml.weight "blk.0.attn_q.weight" {layer = 0 : i32} : !ggml.tensor<[4096, 4096], q4_K>
      %o = ggml.weight "token_embd.weight" {duplicated, layer = 32 : i32}
             : !ggml.tensor<[4096, 32000], q4_K>
  }];
  let arguments = (ins StrAttr:$gguf_name, OptionalAttr<I32Attr>:$layer, UnitAttr:$duplicated);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$gguf_name attr-dict `:` qualified(type($result))";
}

def GGML_WeightGroupOp : GGML_Op<"weight_group"> {
  let summary = "a weight group: the rows of several weights laid out together at load";
  let description = [{
    One weight whose rows are those of `parts` in order (weights of one element type and ne0,
    ne2 = ne3 = 1): result [ne0, sum of the parts' ne1], their element type. No data moves at run
    time: the memory plan lays the parts out back to back in their buffer and the group is their
    union (a copy in an allocated buffer only where the parts are apart in the mapped file), so a
    ggml.mul_mat over it computes every part's rows with the activations converted once. Made by
    the `stowage-fuse-mul-mat-qkv` pass, never by the graph builders; the plan carries it as a
    weight (GlobalTensor.parts) named `name`.
    Example (a layer's Q, K and V weights):
      %qkv = ggml.weight_group %wq, %wk, %wv {name = "blk.0.attn_q+k+v.weight"}
               : (!ggml.tensor<[2048, 2048], q4_0>, !ggml.tensor<[2048, 512], q4_0>,
                  !ggml.tensor<[2048, 512], q4_0>) -> !ggml.tensor<[2048, 3072], q4_0>
  }];
  let arguments = (ins Variadic<GGML_Tensor>:$parts);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$parts attr-dict `:` functional-type(operands, results)";
}

def GGML_InputOp : GGML_Op<"input"> {
  let summary = "a graph input set by the caller before each call (ggml_set_input)";
  let description = [{
    A leaf the runtime fills per call: llama.cpp's `inp_tokens` (i32 [n_tokens]), `inp_embd`,
    `inp_pos` (i32 [n_tokens]), `KQ_mask` ([n_kv, n_tokens], f32 or f16), `inp_out_ids`
    (i32 [n_outputs]), `inp_s_copy` (i32). The scheduler pins graph inputs to the CPU ("1.inp").

    Example:
      %tok = ggml.input "inp_tokens" : !ggml.tensor<[n_tokens], i32>
  }];
  let arguments = (ins StrAttr:$input_name);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$input_name attr-dict `:` qualified(type($result))";
}

def GGML_KvCacheOp : GGML_Op<"kv_cache"> {
  let summary = "a per-layer cache tensor (K, V, or recurrent r/s state)";
  let description = [{
    The cache tensor `cache_name` of layer `layer`: llama.cpp's `cache_k_l<il>` / `cache_v_l<il>`
    (llama_kv_cache: 1-D, (n_embd_k_gqa) * kv_size elements) or, for recurrent models, the conv
    state `cache_r_l<il>` and the SSM state `cache_s_l<il>`. It lives on the layer's device
    (or the CPU with -nkvo); graphs read it through views and write it with `ggml.cpy`.

    Example:
      %k = ggml.kv_cache k "cache_k_l0" layer 0 : !ggml.tensor<[n_ctx*4096], f16>
  }];
  let arguments = (ins GGML_CacheKindEnum:$kind, StrAttr:$cache_name, I32Attr:$layer);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$kind $cache_name `layer` $layer attr-dict `:` qualified(type($result))";
}

//===----------------------------------------------------------------------===//
// Matrix products and lookups
//===----------------------------------------------------------------------===//

def GGML_GetRowsOp : GGML_Op<"get_rows"> {
  let summary = "GET_ROWS: gather rows of a by the i32 indices b";
  let description = [{
    result[:, i, j, k] = a[:, b[i, j, k], j, k] (ggml_get_rows). Used for token embeddings
    (a = token_embd, b = inp_tokens), for selecting outputs (b = inp_out_ids), for MoE routing
    weights and for recurrent states.
    Shapes: a [n, r, ne2, ne3], b i32 [m, ne2, ne3'] with a.ne2 == b.ne1 and b.ne3 == 1 ->
    result [n, m, b.ne1, b.ne2]; result type f32 (i32 when a is i32).
    Example:
      %e = ggml.get_rows %tok_embd, %tok : (!ggml.tensor<[4096, 32000], q4_K>,
             !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[4096, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

def GGML_MulMatOp : GGML_Op<"mul_mat"> {
  let summary = "MUL_MAT: matrix product a^T b, a being the weight";
  let description = [{
    result[i, j, k, l] = sum_n a[n, i, k', l'] * b[n, j, k, l] with a broadcast over the batch
    dimensions (ggml_mul_mat; k' = k / (b.ne2 / a.ne2)).
    Shapes: a [K, M, ne2, ne3] (not transposed), b [K, N, ne2 * r2, ne3 * r3] -> result f32
    [M, N, b.ne2, b.ne3]. For a linear layer, a is the weight [n_in, n_out] and b the
    activations [n_in, n_tokens].
    Example:
      %q = ggml.mul_mat %wq, %x {name = "Qcur-0"} : (!ggml.tensor<[4096, 4096], q4_K>,
             !ggml.tensor<[4096, n_tokens], f32>) -> !ggml.tensor<[4096, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

def GGML_MulMatGluOp : GGML_Op<"mul_mat_glu"> {
  let summary = "MUL_MAT_GLU: the FFN-in, GLU(gate^T x, up^T x) in one op (Stowage's fusion)";
  let description = [{
    The GLU of ggml.mul_mat(gate, x) and ggml.mul_mat(up, x) as one op, bit for bit on the CPU
    backend: `glu` names what it replaces, swiglu / geglu (ggml.glu of the split form, llama.cpp
    2026 build_ffn) or silu_mul / gelu_mul (ggml.silu / ggml.gelu then ggml.mul, Feb 2025).
    gate and up are two weight tensors of one type and shape (they stay where the planner put
    them), x the activations: MUL_MAT(gate, x)'s shape rule, result f32 [gate.ne1, x.ne1, x.ne2,
    x.ne3]. Made by the `stowage-fuse-mul-mat-glu` pass, never by the graph builders; the plan
    carries it as the op MUL_MAT_GLU (sources gate, x, up; iparams {glu}).
    Example:
      %f = ggml.mul_mat_glu swiglu %gate, %x, %up : (!ggml.tensor<[4096, 11008], q4_K>,
             !ggml.tensor<[4096, n_tokens], f32>, !ggml.tensor<[4096, 11008], q4_K>)
             -> !ggml.tensor<[11008, n_tokens], f32>
  }];
  let arguments = (ins GGML_MulMatGluKindEnum:$glu, GGML_Tensor:$gate, GGML_Tensor:$x,
                       GGML_Tensor:$up);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$glu $gate `,` $x `,` $up attr-dict `:` functional-type(operands, results)";
}

def GGML_MulMatIdOp : GGML_Op<"mul_mat_id"> {
  let summary = "MUL_MAT_ID: per-token expert matrix product (mixture of experts)";
  let description = [{
    result[:, e, t] = as[:, :, ids[e, t]]^T b[:, e % b.ne1, t] (ggml_mul_mat_id).
    Shapes: as [K, M, n_expert] (merged expert tensor, e.g. ffn_up_exps), b [K, n_b, n_tokens]
    with ids.ne0 % n_b == 0, ids i32 [n_expert_used, n_tokens] -> result f32
    [M, n_expert_used, n_tokens].
    Example:
      %up = ggml.mul_mat_id %up_exps, %x, %sel : (!ggml.tensor<[4096, 14336, 8], q4_K>,
              !ggml.tensor<[4096, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>)
              -> !ggml.tensor<[14336, 2, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$as, GGML_Tensor:$b, GGML_Tensor:$ids);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$as `,` $b `,` $ids attr-dict `:` functional-type(operands, results)";
}

def GGML_AddIdOp : GGML_Op<"add_id"> {
  let summary = "ADD_ID: per-expert bias rows selected by ids (gpt-oss's biased experts)";
  let description = [{
    result[:, e, t] = a[:, e, t] + b[:, ids[e, t]] (ggml_add_id). Shapes: a [n, n_expert_used,
    n_tokens] (a MUL_MAT_ID result), b [n, n_expert] (one bias row per expert), ids i32
    [n_expert_used, n_tokens] -> result like a.
    Example:
      %u = ggml.add_id %up, %up_b, %sel : (!ggml.tensor<[2880, 4, n_tokens], f32>,
             !ggml.tensor<[2880, 32], f32>, !ggml.tensor<[4, n_tokens], i32>)
             -> !ggml.tensor<[2880, 4, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b, GGML_Tensor:$ids);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b `,` $ids attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def GGML_AddOp : GGML_BinaryOp<"add", "ADD", "a + b"> {
  let description = [{
    result = a + b, b repeated along every dimension where b.ne[i] divides a.ne[i]
    (ggml_add; ggml_can_repeat(b, a)). Result: a's shape and type. Residual connections
    (`ffn_inp-0`, `l_out-0`) and biases (b = `blk.0.attn_q.bias` [n]) are ADDs.
    Example:
      %r = ggml.add %cur, %inpSA {name = "ffn_inp-0"} : (!ggml.tensor<[4096, n_tokens], f32>,
             !ggml.tensor<[4096, n_tokens], f32>) -> !ggml.tensor<[4096, n_tokens], f32>
  }];
}

def GGML_MulOp : GGML_BinaryOp<"mul", "MUL", "a * b"> {
  let description = [{
    result = a * b elementwise, b repeated over a (ggml_mul; ggml_can_repeat(b, a)). Result:
    a's shape and type. Norm weights are applied with MUL (`attn_norm-0` = rms_norm(x) * w).
    Example:
      %n = ggml.mul %x, %w : (!ggml.tensor<[4096, n_tokens], f32>, !ggml.tensor<[4096], f32>)
             -> !ggml.tensor<[4096, n_tokens], f32>
  }];
}

def GGML_DivOp : GGML_BinaryOp<"div", "DIV", "a / b"> {
  let description = [{
    result = a / b elementwise, b repeated over a (ggml_div). Result: a's shape and type. Used to
    normalize MoE routing weights by their sum.
    Example:
      %w = ggml.div %p, %s : (!ggml.tensor<[1, 2, n_tokens], f32>,
             !ggml.tensor<[1, 1, n_tokens], f32>) -> !ggml.tensor<[1, 2, n_tokens], f32>
  }];
}

def GGML_ScaleOp : GGML_Op<"scale"> {
  let summary = "SCALE: a * s + b for scalars s and b";
  let description = [{
    result = a * scale + bias (ggml_scale / ggml_scale_bias). Result: a's shape and type.
    Gemma scales its input embeddings by sqrt(n_embd) with SCALE.
    Example:
      %s = ggml.scale %x {scale = 8.0 : f32} : (!ggml.tensor<[64, n_tokens], f32>)
             -> !ggml.tensor<[64, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, F32Attr:$scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$bias);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_FillOp : GGML_Op<"fill"> {
  let summary = "FILL: a tensor of a's shape with every element the constant value";
  let description = [{
    result[i] = value for every element (ggml_fill; a gives only the shape and type, f32 or f16,
    contiguous). llama.cpp 2026's group-limited expert routing (DeepSeek-V3) fills the grouped
    selection probabilities with -inf and writes the kept groups' rows back with set_rows.
    Example:
      %m = ggml.fill %g {value = 0xFF800000 : f32} : (!ggml.tensor<[32, 8, n_tokens], f32>)
             -> !ggml.tensor<[32, 8, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, F32Attr:$value);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_ClampOp : GGML_Op<"clamp"> {
  let summary = "CLAMP: each element bounded to [min, max]";
  let description = [{
    result[i] = max(min(a[i], max), min) with ggml-cpu's comparisons (a NaN element becomes max;
    min > max gives min); a's shape and type (ggml_clamp). llama.cpp 2026's build_moe_ffn clamps the
    chosen experts' weight sum to [2^-14, inf] before dividing the weights by it.
    Example:
      %s = ggml.clamp %sum {min = 6.10351563E-5 : f32, max = 0x7F800000 : f32}
             : (!ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, F32Attr:$min, F32Attr:$max);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_SiluOp : GGML_UnaryOp<"silu", "UNARY(SILU)", "x * sigmoid(x)"> {
  let description = [{
    result = a / (1 + exp(-a)) elementwise (ggml_silu; rows must be contiguous). Result: a's
    shape and type.
    Example:
      %s = ggml.silu %g : (!ggml.tensor<[11008, n_tokens], f32>)
             -> !ggml.tensor<[11008, n_tokens], f32>
  }];
}

def GGML_GeluOp : GGML_UnaryOp<"gelu", "UNARY(GELU)", "tanh-approximated GELU"> {
  let description = [{
    result = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) elementwise (ggml_gelu). Result: a's
    shape and type.
    Example:
      %g = ggml.gelu %x : (!ggml.tensor<[16384, n_tokens], f32>)
             -> !ggml.tensor<[16384, n_tokens], f32>
  }];
}

def GGML_SigmoidOp : GGML_UnaryOp<"sigmoid", "UNARY(SIGMOID)", "1 / (1 + exp(-x))"> {
  let description = [{
    result = 1 / (1 + exp(-a)) elementwise (ggml_sigmoid). Result: a's shape and type. qwen2moe
    gates its shared expert with it.
    Example:
      %s = ggml.sigmoid %g : (!ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  }];
}

def GGML_TanhOp : GGML_UnaryOp<"tanh", "UNARY(TANH)", "hyperbolic tangent"> {
  let description = [{
    result = tanh(a) elementwise (ggml_tanh). Result: a's shape and type. Gemma 2 soft-caps its
    attention scores and final logits as cap * tanh(x / cap): SCALE, TANH, SCALE.
    Example:
      %t = ggml.tanh %x : (!ggml.tensor<[256000, n_outputs], f32>)
             -> !ggml.tensor<[256000, n_outputs], f32>
  }];
}

def GGML_GluOp : GGML_Op<"glu"> {
  let summary = "GLU: gated linear unit (swiglu, geglu, ...)";
  let description = [{
    With one operand (ggml_glu, e.g. ggml_swiglu): a = [x | g] along ne0, result =
    act(x) * g, result [a.ne0 / 2, a.ne1, a.ne2, a.ne3] (halves swapped with `swapped = true`);
    phi3's fused ffn_up uses this form. With two operands (ggml_glu_split, e.g.
    ggml_swiglu_split(gate, up)): result = act(a) * b, a and b of the same shape and type,
    result like a. act is relu, gelu, silu, ... per `op`. swiglu_oai (ggml_swiglu_oai, gpt-oss's
    experts; split form only): x = min(a, limit), y = clamp(b, -limit, limit), result =
    x * sigmoid(alpha * x) * (y + 1); alpha and limit apply to it alone.
    Example:
      %f = ggml.glu swiglu %gate, %up : (!ggml.tensor<[11008, n_tokens], f32>,
             !ggml.tensor<[11008, n_tokens], f32>) -> !ggml.tensor<[11008, n_tokens], f32>
  }];
  let arguments = (ins GGML_GluOpEnum:$op, GGML_Tensor:$a,
                       Optional<GGML_Tensor>:$b,
                       DefaultValuedAttr<BoolAttr, "false">:$swapped,
                       DefaultValuedAttr<F32Attr, "1.702f">:$alpha,
                       DefaultValuedAttr<F32Attr, "7.0f">:$limit);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$op $a (`,` $b^)? attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Normalization, attention
//===----------------------------------------------------------------------===//

def GGML_RmsNormOp : GGML_Op<"rms_norm"> {
  let summary = "RMS_NORM: a / sqrt(mean(a^2) + eps) over each row";
  let description = [{
    Normalizes each row (along ne0) by its root mean square (ggml_rms_norm). Result: a's shape
    and type. The norm weight is applied afterwards with ggml.mul.
    Example:
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[4096, n_tokens], f32>)
             -> !ggml.tensor<[4096, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, F32Attr:$eps);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_RmsNormMulOp : GGML_Op<"rms_norm_mul"> {
  let summary = "RMS_NORM_MUL: rms_norm(a) * w in one op (Stowage's fused norm)";
  let description = [{
    ggml.mul(ggml.rms_norm(a) {eps}, w) as one op, bit for bit on the CPU backend (RMS_NORM's
    float a * scale, then MUL's float product with w; ggml-cuda fuses the same pair at run time,
    ggml_cuda_can_fuse). w is repeated over a as MUL's b (ggml_can_repeat(w, a)); result: a's shape
    and type. Made by the `stowage-fuse-rms-norm-mul` pass, never by the graph builders; the plan
    carries it as the op RMS_NORM_MUL with RMS_NORM's parameter {eps}.
    Example:
      %n = ggml.rms_norm_mul %x, %w {eps = 1.0e-05 : f32} : (!ggml.tensor<[4096, n_tokens], f32>,
             !ggml.tensor<[4096], f32>) -> !ggml.tensor<[4096, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$w, F32Attr:$eps);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $w attr-dict `:` functional-type(operands, results)";
}

def GGML_NormOp : GGML_Op<"norm"> {
  let summary = "NORM: (a - mean(a)) / sqrt(var(a) + eps) over each row";
  let description = [{
    Layer normalization of each row (along ne0) without affine part (ggml_norm). Result: a's
    shape and type. The weight and bias follow as ggml.mul and ggml.add.
    Example:
      %n = ggml.norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[2560, n_tokens], f32>)
             -> !ggml.tensor<[2560, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, F32Attr:$eps);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_RopeOp : GGML_Op<"rope"> {
  let summary = "ROPE: rotary position embedding (normal or neox), optional freq factors";
  let description = [{
    Rotates pairs of the first n_dims elements of each head by position-dependent angles
    theta_i = pos * freq_base^(-2i/n_dims) / freq_factors[i] (ggml_rope_ext, with YaRN
    parameters ext_factor, attn_factor, beta_fast, beta_slow and n_ctx_orig). `normal` rotates
    adjacent pairs (x0, x1); `neox` rotates (x_i, x_{i + n_dims/2}). n_offs (ggml_rope_set_offset,
    even) moves the rotated dims to [n_offs, n_offs + n_dims), the others are copied (deepseek2's
    MHA form ropes the last n_rot dims of its query heads).
    Shapes: a [head_dim, n_head, n_tokens, 1], pos i32 [n_tokens] (a.ne2 == pos.ne0),
    freq_factors f32 [>= n_dims / 2] (llama-3 rope_freqs, phi3 rope_factors_long/short);
    result like a. The scheduler does not let freq_factors (a weight) decide ROPE's backend.
    Example:
      %q = ggml.rope neox %q0, %pos {n_dims = 128 : i32, freq_base = 1.0e+06 : f32}
             : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>)
             -> !ggml.tensor<[128, 32, n_tokens], f32>
  }];
  let arguments = (ins GGML_RopeModeEnum:$mode, GGML_Tensor:$a, GGML_Tensor:$pos,
                       Optional<GGML_Tensor>:$freq_factors,
                       I32Attr:$n_dims,
                       DefaultValuedAttr<I32Attr, "0">:$n_ctx_orig,
                       DefaultValuedAttr<F32Attr, "10000.0f">:$freq_base,
                       DefaultValuedAttr<F32Attr, "1.0f">:$freq_scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$ext_factor,
                       DefaultValuedAttr<F32Attr, "1.0f">:$attn_factor,
                       DefaultValuedAttr<F32Attr, "32.0f">:$beta_fast,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta_slow,
                       DefaultValuedAttr<I32Attr, "0">:$n_offs);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $mode $a `,` $pos (`,` `freq_factors` $freq_factors^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GGML_SoftMaxOp : GGML_Op<"soft_max", [AttrSizedOperandSegments]> {
  let summary = "SOFT_MAX: softmax(a * scale + mask) over each row";
  let description = [{
    result = softmax(a * scale + mask (+ ALiBi slope * mask when max_bias > 0)) along ne0
    (ggml_soft_max_ext). llama.cpp's attention: kq_soft_max = soft_max(kq, KQ_mask,
    1/sqrt(head_dim)).
    Shapes: a [n, m, ne2, ne3]; mask f16 or f32 [n, >= m, ne2 / r2, ne3 / r3] (broadcast over
    heads); result like a. max_bias > 0 requires a mask. sinks (ggml_soft_max_add_sinks, gpt-oss)
    f32 [ne2]: head h's rows are normalized as if they held one more logit sinks[h].
    Example:
      %p = ggml.soft_max %kq, mask %m {scale = 0.0883883461 : f32}
             : (!ggml.tensor<[n_kv, n_tokens, 32], f32>, !ggml.tensor<[n_kv, n_tokens], f16>)
             -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, Optional<GGML_Tensor>:$mask, Optional<GGML_Tensor>:$sinks,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$max_bias);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $a (`,` `mask` $mask^)? (`,` `sinks` $sinks^)? attr-dict `:` functional-type(operands, results)
  }];
}

def GGML_FlashAttnExtOp : GGML_Op<"flash_attn_ext", [AttrSizedOperandSegments]> {
  let summary = "FLASH_ATTN_EXT: softmax(k^T q * scale + mask) v in one op";
  let description = [{
    Attention of every query row against the cached keys and values without materializing the
    [n_kv, n_tokens, n_head] scores (ggml_flash_attn_ext; llama.cpp's llm_build_kqv with -fa on).
    For query row (token t, head h): s_c = dot(k[:, c, h / r], q[:, t, h]) * scale, with
    logit_softcap != 0 replaced by logit_softcap * tanh(s_c / logit_softcap), plus the ALiBi
    slope(h) * mask[c, t]; result[:, h, t] = sum_c softmax(s)_c * v[:, c, h / r]. Keys whose mask
    is -inf are skipped. prec is ggml_flash_attn_ext_set_prec's value (0 GGML_PREC_DEFAULT,
    1 GGML_PREC_F32; llama.cpp sets F32); ggml-cpu accumulates the same way for both.
    Shapes: q f32 [D, n_tokens, n_head, ne3], k [D, n_kv, n_head_kv, ne3 / r3] and
    v [Dv, n_kv, n_head_kv, ne3 / r3] (n_head a multiple of n_head_kv: grouped-query attention),
    mask f16 [n_kv, >= n_tokens] (2-D, contiguous); result f32 [Dv, n_head, n_tokens, ne3]
    (already permuted like kqv_merged). max_bias > 0 requires a mask. sinks
    (ggml_flash_attn_ext_add_sinks, gpt-oss) f32 [n_head]: one more logit per head, without a value.
    Example:
      %o = ggml.flash_attn_ext %q, %k, %v, mask %m {scale = 0.125 : f32, prec = 1 : i32}
             : (!ggml.tensor<[64, n_tokens, 32], f32>, !ggml.tensor<[64, n_kv, 8], f16>,
                !ggml.tensor<[64, n_kv, 8], f16>, !ggml.tensor<[n_kv, n_tokens], f16>)
             -> !ggml.tensor<[64, 32, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$q, GGML_Tensor:$k, GGML_Tensor:$v, Optional<GGML_Tensor>:$mask,
                       Optional<GGML_Tensor>:$sinks,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$max_bias,
                       DefaultValuedAttr<F32Attr, "0.0f">:$logit_softcap,
                       DefaultValuedAttr<I32Attr, "0">:$prec);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`,` `mask` $mask^)? (`,` `sinks` $sinks^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GGML_SumRowsOp : GGML_Op<"sum_rows"> {
  let summary = "SUM_ROWS: sum of each row";
  let description = [{
    result[0, i, j, k] = sum_n a[n, i, j, k] (ggml_sum_rows). Shapes: a [n, ne1, ne2, ne3] ->
    result [1, ne1, ne2, ne3], a's type.
    Example:
      %s = ggml.sum_rows %w : (!ggml.tensor<[1, 2, n_tokens], f32>)
             -> !ggml.tensor<[1, 1, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_ArgsortOp : GGML_Op<"argsort"> {
  let summary = "ARGSORT: indices that sort each row";
  let description = [{
    result[:, i, j, k] = the permutation sorting row a[:, i, j, k] in `order` (ggml_argsort).
    Shapes: a f32 [n, ...] -> result i32 of a's shape.
    Example:
      %i = ggml.argsort desc %p : (!ggml.tensor<[8, n_tokens], f32>)
             -> !ggml.tensor<[8, n_tokens], i32>
  }];
  let arguments = (ins GGML_SortOrderEnum:$order, GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$order $a attr-dict `:` functional-type(operands, results)";
}

def GGML_TopKOp : GGML_Op<"top_k"> {
  let summary = "TOP_K: indices of the k largest elements of each row";
  let description = [{
    result[:, i, j, l] = indices of the k largest values of row a[:, i, j, l], in descending
    order (ggml_top_k; GGML_ASSERT(a->ne[0] >= k)). MoE routing selects n_expert_used experts
    per token with it (`ffn_moe_topk-0`).
    Shapes: a f32 [n, ne1, ne2, ne3] -> result i32 [k, ne1, ne2, ne3], k <= n.
    Example:
      %sel = ggml.top_k %probs {k = 2 : i32} : (!ggml.tensor<[8, n_tokens], f32>)
               -> !ggml.tensor<[2, n_tokens], i32>
  }];
  let arguments = (ins GGML_Tensor:$a, I32Attr:$k);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Data movement and views
//===----------------------------------------------------------------------===//

def GGML_CpyOp : GGML_WriteOp<"cpy"> {
  let summary = "CPY: copy a into b (converting the type); result is b";
  let description = [{
    Writes the elements of a into the destination b in row-major order, converting to b's type
    (ggml_cpy; ggml_nelements(a) == ggml_nelements(b)). The result is (a view of) b: llama.cpp
    stores K and V into views of the cache with it (`k_cache_view-0` ← Kcur-0). It writes b's
    memory, so it is not erased when its result is unused.
    Example:
      %s = ggml.cpy %kcur, %kview : (!ggml.tensor<[128, 8, n_tokens], f32>,
             !ggml.tensor<[n_tokens*1024], f16>) -> !ggml.tensor<[n_tokens*1024], f16>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

def GGML_SetRowsOp : GGML_WriteOp<"set_rows"> {
  let summary = "SET_ROWS: write the rows of b into a at the row indices c; result is a";
  let description = [{
    a[:, c[i, j', k'], j, k] = b[:, i, j, k] (ggml_set_rows; j' = j % c.ne1, k' = k % c.ne2),
    converting b's f32 rows to a's type. llama.cpp (since mid 2025) stores K and V into the cache
    with it, at the cell indices of the ubatch. The result is (a view of) a; the op writes a's
    memory, so it is never erased.
    Shapes: a [n, rows_a, ne2, ne3] (contiguous rows), b f32 [n, m, ne2, ne3], c i64 or i32
    [m, ne2 / r2, ne3 / r3, 1]; result like a. ggml's src order is (b, c, a); the textual form
    follows the constructor ggml_set_rows(a, b, c).
    Example:
      %k = ggml.set_rows %cache, %kcur, %idx : (!ggml.tensor<[1024, n_ctx], f16>,
             !ggml.tensor<[1024, n_tokens], f32>, !ggml.tensor<[n_tokens], i64>)
             -> !ggml.tensor<[1024, n_ctx], f16>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b, GGML_Tensor:$c);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b `,` $c attr-dict `:` functional-type(operands, results)";
}

def GGML_RopeSetRowsOp : GGML_WriteOp<"rope_set_rows"> {
  let summary = "ROPE_SET_ROWS: the rotated K rows stored into the KV cache (Stowage's fusion)";
  let description = [{
    ggml.set_rows(dst, ggml.reshape(ggml.rope(x, pos, freq_factors), [x.ne0 * x.ne1, x.ne2]),
    idx) as one op, bit for bit on the CPU backend (llama.cpp 2026's llama_kv_cache::cpy_k of
    the rotated K): ROPE's parameters, SET_ROWS's store. The result is (a view of) dst; the op
    writes dst's memory, so it is never erased. Made by the `stowage-fuse-rope-kv-store` pass,
    never by the graph builders; the plan carries it as the op ROPE_SET_ROWS (sources x, pos,
    dst, idx[, freq_factors]; ROPE's parameters).
    Shapes: x f32 [head_dim, n_head, n_tokens], pos i32 [n_tokens], dst [head_dim * n_head,
    rows] (f32, f16 or bf16), idx i64 or i32 [n_tokens]; result like dst.
    Example:
      %k = ggml.rope_set_rows neox %x, %pos, %cache, %idx {n_dims = 128 : i32}
             : (!ggml.tensor<[128, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>,
                !ggml.tensor<[1024, 4096], f16>, !ggml.tensor<[n_tokens], i64>)
             -> !ggml.tensor<[1024, 4096], f16>
  }];
  let arguments = (ins GGML_RopeModeEnum:$mode, GGML_Tensor:$x, GGML_Tensor:$pos,
                       GGML_Tensor:$dst, GGML_Tensor:$idx,
                       Optional<GGML_Tensor>:$freq_factors,
                       I32Attr:$n_dims,
                       DefaultValuedAttr<I32Attr, "0">:$n_ctx_orig,
                       DefaultValuedAttr<F32Attr, "10000.0f">:$freq_base,
                       DefaultValuedAttr<F32Attr, "1.0f">:$freq_scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$ext_factor,
                       DefaultValuedAttr<F32Attr, "1.0f">:$attn_factor,
                       DefaultValuedAttr<F32Attr, "32.0f">:$beta_fast,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta_slow,
                       DefaultValuedAttr<I32Attr, "0">:$n_offs);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $mode $x `,` $pos `,` $dst `,` $idx (`,` `freq_factors` $freq_factors^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GGML_RopeCpyOp : GGML_WriteOp<"rope_cpy"> {
  let summary = "ROPE_CPY: the rotated K copied into a view of the KV cache (Stowage's fusion)";
  let description = [{
    ggml.cpy(ggml.rope(x, pos, freq_factors), dst) as one op, bit for bit on the CPU backend
    (llama.cpp Feb 2025's K store: ggml_cpy of the rotated K into the cache's view of the
    ubatch's cells): ROPE's parameters, CPY's conversion into dst in ggml element order. The
    result is (a view of) dst; the op writes dst's memory, so it is never erased. Made by the
    `stowage-fuse-rope-kv-store` pass; the plan carries it as the op ROPE_CPY (sources x, pos,
    dst[, freq_factors]; ROPE's parameters).
    Shapes: x f32 [head_dim, n_head, n_tokens], pos i32 [n_tokens], dst f32, f16 or bf16 of as
    many elements as x; result like dst.
    Example:
      %k = ggml.rope_cpy normal %x, %pos, %view {n_dims = 128 : i32}
             : (!ggml.tensor<[128, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>,
                !ggml.tensor<[n_tokens*1024], f16>) -> !ggml.tensor<[n_tokens*1024], f16>
  }];
  let arguments = (ins GGML_RopeModeEnum:$mode, GGML_Tensor:$x, GGML_Tensor:$pos,
                       GGML_Tensor:$dst,
                       Optional<GGML_Tensor>:$freq_factors,
                       I32Attr:$n_dims,
                       DefaultValuedAttr<I32Attr, "0">:$n_ctx_orig,
                       DefaultValuedAttr<F32Attr, "10000.0f">:$freq_base,
                       DefaultValuedAttr<F32Attr, "1.0f">:$freq_scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$ext_factor,
                       DefaultValuedAttr<F32Attr, "1.0f">:$attn_factor,
                       DefaultValuedAttr<F32Attr, "32.0f">:$beta_fast,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta_slow,
                       DefaultValuedAttr<I32Attr, "0">:$n_offs);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $mode $x `,` $pos `,` $dst (`,` `freq_factors` $freq_factors^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def GGML_CastOp : GGML_Op<"cast"> {
  let summary = "CPY into a new tensor of another type (ggml_cast)";
  let description = [{
    A converted copy of a in a tensor of its own (ggml_cast: a CPY whose destination is its result;
    the plan records it as a CPY node with the single source a). llama.cpp's -fa graphs read the
    KQ mask through `KQ_mask (copy)`, its F16 cast.
    Shapes: any a; the result has a's shape and another (or the same) element type.
    Example:
      %m16 = ggml.cast %m : (!ggml.tensor<[n_kv, n_tokens], f32>) -> !ggml.tensor<[n_kv, n_tokens], f16>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_ContOp : GGML_Op<"cont"> {
  let summary = "CONT: make a contiguous (optionally with a new shape)";
  let description = [{
    Copies a (possibly a permuted or strided view) into a new contiguous tensor of the result
    shape (ggml_cont, ggml_cont_4d; same element count and type).
    Example:
      %c = ggml.cont %p {name = "kqv_merged_cont-0"} : (!ggml.tensor<[128, 32, n_tokens], f32>)
             -> !ggml.tensor<[4096, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_ViewOp : GGML_Op<"view", [ViewLikeOpInterface]> {
  let summary = "VIEW: a strided view of a's bytes";
  let description = [{
    The result shape is read from a's data at byte `offset` (default 0) with byte strides
    nb1, nb2, nb3 (`nb`; nb0 is the element size) (ggml_view_1d..4d). No data moves. Strides and
    offset are affine forms like dimensions: llama.cpp stores the new K rows of a ubatch at
    offset kv_head * row size. ggml requires the view to stay within a: offset + bytes spanned
    <= ggml_nbytes(a) (checked when everything is static).
    Shapes: any a; result of a's element type.
    Example (the K cache of one layer as [head_dim, n_head_kv, n_kv], and the K store target):
      %k = ggml.view %cache nb [256, 2048, 8388608]
             : (!ggml.tensor<[4194304], f16>) -> !ggml.tensor<[128, 8, n_kv], f16>
      %s = ggml.view %cache nb [2048, n_tokens*2048, n_tokens*2048] offset kv_head*2048
             : (!ggml.tensor<[4194304], f16>) -> !ggml.tensor<[n_tokens*1024], f16>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_DimsAttr:$nb, OptionalAttr<GGML_DimAttr>:$offset);
  let results = (outs GGML_Tensor:$result);
  let extraClassDeclaration = [{
    /// ViewLikeOpInterface: the tensor whose memory this op reinterprets (no data moves).
    ::mlir::Value getViewSource() { return getA(); }
  }];
  let assemblyFormat = [{
    $a custom<ViewLayout>($nb, $offset) attr-dict `:` functional-type(operands, results)
  }];
}

def GGML_ReshapeOp : GGML_Op<"reshape", [ViewLikeOpInterface]> {
  let summary = "RESHAPE: the contiguous a with another shape";
  let description = [{
    Reinterprets the contiguous tensor a with the result shape (ggml_reshape_1d..4d): same
    element count and type, a must be contiguous (GGML_ASSERT(ggml_is_contiguous(a))), so the
    output of a permute, transpose or strided view needs a ggml.cont first.
    Example:
      %q = ggml.reshape %q0 : (!ggml.tensor<[4096, n_tokens], f32>)
             -> !ggml.tensor<[128, 32, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let extraClassDeclaration = [{
    /// ViewLikeOpInterface: the tensor whose memory this op reinterprets (no data moves).
    ::mlir::Value getViewSource() { return getA(); }
  }];
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_PermuteOp : GGML_Op<"permute", [ViewLikeOpInterface]> {
  let summary = "PERMUTE: move dimension i of a to position axes[i]";
  let description = [{
    result.ne[axes[i]] = a.ne[i] for i in 0..3 (ggml_permute; axes is a permutation of 0..3).
    The result is a view (not contiguous unless axes is the identity).
    Example (llama.cpp's q = permute(q, 0, 2, 1, 3)):
      %p = ggml.permute %q {axes = array<i32: 0, 2, 1, 3>}
             : (!ggml.tensor<[128, 32, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens, 32], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, DenseI32ArrayAttr:$axes);
  let results = (outs GGML_Tensor:$result);
  let extraClassDeclaration = [{
    /// ViewLikeOpInterface: the tensor whose memory this op reinterprets (no data moves).
    ::mlir::Value getViewSource() { return getA(); }
  }];
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_TransposeOp : GGML_Op<"transpose", [ViewLikeOpInterface]> {
  let summary = "TRANSPOSE: swap ne0 and ne1 (a view)";
  let description = [{
    ggml_transpose = ggml_permute(a, 1, 0, 2, 3): result [a.ne1, a.ne0, a.ne2, a.ne3], a's type.
    Example:
      %t = ggml.transpose %x : (!ggml.tensor<[5120, n_tokens], f32>)
             -> !ggml.tensor<[n_tokens, 5120], f32>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let extraClassDeclaration = [{
    /// ViewLikeOpInterface: the tensor whose memory this op reinterprets (no data moves).
    ::mlir::Value getViewSource() { return getA(); }
  }];
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

def GGML_ConcatOp : GGML_Op<"concat"> {
  let summary = "CONCAT: a and b joined along dimension dim";
  let description = [{
    ggml_concat: a and b have the same type and the same ne except along `dim`; result.ne[dim]
    = a.ne[dim] + b.ne[dim]. Mamba joins its conv state and the new tokens with it.
    Example:
      %cx = ggml.concat %conv, %xt {dim = 0 : i32} : (!ggml.tensor<[3, 5120], f32>,
              !ggml.tensor<[n_tokens, 5120], f32>) -> !ggml.tensor<[n_tokens+3, 5120], f32>
  }];
  let arguments = (ins GGML_Tensor:$a, GGML_Tensor:$b, I32Attr:$dim);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a `,` $b attr-dict `:` functional-type(operands, results)";
}

def GGML_RepeatOp : GGML_Op<"repeat"> {
  let summary = "REPEAT: a tiled to the result's shape";
  let description = [{
    ggml_repeat_4d: result[i0, i1, i2, i3] = a[i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3];
    each result dimension a multiple of a's (ggml_can_repeat), same element type. deepseek2's MHA
    form repeats the one roped k_pe head over every head before the CONCAT into K.
    Example:
      %r = ggml.repeat %kpe : (!ggml.tensor<[64, 1, n_tokens], f32>)
             -> !ggml.tensor<[64, 16, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$a);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$a attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// State-space models (mamba)
//===----------------------------------------------------------------------===//

def GGML_SsmConvOp : GGML_Op<"ssm_conv"> {
  let summary = "SSM_CONV: mamba's depthwise causal 1-D convolution";
  let description = [{
    result[i, t, s] = sum_k sx[t + k, i, s] * c[k, i] (ggml_ssm_conv).
    Shapes: sx [d_conv - 1 + n_t, d_inner, n_s] (conv state then the new tokens), c (the weight
    blk.N.ssm_conv1d) [d_conv, d_inner] -> result f32 [d_inner, n_t, n_s].
    Example:
      %y = ggml.ssm_conv %cx, %w : (!ggml.tensor<[n_tokens+3, 5120], f32>,
             !ggml.tensor<[4, 5120], f32>) -> !ggml.tensor<[5120, n_tokens], f32>
  }];
  let arguments = (ins GGML_Tensor:$sx, GGML_Tensor:$c);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = "$sx `,` $c attr-dict `:` functional-type(operands, results)";
}

def GGML_SsmScanOp : GGML_Op<"ssm_scan"> {
  let summary = "SSM_SCAN: mamba's selective scan; result = y then the final states";
  let description = [{
    Runs the selective state-space recurrence h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t,
    y_t = C_t h_t (dt through softplus) for every sequence (ggml_ssm_scan). The result is one
    f32 vector: y (nelements(x) values) followed by the final states; llama.cpp views both out
    of it. Two forms, as ggml had them:
      * with `ids` (ggml since mid 2025, Mamba-2 capable): s [d_state, head_dim, n_head, *];
        x [head_dim, n_head, n_seq_tokens, n_seqs]; dt [n_head, n_seq_tokens, n_seqs];
        A [d_state or 1, n_head]; B, C [d_state, n_group, n_seq_tokens, n_seqs]; ids i32 [n_seqs]
        -> f32 [nelements(x) + d_state * head_dim * n_head * n_seqs], the states gathered at ids;
      * without `ids` (ggml Feb 2025, Mamba-1): s [d_state, d_inner, n_seqs]; x and dt
        [d_inner, n_seq_tokens, n_seqs]; A [d_state, d_inner]; B, C [d_state, n_seq_tokens,
        n_seqs] -> f32 [nelements(x) + nelements(s)].
    Example (the Feb 2025 form, d_inner 5120, d_state 16, one sequence):
      %y = ggml.ssm_scan %s, %x, %dt, %A, %B, %C
             : (!ggml.tensor<[16, 5120], f32>, !ggml.tensor<[5120, n_tokens], f32>,
                !ggml.tensor<[5120, n_tokens], f32>, !ggml.tensor<[16, 5120], f32>,
                !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>)
             -> !ggml.tensor<[n_tokens*5120+81920], f32>
  }];
  let arguments = (ins GGML_Tensor:$s, GGML_Tensor:$x, GGML_Tensor:$dt,
                       GGML_Tensor:$A, GGML_Tensor:$B, GGML_Tensor:$C,
                       Optional<GGML_Tensor>:$ids);
  let results = (outs GGML_Tensor:$result);
  let assemblyFormat = [{
    $s `,` $x `,` $dt `,` $A `,` $B `,` $C (`,` `ids` $ids^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

#endif // STOWAGE_DIALECT_GGML_IR_GGMLOPS_TD
