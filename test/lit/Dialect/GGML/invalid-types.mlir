// Every error of the ggml type parser and type verifier.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{ne0 = 100 is not a multiple of q4_K's block size 256}}
func.func private @f(!ggml.tensor<[100, 4], q4_K>)

// -----

// expected-error @+1 {{ne0 = 48 is not a multiple of q4_0's block size 32}}
func.func private @f(!ggml.tensor<[48], q4_0>)

// -----

// expected-error @+1 {{ne0 of a q8_0 tensor must be static (got n_tokens)}}
func.func private @f(!ggml.tensor<[n_tokens], q8_0>)

// -----

// expected-error @+1 {{element type 'i1' is not a ggml type}}
func.func private @f(!ggml.tensor<[4], i1>)

// -----

// expected-error @+1 {{element type 'ui32' is not a ggml type}}
func.func private @f(!ggml.tensor<[4], ui32>)

// -----

// expected-error @+1 {{unknown ggml element type 'q9_9'}}
func.func private @f(!ggml.tensor<[4], q9_9>)

// -----

// ggml's names are case-sensitive in the textual form: q4_K, not Q4_K.
// expected-error @+1 {{unknown ggml element type 'Q4_K'}}
func.func private @f(!ggml.tensor<[256], Q4_K>)

// -----

// expected-error @+1 {{unknown symbolic dimension 'n_batch' (expected n_tokens, n_kv, n_outputs, n_ctx, kv_head, n_kv_swa or kv_head_swa)}}
func.func private @f(!ggml.tensor<[n_batch], f32>)

// -----

// expected-error @+1 {{a ggml tensor has 1 to 4 dimensions, got 5}}
func.func private @f(!ggml.tensor<[1, 2, 3, 4, 5], f32>)

// -----

// expected-error @+1 {{ne1 = -2 is negative}}
func.func private @f(!ggml.tensor<[4, -2], f32>)

// -----

// expected-error @+1 {{expected a dimension: an integer or one of n_tokens, n_kv, n_outputs, n_ctx, kv_head, n_kv_swa, kv_head_swa}}
func.func private @f(!ggml.tensor<[?], f32>)

// -----

// expected-error @+1 {{unknown ggml type 'q9_K' (expected 'tensor' or a quantized ggml type such as q4_K)}}
func.func private @f(!ggml.q9_K)

// -----

// Plain types are MLIR builtin types, not !ggml types.
// expected-error @+1 {{unknown ggml type 'f16'}}
func.func private @f(!ggml.f16)

// -----

// expected-error @+1 {{write a negative constant as `- n`, not `+ -n`}}
func.func private @f(!ggml.tensor<[n_tokens + -3], f32>)

// -----

// expected-error @+1 {{expected integer value}}
func.func private @f(!ggml.tensor<[n_tokens - n_kv], f32>)

// -----

// expected-error @+1 {{block type 'q4_K' takes no parameters}}
func.func private @f(!ggml.q4_K<3>)
