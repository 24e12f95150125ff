// A plan split by tensors across MPI ranks (plan.fbs Plan.tp_n_ranks > 1; plan-model --cluster -sm
// tensor): every rank runs its own plan (rank 0's is the file's root, the others' are nested in it)
// over its slices of the weights, and the ALL_REDUCE nodes after the attention output and the FFN
// down projection sum the ranks' partial results through the Transport (point to point, bounded
// waits: the transport's deadline).
#include <cstring>
#include <string>
#include <vector>

#include "session_impl.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/transport.h"

namespace stowage {

Status Session::Impl::SelectTensorSplitRank(const SessionOptions& opts) {
  const uint32_t n = plan->root().tp_n_ranks();
  if (n <= 1) return Status::Ok();
  const std::shared_ptr<Transport>& t = opts.tensor_split_transport;
  if (!t || t->size() != static_cast<int>(n))
    return FailedPrecondition(plan->path() + ": planned as a tensor split across " + std::to_string(n) +
                              " MPI ranks (plan-model --cluster -sm tensor), " +
                              (t ? "mpirun started " + std::to_string(t->size()) + " rank(s)"
                                 : std::string("not started by mpirun")) +
                              ": run mpirun -np " + std::to_string(n));
  tp_transport = t;
  const int rank = t->rank();
  if (rank == 0) return Status::Ok();
  const auto* nested = plan->root().tp_rank_plans();
  if (nested == nullptr || nested->size() != n - 1 || nested->Get(rank - 1)->plan() == nullptr)
    return DataLoss(plan->path() + ": tp_rank_plans: expected " + std::to_string(n - 1) +
                    " nested rank plans, found " + std::to_string(nested ? nested->size() : 0));
  const auto* bytes = nested->Get(rank - 1)->plan();
  const std::string name = plan->path() + " (rank " + std::to_string(rank) + ")";
  STOWAGE_ASSIGN_OR_RETURN(plan,
                           PlanFile::FromBytes(std::vector<uint8_t>(bytes->begin(), bytes->end()), name));
  if (plan->root().tp_rank() != static_cast<uint32_t>(rank) || plan->root().tp_n_ranks() != n)
    return DataLoss(name + ": tp_rank " + std::to_string(plan->root().tp_rank()) + " of " +
                    std::to_string(plan->root().tp_n_ranks()) + ", expected " + std::to_string(rank) +
                    " of " + std::to_string(n));
  return Status::Ok();
}

Status Session::Impl::AllReduce(const plan_graph::Graph& g, int id, uint32_t node) {
  const exec::TensorView& v = bound[static_cast<size_t>(id)].v;
  if (!tp_transport)
    return FailedPrecondition(plan->path() + ": graph " + g.name + " node '" + g.tensors[id].name +
                              "': ALL_REDUCE outside a tensor split across MPI ranks");
  if (v.type != GgmlType::F32 || !v.is_contiguous())
    return Unimplemented(plan->path() + ": graph " + g.name + " node '" + g.tensors[id].name +
                         "': ALL_REDUCE of a contiguous F32 tensor expected, found " + GgmlTypeName(v.type));
  Transport& t = *tp_transport;
  const size_t n = static_cast<size_t>(v.nelements());
  const uint64_t bytes = n * sizeof(float);
  float* data = static_cast<float*>(v.data);
  const int tag = static_cast<int>((graph_runs * 1024u + node) % 32768u);
  if (t.rank() != 0) {
    STOWAGE_RETURN_IF_ERROR(t.Send(0, tag, data, bytes));
    return t.Recv(0, tag, data, bytes);
  }
  std::vector<float> other(n);
  for (int r = 1; r < t.size(); ++r) {
    STOWAGE_RETURN_IF_ERROR(t.Recv(r, tag, other.data(), bytes));
    for (size_t i = 0; i < n; ++i) data[i] += other[i];
  }
  for (int r = 1; r < t.size(); ++r) STOWAGE_RETURN_IF_ERROR(t.Send(r, tag, data, bytes));
  return Status::Ok();
}

Status Session::Impl::ReadWeightSlice(size_t i, std::vector<uint8_t>* out) const {
  const auto* t = plan->root().tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
  const auto* s = t->slice();
  const auto type = static_cast<GgmlType>(t->type());
  int64_t ne[4], full[4];
  for (int d = 0; d < 4; ++d) ne[d] = t->ne()->Get(d), full[d] = s->full_ne()->Get(d);
  // CheckPlanAgainstModel checked the slice against the file's tensor (inside it, whole blocks)
  const uint64_t row = RowSize(type, ne[0]), full_row = RowSize(type, full[0]);
  const uint64_t skip = s->axis() == 0 ? RowSize(type, s->begin()) : 0;
  const int64_t row0 = s->axis() == 1 ? s->begin() : 0;
  out->resize(t->nbytes());
  uint8_t* dst = out->data();
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1, dst += row) {
        const uint64_t src_row = static_cast<uint64_t>((i3 * full[2] + i2) * full[1] + row0 + i1);
        std::memcpy(dst, gguf->bytes() + t->gguf_offset() + src_row * full_row + skip, row);
      }
  return Status::Ok();
}

}  // namespace stowage
