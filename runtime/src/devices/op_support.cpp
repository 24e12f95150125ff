// Declarative op support of the runtime's devices and its evaluation (see device_probe.h).
#include <algorithm>

#include "ops.h"  // the CPU backend's kernel contract (runtime/src/backends/cpu)
#include "stowage/runtime/device_probe.h"

namespace stowage {
namespace {

bool IsViewOrNone(GgmlOp op) {
  return op == GgmlOp::NONE || op == GgmlOp::RESHAPE || op == GgmlOp::VIEW || op == GgmlOp::PERMUTE ||
         op == GgmlOp::TRANSPOSE;
}

bool InNonHostBuffer(const RuntimeTensor& t) { return !t.buft.empty() && !t.buft_is_host; }

int NumDims(const RuntimeTensor& t) {
  for (int i = 3; i >= 1; --i) {
    if (t.ne[i] != 1) return i + 1;
  }
  return 1;
}

bool SrcMatches(const SrcRequirement& r, const RuntimeTensor* t) {
  if (t == nullptr) return r.optional;
  if (!r.types.empty() && std::find(r.types.begin(), r.types.end(), t->type) == r.types.end()) return false;
  if (r.contiguous && !t->contiguous) return false;
  if (r.host && InNonHostBuffer(*t)) return false;
  if (!r.buft.empty() && r.buft != t->buft) return false;
  if (r.max_dims > 0 && NumDims(*t) > r.max_dims) return false;
  if (r.ne1_multiple_of > 1 && t->ne[1] % r.ne1_multiple_of != 0) return false;
  return true;
}

SrcRequirement Src(std::vector<GgmlType> types, bool optional = false) {
  SrcRequirement r;
  r.types = std::move(types);
  r.optional = optional;
  return r;
}

}  // namespace

const char* ProbedDeviceTypeName(ProbedDeviceType t) {
  switch (t) {
    case ProbedDeviceType::kCpu:
      return "CPU";
    case ProbedDeviceType::kGpu:
      return "GPU";
    case ProbedDeviceType::kAccel:
      return "ACCEL";
  }
  return "?";
}

int64_t RuntimeOpBatch(const RuntimeOpQuery& q) {
  if (q.op == GgmlOp::GET_ROWS) return 0;
  if (q.op == GgmlOp::MUL_MAT) return q.dst.ne[1];
  if (q.op == GgmlOp::MUL_MAT_ID || q.op == GgmlOp::ROPE) return q.dst.ne[2];
  return q.dst.ne[1] * q.dst.ne[2] * q.dst.ne[3];
}

bool EntryMatches(const OpSupportEntry& e, const RuntimeOpQuery& q) {
  if (std::find(e.ops.begin(), e.ops.end(), q.op) == e.ops.end()) return false;
  for (size_t i = 0; i < e.src.size(); ++i) {
    if (!SrcMatches(e.src[i], i < q.src.size() ? &q.src[i] : nullptr)) return false;
  }
  if (!e.dst_types.empty() &&
      std::find(e.dst_types.begin(), e.dst_types.end(), q.dst.type) == e.dst_types.end())
    return false;
  if (e.min_batch > 0 && RuntimeOpBatch(q) < e.min_batch) return false;
  return true;
}

bool ProbedDevice::SupportsOp(const RuntimeOpQuery& q) const {
  bool any_non_host = std::any_of(q.src.begin(), q.src.end(), InNonHostBuffer);
  if (IsViewOrNone(q.op)) return view_ops_any_buffer || !any_non_host;
  for (const auto& extra : extra_bufts) {
    for (const auto& e : extra.supports_op) {
      if (EntryMatches(e, q)) return true;
    }
  }
  if (srcs_must_be_host && any_non_host) return false;
  return std::any_of(ops.begin(), ops.end(), [&](const OpSupportEntry& e) { return EntryMatches(e, q); });
}

ProbedDevice MakeCpuDevice(const CpuInfo& cpu) {
  using T = GgmlType;
  using O = GgmlOp;
  ProbedDevice d;
  d.backend = "CPU";
  d.name = "CPU";
  d.description = cpu.model_name.empty() ? "CPU" : cpu.model_name;
  d.type = ProbedDeviceType::kCpu;
  d.memory_total = cpu.memory_total;
  d.memory_free = cpu.memory_free;
  d.caps_buffer_from_host_ptr = true;  // mmap'ed weights become CPU_Mapped buffers
  d.default_buft = {"CPU", 32, true, {}};
  d.supports_any_host_buft = true;
  d.view_ops_any_buffer = true;
  d.srcs_must_be_host = true;

  // The CPU backend's kernel contract (runtime/src/backends/cpu/ops.h).
  // Weight types: those the kernels can multiply (cpu::SupportsMulMatType); GET_ROWS is declared
  // for the same set (every such type has a dequantizer).
  std::vector<T> weights;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    if (IsValidGgmlType(id) && cpu::SupportsMulMatType(static_cast<T>(id)))
      weights.push_back(static_cast<T>(id));
  }
  const SrcRequirement f32 = Src({T::F32});
  const SrcRequirement f32_opt = Src({T::F32}, true);
  const char* kOps = "runtime/src/backends/cpu/ops.h";
  d.ops = {
      {{O::GET_ROWS}, {Src(weights), Src({T::I32})}, {T::F32}, 0, kOps},
      {{O::MUL_MAT}, {Src(weights), f32}, {T::F32}, 0, kOps},
      {{O::RMS_NORM, O::NORM, O::SCALE, O::SILU, O::GELU}, {f32}, {T::F32}, 0, kOps},
      {{O::ADD, O::MUL}, {f32, Src({T::F32, T::F16})}, {T::F32}, 0, kOps},
      {{O::SWIGLU, O::GEGLU}, {f32, f32_opt}, {T::F32}, 0, kOps},
      {{O::ROPE}, {f32, Src({T::I32}), f32_opt}, {T::F32}, 0, kOps},
      {{O::SOFT_MAX}, {f32, Src({T::F16, T::F32}, true)}, {T::F32}, 0, kOps},
      {{O::CPY, O::CONT},
       {f32},
       {T::F32, T::F16, T::BF16, T::Q8_0, T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::IQ4_NL},
       0,
       kOps},
      {{O::CPY, O::CONT}, {Src({T::F16})}, {T::F32}, 0, kOps},
  };
  // Mixture of experts (runtime/src/backends/cpu/ops_moe.cpp; DIV / SIGMOID in ops.cpp).
  {
    SrcRequirement experts = Src(weights);
    experts.contiguous = true;  // cpu::MulMatId: contiguous expert matrices
    d.ops.push_back({{O::MUL_MAT_ID}, {experts, f32, Src({T::I32})}, {T::F32}, 0, kOps});
    d.ops.push_back({{O::ARGSORT}, {f32}, {T::I32}, 0, kOps});
    d.ops.push_back({{O::SUM_ROWS, O::SIGMOID}, {f32}, {T::F32}, 0, kOps});
    d.ops.push_back({{O::DIV}, {f32, Src({T::F32, T::F16})}, {T::F32}, 0, kOps});
  }
  // Flash attention (runtime/src/backends/cpu/ops_attn.cpp): K and V of any KV cache type.
  d.ops.push_back(
      {{O::FLASH_ATTN_EXT}, {f32, Src(weights), Src(weights), Src({T::F16}, true)}, {T::F32}, 0, kOps});
  // Mamba (runtime/src/backends/cpu/ops_ssm.cpp).
  d.ops.push_back({{O::CONCAT, O::SSM_CONV}, {f32, f32}, {T::F32}, 0, kOps});
  d.ops.push_back({{O::SSM_SCAN}, {f32, f32, f32, f32, f32, f32}, {T::F32}, 0, kOps});
  d.properties.push_back({"cores", std::to_string(cpu.physical_cores) + " physical, " +
                                       std::to_string(cpu.logical_cores) + " logical"});
  std::string isa;
  for (const auto& n : cpu.features.Names()) isa += (isa.empty() ? "" : " ") + n;
  d.properties.push_back({"isa", isa.empty() ? "baseline" : isa});
  if (!cpu.vendor.empty()) d.properties.push_back({"vendor", cpu.vendor});

