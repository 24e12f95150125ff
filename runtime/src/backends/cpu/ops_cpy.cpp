// CPU backend: CPY/CONT between F32/F16/BF16 and into the quantized CPY targets (ggml-cpu/ops.cpp
// dup / cpy: rows quantized with the reference quantizers).
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

bool IsPlainFloat(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }
bool IsCpyQuantTarget(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL;
}

}  // namespace

bool SupportsCpyTypes(GgmlType src, GgmlType dst) {
  return IsPlainFloat(src) && (IsPlainFloat(dst) || (src == GgmlType::F32 && IsCpyQuantTarget(dst)));
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

Status Repeat(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  const char* op = "REPEAT";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  for (int i = 0; i < 4; ++i)
    STOWAGE_CPU_NEED(src.ne[i] > 0 && dst.ne[i] % src.ne[i] == 0, op,
                     "dst " + ShapeString(dst) + " is not a repetition of src " + ShapeString(src));
  if (dst.nelements() == 0) return Status::Ok();
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  const int64_t rows = dst.ne[1] * dst.ne[2] * dst.ne[3];
  const int threads = Threads(ctx, dst.nelements());
  ParallelFor(threads, threads > 1, rows, Schedule::kStatic, 1, [&](int64_t r, int) {
    const int64_t i1 = r % dst.ne[1], i2 = r / dst.ne[1] % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    const char* s = At(src, 0, i1 % src.ne[1], i2 % src.ne[2], i3 % src.ne[3]);
    char* d = At(dst, 0, i1, i2, i3);
    for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0)
      std::memcpy(d + i0 * dst.nb[0], s + (i0 % src.ne[0]) * src.nb[0], sizeof(float));
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
