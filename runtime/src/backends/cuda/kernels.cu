// CUDA kernels of the GPU backend (see kernels.h). One translation unit, few templates, so that
// nvcc compiles it quickly for both architectures (80 and 90). Block layouts: ggml-common.h.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace stowage::cuda {
namespace {

constexpr int kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11,
              kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kBF16 = 30;

// kvalues_iq4nl (ggml-common.h): the non-linear 4-bit grid of IQ4_NL / IQ4_XS.
__constant__ int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ---- element access -------------------------------------------------------------------------------

__device__ __forceinline__ float H2F(const uint8_t* p) {
  uint16_t h = uint16_t(p[0]) | uint16_t(p[1]) << 8;
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float Bf2F(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

__device__ __forceinline__ float LoadF(int type, const uint8_t* p) {
  if (type == kF32) return *reinterpret_cast<const float*>(p);
  if (type == kF16) return __half2float(*reinterpret_cast<const __half*>(p));
  return Bf2F(*reinterpret_cast<const uint16_t*>(p));
}

// ggml's FP32 -> BF16: NaN stays a quiet NaN, otherwise round to nearest even.
__device__ __forceinline__ uint16_t F2Bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

__device__ __forceinline__ void StoreF(int type, uint8_t* p, float v) {
  if (type == kF32) *reinterpret_cast<float*>(p) = v;
  else if (type == kF16) *reinterpret_cast<__half*>(p) = __float2half_rn(v);
  else *reinterpret_cast<uint16_t*>(p) = F2Bf(v);
}

__device__ __forceinline__ uint8_t* At(const Tv& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Unravels a flat index in ggml order (i0 fastest) over shape ne.
__device__ __forceinline__ void Unravel(int64_t l, const int64_t ne[4], int64_t i[4]) {
  i[0] = l % ne[0];
  l /= ne[0];
  i[1] = l % ne[1];
  l /= ne[1];
  i[2] = l % ne[2];
  i[3] = l / ne[2];
}

// ---- dequantization: element i of one row (ggml dequantize_row_*) --------------------------------

// get_scale_min_k4 (ggml-quants.c): 6-bit scale and min of sub-block j of a Q4_K block.
__device__ __forceinline__ void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

template <int T>
__device__ __forceinline__ float Dq(const uint8_t* row, int64_t i) {
  if constexpr (T == kF32) {
    return reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == kF16) {
    return __half2float(reinterpret_cast<const __half*>(row)[i]);
  } else if constexpr (T == kBF16) {
    return Bf2F(reinterpret_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == kQ4_0) {  // {f16 d; u8 qs[16]}: x[j] = (lo - 8) d, x[j+16] = (hi - 8) d
    const uint8_t* b = row + (i / 32) * 18;
    const int j = i % 32;
    const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
    return (q - 8) * H2F(b);
  } else if constexpr (T == kQ4_1) {  // {f16 d, m; u8 qs[16]}: x = q d + m
    const uint8_t* b = row + (i / 32) * 20;
    const int j = i % 32;
    const int q = j < 16 ? (b[4 + j] & 0xF) : (b[4 + j - 16] >> 4);
    return q * H2F(b) + H2F(b + 2);
  } else if constexpr (T == kQ5_0 || T == kQ5_1) {  // {f16 d[, m]; u8 qh[4]; u8 qs[16]}
    constexpr int hd = T == kQ5_0 ? 2 : 4;
    const uint8_t* b = row + (i / 32) * (T == kQ5_0 ? 22 : 24);
    const uint32_t qh = uint32_t(b[hd]) | uint32_t(b[hd + 1]) << 8 | uint32_t(b[hd + 2]) << 16 | uint32_t(b[hd + 3]) << 24;
    const int j = i % 32;
    const int lo = j < 16 ? (b[hd + 4 + j] & 0xF) : (b[hd + 4 + j - 16] >> 4);
    const int q = lo | int((qh >> j) & 1) << 4;
    return T == kQ5_0 ? (q - 16) * H2F(b) : q * H2F(b) + H2F(b + 2);
  } else if constexpr (T == kQ8_0) {  // {f16 d; i8 qs[32]}
    const uint8_t* b = row + (i / 32) * 34;
    return float(int8_t(b[2 + i % 32])) * H2F(b);
  } else if constexpr (T == kQ4_K) {  // {f16 d, dmin; u8 scales[12]; u8 qs[128]}, 256 per block
    const uint8_t* b = row + (i / 256) * 144;
    const int r = i % 256, c = r / 64, sub = (r % 64) / 32, l = r % 32;
    int sc, m;
    ScaleMinK4(2 * c + sub, b + 4, &sc, &m);
    const uint8_t q = b[16 + 32 * c + l];
    return H2F(b) * sc * (sub ? q >> 4 : q & 0xF) - H2F(b + 2) * m;
  } else if constexpr (T == kQ5_K) {  // {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
    const uint8_t* b = row + (i / 256) * 176;
    const int r = i % 256, c = r / 64, sub = (r % 64) / 32, l = r % 32;
    int sc, m;
    ScaleMinK4(2 * c + sub, b + 4, &sc, &m);
    const uint8_t q = b[48 + 32 * c + l];
    const int v = (sub ? q >> 4 : q & 0xF) + (((b[16 + l] >> (2 * c + sub)) & 1) << 4);
    return H2F(b) * sc * v - H2F(b + 2) * m;
  } else if constexpr (T == kQ2_K) {  // {u8 scales[16]; u8 qs[64]; f16 d, dmin}
    const uint8_t* b = row + (i / 256) * 84;
    const int r = i % 256, n = r / 128, j = (r % 128) / 32, hf = (r % 32) / 16, l = r % 16;
    const uint8_t sc = b[8 * n + 2 * j + hf];
    const int v = (b[16 + 32 * n + 16 * hf + l] >> (2 * j)) & 3;
    return H2F(b + 80) * (sc & 0xF) * v - H2F(b + 82) * (sc >> 4);
  } else if constexpr (T == kQ3_K) {  // {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
    const uint8_t* b = row + (i / 256) * 110;
    const int r = i % 256, n = r / 128, j = (r % 128) / 32, hf = (r % 32) / 16, l = r % 16;
    const int is = 8 * n + 2 * j + hf;
    const uint8_t* scales = b + 96;
    const int lo = is < 8 ? scales[is] & 0xF : scales[is - 8] >> 4;
    const int hi = (scales[8 + is % 4] >> (2 * (is / 4))) & 3;
    const int v = (b[32 + 32 * n + 16 * hf + l] >> (2 * j)) & 3;
    const bool hbit = b[16 * hf + l] & (1 << (4 * n + j));
    return H2F(b + 108) * ((lo | hi << 4) - 32) * (v - (hbit ? 0 : 4));
  } else if constexpr (T == kIQ4_NL) {  // {f16 d; u8 qs[16]}
    const uint8_t* b = row + (i / 32) * 18;
    const int j = i % 32;
    return H2F(b) * kIq4nl[j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4];
  } else if constexpr (T == kIQ4_XS) {  // {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
    const uint8_t* b = row + (i / 256) * 136;
    const int r = i % 256, ib = r / 32, j = r % 32;
    const int sh = b[2] | b[3] << 8;
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const uint8_t* qs = b + 8 + 16 * ib;
    return H2F(b) * (ls - 32) * kIq4nl[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4];
  } else {  // kQ6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, 256 per block
    const uint8_t* b = row + (i / 256) * 210;
    const int r = i % 256, n = r / 128, quarter = (r % 128) / 32, l = r % 32;
    const uint8_t* ql = b + 64 * n;
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n;
    const int lo = quarter & 1 ? ql[l + 32] : ql[l];
    const int q = ((quarter & 2 ? lo >> 4 : lo & 0xF) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    return H2F(b + 208) * sc[l / 16 + 2 * quarter] * q;
  }
}

#define STOWAGE_DISPATCH_TYPE(type, FN, ...)          \
  switch (type) {                                     \
    case kF32: FN<kF32><<<__VA_ARGS__; break;         \
    case kF16: FN<kF16><<<__VA_ARGS__; break;         \
    case kBF16: FN<kBF16><<<__VA_ARGS__; break;       \
    case kQ4_0: FN<kQ4_0><<<__VA_ARGS__; break;       \
    case kQ4_1: FN<kQ4_1><<<__VA_ARGS__; break;       \
    case kQ5_0: FN<kQ5_0><<<__VA_ARGS__; break;       \
    case kQ5_1: FN<kQ5_1><<<__VA_ARGS__; break;       \
    case kQ8_0: FN<kQ8_0><<<__VA_ARGS__; break;       \
    case kQ2_K: FN<kQ2_K><<<__VA_ARGS__; break;       \
    case kQ3_K: FN<kQ3_K><<<__VA_ARGS__; break;       \
    case kQ4_K: FN<kQ4_K><<<__VA_ARGS__; break;       \
    case kQ5_K: FN<kQ5_K><<<__VA_ARGS__; break;       \
    case kQ6_K: FN<kQ6_K><<<__VA_ARGS__; break;       \
    case kIQ4_NL: FN<kIQ4_NL><<<__VA_ARGS__; break;   \
    case kIQ4_XS: FN<kIQ4_XS><<<__VA_ARGS__; break;   \
    default: return cudaErrorInvalidValue;            \
  }

inline unsigned Blocks(int64_t n, int per) { return unsigned((n + per - 1) / per); }
constexpr int kThreads = 256;

// ---- kernels ------------------------------------------------------------------------------------

template <int T>
__global__ void GetRowsK(Tv src, Tv idx, Tv dst, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= n) return;
  int64_t i[4];
  Unravel(l, dst.ne, i);
  const int32_t r = *reinterpret_cast<const int32_t*>(At(idx, i[1], i[2], i[3], 0));
  const uint8_t* row = At(src, 0, r, i[2] % src.ne[2], i[3] % src.ne[3]);
  *reinterpret_cast<float*>(At(dst, i[0], i[1], i[2], i[3])) = Dq<T>(row, i[0]);
}

__global__ void BinaryK(Binary op, Tv a, Tv b, Tv d, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= n) return;
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float x = *reinterpret_cast<const float*>(At(a, i[0], i[1], i[2], i[3]));
  const float y = LoadF(b.type, At(b, i[0] % b.ne[0], i[1] % b.ne[1], i[2] % b.ne[2], i[3] % b.ne[3]));
  *reinterpret_cast<float*>(At(d, i[0], i[1], i[2], i[3])) = op == Binary::kAdd ? x + y : x * y;
}

// ggml's GELU tanh approximation evaluated like GGML_GELU_FP16 (input and result through fp16).
__device__ __forceinline__ float Gelu(float x) {
  if (x <= -10.f) return 0.f;
  if (x >= 10.f) return x;
  const float h = __half2float(__float2half_rn(x));
  const float y = 0.5f * h * (1.f + tanhf(0.79788456080286535587989211986876f * h * (1.f + 0.044715f * h * h)));
  return __half2float(__float2half_rn(y));
}
__device__ __forceinline__ float Silu(float x) { return x / (1.f + expf(-x)); }

__global__ void UnaryK(Unary op, Tv a, Tv d, float p0, float p1, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= n) return;
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float x = *reinterpret_cast<const float*>(At(a, i[0], i[1], i[2], i[3]));
  const float y = op == Unary::kScale ? x * p0 + p1 : op == Unary::kSilu ? Silu(x) : Gelu(x);
  *reinterpret_cast<float*>(At(d, i[0], i[1], i[2], i[3])) = y;
}

__global__ void GluK(Glu op, Tv a, Tv b, Tv d, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= n) return;
  int64_t i[4];
  Unravel(l, d.ne, i);
  const float g = *reinterpret_cast<const float*>(At(a, i[0], i[1], i[2], i[3]));
  const float v = b.data ? *reinterpret_cast<const float*>(At(b, i[0], i[1], i[2], i[3]))
                         : *reinterpret_cast<const float*>(At(a, i[0] + d.ne[0], i[1], i[2], i[3]));
  *reinterpret_cast<float*>(At(d, i[0], i[1], i[2], i[3])) = (op == Glu::kSwiglu ? Silu(g) : Gelu(g)) * v;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ float BlockSum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) part[w] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? part[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ float BlockMax(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) part[w] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? part[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}

// One block per row (i1, i2, i3) = (blockIdx.x, blockIdx.y, blockIdx.z).
__global__ void NormK(bool rms, Tv a, Tv d, float eps) {
  const int64_t i1 = blockIdx.x, i2 = blockIdx.y, i3 = blockIdx.z, ne0 = a.ne[0];
  const uint8_t* s = At(a, 0, i1, i2, i3);
  uint8_t* o = At(d, 0, i1, i2, i3);
  float sum = 0.f, sum2 = 0.f;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    const float x = *reinterpret_cast<const float*>(s + k * a.nb[0]);
    sum += x;
    sum2 += x * x;
  }
  sum = BlockSum(sum);
  sum2 = BlockSum(sum2);
  if (rms) {
    const float scale = rsqrtf(sum2 / ne0 + eps);
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
      *reinterpret_cast<float*>(o + k * d.nb[0]) = *reinterpret_cast<const float*>(s + k * a.nb[0]) * scale;
  } else {
    const float mean = sum / ne0;
    const float var = fmaxf(sum2 / ne0 - mean * mean, 0.f);
    const float scale = rsqrtf(var + eps);
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
      *reinterpret_cast<float*>(o + k * d.nb[0]) = (*reinterpret_cast<const float*>(s + k * a.nb[0]) - mean) * scale;
  }
}

// One thread per rotated pair (i0 / 2) or copied tail element of one row.
__global__ void RopeK(Tv src, const int32_t* pos, const float* ff, Tv dst, RopeArgs p, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t half = src.ne[0] / 2 + src.ne[0] % 2;  // pairs, then the tail handled pairwise too
  if (l >= n) return;
  const int64_t ip = l % half;
  int64_t r = l / half;
  const int64_t i1 = r % src.ne[1];
  r /= src.ne[1];
  const int64_t i2 = r % src.ne[2], i3 = r / src.ne[2];
  const int64_t i0 = 2 * ip;
  const uint8_t* s = At(src, 0, i1, i2, i3);
  uint8_t* d = At(dst, 0, i1, i2, i3);
  if (i0 >= p.n_dims) {  // not rotated: copy (one or two elements)
    for (int64_t k = i0; k < i0 + 2 && k < src.ne[0]; ++k)
      *reinterpret_cast<float*>(d + k * dst.nb[0]) = *reinterpret_cast<const float*>(s + k * src.nb[0]);
    return;
  }
  // rope_yarn (ggml): theta = pos * theta_scale^(i0/2) / freq_factor, YaRN ramp, mscale. The power
  // is built by repeated float products like ggml_rope_cache_init (and the CPU backend), so the
  // angles agree bit for bit instead of drifting by a few ulps at large positions.
  float theta_pos = float(pos[i2]);
  for (int64_t k = 0; k < ip; ++k) theta_pos *= p.theta_scale;
  const float theta_extrap = theta_pos / (ff ? ff[ip] : 1.f);
  const float theta_interp = p.freq_scale * theta_extrap;
  float theta = theta_interp, mscale = p.attn_factor;
  if (p.ext_factor != 0.f) {
    const float y = (float(ip) - p.corr_dims[0]) / fmaxf(0.001f, p.corr_dims[1] - p.corr_dims[0]);
    const float ramp = (1.f - fminf(1.f, fmaxf(0.f, y))) * p.ext_factor;
    theta = theta_interp * (1.f - ramp) + theta_extrap * ramp;
    mscale *= 1.f + 0.1f * logf(1.f / p.freq_scale);
  }
  const float c = cosf(theta) * mscale, sn = sinf(theta) * mscale;
  const bool neox = p.mode == 2;
  const int64_t a = neox ? ip : i0, b = neox ? ip + p.n_dims / 2 : i0 + 1;
  const float x0 = *reinterpret_cast<const float*>(s + a * src.nb[0]);
  const float x1 = *reinterpret_cast<const float*>(s + b * src.nb[0]);
  *reinterpret_cast<float*>(d + a * dst.nb[0]) = x0 * c - x1 * sn;
  *reinterpret_cast<float*>(d + b * dst.nb[0]) = x0 * sn + x1 * c;
}

// One block per row; w = x * scale + slope * mask, then exp(w - max) / sum.
__global__ void SoftMaxK(Tv src, Tv mask, Tv dst, float scale, float m0, float m1, uint32_t n_head_log2, bool alibi) {
  const int64_t i1 = blockIdx.x, i2 = blockIdx.y, i3 = blockIdx.z, ne0 = src.ne[0];
  const uint32_t h = uint32_t(i2);
  const float slope = alibi ? (h < n_head_log2 ? powf(m0, float(h + 1)) : powf(m1, float(2 * (h - n_head_log2) + 1))) : 1.f;
  const uint8_t* s = At(src, 0, i1, i2, i3);
  uint8_t* o = At(dst, 0, i1, i2, i3);
  const uint8_t* m = mask.data ? At(mask, 0, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : nullptr;
  float mx = -INFINITY;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    float w = *reinterpret_cast<const float*>(s + k * src.nb[0]) * scale;
    if (m) w += slope * LoadF(mask.type, m + k * mask.nb[0]);
    *reinterpret_cast<float*>(o + k * dst.nb[0]) = w;
    mx = fmaxf(mx, w);
  }
  mx = BlockMax(mx);
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    float* p = reinterpret_cast<float*>(o + k * dst.nb[0]);
    const float e = expf(*p - mx);
    *p = e;
    sum += e;
  }
  sum = BlockSum(sum);
  const float inv = 1.f / sum;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) *reinterpret_cast<float*>(o + k * dst.nb[0]) *= inv;
}

