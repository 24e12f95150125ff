// CPU backend: element-wise ops: ADD/MUL/DIV (src1 broadcast), SCALE, SIGMOID/SILU/GELU/TANH,
// SWIGLU/GEGLU. Numerics follow ggml-cpu/ops.cpp, unary-ops.cpp and vec.h (GELU through fp16 like
// GGML_GELU_FP16; TANH is libm's tanhf per element as unary-ops.cpp op_tanh).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

namespace {

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

// `f(x, g)`: one element of the result from the gate x and the value g.
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
      for (int64_t i0 = 0; i0 < ne0; ++i0) y[i0] = f(x[i0], g[i0]);
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
      const float y = f(x, g);
      std::memcpy(d + i0 * dst.nb[0], &y, 4);
    }
  });
  return Status::Ok();
}

// SiLU of one element: the row kernels' scalar reference (kernels.h SiluRowF32), -inf -> -0.
inline float SiluF32(float x) { return x == -INFINITY ? -0.0f : x / (1.0f + std::exp(-x)); }

// ggml's GGML_GELU_FP16 table (ggml-cpu.c ggml_cpu_init: ggml_table_gelu_f16): ggml_gelu_f32, the
// tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), of every fp16 value, stored
// as fp16. `contracted`: as llama.cpp's x86 builds compile it (GCC contracts with FMA: 1 + 0.044715 x
// x is fma(0.044715 x, x, 1), one rounding; a few fp16 entries differ from the plain expression's),
// for ComputeContext::llamacpp_numerics; else the plain expression (the default path's bits).
const fp16_t* GeluTable(bool contracted) {
  auto make = [](bool fma) {
    std::vector<fp16_t> t(size_t(1) << 16);
    const float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    const float kCoefA = 0.044715f;
    for (size_t i = 0; i < t.size(); ++i) {
      const float x = HalfToFloat(fp16_t(i));
      const float inner = fma ? std::fma(kCoefA * x, x, 1.0f) : 1.0f + kCoefA * x * x;
      t[i] = FloatToHalf(0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * inner)));
    }
    return t;
  };
  static const std::vector<fp16_t> plain = make(false), fused = make(true);  // immutable after first use
  return contracted ? fused.data() : plain.data();
}

// GELU of one element as ggml_vec_gelu_f32 with GGML_GELU_FP16: x <= -10 gives 0, x >= 10 gives x,
// else the table entry of x rounded to fp16.
inline float GeluF32(const fp16_t* table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return HalfToFloat(table[FloatToHalf(x)]);
}

template <typename F>
Status BinaryBroadcast(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst,
                       const char* op, F&& f) {
  STOWAGE_RETURN_IF_ERROR(NeedType(src0, GgmlType::F32, op, "src0"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedRepeatable(src1, src0, op, "src1", "src0"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src0, dst, op, "src0", "dst"));
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

}  // namespace

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
  if (!ctx.llamacpp_numerics) return UnaryF32(ctx, src, dst, "SCALE", [s, b](float x) { return x * s + b; });
  // ggml_compute_forward_scale_f32: b == 0 is ggml_vec_scale_f32 (x * s; -0 stays -0), else
  // ggml_vec_mad1_f32, whose SIMD body and (FMA-contracted) tail both compute fma(x, s, b).
  if (b == 0.0f) return UnaryF32(ctx, src, dst, "SCALE", [s](float x) { return x * s; });
  return UnaryF32(ctx, src, dst, "SCALE", [s, b](float x) { return std::fma(x, s, b); });
}

Status Fill(ComputeContext& ctx, const TensorView& src, TensorView& dst, float c) {
  return UnaryF32(ctx, src, dst, "FILL", [c](float) { return c; });
}

Status Clamp(ComputeContext& ctx, const TensorView& src, TensorView& dst, float min, float max) {
  return UnaryF32(ctx, src, dst, "CLAMP", [min, max](float x) {
    const float below_max = x < max ? x : max;  // ggml's MIN: NaN compares false and gives max
    return below_max > min ? below_max : min;
  });
}

Status Silu(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  return UnaryF32(ctx, src, dst, "SILU", SiluF32, GetRowKernels(EffectiveIsa(ctx)).silu_row);
}

Status Gelu(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  const fp16_t* table = GeluTable(ctx.llamacpp_numerics);
  return UnaryF32(ctx, src, dst, "GELU", [table](float x) { return GeluF32(table, x); });
}

Status Tanh(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  return UnaryF32(ctx, src, dst, "TANH", [](float x) { return tanhf(x); });
}

namespace {

// One element of each GLU: the gate x, the value g. GELU then MUL is GeluTimes (GELU's table, then
// the product); GEGLU with llamacpp_numerics is GeGluLlama.
float SwiGluElement(float x, float g) { return SiluF32(x) * g; }
float GeluTimes(const fp16_t* table, float x, float g) { return GeluF32(table, x) * g; }
// ggml_vec_geglu_f32: x <= -10 gives +0 whatever the sign of g (not 0 * g = -0 for g < 0).
float GeGluLlama(const fp16_t* table, float x, float g) { return x <= -10.0f ? 0.0f : GeluF32(table, x) * g; }

}  // namespace

Status SwiGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst) {
  return GluF32(ctx, a, b, dst, "SWIGLU", SwiGluElement, GetRowKernels(EffectiveIsa(ctx)).swiglu_row);
}

Status GeGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst) {
  const fp16_t* table = GeluTable(ctx.llamacpp_numerics);
  if (!ctx.llamacpp_numerics)
    return GluF32(ctx, a, b, dst, "GEGLU", [table](float x, float g) { return GeluTimes(table, x, g); });
  return GluF32(ctx, a, b, dst, "GEGLU", [table](float x, float g) { return GeGluLlama(table, x, g); });
}

void GluRow(const ComputeContext& ctx, MulMatGluKind glu, int64_t n, const float* gate, const float* up,
            float* y) {
  const RowKernels& rk = GetRowKernels(EffectiveIsa(ctx));
  switch (glu) {
    case MulMatGluKind::kSwiGlu:
      return rk.swiglu_row(n, gate, up, y);
    case MulMatGluKind::kSiluMul:  // SILU's row kernel, then MUL's product (BinaryBroadcast's a * b)
      rk.silu_row(n, gate, y);
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * up[i];
      return;
    case MulMatGluKind::kGeGlu:
      if (ctx.llamacpp_numerics) {
        const fp16_t* table = GeluTable(true);
        for (int64_t i = 0; i < n; ++i) y[i] = GeGluLlama(table, gate[i], up[i]);
        return;
      }
      [[fallthrough]];
    case MulMatGluKind::kGeluMul: {
      const fp16_t* table = GeluTable(ctx.llamacpp_numerics);
      for (int64_t i = 0; i < n; ++i) y[i] = GeluTimes(table, gate[i], up[i]);
      return;
    }
  }
}

}  // namespace stowage::cpu
