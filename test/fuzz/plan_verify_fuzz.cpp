// libFuzzer target (scripts/fuzz.sh, not a CMake target): the plan verifier (PlanFile::FromBytes)
// and everything that trusts what it accepts without a second check -- plan-dump's text, JSON,
// --nodes and --svg output and its --check-memory liveness check (tools/plan-dump, compiled in with its main
// renamed) -- on mutated plan files. Seeds: scripts/fuzz-corpus/plan/ (an n_copies = 4 plan, an
// n_copies = 1 plan with split inputs, a gemma2 plan with a SWA cache ring).
//
// Properties: no crash, leak or undefined behaviour (ASan + UBSan), and every accepted plan dumps
// with exit status 0 (a verified plan must never make plan-dump fail or index out of range; the
// memory check may report conflicts: mutated offsets are allowed to overlap).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stowage/runtime/plan.h"

int plan_dump_main(int argc, char** argv);

namespace {

std::string& TempPath() {
  static std::string path;
  return path;
}

void RemoveTemp() {
  if (!TempPath().empty()) unlink(TempPath().c_str());
}

int Dump(const std::string& path, std::vector<std::string> args) {
  std::vector<std::string> all = {"plan-dump", path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  return plan_dump_main(static_cast<int>(all.size()), argv.data());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!std::freopen("/dev/null", "w", stdout)) std::abort();
  // One temporary file per process, for plan-dump to load; removed at exit (a crash leaves it).
  const char* dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/stowage-plan-fuzz-XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) std::abort();
  close(fd);
  TempPath() = tmpl;
  std::atexit(RemoveTemp);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Re-sealed (Plan.content_xxh64) when the mutation left a verifiable buffer with the field, so
  // that mutations reach the cross-reference checks instead of all stopping at the checksum.
  // plan-dump loads the re-sealed bytes, the plan the verifier accepted.
  std::vector<uint8_t> bytes(data, data + size);
  (void)stowage::SealPlan(bytes.data(), bytes.size());
  auto plan = stowage::PlanFile::FromBytes(bytes, "fuzz.plan");
  if (!plan.ok()) return 0;
  const std::string& path = TempPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, size, f) != size || std::fclose(f) != 0) std::abort();
  for (const auto& args :
       std::vector<std::vector<std::string>>{{}, {"--nodes"}, {"--json", "--nodes"}, {"--svg"}})
    if (Dump(path, args) != 0) {
      std::fprintf(stderr, "plan-dump failed on a plan the verifier accepted\n");
      std::abort();
    }
  Dump(path, {"--check-memory"});  // conflicts allowed; must not crash
  return 0;
}
