//===- PlanPasses.cpp - the placement pipeline as MLIR passes -------------===//
//
// Each pass: parse its options, require its predecessor (stowage.stage), reconstruct the
// planner's state (PlannerState.h), run its planner step, write its decisions on the IR.

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Compiler/Transforms/PlannerState.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/explain.h"
#include "stowage/planner/fit.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/atomic_file.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEASSIGNLAYERS
#define GEN_PASS_DEF_STOWAGESELECTWEIGHTBUFT
#define GEN_PASS_DEF_STOWAGEPLACEKV
#define GEN_PASS_DEF_STOWAGESCHEDULE
#define GEN_PASS_DEF_STOWAGEPLANMEMORY
#define GEN_PASS_DEF_STOWAGEEXPORTPLAN
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

place::DeviceAttr deviceAttr(MLIRContext *ctx, const planner::DeviceManifest &d) {
  place::DeviceType type = d.type == planner::DeviceType::kGpu     ? place::DeviceType::gpu
                           : d.type == planner::DeviceType::kAccel ? place::DeviceType::accel
                                                                   : place::DeviceType::cpu;
  return place::DeviceAttr::get(ctx, d.name, type);
}

/// Every weight and cache op of `module` with its ModelGraphs::globals index.
SmallVector<std::pair<Operation *, int>> globalOps(ModuleOp module,
                                                   const planner::ModelGraphs &graphs) {
  SmallVector<std::pair<Operation *, int>> out;
  module.walk([&](Operation *op) {
    if (auto w = dyn_cast<ggml::WeightOp>(op))
      out.push_back({op, findGlobal(graphs, w.getGgufName(), w.getLayer().value_or(-1))});
    else if (auto kv = dyn_cast<ggml::KvCacheOp>(op))
      out.push_back({op, findGlobal(graphs, kv.getCacheName(), -1)});
  });
  return out;
}

/// The options of a placement pass whose predecessor `previous` must be the last step run on
/// `module`: the recorded ones (`r`) with the pass's own put in by `setOptions`.
LogicalResult stepOptions(ModuleOp module, PlanStage previous, StringRef pass, RecordedOptions &r,
                          llvm::function_ref<void(RecordedOptions &)> setOptions) {
  if (failed(requireStage(module, previous, pass)))
    return failure();
  FailureOr<RecordedOptions> recorded = readRecordedOptions(module, pass);
  if (failed(recorded))
    return failure();
  r = std::move(*recorded);
  setOptions(r);
  return success();
}

/// The frame of a placement pass that runs planner step `step`: its options (stepOptions) and
/// the planner's state after `step`, reconstructed (PlannerState.h).
FailureOr<std::unique_ptr<PlannerState>>
beginStep(ModuleOp module, PlanStage step, StringRef pass, RecordedOptions &r,
          llvm::function_ref<void(RecordedOptions &)> setOptions) {
  if (failed(stepOptions(module, static_cast<PlanStage>(static_cast<int>(step) - 1), pass, r,
                         setOptions)))
    return failure();
  return reconstructPlannerState(module, step, r, pass);
}

/// -ot patterns of a pass's `overrides` option (planner::ParseTensorOverrides; "" is none).
LogicalResult parseOverrides(ModuleOp module, StringRef pass, StringRef overrides,
                             std::vector<planner::TensorOverride> &out) {
  if (overrides.empty())
    return success();
  auto parsed = planner::ParseTensorOverrides(overrides.str());
  if (!parsed.ok()) {
    emitError(module.getLoc()) << pass << ": " << parsed.status().message();
    return failure();
  }
  out = std::move(*parsed);
  return success();
}

/// Records the options `step` ran with and makes it the module's last step.
void endStep(ModuleOp module, PlanStage step, const RecordedOptions &r) {
  writeRecordedOptions(module, r);
  setStage(module, step);
}

