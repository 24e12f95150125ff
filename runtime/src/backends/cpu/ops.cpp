// CPU backend: element-wise ops, norms, ROPE, SOFT_MAX, GET_ROWS, CPY and the row converters.
// Numerics follow ggml-cpu/ops.cpp and vec.h (sums of squares and softmax sums in double, GELU
// through fp16 like GGML_GELU_FP16, ROPE angles as ggml_rope_cache_init / rope_yarn).
#include "ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "parallel.h"
#include "quants.h"

namespace stowage::cpu {
namespace {

// Returns kInvalidArgument "<op>: <what>" from the calling function unless `cond` holds. The
// message is built only on failure: ops run hundreds of times per generated token, and building
// every message eagerly (ShapeString, std::to_string) cost ~1% of token-generation time.
#define STOWAGE_CPU_NEED(cond, op, what)                                  \
  do {                                                                    \
    if (!(cond)) return InvalidArgument(std::string(op) + ": " + (what)); \
  } while (0)

Status NeedType(const TensorView& t, GgmlType type, const char* op, const char* name) {
  STOWAGE_CPU_NEED(t.type == type, op,
                   std::string(name) + ": expected type " + GgmlTypeName(type) + ", got " + ShapeString(t));
  return Status::Ok();
}

Status NeedSameShape(const TensorView& a, const TensorView& b, const char* op, const char* an,
                     const char* bn) {
  bool same = true;
  for (int i = 0; i < 4; ++i) same = same && a.ne[i] == b.ne[i];
  STOWAGE_CPU_NEED(
      same, op,
      std::string(an) + " " + ShapeString(a) + " and " + bn + " " + ShapeString(b) + " differ in shape");
  return Status::Ok();
}

Status NeedData(const TensorView& t, const char* op, const char* name) {
  STOWAGE_CPU_NEED(t.data != nullptr || t.nelements() == 0, op, std::string(name) + ": data is null");
  return Status::Ok();
}

inline char* At(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Loads element i0 of a row of a plain (F32/F16/BF16) tensor as float.
inline float LoadF(GgmlType type, const char* row, size_t nb0, int64_t i0) {
  const char* p = row + i0 * nb0;
  switch (type) {
    case GgmlType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case GgmlType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bf16ToFloat(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

// Applies f(row index) for every row of `t` (i1, i2, i3), in parallel.
// Below this many elements an op runs on the calling thread: a thread team costs more than it saves.
constexpr int64_t kMinParallelElements = 8192;

inline int Threads(const ComputeContext& ctx, int64_t elements) {
  return elements < kMinParallelElements ? 1 : std::max(1, ctx.n_threads);
}

template <typename F>
void ParallelRows(const ComputeContext& ctx, const TensorView& t, F&& f) {
  const int64_t nr = t.nrows();
  const int64_t ne1 = t.ne[1], ne2 = t.ne[2];
  const int nt = Threads(ctx, t.nelements());
  ParallelFor(nt, nt > 1, nr, Schedule::kStatic, 1, [&](int64_t r, int) {
    const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
    f(i1, i2, i3);
  });
}

// `row` (optional): the same function over a contiguous row (a SIMD kernel), used for dense rows.
template <typename F>
Status UnaryF32(ComputeContext& ctx, const TensorView& src, TensorView& dst, const char* op, F&& f,
                SiluRowFn row = nullptr) {
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, op, "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const int64_t ne0 = src.ne[0];
  const bool dense = src.nb[0] == 4 && dst.nb[0] == 4;  // rows of adjacent floats: plain loops (vectorizable)
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, i1, i2, i3);
    if (dense) {
      const float* x = reinterpret_cast<const float*>(s);
      float* y = reinterpret_cast<float*>(d);
      if (row) return row(ne0, x, y);
      for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = f(x[i0]);
      return;
    }
    if (row) {  // strided rows: gathered, so that they get the same bits as dense ones
      std::vector<float> buf(static_cast<size_t>(ne0));
      for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(&buf[size_t(i0)], s + i0 * src.nb[0], 4);
      row(ne0, buf.data(), buf.data());
      for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(d + i0 * dst.nb[0], &buf[size_t(i0)], 4);
      return;
    }
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      const float y = f(x);
      std::memcpy(d + i0 * dst.nb[0], &y, 4);
    }
  });
  return Status::Ok();
}

template <typename F>
Status GluF32(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst, const char* op,
              F&& f, SwiGluRowFn row = nullptr) {
  STOWAGE_RETURN_IF_ERROR(NeedType(a, GgmlType::F32, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(a, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const int64_t ne0 = dst.ne[0];
  const bool fused = b.data == nullptr;  // ggml_swiglu(a): gate = first half of a's row, up = second
  if (fused) {
    STOWAGE_CPU_NEED(
        a.ne[0] == 2 * ne0 && a.ne[1] == dst.ne[1] && a.ne[2] == dst.ne[2] && a.ne[3] == dst.ne[3], op,
        "fused form: a " + ShapeString(a) + " must be dst " + ShapeString(dst) + " with ne0 doubled");
  } else {
    STOWAGE_RETURN_IF_ERROR(NeedType(b, GgmlType::F32, op, "b"));
    STOWAGE_RETURN_IF_ERROR(NeedSameShape(a, dst, op, "a", "dst"));
    STOWAGE_RETURN_IF_ERROR(NeedSameShape(b, dst, op, "b", "dst"));
  }
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* pa = At(a, 0, i1, i2, i3);
    const char* pb = fused ? pa + ne0 * a.nb[0] : At(b, 0, i1, i2, i3);
    const size_t nbb = fused ? a.nb[0] : b.nb[0];
    char* d = At(dst, 0, i1, i2, i3);
    if (a.nb[0] == 4 && nbb == 4 && dst.nb[0] == 4) {
      const float* x = reinterpret_cast<const float*>(pa);
      const float* g = reinterpret_cast<const float*>(pb);
      float* y = reinterpret_cast<float*>(d);
      if (row) return row(ne0, x, g, y);
      for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = f(x[i0]) * g[i0];
      return;
    }
    if (row) {  // strided rows: gathered, so that they get the same bits as dense ones
      std::vector<float> buf(static_cast<size_t>(2 * ne0));
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        std::memcpy(&buf[size_t(i0)], pa + i0 * a.nb[0], 4);
        std::memcpy(&buf[size_t(ne0 + i0)], pb + i0 * nbb, 4);
      }
      row(ne0, buf.data(), buf.data() + ne0, buf.data());
      for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(d + i0 * dst.nb[0], &buf[size_t(i0)], 4);
      return;
    }
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x, g;
      std::memcpy(&x, pa + i0 * a.nb[0], 4);
      std::memcpy(&g, pb + i0 * nbb, 4);
      const float y = f(x) * g;
      std::memcpy(d + i0 * dst.nb[0], &y, 4);
    }
  });
  return Status::Ok();
}

// SiLU of one element: the row kernels' scalar reference (kernels.h SiluRowF32), -inf -> -0.
inline float SiluF32(float x) { return x == -INFINITY ? -0.0f : x / (1.0f + std::exp(-x)); }

// ggml_gelu_f32 (tanh approximation) evaluated through fp16 like ggml's GGML_GELU_FP16 table:
// the input is rounded to fp16, the table entry is stored as fp16.
inline float GeluF32(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float xh = HalfToFloat(FloatToHalf(x));
  const float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float kCoefA = 0.044715f;
  const float g = 0.5f * xh * (1.0f + std::tanh(kSqrt2OverPi * xh * (1.0f + kCoefA * xh * xh)));
  return HalfToFloat(FloatToHalf(g));
}

template <typename F>
Status BinaryBroadcast(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst,
                       const char* op, F&& f) {
  STOWAGE_RETURN_IF_ERROR(NeedType(src0, GgmlType::F32, op, "src0"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_CPU_NEED(src1.type == GgmlType::F32 || src1.type == GgmlType::F16, op,
                   "src1: expected F32 or F16, got " + ShapeString(src1));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src0, dst, op, "src0", "dst"));
  for (int i = 0; i < 4; ++i) {
    STOWAGE_CPU_NEED(src1.ne[i] > 0 && src0.ne[i] % src1.ne[i] == 0, op,
                     "src1 " + ShapeString(src1) + " cannot be repeated to src0 " + ShapeString(src0));
  }
  STOWAGE_RETURN_IF_ERROR(NeedData(src0, op, "src0"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src1, op, "src1"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const int64_t ne0 = dst.ne[0], ne10 = src1.ne[0];
  // Rows of adjacent F32 values, src1 as long as the row (residual adds, norm weights): plain loops.
  const bool dense =
      src0.nb[0] == 4 && dst.nb[0] == 4 && src1.type == GgmlType::F32 && src1.nb[0] == 4 && ne10 == ne0;
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* a = At(src0, 0, i1, i2, i3);
    const char* b = At(src1, 0, i1 % src1.ne[1], i2 % src1.ne[2], i3 % src1.ne[3]);
    char* d = At(dst, 0, i1, i2, i3);
    if (dense) {
      const float* x = reinterpret_cast<const float*>(a);
      const float* z = reinterpret_cast<const float*>(b);
      float* y = reinterpret_cast<float*>(d);
      for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = f(x[i0], z[i0]);
      return;
    }
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, a + i0 * src0.nb[0], 4);
      const float y = f(x, LoadF(src1.type, b, src1.nb[0], i0 % ne10));
      std::memcpy(d + i0 * dst.nb[0], &y, 4);
    }
  });
  return Status::Ok();
}

