// Built-in backends by planned device: the CPU always; oneDNN (ACCEL) and CUDA (GPU) when built.
#include "backend.h"

namespace stowage::exec {

std::unique_ptr<Backend> CreateBuiltinBackend(const std::string& name, const std::string& type, int n_threads) {
  if (type == "CPU") return CreateCpuBackend(n_threads);
  (void)name;
  return nullptr;
}

std::string BuiltinBackendNames() { return "CPU"; }

}  // namespace stowage::exec
