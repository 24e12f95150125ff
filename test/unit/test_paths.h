// Where tests find the shared models and goldens: $STOWAGE_MODELS_DIR / $STOWAGE_GOLDEN_DIR, else
// the paths baked in at configure time (../shared/...). Tests that need a model call
// STOWAGE_REQUIRE_MODEL(path) which skips with a clear message when the file is absent.
#pragma once
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace stowage::test {
inline std::string ModelsDir() {
  const char* e = std::getenv("STOWAGE_MODELS_DIR");
  return e ? e : STOWAGE_DEFAULT_MODELS_DIR;
}
inline std::string GoldenDir() {
  const char* e = std::getenv("STOWAGE_GOLDEN_DIR");
  return e ? e : STOWAGE_DEFAULT_GOLDEN_DIR;
}
inline std::string ModelPath(const std::string& name) { return ModelsDir() + "/" + name; }
inline bool FileExists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
// The paths of the .gguf files in ModelsDir(), sorted; empty when it cannot be read.
inline std::vector<std::string> SharedModelPaths() {
  std::vector<std::string> out;
  if (DIR* d = opendir(ModelsDir().c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) out.push_back(ModelPath(n));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}
// The FNV-1a 64 hash of a file's bytes as 16 lowercase hex digits (what the golden scripts of
// test/data write as "model_fnv1a64", to prove a golden was made from this very file); "" when the
// file cannot be read.
inline std::string FileFnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
    h ^= static_cast<unsigned char>(*it);
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
}  // namespace stowage::test

#define STOWAGE_REQUIRE_FILE(path)                                                  \
  do {                                                                              \
    if (!::stowage::test::FileExists(path))                                         \
      GTEST_SKIP() << "skipped: " << (path) << " not found (shared models absent)"; \
  } while (0)
