// The identity of a GGUF file as a plan records it: file size and an XXH64 hash of the header
// (magic, metadata and tensor infos: bytes [0, data section start)). Two files with the same
// identity have the same metadata and tensor layout; the weights' bytes are not hashed (they would
// cost a full read of a 400 GB file), so a plan stays valid for re-quantized data of the same layout
// only if the layout is identical.
#pragma once

#include <cstdint>
#include <string>

#include "stowage/runtime/gguf.h"

namespace stowage {

struct ModelIdentity {
  uint64_t file_size = 0;
  uint64_t header_size = 0;
  uint64_t header_xxh64 = 0;
};

/// Identity of an opened GGUF file.
ModelIdentity ComputeModelIdentity(const GgufFile& f);

/// "16-digit lower-case hex" of a 64-bit hash.
std::string HashHex(uint64_t h);

/// XXH64 (seed 0) of a byte range; used for manifest digests too.
uint64_t Xxh64(const void* data, size_t size);

}  // namespace stowage