/// The module's model (the planner's state at import: the GGUF and its graphs) and the devices
/// of `r`, for the choices made before placing (--fit, --cpu-moe).
struct ModelAndMachine {
  std::unique_ptr<PlannerState> model;
  std::vector<planner::DeviceManifest> machine;
};
FailureOr<ModelAndMachine> modelAndMachine(ModuleOp module, const RecordedOptions &r,
                                           StringRef pass) {
  auto st = reconstructPlannerState(module, PlanStage::kImported, r, pass);
  if (failed(st))
    return failure();
  FailureOr<std::vector<planner::DeviceManifest>> machine = makeMachine(module, r, pass);
  if (failed(machine))
    return failure();
  return ModelAndMachine{std::move(*st), std::move(*machine)};
}

/// cpu-moe / n-cpu-moe (plan-model --cpu-moe / --n-cpu-moe): planner::AddCpuMoeOverrides on
/// `r.placement` for the module's model and `r`'s devices; its warning (a model without experts)
/// is emitted when `warn`. Errors (emitted, prefixed with `pass`): n-cpu-moe below 0, those of
/// the model and the devices.
LogicalResult addCpuMoe(ModuleOp module, StringRef pass, bool cpuMoe, int nCpuMoe, bool warn,
                        RecordedOptions &r) {
  if (nCpuMoe < 0) {
    emitError(module.getLoc()) << pass << ": n-cpu-moe=" << nCpuMoe << " must be 0 or more";
    return failure();
  }
  if (!cpuMoe && nCpuMoe == 0)
    return success();
  FailureOr<ModelAndMachine> mm = modelAndMachine(module, r, pass);
  if (failed(mm))
    return failure();
  planner::AddCpuMoeOverrides(mm->model->graphs.hp, mm->machine, cpuMoe, nCpuMoe, &r.placement,
                              [&](const planner::PlanMessage &m) {
                                if (warn)
                                  emitWarning(module.getLoc()) << pass << ": " << m.text;
                              });
  return success();
}

/// n-gpu-layers=-1 of stowage-assign-layers (plan-model --fit): planner::FitPlanLayers on the
/// module's model and context with the options `r`, keeping `fitTargetMiB` free on each GPU;
/// its line is a remark. Errors are emitted on the module's location prefixed with
/// `pass`.
FailureOr<int> fitLayers(ModuleOp module, StringRef pass, double fitTargetMiB,
                         const RecordedOptions &r) {
  // plan-model's --fit-target range.
  if (!(fitTargetMiB >= 0 && fitTargetMiB <= 1048576)) {
    emitError(module.getLoc()) << pass
                               << ": fit-target=" << llvm::formatv("{0}", fitTargetMiB).str()
                               << " must be in [0, 1048576] MiB";
    return failure();
  }
  FailureOr<ModelAndMachine> mm = modelAndMachine(module, r, pass);
  if (failed(mm))
    return failure();
  const PlannerState &s = *mm->model;
  Result<int> n = planner::FitPlanLayers(*s.gguf, s.graphs.cfg, mm->machine, r.placement,
                                         static_cast<uint64_t>(fitTargetMiB * 1048576.0),
                                         s.graphs.hp, [&](const planner::PlanMessage &m) {
                                           if (m.kind == planner::PlanMessageKind::kFitSearched)
                                             emitRemark(module.getLoc())
                                                 << pass << ": --fit: " << m.text;
                                         });
  if (!n.ok()) {
    emitError(module.getLoc()) << pass << ": " << n.status().message();
    return failure();
  }
  return *n;
}

