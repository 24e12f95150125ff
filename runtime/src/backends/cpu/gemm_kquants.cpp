// GEMM family "kquants" (see gemm.h): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights x Q8_K
// activations. This file has the baseline parts: activation conversion, panel packing, scalar
// reference kernels and the lookup; gemm_kquants_avx512.cpp has the AVX-512 VNNI versions of the
// conversion, the packing and the kernels on the same layouts, gemm_kquants_avx2.cpp AVX2 kernels.
//
// Activation row: one 320-byte record per 256-element super-block (kActBlockBytes), holding exactly
// what QuantizeRowQ8_K produces (the vec_dot path's activations) plus the 32-element sums:
//   [0, 256)   int8  qs[256]
//   [256, 288) int16 bsums16[16]   sum of qs[16 g .. 16 g + 15] (Q8_K's bsums)
//   [288, 304) int16 bsums32[8]    sum of qs[32 j .. 32 j + 31] (= bsums16[2j] + bsums16[2j+1])
//   [304, 308) float d
// Panels (16 rows; weights unpacked to one unsigned byte per element, because vpdpbusd multiplies
// unsigned by signed bytes; "k-step" s covers elements 4 s .. 4 s + 3 of the super-block), per
// super-block, with n = 256 / G groups of G elements (G = 16 or 32):
//   [0, 4096)  qs: byte (s * 16 + r) * 4 + e = unsigned weight of row r, element 4 s + e
//   [4096, +64 n)  int32 sc[n][16]: the rows' group scales
//   then 32 n bytes of int16 pairs [n/2][16][2]: (t_2p, t_2p+1) of row r, the zero-point factors
//   then float d[16] (and for scale-min panels float dmin[16]).
//   "scale-min" panels, value = d sc_g q - dmin m_g, t = m (the mins):
//     Q4_K / Q5_K: G = 32, q in 0..15 / 0..31 (4992 bytes);  Q2_K: G = 16, q in 0..3 (5760 bytes)
//   "scale-zero" panels, value = d sc_g (q - z), t = -z sc (signed scales):
//     Q6_K: G = 16, q in 0..63, z = 32;  Q3_K: G = 16, q = ggml's value + 4 in 0..7, z = 4 (5696
//     bytes);  IQ4_XS: G = 32, q = kvalues_iq4nl[nibble] + 128, z = 128, sc = ls - 32 (4928 bytes)
// Integer sums per super-block and row/column are exact and equal the vec_dot's:
//   scale-min:  sumi = sum_g sc_g * dot_g(q, a), summ = sum_g m_g * bsums_g;
//               dst += (float(sumi) * d_row - float(summ) * dmin_row) * d_col
//   scale-zero: sumi = sum_g sc_g * dot_g(q, a) - z * sum_g sc_g * bsums_g (= ggml's isum);
//               dst += (d_row * d_col) * float(sumi)
// (bsums = bsums16 for G = 16, bsums32 for G = 32.) Only the float expression differs from ggml's;
// the SIMD kernels use FMA where the scalar kernels round twice.
//
// The layout constants are repeated in gemm_kquants_avx512.cpp (a header would sit outside this
// family's files); gemm_kquants_test checks every SIMD pack and kernel against the scalar ones, so
// a mismatch fails there.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "gemm.h"
#include "gemm_kquants_layout.h"
#include "kernels.h"
#include "quants.h"

