// GEMM family "q8" (see gemm.h): weights whose values are one byte per element after unpacking
// — Q8_0, Q4_0 (plain and kLayoutQ4_0x8), Q5_0, IQ4_NL, MXFP4 (plain and kLayoutMXFP4x8; vec_dot type Q8_0)
// and Q4_1, Q5_1 (Q8_1). Lookup, activation conversion, packing and the scalar reference kernels (baseline
// flags).
//
// Formats (shared with gemm_q8_avx512.cpp / gemm_q8_avx2.cpp, which include no header of ours: keep
// in sync):
//   activation row (K elements, nb = K / 32 blocks): nb records of kActBlockBytes = 72 bytes
//     { int8 qs[32]; float d; int32 corr[8]; int32 corr_total }, padded to a multiple of 64 bytes.
//     qs and d are QuantizeRowQ8_0Act's integers and fp16 scale (as float, exact);
//     corr[s] = -z * (qs[4s] + .. + qs[4s + 3]) + 0x4B400000 and corr_total = -z * sum(qs), with z
//     the weight type's zero point (below). (The bias makes an int32 chain started at corr[s] end
//     as the bits of the float 1.5 * 2^23 + the k-step's integer sum: see gemm_q8_avx512.cpp.)
//   packed panel (16 rows): nb records of kPanelBlockBytes = 576 bytes
//     { uint8 w[8][16][4]; float dw[16] }: w[s][r][j] = u(row r, element 4s + j of the block),
//     the weight value made unsigned: u = value + z, with z = 128 (Q8_0, IQ4_NL, MXFP4: int8 values),
//     8 (Q4_0: nibbles as stored), 16 (Q5_0: 5-bit values as stored). dw[r] = the row's fp16
//     block scale as float (MXFP4: its halved E8M0 scale, E8M0ToFloatHalf). Rows nr..15 have u = 0 and dw = 0
//     (finite, not stored).
//   Q4_1 / Q5_1 ("min" types, vec_dot type Q8_1): activation records of kActBlockBytesMin = 40 bytes
//     hold QuantizeRowQ8_1Act's { qs[32]; float d; float s } (s = its fp16 d * sum(qs), as float);
//     panel records are kPanelBlockBytesMin = 640 bytes: the above + float m[16] (the rows' fp16
//     mins), z = 0.
//   So sum_k u * a + corr = sum_k (u - z) * a = the vec_dot's integer sums, exactly: per k-step s
//   (4 elements: the int32 lane s of ggml's AVX2 mul_sum_i8_pairs) or per block.
//
// Float accumulation orders. A product is batch-invariant when a column gives the same bits whether
// it is multiplied alone (token generation: the vec_dot / gemv path) or among many (this GEMM):
//   - one float per output, acc = fma(float(block int sum), dw * d, acc) per block (the min types
//     then acc = fma(m, s, acc)): the default kernels of every level. It is ggml's repacked
//     q4_0_8x8 gemv/gemm order (so kLayoutQ4_0x8 is batch-invariant at every level) and the order of
//     this project's scalar vec_dots (so is every type at the scalar level). At the AVX2/AVX-512
//     levels the vec_dots of plain layouts sum in ggml's order below, so these products differ
//     from them in the last bits (ComputeContext::batch_invariant selects the kernels below).
//   - ggml's AVX2 vec_dot (ggml_vec_dot_q8_0_q8_0 and the other Q8_0/Q8_1 dots; llamafile's
//     tinyBLAS_Q0_AVX, llama.cpp's batched path, has the same order): 8 float lanes per output,
//     lane s = fma(dw * d, float(int sum of k-step s), lane s) per block, then ggml's hsum_float_8
//     ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); the min types add a scalar chain
//     summ = fma(m, s, summ) over the blocks after the reduction. The AVX-512 VNNI "lanes" kernels
//     (gemm_q8_avx512.cpp) implement it, at ~60% of the default kernels' speed (the float work is
//     8x: one FMA per k-step instead of per block). Without VNNI, batch-invariant products of plain
//     layouts take the vec_dot path (an AVX2 GEMM in this order does a vec_dot's work per block).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gemm.h"
#include "kernels.h"
#include "quants.h"

