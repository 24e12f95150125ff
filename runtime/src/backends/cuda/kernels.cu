// CUDA kernels of the GPU backend (see kernels.h). One translation unit, few templates, so that
// nvcc compiles it quickly for both architectures (80 and 90). The per-element arithmetic and the
// thread -> element mapping are the __host__ __device__ functions of cuda_math.h (tested on the
// host against the CPU backend by cuda_math_test); this file holds the launches, the block-wide
// reductions and the warp reductions. Block layouts: ggml-common.h.
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels.h"

namespace stowage::cuda {
namespace {

// clang-format off: the CUDA launch <<< >>> is split across the macro and its uses
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
    case kMXFP4: FN<kMXFP4><<<__VA_ARGS__; break;     \
    default: return cudaErrorInvalidValue;            \
  }

constexpr int kThreads = 256;

// clang-format on
// Blocks of `per` threads for n items on a 1-D grid; 0 when n needs more than gridDim.x allows
// (the launchers then return cudaErrorInvalidConfiguration instead of launching a truncated grid).
unsigned Blocks(int64_t n, int per) {
  const int64_t b = (n + per - 1) / per;
  return b > kMaxGridX ? 0u : unsigned(b);
}

__device__ __forceinline__ int64_t GlobalThread() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }

// ---- element-wise kernels (bodies in cuda_math.h) -------------------------------------------------

// err (device memory, 3 int32: set flag, bad index, launch id): the first out-of-range index wins.
template <int T>
__global__ void GetRowsK(Tv src, Tv idx, Tv dst, int64_t n, int32_t* err, int32_t launch_id) {
  const int64_t l = GlobalThread();
  int32_t bad = 0;
  if (l < n && !GetRowsElement<T>(src, idx, dst, l, &bad) && err != nullptr && atomicCAS(err, 0, 1) == 0) {
    err[1] = bad;
    err[2] = launch_id;
  }
}

__global__ void BinaryK(Binary op, Tv a, Tv b, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) BinaryElement(op, a, b, d, l);
}

__global__ void UnaryK(Unary op, Tv a, Tv d, float p0, float p1, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) UnaryElement(op, a, d, p0, p1, l);
}

__global__ void GluK(Glu op, Tv a, Tv b, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) GluElement(op, a, b, d, l);
}

__global__ void SwiGluOaiK(Tv a, Tv b, Tv d, float alpha, float limit, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) SwiGluOaiElement(a, b, d, alpha, limit, l);
}

__global__ void AddIdK(Tv a, Tv b, Tv ids, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) AddIdElement(a, b, ids, d, l);
}

__global__ void ConcatK(Tv a, Tv b, Tv d, int dim, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) ConcatElement(a, b, d, dim, l);
}

__global__ void SetRowsK(Tv src, Tv idx, bool idx_i64, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) SetRowsElement(src, idx, idx_i64, d, l);
}

__global__ void RepeatK(Tv a, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) RepeatElement(a, d, l);
}

__global__ void SumRowsK(Tv a, Tv d, int64_t rows) {
  const int64_t r = GlobalThread();
  if (r < rows) SumRowsThread(a, d, r);
}

__global__ void MoeGatherK(Tv b, const int32_t* pairs, int64_t n_used, Tv xg, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) MoeGatherElement(b, pairs, n_used, xg, l);
}

__global__ void MoeScatterK(Tv out, const int32_t* pairs, int64_t n_used, Tv d, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) MoeScatterElement(out, pairs, n_used, d, l);
}

// ROPE (put = RopePutTensor) and the fused K stores ROPE_SET_ROWS (RopePutRows) and ROPE_CPY
// (RopePutCopy): one thread per pair (RopeThreadTo), the same rotation wherever its values go.
template <typename Put>
__global__ void RopeK(Tv src, const int32_t* pos, const float* ff, RopeArgs p, Put put, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) RopeThreadTo(src, pos, ff, p, l, put);
}