  // llama.cpp's CPU_REPACK on x86 (ggml-cpu/repack.cpp, Aug 2026: ggml_repack_get_optimal_repack_type
  // and extra_buffer_type::supports_op) takes MUL_MAT weights of 2 dims with AVX2: Q4_0 (q4_0_8x8_q8_0)
  // and Q4_K (q4_K_8x8_q8_K), both with ne1 % 8 == 0 (also IQ4_NL, and Q2_K with AVX-512, which this
  // backend does not repack). This backend also repacks Q8_0 under the same condition (llama.cpp
  // repacks Q8_0 on ARM and RISC-V only): its Q8_0x8 gemv computes the plain vec_dot's bits with
  // 2.6x its in-cache speed, so token generation on Q8_0 is no longer compute-bound. The kernels' own
  // condition, which decides the layout at upload, is the same: cpu::RepackLayoutFor (CanRepackQ4_0 /
  // CanRepackQ4_K / CanRepackQ8_0: contiguous, ne1 % 8 == 0; ne0 is a multiple of the block size for
  // every tensor of these types). The shipped registry manifests (cpu-avx2/avx512.json) model FEB25
  // llama.cpp, which repacked Q4_0 only.
  if (cpu.features.avx2) {
    ProbedBufferType repack{"CPU_REPACK", 32, false, {}};
    SrcRequirement w = Src({T::Q4_0, T::Q4_K, T::Q8_0});
    w.buft = "CPU_REPACK";
    w.max_dims = 2;
    w.ne1_multiple_of = 8;
    w.contiguous = true;  // cpu::CanRepackQ4_0 / CanRepackQ4_K / CanRepackQ8_0
    SrcRequirement act = Src({T::F32});
    act.host = true;
    // MUL_MAT_ID of 3-D experts likewise (llama.cpp's supports_op: ggml_n_dims(src0) == 3; here at
    // most 3, so a single-expert 2-D tensor is accepted too; cpu::MulMatId reads each expert's
    // repacked slice).
    SrcRequirement experts = w;
    experts.max_dims = 3;
    repack.supports_op = {
        {{O::MUL_MAT}, {w, act}, {}, 0, "Q4_0 / Q4_K / Q8_0 8x8 repack (AVX2), ne1 % 8 == 0"},
        {{O::MUL_MAT_ID},
         {experts, act},
         {},
         0,
         "Q4_0 / Q4_K / Q8_0 8x8 repacked experts (AVX2), ne1 % 8 == 0"}};
    d.extra_bufts.push_back(std::move(repack));
  }
  return d;
}