// ggml_rope_yarn_corr_dim / ggml_rope_yarn_corr_dims (ggml.c).
float RopeYarnCorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2 * float(M_PI))) / (2 * std::log(base));
}

void RopeYarnCorrDims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]) {
  const float start = std::floor(RopeYarnCorrDim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(RopeYarnCorrDim(n_dims, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(float(n_dims - 1), end);
}

// rope_yarn (ggml-cpu/ops.cpp): YaRN-corrected angle -> cos/sin scaled by mscale.
void RopeYarn(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0, float ext_factor,
              float mscale, float* cos_theta, float* sin_theta) {
  const float theta_interp = freq_scale * theta_extrap;
  float theta = theta_interp;
  if (ext_factor != 0.0f) {
    const float y = (i0 / 2 - corr_dims[0]) / std::max(0.001f, corr_dims[1] - corr_dims[0]);
    const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
    theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
    mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
  }
  *cos_theta = std::cos(theta) * mscale;
  *sin_theta = std::sin(theta) * mscale;
}

}  // namespace

float Fp16ToFp32(uint16_t h) { return HalfToFloat(h); }
uint16_t Fp32ToFp16(float f) { return FloatToHalf(f); }

// ---- row conversions ---------------------------------------------------------------------------

Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!IsValidGgmlType(uint32_t(type)))
    return InvalidArgument("DequantizeRow: invalid type id " + std::to_string(uint32_t(type)));
  const int64_t bs = GetTypeTraits(type).block_size;
  if (n % bs != 0) {
    return InvalidArgument(std::string("DequantizeRow: n = ") + std::to_string(n) + " is not a multiple of " +
                           GgmlTypeName(type) + "'s block size " + std::to_string(bs));
  }
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * 4);
      break;
    case GgmlType::F16: {
      const fp16_t* s = static_cast<const fp16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(s[i]);
      break;
    }
    case GgmlType::BF16: {
      const bf16_t* s = static_cast<const bf16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(s[i]);
      break;
    }
    case GgmlType::Q4_0:
      DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(src), dst, n);
      break;
    case GgmlType::Q4_1:
      DequantizeRowQ4_1(static_cast<const BlockQ4_1*>(src), dst, n);
      break;
    case GgmlType::Q5_0:
      DequantizeRowQ5_0(static_cast<const BlockQ5_0*>(src), dst, n);
      break;
    case GgmlType::Q5_1:
      DequantizeRowQ5_1(static_cast<const BlockQ5_1*>(src), dst, n);
      break;
    case GgmlType::Q8_0:
      DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(src), dst, n);
      break;
    case GgmlType::Q8_1: {
      const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
      for (int64_t i = 0; i < n / kQK8_1; ++i)
        for (int j = 0; j < kQK8_1; ++j) dst[i * kQK8_1 + j] = float(b[i].qs[j]) * HalfToFloat(b[i].d);
      break;
    }
    case GgmlType::Q8_K: {
      const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i)
        for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = b[i].d * float(b[i].qs[j]);
      break;
    }
    case GgmlType::Q2_K:
      DequantizeRowQ2_K(static_cast<const BlockQ2_K*>(src), dst, n);
      break;
    case GgmlType::Q3_K:
      DequantizeRowQ3_K(static_cast<const BlockQ3_K*>(src), dst, n);
      break;
    case GgmlType::Q4_K:
      DequantizeRowQ4_K(static_cast<const BlockQ4_K*>(src), dst, n);
      break;
    case GgmlType::Q5_K:
      DequantizeRowQ5_K(static_cast<const BlockQ5_K*>(src), dst, n);
      break;
    case GgmlType::Q6_K:
      DequantizeRowQ6_K(static_cast<const BlockQ6_K*>(src), dst, n);
      break;
    case GgmlType::IQ4_NL:
      DequantizeRowIQ4_NL(static_cast<const BlockIQ4_NL*>(src), dst, n);
      break;
    case GgmlType::IQ4_XS:
      DequantizeRowIQ4_XS(static_cast<const BlockIQ4_XS*>(src), dst, n);
      break;
    default:
      return Unimplemented(std::string("DequantizeRow: type ") + GgmlTypeName(type) +
                           " is not supported by the CPU backend");
  }
  return Status::Ok();
}

Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  if (!IsValidGgmlType(uint32_t(type)))
    return InvalidArgument("QuantizeRow: invalid type id " + std::to_string(uint32_t(type)));
  const int64_t bs = GetTypeTraits(type).block_size;
  if (n % bs != 0) {
    return InvalidArgument(std::string("QuantizeRow: n = ") + std::to_string(n) + " is not a multiple of " +
                           GgmlTypeName(type) + "'s block size " + std::to_string(bs));
  }
  switch (type) {
    case GgmlType::F32:
      if (n > 0) std::memcpy(dst, src, size_t(n) * 4);
      break;
    case GgmlType::F16: {
      fp16_t* d = static_cast<fp16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(src[i]);
      break;
    }
    case GgmlType::BF16: {
      bf16_t* d = static_cast<bf16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToBf16(src[i]);
      break;
    }
    case GgmlType::Q4_0:
      QuantizeRowQ4_0(src, static_cast<BlockQ4_0*>(dst), n);
      break;
    case GgmlType::Q4_1:
      QuantizeRowQ4_1(src, static_cast<BlockQ4_1*>(dst), n);
      break;
    case GgmlType::Q5_0:
      QuantizeRowQ5_0(src, static_cast<BlockQ5_0*>(dst), n);
      break;
    case GgmlType::Q5_1:
      QuantizeRowQ5_1(src, static_cast<BlockQ5_1*>(dst), n);
      break;
    case GgmlType::IQ4_NL:
      QuantizeRowIQ4_NL(src, static_cast<BlockIQ4_NL*>(dst), n);
      break;
    case GgmlType::Q8_0:
      QuantizeRowQ8_0(src, static_cast<BlockQ8_0*>(dst), n);
      break;
    case GgmlType::Q8_1:
      QuantizeRowQ8_1(src, static_cast<BlockQ8_1*>(dst), n);
      break;
    case GgmlType::Q8_K:
      QuantizeRowQ8_K(src, static_cast<BlockQ8_K*>(dst), n);
      break;
    default:
      return Unimplemented(std::string("QuantizeRow: target type ") + GgmlTypeName(type) +
                           " is not supported by the CPU backend");
  }
  return Status::Ok();
}

