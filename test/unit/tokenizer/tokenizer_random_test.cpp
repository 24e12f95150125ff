// Random and hostile inputs on the real vocabularies: no crash, ids in range, and byte-exact
// round trips where the vocabulary can represent every byte (byte-level BPE, SPM byte fallback).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "stowage/runtime/tokenizer.h"
#include "test_paths.h"

namespace stowage {
namespace {

// Code points that exercise every pre-tokenizer branch: ASCII, digits, apostrophes, CR/LF and
// other whitespace (NBSP, ideographic space, NEL), Latin-1 letters, combining marks, Cyrillic,
// CJK, Khmer, emoji with ZWJ / variation selector, private use, unassigned, symbols. Not U+2581:
// SPM reads it as an escaped space, so it does not round-trip there.
const uint32_t kAlphabet[] = {
    'a',    'Z',     'e',     's',    't',      'l',    'd',    'm',    'r',    'v',    'S',    'T',
    '0',    '3',     '9',     '\'',   '"',      ' ',    ' ',    ' ',    '\t',   '\n',   '\r',   '\v',
    '\f',   '!',     '?',     '.',    ',',      '(',    '<',    '|',    '>',    '$',    '+',    '^',
    '~',    '`',     '_',     '#',    0x00,     0x01,   0x7F,   0x85,   0xA0,   0xBD,   0xC4,   0xE9,
    0x301,  0x308,   0x430,   0x44F,  0x1780,   0x17B6, 0x3000, 0x2028, 0x200D, 0xFE0F, 0x4E00, 0x6211,
    0xFF5E, 0x1F680, 0x1F999, 0xE000, 0x10FFFF, 0x0378, 0x2160, 0x00B2, 0x0660};

std::string RandomUtf8(std::mt19937& rng, size_t max_len) {
  std::string s;
  const size_t n = rng() % (max_len + 1);
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = kAlphabet[rng() % (sizeof(kAlphabet) / sizeof(kAlphabet[0]))];
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

std::string RandomBytes(std::mt19937& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class RandomInput : public ::testing::TestWithParam<const char*> {};

TEST_P(RandomInput, NoCrashIdsInRangeAndRoundTrip) {
  const std::string path = test::ModelPath(GetParam());
  STOWAGE_REQUIRE_FILE(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::mt19937 rng(20261130);
  for (int iter = 0; iter < 300; ++iter) {
    const bool valid = iter % 3 != 0;
    const std::string text = valid ? RandomUtf8(rng, 40) : RandomBytes(rng, 40);
    for (bool parse_special : {false, true}) {
      const std::vector<int32_t> ids = tok->Tokenize(text, true, parse_special);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << id;
      (void)tok->Detokenize(ids, true, true);
    }
    if (!valid) continue;
    const std::vector<int32_t> ids = tok->Tokenize(text, false, false);
    std::string pieces;
    for (int32_t id : ids) pieces += tok->TokenToPiece(id);
    if (tok->type() == VocabType::kBpe) {
      EXPECT_EQ(pieces, text);
    } else if (tok->type() == VocabType::kSpm) {
      EXPECT_EQ(pieces, text.empty() ? "" : " " + text);
    }
  }
  // Random token ids, valid or not, detokenize without crashing.
  std::vector<int32_t> ids;
  for (int i = 0; i < 500; ++i) ids.push_back(static_cast<int32_t>(rng() % (tok->n_vocab() + 10)) - 5);
  (void)tok->Detokenize(ids, false, true);
  (void)tok->Detokenize(ids, true, false);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, RandomInput,
                         ::testing::Values("vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf",
                                           "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-qwen2.gguf",
                                           "vocab/ggml-vocab-aquila.gguf", "vocab/ggml-vocab-bert-bge.gguf",
                                           "stories260K.gguf"));

// A Tokenizer is immutable: threads sharing one get the results of a single thread (llama.cpp's
// test-tokenizer-0 runs its vectors on every core for the same reason).
TEST(Concurrency, ThreadsShareOneTokenizer) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-qwen2.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  file->reset();  // the tokenizer does not need the file any more
  std::mt19937 rng(7);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(RandomUtf8(rng, 60));
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(tok->Tokenize(t, true, true));
  // The copy is under test: copies share the immutable state.
  const Tokenizer shared = *tok;  // NOLINT(performance-unnecessary-copy-initialization)
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (size_t i = 0; i < texts.size(); ++i)
        mismatches[th] += shared.Tokenize(texts[i], true, true) != want[i];
    });
  }
  for (auto& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(LongInput, LinearEnough) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-gpt-2.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  // One 200 KB "word" of a single repeated letter and 200 KB of spaces: the merge queue keeps
  // this fast (a quadratic loop would take minutes).
  const std::string word(200000, 'a');
  const auto ids = tok->Tokenize(word, false, false);
  std::string back;
  for (int32_t id : ids) back += tok->TokenToPiece(id);
  EXPECT_EQ(back, word);
  const std::string spaces(200000, ' ');
  EXPECT_FALSE(tok->Tokenize(spaces, false, false).empty());
}

}  // namespace
}  // namespace stowage
