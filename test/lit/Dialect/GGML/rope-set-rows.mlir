// ggml.rope_set_rows (Stowage's fused K store): the textual form round-trips, and the verifier
// refuses what ROPE's and SET_ROWS's rules refuse, one line each.
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
