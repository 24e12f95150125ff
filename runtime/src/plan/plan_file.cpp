#include <algorithm>
#include <cstdio>
#include <cstring>

#include "plan_graph.h"
#include "plan_seal.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/read_file.h"

namespace stowage {
namespace {

bool Aligned8(const void* p) { return reinterpret_cast<uintptr_t>(p) % 8 == 0; }

// The form of every structural error: kDataLoss "<path>: <field>: <what>".
Status Fail(const std::string& path, const std::string& field, const std::string& what) {
  return DataLoss(path + ": " + field + ": " + what);
}

// What can be checked from a plan's first bytes (`n` of them, all when fewer than 8) and its size:
// at least 8 bytes, the file identifier "STWP" at byte 4, at most kMaxPlanFileSize bytes.
Status CheckHeader(const uint8_t* data, size_t n, uint64_t size, const std::string& path) {
  if (size < 8 || n < 8)
    return Fail(path, "header", "expected a plan file of at least 8 bytes, found " + std::to_string(size));
  if (!plan::PlanBufferHasIdentifier(data)) {
    std::string found;
    for (int i = 4; i < 8; ++i) {
      const uint8_t c = data[i];
      if (c >= 32 && c < 127 && c != '"' && c != '\\')
        found += static_cast<char>(c);
      else {
        char b[8];
        std::snprintf(b, sizeof b, "\\x%02x", c);
        found += b;
      }
    }
    return Fail(path, "file identifier",
                "expected \"STWP\" at byte 4, found \"" + found + "\" (not a Stowage plan)");
  }
  if (size > kMaxPlanFileSize)
    return Fail(path, "file size",
                "expected a plan of at most " + std::to_string(kMaxPlanFileSize) + " bytes (1 GiB), found " +
                    std::to_string(size) + " bytes");
  return Status::Ok();
}

}  // namespace

Result<std::vector<uint8_t>> ReadPlanBytes(const std::string& path) {
  if (path.empty())
    return InvalidArgument("plan file path is empty; expected the path of a plan written by plan-model");
  // Size and identifier first: a large file that is not a plan costs one read of 8 bytes.
  ReadRegularFileOptions o;
  o.max_bytes = kMaxPlanFileSize;
  o.what = "a plan file written by plan-model";
  o.head_bytes = 8;
  o.check_head = [&path](const uint8_t* head, size_t n, uint64_t size) {
    return CheckHeader(head, n, size, path);
  };
  return ReadRegularFileBytes(path, o);
}

PlanFile::PlanFile() = default;
PlanFile::~PlanFile() = default;

Result<std::unique_ptr<PlanFile>> PlanFile::Load(const std::string& path, PlanChecks checks) {
  STOWAGE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadPlanBytes(path));
  return FromBytes(std::move(bytes), path, checks);
}

Result<std::unique_ptr<PlanFile>> PlanFile::FromBytes(std::vector<uint8_t> bytes, std::string name,
                                                      PlanChecks checks) {
  std::unique_ptr<PlanFile> p(new PlanFile());
  p->path_ = std::move(name);
  p->bytes_ = std::move(bytes);
  STOWAGE_RETURN_IF_ERROR(p->Verify(checks));
  return p;
}