__global__ void CpyK(Tv src, Tv dst, int64_t n) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= n) return;
  int64_t i[4], j[4];
  Unravel(l, src.ne, i);
  Unravel(l, dst.ne, j);
  StoreF(dst.type, At(dst, j[0], j[1], j[2], j[3]), LoadF(src.type, At(src, i[0], i[1], i[2], i[3])));
}

// CPY F32 -> Q8_0 / Q4_0 (quantize_row_q8_0_ref / quantize_row_q4_0_ref): one thread per dst block.
// Element l of src (ggml order) goes to element l of dst; dst rows hold whole blocks.
__global__ void CpyQK(Tv src, Tv dst, int64_t nblocks) {
  const int64_t bidx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (bidx >= nblocks) return;
  const int64_t per_row = dst.ne[0] / 32;
  const int64_t k = bidx % per_row, row = bidx / per_row;
  const int64_t j1 = row % dst.ne[1], j2 = (row / dst.ne[1]) % dst.ne[2], j3 = row / (dst.ne[1] * dst.ne[2]);
  float x[32];
  for (int e = 0; e < 32; ++e) {
    int64_t i[4];
    Unravel(row * dst.ne[0] + 32 * k + e, src.ne, i);
    x[e] = LoadF(src.type, At(src, i[0], i[1], i[2], i[3]));
  }
  uint8_t* b = At(dst, 0, j1, j2, j3) + k * dst.nb[0];
  if (dst.type == kQ8_0) {
    float amax = 0.f;
    for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(x[e]));
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    const __half h = __float2half_rn(d);
    memcpy(b, &h, 2);
    for (int e = 0; e < 32; ++e) b[2 + e] = uint8_t(int8_t(roundf(x[e] * id)));
  } else {  // Q4_0
    float amax = 0.f, mx = 0.f;
    for (int e = 0; e < 32; ++e)
      if (fabsf(x[e]) > amax) {
        amax = fabsf(x[e]);
        mx = x[e];
      }
    const float d = mx / -8.f, id = d != 0.f ? 1.f / d : 0.f;
    const __half h = __float2half_rn(d);
    memcpy(b, &h, 2);
    for (int e = 0; e < 16; ++e) {
      const int q0 = min(15, int(int8_t(x[e] * id + 8.5f)));
      const int q1 = min(15, int(int8_t(x[e + 16] * id + 8.5f)));
      b[2 + e] = uint8_t(q0 | q1 << 4);
    }
  }
}

