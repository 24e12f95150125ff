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

Status Session::Impl::RunUbatch(const Ubatch& u, float* out) {
  // The SWA ring (interleaved sliding-window models; one sequence, in position order): a ubatch
  // starting at position p0 is written to the cells from kv_head_swa = p0 % n_ctx_swa on,
  // contiguously (its K/V views). One that would run past the
  // ring's end is run as two sub-ubatches, the first up to the end, the second from cell 0; their
  // logits follow each other in `out`. Overwriting cells is correct because a ring smaller than
  // the context has n_ctx_swa >= n_swa + n_ubatch cells (llama_kv_cache_iswa's size_swa =
  // GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) is either n_ctx or at least n_swa + n_ubatch;
  // CheckPlanAgainstModel refuses other plans): the token at position p0 + k of a ubatch
  // replaces position p0 + k - n_ctx_swa <= p0 - n_swa - (n_ubatch - k), which is outside
  // the window of every token of this ubatch (the first, p0, sees positions > p0 - n_swa)
  // and of every later one.
  if (n_ctx_swa > 0 && n_ctx_swa < n_ctx) {
    const int64_t head = u.pos[0] % n_ctx_swa;
    if (head + u.n > n_ctx_swa) {
      const int64_t n1 = n_ctx_swa - head;
      const Ubatch a = SubUbatch(u, 0, n1), b = SubUbatch(u, n1, u.n);
      std::vector<float> discard(static_cast<size_t>(n_vocab));
      STOWAGE_RETURN_IF_ERROR(RunUbatch(a, a.discard && !u.discard ? discard.data() : out));
      const int64_t rows_a = a.discard ? 0 : static_cast<int64_t>(a.out_ids.size());
      return RunUbatch(b, b.discard && !u.discard ? discard.data() : out + rows_a * n_vocab);
    }
  }
  // The tg graph (llama.cpp's reserve of n_seq_max tokens, 1 with one sequence) for the ubatches
  // it holds, else pp.
  const Graph& tg = graphs()[1];
  const bool small = u.n <= tg.max_tokens && static_cast<int64_t>(u.out_ids.size()) <= tg.max_outputs;
  const Graph& g = small ? tg : graphs()[0];
  const auto t_ubatch = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = RunUbatchOn(g, u, out);
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

Bindings Session::Impl::UbatchBindings(const Graph& g, const Ubatch& u, int64_t slot) const {
  Bindings s;
  s.n_tokens = u.n;
  s.kv_head = slot;
  // The cells in use, this ubatch's included (stored from `slot` on before binding).
  s.n_kv = PaddedKv(std::max(CellsEnd(), slot + u.n), n_ctx);
  if (n_ctx_swa > 0) {
    // The SWA ring (RunUbatch keeps a ubatch inside it): its cells in use, padded the same way.
    s.kv_head_swa = u.pos[0] % n_ctx_swa;
    s.n_kv_swa = PaddedKv(std::min<int64_t>(n_ctx_swa, u.pos[0] + u.n), n_ctx_swa);
  }
  if (g.recurrent()) {
    // One sequence in cell 0 (llama_kv_cache_find_slot for recurrent models: n_kv = cells in use,
    // head = the first of them).
    s.kv_head = 0;
    s.n_kv = 1;
  }
  s.n_outputs = static_cast<int64_t>(u.out_ids.size());
  return s;
}

Status Session::Impl::FillInputs(const Graph& g, const Bindings& s, const Ubatch& u) {
  const int64_t n = s.n_tokens;
  STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_tokens, u.tokens, n * sizeof(int32_t)));
  STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_pos, u.pos, n * sizeof(int32_t)));
  if (g.inp_attn_scale >= 0) {  // llm_graph_input_attn_temp::set_input
    std::vector<float> scale(n);
    for (int64_t i = 0; i < n; ++i) scale[i] = AttnTemperatureFactor(attn_temp, u.pos[i]);
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_attn_scale, scale.data(), n * sizeof(float)));
  }
  // The SWA ring's cells this ubatch writes (its K/V stores run before the attention reads them).
  if (n_ctx_swa > 0)
    for (int64_t i = 0; i < n; ++i) swa_cell_pos[static_cast<size_t>(s.kv_head_swa + i)] = u.pos[i];
  // KQ_mask (llama.cpp 2026 llama_kv_cache::set_input_kq_mask): the token at position p of
  // sequence q attends to cell j when j holds a position <= p of sequence q (cell_pos, cell_seq;
  // with one sequence decoded from 0 cell j holds position j, llama_set_inputs of Feb 2025).
  // KQ_mask_swa also hides cells that fell out of the sliding window (p - pos >= n_swa,
  // is_masked_swa). Over a SWA ring cell j holds position swa_cell_pos[j] of the one sequence:
  // empty cells, later positions and positions q with p - q >= n_swa are masked.
  for (const int id : {g.kq_mask, g.kq_mask_swa}) {
    if (id < 0) continue;
    const bool ring = id == g.kq_mask_swa && n_ctx_swa > 0;
    const int64_t window = id == g.kq_mask_swa ? n_swa : 0;
    const TensorView& mv = bound[id].v;
    if (ring && mv.ne[0] > n_ctx_swa)
      return DataLoss(plan->path() + ": graph " + g.name + " input KQ_mask_swa has " +
                      std::to_string(mv.ne[0]) + " cells, the SWA cache " + std::to_string(n_ctx_swa));
    std::vector<float> mask(static_cast<size_t>(mv.ne[0] * mv.ne[1]), -INFINITY);
    if (!ring && mv.ne[0] > n_ctx)
      return DataLoss(plan->path() + ": graph " + g.name + " input '" + g.tensors[id].name + "' has " +
                      std::to_string(mv.ne[0]) + " cells, the KV cache " + std::to_string(n_ctx));
    for (int64_t i = 0; i < mv.ne[1] && i < n; ++i) {
      const int64_t p = u.pos[i];
      const auto seq = static_cast<size_t>(u.seq[i]);
      for (int64_t j = 0; j < mv.ne[0]; ++j) {
        const auto c = static_cast<size_t>(j);
        const int64_t q = ring ? swa_cell_pos[c] : cell_pos[c];
        if (q >= 0 && q <= p && (window == 0 || p - q < window) && (ring || cell_seq[c][seq]))
          mask[i * mv.ne[0] + j] = 0.f;
      }
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
  // llama.cpp 2026's KV store (SET_ROWS): the cells this ubatch is stored in, from kv_head on (the
  // SWA cache's from kv_head_swa on), as llama_kv_cache::set_input_k_idxs / set_input_v_idxs.
  struct Idxs {
    int id;
    int64_t first_cell, kv_size;
  };
  const int64_t swa_cells = n_ctx_swa > 0 ? n_ctx_swa : n_ctx;
  for (const Idxs& x :
       {Idxs{g.inp_k_idxs, s.kv_head, n_ctx}, Idxs{g.inp_v_idxs, s.kv_head, n_ctx},
        Idxs{g.inp_k_idxs_swa, s.kv_head_swa, swa_cells}, Idxs{g.inp_v_idxs_swa, s.kv_head_swa, swa_cells}}) {
    if (x.id < 0) continue;
    const std::vector<int64_t> idx =
        plan_graph::KvStoreIndices(bound[x.id].v.nelements(), n, x.first_cell, x.kv_size);
    if (idx.empty() || x.first_cell + n > x.kv_size)
      return DataLoss(plan->path() + ": graph " + g.name + " input '" + g.tensors[x.id].name + "' has " +
                      std::to_string(bound[x.id].v.nelements()) +
                      " elements, expected a multiple of n_tokens = " + std::to_string(n) + " within " +
                      std::to_string(x.kv_size) + " cells");
    STOWAGE_RETURN_IF_ERROR(WriteInput(x.id, idx.data(), idx.size() * sizeof(int64_t)));
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
    const float keep = u.pos[0] > 0 ? 1.0f : 0.0f;  // a new sequence (position 0) starts from zero states
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_s_mask, &keep, sizeof keep));
  }
  if (g.inp_out_ids >= 0) {
    STOWAGE_RETURN_IF_ERROR(WriteInput(g.inp_out_ids, u.out_ids.data(), u.out_ids.size() * sizeof(int32_t)));
  }
  return Status::Ok();
}

