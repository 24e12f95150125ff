// place.copy's verifier follows view sources inside its split
// (`while (def = source.getDefiningOp())`) without a bound; a view that uses its own result (invalid
// SSA, which the dominance check would report) makes it loop forever: stowage-opt hangs instead
// of printing "operand #0 does not dominate this use" (it does print that without the copy).
// Expected: a diagnostic, no hang (the `timeout` turns the hang into a failure).
// REQUIRES: mlir
// RUN: timeout 10 not stowage-opt %s 2>&1 | FileCheck %s
// CHECK: error:

func.func @f() {
  %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[4], f32> {
    %v = ggml.view %v nb [16, 16, 16] : (!ggml.tensor<[4], f32>) -> !ggml.tensor<[4], f32>
    %c = place.copy %v : !ggml.tensor<[4], f32> to #place.backend<"CPU", 0>
    place.yield %c : !ggml.tensor<[4], f32>
  }
  return
}
