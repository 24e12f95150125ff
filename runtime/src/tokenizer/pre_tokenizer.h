// BPE pre-tokenizer (internal): splits text into words before the merges run, as the regexes of
// the model's tokenizer.json do. Each regex of llama.cpp's list for a `tokenizer.ggml.pre` value
// (llama.cpp llm_tokenizer_bpe) is implemented as a hand-written matcher with the semantics of an
// ECMAScript/PCRE match (leftmost alternative, greedy quantifiers); a list of regexes is applied
// in order, each one to every word the previous one produced, and the text between two matches
// becomes a word of its own (like llama.cpp unicode_regex_split).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stowage::tokenizer {

/// The regex lists (by llama.cpp's LLAMA_VOCAB_PRE_TYPE_* name).
enum class PreTokenizer {
  kDefault,  ///< [\p{P}\$\+<=>\^~\|]+ , GPT-2 , \p{N}+ , [0-9][0-9][0-9]
  kGpt2,     ///< 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  /// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
  ///   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  kQwen2,      ///< as kLlama3 with \p{N} (one digit per word)
  kStarcoder,  ///< \p{N} , GPT-2
  kFalcon,     ///< [\p{P}\$\+<=>\^~\|`]+ , GPT-2 , [0-9][0-9][0-9]
  /// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
  ///   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
  ///   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+   (as llama.cpp runs it: see
  ///   MatchCasedWords)
  kGpt4o,
  /// as kGpt4o without the contractions and with \p{N} (Mistral's tekken)
  kTekken,
  /// \p{N}{1,3} , [一-龥぀-ゟ゠-ヿ]+ , [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
  ///   |[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kDeepseek3,
  /// [\r\n] , \s?\p{L}+ , \s?\p{P}+ , [一-龥ࠀ-一가-퟿]+ , \p{N}
  kDeepseekCoder,
  kQwen35,     ///< as kQwen2 with [\p{L}\p{M}]+ words and [^\s\p{L}\p{M}\p{N}] symbols
  kSeedCoder,  ///< as kQwen2 without [\r\n]* after symbols
  kUfakzeka,   ///< as kQwen2 without the contractions
  kLaguna,     ///< [^\n]+|[\n]+ , Qwen2
  kMinicpm5,   ///< \p{N}{1,3} , as kLlama3 with \p{N}+
  kBloom,      ///<  ?[^(\s|.,!?…。，、।۔،)]+
  kViking,     ///< kBloom , \p{N}
};

/// Splits UTF-8 `text` into words (UTF-8, concatenating to `text` up to invalid bytes, which
/// become U+FFFD).
std::vector<std::string> PreTokenize(std::string_view text, PreTokenizer type);

}  // namespace stowage::tokenizer
