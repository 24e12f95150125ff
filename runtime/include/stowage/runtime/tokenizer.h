// Tokenizer: text <-> token ids for the vocabulary stored in a GGUF file, matching llama.cpp's
// llama_vocab (src/llama-vocab.cpp) token for token.
//
// Vocabulary types (GGUF `tokenizer.ggml.model`):
//   "llama" -> SPM: SentencePiece BPE over token scores. Spaces become U+2581 ("▁"); a space is
//              prepended to the text and after every special token (add_space_prefix, default
//              true); text pieces that are not tokens fall back to byte tokens "<0xNN>".
//   "gpt2"  -> BPE: byte-level BPE. The text is split into words by the pre-tokenizer regexes of
//              `tokenizer.ggml.pre` (list below), every UTF-8 byte is mapped to
//              GPT-2's printable code point, then `tokenizer.ggml.merges` are applied by rank.
//   "bert"  -> WPM: BERT WordPiece. Lowercase + accent stripping (NFD, marks removed) unless
//              `tokenizer.ggml.normalizer.lowercase` / `.strip_accents` say otherwise; words split
//              at whitespace, punctuation and CJK ideographs; greedy longest match with the
//              word-initial "▁" prefix that llama.cpp's converter gives word-start tokens.
// Other models ("t5", "rwkv", "no_vocab", ...) are rejected with kUnimplemented.
//
// Supported `tokenizer.ggml.pre` values (BPE only; absent = "default", as in llama.cpp), by regex:
//   default:   "default" (e.g. aquila)
//   GPT-2:     gpt-2, phi-2, jina-es, jina-de, gigachat, jina-v2-es, jina-v2-de, a.x-4.0, mellum,
//              modern-bert, mpt, olmo, jais, trillion, granite-docling, exaone4, jina-v1-en,
//              jina-v2-code, roberta-bpe
//   Llama 3:   llama3, llama-v3, llama-bpe, falcon3, falcon-h1, pixtral, midm-2.0, lfm2,
//              jina-v5-nano, dbrx, smaug-bpe, glm4, chatglm-bpe
//   Qwen2:     qwen2, deepseek-r1-qwen, kormo, f2llmv2, stablelm2, megrez, hunyuan, solar-open,
//              grok-2, bailingmoe, bailingmoe2, llada-moe; variants: qwen35, seed-coder, ufakzeka,
//              laguna, minicpm5
//   StarCoder: starcoder, refact, codeshell, exaone, minerva-7b, mellum2, command-r, smollm
//   Falcon:    falcon
//   GPT-4o:    gpt-4o, llama4, kanana2, talkie, minimax-m2 (words split at case changes)
//   Tekken:    tekken
//   DeepSeek:  deepseek-v3, hunyuan-dense, joyai-llm, hy_v4; deepseek-coder
//   BLOOM:     bloom, gpt3-finnish, poro-chat; viking
// Any other value is kUnimplemented: "<file>: offset <N>: key 'tokenizer.ggml.pre': expected a
// pre-tokenizer Stowage implements, found unknown pre-tokenizer 'x'"
// (not implemented yet, among llama.cpp's: deepseek-llm, chameleon, jais-2, exaone-moe, kimi-k2,
// afmoe, superbpe, tiny_aya, youtu, spark2_5, granite-embed-multi, gemma4, ...).
//
// Unicode: the category tables (\p{L}, \p{N}, ...; lowercase; NFD) are generated from Unicode 15.1,
// llama.cpp's version (runtime/src/tokenizer/gen_unicode_data.py); unassigned code points are
// neither \p{C} nor anything else (llama.cpp's "undefined" flag: BERT keeps them, as [UNK]). A
// 4-byte UTF-8 sequence above U+10FFFF (which llama.cpp refuses with an exception from
// llama_tokenize) is one code point no class matches: U+FFFD's token where the vocabulary's
// byte-level encoding needs a character, [UNK] in BERT.
//
// Special tokens: every token whose `tokenizer.ggml.token_type` is CONTROL, USER_DEFINED or
// UNKNOWN is searched for verbatim in the text before the vocabulary algorithm runs (longest
// token text first), llama.cpp tokenizer_st_partition: user-defined tokens always, control and
// unknown tokens only when `parse_special` is true.
//
// Thread-safety: a Tokenizer is immutable after FromGguf; every method is const and may be called
// from any number of threads at once. Copies are cheap (shared, immutable state) and independent
// of the GgufFile, which may be closed after FromGguf returns. There is no default constructor
// (every Tokenizer holds a vocabulary): keep one in a std::optional when it is built later.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// "No token" (llama.cpp LLAMA_TOKEN_NULL): returned by the special-token accessors when the
/// vocabulary has no such token.
inline constexpr int32_t kTokenNull = -1;

