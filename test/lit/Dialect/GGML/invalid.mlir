// Every error of the ggml op verifiers (the asserts of ggml's constructors in ggml.c).
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file -verify-diagnostics
func.func @f() {
  // expected-error @+1 {{the GGUF tensor name must not be empty}}
  %r = ggml.weight "" : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{the input name must not be empty}}
  %r = ggml.input "" : !ggml.tensor<[n_tokens], i32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{layer must be >= 0, got -1}}
  %r = ggml.kv_cache k "cache_k_l0" layer -1 : !ggml.tensor<[1024], f16>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{the cache tensor name must not be empty}}
  %r = ggml.kv_cache v "" layer 0 : !ggml.tensor<[1024], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 512], f32>, %a1: !ggml.tensor<[n_tokens], f32>) {
  // expected-error @+1 {{b (row indices) must be i32, got f32}}
  %r = ggml.get_rows %a0, %a1 : (!ggml.tensor<[64, 512], f32>, !ggml.tensor<[n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 512], f32>, %a1: !ggml.tensor<[n_tokens, 1, 1, 2], i32>) {
  // expected-error @+1 {{b must have ne3 == 1 (ggml_get_rows), got [n_tokens, 1, 1, 2]}}
  %r = ggml.get_rows %a0, %a1 : (!ggml.tensor<[64, 512], f32>, !ggml.tensor<[n_tokens, 1, 1, 2], i32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 512, 4], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{a.ne2 (4) must equal b.ne1 (1) (ggml_get_rows)}}
  %r = ggml.get_rows %a0, %a1 : (!ggml.tensor<[64, 512, 4], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

// GET_ROWS converts to f32 (ggml_get_rows creates an F32 result unless a is I32).
func.func @f(%a0: !ggml.tensor<[64, 512], f16>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_get_rows: [a.ne0, b.ne0, b.ne1, b.ne2], f32), got '!ggml.tensor<[64, n_tokens], f16>'}}
  %r = ggml.get_rows %a0, %a1 : (!ggml.tensor<[64, 512], f16>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 32], f32>, %a1: !ggml.tensor<[32, n_tokens], f32>) {
  %t = ggml.transpose %a0 : (!ggml.tensor<[64, 32], f32>) -> !ggml.tensor<[32, 64], f32>
  // expected-error @+1 {{a must not be transposed (ggml_mul_mat); use ggml.cont first}}
  %r = ggml.mul_mat %t, %a1 : (!ggml.tensor<[32, 64], f32>, !ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 64], q8_0>, %a1: !ggml.tensor<[32, n_tokens], f32>) {
  // expected-error @+1 {{a.ne0 (64) must equal b.ne0 (32) (ggml_can_mul_mat)}}
  %r = ggml.mul_mat %a0, %a1 : (!ggml.tensor<[64, 64], q8_0>, !ggml.tensor<[32, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_kv, 3], f16>, %a1: !ggml.tensor<[8, n_tokens, 8], f32>) {
  // expected-error @+1 {{a [8, n_kv, 3, 1] cannot be broadcast over the batch dimensions of b [8, n_tokens, 8, 1] (ggml_can_mul_mat)}}
  %r = ggml.mul_mat %a0, %a1 : (!ggml.tensor<[8, n_kv, 3], f16>, !ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  return
}

// -----

// A static batch size never divides a symbolic one.
func.func @f(%a0: !ggml.tensor<[8, n_kv, 8], f16>, %a1: !ggml.tensor<[8, n_tokens, n_kv], f32>) {
  // expected-error @+1 {{a [8, n_kv, 8, 1] cannot be broadcast over the batch dimensions of b [8, n_tokens, n_kv, 1] (ggml_can_mul_mat)}}
  %r = ggml.mul_mat %a0, %a1 : (!ggml.tensor<[8, n_kv, 8], f16>, !ggml.tensor<[8, n_tokens, n_kv], f32>) -> !ggml.tensor<[n_kv, n_tokens, n_kv], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 128], q4_0>, %a1: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[128, n_tokens], f32> (ggml_mul_mat: [a.ne1, b.ne1, b.ne2, b.ne3], f32), got '!ggml.tensor<[64, n_tokens], f32>'}}
  %r = ggml.mul_mat %a0, %a1 : (!ggml.tensor<[64, 128], q4_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[256, 64, 8], f32>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  %t = ggml.transpose %a0 : (!ggml.tensor<[256, 64, 8], f32>) -> !ggml.tensor<[64, 256, 8], f32>
  // expected-error @+1 {{as must not be transposed}}
  %r = ggml.mul_mat_id %t, %a1, %a2 : (!ggml.tensor<[64, 256, 8], f32>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i64>) {
  // expected-error @+1 {{ids must be i32, got i64}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i64>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8, 2], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  // expected-error @+1 {{as must be 3-D (one matrix per expert), got [64, 256, 8, 2]}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8, 2], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens, 2], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  // expected-error @+1 {{b must be 3-D, got [64, 1, n_tokens, 2]}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens, 2], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens, 2], i32>) {
  // expected-error @+1 {{ids must be 2-D [n_expert_used, n_tokens], got [2, n_tokens, 2, 1]}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens, 2], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_outputs], i32>) {
  // expected-error @+1 {{ids.ne1 (n_outputs) must equal b.ne2 (n_tokens) (ggml_mul_mat_id: one expert list per token)}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_outputs], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[32, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  // expected-error @+1 {{as.ne0 (64) must equal b.ne0 (32)}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[32, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 3, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  // expected-error @+1 {{ids.ne0 (2) must be a multiple of b.ne1 (3)}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 3, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 256, 8], q4_0>, %a1: !ggml.tensor<[64, 1, n_tokens], f32>, %a2: !ggml.tensor<[2, n_tokens], i32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[256, 2, n_tokens], f32> (ggml_mul_mat_id: [as.ne1, ids.ne0, b.ne2], f32), got '!ggml.tensor<[256, 8, n_tokens], f32>'}}
  %r = ggml.mul_mat_id %a0, %a1, %a2 : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 8, n_tokens], f32>
  return
}

