// GEMM family "kquants" (see gemm.h): Q3_K, Q4_K, Q5_K, Q6_K weights x Q8_K activations. This file has the
// baseline parts: activation conversion, panel packing, scalar reference kernels and the lookup;
// gemm_kquants_avx512.cpp has the AVX-512 VNNI kernels on the same layouts.
//
// Activation row: one 320-byte record per 256-element super-block (kActBlockBytes), holding exactly
// what QuantizeRowQ8_K produces (the vec_dot path's activations) plus the 32-element sums:
//   [0, 256)   int8  qs[256]
//   [256, 288) int16 bsums16[16]   sum of qs[16 g .. 16 g + 15] (Q8_K's bsums)
//   [288, 304) int16 bsums32[8]    sum of qs[32 j .. 32 j + 31] (= bsums16[2j] + bsums16[2j+1])
//   [304, 308) float d
// Panels (16 rows; weights unpacked to one unsigned byte per element, because vpdpbusd multiplies
// unsigned by signed bytes; "k-step" s covers elements 4 s .. 4 s + 3 of the super-block):
//   qs at [0, 4096): byte (s * 16 + r) * 4 + e = unsigned weight of row r, element 4 s + e.
//   Q4_K / Q5_K ("scale-min" panel, 4992 bytes per super-block), value = d sc_j q - dmin m_j:
//     [4096, 4608) int32 sc[8][16]; [4608, 4864) int16 mins[4][16][2] = (m_2p, m_2p+1) of row r;
//     [4864, 4928) float d[16]; [4928, 4992) float dmin[16]     (q in 0..15 for Q4_K, 0..31 Q5_K)
//   Q6_K / Q3_K ("scale16" panel, 5696 bytes per super-block), value = d sc_g (q - z), 16 groups of
//   16, signed scales; Q6_K: q in 0..63, z = 32; Q3_K: q = ggml's value + 4 in 0..7, z = 4:
//     [4096, 5120) int32 sc[16][16]; [5120, 5632) int16 nsc[8][16][2] = (-z sc_2p, -z sc_2p+1);
//     [5632, 5696) float d[16]
// Integer sums per super-block and row/column are exact and equal the vec_dot's:
//   scale-min: sumi = sum_j sc_j * dot_j(q, a), summ = sum_j m_j * bsums32_j;
//              dst += (float(sumi) * d_row - float(summ) * dmin_row) * d_col
//   scale16:   sumi = sum_g sc_g * dot_g(q, a) - z * sum_g sc_g * bsums16_g (= ggml's isum);
//              dst += (d_row * d_col) * float(sumi)
// Only the float expression differs from ggml's (d_row d_col sumi - dmin_row d_col summ); the
// SIMD kernels use FMA where the scalar kernels round twice.
//
// The layout constants are repeated in gemm_kquants_avx512.cpp (a header would sit outside this
// family's files); gemm_kquants_test checks every SIMD kernel against the scalar one, so a
// mismatch fails there.
#include <cstring>
#include <type_traits>

#include "gemm.h"
#include "quants.h"

namespace stowage::cpu {

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
namespace avx512 {
void FromFloatQ8_KAct(const float* x, void* act, int64_t K);
void PackQ3_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ4_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ5_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ6_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void GemmKernelScaleMinVnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                            size_t dst_stride, int nr);
void GemmKernelQ6_KVnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                        size_t dst_stride, int nr);
}  // namespace avx512
#endif

