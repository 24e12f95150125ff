// Device capability manifests: what the planner knows about one device, and the questions
// llama.cpp's loader and scheduler ask a ggml backend device, answered from that description.
//
// A manifest is one JSON file (format: planner/registry/README.md, "manifest_version": 1) that
// describes a device the way ggml-backend exposes it (reference/llamacpp-placement.md §1):
//   * identity: name ("CUDA0", "CPU", "RPC[127.0.0.1:50052]"), description, type CPU | GPU | ACCEL,
//     and the backend (ggml "reg") it belongs to ("CUDA", "CPU", "BLAS", "RPC", "ONEDNN");
//   * memory: total and free bytes (ggml_backend_dev_memory) plus a reserve the planner keeps free;
//   * caps (ggml_backend_dev_caps): async, host_buffer, buffer_from_host_ptr, events;
//   * buffer types: the default one (ggml_backend_dev_buffer_type), an optional host/pinned one
//     (get_host_buffer_type), an optional split one (`-sm row`), and extra ones such as the CPU's
//     CPU_REPACK (ggml_backend_dev_get_extra_bufts), each extra with its own supports_op rules;
//   * supports_buft: which buffer types the device can read;
//   * supports_op: an ordered rule table (op x tensor types x shape/contiguity/buffer constraints);
//   * offload_op: the minimum batch for "run this op here although its weight is in host memory";
//   * performance figures for a cost model, each with its public source.
//
// Names in templates: a manifest may contain "{index}" in its device and buffer-type names
// ("CUDA{index}", "CUDA{index}_Split"); the registry replaces it by the device's index among the
// devices of the same backend, as ggml numbers CUDA0, CUDA1, ... (see registry.h).
//
// Shapes are in ggml order: ne[0] is the innermost (contiguous) dimension, unused dims are 1.
// Sizes are bytes. Thread-safety: a DeviceManifest is a plain value; const methods are safe to call
// from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/device_desc.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/op_rules.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

// ---- ggml ops ----------------------------------------------------------------------------------

// Ops are the project's shared enum (runtime/include/stowage/runtime/ggml_ops.h): ggml's op names,
// unary and GLU sub-ops flattened under their own names ("SILU", "SWIGLU"), as ggml_op_desc prints
// them. Manifests name ops by these strings; an op the enum does not know is rejected.
using GgmlOp = ::stowage::GgmlOp;
using ::stowage::GgmlOpName;
using ::stowage::ParseGgmlOp;

/// Number of GgmlOp values (excluding kCount).
inline constexpr size_t kGgmlOpCount = static_cast<size_t>(GgmlOp::kCount);

/// True for ggml_unary_op members (the ops of a GGML_OP_UNARY node: ABS .. SOFTPLUS).
bool IsUnaryOp(GgmlOp op);
/// True for ggml_glu_op members (the ops of a GGML_OP_GLU node: REGLU, GEGLU, SWIGLU, SWIGLU_OAI).
bool IsGluOp(GgmlOp op);
// ---- op queries and rules ----------------------------------------------------------------------

// The rule language is the runtime's (stowage/runtime/op_rules.h): the same queries, constraints,
// rules and tables the backends declare their op support in, read and written here as JSON.
using ::stowage::IsViewOrNoneOp;
using ::stowage::OpBatchSize;
using ::stowage::OpQuery;
using ::stowage::OpRule;
using ::stowage::OpSupportTable;
using ::stowage::TensorConstraint;
using ::stowage::TensorDesc;
using ::stowage::VecDotType;

// ---- the manifest -------------------------------------------------------------------------------

// What a manifest shares with a probed device is the runtime's description of a device
// (stowage/runtime/device_desc.h): type, caps, buffer types, supports_buft, offload_op and the
// supports_op / supports_buft / offload_op queries over them.
using ::stowage::BufferType;
using ::stowage::DeviceCaps;
using ::stowage::DeviceDesc;
using ::stowage::DeviceType;
using ::stowage::DeviceTypeName;
using ::stowage::OffloadRule;
using ::stowage::ParseDeviceType;
using ::stowage::SupportsBuftRule;

/// A performance figure with its public source.
struct PerfFigure {
  double value = 0;    ///< bytes/s for bandwidths, FLOP/s (or OP/s for integer types) for peaks
  std::string source;  ///< where the number comes from (document, table, formula)
  bool operator==(const PerfFigure& o) const { return value == o.value && source == o.source; }
};

/// Cost-model figures (all optional).
struct Performance {
  std::optional<PerfFigure> memory_bandwidth;     ///< device memory, bytes/s
  std::optional<PerfFigure> host_link_bandwidth;  ///< host <-> device, one direction, bytes/s
  std::map<std::string, PerfFigure> peak_flops;   ///< key: ggml type name ("f16", "bf16", "i8")
  bool operator==(const Performance& o) const;
};

/// Current manifest format version.
inline constexpr int kManifestVersion = 1;

/// The longest name a manifest may give (device, backend, type, buffer type names, the buffer types
/// rules and supports_buft name): 256 bytes. Names are printed in log lines and stored in every
/// plan many times over (ggml's own names are at most GGML_MAX_NAME = 64 bytes).
inline constexpr size_t kMaxManifestNameBytes = 256;
/// The longest free text (description, notes, a rule's or buffer type's note, a figure's source):
/// 4096 bytes.
inline constexpr size_t kMaxManifestTextBytes = 4096;