// -----

// n_kv and n_tokens are different symbols: never assumed equal.
func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>, %a1: !ggml.tensor<[64, n_kv], f32>) {
  // expected-error @+1 {{b [64, n_kv, 1, 1] cannot be repeated to a [64, n_tokens, 1, 1] (ggml_add: ggml_can_repeat(b, a))}}
  %r = ggml.add %a0, %a1 : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, n_kv], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>, %a1: !ggml.tensor<[48], f32>) {
  // expected-error @+1 {{b [48, 1, 1, 1] cannot be repeated to a [64, n_tokens, 1, 1] (ggml_mul: ggml_can_repeat(b, a))}}
  %r = ggml.mul %a0, %a1 : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[48], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[2, n_tokens], f32>, %a1: !ggml.tensor<[2, 3], f32>) {
  // expected-error @+1 {{b [2, 3, 1, 1] cannot be repeated to a [2, n_tokens, 1, 1] (ggml_div: ggml_can_repeat(b, a))}}
  %r = ggml.div %a0, %a1 : (!ggml.tensor<[2, n_tokens], f32>, !ggml.tensor<[2, 3], f32>) -> !ggml.tensor<[2, n_tokens], f32>
  return
}

// -----

// The operands are not commutative: the result has a's shape, b is broadcast.
func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>, %a1: !ggml.tensor<[64], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_add: like a), got '!ggml.tensor<[64], f32>'}}
  %r = ggml.add %a0, %a1 : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_scale: like a), got '!ggml.tensor<[64, n_tokens], f16>'}}
  %r = ggml.scale %a0 {scale = 2.0 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[2, 4, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[2, 4, n_tokens], f32> (ggml_fill: like a), got '!ggml.tensor<[8, n_tokens], f32>'}}
  %r = ggml.fill %a0 {value = 0xFF800000 : f32} : (!ggml.tensor<[2, 4, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[1, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[1, n_tokens], f32> (ggml_clamp: like a), got '!ggml.tensor<[1, n_tokens], f16>'}}
  %r = ggml.clamp %a0 {min = 0.0 : f32, max = 1.0 : f32} : (!ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f16>
  return
}

// -----

func.func @f(%x: !ggml.tensor<[64, n_tokens], f32>, %w: !ggml.tensor<[48], f32>) {
  // expected-error @+1 {{RMS_NORM_MUL: b [48, 1, 1, 1] cannot be repeated to a [64, n_tokens, 1, 1] (ggml_mul: ggml_can_repeat(b, a))}}
  %r = ggml.rms_norm_mul %x, %w {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[48], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%x: !ggml.tensor<[64, n_tokens], f32>, %w: !ggml.tensor<[64], f32>) {
  // expected-error @+1 {{RMS_NORM_MUL: expected eps >= 0, found -1.000000}}
  %r = ggml.rms_norm_mul %x, %w {eps = -1.0 : f32} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_silu: like a), got '!ggml.tensor<[64, n_outputs], f32>'}}
  %r = ggml.silu %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_outputs], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64], f32> (ggml_gelu: like a), got '!ggml.tensor<[32], f32>'}}
  %r = ggml.gelu %a0 : (!ggml.tensor<[64], f32>) -> !ggml.tensor<[32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[8], f32> (ggml_sigmoid: like a), got '!ggml.tensor<[8], i32>'}}
  %r = ggml.sigmoid %a0 : (!ggml.tensor<[8], f32>) -> !ggml.tensor<[8], i32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 2], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[8, 2], f32> (ggml_tanh: like a), got '!ggml.tensor<[8], f32>'}}
  %r = ggml.tanh %a0 : (!ggml.tensor<[8, 2], f32>) -> !ggml.tensor<[8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[256, n_tokens], f32>, %a1: !ggml.tensor<[256, n_tokens], f16>) {
  // expected-error @+1 {{must have the same element type (ggml_glu_split)}}
  %r = ggml.glu swiglu %a0, %a1 : (!ggml.tensor<[256, n_tokens], f32>, !ggml.tensor<[256, n_tokens], f16>) -> !ggml.tensor<[256, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[256, n_tokens], f32>, %a1: !ggml.tensor<[256, n_tokens], f32>) {
  // expected-error @+1 {{swapped applies to the one-operand form only}}
  %r = ggml.glu swiglu %a0, %a1 {swapped = true} : (!ggml.tensor<[256, n_tokens], f32>, !ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[255, n_tokens], f32>) {
  // expected-error @+1 {{a.ne0 (255) must be even: it holds both halves (ggml_glu)}}
  %r = ggml.glu geglu %a0 : (!ggml.tensor<[255, n_tokens], f32>) -> !ggml.tensor<[127, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens], f32>) {
  // expected-error @+1 {{a.ne0 (n_tokens) must be even: it holds both halves (ggml_glu)}}
  %r = ggml.glu geglu %a0 : (!ggml.tensor<[n_tokens], f32>) -> !ggml.tensor<[n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[256, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[128, n_tokens], f32> (ggml_glu: [a.ne0 / 2, ...]), got '!ggml.tensor<[256, n_tokens], f32>'}}
  %r = ggml.glu swiglu %a0 : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[256, n_tokens], f32>, %a1: !ggml.tensor<[256, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[256, n_tokens], f32> (ggml_glu_split: like a), got '!ggml.tensor<[128, n_tokens], f32>'}}
  %r = ggml.glu reglu %a0, %a1 : (!ggml.tensor<[256, n_tokens], f32>, !ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{RMS_NORM: expected eps >= 0, found -1.000000}}
  %r = ggml.rms_norm %a0 {eps = -1.0 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{NORM: expected eps >= 0, found -0.500000}}
  %r = ggml.norm %a0 {eps = -0.5 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_rms_norm: like a), got '!ggml.tensor<[64, n_tokens], f16>'}}
  %r = ggml.rms_norm %a0 {eps = 1.0e-5 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, n_tokens], f32> (ggml_norm: like a), got '!ggml.tensor<[64], f32>'}}
  %r = ggml.norm %a0 {eps = 1.0e-5 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], bf16>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{a must be f32 or f16, got bf16}}
  %r = ggml.rope neox %a0, %a1 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], bf16>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[128, 32, n_tokens], bf16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], f32>) {
  // expected-error @+1 {{pos must be i32, got f32}}
  %r = ggml.rope neox %a0, %a1 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], f32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens, 4], i32>) {
  // expected-error @+1 {{pos must be a vector [n_tokens], got [n_tokens, 4, 1, 1]}}
  %r = ggml.rope neox %a0, %a1 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens, 4], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_outputs], i32>) {
  // expected-error @+1 {{a.ne2 (n_tokens) must equal pos.ne0 (n_outputs) (ggml_rope_ext: one position per token)}}
  %r = ggml.rope normal %a0, %a1 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_outputs], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{ROPE: n_dims 127 must be even and positive}}
  %r = ggml.rope normal %a0, %a1 {n_dims = 127 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{ROPE: n_dims 256 must not exceed ne0 = 128}}
  %r = ggml.rope normal %a0, %a1 {n_dims = 256 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{ROPE: n_offs 72 + n_dims 64 must not exceed ne0 = 128}}
  %r = ggml.rope normal %a0, %a1 {n_dims = 64 : i32, n_offs = 72 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{ROPE: n_offs 3 must be even and >= 0}}
  %r = ggml.rope normal %a0, %a1 {n_dims = 64 : i32, n_offs = 3 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>, %a2: !ggml.tensor<[64], f16>) {
  // expected-error @+1 {{freq_factors must be f32, got f16}}
  %r = ggml.rope neox %a0, %a1, freq_factors %a2 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[64], f16>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>, %a2: !ggml.tensor<[32], f32>) {
  // expected-error @+1 {{freq_factors.ne0 (32) must be >= n_dims / 2 (64) (ggml_rope_ext)}}
  %r = ggml.rope neox %a0, %a1, freq_factors %a2 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[32], f32>) -> !ggml.tensor<[128, 32, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 32, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens], i32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[128, 32, n_tokens], f32> (ggml_rope_ext: like a), got '!ggml.tensor<[4096, n_tokens], f32>'}}
  %r = ggml.rope neox %a0, %a1 {n_dims = 128 : i32} : (!ggml.tensor<[128, 32, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[4096, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>, %a1: !ggml.tensor<[n_kv, n_tokens], i32>) {
  // expected-error @+1 {{mask must be f16 or f32, got i32}}
  %r = ggml.soft_max %a0, mask %a1 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>, !ggml.tensor<[n_kv, n_tokens], i32>) -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>, %a1: !ggml.tensor<[n_tokens, n_tokens], f16>) {
  // expected-error @+1 {{mask.ne0 (n_tokens) must equal a.ne0 (n_kv) (ggml_soft_max_ext)}}
  %r = ggml.soft_max %a0, mask %a1 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>, !ggml.tensor<[n_tokens, n_tokens], f16>) -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>, %a1: !ggml.tensor<[n_kv, n_outputs], f16>) {
  // expected-error @+1 {{mask.ne1 (n_outputs) must be >= a.ne1 (n_tokens) (ggml_soft_max_ext)}}
  %r = ggml.soft_max %a0, mask %a1 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>, !ggml.tensor<[n_kv, n_outputs], f16>) -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 8], f32>, %a1: !ggml.tensor<[16, 7], f32>) {
  // expected-error @+1 {{mask.ne1 (7) must be >= a.ne1 (8) (ggml_soft_max_ext)}}
  %r = ggml.soft_max %a0, mask %a1 : (!ggml.tensor<[16, 8], f32>, !ggml.tensor<[16, 7], f32>) -> !ggml.tensor<[16, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>, %a1: !ggml.tensor<[n_kv, n_tokens, 5], f16>) {
  // expected-error @+1 {{mask [n_kv, n_tokens, 5, 1] cannot be broadcast over a [n_kv, n_tokens, 32, 1] (ggml_soft_max_ext)}}
  %r = ggml.soft_max %a0, mask %a1 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>, !ggml.tensor<[n_kv, n_tokens, 5], f16>) -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>) {
  // expected-error @+1 {{max_bias > 0 (ALiBi) requires a mask}}
  %r = ggml.soft_max %a0 {max_bias = 8.0 : f32} : (!ggml.tensor<[n_kv, n_tokens, 32], f32>) -> !ggml.tensor<[n_kv, n_tokens, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_kv, n_tokens, 32], f32> (ggml_soft_max_ext: like a), got '!ggml.tensor<[n_kv, n_tokens, 32], f16>'}}
  %r = ggml.soft_max %a0 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>) -> !ggml.tensor<[n_kv, n_tokens, 32], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[1, n_tokens], f32> (ggml_sum_rows: [1, a.ne1, a.ne2, a.ne3]), got '!ggml.tensor<[n_tokens], f32>'}}
  %r = ggml.sum_rows %a0 : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f16>) {
  // expected-error @+1 {{a must be f32, got f16}}
  %r = ggml.argsort asc %a0 : (!ggml.tensor<[8, n_tokens], f16>) -> !ggml.tensor<[8, n_tokens], i32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[8, n_tokens], i32> (ggml_argsort: a's shape, i32), got '!ggml.tensor<[8, n_tokens], f32>'}}
  %r = ggml.argsort asc %a0 : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], i32>) {
  // expected-error @+1 {{a must be f32, got i32}}
  %r = ggml.top_k %a0 {k = 2 : i32} : (!ggml.tensor<[8, n_tokens], i32>) -> !ggml.tensor<[2, n_tokens], i32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{TOP_K: k 0 must be positive}}
  %r = ggml.top_k %a0 {k = 0 : i32} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[0, n_tokens], i32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{k (9) must not exceed a.ne0 (8) (ggml_top_k)}}
  %r = ggml.top_k %a0 {k = 9 : i32} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[9, n_tokens], i32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[2, n_tokens], i32> (ggml_top_k: [k, a.ne1, a.ne2, a.ne3], i32), got '!ggml.tensor<[2, n_tokens], f32>'}}
  %r = ggml.top_k %a0 {k = 2 : i32} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[128, 8, n_tokens], f32>, %a1: !ggml.tensor<[n_tokens*2048], f16>) {
  // expected-error @+1 {{a [128, 8, n_tokens, 1] and b [n_tokens*2048, 1, 1, 1] must have the same number of elements (ggml_cpy)}}
  %r = ggml.cpy %a0, %a1 : (!ggml.tensor<[128, 8, n_tokens], f32>, !ggml.tensor<[n_tokens*2048], f16>) -> !ggml.tensor<[n_tokens*2048], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[1024], f32>, %a1: !ggml.tensor<[1024], f16>) {
  // expected-error @+1 {{result must be !ggml.tensor<[1024], f16> (ggml_cpy: like b), got '!ggml.tensor<[1024], f32>'}}
  %r = ggml.cpy %a0, %a1 : (!ggml.tensor<[1024], f32>, !ggml.tensor<[1024], f16>) -> !ggml.tensor<[1024], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result element type must be a's (f32), got f16 (ggml_cont)}}
  %r = ggml.cont %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{a and the result have n_tokens*64 and n_kv*64 elements; they must be equal (ggml_cont_4d)}}
  %r = ggml.cont %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_kv], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  // expected-error @+1 {{result element type must be a's (f16), got f32 (ggml_view)}}
  %r = ggml.view %a0 nb [128, 128, 128] : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  // expected-error @+1 {{nb must hold the 3 byte strides nb1, nb2, nb3, got 2}}
  %r = ggml.view %a0 nb [128, 128] : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  // expected-error @+1 {{strides must be >= 0}}
  %r = ggml.view %a0 nb [128, -128, 128] : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  // expected-error @+1 {{offset must be >= 0, got -2}}
  %r = ggml.view %a0 nb [128, 128, 128] offset -2 : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  // expected-error @+1 {{view of 8192 bytes at offset 2 exceeds a's 8192 bytes (ggml_view)}}
  %r = ggml.view %a0 nb [128, 8192, 8192] offset 2 : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64, 64], f16>
  return
}

