// Built-in backends by planned device: the CPU always; oneDNN (ACCEL) and CUDA (GPU) when built
// (STOWAGE_HAVE_ONEDNN / STOWAGE_HAVE_CUDA, set by runtime/src/executor/CMakeLists.txt).
#include <cstdlib>

#include "backend.h"
#if STOWAGE_HAVE_ONEDNN
#include "onednn_backend.h"
#endif
#if STOWAGE_HAVE_CUDA
#include "cuda_backend.h"
#endif

namespace stowage::exec {

std::unique_ptr<Backend> CreateBuiltinBackend(const std::string& name, const std::string& type, int n_threads,
                                              bool llamacpp_numerics, CpuIsa cpu_max_isa) {
  if (type == "CPU") return CreateCpuBackend(n_threads, llamacpp_numerics, cpu_max_isa);
#if STOWAGE_HAVE_ONEDNN
  // The oneDNN device is the only ACCEL device this build has (list-devices names it "ONEDNN").
  if (type == "ACCEL" && name.rfind("ONEDNN", 0) == 0) return CreateOneDnnBackend(name, n_threads);
#endif
#if STOWAGE_HAVE_CUDA
  // "CUDA<i>" (ggml-cuda's device names); nullptr when that device is absent.
  if (type == "GPU" && name.rfind("CUDA", 0) == 0 && name.size() > 4) {
    char* end = nullptr;
    const long idx = std::strtol(name.c_str() + 4, &end, 10);
    if (end != nullptr && *end == '\0' && idx >= 0 && idx < 1024)
      return CreateCudaBackend(static_cast<int>(idx));
  }
#endif
  (void)name;
  (void)n_threads;
  return nullptr;
}

std::string BuiltinBackendNames() {
  std::string names = "CPU";
#if STOWAGE_HAVE_ONEDNN
  names += ", oneDNN";
#endif
#if STOWAGE_HAVE_CUDA
  names += ", CUDA";
#endif
  return names;
}

}  // namespace stowage::exec