__global__ void CpyK(Tv src, Tv dst, int64_t n) {
  const int64_t l = GlobalThread();
  if (l < n) CpyElement(src, dst, l);
}

// CPY into Q8_0 / Q4_0: one thread per dst block.
__global__ void CpyQK(Tv src, Tv dst, int64_t nblocks) {
  const int64_t b = GlobalThread();
  if (b < nblocks) CpyQuantBlock(src, dst, b);
}

template <int T>
__global__ void ToF16K(const uint8_t* src, int64_t ne0, int64_t nrows, int64_t nb1, __half* dst) {
  const int64_t l = GlobalThread();
  if (l < ne0 * nrows) dst[l] = __ushort_as_half(ToF16Element<T>(src, ne0, nb1, l));
}

// ---- row kernels: one thread block per row, rows on grid.x (RowIndex) ---------------------------

// Up to 1024 threads per row block: __launch_bounds__ keeps the register count within what a
// 1024-thread block may use (64 per thread; ptxas reports 26 for NormK, 32 for SoftMaxK on sm_90).
constexpr int kRowThreads = 1024;

// Block-wide sum / max (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // an earlier call's readers are done with part[]
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

// RMS_NORM: x * RmsNormScale(sum x^2); with a weight w (w.data set: RMS_NORM_MUL) RmsNormMulElement
// with w broadcast as MUL's src1. NORM: two passes like the CPU (mean, then the centered sum of
// squares), not E[x^2] - mean^2, which cancels catastrophically for rows with a large mean.
__global__ void __launch_bounds__(kRowThreads) NormK(bool rms, Tv a, Tv w, Tv d, float eps) {
  int64_t i1, i2, i3;
  RowIndex(blockIdx.x, a.ne, &i1, &i2, &i3);
  const int64_t ne0 = a.ne[0];
  const uint8_t* s = At(a, 0, i1, i2, i3);
  uint8_t* o = At(d, 0, i1, i2, i3);
  if (rms) {
    float sum2 = 0.f;
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
      const float x = LoadF32(s + k * a.nb[0]);
      sum2 += x * x;
    }
    const float scale = RmsNormScale(BlockSum(sum2), ne0, eps);
    if (w.data != nullptr) {
      const uint8_t* wr = At(w, 0, i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3]);
      for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
        StoreF32(o + k * d.nb[0], RmsNormMulElement(LoadF32(s + k * a.nb[0]), scale,
                                                    LoadF(w.type, wr + (k % w.ne[0]) * w.nb[0])));
      return;
    }
    for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
      StoreF32(o + k * d.nb[0], LoadF32(s + k * a.nb[0]) * scale);
    return;
  }
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) sum += LoadF32(s + k * a.nb[0]);
  const float mean = BlockSum(sum) / float(ne0);
  float sum2 = 0.f;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    const float v = LoadF32(s + k * a.nb[0]) - mean;
    sum2 += v * v;
  }
  const float scale = NormScale(BlockSum(sum2), ne0, eps);
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
    StoreF32(o + k * d.nb[0], (LoadF32(s + k * a.nb[0]) - mean) * scale);
}

// SOFT_MAX: w = x * scale + slope * mask, then exp(w - max) / sum. dst may alias src.
__global__ void __launch_bounds__(kRowThreads)
    SoftMaxK(Tv src, Tv mask, const float* sinks, Tv dst, float scale, SoftMaxAlibi alibi) {
  int64_t i1, i2, i3;
  RowIndex(blockIdx.x, src.ne, &i1, &i2, &i3);
  const int64_t ne0 = src.ne[0];
  const float slope = AlibiSlope(alibi, uint32_t(i2));
  const uint8_t* s = At(src, 0, i1, i2, i3);
  uint8_t* o = At(dst, 0, i1, i2, i3);
  const uint8_t* m = mask.data ? At(mask, 0, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : nullptr;
  float mx = -INFINITY;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    const float w =
        SoftMaxLogit(LoadF32(s + k * src.nb[0]), scale, slope, m ? m + k * mask.nb[0] : nullptr, mask.type);
    StoreF32(o + k * dst.nb[0], w);
    mx = fmaxf(mx, w);
  }
  mx = BlockMax(mx);
  if (sinks) mx = fmaxf(mx, sinks[i2]);  // ggml_soft_max_add_sinks: one more logit, no value
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x) {
    const float e = expf(LoadF32(o + k * dst.nb[0]) - mx);
    StoreF32(o + k * dst.nb[0], e);
    sum += e;
  }
  const float inv = 1.f / (BlockSum(sum) + (sinks ? expf(sinks[i2] - mx) : 0.f));
  for (int64_t k = threadIdx.x; k < ne0; k += blockDim.x)
    StoreF32(o + k * dst.nb[0], LoadF32(o + k * dst.nb[0]) * inv);
}

