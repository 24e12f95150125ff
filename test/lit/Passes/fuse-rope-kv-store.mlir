// stowage-fuse-rope-kv-store: the ROPE of K and the store that writes it into the K cache become
// one op inside a split whose backend has it: 2026's RESHAPE + SET_ROWS -> ggml.rope_set_rows,
// Feb 2025's CPY into a view of the cache -> ggml.rope_cpy; every store it leaves alone says why
// with remarks=1.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-fuse-rope-kv-store | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-fuse-rope-kv-store=remarks=1 -verify-diagnostics -o /dev/null
// The pipeline plan-model and stowage-run compile plans with (buildStowagePipeline) runs it:
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s

// llama.cpp 2026's K store (llama_kv_cache::cpy_k) on the CPU: the fused op keeps the store's
// name, backend and cause and ROPE's parameters; the ROPE and the RESHAPE go.
// CHECK-LABEL: func.func @k_store
// CHECK: %[[C:.*]] = ggml.reshape %{{.*}} {name = "cache_k_l0 (reshaped)"
// CHECK-NEXT: %[[F:.*]] = ggml.rope_set_rows neox %arg0, %arg1, %[[C]], %arg2 {freq_base = 1.000000e+06 : f32, n_ctx_orig = 4096 : i32, n_dims = 64 : i32, name = "cache_k_l0 (reshaped) (view)", place.backend = #place.backend<"CPU", 0>, place.cause = #place.cause<"1.dst">} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[128, 256], f16>, !ggml.tensor<[n_tokens], i64>) -> !ggml.tensor<[128, 256], f16>
// CHECK-NOT: ggml.rope
// CHECK-NOT: ggml.set_rows
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CPU", cpu>]} {
  func.func @k_store(%x: !ggml.tensor<[64, 2, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>, %idx: !ggml.tensor<[n_tokens], i64>) attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 8 : i64, ggml.n_tokens = 8 : i64} {
    %cache = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[32768], f16>
    place.split 0 on #place.backend<"CPU", 0> {
      %k = ggml.rope neox %x, %pos {n_ctx_orig = 4096 : i32, n_dims = 64 : i32, freq_base = 1.0e+06 : f32, name = "Kcur-0"} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, 2, n_tokens], f32>
      %r = ggml.reshape %k {name = "Kcur-0 (reshaped)"} : (!ggml.tensor<[64, 2, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
      %c = ggml.reshape %cache {name = "cache_k_l0 (reshaped)"} : (!ggml.tensor<[32768], f16>) -> !ggml.tensor<[128, 256], f16>
      %s = ggml.set_rows %c, %r, %idx {name = "cache_k_l0 (reshaped) (view)", place.backend = #place.backend<"CPU", 0>, place.cause = #place.cause<"1.dst">} : (!ggml.tensor<[128, 256], f16>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[n_tokens], i64>) -> !ggml.tensor<[128, 256], f16>
      place.yield
    }
    return
  }
}

// -----

// Feb 2025's K store (llm_build_kv_store: ggml_cpy(Kcur, k_cache_view)) -> ggml.rope_cpy into the
// same view, with the CPY's name.
// CHECK-LABEL: func.func @feb25
// CHECK: %[[V:.*]] = ggml.view %{{.*}} nb [n_tokens*256, n_tokens*256, n_tokens*256] offset kv_head*256 {name = "k_cache_view-0"}
// CHECK-NEXT: ggml.rope_cpy normal %arg0, %arg1, %[[V]] {n_ctx_orig = 2048 : i32, n_dims = 64 : i32, name = "k_cache_view-0 (copy of Kcur-0)"} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16>
// CHECK-NOT: ggml.cpy
module attributes {ggml.n_ctx = 256 : i64, place.devices = [#place.device<"CPU", cpu>]} {
  func.func @feb25(%x: !ggml.tensor<[64, 2, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>) attributes {ggml.n_kv = 256 : i64, ggml.n_outputs = 8 : i64, ggml.n_tokens = 8 : i64} {
    %cache = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[32768], f16>
    place.split 0 on #place.backend<"CPU", 0> {
      %k = ggml.rope normal %x, %pos {n_ctx_orig = 2048 : i32, n_dims = 64 : i32, name = "Kcur-0"} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, 2, n_tokens], f32>
      %v = ggml.view %cache nb [n_tokens*256, n_tokens*256, n_tokens*256] offset kv_head*256 {name = "k_cache_view-0"} : (!ggml.tensor<[32768], f16>) -> !ggml.tensor<[n_tokens*128], f16>
      %c = ggml.cpy %k, %v {name = "k_cache_view-0 (copy of Kcur-0)"} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16>
      place.yield
    }
    return
  }
}

// -----

// A CPY of something else (Feb 2025's transposed V store) is no K store: left alone, no remark.
// CHECK-LABEL: func.func @v_store
// CHECK: ggml.cpy
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @v_store(%vcur: !ggml.tensor<[128, 4], f32>, %v: !ggml.tensor<[4, 128], f16>) -> !ggml.tensor<[4, 128], f16> {
    %s = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[4, 128], f16> {
      %t = ggml.transpose %vcur : (!ggml.tensor<[128, 4], f32>) -> !ggml.tensor<[4, 128], f32>
      %c = ggml.cpy %t, %v : (!ggml.tensor<[4, 128], f32>, !ggml.tensor<[4, 128], f16>) -> !ggml.tensor<[4, 128], f16>
      place.yield %c : !ggml.tensor<[4, 128], f16>
    }
    return %s : !ggml.tensor<[4, 128], f16>
  }
}

