// CUDA devices: cudaGetDeviceCount / cudaGetDeviceProperties / cudaMemGetInfo. No device or no
// driver is a note, not an error.
#include <string>

#include <cuda_runtime_api.h>

#include "probe_internal.h"

namespace stowage::devices_internal {

void ProbeCuda(ProbeReport& report) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    report.notes.push_back(std::string("CUDA: no CUDA device (") +
                           (err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0") + ")");
    cudaGetLastError();  // clear the sticky error state for later callers
    return;
  }
  CpuInfo no_cpu;
  ProbedDevice cpu_like = MakeCpuDevice(no_cpu);  // the op contract the GPU backend implements
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      report.notes.push_back("CUDA" + std::to_string(i) + ": cudaGetDeviceProperties failed");
      continue;
    }
    size_t free_b = 0, total_b = prop.totalGlobalMem;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      free_b = 0;
      total_b = prop.totalGlobalMem;
    }
    ProbedDevice d;
    d.backend = "CUDA";
    d.name = "CUDA" + std::to_string(i);
    d.description = prop.name;
    d.type = ProbedDeviceType::kGpu;
    d.memory_total = total_b;
    d.memory_free = free_b;
    d.caps_async = true;
    d.caps_host_buffer = true;
    d.caps_events = true;
    d.default_buft = {d.name, 128, false, {}};
    d.host_buft = ProbedBufferType{"CUDA_Host", 32, true, {}};
    d.view_ops_any_buffer = true;
    d.srcs_must_be_host = false;
    d.ops = cpu_like.ops;
    for (auto& e : d.ops) e.note = "GPU backend op contract (same ops as the CPU kernels)";
    d.offload_min_batch = 32;
    d.properties = {{"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
                    {"multiprocessors", std::to_string(prop.multiProcessorCount)},
                    {"pci_bus_id", std::to_string(prop.pciDomainID) + ":" + std::to_string(prop.pciBusID) + ":" +
                                       std::to_string(prop.pciDeviceID)}};
    report.devices.push_back(std::move(d));
  }
}

}  // namespace stowage::devices_internal