// ARGSORT: one block per row (RowIndex), the row's indices in shared memory (width ints), the
// bitonic network's stages separated by __syncthreads(); each thread handles indices tid, tid +
// blockDim.x, ... of a stage.
__global__ void ArgSortK(Tv src, Tv dst, int width, bool desc) {
  extern __shared__ int idx[];
  int64_t i1, i2, i3;
  RowIndex(blockIdx.x, src.ne, &i1, &i2, &i3);
  const uint8_t* row = At(src, 0, i1, i2, i3);
  const int64_t ncols = src.ne[0];
  for (int i = threadIdx.x; i < width; i += blockDim.x) idx[i] = i;
  __syncthreads();
  for (int k = 2; k <= width; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) {
      for (int i = threadIdx.x; i < width; i += blockDim.x)
        ArgsortCompareExchange(idx, row, src.nb[0], ncols, i, j, k, desc);
      __syncthreads();
    }
  uint8_t* o = At(dst, 0, i1, i2, i3);
  for (int i = threadIdx.x; i < ncols; i += blockDim.x)
    *reinterpret_cast<int32_t*>(o + i * dst.nb[0]) = idx[i];
}

// ---- flash attention: one warp per query row (cuda_math.h FlashAttn*) ----------------------------

constexpr int kFaWarps = 4;

// Keys in order; a masked key is skipped by the whole warp (the mask row is the warp's). The warp
// sum is the xor butterfly, which gives every lane the same bits.
__global__ void __launch_bounds__(kFaWarps * 32)
    FlashAttnK(Tv q, Tv k, Tv v, Tv mask, Tv dst, FlashAttnArgs a, int64_t rows) {
  const int64_t r = int64_t(blockIdx.x) * kFaWarps + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps leave together: the shuffles below stay full-warp
  const int lane = threadIdx.x % 32;
  const FaRow f = FlashAttnRow(q, k, v, r);
  const float slope = AlibiSlope(a.alibi, uint32_t(f.i2));
  FaLane st;
  for (int64_t ic = 0; ic < k.ne[1]; ++ic) {
    float m;
    if (!FlashAttnMask(mask, f, ic, &m)) continue;
    float dot = FlashAttnLaneDot(q, k, f, ic, lane);
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffff, dot, o);
    FlashAttnLaneAdd(st, FlashAttnScore(dot, a, slope, m), v, f, ic, lane);
  }
  if (a.sinks) FlashAttnLaneSink(st, a.sinks[f.i2]);
  FlashAttnLaneStore(st, dst, f, lane);
}

// ---- quantized mat-vec (MulMatVecLane, then a warp sum) -------------------------------------------

// The xor-butterfly sum of a full warp's values (every lane gets the same bits).
__device__ __forceinline__ float WarpSum(float s) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  return s;
}

