// Every ggml element type, as a standalone type and inside a tensor type, round-trips through the
// textual and bytecode forms; trailing dimensions of 1 are dropped when printing.
// REQUIRES: mlir
// RUN: stowage-opt %s | stowage-opt | FileCheck %s
// RUN: stowage-opt %s --emit-bytecode | stowage-opt | FileCheck %s

// CHECK-LABEL: func.func private @block_types(
// CHECK-SAME: !ggml.q4_0,
// CHECK-SAME: !ggml.q4_1,
// CHECK-SAME: !ggml.q5_0,
// CHECK-SAME: !ggml.q5_1,
// CHECK-SAME: !ggml.q8_0,
// CHECK-SAME: !ggml.q8_1,
// CHECK-SAME: !ggml.q2_K,
// CHECK-SAME: !ggml.q3_K,
// CHECK-SAME: !ggml.q4_K,
// CHECK-SAME: !ggml.q5_K,
// CHECK-SAME: !ggml.q6_K,
// CHECK-SAME: !ggml.q8_K,
// CHECK-SAME: !ggml.iq2_xxs,
// CHECK-SAME: !ggml.iq2_xs,
// CHECK-SAME: !ggml.iq3_xxs,
// CHECK-SAME: !ggml.iq1_s,
// CHECK-SAME: !ggml.iq4_nl,
// CHECK-SAME: !ggml.iq3_s,
// CHECK-SAME: !ggml.iq2_s,
// CHECK-SAME: !ggml.iq4_xs,
// CHECK-SAME: !ggml.iq1_m,
// CHECK-SAME: !ggml.tq1_0,
// CHECK-SAME: !ggml.tq2_0,
// CHECK-SAME: !ggml.mxfp4,
// CHECK-SAME: !ggml.nvfp4,
// CHECK-SAME: !ggml.q1_0)
func.func private @block_types(!ggml.q4_0, !ggml.q4_1, !ggml.q5_0, !ggml.q5_1, !ggml.q8_0, !ggml.q8_1, !ggml.q2_K, !ggml.q3_K, !ggml.q4_K, !ggml.q5_K, !ggml.q6_K, !ggml.q8_K, !ggml.iq2_xxs, !ggml.iq2_xs, !ggml.iq3_xxs, !ggml.iq1_s, !ggml.iq4_nl, !ggml.iq3_s, !ggml.iq2_s, !ggml.iq4_xs, !ggml.iq1_m, !ggml.tq1_0, !ggml.tq2_0, !ggml.mxfp4, !ggml.nvfp4, !ggml.q1_0)