// ---- ops ---------------------------------------------------------------------------------------

Status GetRows(ComputeContext& ctx, const TensorView& src0, const TensorView& idx, TensorView& dst) {
  const char* op = "GET_ROWS";
  STOWAGE_RETURN_IF_ERROR(NeedType(idx, GgmlType::I32, op, "idx"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_CPU_NEED(src0.layout == kLayoutPlain, op, "src0: repacked layouts cannot be read by GET_ROWS");
  STOWAGE_CPU_NEED(dst.ne[0] == src0.ne[0] && dst.ne[1] == idx.ne[0] && dst.ne[2] == idx.ne[1] &&
                       dst.ne[3] == idx.ne[2] && idx.ne[3] == 1,
                   op,
                   "dst " + ShapeString(dst) + " does not match src0 " + ShapeString(src0) + " and idx " +
                       ShapeString(idx));
  STOWAGE_CPU_NEED(src0.ne[2] == idx.ne[1] || src0.ne[2] == 1, op,
                   "src0 " + ShapeString(src0) + " and idx " + ShapeString(idx) + " differ in dim 2");
  STOWAGE_CPU_NEED(src0.ne[3] == idx.ne[2] || src0.ne[3] == 1, op,
                   "src0 " + ShapeString(src0) + " and idx " + ShapeString(idx) + " differ in dim 3");
  STOWAGE_CPU_NEED(dst.nb[0] == sizeof(float), op, "dst rows must be contiguous");
  STOWAGE_CPU_NEED(src0.ne[0] % GetTypeTraits(src0.type).block_size == 0, op,
                   "src0 " + ShapeString(src0) + ": ne0 is not a multiple of the block size");
  STOWAGE_RETURN_IF_ERROR(NeedData(src0, op, "src0"));
  STOWAGE_RETURN_IF_ERROR(NeedData(idx, op, "idx"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  // Validate every index before touching memory.
  for (int64_t i2 = 0; i2 < idx.ne[2]; ++i2)
    for (int64_t i1 = 0; i1 < idx.ne[1]; ++i1)
      for (int64_t i0 = 0; i0 < idx.ne[0]; ++i0) {
        int32_t r;
        std::memcpy(&r, At(idx, i0, i1, i2, 0), 4);
        if (r < 0 || r >= src0.ne[1]) {
          return OutOfRange("GET_ROWS: idx[" + std::to_string(i0) + "," + std::to_string(i1) + "," +
                            std::to_string(i2) + "] = " + std::to_string(r) + " is outside [0, " +
                            std::to_string(src0.ne[1]) + ")");
        }
      }
  if (!SupportsGetRowsType(src0.type)) {
    return Unimplemented(std::string("GET_ROWS: src0 type ") + GgmlTypeName(src0.type) +
                         " is not supported by the CPU backend");
  }
  const int64_t ne00 = src0.ne[0];
  ParallelRows(ctx, dst, [&](int64_t i10, int64_t i11, int64_t i12) {
    int32_t r;
    std::memcpy(&r, At(idx, i10, i11, i12, 0), 4);
    const char* s = At(src0, 0, r, src0.ne[2] == 1 ? 0 : i11, src0.ne[3] == 1 ? 0 : i12);
    (void)DequantizeRow(src0.type, s, reinterpret_cast<float*>(At(dst, 0, i10, i11, i12)), ne00);
  });
  return Status::Ok();
}

Status RmsNorm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps) {
  const int64_t ne0 = src.ne[0];
  STOWAGE_CPU_NEED(ne0 > 0, "RMS_NORM", "empty rows");
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, "RMS_NORM", "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, "RMS_NORM", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, "RMS_NORM", "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src, "RMS_NORM", "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, "RMS_NORM", "dst"));
  const SumSquares8Fn sum_squares = GetRowKernels(EffectiveIsa(ctx)).sum_squares8;
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, i1, i2, i3);
    // ggml_float (double) sums of x*x; eight partial sums (element i0 into sum i0 % 8), added at
    // the end: the additions no longer wait for each other (the sequential sum was 2 us of latency
    // per 2048-element row), the result is as accurate. Contiguous rows: SumSquares8 (SIMD lanes,
    // the same bits; the scalar loop took 2.4 us per 2048 elements, AVX-512 ~0.4).
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i0 = 0;
    if (src.nb[0] == 4) {
      i0 = ne0 / 8 * 8;
      sum_squares(i0, reinterpret_cast<const float*>(s), part);
    }
    for (; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      part[i0 % 8] += double(x * x);
    }
    const double sum =
        ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    const float mean = float(sum / double(ne0));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (src.nb[0] == 4 && dst.nb[0] == 4) {  // dst may be src (in place): element by element is fine
      const float* x = reinterpret_cast<const float*>(s);
      float* y = reinterpret_cast<float*>(d);
      for (int64_t k = 0; k < ne0; ++k) y[k] = x[k] * scale;
      return;
    }
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      x *= scale;
      std::memcpy(d + i0 * dst.nb[0], &x, 4);
    }
  });
  return Status::Ok();
}

