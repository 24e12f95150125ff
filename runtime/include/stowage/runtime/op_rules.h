// The op-support rule language: which ops, with which tensors, a device runs (ggml's
// ggml_backend_dev_supports_op, described as data).
//
// One language for every side that answers that question: the runtime's backends declare their op
// tables in it (the CPU's in runtime/src/backends/cpu/cpu_op_table.cpp, CUDA's in
// runtime/src/backends/cuda/cuda_op_table.cpp, oneDNN's in runtime/src/devices/onednn_probe.cpp),
// probed devices carry those tables (device_probe.h), and the planner's device manifests read and
// write them as JSON (planner/include/stowage/planner/manifest.h, format in
// planner/registry/README.md).
//
// A query is a graph node as supports_op sees it: op, destination and sources with type, shape,
// contiguity and the buffer type they live in. A rule matches a query when it covers the op and
// every condition holds; a table's rules are tried in order and the first match decides.
//
// Shapes are in ggml order: ne[0] is the innermost (contiguous) dimension, unused dims are 1.
// Everything here is a plain value with no global state (thread-compatible).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"

namespace stowage {

// ---- op queries ---------------------------------------------------------------------------------

/// One tensor of an op query: a node's destination or one of its sources.
struct TensorDesc {
  GgmlType type = GgmlType::F32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  ///< shape, ggml order (ne[0] innermost)
  bool contiguous = true;                    ///< ggml_is_contiguous
  /// Name of the buffer type of the buffer the tensor (or its view source) lives in; empty when the
  /// tensor is not allocated yet (an intermediate the scheduler has not placed).
  std::string buft;
  /// is_host of that buffer type (ggml_backend_buft_is_host); ignored when `buft` is empty.
  bool buft_is_host = false;

  /// ggml_n_dims: 1 + index of the last dimension with ne > 1 (1 for a scalar).
  int NumDims() const;
  /// ggml_nrows: ne[1] * ne[2] * ne[3].
  int64_t NumRows() const { return ne[1] * ne[2] * ne[3]; }
  /// True when the tensor is in a buffer whose type is not host memory.
  bool InNonHostBuffer() const { return !buft.empty() && !buft_is_host; }
};

/// A node as ggml_backend_dev_supports_op sees it: op, destination and sources in ggml's src order
/// (MUL_MAT: src[0] = weight/matrix A [K, N, ...], src[1] = activations B [K, M, ...];
/// dst = [N, M, ...]; GET_ROWS: src[0] = table, src[1] = I32 row ids; ROPE: src[0] = x, src[1] =
/// positions, src[2] = optional freq factors).
struct OpQuery {
  GgmlOp op = GgmlOp::NONE;
  TensorDesc dst;
  std::vector<TensorDesc> src;
};

/// The batch size ggml's CUDA backend uses in offload_op (ggml-cuda.cu get_op_batch_size):
/// 0 for GET_ROWS, dst ne[1] for MUL_MAT, dst ne[2] for MUL_MAT_ID / ROPE (and ROPE_BACK, which
/// Stowage does not use), dst nrows otherwise.
int64_t OpBatchSize(const OpQuery& q);

/// True for NONE, RESHAPE, VIEW, PERMUTE, TRANSPOSE: ops that create no data (ggml_is_view_op
/// plus NONE); every ggml CPU-side device accepts them (ggml-cpu.cpp supports_op).
bool IsViewOrNoneOp(GgmlOp op);

/// The vec_dot type of `type` in ggml's CPU backend (type_traits_cpu[].vec_dot_type): the type
/// MUL_MAT converts src1 to. F32->F32, F16->F16, BF16->BF16, Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4->Q8_0,
/// Q4_1/Q5_1->Q8_1, K-quants, IQ2/IQ3/IQ1/IQ4_XS/TQ->Q8_K. Other types return themselves.
GgmlType VecDotType(GgmlType type);

// ---- rules --------------------------------------------------------------------------------------

/// Conditions on one tensor of a rule. Every present condition must hold for the rule to match.
struct TensorConstraint {
  /// The tensor must exist (default). With `present == false` the rule matches only when the source
  /// is absent and every other field is ignored.
  bool present = true;
  /// The source may be absent (ROPE's freq factors); when present, the other fields apply.
  bool optional = false;
  std::vector<GgmlType> types;     ///< allowed types; empty = any
  std::optional<bool> contiguous;  ///< required ggml_is_contiguous value
  /// true: not in a non-host buffer (unallocated or host buft); false: in a non-host buffer.
  std::optional<bool> host;
  std::optional<std::string> buft;                       ///< must live in the buffer type of this name
  int max_dims = 0;                                      ///< ggml_n_dims <= max_dims (0 = no limit)
  std::array<int64_t, 4> min_ne = {0, 0, 0, 0};          ///< ne[i] >= min_ne[i]
  std::array<int64_t, 4> max_ne = {0, 0, 0, 0};          ///< ne[i] <= max_ne[i] (0 = no limit)
  std::array<int64_t, 4> ne_multiple_of = {1, 1, 1, 1};  ///< ne[i] % m[i] == 0