/// One device, as described by a manifest (names possibly still holding "{index}"): the
/// device's description (DeviceDesc: backend, name, description, type, memory_total, memory_free,
/// caps, buffer types, supports_buft, op_support, offload_op and their queries SupportsOp,
/// SupportsBuft, OffloadOp, FindBuft) and what only a manifest holds.
struct DeviceManifest : DeviceDesc {
  int manifest_version = kManifestVersion;
  uint64_t memory_reserve = 0;  ///< bytes the planner must leave free (context, workspaces)
  Performance performance;
  std::string notes;        ///< free text
  std::string source_path;  ///< file it was read from (not serialized)

  /// memory_free - memory_reserve (0 when the reserve exceeds free memory).
  uint64_t UsableMemory() const;

  /// A copy with "{index}" replaced by `index` in the device name and every buffer-type name
  /// (including names referenced by rules and supports_buft).
  DeviceManifest WithIndex(int index) const;
  /// True when the name contains "{index}" (an indexed device family such as CUDA).
  bool IsIndexed() const;

  bool operator==(const DeviceManifest& o) const;  ///< all fields except source_path
};

/// Parses a manifest from JSON text. `file` names the source in error messages.
/// Errors (kDataLoss for syntax, kInvalidArgument for content), one line each:
///   "<file>: byte N: JSON syntax error: ..."
///   "<file>: $.memory: unknown key 'fre' (expected one of: total, free, reserve)"
///   "<file>: $: missing required field 'type' (CPU | GPU | ACCEL)"
///   "<file>: $.memory.free: expected an unsigned integer (bytes), got string"
///   "<file>: $.memory.free: 2000 is out of range (must be <= memory.total = 1000)"
///   "<file>: $.manifest_version: unsupported version 7 (this build reads 1)"
///   "<file>: $.memory: duplicate key 'free'"
///   "<file>: $.name: a string of 409600 bytes, over the limit of 256 bytes (device name)"
///   "<file>: $.op_support.rules[0].src[0].buft: buffer type 'CUDA0_Splt' is not defined by this
///    manifest (its buffer types: CUDA0, CUDA_Host, CUDA0_Split)" (a rule's "buft" must be one of
///    the device's own buffer types; so must each of supports_buft.names:
///    "<file>: $.supports_buft.names[0]: buffer type 'GHOST' is not defined by this manifest ...")
///   "<file>: $.backend: unknown backend "VULKAN" (expected one of CPU, CUDA, RPC, BLAS, ONEDNN)"
///   "<file>: $.type: expected CPU for backend CPU (ggml's device type for it), got "GPU"" (ggml's
///    device types: CPU for CPU, GPU for CUDA and RPC, ACCEL for BLAS and ONEDNN)
///   "<file>: $.buffer_types.default.is_host: expected false (a GPU's default buffer type is device
///    memory)"
Result<DeviceManifest> ParseManifest(std::string_view json_text, const std::string& file);

/// Reads a shared op table file (planner/registry/op_tables/<name>.json): one JSON object with
/// "default" ("supported" | "unsupported"), "rules" (as a manifest's op_support rules) and an
/// optional "note". A manifest uses it with `"op_support": {"table": "<name>"}`; ParseManifest
/// looks for op_tables/<name>.json in the manifest's folder, then in the shipped registry folder
/// (ShippedRegistryDir), and the manifest's op_support becomes the table (the same DeviceManifest,
/// and digest, as with the rules written inline). Errors, one line naming `path`: as
/// LoadManifestFile's ("<path>: $.rules[2].ops[0]: unknown ggml op 'MUL_MATT'", ...); a manifest
/// whose table cannot be found: "<file>: $.op_support.table: no op table 'x' (expected
/// <dir>/op_tables/x.json or <shipped>/op_tables/x.json)", one whose table is malformed: "<file>:
/// $.op_support.table: op table 'x': " + this function's error.
Result<OpSupportTable> LoadOpTableFile(const std::string& path);

/// The largest manifest file LoadManifestFile reads: 4 MiB (the shipped ones are about 5 KiB; a
/// probed device's, with its op-support rules, a few tens of KiB).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{4} << 20;

/// Reads and parses a manifest file. Before parsing, `path` must be a regular file (not a folder,
/// FIFO or device) of at most kMaxManifestBytes, checked from its size before it is read, and its
/// first byte other than JSON whitespace must be '{'. Errors, one line naming `path`:
/// ReadRegularFile's (kIoError, kResourceExhausted "<path>: N bytes, over the limit of 4194304
/// bytes for a manifest file (.json)"), kDataLoss "<path>: not a device manifest: expected a JSON
/// object starting with '{', found byte 0x47 at offset 0", else ParseManifest's.
Result<DeviceManifest> LoadManifestFile(const std::string& path);

/// Serializes `m` as a version-1 manifest (pretty-printed JSON, 2-space indent, trailing newline).
/// ParseManifest(SerializeManifest(m)) == m.
std::string SerializeManifest(const DeviceManifest& m);

/// Identity of a device description for plans ("devices: name, type, manifest digest"):
/// "xxh64:" + 16 lower-case hex digits of XXH64 (seed 0) over SerializeManifest(m). Equal for
/// manifests that compare equal (source_path and JSON formatting do not matter); names are
/// hashed after "{index}" expansion, so CUDA0 and CUDA1 of the same model differ.
std::string ManifestDigest(const DeviceManifest& m);

}  // namespace stowage::planner
