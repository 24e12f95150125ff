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
  d.type = DeviceType::kAccel;
  d.memory_total = cpu.memory_total;
  d.memory_free = cpu.memory_free;
  // No buffer_from_host_ptr: its weight buffer cannot wrap the file mapping (weights are reordered
  // on upload), so with mmap its weights are still loaded into an ONEDNN buffer (llama.cpp maps a
  // device's default buft only when the device has this cap).
  d.caps.buffer_from_host_ptr = false;
  // Its own weight buffer type (runtime/src/backends/onednn: weights reordered at load into the
  // layout oneDNN's matmul prefers), not host memory: only this device reads it, so the CPU list
  // puts it first for the weights this device's MUL_MAT takes (llama.cpp make_cpu_buft_list: ACCEL
  // default bufts lead) and the scheduler gives their MUL_MATs to this device (pass 1). It also
  // reads every host buffer (activations, and weights of other buffer types).
  d.default_buft = Buft(exec::kOneDnnBuft, 64, /*is_host=*/false);
  d.supports_buft.any_host = true;
  // MUL_MAT: weights of the types oneDNN can multiply here (F32 always; BF16 / F16 when oneDNN has
  // that matmul on this CPU) with contiguous rows, F32 activations in host memory, F32 dst.
  std::vector<T> types;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    if (IsValidGgmlType(id) && exec::OneDnnSupportsMulMatType(static_cast<T>(id)))
      types.push_back(static_cast<T>(id));
  }
  TensorConstraint act = OfTypes({T::F32});
  act.host = true;
  //  (1) a 2-D weight in the ONEDNN buffer type: every batch (tg too), since no other backend can
  //      read that buffer;
  TensorConstraint own = OfTypes(types);
  own.contiguous = true;
  own.buft = exec::kOneDnnBuft;
  own.max_dims = 2;
  //  (2) a weight in host memory (another buffer type): batches >= 32 only, like ggml-blas; smaller
  //      ones stay on the CPU.
  TensorConstraint host = OfTypes(types);
  host.contiguous = true;
  host.host = true;
  // View ops only when no source is in a non-host buffer; sources in non-host buffers are checked
  // per rule (the weight may be in ONEDNN).
  d.op_support = DeviceTable(
      /*view_ops_any_buffer=*/false, /*srcs_must_be_host=*/false,
      {AcceptRule({GgmlOp::MUL_MAT}, {own, act}, {T::F32}, 0,
                  "oneDNN matmul, weights in the ONEDNN buffer type, any batch"),
       AcceptRule({GgmlOp::MUL_MAT}, {host, act}, {T::F32}, 32,
                  "oneDNN matmul, weights in host memory, batch >= 32")});
  d.properties = {{"onednn_version", version}, {"onednn_isa", isa}};
  return d;
}

}  // namespace stowage::devices_internal
