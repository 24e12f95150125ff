#include <cstdint>
#include <string>

#include "stowage/runtime/gguf_vocab.h"

namespace stowage {

Result<uint32_t> GgufVocabularySize(const GgufFile& g) {
  static constexpr const char* kTokens = "tokenizer.ggml.tokens";
  STOWAGE_ASSIGN_OR_RETURN(const std::string arch, g.GetStringOr("general.architecture", ""));
  const std::string size_key = arch + ".vocab_size";
  const bool has_size = !arch.empty() && g.Find(size_key) != nullptr;
  if (const GgufValue* tokens = g.Find(kTokens)) {
    STOWAGE_ASSIGN_OR_RETURN(std::vector<std::string_view> texts, g.GetStringArray(kTokens));
    if (texts.empty() || texts.size() > static_cast<size_t>(INT32_MAX))
      return g.KeyError(kTokens, "1.." + std::to_string(INT32_MAX) + " tokens", std::to_string(texts.size()));
    const uint32_t n = static_cast<uint32_t>(tokens->count);
    if (has_size) {
      STOWAGE_ASSIGN_OR_RETURN(const uint32_t size, g.GetU32(size_key));
      if (size != n)
        return g.KeyError(size_key, std::to_string(n) + " (the tokens of " + kTokens + ")",
                          std::to_string(size));
    }
    return n;
  }
  // llama.cpp: only a model whose tokenizer is "none" / "no_vocab" goes without the token list.
  STOWAGE_ASSIGN_OR_RETURN(const std::string model, g.GetStringOr("tokenizer.ggml.model", ""));
  if (!model.empty() && model != "none" && model != "no_vocab")
    return NotFound(g.path() + ": missing key '" + kTokens + "' (the vocabulary of tokenizer.ggml.model '" +
                    model + "')");
  if (!has_size)
    return NotFound(g.path() + ": missing key '" + kTokens + "' (the vocabulary; a model without one gives " +
                    (arch.empty() ? std::string("<arch>") : arch) + ".vocab_size)");
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t size, g.GetU32(size_key));
  if (size == 0) return g.KeyError(size_key, "a positive token count", "0");
  return size;
}

}  // namespace stowage
