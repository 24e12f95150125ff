// Embeddings: the final norm's output ("result_norm", llama.cpp's t_embd) read after each ubatch,
// per token or pooled per sequence (llama.cpp 2026 llama_context::decode's extraction and
// llm_graph_input_mean / llm_graph_input_cls::set_input).
#include <algorithm>
#include <string>
#include <vector>

#include "session_impl.h"

namespace stowage {

using plan_graph::Graph;

void Session::Impl::FindResultNorm() {
  result_norm.assign(graphs().size(), -1);
  for (size_t k = 0; k < graphs().size(); ++k) {
    const Graph& g = graphs()[k];
    for (size_t i = 0; i < g.tensors.size(); ++i)
      if (g.tensors[i].name == "result_norm" && !g.tensors[i].ne.empty()) {
        result_norm[k] = static_cast<int>(i);
        n_embd = g.tensors[i].ne[0].c;
      }
  }
}

void Session::Impl::ClearEmbeddings() {
  embd.clear();
  embd_seq.clear();
  embd_rows.clear();
}

Status Session::Impl::ReadEmbeddingRows(const Graph& g, int64_t n_outputs) {
  const auto k = static_cast<size_t>(&g - graphs().data());
  const int rn = result_norm[k];
  const plan_graph::Bound& e = bound[static_cast<size_t>(rn)];
  const std::string where = plan->path() + ": graph " + g.name + " tensor 'result_norm'";
  if (e.v.type != GgmlType::F32 || !e.v.is_contiguous() || e.v.ne[0] != n_embd || e.v.nrows() != n_outputs)
    return DataLoss(where + ": expected contiguous f32 [" + std::to_string(n_embd) + ", " +
                    std::to_string(n_outputs) + "], found " + exec::ShapeString(e.v));
  // Live tensors never share bytes, so a later node whose bytes meet result_norm's overwrote it
  // (ggml_gallocr frees it after the lm_head; llama.cpp 2026 marks t_embd an output instead).
  for (size_t i = static_cast<size_t>(rn) + 1; i < g.tensors.size(); ++i) {
    const plan_graph::Tensor& t = g.tensors[i];
    const plan_graph::Bound& b = bound[i];
    if (t.is_view || (t.kind != plan::TensorKind::Intermediate && t.kind != plan::TensorKind::SplitCopy) ||
        b.buffer != e.buffer || b.own_end <= e.own_begin || b.own_begin >= e.own_end)
      continue;
    return Unimplemented(where + ": its memory is reused by node '" + t.name +
                         "' (the plan does not keep it): embeddings cannot be read from this plan");
  }
  const size_t old = embd_rows.size();
  embd_rows.resize(old + static_cast<size_t>(n_outputs * n_embd));
  return buffers[static_cast<size_t>(e.buffer)]->Read(
      e.offset, embd_rows.data() + old, static_cast<uint64_t>(n_outputs * n_embd) * sizeof(float));
}

Status Session::Impl::DecodeWithEmbeddings(const BatchArrays& b, std::vector<float>* out) {
  ClearEmbeddings();
  BatchArrays all = b;
  std::fill(all.logits.begin(), all.logits.end(), uint8_t{1});
  std::vector<float> rows;
  Status st = DecodeChecked(all, &rows);
  if (!st.ok()) {
    ClearEmbeddings();
    return st;
  }
  const auto n = b.tokens.size();
  const auto nv = static_cast<size_t>(n_vocab), ne = static_cast<size_t>(n_embd);
  out->resize(static_cast<size_t>(std::count(b.logits.begin(), b.logits.end(), uint8_t{1})) * nv);
  size_t r = 0;
  for (size_t i = 0; i < n; ++i)
    if (b.logits[i])
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(i * nv), nv, out->begin() + (r++) * nv);
  if (pooling == PoolingType::kNone) {
    embd.swap(embd_rows);
    return Status::Ok();
  }
  // Per sequence: the pooled row (llm_graph_input_mean: the sum times 1/count; llm_graph_input_cls:
  // the token of the smallest position, or of the largest for kLast).
  std::vector<int64_t> count(static_cast<size_t>(n_seq_ids), 0), pick(count.size(), -1);
  embd_seq.assign(count.size(), {});
  for (size_t i = 0; i < n; ++i) {
    const auto q = static_cast<size_t>(b.seq[i]);
    const int64_t p = pick[q];
    if (p < 0 || (pooling == PoolingType::kLast ? b.pos[i] >= b.pos[static_cast<size_t>(p)]
                                                : b.pos[i] < b.pos[static_cast<size_t>(p)]))
      pick[q] = static_cast<int64_t>(i);
    std::vector<float>& v = embd_seq[q];
    v.resize(ne, 0.f);
    if (pooling == PoolingType::kMean)
      for (size_t j = 0; j < ne; ++j) v[j] += embd_rows[i * ne + j];
    ++count[q];
  }
  for (size_t q = 0; q < count.size(); ++q) {
    if (count[q] == 0) continue;
    std::vector<float>& v = embd_seq[q];
    if (pooling == PoolingType::kMean) {
      const float div = 1.0f / static_cast<float>(count[q]);
      for (float& x : v) x *= div;
    } else {
      const auto p = static_cast<size_t>(pick[q]);
      std::copy_n(embd_rows.begin() + static_cast<std::ptrdiff_t>(p * ne), ne, v.begin());
    }
  }
  embd_rows.clear();
  return Status::Ok();
}

Status Session::SetEmbeddings(bool enabled, PoolingType pooling) {
  Impl& s = *impl_;
  const int p = static_cast<int>(pooling);
  if (p < 0 || p > static_cast<int>(PoolingType::kLast))
    return InvalidArgument("SetEmbeddings: pooling " + std::to_string(p) +
                           " outside [0, 3] (none, mean, cls, last)");
  if (enabled)
    for (size_t k = 0; k < s.result_norm.size(); ++k)
      if (s.result_norm[k] < 0)
        return Unimplemented(s.plan->path() + ": graph " + s.graphs()[k].name +
                             " has no tensor 'result_norm' (the final norm's output): no embeddings");
  s.embeddings = enabled;
  s.pooling = pooling;
  s.ClearEmbeddings();
  return Status::Ok();
}

bool Session::embeddings() const { return impl_->embeddings; }
PoolingType Session::pooling() const { return impl_->pooling; }
int64_t Session::n_embd() const { return impl_->n_embd; }
const std::vector<float>& Session::Embeddings() const { return impl_->embd; }
const float* Session::SeqEmbeddings(int32_t seq_id) const {
  const Impl& s = *impl_;
  if (seq_id < 0 || static_cast<size_t>(seq_id) >= s.embd_seq.size() || s.embd_seq[seq_id].empty())
    return nullptr;
  return s.embd_seq[static_cast<size_t>(seq_id)].data();
}

}  // namespace stowage
