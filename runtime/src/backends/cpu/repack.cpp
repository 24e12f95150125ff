// CPU_REPACK layouts (ops.h: RepackQ4_0, RepackQ4_K, RepackQ8_0, RepackMXFP4, RepackLayoutFor,
// RepackWeight) and the scalar
// reference gemvs on them. Like ggml-cpu's repack buffer type (ggml-cpu/repack.cpp), a weight of a
// CPU_REPACK buffer is rewritten once at upload into groups of 8 interleaved rows, so that token
// generation's gemv decodes per-block metadata once for 8 rows and streams the quants of 8 rows with
// wide loads. Our layouts are our own (see ops.h); each keeps the plain tensor's exact size.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "host_memory.h"
#include "kernels.h"
#include "ops.h"
#include "quants.h"

namespace stowage::cpu {

namespace {
constexpr size_t kQ4_0x8BlockBytes = 8 * sizeof(BlockQ4_0);    // 16 bytes of scales + 8 x 16 quants
constexpr size_t kMXFP4x8BlockBytes = 8 * sizeof(BlockMXFP4);  // 8 scale bytes + 8 x 16 codes
}  // namespace

// ---- 8-row groups of a 32-element block type (Q4_0x8, Q8_0x8) -----------------------------------

namespace {

// Repacks a plain tensor of Block (32-element blocks) whose CanRepack `ok` holds: every group of 8
// rows becomes one column of `out_block_bytes` per block, written by write(out, r, block of row r).
// The column sizes equal 8 plain blocks, so the result has the plain tensor's size.
template <typename Block, typename Write>
Status RepackRows8(const char* what, const char* type, bool ok, const TensorView& src, void* dst,
                   size_t out_block_bytes, Write write) {
  if (!ok) {
    return InvalidArgument(std::string(what) + ": " + ShapeString(src) +
                           " cannot be repacked (needs a contiguous plain " + type +
                           " tensor with ne1 % 8 == 0)");
  }
  if (dst == nullptr || src.data == nullptr)
    return InvalidArgument(std::string(what) + ": null data pointer");
  const int64_t nblocks = src.ne[0] / 32;
  const int64_t ngroups = src.nrows() / 8;  // ne1 % 8 == 0, so groups never straddle matrices
  const size_t row_bytes = src.nb[1];
  for (int64_t g = 0; g < ngroups; ++g) {
    const uint8_t* rows = static_cast<const uint8_t*>(src.data) + size_t(g) * 8 * row_bytes;
    uint8_t* out = static_cast<uint8_t*>(dst) + size_t(g) * 8 * row_bytes;
    for (int64_t b = 0; b < nblocks; ++b, out += out_block_bytes)
      for (int r = 0; r < 8; ++r)
        write(out, r, *(reinterpret_cast<const Block*>(rows + size_t(r) * row_bytes) + b));
  }
  return Status::Ok();
}

}  // namespace

// ---- Q4_0x8 ---------------------------------------------------------------------------------------

bool CanRepackQ4_0(const TensorView& src) {
  return src.type == GgmlType::Q4_0 && src.layout == kLayoutPlain && src.ne[1] % 8 == 0 &&
         src.ne[0] % kQK4_0 == 0 && src.ne[0] > 0 && src.is_contiguous();
}

Status RepackQ4_0(const TensorView& src, void* dst) {
  static_assert(kQK4_0 == 32 && kQ4_0x8BlockBytes == 8 * sizeof(BlockQ4_0), "8 plain blocks per column");
  return RepackRows8<BlockQ4_0>("RepackQ4_0", "Q4_0", CanRepackQ4_0(src), src, dst, kQ4_0x8BlockBytes,
                                [](uint8_t* out, int r, const BlockQ4_0& blk) {
                                  std::memcpy(out + 2 * r, &blk.d, 2);
                                  std::memcpy(out + 16 + 16 * r, blk.qs, 16);
                                });
}

// ---- Q4_Kx8 ---------------------------------------------------------------------------------------

namespace {

using namespace q4_kx8;  // NOLINT(google-build-using-namespace): the layout's offsets

static_assert(kColBytes == 1152 && kQs + 16 * 64 == kColBytes, "Q4_Kx8 column = 8 plain super-blocks");

// Plain 12-byte K4 scales <-> the 6-bit scales and mins of the 8 sub-blocks (ggml get_scale_min_k4
// and its inverse; the 12 bytes hold exactly 16 x 6 bits, so the round trip is exact for any bytes).
void EncodeK4Scales(const uint8_t* sc, const uint8_t* mn, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    q[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

}  // namespace

void Q4_Kx8Scales(const uint8_t* col, uint8_t sc[8][8], uint8_t mn[8][8]) {
  const uint8_t* lo = col + kScLo;
  const uint8_t* hi = col + kScHi;
  for (int k = 0; k < 64; ++k) {
    const int h = (hi[k % 32] >> (2 * (k / 32))) & 3;       // S[k]: bits 0-1 (k < 32) or 2-3
    const int hm = (hi[k % 32] >> (4 + 2 * (k / 32))) & 3;  // M[k]: bits 4-5 or 6-7
    sc[k % 8][k / 8] = uint8_t((lo[k] & 15) | (h << 4));    // S[8j + r]
    mn[k / 8][k % 8] = uint8_t((lo[k] >> 4) | (hm << 4));   // M[8r + j]
  }
}

void Q4_Kx8ToBlock(const uint8_t* col, int r, BlockQ4_K* out) {
  std::memcpy(&out->d, col + kD + 2 * r, 2);
  std::memcpy(&out->dmin, col + kDmin + 2 * r, 2);
  uint8_t sc[8][8], mn[8][8];
  Q4_Kx8Scales(col, sc, mn);
  EncodeK4Scales(sc[r], mn[r], out->scales);
  for (int t = 0; t < 16; ++t) std::memcpy(out->qs + 8 * t, col + kQs + 64 * t + 8 * r, 8);
}

bool CanRepackQ4_K(const TensorView& src) {
  return src.type == GgmlType::Q4_K && src.layout == kLayoutPlain && src.ne[1] % 8 == 0 &&
         src.ne[0] % kQK_K == 0 && src.ne[0] > 0 && src.is_contiguous();
}

Status RepackQ4_K(const TensorView& src, void* dst) {
  if (!CanRepackQ4_K(src)) {
    return InvalidArgument("RepackQ4_K: " + ShapeString(src) +
                           " cannot be repacked (needs a contiguous plain Q4_K tensor with ne1 % 8 == 0)");
  }
  if (dst == nullptr || src.data == nullptr) return InvalidArgument("RepackQ4_K: null data pointer");
  const int64_t nb = src.ne[0] / kQK_K;
  const int64_t ngroups = src.nrows() / 8;  // ne1 % 8 == 0, so groups never straddle matrices
  const size_t row_bytes = src.nb[1];
  for (int64_t g = 0; g < ngroups; ++g) {
    const uint8_t* rows = static_cast<const uint8_t*>(src.data) + size_t(g) * 8 * row_bytes;
    uint8_t* col = static_cast<uint8_t*>(dst) + size_t(g) * 8 * row_bytes;
    for (int64_t b = 0; b < nb; ++b, col += kColBytes) {
      uint8_t lo[64] = {}, hi[32] = {};
      for (int r = 0; r < 8; ++r) {
        const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(rows + size_t(r) * row_bytes)[b];
        std::memcpy(col + kD + 2 * r, &x.d, 2);
        std::memcpy(col + kDmin + 2 * r, &x.dmin, 2);
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, mn;
          GetScaleMinK4(j, x.scales, &sc, &mn);
          const int ks = 8 * j + r, km = 8 * r + j;  // S[8j + r], M[8r + j]
          lo[ks] = uint8_t(lo[ks] | (sc & 15));
          lo[km] = uint8_t(lo[km] | ((mn & 15) << 4));
          hi[ks % 32] = uint8_t(hi[ks % 32] | ((sc >> 4) << (2 * (ks / 32))));
          hi[km % 32] = uint8_t(hi[km % 32] | ((mn >> 4) << (4 + 2 * (km / 32))));
        }
        for (int t = 0; t < 16; ++t) std::memcpy(col + kQs + 64 * t + 8 * r, x.qs + 8 * t, 8);
      }
      std::memcpy(col + kScLo, lo, sizeof lo);
      std::memcpy(col + kScHi, hi, sizeof hi);
    }
  }
  return Status::Ok();
}

// ---- Q8_0x8 ---------------------------------------------------------------------------------------

bool CanRepackQ8_0(const TensorView& src) {
  return src.type == GgmlType::Q8_0 && src.layout == kLayoutPlain && src.ne[1] % 8 == 0 &&
         src.ne[0] % kQK8_0 == 0 && src.ne[0] > 0 && src.is_contiguous();
}

Status RepackQ8_0(const TensorView& src, void* dst) {
  static_assert(kQK8_0 == 32 && q8_0x8::kBlockBytes == 8 * sizeof(BlockQ8_0), "8 plain blocks per column");
  return RepackRows8<BlockQ8_0>("RepackQ8_0", "Q8_0", CanRepackQ8_0(src), src, dst, q8_0x8::kBlockBytes,
                                [](uint8_t* out, int r, const BlockQ8_0& blk) {
                                  std::memcpy(out + 2 * r, &blk.d, 2);
                                  uint8_t* q = out + q8_0x8::kQs + 32 * r;  // chunk r / 2, half r % 2
                                  for (int j = 0; j < kQK8_0; ++j) q[j] = uint8_t(blk.qs[j]) ^ 0x80u;
                                });
}

// ---- MXFP4x8 --------------------------------------------------------------------------------------

bool CanRepackMXFP4(const TensorView& src) {
  return src.type == GgmlType::MXFP4 && src.layout == kLayoutPlain && src.ne[1] % 8 == 0 &&
         src.ne[0] % kQK_MXFP4 == 0 && src.ne[0] > 0 && src.is_contiguous();
}

Status RepackMXFP4(const TensorView& src, void* dst) {
  return RepackRows8<BlockMXFP4>("RepackMXFP4", "MXFP4", CanRepackMXFP4(src), src, dst, kMXFP4x8BlockBytes,
                                 [](uint8_t* out, int r, const BlockMXFP4& blk) {
                                   out[r] = blk.e;
                                   std::memcpy(out + 8 + 16 * r, blk.qs, 16);
                                 });
}

// ---- layout choice --------------------------------------------------------------------------------

int RepackLayoutFor(const TensorView& src) {
  if (CanRepackQ4_0(src)) return kLayoutQ4_0x8;
  if (CanRepackQ4_K(src)) return kLayoutQ4_Kx8;
  if (CanRepackQ8_0(src)) return kLayoutQ8_0x8;
  if (CanRepackMXFP4(src)) return kLayoutMXFP4x8;
  return kLayoutPlain;
}

namespace {
Status RepackInto(const TensorView& src, int layout, void* dst) {
  if (layout == kLayoutQ4_0x8) return RepackQ4_0(src, dst);
  if (layout == kLayoutQ4_Kx8) return RepackQ4_K(src, dst);
  if (layout == kLayoutQ8_0x8) return RepackQ8_0(src, dst);
  if (layout == kLayoutMXFP4x8) return RepackMXFP4(src, dst);
  if (layout != kLayoutPlain)
    return InvalidArgument("RepackWeight: unknown layout " + std::to_string(layout));
  if (src.layout != kLayoutPlain || !src.is_contiguous())
    return InvalidArgument("RepackWeight: " + ShapeString(src) + " is not a contiguous plain tensor");
  if (dst == nullptr || src.data == nullptr) return InvalidArgument("RepackWeight: null data pointer");
  std::memcpy(dst, src.data, RowSize(src.type, src.ne[0]) * size_t(src.nrows()));
  return Status::Ok();
}
}  // namespace

VecDotFn GetRepackedGemv(int layout, IsaLevel isa) {
  struct Levels {
    VecDotFn scalar, avx2, vnni;
  };
  Levels k{};
  switch (layout) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    case kLayoutQ4_0x8:
      k = {scalar::GemvQ4_0x8Q8_0, avx2::GemvQ4_0x8Q8_0, avx512::GemvQ4_0x8Q8_0};
      break;
    case kLayoutQ4_Kx8:
      k = {scalar::GemvQ4_Kx8Q8_K, avx2::GemvQ4_Kx8Q8_K, avx512::GemvQ4_Kx8Q8_K};
      break;
    case kLayoutQ8_0x8:
      k = {scalar::GemvQ8_0x8Q8_0, avx2::GemvQ8_0x8Q8_0, avx512::GemvQ8_0x8Q8_0};
      break;
    case kLayoutMXFP4x8:
      k = {scalar::GemvMXFP4x8Q8_0, avx2::GemvMXFP4x8Q8_0, avx512::GemvMXFP4x8Q8_0};
      break;
#else
    case kLayoutQ4_0x8:
      k = {scalar::GemvQ4_0x8Q8_0, nullptr, nullptr};
      break;
    case kLayoutQ4_Kx8:
      k = {scalar::GemvQ4_Kx8Q8_K, nullptr, nullptr};
      break;
    case kLayoutQ8_0x8:
      k = {scalar::GemvQ8_0x8Q8_0, nullptr, nullptr};
      break;
    case kLayoutMXFP4x8:
      k = {scalar::GemvMXFP4x8Q8_0, nullptr, nullptr};
      break;
#endif
    default:
      return nullptr;
  }
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  isa = IsaLevel(std::min(int(isa), int(DetectIsa())));  // never a level this CPU lacks
  if (isa >= IsaLevel::kAvx512Vnni) return k.vnni;
  if (isa >= IsaLevel::kAvx2) return k.avx2;
#else
  (void)isa;
#endif
  return k.scalar;
}

Status RepackWeight(const TensorView& src, int layout, void* dst) {
  STOWAGE_RETURN_IF_ERROR(RepackInto(src, layout, dst));
  // The session repacks straight from the model's file mapping: without this, every page read here
  // stayed resident next to its repacked copy (0.85B Q4_0: ~400 MiB; llama.cpp's mmap load has the
  // same cost). The kernels never read the source again.
  ReleaseFileMappedPages(src.data, RowSize(src.type, src.ne[0]) * size_t(src.nrows()));
  return Status::Ok();
}

// ---- scalar reference gemvs -----------------------------------------------------------------------

namespace scalar {

void GemvQ4_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float sumf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQ4_0x8BlockBytes) {
    const float dy = HalfToFloat(y[b].d);
    for (int r = 0; r < 8; ++r) {
      uint16_t dh;
      std::memcpy(&dh, x + 2 * r, 2);
      const uint8_t* qs = x + 16 + 16 * r;
      int sumi0 = 0, sumi1 = 0;
      for (int j = 0; j < 16; ++j) {
        sumi0 += ((qs[j] & 0x0F) - 8) * y[b].qs[j];
        sumi1 += ((qs[j] >> 4) - 8) * y[b].qs[j + 16];
      }
      // As ggml's AVX2 gemv/gemm_q4_0_8x8_q8_0: acc += float(sumi) * (d_x * d_y), fused.
      sumf[r] = std::fma(float(sumi0 + sumi1), HalfToFloat(dh) * dy, sumf[r]);
    }
  }
  std::memcpy(s, sumf, sizeof sumf);
}

