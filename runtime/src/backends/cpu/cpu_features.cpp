// Run-time instruction-set detection (CPUID + XGETBV): the SIMD translation units are only called
// when the CPU and the OS (saved register state) support them.
#include "ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace stowage::cpu {
namespace {

struct CpuFlags {
  bool avx2_fma_f16c = false;
  bool avx512 = false;  // F + BW + VL (+ DQ)
  bool avx512_vnni = false;
};

CpuFlags Probe() {
  CpuFlags f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_os = (xlo & 0x6u) == 0x6u;    // XMM + YMM state
  const bool zmm_os = (xlo & 0xE6u) == 0xE6u;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = b & (1u << 5);
  f.avx2_fma_f16c = ymm_os && avx2 && fma && f16c;
  const bool f512 = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  f.avx512 = f.avx2_fma_f16c && zmm_os && f512 && dq && bw && vl;
  f.avx512_vnni = f.avx512 && (c & (1u << 11));
#endif
  return f;
}

const CpuFlags& Flags() {
  static const CpuFlags flags = Probe();  // immutable after the first call (thread-safe init)
  return flags;
}

}  // namespace

IsaLevel DetectIsa() {
  const CpuFlags& f = Flags();
  if (f.avx512_vnni) return IsaLevel::kAvx512Vnni;
  if (f.avx512) return IsaLevel::kAvx512;
  if (f.avx2_fma_f16c) return IsaLevel::kAvx2;
  return IsaLevel::kScalar;
}

}  // namespace stowage::cpu