/// Vocabulary algorithm (llama.cpp llama_vocab_type).
enum class VocabType { kSpm, kBpe, kWpm };

/// Per-token attribute bits (llama.cpp llama_token_attr), derived from `tokenizer.ggml.token_type`
/// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte, else undefined) plus
/// llama.cpp's load-time fix-ups (end-of-generation texts become control; phi-3's special tokens
/// strip the whitespace to their right).
enum TokenAttr : uint32_t {
  kTokenAttrUndefined = 0,
  kTokenAttrUnknown = 1u << 0,
  kTokenAttrUnused = 1u << 1,
  kTokenAttrNormal = 1u << 2,
  kTokenAttrControl = 1u << 3,
  kTokenAttrUserDefined = 1u << 4,
  kTokenAttrByte = 1u << 5,
  kTokenAttrLstrip = 1u << 7,  ///< whitespace left of the special token is dropped
  kTokenAttrRstrip = 1u << 8,  ///< whitespace right of the special token is dropped
};

class Tokenizer {
 public:
  /// Builds the tokenizer from the `tokenizer.ggml.*` metadata of `gguf` (llama.cpp
  /// llama_vocab::impl::load). Reads: model, pre, tokens (required), scores (f32 or i32, optional),
  /// token_type (i32, optional: all tokens normal when absent), merges (BPE, required),
  /// bos/eos/eot/eom/unknown/seperator/padding/mask/fim_pre/fim_suf/fim_mid/fim_pad/fim_rep/
  /// fim_sep_token_id and the deprecated prefix/suffix/middle_token_id (fim_pre/suf/mid are checked
  /// only: nothing here uses them; an id
  /// outside the vocabulary keeps the type's default, as llama.cpp does, and is reported in
  /// warnings()), add_bos_token, add_eos_token, add_sep_token, add_space_prefix, normalizer.lowercase,
  /// normalizer.strip_accents; `general.name` for phi-3's special-token attributes.
  /// Defaults per type (llama.cpp): SPM bos 1, eos 2, unk 0, add_bos true; WPM bos ([CLS]) 101,
  /// unk 100, sep 102, pad 0, mask 103, add_bos and add_sep true; BPE bos = eos = 11, add_bos false
  /// (true for the llama3 family).
  /// The token count and type of `tokens` are checked by GgufVocabularySize (gguf_vocab.h), as
  /// the planner checks them. Errors (one line, naming the file and the key): kNotFound for a
  /// missing tokens/model/merges key; kInvalidArgument, in GgufFile::KeyError's format ("<file>:
  /// offset <N>: key '<k>': expected <...>, found <...>"), for a key of the wrong type, a
  /// scores/token_type array shorter than tokens, a duplicate token text (llama.cpp asserts
  /// distinct texts), add_bos/add_eos set while that token is absent; kUnimplemented, in the same
  /// format, for an unsupported model or pre-tokenizer.
  static Result<Tokenizer> FromGguf(const GgufFile& gguf);

  /// Whether FromGguf accepts `gguf`'s tokenizer metadata: FromGguf's own reading, the one check
  /// the planner (planner ReadHParams: plan-model, stowage-run planning on the fly, stowage-opt's
  /// import) runs too, so that no plan is made for a model whose tokenizer stowage-run then
  /// refuses. Returns FromGguf's error unchanged (same one-line message); its warnings are not
  /// returned (stowage-run prints them when it loads the tokenizer). Costs one FromGguf (the
  /// token, score and merge tables are built and dropped).
  static Status Validate(const GgufFile& gguf);

