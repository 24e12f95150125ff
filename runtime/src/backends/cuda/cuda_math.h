// The arithmetic and indexing of the CUDA kernels (kernels.cu), as inline functions that both nvcc
// (device and host) and the plain C++ compiler build: the kernels call them, and the CPU-only unit
// test (test/unit/backends/cuda_math_test.cpp) runs the same functions on the host, element by
// element or by looping over the kernels' (block, thread) grid, against the CPU backend.
//
// No CUDA header is needed outside nvcc. Inside device code (__CUDA_ARCH__) a few functions use the
// CUDA intrinsics that compute the same IEEE result (fp16 conversions, products rounded without
// FMA contraction); everywhere else they use the portable code below, which the test checks bit for
// bit against the CPU backend (runtime/src/backends/cpu/quants.cpp, ops.cpp).
//
// Tensors are Tv: ggml order (ne[0] innermost), byte strides nb[]. Block layouts are ggml's
// (ggml-common.h block_q4_0 ... block_iq4_xs), read from bytes (no struct casts, no alignment
// assumption beyond what the element type needs in device code).
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define STOWAGE_HD __host__ __device__ __forceinline__
#else
#define STOWAGE_HD inline
#endif

namespace stowage::cuda {

/// A tensor as the kernels see it: ggml type id, shape (ne[0] innermost) and byte strides.
struct Tv {
  void* data = nullptr;
  int type = 0;  ///< GgmlType id (F32 = 0, F16 = 1, BF16 = 30, I32 = 26, quantized ids)
  int64_t ne[4] = {1, 1, 1, 1};
  int64_t nb[4] = {0, 0, 0, 0};
};

enum class Binary { kAdd, kMul, kDiv };
enum class Unary { kScale, kSilu, kGelu, kTanh, kSigmoid, kFill, kClamp };
enum class Glu { kSwiglu, kGeglu };

/// ROPE parameters (ggml_rope_ext; see cpu::RopeParams) plus the YaRN correction dims
/// (RopeCorrDims) and theta_scale = freq_base^(-2 / n_dims), both computed on the host.
struct RopeArgs {
  int n_dims = 0, mode = 0;
  int n_offs = 0;  ///< ggml_rope_set_offset: dims [n_offs, n_offs + n_dims) rotate (even)
  float freq_scale = 1.f, ext_factor = 0.f, attn_factor = 1.f, theta_scale = 1.f;
  float corr_dims[2] = {0.f, 0.f};
};

/// GgmlType ids the kernels handle (ggml.h enum ggml_type).
constexpr int kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10,
              kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30,
              kMXFP4 = 39;

/// CUDA's grid limits (CUDA C++ Programming Guide, "Compute capabilities" table): gridDim.x up to
/// 2^31 - 1, gridDim.y and gridDim.z up to 65535.
constexpr int64_t kMaxGridX = 2147483647, kMaxGridYZ = 65535;

// ---- scalar conversions -------------------------------------------------------------------------

/// binary32 bits of f and back (memcpy: no aliasing assumption).
STOWAGE_HD uint32_t F32Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
STOWAGE_HD float F32FromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/// IEEE binary16 -> binary32, exact (subnormals, inf and NaN preserved; cpu::HalfToFloat).
STOWAGE_HD float H2F(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0) return F32FromBits(F32Bits(float(mant) * 5.9604644775390625e-08f) | sign);  // mant * 2^-24
  if (exp == 31) return F32FromBits(sign | 0x7F800000u | (mant << 13));
  return F32FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

/// binary32 -> binary16 bits, IEEE round to nearest even (NaN -> quiet NaN, >= 65520 -> inf),
/// as cpu::FloatToHalf and CUDA's __float2half_rn. Integer-only on the host (no FPU rounding mode).
/// Bit-identical on device and host except for NaN: the host gives sign | 0x7E00 (as the CPU
/// backend), the device's __float2half_rn the canonical 0x7FFF; both are quiet NaNs.
STOWAGE_HD uint16_t F2H(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t x = F32Bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return uint16_t(sign | 0x7E00u);
  if (x >= 0x477FF000u) return uint16_t(sign | 0x7C00u);
  if (x >= 0x38800000u) {  // normal half: round at bit 13, rebias the exponent 127 -> 15
    x += 0xFFFu + ((x >> 13) & 1u);
    return uint16_t(sign | ((x - 0x38000000u) >> 13));
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25: rounds to (signed) zero (2^-25 ties to even 0)
  // Subnormal half: value = m * 2^(e - 150) = (m >> shift) units of 2^-24, shift = 126 - e.
  const uint32_t e = x >> 23, m = (x & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal: correct
  return uint16_t(sign | r);
#endif
}

/// bfloat16 -> binary32 (exact).
STOWAGE_HD float Bf2F(uint16_t b) { return F32FromBits(uint32_t(b) << 16); }
/// binary32 -> bfloat16, round to nearest even; NaN stays a quiet NaN (ggml_compute_fp32_to_bf16,
/// cpu::FloatToBf16).
STOWAGE_HD uint16_t F2Bf(float f) {
  const uint32_t u = F32Bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 64u);
  return uint16_t((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

/// a * b rounded to float and never fused with a following add (nvcc contracts a * b + c into an
/// FMA by default; the CPU backend rounds the product first). Keeps the quantizers and the
/// dequantizers bit-identical to the CPU's.
STOWAGE_HD float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// ---- element access -----------------------------------------------------------------------------

/// 16-bit little-endian value at p. On the device one 2-byte load: every fp16/bf16 element and every
/// fp16 field of ggml's blocks is 2-byte aligned (all block sizes are even, tensors are aligned).
STOWAGE_HD uint16_t LoadU16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  return uint16_t(p[0] | (p[1] << 8));
#endif
}
STOWAGE_HD float LoadF32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const float*>(p);
#else
  float f;
  memcpy(&f, p, 4);
  return f;
#endif
}
STOWAGE_HD void StoreF32(uint8_t* p, float v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float*>(p) = v;
#else
  memcpy(p, &v, 4);
#endif
}
STOWAGE_HD void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

/// Element of a plain tensor (F32, F16 or BF16) at p as float.
STOWAGE_HD float LoadF(int type, const uint8_t* p) {
  if (type == kF32) return LoadF32(p);
  if (type == kF16) return H2F(LoadU16(p));
  return Bf2F(LoadU16(p));
}
/// Stores v into a plain tensor element (F32, F16 or BF16, rounding to nearest even).
STOWAGE_HD void StoreF(int type, uint8_t* p, float v) {
  if (type == kF32)
    StoreF32(p, v);
  else if (type == kF16)
    StoreU16(p, F2H(v));
  else
    StoreU16(p, F2Bf(v));
}

STOWAGE_HD uint8_t* At(const Tv& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/// Unravels flat index l (ggml order, i0 fastest) over shape ne into i[4].
STOWAGE_HD void Unravel(int64_t l, const int64_t ne[4], int64_t i[4]) {
  i[0] = l % ne[0];
  l /= ne[0];
  i[1] = l % ne[1];
  l /= ne[1];
  i[2] = l % ne[2];
  i[3] = l / ne[2];
}

STOWAGE_HD int64_t Nelements(const Tv& t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

// ---- dequantization (ggml dequantize_row_*; cpu::DequantizeRow, bit for bit) ------------------

/// kvalues_iq4nl (ggml-common.h), the non-linear grid of IQ4_NL / IQ4_XS, packed 8 per 64-bit word
/// so that no table in device memory is needed.
STOWAGE_HD int Iq4nl(int q) {
  const uint64_t w = q < 8 ? 0xF6EADDCFBFAD9881ull : 0x7159453526190D01ull;
  return int(int8_t(uint8_t(w >> (8 * (q & 7)))));
}

/// kvalues_mxfp4 (ggml-common.h), the doubled E2M1 levels of MXFP4 (0, 1, 2, 3, 4, 6, 8, 12 and their
/// negatives), packed 8 per 64-bit word like Iq4nl.
STOWAGE_HD int Mxfp4(int q) {
  const uint64_t w = q < 8 ? 0x0C08060403020100ull : 0xF4F8FAFCFDFEFF00ull;
  return int(int8_t(uint8_t(w >> (8 * (q & 7)))));
}

/// ggml_e8m0_to_fp32_half (ggml-impl.h): 2^(e - 128) as binary32, e = 0 and 1 the subnormals 2^-128
/// and 2^-127 (cpu::E8M0ToFloatHalf).
STOWAGE_HD float E8M0Half(uint8_t e) { return F32FromBits(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23); }

/// get_scale_min_k4 (ggml-quants.c): 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K.
STOWAGE_HD void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/// Q3_K: the 6-bit scale `is` (0..15) of the twelve packed scale bytes, minus 32 (ggml's kmask
/// unpacking in dequantize_row_q3_K).
STOWAGE_HD int Q3KScale(const uint8_t* scales, int is) {
  const int lo = is < 8 ? scales[is] & 0xF : scales[is - 8] >> 4;
  const int hi = (scales[8 + is % 4] >> (2 * (is / 4))) & 3;
  return (lo | hi << 4) - 32;
}

/// Element i of a row of type T (a kernels' dequantizable type): ggml's block layout, the CPU
/// dequantizers' operation order (products of float and int in the same sequence, no FMA).
template <int T>
STOWAGE_HD float Dq(const uint8_t* row, int64_t i) {
  if constexpr (T == kF32) {
    return LoadF32(row + 4 * i);
  } else if constexpr (T == kF16) {
    return H2F(LoadU16(row + 2 * i));
  } else if constexpr (T == kBF16) {
    return Bf2F(LoadU16(row + 2 * i));
  } else if constexpr (T == kQ4_0) {  // {f16 d; u8 qs[16]}: x[j] = (lo - 8) d, x[j+16] = (hi - 8) d
    const uint8_t* b = row + (i / 32) * 18;
    const int j = int(i % 32);
    const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
    return float(q - 8) * H2F(LoadU16(b));
  } else if constexpr (T == kQ4_1) {  // {f16 d, m; u8 qs[16]}: x = q d + m
    const uint8_t* b = row + (i / 32) * 20;
    const int j = int(i % 32);
    const int q = j < 16 ? (b[4 + j] & 0xF) : (b[4 + j - 16] >> 4);
    return MulRn(float(q), H2F(LoadU16(b))) + H2F(LoadU16(b + 2));
  } else if constexpr (T == kQ5_0 || T == kQ5_1) {  // {f16 d[, m]; u8 qh[4]; u8 qs[16]}
    constexpr int hd = T == kQ5_0 ? 2 : 4;
    const uint8_t* b = row + (i / 32) * (T == kQ5_0 ? 22 : 24);
    const int j = int(i % 32);
    const int lo = j < 16 ? (b[hd + 4 + j] & 0xF) : (b[hd + 4 + j - 16] >> 4);
    const int q = lo | ((b[hd + j / 8] >> (j % 8)) & 1) << 4;  // bit j of the little-endian qh
    if constexpr (T == kQ5_0)
      return float(q - 16) * H2F(LoadU16(b));
    else
      return MulRn(float(q), H2F(LoadU16(b))) + H2F(LoadU16(b + 2));
  } else if constexpr (T == kQ8_0) {  // {f16 d; i8 qs[32]}
    const uint8_t* b = row + (i / 32) * 34;
    return float(int8_t(b[2 + i % 32])) * H2F(LoadU16(b));
  } else if constexpr (T == kQ4_K) {  // {f16 d, dmin; u8 scales[12]; u8 qs[128]}, 256 per block
    const uint8_t* b = row + (i / 256) * 144;
    const int r = int(i % 256), c = r / 64, sub = (r % 64) / 32, l = r % 32;
    int sc, m;
    ScaleMinK4(2 * c + sub, b + 4, &sc, &m);
    const uint8_t q = b[16 + 32 * c + l];
    const float dl = H2F(LoadU16(b)) * float(sc), ml = H2F(LoadU16(b + 2)) * float(m);
    return MulRn(dl, float(sub ? q >> 4 : q & 0xF)) - ml;
  } else if constexpr (T == kQ5_K) {  // {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
    const uint8_t* b = row + (i / 256) * 176;
    const int r = int(i % 256), c = r / 64, sub = (r % 64) / 32, l = r % 32;
    int sc, m;
    ScaleMinK4(2 * c + sub, b + 4, &sc, &m);
    const uint8_t q = b[48 + 32 * c + l];
    const int v = (sub ? q >> 4 : q & 0xF) + (((b[16 + l] >> (2 * c + sub)) & 1) << 4);
    const float dl = H2F(LoadU16(b)) * float(sc), ml = H2F(LoadU16(b + 2)) * float(m);
    return MulRn(dl, float(v)) - ml;
  } else if constexpr (T == kQ2_K) {  // {u8 scales[16]; u8 qs[64]; f16 d, dmin}
    const uint8_t* b = row + (i / 256) * 84;
    const int r = int(i % 256), n = r / 128, j = (r % 128) / 32, hf = (r % 32) / 16, l = r % 16;
    const uint8_t sc = b[8 * n + 2 * j + hf];
    const int v = (b[16 + 32 * n + 16 * hf + l] >> (2 * j)) & 3;
    const float dl = H2F(LoadU16(b + 80)) * float(sc & 0xF), ml = H2F(LoadU16(b + 82)) * float(sc >> 4);
    return MulRn(dl, float(v)) - ml;
  } else if constexpr (T == kQ3_K) {  // {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
    const uint8_t* b = row + (i / 256) * 110;
    const int r = int(i % 256), n = r / 128, j = (r % 128) / 32, hf = (r % 32) / 16, l = r % 16;
    const int v = (b[32 + 32 * n + 16 * hf + l] >> (2 * j)) & 3;
    const bool hbit = (b[16 * hf + l] >> (4 * n + j)) & 1;
    return H2F(LoadU16(b + 108)) * float(Q3KScale(b + 96, 8 * n + 2 * j + hf)) * float(v - (hbit ? 0 : 4));
  } else if constexpr (T == kIQ4_NL) {  // {f16 d; u8 qs[16]}
    const uint8_t* b = row + (i / 32) * 18;
    const int j = int(i % 32);
    return H2F(LoadU16(b)) * float(Iq4nl(j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4));
  } else if constexpr (T == kMXFP4) {  // {u8 e; u8 qs[16]}: level * 2^(e - 128)
    const uint8_t* b = row + (i / 32) * 17;
    const int j = int(i % 32);
    return float(Mxfp4(j < 16 ? b[1 + j] & 0xF : b[1 + j - 16] >> 4)) * E8M0Half(b[0]);
  } else if constexpr (T == kIQ4_XS) {  // {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
    const uint8_t* b = row + (i / 256) * 136;
    const int r = int(i % 256), ib = r / 32, j = r % 32;
    const int sh = LoadU16(b + 2);
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const uint8_t* qs = b + 8 + 16 * ib;
    return H2F(LoadU16(b)) * float(ls - 32) * float(Iq4nl(j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4));
  } else {
    static_assert(T == kQ6_K, "Dq: not a kernels' type");
    // {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, 256 per block
    const uint8_t* b = row + (i / 256) * 210;
    const int r = int(i % 256), n = r / 128, quarter = (r % 128) / 32, l = r % 32;
    const uint8_t* ql = b + 64 * n;
    const uint8_t* qh = b + 128 + 32 * n;
    const int sc = int8_t(b[192 + 8 * n + l / 16 + 2 * quarter]);
    const int lo = quarter & 1 ? ql[l + 32] : ql[l];
    const int q = ((quarter & 2 ? lo >> 4 : lo & 0xF) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    return H2F(LoadU16(b + 208)) * float(sc) * float(q);
  }
}

/// Bytes of one block and elements per block of the kernels' types (ggml's type traits).
STOWAGE_HD int BlockBytes(int type) {
  switch (type) {
    case kF32:
      return 4;
    case kF16:
    case kBF16:
      return 2;
    case kQ4_0:
    case kIQ4_NL:
      return 18;
    case kMXFP4:
      return 17;
    case kQ4_1:
      return 20;
    case kQ5_0:
      return 22;
    case kQ5_1:
      return 24;
    case kQ8_0:
      return 34;
    case kQ2_K:
      return 84;
    case kQ3_K:
      return 110;
    case kQ4_K:
      return 144;
    case kQ5_K:
      return 176;
    case kQ6_K:
      return 210;
    case kIQ4_XS:
      return 136;
    default:
      return 0;
  }
}
STOWAGE_HD int BlockElements(int type) {
  switch (type) {
    case kF32:
    case kF16:
    case kBF16:
      return 1;
    case kQ2_K:
    case kQ3_K:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K:
    case kIQ4_XS:
      return 256;
    default:
      return BlockBytes(type) ? 32 : 0;
  }
}

// ---- quantization of copies into quantized KV caches (quantize_row_*_ref; cpu::QuantizeRow) ----

/// One Q8_0 block {f16 d; i8 qs[32]} of x[0..31] at b: d = amax / 127, q = roundf(x / d).
STOWAGE_HD void QuantizeBlockQ8_0(const float* x, uint8_t* b) {
  float amax = 0.f;
  for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(x[e]));
  const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
  StoreU16(b, F2H(d));
  for (int e = 0; e < 32; ++e) b[2 + e] = uint8_t(int8_t(roundf(x[e] * id)));
}
/// One Q4_0 block {f16 d; u8 qs[16]} of x[0..31] at b: d = (signed value of largest magnitude) / -8,
/// q = min(15, int8(x / d + 8.5)), element j in the low nibble of qs[j], j + 16 in the high one.
STOWAGE_HD void QuantizeBlockQ4_0(const float* x, uint8_t* b) {
  float amax = 0.f, mx = 0.f;
  for (int e = 0; e < 32; ++e)
    if (fabsf(x[e]) > amax) {
      amax = fabsf(x[e]);
      mx = x[e];
    }
  const float d = mx / -8.f, id = d != 0.f ? 1.f / d : 0.f;
  StoreU16(b, F2H(d));
  for (int e = 0; e < 16; ++e) {
    const int q0 = int(int8_t(MulRn(x[e], id) + 8.5f)), q1 = int(int8_t(MulRn(x[e + 16], id) + 8.5f));
    b[2 + e] = uint8_t((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
  }
}

// ---- element-wise math ---------------------------------------------------------------------------

/// SILU: x / (1 + exp(-x)); -inf -> -0 (the formula gives -inf / inf = NaN), as the CPU backend's
/// scalar reference (kernels.h SiluRowF32).
STOWAGE_HD float Silu(float x) { return x == -INFINITY ? -0.f : x / (1.f + expf(-x)); }
/// ggml's GELU tanh approximation evaluated like GGML_GELU_FP16 (input and result through fp16;
/// x <= -10 gives 0, x >= 10 gives x), as cpu::Gelu.
STOWAGE_HD float Gelu(float x) {
  if (x <= -10.f) return 0.f;
  if (x >= 10.f) return x;
  const float h = H2F(F2H(x));
  const float y =
      0.5f * h * (1.f + tanhf(0.79788456080286535587989211986876f * h * (1.f + 0.044715f * h * h)));
  return H2F(F2H(y));
}

// ---- SET_ROWS's destination (SET_ROWS and the fused ROPE_SET_ROWS) ----------------------------

/// Where SET_ROWS stores element i (ggml order) of its rows src [ne0, n, ne2, ne3]: dst[i0, r, i2,
/// i3] with r = idx[i1, i2 % idx.ne1, i3 % idx.ne2] (I32 or I64, `idx_i64`); nullptr for r outside
/// [0, dst.ne1) (nothing is written).
STOWAGE_HD uint8_t* SetRowsTarget(const Tv& idx, bool idx_i64, const Tv& dst, const int64_t i[4]) {
  const uint8_t* ip = At(idx, i[1], i[2] % idx.ne[1], i[3] % idx.ne[2], 0);
  int64_t r;
  if (idx_i64) {
    memcpy(&r, ip, 8);
  } else {
    int32_t r32;
    memcpy(&r32, ip, 4);
    r = r32;
  }
  if (r < 0 || r >= dst.ne[1]) return nullptr;
  return At(dst, i[0], r, i[2], i[3]);
}

// ---- ROPE ---------------------------------------------------------------------------------------

/// ggml_rope_yarn_corr_dims (ggml.c): the YaRN ramp's first and last rotated pair (host only).
inline void RopeCorrDims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float dims[2]) {
  auto corr = [&](float n_rot) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * 3.14159265358979323846f)) / (2 * logf(freq_base));
  };
  const float start = floorf(corr(beta_fast)), end = ceilf(corr(beta_slow));
  dims[0] = start > 0.f ? start : 0.f;
  dims[1] = end < float(n_dims - 1) ? end : float(n_dims - 1);
}

/// theta_scale = freq_base^(-2 / n_dims) (ggml_rope_cache_init's theta_scale; host only).
inline float RopeThetaScale(float freq_base, int n_dims) { return powf(freq_base, -2.0f / float(n_dims)); }

/// Angle of pair ip before YaRN: pos * theta_scale^ip, the power built by ip float products like
/// ggml_rope_cache_init (and the CPU backend), so the angles agree bit for bit.
STOWAGE_HD float RopeThetaBase(int32_t pos, float theta_scale, int64_t ip) {
  float t = float(pos);
  for (int64_t k = 0; k < ip; ++k) t *= theta_scale;
  return t;
}

/// rope_yarn (ggml-cpu ops.cpp): cos and sin of the YaRN-corrected angle of pair ip, times mscale.
STOWAGE_HD void RopeYarn(float theta_extrap, const RopeArgs& p, int64_t ip, float* c, float* s) {
  const float theta_interp = p.freq_scale * theta_extrap;
  float theta = theta_interp, mscale = p.attn_factor;
  if (p.ext_factor != 0.f) {
    const float span = p.corr_dims[1] - p.corr_dims[0];
    const float y = (float(ip) - p.corr_dims[0]) / (span > 0.001f ? span : 0.001f);
    const float y0 = 0.f < y ? y : 0.f;  // std::min(1, std::max(0, y)) of the CPU, NaN -> 0 included
    const float yc = y0 < 1.f ? y0 : 1.f;
    const float ramp = (1.f - yc) * p.ext_factor;
    theta = MulRn(theta_interp, 1.f - ramp) + MulRn(theta_extrap, ramp);
    mscale *= 1.f + MulRn(0.1f, logf(1.f / p.freq_scale));
  }
  *c = cosf(theta) * mscale;
  *s = sinf(theta) * mscale;
}

/// Number of threads of the ROPE kernel: one per pair (ne0 / 2, rounded up) of every row.
STOWAGE_HD int64_t RopeItems(const Tv& src) {
  return (src.ne[0] / 2 + src.ne[0] % 2) * src.ne[1] * src.ne[2] * src.ne[3];
}

/// ROPE thread l (< RopeItems): rotates one pair of one row (pair ip = i0/2 - n_offs/2 of the
/// rotated dims [n_offs, n_offs + n_dims): normal (n_offs + 2 ip, n_offs + 2 ip + 1), NEOX
/// (n_offs + ip, n_offs + ip + n_dims/2)) or copies the pair (i0, i0 + 1) outside them, handing each
/// value with its position in src to put(i0, i1, i2, i3, value) after both are computed (so the
/// destination may alias src). ROPE puts them into its dst (RopeThread); the fused K stores put them
/// where SET_ROWS or CPY would put ROPE's result (RopePutRows, RopePutCopy), the same floats.
template <typename Put>
STOWAGE_HD void RopeThreadTo(const Tv& src, const int32_t* pos, const float* ff, const RopeArgs& p, int64_t l,
                             const Put& put) {
  const int64_t half = src.ne[0] / 2 + src.ne[0] % 2;
  const int64_t ip = l % half;
  int64_t r = l / half;
  const int64_t i1 = r % src.ne[1];
  r /= src.ne[1];
  const int64_t i2 = r % src.ne[2], i3 = r / src.ne[2];
  const int64_t i0 = 2 * ip;
  const uint8_t* s = At(src, 0, i1, i2, i3);
  if (i0 < p.n_offs || i0 >= p.n_offs + p.n_dims) {
    for (int64_t k = i0; k < i0 + 2 && k < src.ne[0]; ++k) put(k, i1, i2, i3, LoadF32(s + k * src.nb[0]));
    return;
  }
  const int64_t ir = ip - p.n_offs / 2;  // the pair within the rotated dims
  const float theta_extrap = RopeThetaBase(pos[i2], p.theta_scale, ir) / (ff ? ff[ir] : 1.f);
  float c, sn;
  RopeYarn(theta_extrap, p, ir, &c, &sn);
  const bool neox = p.mode == 2;
  const int64_t a = p.n_offs + (neox ? ir : 2 * ir), b = p.n_offs + (neox ? ir + p.n_dims / 2 : 2 * ir + 1);
  const float x0 = LoadF32(s + a * src.nb[0]), x1 = LoadF32(s + b * src.nb[0]);
  // The CPU backend's (and llama.cpp's CPU) contraction: y0 = fma(x0, cos, -(x1 sin)),
  // y1 = fma(x0, sin, x1 cos).
  const float y0 = fmaf(x0, c, -MulRn(x1, sn)), y1 = fmaf(x0, sn, MulRn(x1, c));
  put(a, i1, i2, i3, y0);
  put(b, i1, i2, i3, y1);
}

/// RopeThreadTo's put for ROPE: the F32 element of dst at the value's position.
struct RopePutTensor {
  Tv dst;
  STOWAGE_HD void operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) const {
    StoreF32(At(dst, i0, i1, i2, i3), v);
  }
};

/// ROPE thread l (RopeThreadTo) into dst (F32, src's shape; may alias src).
STOWAGE_HD void RopeThread(const Tv& src, const int32_t* pos, const float* ff, const Tv& dst,
                           const RopeArgs& p, int64_t l) {
  RopeThreadTo(src, pos, ff, p, l, RopePutTensor{dst});
}

/// RopeThreadTo's put for ROPE_SET_ROWS (Stowage's fused K store of llama.cpp 2026,
/// llama_kv_cache::cpy_k): ROPE's element (i0, i1, i2) of x [head_dim, n_head, n_tokens] is element
/// (i1 * head_dim + i0, i2) of the rows [head_dim * n_head, n_tokens] that SET_ROWS stores into
/// dst (SetRowsTarget: row idx[i2]; an index outside dst writes nothing), converted to dst's type
/// (F32, F16 or BF16) as SET_ROWS converts it.
struct RopePutRows {
  Tv idx, dst;
  bool idx_i64 = false;
  int64_t head_dim = 0;
  STOWAGE_HD void operator()(int64_t i0, int64_t i1, int64_t i2, int64_t, float v) const {
    const int64_t i[4] = {i1 * head_dim + i0, i2, 0, 0};
    if (uint8_t* o = SetRowsTarget(idx, idx_i64, dst, i)) StoreF(dst.type, o, v);
  }
};

/// RopeThreadTo's put for ROPE_CPY (Stowage's fused K store of Feb 2025, a CPY into a view of the
/// cache): ROPE's element at flat index l of x's shape `ne` (ggml order) goes to flat element l of
/// dst (any strides; F32, F16 or BF16), as CpyElement copies ROPE's result.
struct RopePutCopy {
  Tv dst;
  int64_t ne[4] = {1, 1, 1, 1};  ///< x's (ROPE's result's) shape
  STOWAGE_HD void operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) const {
    int64_t j[4];
    Unravel(i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3)), dst.ne, j);
    StoreF(dst.type, At(dst, j[0], j[1], j[2], j[3]), v);
  }
};

