// ggml.rope_set_rows and ggml.rope_cpy (Stowage's fused K stores): the textual form round-trips,
// and the verifier refuses what ROPE's, SET_ROWS's and CPY's rules refuse, one line each.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @store
// CHECK: ggml.rope_set_rows neox %arg0, %arg1, %arg3, %arg2, freq_factors %arg4 {n_dims = 64 : i32}
func.func @store(%x: !ggml.tensor<[64, 2, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>, %idx: !ggml.tensor<[n_tokens], i64>, %c: !ggml.tensor<[128, 256], f16>, %ff: !ggml.tensor<[32], f32>) -> !ggml.tensor<[128, 256], f16> {
  %s = ggml.rope_set_rows neox %x, %pos, %c, %idx, freq_factors %ff {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[128, 256], f16>, !ggml.tensor<[n_tokens], i64>, !ggml.tensor<[32], f32>) -> !ggml.tensor<[128, 256], f16>
  return %s : !ggml.tensor<[128, 256], f16>
}

// -----

func.func @row_width(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[64, 16], f16>) -> !ggml.tensor<[64, 16], f16> {
  // expected-error @+1 {{ROPE_SET_ROWS: a.ne0 (64) must equal b.ne0 (128) (ggml_set_rows)}}
  %s = ggml.rope_set_rows normal %x, %pos, %c, %idx {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>, !ggml.tensor<[64, 16], f16>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[64, 16], f16>
  return %s : !ggml.tensor<[64, 16], f16>
}

// -----

func.func @positions(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[3], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[128, 16], f16>) -> !ggml.tensor<[128, 16], f16> {
  // expected-error @+1 {{ROPE_SET_ROWS: a.ne2 (4) must equal pos.ne0 (3) (ggml_rope_ext: one position per token)}}
  %s = ggml.rope_set_rows normal %x, %pos, %c, %idx {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[3], i32>, !ggml.tensor<[128, 16], f16>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
  return %s : !ggml.tensor<[128, 16], f16>
}

// -----

func.func @index_type(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], f32>, %c: !ggml.tensor<[128, 16], f16>) -> !ggml.tensor<[128, 16], f16> {
  // expected-error @+1 {{idx (the row indices) must be i64 or i32, got f32}}
  %s = ggml.rope_set_rows normal %x, %pos, %c, %idx {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>, !ggml.tensor<[128, 16], f16>, !ggml.tensor<[4], f32>) -> !ggml.tensor<[128, 16], f16>
  return %s : !ggml.tensor<[128, 16], f16>
}

// -----

func.func @x_type(%x: !ggml.tensor<[64, 2, 4], f16>, %pos: !ggml.tensor<[4], i32>, %idx: !ggml.tensor<[4], i64>, %c: !ggml.tensor<[128, 16], f16>) -> !ggml.tensor<[128, 16], f16> {
  // expected-error @+1 {{x must be f32, got f16}}
  %s = ggml.rope_set_rows normal %x, %pos, %c, %idx {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f16>, !ggml.tensor<[4], i32>, !ggml.tensor<[128, 16], f16>, !ggml.tensor<[4], i64>) -> !ggml.tensor<[128, 16], f16>
  return %s : !ggml.tensor<[128, 16], f16>
}

// -----

// ggml.rope_cpy, Feb 2025's K store into the cache's view of the ubatch's cells.
// CHECK-LABEL: func.func @copy
// CHECK: ggml.rope_cpy normal %arg0, %arg1, %arg2 {n_dims = 64 : i32}
func.func @copy(%x: !ggml.tensor<[64, 2, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>, %v: !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16> {
  %s = ggml.rope_cpy normal %x, %pos, %v {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[n_tokens*128], f16>) -> !ggml.tensor<[n_tokens*128], f16>
  return %s : !ggml.tensor<[n_tokens*128], f16>
}

// -----

func.func @copy_count(%x: !ggml.tensor<[64, 2, 4], f32>, %pos: !ggml.tensor<[4], i32>, %v: !ggml.tensor<[256], f16>) -> !ggml.tensor<[256], f16> {
  // expected-error @+1 {{ROPE_CPY: x [64, 2, 4, 1] and dst [256, 1, 1, 1] must have the same number of elements (ggml_cpy)}}
  %s = ggml.rope_cpy normal %x, %pos, %v {n_dims = 64 : i32} : (!ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[4], i32>, !ggml.tensor<[256], f16>) -> !ggml.tensor<[256], f16>
  return %s : !ggml.tensor<[256], f16>
}
