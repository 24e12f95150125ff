// A batch of tokens over one or more sequences: its checks (llama.cpp 2026 llama_batch_allocr::init),
// its ubatches (split_simple: n_ubatch tokens in batch order) and the rollback of a failed one.
#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "session_impl.h"

namespace stowage {

using plan_graph::Graph;

Session::Impl::Ubatch Session::Impl::MakeUbatch(const BatchArrays& b, int64_t begin, int64_t end) {
  Ubatch u;
  u.tokens = b.tokens.data() + begin;
  u.pos = b.pos.data() + begin;
  u.seq = b.seq.data() + begin;
  u.n = end - begin;
  for (int64_t i = begin; i < end; ++i)
    if (b.logits[static_cast<size_t>(i)]) u.out_ids.push_back(static_cast<int32_t>(i - begin));
  if (u.out_ids.empty()) {
    u.out_ids.push_back(static_cast<int32_t>(u.n - 1));
    u.discard = true;
  }
  return u;
}

Session::Impl::Ubatch Session::Impl::SubUbatch(const Ubatch& u, int64_t begin, int64_t end) {
  Ubatch p;
  p.tokens = u.tokens + begin;
  p.pos = u.pos + begin;
  p.seq = u.seq + begin;
  p.n = end - begin;
  if (!u.discard)
    for (const int32_t i : u.out_ids)
      if (i >= begin && i < end) p.out_ids.push_back(static_cast<int32_t>(i - begin));
  if (p.out_ids.empty()) {
    p.out_ids.push_back(static_cast<int32_t>(p.n - 1));
    p.discard = true;
  }
  return p;
}

Status Session::Impl::CheckBatch(const BatchArrays& b) const {
  if (recurrent_state_lost)
    return FailedPrecondition("decode: a failed decode left the recurrent state of " + plan->path() +
                              "'s model partly updated; Reset() the session first");
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (n == 0) return InvalidArgument("decode: empty batch (at least one token is needed)");
  // Per sequence: the smallest and largest position in the batch and the token count.
  std::vector<int64_t> lo(static_cast<size_t>(n_seq_ids), -1), hi(lo.size(), -1), count(lo.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const std::string at = "decode: token " + std::to_string(i) + ": ";
    if (b.tokens[k] < 0 || b.tokens[k] >= n_vocab)
      return InvalidArgument("decode: token id " + std::to_string(b.tokens[k]) + " out of range [0, " +
                             std::to_string(n_vocab) + ")");
    if (b.seq[k] < 0 || b.seq[k] >= n_seq_ids)
      return InvalidArgument(
          at + "seq_id " + std::to_string(b.seq[k]) + " outside [0, " + std::to_string(n_seq_ids) + ")" +
          (n_seq_ids == 1 ? " (the plan keeps one sequence: plan-model -np N -kvu for more)" : ""));
    if (b.pos[k] < 0) return InvalidArgument(at + "position " + std::to_string(b.pos[k]) + " < 0");
    const auto s = static_cast<size_t>(b.seq[k]);
    lo[s] = count[s] == 0 ? b.pos[k] : std::min<int64_t>(lo[s], b.pos[k]);
    hi[s] = std::max<int64_t>(hi[s], b.pos[k]);
    ++count[s];
  }
  // A SWA ring or a recurrent state takes its one sequence in position order (the ring's cell of
  // position p is p % n_ctx_swa; the state advances token by token).
  bool in_order = n_ctx_swa > 0;
  for (const Graph& g : graphs()) in_order = in_order || g.recurrent();
  for (size_t s = 0; s < lo.size(); ++s) {
    if (count[s] == 0) continue;
    const int32_t p0 = SeqPosMax(static_cast<int32_t>(s));
    const std::string seq = "decode: sequence " + std::to_string(s);
    if (p0 >= 0 && lo[s] != p0 + 1)
      return InvalidArgument(seq + ": the cache holds positions up to X = " + std::to_string(p0) +
                             ", the batch starts at Y = " + std::to_string(lo[s]) + " (expected Y = X + 1)");
    if (hi[s] - lo[s] + 1 != count[s])
      return InvalidArgument(seq + ": positions " + std::to_string(lo[s]) + " to " + std::to_string(hi[s]) +
                             " for " + std::to_string(count[s]) + " tokens are not consecutive");
    if (in_order && p0 < 0 && lo[s] != 0)
      return InvalidArgument(seq + ": starts at position " + std::to_string(lo[s]) +
                             "; a SWA ring or recurrent state starts at 0");
  }
  if (in_order)
    for (int64_t i = 1; i < n; ++i)
      if (b.pos[static_cast<size_t>(i)] != b.pos[static_cast<size_t>(i - 1)] + 1)
        return InvalidArgument("decode: token " + std::to_string(i) +
                               ": a SWA ring or recurrent state takes its tokens in position order");
  if (cells_used + n > n_ctx)
    return OutOfRange("context full: " + std::to_string(cells_used) + " tokens in the cache + " +
                      std::to_string(n) + " new > n_ctx " + std::to_string(n_ctx));
  return Status::Ok();
}

Status Session::Impl::DecodeChecked(const BatchArrays& b, std::vector<float>* out) {
  // Weights read in place fault (SIGBUS) once the file is truncated: refused here, before the
  // next read, with the file named (a truncation during a decode faults: see session.h).
  if (ReadsMapping()) STOWAGE_RETURN_IF_ERROR(gguf->CheckUnchanged());
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t rows = std::count(b.logits.begin(), b.logits.end(), uint8_t{1});
  // Every element is written by the ubatches below (resize: no work when the caller reuses the
  // vector, as a generation loop does).
  out->resize(static_cast<size_t>(rows * n_vocab));
  // A failed decode leaves the cache as it was: the cells are restored (the K/V the ubatches that
  // succeeded wrote lie in cells that are empty again). A SWA ring's cells are not: they record
  // positions beyond the sequence's end, masked until the token of that position, stored in the
  // same cell, overwrites them; the older positions they replaced were already out of every later
  // token's window (see RunUbatch). A recurrent model's state (one cell, updated in place by every
  // ubatch) cannot be rolled back: the session refuses to decode until Reset().
  const std::vector<int32_t> pos_before = cell_pos;
  const std::vector<SeqSet> seq_before = cell_seq;
  const int64_t used_before = cells_used;
  auto failed = [&](Status st) {
    cell_pos = pos_before;
    cell_seq = seq_before;
    cells_used = used_before;
    for (const Graph& g : graphs()) recurrent_state_lost = recurrent_state_lost || g.recurrent();
    return st;
  };
  std::vector<float> discard;  // logits computed for a ubatch that asks for none
  try {
    int64_t row = 0;
    for (int64_t i = 0; i < n; i += n_ubatch) {
      const Ubatch u = MakeUbatch(b, i, std::min(n, i + n_ubatch));
      float* dst = out->data() + row * n_vocab;
      if (u.discard) {
        discard.resize(static_cast<size_t>(n_vocab));
        dst = discard.data();
      }
      Status st = RunUbatch(u, dst);
      if (!st.ok()) return failed(std::move(st));
      if (!u.discard) row += static_cast<int64_t>(u.out_ids.size());
    }
  } catch (const std::bad_alloc&) {
    return failed(ResourceExhausted("decode: out of memory"));
  } catch (const std::exception& e) {
    return failed(Internal(std::string("decode: ") + e.what()));
  }
  return Status::Ok();
}

Status Session::Decode(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  Impl& s = *impl_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_past = this->n_past();
  Impl::BatchArrays b;
  b.tokens = tokens;
  b.pos.resize(tokens.size());
  for (int64_t i = 0; i < n; ++i) b.pos[static_cast<size_t>(i)] = static_cast<int32_t>(n_past + i);
  b.seq.assign(tokens.size(), 0);
  b.logits.assign(tokens.size(), all_logits ? 1 : 0);
  if (!b.logits.empty()) b.logits.back() = 1;
  STOWAGE_RETURN_IF_ERROR(s.CheckBatch(b));
  // No logits wanted (nullptr): computed into the session's scratch and dropped.
  std::vector<float>* out = logits != nullptr ? logits : &s.unwanted_logits;
  return s.embeddings ? s.DecodeWithEmbeddings(b, out) : s.DecodeChecked(b, out);
}

Status Session::DecodeBatch(const std::vector<BatchToken>& batch, std::vector<float>* logits) {
  Impl& s = *impl_;
  Impl::BatchArrays b;
  b.tokens.reserve(batch.size());
  for (const BatchToken& t : batch) {
    b.tokens.push_back(t.token);
    b.pos.push_back(t.pos);
    b.seq.push_back(t.seq_id);
    b.logits.push_back(t.logits ? 1 : 0);
  }
  STOWAGE_RETURN_IF_ERROR(s.CheckBatch(b));
  std::vector<float>* out = logits != nullptr ? logits : &s.unwanted_logits;
  return s.embeddings ? s.DecodeWithEmbeddings(b, out) : s.DecodeChecked(b, out);
}

}  // namespace stowage
