#include "stowage/planner/memory_plan.h"

#include <algorithm>
#include <limits>
#include <map>

namespace stowage::planner {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

/// Contiguous bytes of a graph tensor at the worst-case binding.
uint64_t TensorBytesAt(const Tensor& t, const Bindings& b) {
  int64_t ne[4];
  for (int i = 0; i < 4; ++i) ne[i] = std::max<int64_t>(b.Eval(t.ne[i]), 0);
  return TensorBytes(t.type, ne);
}

/// True when the tensor owns memory in a compute arena.
bool OwnsArenaMemory(const Tensor& t) {
  if (t.kind == TensorKind::kWeight || t.kind == TensorKind::kKvCache) return false;
  if (t.view_src >= 0) return false;  // views and CPY results alias their owner
  return true;
}

/// Places the weight groups `groups` of one buft whose parts are in `parts_buffer` (`pb`, index
/// `parts_id`): a group whose parts lie back to back is their union (same buffer, the first
/// part's offset); one whose parts are apart in the mapped file is a copy in one more, allocated
/// buffer of the buft that the loader fills from the parts' file data.
Status PlaceWeightGroups(ModelGraphs& m, const std::vector<size_t>& groups, const PlannedBuffer& pb,
                         int parts_id, MemoryPlan* out) {
  PlannedBuffer copies = pb;
  copies.mapped = false;
  copies.file_offset = 0;
  copies.size = 0;
  if (pb.mapped) copies.name = pb.name.substr(0, pb.name.size() - std::string("_Mapped").size());
  const int copies_id = static_cast<int>(out->buffers.size());
  for (size_t gi : groups) {
    GlobalTensor& g = m.globals[gi];
    const GlobalTensor& first = m.globals[g.parts.front()];
    uint64_t end = first.offset, bytes = 0;
    bool adjacent = true;
    for (int part : g.parts) {
      const GlobalTensor& t = m.globals[part];
      if (t.buffer != parts_id)
        return Internal("memory plan: weight group '" + g.name + "': part '" + t.name +
                        "' is in another buffer");
      adjacent = adjacent && t.offset == end;
      end = t.offset + t.nbytes;
      bytes += t.nbytes;
    }
    if (bytes != g.nbytes)
      return Internal("memory plan: weight group '" + g.name + "': its parts hold " + std::to_string(bytes) +
                      " bytes, the group " + std::to_string(g.nbytes));
    if (adjacent) {
      g.buffer = parts_id;
      g.offset = first.offset;
      continue;
    }
    if (!pb.mapped)
      return Internal("memory plan: weight group '" + g.name + "': parts not laid out back to back");
    g.buffer = copies_id;
    g.offset = copies.size;
    copies.size += AlignUp(g.nbytes, copies.alignment);
  }
  if (copies.size > 0) out->buffers.push_back(copies);
  return Status::Ok();
}

/// Best-fit allocator over one arena: ggml-alloc's dynamic tensor allocator (ggml_dyn_tallocr, one
/// chunk). Free blocks are kept sorted by offset; the arena's unused end is one more block of
/// unbounded size, the tail.
///
/// `ggml_exact` (the graphs of llama.cpp 2026's architectures, ModelGraphs::llama2026) follows
/// ggml_dyn_tallocr_alloc / _free_bytes exactly: a freed range that touches the tail joins it, the
/// best fit is sought among the other blocks only (ties to the block at the higher offset, `<=`),
/// and the tail is the last resort. Otherwise (the Feb 2025 graphs, whose plans were made with it)
/// the simplified rule: the best fit among all freed blocks (ties to the lower offset), those at the
/// end included, growing the arena only when none fits.
class Arena {
 public:
  Arena(uint64_t align, bool ggml_exact) : align_(align), exact_(ggml_exact) {}
  uint64_t Alloc(uint64_t size) {
    size = AlignUp(std::max<uint64_t>(size, 1), align_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      if (best == free_.end() || it->second < best->second || (exact_ && it->second == best->second))
        best = it;
    }
    if (best != free_.end()) {
      const uint64_t off = best->first;
      const uint64_t rest = best->second - size;
      free_.erase(best);
      if (rest) free_[off + size] = rest;
      return off;
    }
    // The tail: grow at the end (merging a trailing free block).
    uint64_t off = top_;
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        off = last->first;
        free_.erase(last);
      }
    }
    top_ = off + size;
    peak_ = std::max(peak_, top_);
    return off;
  }
  void Free(uint64_t off, uint64_t size) {
    size = AlignUp(std::max<uint64_t>(size, 1), align_);
    auto it = free_.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
        it = prev;
      }
    }
    if (exact_ && it->first + it->second == top_) {  // joins the tail
      top_ = it->first;
      free_.erase(it);
    }
  }
  uint64_t peak() const { return peak_; }

 private:
  uint64_t align_;
  bool exact_;
  uint64_t top_ = 0, peak_ = 0;  ///< the tail's offset; the highest end ever allocated
  std::map<uint64_t, uint64_t> free_;
};

