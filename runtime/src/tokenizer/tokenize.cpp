// Tokenizer::Tokenize: special-token partition, then SPM / BPE / WPM on each text fragment.
#include <queue>

#include "tokenizer_impl.h"
#include "unicode.h"

namespace stowage {
namespace {

using tokenizer::AppendUtf8;
using tokenizer::CpFlags;
using tokenizer::FlagsOf;

constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581, SentencePiece's escaped space

// A symbol of the merge loops: bytes [off, off + len) of the word; a merged-away symbol has len 0.
struct Symbol {
  int prev;
  int next;
  size_t off;
  size_t len;
};

// Byte length of a symbol by its lead byte's high nibble, without validation (llama.cpp
// unicode_len_utf8), so that invalid input is cut into the same symbols as there.
size_t SymbolLen(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Splits `word` into one symbol per UTF-8 character (a truncated sequence is one symbol).
std::vector<Symbol> SplitChars(const std::string& word) {
  std::vector<Symbol> syms;
  size_t off = 0;
  while (off < word.size()) {
    const size_t len = std::min(SymbolLen(static_cast<uint8_t>(word[off])), word.size() - off);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + len < word.size() ? idx + 1 : -1, off, len});
    off += len;
  }
  return syms;
}

// Unlinks the right symbol after it was appended to the left one.
void MergeInto(std::vector<Symbol>& syms, int left, int right) {
  syms[left].len += syms[right].len;
  syms[right].len = 0;
  syms[left].next = syms[right].next;
  if (syms[right].next >= 0) syms[syms[right].next].prev = left;
}

// SentencePiece BPE (llama.cpp llm_tokenizer_spm_session): repeatedly merge the adjacent pair
// whose concatenation is the vocabulary token with the highest score (leftmost on ties); pieces
// left that are not tokens fall back to byte tokens.
void TokenizeSpm(const Tokenizer::Impl& v, const std::string& text, std::vector<int32_t>& out) {
  struct Bigram {
    int left, right;
    float score;
    size_t len;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::vector<Symbol> syms = SplitChars(text);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t len = syms[left].len + syms[right].len;
    const int32_t id = v.Find(std::string_view(text).substr(syms[left].off, len));
    if (id == kTokenNull) return;
    queue.push({left, right, v.tokens[id].score, len});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // stale
    MergeInto(syms, b.left, b.right);
    try_add(syms[b.left].prev, b.left);
    try_add(b.left, syms[b.left].next);
  }
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    const std::string_view piece = std::string_view(text).substr(syms[i].off, syms[i].len);
    const int32_t id = v.Find(piece);
    if (id != kTokenNull) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = v.ByteToToken(static_cast<uint8_t>(c));
      if (byte_id != kTokenNull) out.push_back(byte_id);
    }
  }
}

// Byte-level BPE on one pre-tokenized word (llama.cpp llm_tokenizer_bpe_session): the word's
// bytes as GPT-2 code points, merged by rank (lowest first, leftmost on ties).
void TokenizeBpeWord(const Tokenizer::Impl& v, const std::string& raw_word, std::vector<int32_t>& out) {
  std::string word;
  for (char c : raw_word) AppendUtf8(tokenizer::ByteToUnicode(static_cast<uint8_t>(c)), word);
  if (v.ignore_merges) {
    const int32_t id = v.Find(word);
    if (id != kTokenNull) {
      out.push_back(id);
      return;
    }
  }
  struct Bigram {
    int left, right;
    int32_t rank;
    size_t len;
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::vector<Symbol> syms = SplitChars(word);
  std::string key;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    key.assign(word, syms[left].off, syms[left].len);
    key += ' ';
    key.append(word, syms[right].off, syms[right].len);
    auto it = v.bpe_ranks.find(key);
    if (it == v.bpe_ranks.end()) return;
    queue.push({left, right, it->second, syms[left].len + syms[right].len});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    const Symbol& l = syms[b.left];
    const Symbol& r = syms[b.right];
    // Stale when either side was merged away or grew since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len || l.next != b.right) continue;
    MergeInto(syms, b.left, b.right);
    try_add(syms[b.left].prev, b.left);
    try_add(b.left, syms[b.left].next);
  }
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    const std::string_view piece = std::string_view(word).substr(syms[i].off, syms[i].len);
    const int32_t id = v.Find(piece);
    if (id != kTokenNull) {
      out.push_back(id);
      continue;
    }
    // llama.cpp looks the piece's bytes up one by one and drops those that are no token.
    for (char c : piece) {
      const int32_t byte_id = v.Find(std::string_view(&c, 1));
      if (byte_id != kTokenNull) out.push_back(byte_id);
    }
  }
}