namespace stowage::cpu {

namespace gemm_q8 {
constexpr int kActBlockBytes = 72;
constexpr int kActBlockBytesMin = 40;
constexpr int32_t kCorrBias = 0x4B400000;  // the bits of 1.5f * 2^23
constexpr int kPanelBlockBytes = 576;
constexpr int kPanelBlockBytesMin = 640;
}  // namespace gemm_q8

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
namespace avx512 {
/// gemm.h kernels on the formats above; AVX-512 F/BW/VL + VNNI (gemm_q8_avx512.cpp). GemmQ8Kernel /
/// GemmQ8KernelMin: one float per output (the min types: 640-byte panel records, 40-byte activation
/// records); GemmQ8KernelLanes / GemmQ8KernelMinLanes: ggml's 8-lane vec_dot order.
void GemmQ8Kernel(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                  size_t dst_stride, int nr);
void GemmQ8KernelLanes(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr);
void GemmQ8KernelMin(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                     size_t dst_stride, int nr);
void GemmQ8KernelMinLanes(int64_t K, const void* panel, const void* act, size_t act_stride, int nc,
                          float* dst, size_t dst_stride, int nr);
/// One activation row (format above) for zero point z, equal to FromFloat<z>'s bytes for finite x.
void GemmQ8FromFloat(const float* x, void* act, int64_t K, int z);
/// gemm.h pack for Q8_0 (plain) and Q4_0 (plain or kLayoutQ4_0x8): the scalar packs' bytes.
void GemmQ8PackQ8_0(int64_t K, const void* w, size_t row_stride, int nr, void* panel);
void GemmQ8PackQ4_0(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel);
}  // namespace avx512
namespace avx2 {
/// gemm.h kernels on the formats above in the one-float-per-output order, AVX2 (gemm_q8_avx2.cpp),
/// for weights u < 16 (Q4_0), u < 32 (Q5_0) and any byte (Q8_0, IQ4_NL).
void GemmQ8KernelU4(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmQ8KernelU5(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
void GemmQ8KernelU8(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                    size_t dst_stride, int nr);
/// The same for the min types (640-byte panel records): Q4_1 (u < 16), Q5_1 (u < 32).
void GemmQ8KernelMinU4(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr);
void GemmQ8KernelMinU5(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                       size_t dst_stride, int nr);
}  // namespace avx2
#endif

namespace {
using gemm_q8::kActBlockBytes;
using gemm_q8::kActBlockBytesMin;
using gemm_q8::kCorrBias;
using gemm_q8::kPanelBlockBytes;
using gemm_q8::kPanelBlockBytesMin;

size_t ActRowBytes(int64_t K) { return (size_t(K / 32) * kActBlockBytes + 63) & ~size_t(63); }
size_t ActRowBytesMin(int64_t K) { return (size_t(K / 32) * kActBlockBytesMin + 63) & ~size_t(63); }
size_t PanelBytes(int64_t K) { return size_t(K / 32) * kPanelBlockBytes; }
size_t PanelBytesMin(int64_t K) { return size_t(K / 32) * kPanelBlockBytesMin; }

// Q8_1 activations of the min types: QuantizeRowQ8_1Act's qs, d and s.
void FromFloatQ8_1(const float* x, void* act, int64_t K) {
  constexpr int kChunk = 64;
  BlockQ8_1 tmp[kChunk];
  uint8_t* out = static_cast<uint8_t*>(act);
  const int64_t nb = K / 32;
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int n = int(std::min<int64_t>(kChunk, nb - b0));
    QuantizeRowQ8_1Act(x + b0 * 32, tmp, int64_t(n) * 32);
    for (int i = 0; i < n; ++i, out += kActBlockBytesMin) {
      const float d = HalfToFloat(tmp[i].d), sa = HalfToFloat(tmp[i].s);
      std::memcpy(out, tmp[i].qs, 32);
      std::memcpy(out + 32, &d, 4);
      std::memcpy(out + 36, &sa, 4);
    }
  }
  const size_t used = size_t(nb) * kActBlockBytesMin;
  std::memset(static_cast<uint8_t*>(act) + used, 0, ActRowBytesMin(K) - used);
}

template <int Z>
void FromFloat(const float* x, void* act, int64_t K) {
  constexpr int kChunk = 64;
  BlockQ8_0 tmp[kChunk];
  uint8_t* out = static_cast<uint8_t*>(act);
  const int64_t nb = K / 32;
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int n = int(std::min<int64_t>(kChunk, nb - b0));
    QuantizeRowQ8_0Act(x + b0 * 32, tmp, int64_t(n) * 32);
    for (int i = 0; i < n; ++i, out += kActBlockBytes) {
      int32_t corr[9] = {};
      for (int j = 0; j < 32; ++j) corr[j / 4] -= Z * tmp[i].qs[j];
      for (int s = 0; s < 8; ++s) {
        corr[8] += corr[s];
        corr[s] += kCorrBias;
      }
      const float d = HalfToFloat(tmp[i].d);
      std::memcpy(out, tmp[i].qs, 32);
      std::memcpy(out + 32, &d, 4);
      std::memcpy(out + 36, corr, sizeof corr);
    }
  }
  // Padding bytes: defined values (the row may be hashed or compared by tests).
  const size_t used = size_t(nb) * kActBlockBytes;
  std::memset(static_cast<uint8_t*>(act) + used, 0, ActRowBytes(K) - used);
}

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
template <int Z>
void FromFloatVnni(const float* x, void* act, int64_t K) {
  avx512::GemmQ8FromFloat(x, act, K, Z);
  const size_t used = size_t(K / 32) * kActBlockBytes;
  std::memset(static_cast<uint8_t*>(act) + used, 0, ActRowBytes(K) - used);
}
#endif

// Unpacks block b of row r (plain layout) into 32 unsigned values u[] and its scale (as float).
using UnpackFn = void (*)(const uint8_t* row, int64_t b, uint8_t* u, float* d);

void UnpackQ8_0(const uint8_t* row, int64_t b, uint8_t* u, float* d) {
  const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
  *d = HalfToFloat(blk->d);
  for (int j = 0; j < 32; ++j) u[j] = uint8_t(int(blk->qs[j]) + 128);
}
void UnpackQ4_0Nibbles(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = qs[j] & 0x0F;
    u[j + 16] = qs[j] >> 4;
  }
}
void UnpackQ4_0(const uint8_t* row, int64_t b, uint8_t* u, float* d) {
  const BlockQ4_0* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
  *d = HalfToFloat(blk->d);
  UnpackQ4_0Nibbles(blk->qs, u);
}
void UnpackQ5_0(const uint8_t* row, int64_t b, uint8_t* u, float* d) {
  const BlockQ5_0* blk = reinterpret_cast<const BlockQ5_0*>(row) + b;
  *d = HalfToFloat(blk->d);
  uint32_t qh;
  std::memcpy(&qh, blk->qh, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = uint8_t((blk->qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    u[j + 16] = uint8_t((blk->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}
// A 16-level codebook's nibbles (element j low, j + 16 high) as u = level + 128.
void UnpackCodebook(const int8_t* levels, const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = uint8_t(int(levels[qs[j] & 0x0F]) + 128);
    u[j + 16] = uint8_t(int(levels[qs[j] >> 4]) + 128);
  }
}
void UnpackIQ4_NL(const uint8_t* row, int64_t b, uint8_t* u, float* d) {
  const BlockIQ4_NL* blk = reinterpret_cast<const BlockIQ4_NL*>(row) + b;
  *d = HalfToFloat(blk->d);
  UnpackCodebook(kValuesIQ4NL, blk->qs, u);
}
// MXFP4: the doubled E2M1 levels (u = level + 128) and the halved E8M0 scale, exact in float.
void UnpackMXFP4(const uint8_t* row, int64_t b, uint8_t* u, float* d) {
  const BlockMXFP4* blk = reinterpret_cast<const BlockMXFP4*>(row) + b;
  *d = E8M0ToFloatHalf(blk->e);
  UnpackCodebook(kValuesMXFP4, blk->qs, u);
}

// Min types: block b of row r -> 32 unsigned values (the stored q), scale d and min m.
using UnpackMinFn = void (*)(const uint8_t* row, int64_t b, uint8_t* u, uint16_t* d, uint16_t* m);

void UnpackQ4_1(const uint8_t* row, int64_t b, uint8_t* u, uint16_t* d, uint16_t* m) {
  const BlockQ4_1* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
  *d = blk->d;
  *m = blk->m;
  UnpackQ4_0Nibbles(blk->qs, u);
}
void UnpackQ5_1(const uint8_t* row, int64_t b, uint8_t* u, uint16_t* d, uint16_t* m) {
  const BlockQ5_1* blk = reinterpret_cast<const BlockQ5_1*>(row) + b;
  *d = blk->d;
  *m = blk->m;
  uint32_t qh;
  std::memcpy(&qh, blk->qh, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = uint8_t((blk->qs[j] & 0x0F) | (((qh >> j) & 1u) << 4));
    u[j + 16] = uint8_t((blk->qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
  }
}

// Writes row r's block (u[32], scale d) into block record `rec` of a panel.
inline void PutRow(uint8_t* rec, int r, const uint8_t* u, float d) {
  for (int s = 0; s < 8; ++s) std::memcpy(rec + s * 64 + r * 4, u + 4 * s, 4);
  std::memcpy(rec + 512 + 4 * r, &d, 4);
}

// Rows nr..15 of a panel block record: u = 0 and dw = 0.
inline void ZeroMissingRows(uint8_t* rec, int nr) {
  if (nr >= kGemmPanelRows) return;
  for (int s = 0; s < 8; ++s) std::memset(rec + s * 64 + nr * 4, 0, size_t(kGemmPanelRows - nr) * 4);
  std::memset(rec + 512 + 4 * nr, 0, size_t(kGemmPanelRows - nr) * 4);
}

template <UnpackFn Unpack>
void PackPlain(int64_t K, const void* w, size_t row_stride, int nr, int /*layout*/, void* panel) {
  const int64_t nb = K / 32;
  uint8_t* p = static_cast<uint8_t*>(panel);
  const uint8_t* rows = static_cast<const uint8_t*>(w);
  uint8_t u[32];
  float d;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* rec = p + size_t(b) * kPanelBlockBytes;
    for (int r = 0; r < nr; ++r) {
      Unpack(rows + size_t(r) * row_stride, b, u, &d);
      PutRow(rec, r, u, d);
    }
    ZeroMissingRows(rec, nr);
  }
}

template <UnpackMinFn Unpack>
void PackPlainMin(int64_t K, const void* w, size_t row_stride, int nr, int /*layout*/, void* panel) {
  const int64_t nb = K / 32;
  uint8_t* p = static_cast<uint8_t*>(panel);
  const uint8_t* rows = static_cast<const uint8_t*>(w);
  uint8_t u[32];
  uint16_t d, m;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* rec = p + size_t(b) * kPanelBlockBytesMin;
    for (int r = 0; r < nr; ++r) {
      Unpack(rows + size_t(r) * row_stride, b, u, &d, &m);
      PutRow(rec, r, u, HalfToFloat(d));
      const float mf = HalfToFloat(m);
      std::memcpy(rec + 576 + 4 * r, &mf, 4);
    }
    ZeroMissingRows(rec, nr);
    if (nr < kGemmPanelRows) std::memset(rec + 576 + 4 * nr, 0, size_t(kGemmPanelRows - nr) * 4);
  }
}

// The 8-row CPU_REPACK layouts: block column b of row r's group starts at
// (r / 8) * 8 * row_stride + b * kColBytes; Unpack(column, r % 8, u, d) reads row r's 32 values
// (unsigned, as the panel holds them) and its scale.
using UnpackX8Fn = void (*)(const uint8_t* col, int r, uint8_t* u, float* d);
template <size_t kColBytes, UnpackX8Fn Unpack>
void PackRows8(int64_t K, const void* w, size_t row_stride, int nr, void* panel) {
  const int64_t nb = K / 32;
  uint8_t* p = static_cast<uint8_t*>(panel);
  const uint8_t* base = static_cast<const uint8_t*>(w);
  uint8_t u[32];
  float d;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* rec = p + size_t(b) * kPanelBlockBytes;
    for (int r = 0; r < nr; ++r) {
      Unpack(base + size_t(r / 8) * 8 * row_stride + size_t(b) * kColBytes, r % 8, u, &d);
      PutRow(rec, r, u, d);
    }
    ZeroMissingRows(rec, nr);
  }
}
inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}
// RepackQ8_0: uint16 d[8], then the rows' 32 quants each, stored as q + 128 (the panel's bytes).
void UnpackQ8_0x8(const uint8_t* col, int r, uint8_t* u, float* d) {
  *d = HalfAt(col + 2 * r);
  std::memcpy(u, col + q8_0x8::kQs + 32 * r, 32);
}
// RepackQ4_0: uint16 d[8], then qs[8][16].
void UnpackQ4_0x8(const uint8_t* col, int r, uint8_t* u, float* d) {
  *d = HalfAt(col + 2 * r);
  UnpackQ4_0Nibbles(col + 16 + 16 * r, u);
}
// RepackMXFP4: uint8 e[8], then qs[8][16].
void UnpackMXFP4x8(const uint8_t* col, int r, uint8_t* u, float* d) {
  *d = E8M0ToFloatHalf(col[r]);
  UnpackCodebook(kValuesMXFP4, col + 8 + 16 * r, u);
}

// Q8_0: plain rows or kLayoutQ8_0x8.
void PackQ8_0(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout == kLayoutQ8_0x8)
    return PackRows8<q8_0x8::kBlockBytes, UnpackQ8_0x8>(K, w, row_stride, nr, panel);
  PackPlain<UnpackQ8_0>(K, w, row_stride, nr, layout, panel);
}
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
void PackQ8_0Vnni(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout == kLayoutQ8_0x8)
    return PackRows8<q8_0x8::kBlockBytes, UnpackQ8_0x8>(K, w, row_stride, nr, panel);
  avx512::GemmQ8PackQ8_0(K, w, row_stride, nr, panel);
}
#endif

// Q4_0: plain rows or kLayoutQ4_0x8.
void PackQ4_0(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout != kLayoutQ4_0x8) return PackPlain<UnpackQ4_0>(K, w, row_stride, nr, layout, panel);
  PackRows8<8 * sizeof(BlockQ4_0), UnpackQ4_0x8>(K, w, row_stride, nr, panel);
}