ProbedDevice MakeCudaDevice(const CudaDeviceInfo& info) {
  using T = GgmlType;
  using O = GgmlOp;
  ProbedDevice d;
  d.backend = "CUDA";
  d.name = "CUDA" + std::to_string(info.index);
  d.description = info.name;
  d.type = ProbedDeviceType::kGpu;
  d.memory_total = info.memory_total;
  d.memory_free = info.memory_free;
  d.caps_async = true;
  d.caps_host_buffer = true;
  d.caps_events = true;
  d.default_buft = {d.name, 128, false, {}};
  d.host_buft = ProbedBufferType{"CUDA_Host", 32, true, {}};
  d.split_buft = ProbedBufferType{d.name + "_Split", 128, false, {}};
  d.view_ops_any_buffer = true;
  d.srcs_must_be_host = false;  // a GPU reads its own buffers; the scheduler copies the rest

  const ProbedDevice cpu = MakeCpuDevice(CpuInfo{});
  std::vector<T> weights = info.weight_types;
  if (weights.empty()) weights = cpu.ops[0].src[0].types;  // the CPU's GET_ROWS / MUL_MAT set
  const SrcRequirement f32 = Src({T::F32});
  const SrcRequirement f32_opt = Src({T::F32}, true);
  const char* kOps = "runtime/src/backends/cuda/cuda_backend.cpp";
  d.ops = {
      {{O::GET_ROWS}, {Src(weights), Src({T::I32})}, {T::F32}, 0, kOps},
      {{O::MUL_MAT}, {Src(weights), f32}, {T::F32}, 0, kOps},
      {{O::RMS_NORM, O::NORM, O::SCALE, O::SILU, O::GELU}, {f32}, {T::F32}, 0, kOps},
      {{O::ADD, O::MUL}, {f32, Src({T::F32, T::F16})}, {T::F32}, 0, kOps},
      {{O::SWIGLU, O::GEGLU}, {f32, f32_opt}, {T::F32}, 0, kOps},
      {{O::ROPE}, {f32, Src({T::I32}), f32_opt}, {T::F32}, 0, kOps},
      {{O::SOFT_MAX}, {f32, Src({T::F16, T::F32}, true)}, {T::F32}, 0, kOps},
  };
  if (info.cpy_types.empty()) {
    // The conversions the CUDA kernels have (exec::CudaSupportsCpy, which the probe lists): the
    // CPU's table also stores q4_1 / q5_0 / q5_1.
    d.ops.push_back({{O::CPY, O::CONT}, {f32}, {T::F32, T::F16, T::BF16, T::Q8_0, T::Q4_0}, 0, kOps});
    d.ops.push_back({{O::CPY, O::CONT}, {Src({T::F16})}, {T::F32}, 0, kOps});
  } else {
    // One row per source type: CPY/CONT/DUP from it into the listed destination types.
    std::vector<std::pair<T, std::vector<T>>> by_src;
    for (const auto& [from, to] : info.cpy_types) {
      auto it = std::find_if(by_src.begin(), by_src.end(), [&](const auto& p) { return p.first == from; });
      if (it == by_src.end()) it = by_src.insert(by_src.end(), {from, {}});
      it->second.push_back(to);
    }
    for (const auto& [from, to] : by_src)
      d.ops.push_back({{O::CPY, O::CONT, O::DUP}, {Src({from})}, to, 0, kOps});
  }
  d.offload_min_batch = 32;
  d.properties = {{"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
                  {"multiprocessors", std::to_string(info.multiprocessors)}};
  if (!info.pci_bus_id.empty()) d.properties.push_back({"pci_bus_id", info.pci_bus_id});
  return d;
}

}  // namespace stowage
