// Session: plan + GGUF -> buffers -> graph execution (see session.h).
#include "stowage/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <thread>

#include "../plan/plan_graph.h"
#include "backend.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/plan.h"

namespace stowage {

using exec::Backend;
using exec::Buffer;
using exec::NodeCall;
using exec::TensorView;
namespace fb = ::stowage::plan;

using plan_graph::Bound;
using plan_graph::Extent;
using plan_graph::GGraph;
using plan_graph::GSplit;
using plan_graph::GTensor;
using plan_graph::Sym;

class Session::Impl {
 public:
  std::unique_ptr<PlanFile> plan;
  /// The model, mapped once: shared with the caller when it passed its GgufFile (Create overloads).
  std::shared_ptr<const GgufFile> gguf;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<int> buffer_backend;  // backend that owns each buffer
  std::vector<bool> buffer_mapped;  // read-only ranges of the GGUF mapping
  std::vector<BufferReport> reports;
  std::vector<GGraph> graphs;  // [0] = pp, [1] = tg
  /// What tensors bind against: planned buffer sizes, the buffers' bases, weights / KV cache as
  /// uploaded (data, layout).
  plan_graph::Memory mem;
  int64_t n_ctx = 0, n_ubatch = 0, n_vocab = 0, n_past = 0;
  int64_t kv_pad = 32;  ///< llama_kv_cache_get_padding: 256 with flash attention, else 32
  /// SessionOptions::llamacpp_numerics: n_kv as llama.cpp 2026 (at least 256 cells, padded to 256).
  bool pad_n_kv_to_256 = false;
  /// A decode failed after a recurrent model's state was (partly) updated: Decode refuses until Reset.
  bool recurrent_state_lost = false;
  std::vector<float> unwanted_logits;  ///< Decode's logits when the caller passes nullptr
  int64_t n_swa = 0;                   // sliding window of KQ_mask_swa (<arch>.attention.sliding_window)
  double load_seconds = 0;
  std::vector<Bound> bound;  // scratch per call
  // Op profile (SessionOptions::profile_ops): rows, and per graph the row of each tensor (-1: not
  // yet looked up).
  bool profile = false;
  std::vector<OpProfileEntry> prof_rows;
  std::vector<std::vector<int>> prof_slot;
  int ProfRow(const std::string& graph, const std::string& backend, const std::string& op);
  void ProfAdd(int row, std::chrono::steady_clock::time_point t0) {
    prof_rows[size_t(row)].calls += 1;
    prof_rows[size_t(row)].seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  Status Init(const SessionOptions& opts);
  Status CreateBackends(const SessionOptions& opts);
  Status AllocateBuffers(const SessionOptions& opts);
  Status LoadWeights(const SessionOptions& opts);
  Status RunSplits(GGraph& g);
  Status CopyTensor(GGraph& g, int src, int dst);
  Status WaitHostWrites();
  Status WaitHostReads();
  Status SyncAll();
  // Asynchronous split execution (RunSplits): queued copies the host must wait for before it
  // touches host memory again, and host staging kept alive until every queue has drained.
  std::vector<std::shared_ptr<exec::Event>> host_reads;   // async writes whose source is host memory
  std::vector<std::shared_ptr<exec::Event>> host_writes;  // async reads whose target is host memory
  std::vector<std::vector<uint8_t>> stages;
  cpu::ComputeContext copy_ctx;  // host-side copies (split inputs)
  Status BindAll(const GGraph& g, const Sym& s) {
    return plan_graph::BindAll(g, s, mem, plan->path(), &bound);
  }
  Status RunUbatch(const int32_t* tokens, int64_t n, bool all_logits, float* out);
  Status RunUbatchOn(GGraph& g, const int32_t* tokens, int64_t n, bool all_logits, float* out);
  Status WriteInput(GGraph& g, int id, const void* data, uint64_t n);
  static Result<std::unique_ptr<Session>> Finish(std::unique_ptr<Impl> impl,
                                                 std::shared_ptr<const GgufFile> model,
                                                 const SessionOptions& opts,
                                                 std::chrono::steady_clock::time_point t0);
  /// True when some weights are read in place from the file mapping (the plan's mapped buffers).
  bool ReadsMapping() const {
    return std::find(buffer_mapped.begin(), buffer_mapped.end(), true) != buffer_mapped.end();
  }
};

Status CheckThreadCount(int n_threads, const std::string& subject) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n_threads < 0 || n_threads > 4 * hw)
    return InvalidArgument(subject + " " + std::to_string(n_threads) + " is outside [0, " +
                           std::to_string(4 * hw) + "] (0 = all " + std::to_string(hw) +
                           " hardware threads; at most 4x oversubscription)");
  return Status::Ok();
}

