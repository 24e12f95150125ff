//===- Passes.td - Stowage compiler passes ---------------------*- tablegen -*-===//

#ifndef STOWAGE_COMPILER_TRANSFORMS_PASSES_TD
#define STOWAGE_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlacePrintSplits : Pass<"place-print-splits", "::mlir::ModuleOp"> {
  let summary = "Print each function's splits as GGML_SCHED_DEBUG=1 does";
  let description = [{
    A visibility pass: for every function with place.split ops it prints, to stdout, a header
    `# @<function>: <n> splits (n_tokens = N, n_kv = K)` and then, per split, the line ggml's
    scheduler prints at GGML_SCHED_DEBUG level 1 (ggml_backend_sched_print_assignments,
    reference/llamacpp-placement.md §3.5):

      ## SPLIT #<i>: <backend> # <n> inputs: [<name> (<size>)] ...

    preceded by an empty line, where the inputs are the split's place.copy ops in order, named by
    their source tensor, and <size> is ggml's fmt_size of the source's bytes (integer MiB "%zuM"
    from 1 MiB up, else integer KiB "%zuK", right-aligned in 5 characters). Sizes are evaluated
    with n_tokens, n_kv and n_outputs from the options, else from the function's ggml.n_tokens,
    ggml.n_kv and ggml.n_outputs (the worst case llama.cpp reserves), n_ctx from the module's
    ggml.n_ctx, and kv_head = 0. The IR is not changed.
  }];
  let options = [
    Option<"nTokens", "n-tokens", "int64_t", "-1",
           "n_tokens for sizes (default: the function's ggml.n_tokens)">,
    Option<"nKv", "n-kv", "int64_t", "-1",
           "n_kv for sizes (default: the function's ggml.n_kv)">,
    Option<"nOutputs", "n-outputs", "int64_t", "-1",
           "n_outputs for sizes (default: the function's ggml.n_outputs)">,
  ];
}

//===----------------------------------------------------------------------===//
// Fusion passes (Fuse*.cpp, one per file): each rewrites ops of one place.split only, where the
// split's backend has the fused op (FuseCommon.h), bit for bit on the CPU backend.
//===----------------------------------------------------------------------===//