// -----

// Block types know their bytes: 2048 q8_0 elements are 64 blocks of 34 bytes.
func.func @f(%a0: !ggml.tensor<[2048, 1], q8_0>) {
  // expected-error @+1 {{view of 2312 bytes at offset 0 exceeds a's 2176 bytes (ggml_view)}}
  %r = ggml.view %a0 nb [34, 68, 68] : (!ggml.tensor<[2048, 1], q8_0>) -> !ggml.tensor<[32, 68], q8_0>
  return
}

// -----

// A view whose rows are 256 bytes apart while a row holds 128 bytes is not contiguous.
func.func @f(%a0: !ggml.tensor<[4096], f16>) {
  %v = ggml.view %a0 nb [256, 256, 256] : (!ggml.tensor<[4096], f16>) -> !ggml.tensor<[64, 32], f16>
  // expected-error @+1 {{a must be contiguous (ggml_reshape asserts ggml_is_contiguous); insert ggml.cont after a permute, transpose or strided view}}
  %r = ggml.reshape %v : (!ggml.tensor<[64, 32], f16>) -> !ggml.tensor<[2048], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result element type must be a's (f32), got f16}}
  %r = ggml.reshape %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 8, n_tokens], f32>) {
  %p = ggml.permute %a0 {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  // expected-error @+1 {{a must be contiguous (ggml_reshape asserts ggml_is_contiguous); insert ggml.cont after a permute, transpose or strided view}}
  %r = ggml.reshape %p : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{a and the result have n_tokens*64 and n_kv*64 elements; they must be equal (ggml_reshape)}}
  %r = ggml.reshape %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_kv], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 4], f32>) {
  // expected-error @+1 {{a and the result have n_tokens*4+12 and n_tokens*4+8 elements; they must be equal (ggml_reshape)}}
  %r = ggml.reshape %a0 : (!ggml.tensor<[n_tokens+3, 4], f32>) -> !ggml.tensor<[n_tokens*4+8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, n_tokens, 32], f32>) {
  // expected-error @+1 {{a and the result have 32*n_kv*n_tokens and n_kv*32 elements; they must be equal (ggml_reshape)}}
  %r = ggml.reshape %a0 : (!ggml.tensor<[n_kv, n_tokens, 32], f32>) -> !ggml.tensor<[n_kv, 32], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 8, n_tokens], f32>) {
  // expected-error @+1 {{PERMUTE: expected 4 integer parameters {axis0, axis1, axis2, axis3}, found 3 integer and 0 float}}
  %r = ggml.permute %a0 {axes = array<i32: 0, 2, 1>} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 8, n_tokens], f32>) {
  // expected-error @+1 {{PERMUTE: axes are not a permutation of 0..3}}
  %r = ggml.permute %a0 {axes = array<i32: 0, 2, 2, 3>} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 4, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[8, n_tokens, 4], f32> (ggml_permute: ne[axes[i]] = a.ne[i]), got '!ggml.tensor<[4, n_tokens, 8], f32>'}}
  %r = ggml.permute %a0 {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 4, n_tokens], f32>) -> !ggml.tensor<[4, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_tokens, 64], f32> (ggml_transpose: [a.ne1, a.ne0, a.ne2, a.ne3]), got '!ggml.tensor<[64, n_tokens], f32>'}}
  %r = ggml.transpose %a0 : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[3, 8], f32>, %a1: !ggml.tensor<[n_tokens, 8], f32>) {
  // expected-error @+1 {{CONCAT: dim 4 is not in 0..3}}
  %r = ggml.concat %a0, %a1 {dim = 4 : i32} : (!ggml.tensor<[3, 8], f32>, !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens+3, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 3, n_tokens], f32>) {
  // expected-error @+1 {{REPEAT: result [64, 16, 1, 1] is not a repetition of a [64, 3, 1, 1]: ne1 16 is not a multiple of 3 (ggml_repeat_4d)}}
  %r = ggml.repeat %a0 : (!ggml.tensor<[64, 3, n_tokens], f32>) -> !ggml.tensor<[64, 16, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 1, n_tokens], f32>) {
  // expected-error @+1 {{result element type must be a's (f32), got f16 (ggml_repeat_4d)}}
  %r = ggml.repeat %a0 : (!ggml.tensor<[64, 1, n_tokens], f32>) -> !ggml.tensor<[64, 16, n_tokens], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[3, 8], f32>, %a1: !ggml.tensor<[n_tokens, 8], f16>) {
  // expected-error @+1 {{a and b must have the same element type (ggml_concat)}}
  %r = ggml.concat %a0, %a1 {dim = 0 : i32} : (!ggml.tensor<[3, 8], f32>, !ggml.tensor<[n_tokens, 8], f16>) -> !ggml.tensor<[n_tokens+3, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[3, 8], f32>, %a1: !ggml.tensor<[n_tokens, 16], f32>) {
  // expected-error @+1 {{a [3, 8, 1, 1] and b [n_tokens, 16, 1, 1] must agree in every dimension but 0 (ggml_concat)}}
  %r = ggml.concat %a0, %a1 {dim = 0 : i32} : (!ggml.tensor<[3, 8], f32>, !ggml.tensor<[n_tokens, 16], f32>) -> !ggml.tensor<[n_tokens+3, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_kv, 8], f32>, %a1: !ggml.tensor<[n_tokens, 8], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_tokens+n_kv, 8], f32> (ggml_concat), got '!ggml.tensor<[n_tokens, 8], f32>'}}
  %r = ggml.concat %a0, %a1 {dim = 0 : i32} : (!ggml.tensor<[n_kv, 8], f32>, !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[3, 8], f32>, %a1: !ggml.tensor<[n_tokens, 8], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_tokens+3, 8], f32> (ggml_concat), got '!ggml.tensor<[n_tokens, 8], f32>'}}
  %r = ggml.concat %a0, %a1 {dim = 0 : i32} : (!ggml.tensor<[3, 8], f32>, !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens, 8], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 128, 1, 2], f32>, %a1: !ggml.tensor<[4, 128], f32>) {
  // expected-error @+1 {{sx must be 3-D, got [n_tokens+3, 128, 1, 2]}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[n_tokens+3, 128, 1, 2], f32>, !ggml.tensor<[4, 128], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 128], f32>, %a1: !ggml.tensor<[4, 128, 2], f32>) {
  // expected-error @+1 {{c must be a matrix [d_conv, d_inner], got [4, 128, 2, 1]}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[4, 128, 2], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 128], f32>, %a1: !ggml.tensor<[n_kv, 128], f32>) {
  // expected-error @+1 {{sx.ne0 (n_tokens+3) must be >= d_conv - 1, d_conv = c.ne0 (n_kv) (ggml_ssm_conv)}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[n_kv, 128], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 128], f32>, %a1: !ggml.tensor<[4, 64], f32>) {
  // expected-error @+1 {{sx.ne1 (128) must equal d_inner = c.ne1 (64) (ggml_ssm_conv)}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[4, 64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[2, 128], f32>, %a1: !ggml.tensor<[4, 128], f32>) {
  // expected-error @+1 {{sx.ne0 (2) must be >= d_conv - 1, d_conv = c.ne0 (4) (ggml_ssm_conv)}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[2, 128], f32>, !ggml.tensor<[4, 128], f32>) -> !ggml.tensor<[128, 0], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[n_tokens+3, 128], f32>, %a1: !ggml.tensor<[4, 128], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[128, n_tokens], f32> (ggml_ssm_conv: [d_inner, sx.ne0 - d_conv + 1, sx.ne2], f32), got '!ggml.tensor<[128, n_tokens+3], f32>'}}
  %r = ggml.ssm_conv %a0, %a1 : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[4, 128], f32>) -> !ggml.tensor<[128, n_tokens+3], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 2, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{B [16, 1, n_tokens, 1] and C [16, 2, n_tokens, 1] must have the same shape}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 2, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i64>) {
  // expected-error @+1 {{ids must be i32, got i64}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i64>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[64, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{dt.ne0 (64) must equal n_head = x.ne1 (128) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_kv], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{dt.ne1 (n_kv) must equal n_seq_tokens = x.ne2 (n_tokens) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_kv], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens, 2], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{dt.ne2 (2) must equal n_seqs = x.ne3 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens, 2], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens, 1, 2], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{dt must be 3-D, got [128, n_tokens, 1, 2]}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens, 1, 2], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 2, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{s.ne1 (2) must equal head_dim = x.ne0 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 2, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 64], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{s.ne2 (64) must equal n_head = x.ne1 (128) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 64], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[8, 1, n_tokens], f32>, %a5: !ggml.tensor<[8, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{B.ne0 (8) must equal d_state = s.ne0 (16) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[8, 1, n_tokens], f32>, !ggml.tensor<[8, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_kv], f32>, %a5: !ggml.tensor<[16, 1, n_kv], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{B.ne2 (n_kv) must equal n_seq_tokens = x.ne2 (n_tokens) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_kv], f32>, !ggml.tensor<[16, 1, n_kv], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens, 2], f32>, %a5: !ggml.tensor<[16, 1, n_tokens, 2], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{B.ne3 (2) must equal n_seqs = x.ne3 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens, 2], f32>, !ggml.tensor<[16, 1, n_tokens, 2], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1, 2], i32>) {
  // expected-error @+1 {{ids must be a vector [n_seqs], got [1, 2, 1, 1]}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1, 2], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[2], i32>) {
  // expected-error @+1 {{ids.ne0 (2) must equal n_seqs = x.ne3 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[2], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128, 2], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{A must be a matrix [d_state or 1, n_head], got [16, 128, 2, 1]}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128, 2], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 64], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{A.ne1 (64) must equal n_head = x.ne1 (128) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 64], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[8, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{A.ne0 (8) must equal 1 or d_state = s.ne0 (16) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[8, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens, n_kv], f32>, %a2: !ggml.tensor<[128, n_tokens, n_kv], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens, n_kv], f32>, %a5: !ggml.tensor<[16, 1, n_tokens, n_kv], f32>, %a6: !ggml.tensor<[n_kv], i32>) {
  // expected-error @+1 {{SSM_SCAN: cannot express the result's ne0 as one dimension: it is not affine in the symbols}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens, n_kv], f32>, !ggml.tensor<[128, n_tokens, n_kv], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens, n_kv], f32>, !ggml.tensor<[16, 1, n_tokens, n_kv], f32>, !ggml.tensor<[n_kv], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[16, 1, 128], f32>, %a1: !ggml.tensor<[1, 128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, 1, n_tokens], f32>, %a5: !ggml.tensor<[16, 1, n_tokens], f32>, %a6: !ggml.tensor<[1], i32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_tokens*128+2048], f32> (ggml_ssm_scan: [nelements(x) + d_state*head_dim*n_head*n_seqs], f32), got '!ggml.tensor<[n_tokens*128], f32>'}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5, ids %a6 : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_kv], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{x [128, n_tokens, 1, 1] and dt [128, n_kv, 1, 1] must have the same shape}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_kv], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{B [16, n_tokens, 1, 1] and C [8, n_tokens, 1, 1] must have the same shape}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128, 1, 2], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{s, x and B must be 3-D without ids (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128, 1, 2], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128, 2], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{s.ne2 (2) must equal n_seqs = x.ne2 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128, 2], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[64, n_tokens], f32>, %a2: !ggml.tensor<[64, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{x.ne0 (64) must equal d_inner = s.ne1 (128) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128, 2], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{A must be a matrix [d_state, d_inner], got [16, 128, 2, 1]}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128, 2], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[8, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{A.ne0 (8) must equal d_state = s.ne0 (16) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[8, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 64], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{A.ne1 (64) must equal d_inner = s.ne1 (128) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 64], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[8, n_tokens], f32>, %a5: !ggml.tensor<[8, n_tokens], f32>) {
  // expected-error @+1 {{B.ne0 (8) must equal d_state = s.ne0 (16) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[8, n_tokens], f32>, !ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_kv], f32>, %a5: !ggml.tensor<[16, n_kv], f32>) {
  // expected-error @+1 {{B.ne1 (n_kv) must equal n_seq_tokens = x.ne1 (n_tokens) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_kv], f32>, !ggml.tensor<[16, n_kv], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens, 2], f32>, %a5: !ggml.tensor<[16, n_tokens, 2], f32>) {
  // expected-error @+1 {{B.ne2 (2) must equal n_seqs = x.ne2 (1) (ggml_ssm_scan)}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens, 2], f32>, !ggml.tensor<[16, n_tokens, 2], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128, n_kv], f32>, %a1: !ggml.tensor<[128, n_tokens, n_kv], f32>, %a2: !ggml.tensor<[128, n_tokens, n_kv], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens, n_kv], f32>, %a5: !ggml.tensor<[16, n_tokens, n_kv], f32>) {
  // expected-error @+1 {{SSM_SCAN: cannot express the result's ne0 as one dimension: it is not affine in the symbols}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128, n_kv], f32>, !ggml.tensor<[128, n_tokens, n_kv], f32>, !ggml.tensor<[128, n_tokens, n_kv], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens, n_kv], f32>, !ggml.tensor<[16, n_tokens, n_kv], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return
}