Status PlanFile::Verify(PlanChecks checks) {
  STOWAGE_RETURN_IF_ERROR(VerifyStructure());
  // The graphs as the executor decodes and binds them (plan_graph.h), at each graph's worst case
  // and on the planned buffer sizes: what Session would otherwise find only after allocating.
  // Decoded once: a Session runs the graphs checked here (graphs()).
  const plan::Plan& r = *root_;
  STOWAGE_ASSIGN_OR_RETURN(plan_graph::Graphs decoded, plan_graph::Decode(r, path_));
  auto memory = std::make_unique<const plan_graph::Memory>(plan_graph::PlannedMemory(r));
  const plan_graph::Memory& mem = *memory;
  // Bound at every vertex of the range of symbol values a session binds (plan_graph::Corners):
  // a tensor that fits at kv_head 0 may leave its buffer, or the tensor it views, at kv_head 100.
  std::vector<plan_graph::Bound> bound;
  for (size_t gi = 0; gi < decoded.graphs.size(); ++gi) {
    const plan_graph::Graph& g = decoded.graphs[gi];
    for (const plan_graph::Bindings& s :
         plan_graph::Corners(g, gi, decoded.n_ctx, decoded.n_ubatch, decoded.n_ctx_swa)) {
      STOWAGE_RETURN_IF_ERROR(plan_graph::BindAll(g, s, mem, path_, &bound));
      STOWAGE_RETURN_IF_ERROR(plan_graph::CheckNodeShapes(g, bound, path_));
      STOWAGE_RETURN_IF_ERROR(plan_graph::CheckNodes(r, g, bound, mem, path_));
      STOWAGE_RETURN_IF_ERROR(plan_graph::CheckResultShape(g, bound, decoded.n_vocab, s.n_outputs, path_));
    }
  }
  graphs_ = std::make_unique<const plan_graph::Graphs>(std::move(decoded));
  memory_ = std::move(memory);
  if (checks == PlanChecks::kAllButOverlaps) return Status::Ok();
  // The offsets together (weights and KV cache in their buffers, live compute tensors in theirs):
  // a plan whose tensors share bytes (edited or corrupted) would compute wrong values without an
  // error.
  const MemoryCheckReport overlaps = CheckComputeMemory(*this, 1, /*overlaps_only=*/true);
  if (!overlaps.conflicts.empty())
    return DataLoss(path_ + ": buffer offsets overlap (plan-dump --check-memory lists all): " +
                    overlaps.conflicts.front());
  return Status::Ok();
}

