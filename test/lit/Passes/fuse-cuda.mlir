// The fusion passes on CUDA splits: the CUDA backend's op table (runtime/src/backends/cuda/
// cuda_op_table.cpp, asked through the probed CUDA device) has MUL_MAT_GLU, ROPE_SET_ROWS and
// ROPE_CPY, so a CUDA split fuses as a CPU split does (kernels: CudaBackend::MulMatGlu,
// cuda::RopeSetRows, cuda::RopeCpy; checked on the host by cuda_math_test). A quantized K cache
// keeps ROPE and the store on CUDA (the kernel stores plain float rows only).
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-fuse-mul-mat-glu=remarks=1 --stowage-fuse-rope-kv-store=remarks=1 -verify-diagnostics -o /dev/null

// The FFN-in on CUDA0: one ggml.mul_mat_glu with the GLU's name and backend.
// CHECK-LABEL: func.func @glu
// CHECK: place.split 0 on #place.backend<"CUDA0", 0>
// CHECK-NEXT: %[[X:.*]] = place.copy
// CHECK-NEXT: %[[F:.*]] = ggml.mul_mat_glu swiglu %{{.*}}, %[[X]], %{{.*}} {name = "ffn_swiglu-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, 128], q4_0>) -> !ggml.tensor<[128, n_tokens], f32>
// CHECK-NEXT: ggml.mul_mat %{{.*}}, %[[F]]
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @glu() -> !ggml.tensor<[64, n_tokens], f32> attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64} {
    %e = ggml.input "inp_embd" {place.backend = #place.backend<"CPU", 1>} : !ggml.tensor<[64, n_tokens], f32>
    %g0 = ggml.weight "blk.0.ffn_gate.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 128], q4_0>
    %u0 = ggml.weight "blk.0.ffn_up.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 128], q4_0>
    %d0 = ggml.weight "blk.0.ffn_down.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[128, 64], q4_0>
    %a = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
      %x = place.copy %e : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
      %g = ggml.mul_mat %g0, %x {name = "ffn_gate-0"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %u = ggml.mul_mat %u0, %x {name = "ffn_up-0"} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %f = ggml.glu swiglu %g, %u {name = "ffn_swiglu-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %y = ggml.mul_mat %d0, %f {name = "ffn_out-0"} : (!ggml.tensor<[128, 64], q4_0>, !ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %y : !ggml.tensor<[64, n_tokens], f32>
    }
    return %a : !ggml.tensor<[64, n_tokens], f32>
  }
}

// -----

// llama.cpp 2026's K store into an F16 cache on CUDA0 -> ggml.rope_set_rows; into a Q8_0 cache
// kept (the CUDA kernel stores F32, F16 and BF16 rows).
// CHECK-LABEL: func.func @k_store
// CHECK: place.split 0 on #place.backend<"CUDA0", 0>
// CHECK-NEXT: ggml.rope_set_rows neox %arg0, %arg1, %arg3, %arg2 {n_dims = 64 : i32, name = "cache_k_l0 (view)", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>, !ggml.tensor<[128, 16], f16>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
// CHECK-NEXT: place.yield
// CHECK: place.split 1 on #place.backend<"CUDA0", 0>
// CHECK-NEXT: ggml.rope neox
// CHECK-NEXT: ggml.reshape
// CHECK-NEXT: ggml.set_rows
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @k_store(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c16: !ggml.tensor<[128, 16], f16>, %c8: !ggml.tensor<[128, 16], q8_0>) -> (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 16], q8_0>) {
    %s = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[128, 16], f16> {
      %k = ggml.rope neox %x, %pos {n_dims = 64 : i32, name = "Kcur-0"} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      %t = ggml.set_rows %c16, %r, %idx {name = "cache_k_l0 (view)", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
      place.yield %t : !ggml.tensor<[128, 16], f16>
    }
    %q = place.split 1 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[128, 16], q8_0> {
      %k = ggml.rope neox %x, %pos {n_dims = 64 : i32, name = "Kcur-1"} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      // expected-remark @+1 {{ROPE + SET_ROWS not fused: backend 'CUDA0' does not run ROPE_SET_ROWS with these tensors}}
      %t = ggml.set_rows %c8, %r, %idx : (!ggml.tensor<[128, 16], q8_0>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], q8_0>
      place.yield %t : !ggml.tensor<[128, 16], q8_0>
    }
    return %s, %q : !ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 16], q8_0>
  }
}