namespace {

constexpr int kRows = kGemmPanelRows;
constexpr size_t kActBlockBytes = 320;
constexpr size_t kActBsums16 = 256, kActBsums32 = 288, kActD = 304;
constexpr size_t kSmSc = 4096, kSmMins = 4608, kSmD = 4864, kSmDmin = 4928, kSmBlockBytes = 4992;
constexpr size_t kQ6Sc = 4096, kQ6Nsc = 5120, kQ6D = 5632, kQ6BlockBytes = 5696;
static_assert(kActBlockBytes % 64 == 0 && kSmBlockBytes % 64 == 0 && kQ6BlockBytes % 64 == 0, "alignment");

// ---- activations --------------------------------------------------------------------------------

size_t ActRowBytes(int64_t K) { return size_t(K / kQK_K) * kActBlockBytes; }

void FromFloatQ8_K(const float* x, void* act, int64_t K) {
  uint8_t* out = static_cast<uint8_t*>(act);
  for (int64_t b = 0; b < K / kQK_K; ++b, out += kActBlockBytes) {
    BlockQ8_K q;
    QuantizeRowQ8_K(x + b * kQK_K, &q, kQK_K);
    std::memcpy(out, q.qs, kQK_K);
    std::memcpy(out + kActBsums16, q.bsums, sizeof q.bsums);
    int16_t s32[8];
    for (int j = 0; j < 8; ++j) s32[j] = int16_t(q.bsums[2 * j] + q.bsums[2 * j + 1]);
    std::memcpy(out + kActBsums32, s32, sizeof s32);
    std::memcpy(out + kActD, &q.d, sizeof q.d);
    std::memset(out + kActD + 4, 0, kActBlockBytes - kActD - 4);
  }
}

// ---- packing ------------------------------------------------------------------------------------

// Stores the unsigned element values v[0..255] of row r into a panel super-block's qs.
void PutRowQs(uint8_t* blk, int r, const uint8_t* v) {
  for (int s = 0; s < kQK_K / 4; ++s) std::memcpy(blk + (size_t(s) * kRows + r) * 4, v + 4 * s, 4);
}

template <typename T>
void Put(uint8_t* p, T v) { std::memcpy(p, &v, sizeof v); }

// Row r's scales and mins, d and dmin of one Q4_K/Q5_K super-block into a scale-min panel block.
void PackScaleMinMeta(const uint8_t* scales, fp16_t d, fp16_t dmin, int r, uint8_t* blk) {
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) GetScaleMinK4(j, scales, &sc[j], &mn[j]);
  for (int j = 0; j < 8; ++j) Put<int32_t>(blk + kSmSc + (size_t(j) * kRows + r) * 4, sc[j]);
  for (int p = 0; p < 4; ++p) {
    Put<int16_t>(blk + kSmMins + (size_t(p) * kRows + r) * 4, mn[2 * p]);
    Put<int16_t>(blk + kSmMins + (size_t(p) * kRows + r) * 4 + 2, mn[2 * p + 1]);
  }
  Put<float>(blk + kSmD + size_t(r) * 4, HalfToFloat(d));
  Put<float>(blk + kSmDmin + size_t(r) * 4, HalfToFloat(dmin));
}

// Row r's 16 signed scales, zero-point terms (-zero * scale) and d into a scale16 panel block.
void PackScale16Meta(const int8_t* scales, int zero, fp16_t d, int r, uint8_t* blk) {
  for (int g = 0; g < 16; ++g) Put<int32_t>(blk + kQ6Sc + (size_t(g) * kRows + r) * 4, scales[g]);
  for (int p = 0; p < 8; ++p) {
    Put<int16_t>(blk + kQ6Nsc + (size_t(p) * kRows + r) * 4, int16_t(-zero * scales[2 * p]));
    Put<int16_t>(blk + kQ6Nsc + (size_t(p) * kRows + r) * 4 + 2, int16_t(-zero * scales[2 * p + 1]));
  }
  Put<float>(blk + kQ6D + size_t(r) * 4, HalfToFloat(d));
}

// Q4_K / Q5_K row r, super-block x -> the scale-min panel super-block.
template <typename Block>
void PackScaleMinRow(const Block& x, int r, uint8_t* blk) {
  uint8_t v[kQK_K];
  if constexpr (std::is_same_v<Block, BlockQ4_K>) {
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < 32; ++l) {
        v[64 * i + l] = x.qs[32 * i + l] & 0xF;
        v[64 * i + 32 + l] = x.qs[32 * i + l] >> 4;
      }
  } else {
    uint8_t u1 = 1, u2 = 2;
    for (int i = 0; i < 4; ++i, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2))
      for (int l = 0; l < 32; ++l) {
        v[64 * i + l] = uint8_t((x.qs[32 * i + l] & 0xF) + (x.qh[l] & u1 ? 16 : 0));
        v[64 * i + 32 + l] = uint8_t((x.qs[32 * i + l] >> 4) + (x.qh[l] & u2 ? 16 : 0));
      }
  }
  PutRowQs(blk, r, v);
  PackScaleMinMeta(x.scales, x.d, x.dmin, r, blk);
}

void PackQ6_KRow(const BlockQ6_K& x, int r, uint8_t* blk) {
  uint8_t v[kQK_K];
  const uint8_t* ql = x.ql;
  const uint8_t* qh = x.qh;
  for (int nn = 0; nn < kQK_K; nn += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      v[nn + l + 0] = uint8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      v[nn + l + 32] = uint8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      v[nn + l + 64] = uint8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4));
      v[nn + l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  PutRowQs(blk, r, v);
  PackScale16Meta(x.scales, 32, x.d, r, blk);
}

