#include "unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace stowage::tokenizer {
namespace {

struct CategoryRange {
  uint32_t first;
  uint8_t flags;
};
struct CodepointPair {
  uint32_t from;
  uint32_t to;
};
struct NfdRange {
  uint32_t first;
  uint32_t last;
  uint32_t base;
};

#include "unicode_data.inc"

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF keep their value; the
// remaining 68 bytes get U+0100 + n in increasing byte order.
constexpr bool KeepsItsValue(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint16_t, 256> MakeByteTable() {
  std::array<uint16_t, 256> t{};
  int n = 0;
  for (int b = 0; b < 256; ++b) t[b] = KeepsItsValue(b) ? b : 0x100 + n++;
  return t;
}
constexpr std::array<uint16_t, 256> kByteToUnicode = MakeByteTable();

// Byte length of the UTF-8 sequence that starts with lead byte `c` (1 for stray bytes).
size_t Utf8Len(uint8_t c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

}  // namespace

CpFlags FlagsOf(uint32_t cp) {
  CpFlags f;
  if (cp > kMaxCodepoint) return f;
  auto it = std::upper_bound(std::begin(kCategoryRanges), std::end(kCategoryRanges), cp,
                             [](uint32_t v, const CategoryRange& r) { return v < r.first; });
  f.bits = std::prev(it)->flags;
  if (std::binary_search(std::begin(kWhitespace), std::end(kWhitespace), cp)) {
    f.bits |= CpFlags::kWhitespace;
  }
  return f;
}

uint32_t ToLower(uint32_t cp) {
  auto it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                             [](const CodepointPair& p, uint32_t v) { return p.from < v; });
  return (it != std::end(kLowercase) && it->from == cp) ? it->to : cp;
}

uint32_t NfdBase(uint32_t cp) {
  auto it = std::upper_bound(std::begin(kNfdRanges), std::end(kNfdRanges), cp,
                             [](uint32_t v, const NfdRange& r) { return v < r.first; });
  if (it == std::begin(kNfdRanges)) return cp;
  --it;
  return (cp <= it->last) ? it->base : cp;
}

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    const size_t n = Utf8Len(c);
    if (n == 1) {
      out.push_back(c < 0x80 ? c : 0xFFFD);
      ++i;
      continue;
    }
    bool ok = i + n <= s.size();
    uint32_t cp = c & (0x7F >> n);
    for (size_t k = 1; ok && k < n; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp > kMaxCodepoint) cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t ByteToUnicode(uint8_t b) { return kByteToUnicode[b]; }

int UnicodeToByte(uint32_t cp) {
  if (cp < 0x100 && KeepsItsValue(static_cast<int>(cp))) return static_cast<int>(cp);
  if (cp >= 0x100 && cp < 0x100 + 68) {
    for (int b = 0; b < 256; ++b) {
      if (kByteToUnicode[b] == cp) return b;
    }
  }
  return -1;
}

}  // namespace stowage::tokenizer