// ---- norms, softmax -----------------------------------------------------------------------------

/// RMS_NORM's factor 1 / sqrt(sum(x^2) / n + eps) (ggml_rms_norm; IEEE sqrt and division).
STOWAGE_HD float RmsNormScale(float sum_sq, int64_t n, float eps) {
  return 1.f / sqrtf(sum_sq / float(n) + eps);
}
/// RMS_NORM_MUL's element (Stowage's fused RMS_NORM + MUL): RMS_NORM's float x * scale, then MUL's
/// float product with the weight element w, the two roundings of the ops it replaces.
STOWAGE_HD float RmsNormMulElement(float x, float scale, float w) {
  const float normed = x * scale;
  return normed * w;
}
/// NORM's factor 1 / sqrt(sum((x - mean)^2) / n + eps) (ggml_norm, two passes over the row).
STOWAGE_HD float NormScale(float sum_sq_centered, int64_t n, float eps) {
  return 1.f / sqrtf(sum_sq_centered / float(n) + eps);
}

/// SOFT_MAX's ALiBi constants (ggml soft_max_f32): n_head_log2 = largest power of 2 <= n_head
/// (1 for n_head 0), m0 = 2^(-max_bias / n_head_log2), m1 = 2^(-max_bias / 2 / n_head_log2).
struct SoftMaxAlibi {
  uint32_t n_head_log2 = 1;
  float m0 = 1.f, m1 = 1.f;
  bool on = false;  ///< max_bias > 0
};
inline SoftMaxAlibi MakeSoftMaxAlibi(uint32_t n_head, float max_bias) {
  SoftMaxAlibi a;
  while (a.n_head_log2 * 2 <= n_head) a.n_head_log2 *= 2;
  a.m0 = powf(2.0f, -max_bias / float(a.n_head_log2));
  a.m1 = powf(2.0f, -(max_bias / 2.0f) / float(a.n_head_log2));
  a.on = max_bias > 0.f;
  return a;
}
/// ALiBi slope of head h (1 when ALiBi is off).
STOWAGE_HD float AlibiSlope(const SoftMaxAlibi& a, uint32_t h) {
  if (!a.on) return 1.f;
  return h < a.n_head_log2 ? powf(a.m0, float(h + 1)) : powf(a.m1, float(2 * (h - a.n_head_log2) + 1));
}