def StowageFuseRmsNormMul : Pass<"stowage-fuse-rms-norm-mul", "::mlir::ModuleOp"> {
  let summary = "RMS_NORM followed by MUL (the norm weight) -> one ggml.rms_norm_mul";
  let description = [{
    Rewrites `%n = ggml.rms_norm %x {eps}` whose only user is `%y = ggml.mul %n, %w` into
    `%y = ggml.rms_norm_mul %x, %w {eps}` (llama.cpp build_norm's pair; ggml-cuda fuses it at run
    time, ggml_cuda_can_fuse). The fused op keeps the MUL's name, place.backend and place.cause.
    Legal only when both ops are directly inside the same place.split and that split's backend
    runs RMS_NORM_MUL with these tensors (its op table, FuseCommon.h); on the CPU backend the
    result is the pair's bit for bit. A pair the rules leave alone is kept as it is; with
    `remarks` each gets a remark saying why.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at each RMS_NORM + MUL pair left unfused, with the reason">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "RMS_NORM + MUL pairs fused">,
  ];
}

def StowageFuseMulMatGlu : Pass<"stowage-fuse-mul-mat-glu", "::mlir::ModuleOp"> {
  let summary = "gate and up MUL_MATs of one activation with their GLU -> one ggml.mul_mat_glu";
  let description = [{
    Rewrites `%g = ggml.mul_mat %gate, %x`, `%u = ggml.mul_mat %up, %x` and the GLU that joins
    them (`ggml.glu swiglu|geglu %g, %u`, llama.cpp 2026's build_ffn, or `ggml.silu|gelu %g` then
    `ggml.mul %act, %u`, Feb 2025's) into `ggml.mul_mat_glu <kind> %gate, %x, %up`, which keeps
    the GLU's (or MUL's) name, place.backend and place.cause. Legal only when every op is
    directly inside the same place.split, the intermediate results have no other users, both
    weights have one type, shape and buffer type, and the split's backend runs MUL_MAT_GLU with
    these tensors (its op table, FuseCommon.h: the CPU backend has it, CUDA does not); on the CPU
    backend the result is the sequence's bit for bit. With `remarks` each FFN-in left alone gets
    a remark saying why.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at each gate / up / GLU group left unfused, with the reason">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "gate / up / GLU groups fused">,
  ];
}

def StowageFuseMulMatQkv : Pass<"stowage-fuse-mul-mat-qkv", "::mlir::ModuleOp"> {
  let summary = "Q, K and V MUL_MATs of one activation -> one ggml.mul_mat over a weight group";
  let description = [{
    Rewrites the products `ggml.mul_mat %wq, %x`, `ggml.mul_mat %wk, %x` and `ggml.mul_mat %wv,
    %x` of one attention (weights "<p>attn_q.weight", "<p>attn_k.weight", "<p>attn_v.weight")
    into `ggml.mul_mat %g, %x` over `%g = ggml.weight_group %wq, %wk, %wv` (the three weights'
    rows laid out together at load: the plan's GlobalTensor.parts), whose result [q | k | v rows]
    per token the products are read through: each product becomes a ggml.view of it (nb1 the
    fused row), and a ggml.reshape of a product a ggml.view of the reshape's shape (ggml_reshape
    needs contiguous input). Biases stay separate ADDs reading the views. Legal only when the
    three products are directly inside one CPU place.split and read only there, the weights have
    one type, ne0 and host buffer type (a CPU_REPACK part must be whole groups of 8 rows, so that
    the parts' repacks back to back are the group's), and the backend runs MUL_MAT with the
    group (its op table, FuseCommon.h). Every output element is the same dot product, so on the
    CPU backend the result is the three products' bit for bit; the activations are converted
    once. With `remarks` each attention left alone gets a remark saying why.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at each Q / K / V group left unfused, with the reason">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "Q / K / V groups fused">,
  ];
}

def StowageFuseRopeKvStore : Pass<"stowage-fuse-rope-kv-store", "::mlir::ModuleOp"> {
  let summary = "ROPE of K and its store into the KV cache -> ggml.rope_set_rows / ggml.rope_cpy";
  let description = [{
    Rewrites the K store of a RoPE attention into one op with ROPE's parameters and the store's
    name, place.backend and place.cause, so that the rotated rows go straight into the cache and
    no Kcur tensor is allocated: llama.cpp 2026's `%k = ggml.rope %x, %pos[, freq_factors %ff]`,
    `%r = ggml.reshape %k` to [head_dim * n_head, n_tokens] and `ggml.set_rows %cache, %r, %idx`
    (llama_kv_cache::cpy_k) -> `ggml.rope_set_rows %x, %pos, %cache, %idx`; Feb 2025's
    `ggml.cpy %k, %view` -> `ggml.rope_cpy %x, %pos, %view`. Legal only when the ops are directly
    inside the same place.split, the rotated K (and its reshape) have no other users, and the
    split's backend runs the fused op with these tensors (its op table, FuseCommon.h: the CPU
    backend for F32, F16 and BF16 caches; CUDA has no kernel); on the CPU backend the cache is
    written bit for bit as the sequence writes it. With `remarks` each store left alone gets a
    remark saying why.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at each ROPE + KV store left unfused, with the reason">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "ROPE + KV stores fused">,
  ];
}

//===----------------------------------------------------------------------===//
// Copy removal: a copy whose consumers can read its source in place.
//===----------------------------------------------------------------------===//

def StowageElideCont : Pass<"stowage-elide-cont", "::mlir::ModuleOp"> {
  let summary = "CONT whose source is already in ggml order -> a ggml.view of that memory";
  let description = [{
    Rewrites `%c = ggml.cont %v` where %v is a chain of ggml.view / permute / transpose / reshape
    over a tensor %r whose bytes are in ggml order for every binding of the symbols (each
    dimension not statically 1 at its packed stride: ggml_is_contiguous) into
    `%c = ggml.view %r nb [packed strides of %c] offset <the chain's offset>`, which keeps the
    CONT's name, place.backend and place.cause; view ops left without users are erased. Token
    generation's attention output (`kqv_merged_cont`, n_tokens = 1) is the common case. No node
    computes the view, and every consumer reads the bytes the copy held, so the result is the
    same bit for bit. Legal only directly inside a place.split whose backend has a Stowage op
    table, for plain element types, and not over the KV cache. With `remarks` each CONT left
    alone gets a remark saying why.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "emit a remark at each CONT kept, with the reason">,
  ];
  let statistics = [
    Statistic<"numElided", "elided", "CONT copies replaced by views">,
  ];
}

#endif // STOWAGE_COMPILER_TRANSFORMS_PASSES_TD