struct AssignLayersPass : impl::StowageAssignLayersBase<AssignLayersPass> {
  using StowageAssignLayersBase::StowageAssignLayersBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    auto mode = planner::ParseSplitMode(splitMode.getValue());
    if (!mode.ok()) {
      emitError(module.getLoc()) << pass << ": " << mode.status().message();
      return signalPassFailure();
    }
    auto ts = planner::ParseTensorSplit(tensorSplit.getValue());
    if (!ts.ok()) {
      emitError(module.getLoc()) << pass << ": " << ts.status().message();
      return signalPassFailure();
    }
    // llama.cpp's -ngl values (2026), as plan-model reads them: <= -2 is every layer and the
    // output; -1 is "auto", plan-model's --fit: the largest count that fits.
    const int ngl = nGpuLayers <= -2 ? planner::kAllGpuLayers : static_cast<int>(nGpuLayers);
    const bool fit = nGpuLayers == -1;
    std::vector<planner::TensorOverride> ots;
    if (fit && failed(parseOverrides(module, pass, overrides, ots)))
      return signalPassFailure();
    auto setOptions = [&](RecordedOptions &o) {
      o.devices = devices;
      o.registry_dirs.clear();
      SmallVector<StringRef> dirs;
      StringRef(registry).split(dirs, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
      for (StringRef dir : dirs)
        o.registry_dirs.push_back(dir.str());
      o.placement.n_gpu_layers = ngl;
      o.placement.split_mode = *mode;
      o.placement.tensor_split = *ts;
      o.placement.main_gpu = mainGpu;
      if (fit) { // the later steps' options, which the fit places with
        o.placement.overrides = ots;
        o.placement.no_host = noHost;
        o.placement.no_repack = noRepack;
        o.placement.use_mmap = !noMmap;
        o.placement.offload_kqv = !nkvo;
        o.placement.op_offload = !noOpOffload;
      }
    };
    RecordedOptions r;
    if (failed(stepOptions(module, PlanStage::kImported, pass, r, setOptions)))
      return signalPassFailure();
    if (fit) {
      RecordedOptions fitOptions = r;
      if (failed(addCpuMoe(module, pass, cpuMoe, nCpuMoe, /*warn=*/false, fitOptions)))
        return signalPassFailure();
      FailureOr<int> n = fitLayers(module, pass, fitTarget, fitOptions);
      if (failed(n))
        return signalPassFailure();
      r.placement.n_gpu_layers = *n;
    }
    auto st = reconstructPlannerState(module, PlanStage::kLayers, r, pass);
    if (failed(st))
      return signalPassFailure();
    const planner::DeviceSet &ds = (*st)->outcome.devices;
    const planner::LayerMap &lm = (*st)->outcome.layers;
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    SmallVector<Attribute> devs, layers;
    for (const planner::DeviceManifest &d : ds.devices)
      devs.push_back(deviceAttr(ctx, d));
    for (int d : lm.device)
      layers.push_back(b.getStringAttr(ds.devices[d].name));
    module->setAttr(place::kDevicesAttr, b.getArrayAttr(devs));
    module->setAttr(kLayersAttr, b.getArrayAttr(layers));
    for (auto [op, gi] : globalOps(module, (*st)->graphs)) {
      if (gi < 0)
        continue;
      const planner::GlobalTensor &g = (*st)->graphs.globals[gi];
      // llama.cpp load_tensors: input-layer weights stay on the CPU list.
      int dev = g.layer_class == planner::LayerClass::kInput || g.layer < 0 ||
                        g.layer >= static_cast<int>(lm.device.size())
                    ? ds.cpu
                    : lm.device[g.layer];
      op->setAttr(place::kDeviceAttr, devs[dev]);
    }
    endStep(module, PlanStage::kLayers, r);
  }
};