/// SOFT_MAX's logit of element k: x * scale + slope * mask (each product rounded, as the CPU does;
/// `mask` null for none; mask_type F16 or F32).
STOWAGE_HD float SoftMaxLogit(float x, float scale, float slope, const uint8_t* mask, int mask_type) {
  const float w = MulRn(x, scale);
  return mask ? w + MulRn(slope, LoadF(mask_type, mask)) : w;
}

/// Row r (< ne1 * ne2 * ne3) of a tensor as (i1, i2, i3): the row kernels (NORM, RMS_NORM,
/// SOFT_MAX) take one thread block per row on a 1-D grid (gridDim.x up to 2^31 - 1, where a
/// (ne1, ne2, ne3) grid would be limited to 65535 in y and z).
STOWAGE_HD void RowIndex(int64_t r, const int64_t ne[4], int64_t* i1, int64_t* i2, int64_t* i3) {
  *i1 = r % ne[1];
  r /= ne[1];
  *i2 = r % ne[2];
  *i3 = r / ne[2];
}

// ---- flash attention ----------------------------------------------------------------------------

/// FLASH_ATTN_EXT (ggml_flash_attn_ext; cpu::FlashAttnExt's semantics): one warp per query row
/// (token i1, head i2, i3 of q), lane l holding output dims l, l + 32, ... (V's and the output's
/// width Dv <= 32 * kFaPerLane; K's may differ and is not bounded: deepseek2's MLA has 576 and 512).
/// Per key: the lanes' partial dots of the q row and the K row, summed over the warp; the score
/// FlashAttnScore; an online softmax whose state every lane keeps alike, and the V row summed with
/// weight exp(score - max) into F32 accumulators (the CPU keeps an F16 one for an F16 V: results
/// agree to ~1e-3 relative). K and V are F32, F16, BF16, Q8_0 or Q4_0 (the KV cache types the
/// backend writes); mask F16 rows (-inf keys skipped, as ggml), or none.
constexpr int kFaPerLane = 16;
constexpr int64_t kFaMaxHeadDim = 32 * kFaPerLane;