Status Norm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps) {
  const int64_t ne0 = src.ne[0];
  STOWAGE_CPU_NEED(ne0 > 0, "NORM", "empty rows");
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, "NORM", "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, "NORM", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, "NORM", "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src, "NORM", "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, "NORM", "dst"));
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, i1, i2, i3);
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      sum += double(x);
    }
    const float mean = float(sum / double(ne0));
    double sum2 = 0.0;
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      const float v = x - mean;
      std::memcpy(d + i0 * dst.nb[0], &v, 4);
      sum2 += double(v * v);
    }
    const float variance = float(sum2 / double(ne0));
    const float scale = 1.0f / std::sqrt(variance + eps);
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float v;
      std::memcpy(&v, d + i0 * dst.nb[0], 4);
      v *= scale;
      std::memcpy(d + i0 * dst.nb[0], &v, 4);
    }
  });
  return Status::Ok();
}

Status Add(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst) {
  return BinaryBroadcast(ctx, src0, src1, dst, "ADD", [](float a, float b) { return a + b; });
}

Status Mul(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst) {
  return BinaryBroadcast(ctx, src0, src1, dst, "MUL", [](float a, float b) { return a * b; });
}

Status Div(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst) {
  return BinaryBroadcast(ctx, src0, src1, dst, "DIV", [](float a, float b) { return a / b; });
}