Status Session::Impl::CreateBackends(const SessionOptions& opts) {
  const auto& r = plan->root();
  STOWAGE_RETURN_IF_ERROR(CheckThreadCount(opts.n_threads));
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n_threads = opts.n_threads > 0 ? opts.n_threads : hw;
  for (const auto* be : *r.backends()) {
    const auto* dev = r.devices()->Get(be->device());
    const std::string dname = dev->name() ? dev->name()->str() : "?";
    const std::string dtype = fb::EnumNameDeviceType(dev->type());
    std::unique_ptr<Backend> b;
    if (opts.backend_factory) b = opts.backend_factory->Create(dname, dtype, n_threads);
    if (!b) b = exec::CreateBuiltinBackend(dname, dtype, n_threads, opts.llamacpp_numerics, opts.cpu_max_isa);
    if (!b)
      return Unavailable(plan->path() + ": planned device '" + dname + "' (" + dtype +
                         ") is not on this machine or its backend is not built (backends built: " +
                         exec::BuiltinBackendNames() + "; list-devices shows this machine's devices)");
    backends.push_back(std::move(b));
  }
  return Status::Ok();
}

Status Session::Impl::AllocateBuffers(const SessionOptions& opts) {
  const auto& r = plan->root();
  static const char* kUsage[] = {"model", "KV", "compute", "output"};
  for (size_t i = 0; i < r.buffers()->size(); ++i) {
    const auto* b = r.buffers()->Get(i);
    // The backend of the buffer's device (the CPU backend for host buffers).
    int be = static_cast<int>(backends.size()) - 1;
    for (size_t k = 0; k < r.backends()->size(); ++k)
      if (r.backends()->Get(k)->device() == b->device()) {
        be = static_cast<int>(k);
        break;
      }
    BufferReport rep;
    rep.name = b->name() ? b->name()->str() : "";
    rep.usage = kUsage[static_cast<int>(b->usage()) & 3];
    rep.device = r.devices()->Get(b->device())->name() ? r.devices()->Get(b->device())->name()->str() : "";
    rep.planned = b->size();
    rep.mapped = b->mapped();
    if (b->mapped()) {  // inside the file: CheckPlanAgainstModel
      buffers.push_back(exec::HostBuffer::Wrap(gguf->bytes() + b->file_offset(), b->size(),
                                               opts.copy_mapped_weights_to_huge_pages));
      if (!backends[be]->CanAccess(*buffers.back()))
        return Unimplemented(plan->path() + ": buffer '" + rep.name + "' maps the file on device '" +
                             rep.device + "', whose backend cannot read host memory");
    } else {
      STOWAGE_ASSIGN_OR_RETURN(
          auto buf, backends[be]->Allocate(b->buft() ? b->buft()->str() : "", b->size(), b->alignment()));
      if (b->tensor_split() && b->tensor_split()->size() > 0) {
        const std::vector<float> ts(b->tensor_split()->begin(), b->tensor_split()->end());
        Status st = buf->SetTensorSplit(ts);
        if (!st.ok()) return st.WithPrefix(plan->path() + ": buffer '" + rep.name + "' tensor_split");
      }
      buffers.push_back(std::move(buf));
    }
    rep.allocated = buffers.back()->size();
    // Tensors were checked against the planned size (PlanFile::Verify); a backend may round up.
    if (rep.allocated < rep.planned)
      return Internal(plan->path() + ": buffer '" + rep.name + "': the backend allocated " +
                      std::to_string(rep.allocated) + " bytes of the planned " + std::to_string(rep.planned));
    mem.buffer_base.push_back(buffers.back()->base());
    buffer_backend.push_back(be);
    buffer_mapped.push_back(b->mapped());
    reports.push_back(rep);
  }
  return Status::Ok();
}

