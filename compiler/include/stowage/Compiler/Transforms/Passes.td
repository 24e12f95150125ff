//===- Passes.td - Stowage compiler passes ---------------------*- tablegen -*-===//

#ifndef STOWAGE_COMPILER_TRANSFORMS_PASSES_TD
#define STOWAGE_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PlacePrintSplits : Pass<"place-print-splits", "::mlir::ModuleOp"> {
  let summary = "Print each function's splits as GGML_SCHED_DEBUG=1 does";
  let description = [{
    A visibility pass: for every function with place.split ops it prints, to stdout, a header
    `# @<function>: <n> splits (n_tokens = N, n_kv = K)` and then, per split, the line ggml's
    scheduler prints at GGML_SCHED_DEBUG level 1 (ggml_backend_sched_print_assignments,
    reference/llamacpp-placement.md §3.5):

      ## SPLIT #<i>: <backend> # <n> inputs: [<name> (<size>)] ...

    preceded by an empty line, where the inputs are the split's place.copy ops in order, named by
    their source tensor, and <size> is ggml's fmt_size of the source's bytes (integer MiB "%zuM"
    from 1 MiB up, else integer KiB "%zuK", right-aligned in 5 characters). Sizes are evaluated
    with n_tokens, n_kv and n_outputs from the options, else from the function's ggml.n_tokens,
    ggml.n_kv and ggml.n_outputs (the worst case llama.cpp reserves), n_ctx from the module's
    ggml.n_ctx, and kv_head = 0. The IR is not changed.
  }];
  let options = [
    Option<"nTokens", "n-tokens", "int64_t", "-1",
           "n_tokens for sizes (default: the function's ggml.n_tokens)">,
    Option<"nKv", "n-kv", "int64_t", "-1",
           "n_kv for sizes (default: the function's ggml.n_kv)">,
    Option<"nOutputs", "n-outputs", "int64_t", "-1",
           "n_outputs for sizes (default: the function's ggml.n_outputs)">,
  ];
}


//===----------------------------------------------------------------------===//
// The placement pipeline: each pass calls one step of the planner (planner/) and
// records its decisions on the IR. The planner's whole-model state is reconstructed from the
// module at each pass (PlannerState.h): graphs from the GGUF file named by stowage.import, the
// earlier steps re-run with the options they recorded in stowage.plan, and their outcome checked
// against the attributes they wrote (an IR edited in between is an error, not silently replanned).
//===----------------------------------------------------------------------===//

