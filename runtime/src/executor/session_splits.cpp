// Split execution (ggml_backend_sched_compute_splits): each split's input copies, its nodes on its
// backend, and the synchronization of the backends' queues with the host.
#include <chrono>
#include <string>
#include <vector>

#include "session_impl.h"

namespace stowage {

using exec::Backend;
using exec::Buffer;
using exec::NodeCall;
using exec::TensorView;
using plan_graph::Bound;
using plan_graph::Extent;
using plan_graph::Graph;
using plan_graph::Split;
using plan_graph::Tensor;

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
Status Session::Impl::CopyTensor(const Graph& g, int src, int dst) {
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

Status Session::Impl::RunSplits(const Graph& g) {
  using ProfClock = std::chrono::steady_clock;
  const size_t gi = size_t(&g - graphs().data());
  if (profile && prof_slot.size() < graphs().size()) prof_slot.resize(graphs().size());
  if (profile && prof_slot[gi].size() != g.tensors.size()) prof_slot[gi].assign(g.tensors.size(), -1);
  for (const Split& sp : g.splits) {
    Backend& be = *backends[sp.backend];
    const size_t si = static_cast<size_t>(&sp - g.splits.data());
    if (RemoteOf(sp.backend)) {  // another host runs it (session_mpi.cpp)
      STOWAGE_RETURN_IF_ERROR(SendSplitInputs(g, si));
      continue;
    }
    // Split inputs: copy each source into the split backend's memory (ggml_backend_sched), or
    // receive it from the host that produced it.
    const auto tc = profile ? ProfClock::now() : ProfClock::time_point();
    for (size_t k = 0; k < sp.inputs.size(); ++k) {
      const auto [src, copy] = sp.inputs[k];
      STOWAGE_RETURN_IF_ERROR(RemoteOf(buffer_backend[bound[src].buffer]) ? RecvSplitInput(g, si, k)
                                                                          : CopyTensor(g, src, copy));
    }
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
      const Tensor& t = g.tensors[id];
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
      Status st = t.op == GgmlOp::ALL_REDUCE ? AllReduce(g, id, k) : be.Compute(c);
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
  ++graph_runs;
  // The end of the ubatch: every queue drains before the host reads the logits and writes the next
  // ubatch's inputs (llama_decode synchronizes the scheduler before reading outputs).
  const auto ts = profile ? ProfClock::now() : ProfClock::time_point();
  Status synced = SyncAll();
  if (profile) ProfAdd(ProfRow(g.name, "", "(sync)"), ts);
  return synced;
}

}  // namespace stowage
