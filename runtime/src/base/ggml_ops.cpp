#include "stowage/runtime/ggml_ops.h"

#include <string>

namespace stowage {
namespace {
constexpr const char* kNames[] = {
#define STOWAGE_OP_NAME(name) #name,
    STOWAGE_GGML_OPS(STOWAGE_OP_NAME)
#undef STOWAGE_OP_NAME
};
}  // namespace

const char* GgmlOpName(GgmlOp op) {
  const auto i = static_cast<size_t>(op);
  return i < static_cast<size_t>(GgmlOp::kCount) ? kNames[i] : "?";
}

Result<GgmlOp> ParseGgmlOp(std::string_view name) {
  for (size_t i = 0; i < static_cast<size_t>(GgmlOp::kCount); ++i)
    if (name == kNames[i]) return static_cast<GgmlOp>(i);
  return InvalidArgument("unknown ggml op '" + std::string(name) + "'");
}

}  // namespace stowage