Status Sigmoid(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  return UnaryF32(ctx, src, dst, "SIGMOID", [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
}

Status Scale(ComputeContext& ctx, const TensorView& src, TensorView& dst, float s, float b) {
  return UnaryF32(ctx, src, dst, "SCALE", [s, b](float x) { return x * s + b; });
}

Status Silu(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  return UnaryF32(ctx, src, dst, "SILU", SiluF32, GetRowKernels(EffectiveIsa(ctx)).silu_row);
}

Status Gelu(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  return UnaryF32(ctx, src, dst, "GELU", GeluF32);
}

Status SwiGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst) {
  return GluF32(ctx, a, b, dst, "SWIGLU", SiluF32, GetRowKernels(EffectiveIsa(ctx)).swiglu_row);
}

Status GeGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst) {
  return GluF32(ctx, a, b, dst, "GEGLU", GeluF32);
}

Status Rope(ComputeContext& ctx, const TensorView& src, const TensorView& pos, const TensorView& freq_factors,
            TensorView& dst, const RopeParams& p) {
  const char* op = "ROPE";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedType(pos, GgmlType::I32, op, "pos"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, op, "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(CheckRopeParams(p, src.ne[0]));
  STOWAGE_CPU_NEED(
      pos.ne[0] >= src.ne[2] && pos.nb[0] == 4, op,
      "pos " + ShapeString(pos) + " must hold ne2 = " + std::to_string(src.ne[2]) + " positions");
  if (freq_factors.data != nullptr) {
    STOWAGE_RETURN_IF_ERROR(NeedType(freq_factors, GgmlType::F32, op, "freq_factors"));
    STOWAGE_CPU_NEED(freq_factors.ne[0] >= p.n_dims / 2 && freq_factors.nb[0] == 4, op,
                     "freq_factors " + ShapeString(freq_factors) +
                         " must hold n_dims/2 = " + std::to_string(p.n_dims / 2) + " values");
  }
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(pos, op, "pos"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  float corr_dims[2];
  RopeYarnCorrDims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr_dims);
  const float theta_scale = std::pow(p.freq_base, -2.0f / p.n_dims);
  const float* ff = static_cast<const float*>(freq_factors.data);
  const int32_t* positions = static_cast<const int32_t*>(pos.data);
  const int64_t ne0 = src.ne[0], ne1 = src.ne[1], ne2 = src.ne[2], ne3 = src.ne[3];
  const bool neox = p.mode == 2;
  const int n_dims = p.n_dims;
  const int64_t n_items = ne2 * ne3;
  // One angle cache per (i2, i3), n_dims floats.
  auto fill_cache = [&](int32_t position, float* cache) {
    float theta = float(position);
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
      const float f = ff ? ff[i0 / 2] : 1.0f;
      RopeYarn(theta / f, p.freq_scale, corr_dims, i0, p.ext_factor, p.attn_factor, &cache[i0],
               &cache[i0 + 1]);
      theta *= theta_scale;
    }
  };
  // One position (token generation): the cache of the previous call when it was made for the same
  // position and parameters (ComputeContext::rope_key).
  const float* shared_cache = nullptr;
  if (n_items == 1) {
    auto bits = [](float v) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      return u;
    };
    std::vector<uint32_t> key = {
        uint32_t(positions[0]), uint32_t(n_dims),   uint32_t(p.n_ctx_orig), bits(p.freq_base),
        bits(p.freq_scale),     bits(p.ext_factor), bits(p.attn_factor),    bits(p.beta_fast),
        bits(p.beta_slow),      ff ? 1u : 0u};
    if (ff)
      for (int64_t i = 0; i < n_dims / 2; ++i) key.push_back(bits(ff[i]));
    if (key != ctx.rope_key || ctx.rope_cache.size() != size_t(n_dims)) {
      ctx.rope_cache.resize(size_t(n_dims));
      fill_cache(positions[0], ctx.rope_cache.data());
      ctx.rope_key = std::move(key);
    }
    shared_cache = ctx.rope_cache.data();
  }
  // The rotation of ggml's rotate_pairs as GCC contracts it in llama.cpp's builds with FMA:
  // y0 = fma(x0, cos, -(x1 * sin)), y1 = fma(x0, sin, x1 * cos) — bit-identical to its CPU backend.
  const RopeRotateFn rotate = GetRowKernels(EffectiveIsa(ctx)).rope_rotate;
  const int rope_threads = Threads(ctx, src.nelements());
  ParallelFor(rope_threads, rope_threads > 1, n_items, Schedule::kStatic, 1, [&](int64_t it, int) {
    const int64_t i2 = it % ne2, i3 = it / ne2;
    std::vector<float> own;
    const float* cache = shared_cache;
    if (cache == nullptr) {
      own.resize(static_cast<size_t>(n_dims));
      fill_cache(positions[i2], own.data());
      cache = own.data();
    }
    for (int64_t i1 = 0; i1 < ne1; ++i1) {
      const char* s = At(src, 0, i1, i2, i3);
      char* d = At(dst, 0, i1, i2, i3);
      if (src.nb[0] == 4 && dst.nb[0] == 4) {  // contiguous rows: plain indexing (same arithmetic)
        const float* x = reinterpret_cast<const float*>(s);
        float* y = reinterpret_cast<float*>(d);
        rotate(n_dims, neox, cache, x, y);
        if (y != x)
          for (int64_t i0 = n_dims; i0 < ne0; ++i0) y[i0] = x[i0];
        continue;
      }
      auto ld = [&](int64_t i) {
        float v;
        std::memcpy(&v, s + i * src.nb[0], 4);
        return v;
      };
      auto st = [&](int64_t i, float v) { std::memcpy(d + i * dst.nb[0], &v, 4); };
      for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const float c = cache[i0], sn = cache[i0 + 1];
        const int64_t a = neox ? i0 / 2 : i0;
        const int64_t b = neox ? i0 / 2 + n_dims / 2 : i0 + 1;
        const float x0 = ld(a), x1 = ld(b);
        st(a, std::fma(x0, c, -(x1 * sn)));
        st(b, std::fma(x0, sn, x1 * c));
      }
      for (int64_t i0 = n_dims; i0 < ne0; ++i0) st(i0, ld(i0));
    }
  });
  return Status::Ok();
}

