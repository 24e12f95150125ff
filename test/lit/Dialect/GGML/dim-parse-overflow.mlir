// the dimension parser adds terms with unchecked int64 arithmetic (signed
// overflow, UB), so `9223372036854775807+9223372036854775807+2` is accepted as the dimension 0 and
// three n_tokens terms whose coefficients overflow fold to a static 0: the type prints back as
// !ggml.tensor<[0, 0], f32>. Expected: an error naming the overflowing dimension.
// REQUIRES: mlir
// RUN: not stowage-opt %s 2>&1 | FileCheck %s
// CHECK: error:

func.func @f() {
  %a = ggml.input "x" : !ggml.tensor<[9223372036854775807+9223372036854775807+2, n_tokens*9223372036854775807+n_tokens*9223372036854775807+n_tokens*2], f32>
  return
}
