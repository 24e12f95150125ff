// The CUDA backend's op table: the one list of the ops it runs and the tensors it takes them with,
// in the op-support rule language (stowage/runtime/op_rules.h). CudaBackend::Compute runs the ops of
// this table and refuses every other op; the probed CUDA device (runtime/src/devices,
// MakeCudaDevice) answers supports_op from these rules, and so do the manifests it emits.
//
// Plain C++ (no CUDA headers): built in every configuration (library stowage_cuda_op_table), so
// device probing and its tests describe the CUDA backend on machines without CUDA too.
#pragma once

#include <utility>
#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/op_rules.h"

namespace stowage::exec {

/// The CUDA backend's supports_op rules (each accepts; a query no rule matches is refused):
///   GET_ROWS: src0 of `weight_types`, I32 ids, F32 dst;
///   MUL_MAT: src0 (weights) of `weight_types`, F32 src1 and dst;
///   RMS_NORM, NORM, SCALE, SILU, GELU, TANH, SIGMOID, FILL, CLAMP: F32 src and dst;
///   ADD, MUL, DIV: F32 src0 and dst, F32 or F16 src1;
///   RMS_NORM_MUL (Stowage's fused RMS_NORM + MUL): F32 src0 and dst, F32 or F16 weight;
///   MUL_MAT_GLU (Stowage's fused FFN-in): gate and up of `weight_types`, F32 x and dst;
///   ROPE_SET_ROWS (fused ROPE + SET_ROWS): F32 x, I32 positions, an F32, F16 or BF16 cache and dst,
///   I64 or I32 indices, optional F32 freq factors; ROPE_CPY (fused ROPE + CPY): the same without
///   the indices;
///   SWIGLU, GEGLU: F32 src0 and dst, optional F32 src1 (split form);
///   ROPE: F32 x and dst, I32 positions, optional F32 freq factors;
///   SOFT_MAX: F32 src and dst, optional F16 or F32 mask, optional F32 sinks;
///   SWIGLU_OAI: F32 a, b and dst; ADD_ID: F32 a, b and dst, I32 ids;
///   MUL_MAT_ID: contiguous experts of `weight_types`, F32 src1 and dst, I32 ids;
///   ARGSORT: F32 src, I32 dst (rows up to cuda_math.h kArgsortMaxCols, checked at Compute);
///   SUM_ROWS, REPEAT: F32 src and dst; CONCAT: F32 a, b and dst;
///   SET_ROWS: F32 rows, I64 or I32 indices, F32, F16 or BF16 dst;
///   FLASH_ATTN_EXT: F32 q and dst, K and V F32, F16, BF16, Q8_0 or Q4_0, optional F16 mask,
///   optional F32 sinks;
///   CPY, CONT, DUP: one rule per source type of `cpy_types` ((src, dst) pairs) into its listed
///   destination types, in the order the pairs first name each source type.
/// `weight_types` are the backend's CudaSupportsWeightType set where CUDA is built; `cpy_types` its
/// CudaSupportsCpy pairs (CudaCopies). Shapes are checked at Compute (kInvalidArgument), not here.
std::vector<OpRule> CudaOpRules(const std::vector<GgmlType>& weight_types,
                                const std::vector<std::pair<GgmlType, GgmlType>>& cpy_types);

/// True when CPY/CONT/DUP of the CUDA backend convert `src` into `dst`: F32/F16/BF16 into F32, F16,
/// BF16, Q8_0 or Q4_0 (the conversions of its cuda::Cpy kernel).
bool CudaCopies(GgmlType src, GgmlType dst);

/// Every (src, dst) pair CudaCopies accepts, sources in type-id order, then destinations.
std::vector<std::pair<GgmlType, GgmlType>> CudaCopyPairs();

/// True when `op` is an op of CudaOpRules: CudaBackend::Compute runs these and refuses every other
/// op as unimplemented, whatever its tensors.
bool CudaTableHasOp(GgmlOp op);

}  // namespace stowage::exec