// -----

// With freq factors (llama-3's rope_freqs): they come along.
// CHECK-LABEL: func.func @freq_factors
// CHECK: ggml.rope_set_rows normal %arg0, %arg1, %{{.*}}, %arg2, freq_factors %arg3
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @freq_factors(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %ff: !ggml.tensor<[32], f32>, %c: !ggml.tensor<[128, 16], f16>) -> !ggml.tensor<[128, 16], f16> {
    %s = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[128, 16], f16> {
      %k = ggml.rope normal %x, %pos, freq_factors %ff {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>, !ggml.tensor<[32], f32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      %s = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
      place.yield %s : !ggml.tensor<[128, 16], f16>
    }
    return %s : !ggml.tensor<[128, 16], f16>
  }
}

// -----

// The rotated K is read again (another user): kept, the fused op would not produce it.
// CHECK-LABEL: func.func @two_users
// CHECK: ggml.rope
// CHECK: ggml.set_rows
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @two_users(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[128, 16], f16>) -> (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[64, 2, 4], f32>) {
    %s:2 = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[128, 16], f16>, !ggml.tensor<[64, 2, 4], f32> {
      %k = ggml.rope normal %x, %pos {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      // expected-remark @+1 {{ROPE + SET_ROWS not fused: the rotated K has other users}}
      %s = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
      place.yield %s, %k : !ggml.tensor<[128, 16], f16>, !ggml.tensor<[64, 2, 4], f32>
    }
    return %s#0, %s#1 : !ggml.tensor<[128, 16], f16>, !ggml.tensor<[64, 2, 4], f32>
  }
}

// -----

// The rows are not one token's heads (a reshape to [64, 8]: two rows per token): kept.
// CHECK-LABEL: func.func @other_rows
// CHECK: ggml.rope
// CHECK: ggml.set_rows
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @other_rows(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[8], i64>, %c: !ggml.tensor<[64, 16], f16>) -> !ggml.tensor<[64, 16], f16> {
    %s = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, 16], f16> {
      %k = ggml.rope normal %x, %pos {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[64, 8], f32>
      // expected-remark @+1 {{ROPE + SET_ROWS not fused: the stored rows are not the rotated heads of each token}}
      %s = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[64, 16], f16>, !ggml.tensor<[64, 8], f32>, !ggml.tensor<[8], i64>) -> !ggml.tensor<[64, 16], f16>
      place.yield %s : !ggml.tensor<[64, 16], f16>
    }
    return %s : !ggml.tensor<[64, 16], f16>
  }
}

// -----

// A quantized K cache (-ctk q8_0): the CPU kernel stores plain float rows only, kept; on a CUDA
// split too (the CUDA kernel likewise; an F16 cache there fuses: fuse-cuda.mlir).
// CHECK-LABEL: func.func @q8_cache
// CHECK: ggml.rope
// CHECK: ggml.set_rows
// CHECK: ggml.rope
// CHECK: ggml.set_rows
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @q8_cache(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[128, 16], q8_0>) -> (!ggml.tensor<[128, 16], q8_0>, !ggml.tensor<[128, 16], q8_0>) {
    %s = place.split 0 on #place.backend<"CPU", 1> -> !ggml.tensor<[128, 16], q8_0> {
      %k = ggml.rope normal %x, %pos {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      // expected-remark @+1 {{ROPE + SET_ROWS not fused: backend 'CPU' does not run ROPE_SET_ROWS with these tensors}}
      %s = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[128, 16], q8_0>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], q8_0>
      place.yield %s : !ggml.tensor<[128, 16], q8_0>
    }
    %g = place.split 1 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[128, 16], q8_0> {
      %k = ggml.rope normal %x, %pos {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
      %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
      // expected-remark @+1 {{ROPE + SET_ROWS not fused: backend 'CUDA0' does not run ROPE_SET_ROWS with these tensors}}
      %t = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[128, 16], q8_0>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], q8_0>
      place.yield %t : !ggml.tensor<[128, 16], q8_0>
    }
    return %s, %g : !ggml.tensor<[128, 16], q8_0>, !ggml.tensor<[128, 16], q8_0>
  }
}

// -----

// Without placement there is no backend to ask.
// CHECK-LABEL: func.func @unplaced
// CHECK: ggml.rope
// CHECK: ggml.set_rows
func.func @unplaced(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[128, 16], f16>) -> !ggml.tensor<[128, 16], f16> {
  %k = ggml.rope normal %x, %pos {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>) -> !ggml.tensor<[64, 2, 4], f32>
  %r = ggml.reshape %k : (!ggml.tensor<[64, 2, 4], f32>) -> !ggml.tensor<[128, 4], f32>
  // expected-remark @+1 {{ROPE + SET_ROWS not fused: not inside a place.split (the IR is not placed)}}
  %s = ggml.set_rows %c, %r, %idx : (!ggml.tensor<[128, 16], f16>, !ggml.tensor<[128, 4], f32>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
  return %s : !ggml.tensor<[128, 16], f16>
}
