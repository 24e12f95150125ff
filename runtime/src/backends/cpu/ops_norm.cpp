// CPU backend: NORM, RMS_NORM and the fused RMS_NORM_MUL (ggml-cpu/ops.cpp: sums and sums of squares
// in double).
#include <cmath>
#include <cstring>
#include <string>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

namespace {

// 1 / sqrt(mean(x^2) + eps) of one row of F32 values at stride nb0, as RMS_NORM scales it.
// ggml_float (double) sums of x*x; eight partial sums (element i0 into sum i0 % 8), added at the end:
// the additions no longer wait for each other (the sequential sum was 2 us of latency per
// 2048-element row), the result is as accurate. Contiguous rows: SumSquares8 (SIMD lanes, the same
// bits; the scalar loop took 2.4 us per 2048 elements, AVX-512 ~0.4).
float RmsScale(SumSquares8Fn sum_squares, const char* s, size_t nb0, int64_t ne0, float eps) {
  double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i0 = 0;
  if (nb0 == 4) {
    i0 = ne0 / 8 * 8;
    sum_squares(i0, reinterpret_cast<const float*>(s), part);
  }
  for (; i0 < ne0; ++i0) {
    float x;
    std::memcpy(&x, s + i0 * nb0, 4);
    part[i0 % 8] += double(x * x);
  }
  const double sum =
      ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  const float mean = float(sum / double(ne0));
  return 1.0f / std::sqrt(mean + eps);
}

Status NeedRmsNormArgs(const TensorView& src, const TensorView& dst, const char* op) {
  STOWAGE_CPU_NEED(src.ne[0] > 0, op, "empty rows");
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, op, "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  return NeedData(dst, op, "dst");
}

}  // namespace

Status RmsNorm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps) {
  STOWAGE_RETURN_IF_ERROR(NeedRmsNormArgs(src, dst, "RMS_NORM"));
  const int64_t ne0 = src.ne[0];
  const SumSquares8Fn sum_squares = GetRowKernels(EffectiveIsa(ctx)).sum_squares8;
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* s = At(src, 0, i1, i2, i3);
    char* d = At(dst, 0, i1, i2, i3);
    const float scale = RmsScale(sum_squares, s, src.nb[0], ne0, eps);
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

Status RmsNormMul(ComputeContext& ctx, const TensorView& src, const TensorView& w, TensorView& dst,
                  float eps) {
  const char* op = "RMS_NORM_MUL";
  STOWAGE_RETURN_IF_ERROR(NeedRmsNormArgs(src, dst, op));
  STOWAGE_RETURN_IF_ERROR(NeedRepeatable(w, src, op, "w", "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(w, op, "w"));
  const int64_t ne0 = src.ne[0], nw0 = w.ne[0];
  const SumSquares8Fn sum_squares = GetRowKernels(EffectiveIsa(ctx)).sum_squares8;
  // The norm weight as long as the row (every model's): plain loops, as MUL's dense rows.
  const bool dense =
      src.nb[0] == 4 && dst.nb[0] == 4 && w.type == GgmlType::F32 && w.nb[0] == 4 && nw0 == ne0;
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const char* s = At(src, 0, i1, i2, i3);
    const char* pw = At(w, 0, i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3]);
    char* d = At(dst, 0, i1, i2, i3);
    const float scale = RmsScale(sum_squares, s, src.nb[0], ne0, eps);
    // RMS_NORM's float x * scale, then MUL's float product with the weight: the same two roundings.
    if (dense) {
      const float* x = reinterpret_cast<const float*>(s);
      const float* z = reinterpret_cast<const float*>(pw);
      float* y = reinterpret_cast<float*>(d);
      for (int64_t k = 0; k < ne0; ++k) {
        const float normed = x[k] * scale;
        y[k] = normed * z[k];
      }
      return;
    }
    for (int64_t i0 = 0; i0 < ne0; ++i0) {
      float x;
      std::memcpy(&x, s + i0 * src.nb[0], 4);
      const float normed = x * scale;
      const float y = normed * LoadF(w.type, pw, w.nb[0], i0 % nw0);
      std::memcpy(d + i0 * dst.nb[0], &y, 4);
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

}  // namespace stowage::cpu
