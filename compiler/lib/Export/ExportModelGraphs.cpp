//===- ExportModelGraphs.cpp - ggml and place dialects -> planner graphs --===//

#include "stowage/Compiler/Export/ExportModelGraphs.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/runtime/ggml_op_params.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace stowage::compiler {
namespace {

using ggml::Dim;
using ggml::Sym;
using planner::DimExpr;

/// The ggml type of a dialect element type (the inverse of the importer's elementType).
std::optional<GgmlType> ggmlType(Type t) {
  if (t.isF32())
    return GgmlType::F32;
  if (t.isF16())
    return GgmlType::F16;
  if (t.isBF16())
    return GgmlType::BF16;
  if (t.isF64())
    return GgmlType::F64;
  if (t.isInteger(8))
    return GgmlType::I8;
  if (t.isInteger(16))
    return GgmlType::I16;
  if (t.isInteger(32))
    return GgmlType::I32;
  if (t.isInteger(64))
    return GgmlType::I64;
  if (auto block = dyn_cast<ggml::BlockType>(t))
    return static_cast<GgmlType>(block.getTypeId());
  return std::nullopt;
}

/// The dialect op the importer makes of a planner tensor: "ggml." + ggml's op name in lower case,
/// except the GLU kinds (ggml.glu) and ggml_cast (a CPY without destination: ggml.cast).
std::string dialectOpName(const planner::Tensor &t) {
  switch (t.op) {
  case GgmlOp::SWIGLU:
  case GgmlOp::GEGLU:
  case GgmlOp::REGLU:
  case GgmlOp::SWIGLU_OAI:
    return "ggml.glu";
  case GgmlOp::CPY:
    return t.srcs.size() == 1 ? "ggml.cast" : "ggml.cpy";
  default:
    return "ggml." + llvm::StringRef(GgmlOpName(t.op)).lower();
  }
}

/// The planner's source positions of a node's operands, in operand order: the present sources in
/// src order, except SET_ROWS, whose op takes (a, b, c) for the planner's (b, c, a).
SmallVector<int> operandSrcPositions(GgmlOp op, size_t nSrcs, ArrayRef<char> present) {
  SmallVector<int> pos;
  if (op == GgmlOp::SET_ROWS && nSrcs == 3) {
    for (int i : {2, 0, 1})
      pos.push_back(i);
    return pos;
  }
  for (auto [i, p] : llvm::enumerate(present))
    if (p)
      pos.push_back(static_cast<int>(i));
  return pos;
}

/// The plan's form of a dialect dimension; std::nullopt for n_ctx, which a plan's dimensions do
/// not have.
std::optional<DimExpr> planDim(const Dim &d) {
  if (d.coeff(Sym::n_ctx) != 0)
    return std::nullopt;
  DimExpr e;
  e.c = d.c;
  e.tokens = d.coeff(Sym::n_tokens);
  e.kv = d.coeff(Sym::n_kv);
  e.kv_head = d.coeff(Sym::kv_head);
  e.outputs = d.coeff(Sym::n_outputs);
  e.kv_swa = d.coeff(Sym::n_kv_swa);
  e.kv_head_swa = d.coeff(Sym::kv_head_swa);
  return e;
}

/// One op of a function that stands for a graph tensor.
struct Entry {
  enum Kind { kLeaf, kNode, kCopy } kind;
  Operation *op;
  int split = -1;  ///< index of the place.split it is in; -1 at function level
  int origin = -1; ///< the tensor of the imported graph it keeps, or -1
  int id = -1;     ///< its tensor id in the exported graph
};

class GraphExporter {
public:
  GraphExporter(func::FuncOp func, const planner::Graph &base, const planner::ModelGraphs &m,
                const planner::Placement &p, bool tg)
      : func_(func), base_(base), m_(m), p_(p), tg_(tg) {}

  /// Exports the function into `out` and, when the imported graph had pipeline-parallelism
  /// copies, `copies`.
  LogicalResult run(planner::Graph *out, std::optional<planner::GraphCopies> *copies);

private:
  LogicalResult collect();
  void number();
  LogicalResult exportTensor(const Entry &e, planner::Tensor *t);
  LogicalResult exportShape(Operation *op, Type type, const planner::Tensor *origin,
                            planner::Tensor *t);
  LogicalResult exportSources(const Entry &e, planner::Tensor *t);
  /// The entry whose op defines `v`, seen through the splits' results.
  int entryOf(Value v) const;
  /// An error unless `g`'s splits are the imported graph's: as many, on the same backends, with
  /// the same split inputs (source and copy names, in order). Passes rewrite inside a split only.
  LogicalResult checkSplits(const planner::Graph &g);
  bool placed() const { return !splits_.empty(); }

