// Session creation on the machine: the plan's backends, its buffers (allocated or wrapping the
// model file's mapping) and the weight upload.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "session_impl.h"
#include "stowage/plan/plan_generated.h"

namespace stowage {

using exec::Backend;
using exec::Buffer;
using exec::TensorView;
namespace fb = ::stowage::plan;

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
    if (t->kind() != fb::TensorKind::Weight || t->parts()) continue;  // groups: below
    const auto* pb = r.buffers()->Get(t->buffer());
    if (pb->mapped()) continue;
    const uint8_t* src = gguf->bytes() + t->gguf_offset();
    std::vector<uint8_t> slice;  // a rank's slice of a tensor split across MPI ranks, gathered
    if (t->slice()) {
      STOWAGE_RETURN_IF_ERROR(ReadWeightSlice(i, &slice));
      src = slice.data();
    }
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
  return LoadWeightGroups();
}

Status Session::Impl::LoadWeightGroups() {
  // Weight groups (GlobalTensor.parts; PlanFile verified their layout), once their parts are in
  // place. The union of the parts in their buffer has the parts' layout: a repacked part is whole
  // groups of interleaved rows, so the parts' repacks back to back are the repack of the group.
  // A copy elsewhere gets the parts' file bytes one after another.
  const auto& r = plan->root();
  for (size_t i = 0; i < r.tensors()->size(); ++i) {
    const auto* t = r.tensors()->Get(i);
    if (!t->parts()) continue;
    const int32_t first = t->parts()->Get(0);
    if (r.tensors()->Get(first)->buffer() == t->buffer()) {
      for (const int32_t p : *t->parts())
        if (mem.globals[p].layout != mem.globals[first].layout)
          return FailedPrecondition(plan->path() + ": weight group '" + t->name()->str() + "': part '" +
                                    r.tensors()->Get(p)->name()->str() + "' is stored in layout " +
                                    std::to_string(mem.globals[p].layout) + ", part '" +
                                    r.tensors()->Get(first)->name()->str() + "' in layout " +
                                    std::to_string(mem.globals[first].layout));
      mem.globals[i].layout = mem.globals[first].layout;
      continue;
    }
    uint64_t offset = t->offset();
    for (const int32_t p : *t->parts()) {
      const auto* part = r.tensors()->Get(p);
      STOWAGE_RETURN_IF_ERROR(
          buffers[t->buffer()]->Write(offset, gguf->bytes() + part->gguf_offset(), part->nbytes()));
      offset += part->nbytes();
    }
  }
  return Status::Ok();
}

}  // namespace stowage
