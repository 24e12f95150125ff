#include "plan_seal.h"

#include <xxhash.h>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/plan.h"

namespace stowage {
namespace {

// Address of Plan.content_xxh64 in a verified buffer, nullptr when absent. Generated tables derive
// privately from flatbuffers::Table; the root pointer is that Table.
const uint8_t* ContentHashField(const uint8_t* data) {
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(plan::GetPlan(data));
  return table->GetAddressOf(plan::Plan::VT_CONTENT_XXH64);
}

// XXH64 (seed 0) of data[0, size) with the 8 bytes at offset `field` read as zero.
uint64_t ContentHash(const uint8_t* data, size_t size, size_t field) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  const uint8_t zeros[8] = {};
  XXH64_update(st, data, field);
  XXH64_update(st, zeros, sizeof zeros);
  XXH64_update(st, data + field + 8, size - field - 8);
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

}  // namespace

namespace plan_seal {
bool ContentHashes(const uint8_t* data, size_t size, uint64_t* recorded, uint64_t* computed) {
  const uint8_t* field = ContentHashField(data);
  if (field == nullptr) return false;
  *recorded = flatbuffers::ReadScalar<uint64_t>(field);
  *computed = ContentHash(data, size, size_t(field - data));
  return true;
}
}  // namespace plan_seal

Status SealPlan(uint8_t* data, size_t size) {
  if (data == nullptr || size < 8 || !plan::PlanBufferHasIdentifier(data))
    return InvalidArgument("SealPlan: not a plan buffer (no \"STWP\" identifier)");
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64, /*max_tables=*/1u << 26);
  if (!plan::VerifyPlanBuffer(verifier))
    return InvalidArgument("SealPlan: the plan buffer fails the flatbuffers verifier");
  const uint8_t* field = ContentHashField(data);
  if (field == nullptr)
    return InvalidArgument(
        "SealPlan: the plan has no content_xxh64 field (set a non-zero placeholder before packing)");
  const size_t off = size_t(field - data);
  flatbuffers::WriteScalar<uint64_t>(data + off, ContentHash(data, size, off));
  return Status::Ok();
}

// The version rule of plan.h, beside SealPlan: both serve the writers (plan_export) and the reader.
bool NeedsSinksSchema(GgmlOp op, const int32_t* srcs, size_t n_srcs) {
  const auto has = [&](size_t i) { return i < n_srcs && srcs[i] >= 0; };
  return op == GgmlOp::SWIGLU_OAI || (op == GgmlOp::SOFT_MAX && has(2)) ||
         (op == GgmlOp::FLASH_ATTN_EXT && has(4));
}

}  // namespace stowage