// Row r of the group is scalar::VecDotQ8_0Q8_0's computation on the stored bytes (q = u - 128).
void GemvQ8_0x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float sumf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += q8_0x8::kBlockBytes) {
    const float dy = HalfToFloat(y[b].d);
    for (int r = 0; r < 8; ++r) {
      uint16_t dh;
      std::memcpy(&dh, x + 2 * r, 2);
      const uint8_t* q = x + q8_0x8::kQs + 32 * r;
      int sumi = 0;
      for (int j = 0; j < kQK8_0; ++j) sumi += (int(q[j]) - 128) * y[b].qs[j];
      sumf[r] = std::fma(float(sumi), HalfToFloat(dh) * dy, sumf[r]);
    }
  }
  std::memcpy(s, sumf, sizeof sumf);
}

// Row r of the group is scalar::VecDotMXFP4Q8_0's computation: fma(float(isum), e_half * d_y, acc)
// per block (ggml's gemv/gemm_mxfp4_8x8_q8_0 on AVX2: acc += float(isum) * (e_half * d_y), fused).
void GemvMXFP4x8Q8_0(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_0* y = static_cast<const BlockQ8_0*>(vy);
  float sumf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < n / kQK_MXFP4; ++b, x += kMXFP4x8BlockBytes) {
    const float dy = HalfToFloat(y[b].d);
    for (int r = 0; r < 8; ++r) {
      const uint8_t* qs = x + 8 + 16 * r;
      int sumi = 0;
      for (int j = 0; j < 16; ++j)
        sumi += kValuesMXFP4[qs[j] & 0x0F] * y[b].qs[j] + kValuesMXFP4[qs[j] >> 4] * y[b].qs[j + 16];
      sumf[r] = std::fma(float(sumi), dy * E8M0ToFloatHalf(x[r]), sumf[r]);
    }
  }
  std::memcpy(s, sumf, sizeof sumf);
}