struct SelectWeightBuftPass : impl::StowageSelectWeightBuftBase<SelectWeightBuftPass> {
  using StowageSelectWeightBuftBase::StowageSelectWeightBuftBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    std::vector<planner::TensorOverride> ots;
    if (failed(parseOverrides(module, pass, overrides, ots)))
      return signalPassFailure();
    RecordedOptions r;
    if (failed(stepOptions(module, PlanStage::kLayers, pass, r, [&](RecordedOptions &o) {
          o.placement.overrides = ots;
          o.placement.no_host = noHost;
          o.placement.no_repack = noRepack;
          o.placement.use_mmap = !noMmap;
        })))
      return signalPassFailure();
    if (failed(addCpuMoe(module, pass, cpuMoe, nCpuMoe, /*warn=*/true, r)))
      return signalPassFailure();
    auto st = reconstructPlannerState(module, PlanStage::kWeights, r, pass);
    if (failed(st))
      return signalPassFailure();
    const PlannerState &s = **st;
    // SelectWeightBufts' --explain records follow the weights in globals order.
    std::vector<int> explainOf(s.graphs.globals.size(), -1);
    size_t next = s.weight_explain_begin;
    for (size_t gi = 0; gi < s.graphs.globals.size(); ++gi)
      if (s.graphs.globals[gi].kind == planner::TensorKind::kWeight &&
          next < s.outcome.placement.explain.size())
        explainOf[gi] = static_cast<int>(next++);
    MLIRContext *ctx = &getContext();
    for (auto [op, gi] : globalOps(module, s.graphs)) {
      if (gi < 0 || !isa<ggml::WeightOp>(op) || s.outcome.placement.global_buft[gi] < 0)
        continue;
      op->setAttr(place::kBuftAttr,
                  getBufferTypeAttr(ctx, s.outcome.placement, s.outcome.placement.global_buft[gi]));
      if (explainOf[gi] < 0)
        continue;
      // The place dialect's load.* cause code of the rule SelectWeightBufts recorded.
      const planner::ExplainEntry &e = s.outcome.placement.explain[explainOf[gi]];
      StringRef cause = planner::ExplainRuleCode(e.code);
      if (!cause.starts_with("load.")) {
        emitError(module.getLoc()) << pass << ": the explain record of weight '" << e.subject
                                   << "' has no weight rule code ('" << cause << "')";
        return signalPassFailure();
      }
      op->setAttr(place::kCauseAttr, place::CauseAttr::get(ctx, cause));
    }
    if (s.outcome.moved.count > 0) {
      Builder b(ctx);
      module->setAttr(
          kMovedAttr,
          b.getDictionaryAttr({b.getNamedAttr("count", b.getI64IntegerAttr(s.outcome.moved.count)),
                               b.getNamedAttr("tensor", b.getStringAttr(s.outcome.moved.tensor)),
                               b.getNamedAttr("type", b.getStringAttr(s.outcome.moved.type)),
                               b.getNamedAttr("from", b.getStringAttr(s.outcome.moved.from)),
                               b.getNamedAttr("to", b.getStringAttr(s.outcome.moved.to))}));
    }
    endStep(module, PlanStage::kWeights, r);
  }
};

struct PlaceKvPass : impl::StowagePlaceKvBase<PlaceKvPass> {
  using StowagePlaceKvBase::StowagePlaceKvBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    RecordedOptions r;
    auto st = beginStep(module, PlanStage::kKvCache, pass, r,
                        [&](RecordedOptions &o) { o.placement.offload_kqv = !nkvo; });
    if (failed(st))
      return signalPassFailure();
    const PlannerState &s = **st;
    MLIRContext *ctx = &getContext();
    for (auto [op, gi] : globalOps(module, s.graphs)) {
      if (gi < 0 || !isa<ggml::KvCacheOp>(op) || s.outcome.placement.global_buft[gi] < 0)
        continue;
      op->setAttr(place::kBuftAttr,
                  getBufferTypeAttr(ctx, s.outcome.placement, s.outcome.placement.global_buft[gi]));
      op->setAttr(place::kCauseAttr, place::CauseAttr::get(ctx, nkvo ? "kv.nkvo" : "kv.layer"));
    }
    endStep(module, PlanStage::kKvCache, r);
  }
};