/// True for a K / V type FlashAttn reads (FaDq).
STOWAGE_HD bool FaCacheType(int type) {
  return type == kF32 || type == kF16 || type == kBF16 || type == kQ8_0 || type == kQ4_0;
}

/// Element i of a K or V row of a FaCacheType type (Dq of that type).
STOWAGE_HD float FaDq(int type, const uint8_t* row, int64_t i) {
  switch (type) {
    case kF32:
      return Dq<kF32>(row, i);
    case kF16:
      return Dq<kF16>(row, i);
    case kBF16:
      return Dq<kBF16>(row, i);
    case kQ8_0:
      return Dq<kQ8_0>(row, i);
    default:
      return Dq<kQ4_0>(row, i);
  }
}

/// The per-op constants: scale already divided by logit_softcap when that is not 0 (ggml: the
/// score is softcap * tanh(s * scale / softcap)), ALiBi over q's heads.
struct FlashAttnArgs {
  float scale = 1.f;
  float logit_softcap = 0.f;
  SoftMaxAlibi alibi;
  /// ggml_flash_attn_ext_add_sinks: one logit per q head (device memory, F32), or nullptr.
  const float* sinks = nullptr;
};
inline FlashAttnArgs MakeFlashAttnArgs(uint32_t n_head, float scale, float max_bias, float logit_softcap) {
  FlashAttnArgs a;
  a.scale = logit_softcap != 0.f ? scale / logit_softcap : scale;
  a.logit_softcap = logit_softcap;
  a.alibi = MakeSoftMaxAlibi(n_head, max_bias);
  return a;
}

