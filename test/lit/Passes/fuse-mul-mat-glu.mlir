// stowage-fuse-mul-mat-glu: the gate and up MUL_MATs of one activation and the GLU that joins them
// (2026's ggml.glu swiglu / geglu, Feb 2025's ggml.silu / ggml.gelu then ggml.mul) become one
// ggml.mul_mat_glu inside a split whose backend has the op (the CPU and CUDA: both tables offer
// it); every group it leaves alone says why with remarks=1.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-fuse-mul-mat-glu | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-fuse-mul-mat-glu=remarks=1 -verify-diagnostics -o /dev/null
// The pipeline plan-model and stowage-run compile plans with (buildStowagePipeline) runs it:
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s

// 2026's SWIGLU on CUDA and on the CPU: one op with the GLU's name, backend and cause; the down
// product reads it.
// CHECK-LABEL: func.func @swiglu
// CHECK: place.split 0 on #place.backend<"CUDA0", 0>
// CHECK-NEXT: place.copy
// CHECK-NEXT: ggml.mul_mat_glu swiglu %{{.*}} {name = "ffn_swiglu-0"}
// CHECK: place.split 1 on #place.backend<"CPU", 1>
// CHECK-NEXT: %[[X:.*]] = place.copy
// CHECK-NEXT: %[[F:.*]] = ggml.mul_mat_glu swiglu %{{.*}}, %[[X]], %{{.*}} {name = "ffn_swiglu-1", place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.wgt0">} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, 128], q4_0>) -> !ggml.tensor<[128, n_tokens], f32>
// CHECK-NEXT: ggml.mul_mat %{{.*}}, %[[F]]
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @swiglu() -> !ggml.tensor<[64, n_tokens], f32> attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64} {
    %e = ggml.input "inp_embd" {place.backend = #place.backend<"CPU", 1>} : !ggml.tensor<[64, n_tokens], f32>
    %g0 = ggml.weight "blk.0.ffn_gate.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 128], q4_0>
    %u0 = ggml.weight "blk.0.ffn_up.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 128], q4_0>
    %d0 = ggml.weight "blk.0.ffn_down.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[128, 64], q4_0>
    %g1 = ggml.weight "blk.1.ffn_gate.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 128], q4_0>
    %u1 = ggml.weight "blk.1.ffn_up.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 128], q4_0>
    %d1 = ggml.weight "blk.1.ffn_down.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[128, 64], q4_0>
    %a = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
      %x = place.copy %e : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
      %g = ggml.mul_mat %g0, %x {name = "ffn_gate-0"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %u = ggml.mul_mat %u0, %x {name = "ffn_up-0"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %f = ggml.glu swiglu %g, %u {name = "ffn_swiglu-0"} : (!ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %y = ggml.mul_mat %d0, %f {name = "ffn_out-0"} : (!ggml.tensor<[128, 64], q4_0>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %y : !ggml.tensor<[64, n_tokens], f32>
    }
    %r = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[64, n_tokens], f32> {
      %x = place.copy %a : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CPU", 1>
      %g = ggml.mul_mat %g1, %x {name = "ffn_gate-1"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %u = ggml.mul_mat %u1, %x {name = "ffn_up-1"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %f = ggml.glu swiglu %g, %u {name = "ffn_swiglu-1", place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.wgt0">} : (!ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %y = ggml.mul_mat %d1, %f {name = "ffn_out-1"} : (!ggml.tensor<[128, 64], q4_0>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %y : !ggml.tensor<[64, n_tokens], f32>
    }
    return %r : !ggml.tensor<[64, n_tokens], f32>
  }
}

// -----

// Feb 2025's forms: SILU then MUL, GELU then MUL, and 2026's GEGLU.
// CHECK-LABEL: func.func @feb25
// CHECK: ggml.mul_mat_glu silu_mul %arg2, %arg0, %arg3 {name = "ffn_out-0"}
// CHECK-NEXT: ggml.mul_mat_glu gelu_mul %arg2, %arg1, %arg3 {name = "ffn_out-1"}
// CHECK-NEXT: ggml.mul_mat_glu geglu %arg2, %arg0, %arg3 {name = "ffn_geglu-2"}
// CHECK-NEXT: place.yield
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @feb25(%x: !ggml.tensor<[64, 8], f32>, %x1: !ggml.tensor<[64, 8], f32>, %wg: !ggml.tensor<[64, 32], f16>, %wu: !ggml.tensor<[64, 32], f16>) -> (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) {
    %r:3 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32> {
      %u = ggml.mul_mat %wu, %x : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %s = ggml.silu %g : (!ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %m = ggml.mul %s, %u {name = "ffn_out-0"} : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %u1 = ggml.mul_mat %wu, %x1 : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g1 = ggml.mul_mat %wg, %x1 : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %s1 = ggml.gelu %g1 : (!ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %m1 = ggml.mul %s1, %u1 {name = "ffn_out-1"} : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %u2 = ggml.mul_mat %wu, %x : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g2 = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %m2 = ggml.glu geglu %g2, %u2 {name = "ffn_geglu-2"} : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      place.yield %m, %m1, %m2 : !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>
    }
    return %r#0, %r#1, %r#2 : !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>
  }
}

// -----

// Refused: products of different activations, weights of two types, an intermediate read
// elsewhere, the unplaced IR.
// CHECK-LABEL: func.func @refused
// CHECK-NOT: ggml.mul_mat_glu
// CHECK: return
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @refused(%x: !ggml.tensor<[64, 8], f32>, %x1: !ggml.tensor<[64, 8], f32>, %wg: !ggml.tensor<[64, 32], q8_0>, %wu: !ggml.tensor<[64, 32], q8_0>, %w4: !ggml.tensor<[64, 32], q4_0>) -> (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) {
    %r:4 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32> {
      %u = ggml.mul_mat %wu, %x1 : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      // expected-remark @+1 {{gate, up and GLU not fused: the gate and up MUL_MATs read different activations}}
      %m = ggml.glu swiglu %g, %u : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %u1 = ggml.mul_mat %w4, %x : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g1 = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      // expected-remark @+1 {{gate, up and GLU not fused: the gate and up weights differ in type, shape or buffer type}}
      %m1 = ggml.glu swiglu %g1, %u1 : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %u2 = ggml.mul_mat %wu, %x : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %g2 = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %s2 = ggml.silu %g2 : (!ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      // expected-remark @+1 {{gate, up and GLU not fused: an intermediate result has other users}}
      %m2 = ggml.mul %s2, %u2 : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      place.yield %m, %m1, %m2, %s2 : !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>
    }
    return %r#0, %r#1, %r#2, %r#3 : !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>
  }
}

// -----

// CHECK-LABEL: func.func @unplaced
// CHECK: ggml.glu swiglu
func.func @unplaced(%x: !ggml.tensor<[64, 8], f32>, %wg: !ggml.tensor<[64, 32], f32>, %wu: !ggml.tensor<[64, 32], f32>) -> !ggml.tensor<[32, 8], f32> {
  %u = ggml.mul_mat %wu, %x : (!ggml.tensor<[64, 32], f32>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
  %g = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 32], f32>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
  // expected-remark @+1 {{gate, up and GLU not fused: not inside a place.split (the IR is not placed)}}
  %m = ggml.glu swiglu %g, %u : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
  return %m : !ggml.tensor<[32, 8], f32>
}