struct SchedulePass : impl::StowageScheduleBase<SchedulePass> {
  using StowageScheduleBase::StowageScheduleBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    RecordedOptions r;
    auto st = beginStep(module, PlanStage::kScheduled, pass, r,
                        [&](RecordedOptions &o) { o.placement.op_offload = !noOpOffload; });
    if (failed(st))
      return signalPassFailure();
    PlannerState &s = **st;
    // The functions are rebuilt from the scheduled graphs by the importer (one builder of split
    // regions and copies); what earlier passes wrote on weights and caches is carried over.
    OwningOpRef<ModuleOp> fresh =
        importModelGraphs(&getContext(), s.graphs, module.getLoc(), &s.outcome.placement);
    if (!fresh) {
      emitError(module.getLoc()) << pass << ": the scheduled graphs could not be imported";
      return signalPassFailure();
    }
    std::map<std::pair<std::string, int>, DictionaryAttr> carried;
    auto key = [](Operation *op) -> std::pair<std::string, int> {
      if (auto w = dyn_cast<ggml::WeightOp>(op))
        return {w.getGgufName().str(), w.getLayer().value_or(-1)};
      if (auto kv = dyn_cast<ggml::KvCacheOp>(op))
        return {kv.getCacheName().str(), -1};
      return {"", 0};
    };
    for (auto [op, gi] : globalOps(module, s.graphs))
      carried[key(op)] = op->getDiscardableAttrDictionary();
    for (StringRef name : {"pp", "tg"})
      if (auto old = module.lookupSymbol<func::FuncOp>(name))
        old.erase();
    for (auto func : llvm::make_early_inc_range(fresh->getOps<func::FuncOp>())) {
      func->remove();
      module.getBody()->push_back(func);
    }
    for (auto [op, gi] : globalOps(module, s.graphs)) {
      auto it = carried.find(key(op));
      if (it == carried.end())
        continue;
      for (NamedAttribute a : it->second)
        if (!op->hasAttr(a.getName()))
          op->setAttr(a.getName(), a.getValue());
    }
    module->setAttr(kNCopiesAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                                   s.outcome.placement.n_copies));
    // The module's description of the graphs follows the rebuilt functions (an edited
    // stowage.import changes n_ctx / n_ubatch; the functions are then rebuilt for the new values).
    for (StringRef attr : {"ggml.arch", "ggml.n_layer", "ggml.n_ctx", "ggml.n_ubatch"})
      if (Attribute a = fresh->getOperation()->getAttr(attr))
        module->setAttr(attr, a);
    endStep(module, PlanStage::kScheduled, r);
  }
};

StringRef usageName(planner::BufferUsage u) {
  switch (u) {
  case planner::BufferUsage::kWeights:
    return "weights";
  case planner::BufferUsage::kKvCache:
    return "kv_cache";
  case planner::BufferUsage::kCompute:
    return "compute";
  case planner::BufferUsage::kOutput:
    return "output";
  }
  return "?";
}

struct PlanMemoryPass : impl::StowagePlanMemoryBase<PlanMemoryPass> {
  using StowagePlanMemoryBase::StowagePlanMemoryBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    RecordedOptions r;
    auto st = beginStep(module, PlanStage::kMemory, pass, r, [](RecordedOptions &) {});
    if (failed(st))
      return signalPassFailure();
    const PlannerState &s = **st;
    Builder b(&getContext());
    SmallVector<Attribute> buffers;
    for (const planner::PlannedBuffer &pb : s.outcome.memory.buffers) {
      NamedAttrList d;
      d.append("name", b.getStringAttr(pb.name));
      d.append("buft", b.getStringAttr(s.outcome.placement.bufts[pb.buft].name));
      d.append("device", b.getStringAttr(s.outcome.placement.devices[pb.device].name));
      d.append("usage", b.getStringAttr(usageName(pb.usage)));
      d.append("size", b.getI64IntegerAttr(static_cast<int64_t>(pb.size)));
      d.append("alignment", b.getI64IntegerAttr(static_cast<int64_t>(pb.alignment)));
      d.append("mapped", b.getBoolAttr(pb.mapped));
      buffers.push_back(d.getDictionary(&getContext()));
    }
    module->setAttr(kBuffersAttr, b.getArrayAttr(buffers));
    auto place = [&](Operation *op, int buffer, uint64_t offset) {
      if (buffer < 0)
        return;
      op->setAttr(kBufferAttr, b.getI64IntegerAttr(buffer));
      op->setAttr(kOffsetAttr, b.getI64IntegerAttr(static_cast<int64_t>(offset)));
    };
    for (auto [fname, g] : {std::pair<StringRef, const planner::Graph *>{"pp", &s.graphs.pp},
                            std::pair<StringRef, const planner::Graph *>{"tg", &s.graphs.tg}}) {
      auto func = module.lookupSymbol<func::FuncOp>(fname);
      if (!func)
        continue;
      for (auto [op, id] : matchGraphTensors(func, *g)) {
        const planner::Tensor &t = g->tensors[id];
        if (t.global >= 0)
          place(op, s.graphs.globals[t.global].buffer, s.graphs.globals[t.global].offset);
        else
          place(op, t.buffer, t.offset);
      }
    }
    endStep(module, PlanStage::kMemory, r);
  }
};