template <int T>
__global__ void MulMatVecK(Tv w, Tv x, Tv d, int64_t y0, int64_t z0) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kMmvWarps + threadIdx.x / 32;
  if (n >= w.ne[1]) return;  // whole warps leave together: the shuffles below stay full-warp
  const int64_t m0 = (y0 + blockIdx.y) * kMmvCols, z = z0 + blockIdx.z;
  float acc[kMmvCols];
  MulMatVecLane<T>(w, x, d, n, m0, z, lane, acc);
  const int64_t rest = x.ne[1] - m0;
  const int ncols = int(rest < kMmvCols ? rest : kMmvCols);
  const int64_t i12 = z % d.ne[2], i13 = z / d.ne[2];
  for (int c = 0; c < ncols; ++c) {
    const float s = WarpSum(acc[c]);
    if (lane == 0) StoreF32(At(d, n, m0 + c, i12, i13), s);
  }
}

// MUL_MAT_GLU's mat-vec: warp n sums gate row n's and up row n's dots exactly as MulMatVecK sums a
// MUL_MAT's (MulMatVecLane, WarpSum), and lane 0 stores their GluValue: the floats the unfused
// MulMatVecK, MulMatVecK, GluK sequence stores, without writing the two products out.
template <int T>
__global__ void MulMatVecGluK(Tv gate, Tv up, Tv x, Tv d, Glu op, int64_t y0, int64_t z0) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kMmvWarps + threadIdx.x / 32;
  if (n >= gate.ne[1]) return;  // whole warps leave together
  const int64_t m0 = (y0 + blockIdx.y) * kMmvCols, z = z0 + blockIdx.z;
  float g[kMmvCols], u[kMmvCols];
  MulMatVecLane<T>(gate, x, d, n, m0, z, lane, g);
  MulMatVecLane<T>(up, x, d, n, m0, z, lane, u);
  const int64_t rest = x.ne[1] - m0;
  const int ncols = int(rest < kMmvCols ? rest : kMmvCols);
  const int64_t i12 = z % d.ne[2], i13 = z / d.ne[2];
  for (int c = 0; c < ncols; ++c) {
    const float gs = WarpSum(g[c]), us = WarpSum(u[c]);
    if (lane == 0) StoreF32(At(d, n, m0 + c, i12, i13), GluValue(op, gs, us));
  }
}

cudaError_t LaunchMulMatVec(const Tv& w, const Tv& x, const Tv& d, dim3 grid, int64_t y0, int64_t z0,
                            cudaStream_t stream) {
  // clang-format off
  STOWAGE_DISPATCH_TYPE(w.type, MulMatVecK, grid, kMmvWarps * 32, 0, stream>>>(w, x, d, y0, z0))
  // clang-format on
  return cudaGetLastError();
}

cudaError_t LaunchMulMatVecGlu(Glu op, const Tv& gate, const Tv& up, const Tv& x, const Tv& d, dim3 grid,
                               int64_t y0, int64_t z0, cudaStream_t stream) {
  // clang-format off
  STOWAGE_DISPATCH_TYPE(gate.type, MulMatVecGluK, grid, kMmvWarps * 32, 0, stream>>>(gate, up, x, d, op, y0, z0))
  // clang-format on
  return cudaGetLastError();
}

// MUL_MAT_ID's mat-vec: warp = weight row n of expert ids[s, t], s = blockIdx.y, t = t0 + blockIdx.z.
template <int T>
__global__ void MulMatVecIdK(Tv as, Tv b, Tv ids, Tv d, int64_t t0) {
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kMmvWarps + threadIdx.x / 32;
  if (n >= as.ne[1]) return;  // whole warps leave together
  const int64_t s = blockIdx.y, t = t0 + blockIdx.z;
  Tv w, x, o;
  if (!MulMatIdVecViews(as, b, ids, d, s, t, &w, &x, &o)) {
    if (lane == 0) StoreF32(At(d, n, s, t, 0), F32FromBits(0x7FC00000u));
    return;
  }
  float acc[kMmvCols];
  MulMatVecLane<T>(w, x, o, n, 0, 0, lane, acc);
  const float sum = WarpSum(acc[0]);
  if (lane == 0) StoreF32(At(o, n, 0, 0, 0), sum);
}

}  // namespace