  func::FuncOp func_;
  const planner::Graph &base_;
  const planner::ModelGraphs &m_;
  const planner::Placement &p_;
  bool tg_;
  std::vector<Entry> entries_;
  SmallVector<place::SplitOp> splits_;
  llvm::DenseMap<Operation *, int> entryOfOp_;
  std::vector<planner::Tensor> tensors_; ///< by exported id
};

int GraphExporter::entryOf(Value v) const {
  while (auto split = v.getDefiningOp<place::SplitOp>()) {
    auto yield = cast<place::YieldOp>(split.getBody().front().getTerminator());
    v = yield.getOperand(cast<OpResult>(v).getResultNumber());
  }
  Operation *def = v.getDefiningOp();
  auto it = def ? entryOfOp_.find(def) : entryOfOp_.end();
  return it == entryOfOp_.end() ? -1 : it->second;
}

LogicalResult GraphExporter::checkSplits(const planner::Graph &g) {
  if (g.splits.size() != base_.splits.size())
    return func_.emitError() << "export: @" << base_.name << " has " << g.splits.size()
                             << " splits, the planner made " << base_.splits.size()
                             << " (a pass may rewrite only inside a split)";
  auto inputs = [](const std::vector<planner::Tensor> &tensors, const planner::Split &split) {
    std::vector<std::pair<std::string, std::string>> names;
    for (auto [source, copy] : split.inputs)
      names.emplace_back(tensors[source].name, tensors[copy].name);
    return names;
  };
  for (size_t j = 0; j < g.splits.size(); ++j) {
    const planner::Split &a = g.splits[j], &b = base_.splits[j];
    if (a.backend != b.backend)
      return splits_[j].emitError()
             << "export: split " << j << " of @" << base_.name << " runs on backend " << a.backend
             << ", the planner's on " << b.backend << " (a pass may rewrite only inside a split)";
    if (inputs(tensors_, a) != inputs(base_.tensors, b))
      return splits_[j].emitError() << "export: split " << j << " of @" << base_.name
                                    << " has other inputs than the planner's (a pass may rewrite "
                                       "only inside a split)";
  }
  return success();
}

LogicalResult GraphExporter::collect() {
  std::vector<char> originTaken(base_.tensors.size(), 0);
  auto add = [&](Operation *op, int split) -> LogicalResult {
    Entry e{Entry::kNode, op, split};
    if (isa<ggml::WeightOp, ggml::WeightGroupOp, ggml::InputOp, ggml::KvCacheOp>(op))
      e.kind = Entry::kLeaf;
    else if (isa<place::CopyOp>(op))
      e.kind = Entry::kCopy;
    else if (op->getDialect() == nullptr || op->getDialect()->getNamespace() != "ggml")
      return op->emitError() << "export: op '" << op->getName()
                             << "' is not a ggml or place op the plan can hold";
    // The imported tensor it stands for: its id (getTensorLoc), once, for the same kind of op.
    if (std::optional<int> id = getImportedTensorId(op->getLoc());
        id && *id >= 0 && *id < static_cast<int>(base_.tensors.size()) && !originTaken[*id]) {
      const planner::Tensor &t = base_.tensors[*id];
      bool same = false;
      if (e.kind == Entry::kCopy)
        same = t.kind == planner::TensorKind::kSplitCopy;
      else if (e.kind == Entry::kLeaf)
        same = t.op == GgmlOp::NONE && t.kind != planner::TensorKind::kIntermediate &&
               t.kind != planner::TensorKind::kSplitCopy;
      else
        same = t.kind == planner::TensorKind::kIntermediate &&
               op->getName().getStringRef() == dialectOpName(t);
      if (same) {
        e.origin = *id;
        originTaken[*id] = 1;
      }
    }
    if (e.kind == Entry::kLeaf && e.origin < 0 && !isa<ggml::WeightGroupOp>(op))
      return op->emitError() << "export: a leaf a pass made (weights, caches and inputs are the "
                                "model's, imported)";
    entryOfOp_[op] = static_cast<int>(entries_.size());
    entries_.push_back(e);
    return success();
  };
  for (Operation &op : func_.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (auto split = dyn_cast<place::SplitOp>(op)) {
      const int index = static_cast<int>(splits_.size());
      splits_.push_back(split);
      for (Operation &inner : split.getBody().front())
        if (!isa<place::YieldOp>(inner) && failed(add(&inner, index)))
          return failure();
      continue;
    }
    if (failed(add(&op, -1)))
      return failure();
  }
  return success();
}

void GraphExporter::number() {
  // Imported tensors keep their order (and, when none was removed, their ids); tensors of ops a
  // pass made follow, in block order.
  std::vector<int> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int oa = entries_[a].origin, ob = entries_[b].origin;
    if ((oa < 0) != (ob < 0))
      return ob < 0;
    return oa >= 0 && oa < ob;
  });
  for (size_t i = 0; i < order.size(); ++i)
    entries_[order[i]].id = static_cast<int>(i);
}