/// "" when `path` does not exist, is empty, or is a Stowage plan (file identifier "STWP" at byte
/// 4); else what it is, for an error message.
std::string existingNonPlan(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  char head[8] = {};
  in.read(head, sizeof head);
  const std::streamsize got = in.gcount();
  if (got == 0)
    return "";
  if (got == 8 && std::memcmp(head + 4, "STWP", 4) == 0)
    return "";
  return "exists and is not a Stowage plan";
}

struct ExportPlanPass : impl::StowageExportPlanBase<ExportPlanPass> {
  using StowageExportPlanBase::StowageExportPlanBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef pass = getArgument();
    if (output.empty()) {
      emitError(module.getLoc()) << pass << ": no output path (option output=FILE)";
      return signalPassFailure();
    }
    RecordedOptions r;
    if (failed(stepOptions(module, PlanStage::kMemory, pass, r, [](RecordedOptions &) {})))
      return signalPassFailure();
    auto st = reconstructPlannerState(module, PlanStage::kMemory, r, pass);
    if (failed(st))
      return signalPassFailure();
    const PlannerState &s = **st;
    // The plan must not replace an input: the model, or the IR file being run.
    if (SameFile(output, s.gguf->path())) {
      emitError(module.getLoc()) << pass << ": output=" << output
                                 << " is the model file (writing the plan would replace it)";
      return signalPassFailure();
    }
    if (auto file = module.getLoc()->findInstanceOf<FileLineColLoc>();
        file && SameFile(output, file.getFilename().str())) {
      emitError(module.getLoc()) << pass << ": output=" << output
                                 << " is the input IR file (writing the plan would replace it)";
      return signalPassFailure();
    }
    // The location above names the file the IR was first parsed from, not necessarily the one
    // being run (bytecode, IR printed with debug info): whatever the input, an existing file is
    // replaced only when it is an earlier plan (or empty).
    if (std::string what = existingNonPlan(output); !what.empty()) {
      emitError(module.getLoc())
          << pass << ": output=" << output << " " << what
          << " (writing the plan would replace it; remove it or choose another path)";
      return signalPassFailure();
    }
    // planner::Plan's last checks: the fit of the whole plan, GPUs without reported memory.
    for (const std::string &w : planner::UnreportedMemoryWarnings(s.outcome))
      emitWarning(module.getLoc()) << pass << ": " << w;
    if (Status fit = planner::CheckPlanFit(*s.gguf, s.outcome); !fit.ok()) {
      if (!noFitCheck) {
        emitError(module.getLoc()) << pass << ": " << fit.message();
        return signalPassFailure();
      }
      emitWarning(module.getLoc())
          << pass << ": " << fit.message() << " (written anyway: no-fit-check)";
    }
    std::string flags;
    llvm::raw_string_ostream os(flags);
    os << "stowage-opt placement passes " << module->getAttr(kPlanOptionsAttr);
    const std::vector<uint8_t> bytes =
        planner::SerializePlan(*s.gguf, s.graphs, s.outcome.placement, s.outcome.memory, flags);
    if (Status w = WriteFileAtomic(output, bytes); !w.ok()) {
      emitError(module.getLoc()) << pass << ": " << w.message();
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};

/// Options of --stowage-plan-pipeline: those of every pass.
struct PlanPipelineOptions : PassPipelineOptions<PlanPipelineOptions> {
  Option<std::string> devices{*this, "devices",
                              llvm::cl::desc("registry keys or manifest files, with a CPU")};
  Option<std::string> registry{*this, "registry",
                               llvm::cl::desc("registry folders, comma-separated")};
  Option<int> nGpuLayers{*this, "n-gpu-layers", llvm::cl::desc("-ngl (-1: --fit)"),
                         llvm::cl::init(0)};
  Option<double> fitTarget{*this, "fit-target",
                           llvm::cl::desc("n-gpu-layers=-1: MiB kept free on each GPU (-fitt)"),
                           llvm::cl::init(1024)};
  Option<std::string> splitMode{*this, "split-mode", llvm::cl::desc("-sm none|layer|row"),
                                llvm::cl::init("layer")};
  Option<std::string> tensorSplit{*this, "tensor-split", llvm::cl::desc("-ts, e.g. 3/1")};
  Option<int> mainGpu{*this, "main-gpu", llvm::cl::desc("-mg"), llvm::cl::init(0)};
  Option<std::string> overrides{*this, "overrides", llvm::cl::desc("-ot REGEX=BUFT[,...]")};
  Option<bool> noHost{*this, "no-host", llvm::cl::desc("--no-host"), llvm::cl::init(false)};
  Option<bool> noRepack{*this, "no-repack", llvm::cl::desc("--no-repack"), llvm::cl::init(false)};
  Option<bool> noMmap{*this, "no-mmap", llvm::cl::desc("--no-mmap"), llvm::cl::init(false)};
  Option<bool> cpuMoe{*this, "cpu-moe", llvm::cl::desc("--cpu-moe"), llvm::cl::init(false)};
  Option<int> nCpuMoe{*this, "n-cpu-moe", llvm::cl::desc("--n-cpu-moe"), llvm::cl::init(0)};
  Option<bool> nkvo{*this, "nkvo", llvm::cl::desc("-nkvo"), llvm::cl::init(false)};
  Option<bool> noOpOffload{*this, "no-op-offload", llvm::cl::desc("--no-op-offload"),
                           llvm::cl::init(false)};
  Option<std::string> output{*this, "output",
                             llvm::cl::desc("plan file to write (none: no export)")};
  Option<bool> noFitCheck{*this, "no-fit-check",
                          llvm::cl::desc("--no-fit-check: write a plan that does not fit"),
                          llvm::cl::init(false)};
};

} // namespace