Status SoftMax(ComputeContext& ctx, const TensorView& src, const TensorView& mask, TensorView& dst,
               float scale, float max_bias) {
  const char* op = "SOFT_MAX";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, op, "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const bool has_mask = mask.data != nullptr;
  if (has_mask) {
    STOWAGE_CPU_NEED(mask.type == GgmlType::F32 || mask.type == GgmlType::F16, op,
                     "mask: expected F32 or F16, got " + ShapeString(mask));
    STOWAGE_CPU_NEED(mask.ne[0] == src.ne[0] && mask.ne[1] >= src.ne[1] && mask.ne[2] > 0 &&
                         src.ne[2] % mask.ne[2] == 0 && mask.ne[3] > 0 && src.ne[3] % mask.ne[3] == 0,
                     op, "mask " + ShapeString(mask) + " does not fit src " + ShapeString(src));
  }
  const int64_t ne00 = src.ne[0];
  const uint32_t n_head = uint32_t(src.ne[2]);
  const uint32_t n_head_log2 = n_head > 0 ? 1u << uint32_t(std::floor(std::log2(double(n_head)))) : 1u;
  const float m0 = std::pow(2.0f, -(max_bias) / n_head_log2);
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_head_log2);
  // Contiguous rows at the AVX2/AVX-512 levels: the row kernels with ggml's structure at that level
  // (ggml_v_expf's algorithm; bit-identical to llama.cpp's CPU backend); otherwise (strided rows,
  // the scalar level) expf element by element, as ggml's scalar build.
  const IsaLevel isa = EffectiveIsa(ctx);
  const bool simd_rows = isa >= IsaLevel::kAvx2 && src.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float) &&
                         (!has_mask || mask.nb[0] == (mask.type == GgmlType::F16 ? 2u : 4u));
  (void)simd_rows;
  (void)isa;
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    // ALiBi slope of head i2 (ggml soft_max_f32).
    const uint32_t h = uint32_t(i2);
    const float slope = max_bias > 0.0f ? (h < n_head_log2 ? std::pow(m0, float(h + 1))
                                                           : std::pow(m1, float(2 * (h - n_head_log2) + 1)))
                                        : 1.0f;
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, i1, i2, i3);
    const char* m = has_mask ? At(mask, 0, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : nullptr;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    if (simd_rows) {
      const auto row = isa >= IsaLevel::kAvx512 ? avx512::SoftMaxRowF32 : avx2::SoftMaxRowF32;
      row(reinterpret_cast<const float*>(s), m, has_mask && mask.type == GgmlType::F16, scale, slope,
          reinterpret_cast<float*>(d), ne00);
      return;
    }
#endif
    float max = -INFINITY;
    for (int64_t i0 = 0; i0 < ne00; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      float w = x * scale;
      if (m) w = std::fma(slope, LoadF(mask.type, m, mask.nb[0], i0), w);
      std::memcpy(d + i0 * dst.nb[0], &w, 4);
      max = std::max(max, w);
    }
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < ne00; ++i0) {
      float w;
      std::memcpy(&w, d + i0 * dst.nb[0], 4);
      const float e = std::exp(w - max);
      sum += double(e);
      std::memcpy(d + i0 * dst.nb[0], &e, 4);
    }
    const float inv = float(1.0 / sum);
    for (int64_t i0 = 0; i0 < ne00; ++i0) {
      float e;
      std::memcpy(&e, d + i0 * dst.nb[0], 4);
      e *= inv;
      std::memcpy(d + i0 * dst.nb[0], &e, 4);
    }
  });
  return Status::Ok();
}

namespace {
bool IsPlainFloat(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }
bool IsCpyQuantTarget(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL;
}
}  // namespace

bool SupportsCpyTypes(GgmlType src, GgmlType dst) {
  return IsPlainFloat(src) && (IsPlainFloat(dst) || (src == GgmlType::F32 && IsCpyQuantTarget(dst)));
}

