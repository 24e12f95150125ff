// GEMM family "kquants" (see gemm.h): lookup, scalar reference. Placeholder until the family lands:
// no kernels yet, so MUL_MAT uses the vec_dot path for these types.
#include "gemm.h"

namespace stowage::cpu {

const GemmKernels* GetGemmKernelsKQuants(GgmlType, int, IsaLevel) { return nullptr; }

}  // namespace stowage::cpu