// MXFP4: plain rows or kLayoutMXFP4x8.
void PackMXFP4(int64_t K, const void* w, size_t row_stride, int nr, int layout, void* panel) {
  if (layout != kLayoutMXFP4x8) return PackPlain<UnpackMXFP4>(K, w, row_stride, nr, layout, panel);
  PackRows8<8 * sizeof(BlockMXFP4), UnpackMXFP4x8>(K, w, row_stride, nr, panel);
}

// The reference: per (row, column), blocks in order, the integer sum exactly as the SIMD lanes
// form it and one fma per block with (dw * d) rounded first — the AVX-512 kernel's operations.
void KernelScalar(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                  size_t dst_stride, int nr) {
  const int64_t nb = K / 32;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  for (int c = 0; c < nc; ++c) {
    const uint8_t* a = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* rec = p + size_t(b) * kPanelBlockBytes;
        const uint8_t* ab = a + size_t(b) * kActBlockBytes;
        int32_t isum;
        std::memcpy(&isum, ab + 68, 4);
        for (int s = 0; s < 8; ++s)
          for (int j = 0; j < 4; ++j) isum += int(rec[s * 64 + r * 4 + j]) * int(int8_t(ab[4 * s + j]));
        float dw, da;
        std::memcpy(&dw, rec + 512 + 4 * r, 4);
        std::memcpy(&da, ab + 32, 4);
        acc = std::fma(float(isum), dw * da, acc);
      }
      dst[size_t(c) * dst_stride + size_t(r)] = acc;
    }
  }
}

