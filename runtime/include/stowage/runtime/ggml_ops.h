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
  X(REGLU) X(GEGLU) X(SWIGLU)                                                                     \
  /* appended: gpt-oss's clamped SwiGLU (ggml GLU_OP_SWIGLU_OAI) */                                \
  X(SWIGLU_OAI)                                                                                   \
  /* appended: ggml_fill (a tensor of a's shape, every element one constant) */                   \
  X(FILL)                                                                                         \
  /* appended, Stowage's fused ops (no ggml op; the compiler's passes make them, see traits) */   \
  X(RMS_NORM_MUL)                                                                                  \
  X(MUL_MAT_GLU)                                                                                   \
  /* appended: tensor split across MPI ranks (no ggml op; see the traits) */                       \
  X(ALL_REDUCE)                                                                                    \
  /* appended, Stowage's fused op: ROPE of K and its store into the KV cache (see the traits) */ \
  X(ROPE_SET_ROWS)                                                                                 \
  X(ROPE_CPY)

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

/// What the graph code needs to know about an op, one entry per GgmlOp (kEntries in ggml_ops.cpp
/// is the only table). Sources are ggml's `src[]` in order; parameters are the plan's
/// `iparams` / `fparams` (ggml's op_params split by type, ggml_op_params.h has their layouts).
struct GgmlOpTraits {
  /// Sources a node must have (srcs[0 .. min_srcs-1] present) and may have: the arguments of ggml's
  /// constructor (ggml.c ggml_<op>), optional ones (ROPE's freq factors, SOFT_MAX's mask,
  /// FLASH_ATTN_EXT's mask, the second half of a split GLU, CPY's destination) counted in max_srcs.
  int8_t min_srcs = 0, max_srcs = 0;
  /// ggml_is_view_op: RESHAPE, VIEW, PERMUTE, TRANSPOSE only reinterpret src 0's memory; the
  /// scheduler and the allocator skip them (llama.cpp ggml-backend.cpp, ggml-alloc.c).
  bool is_view = false;
  /// The source the op writes its result into, so that the result is that source's memory:
  /// ggml_cpy(a, b) returns a view of b (src 1); SET_ROWS stores into its destination (src 2 in the
  /// planner's order b, c, a). -1 for every other op. A CPY without src 1 is ggml_cast: a tensor of
  /// its own.
  int8_t dst_src = -1;
  /// ggml_op_can_inplace (ggml-alloc.c): the result may take over the memory of a source of the same
  /// layout whose last use it is. ggml-alloc tries every source in order; the planner
  /// (memory_plan.cpp) and the plan's memory check (plan_check.cpp) use src 0 only.
  bool can_inplace = false;
  /// Integer and float parameters the op carries (exactly); -1 where this project does not model
  /// the op's ggml op_params (ops the planner never builds: SET, IM2COL, POOL_2D, ...).
  int8_t n_iparams = 0, n_fparams = 0;
  /// Trailing integer parameters a node may leave out, after the n_iparams it must have (ROPE's
  /// n_offs: written only when not 0, so plans without it keep their bytes).
  int8_t n_iparams_opt = 0;
};

/// The traits of `op`; an op outside the enum gets a "no sources, no parameters" entry.
const GgmlOpTraits& GetOpTraits(GgmlOp op);

/// True for ops that only reinterpret memory (ggml_is_view_op: RESHAPE, VIEW, PERMUTE, TRANSPOSE);
/// the scheduler skips them (llama.cpp ggml-backend.cpp).
inline bool IsViewOp(GgmlOp op) { return GetOpTraits(op).is_view; }

/// The source whose memory a node of `op` with `n_srcs` sources is: 0 for view ops, dst_src for an
/// op that writes into a source it has (CPY with a destination), else -1 (the node owns its bytes).
int AliasedSource(GgmlOp op, size_t n_srcs);

}  // namespace stowage