Status Session::Impl::LoadWeights(const SessionOptions& opts) {
  const auto& r = plan->root();
  const size_t n = r.tensors()->size();
  uint64_t total = 0, done = 0;
  for (size_t i = 0; i < n; ++i) total += r.tensors()->Get(i)->nbytes();
  for (size_t i = 0; i < n; ++i) {
    const auto* t = r.tensors()->Get(i);
    Buffer& buf = *buffers[t->buffer()];
    mem.globals[i].data = buf.base() + t->offset();
    const TensorView v = mem.globals[i];
    done += t->nbytes();
    if (opts.progress && total > 0) opts.progress(static_cast<float>(done) / static_cast<float>(total));
    // A weight is in the model with the planned type, shape and data offset (CheckPlanAgainstModel).
    if (t->kind() != fb::TensorKind::Weight) continue;
    const auto* pb = r.buffers()->Get(t->buffer());
    if (pb->mapped()) continue;
    const uint8_t* src = gguf->bytes() + t->gguf_offset();
    const std::string repack = pb->repack() ? pb->repack()->str() : "";
    // A repack buffer type (llama.cpp's CPU_REPACK) converts the weights it can into the kernels'
    // interleaved layout on upload (ggml-cpu repack set_tensor); every other buffer stores the
    // tensor through its WriteTensor hook, which may keep it in its backend's preferred layout
    // (the ONEDNN buffer type reorders matmul weights into oneDNN's blocked layout) and reports it.
    if (repack.empty()) {
      STOWAGE_ASSIGN_OR_RETURN(const int stored, buf.WriteTensor(v, t->offset(), src));
      mem.globals[i].layout = stored;
      continue;
    }
    const int layout = cpu::RepackLayoutFor(v);
    if (layout != cpu::kLayoutPlain) {
      TensorView s = v;
      s.data = const_cast<uint8_t*>(src);
      if (buf.is_host() && t->offset() <= buf.size() && t->nbytes() <= buf.size() - t->offset()) {
        // Straight into host memory: a staging copy of the largest tensor (the output matrix, tens
        // of MiB) would add to the peak resident memory of the load.
        STOWAGE_RETURN_IF_ERROR(cpu::RepackWeight(s, layout, buf.base() + t->offset()));
      } else {
        std::vector<uint8_t> tmp(t->nbytes());
        STOWAGE_RETURN_IF_ERROR(cpu::RepackWeight(s, layout, tmp.data()));
        STOWAGE_RETURN_IF_ERROR(buf.Write(t->offset(), tmp.data(), tmp.size()));
      }
      mem.globals[i].layout = layout;
    } else {
      STOWAGE_RETURN_IF_ERROR(buf.Write(t->offset(), src, t->nbytes()));
    }
  }
  return Status::Ok();
}

int Session::Impl::ProfRow(const std::string& graph, const std::string& backend, const std::string& op) {
  for (size_t i = 0; i < prof_rows.size(); ++i)
    if (prof_rows[i].graph == graph && prof_rows[i].backend == backend && prof_rows[i].op == op)
      return int(i);
  OpProfileEntry e;
  e.graph = graph;
  e.backend = backend;
  e.op = op;
  prof_rows.push_back(e);
  return int(prof_rows.size() - 1);
}

Status Session::Impl::Init(const SessionOptions& opts) {
  profile = opts.profile_ops;
  // The plan passed PlanFile::Verify (every check that needs no model file); this checks it
  // against the model and reads the model's sliding window.
  uint32_t swa = 0;
  STOWAGE_RETURN_IF_ERROR(CheckPlanAgainstModel(*plan, *gguf, &swa));
  n_swa = swa;
  const auto& r = plan->root();
  STOWAGE_ASSIGN_OR_RETURN(plan_graph::Graphs decoded, plan_graph::Decode(r, plan->path()));
  graphs = std::move(decoded.graphs);
  n_ctx = decoded.n_ctx;
  n_ubatch = decoded.n_ubatch;
  n_vocab = decoded.n_vocab;
  kv_pad = r.context()->flash_attn() ? 256 : 32;
  pad_n_kv_to_256 = opts.llamacpp_numerics;
  mem = plan_graph::PlannedMemory(r);
  STOWAGE_RETURN_IF_ERROR(CreateBackends(opts));
  STOWAGE_RETURN_IF_ERROR(AllocateBuffers(opts));
  return LoadWeights(opts);
}

