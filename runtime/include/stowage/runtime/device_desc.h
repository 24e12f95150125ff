// What ggml-backend exposes about one device (reference/llamacpp-placement.md §1), as one set of
// types for both sides that describe devices: the runtime's probed devices (device_probe.h,
// ProbedDevice) and the planner's device manifests (planner/include/stowage/planner/manifest.h,
// DeviceManifest, JSON format in planner/registry/README.md), which both extend DeviceDesc.
//
// A DeviceDesc is identity (backend, name, description, type), memory, caps, buffer types,
// supports_buft, the op-support table (stowage/runtime/op_rules.h) and offload_op; its queries
// answer ggml_backend_dev_supports_op / supports_buft / offload_op from them.
//
// Sizes are bytes. Plain values (thread-compatible); const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/op_rules.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// ggml_backend_dev_type (the three kinds Stowage plans for).
enum class DeviceType { kCpu, kGpu, kAccel };

/// "CPU", "GPU", "ACCEL".
const char* DeviceTypeName(DeviceType t);
/// Parses "CPU" / "GPU" / "ACCEL" (exact). Errors: kInvalidArgument "unknown device type 'x'
/// (expected CPU, GPU or ACCEL)".
Result<DeviceType> ParseDeviceType(std::string_view s);

/// ggml_backend_dev_caps.
struct DeviceCaps {
  bool async = false;                 ///< asynchronous compute and copies
  bool host_buffer = false;           ///< has a pinned host buffer type
  bool buffer_from_host_ptr = false;  ///< can wrap host memory (mmap'ed weights: CPU_Mapped)
  bool events = false;                ///< event synchronisation
  bool operator==(const DeviceCaps& o) const;
};

/// A ggml buffer type (ggml_backend_buffer_type).
struct BufferType {
  std::string name;                ///< "CPU", "CUDA0", "CUDA_Host", "CPU_REPACK", ...
  uint64_t alignment = 32;         ///< get_alignment, bytes (power of two)
  uint64_t max_size = UINT64_MAX;  ///< get_max_size, bytes (ggml default SIZE_MAX)
  bool is_host = false;            ///< is_host: CPU code can read it directly
  /// Extra buffer types only: the ops this buft's own supports_op accepts (rules; no match ->
  /// not accepted, ExtraBuftAccepts), e.g. CPU_REPACK: MUL_MAT with a 2-D Q4_0 src0 in
  /// CPU_REPACK, ne1 % 8 == 0.
  std::vector<OpRule> supports_op;
  std::string note;
  bool operator==(const BufferType& o) const;
};

/// supports_buft: besides its own default, split and extra buffer types, which buffer types a
/// device can read.
struct SupportsBuftRule {
  bool any_host = false;           ///< every is_host buft (ggml-cpu, ggml-blas)
  std::vector<std::string> names;  ///< these named bufts as well
  bool operator==(const SupportsBuftRule& o) const;
};

/// offload_op: present on devices that implement it (CUDA: min batch 32, llama.cpp FEB25;
/// configurable with GGML_OP_OFFLOAD_MIN_BATCH since llama/18535).
struct OffloadRule {
  int64_t min_batch = 32;
  bool operator==(const OffloadRule& o) const { return min_batch == o.min_batch; }
};

/// One device as ggml-backend describes it.
struct DeviceDesc {
  std::string backend;      ///< ggml reg name: "CPU", "CUDA", "BLAS", "RPC", "ONEDNN"
  std::string name;         ///< device name ("CUDA0", "CPU", "RPC[127.0.0.1:50052]")
  std::string description;  ///< model name ("NVIDIA H200", the CPU's, "oneDNN v3.x (avx512_core)")
  DeviceType type = DeviceType::kCpu;
  uint64_t memory_total = 0;  ///< bytes; 0 = not reported (ggml-cpu FEB25 reports 0/0)
  uint64_t memory_free = 0;   ///< bytes, <= memory_total
  DeviceCaps caps;
  BufferType default_buft;
  std::optional<BufferType> host_buft;   ///< pinned host buffer type, if the backend has one
  std::optional<BufferType> split_buft;  ///< row-split buffer type (-sm row), if the backend has one
  std::vector<BufferType> extra_bufts;   ///< ggml_backend_dev_get_extra_bufts (CPU_REPACK)
  SupportsBuftRule supports_buft;
  /// The device's own op-support table, asked after the extra buffer types (see SupportsOp).
  OpSupportTable op_support;
  std::optional<OffloadRule> offload_op;

  /// ggml_backend_dev_supports_op: false for an op other than MUL_MAT with a source in this
  /// device's split buft (RefusedBySplitBuft; ggml-cuda FEB25 supports_op: "split buffers can only
  /// be used with GGML_OP_MUL_MAT", so -sm row keeps norms and MUL_MAT_ID experts out of
  /// CUDA<i>_Split); true when any extra buft's rules accept `q` (ExtraBuftAccepts; ggml-cpu asks
  /// its extra bufts first); else the device's op-support table decides.
  bool SupportsOp(const OpQuery& q) const;
  /// ggml_backend_dev_supports_buft: own default / split / extra bufts (by name), any host buft
  /// when supports_buft.any_host, and the names listed in supports_buft.names. Note: like CUDA in
  /// llama.cpp, a device does not read its own host buft unless it says so.
  bool SupportsBuft(std::string_view buft_name, bool buft_is_host) const;
  bool SupportsBuft(const BufferType& buft) const { return SupportsBuft(buft.name, buft.is_host); }
  /// ggml_backend_dev_offload_op: false without an offload rule, else batch >= min_batch.
  bool OffloadOp(GgmlOp op, int64_t batch) const;
  /// Same, with the batch computed by OpBatchSize(q).
  bool OffloadOp(const OpQuery& q) const { return OffloadOp(q.op, OpBatchSize(q)); }
  /// The buffer type of this device with that name (default, host, split or extra), or nullptr.
  const BufferType* FindBuft(std::string_view name) const;

  /// Every field equal.
  bool operator==(const DeviceDesc& o) const;
};

}  // namespace stowage