LogicalResult GraphExporter::exportShape(Operation *op, Type type, const planner::Tensor *origin,
                                         planner::Tensor *t) {
  auto tensor = dyn_cast<ggml::TensorType>(type);
  std::optional<GgmlType> elem = tensor ? ggmlType(tensor.getElementType()) : std::nullopt;
  if (!elem)
    return op->emitError() << "export: result type " << type << " is not a ggml tensor type";
  t->type = *elem;
  const bool bindTokens = tg_ && base_.max_tokens == 1;
  const bool bindOutputs = tg_ && base_.max_outputs == 1;
  // The imported shape when the type is unchanged: @tg's folded n_tokens / n_outputs terms are
  // symbolic in the plan.
  if (origin && origin->type == t->type) {
    bool same = tensor.getShape().size() == 4;
    for (unsigned i = 0; same && i < 4; ++i)
      same = toDialectDim(origin->ne[i], bindTokens, bindOutputs) == tensor.getNe(i);
    if (same) {
      t->ne = origin->ne;
      return success();
    }
  }
  if (tensor.getShape().size() > 4)
    return op->emitError() << "export: more than 4 dimensions";
  for (unsigned i = 0; i < 4; ++i) {
    if (i >= tensor.getShape().size()) {
      t->ne[i] = DimExpr::Const(1);
      continue;
    }
    std::optional<DimExpr> e = planDim(tensor.getNe(i));
    if (!e)
      return op->emitError() << "export: dimension " << i
                             << " uses n_ctx, which a plan's dimensions do not have";
    t->ne[i] = *e;
  }
  return success();
}

LogicalResult GraphExporter::exportSources(const Entry &e, planner::Tensor *t) {
  SmallVector<int> ids;
  for (Value v : e.op->getOperands()) {
    const int s = entryOf(v);
    if (s < 0)
      return e.op->emitError() << "export: an operand is not a tensor of the graph";
    ids.push_back(entries_[s].id);
  }
  // The planner's src layout: the imported node's (absent optional sources stay -1 in place),
  // else the operands in order.
  SmallVector<char> present;
  if (e.origin >= 0)
    for (int s : base_.tensors[e.origin].srcs)
      present.push_back(s >= 0);
  else
    present.assign(ids.size(), 1);
  const SmallVector<int> pos = operandSrcPositions(t->op, present.size(), present);
  if (pos.size() != ids.size())
    return e.op->emitError() << "export: " << ids.size() << " operands for the " << pos.size()
                             << " sources of the imported node";
  t->srcs.assign(present.size(), -1);
  for (auto [k, i] : llvm::enumerate(pos))
    t->srcs[i] = ids[k];
  return success();
}

