// CPU backend: the expert ops of gpt-oss (ggml-cpu/ops.cpp ggml_compute_forward_add_id_f32 and
// ggml_compute_forward_swiglu_oai_f32): both are plain per-element loops there, computed here with
// the same operations in the same order, so they give ggml's bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

namespace {

// ggml_compute_forward_swiglu_oai_f32's element: the gate clamped from above, the value to
// [-limit, limit], then gate * sigmoid(alpha * gate) * (value + 1).
inline float SwiGluOaiF32(float g, float u, float alpha, float limit) {
  const float x = std::min(g, limit);
  const float y = std::clamp(u, -limit, limit);
  const float out_glu = x / (1.f + std::exp(alpha * (-x)));
  return out_glu * (y + 1.f);
}

}  // namespace

Status AddId(ComputeContext& ctx, const TensorView& a, const TensorView& b, const TensorView& ids,
             TensorView& dst) {
  const char* op = "ADD_ID";
  STOWAGE_RETURN_IF_ERROR(NeedType(a, GgmlType::F32, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedType(b, GgmlType::F32, op, "b"));
  STOWAGE_RETURN_IF_ERROR(NeedType(ids, GgmlType::I32, op, "ids"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(a, dst, op, "a", "dst"));
  STOWAGE_CPU_NEED(b.ne[0] == a.ne[0] && ids.ne[0] == a.ne[1] && ids.ne[1] == a.ne[2], op,
                   "a " + ShapeString(a) + ", b " + ShapeString(b) + " and ids " + ShapeString(ids) +
                       " do not fit (a.ne0 == b.ne0, [a.ne1, a.ne2] == [ids.ne0, ids.ne1])");
  STOWAGE_CPU_NEED(a.nb[0] == 4 && b.nb[0] == 4 && dst.nb[0] == 4, op, "rows must be contiguous");
  STOWAGE_RETURN_IF_ERROR(NeedData(a, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedData(b, op, "b"));
  STOWAGE_RETURN_IF_ERROR(NeedData(ids, op, "ids"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  // The ids first: on error nothing has been written.
  for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
    for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
      int32_t id;
      std::memcpy(&id, static_cast<const char*>(ids.data) + i1 * ids.nb[0] + i2 * ids.nb[1], 4);
      if (id < 0 || id >= b.ne[1])
        return OutOfRange("ADD_ID: id " + std::to_string(id) + " at [" + std::to_string(i1) + ", " +
                          std::to_string(i2) + "] is outside [0, " + std::to_string(b.ne[1]) + ")");
    }
  const int64_t ne0 = a.ne[0];
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    int32_t id;
    std::memcpy(&id, static_cast<const char*>(ids.data) + i1 * ids.nb[0] + i2 * ids.nb[1], 4);
    const float* x = reinterpret_cast<const float*>(At(a, 0, i1, i2, i3));
    const float* z = reinterpret_cast<const float*>(static_cast<const char*>(b.data) + id * b.nb[1]);
    float* y = reinterpret_cast<float*>(At(dst, 0, i1, i2, i3));
    for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = x[i0] + z[i0];
  });
  return Status::Ok();
}

Status SwiGluOai(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst, float alpha,
                 float limit) {
  const char* op = "SWIGLU_OAI";
  STOWAGE_RETURN_IF_ERROR(NeedType(a, GgmlType::F32, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedType(b, GgmlType::F32, op, "b"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(a, b, op, "a", "b"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(a, dst, op, "a", "dst"));
  STOWAGE_CPU_NEED(a.nb[0] == 4 && b.nb[0] == 4 && dst.nb[0] == 4, op, "rows must be contiguous");
  STOWAGE_RETURN_IF_ERROR(NeedData(a, op, "a"));
  STOWAGE_RETURN_IF_ERROR(NeedData(b, op, "b"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const int64_t ne0 = a.ne[0];
  ParallelRows(ctx, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
    const float* g = reinterpret_cast<const float*>(At(a, 0, i1, i2, i3));
    const float* u = reinterpret_cast<const float*>(At(b, 0, i1, i2, i3));
    float* y = reinterpret_cast<float*>(At(dst, 0, i1, i2, i3));
    for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = SwiGluOaiF32(g[i0], u[i0], alpha, limit);
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
