// Op classes (see manifest.h for the sources).
#include "stowage/planner/manifest.h"

namespace stowage::planner {
bool IsUnaryOp(GgmlOp op) { return op >= GgmlOp::ABS && op <= GgmlOp::SOFTPLUS; }
bool IsGluOp(GgmlOp op) { return (op >= GgmlOp::REGLU && op <= GgmlOp::SWIGLU) || op == GgmlOp::SWIGLU_OAI; }

}  // namespace stowage::planner
