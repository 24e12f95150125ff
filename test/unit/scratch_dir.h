// A scratch folder for one test: made fresh (mkdtemp under /tmp) and removed with everything in it
// when the object goes away, so tests that write files (models, plans, manifests, text) need no
// clean-up code of their own. Header-only.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace stowage::test {

class ScratchDir {
 public:
  /// Makes /tmp/<prefix>.XXXXXX; path() is empty when that failed (callers ASSERT on it).
  explicit ScratchDir(const std::string& prefix = "stowage-test") {
    std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;  // best effort: a test's leftovers never fail it
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// The folder ("" when it could not be made).
  const std::string& path() const { return path_; }
  /// `name` inside the folder.
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  /// Writes `bytes` to `name` inside the folder (replacing it) and returns its path.
  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string p = File(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace stowage::test