// -----

// SSM_SCAN without ids: ggml's Feb 2025 form.
func.func @f(%a0: !ggml.tensor<[16, 128], f32>, %a1: !ggml.tensor<[128, n_tokens], f32>, %a2: !ggml.tensor<[128, n_tokens], f32>, %a3: !ggml.tensor<[16, 128], f32>, %a4: !ggml.tensor<[16, n_tokens], f32>, %a5: !ggml.tensor<[16, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_tokens*128+2048], f32> (ggml_ssm_scan: [nelements(x) + nelements(s)], f32), got '!ggml.tensor<[n_tokens*128], f32>'}}
  %r = ggml.ssm_scan %a0, %a1, %a2, %a3, %a4, %a5 : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128], f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{layer must be -1 (input layer), a block index or n_layer (output layer), got -2}}
  %r = ggml.weight "token_embd.weight" {layer = -2 : i32} : !ggml.tensor<[4], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[4], f32>) {
  // expected-error @+1 {{attribute 'name' (the ggml tensor name) must be a string, got 3 : i32}}
  %r = ggml.silu %a0 {name = 3 : i32} : (!ggml.tensor<[4], f32>) -> !ggml.tensor<[4], f32>
  return
}

// -----

// expected-error @+1 {{attribute 'ggml.arch' must be a non-empty string, got 1 : i32}}
module attributes {ggml.arch = 1 : i32} {}

