// The size of a GGUF model's vocabulary: the one reading of it that the planner (the n_vocab of the
// token_embd and output shapes, planner ReadHParams) and the tokenizer (Tokenizer::FromGguf) share,
// so plan-model and stowage-run accept and refuse the same files with the same message.
#pragma once

#include <cstdint>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// The number of tokens of the model's vocabulary (llama.cpp llama_vocab::impl::load):
/// - `tokenizer.ggml.tokens` present: its element count, which must be an array of str of
///   1..INT32_MAX tokens; `<arch>.vocab_size` (arch: general.architecture), when present too, must
///   equal it (llama.cpp ignores the key then; a count that contradicts the vocabulary is refused
///   here rather than silently ignored, llama.cpp's own writer, llama-model-saver, always
///   writes the token count);
/// - absent, for a model without a vocabulary (`tokenizer.ggml.model` absent, "none" or
///   "no_vocab"; llama.cpp: LLAMA_VOCAB_TYPE_NONE): `<arch>.vocab_size`, which must be positive.
/// Errors: kNotFound "<file>: missing key 'tokenizer.ggml.tokens' (...)" when a tokenizer names a
/// vocabulary that is not there (misspelled or removed) or when neither key exists; kInvalidArgument
/// in GgufFile::KeyError's format ("<file>: offset <N>: key '<k>': expected <...>, found <...>")
/// for a wrong type, an empty vocabulary, or a contradicting or zero vocab_size.
Result<uint32_t> GgufVocabularySize(const GgufFile& gguf);

}  // namespace stowage
