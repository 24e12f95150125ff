// stowage-fuse-mul-mat-qkv: the Q, K and V MUL_MATs of one activation become one ggml.mul_mat over
// a ggml.weight_group of attn_q, attn_k and attn_v (their rows laid out together at load) inside
// a CPU split; Q, K and V are strided views of its result, and a RESHAPE of a product becomes a
// view of the same shape. Every attention it leaves alone says why with remarks=1.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-fuse-mul-mat-qkv | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-fuse-mul-mat-qkv=remarks=1 -verify-diagnostics -o /dev/null
// The pipeline plan-model -O2 and stowage-run compile plans with (buildStowagePipeline) runs it:
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s --check-prefix=PIPE

// llama.cpp 2026's llama attention on the CPU with repacked q4_0 weights (rows in whole groups of
// 8): Q and K reshaped to heads, V reshaped to itself and then to heads (a reshape of a reshape).
// CHECK-LABEL: func.func @llama
// CHECK: %[[G:.*]] = ggml.weight_group %{{.*}}, %{{.*}}, %{{.*}} {name = "blk.0.attn_q+k+v.weight", place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 32], q4_0>) -> !ggml.tensor<[64, 128], q4_0>
// CHECK: %[[F:.*]] = ggml.mul_mat %[[G]], %{{.*}} {name = "Qcur-0+Kcur-0+Vcur-0", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
// CHECK-NEXT: %[[Q:.*]] = ggml.view %[[F]] nb [32, 512, n_tokens*512] {name = "Qcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
// CHECK-NEXT: ggml.rope normal %[[Q]]
// CHECK-NEXT: %[[K:.*]] = ggml.view %[[F]] nb [32, 512, n_tokens*512] offset 256 {name = "Kcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
// CHECK-NEXT: ggml.rope normal %[[K]]
// CHECK-NEXT: %[[V:.*]] = ggml.view %[[F]] nb [512, n_tokens*512, n_tokens*512] offset 384 {name = "Vcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
// CHECK-NEXT: ggml.view %[[F]] nb [32, 512, n_tokens*512] offset 384 {name = "Vcur-0 (reshaped) (reshaped)"} : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
// CHECK-NOT: ggml.reshape
// CHECK: place.yield
// PIPE-LABEL: func.func @llama
// PIPE: ggml.weight_group
// PIPE: ggml.mul_mat %{{.*}} {name = "Qcur-0+Kcur-0+Vcur-0"
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CPU", cpu>]} {
  func.func @llama() -> (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[8, 4, n_tokens], f32>) attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64} {
    %e = ggml.input "inp_embd" {place.backend = #place.backend<"CPU", 0>} : !ggml.tensor<[64, n_tokens], f32>
    %pos = ggml.input "inp_pos" {place.backend = #place.backend<"CPU", 0>} : !ggml.tensor<[n_tokens], i32>
    %wq = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 64], q4_0>
    %wk = ggml.weight "blk.0.attn_k.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 32], q4_0>
    %wv = ggml.weight "blk.0.attn_v.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 32], q4_0>
    %r:2 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[8, 4, n_tokens], f32> {
      %q = ggml.mul_mat %wq, %e {name = "Qcur-0", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      %q3 = ggml.reshape %q {name = "Qcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
      %qr = ggml.rope normal %q3, %pos {n_ctx_orig = 256 : i32, n_dims = 8 : i32, name = "Qcur-0"} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
      %k = ggml.mul_mat %wk, %e {name = "Kcur-0", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %k3 = ggml.reshape %k {name = "Kcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
      %kr = ggml.rope normal %k3, %pos {n_ctx_orig = 256 : i32, n_dims = 8 : i32, name = "Kcur-0"} : (!ggml.tensor<[8, 4, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
      %v = ggml.mul_mat %wv, %e {name = "Vcur-0", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %v2 = ggml.reshape %v {name = "Vcur-0 (reshaped)", place.backend = #place.backend<"CPU", 0>} : (!ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[32, n_tokens], f32>
      %v3 = ggml.reshape %v2 {name = "Vcur-0 (reshaped) (reshaped)"} : (!ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
      %sum = ggml.add %kr, %v3 : (!ggml.tensor<[8, 4, n_tokens], f32>, !ggml.tensor<[8, 4, n_tokens], f32>) -> !ggml.tensor<[8, 4, n_tokens], f32>
      place.yield %qr, %sum : !ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[8, 4, n_tokens], f32>
    }
    return %r#0, %r#1 : !ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[8, 4, n_tokens], f32>
  }
}

// -----

// qwen2's biases stay separate ADDs, each reading its 2-D view; Feb 2025's V is transposed (a
// view of the view).
// CHECK-LABEL: func.func @bias
// CHECK: %[[F:.*]] = ggml.mul_mat %{{.*}}, %arg0 {name = "Qcur-0+Kcur-0+Vcur-0"} : (!ggml.tensor<[64, 128], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[128, 8], f32>
// CHECK-NEXT: %[[Q:.*]] = ggml.view %[[F]] nb [512, 4096, 4096] {name = "Qcur-0"} : (!ggml.tensor<[128, 8], f32>) -> !ggml.tensor<[64, 8], f32>
// CHECK-NEXT: ggml.add %[[Q]], %arg2
// CHECK-NEXT: %[[K:.*]] = ggml.view %[[F]] nb [512, 4096, 4096] offset 256 {name = "Kcur-0"}
// CHECK-NEXT: ggml.add %[[K]], %arg3
// CHECK-NEXT: %[[V:.*]] = ggml.view %[[F]] nb [512, 4096, 4096] offset 384 {name = "Vcur-0"}
// CHECK-NEXT: ggml.transpose %[[V]]
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @bias(%x: !ggml.tensor<[64, 8], f32>, %cpu: !ggml.tensor<[64, 8], f32>, %bq: !ggml.tensor<[64], f32>, %bk: !ggml.tensor<[32], f32>) -> (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[8, 32], f32>) {
    %wq = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 64], f16>
    %wk = ggml.weight "blk.0.attn_k.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], f16>
    %wv = ggml.weight "blk.0.attn_v.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], f16>
    %r:3 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[8, 32], f32> {
      %q = ggml.mul_mat %wq, %x {name = "Qcur-0"} : (!ggml.tensor<[64, 64], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %qb = ggml.add %q, %bq : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, 8], f32>
      %k = ggml.mul_mat %wk, %x {name = "Kcur-0"} : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %kb = ggml.add %k, %bk : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32], f32>) -> !ggml.tensor<[32, 8], f32>
      %v = ggml.mul_mat %wv, %x {name = "Vcur-0"} : (!ggml.tensor<[64, 32], f16>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %vt = ggml.transpose %v : (!ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[8, 32], f32>
      place.yield %qb, %kb, %vt : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[8, 32], f32>
    }
    return %r#0, %r#1, %r#2 : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[32, 8], f32>, !ggml.tensor<[8, 32], f32>
  }
}

// -----

// Left alone: a CUDA split of row-split weights (CUDA0_Split slices each weight on its own; a CUDA
// split of weights in CUDA0 fuses: fuse-cuda.mlir), weights of different types, a repacked weight
// whose rows are not whole groups of 8, and products read outside their split.
// CHECK-LABEL: func.func @refused
// CHECK-NOT: ggml.weight_group
// CHECK: return
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @refused(%x: !ggml.tensor<[64, 8], f32>) -> (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>) {
    %wq0 = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CUDA0_Split", "CUDA0", split>} : !ggml.tensor<[64, 64], q4_0>
    %wk0 = ggml.weight "blk.0.attn_k.weight" {place.buft = #place.buft<"CUDA0_Split", "CUDA0", split>} : !ggml.tensor<[64, 32], q4_0>
    %wv0 = ggml.weight "blk.0.attn_v.weight" {place.buft = #place.buft<"CUDA0_Split", "CUDA0", split>} : !ggml.tensor<[64, 32], q4_0>
    %wq1 = ggml.weight "blk.1.attn_q.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 64], q4_0>
    %wk1 = ggml.weight "blk.1.attn_k.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], q8_0>
    %wv1 = ggml.weight "blk.1.attn_v.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], q4_0>
    %wq2 = ggml.weight "blk.2.attn_q.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 64], q4_0>
    %wk2 = ggml.weight "blk.2.attn_k.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 36], q4_0>
    %wv2 = ggml.weight "blk.2.attn_v.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[64, 36], q4_0>
    %wq3 = ggml.weight "blk.3.attn_q.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 64], q4_0>
    %wk3 = ggml.weight "blk.3.attn_k.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], q4_0>
    %wv3 = ggml.weight "blk.3.attn_v.weight" {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[64, 32], q4_0>
    %a:2 = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32> {
      %c = place.copy %x : !ggml.tensor<[64, 8], f32> to #place.backend<"CUDA0", 0>
      // expected-remark @+1 {{Q, K and V not fused: the weights are not in buffer type 'CUDA0' (a GPU reads weight groups in its own device buffer)}}
      %q = ggml.mul_mat %wq0, %c {name = "Qcur-0"} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %k = ggml.mul_mat %wk0, %c {name = "Kcur-0"} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %v = ggml.mul_mat %wv0, %c {name = "Vcur-0"} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %kv = ggml.add %k, %v : (!ggml.tensor<[32, 8], f32>, !ggml.tensor<[32, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      place.yield %q, %q : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>
    }
    %b:2 = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32> {
      %y = place.copy %a#0 : !ggml.tensor<[64, 8], f32> to #place.backend<"CPU", 1>
      // expected-remark @+1 {{Q, K and V not fused: the Q, K and V weights differ in type, ne0 or buffer type}}
      %q = ggml.mul_mat %wq1, %y {name = "Qcur-1"} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %k = ggml.mul_mat %wk1, %y {name = "Kcur-1"} : (!ggml.tensor<[64, 32], q8_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %v = ggml.mul_mat %wv1, %y {name = "Vcur-1"} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      // expected-remark @+1 {{Q, K and V not fused: buffer type 'CPU_REPACK' interleaves rows in groups of 8 and 'blk.2.attn_k.weight' has 36 rows}}
      %q2 = ggml.mul_mat %wq2, %y {name = "Qcur-2"} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %k2 = ggml.mul_mat %wk2, %y {name = "Kcur-2"} : (!ggml.tensor<[64, 36], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[36, 8], f32>
      %v2 = ggml.mul_mat %wv2, %y {name = "Vcur-2"} : (!ggml.tensor<[64, 36], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[36, 8], f32>
      // expected-remark @+1 {{Q, K and V not fused: a product is read outside its split}}
      %q3 = ggml.mul_mat %wq3, %y {name = "Qcur-3"} : (!ggml.tensor<[64, 64], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[64, 8], f32>
      %k3 = ggml.mul_mat %wk3, %y {name = "Kcur-3"} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      %v3 = ggml.mul_mat %wv3, %y {name = "Vcur-3"} : (!ggml.tensor<[64, 32], q4_0>, !ggml.tensor<[64, 8], f32>) -> !ggml.tensor<[32, 8], f32>
      place.yield %q, %q3 : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>
    }
    return %a#0, %a#1, %b#0, %b#1 : !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, 8], f32>
  }
}