// Q3_K: q = 2 low bits + 4 * hmask bit (= ggml's value + 4, in 0..7), zero point 4.
void PackQ3_KRow(const BlockQ3_K& x, int r, uint8_t* blk) {
  uint8_t v[kQK_K];
  const uint8_t* q = x.qs;
  uint8_t* o = v;
  int m = 0;
  for (int nn = 0; nn < kQK_K; nn += 128, q += 32)
    for (int shift = 0; shift < 8; shift += 2, ++m)
      for (int l = 0; l < 32; ++l) *o++ = uint8_t(((q[l] >> shift) & 3) | (((x.hmask[l] >> m) & 1) << 2));
  PutRowQs(blk, r, v);
  int8_t sc[16];
  UnpackQ3KScales(x.scales, sc);
  PackScale16Meta(sc, 4, x.d, r, blk);
}

template <typename Block, size_t kBlockBytes>
size_t PanelBytes(int64_t K) { return size_t(K / kQK_K) * kBlockBytes; }

// Rows nr..15 stay all-zero (weights, scales and d), so they compute 0.
template <typename Block, size_t kBlockBytes, void (*kPackRow)(const Block&, int, uint8_t*)>
void Pack(int64_t K, const void* w, size_t row_stride, int nr, int /*layout*/, void* panel) {
  const int64_t nb = K / kQK_K;
  uint8_t* p = static_cast<uint8_t*>(panel);
  std::memset(p, 0, size_t(nb) * kBlockBytes);
  for (int r = 0; r < nr; ++r) {
    const Block* x = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * row_stride);
    for (int64_t b = 0; b < nb; ++b) kPackRow(x[b], r, p + size_t(b) * kBlockBytes);
  }
}

// ---- scalar reference kernels -------------------------------------------------------------------

template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// dot over k-steps s0 .. s0 + n - 1 of row r (unsigned weights) with the activation bytes.
int DotSteps(const uint8_t* blk, const int8_t* a, int r, int s0, int n) {
  int dot = 0;
  for (int s = s0; s < s0 + n; ++s)
    for (int e = 0; e < 4; ++e) dot += int(blk[(size_t(s) * kRows + r) * 4 + e]) * a[4 * s + e];
  return dot;
}

void KernelScaleMinScalar(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                          size_t dst_stride, int nr) {
  const int64_t nb = K / kQK_K;
  for (int c = 0; c < nc; ++c) {
    const uint8_t* ac = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = static_cast<const uint8_t*>(panel) + size_t(b) * kSmBlockBytes;
        const uint8_t* ab = ac + size_t(b) * kActBlockBytes;
        const int8_t* a = reinterpret_cast<const int8_t*>(ab);
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j)
          sumi += Get<int32_t>(blk + kSmSc + (size_t(j) * kRows + r) * 4) * DotSteps(blk, a, r, 8 * j, 8);
        for (int j = 0; j < 8; ++j)
          summ += Get<int16_t>(blk + kSmMins + (size_t(j / 2) * kRows + r) * 4 + 2 * (j % 2)) *
                  Get<int16_t>(ab + kActBsums32 + 2 * j);
        const float blk_f = float(sumi) * Get<float>(blk + kSmD + 4 * r) - float(summ) * Get<float>(blk + kSmDmin + 4 * r);
        acc += blk_f * Get<float>(ab + kActD);
      }
      dst[size_t(c) * dst_stride + r] = acc;
    }
  }
}

void KernelQ6_KScalar(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                      size_t dst_stride, int nr) {
  const int64_t nb = K / kQK_K;
  for (int c = 0; c < nc; ++c) {
    const uint8_t* ac = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = static_cast<const uint8_t*>(panel) + size_t(b) * kQ6BlockBytes;
        const uint8_t* ab = ac + size_t(b) * kActBlockBytes;
        const int8_t* a = reinterpret_cast<const int8_t*>(ab);
        int sumi = 0;
        for (int g = 0; g < 16; ++g)
          sumi += Get<int16_t>(blk + kQ6Nsc + (size_t(g / 2) * kRows + r) * 4 + 2 * (g % 2)) *
                  Get<int16_t>(ab + kActBsums16 + 2 * g);
        for (int g = 0; g < 16; ++g)
          sumi += Get<int32_t>(blk + kQ6Sc + (size_t(g) * kRows + r) * 4) * DotSteps(blk, a, r, 4 * g, 4);
        acc += Get<float>(blk + kQ6D + 4 * r) * Get<float>(ab + kActD) * float(sumi);
      }
      dst[size_t(c) * dst_stride + r] = acc;
    }
  }
}