// Mat-vec: one warp per weight row n; lanes take 32-element chunks of the row; up to kCols columns
// of x per warp (grid.y); batch (i12, i13) in grid.z.
constexpr int kCols = 8, kWarps = 4;
template <int T>
__global__ void MulMatVecK(Tv w, Tv x, Tv d) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (n >= w.ne[1]) return;
  const int64_t m0 = int64_t(blockIdx.y) * kCols;
  const int64_t i12 = blockIdx.z % d.ne[2], i13 = blockIdx.z / d.ne[2];
  const int64_t r2 = d.ne[2] / w.ne[2], r3 = d.ne[3] / w.ne[3];
  const uint8_t* row = At(w, 0, n, i12 / r2, i13 / r3);
  const int ncols = int(min(int64_t(kCols), x.ne[1] - m0));
  float acc[kCols] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  const int64_t K = w.ne[0];
  for (int64_t k0 = int64_t(lane) * 32; k0 < K; k0 += 32 * 32) {
    float v[32];
    const int len = int(min(int64_t(32), K - k0));
#pragma unroll
    for (int e = 0; e < 32; ++e) v[e] = e < len ? Dq<T>(row, k0 + e) : 0.f;
    for (int c = 0; c < ncols; ++c) {
      const float* xr = reinterpret_cast<const float*>(At(x, k0, m0 + c, i12, i13));
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < 32; ++e) s += e < len ? v[e] * xr[e] : 0.f;
      acc[c] += s;
    }
  }
  for (int c = 0; c < ncols; ++c) {
    float s = acc[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0) *reinterpret_cast<float*>(At(d, n, m0 + c, i12, i13)) = s;
  }
}