// Min types' reference: the same integer sum (z = 0), then fma(m, s, ...) after the block's fma.
void KernelScalarMin(int64_t K, const void* panel, const void* act, size_t act_stride, int nc, float* dst,
                     size_t dst_stride, int nr) {
  const int64_t nb = K / 32;
  const uint8_t* p = static_cast<const uint8_t*>(panel);
  for (int c = 0; c < nc; ++c) {
    const uint8_t* a = static_cast<const uint8_t*>(act) + size_t(c) * act_stride;
    for (int r = 0; r < nr; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* rec = p + size_t(b) * kPanelBlockBytesMin;
        const uint8_t* ab = a + size_t(b) * kActBlockBytesMin;
        int32_t isum = 0;
        for (int s = 0; s < 8; ++s)
          for (int j = 0; j < 4; ++j) isum += int(rec[s * 64 + r * 4 + j]) * int(int8_t(ab[4 * s + j]));
        float dw, da, mw, sa;
        std::memcpy(&dw, rec + 512 + 4 * r, 4);
        std::memcpy(&mw, rec + 576 + 4 * r, 4);
        std::memcpy(&da, ab + 32, 4);
        std::memcpy(&sa, ab + 36, 4);
        acc = std::fma(float(isum), dw * da, acc);
        acc = std::fma(mw, sa, acc);
      }
      dst[size_t(c) * dst_stride + size_t(r)] = acc;
    }
  }
}

