// Op classes, vec_dot types and op batch sizes (see manifest.h for the sources).
#include "stowage/planner/manifest.h"

namespace stowage::planner {
bool IsUnaryOp(GgmlOp op) { return op >= GgmlOp::ABS && op <= GgmlOp::SOFTPLUS; }
bool IsGluOp(GgmlOp op) { return op >= GgmlOp::REGLU && op <= GgmlOp::SWIGLU; }

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
      return q.dst.ne[2];
    default:
      return q.dst.NumRows();
  }
}

}  // namespace stowage::planner