template <int T>
__global__ void ToF16K(const uint8_t* src, int64_t ne0, int64_t nrows, int64_t nb1, __half* dst) {
  const int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (l >= ne0 * nrows) return;
  const int64_t r = l / ne0, i = l % ne0;
  dst[l] = __float2half_rn(Dq<T>(src + r * nb1, i));
}

int64_t Nelements(const Tv& t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

}  // namespace

bool KernelsCanDequantize(int type) {
  switch (type) {
    case kF32: case kF16: case kBF16: case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1: case kQ8_0: case kQ2_K:
    case kQ3_K: case kQ4_K: case kQ5_K: case kQ6_K: case kIQ4_NL: case kIQ4_XS: return true;
    default: return false;
  }
}

bool IsQuantized(int type) { return KernelsCanDequantize(type) && type != kF32 && type != kF16 && type != kBF16; }

cudaError_t GetRows(const Tv& src0, const Tv& idx, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  STOWAGE_DISPATCH_TYPE(src0.type, GetRowsK, Blocks(n, kThreads), kThreads, 0, stream>>>(src0, idx, dst, n))
  return cudaGetLastError();
}

cudaError_t BinaryOp(Binary op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n > 0) BinaryK<<<Blocks(n, kThreads), kThreads, 0, stream>>>(op, a, b, dst, n);
  return cudaGetLastError();
}