namespace stowage::cpu {

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
namespace avx512 {
void PackQ2_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ3_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ4_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ5_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackQ6_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void PackIQ4_XS(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
void GemmKernelScaleMin32Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                              float* dst, size_t dst_stride, int nr);
void GemmKernelScaleMin16Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                              float* dst, size_t dst_stride, int nr);
void GemmKernelScaleZero16Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                               float* dst, size_t dst_stride, int nr);
void GemmKernelScaleZero32Vnni(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                               float* dst, size_t dst_stride, int nr);
}  // namespace avx512
namespace avx2 {
void GemmKernelQ2_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmKernelQ3_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmKernelQ4_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmKernelQ5_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmKernelQ6_K(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
}  // namespace avx2
#endif

namespace {

constexpr int kRows = kGemmPanelRows;
using gemm_kq::kActBlockBytes;
using gemm_kq::kActBsums16;
using gemm_kq::kActBsums32;
using gemm_kq::kActD;
using gemm_kq::Layout;
using gemm_kq::SmLayout16;
using gemm_kq::SmLayout32;
using gemm_kq::SzLayout16;
using gemm_kq::SzLayout32;

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
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Row r's group scales sc[], zero-point factors t[] (mins, or -z * sc), d (and dmin).
template <typename L, typename S, typename T>
void PutMeta(const S* sc, const T* t, fp16_t d, fp16_t dmin, int r, uint8_t* blk) {
  for (int g = 0; g < L::kGroups; ++g)
    Put<int32_t>(blk + L::kSc + (size_t(g) * kRows + r) * 4, int32_t(sc[g]));
  for (int p = 0; p < L::kGroups / 2; ++p) {
    Put<int16_t>(blk + L::kPairs + (size_t(p) * kRows + r) * 4, int16_t(t[2 * p]));
    Put<int16_t>(blk + L::kPairs + (size_t(p) * kRows + r) * 4 + 2, int16_t(t[2 * p + 1]));
  }
  Put<float>(blk + L::kD + size_t(r) * 4, HalfToFloat(d));
  if (L::kMin) Put<float>(blk + L::kDmin + size_t(r) * 4, HalfToFloat(dmin));
}

template <typename L>
void PutScaleZeroMeta(const int8_t* sc, int zero, fp16_t d, int r, uint8_t* blk) {
  int t[L::kGroups];
  for (int g = 0; g < L::kGroups; ++g) t[g] = -zero * sc[g];
  PutMeta<L>(sc, t, d, 0, r, blk);
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
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) GetScaleMinK4(j, x.scales, &sc[j], &mn[j]);
  PutMeta<SmLayout32>(sc, mn, x.d, x.dmin, r, blk);
}

// Q2_K: element 128 h + 32 j + l = bits 2j..2j+1 of qs[32 h + l]; group g: scale = low nibble of
// scales[g], min = high nibble (ggml dequantize_row_q2_K).
void PackQ2_KRow(const BlockQ2_K& x, int r, uint8_t* blk) {
  uint8_t v[kQK_K];
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) v[128 * h + 32 * j + l] = (x.qs[32 * h + l] >> (2 * j)) & 3;
  PutRowQs(blk, r, v);
  uint8_t sc[16], mn[16];
  for (int g = 0; g < 16; ++g) {
    sc[g] = x.scales[g] & 0xF;
    mn[g] = x.scales[g] >> 4;
  }
  PutMeta<SmLayout16>(sc, mn, x.d, x.dmin, r, blk);
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
  PutScaleZeroMeta<SzLayout16>(x.scales, 32, x.d, r, blk);
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
  PutScaleZeroMeta<SzLayout16>(sc, 4, x.d, r, blk);
}

// IQ4_XS: q = kvalues_iq4nl[nibble] + 128 (element 32 ib + j: low nibble of qs[16 ib + j], 32 ib +
// 16 + j: high nibble), zero point 128, signed scales ls - 32 per 32.
void PackIQ4_XSRow(const BlockIQ4_XS& x, int r, uint8_t* blk) {
  uint8_t v[kQK_K];
  for (int ib = 0; ib < 8; ++ib)
    for (int j = 0; j < 16; ++j) {
      v[32 * ib + j] = uint8_t(kValuesIQ4NL[x.qs[16 * ib + j] & 0xF] + 128);
      v[32 * ib + 16 + j] = uint8_t(kValuesIQ4NL[x.qs[16 * ib + j] >> 4] + 128);
    }
  PutRowQs(blk, r, v);
  int8_t sc[8];
  for (int ib = 0; ib < 8; ++ib) sc[ib] = int8_t(IQ4XSScale(x, ib));
  PutScaleZeroMeta<SzLayout32>(sc, 128, x.d, r, blk);
}

