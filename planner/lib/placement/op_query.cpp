#include "op_query.h"

#include <vector>

#include "stowage/runtime/ggml_op_params.h"

namespace stowage::planner {

namespace {

std::array<int64_t, 4> ContiguousNb(GgmlType type, const int64_t ne[4]) {
  std::array<int64_t, 4> nb{};
  nb[0] = static_cast<int64_t>(GetTypeTraits(type).type_size);
  nb[1] = static_cast<int64_t>(RowSize(type, ne[0]));
  nb[2] = nb[1] * ne[1];
  nb[3] = nb[2] * ne[2];
  return nb;
}

}  // namespace

std::array<int64_t, 4> TensorStrides(const Graph& g, int t, const Bindings& b) {
  const Tensor& x = g.tensors[t];
  int64_t ne[4];
  for (int i = 0; i < 4; ++i) ne[i] = b.Eval(x.ne[i]);
  switch (x.op) {
    case stowage::GgmlOp::VIEW: {
      std::array<int64_t, 4> nb = ContiguousNb(x.type, ne);
      for (int i = 0; i < 3; ++i) {
        const int64_t v = b.Eval(x.view_nb[i]);
        if (v != 0) nb[i + 1] = v;
      }
      return nb;
    }
    case stowage::GgmlOp::PERMUTE: {
      const auto src = TensorStrides(g, x.srcs[0], b);
      // The builder wrote the axes with Encode; a graph that reaches placement has valid ones.
      const Result<PermuteParams> p = DecodePermute(OpParamsRef(x.iparams, x.fparams));
      std::array<int64_t, 4> nb{};
      for (int i = 0; i < 4; ++i) nb[p.ok() ? p->axis[i] : i] = src[i];
      return nb;
    }
    case stowage::GgmlOp::TRANSPOSE: {
      auto nb = TensorStrides(g, x.srcs[0], b);
      std::swap(nb[0], nb[1]);
      return nb;
    }
    default: {
      // A node written into one of its sources (ggml_cpy's destination) has that source's layout;
      // ggml_cast's result is its own.
      const int aliased = IsViewOp(x.op) ? -1 : AliasedSource(x.op, x.srcs.size());
      if (aliased >= 0) return TensorStrides(g, x.srcs[aliased], b);
      return ContiguousNb(x.type, ne);
    }
  }
}

bool IsContiguous(GgmlType type, const int64_t ne[4], const std::array<int64_t, 4>& nb) {
  // ggml_is_contiguous_n(t, 0)
  const auto& tr = GetTypeTraits(type);
  int64_t next = static_cast<int64_t>(tr.type_size);
  if (ne[0] != static_cast<int64_t>(tr.block_size) && nb[0] != next) return false;
  next *= ne[0] / static_cast<int64_t>(tr.block_size);
  for (int i = 1; i < 4; ++i) {
    if (ne[i] == 1) continue;
    if (nb[i] != next) return false;
    next *= ne[i];
  }
  return true;
}

std::string QueryString(const OpQuery& q) {
  std::string s = std::string(planner::GgmlOpName(q.op)) + "(";
  for (size_t i = 0; i < q.src.size(); ++i) {
    const TensorDesc& d = q.src[i];
    s += (i ? ", " : "") + std::string(GgmlTypeName(d.type)) + " [";
    const int n = d.NumDims();
    for (int k = 0; k < n; ++k) s += (k ? ", " : "") + std::to_string(d.ne[k]);
    s += "]";
    if (!d.buft.empty()) s += " in " + d.buft;
  }
  return s + ")";
}

BufferInfo GlobalBuffer(const ModelGraphs& m, const Placement& p, int global) {
  BufferInfo bi;
  if (global < 0 || static_cast<size_t>(global) >= p.global_buft.size() || p.global_buft[global] < 0)
    return bi;
  const PlacedBuft& pb = p.bufts[p.global_buft[global]];
  const PlacedDevice& dev = p.devices[pb.device];
  const GlobalTensor& gt = m.globals[global];
  bi.allocated = true;
  bi.is_host = pb.is_host;
  bi.weights = gt.kind == TensorKind::kWeight;
  bi.buft = pb.name;
  if (bi.weights && p.use_mmap && pb.is_default && dev.buffer_from_host_ptr && pb.repack.empty()) {
    bi.buft = dev.name + "_Mapped";  // ggml_backend_dev_buffer_from_host_ptr: a host buffer
    bi.is_host = true;
  }
  return bi;
}

}  // namespace stowage::planner