LogicalResult GraphExporter::exportTensor(const Entry &e, planner::Tensor *t) {
  const planner::Tensor *origin = e.origin >= 0 ? &base_.tensors[e.origin] : nullptr;
  if (origin)
    *t = *origin;
  t->buffer = -1;
  t->offset = 0;
  if (auto group = dyn_cast<ggml::WeightGroupOp>(e.op); group && !origin) {
    // A weight group: the global exportWeightGroups made under its name.
    t->name = ggml::getNodeName(group).str();
    t->kind = planner::TensorKind::kWeight;
    auto it = llvm::find_if(m_.globals, [&](const planner::GlobalTensor &g) {
      return g.name == t->name && !g.parts.empty();
    });
    if (it == m_.globals.end())
      return group.emitError() << "export: no weight group '" << t->name << "'";
    t->global = static_cast<int>(it - m_.globals.begin());
    t->layer = it->layer;
    return exportShape(e.op, e.op->getResult(0).getType(), nullptr, t);
  }
  if (e.kind == Entry::kLeaf)
    return exportShape(e.op, e.op->getResult(0).getType(), origin, t);
  Operation *op = e.op;
  if (auto name = op->getAttrOfType<StringAttr>(ggml::kNodeNameAttr))
    t->name = name.str();
  if (auto backend = op->getAttrOfType<place::BackendAttr>(place::kBackendAttr))
    t->backend = backend.getPriority();
  else if (e.split >= 0)
    t->backend = splits_[e.split].getBackend().getPriority();
  if (auto cause = op->getAttrOfType<place::CauseAttr>(place::kCauseAttr))
    t->cause = cause.getCode().str();
  if (failed(exportShape(op, op->getResult(0).getType(), origin, t)))
    return failure();
  if (e.kind == Entry::kCopy) {
    t->kind = planner::TensorKind::kSplitCopy;
    if (!origin) {
      auto copy = cast<place::CopyOp>(op);
      const int s = entryOf(copy.getSource());
      t->backend = copy.getBackend().getPriority();
      t->cause = "4.cpy";
      t->layer = s >= 0 ? tensors_[entries_[s].id].layer : -1;
    }
    return success();
  }
  t->kind = planner::TensorKind::kIntermediate;
  if (auto fused = dyn_cast<ggml::RmsNormMulOp>(op); fused && !origin) {
    // Stowage's fused ops (the fusion passes make them): their parameters' encodings.
    const EncodedOpParams p = Encode(NormParams{fused.getEps().convertToFloat()});
    t->op = GgmlOp::RMS_NORM_MUL;
    t->iparams = p.iparams;
    t->fparams = p.fparams;
  } else if (auto ffn = dyn_cast<ggml::MulMatGluOp>(op); ffn && !origin) {
    const EncodedOpParams p = Encode(MulMatGluParams{static_cast<MulMatGluKind>(ffn.getGlu())});
    t->op = GgmlOp::MUL_MAT_GLU;
    t->iparams = p.iparams;
    t->fparams = p.fparams;
  } else if (auto store = dyn_cast<ggml::RopeSetRowsOp>(op); store && !origin) {
    const EncodedOpParams p = Encode(ggml::getRopeParams(store));
    t->op = GgmlOp::ROPE_SET_ROWS;
    t->iparams = p.iparams;
    t->fparams = p.fparams;
  } else if (auto copy = dyn_cast<ggml::RopeCpyOp>(op); copy && !origin) {
    const EncodedOpParams p = Encode(ggml::getRopeParams(copy));
    t->op = GgmlOp::ROPE_CPY;
    t->iparams = p.iparams;
    t->fparams = p.fparams;
  } else if (auto view = dyn_cast<ggml::ViewOp>(op); view && !origin) {
    // A view's strides and offset are its attributes.
    t->op = GgmlOp::VIEW;
    ArrayRef<Dim> nb = view.getNb().getValues();
    std::optional<DimExpr> offset =
        planDim(view.getOffset() ? view.getOffset()->getValue() : Dim::of(0));
    if (nb.size() != 3 || !offset)
      return op->emitError() << "export: a view needs 3 strides and an offset without n_ctx";
    t->view_offset = *offset;
    for (unsigned i = 0; i < 3; ++i) {
      std::optional<DimExpr> d = planDim(nb[i]);
      if (!d)
        return op->emitError() << "export: a view stride uses n_ctx";
      t->view_nb[i] = *d;
    }
  } else if (!origin) {
    // Ops without op parameters (ggml_op_params.h) are the IR alone; an op with parameters needs
    // its encoding here.
    if (!isa<ggml::GetRowsOp, ggml::MulMatOp, ggml::MulMatIdOp, ggml::AddOp, ggml::MulOp,
             ggml::DivOp, ggml::SumRowsOp, ggml::SiluOp, ggml::GeluOp, ggml::SigmoidOp,
             ggml::TanhOp, ggml::AddIdOp, ggml::SsmConvOp, ggml::SsmScanOp, ggml::CpyOp,
             ggml::CastOp, ggml::SetRowsOp, ggml::ContOp, ggml::ReshapeOp, ggml::TransposeOp,
             ggml::RepeatOp>(op))
      return op->emitError() << "export: '" << op->getName()
                             << "' made by a pass: its op parameters have no encoding in the "
                                "exporter";
    Result<GgmlOp> kind = isa<ggml::CastOp>(op)
                              ? Result<GgmlOp>(GgmlOp::CPY)
                              : ParseGgmlOp(op->getName().getStringRef().drop_front(5).upper());
    if (!kind.ok())
      return op->emitError() << "export: no ggml op for '" << op->getName() << "'";
    t->op = *kind;
  }
  if (failed(exportSources(e, t)))
    return failure();
  // The memory a view or a store writes is its aliased source's owner (ggml's view_src).
  const int aliased = AliasedSource(t->op, t->srcs.size());
  t->view_src = -1;
  if (aliased >= 0 && t->srcs[aliased] >= 0) {
    const planner::Tensor &s = tensors_[t->srcs[aliased]];
    t->view_src = s.view_src >= 0 ? s.view_src : t->srcs[aliased];
  }
  if (!origin) {
    t->layer = -1;
    for (int s : t->srcs)
      if (s >= 0 && t->layer < 0)
        t->layer = tensors_[s].layer;
  }
  return success();
}

