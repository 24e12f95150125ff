#include "stowage/runtime/model_identity.h"

#include <xxhash.h>

#include <cstdio>

namespace stowage {

uint64_t Xxh64(const void* data, size_t size) { return XXH64(data, size, 0); }

ModelIdentity ComputeModelIdentity(const GgufFile& f) {
  ModelIdentity id;
  id.file_size = f.file_size();
  id.header_size = f.header_size();
  id.header_xxh64 = Xxh64(f.bytes(), static_cast<size_t>(f.header_size()));
  return id;
}

std::string HashHex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace stowage