// Per row r and super-block: sumi = sum_j sc_j * dot_j(q, a), summ = sum_j mn_j * (bsums[2j] +
// bsums[2j+1]) -- the plain vec_dot's integers -- then acc_r = fma(sumi, d_r * d_y, acc_r) and
// accm_r = fma(summ, dmin_r * d_y, accm_r); s[r] = acc_r - accm_r. The SIMD gemvs perform the same
// float operations on 8 lanes, so every level gives the same bits.
namespace {
template <bool kSb>
void GemvQ4_Kx8(int64_t n, float* s, const void* vx, const void* vy) {
  const uint8_t* x = static_cast<const uint8_t*>(vx);
  const BlockQ8_K* y = static_cast<const BlockQ8_K*>(vy);
  float acc[8] = {}, accm[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b, x += q4_kx8::kColBytes) {
    uint8_t sc[8][8], mn[8][8];
    Q4_Kx8Scales(x, sc, mn);
    int bs32[8];
    for (int j = 0; j < 8; ++j) bs32[j] = y[b].bsums[2 * j] + y[b].bsums[2 * j + 1];
    const float dy = y[b].d;
    uint16_t dh[8], mh[8];
    std::memcpy(dh, x + q4_kx8::kD, 16);
    std::memcpy(mh, x + q4_kx8::kDmin, 16);
    for (int r = 0; r < 8; ++r) {
      const float d = HalfToFloat(dh[r]) * dy, dm = HalfToFloat(mh[r]) * dy;
      int sumi = 0, summ = 0;
      for (int j = 0; j < 8; ++j) {
        const int i = j / 2, shift = 4 * (j % 2);
        int dot = 0;
        for (int c = 0; c < 4; ++c) {
          const uint8_t* q = x + q4_kx8::kQs + 64 * (4 * i + c) + 8 * r;
          const int8_t* a = y[b].qs + 64 * i + 32 * (j % 2) + 8 * c;
          for (int e = 0; e < 8; ++e) dot += ((q[e] >> shift) & 15) * a[e];
        }
        sumi += sc[r][j] * dot;
        summ += mn[r][j] * bs32[j];
        if (kSb && j % 2 == 1) {  // the end of sub-block pair j / 2
          acc[r] = std::fma(float(sumi), d, acc[r]);
          accm[r] = std::fma(float(summ), dm, accm[r]);
          sumi = summ = 0;
        }
      }
      if (!kSb) {
        acc[r] = std::fma(float(sumi), d, acc[r]);
        accm[r] = std::fma(float(summ), dm, accm[r]);
      }
    }
  }
  for (int r = 0; r < 8; ++r) s[r] = acc[r] - accm[r];
}
}  // namespace

void GemvQ4_Kx8Q8_K(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<false>(n, s, vx, vy); }
void GemvQ4_Kx8Q8_KSb(int64_t n, float* s, const void* vx, const void* vy) { GemvQ4_Kx8<true>(n, s, vx, vy); }

}  // namespace scalar

}  // namespace stowage::cpu
