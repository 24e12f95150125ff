// CPU backend: SOFT_MAX with mask and ALiBi (ggml-cpu/ops.cpp soft_max_f32: the sum in double;
// the SIMD rows compute ggml_v_expf's algorithm).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

Status SoftMax(ComputeContext& ctx, const TensorView& src, const TensorView& mask, TensorView& dst,
               float scale, float max_bias, const TensorView& sinks) {
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
  const float* sink_of_head = nullptr;  // ggml_soft_max_add_sinks: one logit per head
  if (sinks.data != nullptr) {
    STOWAGE_CPU_NEED(
        sinks.type == GgmlType::F32 && sinks.ne[0] == src.ne[2] && sinks.nrows() == 1 && sinks.nb[0] == 4, op,
        "sinks " + ShapeString(sinks) + " must be contiguous F32 [n_head = " + std::to_string(src.ne[2]) +
            "]");
    sink_of_head = static_cast<const float*>(sinks.data);
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
    const float* sink = sink_of_head ? sink_of_head + i2 : nullptr;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    if (simd_rows) {
      const auto row = isa >= IsaLevel::kAvx512 ? avx512::SoftMaxRowF32 : avx2::SoftMaxRowF32;
      row(reinterpret_cast<const float*>(s), m, has_mask && mask.type == GgmlType::F16, scale, slope,
          reinterpret_cast<float*>(d), ne00, sink);
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
    if (sink) max = std::max(max, *sink);  // as if the sink were one more logit of the row
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < ne00; ++i0) {
      float w;
      std::memcpy(&w, d + i0 * dst.nb[0], 4);
      const float e = std::exp(w - max);
      sum += double(e);
      std::memcpy(d + i0 * dst.nb[0], &e, 4);
    }
    if (sink) sum += double(std::exp(*sink - max));
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

}  // namespace stowage::cpu
