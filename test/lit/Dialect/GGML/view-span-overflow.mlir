// ggml.view's bounds check (offset + bytes spanned <= ggml_nbytes(a)) computes
// the span in uint64 without overflow checks: nb1 = 2^62 with ne1 = 5 spans 4 * 2^62 + 4 bytes,
// which wraps to 4, so a view reaching 2^64 bytes past a 64-byte tensor verifies. The same view
// with nb1 = 64 is rejected ("view of 260 bytes at offset 0 exceeds a's 64 bytes").
// Expected: the overflowing view is rejected too.
// REQUIRES: mlir
// RUN: not stowage-opt %s 2>&1 | FileCheck %s
// CHECK: error: 'ggml.view' op

func.func @f() {
  %a = ggml.input "x" : !ggml.tensor<[16], f32>
  %v = ggml.view %a nb [4611686018427387904, 64, 64] : (!ggml.tensor<[16], f32>) -> !ggml.tensor<[1, 5], f32>
  return
}
