// Split inputs that cross hosts (stowage/runtime/transport.h): a split of another host's device is
// not run here, but the inputs it reads from this host are sent to it; a split of this host that
// reads a tensor another host produced receives it from that host. Contiguous tensors only (the
// scheduler's copies are whole tensors).
#include <string>
#include <vector>

#include "host_backends.h"
#include "session_impl.h"

namespace stowage {

using plan_graph::Graph;

const exec::RemoteBackend* Session::Impl::RemoteOf(int backend) const {
  return exec::AsRemote(*backends[static_cast<size_t>(backend)]);
}

Result<uint64_t> Session::Impl::CrossHostBytes(const Graph& g, int src, int dst) const {
  const auto& s = bound[static_cast<size_t>(src)];
  const auto& d = bound[static_cast<size_t>(dst)];
  if (!s.v.is_contiguous() || !d.v.is_contiguous() || s.v.type != d.v.type ||
      s.v.nelements() != d.v.nelements())
    return Unimplemented(plan->path() + ": graph " + g.name + ": split input '" + g.tensors[dst].name +
                         "' crosses hosts from '" + g.tensors[src].name +
                         "', expected both contiguous and of one type and size");
  return RowSize(s.v.type, s.v.ne[0]) * static_cast<uint64_t>(s.v.nrows());
}

Status Session::Impl::SendSplitInputs(const Graph& g, size_t split) {
  const auto& sp = g.splits[split];
  const exec::RemoteBackend* to = RemoteOf(sp.backend);
  for (size_t k = 0; k < sp.inputs.size(); ++k) {
    const auto [src, dst] = sp.inputs[k];
    const int src_backend = buffer_backend[bound[src].buffer];
    if (RemoteOf(src_backend)) continue;  // produced on a third host, which sends it
    STOWAGE_ASSIGN_OR_RETURN(const uint64_t n, CrossHostBytes(g, src, dst));
    STOWAGE_RETURN_IF_ERROR(backends[src_backend]->Synchronize());
    STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
    std::vector<uint8_t> bytes(n);
    STOWAGE_RETURN_IF_ERROR(buffers[bound[src].buffer]->Read(bound[src].offset, bytes.data(), n));
    Status st = to->transport().Send(to->host(), SplitInputTag(graph_runs, static_cast<int>(split), int(k)),
                                     bytes.data(), n);
    if (!st.ok())
      return st.WithPrefix(plan->path() + ": graph " + g.name + ": split input '" + g.tensors[dst].name +
                           "'");
  }
  return Status::Ok();
}

Status Session::Impl::RecvSplitInput(const Graph& g, size_t split, size_t input) {
  const auto [src, dst] = g.splits[split].inputs[input];
  const exec::RemoteBackend* from = RemoteOf(buffer_backend[bound[src].buffer]);
  STOWAGE_ASSIGN_OR_RETURN(const uint64_t n, CrossHostBytes(g, src, dst));
  std::vector<uint8_t> bytes(n);
  Status st = from->transport().Recv(
      from->host(), SplitInputTag(graph_runs, static_cast<int>(split), int(input)), bytes.data(), n);
  if (!st.ok())
    return st.WithPrefix(plan->path() + ": graph " + g.name + ": split input '" + g.tensors[dst].name + "'");
  exec::Backend& to = *backends[buffer_backend[bound[dst].buffer]];
  STOWAGE_RETURN_IF_ERROR(to.Synchronize());
  return buffers[bound[dst].buffer]->Write(bound[dst].offset, bytes.data(), n);
}

}  // namespace stowage