/// A key's score from its dot with the query: s = dot * scale, soft-capped (logit_softcap *
/// tanh(s)) when logit_softcap != 0, plus slope * mask (each product rounded, as the CPU does).
STOWAGE_HD float FlashAttnScore(float dot, const FlashAttnArgs& a, float slope, float mask) {
  float x = MulRn(dot, a.scale);
  if (a.logit_softcap != 0.f) x = MulRn(a.logit_softcap, tanhf(x));
  return x + MulRn(slope, mask);
}

/// Query row r of q [D, n_tokens, n_head, ne3] with its K / V head and matrix (GQA broadcast).
struct FaRow {
  int64_t i1 = 0, i2 = 0, i3 = 0;          ///< token, head, ne3 index of q (and of dst's row)
  int64_t k2 = 0, k3 = 0, v2 = 0, v3 = 0;  ///< K's and V's head and ne3 index
};
STOWAGE_HD FaRow FlashAttnRow(const Tv& q, const Tv& k, const Tv& v, int64_t r) {
  FaRow f;
  RowIndex(r, q.ne, &f.i1, &f.i2, &f.i3);
  f.k2 = f.i2 / (q.ne[2] / k.ne[2]);
  f.k3 = f.i3 / (q.ne[3] / k.ne[3]);
  f.v2 = f.i2 / (q.ne[2] / v.ne[2]);
  f.v3 = f.i3 / (q.ne[3] / v.ne[3]);
  return f;
}

/// Key ic's mask value for row f in *m; false when the key is masked out (-inf: skipped).
STOWAGE_HD bool FlashAttnMask(const Tv& mask, const FaRow& f, int64_t ic, float* m) {
  if (mask.data == nullptr) {
    *m = 0.f;
    return true;
  }
  const uint16_t h = LoadU16(At(mask, ic, f.i1, 0, 0));
  if (h == 0xFC00) return false;
  *m = H2F(h);
  return true;
}

/// Lane `lane`'s part of the dot of q row f and K row ic: q[d] * k[d] over d = lane, lane + 32, ...
STOWAGE_HD float FlashAttnLaneDot(const Tv& q, const Tv& k, const FaRow& f, int64_t ic, int lane) {
  const uint8_t* qr = At(q, 0, f.i1, f.i2, f.i3);
  const uint8_t* kr = At(k, 0, ic, f.k2, f.k3);
  float s = 0.f;
  for (int64_t d = lane; d < q.ne[0]; d += 32) s += MulRn(LoadF32(qr + 4 * d), FaDq(k.type, kr, d));
  return s;
}