/// ggml-alloc's in-place reuse (ggml_gallocr_allocate_node): an op that ggml_op_can_inplace
/// (GgmlOpTraits::can_inplace: elementwise ops, SCALE, RMS_NORM, SOFT_MAX, ROPE) takes over the
/// memory of its first source when that source is a plain tensor of the same size in the same arena,
/// not a graph output, and this node is its last use. With `ggml_exact` a split input copy counts as
/// such a tensor too (ggml_backend_sched adds it to the graph copy as a node that ggml-alloc
/// allocates, owns and may hand over; flagged OUTPUT only with n_copies > 1, which never frees it).
/// Returns that source, or -1.
int InPlaceParent(const Graph& g, int id, int node_index, const std::vector<int>& last_use,
                  const Placement& p, const Bindings& wc, bool ggml_exact) {
  const Tensor& t = g.tensors[id];
  if (!GetOpTraits(t.op).can_inplace) return -1;
  if (t.srcs.empty() || t.srcs[0] < 0) return -1;
  const int parent = t.srcs[0];
  const Tensor& s = g.tensors[parent];
  const bool plain = s.kind == TensorKind::kIntermediate || (ggml_exact && s.kind == TensorKind::kSplitCopy);
  if (!OwnsArenaMemory(s) || s.is_output || !plain) return -1;
  if (last_use[parent] != node_index || s.backend < 0 || t.backend < 0) return -1;
  if (p.backends[s.backend].compute_buft != p.backends[t.backend].compute_buft) return -1;
  if (s.type != t.type || TensorBytesAt(s, wc) != TensorBytesAt(t, wc)) return -1;
  for (int k = 0; k < 4; ++k)
    if (s.ne[k] != t.ne[k]) return -1;
  return parent;
}