LogicalResult GraphExporter::run(planner::Graph *out, std::optional<planner::GraphCopies> *copies) {
  if (failed(collect()))
    return failure();
  number();
  // Tensors in id order: a source always precedes its user in block order, but not always in id
  // order (a view of a later tensor), so the entries are exported in block order into their ids.
  tensors_.assign(entries_.size(), planner::Tensor());
  for (const Entry &e : entries_)
    if (failed(exportTensor(e, &tensors_[e.id])))
      return failure();
  planner::Graph g;
  g.name = base_.name;
  g.max_tokens = base_.max_tokens;
  g.max_kv = base_.max_kv;
  g.max_outputs = base_.max_outputs;
  g.max_kv_swa = base_.max_kv_swa;
  g.unread_embd_ne0 = base_.unread_embd_ne0;
  for (const Entry &e : entries_) {
    if (e.kind == Entry::kLeaf)
      g.leafs.push_back(e.id);
    else if (e.kind == Entry::kNode)
      g.nodes.push_back(e.id);
    if (placed() && e.kind == Entry::kNode && e.split < 0)
      return e.op->emitError() << "export: a node outside every split of a placed function";
  }
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  for (Value v : ret.getOperands())
    if (int s = entryOf(v); s >= 0)
      tensors_[entries_[s].id].is_output = true;

  // Splits: each place.split's nodes, its inputs (copy 0) in the imported split's order, then
  // those a pass added; with pipeline parallelism every copy of each input, and of each graph
  // input.
  const planner::GraphCopies *baseCopies = p_.FindCopies(base_.name);
  planner::GraphCopies gc;
  gc.graph = base_.name;
  size_t nodeIndex = 0;
  for (auto [j, split] : llvm::enumerate(splits_)) {
    planner::Split s;
    s.backend = split.getBackend().getPriority();
    s.node_begin = static_cast<int>(nodeIndex);
    const planner::Split *baseSplit = j < base_.splits.size() ? &base_.splits[j] : nullptr;
    struct Input {
      int source, copy;
      size_t rank;
      SmallVector<std::pair<uint32_t, int>> extra; // (copy number, tensor)
    };
    SmallVector<Input> inputs;
    for (const Entry &e : entries_) {
      if (e.split != static_cast<int>(j))
        continue;
      if (e.kind == Entry::kNode)
        ++nodeIndex;
      if (e.kind != Entry::kCopy)
        continue;
      auto copy = cast<place::CopyOp>(e.op);
      const int source = entries_[entryOf(copy.getSource())].id;
      if (copy.getCopy() != 0) {
        for (Input &in : inputs)
          if (in.source == source)
            in.extra.push_back({copy.getCopy(), e.id});
        continue;
      }
      size_t rank = SIZE_MAX;
      for (size_t k = 0; baseSplit && e.origin >= 0 && k < baseSplit->inputs.size(); ++k)
        if (baseSplit->inputs[k].second == e.origin)
          rank = k;
      inputs.push_back({source, e.id, rank, {}});
    }
    s.node_end = static_cast<int>(nodeIndex);
    std::stable_sort(inputs.begin(), inputs.end(),
                     [](const Input &a, const Input &b) { return a.rank < b.rank; });
    std::vector<planner::TensorCopies> splitCopies;
    for (Input &in : inputs) {
      s.inputs.emplace_back(in.source, in.copy);
      std::stable_sort(in.extra.begin(), in.extra.end());
      planner::TensorCopies tc{in.source, s.backend, {in.copy}};
      for (auto [c, id] : in.extra)
        tc.copies.push_back(id);
      splitCopies.push_back(std::move(tc));
    }
    gc.splits.push_back(std::move(splitCopies));
    g.splits.push_back(std::move(s));
  }
  // Graph inputs' copies 1..n-1 (function level), grouped by input in order of appearance.
  for (const Entry &e : entries_) {
    if (e.kind != Entry::kCopy || e.split >= 0)
      continue;
    auto copy = cast<place::CopyOp>(e.op);
    const int source = entries_[entryOf(copy.getSource())].id;
    auto it = std::find_if(gc.inputs.begin(), gc.inputs.end(),
                           [&](const planner::TensorCopies &tc) { return tc.tensor == source; });
    if (it == gc.inputs.end()) {
      gc.inputs.push_back({source, copy.getBackend().getPriority(), {source}});
      it = std::prev(gc.inputs.end());
    }
    it->copies.push_back(e.id);
  }
  if (failed(checkSplits(g)))
    return failure();
  g.tensors = std::move(tensors_);
  *out = std::move(g);
  if (baseCopies)
    *copies = std::move(gc);
  return success();
}