void registerStowagePlanPipeline() {
  PassPipelineRegistration<PlanPipelineOptions>(
      "stowage-plan-pipeline",
      "All placement passes in order (assign-layers, select-weight-buft, place-kv, schedule, "
      "plan-memory, and export-plan when output is given)",
      [](OpPassManager &pm, const PlanPipelineOptions &o) {
        StowageAssignLayersOptions a;
        a.devices = o.devices;
        a.registry = o.registry;
        a.nGpuLayers = o.nGpuLayers;
        a.splitMode = o.splitMode;
        a.tensorSplit = o.tensorSplit;
        a.mainGpu = o.mainGpu;
        // n-gpu-layers=-1 fits with every step's options.
        a.fitTarget = o.fitTarget;
        a.overrides = o.overrides;
        a.noHost = o.noHost;
        a.noRepack = o.noRepack;
        a.noMmap = o.noMmap;
        a.nkvo = o.nkvo;
        a.noOpOffload = o.noOpOffload;
        a.cpuMoe = o.cpuMoe;
        a.nCpuMoe = o.nCpuMoe;
        pm.addPass(createStowageAssignLayers(a));
        StowageSelectWeightBuftOptions w;
        w.overrides = o.overrides;
        w.noHost = o.noHost;
        w.noRepack = o.noRepack;
        w.noMmap = o.noMmap;
        w.cpuMoe = o.cpuMoe;
        w.nCpuMoe = o.nCpuMoe;
        pm.addPass(createStowageSelectWeightBuft(w));
        StowagePlaceKvOptions k;
        k.nkvo = o.nkvo;
        pm.addPass(createStowagePlaceKv(k));
        StowageScheduleOptions sc;
        sc.noOpOffload = o.noOpOffload;
        pm.addPass(createStowageSchedule(sc));
        pm.addPass(createStowagePlanMemory());
        if (!o.output.empty()) {
          StowageExportPlanOptions e;
          e.output = o.output;
          e.noFitCheck = o.noFitCheck;
          pm.addPass(createStowageExportPlan(e));
        }
      });
}

} // namespace stowage::compiler
