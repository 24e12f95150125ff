// stowage-elide-cont: a CONT whose source's bytes are already in ggml order becomes a ggml.view of
// the memory its chain of views reads; every CONT it keeps says why with remarks=1.
// REQUIRES: mlir
// RUN: stowage-opt %s -split-input-file --stowage-elide-cont | FileCheck %s
// RUN: stowage-opt %s -split-input-file --stowage-elide-cont=remarks=1 -verify-diagnostics -o /dev/null
// The pipeline plan-model and stowage-run compile plans with (buildStowagePipeline) runs it:
// RUN: stowage-opt %s -split-input-file --stowage-pipeline | FileCheck %s

// Token generation's attention output (llama.cpp build_attn_mha: ggml_cont_2d(ggml_permute(kqv,
// 0, 2, 1, 3))): with one token the permuted [head_dim, n_head, 1] is in order, so the copy becomes
// a view of kqv with the CONT's name, backend and cause, and the permute that fed it goes.
// CHECK-LABEL: func.func @tg
// CHECK: %[[KQV:.*]] = ggml.mul_mat
// CHECK-NEXT: %[[V:.*]] = ggml.view %[[KQV]] nb [256, 256, 256] {name = "kqv_merged_cont-0", place.backend = #place.backend<"CPU", 0>, place.cause = #place.cause<"2.sup">} : (!ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[64], f32>
// CHECK-NEXT: ggml.mul_mat %{{.*}}, %[[V]]
// CHECK-NOT: ggml.permute
// CHECK-NOT: ggml.cont
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @tg(%v: !ggml.tensor<[4, 8, 8], f32>, %kq: !ggml.tensor<[4, 1, 8], f32>, %wo: !ggml.tensor<[64, 64], f32>) -> !ggml.tensor<[64], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 1 : i64, ggml.n_tokens = 1 : i64} {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64], f32> {
      %kqv = ggml.mul_mat %v, %kq {name = "kqv-0"} : (!ggml.tensor<[4, 8, 8], f32>, !ggml.tensor<[4, 1, 8], f32>) -> !ggml.tensor<[8, 1, 8], f32>
      %m = ggml.permute %kqv {axes = array<i32: 0, 2, 1, 3>, name = "kqv_merged-0"} : (!ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[8, 8], f32>
      %c = ggml.cont %m {name = "kqv_merged_cont-0", place.backend = #place.backend<"CPU", 0>, place.cause = #place.cause<"2.sup">} : (!ggml.tensor<[8, 8], f32>) -> !ggml.tensor<[64], f32>
      %y = ggml.mul_mat %wo, %c {name = "kqv_out-0"} : (!ggml.tensor<[64, 64], f32>, !ggml.tensor<[64], f32>) -> !ggml.tensor<[64], f32>
      place.yield %y : !ggml.tensor<[64], f32>
    }
    return %r : !ggml.tensor<[64], f32>
  }
}

// -----

// The same CONT over a ubatch of n_tokens: the permuted rows interleave, the copy stays.
// CHECK-LABEL: func.func @pp
// CHECK: ggml.permute
// CHECK-NEXT: ggml.cont
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @pp(%kqv: !ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[64, n_tokens], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 4 : i64, ggml.n_tokens = 4 : i64} {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[64, n_tokens], f32> {
      %m = ggml.permute %kqv {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, n_tokens, 8], f32>) -> !ggml.tensor<[8, 8, n_tokens], f32>
      // expected-remark @+1 {{CONT kept: the source is a strided view (not in ggml order)}}
      %c = ggml.cont %m : (!ggml.tensor<[8, 8, n_tokens], f32>) -> !ggml.tensor<[64, n_tokens], f32>
      place.yield %c : !ggml.tensor<[64, n_tokens], f32>
    }
    return %r : !ggml.tensor<[64, n_tokens], f32>
  }
}

// -----

// One row of a fused projection split by views (phi3's K = cont(view_2d(qkv, n_embd_gqa, n_tokens,
// nb1, n_embd * 4))) at one token: a view of the projection at the row's offset, on a CUDA split
// too. The source view has another user, so it stays.
// CHECK-LABEL: func.func @row
// CHECK: %[[P:.*]] = ggml.view %arg0 nb [384, 384, 384] offset 256
// CHECK-NEXT: %[[K:.*]] = ggml.view %arg0 nb [128, 128, 128] offset 256 {name = "Kcur-0"}
// CHECK-NEXT: ggml.add %[[K]], %[[P]]
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @row(%qkv: !ggml.tensor<[96], f32>) -> !ggml.tensor<[32], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 1 : i64, ggml.n_tokens = 1 : i64} {
    %r = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[32], f32> {
      %v = ggml.view %qkv nb [384, 384, 384] offset 256 : (!ggml.tensor<[96], f32>) -> !ggml.tensor<[32], f32>
      %k = ggml.cont %v {name = "Kcur-0"} : (!ggml.tensor<[32], f32>) -> !ggml.tensor<[32], f32>
      %s = ggml.add %k, %v : (!ggml.tensor<[32], f32>, !ggml.tensor<[32], f32>) -> !ggml.tensor<[32], f32>
      place.yield %s : !ggml.tensor<[32], f32>
    }
    return %r : !ggml.tensor<[32], f32>
  }
}

