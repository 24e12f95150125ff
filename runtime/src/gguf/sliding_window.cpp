#include <cstdint>
#include <optional>
#include <string>

#include "stowage/runtime/gguf_sliding_window.h"

namespace stowage {

Result<std::optional<uint32_t>> GgufSlidingWindow(const GgufFile& gguf) {
  STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf.GetString("general.architecture"));
  const std::string key = arch + ".attention.sliding_window";
  if (gguf.Find(key) != nullptr) {
    STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_swa, gguf.GetU32(key));
    return std::optional<uint32_t>(n_swa);
  }
  // llama.cpp (2026) llama_model_gemma2::load_arch_hparams: "default value of gemma 2";
  // llama_model_gemma3: no window without the key.
  if (arch == "gemma2") return std::optional<uint32_t>(4096);
  if (arch == "gemma3") return std::optional<uint32_t>();
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_layer, gguf.GetU32Or(arch + ".block_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_ctx_train, gguf.GetU32Or(arch + ".context_length", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head, gguf.GetU32Or(arch + ".attention.head_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head_kv,
                           gguf.GetU32Or(arch + ".attention.head_count_kv", n_head));
  if ((n_layer == 32 || n_layer == 40) && n_ctx_train == 4096) return std::optional<uint32_t>(2047);
  if (n_layer == 32 && n_head_kv == 32 && n_ctx_train == 131072) return std::optional<uint32_t>(262144);
  if (n_layer == 40 && n_ctx_train == 131072) return std::optional<uint32_t>(131072);
  return std::optional<uint32_t>();
}

}  // namespace stowage
