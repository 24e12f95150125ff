//===- PlannerState.cpp - the planner's state, reconstructed from a module ===//

#include "stowage/Compiler/Transforms/PlannerState.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/registry.h"

using namespace mlir;

namespace stowage::compiler {

StringRef stageName(PlanStage stage) {
  switch (stage) {
  case PlanStage::kImported:
    return "import";
  case PlanStage::kLayers:
    return "stowage-assign-layers";
  case PlanStage::kWeights:
    return "stowage-select-weight-buft";
  case PlanStage::kKvCache:
    return "stowage-place-kv";
  case PlanStage::kScheduled:
    return "stowage-schedule";
  case PlanStage::kMemory:
    return "stowage-plan-memory";
  }
  return "?";
}

namespace {

/// The stage recorded on `module`; kImported when none (or unknown: requireStage reports it).
PlanStage currentStage(ModuleOp module) {
  auto s = module->getAttrOfType<StringAttr>(kStageAttr);
  for (PlanStage st : {PlanStage::kLayers, PlanStage::kWeights, PlanStage::kKvCache,
                       PlanStage::kScheduled, PlanStage::kMemory})
    if (s && s.getValue() == stageName(st))
      return st;
  return PlanStage::kImported;
}

} // namespace

FailureOr<RecordedOptions> readRecordedOptions(ModuleOp module, StringRef pass) {
  RecordedOptions r;
  auto d = module->getAttrOfType<DictionaryAttr>(kPlanOptionsAttr);
  if (!d)
    return r;
  // Every entry has the type writeRecordedOptions gives it; an edited record of another shape is
  // an error naming the key (it used to be skipped, truncated or, for overrides, to crash).
  auto bad = [&](StringRef key, StringRef expected) -> FailureOr<RecordedOptions> {
    emitError(module.getLoc()) << pass << ": " << kPlanOptionsAttr << "." << key << " must be "
                               << expected << ", found " << d.get(key);
    return failure();
  };
  planner::PlacementOptions &o = r.placement;
  if (Attribute a = d.get("devices")) {
    auto s = dyn_cast<StringAttr>(a);
    if (!s)
      return bad("devices", "a string");
    r.devices = s.str();
  }
  if (Attribute a = d.get("registry")) {
    auto arr = dyn_cast<ArrayAttr>(a);
    if (!arr || !llvm::all_of(arr, [](Attribute e) { return isa<StringAttr>(e); }))
      return bad("registry", "an array of strings");
    for (Attribute e : arr)
      r.registry_dirs.push_back(cast<StringAttr>(e).str());
  }
  for (auto [key, out] : {std::pair<StringRef, int *>{"n_gpu_layers", &o.n_gpu_layers},
                          std::pair<StringRef, int *>{"main_gpu", &o.main_gpu}}) {
    Attribute a = d.get(key);
    if (!a)
      continue;
    auto i = dyn_cast<IntegerAttr>(a);
    if (!i || i.getType().isUnsignedInteger() || i.getValue().getSignificantBits() > 32)
      return bad(key, "an integer in [-2^31, 2^31)");
    *out = static_cast<int>(i.getInt());
  }
  if (Attribute a = d.get("split_mode")) {
    auto s = dyn_cast<StringAttr>(a);
    if (!s)
      return bad("split_mode", "a string (none, layer or row)");
    auto m = planner::ParseSplitMode(s.getValue().str());
    if (!m.ok())
      return bad("split_mode", "none, layer or row");
    o.split_mode = *m;
  }
  if (Attribute a = d.get("tensor_split")) {
    auto arr = dyn_cast<ArrayAttr>(a);
    if (!arr || !llvm::all_of(arr, [](Attribute e) { return isa<FloatAttr>(e); }))
      return bad("tensor_split", "an array of floats");
    for (Attribute e : arr)
      o.tensor_split.push_back(static_cast<float>(cast<FloatAttr>(e).getValueAsDouble()));
  }
  if (Attribute a = d.get("overrides")) {
    auto arr = dyn_cast<ArrayAttr>(a);
    auto isPair = [](Attribute e) {
      auto pair = dyn_cast<ArrayAttr>(e);
      return pair && pair.size() == 2 && isa<StringAttr>(pair[0]) && isa<StringAttr>(pair[1]);
    };
    if (!arr || !llvm::all_of(arr, isPair))
      return bad("overrides", "an array of [pattern, buffer type] string pairs");
    for (Attribute e : arr) {
      auto pair = cast<ArrayAttr>(e);
      o.overrides.push_back({cast<StringAttr>(pair[0]).str(), cast<StringAttr>(pair[1]).str()});
    }
  }
  for (auto [key, out] : {std::pair<StringRef, bool *>{"no_host", &o.no_host},
                          std::pair<StringRef, bool *>{"no_repack", &o.no_repack},
                          std::pair<StringRef, bool *>{"use_mmap", &o.use_mmap},
                          std::pair<StringRef, bool *>{"offload_kqv", &o.offload_kqv},
                          std::pair<StringRef, bool *>{"op_offload", &o.op_offload}}) {
    Attribute a = d.get(key);
    if (!a)
      continue;
    auto b = dyn_cast<BoolAttr>(a);
    if (!b)
      return bad(key, "a bool");
    *out = b.getValue();
  }
  return r;
}

void writeRecordedOptions(ModuleOp module, const RecordedOptions &r) {
  Builder b(module.getContext());
  const planner::PlacementOptions &o = r.placement;
  SmallVector<Attribute> registry, split, overrides;
  for (const std::string &dir : r.registry_dirs)
    registry.push_back(b.getStringAttr(dir));
  for (float f : o.tensor_split)
    split.push_back(b.getF32FloatAttr(f));
  for (const planner::TensorOverride &ot : o.overrides)
    overrides.push_back(b.getArrayAttr({b.getStringAttr(ot.pattern), b.getStringAttr(ot.buft)}));
  const char *mode = o.split_mode == planner::SplitMode::kNone  ? "none"
                     : o.split_mode == planner::SplitMode::kRow ? "row"
                                                                : "layer";
  NamedAttrList list;
  list.append("devices", b.getStringAttr(r.devices));
  list.append("registry", b.getArrayAttr(registry));
  list.append("n_gpu_layers", b.getI64IntegerAttr(o.n_gpu_layers));
  list.append("split_mode", b.getStringAttr(mode));
  list.append("tensor_split", b.getArrayAttr(split));
  list.append("main_gpu", b.getI64IntegerAttr(o.main_gpu));
  list.append("overrides", b.getArrayAttr(overrides));
  list.append("no_host", b.getBoolAttr(o.no_host));
  list.append("no_repack", b.getBoolAttr(o.no_repack));
  list.append("use_mmap", b.getBoolAttr(o.use_mmap));
  list.append("offload_kqv", b.getBoolAttr(o.offload_kqv));
  list.append("op_offload", b.getBoolAttr(o.op_offload));
  module->setAttr(kPlanOptionsAttr, list.getDictionary(module.getContext()));
}

void setStage(ModuleOp module, PlanStage stage) {
  module->setAttr(kStageAttr, StringAttr::get(module.getContext(), stageName(stage)));
}

LogicalResult requireStage(ModuleOp module, PlanStage previous, StringRef pass) {
  if (!module->getAttrOfType<DictionaryAttr>(kImportAttr))
    return emitError(module.getLoc())
           << pass << ": the module was not imported with --import-gguf (no stowage.import)";
  auto s = module->getAttrOfType<StringAttr>(kStageAttr);
  StringRef last = s ? s.getValue() : stageName(PlanStage::kImported);
  if (last != stageName(previous) && previous == PlanStage::kImported)
    return emitError(module.getLoc())
           << pass << ": the module is already placed (its last placement step is " << last
           << "); start from a fresh import";
  if (last != stageName(previous))
    return emitError(module.getLoc())
           << pass << ": run " << stageName(previous)
           << " first (the module's last placement step is " << last << ")";
  return success();
}

FailureOr<std::vector<planner::DeviceManifest>>
makeMachine(ModuleOp module, const RecordedOptions &options, StringRef pass) {
  auto fail = [&](const std::string &what) -> FailureOr<std::vector<planner::DeviceManifest>> {
    emitError(module.getLoc()) << pass << ": " << what;
    return failure();
  };
  std::vector<std::string> dirs = options.registry_dirs;
  dirs.push_back(STOWAGE_SHIPPED_REGISTRY_DIR);
  auto registry = planner::Registry::Open(dirs);
  if (!registry.ok())
    return fail(registry.status().message());
  if (options.devices.empty())
    return fail("no devices (option devices=KEY|MANIFEST,...)");
  auto machine = registry->MakeDevices(options.devices);
  if (!machine.ok())
    return fail(machine.status().message());
  // Without a CPU the scheduler has no fallback backend (plan-model would probe this machine's
  // CPU; a pass must not depend on the machine it runs on).
  if (llvm::none_of(*machine, [](const planner::DeviceManifest &d) {
        return d.type == planner::DeviceType::kCpu;
      }))
    return fail("the device list '" + options.devices +
                "' has no CPU device (the scheduler's last backend)");
  return std::move(*machine);
}

int findGlobal(const planner::ModelGraphs &graphs, StringRef name, int layer) {
  for (size_t i = 0; i < graphs.globals.size(); ++i) {
    const planner::GlobalTensor &g = graphs.globals[i];
    if (g.name == name && (g.kind == planner::TensorKind::kKvCache || g.layer == layer))
      return static_cast<int>(i);
  }
  return -1;
}

DenseMap<Operation *, int> matchGraphTensors(Operation *func, const planner::Graph &graph) {
  // Tensor ids per name in the importer's creation order: leafs, then nodes (graph order, split
  // by split), split copies last (a copy's name is unique, so its position does not matter).
  std::map<std::string, SmallVector<int>> byName;
  for (int id : graph.leafs)
    byName[graph.tensors[id].name].push_back(id);
  for (int id : graph.nodes)
    byName[graph.tensors[id].name].push_back(id);
  for (size_t id = 0; id < graph.tensors.size(); ++id)
    if (graph.tensors[id].kind == planner::TensorKind::kSplitCopy)
      byName[graph.tensors[id].name].push_back(static_cast<int>(id));
  std::map<std::string, size_t> used;
  DenseMap<Operation *, int> out;
  func->walk<WalkOrder::PreOrder>([&](Operation *op) {
    std::string name;
    if (auto w = dyn_cast<ggml::WeightOp>(op))
      name = w.getGgufName().str();
    else if (auto in = dyn_cast<ggml::InputOp>(op))
      name = in.getInputName().str();
    else if (auto kv = dyn_cast<ggml::KvCacheOp>(op))
      name = kv.getCacheName().str();
    else if (auto s = op->getAttrOfType<StringAttr>(ggml::kNodeNameAttr))
      name = s.str();
    else
      return;
    auto it = byName.find(name);
    if (it == byName.end())
      return;
    size_t &k = used[name];
    if (k < it->second.size())
      out[op] = it->second[k++];
  });
  return out;
}

namespace {

/// Reconstruction of one module (see reconstructPlannerState).
class Reconstructor {
public:
  Reconstructor(ModuleOp module, const RecordedOptions &options, StringRef pass)
      : module_(module), opt_(options), pass_(pass), irStage_(currentStage(module)) {}

