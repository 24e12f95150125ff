// KeepInRegister: an optimization barrier for SIMD accumulator chains. Internal to the CPU backend.
#pragma once

namespace stowage::cpu {

/// An empty asm statement that claims to read and write `v` in a vector register (constraint "v":
/// any xmm/ymm/zmm register), so the compiler keeps an accumulator chain in the order written.
/// Without it GCC reassociates a chain of integer vector additions (vpaddw/vpaddd are associative)
/// into a tree over all the products, and with AVX2's 16 ymm registers full it keeps the products
/// on the stack: the AVX2 q8 GEMM ran ~80 stack accesses per block and half its speed. Costs no
/// instruction.
template <typename V>
inline void KeepInRegister(V& v) {
  __asm__("" : "+v"(v));
}

}  // namespace stowage::cpu
