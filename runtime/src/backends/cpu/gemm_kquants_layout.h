// Byte layouts shared by the kquants GEMM family's files (gemm_kquants.cpp and its AVX2 / AVX-512
// levels): the activation row block (per 256-element super-block: 256 int8 qs, int16 bsums per 16
// and per 32, float d) and the packed panel super-block for groups of G elements (see the top of
// gemm_kquants.cpp). Internal; one definition so the levels cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quants.h"

namespace stowage::cpu::gemm_kq {

inline constexpr int kQK = kQK_K;
inline constexpr size_t kActBlockBytes = 320;
inline constexpr size_t kActBsums16 = 256, kActBsums32 = 288, kActD = 304;

/// One activation block whose qs (hence bsums) are all 0, with scale d: QuantizeRowQ8_K's all-zero
/// block (d = 0) and its block whose 127 / max overflows (d = 1 / iscale, a signed zero). The bytes
/// after d must already be zero (the SIMD from_floats clear them first).
inline void StoreZeroQsBlock(uint8_t* out, float d) {
  std::memset(out, 0, kActD);
  std::memcpy(out + kActD, &d, sizeof d);
}

template <int G, bool kHasMin>
struct Layout {
  static constexpr int kGroups = kQK / G;
  static constexpr bool kMin = kHasMin;
  static constexpr size_t kSc = 4096;
  static constexpr size_t kPairs = kSc + size_t(kGroups) * 64;
  static constexpr size_t kD = kPairs + size_t(kGroups / 2) * 64;
  static constexpr size_t kDmin = kD + 64;  // scale-min only
  static constexpr size_t kBytes = kD + (kHasMin ? 128 : 64);
  static constexpr size_t kActBsums = G == 16 ? kActBsums16 : kActBsums32;
};
using SmLayout32 = Layout<32, true>;   // Q4_K, Q5_K
using SmLayout16 = Layout<16, true>;   // Q2_K
using SzLayout16 = Layout<16, false>;  // Q6_K, Q3_K
using SzLayout32 = Layout<32, false>;  // IQ4_XS
static_assert(SmLayout32::kBytes == 4992 && SmLayout16::kBytes == 5760 && SzLayout16::kBytes == 5696 &&
                  SzLayout32::kBytes == 4928,
              "panel super-block sizes");
static_assert(kActBlockBytes % 64 == 0 && SmLayout16::kBytes % 64 == 0 && SzLayout32::kBytes % 64 == 0,
              "64-byte multiples");

}  // namespace stowage::cpu::gemm_kq
