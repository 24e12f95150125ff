// The state of a Tokenizer (internal), filled by FromGguf (load.cpp) and read by the
// tokenize/detokenize code. Immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "pre_tokenizer.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage {

struct Tokenizer::Impl {
  Impl() = default;
  Impl(const Impl&) = delete;  // token_to_id views this object's token texts
  Impl& operator=(const Impl&) = delete;

  struct Token {
    std::string text;
    float score = 0.0f;
    uint32_t attr = kTokenAttrNormal;
  };

  VocabType type = VocabType::kSpm;
  std::string pre = "default";
  tokenizer::PreTokenizer pre_type = tokenizer::PreTokenizer::kDefault;

  std::vector<Token> tokens;
  /// Keys view the `text` of `tokens` (sized once in FromGguf, never reallocated).
  std::unordered_map<std::string_view, int32_t> token_to_id;
  /// BPE merges: "left right" -> rank (position in tokenizer.ggml.merges).
  std::unordered_map<std::string, int32_t> bpe_ranks;
  size_t max_token_len = 0;  ///< longest token text in bytes (WPM longest match)

  int32_t bos = kTokenNull, eos = kTokenNull, eot = kTokenNull, eom = kTokenNull;
  int32_t unk = kTokenNull, sep = kTokenNull, pad = kTokenNull, mask = kTokenNull;
  int32_t fim_pad = kTokenNull, fim_rep = kTokenNull, fim_sep = kTokenNull;
  int32_t nl = kTokenNull;

  bool add_space_prefix = false;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;
  bool ignore_merges = false;  ///< BPE: a word that is a token is emitted whole (llama3 family)
  bool clean_spaces = false;   ///< Detokenize: llama.cpp's space clean-up
  bool lowercase = true;       ///< WPM normalizer
  bool strip_accents = true;   ///< WPM normalizer

  std::unordered_set<int32_t> eog;
  /// What FromGguf accepted with a fallback (Tokenizer::warnings).
  std::vector<std::string> warnings;
  /// Control, user-defined and unknown tokens, longest text first (ties: lower id first).
  std::vector<int32_t> special_tokens;

  bool InRange(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < tokens.size(); }
  int32_t Find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? kTokenNull : it->second;
  }
  /// SPM byte fallback: "<0xNN>", else the byte itself as a token, else kTokenNull
  /// (llama.cpp llama_vocab::byte_to_token).
  int32_t ByteToToken(uint8_t byte) const;
  /// Tokenizes `text` with the vocabulary algorithm only (no special-token partition, no BOS).
  /// `prefix_space` (SPM): prepend the add_space_prefix space.
  void TokenizeFragment(const std::string& text, bool prefix_space, std::vector<int32_t>& out) const;
};

}  // namespace stowage
