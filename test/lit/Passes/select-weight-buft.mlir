// stowage-select-weight-buft: per weight, the buffer type llama.cpp's load_tensors chooses
// (planner::SelectWeightBufts) and the rule as a place.cause code; golden -ngl 4 configuration of
// ../shared/golden/placement/README.md §2 (tiny8-untied-q4_0, RPC0 512 MiB, RPC1 256 MiB, CPU).
// REQUIRES: mlir, models

// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft | FileCheck %s
// llama.cpp: "tensor 'token_embd.weight' (q4_0) (and 10 others) cannot be used with preferred
// buffer type CPU_REPACK, using CPU instead".
// CHECK: module attributes
// CHECK-SAME: stowage.moved = {count = 11 : i64, from = "CPU_REPACK", tensor = "token_embd.weight", to = "CPU", type = "q4_0"}
// CHECK-SAME: stowage.stage = "stowage-select-weight-buft"
// CHECK-LABEL: func.func @pp
// q4_0 MUL_MAT on a CPU layer: the head of the CPU list (CPU_REPACK); GET_ROWS, f32 norms and the
// q6_K output cannot use it and fall back to CPU; offloaded layers take their device's buffer type.
// CHECK-DAG: ggml.weight "blk.0.attn_q.weight" {{.*}}place.buft = #place.buft<"CPU_REPACK", "CPU", extra>, place.cause = #place.cause<"load.head">
// CHECK-DAG: ggml.weight "blk.0.attn_norm.weight" {{.*}}place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.fallback">
// CHECK-DAG: ggml.weight "token_embd.weight" {{.*}}place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.fallback">
// CHECK-DAG: ggml.weight "output.weight" {{.*}}place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.fallback">
// CHECK-DAG: ggml.weight "blk.4.attn_q.weight" {{.*}}place.buft = #place.buft<"RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", default>, place.cause = #place.cause<"load.head">
// CHECK-DAG: ggml.weight "blk.7.ffn_down.weight" {{.*}}place.buft = #place.buft<"RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", default>, place.cause = #place.cause<"load.head">
// CHECK-LABEL: func.func @tg
// CHECK: ggml.weight "blk.0.attn_q.weight" {{.*}}place.buft = #place.buft<"CPU_REPACK", "CPU", extra>

// Overrides (-ot): to CPU selects from the CPU list (llama.cpp #14990: CPU_REPACK for q4_0), to
// another device's buffer type without a support check.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   --stowage-select-weight-buft='overrides=ffn_down=CPU,blk\.0\.attn_q=RPC[127.0.0.1:50053]' | FileCheck %s --check-prefix=OT
// OT-LABEL: func.func @pp
// OT-DAG: ggml.weight "blk.0.attn_q.weight" {{.*}}place.buft = #place.buft<"RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", default>, place.cause = #place.cause<"load.override">
// OT-DAG: ggml.weight "blk.5.ffn_down.weight" {{.*}}place.buft = #place.buft<"CPU_REPACK", "CPU", extra>, place.cause = #place.cause<"load.override.cpu">, place.device = #place.device<"RPC[127.0.0.1:50052]", gpu>

// mmap: a GPU's host buffer type (CUDA_Host, in the CPU list) becomes the mapped CPU buffer.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/cuda-seed.json,%inputs/manifests/llamacpp-cpu.json" \
// RUN:   --stowage-select-weight-buft | FileCheck %s --check-prefix=MMAP
// MMAP: ggml.weight "blk.0.attn_norm.weight" {{.*}}place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.mmap">
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/cuda-seed.json,%inputs/manifests/llamacpp-cpu.json" \
// RUN:   --stowage-select-weight-buft=no-mmap | FileCheck %s --check-prefix=NOMMAP
// NOMMAP: ggml.weight "blk.0.attn_norm.weight" {{.*}}place.buft = #place.buft<"CUDA_Host", "CUDA0", host>, place.cause = #place.cause<"load.fallback">

// Tied output on the CPU list shares token_embd's copy (golden §1: one copy).
// RUN: stowage-opt --import-gguf %models/tiny-tied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/llamacpp-cpu.json" \
// RUN:   --stowage-select-weight-buft | FileCheck %s --check-prefix=TIED
// TIED-LABEL: func.func @pp
// TIED-DAG: ggml.weight "token_embd.weight" {duplicated, {{.*}}place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.dup">
// TIED-DAG: ggml.weight "token_embd.weight" {layer = -1 : i32, place.buft = #place.buft<"CPU", "CPU", default>, place.cause = #place.cause<"load.fallback">

// Bad overrides: one line each.
// RUN: not stowage-opt %s --stowage-select-weight-buft=overrides=ffn 2>&1 | FileCheck %s --check-prefix=BADOT
// BADOT: error: stowage-select-weight-buft: invalid -ot value 'ffn' (expected REGEX=BUFFER_TYPE)
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/llamacpp-cpu.json" \
// RUN:   --stowage-select-weight-buft=overrides=ffn=GPU9 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: stowage-select-weight-buft: unknown buffer type 'GPU9' in -ot 'ffn=GPU9' (available: RPC[127.0.0.1:50052], CPU)
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/llamacpp-cpu.json" \
// RUN:   --stowage-select-weight-buft='overrides=a[=CPU' 2>&1 | FileCheck %s --check-prefix=REGEX
// REGEX: error: stowage-select-weight-buft: invalid regular expression 'a[' in -ot:

// A weight no buffer type of its list accepts (a CPU manifest without GET_ROWS: token_embd).
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%S/Inputs/cpu-no-get-rows.json" \
// RUN:   --stowage-select-weight-buft 2>&1 | FileCheck %s --check-prefix=NOBUFT
// NOBUFT: error: stowage-select-weight-buft: failed to find a compatible buffer type for tensor token_embd.weight (q4_0: CPU_REPACK: CPU does not support GET_ROWS({{.+}}); CPU: CPU does not support GET_ROWS({{.+}}))

// Out of order and an IR that disagrees with the recorded options.
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics --stowage-select-weight-buft

// expected-error @below {{stowage-select-weight-buft: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-select-weight-buft: run stowage-assign-layers first (the module's last placement step is import)}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}} {}

// -----

// expected-error @below {{stowage-select-weight-buft: the IR differs from what stowage-assign-layers decides with the recorded options: layer 4 is on CPU}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "GPU", "CPU", "CPU", "CPU", "CPU"], stowage.stage = "stowage-assign-layers"} {}

// -----

// expected-error @below {{stowage-select-weight-buft: the IR differs from what stowage-assign-layers decides with the recorded options: stowage.layers must list 9 device names}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU"], stowage.stage = "stowage-assign-layers"} {}