Status PlanGraphArenas(Graph& g, const Placement& p, const std::vector<int>& buft_buffer, bool ggml_exact,
                       std::vector<uint64_t>* arena_size) {
  const Bindings wc = g.WorstCase();
  const size_t n = g.tensors.size();
  auto owner = [&](int t) { return g.tensors[t].view_src >= 0 ? g.tensors[t].view_src : t; };
  // Order of first definition and last use, in node order (leafs/inputs are defined at -1).
  std::vector<int> last_use(n, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Tensor& t = g.tensors[g.nodes[i]];
    for (int s : t.srcs)
      if (s >= 0) last_use[owner(s)] = static_cast<int>(i);
    last_use[owner(g.nodes[i])] = std::max(last_use[owner(g.nodes[i])], static_cast<int>(i));
  }
  // A split input copy reads its source when the split starts: the source stays live until then.
  for (const Split& sp : g.splits)
    for (const auto& in : sp.inputs)
      last_use[owner(in.first)] = std::max(last_use[owner(in.first)], sp.node_begin);
  for (size_t i = 0; i < n; ++i)
    if (g.tensors[i].is_output) last_use[i] = std::numeric_limits<int>::max();
  // Pipeline parallelism (n_copies > 1): ggml_backend_sched flags every instance of a graph input
  // (the input itself included) and of a split input INPUT and OUTPUT ("prevent ggml-alloc from
  // overwriting the tensor"): never freed, and added to the graph copy as leafs before the
  // original leafs, graph inputs first, then the split inputs split by split, each copy 0..n-1
  // (ggml_backend_sched_split_graph), so ggml-alloc allocates them first (leafs before nodes).
  std::vector<int> first_leafs;
  if (const GraphCopies* gc = p.FindCopies(g.name)) {
    for (const TensorCopies& tc : gc->inputs)
      for (int c : tc.copies) first_leafs.push_back(c);
    for (const auto& sp : gc->splits)
      for (const TensorCopies& tc : sp)
        for (int c : tc.copies) first_leafs.push_back(c);
    for (int c : first_leafs) {
      if (c < 0 || static_cast<size_t>(c) >= n)
        return Internal("memory plan: graph " + g.name + ": copy index out of range");
      last_use[c] = std::numeric_limits<int>::max();
    }
  }

  std::map<int, Arena> arenas;  // by compute buft
  auto arena_for = [&](const Tensor& t) -> Arena* {
    if (t.backend < 0) return nullptr;
    const int buft = p.backends[t.backend].compute_buft;
    auto it = arenas.find(buft);
    if (it == arenas.end()) it = arenas.emplace(buft, Arena(p.bufts[buft].alignment, ggml_exact)).first;
    return &it->second;
  };
  std::vector<char> allocated(n, 0);
  auto alloc = [&](int id) -> Status {
    if (allocated[id]) return Status::Ok();
    allocated[id] = 1;
    Tensor& t = g.tensors[id];
    Arena* a = arena_for(t);
    if (a == nullptr)
      return Internal("memory plan: tensor '" + t.name + "' of graph " + g.name + " has no backend");
    t.buffer = buft_buffer[p.backends[t.backend].compute_buft];
    t.offset = a->Alloc(TensorBytesAt(t, wc));
    return Status::Ok();
  };
  // Inputs first (ggml allocates graph inputs before the nodes); with n_copies > 1 every copy
  // before them.
  for (int l : first_leafs) STOWAGE_RETURN_IF_ERROR(alloc(l));
  for (int l : g.leafs) {
    if (OwnsArenaMemory(g.tensors[l])) STOWAGE_RETURN_IF_ERROR(alloc(l));
    // llama.cpp 2026's unread "inp_embd" input leaf (Graph::unread_embd_ne0), created right after
    // inp_tokens in the same arena, never freed.
    if (g.unread_embd_ne0 > 0 && g.tensors[l].name == "inp_tokens" && allocated[l]) {
      const int64_t ne[4] = {g.unread_embd_ne0, g.max_tokens, 1, 1};
      arena_for(g.tensors[l])->Alloc(TensorBytes(GgmlType::F32, ne));
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    // Split input copies live in the split backend's arena from the split's first node on
    // (ggml_backend_sched adds them to the graph before the split's nodes).
    // The source of each input is freed there when the copy was its last reader (ggml's
    // "input_dep" view node keeps it until then), unless this split's first node reads it too.
    const int id = g.nodes[i];
    for (const Split& s : g.splits) {
      if (s.node_begin != static_cast<int>(i)) continue;
      for (const auto& in : s.inputs) {
        STOWAGE_RETURN_IF_ERROR(alloc(in.second));
        const int o = owner(in.first);
        const Tensor& t = g.tensors[o];
        bool read_here = false;
        for (int src : g.tensors[id].srcs)
          if (src >= 0 && owner(src) == o) read_here = true;
        if (!read_here && allocated[o] && OwnsArenaMemory(t) && last_use[o] == static_cast<int>(i)) {
          arena_for(t)->Free(t.offset, TensorBytesAt(t, wc));
          last_use[o] = -1;  // freed once
        }
      }
    }
    int inplace_parent = -1;
    if (OwnsArenaMemory(g.tensors[id])) {
      inplace_parent = InPlaceParent(g, id, static_cast<int>(i), last_use, p, wc, ggml_exact);
      if (inplace_parent >= 0) {
        // With ggml_exact the node owns that memory from now on, as ggml-alloc marks it allocated:
        // when a later split copies it (e.g. ffn_norm, in place over its RMS_NORM, copied to the CPU
        // split of a layer's experts), it is freed after that copy, its last reader.
        if (ggml_exact) allocated[id] = 1;
        g.tensors[id].buffer = g.tensors[inplace_parent].buffer;
        g.tensors[id].offset = g.tensors[inplace_parent].offset;
      } else {
        STOWAGE_RETURN_IF_ERROR(alloc(id));
      }
    }
    // Free sources whose last use is this node (an in-place parent's memory now belongs to the node).
    std::vector<int> done;
    for (int s : g.tensors[id].srcs)
      if (s >= 0) done.push_back(owner(s));
    std::sort(done.begin(), done.end());
    done.erase(std::unique(done.begin(), done.end()), done.end());
    for (int o : done) {
      const Tensor& t = g.tensors[o];
      if (!OwnsArenaMemory(t) || last_use[o] != static_cast<int>(i) || o == inplace_parent) continue;
      arena_for(t)->Free(t.offset, TensorBytesAt(t, wc));
    }
  }
  for (auto& [buft, a] : arenas) (*arena_size)[buft] = std::max((*arena_size)[buft], a.peak());
  return Status::Ok();
}

}  // namespace