/// One lane's online-softmax state: running maximum, sum of weights, and its output dims.
struct FaLane {
  float m = -INFINITY, s = 0.f;
  float acc[kFaPerLane] = {};
};

/// Adds key ic (score `score`, V row ic) to lane `lane`'s state: a new maximum rescales what was
/// accumulated and gives this value weight 1, else weight exp(score - max) (ggml's order).
STOWAGE_HD void FlashAttnLaneAdd(FaLane& st, float score, const Tv& v, const FaRow& f, int64_t ic, int lane) {
  float ms = 1.f, vs = 1.f;
  if (score > st.m) {
    ms = expf(st.m - score);
    st.m = score;
  } else {
    vs = expf(score - st.m);
  }
  const uint8_t* vr = At(v, 0, ic, f.v2, f.v3);
  for (int j = 0; j < kFaPerLane; ++j) {
    const int64_t d = lane + 32 * int64_t(j);
    if (d >= v.ne[0]) break;
    st.acc[j] = fmaf(FaDq(v.type, vr, d), vs, MulRn(st.acc[j], ms));
  }
  st.s = fmaf(st.s, ms, vs);
}

/// The attention sink of a row after its last key (ggml-cpu 2026's order, cpu::FlashSinkStep): the
/// sink logit joins the softmax without a value; a new maximum rescales the accumulators.
STOWAGE_HD void FlashAttnLaneSink(FaLane& st, float sink) {
  if (sink > st.m) {
    const float ms = expf(st.m - sink);
    st.m = sink;
    for (int j = 0; j < kFaPerLane; ++j) st.acc[j] = MulRn(st.acc[j], ms);
    st.s = fmaf(st.s, ms, 1.f);
  } else {
    st.s = fmaf(st.s, 1.f, expf(sink - st.m));
  }
}

/// Writes lane `lane`'s dims of row f: acc / sum into dst [Dv, n_head, n_tokens, ne3] (every key
/// masked: 0 * (1 / 0) = NaN, as ggml).
STOWAGE_HD void FlashAttnLaneStore(const FaLane& st, const Tv& dst, const FaRow& f, int lane) {
  const float inv = 1.f / st.s;
  for (int j = 0; j < kFaPerLane; ++j) {
    const int64_t d = lane + 32 * int64_t(j);
    if (d >= dst.ne[0]) break;
    StoreF32(At(dst, d, f.i2, f.i1, f.i3), st.acc[j] * inv);
  }
}

// ---- per-thread bodies of the element-wise kernels ----------------------------------------------

/// GET_ROWS element l of dst (F32): dst[i0, i1, i2, i3] = Dq(src0 row idx[i1, i2, i3] of matrix
/// (i2 % ne02, i3 % ne03))[i0]. An index outside [0, ne01) writes NaN instead of reading outside
/// src0 (the host cannot check device-resident ids before the launch; ggml-cuda reads anyway) and
/// returns false with the index in *bad (the kernel records it for CudaBackend::Synchronize).
template <int T>
STOWAGE_HD bool GetRowsElement(const Tv& src, const Tv& idx, const Tv& dst, int64_t l, int32_t* bad) {
  int64_t i[4];
  Unravel(l, dst.ne, i);
  int32_t r;
  memcpy(&r, At(idx, i[1], i[2], i[3], 0), 4);
  uint8_t* o = At(dst, i[0], i[1], i[2], i[3]);
  if (r < 0 || r >= src.ne[1]) {
    StoreF32(o, F32FromBits(0x7FC00000u));
    *bad = r;
    return false;
  }
  StoreF32(o, Dq<T>(At(src, 0, r, i[2] % src.ne[2], i[3] % src.ne[3]), i[0]));
  return true;
}

/// ADD / MUL / DIV element l of dst with ggml broadcasting of b (F32 or F16).
STOWAGE_HD void BinaryElement(Binary op, const Tv& a, const Tv& b, const Tv& d, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float x = LoadF32(At(a, i[0], i[1], i[2], i[3]));
  const float y = LoadF(b.type, At(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]));
  StoreF32(At(d, i[0], i[1], i[2], i[3]), op == Binary::kAdd ? x + y : op == Binary::kMul ? x * y : x / y);
}

/// SIGMOID: 1 / (1 + exp(-x)), cpu::Sigmoid's formula (expf, IEEE add and division).
STOWAGE_HD float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

/// CLAMP of x to [lo, hi] with ggml-cpu's MAX(MIN(x, hi), lo) (cpu::Clamp): NaN becomes hi, lo > hi
/// gives lo. fminf / fmaxf would keep the other operand for NaN too but differ in that order.
STOWAGE_HD float ClampGgml(float x, float lo, float hi) {
  const float below_hi = x < hi ? x : hi;
  return below_hi > lo ? below_hi : lo;
}

/// SCALE (x * p0 + p1, the product rounded first as on the CPU) / SILU / GELU / TANH (tanhf, as
/// ggml-cuda unary.cu op_tanh; on the host libm's, as cpu::Tanh) / SIGMOID / CLAMP (to [p0, p1],
/// ClampGgml) / FILL (p0, ggml_fill) element l of d.
STOWAGE_HD void UnaryElement(Unary op, const Tv& a, const Tv& d, float p0, float p1, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float x = LoadF32(At(a, i[0], i[1], i[2], i[3]));
  const float y = op == Unary::kScale     ? MulRn(x, p0) + p1
                  : op == Unary::kSilu    ? Silu(x)
                  : op == Unary::kGelu    ? Gelu(x)
                  : op == Unary::kTanh    ? tanhf(x)
                  : op == Unary::kSigmoid ? Sigmoid(x)
                  : op == Unary::kClamp   ? ClampGgml(x, p0, p1)
                                          : p0;
  StoreF32(At(d, i[0], i[1], i[2], i[3]), y);
}

/// The GLU of gate g and value v: SILU(g) * v (SWIGLU, and Feb 2025's MUL(SILU(g), v), the same
/// two float roundings) or GELU(g) * v (GEGLU, MUL(GELU(g), v)).
STOWAGE_HD float GluValue(Glu op, float g, float v) { return (op == Glu::kSwiglu ? Silu(g) : Gelu(g)) * v; }

/// SWIGLU / GEGLU element l of d: split form (b.data != nullptr) or fused (gate = first half of a's
/// row, value = second half). d may be a (MUL_MAT_GLU's GLU over the gate product in dst).
STOWAGE_HD void GluElement(Glu op, const Tv& a, const Tv& b, const Tv& d, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float g = LoadF32(At(a, i[0], i[1], i[2], i[3]));
  const float v =
      b.data ? LoadF32(At(b, i[0], i[1], i[2], i[3])) : LoadF32(At(a, i[0] + d.ne[0], i[1], i[2], i[3]));
  StoreF32(At(d, i[0], i[1], i[2], i[3]), GluValue(op, g, v));
}

