// stowage-schedule: ggml_backend_sched's passes on @pp and @tg (planner::ScheduleGraph);
// each function is rebuilt as place.split regions with place.copy split inputs. Golden -ngl 4
// configuration of ../shared/golden/placement/README.md §2: 4 splits with bs=256 and bs=1, and
// the prompt graph's split lines as llama.cpp's GGML_SCHED_DEBUG=1 prints them.
// REQUIRES: mlir, models

// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule | FileCheck %s
// CHECK: stowage.stage = "stowage-schedule"
// CHECK-LABEL: func.func @pp
// What earlier passes wrote on weights is kept.
// CHECK: ggml.weight "blk.4.attn_q.weight" {layer = 4 : i32, place.buft = #place.buft<"RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", default>, place.cause = #place.cause<"load.head">, place.device = #place.device<"RPC[127.0.0.1:50052]", gpu>}
// CHECK: place.split 0 on #place.backend<"CPU", 2>
// CHECK: place.split 1 on #place.backend<"RPC[127.0.0.1:50052]", 0>
// CHECK-NEXT: place.copy {{.*}} {name = "RPC[127.0.0.1:50052]#ffn_out-3#0"}
// CHECK-NEXT: place.copy {{.*}} {name = "RPC[127.0.0.1:50052]#ffn_inp-3#0"}
// CHECK-NEXT: place.copy {{.*}} {name = "RPC[127.0.0.1:50052]#inp_pos#0"}
// CHECK-NEXT: place.copy {{.*}} {name = "RPC[127.0.0.1:50052]#KQ_mask#0"}
// The residual ADD of the last CPU layer is pulled onto RPC0 by the "expand up" pass.
// CHECK-NEXT: ggml.add {{.*}} {name = "l_out-3", place.backend = #place.backend<"RPC[127.0.0.1:50052]", 0>, place.cause = #place.cause<"2.sup">}
// CHECK: place.split 2 on #place.backend<"RPC[127.0.0.1:50053]", 1>
// CHECK: place.split 3 on #place.backend<"CPU", 2>
// CHECK-NEXT: place.copy {{.*}} {name = "CPU#norm#0"}
// CHECK-NOT: place.split
// CHECK-LABEL: func.func @tg
// CHECK-COUNT-4: place.split
// CHECK-NOT: place.split

// The split lines, as llama.cpp printed them for this configuration.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule --place-print-splits -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=SPLITS --strict-whitespace
// SPLITS: # @pp: 4 splits (n_tokens = 256, n_kv = 256)
// SPLITS: ## SPLIT #0: CPU # 0 inputs
// SPLITS: ## SPLIT #1: RPC[127.0.0.1:50052] # 4 inputs: [ffn_out-3 ( 256K)] [ffn_inp-3 ( 256K)] [inp_pos (   1K)] [KQ_mask ( 256K)]
// SPLITS: ## SPLIT #2: RPC[127.0.0.1:50053] # 5 inputs: [norm-7 ( 256K)] [inp_pos (   1K)] [KQ_mask ( 256K)] [inp_out_ids (   1K)] [l_out-6 ( 256K)]
// SPLITS: ## SPLIT #3: CPU # 1 inputs: [norm ( 256K)]
// SPLITS: # @tg: 4 splits

// -nkvo with full offload: llama.cpp's 19 prompt splits (attention pinned to the CPU).
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-plan-pipeline="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99 nkvo" \
// RUN:   --place-print-splits -o /dev/null | FileCheck %s --check-prefix=NKVO
// NKVO: # @pp: 19 splits

// Pipeline parallelism (planner::PipelineParallelism, llama.cpp FEB25): two H200 (caps async and
// events) with -ngl 99 give n_copies = 4. The module records stowage.n_copies; every graph input a
// node reads gets place.copy ops numbered 1..3 on its own backend (the CPU) at function level (the
// input itself is copy 0), and every split input copies 1..3 right after copy 0, the one the
// nodes read. No op uses copies 1..3.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --gguf-n-batch 256 --gguf-n-ubatch 256 \
// RUN:   --stowage-assign-layers="devices=%registry/h200.json,%registry/h200.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule | FileCheck %s --check-prefix=PP
// PP: stowage.n_copies = 4 : i64
// PP-LABEL: func.func @pp
// PP: %[[TOK:.*]] = ggml.input "inp_tokens"
// PP: place.copy %[[TOK]] : !ggml.tensor<[n_tokens], i32> to #place.backend<"CPU", 2> {copy = 1 : i32, name = "CPU#inp_tokens#1"}
// PP-NEXT: place.copy %[[TOK]] : !ggml.tensor<[n_tokens], i32> to #place.backend<"CPU", 2> {copy = 2 : i32, name = "CPU#inp_tokens#2"}
// PP-NEXT: place.copy %[[TOK]] : !ggml.tensor<[n_tokens], i32> to #place.backend<"CPU", 2> {copy = 3 : i32, name = "CPU#inp_tokens#3"}
// PP: place.split 1 on #place.backend<"CUDA0", 0>
// PP-NEXT: %[[E0:.*]] = place.copy %[[EMBD:.*]] : {{.*}} to #place.backend<"CUDA0", 0> {name = "CUDA0#inp_embd#0"}
// PP-NEXT: place.copy %[[EMBD]] : {{.*}} {copy = 1 : i32, name = "CUDA0#inp_embd#1"}
// PP-NEXT: place.copy %[[EMBD]] : {{.*}} {copy = 2 : i32, name = "CUDA0#inp_embd#2"}
// PP-NEXT: place.copy %[[EMBD]] : {{.*}} {copy = 3 : i32, name = "CUDA0#inp_embd#3"}
// PP: ggml.rms_norm %[[E0]] {{.*}}name = "norm-0"
// PP: place.split 2 on #place.backend<"CUDA1", 1>
// PP-LABEL: func.func @tg
// PP: {copy = 3 : i32, name = "CPU#inp_tokens#3"}
// -ngl 8 (output layer on the CPU): n_copies = 1, no numbered copies.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --gguf-n-batch 256 --gguf-n-ubatch 256 \
// RUN:   --stowage-assign-layers="devices=%registry/h200.json,%registry/h200.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=8" \
// RUN:   --stowage-select-weight-buft --stowage-place-kv --stowage-schedule | FileCheck %s --check-prefix=NOPP
// NOPP: stowage.n_copies = 1 : i64
// NOPP-NOT: copy =
// NOPP: name = "CUDA0#inp_embd#0"
// NOPP-NOT: copy =

// Out of order, and an IR whose caches disagree with the recorded options.
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics --stowage-schedule

// expected-error @below {{stowage-schedule: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-schedule: run stowage-place-kv first (the module's last placement step is stowage-select-weight-buft)}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.stage = "stowage-select-weight-buft"} {}

// -----

// expected-error @below {{stowage-schedule: the IR differs from what stowage-place-kv decides with the recorded options: 'cache_k_l0' is in buffer type CPU}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-place-kv"} {
  func.func @pp() {
    %0 = ggml.kv_cache k "cache_k_l0" layer 0 {place.buft = #place.buft<"CPU_REPACK", "CPU", extra>} : !ggml.tensor<[65536], f16>
    return
  }
}