bool KernelsCanDequantize(int type) {
  switch (type) {
    case kF32:
    case kF16:
    case kBF16:
    case kQ4_0:
    case kQ4_1:
    case kQ5_0:
    case kQ5_1:
    case kQ8_0:
    case kQ2_K:
    case kQ3_K:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K:
    case kIQ4_NL:
    case kIQ4_XS:
    case kMXFP4:
      return true;
    default:
      return false;
  }
}

bool IsQuantized(int type) {
  return KernelsCanDequantize(type) && type != kF32 && type != kF16 && type != kBF16;
}

cudaError_t GetRows(const Tv& src0, const Tv& idx, const Tv& dst, int32_t* error, int32_t launch_id,
                    cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  // clang-format off
  STOWAGE_DISPATCH_TYPE(src0.type, GetRowsK, g, kThreads, 0, stream>>>(src0, idx, dst, n, error, launch_id))
  // clang-format on
  return cudaGetLastError();
}

cudaError_t BinaryOp(Binary op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  BinaryK<<<g, kThreads, 0, stream>>>(op, a, b, dst, n);
  return cudaGetLastError();
}

cudaError_t UnaryOp(Unary op, const Tv& a, const Tv& dst, float p0, float p1, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  UnaryK<<<g, kThreads, 0, stream>>>(op, a, dst, p0, p1, n);
  return cudaGetLastError();
}

cudaError_t GluOp(Glu op, const Tv& a, const Tv& b, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  GluK<<<g, kThreads, 0, stream>>>(op, a, b, dst, n);
  return cudaGetLastError();
}

cudaError_t SwiGluOai(const Tv& a, const Tv& b, const Tv& dst, float alpha, float limit,
                      cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  SwiGluOaiK<<<g, kThreads, 0, stream>>>(a, b, dst, alpha, limit, n);
  return cudaGetLastError();
}

cudaError_t AddId(const Tv& a, const Tv& b, const Tv& ids, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  AddIdK<<<g, kThreads, 0, stream>>>(a, b, ids, dst, n);
  return cudaGetLastError();
}

cudaError_t Concat(const Tv& a, const Tv& b, const Tv& dst, int dim, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  ConcatK<<<g, kThreads, 0, stream>>>(a, b, dst, dim, n);
  return cudaGetLastError();
}

cudaError_t SetRows(const Tv& src, const Tv& idx, bool idx_i64, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(src);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  SetRowsK<<<g, kThreads, 0, stream>>>(src, idx, idx_i64, dst, n);
  return cudaGetLastError();
}

cudaError_t Repeat(const Tv& a, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(dst);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  RepeatK<<<g, kThreads, 0, stream>>>(a, dst, n);
  return cudaGetLastError();
}

