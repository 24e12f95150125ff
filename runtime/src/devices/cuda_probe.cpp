// CUDA devices: cudaGetDeviceCount / cudaGetDeviceProperties / cudaMemGetInfo. No device or no
// driver is a note, not an error.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "cuda_backend.h"  // exec::CudaSupportsWeightType
#include "probe_internal.h"

namespace stowage::devices_internal {

void AddCudaBackendTypes(CudaDeviceInfo& info) {
  // The backend's own answer for the weight types (runtime/src/backends/cuda); its copy types are
  // those of its op table (cpy_types left empty: exec::CudaCopyPairs).
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    if (IsValidGgmlType(id) && exec::CudaSupportsWeightType(static_cast<GgmlType>(id)))
      info.weight_types.push_back(static_cast<GgmlType>(id));
  }
}

void ProbeCuda(ProbeReport& report) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    report.notes.push_back(std::string("CUDA: no CUDA device (") +
                           (err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0") +
                           ")");
    cudaGetLastError();  // clear the sticky error state for later callers
    return;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      report.notes.push_back("CUDA" + std::to_string(i) + ": cudaGetDeviceProperties failed");
      continue;
    }
    CudaDeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.memory_total = prop.totalGlobalMem;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      info.memory_total = total_b;
      info.memory_free = free_b;
    } else {
      report.notes.push_back("CUDA" + std::to_string(i) +
                             ": cudaMemGetInfo failed; free memory reported as 0");
      cudaGetLastError();
    }
    info.cc_major = prop.major;
    info.cc_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    char bus[32];
    std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    info.pci_bus_id = bus;
    AddCudaBackendTypes(info);
    ProbedDevice d = MakeCudaDevice(info);
    report.devices.push_back(std::move(d));
  }
}

}  // namespace stowage::devices_internal
