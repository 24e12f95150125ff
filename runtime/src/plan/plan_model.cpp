// A verified plan against the model file it is run with (CheckPlanAgainstModel, plan.h).
#include <optional>
#include <string>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_sliding_window.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/plan.h"

namespace stowage {
namespace {

// The model's sliding window for a plan whose graphs read KQ_mask_swa (gguf_sliding_window.h).
Result<uint32_t> ReadSlidingWindow(const PlanFile& plan, const GgufFile& gguf) {
  STOWAGE_ASSIGN_OR_RETURN(const std::optional<uint32_t> n_swa, GgufSlidingWindow(gguf));
  const uint32_t swa = n_swa.value_or(0);
  if (swa == 0) {
    STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf.GetString("general.architecture"));
    return DataLoss(plan.path() + ": the graphs read KQ_mask_swa but " + gguf.path() +
                    " has no sliding window (" + arch + ".attention.sliding_window)");
  }
  return swa;
}

// A weight's slice (plan.fbs TensorSlice): axis 0 or 1 of a 4-dim full_ne, inside it, the other
// axes whole, an axis-0 slice of whole blocks of its type, in an allocated buffer (a slice is read
// from the file, not mapped).
Status CheckWeightSlice(const PlanFile& plan, const std::string& name, const plan::GlobalTensor& t) {
  const plan::TensorSlice& s = *t.slice();
  const std::string at = plan.path() + ": tensor '" + name + "': slice: ";
  const auto* full = s.full_ne();
  if (full == nullptr || full->size() != 4) return DataLoss(at + "full_ne: expected 4 dims");
  if (s.axis() != 0 && s.axis() != 1)
    return DataLoss(at + "axis: expected 0 or 1, found " + std::to_string(s.axis()));
  for (int d = 0; d < 4; ++d) {
    const int64_t ne = t.ne()->Get(d), f = full->Get(d);
    const bool ok = d == s.axis() ? s.begin() >= 0 && ne >= 0 && s.begin() <= f - ne : ne == f;
    if (!ok)
      return DataLoss(at + "ne[" + std::to_string(d) + "] " + std::to_string(ne) + " from " +
                      std::to_string(d == s.axis() ? s.begin() : 0) + ": expected inside the tensor's " +
                      std::to_string(f));
  }
  const auto type = static_cast<GgmlType>(t.type());
  const int64_t blck = GetTypeTraits(type).block_size;
  if (s.axis() == 0 && (s.begin() % blck != 0 || t.ne()->Get(0) % blck != 0))
    return DataLoss(at + "axis 0 from element " + std::to_string(s.begin()) + ", " +
                    std::to_string(t.ne()->Get(0)) + " elements: expected multiples of " +
                    GgmlTypeName(type) + "'s block of " + std::to_string(blck) +
                    " (a split that cuts a quantized block)");
  if (plan.root().buffers()->Get(t.buffer())->mapped())
    return DataLoss(at + "in a mapped buffer: expected an allocated one (a slice is read, not mapped)");
  return Status::Ok();
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
  // The context's model figures (plan-dump prints them) are the model's: an edited plan whose
  // n_layer or n_embd disagrees is refused (the header hash pins the model, not these fields).
  if (gguf.Find("general.architecture") != nullptr) {
    STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf.GetString("general.architecture"));
    const std::pair<const char*, uint32_t> figures[] = {{"block_count", r.context()->n_layer()},
                                                        {"embedding_length", r.context()->n_embd()}};
    for (const auto& [key, planned] : figures) {
      const std::string k = arch + "." + key;
      if (gguf.Find(k) == nullptr) continue;
      STOWAGE_ASSIGN_OR_RETURN(const uint32_t value, gguf.GetU32(k));
      // the NextN / MTP blocks after the trunk (glm4moe nextn_predict_layers) are not planned
      STOWAGE_ASSIGN_OR_RETURN(uint32_t nextn, gguf.GetU32Or(arch + ".nextn_predict_layers", 0));
      if (key != figures[0].first || nextn >= value) nextn = 0;
      if (value - nextn != planned)
        return DataLoss(plan.path() + ": context." + (key == figures[0].first ? "n_layer " : "n_embd ") +
                        std::to_string(planned) + " differs from " + k + " = " + std::to_string(value) +
                        (nextn > 0 ? " - nextn_predict_layers " + std::to_string(nextn) : "") + " of " +
                        gguf.path());
    }
  }
  for (const auto* b : *r.buffers())
    if (b->mapped() &&
        (b->file_offset() > gguf.file_size() || b->size() > gguf.file_size() - b->file_offset()))
      return DataLoss(plan.path() + ": buffer '" + (b->name() ? b->name()->str() : "") +
                      "' maps bytes outside " + gguf.path());
  for (const auto* t : *r.tensors()) {
    // A weight group is no file tensor: its parts are checked as themselves.
    if (t->kind() != plan::TensorKind::Weight || t->parts()) continue;
    // The model must hold this tensor with the planned type, shape and data offset.
    const std::string name = t->name()->str();
    const GgufTensorInfo* ti = gguf.FindTensor(name);
    if (ti == nullptr)
      return FailedPrecondition(gguf.path() + ": tensor '" + name + "' of the plan is missing");
    bool same =
        ti->type == static_cast<GgmlType>(t->type()) && gguf.data_offset() + ti->offset == t->gguf_offset();
    // A rank's slice of a tensor split across MPI ranks: the file holds the whole tensor.
    const auto* slice = t->slice();
    if (slice) STOWAGE_RETURN_IF_ERROR(CheckWeightSlice(plan, name, *t));
    for (int d = 0; d < 4; ++d)
      same = same && ti->ne[d] == (slice ? slice->full_ne()->Get(d) : t->ne()->Get(d));
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
  // A SWA ring smaller than the context must hold the window and a whole ubatch (the session's
  // ring cache overwrites only cells that no token of the ubatch can see: llama_kv_cache_iswa's
  // size_swa rule).
  const auto& c = *r.context();
  if (c.n_ctx_swa() > 0 && c.n_ctx_swa() < c.n_ctx() &&
      uint64_t{c.n_ctx_swa()} < uint64_t{swa} + c.n_ubatch())
    return DataLoss(plan.path() + ": context.n_ctx_swa " + std::to_string(c.n_ctx_swa()) +
                    " is below the sliding window " + std::to_string(swa) + " of " + gguf.path() +
                    " + n_ubatch " + std::to_string(c.n_ubatch()));
  if (n_swa) *n_swa = swa;
  return Status::Ok();
}

}  // namespace stowage