cudaError_t SumRows(const Tv& a, const Tv& dst, cudaStream_t stream) {
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  if (rows == 0) return cudaSuccess;
  const unsigned g = Blocks(rows, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  SumRowsK<<<g, kThreads, 0, stream>>>(a, dst, rows);
  return cudaGetLastError();
}

cudaError_t ArgSort(const Tv& src, const Tv& dst, bool desc, cudaStream_t stream) {
  const int64_t rows = src.ne[1] * src.ne[2] * src.ne[3];
  if (rows == 0 || src.ne[0] == 0) return cudaSuccess;
  if (src.ne[0] > kArgsortMaxCols) return cudaErrorInvalidValue;
  if (rows > kMaxGridX) return cudaErrorInvalidConfiguration;
  const int width = ArgsortWidth(src.ne[0]);
  const int threads = width < 1024 ? (width < 32 ? 32 : width) : 1024;
  ArgSortK<<<unsigned(rows), threads, size_t(width) * sizeof(int), stream>>>(src, dst, width, desc);
  return cudaGetLastError();
}

cudaError_t MoeGather(const Tv& b, const int32_t* pairs, int64_t n_used, const Tv& xg, cudaStream_t stream) {
  const int64_t n = Nelements(xg);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  MoeGatherK<<<g, kThreads, 0, stream>>>(b, pairs, n_used, xg, n);
  return cudaGetLastError();
}

cudaError_t MoeScatter(const Tv& out, const int32_t* pairs, int64_t n_used, const Tv& dst,
                       cudaStream_t stream) {
  const int64_t n = Nelements(out);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  MoeScatterK<<<g, kThreads, 0, stream>>>(out, pairs, n_used, dst, n);
  return cudaGetLastError();
}

cudaError_t NormOp(bool rms, const Tv& a, const Tv& dst, float eps, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  if (rows > kMaxGridX) return cudaErrorInvalidConfiguration;
  NormK<<<unsigned(rows), a.ne[0] >= kRowThreads ? kRowThreads : 256, 0, stream>>>(rms, a, Tv{}, dst, eps);
  return cudaGetLastError();
}

cudaError_t RmsNormMul(const Tv& a, const Tv& w, const Tv& dst, float eps, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  if (rows > kMaxGridX) return cudaErrorInvalidConfiguration;
  NormK<<<unsigned(rows), a.ne[0] >= kRowThreads ? kRowThreads : 256, 0, stream>>>(true, a, w, dst, eps);
  return cudaGetLastError();
}

namespace {
template <typename Put>
cudaError_t LaunchRope(const Tv& src, const int32_t* pos, const float* freq_factors, const RopeArgs& a,
                       const Put& put, cudaStream_t stream) {
  const int64_t n = RopeItems(src);
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  RopeK<Put><<<g, kThreads, 0, stream>>>(src, pos, freq_factors, a, put, n);
  return cudaGetLastError();
}
}  // namespace

cudaError_t Rope(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& dst,
                 const RopeArgs& a, cudaStream_t stream) {
  return LaunchRope(src, pos, freq_factors, a, RopePutTensor{dst}, stream);
}

cudaError_t RopeSetRows(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& idx,
                        bool idx_i64, const Tv& dst, const RopeArgs& a, cudaStream_t stream) {
  RopePutRows put;
  put.idx = idx;
  put.dst = dst;
  put.idx_i64 = idx_i64;
  put.head_dim = src.ne[0];
  return LaunchRope(src, pos, freq_factors, a, put, stream);
}

cudaError_t RopeCpy(const Tv& src, const int32_t* pos, const float* freq_factors, const Tv& dst,
                    const RopeArgs& a, cudaStream_t stream) {
  RopePutCopy put;
  put.dst = dst;
  for (int i = 0; i < 4; ++i) put.ne[i] = src.ne[i];
  return LaunchRope(src, pos, freq_factors, a, put, stream);
}

cudaError_t SoftMax(const Tv& src, const Tv& mask, const float* sinks, const Tv& dst, float scale,
                    float max_bias, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const int64_t rows = src.ne[1] * src.ne[2] * src.ne[3];
  if (rows > kMaxGridX) return cudaErrorInvalidConfiguration;
  const SoftMaxAlibi alibi = MakeSoftMaxAlibi(uint32_t(src.ne[2]), max_bias);
  SoftMaxK<<<unsigned(rows), src.ne[0] >= kRowThreads ? kRowThreads : 256, 0, stream>>>(src, mask, sinks, dst,
                                                                                        scale, alibi);
  return cudaGetLastError();
}

cudaError_t FlashAttn(const Tv& q, const Tv& k, const Tv& v, const Tv& mask, const Tv& dst,
                      const FlashAttnArgs& a, cudaStream_t stream) {
  const int64_t rows = q.ne[1] * q.ne[2] * q.ne[3];
  if (rows == 0 || dst.ne[0] == 0) return cudaSuccess;
  const unsigned g = Blocks(rows, kFaWarps);
  if (g == 0) return cudaErrorInvalidConfiguration;
  FlashAttnK<<<g, kFaWarps * 32, 0, stream>>>(q, k, v, mask, dst, a, rows);
  return cudaGetLastError();
}

cudaError_t Cpy(const Tv& src, const Tv& dst, cudaStream_t stream) {
  const int64_t n = Nelements(src);
  if (n == 0) return cudaSuccess;
  if (dst.type == kQ8_0 || dst.type == kQ4_0) {
    const int64_t nb = n / 32;
    const unsigned g = Blocks(nb, 128);
    if (g == 0) return cudaErrorInvalidConfiguration;
    CpyQK<<<g, 128, 0, stream>>>(src, dst, nb);
  } else {
    const unsigned g = Blocks(n, kThreads);
    if (g == 0) return cudaErrorInvalidConfiguration;
    CpyK<<<g, kThreads, 0, stream>>>(src, dst, n);
  }
  return cudaGetLastError();
}

namespace {
// The launches of a mat-vec over N weight rows, x's columns and dst's batch (ForEachMulMatVecLaunch),
// each made by launch(grid, y0, z0); the first error stops them.
template <typename F>
cudaError_t MulMatVecLaunches(int64_t N, const Tv& x, const Tv& dst, F&& launch) {
  if (Nelements(dst) == 0) return cudaSuccess;
  if ((N + kMmvWarps - 1) / kMmvWarps > kMaxGridX) return cudaErrorInvalidConfiguration;
  cudaError_t err = cudaSuccess;
  ForEachMulMatVecLaunch(N, x.ne[1], dst.ne[2] * dst.ne[3],
                         [&](int64_t gx, int64_t gy, int64_t gz, int64_t y0, int64_t z0) {
                           if (err == cudaSuccess)
                             err = launch(dim3(unsigned(gx), unsigned(gy), unsigned(gz)), y0, z0);
                         });
  return err;
}
}  // namespace

cudaError_t MulMatVec(const Tv& w, const Tv& x, const Tv& dst, cudaStream_t stream) {
  return MulMatVecLaunches(w.ne[1], x, dst, [&](dim3 grid, int64_t y0, int64_t z0) {
    return LaunchMulMatVec(w, x, dst, grid, y0, z0, stream);
  });
}

cudaError_t MulMatVecGlu(Glu op, const Tv& gate, const Tv& up, const Tv& x, const Tv& dst,
                         cudaStream_t stream) {
  return MulMatVecLaunches(gate.ne[1], x, dst, [&](dim3 grid, int64_t y0, int64_t z0) {
    return LaunchMulMatVecGlu(op, gate, up, x, dst, grid, y0, z0, stream);
  });
}

cudaError_t MulMatVecId(const Tv& as, const Tv& b, const Tv& ids, const Tv& dst, cudaStream_t stream) {
  if (Nelements(dst) == 0) return cudaSuccess;
  const int64_t gx = (as.ne[1] + kMmvWarps - 1) / kMmvWarps, n_used = ids.ne[0], n_tokens = ids.ne[1];
  if (gx > kMaxGridX || n_used > kMaxGridYZ) return cudaErrorInvalidConfiguration;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxGridYZ) {
    const dim3 grid(unsigned(gx), unsigned(n_used),
                    unsigned(n_tokens - t0 < kMaxGridYZ ? n_tokens - t0 : kMaxGridYZ));
    // clang-format off
    STOWAGE_DISPATCH_TYPE(as.type, MulMatVecIdK, grid, kMmvWarps * 32, 0, stream>>>(as, b, ids, dst, t0))
    // clang-format on
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t ToF16(int type, const void* src, int64_t ne0, int64_t nrows, int64_t nb1, void* dst,
                  cudaStream_t stream) {
  const int64_t n = ne0 * nrows;
  if (n == 0) return cudaSuccess;
  const unsigned g = Blocks(n, kThreads);
  if (g == 0) return cudaErrorInvalidConfiguration;
  const uint8_t* s = static_cast<const uint8_t*>(src);
  __half* d = static_cast<__half*>(dst);
  // clang-format off
  STOWAGE_DISPATCH_TYPE(type, ToF16K, g, kThreads, 0, stream>>>(s, ne0, nrows, nb1, d))
  // clang-format on
  return cudaGetLastError();
}

}  // namespace stowage::cuda