Status Session::Impl::WaitHostWrites() {
  for (auto& ev : host_writes) STOWAGE_RETURN_IF_ERROR(ev->HostWait());
  host_writes.clear();
  return Status::Ok();
}

Status Session::Impl::WaitHostReads() {
  for (auto& ev : host_reads) STOWAGE_RETURN_IF_ERROR(ev->HostWait());
  host_reads.clear();
  return Status::Ok();
}

// Drains every backend's queue (ggml_backend_sched_synchronize); afterwards no queued work refers
// to host memory or staging. Runs on errors too, keeping the first error. Any order is correct;
// the reverse of the backend list drains the later devices of a layer chain first, so the lazy test
// backend (test/unit/backends/async_private_backend.h) runs a destination queue before its source
// queue and exposes a missing cross-backend event wait.
Status Session::Impl::SyncAll() {
  Status first = Status::Ok();
  for (auto it = backends.rbegin(); it != backends.rend(); ++it) {
    Status st = (*it)->Synchronize();
    if (first.ok() && !st.ok()) first = st;
  }
  for (auto* evs : {&host_reads, &host_writes}) {
    for (auto& ev : *evs) {
      Status st = ev->HostWait();
      if (first.ok() && !st.ok()) first = st;
    }
    evs->clear();
  }
  stages.clear();
  return first;
}

// One split input copy (ggml_backend_sched_compute_splits). A copy into an asynchronous backend's
// memory is queued on that (the destination) backend, so it runs after the work that backend
// queued before it and before the split's nodes, with no wait; a copy out of an asynchronous
// backend's memory is queued on the source backend, after the node that computed it. The host
// waits only where host memory is involved: a host-side destination is written by a queued read
// (host_writes: waited before the host reads it), a host-side source is read by a queued write
// (host_reads: waited before host kernels may overwrite it). Device to device: a direct copy
// ordered on both queues (Backend::CopyFromAsync) where the backends have one, else through host
// staging, the destination backend waiting on an event of the source backend's read.
Status Session::Impl::CopyTensor(GGraph& g, int src, int dst) {
  const Bound& s = bound[src];
  const Bound& d = bound[dst];
  if (buffer_mapped[d.buffer])
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name +
                    "' targets the read-only mapping of the model file");
  // A weight stored in a backend's own layout (CPU_REPACK's interleaved blocks, ONEDNN's blocked
  // matmul layout) is only readable by that backend's kernels: its bytes copied elsewhere would be
  // read as ggml's plain layout (llama.cpp's repack buffers refuse get_tensor for the same reason).
  if (s.v.layout != cpu::kLayoutPlain)
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name +
                    "' reads '" + g.tensors[src].name + "', stored in a backend-specific layout (" +
                    std::to_string(s.v.layout) + ") that only its own backend reads");
  Buffer& sb = *buffers[s.buffer];
  Buffer& db = *buffers[d.buffer];
  Backend& from = *backends[buffer_backend[s.buffer]];
  Backend& to = *backends[buffer_backend[d.buffer]];
  if (s.v.nelements() != d.v.nelements() || s.v.type != d.v.type)
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name +
                    "' does not match its source '" + g.tensors[src].name + "'");
  auto record = [](Backend& b, std::vector<std::shared_ptr<exec::Event>>* list) -> Status {
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<exec::Event> ev, b.RecordEvent());
    if (ev) list->push_back(std::move(ev));
    return Status::Ok();
  };
  const bool both_contiguous = s.v.is_contiguous() && d.v.is_contiguous();
  if (both_contiguous) {  // byte copy (any type, e.g. the I32 positions)
    const uint64_t n = RowSize(s.v.type, s.v.ne[0]) * static_cast<uint64_t>(s.v.nrows());
    if (sb.is_host() && db.is_host()) {
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
      return db.Write(d.offset, s.v.data, n);
    }
    if (sb.is_host()) {  // host -> device: queued on the destination backend
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(to.WriteAsync(db, d.offset, s.v.data, n));
      return record(to, &host_reads);
    }
    if (db.is_host()) {  // device -> host: queued on the source backend, after its producer
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
      STOWAGE_RETURN_IF_ERROR(from.ReadAsync(sb, s.offset, d.v.data, n));
      return record(from, &host_writes);
    }
    // device -> device: directly when the destination backend can (peer copy), else through host
    // staging (alive until SyncAll), the destination waiting on an event of the source's read.
    if (&from != &to) {
      STOWAGE_ASSIGN_OR_RETURN(const bool direct, to.CopyFromAsync(from, sb, s.offset, db, d.offset, n));
      if (direct) return Status::Ok();
    }
    stages.emplace_back(n);
    uint8_t* stage = stages.back().data();
    STOWAGE_RETURN_IF_ERROR(from.ReadAsync(sb, s.offset, stage, n));
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<exec::Event> ev, from.RecordEvent());
    if (ev) STOWAGE_RETURN_IF_ERROR(to.WaitEvent(*ev));
    return to.WriteAsync(db, d.offset, stage, n);
  }
  if (sb.is_host() && db.is_host()) {
    STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
    STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    TensorView dv = d.v;
    return cpu::Cpy(copy_ctx, s.v, dv);
  }
  // Strided and private on a side (rare): synchronously through host staging. Read the source's
  // bytes (keeping its strides), make them contiguous, queue the write into the destination
  // (contiguous by construction).
  STOWAGE_RETURN_IF_ERROR(from.Synchronize());
  STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
  const uint64_t ext = Extent(s.v);
  std::vector<uint8_t> strided(ext);
  STOWAGE_RETURN_IF_ERROR(sb.Read(s.offset, strided.data(), ext));
  TensorView hs = s.v;
  hs.data = strided.data();
  TensorView hd = d.v;
  if (db.is_host()) {
    STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    return cpu::Cpy(copy_ctx, hs, hd);
  }
  stages.emplace_back(Extent(d.v));
  hd.data = stages.back().data();
  STOWAGE_RETURN_IF_ERROR(cpu::Cpy(copy_ctx, hs, hd));
  return to.WriteAsync(db, d.offset, stages.back().data(), stages.back().size());
}