bool SupportsGetRowsType(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

Status Cpy(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  const char* op = "CPY";
  const GgmlType st = src.type, dt = dst.type;
  STOWAGE_CPU_NEED(SupportsCpyTypes(st, dt), op,
                   "conversion " + ShapeString(src) + " -> " + ShapeString(dst) + " is not supported");
  const bool dst_quant = IsCpyQuantTarget(dt);
  for (int i = 0; i < 4; ++i)
    STOWAGE_CPU_NEED(src.ne[i] >= 0 && dst.ne[i] >= 0, op,
                     "negative dimension in " + ShapeString(src) + " -> " + ShapeString(dst));
  STOWAGE_CPU_NEED(src.nelements() == dst.nelements(), op,
                   "src " + ShapeString(src) + " and dst " + ShapeString(dst) + " differ in element count");
  const int64_t ne0 = dst.ne[0];
  if (dst_quant) {
    STOWAGE_CPU_NEED(ne0 % GetTypeTraits(dt).block_size == 0 && dst.nb[0] == GetTypeTraits(dt).type_size, op,
                     "quantized dst " + ShapeString(dst) + " needs contiguous rows of whole blocks");
  }
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const bool same_rows = src.ne[0] == dst.ne[0];
  bool same_shape = true;
  for (int i = 0; i < 4; ++i) same_shape = same_shape && src.ne[i] == dst.ne[i];
  if (same_shape && !dst_quant && ne0 < 16 && dst.nelements() < kMinParallelElements) {
    // Short rows (the transposed V store of token generation writes n_embd_v rows of one element):
    // element by element, without a per-row buffer and converter call. Same conversions as below
    // (FloatToHalf is the F16C conversion's IEEE round-to-nearest-even).
    // F32 -> F16 one-element rows (that V store): one strided conversion along ne1 (F16C), ~10x
    // faster than the element loop below.
    const bool v_store = st == GgmlType::F32 && dt == GgmlType::F16 && ne0 == 1;
    const CvtF32F16StridedFn cvt = v_store ? GetRowKernels(EffectiveIsa(ctx)).cvt_f32_f16_strided : nullptr;
    for (int64_t i3 = 0; i3 < dst.ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < dst.ne[2]; ++i2) {
        if (v_store) {
          cvt(dst.ne[1], At(src, 0, 0, i2, i3), src.nb[1], At(dst, 0, 0, i2, i3), dst.nb[1]);
          continue;
        }
        for (int64_t i1 = 0; i1 < dst.ne[1]; ++i1) {
          const char* s = At(src, 0, i1, i2, i3);
          char* d = At(dst, 0, i1, i2, i3);
          for (int64_t i0 = 0; i0 < ne0; ++i0) {
            const float v = LoadF(st, s, src.nb[0], i0);
            char* p = d + i0 * dst.nb[0];
            if (dt == GgmlType::F32)
              std::memcpy(p, &v, 4);
            else {
              const uint16_t h = dt == GgmlType::F16 ? FloatToHalf(v) : FloatToBf16(v);
              std::memcpy(p, &h, 2);
            }
          }
        }
      }
    return Status::Ok();
  }
  const int nt = std::max(1, ctx.n_threads);
  const size_t es = GetTypeTraits(dt).type_size;
  bool dst_dense = !dst_quant && dst.nb[0] == es;
  for (int i = 1; i < 4; ++i) dst_dense = dst_dense && dst.nb[i] == dst.nb[i - 1] * size_t(dst.ne[i - 1]);
  if (!same_rows && dst_dense && src.ne[0] > 0) {
    // Rows of different length into a contiguous dst (CONT of a permuted view, e.g. kqv_merged):
    // dst element l is src element l in ggml order, so each src row fills ne00 consecutive dst
    // elements. Per src row instead of per element index arithmetic; same conversions as below.
    const int64_t ne00 = src.ne[0], nr = src.nrows();
    ParallelFor(nt, dst.nelements() >= kMinParallelElements, nr, Schedule::kStatic, 1, [&](int64_t r, int) {
      const int64_t i1 = r % src.ne[1], i2 = (r / src.ne[1]) % src.ne[2], i3 = r / (src.ne[1] * src.ne[2]);
      const char* s = At(src, 0, i1, i2, i3);
      char* d = static_cast<char*>(dst.data) + size_t(r) * size_t(ne00) * es;
      if (st == dt && src.nb[0] == es) {
        std::memcpy(d, s, size_t(ne00) * es);
        return;
      }
      for (int64_t i0 = 0; i0 < ne00; ++i0) {
        const float v = LoadF(st, s, src.nb[0], i0);
        if (dt == GgmlType::F32)
          std::memcpy(d + i0 * 4, &v, 4);
        else {
          const uint16_t h = dt == GgmlType::F16 ? FloatToHalf(v) : FloatToBf16(v);
          std::memcpy(d + i0 * 2, &h, 2);
        }
      }
    });
    return Status::Ok();
  }
  if (ctx.work.size() < size_t(nt) * size_t(ne0) * sizeof(float))
    ctx.work.resize(size_t(nt) * size_t(ne0) * sizeof(float));
  float* scratch = reinterpret_cast<float*>(ctx.work.data());
  const IsaLevel isa = EffectiveIsa(ctx);
  // Each dst row r (ggml order) takes the elements r*ne0 .. r*ne0+ne0-1 of src (ggml order).
  const int64_t nr = dst.nrows();
  ParallelFor(nt, dst.nelements() >= kMinParallelElements, nr, Schedule::kStatic, 1, [&](int64_t r, int tid) {
    float* buf = scratch + size_t(tid) * size_t(ne0);
    if (same_rows) {
      const int64_t i1 = r % src.ne[1], i2 = (r / src.ne[1]) % src.ne[2], i3 = r / (src.ne[1] * src.ne[2]);
      const char* s = At(src, 0, i1, i2, i3);
      if (st == GgmlType::F32 && src.nb[0] == 4) {
        std::memcpy(buf, s, size_t(ne0) * 4);
      } else {
        for (int64_t i0 = 0; i0 < ne0; ++i0) buf[i0] = LoadF(st, s, src.nb[0], i0);
      }
    } else {
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        int64_t l = r * ne0 + i0;
        const int64_t j0 = l % src.ne[0];
        l /= src.ne[0];
        const int64_t j1 = l % src.ne[1];
        l /= src.ne[1];
        const int64_t j2 = l % src.ne[2];
        l /= src.ne[2];
        buf[i0] = LoadF(st, At(src, 0, j1, j2, l), src.nb[0], j0);
      }
    }
    const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    char* d = At(dst, 0, i1, i2, i3);
    if (dst_quant || dst.nb[0] == es) {
      if (dt == GgmlType::F16) {
        GetTypeKernels(GgmlType::F16, isa)->from_float(buf, d, ne0);  // F16C when available
      } else {
        (void)QuantizeRow(dt, buf, d, ne0);
      }
    } else {
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        char* p = d + i0 * dst.nb[0];
        if (dt == GgmlType::F32)
          std::memcpy(p, &buf[i0], 4);
        else {
          const uint16_t h = dt == GgmlType::F16 ? FloatToHalf(buf[i0]) : FloatToBf16(buf[i0]);
          std::memcpy(p, &h, 2);
        }
      }
    }
  });
  return Status::Ok();
}