/// SWIGLU_OAI element l of d (ggml_swiglu_oai, split form; cpu::SwiGluOai's formula): x = min(a,
/// limit), y = clamp(b, -limit, limit), x / (1 + exp(alpha * -x)) * (y + 1).
STOWAGE_HD void SwiGluOaiElement(const Tv& a, const Tv& b, const Tv& d, float alpha, float limit, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float x = fminf(LoadF32(At(a, i[0], i[1], i[2], i[3])), limit);
  const float y = fminf(fmaxf(LoadF32(At(b, i[0], i[1], i[2], i[3])), -limit), limit);
  const float out_glu = x / (1.f + expf(MulRn(alpha, -x)));
  StoreF32(At(d, i[0], i[1], i[2], i[3]), MulRn(out_glu, y + 1.f));
}

/// ADD_ID element l of d (ggml_add_id): a[i0, i1, i2, i3] + b[i0, ids[i1, i2]]. An id outside
/// [0, b.ne1) writes NaN instead of reading outside b (the host checks nothing on the device).
STOWAGE_HD void AddIdElement(const Tv& a, const Tv& b, const Tv& ids, const Tv& d, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  int32_t r;
  memcpy(&r, At(ids, i[1], i[2], 0, 0), 4);
  const float x = LoadF32(At(a, i[0], i[1], i[2], i[3]));
  StoreF32(At(d, i[0], i[1], i[2], i[3]),
           r < 0 || r >= b.ne[1] ? F32FromBits(0x7FC00000u) : x + LoadF32(At(b, i[0], r, 0, 0)));
}

/// CONCAT element l of d (ggml_concat; cpu::Concat): d[i] = a[i] where i[dim] < a.ne[dim], else
/// b[i with i[dim] - a.ne[dim]]. F32, any strides.
STOWAGE_HD void ConcatElement(const Tv& a, const Tv& b, const Tv& d, int dim, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  uint8_t* o = At(d, i[0], i[1], i[2], i[3]);
  if (i[dim] < a.ne[dim]) {
    StoreF32(o, LoadF32(At(a, i[0], i[1], i[2], i[3])));
    return;
  }
  i[dim] -= a.ne[dim];
  StoreF32(o, LoadF32(At(b, i[0], i[1], i[2], i[3])));
}

/// SET_ROWS element l of src F32 [ne0, n, ne2, ne3] (ggml_set_rows; cpu::SetRows): into row
/// idx[i1, i2 % idx.ne1, i3 % idx.ne2] (I32 or I64, `idx_i64`) of dst [ne0, n_rows, ne2, ne3], F32,
/// F16 or BF16 (rounded to nearest even). An index outside [0, n_rows) writes nothing (the CPU
/// refuses it; the kernel cannot report it) and returns false.
STOWAGE_HD bool SetRowsElement(const Tv& src, const Tv& idx, bool idx_i64, const Tv& dst, int64_t l) {
  int64_t i[4];
  Unravel(l, src.ne, i);
  uint8_t* o = SetRowsTarget(idx, idx_i64, dst, i);
  if (o == nullptr) return false;
  StoreF(dst.type, o, LoadF32(At(src, i[0], i[1], i[2], i[3])));
  return true;
}

/// REPEAT element l of d (ggml_repeat; cpu::Repeat): a[i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3],
/// F32, any strides (every dimension of d a multiple of a's).
STOWAGE_HD void RepeatElement(const Tv& a, const Tv& d, int64_t l) {
  int64_t i[4];
  Unravel(l, d.ne, i);
  StoreF32(At(d, i[0], i[1], i[2], i[3]),
           LoadF32(At(a, i[0] % a.ne[0], i[1] % a.ne[1], i[2] % a.ne[2], i[3] % a.ne[3])));
}

/// SUM_ROWS row r (< ne1 * ne2 * ne3) of a into d [1, ne1, ne2, ne3]: the row's elements in order,
/// summed in double and rounded once, as cpu::SumRows (ggml_vec_sum_f32's ggml_float), so that the
/// result is the CPU's bit for bit. One thread per row: the rows MoE graphs sum (the n_used chosen
/// experts' weights) are a handful of elements.
STOWAGE_HD void SumRowsThread(const Tv& a, const Tv& d, int64_t r) {
  int64_t i1, i2, i3;
  RowIndex(r, a.ne, &i1, &i2, &i3);
  const uint8_t* s = At(a, 0, i1, i2, i3);
  double sum = 0.0;
  for (int64_t k = 0; k < a.ne[0]; ++k) sum += double(LoadF32(s + k * a.nb[0]));
  StoreF32(At(d, 0, i1, i2, i3), float(sum));
}

// ---- ARGSORT: a bitonic sort network over one row (ggml-cuda argsort.cu's scheme) --------------

/// Longest row ArgSort takes: the network's width in int32 indices lives in shared memory (32 KiB
/// at 8192, within the 48 KiB a block gets without opting in).
constexpr int64_t kArgsortMaxCols = 8192;

/// The row's length padded to the sort network's width (a power of 2 >= ncols).
STOWAGE_HD int ArgsortWidth(int64_t ncols) {
  int w = 1;
  while (w < ncols) w *= 2;
  return w;
}

/// True when index `x` comes before index `y` in the sorted row: by value (descending or ascending),
/// equal values by index (so the order is total and the result is cpu::ArgSort's stable sort);
/// padding indices (>= ncols) after every element of the row.
STOWAGE_HD bool ArgsortBefore(const uint8_t* row, int64_t nb0, int64_t ncols, int x, int y, bool desc) {
  if (x >= ncols || y >= ncols) return x < y;
  const float vx = LoadF32(row + x * nb0), vy = LoadF32(row + y * nb0);
  if (vx != vy) return desc ? vx > vy : vx < vy;
  return x < y;
}

/// One compare-exchange of the bitonic network's stage (k, j) for element i of idx[0, width): the
/// pair (i, i ^ j) is handled by its lower element; blocks of k elements with (i & k) == 0 sort
/// forwards, the others backwards. Every i of a stage touches a distinct pair, so the threads of a
/// stage run in any order (the kernel separates stages with __syncthreads()).
STOWAGE_HD void ArgsortCompareExchange(int* idx, const uint8_t* row, int64_t nb0, int64_t ncols, int i, int j,
                                       int k, bool desc) {
  const int p = i ^ j;
  if (p <= i) return;
  const bool forward = (i & k) == 0;
  const bool p_first = ArgsortBefore(row, nb0, ncols, idx[p], idx[i], desc);
  if (forward == p_first) {
    const int tmp = idx[i];
    idx[i] = idx[p];
    idx[p] = tmp;
  }
}

/// CPY element l: element l of src (ggml order) to element l of dst, both F32/F16/BF16, any strides.
STOWAGE_HD void CpyElement(const Tv& src, const Tv& dst, int64_t l) {
  int64_t i[4], j[4];
  Unravel(l, src.ne, i);
  Unravel(l, dst.ne, j);
  StoreF(dst.type, At(dst, j[0], j[1], j[2], j[3]), LoadF(src.type, At(src, i[0], i[1], i[2], i[3])));
}