// -----

// expected-error @+1 {{attribute 'ggml.n_tokens' must be an integer >= 0, got -1 : i64}}
func.func private @pp() attributes {ggml.n_tokens = -1 : i64}

// -----

// expected-error @+1 {{attribute 'ggml.n_kv' must be an integer >= 0, got "512"}}
func.func private @pp() attributes {ggml.n_kv = "512"}

// -----

// expected-error @+1 {{unknown ggml attribute 'ggml.n_batch' (expected ggml.arch, ggml.n_layer, ggml.n_ctx, ggml.n_ubatch, ggml.n_tokens, ggml.n_kv, ggml.n_outputs or ggml.n_kv_swa)}}
func.func private @pp() attributes {ggml.n_batch = 2048 : i64}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8], f16>, %a1: !ggml.tensor<[64, 2], f16>, %a2: !ggml.tensor<[2], i64>) {
  // expected-error @+1 {{b (the rows) must be f32, got f16}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[64, 2], f16>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 8], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8], f16>, %a1: !ggml.tensor<[64, 2], f32>, %a2: !ggml.tensor<[2], f32>) {
  // expected-error @+1 {{c (the row indices) must be i64 or i32, got f32}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[64, 2], f32>, !ggml.tensor<[2], f32>) -> !ggml.tensor<[64, 8], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8], f16>, %a1: !ggml.tensor<[32, 2], f32>, %a2: !ggml.tensor<[2], i64>) {
  // expected-error @+1 {{a.ne0 (64) must equal b.ne0 (32) (ggml_set_rows)}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[32, 2], f32>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 8], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8, 3], f16>, %a1: !ggml.tensor<[64, 2], f32>, %a2: !ggml.tensor<[2], i64>) {
  // expected-error @+1 {{a.ne2 (3) must equal b.ne2 (1) (ggml_set_rows)}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8, 3], f16>, !ggml.tensor<[64, 2], f32>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 8, 3], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8, 1, 1], f16>, %a1: !ggml.tensor<[64, 2, 1, 2], f32>, %a2: !ggml.tensor<[2], i64>) {
  // expected-error @+1 {{a.ne3 (1) must equal b.ne3 (2) (ggml_set_rows)}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8, 1, 1], f16>, !ggml.tensor<[64, 2, 1, 2], f32>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 8, 1, 1], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, n_ctx], f16>, %a1: !ggml.tensor<[64, n_tokens], f32>, %a2: !ggml.tensor<[n_kv], i64>) {
  // expected-error @+1 {{b.ne1 (n_tokens) must equal c.ne0 (one index per row) (n_kv) (ggml_set_rows)}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, n_ctx], f16>, !ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[n_kv], i64>) -> !ggml.tensor<[64, n_ctx], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8, 4], f16>, %a1: !ggml.tensor<[64, 2, 4], f32>, %a2: !ggml.tensor<[2, 3], i64>) {
  // expected-error @+1 {{c [2, 3, 1, 1] cannot be broadcast over b [64, 2, 4, 1] (ggml_set_rows)}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8, 4], f16>, !ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[2, 3], i64>) -> !ggml.tensor<[64, 8, 4], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8], f16>, %a1: !ggml.tensor<[64, 2], f32>, %a2: !ggml.tensor<[2, 1, 1, 2], i64>) {
  // expected-error @+1 {{c must have ne3 == 1, got [2, 1, 1, 2]}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[64, 2], f32>, !ggml.tensor<[2, 1, 1, 2], i64>) -> !ggml.tensor<[64, 8], f16>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[64, 8], f16>, %a1: !ggml.tensor<[64, 2], f32>, %a2: !ggml.tensor<[2], i64>) {
  // expected-error @+1 {{result must be !ggml.tensor<[64, 8], f16> (ggml_set_rows: like a), got '!ggml.tensor<[64, 2], f32>'}}
  %r = ggml.set_rows %a0, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[64, 2], f32>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 2], f32>
  return
}

