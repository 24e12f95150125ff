//===- PlaceOps.td - the placement dialect ---------------------*- tablegen -*-===//
//
// `place` records where llama.cpp's loader and ggml_backend_sched would put each weight and each
// node, why (the rule that decided, with llama.cpp's cause codes), and how the graph is cut into
// splits with their input copies (reference/llamacpp-placement.md §2.4, §3).
//
//===----------------------------------------------------------------------===//

#ifndef STOWAGE_DIALECT_PLACE_IR_PLACEOPS_TD
#define STOWAGE_DIALECT_PLACE_IR_PLACEOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Place_Dialect : Dialect {
  let name = "place";
  let cppNamespace = "::stowage::place";
  let summary = "devices, buffer types, backends, placement causes, splits and split inputs";
  let description = [{
    Attributes name the objects of ggml-backend (device, buffer type, backend) and the rule that
    placed a tensor or a node. The placement passes attach them to ggml ops as discardable
    attributes, which this dialect verifies:
      * `place.buft = #place.buft<...>` on a ggml.weight or ggml.kv_cache: its buffer type;
      * `place.backend = #place.backend<...>` on a node: the backend that runs it;
      * `place.cause = #place.cause<"...">` on either: the rule that decided;
      * `place.device = #place.device<...>` on any op, `place.devices = [#place.device<...>, ...]`
        on the module: the machine the plan is for.
    Ops cut a function into splits (`place.split`, a run of nodes on one backend) and copy the
    inputs a split's backend cannot read (`place.copy`), as ggml_backend_sched_split_graph does.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
  private:
    void registerAttributes();
  public:
  }];
}

//===----------------------------------------------------------------------===//
// Enums and attributes
//===----------------------------------------------------------------------===//

def Place_DeviceTypeEnum : I32EnumAttr<"DeviceType", "ggml_backend_dev_type", [
    I32EnumAttrCase<"cpu", 0>,
    I32EnumAttrCase<"gpu", 1>,
    I32EnumAttrCase<"igpu", 2>,
    I32EnumAttrCase<"accel", 3>]> {
  let cppNamespace = "::stowage::place";
  let genSpecializedAttr = 0;
}

def Place_BuftKindEnum : I32EnumAttr<"BuftKind", "role of a buffer type on its device", [
    I32EnumAttrCase<"default_", 0, "default">,
    I32EnumAttrCase<"host", 1>,
    I32EnumAttrCase<"split", 2>,
    I32EnumAttrCase<"extra", 3>,
    I32EnumAttrCase<"mapped", 4>]> {
  let cppNamespace = "::stowage::place";
  let genSpecializedAttr = 0;
}

class Place_Attr<string name, string attrMnemonic> : AttrDef<Place_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Place_DeviceAttr : Place_Attr<"Device", "device"> {
  let summary = "a ggml-backend device: name and type";
  let description = [{
    A device as ggml-backend names it (`CPU`, `CUDA0`, `BLAS`, `RPC[host:port]`) and its type
    (ggml_backend_dev_type: cpu, gpu, igpu, accel).
    Example: `#place.device<"CUDA0", gpu>`
  }];
  let parameters = (ins StringRefParameter<"device name">:$name,
                        EnumParameter<Place_DeviceTypeEnum>:$type);
  let assemblyFormat = "`<` $name `,` $type `>`";
  let genVerifyDecl = 1;
}