constexpr GemmKernels kScalarQ4_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ4_1>,
                                     KernelScalarMin};
constexpr GemmKernels kScalarQ5_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ5_1>,
                                     KernelScalarMin};
constexpr GemmKernels kScalarQ8_0 = {FromFloat<128>, ActRowBytes, PanelBytes, PackQ8_0, KernelScalar};
constexpr GemmKernels kScalarQ4_0 = {FromFloat<8>, ActRowBytes, PanelBytes, PackQ4_0, KernelScalar};
constexpr GemmKernels kScalarQ5_0 = {FromFloat<16>, ActRowBytes, PanelBytes, PackPlain<UnpackQ5_0>,
                                     KernelScalar};
constexpr GemmKernels kScalarIQ4_NL = {FromFloat<128>, ActRowBytes, PanelBytes, PackPlain<UnpackIQ4_NL>,
                                       KernelScalar};
constexpr GemmKernels kScalarMXFP4 = {FromFloat<128>, ActRowBytes, PanelBytes, PackMXFP4, KernelScalar};
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
// One float per output (the default; kLayoutQ4_0x8 always).
constexpr GemmKernels kVnniQ8_0 = {FromFloatVnni<128>, ActRowBytes, PanelBytes, PackQ8_0Vnni,
                                   avx512::GemmQ8Kernel};