Status Session::Impl::RunSplits(GGraph& g) {
  using ProfClock = std::chrono::steady_clock;
  const size_t gi = size_t(&g - graphs.data());
  if (profile && prof_slot.size() < graphs.size()) prof_slot.resize(graphs.size());
  if (profile && prof_slot[gi].size() != g.tensors.size()) prof_slot[gi].assign(g.tensors.size(), -1);
  for (const GSplit& sp : g.splits) {
    Backend& be = *backends[sp.backend];
    // Split inputs: copy each source into the split backend's memory (ggml_backend_sched).
    const auto tc = profile ? ProfClock::now() : ProfClock::time_point();
    for (const auto& [src, copy] : sp.inputs) STOWAGE_RETURN_IF_ERROR(CopyTensor(g, src, copy));
    if (profile && !sp.inputs.empty()) ProfAdd(ProfRow(g.name, "", "(split input copies)"), tc);
    // Host kernels read and write host memory: queued copies into it must have landed, and queued
    // copies out of it must have read it before it may be overwritten. Asynchronous backends wait
    // for nothing here: their copies were queued ahead of their nodes.
    if (!be.is_async()) {
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    }
    for (uint32_t k = sp.begin; k < sp.end; ++k) {
      const int id = g.nodes[k];
      const GTensor& t = g.tensors[id];
      if (IsViewOp(t.op) || t.op == GgmlOp::NONE) continue;
      if (bound[id].v.nelements() == 0) continue;  // an empty node computes nothing (ggml skips it too)
      NodeCall c;
      c.op = t.op;
      c.name = t.name.c_str();
      c.dst = bound[id].v;
      for (size_t j = 0; j < t.srcs.size() && j < size_t(NodeCall::kMaxSrc); ++j) {
        if (t.srcs[j] < 0) continue;
        c.src[j] = bound[t.srcs[j]].v;
        c.has_src[j] = true;
      }
      c.iparams = t.iparams.data();
      c.n_iparams = t.iparams.size();
      c.fparams = t.fparams.data();
      c.n_fparams = t.fparams.size();
      // The plan must only give a backend tensors it can access (else a split input copy is due).
      if (!be.CanAccess(*buffers[bound[id].buffer]))
        return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name + "' on backend " +
                        be.name() + " writes a buffer it cannot access");
      for (size_t j = 0; j < t.srcs.size() && j < size_t(NodeCall::kMaxSrc); ++j)
        if (t.srcs[j] >= 0 && !be.CanAccess(*buffers[bound[t.srcs[j]].buffer]))
          return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name + "' on backend " +
                          be.name() + " reads '" + g.tensors[t.srcs[j]].name +
                          "' from a buffer it cannot access (no split input copy)");
      const auto t0 = profile ? ProfClock::now() : ProfClock::time_point();
      Status st = be.Compute(c);
      if (!st.ok())
        return st.WithPrefix(plan->path() + ": graph " + g.name + " node " +
                             (t.name.empty() ? "#" + std::to_string(id) + " (unnamed)" : "'" + t.name + "'"));
      if (profile) {
        int& row = prof_slot[gi][size_t(id)];
        if (row < 0) {
          std::string label = GgmlOpName(t.op);
          if ((t.op == GgmlOp::MUL_MAT || t.op == GgmlOp::MUL_MAT_ID) && c.has_src[0])
            label += std::string(" ") + GgmlTypeName(c.src[0].type);
          row = ProfRow(g.name, be.name(), label);
        }
        ProfAdd(row, t0);
      }
    }
  }
  // The end of the ubatch: every queue drains before the host reads the logits and writes the next
  // ubatch's inputs (llama_decode synchronizes the scheduler before reading outputs).
  const auto ts = profile ? ProfClock::now() : ProfClock::time_point();
  Status synced = SyncAll();
  if (profile) ProfAdd(ProfRow(g.name, "", "(sync)"), ts);
  return synced;
}

