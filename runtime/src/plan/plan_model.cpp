// A verified plan against the model file it is run with (CheckPlanAgainstModel, plan.h).
#include <string>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/plan.h"

namespace stowage {
namespace {

// n_swa as llama.cpp's load_hparams (Feb 2025, LLM_ARCH_PHI3) reads it: <arch>.attention.sliding_window,
// or for Phi-3 files converted before the key existed (PR #8931) the defaults of their sizes.
Result<uint32_t> ReadSlidingWindow(const PlanFile& plan, const GgufFile& gguf) {
  STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf.GetString("general.architecture"));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_layer, gguf.GetU32Or(arch + ".block_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_ctx_train, gguf.GetU32Or(arch + ".context_length", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head, gguf.GetU32Or(arch + ".attention.head_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head_kv,
                           gguf.GetU32Or(arch + ".attention.head_count_kv", n_head));
  uint32_t def = 0;
  if ((n_layer == 32 || n_layer == 40) && n_ctx_train == 4096)
    def = 2047;
  else if (n_layer == 32 && n_head_kv == 32 && n_ctx_train == 131072)
    def = 262144;
  else if (n_layer == 40 && n_ctx_train == 131072)
    def = 131072;
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t swa, gguf.GetU32Or(arch + ".attention.sliding_window", def));
  if (swa == 0)
    return DataLoss(plan.path() + ": the graphs read KQ_mask_swa but " + gguf.path() +
                    " has no sliding window (" + arch + ".attention.sliding_window)");
  return swa;
}

}  // namespace

Status CheckPlanAgainstModel(const PlanFile& plan, const GgufFile& gguf, uint32_t* n_swa) {
  const plan::Plan& r = plan.root();
  const auto& m = *r.model();
  const ModelIdentity id = ComputeModelIdentity(gguf);
  if (id.file_size != m.file_size() || id.header_size != m.header_size() ||
      id.header_xxh64 != m.header_xxh64())
    return FailedPrecondition(
        gguf.path() + ": does not match plan " + plan.path() + ": the plan was made for a file of " +
        std::to_string(m.file_size()) + " bytes with header hash " + HashHex(m.header_xxh64()) + " (" +
        (m.path() ? m.path()->str() : "?") + "), found " + std::to_string(id.file_size) +
        " bytes with header hash " + HashHex(id.header_xxh64));
  for (const auto* b : *r.buffers())
    if (b->mapped() &&
        (b->file_offset() > gguf.file_size() || b->size() > gguf.file_size() - b->file_offset()))
      return DataLoss(plan.path() + ": buffer '" + (b->name() ? b->name()->str() : "") +
                      "' maps bytes outside " + gguf.path());
  for (const auto* t : *r.tensors()) {
    if (t->kind() != plan::TensorKind::Weight) continue;
    // The model must hold this tensor with the planned type, shape and data offset.
    const std::string name = t->name()->str();
    const GgufTensorInfo* ti = gguf.FindTensor(name);
    if (ti == nullptr)
      return FailedPrecondition(gguf.path() + ": tensor '" + name + "' of the plan is missing");
    bool same =
        ti->type == static_cast<GgmlType>(t->type()) && gguf.data_offset() + ti->offset == t->gguf_offset();
    for (int d = 0; d < 4; ++d) same = same && ti->ne[d] == t->ne()->Get(d);
    if (!same)
      return FailedPrecondition(gguf.path() + ": tensor '" + name +
                                "' differs from the plan (type, shape or offset)");
    const auto* pb = r.buffers()->Get(t->buffer());
    if (pb->mapped() && pb->file_offset() + t->offset() != t->gguf_offset())
      return DataLoss(plan.path() + ": tensor '" + name + "': mapped offset does not point at its file data");
  }
  uint32_t swa = 0;
  bool reads_swa = false;
  for (const auto* g : *r.graphs())
    for (const auto* t : *g->tensors())
      reads_swa = reads_swa ||
                  (t->kind() == plan::TensorKind::Input && t->name() && t->name()->str() == "KQ_mask_swa");
  if (reads_swa) {
    STOWAGE_ASSIGN_OR_RETURN(swa, ReadSlidingWindow(plan, gguf));
  }
  if (n_swa) *n_swa = swa;
  return Status::Ok();
}

}  // namespace stowage
