#include "stowage/runtime/ggml_types.h"

#include <array>
#include <cctype>
#include <limits>

namespace stowage {
namespace {

constexpr int64_t QK_K = 256;

std::array<GgmlTypeTraits, kGgmlTypeCount> MakeTable() {
  std::array<GgmlTypeTraits, kGgmlTypeCount> t{};
  for (auto& e : t) e = {"invalid", 0, 0, false, false};
  auto set = [&](GgmlType ty, const char* name, int64_t bs, size_t ts, bool q) {
    t[static_cast<uint32_t>(ty)] = {name, bs, ts, q, true};
  };
  set(GgmlType::F32, "f32", 1, 4, false);
  set(GgmlType::F16, "f16", 1, 2, false);
  set(GgmlType::Q4_0, "q4_0", 32, 18, true);
  set(GgmlType::Q4_1, "q4_1", 32, 20, true);
  set(GgmlType::Q5_0, "q5_0", 32, 22, true);
  set(GgmlType::Q5_1, "q5_1", 32, 24, true);
  set(GgmlType::Q8_0, "q8_0", 32, 34, true);
  set(GgmlType::Q8_1, "q8_1", 32, 36, true);
  set(GgmlType::Q2_K, "q2_K", QK_K, 84, true);
  set(GgmlType::Q3_K, "q3_K", QK_K, 110, true);
  set(GgmlType::Q4_K, "q4_K", QK_K, 144, true);
  set(GgmlType::Q5_K, "q5_K", QK_K, 176, true);
  set(GgmlType::Q6_K, "q6_K", QK_K, 210, true);
  set(GgmlType::Q8_K, "q8_K", QK_K, 292, true);
  set(GgmlType::IQ2_XXS, "iq2_xxs", QK_K, 66, true);
  set(GgmlType::IQ2_XS, "iq2_xs", QK_K, 74, true);
  set(GgmlType::IQ3_XXS, "iq3_xxs", QK_K, 98, true);
  set(GgmlType::IQ1_S, "iq1_s", QK_K, 50, true);
  set(GgmlType::IQ4_NL, "iq4_nl", 32, 18, true);
  set(GgmlType::IQ3_S, "iq3_s", QK_K, 110, true);
  set(GgmlType::IQ2_S, "iq2_s", QK_K, 82, true);
  set(GgmlType::IQ4_XS, "iq4_xs", QK_K, 136, true);
  set(GgmlType::I8, "i8", 1, 1, false);
  set(GgmlType::I16, "i16", 1, 2, false);
  set(GgmlType::I32, "i32", 1, 4, false);
  set(GgmlType::I64, "i64", 1, 8, false);
  set(GgmlType::F64, "f64", 1, 8, false);
  set(GgmlType::IQ1_M, "iq1_m", QK_K, 56, true);
  set(GgmlType::BF16, "bf16", 1, 2, false);
  set(GgmlType::TQ1_0, "tq1_0", QK_K, 54, true);
  set(GgmlType::TQ2_0, "tq2_0", QK_K, 66, true);
  set(GgmlType::MXFP4, "mxfp4", 32, 17, true);
  set(GgmlType::NVFP4, "nvfp4", 64, 36, true);
  set(GgmlType::Q1_0, "q1_0", 128, 18, true);
  return t;
}

const std::array<GgmlTypeTraits, kGgmlTypeCount>& Table() {
  static const auto table = MakeTable();
  return table;
}

}  // namespace

bool IsValidGgmlType(uint32_t id) { return id < kGgmlTypeCount && Table()[id].valid; }

const GgmlTypeTraits& GetTypeTraits(GgmlType type) {
  return Table()[static_cast<uint32_t>(type) < kGgmlTypeCount ? static_cast<uint32_t>(type) : 4];
}

const char* GgmlTypeName(GgmlType type) { return GetTypeTraits(type).name; }

Result<GgmlType> ParseGgmlType(std::string_view name) {
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
    const auto& tr = Table()[id];
    if (!tr.valid) continue;
    std::string_view n(tr.name);
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i)
      eq =
          std::tolower(static_cast<unsigned char>(n[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    if (eq) return static_cast<GgmlType>(id);
  }
  return InvalidArgument("unknown ggml type '" + std::string(name) + "'");
}

size_t RowSize(GgmlType type, int64_t ne0) {
  const auto& tr = GetTypeTraits(type);
  if (!tr.valid || tr.block_size <= 0 || ne0 % tr.block_size != 0) return 0;
  return tr.type_size * static_cast<size_t>(ne0 / tr.block_size);
}

size_t TensorBytes(GgmlType type, const int64_t ne[4]) {
  return RowSize(type, ne[0]) * static_cast<size_t>(ne[1]) * static_cast<size_t>(ne[2]) *
         static_cast<size_t>(ne[3]);
}

Result<size_t> TensorBytesChecked(GgmlType type, const int64_t ne[4]) {
  const auto& tr = GetTypeTraits(type);
  if (!tr.valid)
    return InvalidArgument("invalid ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  int64_t n = 1;
  for (int i = 0; i < 4; ++i) {
    if (ne[i] < 0) return OutOfRange("negative dimension ne" + std::to_string(i));
    if (ne[i] != 0 && n > std::numeric_limits<int64_t>::max() / ne[i])
      return OutOfRange("element count overflows int64");
    n *= ne[i];
  }
  if (ne[0] % tr.block_size != 0)
    return InvalidArgument("ne0 = " + std::to_string(ne[0]) + " is not a multiple of the " + tr.name +
                           " block size " + std::to_string(tr.block_size));
  const uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
  if (blocks != 0 && tr.type_size > std::numeric_limits<uint64_t>::max() / blocks)
    return OutOfRange("byte size overflows");
  return static_cast<size_t>(blocks * tr.type_size);
}

}  // namespace stowage
