// Tokenizer::TokenToPiece and Tokenizer::Detokenize (llama.cpp token_to_piece / detokenize).
#include "tokenizer_impl.h"
#include "unicode.h"

namespace stowage {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

std::string UnescapeSpaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      i += kSpaceMarker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// GPT-2 byte-level text back to bytes; a code point that stands for no byte is written as
// "[UNK_BYTE_0x<hex>" + text + "]", as llama.cpp llama_decode_text does.
std::string DecodeByteLevel(const std::string& text) {
  std::string out;
  for (uint32_t cp : tokenizer::DecodeUtf8(text)) {
    const int b = tokenizer::UnicodeToByte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
      continue;
    }
    static const char kHex[] = "0123456789abcdef";
    std::string utf8;
    tokenizer::AppendUtf8(cp, utf8);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      out += kHex[static_cast<uint8_t>(c) >> 4];
      out += kHex[static_cast<uint8_t>(c) & 15];
    }
    out += text + "]";
  }
  return out;
}

// "<0xNN>" -> NN; -1 when the text is not a byte token name.
int ByteTokenValue(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = text[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

// llama.cpp's clean_spaces passes: " ?" " !" " ." " ," lose the space; " ' " becomes "'";
// " 's" " 'm" " 're" " 've" lose the space.
std::string CleanSpaces(std::string s) {
  std::string a;
  for (size_t i = 0; i < s.size(); ++i) {
    const char x = s[i];
    if (i > 0 && s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a += x;
  }
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      a[i + 1] = '\0';  // llama.cpp blanks the following space and skips it
      b += x;
      ++i;
      continue;
    }
    b += x;
  }
  std::string c;
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
    }
    c += x;
  }
  return c;
}

}  // namespace

std::string Tokenizer::TokenToPiece(int32_t token, bool special) const {
  const Impl& v = *impl_;
  if (!v.InRange(token)) return "";
  const Impl::Token& t = v.tokens[token];
  if (!special && (t.attr & (kTokenAttrUnknown | kTokenAttrControl))) return "";
  if (t.attr & (kTokenAttrUnknown | kTokenAttrControl | kTokenAttrUserDefined)) return t.text;
  if (t.attr & kTokenAttrNormal) {
    return v.type == VocabType::kBpe ? DecodeByteLevel(t.text) : UnescapeSpaces(t.text);
  }
  if (t.attr & kTokenAttrByte) {
    const int b = ByteTokenValue(t.text);
    return b >= 0 ? std::string(1, static_cast<char>(b)) : std::string();
  }
  return "";  // unused / undefined tokens render as nothing (llama.cpp)
}

std::string Tokenizer::Detokenize(const std::vector<int32_t>& tokens, bool remove_special,
                                  bool unparse_special) const {
  const Impl& v = *impl_;
  size_t first = 0;
  size_t last = tokens.size();
  bool remove_space = v.add_space_prefix;
  if (remove_special && v.add_bos && last > first && tokens[first] == v.bos) {
    remove_space = false;
    ++first;
  }
  if (remove_special && v.add_eos && last > first && tokens[last - 1] == v.eos) --last;
  std::string text;
  for (size_t i = first; i < last; ++i) {
    std::string piece = TokenToPiece(tokens[i], unparse_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    remove_space = false;
    text += piece;
  }
  return v.clean_spaces ? CleanSpaces(std::move(text)) : text;
}

}  // namespace stowage