constexpr GemmKernels kVnniQ4_0 = {FromFloatVnni<8>, ActRowBytes, PanelBytes, avx512::GemmQ8PackQ4_0,
                                   avx512::GemmQ8Kernel};
constexpr GemmKernels kVnniQ5_0 = {FromFloatVnni<16>, ActRowBytes, PanelBytes, PackPlain<UnpackQ5_0>,
                                   avx512::GemmQ8Kernel};
constexpr GemmKernels kVnniIQ4_NL = {FromFloatVnni<128>, ActRowBytes, PanelBytes, PackPlain<UnpackIQ4_NL>,
                                     avx512::GemmQ8Kernel};
constexpr GemmKernels kVnniMXFP4 = {FromFloatVnni<128>, ActRowBytes, PanelBytes, PackMXFP4,
                                    avx512::GemmQ8Kernel};
constexpr GemmKernels kVnniQ4_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ4_1>,
                                   avx512::GemmQ8KernelMin};
constexpr GemmKernels kVnniQ5_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ5_1>,
                                   avx512::GemmQ8KernelMin};
constexpr GemmKernels kAvx2Q8_0 = {FromFloat<128>, ActRowBytes, PanelBytes, PackQ8_0, avx2::GemmQ8KernelU8};
constexpr GemmKernels kAvx2Q4_0 = {FromFloat<8>, ActRowBytes, PanelBytes, PackQ4_0, avx2::GemmQ8KernelU4};
constexpr GemmKernels kAvx2Q5_0 = {FromFloat<16>, ActRowBytes, PanelBytes, PackPlain<UnpackQ5_0>,
                                   avx2::GemmQ8KernelU5};
constexpr GemmKernels kAvx2IQ4_NL = {FromFloat<128>, ActRowBytes, PanelBytes, PackPlain<UnpackIQ4_NL>,
                                     avx2::GemmQ8KernelU8};
constexpr GemmKernels kAvx2MXFP4 = {FromFloat<128>, ActRowBytes, PanelBytes, PackMXFP4, avx2::GemmQ8KernelU8};
constexpr GemmKernels kAvx2Q4_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ4_1>,
                                   avx2::GemmQ8KernelMinU4};
constexpr GemmKernels kAvx2Q5_1 = {FromFloatQ8_1, ActRowBytesMin, PanelBytesMin, PackPlainMin<UnpackQ5_1>,
                                   avx2::GemmQ8KernelMinU5};
// ggml's 8-lane vec_dot order (batch-invariant products of plain layouts): the VNNI sets above
// with the lanes kernels (same activation rows and panels).
constexpr GemmKernels WithKernel(GemmKernels k, decltype(GemmKernels::kernel) kernel) {
  k.kernel = kernel;
  return k;
}
constexpr GemmKernels kLanesQ8_0 = WithKernel(kVnniQ8_0, avx512::GemmQ8KernelLanes);
constexpr GemmKernels kLanesQ4_0 = WithKernel(kVnniQ4_0, avx512::GemmQ8KernelLanes);
constexpr GemmKernels kLanesQ5_0 = WithKernel(kVnniQ5_0, avx512::GemmQ8KernelLanes);
constexpr GemmKernels kLanesIQ4_NL = WithKernel(kVnniIQ4_NL, avx512::GemmQ8KernelLanes);
constexpr GemmKernels kLanesQ4_1 = WithKernel(kVnniQ4_1, avx512::GemmQ8KernelMinLanes);
constexpr GemmKernels kLanesQ5_1 = WithKernel(kVnniQ5_1, avx512::GemmQ8KernelMinLanes);
#endif

}  // namespace

