// The KV cache's cells and the sequence operations (llama.cpp's llama_kv_cells and
// llama_memory_seq_rm / seq_cp / clear, see session.h).
#include <algorithm>
#include <string>

#include "session_impl.h"

namespace stowage {

int64_t Session::Impl::FindSlot(int64_t n) const {
  int64_t run = 0;
  for (int64_t j = 0; j < n_ctx; ++j) {
    run = cell_pos[static_cast<size_t>(j)] < 0 ? run + 1 : 0;
    if (run == n) return j - n + 1;
  }
  return -1;
}

int64_t Session::Impl::CellsEnd() const {
  for (int64_t j = n_ctx; j > 0; --j)
    if (cell_pos[static_cast<size_t>(j - 1)] >= 0) return j;
  return 0;
}

int32_t Session::Impl::SeqPosMax(int32_t seq) const {
  int32_t p = -1;
  if (seq < 0 || seq >= n_seq_ids) return p;
  for (size_t j = 0; j < cell_pos.size(); ++j)
    if (cell_pos[j] >= 0 && cell_seq[j][static_cast<size_t>(seq)]) p = std::max(p, cell_pos[j]);
  return p;
}

int32_t Session::Impl::SeqPosMin(int32_t seq) const {
  int32_t p = -1;
  if (seq < 0 || seq >= n_seq_ids) return p;
  for (size_t j = 0; j < cell_pos.size(); ++j)
    if (cell_pos[j] >= 0 && cell_seq[j][static_cast<size_t>(seq)] && (p < 0 || cell_pos[j] < p))
      p = cell_pos[j];
  return p;
}

void Session::Impl::StoreCells(int64_t slot, const int32_t* pos, const int32_t* seq, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const auto j = static_cast<size_t>(slot + i);
    cell_pos[j] = pos[i];
    cell_seq[j].reset();
    cell_seq[j].set(static_cast<size_t>(seq[i]));
  }
  cells_used += n;
}

void Session::Impl::ClearCells() {
  std::fill(cell_pos.begin(), cell_pos.end(), -1);
  for (SeqSet& c : cell_seq) c.reset();
  cells_used = 0;
  std::fill(swa_cell_pos.begin(), swa_cell_pos.end(), -1);
}

namespace {
// [p0, p1) with llama.cpp's open bounds: p0 < 0 is 0, p1 < 0 the end.
bool InRange(int32_t p, int32_t p0, int32_t p1) { return p >= std::max(p0, 0) && (p1 < 0 || p < p1); }

Status CheckSeqId(const char* fn, const char* what, int32_t seq, int64_t n_seq_ids, bool any_allowed) {
  if ((seq < 0 && !any_allowed) || seq >= n_seq_ids)
    return InvalidArgument(
        std::string(fn) + ": " + what + " " + std::to_string(seq) + " outside [" +
        (any_allowed ? "-1" : "0") + ", " + std::to_string(n_seq_ids) + ")" +
        (n_seq_ids == 1 ? " (the plan keeps one sequence: plan-model -np N -kvu for more)" : ""));
  return Status::Ok();
}
}  // namespace

Status Session::SeqRm(int32_t seq_id, int32_t p0, int32_t p1) {
  Impl& s = *impl_;
  STOWAGE_RETURN_IF_ERROR(CheckSeqId("SeqRm", "seq_id", seq_id, s.n_seq_ids, /*any_allowed=*/true));
  const bool whole = p0 <= 0 && p1 < 0;
  bool recurrent = false;
  for (const plan_graph::Graph& g : s.graphs()) recurrent = recurrent || g.recurrent();
  if (recurrent && !whole)
    return FailedPrecondition(
        "SeqRm: a recurrent state keeps no positions: only the whole sequence can be "
        "removed (p0 <= 0, p1 < 0), asked [" +
        std::to_string(p0) + ", " + std::to_string(p1) + ")");
  if (s.n_ctx_swa > 0 && s.n_ctx_swa < s.n_ctx && !whole) {
    // The ring kept the last n_ctx_swa positions: removing a tail [p0, end) leaves what the next
    // token at p0 attends to (positions > p0 - n_swa) only if none of them was overwritten by a
    // removed one (position q lives in cell q % n_ctx_swa).
    const int32_t last = s.SeqPosMax(0);
    if (p1 >= 0 && p1 <= last)
      return FailedPrecondition("SeqRm: the SWA ring of " + s.plan->path() +
                                " can drop a tail of the sequence only (p1 < 0), asked [" +
                                std::to_string(p0) + ", " + std::to_string(p1) + ") of positions up to " +
                                std::to_string(last));
    if (last >= 0 && int64_t{last} - s.n_ctx_swa > int64_t{std::max(p0, 0)} - s.n_swa)
      return FailedPrecondition("SeqRm: the SWA ring (" + std::to_string(s.n_ctx_swa) +
                                " cells) no longer holds the window before position " + std::to_string(p0) +
                                ": position " + std::to_string(last) + " overwrote it");
  }
  if (recurrent && whole) s.recurrent_state_lost = false;  // the state restarts from zero
  for (size_t j = 0; j < s.cell_pos.size(); ++j) {
    if (s.cell_pos[j] < 0 || !InRange(s.cell_pos[j], p0, p1)) continue;
    if (seq_id < 0)
      s.cell_seq[j].reset();
    else
      s.cell_seq[j].reset(static_cast<size_t>(seq_id));
    if (s.cell_seq[j].none()) {
      s.cell_pos[j] = -1;
      --s.cells_used;
    }
  }
  for (int64_t& q : s.swa_cell_pos)
    if (q >= 0 && InRange(static_cast<int32_t>(q), p0, p1)) q = -1;
  return Status::Ok();
}

Status Session::SeqCp(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  Impl& s = *impl_;
  STOWAGE_RETURN_IF_ERROR(CheckSeqId("SeqCp", "src", src, s.n_seq_ids, /*any_allowed=*/false));
  STOWAGE_RETURN_IF_ERROR(CheckSeqId("SeqCp", "dst", dst, s.n_seq_ids, /*any_allowed=*/false));
  if (src == dst) return Status::Ok();
  for (size_t j = 0; j < s.cell_pos.size(); ++j)
    if (s.cell_pos[j] >= 0 && s.cell_seq[j][static_cast<size_t>(src)] && InRange(s.cell_pos[j], p0, p1))
      s.cell_seq[j].set(static_cast<size_t>(dst));
  return Status::Ok();
}

int32_t Session::SeqPosMax(int32_t seq_id) const { return impl_->SeqPosMax(seq_id); }
int32_t Session::SeqPosMin(int32_t seq_id) const { return impl_->SeqPosMin(seq_id); }
int64_t Session::n_seq_max() const { return impl_->n_seq_max; }
int64_t Session::n_seq_ids() const { return impl_->n_seq_ids; }

void Session::Reset() {
  impl_->ClearCells();
  impl_->recurrent_state_lost = false;
  impl_->ClearEmbeddings();
}
int64_t Session::n_past() const { return int64_t{impl_->SeqPosMax(0)} + 1; }

}  // namespace stowage
