// The level dispatch of the CPU backend's row kernels (kernels.h RowKernels): one table, a row per
// instruction-set level, what each level of llama.cpp's CPU backend builds runs.
#include <algorithm>
#include <array>

#include "kernels.h"

namespace stowage::cpu {
namespace {

constexpr RowKernels kScalarRow = {scalar::SiluRowF32,  scalar::SwiGluRowF32,     scalar::RopeRotate,
                                   scalar::SumSquares8, scalar::CvtF32F16Strided, scalar::MadF16,
                                   scalar::ScaleF16,    scalar::FlashF16Rows};

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
constexpr RowKernels kAvx2Row = {avx2::SiluRowF32,  avx2::SwiGluRowF32,     avx2::RopeRotate,
                                 avx2::SumSquares8, avx2::CvtF32F16Strided, avx2::MadF16,
                                 avx2::ScaleF16,    avx2::FlashF16Rows};
// RopeRotate and CvtF32F16Strided have no AVX-512 code: the AVX2 kernels.
constexpr RowKernels kAvx512Row = {avx512::SiluRowF32,  avx512::SwiGluRowF32,   avx2::RopeRotate,
                                   avx512::SumSquares8, avx2::CvtF32F16Strided, avx512::MadF16,
                                   avx512::ScaleF16,    avx512::FlashF16Rows};
// Indexed by IsaLevel; VNNI (integer dots) adds no row kernel.
constexpr std::array<RowKernels, 4> kRowKernels = {kScalarRow, kAvx2Row, kAvx512Row, kAvx512Row};
#else
constexpr std::array<RowKernels, 4> kRowKernels = {kScalarRow, kScalarRow, kScalarRow, kScalarRow};
#endif
static_assert(kRowKernels.size() == size_t(IsaLevel::kAvx512Vnni) + 1, "a row per IsaLevel");

}  // namespace

const RowKernels& GetRowKernels(IsaLevel isa) {
  return kRowKernels[size_t(std::min(int(isa), int(DetectIsa())))];
}

}  // namespace stowage::cpu