const GemmKernels* GetGemmKernelsQ8(GgmlType type, int layout, IsaLevel isa, bool batch_invariant) {
  if (layout != kLayoutPlain && !(layout == kLayoutQ4_0x8 && type == GgmlType::Q4_0) &&
      !(layout == kLayoutQ8_0x8 && type == GgmlType::Q8_0) &&
      !(layout == kLayoutMXFP4x8 && type == GgmlType::MXFP4))
    return nullptr;
  struct Levels {
    const GemmKernels* scalar;
    const GemmKernels* avx2;   // one float per output
    const GemmKernels* vnni;   // one float per output
    const GemmKernels* lanes;  // VNNI, ggml's 8-lane order
  };
  Levels k{};
  switch (type) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    case GgmlType::Q8_0:
      k = {&kScalarQ8_0, &kAvx2Q8_0, &kVnniQ8_0, &kLanesQ8_0};
      break;
    case GgmlType::Q4_0:
      k = {&kScalarQ4_0, &kAvx2Q4_0, &kVnniQ4_0, &kLanesQ4_0};
      break;
    case GgmlType::Q5_0:
      k = {&kScalarQ5_0, &kAvx2Q5_0, &kVnniQ5_0, &kLanesQ5_0};
      break;
    case GgmlType::IQ4_NL:
      k = {&kScalarIQ4_NL, &kAvx2IQ4_NL, &kVnniIQ4_NL, &kLanesIQ4_NL};
      break;
    case GgmlType::MXFP4:
      // No lanes kernel: llama.cpp multiplies plain MXFP4 by its two-accumulator vec_dot only.
      k = {&kScalarMXFP4, &kAvx2MXFP4, &kVnniMXFP4, nullptr};
      break;
    case GgmlType::Q4_1:
      k = {&kScalarQ4_1, &kAvx2Q4_1, &kVnniQ4_1, &kLanesQ4_1};
      break;
    case GgmlType::Q5_1:
      k = {&kScalarQ5_1, &kAvx2Q5_1, &kVnniQ5_1, &kLanesQ5_1};
      break;
#else
    case GgmlType::Q8_0:
      k = {&kScalarQ8_0, nullptr, nullptr, nullptr};
      break;
    case GgmlType::Q4_0:
      k = {&kScalarQ4_0, nullptr, nullptr, nullptr};
      break;
    case GgmlType::Q5_0:
      k = {&kScalarQ5_0, nullptr, nullptr, nullptr};
      break;
    case GgmlType::IQ4_NL:
      k = {&kScalarIQ4_NL, nullptr, nullptr, nullptr};
      break;
    case GgmlType::MXFP4:
      k = {&kScalarMXFP4, nullptr, nullptr, nullptr};
      break;
    case GgmlType::Q4_1:
      k = {&kScalarQ4_1, nullptr, nullptr, nullptr};
      break;
    case GgmlType::Q5_1:
      k = {&kScalarQ5_1, nullptr, nullptr, nullptr};
      break;
#endif
    default:
      return nullptr;
  }
  isa = IsaLevel(std::min(int(isa), int(DetectIsa())));  // never a level this CPU lacks
  // Scalar level: the reference GEMM, in the scalar vec_dots' order (batch-invariant as it is).
  if (isa == IsaLevel::kScalar) return k.scalar;
  const bool vnni = isa >= IsaLevel::kAvx512Vnni;
  // kLayoutQ4_0x8, kLayoutMXFP4x8: one float per output is their gemvs' order too, at every level
  // (llama.cpp's repacked q4_0 / mxfp4 8x8 gemv and gemm).
  if (layout == kLayoutQ4_0x8 || layout == kLayoutMXFP4x8) return vnni ? k.vnni : k.avx2;
  // Plain layouts and kLayoutQ8_0x8 (whose gemv is the vec_dot's order, the lanes kernels'): the
  // batch-invariant kernels where this level has them, else the vec_dot path.
  if (batch_invariant) return vnni ? k.lanes : nullptr;
  return vnni ? k.vnni : k.avx2;
}

}  // namespace stowage::cpu
