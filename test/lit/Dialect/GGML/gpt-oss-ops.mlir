// gpt-oss's ops: add_id (biased experts), glu swiglu_oai (alpha, limit) and the attention sinks of
// soft_max and flash_attn_ext; round trip through the textual, bytecode and generic forms, then
// every error their verifiers give.
// REQUIRES: mlir
// RUN: stowage-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// RUN: stowage-opt %s --split-input-file --verify-diagnostics --mlir-print-op-generic | stowage-opt --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @experts
func.func @experts(%up: !ggml.tensor<[24, 4, n_tokens], f32>, %gate: !ggml.tensor<[24, 4, n_tokens], f32>,
                   %b: !ggml.tensor<[24, 32], f32>, %sel: !ggml.tensor<[4, n_tokens], i32>)
    -> !ggml.tensor<[24, 4, n_tokens], f32> {
  // CHECK: ggml.add_id %{{.*}}, %{{.*}}, %{{.*}} {name = "ffn_moe_up_biased-0"} : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 32], f32>, !ggml.tensor<[4, n_tokens], i32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  %u = ggml.add_id %up, %b, %sel {name = "ffn_moe_up_biased-0"} : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 32], f32>, !ggml.tensor<[4, n_tokens], i32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  // gpt-oss's alpha 1.702 and limit 7 are the defaults (elided); other values survive.
  // CHECK: ggml.glu swiglu_oai %{{.*}}, %{{.*}} : (
  // CHECK: ggml.glu swiglu_oai %{{.*}}, %{{.*}} {alpha = 1.500000e+00 : f32, limit = 6.000000e+00 : f32} : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 4, n_tokens], f32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  %f = ggml.glu swiglu_oai %gate, %u {alpha = 1.702 : f32, limit = 7.0 : f32} : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 4, n_tokens], f32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  %f2 = ggml.glu swiglu_oai %f, %u {alpha = 1.5 : f32, limit = 6.0 : f32} : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 4, n_tokens], f32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  return %f2 : !ggml.tensor<[24, 4, n_tokens], f32>
}

// -----

