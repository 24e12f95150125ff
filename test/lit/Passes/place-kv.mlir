// stowage-place-kv: the KV cache of layer il in its layer's device's default buffer type, or on
// the CPU with -nkvo (planner::PlaceKvCache, llama_kv_cache_init); golden -ngl 4 configuration of
// ../shared/golden/placement/README.md §2 (KV: 4 layers CPU, 3 RPC0, 1 RPC1).
// REQUIRES: mlir, models

// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv | FileCheck %s
// CHECK: offload_kqv = true
// CHECK-SAME: stowage.stage = "stowage-place-kv"
// CHECK-LABEL: func.func @pp
// CHECK-DAG: ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.layer">
// CHECK-DAG: ggml.kv_cache v "cache_v_l3" layer 3 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.layer">
// CHECK-DAG: ggml.kv_cache k "cache_k_l4" layer 4 {place.buft = #place.buft<"RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", default>, place.cause = #place.cause<"kv.layer">
// CHECK-DAG: ggml.kv_cache v "cache_v_l6" layer 6 {place.buft = #place.buft<"RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", default>, place.cause = #place.cause<"kv.layer">
// CHECK-DAG: ggml.kv_cache k "cache_k_l7" layer 7 {place.buft = #place.buft<"RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", default>, place.cause = #place.cause<"kv.layer">
// CHECK-LABEL: func.func @tg
// CHECK: ggml.kv_cache {{.*}}place.buft

// -nkvo: every cache on the CPU, whatever its layer's device.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv=nkvo | FileCheck %s --check-prefix=NKVO
// NKVO: offload_kqv = false
// NKVO-LABEL: func.func @pp
// NKVO-DAG: ggml.kv_cache k "cache_k_l4" layer 4 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.nkvo">, place.device = #place.device<"RPC[127.0.0.1:50052]", gpu>}
// NKVO-DAG: ggml.kv_cache v "cache_v_l7" layer 7 {place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"kv.nkvo">, place.device = #place.device<"RPC[127.0.0.1:50053]", gpu>}
// NKVO-NOT: place.buft = #place.buft<"RPC{{.*}}kv.

// Out of order, and an IR whose weights disagree with the recorded options.
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics --stowage-place-kv

// expected-error @below {{stowage-place-kv: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-place-kv: run stowage-select-weight-buft first (the module's last placement step is stowage-assign-layers)}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.stage = "stowage-assign-layers"} {}

// -----

// The weight's buffer type was edited after stowage-select-weight-buft.
// expected-error @below {{stowage-place-kv: the IR differs from what stowage-select-weight-buft decides with the recorded options: 'blk.0.attn_norm.weight' is in buffer type CPU}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-select-weight-buft"} {
  func.func @pp() {
    %0 = ggml.weight "blk.0.attn_norm.weight" {layer = 0 : i32, place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[256], f32>
    return
  }
}

// -----

// A weight the model does not have.
// expected-error @below {{stowage-place-kv: the IR differs from what stowage-select-weight-buft decides with the recorded options: 'blk.9.attn_norm.weight' is not a weight of the model}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-select-weight-buft"} {
  func.func @pp() {
    %0 = ggml.weight "blk.9.attn_norm.weight" {layer = 9 : i32, place.buft = #place.buft<"CPU", "CPU", default>} : !ggml.tensor<[256], f32>
    return
  }
}