  /// True when `t` (nullptr = absent) satisfies every condition.
  bool Matches(const TensorDesc* t) const;
  bool operator==(const TensorConstraint& o) const;
};

/// A constraint that only lists the allowed types (empty = any), optionally for an optional source.
TensorConstraint OfTypes(std::vector<GgmlType> types, bool optional = false);

/// One row of an op-support table: when `ops` contains the query's op (empty = every op) and every
/// condition holds, the answer is `supported`. Rules are tried in order; the first match decides.
struct OpRule {
  std::vector<GgmlOp> ops;  ///< empty = every op ("*" in JSON)
  bool supported = true;
  /// true: no source is in a non-host buffer; false: at least one is (ggml-cpu's "any src in a
  /// non-host buffer -> unsupported").
  std::optional<bool> all_srcs_host;
  /// src[1].type must be F32 or VecDotType(src[0].type) (ggml-cpu MUL_MAT rule).
  bool src1_f32_or_vec_dot = false;
  int64_t min_batch = 0;  ///< OpBatchSize(query) >= min_batch
  std::optional<TensorConstraint> dst;
  /// Constraint i applies to src[i]; nullopt entries impose nothing.
  std::vector<std::optional<TensorConstraint>> src;
  std::string note;  ///< why / source of the rule (free text, kept for --explain)

  bool AppliesTo(GgmlOp op) const;
  /// True when the rule covers `q.op` and all its conditions hold for `q`.
  bool Matches(const OpQuery& q) const;
  bool operator==(const OpRule& o) const;
};

/// A rule accepting `ops` when src[i] satisfies src[i] (sources beyond are unconstrained), the
/// destination's type is one of `dst_types` (empty = any) and OpBatchSize >= min_batch; `note`
/// says where the rule comes from. The form a backend's own table is written in.
OpRule AcceptRule(std::vector<GgmlOp> ops, std::vector<TensorConstraint> src, std::vector<GgmlType> dst_types,
                  int64_t min_batch, std::string note);

/// Per GgmlOp (indexed by its value): whether some rule of a table lists it in its ops.
using OpSet = std::array<bool, static_cast<size_t>(GgmlOp::kCount)>;

/// The ops `rules` list by name (a rule for every op, empty ops, adds none). A backend whose own
/// table is a list of accepting rules runs exactly these ops (CpuTableHasOp, CudaTableHasOp).
OpSet OpsNamedBy(const std::vector<OpRule>& rules);

/// True when `op` is in `ops`; false for a value outside the enum.
bool Contains(const OpSet& ops, GgmlOp op);

/// An op-support table: ordered rules and the answer when none matches.
struct OpSupportTable {
  bool default_supported = true;
  std::vector<OpRule> rules;

  /// The first matching rule's `supported`, else `default_supported`. If `decided_by` is not
  /// null it receives the index of the deciding rule, or -1 for the default.
  bool Evaluate(const OpQuery& q, int* decided_by = nullptr) const;
  bool operator==(const OpSupportTable& o) const;
};

// ---- a device's answer --------------------------------------------------------------------------

/// The first steps of ggml_backend_dev_supports_op for a device with a row-split buffer type named
/// `split_buft` (empty = none): true when `q` must be refused because a source other than MUL_MAT's
/// lives in it (ggml-cuda FEB25 supports_op: "split buffers can only be used with GGML_OP_MUL_MAT").
bool RefusedBySplitBuft(const OpQuery& q, std::string_view split_buft);

/// An extra buffer type's supports_op (ggml-cpu asks its extra bufts before its own table): true
/// when the first of `rules` matching `q` accepts it; no match = not accepted by this buft.
bool ExtraBuftAccepts(const std::vector<OpRule>& rules, const OpQuery& q);

}  // namespace stowage
