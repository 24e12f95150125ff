//===- ImportPlan.cpp - plan file -> ggml and place dialects --------------===//

#include "stowage/Compiler/Import/ImportPlan.h"

#include <set>
#include <string>
#include <vector>

#include "mlir/IR/Diagnostics.h"
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/plan.h"

using namespace mlir;

namespace stowage::compiler {
namespace {

namespace fb = ::stowage::plan;
using planner::DimExpr;

std::string str(const flatbuffers::String *s) { return s ? s->str() : std::string(); }

template <typename T, typename U> std::vector<T> vec(const flatbuffers::Vector<U> *v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

/// A plan dimension (plan.fbs DimExpr, with the SWA terms of DimExprSwa when present).
DimExpr dimExpr(const fb::DimExpr *e, const fb::DimExprSwa *swa) {
  DimExpr d;
  if (e) {
    d.c = e->c();
    d.tokens = e->tokens();
    d.kv = e->kv();
    d.kv_head = e->kv_head();
    d.outputs = e->outputs();
  }
  if (swa) {
    d.kv_swa = swa->kv_swa();
    d.kv_head_swa = swa->kv_head_swa();
  }
  return d;
}

/// Entry i of a dimension list and of its SWA list (absent: zero terms).
DimExpr dimAt(const flatbuffers::Vector<const fb::DimExpr *> *v,
              const flatbuffers::Vector<const fb::DimExprSwa *> *swa, size_t i) {
  return dimExpr(v && i < v->size() ? v->Get(i) : nullptr,
                 swa && i < swa->size() ? swa->Get(i) : nullptr);
}

planner::Tensor decodeTensor(const fb::GraphTensor &t) {
  planner::Tensor out;
  out.name = str(t.name());
  out.kind = static_cast<planner::TensorKind>(t.kind());
  out.global = t.global();
  out.type = static_cast<GgmlType>(t.type());
  for (size_t i = 0; i < 4; ++i)
    out.ne[i] = dimAt(t.ne(), t.ne_swa(), i);
  out.op = static_cast<GgmlOp>(t.op());
  out.srcs = vec<int>(t.srcs());
  out.iparams = vec<int32_t>(t.iparams());
  out.fparams = vec<float>(t.fparams());
  out.view_src = t.view_src();
  out.view_offset = dimExpr(t.view_offset(), t.view_offset_swa());
  for (size_t i = 0; i < 3; ++i)
    out.view_nb[i] = dimAt(t.view_nb(), t.view_nb_swa(), i);
  out.layer = t.layer();
  // The runtime's graph output (plan_graph Decode): the node named result_output.
  out.is_output = out.name == "result_output";
  out.backend = t.backend();
  out.cause = str(t.cause());
  out.buffer = t.buffer();
  out.offset = t.offset();
  return out;
}

/// One plan graph in the planner's form; with pipeline parallelism (n_copies > 1) its copies.
void decodeGraph(const fb::Graph &g, planner::Graph *out, planner::Placement *p) {
  out->name = str(g.name());
  out->max_tokens = g.max_tokens();
  out->max_kv = g.max_kv();
  out->max_outputs = g.max_outputs();
  out->max_kv_swa = g.max_kv_swa();
  if (g.tensors())
    for (const fb::GraphTensor *t : *g.tensors())
      out->tensors.push_back(decodeTensor(*t));
  out->nodes = vec<int>(g.nodes());
  out->leafs = vec<int>(g.leafs());
  planner::GraphCopies gc;
  gc.graph = out->name;
  bool copies = false;
  if (g.splits())
    for (const fb::Split *s : *g.splits()) {
      planner::Split split;
      split.backend = s->backend();
      split.node_begin = static_cast<int>(s->node_begin());
      split.node_end = static_cast<int>(s->node_end());
      std::vector<planner::TensorCopies> splitCopies;
      if (s->inputs())
        for (const fb::SplitInput *in : *s->inputs()) {
          split.inputs.emplace_back(in->tensor(), in->copy());
          splitCopies.push_back({in->tensor(), split.backend, vec<int>(in->copies())});
          copies = copies || in->copies();
        }
      out->splits.push_back(std::move(split));
      gc.splits.push_back(std::move(splitCopies));
    }
  if (g.input_copies())
    for (const fb::InputCopies *in : *g.input_copies()) {
      std::vector<int> all = vec<int>(in->copies());
      // ggml makes a graph input's copies on the input's own backend; the plan records it on
      // every copy after the first (the input itself).
      int backend = in->tensor() >= 0 && in->tensor() < static_cast<int>(out->tensors.size())
                        ? out->tensors[in->tensor()].backend
                        : -1;
      if (all.size() > 1 && all[1] >= 0 && all[1] < static_cast<int>(out->tensors.size()))
        backend = out->tensors[all[1]].backend;
      gc.inputs.push_back({in->tensor(), backend, std::move(all)});
      copies = true;
    }
  if (copies)
    p->copies.push_back(std::move(gc));
}

/// The placement the plan records: devices, buffer types (see ImportPlan.h for their kinds),
/// backends and the buffer type of every weight and cache.
void decodePlacement(const fb::Plan &r, planner::Placement *p) {
  if (r.devices())
    for (const fb::Device *d : *r.devices()) {
      planner::PlacedDevice pd;
      pd.name = str(d->name());
      pd.description = str(d->description());
      pd.type = static_cast<planner::DeviceKind>(d->type());
      pd.memory_total = d->memory_total();
      pd.memory_free = d->memory_free();
      pd.manifest_digest = str(d->manifest_digest());
      p->devices.push_back(std::move(pd));
    }
  // Plan.buffers index -> buffer type index.
  std::vector<int> bufferBuft;
  // (buffer type, device) of each backend's compute buffer on the backend's own device: the
  // device's default buffer type. (The CPU backend's compute buffer is a GPU's CUDA_Host when
  // there is one: a host buffer type, on the GPU.)
  std::set<std::pair<std::string, int>> computeBufts;
  if (r.backends())
    for (const fb::Backend *be : *r.backends())
      if (be->compute_buffer() >= 0) {
        const fb::Buffer *b = r.buffers()->Get(be->compute_buffer());
        if (b->device() == be->device())
          computeBufts.insert({str(b->buft()), b->device()});
      }
  if (r.buffers())
    for (const fb::Buffer *b : *r.buffers()) {
      const std::string name = str(b->buft());
      int index = p->FindBuft(name);
      if (index < 0) {
        planner::PlacedBuft pb;
        pb.name = name;
        pb.device = b->device();
        const planner::PlacedDevice &dev = p->devices[pb.device];
        const bool split = StringRef(name).ends_with("_Split");
        pb.is_default = !split && (computeBufts.count({name, pb.device}) || name == dev.name);
        pb.is_host = dev.type != planner::DeviceKind::kGpu || (!split && !pb.is_default);
        pb.alignment = b->alignment();
        pb.repack = str(b->repack());
        pb.tensor_split = vec<float>(b->tensor_split());
        index = static_cast<int>(p->bufts.size());
        p->bufts.push_back(std::move(pb));
      }
      bufferBuft.push_back(index);
    }
  if (r.backends())
    for (const fb::Backend *be : *r.backends()) {
      planner::PlacedBackend pb;
      pb.name = str(be->name());
      pb.device = be->device();
      pb.compute_buft = be->compute_buffer() >= 0 ? bufferBuft[be->compute_buffer()] : -1;
      p->backends.push_back(std::move(pb));
    }
  if (r.tensors())
    for (const fb::GlobalTensor *t : *r.tensors())
      p->global_buft.push_back(t->buffer() >= 0 ? bufferBuft[t->buffer()] : -1);
  p->offload_kqv = r.context()->offload_kqv();
  p->n_copies = static_cast<int>(r.n_copies());
}

/// The weights and caches of the plan (Plan.tensors).
void decodeGlobals(const fb::Plan &r, planner::ModelGraphs *m) {
  if (!r.tensors())
    return;
  std::set<std::string> weights;
  for (const fb::GlobalTensor *t : *r.tensors()) {
    planner::GlobalTensor g;
    g.name = str(t->name());
    g.kind = static_cast<planner::TensorKind>(t->kind());
    g.type = static_cast<GgmlType>(t->type());
    for (size_t i = 0; i < 4 && t->ne() && i < t->ne()->size(); ++i)
      g.ne[i] = t->ne()->Get(i);
    g.nbytes = t->nbytes();
    g.gguf_offset = t->gguf_offset();
    g.layer = t->layer();
    g.buffer = t->buffer();
    g.offset = t->offset();
    g.duplicated = g.kind == planner::TensorKind::kWeight && !weights.insert(g.name).second;
    if (t->parts())
      g.parts.assign(t->parts()->begin(), t->parts()->end());
    m->globals.push_back(std::move(g));
  }
}

} // namespace

OwningOpRef<ModuleOp> importPlanFile(MLIRContext *context, StringRef path) {
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  // The runtime's one verifier: what it refuses is refused here with its line.
  auto plan = PlanFile::Load(path.str());
  if (!plan.ok()) {
    emitError(loc) << plan.status().message();
    return nullptr;
  }
  const fb::Plan &r = (*plan)->root();
  if (!r.graphs() || r.graphs()->size() != 2) {
    emitError(loc) << path << ": graphs: expected the pp and tg graphs, found "
                   << (r.graphs() ? r.graphs()->size() : 0);
    return nullptr;
  }
  planner::ModelGraphs m;
  m.hp.arch = str(r.model()->architecture());
  m.hp.n_layer = r.context()->n_layer();
  m.cfg.n_ctx = r.context()->n_ctx();
  m.cfg.n_batch = r.context()->n_batch();
  m.cfg.n_ubatch = r.context()->n_ubatch();
  decodeGlobals(r, &m);
  planner::Placement p;
  decodePlacement(r, &p);
  decodeGraph(*r.graphs()->Get(0), &m.pp, &p);
  decodeGraph(*r.graphs()->Get(1), &m.tg, &p);
  return importModelGraphs(context, m, loc, &p);
}

} // namespace stowage::compiler
