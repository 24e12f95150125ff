// Session: plan + GGUF -> buffers -> graph execution (see session.h).
#include "stowage/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "session_impl.h"
#include "stowage/plan/plan_generated.h"

namespace stowage {

using plan_graph::Graph;

Status Session::Impl::Init(const SessionOptions& opts) {
  profile = opts.profile_ops;
  // The plan passed PlanFile::Verify (every check that needs no model file), which decoded the
  // graphs the session runs; this checks it against the model and reads the model's sliding window.
  uint32_t swa = 0;
  STOWAGE_RETURN_IF_ERROR(CheckPlanAgainstModel(*plan, *gguf, &swa));
  n_swa = swa;
  // Graphs that read inp_attn_scale: the model's temperature tuning fills it (the planner read it
  // the same way; a plan asking for it from a model without it is refused).
  for (const plan_graph::Graph& g : plan->graphs().graphs)
    if (g.inp_attn_scale >= 0 && !attn_temp.on()) {
      STOWAGE_ASSIGN_OR_RETURN(attn_temp, GgufAttnTemperature(*gguf));
      if (!attn_temp.on())
        return DataLoss(plan->path() + ": graph " + g.name + " reads inp_attn_scale but " + gguf->path() +
                        " has no attention temperature tuning (attention.temperature_scale)");
    }
  const auto& r = plan->root();
  const plan_graph::Graphs& decoded = plan->graphs();
  n_ctx = decoded.n_ctx;
  n_ubatch = decoded.n_ubatch;
  n_vocab = decoded.n_vocab;
  n_ctx_swa = decoded.n_ctx_swa;
  swa_cell_pos.assign(static_cast<size_t>(n_ctx_swa), -1);
  kv_pad = r.context()->flash_attn() ? 256 : 32;
  pad_n_kv_to_256 = opts.llamacpp_numerics;
  mem = plan->planned_memory();  // a copy: the session sets the bases, data and layouts
  STOWAGE_RETURN_IF_ERROR(CreateBackends(opts));
  STOWAGE_RETURN_IF_ERROR(AllocateBuffers(opts));
  return LoadWeights(opts);
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Impl::Finish(std::unique_ptr<Impl> impl,
                                                       std::shared_ptr<const GgufFile> model,
                                                       const SessionOptions& opts,
                                                       std::chrono::steady_clock::time_point t0) {
  if (model == nullptr) return InvalidArgument("Session: no model (a null GgufFile)");
  impl->gguf = std::move(model);
  STOWAGE_RETURN_IF_ERROR(impl->Init(opts));
  // The weights were just read from the file: one rewritten meanwhile gave them bytes of both.
  STOWAGE_RETURN_IF_ERROR(impl->gguf->CheckUnchanged());
  impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Session::Create(const std::string& plan_path, const std::string& model_path,
                                                 const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::Load(plan_path));
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> model, GgufFile::Open(model_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::Create(const std::string& plan_path,
                                                 std::shared_ptr<const GgufFile> model,
                                                 const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::Load(plan_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              const std::string& model_path,
                                                              const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::FromBytes(std::move(plan_bytes), "<plan in memory>"));
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> model, GgufFile::Open(model_path));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Result<std::unique_ptr<Session>> Session::CreateFromPlanBytes(std::vector<uint8_t> plan_bytes,
                                                              std::shared_ptr<const GgufFile> model,
                                                              const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::FromBytes(std::move(plan_bytes), "<plan in memory>"));
  return Impl::Finish(std::move(impl), std::move(model), opts, t0);
}

Status Session::Decode(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  Impl& s = *impl_;
  if (s.recurrent_state_lost)
    return FailedPrecondition("decode: a failed decode left the recurrent state of " + s.plan->path() +
                              "'s model partly updated; Reset() the session first");
  if (tokens.empty()) return InvalidArgument("decode: empty batch (at least one token is needed)");
  for (int32_t t : tokens)
    if (t < 0 || t >= s.n_vocab)
      return InvalidArgument("decode: token id " + std::to_string(t) + " out of range [0, " +
                             std::to_string(s.n_vocab) + ")");
  if (s.n_past + static_cast<int64_t>(tokens.size()) > s.n_ctx)
    return OutOfRange("context full: " + std::to_string(s.n_past) + " tokens in the cache + " +
                      std::to_string(tokens.size()) + " new > n_ctx " + std::to_string(s.n_ctx));
  // Weights read in place fault (SIGBUS) once the file is truncated: refused here, before the
  // next read, with the file named (a truncation during a decode faults: see session.h).
  if (s.ReadsMapping()) STOWAGE_RETURN_IF_ERROR(s.gguf->CheckUnchanged());
  const int64_t n = static_cast<int64_t>(tokens.size());
  // A failed decode leaves the sequence as it was: n_past returns to its value before the call (the
  // KV cells written by the ubatches that succeeded lie beyond it and are overwritten next time;
  // in a SWA ring they record positions >= n_past, masked until the token of that position, stored
  // in the same cell, overwrites them, and the older positions they replaced were already out of
  // every later token's window, see RunUbatch).
  // A recurrent model's state (one cell, updated in place by every ubatch) cannot be rolled back:
  // the session refuses to decode until Reset().
  const int64_t n_past_before = s.n_past;
  // No logits wanted (nullptr): computed into the session's scratch and dropped.
  if (logits == nullptr) logits = &s.unwanted_logits;
  // Every element is written by the ubatches below (resize: no work when the caller reuses the
  // vector, as a generation loop does).
  logits->resize(static_cast<size_t>((all_logits ? n : 1) * s.n_vocab));
  std::vector<float> discard;  // logits of the last token of a ubatch that is not the last one
  // Any failure, a Status or an exception (std::bad_alloc in a later ubatch), leaves the sequence
  // as described above: n_past rolled back, a recurrent state marked lost.
  auto failed = [&](Status st) {
    s.n_past = n_past_before;
    for (const Graph& g : s.graphs()) s.recurrent_state_lost = s.recurrent_state_lost || g.recurrent();
    return st;
  };
  try {
    for (int64_t i = 0; i < n; i += s.n_ubatch) {
      const int64_t m = std::min<int64_t>(s.n_ubatch, n - i);
      const bool last = i + m == n;
      float* out = nullptr;
      if (all_logits) {
        out = logits->data() + i * s.n_vocab;
      } else if (last) {
        out = logits->data();
      } else {
        discard.resize(static_cast<size_t>(s.n_vocab));
        out = discard.data();
      }
      Status st = s.RunUbatch(tokens.data() + i, m, all_logits, out);
      if (!st.ok()) return failed(std::move(st));
    }
  } catch (const std::bad_alloc&) {
    return failed(ResourceExhausted("decode: out of memory"));
  } catch (const std::exception& e) {
    return failed(Internal(std::string("decode: ") + e.what()));
  }
  return Status::Ok();
}

void Session::Reset() {
  impl_->n_past = 0;
  std::fill(impl_->swa_cell_pos.begin(), impl_->swa_cell_pos.end(), -1);
  impl_->recurrent_state_lost = false;
}
int64_t Session::n_past() const { return impl_->n_past; }
int64_t Session::n_ctx() const { return impl_->n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
std::vector<BufferReport> Session::Buffers() const { return impl_->reports; }
double Session::load_seconds() const { return impl_->load_seconds; }

}  // namespace stowage
