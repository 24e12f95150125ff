// stowage-fuse-rms-norm-mul: RMS_NORM whose only user is a MUL becomes one ggml.rms_norm_mul
// inside a split whose backend has the op; every pair it leaves alone says why with remarks=1.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-fuse-rms-norm-mul | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-fuse-rms-norm-mul=remarks=1 -verify-diagnostics -o /dev/null
// The pipeline plan-model and stowage-run compile plans with (buildStowagePipeline) runs it:
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s

// The CPU and a CUDA GPU: both backends run it; the fused op keeps the MUL's name, backend and
// cause, the norm's eps, and the later ops read it.
// CHECK-LABEL: func.func @pp
// CHECK: place.split 0 on #place.backend<"CUDA0", 0>
// CHECK-NEXT: %[[X:.*]] = place.copy
// CHECK-NEXT: %[[N:.*]] = ggml.rms_norm_mul %[[X]], %{{.*}} {eps = 9.99999974E-6 : f32, name = "attn_norm-0", place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.wgt1">}
// CHECK-NEXT: ggml.mul_mat %{{.*}}, %[[N]]
// CHECK: place.split 1 on #place.backend<"CPU", 1>
// CHECK-NEXT: place.copy
// CHECK-NEXT: %[[M:.*]] = ggml.rms_norm_mul %{{.*}}, %{{.*}} {eps = 9.99999997E-7 : f32, name = "result_norm", place.backend = #place.backend<"CPU", 1>
// CHECK-NEXT: place.yield %[[M]]
// CHECK-NOT: ggml.rms_norm {{.*}}
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @pp() -> !ggml.tensor<[64, n_tokens], f32> attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64} {
    %e = ggml.input "inp_embd" {place.backend = #place.backend<"CPU", 1>} : !ggml.tensor<[64, n_tokens], f32>
    %w = ggml.weight "blk.0.attn_norm.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64], f32>
    %wq = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 64], q8_0>
    %wo = ggml.weight "output_norm.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64], f16>
    %q = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
      %x = place.copy %e : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32, name = "norm-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      %m = ggml.mul %n, %w {name = "attn_norm-0", place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.wgt1">} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      %y = ggml.mul_mat %wq, %m {name = "Qcur-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 64], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %y : !ggml.tensor<[64, n_tokens], f32>
    }
    %r = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[64, n_tokens], f32> {
      %x = place.copy %q : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CPU", 1>
      %n = ggml.rms_norm %x {eps = 1.0e-06 : f32, name = "norm", place.backend = #place.backend<"CPU", 1>} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      %m = ggml.mul %n, %wo {name = "result_norm", place.backend = #place.backend<"CPU", 1>} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f16>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %m : !ggml.tensor<[64, n_tokens], f32>
    }
    return %r : !ggml.tensor<[64, n_tokens], f32>
  }
}

// -----

// The normed tensor has another user: the pair stays (the fused op would not produce it).
// CHECK-LABEL: func.func @two_users
// CHECK: ggml.rms_norm %
// CHECK-NEXT: ggml.mul %
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @two_users(%x: !ggml.tensor<[64, 8], f32>, %w: !ggml.tensor<[64], f32>) -> (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>) {
    %n:2 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32> {
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      // expected-remark @+1 {{RMS_NORM + MUL not fused: the RMS_NORM result has other users}}
      %m = ggml.mul %n, %w : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32>
      place.yield %n, %m : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>
    }
    return %n#0, %n#1 : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>
  }
}

// -----

// An IR without placement (stowage-opt --import-gguf without --place-devices): no backend to ask.
// CHECK-LABEL: func.func @unplaced
// CHECK: ggml.rms_norm %
// CHECK-NEXT: ggml.mul %
func.func @unplaced(%x: !ggml.tensor<[64, 8], f32>, %w: !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32> {
  %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
  // expected-remark @+1 {{RMS_NORM + MUL not fused: not inside a place.split (the IR is not placed)}}
  %m = ggml.mul %n, %w : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32>
  return %m : !ggml.tensor<[64, 8], f32>
}

// -----

// A backend without a Stowage op table (an RPC server runs llama.cpp's ggml, which has no such op).
// CHECK-LABEL: func.func @rpc
// CHECK: ggml.rms_norm %
// CHECK-NEXT: ggml.mul %
module attributes {place.devices = [#place.device<"RPC[host0:50052]", gpu>, #place.device<"CPU", cpu>]} {
  func.func @rpc(%x: !ggml.tensor<[64, 8], f32>, %w: !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32> {
    %r = place.split 0 on #place.backend<"RPC[host0:50052]", 0> -> !ggml.tensor<[64, 8], f32> {
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      // expected-remark @+1 {{RMS_NORM + MUL not fused: backend 'RPC[host0:50052]' has no Stowage op table}}
      %m = ggml.mul %n, %w : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32>
      place.yield %m : !ggml.tensor<[64, 8], f32>
    }
    return %r : !ggml.tensor<[64, 8], f32>
  }
}

// -----

// The backend's table refuses the tensors: the CPU multiplies by an F32 or F16 weight, not BF16.
// CHECK-LABEL: func.func @bf16_weight
// CHECK: ggml.rms_norm %
// CHECK-NEXT: ggml.mul %
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @bf16_weight(%x: !ggml.tensor<[64, 8], f32>, %w: !ggml.tensor<[64], bf16>) -> !ggml.tensor<[64, 8], f32> {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, 8], f32> {
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      // expected-remark @+1 {{RMS_NORM + MUL not fused: backend 'CPU' does not run RMS_NORM_MUL with these tensors}}
      %m = ggml.mul %n, %w : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64], bf16>) -> !ggml.tensor<[64, 8], f32>
      place.yield %m : !ggml.tensor<[64, 8], f32>
    }
    return %r : !ggml.tensor<[64, 8], f32>
  }
}

// -----

// The weight is the MUL's a and the norm its b: ggml_mul's broadcast runs the other way, no fusion.
// CHECK-LABEL: func.func @norm_is_b
// CHECK: ggml.rms_norm %
// CHECK-NEXT: ggml.mul %
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @norm_is_b(%x: !ggml.tensor<[64, 8], f32>, %w: !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32> {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, 8], f32> {
      %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %m = ggml.mul %w, %n : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      place.yield %m : !ggml.tensor<[64, 8], f32>
    }
    return %r : !ggml.tensor<[64, 8], f32>
  }
}