  /// Converts UTF-8 `text` to token ids (llama.cpp llama_tokenize). `add_special`: add what the
  /// vocabulary asks for (BOS when add_bos, EOS when add_eos; WPM: [CLS] first and [SEP] last).
  /// `parse_special`: also recognise control/unknown tokens written in the text (e.g. "<s>");
  /// user-defined tokens are always recognised. Bytes that are not valid UTF-8 are handled as
  /// llama.cpp does: SPM falls back to the byte tokens "<0xNN>" (exact round trip); BPE and WPM
  /// check only the lead/continuation structure (a lone or truncated sequence reads as U+FFFD, an
  /// overlong form such as C0 80 decodes to its code point, here U+0000). Never fails; the empty
  /// text gives only the added special tokens. A WPM vocabulary without a valid unknown token
  /// (its default id 100 beyond the vocabulary) gives kTokenNull (-1) for a word it cannot split,
  /// as llama.cpp does; Session::Decode refuses that id.
  std::vector<int32_t> Tokenize(std::string_view text, bool add_special, bool parse_special) const;

  /// The bytes token `token` stands for (llama.cpp llama_token_to_piece, lstrip 0): SPM/WPM
  /// "▁" -> ' ', byte tokens "<0xNN>" -> that byte, BPE code points mapped back to bytes.
  /// Control and unknown tokens give their text when `special` is true, "" otherwise. Unused and
  /// undefined tokens, and ids outside [0, n_vocab), give "". The result may be an incomplete
  /// UTF-8 sequence (a byte token); concatenate pieces before displaying.
  std::string TokenToPiece(int32_t token, bool special = true) const;

  /// Converts tokens back to text (llama.cpp llama_detokenize): the pieces concatenated, minus
  /// one leading space of the first piece when add_space_prefix is set (SPM: the space Tokenize
  /// inserted); with BOS/EOS dropped when `remove_special` (and the vocabulary adds them; a
  /// dropped BOS keeps the following space, as in llama.cpp), control tokens rendered when
  /// `unparse_special`, and llama.cpp's clean-up of spaces before punctuation and contractions
  /// for vocabularies with clean_spaces (BPE except qwen2 and a few others, WPM). To stream
  /// generated text, concatenate TokenToPiece of each new token instead.
  std::string Detokenize(const std::vector<int32_t>& tokens, bool remove_special = false,
                         bool unparse_special = false) const;

  /// Number of tokens in the vocabulary (= rows of token_embd / columns of the logits).
  int32_t n_vocab() const;
  VocabType type() const;
  /// `tokenizer.ggml.pre` as read ("default" when absent or not BPE).
  const std::string& pre() const;

  // Special token ids; kTokenNull when the vocabulary has none.
  int32_t bos() const;  ///< beginning of sequence (WPM: [CLS])
  int32_t eos() const;  ///< end of sequence
  /// End of turn: tokenizer.ggml.eot_token_id, else the first of llama.cpp's end-of-turn texts
  /// in the vocabulary ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", ...).
  int32_t eot() const;
  int32_t unk() const;   ///< unknown
  int32_t sep() const;   ///< separator (WPM: [SEP])
  int32_t pad() const;   ///< padding
  int32_t nl() const;    ///< newline token (SPM: <0x0A>; BPE: first token of "\n")
  bool add_bos() const;  ///< Tokenize(add_special=true) prepends bos()
  bool add_eos() const;  ///< Tokenize(add_special=true) appends eos()
  /// What FromGguf accepted with llama.cpp's fallback instead of refusing, one line each in
  /// GgufFile::KeyError's format ("<file>: offset <N>: key '<k>': expected ..., found ..."), for
  /// the caller to print as warnings: a special token id key outside the vocabulary (the type's
  /// default id is kept; llama.cpp llama_vocab::impl::load "bad special token"), token types
  /// outside llama_token_type's 0..6 (read as undefined, as llama.cpp does; one line for all).
  const std::vector<std::string>& warnings() const;

  /// True for end-of-generation tokens: eos, eot, eom, fim pad/rep/sep, and the tokens whose text
  /// llama.cpp treats as end of generation ("<|endoftext|>", "<|im_end|>", "<|eot_id|>",
  /// "<|end|>", "</s>", "<end_of_turn>", ...). False for kTokenNull and out-of-range ids.
  bool IsEog(int32_t token) const;

  /// Raw vocabulary entry `token` ("▁the", "Ġthe", "<0x0A>"); "" when out of range.
  std::string_view TokenText(int32_t token) const;
  /// `tokenizer.ggml.scores` entry (0 when the file has none or `token` is out of range).
  float TokenScore(int32_t token) const;
  /// TokenAttr bits of `token` (kTokenAttrUndefined when out of range).
  uint32_t TokenAttrs(int32_t token) const;
  /// Id of the vocabulary entry whose text is exactly `text`, else kTokenNull.
  int32_t TextToToken(std::string_view text) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace stowage