// -----

func.func @f(%a0: !ggml.tensor<[8, 64], f16>, %a1: !ggml.tensor<[64, 2], f32>, %a2: !ggml.tensor<[2], i64>) {
  %t = ggml.transpose %a0 : (!ggml.tensor<[8, 64], f16>) -> !ggml.tensor<[64, 8], f16>
  // expected-error @+1 {{the rows of a and b must be contiguous (ggml_set_rows)}}
  %r = ggml.set_rows %t, %a1, %a2 : (!ggml.tensor<[64, 8], f16>, !ggml.tensor<[64, 2], f32>, !ggml.tensor<[2], i64>) -> !ggml.tensor<[64, 8], f16>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[16, n_kv, 4], f16>, %v: !ggml.tensor<[16, n_kv, 4], f16>) {
  // expected-error @+1 {{k.ne0 (16) must equal q.ne0 (8) (ggml_flash_attn_ext: ggml_can_mul_mat(k, q))}}
  %r = ggml.flash_attn_ext %q, %k, %v : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[16, n_kv, 4], f16>, !ggml.tensor<[16, n_kv, 4], f16>) -> !ggml.tensor<[16, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 3], f16>, %v: !ggml.tensor<[8, n_kv, 3], f16>) {
  // expected-error @+1 {{k [8, n_kv, 3, 1] cannot be broadcast over the heads of q [8, n_tokens, 8, 1] (ggml_flash_attn_ext: ggml_can_mul_mat(k, q))}}
  %r = ggml.flash_attn_ext %q, %k, %v : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 3], f16>, !ggml.tensor<[8, n_kv, 3], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_ctx, 4], f16>) {
  // expected-error @+1 {{v [8, n_ctx, 4, 1] must have k's n_kv and heads [8, n_kv, 4, 1] (ggml_flash_attn_ext)}}
  %r = ggml.flash_attn_ext %q, %k, %v : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_ctx, 4], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_kv, 4], f16>, %m: !ggml.tensor<[n_kv, n_tokens], f32>) {
  // expected-error @+1 {{mask must be f16, got f32}}
  %r = ggml.flash_attn_ext %q, %k, %v, mask %m : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[n_kv, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, 16, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_kv, 4], f16>, %m: !ggml.tensor<[n_kv, 15], f16>) {
  // expected-error @+1 {{mask.ne1 (15) must be >= q.ne1 (16) (ggml_flash_attn_ext)}}
  %r = ggml.flash_attn_ext %q, %k, %v, mask %m : (!ggml.tensor<[8, 16, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[n_kv, 15], f16>) -> !ggml.tensor<[8, 8, 16], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_kv, 4], f16>) {
  // expected-error @+1 {{max_bias > 0 (ALiBi) requires a mask}}
  %r = ggml.flash_attn_ext %q, %k, %v {max_bias = 8.0 : f32} : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_kv, 4], f16>) {
  // expected-error @+1 {{FLASH_ATTN_EXT: prec 10 is not 0 (GGML_PREC_DEFAULT) or 1 (GGML_PREC_F32)}}
  %r = ggml.flash_attn_ext %q, %k, %v {prec = 10 : i32} : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>, %v: !ggml.tensor<[8, n_kv, 4], f16>) {
  // expected-error @+1 {{result must be !ggml.tensor<[8, 8, n_tokens], f32> (ggml_flash_attn_ext: [v.ne0, q.ne2, q.ne1, q.ne3], f32), got '!ggml.tensor<[8, n_tokens, 8], f32>'}}
  %r = ggml.flash_attn_ext %q, %k, %v : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%m: !ggml.tensor<[n_kv, n_tokens], f32>) {
  // expected-error @+1 {{result must be !ggml.tensor<[n_kv, n_tokens], f16> (ggml_cast: a's shape), got '!ggml.tensor<[n_kv], f16>'}}
  %r = ggml.cast %m : (!ggml.tensor<[n_kv, n_tokens], f32>) -> !ggml.tensor<[n_kv, 1], f16>
  return
}
