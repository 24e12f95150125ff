// Declarative op support of the runtime's devices and its evaluation (see device_probe.h).
#include <algorithm>

#include "cpu_op_table.h"   // the CPU backend's op table (runtime/src/backends/cpu)
#include "cuda_op_table.h"  // the CUDA backend's op table (runtime/src/backends/cuda)
#include "ops.h"            // the CPU backend's kernel contract (runtime/src/backends/cpu)
#include "probe_internal.h"
#include "stowage/runtime/device_probe.h"

namespace stowage {
namespace {

/// The CPU backend's weight types: those its kernels multiply (cpu::SupportsMulMatType); GET_ROWS
/// is declared for the same set (every such type has a dequantizer).
std::vector<GgmlType> CpuWeightTypes() {
  std::vector<GgmlType> weights;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    if (IsValidGgmlType(id) && cpu::SupportsMulMatType(static_cast<GgmlType>(id)))
      weights.push_back(static_cast<GgmlType>(id));
  }
  return weights;
}

}  // namespace

namespace devices_internal {

BufferType Buft(std::string name, uint64_t alignment, bool is_host) {
  BufferType b;
  b.name = std::move(name);
  b.alignment = alignment;
  b.is_host = is_host;
  return b;
}

OpSupportTable DeviceTable(bool view_ops_any_buffer, bool srcs_must_be_host, std::vector<OpRule> backend) {
  OpSupportTable t;
  t.default_supported = false;
  OpRule views;
  views.ops = {GgmlOp::NONE, GgmlOp::RESHAPE, GgmlOp::VIEW, GgmlOp::PERMUTE, GgmlOp::TRANSPOSE};
  if (!view_ops_any_buffer) {
    views.all_srcs_host = true;
    OpRule refuse = views;
    refuse.supported = false;
    refuse.all_srcs_host.reset();
    t.rules.push_back(views);
    t.rules.push_back(refuse);
  } else {
    t.rules.push_back(views);
  }
  if (srcs_must_be_host) {
    OpRule non_host;
    non_host.supported = false;
    non_host.all_srcs_host = false;
    non_host.note = "a source in a non-host buffer";
    t.rules.push_back(non_host);
  }
  for (auto& r : backend) t.rules.push_back(std::move(r));
  return t;
}

}  // namespace devices_internal

