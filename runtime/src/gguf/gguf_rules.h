// Internal to the GGUF reader and writer (runtime/src/gguf): the format rules both sides apply, in
// one place so the reader accepts exactly what the writer may produce.
#pragma once

#include <cstddef>

#include "stowage/runtime/gguf.h"

namespace stowage::gguf_rules {

/// ggml's GGML_MAX_NAME: a tensor name and its terminator fit in 64 bytes, so a name has at most
/// 63 bytes (ggml gguf.cpp gguf_init_from_file_impl rejects longer ones; the writer refuses them).
inline constexpr size_t kMaxTensorName = 64;

/// Bytes of one element of a scalar value type in the file (GGUF spec, ggml gguf.cpp
/// gguf_type_size): 1 for u8/i8/bool, 2 for u16/i16, 4 for u32/i32/f32, 8 for u64/i64/f64;
/// 0 for STRING, ARRAY and values outside the enum (which have no fixed size).
inline size_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace stowage::gguf_rules