bool IsChineseChar(uint32_t cp) {
  // CJK ranges of HF BertPreTokenizer (_is_chinese_char), as llama.cpp copies them (including
  // its 0x2B920 lower bound).
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// BERT normalisation and word split (llama.cpp llm_tokenizer_wpm_session::preprocess).
std::vector<std::string> WpmWords(const Tokenizer::Impl& v, const std::string& text) {
  std::vector<std::string> words(1);
  for (uint32_t cp : tokenizer::DecodeUtf8(text)) {
    if (v.strip_accents) cp = tokenizer::NfdBase(cp);
    const CpFlags f = FlagsOf(cp);
    if (f.whitespace()) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || f.control()) continue;
    if (v.strip_accents && f.accent_mark()) continue;
    std::string s;
    AppendUtf8(v.lowercase ? tokenizer::ToLower(cp) : cp, s);
    if (f.punctuation() || (cp < 0x7F && f.symbol()) || IsChineseChar(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// WordPiece: greedy longest match over "▁" + word; a word with an unmatched position is [UNK].
void TokenizeWpm(const Tokenizer::Impl& v, const std::string& text, std::vector<int32_t>& out) {
  for (const std::string& w : WpmWords(v, text)) {
    const std::string word = kSpaceMarker + w;
    const size_t n = word.size();
    const size_t start = out.size();
    for (size_t i = 0; i < n;) {
      size_t matched = 0;
      for (size_t j = std::min(n, i + v.max_token_len + 1); j > i; --j) {
        const int32_t id = v.Find(std::string_view(word).substr(i, j - i));
        if (id != kTokenNull) {
          out.push_back(id);
          matched = j - i;
          break;
        }
      }
      if (matched == 0) {
        out.resize(start);
        break;
      }
      i += matched;
    }
    if (out.size() == start) out.push_back(v.unk);
  }
}

// A piece of the input: raw text [offset, offset + length) or a special token.
struct Fragment {
  int32_t token;  // kTokenNull for raw text
  size_t offset;
  size_t length;
};

bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Cuts every occurrence of the special tokens out of the raw fragments, longest token first
// (llama.cpp tokenizer_st_partition), honouring the tokens' lstrip/rstrip attributes.
std::vector<Fragment> Partition(const Tokenizer::Impl& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({kTokenNull, 0, text.size()});
  for (int32_t id : v.special_tokens) {
    const Tokenizer::Impl::Token& tok = v.tokens[id];
    if (!parse_special && (tok.attr & (kTokenAttrControl | kTokenAttrUnknown))) continue;
    std::vector<Fragment> next;
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token != kTokenNull) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = f.offset;
      for (;;) {
        const size_t m = window.find(tok.text, pos);
        if (m == std::string_view::npos) {
          if (pos < end) next.push_back({kTokenNull, pos, end - pos});
          break;
        }
        changed = true;
        size_t left = m - pos;
        if (tok.attr & kTokenAttrLstrip) {
          while (left > 0 && IsAsciiSpace(text[pos + left - 1])) --left;
        }
        if (left > 0) next.push_back({kTokenNull, pos, left});
        next.push_back({id, m, tok.text.size()});
        pos = m + tok.text.size();
        if (tok.attr & kTokenAttrRstrip) {
          while (pos < end && IsAsciiSpace(text[pos])) ++pos;
        }
      }
    }
    if (changed) frags = std::move(next);
  }
  return frags;
}

}  // namespace

int32_t Tokenizer::Impl::ByteToToken(uint8_t byte) const {
  static const char kHex[] = "0123456789ABCDEF";
  const char name[] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>', 0};
  const int32_t id = Find(name);
  const char c = static_cast<char>(byte);
  return id != kTokenNull ? id : Find(std::string_view(&c, 1));
}

void Tokenizer::Impl::TokenizeFragment(const std::string& text, bool prefix_space,
                                       std::vector<int32_t>& out) const {
  switch (type) {
    case VocabType::kSpm: {
      std::string escaped;
      if (prefix_space) escaped = kSpaceMarker;
      for (char c : text) {
        if (c == ' ') {
          escaped += kSpaceMarker;
        } else {
          escaped += c;
        }
      }
      TokenizeSpm(*this, escaped, out);
      break;
    }
    case VocabType::kBpe:
      for (const std::string& word : tokenizer::PreTokenize(text, pre_type))
        TokenizeBpeWord(*this, word, out);
      break;
    case VocabType::kWpm:
      TokenizeWpm(*this, text, out);
      break;
  }
}

std::vector<int32_t> Tokenizer::Tokenize(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& v = *impl_;
  std::vector<int32_t> out;
  // WPM adds [CLS] ... [SEP] whenever add_special is set (llama.cpp); SPM/BPE follow add_bos/eos.
  if (add_special && (v.add_bos || v.type == VocabType::kWpm) && v.bos != kTokenNull) out.push_back(v.bos);
  bool prev_special = true;  // SPM: the text start counts as "after a special token"
  for (const Fragment& f : Partition(v, text, parse_special)) {
    if (f.token != kTokenNull) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    v.TokenizeFragment(std::string(text.substr(f.offset, f.length)),
                       v.type == VocabType::kSpm && v.add_space_prefix && prev_special, out);
    prev_special = false;
  }
  if (add_special) {
    if (v.type == VocabType::kWpm) {
      if (v.sep != kTokenNull) out.push_back(v.sep);
    } else if (v.add_eos && v.eos != kTokenNull) {
      out.push_back(v.eos);
    }
  }
  return out;
}

}  // namespace stowage