Status Session::Impl::WriteInput(GGraph& g, int id, const void* data, uint64_t n) {
  if (id < 0) return Status::Ok();
  const Bound& b = bound[id];
  return buffers[b.buffer]->Write(b.offset, data, n);
}

Status Session::Impl::RunUbatch(const int32_t* tokens, int64_t n, bool all_logits, float* out) {
  GGraph& g = n == 1 ? graphs[1] : graphs[0];
  const auto t_ubatch = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = RunUbatchOn(g, tokens, n, all_logits, out);
  if (profile && st.ok()) ProfAdd(ProfRow(g.name, "", "(ubatch)"), t_ubatch);
  return st;
}

Status Session::Impl::RunUbatchOn(GGraph& g, const int32_t* tokens, int64_t n, bool all_logits, float* out) {
  Sym s;
  s.n_tokens = n;
  s.kv_head = n_past;
  // llama_kv_cache_update / llama_kv_cache_get_padding (Feb 2025): n_kv covers the cells in use,
  // padded to 256 with flash attention, else 32. With llamacpp_numerics, llama.cpp 2026's
  // llama_kv_cache::get_n_kv: max(256, the cells in use padded to 256), at most the cache — the
  // attention dots then run over the same cells (a vec_dot over n_kv sums its tail past the last
  // multiple of 64 apart from the rest, so the padding changes its bits).
  if (pad_n_kv_to_256)
    s.n_kv = std::min<int64_t>(n_ctx, std::max<int64_t>(256, (n_past + n + 255) / 256 * 256));
  else
    s.n_kv = std::min<int64_t>(n_ctx, (n_past + n + kv_pad - 1) / kv_pad * kv_pad);
  if (g.recurrent()) {
    // One sequence in cell 0 (llama_kv_cache_find_slot for recurrent models: n_kv = cells in use,
    // head = the first of them).
    s.kv_head = 0;
    s.n_kv = 1;
  }
  s.n_outputs = all_logits ? n : 1;
  if (n > g.max_tokens || s.n_kv > g.max_kv || s.n_outputs > g.max_outputs)
    return Internal("ubatch exceeds the planned worst case of graph " + g.name);
  STOWAGE_RETURN_IF_ERROR(BindAll(g, s));

  STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_tokens, tokens, n * sizeof(int32_t)));
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(n_past + i);
  STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_pos, pos.data(), n * sizeof(int32_t)));
  // KQ_mask: causal (cell j holds position j). KQ_mask_swa also hides cells that fell out of the
  // sliding window: llama_set_inputs (Feb 2025) masks cell j for the token at position p when
  // p - j >= n_swa.
  for (const int id : {g.kq_mask, g.kq_mask_swa}) {
    if (id < 0) continue;
    const int64_t window = id == g.kq_mask_swa ? n_swa : 0;
    const TensorView& mv = bound[id].v;
    std::vector<float> mask(static_cast<size_t>(mv.ne[0] * mv.ne[1]), -INFINITY);
    for (int64_t i = 0; i < mv.ne[1] && i < n; ++i)
      for (int64_t j = 0; j < mv.ne[0]; ++j) {
        const int64_t p = n_past + i;
        if (j <= p && (window == 0 || p - j < window)) mask[i * mv.ne[0] + j] = 0.f;
      }
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, id, mask.data(), mask.size() * sizeof(float)));
  }
  for (const int id : {g.inp_s_copy, g.inp_s_mask})
    if (id >= 0 && bound[id].v.nelements() != s.n_kv)
      return DataLoss(plan->path() + ": graph " + g.name + " input '" + g.tensors[id].name + "' has " +
                      std::to_string(bound[id].v.nelements()) +
                      " elements, expected n_kv = " + std::to_string(s.n_kv));
  if (g.inp_s_copy >= 0) {
    const int32_t copy_from = 0;  // cell 0 keeps its own state
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_s_copy, &copy_from, sizeof copy_from));
  }
  if (g.inp_s_mask >= 0) {
    const float keep = n_past > 0 ? 1.0f : 0.0f;  // a new sequence starts from zero states
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_s_mask, &keep, sizeof keep));
  }
  if (g.inp_out_ids >= 0) {
    std::vector<int32_t> ids(s.n_outputs);
    for (int64_t i = 0; i < s.n_outputs; ++i) ids[i] = static_cast<int32_t>(all_logits ? i : n - 1);
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_out_ids, ids.data(), ids.size() * sizeof(int32_t)));
  }
  Status run = RunSplits(g);
  if (!run.ok()) {
    (void)SyncAll();  // no queued work may outlive the failed call (it refers to this ubatch's memory)
    return run;
  }
  const Bound& rb = bound[g.result];
  STOWAGE_RETURN_IF_ERROR(plan_graph::CheckResultShape(g, bound, n_vocab, s.n_outputs, plan->path()));
  STOWAGE_RETURN_IF_ERROR(
      buffers[rb.buffer]->Read(rb.offset, out, static_cast<uint64_t>(n_vocab * s.n_outputs) * sizeof(float)));
  n_past += n;
  return Status::Ok();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Impl::Finish(std::unique_ptr<Impl> impl,
                                                       std::shared_ptr<const GgufFile> model,
                                                       const SessionOptions& opts,
                                                       std::chrono::steady_clock::time_point t0) {
  if (model == nullptr) return InvalidArgument("Session: no model (a null GgufFile)");
  impl->gguf = std::move(model);
  STOWAGE_RETURN_IF_ERROR(impl->Init(opts));
  // The weights were just read from the file: one rewritten meanwhile gave them bytes of both.
  STOWAGE_RETURN_IF_ERROR(impl->gguf->CheckUnchanged());
  impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Session::Create(const std::string& plan_path, const std::string& model_path,
                                                 const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::Load(plan_path));
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> model, GgufFile::Open(model_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::Create(const std::string& plan_path,
                                                 std::shared_ptr<const GgufFile> model,
                                                 const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::Load(plan_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              const std::string& model_path,
                                                              const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::FromBytes(std::move(plan_bytes), "<plan in memory>"));
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> model, GgufFile::Open(model_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              std::shared_ptr<const GgufFile> model,
                                                              const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::FromBytes(std::move(plan_bytes), "<plan in memory>"));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Status Session::Decode(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  Impl& s = *impl_;
  if (s.recurrent_state_lost)
    return FailedPrecondition("decode: a failed decode left the recurrent state of " + s.plan->path() +
                              "'s model partly updated; Reset() the session first");
  if (tokens.empty()) return InvalidArgument("decode: empty batch (at least one token is needed)");
  for (int32_t t : tokens)
    if (t < 0 || t >= s.n_vocab)
      return InvalidArgument("decode: token id " + std::to_string(t) + " out of range [0, " +
                             std::to_string(s.n_vocab) + ")");
  if (s.n_past + static_cast<int64_t>(tokens.size()) > s.n_ctx)
    return OutOfRange("context full: " + std::to_string(s.n_past) + " tokens in the cache + " +
                      std::to_string(tokens.size()) + " new > n_ctx " + std::to_string(s.n_ctx));
  // Weights read in place fault (SIGBUS) once the file is truncated: refused here, before the
  // next read, with the file named (a truncation during a decode faults: see session.h).
  if (s.ReadsMapping()) STOWAGE_RETURN_IF_ERROR(s.gguf->CheckUnchanged());
  const int64_t n = static_cast<int64_t>(tokens.size());
  // A failed decode leaves the sequence as it was: n_past returns to its value before the call (the
  // KV cells written by the ubatches that succeeded lie beyond it and are overwritten next time).
  // A recurrent model's state (one cell, updated in place by every ubatch) cannot be rolled back:
  // the session refuses to decode until Reset().
  const int64_t n_past_before = s.n_past;
  // No logits wanted (nullptr): computed into the session's scratch and dropped.
  if (logits == nullptr) logits = &s.unwanted_logits;
  // Every element is written by the ubatches below (resize: no work when the caller reuses the
  // vector, as a generation loop does).
  logits->resize(static_cast<size_t>((all_logits ? n : 1) * s.n_vocab));
  std::vector<float> discard;  // logits of the last token of a ubatch that is not the last one
  // Any failure, a Status or an exception (std::bad_alloc in a later ubatch), leaves the sequence
  // as described above: n_past rolled back, a recurrent state marked lost.
  auto failed = [&](Status st) {
    s.n_past = n_past_before;
    for (const GGraph& g : s.graphs) s.recurrent_state_lost = s.recurrent_state_lost || g.recurrent();
    return st;
  };
  try {
    for (int64_t i = 0; i < n; i += s.n_ubatch) {
      const int64_t m = std::min<int64_t>(s.n_ubatch, n - i);
      const bool last = i + m == n;
      float* out = nullptr;
      if (all_logits) {
        out = logits->data() + i * s.n_vocab;
      } else if (last) {
        out = logits->data();
      } else {
        discard.resize(static_cast<size_t>(s.n_vocab));
        out = discard.data();
      }
      Status st = s.RunUbatch(tokens.data() + i, m, all_logits, out);
      if (!st.ok()) return failed(std::move(st));
    }
  } catch (const std::bad_alloc&) {
    return failed(ResourceExhausted("decode: out of memory"));
  } catch (const std::exception& e) {
    return failed(Internal(std::string("decode: ") + e.what()));
  }
  return Status::Ok();
}

void Session::Reset() {
  impl_->n_past = 0;
  impl_->recurrent_state_lost = false;
}
int64_t Session::n_past() const { return impl_->n_past; }
int64_t Session::n_ctx() const { return impl_->n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
std::vector<BufferReport> Session::Buffers() const { return impl_->reports; }
double Session::load_seconds() const { return impl_->load_seconds; }

std::vector<OpProfileEntry> Session::OpProfile() const {
  std::vector<OpProfileEntry> rows;
  for (const OpProfileEntry& e : impl_->prof_rows)
    if (e.calls > 0) rows.push_back(e);
  std::stable_sort(rows.begin(), rows.end(), [](const OpProfileEntry& a, const OpProfileEntry& b) {
    return a.graph != b.graph ? a.graph < b.graph : a.seconds > b.seconds;
  });
  return rows;
}

void Session::ResetOpProfile() {
  for (OpProfileEntry& e : impl_->prof_rows) {
    e.calls = 0;
    e.seconds = 0;
  }
}

}  // namespace stowage
