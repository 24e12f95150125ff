// Unicode helpers of the tokenizer (internal): UTF-8 <-> code points, the category flags the
// pre-tokenizer regexes test (\p{L}, \p{N}, \s, ...), lowercase, BERT's accent stripping, and the
// GPT-2 byte <-> unicode mapping of byte-level BPE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stowage::tokenizer {

/// Category flags of one code point (general category group + White_Space).
struct CpFlags {
  enum : uint16_t {
    kNumber = 0x01,       ///< \p{N}
    kLetter = 0x02,       ///< \p{L}
    kSeparator = 0x04,    ///< \p{Z}
    kAccentMark = 0x08,   ///< \p{M}
    kPunctuation = 0x10,  ///< \p{P}
    kSymbol = 0x20,       ///< \p{S}
    kControl = 0x40,      ///< \p{C} except unassigned code points (Cc, Cf, Co, Cs)
    kUndefined = 0x80,    ///< unassigned (Cn; llama.cpp's CODEPOINT_FLAG_UNDEFINED)
    kWhitespace = 0x100,  ///< White_Space property (what \s matches)
  };
  uint16_t bits = 0;  ///< 0 for "no code point" (outside the text or > U+10FFFF)

  bool number() const { return bits & kNumber; }
  bool letter() const { return bits & kLetter; }
  bool whitespace() const { return bits & kWhitespace; }
  bool accent_mark() const { return bits & kAccentMark; }
  bool punctuation() const { return bits & kPunctuation; }
  bool symbol() const { return bits & kSymbol; }
  bool control() const { return bits & kControl; }
  bool undefined() const { return bits & kUndefined; }
  bool defined() const { return bits != 0; }
};

/// Flags of `cp`; all-zero flags for cp > U+10FFFF.
CpFlags FlagsOf(uint32_t cp);

/// Simple lowercase (first code point of the full lowercase mapping); `cp` when none.
uint32_t ToLower(uint32_t cp);

/// First code point of the canonical decomposition (NFD) of `cp`; `cp` when it has none.
uint32_t NfdBase(uint32_t cp);

/// Decodes UTF-8 into code points. An invalid or truncated sequence yields U+FFFD for its first
/// byte and decoding resumes at the next byte (llama.cpp unicode_cpts_from_utf8).
std::vector<uint32_t> DecodeUtf8(std::string_view s);

/// Appends the UTF-8 encoding of `cp` (cp <= U+10FFFF; larger values encode U+FFFD).
void AppendUtf8(uint32_t cp, std::string& out);

/// GPT-2 byte-level BPE: the printable code point that stands for byte `b` (bytes.py of GPT-2's
/// encoder: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in byte order).
uint32_t ByteToUnicode(uint8_t b);

/// Inverse of ByteToUnicode: the byte, or -1 when `cp` stands for no byte.
int UnicodeToByte(uint32_t cp);

}  // namespace stowage::tokenizer
