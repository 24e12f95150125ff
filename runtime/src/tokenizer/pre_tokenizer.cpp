#include "pre_tokenizer.h"

#include <functional>

#include "unicode.h"

namespace stowage::tokenizer {
namespace {

// A word of the text under way: [begin, end) in code points.
struct Span {
  size_t begin, end;
};

class Text {
 public:
  explicit Text(std::string_view utf8) : cps_(DecodeUtf8(utf8)) {
    flags_.reserve(cps_.size());
    for (uint32_t cp : cps_) flags_.push_back(FlagsOf(cp));
  }
  size_t size() const { return cps_.size(); }
  const std::vector<uint32_t>& cps() const { return cps_; }
  // Code point / flags at `pos` of the span ending at `end`; 0 / no flags past it, so that a
  // match never reaches into the next word (each word is matched as a text of its own).
  uint32_t cp(size_t pos, size_t end) const { return pos < end ? cps_[pos] : 0xFFFFFFFF; }
  CpFlags flags(size_t pos, size_t end) const { return pos < end ? flags_[pos] : CpFlags{}; }

 private:
  std::vector<uint32_t> cps_;
  std::vector<CpFlags> flags_;
};

// A matcher returns the length of the match that starts at `pos` (0: no match there).
using Matcher = std::function<size_t(const Text&, size_t pos, size_t end)>;

bool IsOther(CpFlags f) { return !f.whitespace() && !f.letter() && !f.number() && f.defined(); }

bool IsCrLf(uint32_t c) { return c == '\r' || c == '\n'; }

size_t RunWhile(const Text& t, size_t pos, size_t end, bool (*pred)(CpFlags)) {
  size_t p = pos;
  while (p < end && pred(t.flags(p, end))) ++p;
  return p - pos;
}

bool IsLetter(CpFlags f) { return f.letter(); }
bool IsNumber(CpFlags f) { return f.number(); }
bool IsSpace(CpFlags f) { return f.whitespace(); }

// 's|'t|'re|'ve|'m|'ll|'d ; `fold` makes the letters case-insensitive (ASCII: [sS] ...).
size_t MatchContraction(const Text& t, size_t pos, size_t end, bool fold) {
  if (t.cp(pos, end) != '\'') return 0;
  auto lower = [&](size_t p) {
    uint32_t c = t.cp(p, end);
    return (fold && c >= 'A' && c <= 'Z') ? c + 32 : c;
  };
  const uint32_t a = lower(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  const uint32_t b = lower(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S) then, when `plain_fallback`, \s+ : a whitespace run keeps its last character for the
// next word unless the run ends the text.
size_t MatchTrailingSpace(const Text& t, size_t pos, size_t end, bool plain_fallback) {
  const size_t n = RunWhile(t, pos, end, IsSpace);
  if (n == 0) return 0;
  if (pos + n == end) return n;
  if (n >= 2) return n - 1;
  return plain_fallback ? n : 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
size_t MatchGpt2(const Text& t, size_t pos, size_t end) {
  if (size_t n = MatchContraction(t, pos, end, false)) return n;
  const size_t lead = t.cp(pos, end) == ' ' ? 1 : 0;
  const CpFlags f = t.flags(pos + lead, end);
  if (f.letter()) return lead + RunWhile(t, pos + lead, end, IsLetter);
  if (f.number()) return lead + RunWhile(t, pos + lead, end, IsNumber);
  if (IsOther(f)) return lead + RunWhile(t, pos + lead, end, IsOther);
  return MatchTrailingSpace(t, pos, end, false);
}

// What may follow the symbol run of ' ?[^\s\p{L}\p{N}]+...'.
enum class SymbolTail { kNone, kCrLf, kCrLfSlash };  // '' , [\r\n]* , [\r\n/]*

bool IsOtherNoMark(CpFlags f) { return IsOther(f) && !f.accent_mark(); }
bool IsLetterOrMark(CpFlags f) { return f.letter() || f.accent_mark(); }

// The alternatives the Llama 3 and GPT-4o families end with:
//   ' ?[^\s\p{L}\p{N}]+<tail>' | \s*[\r\n]+ | \s+(?!\S) | \s+
// (`marks`: the symbol class also excludes \p{M}, as Qwen3.5's [^\s\p{L}\p{M}\p{N}]).
size_t MatchSymbolsAndSpaces(const Text& t, size_t pos, size_t end, SymbolTail tail, bool marks = false) {
  bool (*other)(CpFlags) = marks ? IsOtherNoMark : IsOther;
  const size_t lead = t.cp(pos, end) == ' ' ? 1 : 0;
  if (other(t.flags(pos + lead, end))) {
    size_t p = pos + lead + RunWhile(t, pos + lead, end, other);
    for (uint32_t c = t.cp(p, end);
         (tail != SymbolTail::kNone && IsCrLf(c)) || (tail == SymbolTail::kCrLfSlash && c == '/');
         c = t.cp(p, end)) {
      ++p;
    }
    return p - pos;
  }
  // \s*[\r\n]+ (and \s*[\r\n]) : the whitespace run up to its last CR/LF.
  const size_t n = RunWhile(t, pos, end, IsSpace);
  for (size_t k = n; k > 0; --k) {
    if (IsCrLf(t.cp(pos + k - 1, end))) return k;
  }
  return MatchTrailingSpace(t, pos, end, true);
}

// The Llama 3 regex and its relatives:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,max_digits}
//   | ' ?[^\s\p{L}\p{N}]+[\r\n]*' | \s*[\r\n]+ | \s+(?!\S) | \s+
struct Llama3Style {
  size_t max_digits = 3;  ///< 0: \p{N}+
  bool contractions = true;
  bool marks = false;  ///< Qwen3.5: [\p{L}\p{M}]+ words, [^\s\p{L}\p{M}\p{N}] symbols
  SymbolTail tail = SymbolTail::kCrLf;
};

size_t MatchLlama3(const Text& t, size_t pos, size_t end, const Llama3Style& style) {
  if (style.contractions) {
    if (size_t n = MatchContraction(t, pos, end, true)) return n;
  }
  bool (*word)(CpFlags) = style.marks ? IsLetterOrMark : IsLetter;
  const uint32_t c = t.cp(pos, end);
  const CpFlags f = t.flags(pos, end);
  // [^\r\n\p{L}\p{N}]?\p{L}+ : an optional leading character, greedy (a mark can lead too).
  if (!IsCrLf(c) && !f.letter() && !f.number() && word(t.flags(pos + 1, end))) {
    return 1 + RunWhile(t, pos + 1, end, word);
  }
  if (word(f)) return RunWhile(t, pos, end, word);
  if (f.number()) {
    const size_t n = RunWhile(t, pos, end, IsNumber);
    return style.max_digits == 0 ? n : std::min(style.max_digits, n);
  }
  return MatchSymbolsAndSpaces(t, pos, end, style.tail, style.marks);
}

Matcher Llama3Matcher(Llama3Style style) {
  return [style](const Text& t, size_t p, size_t e) { return MatchLlama3(t, p, e, style); };
}

// GPT-4o / Tekken: words split at case changes. llama.cpp runs these regexes on text where every
// non-ASCII letter is one placeholder, so "upper" is [A-Z] or a non-ASCII letter and "lower" is
// [a-z] or a non-ASCII letter (its adapted regexes: (?=[\p{L}])([^a-z]) and (?=[\p{L}])([^A-Z])):
//   [^\r\n\p{L}\p{N}]? upper* lower+ contraction? | [^\r\n\p{L}\p{N}]? upper+ lower* contraction?
//   | \p{N}{1,max} | ' ?[^\s\p{L}\p{N}]+[\r\n/]*' | \s*[\r\n]+ | \s+(?!\S) | \s+
bool IsAsciiUpper(uint32_t c) { return c >= 'A' && c <= 'Z'; }
bool IsAsciiLower(uint32_t c) { return c >= 'a' && c <= 'z'; }

size_t MatchCasedWords(const Text& t, size_t pos, size_t end, size_t max_digits, bool contractions) {
  const uint32_t c = t.cp(pos, end);
  const CpFlags f = t.flags(pos, end);
  const bool prefix = !f.letter() && !f.number() && !IsCrLf(c) && pos < end;
  const size_t s = prefix ? pos + 1 : pos;
  auto upper = [&](size_t p) { return t.flags(p, end).letter() && !IsAsciiLower(t.cp(p, end)); };
  auto lower = [&](size_t p) { return t.flags(p, end).letter() && !IsAsciiUpper(t.cp(p, end)); };
  if (t.flags(s, end).letter()) {
    size_t a = 0;  // greedy upper* (a backtracking engine then gives back what lower+ needs)
    while (upper(s + a)) ++a;
    size_t b_start = end;  // where lower+ starts
    if (lower(s + a)) {
      b_start = s + a;
    } else {
      for (size_t k = a; k > 0; --k) {
        if (lower(s + k - 1)) {  // a non-ASCII letter: both upper and lower
          b_start = s + k - 1;
          break;
        }
      }
    }
    size_t p;
    if (b_start != end) {
      p = b_start;
      while (lower(p)) ++p;
    } else {
      p = s + a;  // second alternative: upper+ (a >= 1 here) then lower* (none follows)
    }
    if (contractions) p += MatchContraction(t, p, end, true);
    return p - pos;
  }
  if (f.number()) return std::min(max_digits, RunWhile(t, pos, end, IsNumber));
  return MatchSymbolsAndSpaces(t, pos, end, SymbolTail::kCrLfSlash);
}

// [class]+ , or [class]{1,max_len} when max_len > 0.
Matcher ClassRun(const std::function<bool(uint32_t, CpFlags)>& in_class, size_t max_len = 0) {
  return [in_class, max_len](const Text& t, size_t pos, size_t end) -> size_t {
    size_t p = pos;
    while (p < end && in_class(t.cp(p, end), t.flags(p, end)) && (max_len == 0 || p - pos < max_len)) ++p;
    return p - pos;
  };
}

// \s?[class]+ : one optional whitespace character, then the run (DeepSeek Coder).
Matcher SpaceThenRun(bool (*in_class)(CpFlags)) {
  return [in_class](const Text& t, size_t pos, size_t end) -> size_t {
    const size_t lead = t.flags(pos, end).whitespace() && in_class(t.flags(pos + 1, end)) ? 1 : 0;
    return in_class(t.flags(pos + lead, end)) ? lead + RunWhile(t, pos + lead, end, in_class) : 0;
  };
}

bool IsAsciiPunctOrSymbol(uint32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}
bool IsAsciiLetter(uint32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsPunctOrSymbol(CpFlags f) { return f.punctuation() || f.symbol(); }
bool IsPunct(CpFlags f) { return f.punctuation(); }

// DeepSeek V3's main regex:
//   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//   | ' ?[\p{P}\p{S}]+[\r\n]*' | \s*[\r\n]+ | \s+(?!\S) | \s+
size_t MatchDeepseek3(const Text& t, size_t pos, size_t end) {
  const uint32_t c = t.cp(pos, end);
  const CpFlags f = t.flags(pos, end);
  if (IsAsciiPunctOrSymbol(c) && IsAsciiLetter(t.cp(pos + 1, end))) {
    size_t p = pos + 1;
    while (IsAsciiLetter(t.cp(p, end))) ++p;
    return p - pos;
  }
  const bool prefix = !IsCrLf(c) && !f.letter() && !IsPunctOrSymbol(f);
  if (prefix && IsLetterOrMark(t.flags(pos + 1, end))) return 1 + RunWhile(t, pos + 1, end, IsLetterOrMark);
  if (IsLetterOrMark(f)) return RunWhile(t, pos, end, IsLetterOrMark);
  const size_t lead = c == ' ' ? 1 : 0;
  if (IsPunctOrSymbol(t.flags(pos + lead, end))) {
    size_t p = pos + lead + RunWhile(t, pos + lead, end, IsPunctOrSymbol);
    while (IsCrLf(t.cp(p, end))) ++p;
    return p - pos;
  }
  const size_t n = RunWhile(t, pos, end, IsSpace);
  for (size_t k = n; k > 0; --k) {
    if (IsCrLf(t.cp(pos + k - 1, end))) return k;
  }
  return MatchTrailingSpace(t, pos, end, true);
}

// BLOOM / Poro / GPT-3 Finnish:  ?[^(\s|.,!?…。，、।۔،)]+
bool IsBloomWordChar(uint32_t c, CpFlags f) {
  static constexpr uint32_t kExcluded[] = {'(',    '|',    '.',    ',',    '!',    '?',    ')',
                                           0x2026, 0x3002, 0xFF0C, 0x3001, 0x0964, 0x06D4, 0x060C};
  if (f.whitespace() || !f.defined()) return false;
  for (uint32_t x : kExcluded) {
    if (c == x) return false;
  }
  return true;
}

size_t MatchBloom(const Text& t, size_t pos, size_t end) {
  size_t p = pos;
  if (t.cp(p, end) == ' ' && IsBloomWordChar(t.cp(p + 1, end), t.flags(p + 1, end))) ++p;
  while (IsBloomWordChar(t.cp(p, end), t.flags(p, end))) ++p;
  return p - pos;
}

bool InRange(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }

// [0-9][0-9][0-9]
size_t MatchThreeDigits(const Text& t, size_t pos, size_t end) {
  for (size_t k = 0; k < 3; ++k) {
    const uint32_t c = t.cp(pos + k, end);
    if (c < '0' || c > '9') return 0;
  }
  return 3;
}

bool IsAsciiIn(uint32_t c, const char* set) {
  for (const char* s = set; *s; ++s) {
    if (c == static_cast<uint8_t>(*s)) return true;
  }
  return false;
}

std::vector<Matcher> MatchersFor(PreTokenizer type) {
  const Matcher gpt2 = MatchGpt2;
  const Matcher digit = ClassRun([](uint32_t, CpFlags f) { return f.number(); }, 1);
  switch (type) {
    case PreTokenizer::kGpt2:
      return {gpt2};
    case PreTokenizer::kLlama3:
      return {Llama3Matcher({})};
    case PreTokenizer::kQwen2:
      return {Llama3Matcher({1, true, false, SymbolTail::kCrLf})};
    case PreTokenizer::kQwen35:
      return {Llama3Matcher({1, true, true, SymbolTail::kCrLf})};
    case PreTokenizer::kSeedCoder:
      return {Llama3Matcher({1, true, false, SymbolTail::kNone})};
    case PreTokenizer::kUfakzeka:
      return {Llama3Matcher({1, false, false, SymbolTail::kCrLf})};
    case PreTokenizer::kLaguna:
      return {ClassRun([](uint32_t c, CpFlags) { return c != '\n'; }),
              Llama3Matcher({1, true, false, SymbolTail::kCrLf})};
    case PreTokenizer::kMinicpm5:
      return {ClassRun([](uint32_t, CpFlags f) { return f.number(); }, 3),
              Llama3Matcher({0, true, false, SymbolTail::kCrLf})};
    case PreTokenizer::kBloom:
      return {MatchBloom};
    case PreTokenizer::kViking:
      return {MatchBloom, digit};
    case PreTokenizer::kStarcoder:
      return {digit, gpt2};
    case PreTokenizer::kGpt4o:
      return {[](const Text& t, size_t p, size_t e) { return MatchCasedWords(t, p, e, 3, true); }};
    case PreTokenizer::kTekken:
      return {[](const Text& t, size_t p, size_t e) { return MatchCasedWords(t, p, e, 1, false); }};
    case PreTokenizer::kDeepseek3:
      return {ClassRun([](uint32_t, CpFlags f) { return f.number(); }, 3), ClassRun([](uint32_t c, CpFlags) {
                return InRange(c, 0x4E00, 0x9FA5) || InRange(c, 0x3040, 0x309F) || InRange(c, 0x30A0, 0x30FF);
              }),
              MatchDeepseek3};
    case PreTokenizer::kDeepseekCoder:
      return {ClassRun([](uint32_t c, CpFlags) { return IsCrLf(c); }, 1), SpaceThenRun(IsLetter),
              // llama.cpp runs this regex through std::wregex after replacing non-ASCII whitespace by
              // U+000B (unicode_regex_split), so U+1680, U+2000-200A, U+2028/9, U+202F, U+205F and
              // U+3000 never match the range class.
              SpaceThenRun(IsPunct), ClassRun([](uint32_t c, CpFlags f) {
                return !f.whitespace() && (InRange(c, 0x4E00, 0x9FA5) || InRange(c, 0x0800, 0x4E00) ||
                                           InRange(c, 0xAC00, 0xD7FF));
              }),
              digit};
    case PreTokenizer::kFalcon:
      return {ClassRun([](uint32_t c, CpFlags f) { return f.punctuation() || IsAsciiIn(c, "$+<=>^~|`"); }),
              gpt2, MatchThreeDigits};
    case PreTokenizer::kDefault:
      break;
  }
  return {ClassRun([](uint32_t c, CpFlags f) { return f.punctuation() || IsAsciiIn(c, "$+<=>^~|"); }), gpt2,
          ClassRun([](uint32_t, CpFlags f) { return f.number(); }), MatchThreeDigits};
}

}  // namespace

std::vector<std::string> PreTokenize(std::string_view text, PreTokenizer type) {
  const Text t(text);
  std::vector<Span> words;
  if (t.size() > 0) words.push_back({0, t.size()});
  for (const Matcher& match : MatchersFor(type)) {
    std::vector<Span> next;
    next.reserve(words.size() * 2);
    for (const Span& w : words) {
      size_t gap = w.begin;  // start of text not covered by a match yet
      size_t pos = w.begin;
      while (pos < w.end) {
        const size_t n = match(t, pos, w.end);
        if (n == 0) {
          ++pos;
          continue;
        }
        if (gap < pos) next.push_back({gap, pos});
        next.push_back({pos, pos + n});
        pos += n;
        gap = pos;
      }
      if (gap < w.end) next.push_back({gap, w.end});
    }
    words = std::move(next);
  }
  std::vector<std::string> out;
  out.reserve(words.size());
  for (const Span& w : words) {
    std::string s;
    for (size_t i = w.begin; i < w.end; ++i) AppendUtf8(t.cps()[i], s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stowage::tokenizer