// -----

// A transposed matrix is out of order (ggml_is_contiguous is false): kept.
// CHECK-LABEL: func.func @transposed
// CHECK: ggml.transpose
// CHECK-NEXT: ggml.cont
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @transposed(%x: !ggml.tensor<[8, 4], f32>) -> !ggml.tensor<[4, 8], f32> {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[4, 8], f32> {
      %t = ggml.transpose %x : (!ggml.tensor<[8, 4], f32>) -> !ggml.tensor<[4, 8], f32>
      // expected-remark @+1 {{CONT kept: the source is a strided view (not in ggml order)}}
      %c = ggml.cont %t : (!ggml.tensor<[4, 8], f32>) -> !ggml.tensor<[4, 8], f32>
      place.yield %c : !ggml.tensor<[4, 8], f32>
    }
    return %r : !ggml.tensor<[4, 8], f32>
  }
}

// -----

// A view of the KV cache in order: kept, since the cache is written again (a later store would
// change what a view reads, not what the copy holds).
// CHECK-LABEL: func.func @kv
// CHECK: ggml.cont
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @kv() -> !ggml.tensor<[32], f16> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 1 : i64, ggml.n_tokens = 1 : i64} {
    %cache = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[2048], f16>
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[32], f16> {
      %v = ggml.view %cache nb [64, 64, 64] : (!ggml.tensor<[2048], f16>) -> !ggml.tensor<[32], f16>
      // expected-remark @+1 {{CONT kept: the source is a view of the KV cache (a later store would change what it reads)}}
      %c = ggml.cont %v : (!ggml.tensor<[32], f16>) -> !ggml.tensor<[32], f16>
      place.yield %c : !ggml.tensor<[32], f16>
    }
    return %r : !ggml.tensor<[32], f16>
  }
}

// -----

// Block element types (strides of whole blocks) are not modelled: kept.
// CHECK-LABEL: func.func @quantized
// CHECK: ggml.cont
module attributes {place.devices = [#place.device<"CPU", cpu>]} {
  func.func @quantized(%x: !ggml.tensor<[64, 2], q8_0>) -> !ggml.tensor<[128], q8_0> {
    %r = place.split 0 on #place.backend<"CPU", 0> -> !ggml.tensor<[128], q8_0> {
      // expected-remark @+1 {{CONT kept: the source's layout is not modelled (block type or reshape of a strided view)}}
      %c = ggml.cont %x : (!ggml.tensor<[64, 2], q8_0>) -> !ggml.tensor<[128], q8_0>
      place.yield %c : !ggml.tensor<[128], q8_0>
    }
    return %r : !ggml.tensor<[128], q8_0>
  }
}

// -----