def StowageAssignLayers : Pass<"stowage-assign-layers", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Model devices and layer map (planner::MakeDeviceSet, planner::AssignLayers)";
  let description = [{
    First placement pass, on a module imported with `stowage-opt --import-gguf` (it needs the
    module's `stowage.import` record). Builds the device set from `devices` (registry keys or
    manifest files, comma-separated, with one CPU device; llama.cpp's model device order) and the
    layer map of llama_model::load_tensors (i_gpu_start = max(n_layer - ngl, 0), -ts or free
    memory fractions, upper_bound on cumulative fractions; reference/llamacpp-placement.md §2.3).
    Writes `place.devices` (scheduler order), `stowage.layers` (device name per layer 0..n_layer,
    the last being the output layer), `place.device` on every weight (its layer's device; the
    CPU for input-layer weights) and KV cache op, and its options in `stowage.plan`.
    `n-gpu-layers=-1` is llama.cpp's -ngl auto, plan-model's --fit: the layer count is the largest
    that keeps `fit-target` MiB free on every GPU (planner::FitPlanLayers, the search plan-model
    makes), placed with this pass's options and the later passes' options given here (overrides,
    no-host, no-repack, no-mmap, cpu-moe, n-cpu-moe, nkvo, no-op-offload; --stowage-plan-pipeline
    passes them), and is
    reported as a remark ("--fit: -ngl N fits (of L layers + output)"); <= -2 is every layer.
    Errors: a module without `stowage.import` or already placed, a bad option value, an unknown
    device or unreadable manifest, no CPU device, -mg out of range, -ts longer than the model
    devices, the fit's errors (a GPU without reported memory, "even -ngl 0 does not fit").
  }];
  let options = [
    Option<"devices", "devices", "std::string", "\"\"",
           "devices of the machine: registry keys or manifest files, comma-separated, with a CPU">,
    Option<"registry", "registry", "std::string", "\"\"",
           "registry folders searched for device keys before the shipped one, comma-separated "
           "(one string: MLIR 19's list-option parser loops forever on an unbalanced bracket)">,
    Option<"nGpuLayers", "n-gpu-layers", "int", "0", "layers offloaded to the GPUs (-ngl)">,
    Option<"splitMode", "split-mode", "std::string", "\"layer\"",
           "how layers are split across GPUs: none, layer or row (-sm)">,
    Option<"tensorSplit", "tensor-split", "std::string", "\"\"",
           "fraction of layers per model device, e.g. 3/1 (-ts; '/' separates)">,
    Option<"mainGpu", "main-gpu", "int", "0", "the model device used with split-mode=none (-mg)">,
    Option<"fitTarget", "fit-target", "double", "1024",
           "n-gpu-layers=-1: MiB kept free on each GPU (plan-model --fit-target)">,
    Option<"overrides", "overrides", "std::string", "\"\"",
           "n-gpu-layers=-1: stowage-select-weight-buft's overrides, for the fit">,
    Option<"noHost", "no-host", "bool", "false",
           "n-gpu-layers=-1: stowage-select-weight-buft's no-host, for the fit">,
    Option<"noRepack", "no-repack", "bool", "false",
           "n-gpu-layers=-1: stowage-select-weight-buft's no-repack, for the fit">,
    Option<"noMmap", "no-mmap", "bool", "false",
           "n-gpu-layers=-1: stowage-select-weight-buft's no-mmap, for the fit">,
    Option<"nkvo", "nkvo", "bool", "false", "n-gpu-layers=-1: stowage-place-kv's nkvo, for the fit">,
    Option<"noOpOffload", "no-op-offload", "bool", "false",
           "n-gpu-layers=-1: stowage-schedule's no-op-offload, for the fit">,
    Option<"cpuMoe", "cpu-moe", "bool", "false",
           "n-gpu-layers=-1: stowage-select-weight-buft's cpu-moe, for the fit">,
    Option<"nCpuMoe", "n-cpu-moe", "int", "0",
           "n-gpu-layers=-1: stowage-select-weight-buft's n-cpu-moe, for the fit">,
  ];
}

def StowageSelectWeightBuft : Pass<"stowage-select-weight-buft", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Buffer type of every weight (planner::SelectWeightBufts)";
  let description = [{
    Runs after stowage-assign-layers. Per weight, as llama.cpp's load_tensors: overrides first,
    else the first buffer type of its layer's list whose device supports the consuming op with
    the weight in it, then the mmap rule and tied-tensor sharing (reference §2.4–2.5).
    Writes `place.buft` and `place.cause` on every weight (load.head: the head of its list;
    load.fallback: a later entry; load.override / load.override.cpu: an -ot pattern; load.mmap:
    a host buffer type replaced by the mapping; load.dup: shares the copy of a tied tensor),
    `stowage.moved` (llama.cpp's "cannot be used with preferred buffer type" summary) on the
    module when a weight moved, and its options in `stowage.plan`.
    Errors: run out of order, a bad override (not REGEX=BUFT, unknown buffer type, bad regex), a
    weight without a compatible buffer type, an IR whose layer map differs from the recorded
    options', n-cpu-moe below 0. `cpu-moe` / `n-cpu-moe` append plan-model's --cpu-moe /
    --n-cpu-moe overrides (planner::AddCpuMoeOverrides, with its warning for a model without
    experts) to `overrides`, and are recorded as overrides.
  }];
  let options = [
    // A plain string, split by planner::ParseTensorOverrides as llama.cpp splits -ot: MLIR 19's
    // ListOption parser loops forever on an unbalanced '(' or '[' in a value (a bad regex).
    Option<"overrides", "overrides", "std::string", "\"\"",
           "tensor buffer-type overrides REGEX=BUFT[,REGEX=BUFT...], first match wins (-ot)">,
    Option<"noHost", "no-host", "bool", "false", "no GPU host buffer type in the CPU list">,
    Option<"noRepack", "no-repack", "bool", "false", "no CPU repack (extra) buffer types">,
    Option<"noMmap", "no-mmap", "bool", "false", "load weights instead of mapping the file">,
    Option<"cpuMoe", "cpu-moe", "bool", "false",
           "every MoE expert weight on the CPU (--cpu-moe: overrides after the given ones)">,
    Option<"nCpuMoe", "n-cpu-moe", "int", "0",
           "the MoE expert weights of the first N layers on the CPU (--n-cpu-moe)">,
  ];
}