cudaError_t UnaryOp(Unary op, const Tv& a, const Tv& dst, float p0, float p1, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n > 0) UnaryK<<<Blocks(n, kThreads), kThreads, 0, stream>>>(op, a, dst, p0, p1, n);
  return cudaGetLastError();
}

cudaError_t GluOp(Glu op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n > 0) GluK<<<Blocks(n, kThreads), kThreads, 0, stream>>>(op, a, b, dst, n);
  return cudaGetLastError();
}

cudaError_t NormOp(bool rms, const Tv& a, const Tv& dst, float eps, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const dim3 grid(unsigned(a.ne[1]), unsigned(a.ne[2]), unsigned(a.ne[3]));
  NormK<<<grid, a.ne[0] >= 1024 ? 1024 : 256, 0, stream>>>(rms, a, dst, eps);
  return cudaGetLastError();
}

cudaError_t Rope(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& dst, const RopeArgs& a,
                 cudaStream_t stream) {
  const int64_t n = (src.ne[0] / 2 + src.ne[0] % 2) * src.ne[1] * src.ne[2] * src.ne[3];
  if (n > 0) RopeK<<<Blocks(n, kThreads), kThreads, 0, stream>>>(src, pos, freq_factors, dst, a, n);
  return cudaGetLastError();
}