template <size_t kBlockBytes>
size_t PanelBytes(int64_t K) {
  return size_t(K / kQK_K) * kBlockBytes;
}

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

// Q4_K from the Q4_Kx8 layout (RepackQ4_K): w is the start of an 8-row group, row r's super-block b
// is row r % 8 of column b of group r / 8 (groups are 8 * row_stride bytes apart).
void PackQ4_Kx8(int64_t K, const void* w, size_t row_stride, int nr, void* panel) {
  const int64_t nb = K / kQK_K;
  uint8_t* p = static_cast<uint8_t*>(panel);
  std::memset(p, 0, size_t(nb) * SmLayout32::kBytes);
  for (int r = 0; r < nr; ++r) {
    const uint8_t* group = static_cast<const uint8_t*>(w) + size_t(r / 8) * 8 * row_stride;
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ4_K x;
      Q4_Kx8ToBlock(group + size_t(b) * q4_kx8::kColBytes, r % 8, &x);
      PackScaleMinRow(x, r, p + size_t(b) * SmLayout32::kBytes);
    }
  }
}

// gemm.h pack for Q4_K at the scalar and AVX2 levels: plain rows or the Q4_Kx8 layout.
void PackQ4_K(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout == kLayoutQ4_Kx8) return PackQ4_Kx8(K, w, row_stride, nr, panel);
  Pack<BlockQ4_K, SmLayout32::kBytes, PackScaleMinRow<BlockQ4_K>>(K, w, row_stride, nr, layout, panel);
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

// sum_g sc_g * dot_g and sum_g t_g * bsums_g of row r in one super-block.
template <typename L>
void BlockSums(const uint8_t* blk, const uint8_t* ab, int r, int* sumi, int* sumt) {
  constexpr int kSteps = kQK_K / L::kGroups / 4;
  const int8_t* a = reinterpret_cast<const int8_t*>(ab);
  int s = 0, t = 0;
  for (int g = 0; g < L::kGroups; ++g)
    s += Get<int32_t>(blk + L::kSc + (size_t(g) * kRows + r) * 4) * DotSteps(blk, a, r, kSteps * g, kSteps);
  for (int g = 0; g < L::kGroups; ++g)
    t += Get<int16_t>(blk + L::kPairs + (size_t(g / 2) * kRows + r) * 4 + 2 * (g % 2)) *
         Get<int16_t>(ab + L::kActBsums + 2 * g);
  *sumi = s;
  *sumt = t;
}

template <typename L>
void KernelScaleMinScalar(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                          float* dst, size_t dst_stride, int nr) {
  const int64_t nb = K / kQK_K;
  for (int c = 0; c < nc; ++c) {
    const uint8_t* ac = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = static_cast<const uint8_t*>(panel) + size_t(b) * L::kBytes;
        const uint8_t* ab = ac + size_t(b) * kActBlockBytes;
        int sumi, summ;
        BlockSums<L>(blk, ab, r, &sumi, &summ);
        const float blk_f =
            float(sumi) * Get<float>(blk + L::kD + 4 * r) - float(summ) * Get<float>(blk + L::kDmin + 4 * r);
        acc += blk_f * Get<float>(ab + kActD);
      }
      dst[size_t(c) * dst_stride + r] = acc;
    }
  }
}

template <typename L>
void KernelScaleZeroScalar(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                           float* dst, size_t dst_stride, int nr) {
  const int64_t nb = K / kQK_K;
  for (int c = 0; c < nc; ++c) {
    const uint8_t* ac = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = static_cast<const uint8_t*>(panel) + size_t(b) * L::kBytes;
        const uint8_t* ab = ac + size_t(b) * kActBlockBytes;
        int sumi, sumz;
        BlockSums<L>(blk, ab, r, &sumi, &sumz);
        acc += Get<float>(blk + L::kD + 4 * r) * Get<float>(ab + kActD) * float(sumi + sumz);
      }
      dst[size_t(c) * dst_stride + r] = acc;
    }
  }
}

