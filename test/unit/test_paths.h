// Where tests find the shared models and goldens: $STOWAGE_MODELS_DIR / $STOWAGE_GOLDEN_DIR, else
// the paths baked in at configure time (../shared/...). Tests that need a model call
// STOWAGE_REQUIRE_MODEL(path) which skips with a clear message when the file is absent.
#pragma once
#include <cstdlib>
#include <string>
#include <sys/stat.h>

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
inline bool FileExists(const std::string& p) { struct stat st; return stat(p.c_str(), &st) == 0; }
}  // namespace stowage::test

#define STOWAGE_REQUIRE_FILE(path) \
  do { if (!::stowage::test::FileExists(path)) GTEST_SKIP() << "skipped: " << (path) << " not found (shared models absent)"; } while (0)