Status Session::Impl::RunUbatchOn(const Graph& g, const Ubatch& u, float* out) {
  const int64_t n = u.n;
  const int64_t slot = FindSlot(n);
  if (slot < 0)
    return OutOfRange("KV cache full: no run of " + std::to_string(n) + " empty cells for a ubatch (" +
                      std::to_string(cells_used) + " of " + std::to_string(n_ctx) +
                      " cells in use; remove sequences with SeqRm)");
  const Bindings s = UbatchBindings(g, u, slot);
  if (n > g.max_tokens || s.n_kv > g.max_kv || s.n_outputs > g.max_outputs || s.n_kv_swa > g.max_kv_swa)
    return Internal("ubatch exceeds the planned worst case of graph " + g.name);
  STOWAGE_RETURN_IF_ERROR(BindAll(g, s));
  StoreCells(slot, u.pos, u.seq, n);  // before the mask: the ubatch attends to its own tokens
  STOWAGE_RETURN_IF_ERROR(FillInputs(g, s, u));
  Status run = RunSplits(g);
  if (!run.ok()) {
    (void)SyncAll();  // no queued work may outlive the failed call (it refers to this ubatch's memory)
    return run;
  }
  const Bound& rb = bound[g.result];
  STOWAGE_RETURN_IF_ERROR(plan_graph::CheckResultShape(g, bound, n_vocab, s.n_outputs, plan->path()));
  STOWAGE_RETURN_IF_ERROR(
      buffers[rb.buffer]->Read(rb.offset, out, static_cast<uint64_t>(n_vocab * s.n_outputs) * sizeof(float)));
  if (embeddings && !u.discard) return ReadEmbeddingRows(g, s.n_outputs);
  return Status::Ok();
}

}  // namespace stowage
