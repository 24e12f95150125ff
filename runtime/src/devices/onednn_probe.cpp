// oneDNN ACCEL device: version and effective ISA from the library.
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "onednn_backend.h"  // exec::OneDnnSupportsMulMatType
#include "probe_internal.h"

namespace stowage::devices_internal {
namespace {

const char* IsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

}  // namespace

ProbedDevice MakeOneDnnDevice(const CpuInfo& cpu) {
  using T = GgmlType;
  const dnnl_version_t* v = dnnl_version();
  std::string version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  const char* isa = IsaName(dnnl_get_effective_cpu_isa());
  ProbedDevice d;
  d.backend = "ONEDNN";
  d.name = "ONEDNN";
  d.description = "oneDNN v" + version + " (" + isa + ")";
  d.type = ProbedDeviceType::kAccel;
  d.memory_total = cpu.memory_total;
  d.memory_free = cpu.memory_free;
  d.caps_buffer_from_host_ptr = true;
  d.default_buft = {"CPU", 32, true, {}};  // shares the CPU buffer type, like ggml-blas
  d.supports_any_host_buft = true;
  d.view_ops_any_buffer = false;
  d.srcs_must_be_host = true;
  // The backend's MUL_MAT (runtime/src/backends/onednn): weights of the types oneDNN can multiply
  // here with contiguous rows, F32 activations with any strides, F32 dst. Batches below 32 stay on
  // the CPU, like ggml-blas (min_batch).
  SrcRequirement w;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    if (IsValidGgmlType(id) && exec::OneDnnSupportsMulMatType(static_cast<T>(id)))
      w.types.push_back(static_cast<T>(id));
  }
  w.contiguous = true;
  w.host = true;
  SrcRequirement act;
  act.types = {T::F32};
  act.host = true;
  d.ops = {{{GgmlOp::MUL_MAT}, {w, act}, {T::F32}, 32, "oneDNN matmul, batch >= 32"}};
  d.properties = {{"onednn_version", version}, {"onednn_isa", isa}};
  return d;
}

}  // namespace stowage::devices_internal
