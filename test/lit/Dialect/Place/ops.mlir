// Round trip of the place attributes and ops through the textual and bytecode forms.
// REQUIRES: mlir
// RUN: stowage-opt %s | stowage-opt | FileCheck %s
// RUN: stowage-opt %s --emit-bytecode | stowage-opt | FileCheck %s
// RUN: stowage-opt %s --mlir-print-op-generic | stowage-opt | FileCheck %s

// CHECK-LABEL: func.func @placed
// CHECK-SAME: place.device = #place.device<"CUDA0", gpu>
func.func @placed(%x: !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    attributes {place.device = #place.device<"CUDA0", gpu>} {
  // CHECK: ggml.weight "token_embd.weight" {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.head">}
  %emb = ggml.weight "token_embd.weight" {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.head">} : !ggml.tensor<[64, 512], f32>
  // CHECK: ggml.weight "blk.0.attn_norm.weight" {place.buft = #place.buft<"CUDA_Host", "CUDA0", host>, place.cause = #place.cause<"load.fallback">}
  %nw = ggml.weight "blk.0.attn_norm.weight" {place.buft = #place.buft<"CUDA_Host", "CUDA0", host>, place.cause = #place.cause<"load.fallback">} : !ggml.tensor<[64], f32>
  // CHECK: ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CUDA0_Split", "CUDA0", split>, place.cause = #place.cause<"load.override">}
  %wq = ggml.weight "blk.0.attn_q.weight" {place.buft = #place.buft<"CUDA0_Split", "CUDA0", split>, place.cause = #place.cause<"load.override">} : !ggml.tensor<[64, 64], q8_0>
  // CHECK: ggml.weight "blk.0.ffn_up.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>, place.cause = #place.cause<"load.override.cpu">}
  %wu = ggml.weight "blk.0.ffn_up.weight" {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>, place.cause = #place.cause<"load.override.cpu">} : !ggml.tensor<[64, 64], q4_0>
  // CHECK: ggml.weight "output.weight" {place.buft = #place.buft<"CPU_Mapped", "CPU", mapped>, place.cause = #place.cause<"load.mmap">}
  %out = ggml.weight "output.weight" {place.buft = #place.buft<"CPU_Mapped", "CPU", mapped>, place.cause = #place.cause<"load.mmap">} : !ggml.tensor<[64, 512], f32>
  // CHECK: ggml.weight "rope_freqs.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>, place.cause = #place.cause<"load.dup">}
  %rf = ggml.weight "rope_freqs.weight" {place.buft = #place.buft<"CUDA0", "CUDA0", default>, place.cause = #place.cause<"load.dup">} : !ggml.tensor<[4], f32>
  // CHECK: ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CUDA0", "CUDA0", default>, place.cause = #place.cause<"kv.layer">}
  %kc = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CUDA0", "CUDA0", default>, place.cause = #place.cause<"kv.layer">} : !ggml.tensor<[n_ctx*64], f16>
  // CHECK: ggml.kv_cache v "cache_v_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.nkvo">}
  %vc = ggml.kv_cache v "cache_v_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.nkvo">} : !ggml.tensor<[n_ctx*64], f16>
  // CHECK: ggml.input "inp_tokens" {place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.inp">}
  %tok = ggml.input "inp_tokens" {place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.inp">} : !ggml.tensor<[n_tokens], i32>

  // Split 0 on the CPU: the embedding lookup (its weight is on the CPU: 1.wgt0).
  // CHECK: %[[S0:.*]] = place.split 0 on #place.backend<"CPU", 1> -> !ggml.tensor<[64, n_tokens], f32> {
  // CHECK: ggml.get_rows {{.*}} {name = "inp_embd", place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.wgt0">}
  // CHECK: place.yield %{{.*}} : !ggml.tensor<[64, n_tokens], f32>
  %s0 = place.split 0 on #place.backend<"CPU", 1> -> !ggml.tensor<[64, n_tokens], f32> {
    %e = ggml.get_rows %emb, %tok {name = "inp_embd", place.backend = #place.backend<"CPU", 1>, place.cause = #place.cause<"1.wgt0">} : (!ggml.tensor<[64, 512], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, n_tokens], f32>
    place.yield %e : !ggml.tensor<[64, n_tokens], f32>
  }
  // Split 1 on CUDA0: its input inp_embd is copied from the CPU.
  // CHECK: place.split 1 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
  // CHECK: place.copy %[[S0]] : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0> {name = "CUDA0#inp_embd#0"}
  // CHECK: place.copy %[[S0]] : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0> {copy = 1 : i32, name = "CUDA0#inp_embd#1"}
  // CHECK: ggml.rms_norm {{.*}}place.cause = #place.cause<"2.sup">
  // CHECK: ggml.mul {{.*}}place.cause = #place.cause<"1.wgt1">
  // CHECK: ggml.mul_mat {{.*}}place.cause = #place.cause<"1.off">
  // CHECK: ggml.reshape {{.*}}place.cause = #place.cause<"4.vsrc">
  // CHECK: ggml.rope {{.*}}place.cause = #place.cause<"3.best">
  // CHECK: ggml.cont {{.*}}place.cause = #place.cause<"4.cur">
  // CHECK: ggml.add {{.*}}place.cause = #place.cause<"3.upg">
  // CHECK: ggml.scale {{.*}}place.cause = #place.cause<"1.dst">
  // CHECK: ggml.view {{.*}}place.cause = #place.cause<"1.vsrc">
  // CHECK: ggml.norm {{.*}}place.cause = #place.cause<"usr">
  // CHECK: ggml.silu {{.*}}place.cause = #place.cause<"pin.norm">
  // CHECK: ggml.silu {{.*}}place.cause = #place.cause<"pin.nkvo">
  %s1 = place.split 1 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
    %c = place.copy %s0 : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0> {name = "CUDA0#inp_embd#0"}
    %c1 = place.copy %s0 : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0> {copy = 1 : i32, name = "CUDA0#inp_embd#1"}
    %n = ggml.rms_norm %c {eps = 1.0e-05 : f32, place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"2.sup">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %m = ggml.mul %n, %nw {name = "attn_norm-0", place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.wgt1">} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %q = ggml.mul_mat %wq, %m {place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.off">} : (!ggml.tensor<[64, 64], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %q3 = ggml.reshape %q {place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"4.vsrc">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
    %pos = ggml.input "inp_pos" : !ggml.tensor<[n_tokens], i32>
    %r = ggml.rope neox %q3, %pos, freq_factors %rf {n_dims = 8 : i32, place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"3.best">} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[4], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
    %rc = ggml.cont %r {place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"4.cur">} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %a = ggml.add %rc, %c1 {place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"3.upg">} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %sc = ggml.scale %a {scale = 0.5 : f32, place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.dst">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %v = ggml.view %sc nb [256, 256, 256] {place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"1.vsrc">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %o = ggml.norm %v {eps = 1.0e-05 : f32, place.backend = #place.backend<"CUDA0", 0>, place.cause = #place.cause<"usr">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %p1 = ggml.silu %o {place.cause = #place.cause<"pin.norm">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    %p2 = ggml.silu %p1 {place.cause = #place.cause<"pin.nkvo">} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
    place.yield %o : !ggml.tensor<[64, n_tokens], f32>
  }
  // A split without results (its outputs are KV stores).
  // CHECK: place.split 2 on #place.backend<"CPU", 1> {
  // CHECK-NEXT: ggml.view
  place.split 2 on #place.backend<"CPU", 1> {
    %kv = ggml.view %vc nb [128, 128, 128] : (!ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[n_tokens*64], f16>
    place.yield
  }
  // CHECK: ggml.weight "x" {place.cause = #place.cause<"1.wgt9">}
  %w9 = ggml.weight "x" {place.cause = #place.cause<"1.wgt9">} : !ggml.tensor<[1], f32>
  // CHECK: ggml.weight "y" {place.device = #place.device<"BLAS", accel>}
  %wb = ggml.weight "y" {place.device = #place.device<"BLAS", accel>} : !ggml.tensor<[1], f32>
  // CHECK: ggml.weight "z" {place.device = #place.device<"CPU", cpu>}
  %wc = ggml.weight "z" {place.device = #place.device<"CPU", cpu>} : !ggml.tensor<[1], f32>
  // CHECK: ggml.weight "w" {place.device = #place.device<"CUDA1", igpu>}
  %wi = ggml.weight "w" {place.device = #place.device<"CUDA1", igpu>} : !ggml.tensor<[1], f32>
  return %s1 : !ggml.tensor<[64, n_tokens], f32>
}


// The machine of a plan, on the module.
// CHECK-LABEL: module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]}
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {}

// A split input may be a view (computing nothing) of a value of an earlier split, made inside
// the split's node range: ggml copies the bytes an earlier split wrote.
// CHECK-LABEL: func.func @view_input
// CHECK: %[[T:.*]] = ggml.transpose %{{.*}} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[n_tokens, 8], f32>
// CHECK-NEXT: place.copy %[[T]] : !ggml.tensor<[n_tokens, 8], f32> to #place.backend<"CPU", 1>
func.func @view_input(%x: !ggml.tensor<[8, n_tokens], f32>) {
  %v = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[8, n_tokens], f32> {
    %s = ggml.silu %x : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], f32>
    place.yield %s : !ggml.tensor<[8, n_tokens], f32>
  }
  place.split 1 on #place.backend<"CPU", 1> {
    %t = ggml.transpose %v : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[n_tokens, 8], f32>
    %c = place.copy %t : !ggml.tensor<[n_tokens, 8], f32> to #place.backend<"CPU", 1>
    place.yield
  }
  return
}
