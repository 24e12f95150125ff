// ProbeDevices: the CPU, plus the oneDNN and CUDA backends when this build has them.
#include "probe_internal.h"
#include "stowage/runtime/device_probe.h"

namespace stowage {

ProbeReport ProbeDevices() {
  ProbeReport report;
  CpuInfo cpu = ProbeCpu();
  // ggml registry order: GPU backends first, ACCEL next, the CPU last.
#ifdef STOWAGE_DEVICES_HAVE_CUDA
  devices_internal::ProbeCuda(report);
#else
  report.notes.push_back("CUDA: not built (configure with STOWAGE_ENABLE_CUDA and a CUDA toolkit)");
#endif
#ifdef STOWAGE_DEVICES_HAVE_ONEDNN
  report.devices.push_back(devices_internal::MakeOneDnnDevice(cpu));
#else
  report.notes.push_back("oneDNN: not built (configure with STOWAGE_ENABLE_ONEDNN and libdnnl-dev)");
#endif
  report.devices.push_back(MakeCpuDevice(cpu));
  return report;
}

std::vector<ProbedDevice> BackendDevicesOfThisBuild(const CpuInfo& cpu) {
  std::vector<ProbedDevice> devices;
#ifdef STOWAGE_DEVICES_HAVE_CUDA
  CudaDeviceInfo gpu;
  gpu.name = "CUDA backend of this build";
  devices_internal::AddCudaBackendTypes(gpu);
  devices.push_back(MakeCudaDevice(gpu));
#endif
#ifdef STOWAGE_DEVICES_HAVE_ONEDNN
  devices.push_back(devices_internal::MakeOneDnnDevice(cpu));
#endif
  devices.push_back(MakeCpuDevice(cpu));
  return devices;
}

}  // namespace stowage