/// A global (GlobalTensor::parts) for each ggml.weight_group name, placed in its parts' buffer
/// type; the same name in @pp and @tg is one global.
LogicalResult exportWeightGroups(ModuleOp module, planner::ModelGraphs *graphs,
                                 planner::Placement *placement) {
  auto globalOf = [&](StringRef name, bool group) -> int {
    for (auto [i, g] : llvm::enumerate(graphs->globals))
      if (g.name == name && g.kind == planner::TensorKind::kWeight && !g.parts.empty() == group &&
          !g.duplicated)
        return static_cast<int>(i);
    return -1;
  };
  WalkResult walk = module.walk([&](ggml::WeightGroupOp op) -> WalkResult {
    StringRef name = ggml::getNodeName(op);
    if (globalOf(name, true) >= 0)
      return WalkResult::advance();
    planner::GlobalTensor g;
    for (Value v : op.getParts()) {
      auto w = v.getDefiningOp<ggml::WeightOp>();
      const int part = w ? globalOf(w.getGgufName(), false) : -1;
      if (part < 0) {
        op.emitError() << "export: a part of weight group '" << name
                       << "' is not a weight of the model";
        return WalkResult::interrupt();
      }
      g.parts.push_back(part);
    }
    const planner::GlobalTensor &first = graphs->globals[g.parts.front()];
    g.name = name.str();
    g.kind = planner::TensorKind::kWeight;
    g.type = first.type;
    g.ne[0] = first.ne[0];
    g.ne[1] = 0;
    for (int part : g.parts)
      g.ne[1] += graphs->globals[part].ne[1];
    g.nbytes = TensorBytes(g.type, g.ne);
    g.layer = first.layer;
    g.layer_class = first.layer_class;
    g.consumer_op = first.consumer_op;
    const int buft = placement->global_buft[g.parts.front()];
    for (int part : g.parts)
      if (placement->global_buft[part] != buft) {
        op.emitError() << "export: the parts of weight group '" << name
                       << "' are in different buffer types";
        return WalkResult::interrupt();
      }
    graphs->globals.push_back(std::move(g));
    placement->global_buft.push_back(buft);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

} // namespace

LogicalResult exportModelGraphs(ModuleOp module, planner::ModelGraphs *graphs,
                                planner::Placement *placement) {
  if (failed(exportWeightGroups(module, graphs, placement)))
    return failure();
  planner::Graph pp, tg;
  std::optional<planner::GraphCopies> ppCopies, tgCopies;
  for (auto [name, out, copies, isTg] : {std::make_tuple("pp", &pp, &ppCopies, false),
                                         std::make_tuple("tg", &tg, &tgCopies, true)}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError() << "export: no function @" << name;
    const planner::Graph &base = isTg ? graphs->tg : graphs->pp;
    if (failed(GraphExporter(func, base, *graphs, *placement, isTg).run(out, copies)))
      return failure();
  }
  graphs->pp = std::move(pp);
  graphs->tg = std::move(tg);
  std::vector<planner::GraphCopies> copies;
  for (std::optional<planner::GraphCopies> *c : {&ppCopies, &tgCopies})
    if (*c)
      copies.push_back(std::move(**c));
  placement->copies = std::move(copies);
  return success();
}

} // namespace stowage::compiler