def StowagePlaceKv : Pass<"stowage-place-kv", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Buffer type of every KV cache tensor (planner::PlaceKvCache)";
  let description = [{
    Runs after stowage-select-weight-buft. cache_k_l<il> / cache_v_l<il> go to the default
    buffer type of layer il's device, or to the CPU with `nkvo` (llama_kv_cache_init,
    reference §2.6). Writes `place.buft` and `place.cause` (kv.layer or kv.nkvo) on every
    ggml.kv_cache op and its option in `stowage.plan`.
    Errors: run out of order, an IR whose weight buffer types differ from the recorded options'.
  }];
  let options = [
    Option<"nkvo", "nkvo", "bool", "false",
           "keep the KV cache and the attention on the CPU (-nkvo, --no-kv-offload)">,
  ];
}

def StowageSchedule : Pass<"stowage-schedule", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Backends and splits of @pp and @tg (planner::ScheduleGraph)";
  let description = [{
    Runs after stowage-place-kv. The five passes of ggml_backend_sched on each graph (with op
    offload, the ROPE exception, the norm and -nkvo pins; reference §3). Each function is
    rebuilt from the scheduled graph: every node and input gets `place.backend` and
    `place.cause` (ggml's cause codes), each split is a `place.split` region in order and each
    split input a `place.copy` op named `<backend>#<source>#0`. Weight and cache attributes
    written by the earlier passes are kept. Records its option in `stowage.plan`.
    Errors: run out of order, an IR whose KV placement differs from the recorded options', the
    scheduler's errors (a pre-allocated tensor no backend can run).
  }];
  let options = [
    Option<"noOpOffload", "no-op-offload", "bool", "false",
           "do not offload large-batch ops whose weights are in host memory">,
  ];
}

def StowagePlanMemory : Pass<"stowage-plan-memory", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Buffers with exact sizes and every tensor's offset (planner::PlanMemory)";
  let description = [{
    Runs after stowage-schedule. Weights laid out per buffer with the buffer type's alignment
    (mapped CPU buffers cover their file range), KV exact, compute arenas from the liveness of the
    worst-case graphs, the output buffer (reference §2.5–2.7). Writes `stowage.buffers` on the
    module (per buffer: name, buft, device, usage, size in bytes, alignment, mapped) and
    `stowage.buffer` / `stowage.offset` (bytes) on every weight, cache and node that owns memory.
    The step is planner::PlaceModelStep(kMemory), PlaceModel's: it also computes each GPU's share
    of the -sm row split buffers (planner::RowSplitShares, for the export's fit check).
    Errors: run out of order, an IR whose splits differ from the planner's schedule, a buffer
    larger than its buffer type's max_size (as plan-model: "buffer '...' needs N bytes but buffer
    type B of device D allocates at most M bytes per buffer").
  }];
}

def StowageExportPlan : Pass<"stowage-export-plan", "::mlir::ModuleOp"> {
  let dependentDialects = ["::stowage::ggml::GGMLDialect", "::stowage::place::PlaceDialect",
                           "::mlir::func::FuncDialect"];
  let summary = "Write the plan file (planner::SerializePlan, atomically)";
  let description = [{
    Runs after stowage-plan-memory. Serializes the placed, scheduled and memory-planned model
    with the planner's exporter (the same bytes plan-model writes for the same configuration,
    except the recorded command line, which is the module's stowage.plan record) and writes it
    to `output` atomically (temporary file + rename). The IR is not changed.
    As plan-model (planner::Plan), a plan that does not fit its devices' memory is refused
    (planner::CheckPlanFit: "<model>: does not fit: device ..."); with `no-fit-check` it is written
    with that line as a warning ("... (written anyway: no-fit-check)"). GPUs holding bytes of the
    plan whose manifest reports no memory are warned about (planner::UnreportedMemoryWarnings).
    Errors: no output path, run out of order, an IR whose buffers differ from the planner's, a
    plan that does not fit, a write error (naming the path).
  }];
  let options = [
    Option<"output", "output", "std::string", "\"\"", "path of the plan file to write">,
    Option<"noFitCheck", "no-fit-check", "bool", "false",
           "write the plan even when it does not fit a device's memory (plan-model --no-fit-check)">,
  ];
}

#endif // STOWAGE_COMPILER_TRANSFORMS_PASSES_TD