cudaError_t SoftMax(const Tv& src, const Tv& mask, const Tv& dst, float scale, float max_bias, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const uint32_t n_head = uint32_t(src.ne[2]);
  uint32_t n_head_log2 = 1;
  while (n_head_log2 * 2 <= n_head) n_head_log2 *= 2;
  const float m0 = powf(2.0f, -max_bias / n_head_log2);
  const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
  const dim3 grid(unsigned(src.ne[1]), unsigned(src.ne[2]), unsigned(src.ne[3]));
  SoftMaxK<<<grid, src.ne[0] >= 1024 ? 1024 : 256, 0, stream>>>(src, mask, dst, scale, m0, m1, n_head_log2, max_bias > 0.f);
  return cudaGetLastError();
}

cudaError_t Cpy(const Tv& src, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(src);
  if (n == 0) return cudaSuccess;
  if (dst.type == kQ8_0 || dst.type == kQ4_0) {
    const int64_t nb = n / 32;
    CpyQK<<<Blocks(nb, 128), 128, 0, stream>>>(src, dst, nb);
  } else {
    CpyK<<<Blocks(n, kThreads), kThreads, 0, stream>>>(src, dst, n);
  }
  return cudaGetLastError();
}

cudaError_t MulMatVec(const Tv& w, const Tv& x, const Tv& dst, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const dim3 grid(Blocks(w.ne[1], kWarps), Blocks(x.ne[1], kCols), unsigned(dst.ne[2] * dst.ne[3]));
  STOWAGE_DISPATCH_TYPE(w.type, MulMatVecK, grid, kWarps * 32, 0, stream>>>(w, x, dst))
  return cudaGetLastError();
}

cudaError_t ToF16(int type, const void* src, int64_t ne0, int64_t nrows, int64_t nb1, void* dst, cudaStream_t stream) {
  const int64_t n = ne0 * nrows;
  if (n == 0) return cudaSuccess;
  const uint8_t* s = static_cast<const uint8_t*>(src);
  __half* d = static_cast<__half*>(dst);
  STOWAGE_DISPATCH_TYPE(type, ToF16K, Blocks(n, kThreads), kThreads, 0, stream>>>(s, ne0, nrows, nb1, d))
  return cudaGetLastError();
}

}  // namespace stowage::cuda