// -----

// Feb 2025's K store (a CPY into the cache's view) on CUDA0 -> ggml.rope_cpy.
// CHECK-LABEL: func.func @feb25
// CHECK: %[[V:.*]] = ggml.view %{{.*}} {name = "k_cache_view-0"}
// CHECK-NEXT: ggml.rope_cpy normal %arg0, %arg1, %[[V]] {n_ctx_orig = 2048 : i32, n_dims = 64 : i32, name = "k_cache_view-0 (copy of Kcur-0)", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16>
// CHECK-NOT: ggml.cpy
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @feb25(%x: !ggml.tensor<[64, 2, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>) attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 8 : i64, ggml.n_tokens = 8 : i64} {
    %cache = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[32768], f16>
    place.split 0 on #place.backend<"CUDA0", 0> {
      %k = ggml.rope normal %x, %pos {n_ctx_orig = 2048 : i32, n_dims = 64 : i32, name = "Kcur-0"} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, 2, n_tokens], f32>
      %v = ggml.view %cache nb [n_tokens*256, n_tokens*256, n_tokens*256] offset kv_head*256 {name = "k_cache_view-0"} : (!ggml.tensor<[32768], f16>) -> !ggml.tensor<[n_tokens*128], f16>
      %c = ggml.cpy %k, %v {name = "k_cache_view-0 (copy of Kcur-0)", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16>
      place.yield
    }
    return
  }
}

// -----

// Q, K and V of weights in CUDA0 (the GPU's weight buffer, where the planner puts the parts back to
// back) on CUDA0 -> one ggml.mul_mat over their ggml.weight_group, Q, K and V its strided views.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[G:.*]] = ggml.weight_group %{{.*}}, %{{.*}}, %{{.*}} {name = "blk.0.attn_q+k+v.weight", place.buft = #place.buft<"CUDA0", "CUDA0", default>} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 32], q4_0>) -> !ggml.tensor<[64, 128], q4_0>
// CHECK: %[[F:.*]] = ggml.mul_mat %[[G]], %{{.*}} {name = "Qcur-0+Kcur-0+Vcur-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
// CHECK-NEXT: ggml.view %[[F]] nb [512, n_tokens*512, n_tokens*512] {name = "Qcur-0"
// CHECK-NEXT: ggml.view %[[F]] nb [512, n_tokens*512, n_tokens*512] offset 256 {name = "Kcur-0"
// CHECK-NEXT: ggml.view %[[F]] nb [512, n_tokens*512, n_tokens*512] offset 384 {name = "Vcur-0"
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @qkv() -> !ggml.tensor<[32, n_tokens], f32> attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64} {
    %e = ggml.input "inp_embd" {place.backend = #place.backend<"CPU", 1>} : !ggml.tensor<[64, n_tokens], f32>
    %wq = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 64], q4_0>
    %wk = ggml.weight "blk.0.attn_k.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 32], q4_0>
    %wv = ggml.weight "blk.0.attn_v.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>} : !ggml.tensor<[64, 32], q4_0>
    %r = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[32, n_tokens], f32> {
      %x = place.copy %e : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
      %q = ggml.mul_mat %wq, %x {name = "Qcur-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      %k = ggml.mul_mat %wk, %x {name = "Kcur-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %v = ggml.mul_mat %wv, %x {name = "Vcur-0", place.backend = #place.backend<"CUDA0", 0>} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %qs = ggml.view %q nb [256, n_tokens*256, n_tokens*256] : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %s = ggml.add %qs, %k : (!ggml.tensor<[32, n_tokens], f32>, !ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %t = ggml.add %s, %v : (!ggml.tensor<[32, n_tokens], f32>, !ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      place.yield %t : !ggml.tensor<[32, n_tokens], f32>
    }
    return %r : !ggml.tensor<[32, n_tokens], f32>
  }
}