// CHECK-LABEL: func.func @sinks
func.func @sinks(%kq: !ggml.tensor<[n_kv, n_tokens, 8], f32>, %mask: !ggml.tensor<[n_kv, n_tokens], f16>,
                 %s: !ggml.tensor<[8], f32>, %q: !ggml.tensor<[64, n_tokens, 8], f32>,
                 %k: !ggml.tensor<[64, n_kv, 2], f16>, %v: !ggml.tensor<[64, n_kv, 2], f16>)
    -> (!ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[64, 8, n_tokens], f32>) {
  // CHECK: ggml.soft_max %{{.*}}, mask %{{.*}}, sinks %{{.*}} {scale = 1.250000e-01 : f32}
  %p = ggml.soft_max %kq, mask %mask, sinks %s {scale = 0.125 : f32} : (!ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[n_kv, n_tokens], f16>, !ggml.tensor<[8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  // CHECK: ggml.flash_attn_ext %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}}, sinks %{{.*}} {prec = 1 : i32, scale = 1.250000e-01 : f32}
  %o = ggml.flash_attn_ext %q, %k, %v, mask %mask, sinks %s {scale = 0.125 : f32, prec = 1 : i32} : (!ggml.tensor<[64, n_tokens, 8], f32>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[n_kv, n_tokens], f16>, !ggml.tensor<[8], f32>) -> !ggml.tensor<[64, 8, n_tokens], f32>
  return %p, %o : !ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[64, 8, n_tokens], f32>
}

// -----

func.func @f(%a: !ggml.tensor<[24, 4, n_tokens], f32>, %b: !ggml.tensor<[24, 32], f32>, %ids: !ggml.tensor<[4, n_tokens], f32>) {
  // expected-error @+1 {{ids must be i32, got f32}}
  %r = ggml.add_id %a, %b, %ids : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[24, 32], f32>, !ggml.tensor<[4, n_tokens], f32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  return
}

// -----

func.func @f(%a: !ggml.tensor<[24, 4, n_tokens], f32>, %b: !ggml.tensor<[16, 32], f32>, %ids: !ggml.tensor<[4, n_tokens], i32>) {
  // expected-error @+1 {{a.ne0 (24) must equal b.ne0 (16) (ggml_add_id)}}
  %r = ggml.add_id %a, %b, %ids : (!ggml.tensor<[24, 4, n_tokens], f32>, !ggml.tensor<[16, 32], f32>, !ggml.tensor<[4, n_tokens], i32>) -> !ggml.tensor<[24, 4, n_tokens], f32>
  return
}

// -----

func.func @f(%a: !ggml.tensor<[48, n_tokens], f32>) {
  // expected-error @+1 {{swiglu_oai needs both halves}}
  %r = ggml.glu swiglu_oai %a : (!ggml.tensor<[48, n_tokens], f32>) -> !ggml.tensor<[24, n_tokens], f32>
  return
}

// -----

func.func @f(%a: !ggml.tensor<[24, n_tokens], f32>) {
  // expected-error @+1 {{SWIGLU_OAI: limit -1.000000 must be >= 0}}
  %r = ggml.glu swiglu_oai %a, %a {limit = -1.0 : f32} : (!ggml.tensor<[24, n_tokens], f32>, !ggml.tensor<[24, n_tokens], f32>) -> !ggml.tensor<[24, n_tokens], f32>
  return
}

// -----

func.func @f(%kq: !ggml.tensor<[n_kv, n_tokens, 8], f32>, %mask: !ggml.tensor<[n_kv, n_tokens], f16>, %s: !ggml.tensor<[2], f32>) {
  // expected-error @+1 {{sinks.ne0 (2) must equal the head count (8) (ggml_soft_max_add_sinks)}}
  %p = ggml.soft_max %kq, mask %mask, sinks %s : (!ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[n_kv, n_tokens], f16>, !ggml.tensor<[2], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%kq: !ggml.tensor<[n_kv, n_tokens, 8], f32>, %s: !ggml.tensor<[8], f32>) {
  // The custom form cannot spell it; the generic one can.
  // expected-error @+1 {{sinks require a mask}}
  %p = "ggml.soft_max"(%kq, %s) <{operandSegmentSizes = array<i32: 1, 0, 1>}> : (!ggml.tensor<[n_kv, n_tokens, 8], f32>, !ggml.tensor<[8], f32>) -> !ggml.tensor<[n_kv, n_tokens, 8], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[64, n_tokens, 8], f32>, %k: !ggml.tensor<[64, n_kv, 2], f16>, %mask: !ggml.tensor<[n_kv, n_tokens], f16>, %s: !ggml.tensor<[8], f16>) {
  // expected-error @+1 {{sinks must be f32, got f16}}
  %o = ggml.flash_attn_ext %q, %k, %k, mask %mask, sinks %s : (!ggml.tensor<[64, n_tokens, 8], f32>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[n_kv, n_tokens], f16>, !ggml.tensor<[8], f16>) -> !ggml.tensor<[64, 8, n_tokens], f32>
  return
}

// -----

func.func @f(%q: !ggml.tensor<[64, n_tokens, 8], f32>, %k: !ggml.tensor<[64, n_kv, 2], f16>, %mask: !ggml.tensor<[n_kv, n_tokens], f16>, %s: !ggml.tensor<[2], f32>) {
  // expected-error @+1 {{sinks.ne0 (2) must equal the head count (8) (ggml_flash_attn_ext_add_sinks)}}
  %o = ggml.flash_attn_ext %q, %k, %k, mask %mask, sinks %s : (!ggml.tensor<[64, n_tokens, 8], f32>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[64, n_kv, 2], f16>, !ggml.tensor<[n_kv, n_tokens], f16>, !ggml.tensor<[2], f32>) -> !ggml.tensor<[64, 8, n_tokens], f32>
  return
}
