// A tensor split across MPI ranks; see tensor_split_plan.h.
#include "stowage/planner/tensor_split_plan.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan_export.h"
#include "stowage/planner/sm_tensor.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf_writer.h"

namespace stowage::planner {
namespace {

Status Prefixed(int rank, const Status& s) {
  return s.ok() ? s : Status(s.code(), "rank " + std::to_string(rank) + ": " + s.message());
}

/// A header of `gguf` for one rank's model: the keys of its head counts, key / value / rope sizes
/// and FFN width set to the rank's (the sizes written out, since their defaults follow n_head), and
/// every split tensor with its slice's shape. Written to a temporary file, opened with OpenHeader
/// (unlinked once open) and returned.
Result<std::unique_ptr<GgufFile>> RankHeader(const GgufFile& gguf, const ModelGraphs& full,
                                             const SmRankShares& sh) {
  const HParams& hp = full.hp;
  const std::string a = hp.arch + ".";
  const std::pair<std::string, uint32_t> set[] = {{a + "attention.head_count", sh.n_head},
                                                  {a + "attention.head_count_kv", sh.n_head_kv},
                                                  {a + "feed_forward_length", sh.n_ff},
                                                  {a + "attention.key_length", hp.n_embd_head_k},
                                                  {a + "attention.value_length", hp.n_embd_head_v},
                                                  {a + "rope.dimension_count", hp.n_rot}};
  GgufWriter w;
  for (const GgufKV& kv : gguf.kvs()) {
    bool replaced = false;
    for (const auto& [key, v] : set) replaced = replaced || kv.key == key;
    if (!replaced) STOWAGE_RETURN_IF_ERROR(w.AddKV(kv.key, GgufMetaValue::FromValue(kv.value)));
  }
  for (const auto& [key, v] : set) STOWAGE_RETURN_IF_ERROR(w.AddKV(key, GgufMetaValue::U32(v)));
  for (const GgufTensorInfo& ti : gguf.tensors()) {
    std::vector<int64_t> ne(ti.ne, ti.ne + ti.n_dims);
    const int g = full.FindGlobal(ti.name);
    if (g >= 0 && sh.slices[g].axis != SmAxis::kMirrored)
      ne[static_cast<int>(sh.slices[g].axis)] = sh.slices[g].count;
    STOWAGE_RETURN_IF_ERROR(w.AddTensor(ti.name, ti.type, ne));
  }
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/stowage-rank-header.XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return IoError(path + ": cannot create the rank's model header");
  const std::vector<uint8_t> header = w.SerializeHeader();
  const bool written = write(fd, header.data(), header.size()) == static_cast<ssize_t>(header.size());
  close(fd);
  auto opened =
      written ? GgufFile::OpenHeader(path, w.FileSize())
              : Result<std::unique_ptr<GgufFile>>(IoError(path + ": cannot write the rank's model header"));
  unlink(path.c_str());
  return opened;
}

uint64_t Bytes(const MemoryPlan& mem, BufferUsage usage) {
  uint64_t n = 0;
  for (const PlannedBuffer& b : mem.buffers) n += b.usage == usage ? b.size : 0;
  return n;
}

}  // namespace

int InsertAllReduce(const ModelGraphs& m, Graph& g) {
  int inserted = 0;
  for (size_t pos = 0; pos < g.nodes.size(); ++pos) {
    const int id = g.nodes[pos];
    const Tensor& mm = g.tensors[id];
    if (mm.op != GgmlOp::MUL_MAT || mm.srcs.empty() || mm.srcs[0] < 0) continue;
    const Tensor& w = g.tensors[mm.srcs[0]];
    if (w.kind != TensorKind::kWeight || w.global < 0) continue;
    const std::string& name = m.globals[w.global].name;
    const auto ends = [&](const std::string& s) {
      return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (!ends(".attn_output.weight") && !ends(".ffn_down.weight")) continue;
    Tensor ar;
    ar.name = mm.name + ".all_reduce";
    ar.kind = TensorKind::kIntermediate;
    ar.type = mm.type;
    ar.ne = mm.ne;
    ar.op = GgmlOp::ALL_REDUCE;
    ar.srcs = {id};
    ar.view_src = mm.view_src >= 0 ? mm.view_src : id;  // summed in place (ggml_ops.h traits)
    ar.layer = mm.layer;
    ar.is_output = mm.is_output;
    ar.backend = mm.backend;
    ar.cause = mm.cause;
    const int ar_id = static_cast<int>(g.tensors.size());
    for (Tensor& t : g.tensors)
      for (int& s : t.srcs) s = s == id ? ar_id : s;
    for (Split& sp : g.splits)
      for (auto& in : sp.inputs) in.first = in.first == id ? ar_id : in.first;
    g.tensors[id].is_output = false;
    g.tensors.push_back(std::move(ar));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(pos) + 1, ar_id);
    for (Split& sp : g.splits) {
      if (sp.node_begin > static_cast<int>(pos)) ++sp.node_begin;
      if (sp.node_end > static_cast<int>(pos)) ++sp.node_end;
    }
    ++pos;
    ++inserted;
  }
  return inserted;
}

Result<TensorSplitPlan> PlanTensorSplitRanks(const GgufFile& gguf, const HParams& hp,
                                             const ContextConfig& cfg,
                                             const std::vector<std::vector<DeviceManifest>>& hosts,
                                             const std::vector<float>& tensor_split,
                                             const PlacementOptions& opt, const std::string& flags) {
  const int n = static_cast<int>(hosts.size());
  if (n < 2)
    return InvalidArgument("tensor split across ranks: needs at least 2 hosts in the cluster, found " +
                           std::to_string(n));
  for (int h = 0; h < n; ++h)
    for (const DeviceManifest& d : hosts[h])
      if (d.type != DeviceType::kCpu)
        return InvalidArgument("tensor split across ranks: host " + std::to_string(h) + ": device '" +
                               d.name +
                               "': expected CPU devices only (tensor-split ranks are CPU ranks), found a " +
                               (d.type == DeviceType::kGpu ? "GPU" : "non-CPU device"));
  STOWAGE_ASSIGN_OR_RETURN(ModelGraphs full, BuildModelGraphs(gguf, hp, cfg));
  STOWAGE_ASSIGN_OR_RETURN(SmTensorPlan shares, PlanSmTensor(full, n, tensor_split));
  PlacementOptions rank_opt = opt;
  rank_opt.use_mmap = false;  // slices are read into allocated buffers
  TensorSplitPlan out;
  out.ranks.resize(n);
  std::vector<std::vector<uint8_t>> rank_bytes(n);
  // rank 0 last: its plan nests the others'
  for (int r = n - 1; r >= 0; --r) {
    STOWAGE_ASSIGN_OR_RETURN(SmRankShares sh, SmTensorRankShares(full, shares, r));
    auto header = RankHeader(gguf, full, sh);
    if (!header.ok()) return Prefixed(r, header.status());
    auto rank_hp = ReadHParams(**header, /*check_tokenizer=*/false);
    if (!rank_hp.ok()) return Prefixed(r, rank_hp.status());
    auto m = BuildModelGraphs(**header, *rank_hp, cfg);
    if (!m.ok()) return Prefixed(r, m.status());
    // the rank's weights point at the file's tensors, their slices recorded
    TensorSplitRank tp;
    tp.rank = r;
    tp.n_ranks = n;
    tp.slices.resize(m->globals.size());
    for (size_t i = 0; i < m->globals.size(); ++i) {
      GlobalTensor& g = m->globals[i];
      if (g.kind != TensorKind::kWeight) continue;
      const int f = full.FindGlobal(g.name);
      if (f < 0) return Prefixed(r, Internal(g.name + ": not among the model's weights"));
      g.gguf_offset = full.globals[f].gguf_offset;
      const SmRankSlice& s = sh.slices[f];
      if (s.axis == SmAxis::kMirrored) continue;
      tp.slices[i].axis = static_cast<int>(s.axis);
      tp.slices[i].begin = s.begin;
      std::copy(full.globals[f].ne, full.globals[f].ne + 4, tp.slices[i].full_ne);
    }
    PlacementOutcome o;
    for (PlaceStep step :
         {PlaceStep::kLayers, PlaceStep::kWeights, PlaceStep::kKvCache, PlaceStep::kSchedule})
      STOWAGE_RETURN_IF_ERROR(Prefixed(r, PlaceModelStep(step, *m, hosts[r], rank_opt, &o)));
    InsertAllReduce(*m, m->pp);
    const int n_ar = InsertAllReduce(*m, m->tg);
    STOWAGE_RETURN_IF_ERROR(Prefixed(r, PlaceModelStep(PlaceStep::kMemory, *m, hosts[r], rank_opt, &o)));
    if (r == 0)
      for (int k = 1; k < n; ++k) tp.other_rank_plans.push_back(std::move(rank_bytes[k]));
    rank_bytes[r] = SerializePlan(gguf, *m, o.placement, o.memory, flags, &tp);
    TensorSplitRankMemory& mem = out.ranks[r];
    mem.n_head = sh.n_head;
    mem.n_head_kv = sh.n_head_kv;
    mem.n_ff = sh.n_ff;
    mem.weights = Bytes(o.memory, BufferUsage::kWeights);
    mem.kv = Bytes(o.memory, BufferUsage::kKvCache);
    mem.compute = Bytes(o.memory, BufferUsage::kCompute);
    mem.output = Bytes(o.memory, BufferUsage::kOutput);
    for (const DeviceManifest& d : hosts[r]) mem.free += d.memory_free;
    mem.n_allreduce = n_ar;
  }
  out.bytes = std::move(rank_bytes[0]);
  return out;
}

}  // namespace stowage::planner
