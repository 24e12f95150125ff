// CPU backend: the row converters DequantizeRow / QuantizeRow (ggml's to_float / from_float_ref
// per type) and the fp16 scalar conversions of ops.h.
#include <cstring>
#include <string>

#include "ops.h"
#include "quants.h"

namespace stowage::cpu {

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
    case GgmlType::MXFP4:
      DequantizeRowMXFP4(static_cast<const BlockMXFP4*>(src), dst, n);
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
    case GgmlType::MXFP4:
      QuantizeRowMXFP4(src, static_cast<BlockMXFP4*>(dst), n);
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

}  // namespace stowage::cpu