def Place_BufferTypeAttr : Place_Attr<"BufferType", "buft"> {
  let summary = "a buffer type: name, device, kind";
  let description = [{
    A ggml buffer type (buft) by its name (`CPU`, `CPU_REPACK`, `CUDA0`, `CUDA_Host`,
    `CUDA0_Split`, `CPU_Mapped`), the device that owns it and its role on that device:
    `default` (the device's buffer type), `host` (pinned host memory of a GPU), `split` (row
    split, -sm row), `extra` (CPU repack / AMX), `mapped` (a buffer wrapping the mmap'ed file).
    Example: `#place.buft<"CUDA_Host", "CUDA0", host>`
  }];
  let parameters = (ins StringRefParameter<"buffer type name">:$name,
                        StringRefParameter<"owning device name">:$device,
                        EnumParameter<Place_BuftKindEnum>:$kind);
  let assemblyFormat = "`<` $name `,` $device `,` $kind `>`";
  let genVerifyDecl = 1;
}

def Place_BackendAttr : Place_Attr<"Backend", "backend"> {
  let summary = "a scheduler backend: name and priority";
  let description = [{
    One backend of ggml_backend_sched: its name (the device name, e.g. `CUDA0`, `CPU`) and its
    priority, the index in the scheduler's backend list (0 is the highest; the CPU is last).
    Example: `#place.backend<"CUDA0", 0>`
  }];
  let parameters = (ins StringRefParameter<"backend name">:$name, "int32_t":$priority);
  let assemblyFormat = "`<` $name `,` $priority `>`";
  let genVerifyDecl = 1;
}

def Place_CauseAttr : Place_Attr<"Cause", "cause"> {
  let summary = "the rule that placed a tensor or node";
  let description = [{
    The scheduler's cause codes (ggml-backend.cpp SET_CAUSE, §3.2 of the placement notes):
      `1.dst` the node's own buffer; `1.vsrc` its view source's buffer; `1.inp` graph input →
      CPU; `1.wgt<i>` the backend of its first weight source src[i]; `1.off` a host weight's op
      offloaded to a higher-priority backend; `2.sup` expanded from a neighbour (pass 2);
      `3.best` the backend supporting most sources; `3.upg` upgraded to a higher-priority backend
      sharing the buffer type; `4.vsrc` a view takes its source's backend; `4.cur` a source takes
      its consumer's backend; `usr` pinned by the caller (ggml_backend_sched_set_tensor_backend),
      in particular by llama.cpp's graph callback: `pin.norm` (a layer's norm node on the layer's
      device when n_tokens < 32 or at full offload) and `pin.nkvo` (kqv_merged_cont on the CPU
      with -nkvo).
    and the loader's rules for weights and caches (llama.cpp load_tensors, llama_kv_cache):
      `load.head` first buffer type of the layer's list; `load.fallback` a later entry of the
      list because the earlier ones cannot run the consuming op (counted as "cannot be used with
      preferred buffer type"); `load.override` a -ot pattern; `load.override.cpu` a -ot pattern to
      CPU resolved through the CPU list; `load.mmap` a host buffer type replaced by the CPU
      because the weight is mapped; `load.dup` a DUPLICATED tensor (tied output, rope_freqs)
      shared within one buffer type; `kv.layer` the KV cache on its layer's device; `kv.nkvo`
      the KV cache kept on the CPU (-nkvo).
    Example: `#place.cause<"1.wgt0">`
  }];
  let parameters = (ins StringRefParameter<"cause code">:$code);
  let assemblyFormat = "`<` $code `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

class Place_Op<string mnemonic, list<Trait> traits = []>
    : Op<Place_Dialect, mnemonic, traits>;

def Place_SplitOp : Place_Op<"split", [
    RecursiveMemoryEffects, SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "a split: a run of nodes that one backend computes";
  let description = [{
    The nodes of split number `index` (ggml_backend_sched's splits, in graph order), computed on
    `backend`. The body uses values defined before the split directly when the backend can read
    their buffers, and through `place.copy` (its split inputs) otherwise; `place.yield` returns
    the values later splits or the function use.
    Verifier: indices increase along a block, splits do not nest, copies inside go to the split's
    backend, yielded types match the results.
    Example:
      %r = place.split 1 on #place.backend<"CUDA0", 0> -> !ggml.tensor<[64, n_tokens], f32> {
        %x = place.copy %emb : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
        %n = ggml.rms_norm %x {eps = 1.0e-05 : f32} : ...
        place.yield %n : !ggml.tensor<[64, n_tokens], f32>
      }
  }];
  let arguments = (ins I32Attr:$index, Place_BackendAttr:$backend);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $index `on` qualified($backend) (`->` type($results)^)? $body attr-dict
  }];
  let hasVerifier = 1;
}

def Place_YieldOp : Place_Op<"yield", [Pure, Terminator, ReturnLike, HasParent<"SplitOp">]> {
  let summary = "returns values of a split";
  let description = [{
    Terminates a place.split and returns its operands as the split's results.
    Example: `place.yield %a, %b : !ggml.tensor<[64], f32>, !ggml.tensor<[64], f32>`
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Place_CopyOp : Place_Op<"copy", [Pure, SameOperandsAndResultType]> {
  let summary = "a split input: a copy of a tensor to the split's backend";
  let description = [{
    Copies `source` into a tensor of the same type in a buffer of `backend`, because that
    backend cannot read the buffer the source lives in (ggml_backend_sched pass 5). With pipeline
    parallelism (n_copies > 1) `copy` numbers the copy; llama.cpp names it
    `<backend>#<source name>#<copy>` (e.g. `CUDA0#attn_norm-0#0`), kept in `name`.
    Example:
      %c = place.copy %x : !ggml.tensor<[64, n_tokens], f32> to #place.backend<"CUDA0", 0>
             {name = "CUDA0#inp_embd#0"}
  }];
  let arguments = (ins AnyType:$source, Place_BackendAttr:$backend,
                       DefaultValuedAttr<I32Attr, "0">:$copy);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$source `:` type($result) `to` qualified($backend) attr-dict";
  let hasVerifier = 1;
}

#endif // STOWAGE_DIALECT_PLACE_IR_PLACEOPS_TD