namespace {

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// A weight group (GlobalTensor.parts): two or more other weights without parts or slices, of its
// type and ne0, ne2 = ne3 = 1, ne1 the sum of theirs; in the parts' buffer their union (the parts
// back to back from its offset), elsewhere a copy in a plain allocated buffer.
Status VerifyWeightGroup(const plan::Plan& r, size_t i, const std::string& path) {
  const auto* t = r.tensors()->Get(i);
  const std::string f = "tensors[" + std::to_string(i) + "] '" + t->name()->str() + "'.parts";
  const auto* parts = t->parts();
  if (t->kind() != plan::TensorKind::Weight || t->slice() || parts->size() < 2)
    return Fail(path, f, "expected a weight (not sliced) of two or more parts");
  if (t->ne()->Get(2) != 1 || t->ne()->Get(3) != 1) return Fail(path, f, "expected ne2 = ne3 = 1");
  int64_t rows = 0;
  uint64_t end = t->offset();
  bool union_of_parts = true;
  for (flatbuffers::uoffset_t k = 0; k < parts->size(); ++k) {
    const int32_t id = parts->Get(k);
    if (id < 0 || size_t(id) >= r.tensors()->size() || size_t(id) == i)
      return Fail(path, f, "index " + std::to_string(id) + " out of range");
    const auto* p = r.tensors()->Get(id);
    if (p->kind() != plan::TensorKind::Weight || p->parts() || p->slice() || p->type() != t->type() ||
        p->ne()->Get(0) != t->ne()->Get(0) || p->ne()->Get(2) != 1 || p->ne()->Get(3) != 1)
      return Fail(path, f,
                  "part '" + p->name()->str() + "' is not a whole weight of the group's type and ne0");
    rows += p->ne()->Get(1);
    union_of_parts = union_of_parts && p->buffer() == t->buffer() && p->offset() == end;
    end = p->offset() + p->nbytes();
  }
  if (rows != t->ne()->Get(1))
    return Fail(path, f,
                "expected ne1 = " + std::to_string(rows) + " (the parts' rows), found " +
                    std::to_string(t->ne()->Get(1)));
  const auto* b = r.buffers()->Get(t->buffer());
  if (union_of_parts) return Status::Ok();
  if (r.tensors()->Get(parts->Get(0))->buffer() == t->buffer())
    return Fail(path, f, "in its parts' buffer the parts must lie back to back from the group's offset");
  if (b->mapped() || (b->repack() && b->repack()->size() > 0))
    return Fail(path, f, "a copy of the parts must live in a plain allocated buffer");
  return Status::Ok();
}

// Devices, backends, buffers and Plan.tensors: indices in range, alignments, mapped ranges inside
// the model file, tensors inside their buffers.
Status VerifyTables(const plan::Plan& r, const std::string& path) {
  const size_t n_dev = Len(r.devices()), n_buf = Len(r.buffers()), n_ten = Len(r.tensors()),
               n_be = Len(r.backends());
  if (n_dev == 0) return Fail(path, "devices", "expected at least one device");
  if (n_be == 0) return Fail(path, "backends", "expected at least one backend");
  for (size_t i = 0; i < n_be; ++i) {
    const auto* be = r.backends()->Get(i);
    if (be->device() < 0 || size_t(be->device()) >= n_dev)
      return Fail(path, "backends[" + std::to_string(i) + "].device", "index out of range");
    if (be->compute_buffer() >= 0 && size_t(be->compute_buffer()) >= n_buf)
      return Fail(path, "backends[" + std::to_string(i) + "].compute_buffer", "index out of range");
  }
  for (size_t i = 0; i < n_buf; ++i) {
    const auto* b = r.buffers()->Get(i);
    if (b->device() < 0 || size_t(b->device()) >= n_dev)
      return Fail(path, "buffers[" + std::to_string(i) + "].device", "index out of range");
    if (b->mapped() &&
        (b->file_offset() > r.model()->file_size() || b->size() > r.model()->file_size() - b->file_offset()))
      return Fail(path, "buffers[" + std::to_string(i) + "]", "mapped range outside the model file");
    if (b->alignment() == 0 || (b->alignment() & (b->alignment() - 1)) != 0 ||
        b->alignment() > kMaxBufferAlignment)
      return Fail(path, "buffers[" + std::to_string(i) + "].alignment",
                  "expected a power of two in [1, " + std::to_string(kMaxBufferAlignment) + "], found " +
                      std::to_string(b->alignment()));
    if (b->mapped() && b->usage() != plan::BufferUsage::Weights)
      return Fail(path, "buffers[" + std::to_string(i) + "]",
                  "only weights may live in a mapped (read-only) buffer");
  }
  for (size_t i = 0; i < n_ten; ++i) {
    const auto* t = r.tensors()->Get(i);
    const std::string f = "tensors[" + std::to_string(i) + "]";
    if (!t->name() || !t->ne() || t->ne()->size() != 4) return Fail(path, f, "expected a name and 4 dims");
    if (!Aligned8(t->ne()->Data())) return Fail(path, f + ".ne", "vector not aligned to 8 bytes");
    if (!IsValidGgmlType(t->type()))
      return Fail(path, f + ".type", "invalid ggml type " + std::to_string(t->type()));
    int64_t ne[4];
    for (int d = 0; d < 4; ++d) ne[d] = t->ne()->Get(d);
    auto bytes = TensorBytesChecked(static_cast<GgmlType>(t->type()), ne);
    if (!bytes.ok() || *bytes != t->nbytes())
      return Fail(path, f + " '" + t->name()->str() + "'", "nbytes does not match type and shape");
    if (t->buffer() < 0 || size_t(t->buffer()) >= n_buf)
      return Fail(path, f + ".buffer", "index out of range");
    const auto* b = r.buffers()->Get(t->buffer());
    if (t->kind() != plan::TensorKind::Weight && b->mapped())
      return Fail(path, f + " '" + t->name()->str() + "'",
                  "a KV cache tensor cannot live in a mapped (read-only) buffer");
    if (t->offset() > b->size() || t->nbytes() > b->size() - t->offset())
      return Fail(path, f + " '" + t->name()->str() + "'",
                  "extends past the end of buffer '" + (b->name() ? b->name()->str() : "") + "'");
  }
  for (size_t i = 0; i < n_ten; ++i)
    if (r.tensors()->Get(i)->parts()) STOWAGE_RETURN_IF_ERROR(VerifyWeightGroup(r, i, path));
  return Status::Ok();
}

// The instances of one pipeline-parallel input of graph `g`, listed in `copies` (field `f`):
// n_copies in-range instances; copies[0] == first (of kind first_kind), the others SplitCopy
// tensors of copy 0's type and shape in copy 0's buffer (ggml_dup_tensor_layout on the same
// backend), every instance of the graph listed once (ggml makes each one for one (tensor,
// backend, c)).
Status VerifyCopies(const plan::Graph& g, uint32_t n_copies, const flatbuffers::Vector<int32_t>* copies,
                    int32_t first, plan::TensorKind first_kind, const std::string& f,
                    std::vector<char>& listed, const std::string& path) {
  const size_t nt = Len(g.tensors());
  if (Len(copies) != n_copies)
    return Fail(
        path, f,
        "expected n_copies = " + std::to_string(n_copies) + " entries, found " + std::to_string(Len(copies)));
  for (uint32_t c = 0; c < n_copies; ++c) {
    const int32_t id = copies->Get(c);
    if (id < 0 || size_t(id) >= nt) return Fail(path, f, "index out of range");
    if (c == 0 && id != first)
      return Fail(path, f,
                  "copies[0] must be the tensor the nodes read (" + std::to_string(first) + "), found " +
                      std::to_string(id));
    const plan::TensorKind want = c == 0 ? first_kind : plan::TensorKind::SplitCopy;
    const auto* t = g.tensors()->Get(id);
    if (t->kind() != want)
      return Fail(path, f,
                  "copy " + std::to_string(c) + " (tensor " + std::to_string(id) +
                      ") has the wrong kind (expected " +
                      (want == plan::TensorKind::Input ? "Input" : "SplitCopy") + ")");
    if (c > 0 && t->buffer() < 0) return Fail(path, f, "copy " + std::to_string(c) + " has no buffer");
    if (listed[id])
      return Fail(path, f,
                  "copy " + std::to_string(c) + " (tensor " + std::to_string(id) + ") is listed twice");
    listed[id] = static_cast<char>(c + 1);
    if (c == 0) continue;
    const auto* t0 = g.tensors()->Get(first);
    bool same = t->type() == t0->type() && t->buffer() == t0->buffer() && t->backend() == t0->backend() &&
                t->ne() && t0->ne() && t->ne()->size() == t0->ne()->size();
    for (flatbuffers::uoffset_t d = 0; same && d < t->ne()->size(); ++d) {
      const auto* a = t->ne()->Get(d);
      const auto* b = t0->ne()->Get(d);
      same = a->c() == b->c() && a->tokens() == b->tokens() && a->kv() == b->kv() &&
             a->kv_head() == b->kv_head() && a->outputs() == b->outputs();
    }
    same = same && Len(t->ne_swa()) == Len(t0->ne_swa());
    for (flatbuffers::uoffset_t d = 0; same && d < Len(t->ne_swa()); ++d) {
      const auto* a = t->ne_swa()->Get(d);
      const auto* b = t0->ne_swa()->Get(d);
      same = a->kv_swa() == b->kv_swa() && a->kv_head_swa() == b->kv_head_swa();
    }
    if (!same)
      return Fail(path, f,
                  "copy " + std::to_string(c) + " (tensor " + std::to_string(id) +
                      ") differs from copy 0 in type, shape, buffer or backend");
  }
  return Status::Ok();
}

// Graph `g`'s tensors (field prefix `gf`): dims, types, ops and indices in range; its nodes and
// leafs.
Status VerifyGraphTensors(const plan::Plan& r, const plan::Graph& g, const std::string& gf,
                          const std::string& path) {
  const size_t nt = Len(g.tensors()), n_buf = Len(r.buffers()), n_ten = Len(r.tensors()),
               n_be = Len(r.backends());
  // flatbuffers' verifier aligns a vector of structs to 4 bytes only: DimExpr (int64 fields)
  // needs 8, or every read of it is a misaligned load (the fuzzer found such a file).
  for (size_t i = 0; i < nt; ++i) {
    const auto* t = g.tensors()->Get(i);
    if ((t->ne() && !Aligned8(t->ne()->Data())) || (t->view_nb() && !Aligned8(t->view_nb()->Data())) ||
        (t->ne_swa() && !Aligned8(t->ne_swa()->Data())) ||
        (t->view_nb_swa() && !Aligned8(t->view_nb_swa()->Data())))
      return Fail(path, gf + ".tensors[" + std::to_string(i) + "]",
                  "ne or view_nb vector not aligned to 8 bytes");
  }
  // The SWA cache's symbols (schema version 3) only in a plan that has a SWA cache.
  const bool swa_cache = r.context()->n_ctx_swa() > 0;
  for (size_t i = 0; i < nt; ++i) {
    const auto* t = g.tensors()->Get(i);
    const std::string f = gf + ".tensors[" + std::to_string(i) + "]";
    if (!t->ne() || t->ne()->size() != 4) return Fail(path, f, "expected 4 dims");
    if (t->ne_swa() && t->ne_swa()->size() != 4)
      return Fail(path, f + ".ne_swa", "expected 4 dims, found " + std::to_string(t->ne_swa()->size()));
    if (t->view_nb_swa() && t->view_nb_swa()->size() != Len(t->view_nb()))
      return Fail(path, f + ".view_nb_swa",
                  "expected as many strides as view_nb (" + std::to_string(Len(t->view_nb())) + "), found " +
                      std::to_string(t->view_nb_swa()->size()));
    if (!swa_cache && (t->ne_swa() || t->view_offset_swa() || t->view_nb_swa()))
      return Fail(path, f + ".ne_swa",
                  "expected no SWA cache symbols (n_kv_swa, kv_head_swa) in a plan without a SWA cache "
                  "(context.n_ctx_swa 0)");
    // A dimension that is 0 whatever the batch (all of its terms 0): llama.cpp's graphs have none,
    // and a node of no elements is skipped, leaving its readers with stale memory.
    for (flatbuffers::uoffset_t d = 0; d < 4; ++d) {
      const auto* e = t->ne()->Get(d);
      const auto* w = t->ne_swa() ? t->ne_swa()->Get(d) : nullptr;
      if (e->c() == 0 && e->tokens() == 0 && e->kv() == 0 && e->kv_head() == 0 && e->outputs() == 0 &&
          (w == nullptr || (w->kv_swa() == 0 && w->kv_head_swa() == 0)))
        return Fail(path, f + ".ne[" + std::to_string(d) + "]", "a dimension that is always 0");
    }
    if (!IsValidGgmlType(t->type())) return Fail(path, f + ".type", "invalid ggml type");
    if (t->op() >= static_cast<uint16_t>(GgmlOp::kCount))
      return Fail(path, f + ".op", "unknown op " + std::to_string(t->op()));
    if (t->global() >= 0 && size_t(t->global()) >= n_ten)
      return Fail(path, f + ".global", "index out of range");
    if (t->view_src() >= 0 && size_t(t->view_src()) >= nt)
      return Fail(path, f + ".view_src", "index out of range");
    if (t->buffer() >= 0 && size_t(t->buffer()) >= n_buf)
      return Fail(path, f + ".buffer", "index out of range");
    if (t->backend() >= 0 && size_t(t->backend()) >= n_be)
      return Fail(path, f + ".backend", "index out of range");
    if (t->srcs())
      for (int32_t s : *t->srcs())
        if (s >= 0 && (size_t(s) >= nt || size_t(s) == i))
          return Fail(path, f + ".srcs", "index out of range");
  }
  for (int32_t n : *g.nodes())
    if (n < 0 || size_t(n) >= nt) return Fail(path, gf + ".nodes", "index out of range");
  if (g.leafs())
    for (int32_t n : *g.leafs())
      if (n < 0 || size_t(n) >= nt) return Fail(path, gf + ".leafs", "index out of range");
  return Status::Ok();
}

// Graph `g`'s splits (contiguous node ranges covering every node, inputs in range) and the
// instances of its split inputs and graph inputs (VerifyCopies), marked in `listed`.
Status VerifyGraphSplits(const plan::Plan& r, const plan::Graph& g, const std::string& gf,
                         std::vector<char>& listed, const std::string& path) {
  const size_t nt = Len(g.tensors()), n_be = Len(r.backends());
  const uint32_t n_copies = r.n_copies();
  uint32_t prev_end = 0;
  for (size_t si = 0; si < Len(g.splits()); ++si) {
    const auto* s = g.splits()->Get(si);
    const std::string f = gf + ".splits[" + std::to_string(si) + "]";
    if (s->backend() < 0 || size_t(s->backend()) >= n_be)
      return Fail(path, f + ".backend", "index out of range");
    if (s->node_begin() != prev_end || s->node_end() < s->node_begin() || s->node_end() > g.nodes()->size())
      return Fail(path, f,
                  "node range [" + std::to_string(s->node_begin()) + ", " + std::to_string(s->node_end()) +
                      ") is not contiguous with the previous split");
    prev_end = s->node_end();
    if (s->inputs())
      for (size_t k = 0; k < s->inputs()->size(); ++k) {
        const auto* in = s->inputs()->Get(k);
        if (in->tensor() < 0 || size_t(in->tensor()) >= nt || in->copy() < 0 || size_t(in->copy()) >= nt)
          return Fail(path, f + ".inputs", "index out of range");
        const std::string fk = f + ".inputs[" + std::to_string(k) + "].copies";
        if (n_copies == 1) {
          // A one-entry list is allowed (the copy itself); readers such as plan-dump index it.
          if (Len(in->copies()) > 1)
            return Fail(path, fk,
                        "n_copies is 1 but " + std::to_string(Len(in->copies())) + " copies are listed");
          if (Len(in->copies()) == 1 && in->copies()->Get(0) != in->copy())
            return Fail(path, fk,
                        "copies[0] must be the tensor the nodes read (" + std::to_string(in->copy()) +
                            "), found " + std::to_string(in->copies()->Get(0)));
          continue;
        }
        STOWAGE_RETURN_IF_ERROR(VerifyCopies(g, n_copies, in->copies(), in->copy(),
                                             plan::TensorKind::SplitCopy, fk, listed, path));
      }
  }
  if (prev_end != g.nodes()->size()) return Fail(path, gf + ".splits", "do not cover every node");
  if (n_copies == 1 && Len(g.input_copies()) > 0)
    return Fail(path, gf + ".input_copies", "n_copies is 1 but graph inputs have copies");
  for (size_t k = 0; k < Len(g.input_copies()); ++k) {
    const auto* ic = g.input_copies()->Get(k);
    const std::string fk = gf + ".input_copies[" + std::to_string(k) + "]";
    if (ic->tensor() < 0 || size_t(ic->tensor()) >= nt)
      return Fail(path, fk + ".tensor", "index out of range");
    if (g.tensors()->Get(ic->tensor())->kind() != plan::TensorKind::Input)
      return Fail(path, fk + ".tensor", "expected a graph input (kind Input)");
    STOWAGE_RETURN_IF_ERROR(VerifyCopies(g, n_copies, ic->copies(), ic->tensor(), plan::TensorKind::Input,
                                         fk + ".copies", listed, path));
  }
  return Status::Ok();
}

// Graph `gi` of `r`: its tensors, splits and pipeline-parallel copies.
Status VerifyGraph(const plan::Plan& r, size_t gi, const std::string& path) {
  const plan::Graph& g = *r.graphs()->Get(gi);
  const std::string gf = "graphs[" + std::to_string(gi) + "]";
  const size_t nt = Len(g.tensors());
  if (nt == 0 || !g.nodes()) return Fail(path, gf, "expected tensors and nodes");
  STOWAGE_RETURN_IF_ERROR(VerifyGraphTensors(r, g, gf, path));
  const uint32_t n_copies = r.n_copies();
  std::vector<char> listed(nt, 0);
  STOWAGE_RETURN_IF_ERROR(VerifyGraphSplits(r, g, gf, listed, path));
  // Only copy 0 is filled (the runtime does not rotate ggml's cur_copy): the other instances are
  // memory nobody writes, so no node and no split input may read them.
  if (n_copies > 1) {
    auto extra = [&](int32_t id) { return id >= 0 && size_t(id) < nt && listed[id] > 1; };
    auto name = [&](int32_t id) {
      const auto* n = g.tensors()->Get(id)->name();
      return n ? n->str() : std::string();
    };
    for (int32_t n : *g.nodes())
      if (const auto* srcs = g.tensors()->Get(n)->srcs())
        for (int32_t s : *srcs)
          if (extra(s))
            return Fail(path, gf + ".tensors[" + std::to_string(n) + "].srcs",
                        "node '" + name(n) + "' reads '" + name(s) + "', copy " +
                            std::to_string(listed[s] - 1) +
                            " of a pipeline-parallel input (only copy 0 is ever filled)");
    for (size_t si = 0; si < Len(g.splits()); ++si)
      if (const auto* ins = g.splits()->Get(si)->inputs())
        for (size_t k = 0; k < ins->size(); ++k)
          if (extra(ins->Get(k)->tensor()))
            return Fail(path,
                        gf + ".splits[" + std::to_string(si) + "].inputs[" + std::to_string(k) + "].tensor",
                        "copies '" + name(ins->Get(k)->tensor()) + "', copy " +
                            std::to_string(listed[ins->Get(k)->tensor()] - 1) +
                            " of a pipeline-parallel input (only copy 0 is ever filled)");
  }
  return Status::Ok();
}

// The SWA cache of an interleaved sliding-window model (schema version 3): context.n_ctx_swa cells,
// at most n_ctx, and either n_ctx (--swa-full) or enough for a whole ubatch (the ring the session
// writes a ubatch into holds it at once; the model's window is checked against it with the model,
// CheckPlanAgainstModel); the graphs' worst case max_kv_swa covers it.
Status VerifySwaCache(const plan::Plan& r, const std::string& path) {
  const plan::ContextParams& c = *r.context();
  const uint32_t n_swa_cells = c.n_ctx_swa();
  if (n_swa_cells == 0) return Status::Ok();
  if (r.schema_version() < kPlanSchemaVersionSwa)
    return Fail(path, "schema_version",
                "expected >= " + std::to_string(kPlanSchemaVersionSwa) +
                    " for a SWA cache (context.n_ctx_swa " + std::to_string(n_swa_cells) + "), found " +
                    std::to_string(r.schema_version()));
  if (n_swa_cells > c.n_ctx() || (n_swa_cells < c.n_ctx() && n_swa_cells < c.n_ubatch()))
    return Fail(path, "context.n_ctx_swa",
                "expected n_ctx " + std::to_string(c.n_ctx()) + ", or from n_ubatch " +
                    std::to_string(c.n_ubatch()) + " to n_ctx, found " + std::to_string(n_swa_cells));
  for (size_t gi = 0; gi < Len(r.graphs()); ++gi) {
    const plan::Graph& g = *r.graphs()->Get(gi);
    if (g.max_kv_swa() < static_cast<int64_t>(n_swa_cells))
      return Fail(path, "graphs[" + std::to_string(gi) + "].max_kv_swa",
                  "expected at least context.n_ctx_swa " + std::to_string(n_swa_cells) + ", found " +
                      std::to_string(g.max_kv_swa()));
  }
  return Status::Ok();
}

// Attention sinks and SWIGLU_OAI (schema version 4): a node that needs them in a plan of an older
// version was written by a planner that did not set it (or edited down), and a runtime of that
// version would have run the node without its sinks.
Status VerifySinksVersion(const plan::Plan& r, const std::string& path) {
  if (r.schema_version() >= kPlanSchemaVersionSinks) return Status::Ok();
  for (size_t gi = 0; gi < Len(r.graphs()); ++gi) {
    const plan::Graph& g = *r.graphs()->Get(gi);
    for (size_t i = 0; i < Len(g.tensors()); ++i) {
      const auto* t = g.tensors()->Get(i);
      const auto* s = t->srcs();
      if (t->op() >= static_cast<uint16_t>(GgmlOp::kCount) ||
          !NeedsSinksSchema(static_cast<GgmlOp>(t->op()), s ? s->data() : nullptr, Len(s)))
        continue;
      const std::string name = t->name() ? t->name()->str() : "";
      return Fail(path, "schema_version",
                  "expected >= " + std::to_string(kPlanSchemaVersionSinks) + " for attention sinks / " +
                      "SWIGLU_OAI (graphs[" + std::to_string(gi) + "].tensors[" + std::to_string(i) + "] '" +
                      name + "', " + GgmlOpName(static_cast<GgmlOp>(t->op())) + "), found " +
                      std::to_string(r.schema_version()));
    }
  }
  return Status::Ok();
}

// Several sequences (schema version 5): n_seq_max from 1 to LLAMA_MAX_SEQ (256, llama.cpp 2026
// llama_context's check), above 1 only from version 5.
Status VerifySeqs(const plan::Plan& r, const std::string& path) {
  const uint32_t n_seq_max = r.context()->n_seq_max();
  if (n_seq_max < 1 || n_seq_max > kMaxSequences)
    return Fail(path, "context.n_seq_max",
                "expected 1 to " + std::to_string(kMaxSequences) + " (LLAMA_MAX_SEQ), found " +
                    std::to_string(n_seq_max));
  if (n_seq_max > 1 && r.schema_version() < kPlanSchemaVersionSeqs)
    return Fail(path, "schema_version",
                "expected >= " + std::to_string(kPlanSchemaVersionSeqs) +
                    " for several sequences (context.n_seq_max " + std::to_string(n_seq_max) + "), found " +
                    std::to_string(r.schema_version()));
  return Status::Ok();
}

}  // namespace

