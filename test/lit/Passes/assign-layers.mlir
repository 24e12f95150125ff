// stowage-assign-layers: model devices and llama.cpp's layer map (planner::MakeDeviceSet,
// planner::AssignLayers) on the IR, for the golden configurations of
// ../shared/golden/placement/README.md §2 (tiny8-untied-q4_0, two RPC devices of 512 and 256 MiB
// free, the CPU; n_ctx 256).
// REQUIRES: mlir, models

// -ngl 4: layers 0-3 CPU, 4-6 RPC0, 7 RPC1, output CPU.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=4" \
// RUN:   | FileCheck %s
// CHECK: module attributes
// CHECK-SAME: place.devices = [#place.device<"RPC[127.0.0.1:50052]", gpu>, #place.device<"RPC[127.0.0.1:50053]", gpu>, #place.device<"CPU", cpu>]
// CHECK-SAME: stowage.layers = ["CPU", "CPU", "CPU", "CPU", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50053]", "CPU"]
// CHECK-SAME: n_gpu_layers = 4
// CHECK-SAME: stowage.stage = "stowage-assign-layers"
// CHECK-LABEL: func.func @pp
// CHECK-DAG: ggml.weight "token_embd.weight" {{.*}}place.device = #place.device<"CPU", cpu>
// CHECK-DAG: ggml.weight "blk.3.attn_q.weight" {{.*}}place.device = #place.device<"CPU", cpu>
// CHECK-DAG: ggml.weight "blk.4.attn_q.weight" {{.*}}place.device = #place.device<"RPC[127.0.0.1:50052]", gpu>
// CHECK-DAG: ggml.weight "blk.7.ffn_down.weight" {{.*}}place.device = #place.device<"RPC[127.0.0.1:50053]", gpu>
// CHECK-DAG: ggml.weight "output.weight" {{.*}}place.device = #place.device<"CPU", cpu>
// CHECK-DAG: ggml.kv_cache k "cache_k_l6" {{.*}}place.device = #place.device<"RPC[127.0.0.1:50052]", gpu>
// CHECK-LABEL: func.func @tg
// CHECK: ggml.weight "blk.7.ffn_down.weight" {{.*}}place.device = #place.device<"RPC[127.0.0.1:50053]", gpu>

// -ngl 99: 6/9 equals 512/768 exactly, so layer 6 goes to the next device (upper_bound).
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99" \
// RUN:   | FileCheck %s --check-prefix=NGL99
// NGL99: stowage.layers = ["RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]"]

// -ngl 99 -sm none -mg 1: every layer on RPC1, the only model device.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99 split-mode=none main-gpu=1" \
// RUN:   | FileCheck %s --check-prefix=SMNONE
// SMNONE: place.devices = [#place.device<"RPC[127.0.0.1:50053]", gpu>, #place.device<"CPU", cpu>]
// SMNONE-SAME: stowage.layers = ["RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]"]

// -ts 1/3 with -ngl 99: a quarter of the 9 layers on RPC0 (0.25 < f: layers 0-2), the rest on RPC1.
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=99 tensor-split=1/3" \
// RUN:   | FileCheck %s --check-prefix=TS
// TS: stowage.layers = ["RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]", "RPC[127.0.0.1:50053]"]

// Bad option values: one line each, nothing printed.
// RUN: not stowage-opt %s --stowage-assign-layers="devices=cpu split-mode=diagonal" 2>&1 | FileCheck %s --check-prefix=BADSM
// BADSM: error: stowage-assign-layers: invalid split mode 'diagonal' (expected none, layer or row)
// RUN: not stowage-opt %s --stowage-assign-layers="devices=cpu tensor-split=3/x" 2>&1 | FileCheck %s --check-prefix=BADTS
// BADTS: error: stowage-assign-layers: invalid tensor split '3/x': item 2 'x' is not a non-negative number (expected proportions such as 3,1 or 3/1)
// RUN: not stowage-opt %s --stowage-assign-layers="devices=cpu tensor-split=-1" 2>&1 | FileCheck %s --check-prefix=NEGTS
// NEGTS: error: stowage-assign-layers: invalid tensor split '-1': item 1 '-1' is not a non-negative number