// Without placement (no backend to ask) and on a backend without a Stowage op table: kept.
// CHECK-LABEL: func.func @unplaced
// CHECK: ggml.cont
func.func @unplaced(%x: !ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[64], f32> {
  %m = ggml.permute %x {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[8, 8], f32>
  // expected-remark @+1 {{CONT kept: not inside a place.split (the IR is not placed)}}
  %c = ggml.cont %m : (!ggml.tensor<[8, 8], f32>) -> !ggml.tensor<[64], f32>
  return %c : !ggml.tensor<[64], f32>
}

// -----

// CHECK-LABEL: func.func @rpc
// CHECK: ggml.cont
module attributes {place.devices = [#place.device<"RPC[host0:50052]", gpu>, #place.device<"CPU", cpu>]} {
  func.func @rpc(%x: !ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[64], f32> {
    %r = place.split 0 on #place.backend<"RPC[host0:50052]", 0> -> !ggml.tensor<[64], f32> {
      %m = ggml.permute %x {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[8, 1, 8], f32>) -> !ggml.tensor<[8, 8], f32>
      // expected-remark @+1 {{CONT kept: backend 'RPC[host0:50052]' has no Stowage op table}}
      %c = ggml.cont %m : (!ggml.tensor<[8, 8], f32>) -> !ggml.tensor<[64], f32>
      place.yield %c : !ggml.tensor<[64], f32>
    }
    return %r : !ggml.tensor<[64], f32>
  }
}

// -----

// A CONT on the CPU of a PERMUTE that another split (ONEDNN, whose memory the CPU reads in place:
// no place.copy) yields: the strides are the permute's, over a ubatch out of order, so the copy
// stays (deepseek2's "fattn_mla-0 (permuted) (cont)" with F32 weights on ONEDNN).
// CHECK-LABEL: func.func @split_result_pp
// CHECK: place.split 1
// CHECK-NEXT: ggml.cont
module attributes {place.devices = [#place.device<"ONEDNN", accel>, #place.device<"CPU", cpu>]} {
  func.func @split_result_pp(%x: !ggml.tensor<[16, n_tokens, 4], f32>) -> !ggml.tensor<[16, 4, n_tokens], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 4 : i64, ggml.n_tokens = 4 : i64} {
    %p = place.split 0 on #place.backend<"ONEDNN", 0> -> !ggml.tensor<[16, 4, n_tokens], f32> {
      %m = ggml.permute %x {axes = array<i32: 0, 2, 1, 3>, name = "fattn_mla-0 (permuted)"} : (!ggml.tensor<[16, n_tokens, 4], f32>) -> !ggml.tensor<[16, 4, n_tokens], f32>
      place.yield %m : !ggml.tensor<[16, 4, n_tokens], f32>
    }
    %r = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[16, 4, n_tokens], f32> {
      // expected-remark @+1 {{CONT kept: the source is a strided view (not in ggml order)}}
      %c = ggml.cont %p : (!ggml.tensor<[16, 4, n_tokens], f32>) -> !ggml.tensor<[16, 4, n_tokens], f32>
      place.yield %c : !ggml.tensor<[16, 4, n_tokens], f32>
    }
    return %r : !ggml.tensor<[16, 4, n_tokens], f32>
  }
}

// -----

// The same at one token: the permute's strides are in order, and the CONT becomes a view of the
// other split's result at its own start.
// CHECK-LABEL: func.func @split_result_tg
// CHECK: %[[P:.*]] = place.split 0
// CHECK: place.split 1
// CHECK-NEXT: ggml.view %[[P]] nb [256, 256, 256] : (!ggml.tensor<[16, 4], f32>) -> !ggml.tensor<[64], f32>
// CHECK-NOT: ggml.cont
module attributes {place.devices = [#place.device<"ONEDNN", accel>, #place.device<"CPU", cpu>]} {
  func.func @split_result_tg(%x: !ggml.tensor<[16, 1, 4], f32>) -> !ggml.tensor<[64], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 1 : i64, ggml.n_tokens = 1 : i64} {
    %p = place.split 0 on #place.backend<"ONEDNN", 0> -> !ggml.tensor<[16, 4], f32> {
      %m = ggml.permute %x {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[16, 1, 4], f32>) -> !ggml.tensor<[16, 4], f32>
      place.yield %m : !ggml.tensor<[16, 4], f32>
    }
    %r = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[64], f32> {
      %c = ggml.cont %p : (!ggml.tensor<[16, 4], f32>) -> !ggml.tensor<[64], f32>
      place.yield %c : !ggml.tensor<[64], f32>
    }
    return %r : !ggml.tensor<[64], f32>
  }
}

// -----

// A split input copy (place.copy) is contiguous whatever its source's strides: the runtime's copy
// writes a strided source into a contiguous tensor, so a CONT of it becomes a view of the copy.
// CHECK-LABEL: func.func @copied
// CHECK: %[[C:.*]] = place.copy
// CHECK-NEXT: ggml.view %[[C]] nb [64, 256, 1024]
module attributes {place.devices = [#place.device<"CUDA0", gpu>, #place.device<"CPU", cpu>]} {
  func.func @copied(%x: !ggml.tensor<[16, 4, 4], f32>) -> !ggml.tensor<[16, 4, 4], f32> attributes {ggml.n_kv = 4 : i64, ggml.n_outputs = 4 : i64, ggml.n_tokens = 4 : i64} {
    %p = place.split 0 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[16, 4, 4], f32> {
      %m = ggml.permute %x {axes = array<i32: 0, 2, 1, 3>} : (!ggml.tensor<[16, 4, 4], f32>) -> !ggml.tensor<[16, 4, 4], f32>
      place.yield %m : !ggml.tensor<[16, 4, 4], f32>
    }
    %r = place.split 1 on #place.backend<"CPU", 1> -> !ggml.tensor<[16, 4, 4], f32> {
      %in = place.copy %p : !ggml.tensor<[16, 4, 4], f32> to #place.backend<"CPU", 1>
      %c = ggml.cont %in : (!ggml.tensor<[16, 4, 4], f32>) -> !ggml.tensor<[16, 4, 4], f32>
      place.yield %c : !ggml.tensor<[16, 4, 4], f32>
    }
    return %r : !ggml.tensor<[16, 4, 4], f32>
  }
}
