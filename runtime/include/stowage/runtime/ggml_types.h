// ggml tensor element types: ids, names, block sizes and row sizes.
//
// Source: ggml/include/ggml.h `enum ggml_type` and the `type_traits` table of ggml/src/ggml.c
// (ggml-org/ggml, 2026). Ids are the on-disk ids of GGUF tensor infos (GGUF v3 spec). Removed ids
// (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4/_4_8/_8_8; 36-38: IQ4_NL_4_4/_4_8/_8_8) are not valid types.
// Quantized types store `block_size` elements in `type_size` bytes; a row of ne0 elements must
// have ne0 divisible by block_size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "stowage/runtime/status.h"

namespace stowage {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

/// One past the largest type id (ggml's GGML_TYPE_COUNT).
inline constexpr uint32_t kGgmlTypeCount = 42;

/// Static facts about one type (ggml's type_traits).
struct GgmlTypeTraits {
  const char* name;    ///< ggml's name: "f32", "q4_0", "q4_K", "iq4_xs", ...
  int64_t block_size;  ///< elements per block (1 for plain types)
  size_t type_size;    ///< bytes per block
  bool is_quantized;   ///< block-quantized (everything but F32/F16/BF16/F64/I*)
  bool valid;          ///< false for removed/unassigned ids
};

/// True when `id` names a type that exists today (not a removed or unassigned id).
bool IsValidGgmlType(uint32_t id);

/// Traits of `type`; `type` must be valid (see IsValidGgmlType).
const GgmlTypeTraits& GetTypeTraits(GgmlType type);

/// ggml's type name ("q4_K"); "unknown(<id>)" style names are never returned for valid types.
const char* GgmlTypeName(GgmlType type);

/// Parses a ggml type name, case-insensitively ("f16", "Q8_0", "q4_k").
/// Errors: kInvalidArgument naming the string.
Result<GgmlType> ParseGgmlType(std::string_view name);

/// Bytes of a row of `ne0` elements (ggml_row_size). `ne0` must be a multiple of the block size;
/// callers validate that first (returns 0 otherwise).
size_t RowSize(GgmlType type, int64_t ne0);

/// Bytes of a contiguous tensor of shape ne[0..3] (ggml_nbytes for a contiguous layout).
/// Returns 0 when ne0 is not a multiple of the block size. No overflow checks: see
/// TensorBytesChecked.
size_t TensorBytes(GgmlType type, const int64_t ne[4]);

/// Like TensorBytes, but reports overflow of size_t / int64 and block-size mismatch.
/// Errors: kOutOfRange ("element count overflows"), kInvalidArgument ("ne0 % block_size != 0").
Result<size_t> TensorBytesChecked(GgmlType type, const int64_t ne[4]);

}  // namespace stowage
