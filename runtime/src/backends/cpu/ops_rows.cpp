// CPU backend: GET_ROWS (rows of any dequantizable type to F32) and SET_ROWS (F32 rows stored
// into a destination of a CPY target type at the rows an index names, the KV cache writes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

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
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
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
