// GEMM family "q8" (see gemm.h): lookup, scalar reference. Placeholder until the family lands:
// no kernels yet, so MUL_MAT uses the vec_dot path for these types.
#include "gemm.h"

namespace stowage::cpu {

const GemmKernels* GetGemmKernelsQ8(GgmlType, int, IsaLevel) { return nullptr; }

}  // namespace stowage::cpu