ProbedDevice MakeCpuDevice(const CpuInfo& cpu) {
  using T = GgmlType;
  using O = GgmlOp;
  ProbedDevice d;
  d.backend = "CPU";
  d.name = "CPU";
  d.description = cpu.model_name.empty() ? "CPU" : cpu.model_name;
  d.type = DeviceType::kCpu;
  d.memory_total = cpu.memory_total;
  d.memory_free = cpu.memory_free;
  d.caps.buffer_from_host_ptr = true;  // mmap'ed weights become CPU_Mapped buffers
  d.default_buft = devices_internal::Buft("CPU", 32, /*is_host=*/true);
  d.supports_buft.any_host = true;

  // The CPU backend's own table (runtime/src/backends/cpu/cpu_op_table.h) with its kernels' weight
  // types; ggml-cpu: view ops in any buffer, a source in a non-host buffer refused.
  d.op_support = devices_internal::DeviceTable(/*view_ops_any_buffer=*/true, /*srcs_must_be_host=*/true,
                                               exec::CpuOpRules(CpuWeightTypes()));
  d.properties.push_back({"cores", std::to_string(cpu.physical_cores) + " physical, " +
                                       std::to_string(cpu.logical_cores) + " logical"});
  std::string isa;
  for (const auto& n : cpu.features.Names()) isa += (isa.empty() ? "" : " ") + n;
  d.properties.push_back({"isa", isa.empty() ? "baseline" : isa});
  if (!cpu.vendor.empty()) d.properties.push_back({"vendor", cpu.vendor});

  // llama.cpp's CPU_REPACK on x86 (ggml-cpu/repack.cpp, Aug 2026: ggml_repack_get_optimal_repack_type
  // and extra_buffer_type::supports_op) takes MUL_MAT weights of 2 dims with AVX2: Q4_0 (q4_0_8x8_q8_0)
  // and Q4_K (q4_K_8x8_q8_K), both with ne1 % 8 == 0 (also IQ4_NL, and Q2_K with AVX-512, which this
  // backend does not repack), and (2026-09-28) MXFP4 (mxfp4_8x8_q8_0, ne1 % 8 == 0), repacked here
  // too (kLayoutMXFP4x8, its gemv in llama.cpp's order). This backend also repacks Q8_0 under the same
  // condition (llama.cpp repacks Q8_0 on ARM and RISC-V only): its Q8_0x8 gemv computes the plain vec_dot's
  // bits with 2.6x its in-cache speed, so token generation on Q8_0 is no longer compute-bound. The kernels'
  // own condition, which decides the layout at upload, is the same: cpu::RepackLayoutFor (CanRepackQ4_0 /
  // CanRepackQ4_K / CanRepackQ8_0 / CanRepackMXFP4: contiguous, ne1 % 8 == 0; ne0 is a multiple of the block
  // size for every tensor of these types). The shipped registry manifests (cpu-avx2/avx512.json) model FEB25
  // llama.cpp, which repacked Q4_0 only.
  if (cpu.features.avx2) {
    BufferType repack = devices_internal::Buft("CPU_REPACK", 32, /*is_host=*/false);
    TensorConstraint w = OfTypes({T::Q4_0, T::Q4_K, T::Q8_0, T::MXFP4});
    w.buft = "CPU_REPACK";
    w.max_dims = 2;
    w.ne_multiple_of[1] = 8;
    w.contiguous = true;  // cpu::CanRepackQ4_0 / CanRepackQ4_K / CanRepackQ8_0 / CanRepackMXFP4
    TensorConstraint act = OfTypes({T::F32});
    act.host = true;
    // MUL_MAT_ID of 3-D experts likewise (llama.cpp's supports_op: ggml_n_dims(src0) == 3; here at
    // most 3, so a single-expert 2-D tensor is accepted too; cpu::MulMatId reads each expert's
    // repacked slice).
    TensorConstraint experts = w;
    experts.max_dims = 3;
    repack.supports_op = {AcceptRule({O::MUL_MAT}, {w, act}, {}, 0,
                                     "Q4_0 / Q4_K / Q8_0 / MXFP4 8x8 repack (AVX2), ne1 % 8 == 0"),
                          AcceptRule({O::MUL_MAT_ID}, {experts, act}, {}, 0,
                                     "Q4_0 / Q4_K / Q8_0 / MXFP4 8x8 repacked experts (AVX2), ne1 % 8 == 0")};
    d.extra_bufts.push_back(std::move(repack));
  }
  return d;
}

ProbedDevice MakeCudaDevice(const CudaDeviceInfo& info) {
  ProbedDevice d;
  d.backend = "CUDA";
  d.name = "CUDA" + std::to_string(info.index);
  d.description = info.name;
  d.type = DeviceType::kGpu;
  d.memory_total = info.memory_total;
  d.memory_free = info.memory_free;
  d.caps.async = true;
  d.caps.host_buffer = true;
  d.caps.events = true;
  d.default_buft = devices_internal::Buft(d.name, 128, /*is_host=*/false);
  d.host_buft = devices_internal::Buft("CUDA_Host", 32, /*is_host=*/true);
  d.split_buft = devices_internal::Buft(d.name + "_Split", 128, /*is_host=*/false);
  // The CUDA backend's own table; a GPU reads its own buffers (the scheduler copies the rest), so
  // sources in non-host buffers are not refused.
  d.op_support = devices_internal::DeviceTable(
      /*view_ops_any_buffer=*/true, /*srcs_must_be_host=*/false,
      exec::CudaOpRules(info.weight_types.empty() ? CpuWeightTypes() : info.weight_types,
                        info.cpy_types.empty() ? exec::CudaCopyPairs() : info.cpy_types));
  d.offload_op = OffloadRule{32};
  d.properties = {{"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
                  {"multiprocessors", std::to_string(info.multiprocessors)}};
  if (!info.pci_bus_id.empty()) d.properties.push_back({"pci_bus_id", info.pci_bus_id});
  return d;
}

}  // namespace stowage
