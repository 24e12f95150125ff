// An out-of-tree C++ program against the installed planner (find_package(Stowage), Stowage::planner):
// plans MODEL for this machine's probed devices with a context of N_CTX tokens, as stowage-run plans
// on the fly, and writes the plan to OUT.
//   consumer_planner MODEL N_CTX OUT
#include <stowage/planner/from_probe.h>
#include <stowage/planner/plan.h>
#include <stowage/runtime/device_probe.h>
#include <stowage/runtime/gguf.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int Fail(const stowage::Status& st) {
  std::fprintf(stderr, "consumer_planner: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL N_CTX OUT\n", argv[0]);
    return 2;
  }
  auto gguf = stowage::GgufFile::Open(argv[1]);
  if (!gguf.ok()) return Fail(gguf.status());
  // The probed devices, GPUs numbered per backend in probe order (CUDA0, CUDA1, ...).
  auto machine = stowage::planner::ManifestsFromProbe(stowage::ProbeDevices().devices);
  if (!machine.ok()) return Fail(machine.status());
  stowage::planner::PlanRequest request;
  request.context.n_ctx = static_cast<uint32_t>(std::atoi(argv[2]));
  request.flags = "consumer_planner";
  auto planned = stowage::planner::Plan(**gguf, *machine, request);
  if (!planned.ok()) return Fail(planned.status());
  if (!planned->fit.ok()) return Fail(planned->fit);
  std::FILE* f = std::fopen(argv[3], "wb");
  if (f == nullptr) return Fail(stowage::IoError(std::string("cannot write ") + argv[3]));
  const size_t n = std::fwrite(planned->bytes.data(), 1, planned->bytes.size(), f);
  if (std::fclose(f) != 0 || n != planned->bytes.size())
    return Fail(stowage::IoError(std::string("cannot write ") + argv[3]));
  std::fprintf(stderr, "consumer_planner: %zu devices, plan of %zu bytes\n", machine->size(),
               planned->bytes.size());
  return 0;
}
