// ggml op names, vec_dot types and op batch sizes (see manifest.h for the sources).
#include <cctype>

#include "stowage/planner/manifest.h"

namespace stowage::planner {
namespace {

// clang-format off
constexpr const char* kOpNames[] = {
    "NONE", "DUP", "ADD", "ADD_ID", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN",
    "COS", "SUM", "SUM_ROWS", "CUMSUM", "MEAN", "ARGMAX", "COUNT_EQUAL", "REPEAT", "REPEAT_BACK",
    "CONCAT", "SILU_BACK", "NORM", "RMS_NORM", "RMS_NORM_BACK", "GROUP_NORM", "L2_NORM", "MUL_MAT",
    "MUL_MAT_ID", "OUT_PROD", "SCALE", "SET", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE",
    "TRANSPOSE", "GET_ROWS", "GET_ROWS_BACK", "SET_ROWS", "DIAG", "DIAG_MASK_INF", "DIAG_MASK_ZERO",
    "SOFT_MAX", "SOFT_MAX_BACK", "ROPE", "ROPE_BACK", "CLAMP", "CONV_TRANSPOSE_1D", "IM2COL",
    "IM2COL_BACK", "IM2COL_3D", "CONV_2D", "CONV_3D", "CONV_2D_DW", "CONV_TRANSPOSE_2D", "POOL_1D",
    "POOL_2D", "POOL_2D_BACK", "UPSCALE", "PAD", "PAD_REFLECT_1D", "ROLL", "ARANGE",
    "TIMESTEP_EMBEDDING", "ARGSORT", "TOP_K", "LEAKY_RELU", "TRI", "FILL", "FLASH_ATTN_EXT",
    "FLASH_ATTN_BACK", "SSM_CONV", "SSM_SCAN", "WIN_PART", "WIN_UNPART", "GET_REL_POS",
    "ADD_REL_POS", "RWKV_WKV6", "GATED_LINEAR_ATTN", "RWKV_WKV7", "SOLVE_TRI", "GATED_DELTA_NET",
    "MAP_CUSTOM1", "MAP_CUSTOM2", "MAP_CUSTOM3", "CUSTOM", "CROSS_ENTROPY_LOSS",
    "CROSS_ENTROPY_LOSS_BACK", "OPT_STEP_ADAMW", "OPT_STEP_SGD",
    // unary
    "ABS", "SGN", "NEG", "STEP", "TANH", "ELU", "RELU", "SIGMOID", "GELU", "GELU_QUICK", "SILU",
    "HARDSWISH", "HARDSIGMOID", "EXP", "EXPM1", "SOFTPLUS", "GELU_ERF", "XIELU", "FLOOR", "CEIL",
    "ROUND", "TRUNC",
    // glu
    "REGLU", "GEGLU", "SWIGLU", "SWIGLU_OAI", "GEGLU_ERF", "GEGLU_QUICK",
};
// clang-format on
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kGgmlOpCount, "kOpNames must list every GgmlOp");

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

const char* GgmlOpName(GgmlOp op) {
  size_t i = static_cast<size_t>(op);
  return i < kGgmlOpCount ? kOpNames[i] : "?";
}

Result<GgmlOp> ParseGgmlOp(std::string_view name) {
  for (size_t i = 0; i < kGgmlOpCount; ++i) {
    if (EqualsIgnoreCase(name, kOpNames[i])) return static_cast<GgmlOp>(i);
  }
  return InvalidArgument("unknown ggml op '" + std::string(name) + "'");
}

bool IsUnaryOp(GgmlOp op) { return op >= GgmlOp::ABS && op <= GgmlOp::TRUNC; }
bool IsGluOp(GgmlOp op) { return op >= GgmlOp::REGLU && op <= GgmlOp::GEGLU_QUICK; }

bool IsViewOrNoneOp(GgmlOp op) {
  return op == GgmlOp::NONE || op == GgmlOp::RESHAPE || op == GgmlOp::VIEW || op == GgmlOp::PERMUTE ||
         op == GgmlOp::TRANSPOSE;
}

GgmlType VecDotType(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
    case GgmlType::IQ4_XS:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
      return GgmlType::Q8_K;
    default:
      return type;
  }
}

int TensorDesc::NumDims() const {
  for (int i = 3; i >= 1; --i) {
    if (ne[i] != 1) return i + 1;
  }
  return 1;
}

int64_t OpBatchSize(const OpQuery& q) {
  switch (q.op) {
    case GgmlOp::GET_ROWS:
      return 0;
    case GgmlOp::MUL_MAT:
      return q.dst.ne[1];
    case GgmlOp::MUL_MAT_ID:
    case GgmlOp::ROPE:
    case GgmlOp::ROPE_BACK:
      return q.dst.ne[2];
    default:
      return q.dst.NumRows();
  }
}

}  // namespace stowage::planner