// The planner's errors on an imported model: no device, no CPU, -mg out of range, -ts too long.
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers 2>&1 | FileCheck %s --check-prefix=NODEV
// NODEV: error: stowage-assign-layers: no devices (option devices=KEY|MANIFEST,...)
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers="devices=%inputs/manifests/rpc0.json" 2>&1 | FileCheck %s --check-prefix=NOCPU
// NOCPU: error: stowage-assign-layers: the device list '{{.*}}rpc0.json' has no CPU device (the scheduler's last backend)
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json split-mode=none main-gpu=2" 2>&1 | FileCheck %s --check-prefix=MG
// MG: error: stowage-assign-layers: invalid value for main_gpu: 2 (available devices: 2; valid: 0 to 1 (RPC[127.0.0.1:50052], RPC[127.0.0.1:50053]))
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers="devices=%inputs/manifests/rpc0.json,%inputs/manifests/rpc1.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=9 tensor-split=1/1/1" 2>&1 | FileCheck %s --check-prefix=TSLONG
// TSLONG: error: stowage-assign-layers: -ts has 3 values but there are only 2 model devices

// n-gpu-layers=-1 (llama.cpp's -ngl auto, plan-model --fit; plan-pipeline-plan-model.test compares
// the plans): two RPC devices with 3 MiB free, fit-target 0: 2 layers, recorded as the count.
// RUN: %python -c "import json; j = json.load(open('%inputs/manifests/rpc0.json')); j['memory']['free'] = 3 << 20; json.dump(j, open('%t.rpc0-3.json', 'w'))"
// RUN: %python -c "import json; j = json.load(open('%inputs/manifests/rpc1.json')); j['memory']['free'] = 3 << 20; json.dump(j, open('%t.rpc1-3.json', 'w'))"
// RUN: stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 \
// RUN:   --stowage-assign-layers="devices=%t.rpc0-3.json,%t.rpc1-3.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=-1 fit-target=0" \
// RUN:   2>&1 | FileCheck %s --check-prefix=FIT
// FIT: remark: stowage-assign-layers: --fit: -ngl 2 fits (of 8 layers + output)
// FIT: stowage.layers = ["CPU", "CPU", "CPU", "CPU", "CPU", "CPU", "RPC[127.0.0.1:50052]", "RPC[127.0.0.1:50053]", "CPU"]
// FIT-SAME: n_gpu_layers = 2
// The fit's errors: a target out of plan-model's range, a GPU whose manifest reports no memory.
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers="devices=%t.rpc0-3.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=-1 fit-target=-3" 2>&1 | FileCheck %s --check-prefix=FITTARGET
// FITTARGET: error: stowage-assign-layers: fit-target=-3.00 must be in [0, 1048576] MiB
// RUN: %python -c "import json; j = json.load(open('%inputs/manifests/rpc0.json')); j['memory'] = {'total': 0, 'free': 0}; json.dump(j, open('%t.rpc0-00.json', 'w'))"
// RUN: not stowage-opt --import-gguf %models/tiny8-untied-q4_0.gguf --gguf-n-ctx 256 --stowage-assign-layers="devices=%t.rpc0-00.json,%inputs/manifests/llamacpp-cpu.json n-gpu-layers=-1" 2>&1 | FileCheck %s --check-prefix=FITUNREPORTED
// FITUNREPORTED: error: stowage-assign-layers: --fit: device RPC[127.0.0.1:50052] did not report memory ({{.*}}rpc0-00.json: memory.total 0), so --fit cannot size it

// Every other diagnostic, on hand-written modules (@MODELS@ and @INPUTS@ are substituted).
// RUN: sed -e 's|@MODELS@|%models|g' -e 's|@INPUTS@|%inputs|g' %s > %t.mlir
// RUN: stowage-opt %t.mlir -split-input-file -verify-diagnostics \
// RUN:   --stowage-assign-layers="devices=%inputs/manifests/missing.json n-gpu-layers=4"

// expected-error @below {{stowage-assign-layers: the module was not imported with --import-gguf (no stowage.import)}}
module {}

// -----

// expected-error @below {{stowage-assign-layers: the module is already placed (its last placement step is stowage-schedule); start from a fresh import}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}, stowage.stage = "stowage-schedule"} {}

// -----

// expected-error @below {{stowage-assign-layers: stowage.import must have gguf (string), n_ctx, n_batch, n_ubatch, n_seq_max, type_k and type_v (integers in [0, 2^32))}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256}} {}

// -----

// expected-error @below {{no-such-model.gguf: cannot open: No such file or directory}}
module attributes {stowage.import = {gguf = "@MODELS@/no-such-model.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}} {}

// -----

// expected-error @below {{missing.json}}
module attributes {stowage.import = {gguf = "@MODELS@/tiny8-untied-q4_0.gguf", n_ctx = 256, n_batch = 2048, n_ubatch = 512, n_seq_max = 1, type_k = 1, type_v = 1}} {}
