// stowage-export-plan: the plan file written with the planner's exporter, atomically; the IR is
// unchanged. (That the bytes equal plan-model's is plan-pipeline-plan-model.test.)
// REQUIRES: mlir, models

// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --gguf-n-batch 256 --gguf-n-ubatch 256 \
// RUN:   --stowage-plan-pipeline="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   -o %t.dir/planned.mlir
// RUN: stowage-opt %t.dir/planned.mlir --stowage-export-plan=output=%t.dir/model.plan -o %t.dir/after.mlir
// RUN: diff %t.dir/planned.mlir %t.dir/after.mlir
// RUN: plan-dump %t.dir/model.plan | FileCheck %s
// No temporary file is left beside the plan.
// RUN: ls %t.dir | FileCheck %s --check-prefix=LS
// CHECK: plan: schema 2, generator
// CHECK: checksum: xxh64 {{[0-9a-f]+}}
// CHECK: model: {{.*}}tiny8-untied-q4_0.gguf (llama,
// CHECK: context: n_ctx 256, n_batch 256, n_ubatch 256, type_k f16, type_v f16, offload_kqv 1, n_layer 8
// CHECK: flags: stowage-opt placement passes {devices = "{{.*}}rpc0.json,{{.*}}", main_gpu = 0 : i64, n_gpu_layers = 4 : i64,
// CHECK: buffer 0: RPC[127.0.0.1:50052] Weights     1001472 bytes
// CHECK: graph pp: {{.*}} 4 splits
// CHECK: graph tg: {{.*}} 4 splits
// LS: after.mlir
// LS-NEXT: model.plan
// LS-NEXT: planned.mlir
// LS-NOT: {{.}}

// With pipeline parallelism (two H200, -ngl 99) the plan records n_copies = 4 and every copy.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --gguf-n-batch 256 --gguf-n-ubatch 256 \
// RUN:   --stowage-plan-pipeline="devices=%registry/h200.json,%registry/h200.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99" \
// RUN:   -o %t.dir/pp.mlir
// RUN: stowage-opt %t.dir/pp.mlir --stowage-export-plan=output=%t.dir/pp.plan -o /dev/null
// RUN: plan-dump %t.dir/pp.plan | FileCheck %s --check-prefix=PP
// PP: scheduler: n_copies 4 (pipeline parallelism)
// PP: buffer 7: CUDA_Host    Compute     1323008 bytes
// PP: input copies: KQ_mask on CPU -> KQ_mask (buffer 7 offset 8192), CPU#KQ_mask#1 (buffer 7 offset 270336), CPU#KQ_mask#2 (buffer 7 offset 532480), CPU#KQ_mask#3 (buffer 7 offset 794624)
// PP: split 1: CUDA0 nodes [1, 161) 3 inputs [inp_embd -> CUDA0#inp_embd#0, CUDA0#inp_embd#1, CUDA0#inp_embd#2, CUDA0#inp_embd#3]
// RUN: rm %t.dir/pp.mlir %t.dir/pp.plan

// A write error names the path; nothing is written.
// RUN: not stowage-opt %t.dir/planned.mlir --stowage-export-plan=output=%t.dir/no-such-dir/model.plan -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WRITE
// WRITE: error: stowage-export-plan: {{.*}}no-such-dir/model.plan
// RUN: not ls %t.dir/no-such-dir
// The output may not be an input: the IR file being run, or the model (both stay whole).
// RUN: cp %t.dir/planned.mlir %t.dir/planned.orig
// RUN: not stowage-opt %t.dir/planned.mlir --stowage-export-plan=output=%t.dir/planned.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SELFIR
// SELFIR: error: stowage-export-plan: output={{.*}}planned.mlir is the input IR file (writing the plan would replace it)
// RUN: cmp %t.dir/planned.mlir %t.dir/planned.orig

// No output, out of order, and an IR whose buffers disagree with the planner's.
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics --stowage-export-plan=output=%t.dir/never.plan
// RUN: not ls %t.dir/never.plan
// RUN: not stowage-opt %t.dir/planned.mlir --stowage-export-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOOUT
// NOOUT: error: stowage-export-plan: no output path (option output=FILE)

// expected-error @below {{stowage-export-plan: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-export-plan: run stowage-plan-memory first (the module's last placement step is stowage-schedule)}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.stage = "stowage-schedule"} {}

// -----

// expected-error @below {{stowage-export-plan: the IR differs from what stowage-plan-memory decides with the recorded options: stowage.buffers must list}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.plan = {devices = "@INPUTS@/manifests/llamacpp-cpu.json"}, stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "CPU"], stowage.n_copies = 1 : i64, stowage.buffers = [], stowage.stage = "stowage-plan-memory"} {
  func.func @pp() {
    place.split 0 on #place.backend<"CPU", 0> {
      place.yield
    }
    return
  }
  func.func @tg() {
    place.split 0 on #place.backend<"CPU", 0> {
      place.yield
    }
    return
  }
}
