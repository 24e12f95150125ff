// Plan.content_xxh64 (schema version 2): the plan's checksum of its own bytes. Internal to the
// runtime's plan loader; the public entry point is SealPlan (stowage/runtime/plan.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stowage::plan_seal {

/// For a buffer that passed the flatbuffers verifier: false when Plan.content_xxh64 is absent;
/// else true with *recorded = the field's value and *computed = XXH64 (seed 0) of data[0, size)
/// with the field's 8 bytes read as zero.
bool ContentHashes(const uint8_t* data, size_t size, uint64_t* recorded, uint64_t* computed);

}  // namespace stowage::plan_seal