using KernelFn = decltype(GemmKernels::kernel);

using PackFn = decltype(GemmKernels::pack);

constexpr GemmKernels MakeQ4_K(KernelFn k, FromFloatFn ff = FromFloatQ8_K,
                               PackFn pk = Pack<BlockQ4_K, kSmBlockBytes, PackScaleMinRow<BlockQ4_K>>) {
  return {ff, ActRowBytes, PanelBytes<BlockQ4_K, kSmBlockBytes>, pk, k};
}
constexpr GemmKernels MakeQ5_K(KernelFn k, FromFloatFn ff = FromFloatQ8_K,
                               PackFn pk = Pack<BlockQ5_K, kSmBlockBytes, PackScaleMinRow<BlockQ5_K>>) {
  return {ff, ActRowBytes, PanelBytes<BlockQ5_K, kSmBlockBytes>, pk, k};
}
constexpr GemmKernels MakeQ6_K(KernelFn k, FromFloatFn ff = FromFloatQ8_K,
                               PackFn pk = Pack<BlockQ6_K, kQ6BlockBytes, PackQ6_KRow>) {
  return {ff, ActRowBytes, PanelBytes<BlockQ6_K, kQ6BlockBytes>, pk, k};
}

constexpr GemmKernels MakeQ3_K(KernelFn k, FromFloatFn ff = FromFloatQ8_K,
                               PackFn pk = Pack<BlockQ3_K, kQ6BlockBytes, PackQ3_KRow>) {
  return {ff, ActRowBytes, PanelBytes<BlockQ3_K, kQ6BlockBytes>, pk, k};
}

constexpr GemmKernels kScalarQ3_K = MakeQ3_K(KernelQ6_KScalar);
constexpr GemmKernels kScalarQ4_K = MakeQ4_K(KernelScaleMinScalar);
constexpr GemmKernels kScalarQ5_K = MakeQ5_K(KernelScaleMinScalar);
constexpr GemmKernels kScalarQ6_K = MakeQ6_K(KernelQ6_KScalar);
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
constexpr GemmKernels kVnniQ3_K = MakeQ3_K(avx512::GemmKernelQ6_KVnni, avx512::FromFloatQ8_KAct, avx512::PackQ3_K);
constexpr GemmKernels kVnniQ4_K = MakeQ4_K(avx512::GemmKernelScaleMinVnni, avx512::FromFloatQ8_KAct, avx512::PackQ4_K);
constexpr GemmKernels kVnniQ5_K = MakeQ5_K(avx512::GemmKernelScaleMinVnni, avx512::FromFloatQ8_KAct, avx512::PackQ5_K);
constexpr GemmKernels kVnniQ6_K = MakeQ6_K(avx512::GemmKernelQ6_KVnni, avx512::FromFloatQ8_KAct, avx512::PackQ6_K);
#endif

}  // namespace

// kScalar: the scalar reference kernels. kAvx512 with VNNI: the vpdpbusd kernels. kAvx2 and
// AVX-512 without VNNI: nullptr, because the scalar GEMM is slower than those levels' vec_dots.
const GemmKernels* GetGemmKernelsKQuants(GgmlType type, int layout, IsaLevel isa) {
  if (layout != kLayoutPlain) return nullptr;
  if (isa == IsaLevel::kScalar) {
    switch (type) {
      case GgmlType::Q3_K: return &kScalarQ3_K;
      case GgmlType::Q4_K: return &kScalarQ4_K;
      case GgmlType::Q5_K: return &kScalarQ5_K;
      case GgmlType::Q6_K: return &kScalarQ6_K;
      default: return nullptr;
    }
  }
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  if (isa >= IsaLevel::kAvx512 && CpuHasAvx512Vnni()) {
    switch (type) {
      case GgmlType::Q3_K: return &kVnniQ3_K;
      case GgmlType::Q4_K: return &kVnniQ4_K;
      case GgmlType::Q5_K: return &kVnniQ5_K;
      case GgmlType::Q6_K: return &kVnniQ6_K;
      default: return nullptr;
    }
  }
#endif
  return nullptr;
}

}  // namespace stowage::cpu
