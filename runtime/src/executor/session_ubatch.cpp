// One ubatch: the graph bound for its symbol values, its inputs filled, its splits run and its
// logits read.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "session_impl.h"

namespace stowage {

using exec::TensorView;
using plan_graph::Bindings;
using plan_graph::Bound;
using plan_graph::Graph;

Status Session::Impl::WriteInput(int id, const void* data, uint64_t n) {
  if (id < 0) return Status::Ok();
  const Bound& b = bound[id];
  return buffers[b.buffer]->Write(b.offset, data, n);
}

Status Session::Impl::RunUbatch(const int32_t* tokens, int64_t n, bool all_logits, float* out) {
  // The SWA ring (interleaved sliding-window models): a ubatch is written to the cells from
  // kv_head_swa = n_past % n_ctx_swa on, contiguously (its K/V views). One that would run past the
  // ring's end is run as two sub-ubatches, the first up to the end, the second from cell 0; their
  // logits follow each other in `out`. Overwriting cells is correct because a ring smaller than
  // the context has n_ctx_swa >= n_swa + n_ubatch cells (llama_kv_cache_iswa's size_swa =
  // GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) is either n_ctx or at least n_swa + n_ubatch;
  // CheckPlanAgainstModel refuses other plans): the token at position n_past + k of a ubatch
  // replaces position n_past + k - n_ctx_swa <= n_past - n_swa - (n_ubatch - k), which is outside
  // the window of every token of this ubatch (the first, n_past, sees positions > n_past - n_swa)
  // and of every later one.
  if (n_ctx_swa > 0 && n_ctx_swa < n_ctx) {
    const int64_t head = n_past % n_ctx_swa;
    if (head + n > n_ctx_swa) {
      const int64_t n1 = n_ctx_swa - head;
      std::vector<float> discard;
      float* out1 = out;
      if (!all_logits) {
        discard.resize(static_cast<size_t>(n_vocab));
        out1 = discard.data();
      }
      STOWAGE_RETURN_IF_ERROR(RunUbatch(tokens, n1, all_logits, out1));
      return RunUbatch(tokens + n1, n - n1, all_logits, all_logits ? out + n1 * n_vocab : out);
    }
  }
  const Graph& g = n == 1 ? graphs()[1] : graphs()[0];
  const auto t_ubatch = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = RunUbatchOn(g, tokens, n, all_logits, out);
  if (profile && st.ok()) ProfAdd(ProfRow(g.name, "", "(ubatch)"), t_ubatch);
  return st;
}

int64_t Session::Impl::PaddedKv(int64_t used, int64_t cells) const {
  // llama_kv_cache_update / llama_kv_cache_get_padding (Feb 2025): n_kv covers the cells in use,
  // padded to 256 with flash attention, else 32. With llamacpp_numerics, llama.cpp 2026's
  // llama_kv_cache::get_n_kv: max(256, the cells in use padded to 256), at most the cache — the
  // attention dots then run over the same cells (a vec_dot over n_kv sums its tail past the last
  // multiple of 64 apart from the rest, so the padding changes its bits).
  if (pad_n_kv_to_256) return std::min<int64_t>(cells, std::max<int64_t>(256, (used + 255) / 256 * 256));
  return std::min<int64_t>(cells, (used + kv_pad - 1) / kv_pad * kv_pad);
}

Bindings Session::Impl::UbatchBindings(const Graph& g, int64_t n, bool all_logits) const {
  Bindings s;
  s.n_tokens = n;
  s.kv_head = n_past;
  s.n_kv = PaddedKv(n_past + n, n_ctx);
  if (n_ctx_swa > 0) {
    // The SWA ring (RunUbatch keeps a ubatch inside it): its cells in use, padded the same way.
    s.kv_head_swa = n_past % n_ctx_swa;
    s.n_kv_swa = PaddedKv(std::min(n_ctx_swa, n_past + n), n_ctx_swa);
  }
  if (g.recurrent()) {
    // One sequence in cell 0 (llama_kv_cache_find_slot for recurrent models: n_kv = cells in use,
    // head = the first of them).
    s.kv_head = 0;
    s.n_kv = 1;
  }
  s.n_outputs = all_logits ? n : 1;
  return s;
}

Status Session::Impl::FillInputs(const Graph& g, const Bindings& s, const int32_t* tokens, bool all_logits) {
  const int64_t n = s.n_tokens;
  STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_tokens, tokens, n * sizeof(int32_t)));
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(n_past + i);
  STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_pos, pos.data(), n * sizeof(int32_t)));
  if (g.inp_attn_scale >= 0) {  // llm_graph_input_attn_temp::set_input
    std::vector<float> scale(n);
    for (int64_t i = 0; i < n; ++i) scale[i] = AttnTemperatureFactor(attn_temp, n_past + i);
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_attn_scale, scale.data(), n * sizeof(float)));
  }
  // The SWA ring's cells this ubatch writes (its K/V stores run before the attention reads them).
  if (n_ctx_swa > 0)
    for (int64_t i = 0; i < n; ++i) swa_cell_pos[static_cast<size_t>(s.kv_head_swa + i)] = n_past + i;
  // KQ_mask: causal (cell j holds position j). KQ_mask_swa also hides cells that fell out of the
  // sliding window: llama_set_inputs (Feb 2025) masks cell j for the token at position p when
  // p - j >= n_swa. Over a SWA ring (llama.cpp 2026 llama_kv_cache::set_input_kq_mask with
  // is_masked_swa) cell j holds position swa_cell_pos[j]: empty cells, later positions and
  // positions q with p - q >= n_swa are masked.
  for (const int id : {g.kq_mask, g.kq_mask_swa}) {
    if (id < 0) continue;
    const bool ring = id == g.kq_mask_swa && n_ctx_swa > 0;
    const int64_t window = id == g.kq_mask_swa ? n_swa : 0;
    const TensorView& mv = bound[id].v;
    if (ring && mv.ne[0] > n_ctx_swa)
      return DataLoss(plan->path() + ": graph " + g.name + " input KQ_mask_swa has " +
                      std::to_string(mv.ne[0]) + " cells, the SWA cache " + std::to_string(n_ctx_swa));
    std::vector<float> mask(static_cast<size_t>(mv.ne[0] * mv.ne[1]), -INFINITY);
    for (int64_t i = 0; i < mv.ne[1] && i < n; ++i)
      for (int64_t j = 0; j < mv.ne[0]; ++j) {
        const int64_t p = n_past + i;
        const int64_t q = ring ? swa_cell_pos[static_cast<size_t>(j)] : j;
        if (q >= 0 && q <= p && (window == 0 || p - q < window)) mask[i * mv.ne[0] + j] = 0.f;
      }
    if (g.tensors[id].type == GgmlType::F16) {
      // llama.cpp 2026's F16 mask of flash attention (build_attn_inp_kq_mask): 0 and -INFINITY are
      // exact in F16 (0x0000, 0xFC00), the values ggml_cast of the F32 mask gives.
      std::vector<uint16_t> half(mask.size());
      for (size_t k = 0; k < mask.size(); ++k) half[k] = mask[k] == 0.f ? 0x0000 : 0xFC00;
      STOWAGE_RETURN_IF_ERROR(WriteInput(id, half.data(), half.size() * sizeof(uint16_t)));
    } else {
      STOWAGE_RETURN_IF_ERROR(WriteInput(id, mask.data(), mask.size() * sizeof(float)));
    }
  }
  for (const int id : {g.inp_s_copy, g.inp_s_mask})
    if (id >= 0 && bound[id].v.nelements() != s.n_kv)
      return DataLoss(plan->path() + ": graph " + g.name + " input '" + g.tensors[id].name + "' has " +
                      std::to_string(bound[id].v.nelements()) +
                      " elements, expected n_kv = " + std::to_string(s.n_kv));
  if (g.inp_s_copy >= 0) {
    const int32_t copy_from = 0;  // cell 0 keeps its own state
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_s_copy, &copy_from, sizeof copy_from));
  }
  if (g.inp_s_mask >= 0) {
    const float keep = n_past > 0 ? 1.0f : 0.0f;  // a new sequence starts from zero states
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_s_mask, &keep, sizeof keep));
  }
  if (g.inp_out_ids >= 0) {
    std::vector<int32_t> ids(s.n_outputs);
    for (int64_t i = 0; i < s.n_outputs; ++i) ids[i] = static_cast<int32_t>(all_logits ? i : n - 1);
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_out_ids, ids.data(), ids.size() * sizeof(int32_t)));
  }
  return Status::Ok();
}

Status Session::Impl::RunUbatchOn(const Graph& g, const int32_t* tokens, int64_t n, bool all_logits,
                                  float* out) {
  const Bindings s = UbatchBindings(g, n, all_logits);
  if (n > g.max_tokens || s.n_kv > g.max_kv || s.n_outputs > g.max_outputs || s.n_kv_swa > g.max_kv_swa)
    return Internal("ubatch exceeds the planned worst case of graph " + g.name);
  STOWAGE_RETURN_IF_ERROR(BindAll(g, s));
  STOWAGE_RETURN_IF_ERROR(FillInputs(g, s, tokens, all_logits));
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

}  // namespace stowage
