// A plan edited through flatbuffers' object API (the objapi.plan copy of the schema this folder
// generates, objapi_plan_generated.h) and sealed again (SealPlan), so that the edit, not the
// checksum, meets the loader. For tests that state how the loader and the session treat one
// changed field.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "objapi_plan_generated.h"
#include "stowage/runtime/plan.h"

namespace stowage::test {

/// `plan` unpacked, changed by `edit`, packed and sealed. An empty result when sealing fails (the
/// packed buffer lacks the checksum field).
inline std::vector<uint8_t> EditPlan(const std::vector<uint8_t>& plan,
                                     const std::function<void(::objapi::plan::PlanT&)>& edit) {
  std::unique_ptr<::objapi::plan::PlanT> p = ::objapi::plan::UnPackPlan(plan.data());
  edit(*p);
  flatbuffers::FlatBufferBuilder fbb;
  ::objapi::plan::FinishPlanBuffer(fbb, ::objapi::plan::Plan::Pack(fbb, p.get()));
  std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  if (!SealPlan(out.data(), out.size()).ok()) return {};
  return out;
}

}  // namespace stowage::test
