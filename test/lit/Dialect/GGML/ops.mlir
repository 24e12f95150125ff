// Round trip of every ggml op through the textual and the bytecode forms.
// REQUIRES: mlir
// RUN: stowage-opt %s | stowage-opt | FileCheck %s
// RUN: stowage-opt %s --emit-bytecode | stowage-opt | FileCheck %s
// RUN: stowage-opt %s --mlir-print-op-generic | stowage-opt | FileCheck %s
// Writes to memory survive dead-code elimination.
// RUN: stowage-opt %s --canonicalize | FileCheck %s --check-prefix=DCE
// DCE-LABEL: func.func @set_rows
// DCE-COUNT-2: ggml.set_rows

// CHECK-LABEL: func.func @leaves
func.func @leaves() -> (!ggml.tensor<[64, 512], q8_0>, !ggml.tensor<[n_tokens], i32>,
                        !ggml.tensor<[n_ctx*64], f16>) {
  // CHECK: ggml.weight "output.weight" {duplicated, layer = 5 : i32} : !ggml.tensor<[64, 512], q8_0>
  %o = ggml.weight "output.weight" {duplicated, layer = 5 : i32} : !ggml.tensor<[64, 512], q8_0>
  // CHECK: ggml.weight "token_embd.weight" {layer = -1 : i32} : !ggml.tensor<[64, 512], q8_0>
  %w = ggml.weight "token_embd.weight" {layer = -1 : i32} : !ggml.tensor<[64, 512], q8_0>
  // CHECK: ggml.input "inp_tokens" : !ggml.tensor<[n_tokens], i32>
  %t = ggml.input "inp_tokens" : !ggml.tensor<[n_tokens], i32>
  // CHECK: ggml.kv_cache k "cache_k_l0" layer 0 : !ggml.tensor<[n_ctx*64], f16>
  %k = ggml.kv_cache k "cache_k_l0" layer 0 : !ggml.tensor<[n_ctx*64], f16>
  return %w, %t, %k : !ggml.tensor<[64, 512], q8_0>, !ggml.tensor<[n_tokens], i32>,
                      !ggml.tensor<[n_ctx*64], f16>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%x: !ggml.tensor<[64, n_tokens], f32>, %pos: !ggml.tensor<[n_tokens], i32>,
                     %mask: !ggml.tensor<[n_kv, n_tokens], f16>,
                     %cache: !ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[64, n_tokens], f32> {
  %emb = ggml.weight "token_embd.weight" : !ggml.tensor<[64, 512], f32>
  %tok = ggml.input "inp_tokens" : !ggml.tensor<[n_tokens], i32>
  // CHECK: ggml.get_rows %{{.*}}, %{{.*}} {name = "inp_embd"} : (!ggml.tensor<[64, 512], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, n_tokens], f32>
  %inp = ggml.get_rows %emb, %tok {name = "inp_embd"} : (!ggml.tensor<[64, 512], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[64, n_tokens], f32>
  // CHECK: ggml.rms_norm %{{.*}} {eps = 9.99999974E-6 : f32, name = "norm-0"}
  %n = ggml.rms_norm %x {eps = 1.0e-05 : f32, name = "norm-0"} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %nw = ggml.weight "blk.0.attn_norm.weight" : !ggml.tensor<[64], f32>
  // CHECK: ggml.mul %{{.*}}, %{{.*}} {name = "attn_norm-0"} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %an = ggml.mul %n, %nw {name = "attn_norm-0"} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %wq = ggml.weight "blk.0.attn_q.weight" : !ggml.tensor<[64, 64], q8_0>
  // CHECK: ggml.mul_mat %{{.*}}, %{{.*}} {name = "Qcur-0"} : (!ggml.tensor<[64, 64], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %q = ggml.mul_mat %wq, %an {name = "Qcur-0"} : (!ggml.tensor<[64, 64], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %bq = ggml.weight "blk.0.attn_q.bias" : !ggml.tensor<[64], f32>
  // CHECK: ggml.add %{{.*}}, %{{.*}} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %qb = ggml.add %q, %bq : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  // CHECK: ggml.reshape %{{.*}} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  %q3 = ggml.reshape %qb : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  %rf = ggml.weight "rope_freqs.weight" : !ggml.tensor<[4], f32>
  // CHECK: ggml.rope neox %{{.*}}, %{{.*}}, freq_factors %{{.*}} {freq_base = 1.000000e+06 : f32, n_dims = 8 : i32}
  %qr = ggml.rope neox %q3, %pos, freq_factors %rf {n_dims = 8 : i32, freq_base = 1.0e+06 : f32} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>, !ggml.tensor<[4], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  // CHECK: ggml.rope normal %{{.*}}, %{{.*}} {n_dims = 8 : i32} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  %kr = ggml.rope normal %q3, %pos {n_dims = 8 : i32} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  // ggml_rope_set_offset: the last 4 dims of each 8-wide head rotate (deepseek2's MHA form).
  // CHECK: ggml.rope normal %{{.*}}, %{{.*}} {n_dims = 4 : i32, n_offs = 4 : i32}
  %or = ggml.rope normal %q3, %pos {n_dims = 4 : i32, n_offs = 4 : i32} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens], i32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  // CHECK: ggml.view %{{.*}} nb [16, 128, 1048576] offset 0 : (!ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[8, 8, n_kv], f16>
  %k = ggml.view %cache nb [16, 128, 1048576] offset 0 : (!ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[8, 8, n_kv], f16>
  // CHECK: ggml.view %{{.*}} nb [128, n_tokens*128, n_tokens*128] offset kv_head*128 : (!ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[n_tokens*64], f16>
  %kv = ggml.view %cache nb [128, n_tokens * 128, n_tokens*128] offset kv_head * 128 : (!ggml.tensor<[n_ctx*64], f16>) -> !ggml.tensor<[n_tokens*64], f16>
  // CHECK: ggml.cpy %{{.*}}, %{{.*}} {name = "k_cache_view-0"} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens*64], f16>) -> !ggml.tensor<[n_tokens*64], f16>
  %st = ggml.cpy %kr, %kv {name = "k_cache_view-0"} : (!ggml.tensor<[8, 8, n_tokens], f32>, !ggml.tensor<[n_tokens*64], f16>) -> !ggml.tensor<[n_tokens*64], f16>
  // CHECK: ggml.permute %{{.*}} {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  %qp = ggml.permute %qr {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens, 8], f32>
  %kp = ggml.permute %k {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 8, n_kv], f16>) -> !ggml.tensor<[8, n_kv, 8], f16>
  // CHECK: ggml.mul_mat %{{.*}}, %{{.*}} {name = "kq-0"} : (!ggml.tensor<[8, n_kv, 8], f16>, !ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  %kq = ggml.mul_mat %kp, %qp {name = "kq-0"} : (!ggml.tensor<[8, n_kv, 8], f16>, !ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  // CHECK: ggml.soft_max %{{.*}}, mask %{{.*}} {name = "kq_soft_max_ext-0", scale = 0.353553385 : f32}
  %p = ggml.soft_max %kq, mask %mask {scale = 0.353553385 : f32, name = "kq_soft_max_ext-0"} : (!ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[n_kv, n_tokens], f16>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  // CHECK: ggml.soft_max %{{.*}} : (!ggml.tensor<[n_kv, n_tokens, 8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  %p2 = ggml.soft_max %p : (!ggml.tensor<[n_kv, n_tokens, 8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  // CHECK: ggml.transpose %{{.*}} : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens, 8, 8], f32>
  %qt = ggml.transpose %qp : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens, 8, 8], f32>
  // CHECK: ggml.cont %{{.*}} {name = "kqv_merged_cont-0"} : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %c = ggml.cont %qp {name = "kqv_merged_cont-0"} : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  // CHECK: ggml.scale %{{.*}} {bias = 1.000000e+00 : f32, scale = 8.000000e+00 : f32}
  %s = ggml.scale %c {scale = 8.0 : f32, bias = 1.0 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  // CHECK: ggml.norm %{{.*}} {eps = 9.99999974E-6 : f32}
  %ln = ggml.norm %s {eps = 1.0e-05 : f32} : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return %ln : !ggml.tensor<[64, n_tokens], f32>
}

// CHECK-LABEL: func.func @ffn
func.func @ffn(%x: !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32> {
  %wg = ggml.weight "blk.0.ffn_gate.weight" : !ggml.tensor<[64, 256], q8_0>
  %wu = ggml.weight "blk.0.ffn_up.weight" : !ggml.tensor<[64, 256], q8_0>
  %wd = ggml.weight "blk.0.ffn_down.weight" : !ggml.tensor<[256, 64], q6_K>
  %g = ggml.mul_mat %wg, %x : (!ggml.tensor<[64, 256], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %u = ggml.mul_mat %wu, %x : (!ggml.tensor<[64, 256], q8_0>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  // CHECK: ggml.glu swiglu %{{.*}}, %{{.*}} : (!ggml.tensor<[256, n_tokens], f32>, !ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %f = ggml.glu swiglu %g, %u : (!ggml.tensor<[256, n_tokens], f32>, !ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  // CHECK: ggml.glu geglu %{{.*}} {swapped = true} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  %h = ggml.glu geglu %f {swapped = true} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  // CHECK: ggml.silu %{{.*}} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %si = ggml.silu %g : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  // CHECK: ggml.gelu %{{.*}} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %ge = ggml.gelu %si : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  // CHECK: ggml.sigmoid %{{.*}} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %sg = ggml.sigmoid %ge : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  // CHECK: ggml.tanh %{{.*}} : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %th = ggml.tanh %sg : (!ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[256, n_tokens], f32>
  %d = ggml.mul_mat %wd, %th {name = "ffn_out-0"} : (!ggml.tensor<[256, 64], q6_K>, !ggml.tensor<[256, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  // CHECK: ggml.add %{{.*}}, %{{.*}} {name = "l_out-0"}
  %o = ggml.add %d, %x {name = "l_out-0"} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return %o : !ggml.tensor<[64, n_tokens], f32>
}

// CHECK-LABEL: func.func @moe
func.func @moe(%x: !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[256, 2, n_tokens], f32> {
  %gi = ggml.weight "blk.0.ffn_gate_inp.weight" : !ggml.tensor<[64, 8], f32>
  %logits = ggml.mul_mat %gi, %x {name = "ffn_moe_logits-0"} : (!ggml.tensor<[64, 8], f32>, !ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], f32>
  %probs = ggml.soft_max %logits {name = "ffn_moe_probs-0"} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], f32>
  // CHECK: ggml.top_k %{{.*}} {k = 2 : i32, name = "ffn_moe_topk-0"} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], i32>
  %sel = ggml.top_k %probs {k = 2 : i32, name = "ffn_moe_topk-0"} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], i32>
  // CHECK: ggml.argsort desc %{{.*}} : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], i32>
  %srt = ggml.argsort desc %probs : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[8, n_tokens], i32>
  %p3 = ggml.reshape %probs : (!ggml.tensor<[8, n_tokens], f32>) -> !ggml.tensor<[1, 8, n_tokens], f32>
  // CHECK: ggml.get_rows %{{.*}}, %{{.*}} : (!ggml.tensor<[1, 8, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[1, 2, n_tokens], f32>
  %w = ggml.get_rows %p3, %sel : (!ggml.tensor<[1, 8, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[1, 2, n_tokens], f32>
  %w2 = ggml.reshape %w : (!ggml.tensor<[1, 2, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], f32>
  // CHECK: ggml.sum_rows %{{.*}} : (!ggml.tensor<[2, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  %sum = ggml.sum_rows %w2 : (!ggml.tensor<[2, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  // CHECK: ggml.div %{{.*}}, %{{.*}} : (!ggml.tensor<[2, n_tokens], f32>, !ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], f32>
  %wd = ggml.div %w2, %sum : (!ggml.tensor<[2, n_tokens], f32>, !ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[2, n_tokens], f32>
  %wn = ggml.reshape %wd : (!ggml.tensor<[2, n_tokens], f32>) -> !ggml.tensor<[1, 2, n_tokens], f32>
  %up = ggml.weight "blk.0.ffn_up_exps.weight" : !ggml.tensor<[64, 256, 8], q4_0>
  %x3 = ggml.reshape %x : (!ggml.tensor<[64, n_tokens], f32>) -> !ggml.tensor<[64, 1, n_tokens], f32>
  // CHECK: ggml.mul_mat_id %{{.*}}, %{{.*}}, %{{.*}} {name = "ffn_moe_up-0"} : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  %e = ggml.mul_mat_id %up, %x3, %sel {name = "ffn_moe_up-0"} : (!ggml.tensor<[64, 256, 8], q4_0>, !ggml.tensor<[64, 1, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  %ew = ggml.mul %e, %wn : (!ggml.tensor<[256, 2, n_tokens], f32>, !ggml.tensor<[1, 2, n_tokens], f32>) -> !ggml.tensor<[256, 2, n_tokens], f32>
  return %ew : !ggml.tensor<[256, 2, n_tokens], f32>
}

// CHECK-LABEL: func.func @mamba
func.func @mamba(%conv: !ggml.tensor<[3, 128], f32>, %x: !ggml.tensor<[128, n_tokens], f32>,
                 %s: !ggml.tensor<[16, 1, 128], f32>, %dt: !ggml.tensor<[128, n_tokens], f32>,
                 %B: !ggml.tensor<[16, 1, n_tokens], f32>, %C: !ggml.tensor<[16, 1, n_tokens], f32>,
                 %ids: !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32> {
  %xt = ggml.transpose %x : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[n_tokens, 128], f32>
  // ggml_repeat_4d: deepseek2's roped k_pe head over 16 heads.
  // CHECK: ggml.repeat %{{.*}} : (!ggml.tensor<[128, 1, n_tokens], f32>) -> !ggml.tensor<[128, 16, n_tokens], f32>
  %xr = ggml.reshape %x : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[128, 1, n_tokens], f32>
  %rep = ggml.repeat %xr : (!ggml.tensor<[128, 1, n_tokens], f32>) -> !ggml.tensor<[128, 16, n_tokens], f32>
  // CHECK: ggml.concat %{{.*}}, %{{.*}} {dim = 0 : i32} : (!ggml.tensor<[3, 128], f32>, !ggml.tensor<[n_tokens, 128], f32>) -> !ggml.tensor<[n_tokens+3, 128], f32>
  %cx = ggml.concat %conv, %xt {dim = 0 : i32} : (!ggml.tensor<[3, 128], f32>, !ggml.tensor<[n_tokens, 128], f32>) -> !ggml.tensor<[n_tokens+3, 128], f32>
  %w = ggml.weight "blk.0.ssm_conv1d.weight" : !ggml.tensor<[4, 128], f32>
  // CHECK: ggml.ssm_conv %{{.*}}, %{{.*}} : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[4, 128], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  %y = ggml.ssm_conv %cx, %w : (!ggml.tensor<[n_tokens+3, 128], f32>, !ggml.tensor<[4, 128], f32>) -> !ggml.tensor<[128, n_tokens], f32>
  %A = ggml.weight "blk.0.ssm_a" : !ggml.tensor<[16, 128], f32>
  %x4 = ggml.reshape %y : (!ggml.tensor<[128, n_tokens], f32>) -> !ggml.tensor<[1, 128, n_tokens], f32>
  // CHECK: ggml.ssm_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, ids %{{.*}} : ({{.*}}) -> !ggml.tensor<[n_tokens*128+2048], f32>
  %r = ggml.ssm_scan %s, %x4, %dt, %A, %B, %C, ids %ids : (!ggml.tensor<[16, 1, 128], f32>, !ggml.tensor<[1, 128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[16, 1, n_tokens], f32>, !ggml.tensor<[1], i32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return %r : !ggml.tensor<[n_tokens*128+2048], f32>
}

// The Feb 2025 form of SSM_SCAN (no ids), as Stowage's planner builds mamba.
// CHECK-LABEL: func.func @mamba_feb2025
func.func @mamba_feb2025(%s: !ggml.tensor<[16, 128], f32>, %x: !ggml.tensor<[128, n_tokens], f32>,
                         %A: !ggml.tensor<[16, 128], f32>, %B: !ggml.tensor<[16, n_tokens], f32>)
    -> !ggml.tensor<[n_tokens*128+2048], f32> {
  // CHECK: ggml.ssm_scan %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : ({{.*}}) -> !ggml.tensor<[n_tokens*128+2048], f32>
  %r = ggml.ssm_scan %s, %x, %x, %A, %B, %B : (!ggml.tensor<[16, 128], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[128, n_tokens], f32>, !ggml.tensor<[16, 128], f32>, !ggml.tensor<[16, n_tokens], f32>, !ggml.tensor<[16, n_tokens], f32>) -> !ggml.tensor<[n_tokens*128+2048], f32>
  return %r : !ggml.tensor<[n_tokens*128+2048], f32>
}

// Element counts are compared after pulling out the gcd: 4 * (n_tokens+3) == n_tokens*4+12, and
// a concat of two symbolic sizes is their sum.
// CHECK-LABEL: func.func @affine
func.func @affine(%a: !ggml.tensor<[n_tokens+3, 4], f32>, %k: !ggml.tensor<[n_kv, 8], f32>,
                  %t: !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens*4+12], f32> {
  // CHECK: ggml.reshape %{{.*}} : (!ggml.tensor<[n_tokens+3, 4], f32>) -> !ggml.tensor<[n_tokens*4+12], f32>
  %r = ggml.reshape %a : (!ggml.tensor<[n_tokens+3, 4], f32>) -> !ggml.tensor<[n_tokens*4+12], f32>
  // CHECK: ggml.concat %{{.*}}, %{{.*}} {dim = 0 : i32} : (!ggml.tensor<[n_kv, 8], f32>, !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_tokens+n_kv, 8], f32>
  %c = ggml.concat %k, %t {dim = 0 : i32} : (!ggml.tensor<[n_kv, 8], f32>, !ggml.tensor<[n_tokens, 8], f32>) -> !ggml.tensor<[n_kv+n_tokens, 8], f32>
  return %r : !ggml.tensor<[n_tokens*4+12], f32>
}

// The discardable attributes the importer sets on the module and the functions.
// CHECK-LABEL: module attributes {ggml.arch = "llama", ggml.n_ctx = 512 : i64, ggml.n_layer = 2 : i64, ggml.n_ubatch = 32 : i64}
// CHECK: func.func private @bounds() attributes {ggml.n_kv = 512 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64}
module attributes {ggml.arch = "llama", ggml.n_ctx = 512 : i64, ggml.n_layer = 2 : i64, ggml.n_ubatch = 32 : i64} {
  func.func private @bounds() attributes {ggml.n_kv = 512 : i64, ggml.n_outputs = 32 : i64, ggml.n_tokens = 32 : i64}
}

// SET_ROWS writes rows of b into a at indices c (llama.cpp's KV store since mid 2025); like CPY
// it writes memory and is kept even when its result is unused.
// CHECK-LABEL: func.func @set_rows
// CHECK: ggml.set_rows %{{.*}}, %{{.*}}, %{{.*}} {name = "k_cache_store-0"} : (!ggml.tensor<[1024, n_ctx], f16>, !ggml.tensor<[1024, n_tokens], f32>, !ggml.tensor<[n_tokens], i64>) -> !ggml.tensor<[1024, n_ctx], f16>
// CHECK: ggml.set_rows %{{.*}}, %{{.*}}, %{{.*}} : (!ggml.tensor<[64, 16, 4], q8_0>, !ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[2, 2], i32>) -> !ggml.tensor<[64, 16, 4], q8_0>
func.func @set_rows(%cache: !ggml.tensor<[1024, n_ctx], f16>, %k: !ggml.tensor<[1024, n_tokens], f32>,
                    %idx: !ggml.tensor<[n_tokens], i64>, %q: !ggml.tensor<[64, 16, 4], q8_0>,
                    %r: !ggml.tensor<[64, 2, 4], f32>, %i: !ggml.tensor<[2, 2], i32>) {
  %s = ggml.set_rows %cache, %k, %idx {name = "k_cache_store-0"} : (!ggml.tensor<[1024, n_ctx], f16>, !ggml.tensor<[1024, n_tokens], f32>, !ggml.tensor<[n_tokens], i64>) -> !ggml.tensor<[1024, n_ctx], f16>
  %t = ggml.set_rows %q, %r, %i : (!ggml.tensor<[64, 16, 4], q8_0>, !ggml.tensor<[64, 2, 4], f32>, !ggml.tensor<[2, 2], i32>) -> !ggml.tensor<[64, 16, 4], q8_0>
  return
}

// Flash attention (llama.cpp -fa on): the F16 cast of KQ_mask and one flash_attn_ext per layer,
// GQA (8 query heads over 4 KV heads), with and without a mask.
// CHECK-LABEL: func.func @flash_attn
// CHECK: ggml.cast %{{.*}} {name = "KQ_mask (copy)"} : (!ggml.tensor<[n_kv, n_tokens], f32>) -> !ggml.tensor<[n_kv, n_tokens], f16>
// CHECK: ggml.flash_attn_ext %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}} {prec = 1 : i32, scale = 0.353553385 : f32} : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[n_kv, n_tokens], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
// CHECK: ggml.flash_attn_ext %{{.*}}, %{{.*}}, %{{.*}} {logit_softcap = 5.000000e+01 : f32} : (!ggml.tensor<[32, n_tokens, 8], f32>, !ggml.tensor<[32, n_kv, 4], q8_0>, !ggml.tensor<[32, n_kv, 4], f32>) -> !ggml.tensor<[32, 8, n_tokens], f32>
func.func @flash_attn(%q: !ggml.tensor<[8, n_tokens, 8], f32>, %k: !ggml.tensor<[8, n_kv, 4], f16>,
                      %v: !ggml.tensor<[8, n_kv, 4], f16>, %m: !ggml.tensor<[n_kv, n_tokens], f32>,
                      %q32: !ggml.tensor<[32, n_tokens, 8], f32>, %kq: !ggml.tensor<[32, n_kv, 4], q8_0>,
                      %vf: !ggml.tensor<[32, n_kv, 4], f32>) {
  %m16 = ggml.cast %m {name = "KQ_mask (copy)"} : (!ggml.tensor<[n_kv, n_tokens], f32>) -> !ggml.tensor<[n_kv, n_tokens], f16>
  %o = ggml.flash_attn_ext %q, %k, %v, mask %m16 {scale = 0.353553385 : f32, prec = 1 : i32} : (!ggml.tensor<[8, n_tokens, 8], f32>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[8, n_kv, 4], f16>, !ggml.tensor<[n_kv, n_tokens], f16>) -> !ggml.tensor<[8, 8, n_tokens], f32>
  %o2 = ggml.flash_attn_ext %q32, %kq, %vf {logit_softcap = 50.0 : f32} : (!ggml.tensor<[32, n_tokens, 8], f32>, !ggml.tensor<[32, n_kv, 4], q8_0>, !ggml.tensor<[32, n_kv, 4], f32>) -> !ggml.tensor<[32, 8, n_tokens], f32>
  return
}

// llama.cpp 2026's group-limited expert routing: the grouped selection probabilities filled with
// -inf (ggml_fill), the kept groups' rows written back (ggml_set_rows).
// CHECK-LABEL: func.func @group_mask
func.func @group_mask(%g: !ggml.tensor<[2, 4, n_tokens], f32>, %kept: !ggml.tensor<[2, 2, n_tokens], f32>,
                      %idx: !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[2, 4, n_tokens], f32> {
  // CHECK: ggml.fill %{{.*}} {value = 0xFF800000 : f32} : (!ggml.tensor<[2, 4, n_tokens], f32>) -> !ggml.tensor<[2, 4, n_tokens], f32>
  %m = ggml.fill %g {value = 0xFF800000 : f32} : (!ggml.tensor<[2, 4, n_tokens], f32>) -> !ggml.tensor<[2, 4, n_tokens], f32>
  // CHECK: ggml.set_rows %{{.*}}, %{{.*}}, %{{.*}} : (!ggml.tensor<[2, 4, n_tokens], f32>, !ggml.tensor<[2, 2, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[2, 4, n_tokens], f32>
  %r = ggml.set_rows %m, %kept, %idx : (!ggml.tensor<[2, 4, n_tokens], f32>, !ggml.tensor<[2, 2, n_tokens], f32>, !ggml.tensor<[2, n_tokens], i32>) -> !ggml.tensor<[2, 4, n_tokens], f32>
  return %r : !ggml.tensor<[2, 4, n_tokens], f32>
}

// llama.cpp 2026's build_moe_ffn: the chosen experts' weight sum clamped to [2^-14, inf] (ggml_clamp)
// before the weights are divided by it.
// CHECK-LABEL: func.func @moe_weight_sum
func.func @moe_weight_sum(%w: !ggml.tensor<[4, n_tokens], f32>) -> !ggml.tensor<[4, n_tokens], f32> {
  %s = ggml.sum_rows %w : (!ggml.tensor<[4, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  // CHECK: ggml.clamp %{{.*}} {max = 0x7F800000 : f32, min = 6.10351563E-5 : f32} : (!ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  %c = ggml.clamp %s {min = 6.10351563E-5 : f32, max = 0x7F800000 : f32} : (!ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[1, n_tokens], f32>
  %r = ggml.div %w, %c : (!ggml.tensor<[4, n_tokens], f32>, !ggml.tensor<[1, n_tokens], f32>) -> !ggml.tensor<[4, n_tokens], f32>
  return %r : !ggml.tensor<[4, n_tokens], f32>
}

// Stowage's fused norm (stowage-fuse-rms-norm-mul): rms_norm(x) * w as one op, w broadcast.
// CHECK-LABEL: func.func @fused_norm
func.func @fused_norm(%x: !ggml.tensor<[64, n_tokens], f32>, %w: !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32> {
  // CHECK: ggml.rms_norm_mul %{{.*}}, %{{.*}} {eps = 9.99999974E-6 : f32, name = "attn_norm-0"} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  %n = ggml.rms_norm_mul %x, %w {eps = 1.0e-05 : f32, name = "attn_norm-0"} : (!ggml.tensor<[64, n_tokens], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64, n_tokens], f32>
  return %n : !ggml.tensor<[64, n_tokens], f32>
}