uint64_t MemoryPlan::DeviceBytes(int device) const {
  uint64_t s = 0;
  for (const auto& b : buffers)
    if (b.device == device && !b.mapped) s += b.size;
  return s;
}

Status PlanMemory(ModelGraphs& m, const Placement& p, MemoryPlan* out) {
  out->buffers.clear();
  if (p.global_buft.size() != m.globals.size())
    return Internal("memory plan: placement does not cover every weight");

  // Weights, one buffer per buft (or one mapped range), in load order.
  for (size_t b = 0; b < p.bufts.size(); ++b) {
    const PlacedBuft& buft = p.bufts[b];
    const PlacedDevice& dev = p.devices[buft.device];
    std::vector<size_t> members, groups;
    for (size_t i = 0; i < m.globals.size(); ++i)
      if (m.globals[i].kind == TensorKind::kWeight && p.global_buft[i] == static_cast<int>(b))
        (m.globals[i].parts.empty() ? members : groups).push_back(i);
    if (members.empty()) continue;
    PlannedBuffer pb;
    pb.buft = static_cast<int>(b);
    pb.device = buft.device;
    pb.usage = BufferUsage::kWeights;
    pb.alignment = buft.alignment;
    const int buffer_id = static_cast<int>(out->buffers.size());
    std::map<std::string, size_t> first_copy;  // dedup of duplicated tensors within the buft
    const bool mapped = p.use_mmap && buft.is_default && dev.buffer_from_host_ptr && buft.repack.empty();
    if (mapped) {
      uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
      for (size_t i : members) {
        lo = std::min(lo, m.globals[i].gguf_offset);
        hi = std::max(hi, m.globals[i].gguf_offset + m.globals[i].nbytes);
      }
      pb.name = dev.name + "_Mapped";
      pb.mapped = true;
      pb.file_offset = lo;
      pb.size = hi - lo;
      for (size_t i : members) {
        m.globals[i].buffer = buffer_id;
        m.globals[i].offset = m.globals[i].gguf_offset - lo;
      }
    } else {
      pb.name = buft.name;
      uint64_t off = 0;
      // A weight group's parts go back to back where its first part comes in load order.
      std::map<size_t, size_t> group_of_first;
      std::vector<char> in_group(m.globals.size(), 0);
      for (size_t gi : groups) {
        group_of_first[static_cast<size_t>(m.globals[gi].parts.front())] = gi;
        for (int part : m.globals[gi].parts) in_group[part] = 1;
      }
      for (size_t i : members) {
        GlobalTensor& g = m.globals[i];
        if (in_group[i]) {
          auto first = group_of_first.find(i);
          if (first == group_of_first.end()) continue;  // placed with its group's first part
          uint64_t part_off = off;
          for (int part : m.globals[first->second].parts) {
            m.globals[part].buffer = buffer_id;
            m.globals[part].offset = part_off;
            part_off += m.globals[part].nbytes;
          }
          off += AlignUp(part_off - off, buft.alignment);
          continue;
        }
        auto it = first_copy.find(g.name);
        if (it != first_copy.end()) {
          g.buffer = buffer_id;
          g.offset = m.globals[it->second].offset;
          continue;
        }
        first_copy[g.name] = i;
        g.buffer = buffer_id;
        g.offset = off;
        off += AlignUp(g.nbytes, buft.alignment);
      }
      pb.size = off;
    }
    if (pb.size > 0) out->buffers.push_back(pb);
    STOWAGE_RETURN_IF_ERROR(PlaceWeightGroups(m, groups, pb, buffer_id, out));
  }

  // KV cache, one buffer per buft.
  for (size_t b = 0; b < p.bufts.size(); ++b) {
    PlannedBuffer pb;
    pb.name = p.bufts[b].name;
    pb.buft = static_cast<int>(b);
    pb.device = p.bufts[b].device;
    pb.usage = BufferUsage::kKvCache;
    pb.alignment = p.bufts[b].alignment;
    const int buffer_id = static_cast<int>(out->buffers.size());
    for (size_t i = 0; i < m.globals.size(); ++i) {
      GlobalTensor& g = m.globals[i];
      if (g.kind != TensorKind::kKvCache || p.global_buft[i] != static_cast<int>(b)) continue;
      g.buffer = buffer_id;
      g.offset = pb.size;
      pb.size += AlignUp(g.nbytes, pb.alignment);
    }
    if (pb.size > 0) out->buffers.push_back(pb);
  }

  // Compute arenas: one per distinct compute buft.
  std::vector<int> buft_buffer(p.bufts.size(), -1);
  std::vector<uint64_t> arena_size(p.bufts.size(), 0);
  for (const auto& be : p.backends) {
    if (buft_buffer[be.compute_buft] >= 0) continue;
    PlannedBuffer pb;
    pb.name = p.bufts[be.compute_buft].name;
    pb.buft = be.compute_buft;
    pb.device = p.bufts[be.compute_buft].device;
    pb.usage = BufferUsage::kCompute;
    pb.alignment = p.bufts[be.compute_buft].alignment;
    buft_buffer[be.compute_buft] = static_cast<int>(out->buffers.size());
    out->buffers.push_back(pb);
  }
  for (Graph* g : {&m.pp, &m.tg})
    STOWAGE_RETURN_IF_ERROR(PlanGraphArenas(*g, p, buft_buffer, m.llama2026, &arena_size));
  for (size_t b = 0; b < p.bufts.size(); ++b)
    if (buft_buffer[b] >= 0) out->buffers[buft_buffer[b]].size = arena_size[b];

  // Output (logits) buffer (llama.cpp llama_output_reserve): the host buft of the output layer's
  // device when it has one (CUDA_Host), else the CPU buft; n_vocab floats per output row, for the
  // max(1, n_seq_max) rows llama_init_from_model reserves (FEB25: "resized during inference when a
  // batch uses more outputs"). Stowage's runtime copies logits from the result tensor straight into
  // the caller's array and never grows this buffer; it is planned and allocated as llama.cpp's is
  // at load, so that the memory figures match.
  PlannedBuffer ob;
  ob.buft = -1;
  int out_dev = -1;
  for (size_t i = 0; i < m.globals.size(); ++i)
    if (m.globals[i].kind == TensorKind::kWeight && m.globals[i].layer_class == LayerClass::kOutput &&
        m.globals[i].consumer_op == GgmlOp::MUL_MAT && p.global_buft[i] >= 0)
      out_dev = p.bufts[p.global_buft[i]].device;
  // The output device's own host buft (CUDA_Host for CUDA1 too: InitPlacement lists a shared
  // buft once, under its first device), when RecordHostBufts ran; else a host buft listed under it.
  if (out_dev >= 0 && static_cast<size_t>(out_dev) < p.device_host_buft.size() &&
      p.devices[out_dev].type != DeviceKind::kCpu)
    ob.buft = p.device_host_buft[out_dev];
  for (size_t b = 0; b < p.bufts.size() && out_dev >= 0 && ob.buft < 0; ++b)
    if (p.bufts[b].device == out_dev && p.bufts[b].is_host && !p.bufts[b].is_default &&
        p.devices[out_dev].type != DeviceKind::kCpu) {
      ob.buft = static_cast<int>(b);
      break;
    }
  for (size_t b = 0; b < p.bufts.size() && ob.buft < 0; ++b)
    if (p.devices[p.bufts[b].device].type == DeviceKind::kCpu && p.bufts[b].is_default)
      ob.buft = static_cast<int>(b);
  if (ob.buft < 0) ob.buft = 0;
  ob.name = p.bufts[ob.buft].name;
  ob.device = p.bufts[ob.buft].device;
  ob.usage = BufferUsage::kOutput;
  const uint64_t rows = std::max<uint64_t>(1, m.cfg.n_seq_max);
  ob.size = uint64_t(m.hp.n_vocab) * rows * sizeof(float);
  out->buffers.push_back(ob);
  return Status::Ok();
}

}  // namespace stowage::planner