// The file's own consistency: header, flatbuffers verifier, schema version, checksum, cross
// references.
Status PlanFile::VerifyStructure() {
  const std::string& path = path_;
  STOWAGE_RETURN_IF_ERROR(CheckHeader(bytes_.data(), bytes_.size(), bytes_.size(), path));
  flatbuffers::Verifier verifier(bytes_.data(), bytes_.size(), /*max_depth=*/64, /*max_tables=*/1u << 26);
  if (!plan::VerifyPlanBuffer(verifier))
    return Fail(path, "flatbuffer", "verification failed (corrupted or truncated plan)");
  root_ = plan::GetPlan(bytes_.data());
  const plan::Plan& r = *root_;
  if (r.schema_version() == 0) return Fail(path, "schema_version", "expected >= 1, found 0");
  if (r.schema_version() > kPlanSchemaVersion)
    return Status(StatusCode::kUnimplemented,
                  path + ": schema_version: this runtime reads plans up to version " +
                      std::to_string(kPlanSchemaVersion) + ", found " + std::to_string(r.schema_version()));
  // From version 2 the plan carries a checksum of its own bytes: a corrupted value that still
  // verifies (an offset, an index, a float parameter) would otherwise be computed with. A checksum
  // that is present is checked whatever the version says (an edited version must not switch it off).
  uint64_t want = 0, got = 0;
  const bool sealed = plan_seal::ContentHashes(bytes_.data(), bytes_.size(), &want, &got);
  if (!sealed && r.schema_version() >= 2)
    return Fail(path, "content_xxh64", "missing (required from schema_version 2: the plan's checksum)");
  if (sealed && want != got) {
    char msg[200];
    std::snprintf(msg, sizeof msg,
                  "checksum mismatch: the file's bytes hash to %016llx, the plan records %016llx "
                  "(corrupted or edited plan; plan the model again)",
                  (unsigned long long)got, (unsigned long long)want);
    return Fail(path, "content_xxh64", msg);
  }
  if (!r.model() || !r.context()) return Fail(path, "model/context", "required table missing");
  STOWAGE_RETURN_IF_ERROR(VerifySwaCache(r, path));
  STOWAGE_RETURN_IF_ERROR(VerifySeqs(r, path));
  STOWAGE_RETURN_IF_ERROR(VerifyTables(r, path));
  if (Len(r.graphs()) == 0) return Fail(path, "graphs", "expected the pp and tg graphs");
  // Pipeline parallelism (schema additions within version 1, COMPATIBILITY.md).
  const uint32_t n_copies = r.n_copies();
  if (n_copies < 1 || n_copies > 4)
    return Fail(path, "n_copies",
                "expected 1 to 4 (GGML_SCHED_MAX_COPIES), found " + std::to_string(n_copies));
  for (size_t gi = 0; gi < Len(r.graphs()); ++gi) STOWAGE_RETURN_IF_ERROR(VerifyGraph(r, gi, path));
  return VerifySinksVersion(r, path);
}

}  // namespace stowage
