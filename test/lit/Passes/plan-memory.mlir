// stowage-plan-memory: exact buffers and offsets (planner::PlanMemory). Golden -ngl 4
// configuration of ../shared/golden/placement/README.md §2: model buffers RPC0 0.96, RPC1 0.32,
// CPU_REPACK 1.27, CPU_Mapped 1.38 MiB; KV RPC0 0.38, RPC1 0.12, CPU 0.50 MiB (the byte counts are
// those plan-model exports for it, test/lit/tools/plan-dump/plan-dump.test).
// REQUIRES: mlir, models

// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule --stowage-plan-memory | FileCheck %s
// CHECK: stowage.buffers = [
// CHECK-SAME: {alignment = 32 : i64, buft = "RPC[127.0.0.1:50052]", device = "RPC[127.0.0.1:50052]", mapped = false, name = "RPC[127.0.0.1:50052]", size = 1001472 : i64, usage = "weights"},
// CHECK-SAME: {alignment = 32 : i64, buft = "RPC[127.0.0.1:50053]", device = "RPC[127.0.0.1:50053]", mapped = false, name = "RPC[127.0.0.1:50053]", size = 333824 : i64, usage = "weights"},
// CHECK-SAME: {alignment = 32 : i64, buft = "CPU_REPACK", device = "CPU", mapped = false, name = "CPU_REPACK", size = 1327104 : i64, usage = "weights"},
// CHECK-SAME: {alignment = 32 : i64, buft = "CPU", device = "CPU", mapped = true, name = "CPU_Mapped", size = 1443840 : i64, usage = "weights"},
// CHECK-SAME: {alignment = 32 : i64, buft = "RPC[127.0.0.1:50052]", device = "RPC[127.0.0.1:50052]", mapped = false, name = "RPC[127.0.0.1:50052]", size = 393216 : i64, usage = "kv_cache"},
// CHECK-SAME: {{.*}}size = 131072 : i64, usage = "kv_cache"},
// CHECK-SAME: {alignment = 32 : i64, buft = "CPU", device = "CPU", mapped = false, name = "CPU", size = 524288 : i64, usage = "kv_cache"},
// CHECK-SAME: usage = "compute"
// CHECK-SAME: usage = "output"}]
// CHECK-SAME: stowage.stage = "stowage-plan-memory"
// CHECK-LABEL: func.func @pp
// Weights and caches: their buffer (index into stowage.buffers) and byte offset.
// CHECK: ggml.weight "blk.4.attn_q.weight" {{.*}}stowage.buffer = 0 : i64, stowage.offset = {{[0-9]+}} : i64}
// CHECK: ggml.kv_cache k "cache_k_l4" {{.*}}stowage.buffer = 4 : i64, stowage.offset = 0 : i64}
// Intermediates: the compute arena of their backend (buffer 7 is RPC0's, as plan-dump --nodes shows).
// CHECK: ggml.add {{.*}}name = "l_out-3"{{.*}}stowage.buffer = 7 : i64, stowage.offset = {{[0-9]+}} : i64}
// CHECK-LABEL: func.func @tg
// CHECK: stowage.buffer

// Pipeline parallelism (two H200, -ngl 99: n_copies = 4): the compute buffers hold every copy of
// every graph input and split input (allocated first, never freed), with the bytes plan-model
// prints for this machine (test/lit/tools/plan-model/pipeline-parallel.test works CUDA_Host's
// 1323008 out by hand: 4 * (1024 + 1024 + 262144 + 1024) + 262144); each copy gets its own offset.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --gguf-n-batch 256 --gguf-n-ubatch 256 \
// RUN:   --stowage-assign-layers="devices=%registry/h200.json,%registry/h200.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule -o %t.pp.mlir
// RUN: stowage-opt %t.pp.mlir --stowage-plan-memory | FileCheck %s --check-prefix=PP
// PP: name = "CUDA0", size = 4198400 : i64, usage = "compute"}
// PP-SAME: name = "CUDA1", size = 4202496 : i64, usage = "compute"}
// PP-SAME: name = "CUDA_Host", size = 1323008 : i64, usage = "compute"}
// PP-LABEL: func.func @pp
// PP: name = "CPU#KQ_mask#1", stowage.buffer = 7 : i64, stowage.offset = 270336 : i64}
// PP-NEXT: name = "CPU#KQ_mask#2", stowage.buffer = 7 : i64, stowage.offset = 532480 : i64}
// PP-NEXT: name = "CPU#KQ_mask#3", stowage.buffer = 7 : i64, stowage.offset = 794624 : i64}
// PP: name = "CUDA0#inp_embd#0", stowage.buffer = 5 : i64, stowage.offset = 0 : i64}
// PP-NEXT: name = "CUDA0#inp_embd#1", stowage.buffer = 5 : i64, stowage.offset = 262144 : i64}
// The first node of split 1 comes after CUDA0's copies: 4 * (262144 + 1024 + 262144) = 2101248.
// PP: name = "norm-0"{{.*}}stowage.buffer = 5 : i64, stowage.offset = 2101248 : i64}
// An IR whose recorded n_copies disagrees with the schedule's is refused.
// RUN: sed -e 's|stowage.n_copies = 4|stowage.n_copies = 1|' %t.pp.mlir > %t.pp1.mlir
// RUN: not stowage-opt %t.pp1.mlir --stowage-plan-memory -o /dev/null 2>&1 | FileCheck %s --check-prefix=NCOPIES
// NCOPIES: error: stowage-plan-memory: the IR differs from what stowage-schedule decides with the recorded options: stowage.n_copies must be 4

// Out of order, and an IR whose splits disagree with the planner's schedule.
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics --stowage-plan-memory

// expected-error @below {{stowage-plan-memory: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-plan-memory: run stowage-schedule first (the module's last placement step is stowage-place-kv)}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.stage = "stowage-place-kv"} {}

// -----

// expected-error @below {{stowage-plan-memory: the IR differs from what stowage-schedule decides with the recorded options: there is no func @pp}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-schedule"} {}

// -----

// expected-error @below {{stowage-plan-memory: the IR differs from what stowage-schedule decides with the recorded options: @pp has 1 splits}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-schedule"} {
  func.func @pp() {
    return
  }
}

// -----

// expected-error @below {{stowage-plan-memory: the IR differs from what stowage-schedule decides with the recorded options: split 0 of @pp runs on CPU}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-schedule"} {
  func.func @pp() {
    place.split 0 on #place.backend<"GPU", 0> {
      place.yield
    }
    return
  }
}
