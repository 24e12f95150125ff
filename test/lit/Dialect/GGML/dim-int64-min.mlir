// a tensor dimension whose constant term is INT64_MIN (here reached through the
// parser's unchecked `9223372036854775807+1`) makes ElementCount::multiply divide INT64_MIN by -1:
// stowage-opt dies with SIGFPE in the verifier of the first op that counts elements (ggml.cpy).
// Expected: a diagnostic (the dimension overflows int64), never a crash.
// REQUIRES: mlir
// RUN: not stowage-opt %s 2>&1 | FileCheck %s
// CHECK: error:
// CHECK-NOT: Stack dump

func.func @f() {
  %a = ggml.input "x" : !ggml.tensor<[n_tokens*-1+9223372036854775807+1], f32>
  %b = ggml.input "y" : !ggml.tensor<[n_tokens], f32>
  %c = ggml.cpy %a, %b : (!ggml.tensor<[n_tokens*-1+9223372036854775807+1], f32>, !ggml.tensor<[n_tokens], f32>) -> !ggml.tensor<[n_tokens], f32>
  return
}
