// The CPU backend's op table: the one list of the ops it runs and the tensors it takes them with,
// in the op-support rule language (stowage/runtime/op_rules.h). CpuBackend::Compute (cpu_backend.cpp)
// runs the ops of this table and refuses every other op; the probed CPU device (runtime/src/devices,
// MakeCpuDevice) answers supports_op from these rules, and so do the manifests it emits.
//
// Plain C++ without the kernels (library stowage_cpu_op_table): the weight types are a parameter
// (the probe passes the kernels' cpu::SupportsMulMatType set).
#pragma once

#include <vector>

#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/op_rules.h"

namespace stowage::exec {

/// The CPU backend's supports_op rules (each accepts; a query no rule matches is refused), from
/// the kernel contract runtime/src/backends/cpu/ops.h:
///   GET_ROWS: src0 of `weight_types`, I32 ids, F32 dst;
///   SET_ROWS: F32 src, I64 or I32 ids, dst F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL
///   (cpu::SetRows: cpu::SupportsCpyTypes(F32, dst));
///   MUL_MAT: src0 (weights) of `weight_types`, F32 src1 and dst;
///   RMS_NORM, NORM, SCALE, SILU, GELU, TANH: F32 src and dst;
///   ADD, MUL: F32 src0 and dst, F32 or F16 src1;
///   RMS_NORM_MUL (Stowage's fused RMS_NORM + MUL): F32 src0 and dst, F32 or F16 weight;
///   MUL_MAT_GLU (Stowage's fused FFN-in): gate and up weights of `weight_types`, F32 x and dst;
///   SWIGLU, GEGLU: F32 src0 and dst, optional F32 src1 (split form);
///   ROPE: F32 x and dst, I32 positions, optional F32 freq factors;
///   SOFT_MAX: F32 src and dst, optional F16 or F32 mask, optional F32 sinks;
///   CPY, CONT, DUP: F32 into the SET_ROWS destination types, F16 into F32;
///   MUL_MAT_ID: contiguous experts of `weight_types`, F32 activations, I32 ids, F32 dst
///   (ops_moe.cpp); ARGSORT: F32 into I32; SUM_ROWS, SIGMOID: F32; DIV: as ADD;
///   FLASH_ATTN_EXT: F32 q, K and V of `weight_types`, optional F16 mask, optional F32 sinks, F32 dst
///   (ops_attn.cpp); ADD_ID: F32 a and b, I32 ids; SWIGLU_OAI: F32 a and b (ops_gpt_oss.cpp);
///   CONCAT, SSM_CONV: two F32 sources; SSM_SCAN: six F32 sources (ops_ssm.cpp).
/// Shapes are checked at Compute (kInvalidArgument), not here.
std::vector<OpRule> CpuOpRules(const std::vector<GgmlType>& weight_types);

/// True when `op` is an op of CpuOpRules: CpuBackend::Compute runs these and refuses every other
/// op as unimplemented, whatever its tensors.
bool CpuTableHasOp(GgmlOp op);

}  // namespace stowage::exec