  FailureOr<std::unique_ptr<PlannerState>> run(PlanStage upTo);

private:
  InFlightDiagnostic error() { return emitError(module_.getLoc()) << pass_ << ": "; }
  LogicalResult fail(const Status &s) {
    error() << s.message();
    return failure();
  }
  /// "the IR differs from what <step> decides with the recorded options: <what>".
  LogicalResult differs(PlanStage step, const std::string &what) {
    error() << "the IR differs from what " << stageName(step)
            << " decides with the recorded options: " << what;
    return failure();
  }
  LogicalResult importGraphs();
  LogicalResult layers();
  LogicalResult weights();
  LogicalResult kvCache();
  LogicalResult schedule();
  LogicalResult memory();
  /// Compares place.buft of every weight (or cache) op with the placement.
  LogicalResult checkBufts(PlanStage step, bool caches);

  /// planner::PlaceModelStep `step` on the state.
  LogicalResult place(planner::PlaceStep step) {
    if (Status s =
            planner::PlaceModelStep(step, st_->graphs, machine_, opt_.placement, &st_->outcome);
        !s.ok())
      return fail(s);
    return success();
  }

  ModuleOp module_;
  const RecordedOptions &opt_;
  StringRef pass_;
  PlanStage irStage_;
  std::vector<planner::DeviceManifest> machine_;
  std::unique_ptr<PlannerState> st_ = std::make_unique<PlannerState>();
};

LogicalResult Reconstructor::importGraphs() {
  auto imp = module_->getAttrOfType<DictionaryAttr>(kImportAttr);
  if (!imp)
    return error() << "the module was not imported with --import-gguf (no stowage.import)";
  auto path = imp.getAs<StringAttr>("gguf");
  planner::ContextConfig cfg;
  auto count = [&](StringRef key, uint32_t &out) -> bool {
    auto i = imp.getAs<IntegerAttr>(key);
    if (!i || i.getValue().getSignificantBits() > 64 || i.getInt() < 0 ||
        i.getInt() > std::numeric_limits<uint32_t>::max())
      return false;
    out = static_cast<uint32_t>(i.getInt());
    return true;
  };
  uint32_t type_k = 0, type_v = 0;
  if (!path || !count("n_ctx", cfg.n_ctx) || !count("n_batch", cfg.n_batch) ||
      !count("n_ubatch", cfg.n_ubatch) || !count("n_seq_max", cfg.n_seq_max) ||
      !count("type_k", type_k) || !count("type_v", type_v))
    return error() << "stowage.import must have gguf (string), n_ctx, n_batch, n_ubatch, "
                      "n_seq_max, type_k and type_v (integers in [0, 2^32)), got "
                   << imp;
  cfg.type_k = static_cast<GgmlType>(type_k);
  cfg.type_v = static_cast<GgmlType>(type_v);
  if (Attribute fa = imp.get("flash_attn")) {
    auto b = dyn_cast<BoolAttr>(fa);
    if (!b)
      return error() << "stowage.import: flash_attn must be a bool, got " << fa;
    cfg.flash_attn = b.getValue();
  }
  if (Attribute sf = imp.get("swa_full")) {
    auto b = dyn_cast<BoolAttr>(sf);
    if (!b)
      return error() << "stowage.import: swa_full must be a bool, got " << sf;
    cfg.swa_full = b.getValue();
  }
  auto file = GgufFile::Open(path.str());
  if (!file.ok())
    return fail(file.status());
  st_->gguf = std::move(*file);
  auto graphs = planner::BuildModelGraphs(*st_->gguf, cfg);
  if (!graphs.ok())
    return fail(graphs.status());
  st_->graphs = std::move(*graphs);
  return success();
}

LogicalResult Reconstructor::layers() {
  FailureOr<std::vector<planner::DeviceManifest>> machine = makeMachine(module_, opt_, pass_);
  if (failed(machine))
    return failure();
  machine_ = std::move(*machine);
  if (failed(place(planner::PlaceStep::kLayers)))
    return failure();
  const planner::LayerMap &lm = st_->outcome.layers;
  if (irStage_ < PlanStage::kLayers)
    return success();
  auto names = module_->getAttrOfType<ArrayAttr>(kLayersAttr);
  if (!names || names.size() != lm.device.size())
    return differs(PlanStage::kLayers, "stowage.layers must list " +
                                           std::to_string(lm.device.size()) + " device names");
  for (auto [il, dev] : llvm::enumerate(lm.device)) {
    auto s = dyn_cast<StringAttr>(names[il]);
    const std::string &want = st_->outcome.devices.devices[dev].name;
    if (!s || s.getValue() != want)
      return differs(PlanStage::kLayers, "layer " + std::to_string(il) + " is on " + want);
  }
  return success();
}

LogicalResult Reconstructor::checkBufts(PlanStage step, bool caches) {
  const planner::Placement &p = st_->outcome.placement;
  LogicalResult result = success();
  module_.walk([&](Operation *op) {
    if (failed(result))
      return;
    std::string name;
    int layer = -1;
    if (auto w = dyn_cast<ggml::WeightOp>(op); w && !caches) {
      name = w.getGgufName().str();
      layer = w.getLayer().value_or(-1);
    } else if (auto kv = dyn_cast<ggml::KvCacheOp>(op); kv && caches) {
      name = kv.getCacheName().str();
    } else {
      return;
    }
    int gi = findGlobal(st_->graphs, name, layer);
    auto buft = op->getAttrOfType<place::BufferTypeAttr>(place::kBuftAttr);
    if (gi < 0 || p.global_buft[gi] < 0) {
      result = differs(step, "'" + name + "' is not a " + (caches ? "cache" : "weight") +
                                 " of the model");
      return;
    }
    const std::string &want = p.bufts[p.global_buft[gi]].name;
    if (!buft || buft.getName() != want)
      result = differs(step, "'" + name + "' is in buffer type " + want);
  });
  return result;
}

LogicalResult Reconstructor::weights() {
  st_->weight_explain_begin = st_->outcome.placement.explain.size();
  if (failed(place(planner::PlaceStep::kWeights)))
    return failure();
  if (irStage_ < PlanStage::kWeights)
    return success();
  return checkBufts(PlanStage::kWeights, /*caches=*/false);
}

LogicalResult Reconstructor::kvCache() {
  if (failed(place(planner::PlaceStep::kKvCache)))
    return failure();
  if (irStage_ < PlanStage::kKvCache)
    return success();
  return checkBufts(PlanStage::kKvCache, /*caches=*/true);
}

LogicalResult Reconstructor::schedule() {
  if (failed(place(planner::PlaceStep::kSchedule)))
    return failure();
  planner::ModelGraphs &m = st_->graphs;
  const planner::Placement &placement = st_->outcome.placement;
  if (irStage_ < PlanStage::kScheduled)
    return success();
  for (auto [fname, g] : {std::pair<StringRef, planner::Graph *>{"pp", &m.pp},
                          std::pair<StringRef, planner::Graph *>{"tg", &m.tg}}) {
    auto func = module_.lookupSymbol<func::FuncOp>(fname);
    if (!func)
      return differs(PlanStage::kScheduled, "there is no func @" + fname.str());
    SmallVector<place::SplitOp> splits(func.getOps<place::SplitOp>());
    if (splits.size() != g->splits.size())
      return differs(PlanStage::kScheduled,
                     "@" + fname.str() + " has " + std::to_string(g->splits.size()) + " splits");
    for (auto [j, split] : llvm::enumerate(splits)) {
      const std::string &want = placement.backends[g->splits[j].backend].name;
      if (split.getBackend().getName() != want)
        return differs(PlanStage::kScheduled,
                       "split " + std::to_string(j) + " of @" + fname.str() + " runs on " + want);
    }
  }
  auto nCopies = module_->getAttrOfType<IntegerAttr>(kNCopiesAttr);
  if (!nCopies || nCopies.getInt() != placement.n_copies)
    return differs(PlanStage::kScheduled,
                   "stowage.n_copies must be " + std::to_string(placement.n_copies));
  // The split input copies (and, with n_copies > 1, every instance of the graph inputs): one
  // place.copy per kSplitCopy tensor, same name, copy number and backend. (An edited, dropped or
  // extra copy op would otherwise be ignored: the plan is made from the reconstruction.)
  for (auto [fname, g] : {std::pair<StringRef, planner::Graph *>{"pp", &m.pp},
                          std::pair<StringRef, planner::Graph *>{"tg", &m.tg}}) {
    using Copy = std::tuple<std::string, int64_t, std::string>; // name, copy, backend
    std::vector<Copy> want, have;
    for (const planner::Tensor &t : g->tensors) {
      if (t.kind != planner::TensorKind::kSplitCopy)
        continue;
      const size_t hash = t.name.rfind('#');
      const int64_t c = hash == std::string::npos ? 0 : std::atoll(t.name.c_str() + hash + 1);
      want.emplace_back(t.name, c, t.backend >= 0 ? placement.backends[t.backend].name : "");
    }
    module_.lookupSymbol<func::FuncOp>(fname).walk([&](place::CopyOp op) {
      auto name = op->getAttrOfType<StringAttr>(ggml::kNodeNameAttr);
      auto copy = op->getAttrOfType<IntegerAttr>("copy"); // signed: an edited -1 prints as -1
      have.emplace_back(name ? name.str() : "", copy ? copy.getInt() : 0,
                        op.getBackend().getName().str());
    });
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    if (want == have)
      continue;
    std::vector<Copy> missing, extra;
    std::set_difference(want.begin(), want.end(), have.begin(), have.end(),
                        std::back_inserter(missing));
    std::set_difference(have.begin(), have.end(), want.begin(), want.end(),
                        std::back_inserter(extra));
    auto show = [](const Copy &c) {
      return "'" + std::get<0>(c) + "' (copy " + std::to_string(std::get<1>(c)) + " on " +
             std::get<2>(c) + ")";
    };
    std::string what =
        "@" + fname.str() + " has " + std::to_string(want.size()) + " place.copy ops";
    if (!missing.empty())
      what += "; missing " + show(missing.front());
    if (!extra.empty())
      what += "; not made by the schedule: " + show(extra.front());
    return differs(PlanStage::kScheduled, what);
  }
  // Every tensor op's place.backend is the schedule's backend of that tensor (an edited one would
  // otherwise be ignored: the plan is exported from the reconstruction).
  for (auto [fname, g] : {std::pair<StringRef, planner::Graph *>{"pp", &m.pp},
                          std::pair<StringRef, planner::Graph *>{"tg", &m.tg}}) {
    auto func = module_.lookupSymbol<func::FuncOp>(fname);
    for (auto [op, id] : matchGraphTensors(func, *g)) {
      const planner::Tensor &t = g->tensors[id];
      auto attr = op->getAttrOfType<place::BackendAttr>(place::kBackendAttr);
      if (!attr) // weights, caches and copies carry none; a split's nodes do
        continue;
      const bool planned =
          t.backend >= 0 && t.backend < static_cast<int>(placement.backends.size());
      const std::string want = planned ? placement.backends[t.backend].name : "no backend";
      if (!planned || attr.getName() != want)
        return differs(PlanStage::kScheduled,
                       "'" + t.name + "' of @" + fname.str() + " is on " + want);
    }
  }
  return success();
}

LogicalResult Reconstructor::memory() {
  if (failed(place(planner::PlaceStep::kMemory)))
    return failure();
  if (irStage_ < PlanStage::kMemory)
    return success();
  auto buffers = module_->getAttrOfType<ArrayAttr>(kBuffersAttr);
  const auto &want = st_->outcome.memory.buffers;
  if (!buffers || buffers.size() != want.size())
    return differs(PlanStage::kMemory,
                   "stowage.buffers must list " + std::to_string(want.size()) + " buffers");
  for (auto [i, b] : llvm::enumerate(want)) {
    auto d = dyn_cast<DictionaryAttr>(buffers[i]);
    auto name = d ? d.getAs<StringAttr>("name") : StringAttr();
    auto size = d ? d.getAs<IntegerAttr>("size") : IntegerAttr();
    if (!name || !size || name.getValue() != b.name ||
        static_cast<uint64_t>(size.getInt()) != b.size)
      return differs(PlanStage::kMemory, "buffer " + std::to_string(i) + " is " + b.name + " of " +
                                             std::to_string(b.size) + " bytes");
  }
  // Every tensor op's stowage.buffer / stowage.offset is the memory plan's.
  for (auto [fname, g] : {std::pair<StringRef, const planner::Graph *>{"pp", &st_->graphs.pp},
                          std::pair<StringRef, const planner::Graph *>{"tg", &st_->graphs.tg}}) {
    auto func = module_.lookupSymbol<func::FuncOp>(fname);
    if (!func)
      return differs(PlanStage::kMemory, "there is no func @" + fname.str());
    for (auto [op, id] : matchGraphTensors(func, *g)) {
      const planner::Tensor &t = g->tensors[id];
      const int buffer = t.global >= 0 ? st_->graphs.globals[t.global].buffer : t.buffer;
      const uint64_t offset = t.global >= 0 ? st_->graphs.globals[t.global].offset : t.offset;
      auto b = op->getAttrOfType<IntegerAttr>(kBufferAttr);
      auto o = op->getAttrOfType<IntegerAttr>(kOffsetAttr);
      const bool ok = buffer < 0 ? (!b && !o)
                                 : (b && o && b.getInt() == buffer &&
                                    static_cast<uint64_t>(o.getInt()) == offset);
      if (!ok)
        return differs(PlanStage::kMemory,
                       "'" + t.name + "' of @" + fname.str() +
                           (buffer < 0 ? std::string(" has no buffer")
                                       : " is at buffer " + std::to_string(buffer) + " offset " +
                                             std::to_string(offset)));
    }
  }
  return success();
}

FailureOr<std::unique_ptr<PlannerState>> Reconstructor::run(PlanStage upTo) {
  if (failed(importGraphs()))
    return failure();
  using Step = LogicalResult (Reconstructor::*)();
  const std::pair<PlanStage, Step> steps[] = {{PlanStage::kLayers, &Reconstructor::layers},
                                              {PlanStage::kWeights, &Reconstructor::weights},
                                              {PlanStage::kKvCache, &Reconstructor::kvCache},
                                              {PlanStage::kScheduled, &Reconstructor::schedule},
                                              {PlanStage::kMemory, &Reconstructor::memory}};
  for (auto [stage, step] : steps) {
    if (stage > upTo)
      break;
    if (failed((this->*step)()))
      return failure();
  }
  return std::move(st_);
}

} // namespace

FailureOr<std::unique_ptr<PlannerState>> reconstructPlannerState(ModuleOp module, PlanStage upTo,
                                                                 const RecordedOptions &options,
                                                                 StringRef pass) {
  return Reconstructor(module, options, pass).run(upTo);
}

} // namespace stowage::compiler
