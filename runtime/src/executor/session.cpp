// Session: plan + GGUF -> buffers -> graph execution (see session.h).
#include "stowage/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "session_impl.h"
#include "stowage/plan/plan_generated.h"

namespace stowage {

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
  cell_pos.assign(static_cast<size_t>(n_ctx), -1);
  cell_seq.assign(static_cast<size_t>(n_ctx), SeqSet());
  // Sequences: a unified cache takes any of LLAMA_MAX_SEQ ids (llama.cpp 2026 llama_batch_allocr),
  // one KV stream per sequence (kv_unified off) runs graphs with a stream dimension this runtime
  // does not build; a SWA ring or a recurrent state keeps one sequence.
  n_seq_max = r.context()->n_seq_max();
  const bool unified = r.context()->kv_unified();
  if (n_seq_max > 1 && !unified)
    return Status(StatusCode::kUnimplemented,
                  plan->path() + ": context.n_seq_max " + std::to_string(n_seq_max) +
                      " without kv_unified: one KV stream per sequence is not supported by this runtime "
                      "(plan with -kvu: one cache shared by the sequences)");
  bool one_sequence = n_ctx_swa > 0;
  for (const plan_graph::Graph& g : decoded.graphs) one_sequence = one_sequence || g.recurrent();
  n_seq_ids = one_sequence ? 1 : unified ? kMaxSequences : n_seq_max;
  kv_pad = r.context()->flash_attn() ? 256 : 32;
  pad_n_kv_to_256 = opts.llamacpp_numerics;
  FindResultNorm();
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
  STOWAGE_RETURN_IF_ERROR(impl->SelectTensorSplitRank(opts));
  impl->gguf = std::move(model);
  STOWAGE_RETURN_IF_ERROR(impl->Init(opts));
  auto session = std::unique_ptr<Session>(new Session(std::move(impl)));
  if (opts.embeddings || opts.pooling != PoolingType::kNone)
    STOWAGE_RETURN_IF_ERROR(session->SetEmbeddings(opts.embeddings, opts.pooling));
  Impl* s = session->impl_.get();
  // The weights were just read from the file: one rewritten meanwhile gave them bytes of both.
  STOWAGE_RETURN_IF_ERROR(s->gguf->CheckUnchanged());
  s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return session;
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

int64_t Session::n_ctx() const { return impl_->n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
std::vector<BufferReport> Session::Buffers() const { return impl_->reports; }
double Session::load_seconds() const { return impl_->load_seconds; }

}  // namespace stowage