/// CPY into Q8_0 / Q4_0, block bidx of dst (rows of whole blocks, dst.nb[0] = block bytes): the 32
/// source elements row * ne0 + 32 k + e (ggml order of src) quantized like quantize_row_*_ref.
STOWAGE_HD void CpyQuantBlock(const Tv& src, const Tv& dst, int64_t bidx) {
  const int64_t per_row = dst.ne[0] / 32;
  const int64_t k = bidx % per_row, row = bidx / per_row;
  int64_t j1, j2, j3;
  RowIndex(row, dst.ne, &j1, &j2, &j3);
  float x[32];
  for (int e = 0; e < 32; ++e) {
    int64_t i[4];
    Unravel(row * dst.ne[0] + 32 * k + e, src.ne, i);
    x[e] = LoadF(src.type, At(src, i[0], i[1], i[2], i[3]));
  }
  uint8_t* b = At(dst, 0, j1, j2, j3) + k * dst.nb[0];
  if (dst.type == kQ8_0)
    QuantizeBlockQ8_0(x, b);
  else
    QuantizeBlockQ4_0(x, b);
}

/// ToF16 element l of a [ne0, nrows] conversion: row l / ne0 (at src + row * nb1), element l % ne0.
template <int T>
STOWAGE_HD uint16_t ToF16Element(const uint8_t* src, int64_t ne0, int64_t nb1, int64_t l) {
  return F2H(Dq<T>(src + (l / ne0) * nb1, l % ne0));
}

// ---- quantized mat-vec --------------------------------------------------------------------------

/// Mat-vec geometry: kWarps weight rows per thread block (one warp each), kCols src1 columns per
/// block (grid.y), the batch (i12, i13) flattened in grid.z; each lane takes 32-element chunks
/// k0 = 32 * lane, 32 * (lane + 32), ... of the row.
constexpr int kMmvCols = 8, kMmvWarps = 4;

/// Calls f(gx, gy, gz, y0, z0) for each launch of a mat-vec over N weight rows, M src1 columns and
/// `batch` (ne12 * ne13) matrices: grid (gx, gy, gz) with gy, gz <= 65535, blocks of the launch
/// covering column blocks y0 .. y0 + gy - 1 and batch entries z0 .. z0 + gz - 1 (host only).
template <typename F>
void ForEachMulMatVecLaunch(int64_t N, int64_t M, int64_t batch, F&& f) {
  const int64_t gx = (N + kMmvWarps - 1) / kMmvWarps, ny = (M + kMmvCols - 1) / kMmvCols;
  for (int64_t z0 = 0; z0 < batch; z0 += kMaxGridYZ)
    for (int64_t y0 = 0; y0 < ny; y0 += kMaxGridYZ)
      f(gx, ny - y0 < kMaxGridYZ ? ny - y0 : kMaxGridYZ, batch - z0 < kMaxGridYZ ? batch - z0 : kMaxGridYZ,
        y0, z0);
}

/// The partial dots of lane `lane` for weight row n against src1 columns m0 .. m0 + ncols - 1 of
/// batch entry (i12, i13) = (z % ne2, z / ne2) of dst; acc[c] receives the lane's sum over its chunks
/// (the kernel then adds the 32 lanes). x rows must have nb[0] = 4. ncols = min(kMmvCols, ne11 - m0).
template <int T>
STOWAGE_HD void MulMatVecLane(const Tv& w, const Tv& x, const Tv& d, int64_t n, int64_t m0, int64_t z,
                              int lane, float acc[kMmvCols]) {
  const int64_t i12 = z % d.ne[2], i13 = z / d.ne[2];
  const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
  const uint8_t* row = At(w, 0, n, i12 / r2, i13 / r3);
  const int64_t rest = x.ne[1] - m0;
  const int ncols = int(rest < kMmvCols ? rest : kMmvCols);
  for (int c = 0; c < kMmvCols; ++c) acc[c] = 0.f;
  const int64_t K = w.ne[0];
  for (int64_t k0 = int64_t(lane) * 32; k0 < K; k0 += 32 * 32) {
    float v[32];
    const int64_t left = K - k0;
    const int len = int(left < 32 ? left : 32);
    for (int e = 0; e < 32; ++e) v[e] = e < len ? Dq<T>(row, k0 + e) : 0.f;
    for (int c = 0; c < ncols; ++c) {
      const uint8_t* xr = At(x, k0, m0 + c, i12, i13);
      float s = 0.f;
      for (int e = 0; e < len; ++e) s += v[e] * LoadF32(xr + 4 * e);
      acc[c] += s;
    }
  }
}

/// MUL_MAT_ID runs its mat-vec (MulMatVecId) up to this many tokens, the batched path above
/// (CudaBackend::MulMatId).
constexpr int64_t kMmvIdMaxTokens = 8;

/// MUL_MAT_ID's mat-vec (few tokens): the views of weight rows, src1 column and dst column for slot s
/// of token t. as [K, N, n_expert] (expert e at its nb[2]), b [K, ne11, n_tokens] (slot s reads
/// column s % ne11), ids I32 [n_used, n_tokens] on the device, d [N, n_used, n_tokens]. *w is the
/// expert's [K, N] matrix, *x the [K] column, *o the [N] column, each 1 in the other dims, so that
/// MulMatVecLane(*w, *x, *o, n, 0, 0, ...) is row n's dot. False (views untouched) when ids[s, t] is
/// outside [0, n_expert): the kernel writes NaN rather than read outside as.
STOWAGE_HD bool MulMatIdVecViews(const Tv& as, const Tv& b, const Tv& ids, const Tv& d, int64_t s, int64_t t,
                                 Tv* w, Tv* x, Tv* o) {
  int32_t e;
  memcpy(&e, At(ids, s, t, 0, 0), 4);
  if (e < 0 || e >= as.ne[2]) return false;
  *w = as;
  w->data = At(as, 0, 0, e, 0);
  w->ne[2] = w->ne[3] = 1;
  *x = b;
  x->data = At(b, 0, s % b.ne[1], t, 0);
  x->ne[1] = x->ne[2] = x->ne[3] = 1;
  *o = d;
  o->data = At(d, 0, s, t, 0);
  o->ne[1] = o->ne[2] = o->ne[3] = 1;
  return true;
}

/// MUL_MAT_ID's batched path (CudaBackend::MulMatId): `pairs` (device memory) lists the (slot, token)
/// pairs as t * n_used + s grouped by expert (cpu::GroupRowsByExpert's order), and every expert
/// multiplies its run of columns as one MUL_MAT. Element l of the gathered src1 xg F32 [K, n_pairs]
/// (contiguous): column j is b[:, s % ne11, t] of pair pairs[j].
STOWAGE_HD void MoeGatherElement(const Tv& b, const int32_t* pairs, int64_t n_used, const Tv& xg, int64_t l) {
  const int64_t K = xg.ne[0], j = l / K, k = l % K, p = pairs[j];
  StoreF32(At(xg, k, j, 0, 0), LoadF32(At(b, k, (p % n_used) % b.ne[1], p / n_used, 0)));
}
/// Element l of the experts' products out F32 [N, n_pairs] (column j of pair pairs[j]) to its place
/// in d [N, n_used, n_tokens]: d[n, s, t] = out[n, j].
STOWAGE_HD void MoeScatterElement(const Tv& out, const int32_t* pairs, int64_t n_used, const Tv& d,
                                  int64_t l) {
  const int64_t N = out.ne[0], j = l / N, n = l % N, p = pairs[j];
  StoreF32(At(d, n, p % n_used, p / n_used, 0), LoadF32(At(out, n, j, 0, 0)));
}

}  // namespace stowage::cuda
