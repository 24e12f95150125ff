// hostile text for the tokenizer (invalid UTF-8, NUL bytes, lone surrogates, code points
// past U+10FFFF, special-token look-alikes, long unbroken runs) on every shared vocabulary, and
// degenerate logits / settings for the sampler. Right behaviour: Tokenize never fails and returns
// ids inside the vocabulary in bounded time; Sample returns an id in [0, n_vocab) whenever a finite
// logit exists, whatever the settings.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/sampler.h"
#include "stowage/runtime/tokenizer.h"
#include "test_paths.h"

namespace stowage {
namespace {

const char* kVocabs[] = {"vocab/ggml-vocab-llama-spm.gguf",
                         "vocab/ggml-vocab-gpt-2.gguf",
                         "vocab/ggml-vocab-qwen2.gguf",
                         "vocab/ggml-vocab-phi-3.gguf",
                         "vocab/ggml-vocab-bert-bge.gguf",
                         "vocab/ggml-vocab-aquila.gguf",
                         "stories260K.gguf"};

std::vector<std::string> HostileTexts() {
  return {
      std::string("\xff"),
      std::string("\xc3"),                    // truncated 2-byte sequence
      std::string("a\xe2\x82"),               // truncated 3-byte sequence at the end
      std::string("\xc0\x80 overlong NUL"),   // overlong encoding
      std::string("\xed\xa0\x80 surrogate"),  // UTF-16 surrogate encoded in UTF-8
      std::string("\xf4\x90\x80\x80 > U+10FFFF"),
      std::string("\xf8\x88\x80\x80\x80 5-byte"),
      std::string("\x80\x80\x80\x80"),  // lone continuation bytes
      std::string("nul\0inside", 10),
      std::string(1, '\0'),
      "<s></s><unk>[CLS][SEP]<|endoftext|><|im_end|>",
      "<s",
      "\xe2\x96\x81\xe2\x96\x81\xe2\x96\x81",  // "▁▁▁" (SPM's space marker written by the user)
      "<0x0A><0xZZ><0x",
      std::string(300, ' '),
      std::string(200, '\n'),
      "\t\r\v\f",
      "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xcc\x81\xcc\x81\xcc\x81",  // emoji + combining marks
  };
}

TEST(HostileTokenizerText, HostileTextGivesIdsInsideTheVocabulary) {
  int checked = 0;
  for (const char* v : kVocabs) {
    const std::string path = test::ModelPath(v);
    if (!test::FileExists(path)) continue;
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
    auto tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok()) << v << ": " << tok.status().ToString();
    for (const std::string& text : HostileTexts()) {
      for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok->Tokenize(text, special, special);
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << v << ": id " << id;
        // SPM and byte-level BPE cover every byte (byte tokens / byte fallback); WPM drops
        // whitespace, control characters and U+FFFD as llama.cpp does, so such text is empty.
        if (!text.empty() && tok->type() != VocabType::kWpm)
          EXPECT_FALSE(tok->Tokenize(text, false, false).empty()) << v << ": non-empty text, no tokens";
        // Pieces and detokenization of whatever came out must not fail either.
        for (int32_t id : ids) (void)tok->TokenToPiece(id, special);
        (void)tok->Detokenize(ids, special, special);
      }
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "skipped: shared models not found in " << test::ModelsDir();
}

// An unbroken run of one character (no spaces): SPM's bigram merging and BPE's merge loop must
// stay well below quadratic blow-ups on prompt-sized input.
TEST(HostileTokenizerText, LongUnbrokenRunsTokenizeInBoundedTime) {
  int checked = 0;
  for (const char* v : kVocabs) {
    const std::string path = test::ModelPath(v);
    if (!test::FileExists(path)) continue;
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok());
    auto tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok());
    for (const std::string& text :
         {std::string(20000, 'a'), std::string(20000, '9'), std::string(6000, '\xe4') /* invalid */}) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto ids = tok->Tokenize(text, true, false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_FALSE(ids.empty());
      EXPECT_LT(s, 20.0) << v << ": " << text.size() << " bytes took " << s << " s";
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "skipped: shared models not found in " << test::ModelsDir();
}

// Sampler ----------------------------------------------------------------------------------------

std::vector<float> Logits() { return {0.5f, 3.0f, -1.0f, 2.5f, 0.0f, -7.0f, 2.9f, 1.0f}; }

// Fixed in runtime/src/sampler/sampler.cpp: a NaN temperature (e.g. `--temp nan`) failed the
// `temperature <= 0` greedy test, every weight became NaN, and the draw fell through to the LAST
// kept candidate, i.e. the least likely token. It now selects greedy decoding.
TEST(HostileSamplerParams, NanTemperatureIsGreedy) {
  SamplerParams p;
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler s(p);
  const auto l = Logits();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(l.data(), static_cast<int>(l.size())), 1);
}

TEST(HostileSamplerParams, DegenerateSettingsStillPickAValidToken) {
  const auto l = Logits();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float temp : {1e-30f, 1e-3f, 1.0f, 1e30f, inf})
    for (int top_k : {-5, 0, 1, 3, 1000})
      for (float top_p : {-1.0f, 0.0f, 0.5f, 1.0f, 2.0f, nan})
        for (float min_p : {-1.0f, 0.0f, 0.5f, 1.0f, 5.0f, nan}) {
          SamplerParams p{temp, top_k, top_p, min_p, 7};
          Sampler s(p);
          for (int i = 0; i < 3; ++i) {
            const int32_t t = s.Sample(l.data(), static_cast<int>(l.size()));
            ASSERT_TRUE(t >= 0 && t < static_cast<int32_t>(l.size()))
                << "temp " << temp << " top_k " << top_k << " top_p " << top_p << " min_p " << min_p << " -> "
                << t;
          }
        }
}

TEST(HostileSamplerParams, NanAndInfiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  SamplerParams p;
  p.temperature = 0.8f;
  Sampler s(p);
  std::vector<float> l = {nan, -inf, 1.0f, nan};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.Sample(l.data(), 4), 2);
  l = {nan, nan, nan};
  EXPECT_EQ(s.Sample(l.data(), 3), -1);  // documented: no finite logit
  l = {1.0f, inf, inf};
  EXPECT_EQ(s.Sample(l.data(), 3), 1);
}

}  // namespace
}  // namespace stowage