using KernelFn = decltype(GemmKernels::kernel);
using PackFn = decltype(GemmKernels::pack);

template <typename Block, typename L, void (*kPackRow)(const Block&, int, uint8_t*)>
constexpr GemmKernels Make(KernelFn k, FromFloatFn ff = FromFloatQ8_K,
                           PackFn pk = Pack<Block, L::kBytes, kPackRow>) {
  return {ff, ActRowBytes, PanelBytes<L::kBytes>, pk, k};
}

constexpr GemmKernels kScalarQ2_K =
    Make<BlockQ2_K, SmLayout16, PackQ2_KRow>(KernelScaleMinScalar<SmLayout16>);
constexpr GemmKernels kScalarQ3_K =
    Make<BlockQ3_K, SzLayout16, PackQ3_KRow>(KernelScaleZeroScalar<SzLayout16>);
constexpr GemmKernels kScalarQ4_K = Make<BlockQ4_K, SmLayout32, PackScaleMinRow<BlockQ4_K>>(
    KernelScaleMinScalar<SmLayout32>, FromFloatQ8_K, PackQ4_K);
constexpr GemmKernels kScalarQ5_K =
    Make<BlockQ5_K, SmLayout32, PackScaleMinRow<BlockQ5_K>>(KernelScaleMinScalar<SmLayout32>);
constexpr GemmKernels kScalarQ6_K =
    Make<BlockQ6_K, SzLayout16, PackQ6_KRow>(KernelScaleZeroScalar<SzLayout16>);
constexpr GemmKernels kScalarIQ4_XS =
    Make<BlockIQ4_XS, SzLayout32, PackIQ4_XSRow>(KernelScaleZeroScalar<SzLayout32>);
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
constexpr GemmKernels kAvx2Q2_K =
    Make<BlockQ2_K, SmLayout16, PackQ2_KRow>(avx2::GemmKernelQ2_K, avx2::FromFloatQ8_KAct);
constexpr GemmKernels kAvx2Q3_K =
    Make<BlockQ3_K, SzLayout16, PackQ3_KRow>(avx2::GemmKernelQ3_K, avx2::FromFloatQ8_KAct);
constexpr GemmKernels kAvx2Q4_K = Make<BlockQ4_K, SmLayout32, PackScaleMinRow<BlockQ4_K>>(
    avx2::GemmKernelQ4_K, avx2::FromFloatQ8_KAct, PackQ4_K);
constexpr GemmKernels kAvx2Q5_K =
    Make<BlockQ5_K, SmLayout32, PackScaleMinRow<BlockQ5_K>>(avx2::GemmKernelQ5_K, avx2::FromFloatQ8_KAct);
constexpr GemmKernels kAvx2Q6_K =
    Make<BlockQ6_K, SzLayout16, PackQ6_KRow>(avx2::GemmKernelQ6_K, avx2::FromFloatQ8_KAct);
constexpr GemmKernels kVnniQ2_K = Make<BlockQ2_K, SmLayout16, PackQ2_KRow>(
    avx512::GemmKernelScaleMin16Vnni, avx512::FromFloatQ8_KAct, avx512::PackQ2_K);
constexpr GemmKernels kVnniQ3_K = Make<BlockQ3_K, SzLayout16, PackQ3_KRow>(
    avx512::GemmKernelScaleZero16Vnni, avx512::FromFloatQ8_KAct, avx512::PackQ3_K);
constexpr GemmKernels kVnniQ4_K = Make<BlockQ4_K, SmLayout32, PackScaleMinRow<BlockQ4_K>>(
    avx512::GemmKernelScaleMin32Vnni, avx512::FromFloatQ8_KAct, avx512::PackQ4_K);