// CHECK-LABEL: func.func private @block_tensors(
// CHECK-SAME: !ggml.tensor<[64, 3], q4_0>,
// CHECK-SAME: !ggml.tensor<[64, 3], q4_1>,
// CHECK-SAME: !ggml.tensor<[64, 3], q5_0>,
// CHECK-SAME: !ggml.tensor<[64, 3], q5_1>,
// CHECK-SAME: !ggml.tensor<[64, 3], q8_0>,
// CHECK-SAME: !ggml.tensor<[64, 3], q8_1>,
// CHECK-SAME: !ggml.tensor<[512, 3], q2_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], q3_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], q4_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], q5_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], q6_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], q8_K>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq2_xxs>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq2_xs>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq3_xxs>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq1_s>,
// CHECK-SAME: !ggml.tensor<[64, 3], iq4_nl>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq3_s>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq2_s>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq4_xs>,
// CHECK-SAME: !ggml.tensor<[512, 3], iq1_m>,
// CHECK-SAME: !ggml.tensor<[512, 3], tq1_0>,
// CHECK-SAME: !ggml.tensor<[512, 3], tq2_0>,
// CHECK-SAME: !ggml.tensor<[64, 3], mxfp4>,
// CHECK-SAME: !ggml.tensor<[128, 3], nvfp4>,
// CHECK-SAME: !ggml.tensor<[256, 3], q1_0>)
func.func private @block_tensors(!ggml.tensor<[64, 3, 1, 1], q4_0>, !ggml.tensor<[64, 3, 1, 1], q4_1>, !ggml.tensor<[64, 3, 1, 1], q5_0>, !ggml.tensor<[64, 3, 1, 1], q5_1>, !ggml.tensor<[64, 3, 1, 1], q8_0>, !ggml.tensor<[64, 3, 1, 1], q8_1>, !ggml.tensor<[512, 3, 1, 1], q2_K>, !ggml.tensor<[512, 3, 1, 1], q3_K>, !ggml.tensor<[512, 3, 1, 1], q4_K>, !ggml.tensor<[512, 3, 1, 1], q5_K>, !ggml.tensor<[512, 3, 1, 1], q6_K>, !ggml.tensor<[512, 3, 1, 1], q8_K>, !ggml.tensor<[512, 3, 1, 1], iq2_xxs>, !ggml.tensor<[512, 3, 1, 1], iq2_xs>, !ggml.tensor<[512, 3, 1, 1], iq3_xxs>, !ggml.tensor<[512, 3, 1, 1], iq1_s>, !ggml.tensor<[64, 3, 1, 1], iq4_nl>, !ggml.tensor<[512, 3, 1, 1], iq3_s>, !ggml.tensor<[512, 3, 1, 1], iq2_s>, !ggml.tensor<[512, 3, 1, 1], iq4_xs>, !ggml.tensor<[512, 3, 1, 1], iq1_m>, !ggml.tensor<[512, 3, 1, 1], tq1_0>, !ggml.tensor<[512, 3, 1, 1], tq2_0>, !ggml.tensor<[64, 3, 1, 1], mxfp4>, !ggml.tensor<[128, 3, 1, 1], nvfp4>, !ggml.tensor<[256, 3, 1, 1], q1_0>)

// CHECK-LABEL: func.func private @plain_tensors(
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], f32>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], f16>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], bf16>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], f64>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], i8>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], i16>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], i32>,
// CHECK-SAME: !ggml.tensor<[7, 5, 3, 2], i64>)
func.func private @plain_tensors(!ggml.tensor<[7, 5, 3, 2], f32>, !ggml.tensor<[7, 5, 3, 2], f16>, !ggml.tensor<[7, 5, 3, 2], bf16>, !ggml.tensor<[7, 5, 3, 2], f64>, !ggml.tensor<[7, 5, 3, 2], i8>, !ggml.tensor<[7, 5, 3, 2], i16>, !ggml.tensor<[7, 5, 3, 2], i32>, !ggml.tensor<[7, 5, 3, 2], i64>)

// Symbolic dimensions: affine forms of n_tokens, n_kv, n_outputs, n_ctx, kv_head; terms are
// collected and printed in a canonical order.
// CHECK-LABEL: func.func private @symbolic(
// CHECK-SAME: !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[n_kv, n_tokens], f16>,
// CHECK-SAME: !ggml.tensor<[64, n_outputs], f32>, !ggml.tensor<[n_ctx*1024], f16>,
// CHECK-SAME: !ggml.tensor<[n_tokens+3, 5120], f32>, !ggml.tensor<[n_tokens*128-2], f32>,
// CHECK-SAME: !ggml.tensor<[0], f32>, !ggml.tensor<[1], f32>, !ggml.tensor<[1, 1, 1, 2], f32>,
// CHECK-SAME: !ggml.tensor<[n_tokens+n_kv+1], f32>, !ggml.tensor<[n_tokens*-2+8], f32>, !ggml.tensor<[0], f32>)
func.func private @symbolic(!ggml.tensor<[n_tokens, 1], i32>, !ggml.tensor<[n_kv, n_tokens], f16>,
    !ggml.tensor<[64, n_outputs], f32>, !ggml.tensor<[n_ctx * 1024], f16>,
    !ggml.tensor<[n_tokens + 3, 5120], f32>, !ggml.tensor<[n_tokens*128-2], f32>,
    !ggml.tensor<[0], f32>, !ggml.tensor<[1, 1, 1, 1], f32>, !ggml.tensor<[1, 1, 1, 2], f32>,
    !ggml.tensor<[n_kv + 1 + n_tokens], f32>, !ggml.tensor<[8 + n_tokens*-2], f32>,
    !ggml.tensor<[n_tokens + n_tokens*-1], f32>)