Status SetRows(ComputeContext& ctx, const TensorView& src, const TensorView& idx, TensorView& dst) {
  const char* op = "SET_ROWS";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_CPU_NEED(idx.type == GgmlType::I64 || idx.type == GgmlType::I32, op,
                   "idx: expected I64 or I32, got " + ShapeString(idx));
  STOWAGE_CPU_NEED(SupportsCpyTypes(GgmlType::F32, dst.type), op,
                   "dst type " + ShapeString(dst) + " is not supported");
  for (int i = 0; i < 4; ++i)
    STOWAGE_CPU_NEED(src.ne[i] >= 0 && dst.ne[i] >= 0 && idx.ne[i] >= 0, op, "negative dimension");
  STOWAGE_CPU_NEED(src.ne[0] == dst.ne[0] && src.ne[2] == dst.ne[2] && src.ne[3] == dst.ne[3], op,
                   "src " + ShapeString(src) + " and dst " + ShapeString(dst) + " differ in dims 0, 2 or 3");
  STOWAGE_CPU_NEED(idx.ne[0] == src.ne[1] && idx.ne[3] == 1 && idx.ne[1] > 0 && idx.ne[2] > 0 &&
                       dst.ne[2] % idx.ne[1] == 0 && dst.ne[3] % idx.ne[2] == 0,
                   op, "idx " + ShapeString(idx) + " does not fit src " + ShapeString(src));
  const GgmlTypeTraits& tt = GetTypeTraits(dst.type);
  const int64_t ne0 = dst.ne[0];
  if (tt.is_quantized) {
    STOWAGE_CPU_NEED(ne0 % tt.block_size == 0 && dst.nb[0] == tt.type_size, op,
                     "quantized dst " + ShapeString(dst) + " needs contiguous rows of whole blocks");
  }
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(idx, op, "idx"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  auto index_at = [&](int64_t i, int64_t j, int64_t k) {
    const char* p = At(idx, i, j, k, 0);
    if (idx.type == GgmlType::I32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      return int64_t(v);
    }
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  for (int64_t k = 0; k < idx.ne[2]; ++k)
    for (int64_t j = 0; j < idx.ne[1]; ++j)
      for (int64_t i = 0; i < idx.ne[0]; ++i) {
        const int64_t r = index_at(i, j, k);
        if (r < 0 || r >= dst.ne[1]) {
          return OutOfRange("SET_ROWS: idx[" + std::to_string(i) + "," + std::to_string(j) + "," +
                            std::to_string(k) + "] = " + std::to_string(r) + " is outside [0, " +
                            std::to_string(dst.ne[1]) + ")");
        }
      }
  const int nt = std::max(1, ctx.n_threads);
  if (ctx.work.size() < size_t(nt) * size_t(ne0) * sizeof(float))
    ctx.work.resize(size_t(nt) * size_t(ne0) * sizeof(float));
  float* scratch = reinterpret_cast<float*>(ctx.work.data());
  const FromFloatFn to_f16 = GetTypeKernels(GgmlType::F16, EffectiveIsa(ctx))->from_float;
  const int64_t nr = src.nrows();
  ParallelFor(nt, src.nelements() >= kMinParallelElements, nr, Schedule::kStatic, 1, [&](int64_t r, int tid) {
    const int64_t i1 = r % src.ne[1], i2 = (r / src.ne[1]) % src.ne[2], i3 = r / (src.ne[1] * src.ne[2]);
    const int64_t row = index_at(i1, i2 % idx.ne[1], i3 % idx.ne[2]);
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, row, i2, i3);
    float* buf = scratch + size_t(tid) * size_t(ne0);
    for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(&buf[i0], s + i0 * src.nb[0], 4);
    if (dst.type == GgmlType::F16 && dst.nb[0] == 2) {
      to_f16(buf, d, ne0);
    } else if (tt.is_quantized || dst.nb[0] == tt.type_size) {
      (void)QuantizeRow(dst.type, buf, d, ne0);
    } else {
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        char* p = d + i0 * dst.nb[0];
        if (dst.type == GgmlType::F32)
          std::memcpy(p, &buf[i0], 4);
        else {
          const uint16_t h = dst.type == GgmlType::F16 ? FloatToHalf(buf[i0]) : FloatToBf16(buf[i0]);
          std::memcpy(p, &h, 2);
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