constexpr GemmKernels kVnniQ5_K = Make<BlockQ5_K, SmLayout32, PackScaleMinRow<BlockQ5_K>>(
    avx512::GemmKernelScaleMin32Vnni, avx512::FromFloatQ8_KAct, avx512::PackQ5_K);
constexpr GemmKernels kVnniQ6_K = Make<BlockQ6_K, SzLayout16, PackQ6_KRow>(
    avx512::GemmKernelScaleZero16Vnni, avx512::FromFloatQ8_KAct, avx512::PackQ6_K);
constexpr GemmKernels kVnniIQ4_XS = Make<BlockIQ4_XS, SzLayout32, PackIQ4_XSRow>(
    avx512::GemmKernelScaleZero32Vnni, avx512::FromFloatQ8_KAct, avx512::PackIQ4_XS);
#endif

}  // namespace

// kScalar: the scalar reference kernels. kAvx512 with VNNI: the vpdpbusd kernels. kAvx2 (and
// AVX-512 without VNNI): the vpmaddubsw kernels, except IQ4_XS (nullptr: MUL_MAT uses its vec_dot).
// Layouts: plain for every type, and kLayoutQ4_Kx8 for Q4_K (the packs read both).
const GemmKernels* GetGemmKernelsKQuants(GgmlType type, int layout, IsaLevel isa) {
  if (layout != kLayoutPlain && !(layout == kLayoutQ4_Kx8 && type == GgmlType::Q4_K)) return nullptr;
  struct Levels {
    const GemmKernels* scalar;
    const GemmKernels* avx2;
    const GemmKernels* vnni;
  };
  Levels k{};
  switch (type) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    case GgmlType::Q2_K:
      k = {&kScalarQ2_K, &kAvx2Q2_K, &kVnniQ2_K};
      break;
    case GgmlType::Q3_K:
      k = {&kScalarQ3_K, &kAvx2Q3_K, &kVnniQ3_K};
      break;
    case GgmlType::Q4_K:
      k = {&kScalarQ4_K, &kAvx2Q4_K, &kVnniQ4_K};
      break;
    case GgmlType::Q5_K:
      k = {&kScalarQ5_K, &kAvx2Q5_K, &kVnniQ5_K};
      break;
    case GgmlType::Q6_K:
      k = {&kScalarQ6_K, &kAvx2Q6_K, &kVnniQ6_K};
      break;
    // IQ4_XS has no AVX2 kernel: vpmaddubsw would saturate (see gemm_kquants_avx2.cpp).
    case GgmlType::IQ4_XS:
      k = {&kScalarIQ4_XS, nullptr, &kVnniIQ4_XS};
      break;
#else
    case GgmlType::Q2_K:
      k = {&kScalarQ2_K, nullptr, nullptr};
      break;
    case GgmlType::Q3_K:
      k = {&kScalarQ3_K, nullptr, nullptr};
      break;
    case GgmlType::Q4_K:
      k = {&kScalarQ4_K, nullptr, nullptr};
      break;
    case GgmlType::Q5_K:
      k = {&kScalarQ5_K, nullptr, nullptr};
      break;
    case GgmlType::Q6_K:
      k = {&kScalarQ6_K, nullptr, nullptr};
      break;
    case GgmlType::IQ4_XS:
      k = {&kScalarIQ4_XS, nullptr, nullptr};
      break;
#endif
    default:
      return nullptr;
  }
  isa = IsaLevel(std::min(int(isa), int(DetectIsa())));  // never a level this CPU lacks
  if (isa == IsaLevel::kScalar) return k.scalar;
  if (isa >= IsaLevel::kAvx512Vnni) return k.vnni;
  return isa >= IsaLevel::kAvx2 ? k.avx2 : nullptr;  // AVX2, and AVX-512 without VNNI
}

}  // namespace stowage::cpu
