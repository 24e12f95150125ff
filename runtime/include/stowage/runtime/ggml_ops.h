// ggml operations as Stowage names them: one flat enum shared by the graph builder, the device
// manifests, the planner, the plan file and the runtime's backends.
//
// Source: ggml/include/ggml.h `enum ggml_op`, `enum ggml_unary_op`, `enum ggml_glu_op`. Unary and
// GLU sub-ops are flattened into their own values, named as ggml_op_desc() prints them ("SILU",
// "SWIGLU"), so a manifest can say "SILU" where ggml says UNARY(SILU). Values are serialized in
// plan files: append only, never renumber.
#pragma once

#include <cstdint>
#include <string_view>

#include "stowage/runtime/status.h"

namespace stowage {

// An X-macro list, grouped as in ggml.h.
// clang-format off
#define STOWAGE_GGML_OPS(X)                                                                       \
  X(NONE) X(DUP) X(ADD) X(ADD_ID) X(ADD1) X(SUB) X(MUL) X(DIV) X(SQR) X(SQRT) X(SUM_ROWS) X(MEAN)  \
  X(ARGMAX) X(REPEAT) X(CONCAT) X(NORM) X(RMS_NORM) X(GROUP_NORM) X(L2_NORM) X(MUL_MAT)            \
  X(MUL_MAT_ID) X(OUT_PROD) X(SCALE) X(SET) X(CPY) X(CONT) X(RESHAPE) X(VIEW) X(PERMUTE)           \
  X(TRANSPOSE) X(GET_ROWS) X(SET_ROWS) X(DIAG_MASK_INF) X(SOFT_MAX) X(ROPE) X(CLAMP) X(IM2COL)      \
  X(CONV_TRANSPOSE_1D) X(POOL_2D) X(UPSCALE) X(PAD) X(ARANGE) X(ARGSORT) X(TOP_K) X(FLASH_ATTN_EXT) \
  X(SSM_CONV) X(SSM_SCAN) X(RWKV_WKV6) X(RWKV_WKV7)                                                \
  /* unary ops (ggml UNARY) */                                                                    \
  X(ABS) X(NEG) X(TANH) X(ELU) X(RELU) X(SIGMOID) X(GELU) X(GELU_QUICK) X(SILU) X(HARDSWISH)      \
  X(EXP) X(SOFTPLUS)                                                                              \
  /* gated linear units (ggml GLU) */                                                             \
  X(REGLU) X(GEGLU) X(SWIGLU)

enum class GgmlOp : uint16_t {
#define STOWAGE_OP_ENUM(name) name,
  STOWAGE_GGML_OPS(STOWAGE_OP_ENUM)
#undef STOWAGE_OP_ENUM
  kCount
};
// clang-format on

/// ggml's name of `op` ("MUL_MAT", "SILU").
const char* GgmlOpName(GgmlOp op);

/// Parses an op name (exact, upper case as ggml prints it). Errors: kInvalidArgument naming it.
Result<GgmlOp> ParseGgmlOp(std::string_view name);

/// True for ops that only reinterpret memory (ggml_is_view_op: RESHAPE, VIEW, PERMUTE, TRANSPOSE);
/// the scheduler skips them (llama.cpp ggml-backend.cpp).
inline bool IsViewOp(GgmlOp op) {
  return op == GgmlOp::RESHAPE || op == GgmlOp::VIEW || op == GgmlOp::PERMUTE || op == GgmlOp::TRANSPOSE;
}

}  // namespace stowage
