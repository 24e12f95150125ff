// --place-print-splits: ggml's GGML_SCHED_DEBUG=1 split lines from place.split / place.copy ops.
// Sizes use the function's ggml.n_tokens / ggml.n_kv unless the options override them; an input
// is named after its source (a leaf's name, or the node a split yields); fmt_size prints integer
// KiB below 1 MiB (so tiny inputs are 0K) and integer MiB from 1 MiB up.
// REQUIRES: mlir
// RUN: stowage-opt %s --place-print-splits -o /dev/null | FileCheck %s
// RUN: stowage-opt %s --place-print-splits="n-tokens=1 n-kv=4096" -o /dev/null | FileCheck %s --check-prefix=OPT
// The pass leaves the IR unchanged.
// RUN: stowage-opt %s --place-print-splits -o %t.mlir > /dev/null
// RUN: stowage-opt %t.mlir | FileCheck %s --check-prefix=IR

// CHECK: # @pp: 2 splits (n_tokens = 512, n_kv = 4096)
// CHECK-EMPTY:
// CHECK-NEXT: ## SPLIT #0: CPU # 0 inputs
// CHECK-EMPTY:
// CHECK-NEXT: ## SPLIT #1: CUDA0 # 3 inputs: [inp_embd (   8M)] [inp_pos (   2K)] [KQ_mask (   8M)] {{$}}
// CHECK-NOT: SPLIT
// OPT: # @pp: 2 splits (n_tokens = 1, n_kv = 4096)
// OPT: ## SPLIT #1: CUDA0 # 3 inputs: [inp_embd (  16K)] [inp_pos (   0K)] [KQ_mask (  16K)] {{$}}
// IR: func.func @pp
// IR: place.split 1 on #place.backend<"CUDA0", 0>

module attributes {ggml.n_ctx = 4096 : i64} {
  func.func @pp() attributes {ggml.n_kv = 4096 : i64, ggml.n_outputs = 512 : i64, ggml.n_tokens = 512 : i64} {
    %emb = ggml.weight "token_embd.weight" : !ggml.tensor<[4096, 32000], f16>
    %tok = ggml.input "inp_tokens" : !ggml.tensor<[n_tokens], i32>
    %pos = ggml.input "inp_pos" : !ggml.tensor<[n_tokens], i32>
    %mask = ggml.input "KQ_mask" : !ggml.tensor<[n_kv, n_tokens], f32>
    %e = place.split 0 on #place.backend<"CPU", 1> -> !ggml.tensor<[4096, n_tokens], f32> {
      %r = ggml.get_rows %emb, %tok {name = "inp_embd"} : (!ggml.tensor<[4096, 32000], f16>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[4096, n_tokens], f32>
      place.yield %r : !ggml.tensor<[4096, n_tokens], f32>
    }
    place.split 1 on #place.backend<"CUDA0", 0> {
      %c0 = place.copy %e : !ggml.tensor<[4096, n_tokens], f32> to #place.backend<"CUDA0", 0>
      %c1 = place.copy %pos : !ggml.tensor<[n_tokens], i32> to #place.backend<"CUDA0", 0>
      %c2 = place.copy %mask : !ggml.tensor<[n_kv, n_tokens], f32> to #place.backend<"CUDA0", 0>
      place.yield
    }
    return
  }
}
