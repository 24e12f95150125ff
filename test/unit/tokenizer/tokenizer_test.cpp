// Tokenizer on small hand-made vocabularies (GGUF built in memory): the algorithms' rules and the
// errors of FromGguf on bad metadata.
#include "stowage/runtime/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "stowage/runtime/gguf_writer.h"

namespace stowage {
namespace {

// Metadata-only GGUF built in memory with GgufWriter, parsed back with GgufFile.
class GgufBuilder {
 public:
  GgufBuilder& Str(const std::string& key, const std::string& value) {
    return Add(key, GgufMetaValue::Str(value));
  }
  GgufBuilder& U32(const std::string& key, uint32_t value) { return Add(key, GgufMetaValue::U32(value)); }
  GgufBuilder& Bool(const std::string& key, bool value) { return Add(key, GgufMetaValue::Bool(value)); }
  GgufBuilder& StrArray(const std::string& key, const std::vector<std::string>& v) {
    return Add(key, GgufMetaValue::ArrayStr(v));
  }
  GgufBuilder& F32Array(const std::string& key, const std::vector<float>& v) {
    return Add(key, GgufMetaValue::ArrayF32(v));
  }
  GgufBuilder& I32Array(const std::string& key, const std::vector<int32_t>& v) {
    return Add(key, GgufMetaValue::ArrayI32(v));
  }

  Result<Tokenizer> Build() {
    auto bytes = writer_.WriteToBuffer();
    if (!bytes.ok()) return bytes.status();
    bytes_ = std::move(*bytes);
    auto g = GgufFile::Parse(bytes_.data(), bytes_.size(), "test.gguf");
    if (!g.ok()) return g.status();
    return Tokenizer::FromGguf(**g);
  }

 private:
  GgufBuilder& Add(const std::string& key, GgufMetaValue v) {
    const Status st = writer_.AddKV(key, std::move(v));
    EXPECT_TRUE(st.ok()) << st.ToString();
    return *this;
  }
  GgufWriter writer_;
  std::vector<uint8_t> bytes_;
};

// A small SPM vocabulary: <unk> <s> </s>, the 256 byte tokens, then pieces with scores.
GgufBuilder SpmVocab(const std::vector<std::pair<std::string, float>>& pieces) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(1);
  }
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens", tokens)
      .F32Array("tokenizer.ggml.scores", scores)
      .I32Array("tokenizer.ggml.token_type", types);
  return b;
}

constexpr int32_t kFirstPiece = 3 + 256;

TEST(Spm, MergesByScoreAndFallsBackToBytes) {
  // "▁ab" can be built as ("▁a" + "b") or ("▁" + "ab"); the higher-scored bigram merges first.
  auto tok = SpmVocab({{"\xE2\x96\x81", -1},
                       {"a", -1},
                       {"b", -1},
                       {"\xE2\x96\x81"
                        "a",
                        -2},
                       {"ab", -0.5f},
                       {"\xE2\x96\x81"
                        "ab",
                        -3}})
                 .Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Tokenize("ab", false, false), (std::vector<int32_t>{kFirstPiece + 5}));
  // "c" is no token: its byte token <0x63> = id 3 + 0x63.
  EXPECT_EQ(tok->Tokenize("abc", false, false), (std::vector<int32_t>{kFirstPiece + 5, 3 + 0x63}));
  // Multi-byte characters fall back to one byte token per UTF-8 byte.
  EXPECT_EQ(tok->Tokenize("\xC3\xA9", false, false),
            (std::vector<int32_t>{kFirstPiece + 0, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->Tokenize("ab", true, false), (std::vector<int32_t>{1, kFirstPiece + 5}));
  EXPECT_EQ(tok->TokenToPiece(kFirstPiece + 5), " ab");
  EXPECT_EQ(tok->TokenToPiece(3 + 0x0A), "\n");
  // llama.cpp keeps the leading space when it removes the BOS (detokenize: remove_space = false).
  EXPECT_EQ(tok->Detokenize({1, kFirstPiece + 5, 3 + 0x63}, true), " abc");
  EXPECT_EQ(tok->Detokenize({kFirstPiece + 5, 3 + 0x63}, true), "abc");
  EXPECT_EQ(tok->Detokenize({1, kFirstPiece + 5, 3 + 0x63}, false), " abc");  // <s> renders as ""
  EXPECT_EQ(tok->Detokenize({1, kFirstPiece + 5}, false, true), "<s> ab");
  EXPECT_EQ(tok->TokenToPiece(1), "<s>");
  EXPECT_EQ(tok->TokenToPiece(1, false), "");
  EXPECT_EQ(tok->TokenToPiece(-1), "");
  EXPECT_EQ(tok->TokenToPiece(tok->n_vocab()), "");
}

TEST(Spm, AddSpacePrefixCanBeTurnedOff) {
  auto b = SpmVocab({{"\xE2\x96\x81", -1},
                     {"a", -1},
                     {"\xE2\x96\x81"
                      "a",
                      -2}});
  b.Bool("tokenizer.ggml.add_space_prefix", false);
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->Tokenize("a", false, false), (std::vector<int32_t>{kFirstPiece + 1}));
  EXPECT_EQ(tok->Tokenize(" a", false, false), (std::vector<int32_t>{kFirstPiece + 2}));
}

// `extra_control`, when given, is appended as one more control token (id 22).
GgufBuilder BpeVocab(const std::string& pre, const std::string& extra_control = "") {
  // Byte-level BPE over "hello world" pieces: "Ġ" is the GPT-2 code point of ' '.
  std::vector<std::string> tokens = {
      "h",  "e",  "l",   "o",     "w",         "r",      "d",           "\xC4\xA0",
      "he", "ll", "llo", "hello", "\xC4\xA0w", "or",     "\xC4\xA0wor", "\xC4\xA0world",
      "1",  "2",  "3",   "12",    "123",       "<|end|>"};
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  const uint32_t eos = static_cast<uint32_t>(tokens.size() - 1);
  if (!extra_control.empty()) {
    tokens.push_back(extra_control);
    types.push_back(3);
  }
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", tokens)
      .I32Array("tokenizer.ggml.token_type", types)
      .StrArray("tokenizer.ggml.merges", {"h e", "l l", "ll o", "he llo", "\xC4\xA0 w", "o r", "\xC4\xA0w or",
                                          "\xC4\xA0wor l", "1 2", "12 3"})
      .U32("tokenizer.ggml.eos_token_id", eos);
  if (!pre.empty()) b.Str("tokenizer.ggml.pre", pre);
  return b;
}

TEST(Bpe, MergesByRank) {
  auto tok = BpeVocab("gpt-2").Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // "Ġworld" needs "Ġwor"+"l" then +"d", but only "Ġwor l" is a merge: "Ġworl" is no token, so
  // its bytes are looked up one by one and dropped when they are no token (llama.cpp).
  const auto ids = tok->Tokenize("hello world", false, false);
  ASSERT_GE(ids.size(), 1u);
  EXPECT_EQ(ids[0], 11);  // "hello"
  EXPECT_EQ(tok->TokenToPiece(11), "hello");
  EXPECT_EQ(tok->TokenToPiece(15), " world");
  EXPECT_EQ(tok->TokenToPiece(21), "<|end|>");
  EXPECT_TRUE(tok->IsEog(21));
}

TEST(Bpe, PreTokenizersSplitDigitsDifferently) {
  auto gpt2 = BpeVocab("gpt-2").Build();
  auto qwen2 = BpeVocab("qwen2").Build();
  auto llama3 = BpeVocab("llama-bpe").Build();
  ASSERT_TRUE(gpt2.ok() && qwen2.ok() && llama3.ok());
  EXPECT_EQ(gpt2->Tokenize("123", false, false), (std::vector<int32_t>{20}));           // \p{N}+
  EXPECT_EQ(llama3->Tokenize("123", false, false), (std::vector<int32_t>{20}));         // \p{N}{1,3}
  EXPECT_EQ(qwen2->Tokenize("123", false, false), (std::vector<int32_t>{16, 17, 18}));  // \p{N}
  auto tekken = BpeVocab("tekken").Build();
  auto gpt4o = BpeVocab("gpt-4o").Build();
  ASSERT_TRUE(tekken.ok() && gpt4o.ok());
  EXPECT_EQ(tekken->Tokenize("123", false, false), (std::vector<int32_t>{16, 17, 18}));  // \p{N}
  EXPECT_EQ(gpt4o->Tokenize("123", false, false), (std::vector<int32_t>{20}));           // \p{N}{1,3}
  EXPECT_TRUE(tekken->add_bos());
  EXPECT_FALSE(gpt4o->add_bos());
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_FALSE(gpt2->add_bos());
}

TEST(Bpe, ParseSpecial) {
  auto tok = BpeVocab("gpt-2").Build();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->Tokenize("hello<|end|>", false, true), (std::vector<int32_t>{11, 21}));
  const auto plain = tok->Tokenize("hello<|end|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 21), 0);
}

TEST(Wpm, GreedyLongestMatchAndUnknown) {
  std::vector<std::string> tokens = {"[PAD]",
                                     "[UNK]",
                                     "[CLS]",
                                     "[SEP]",
                                     "[MASK]",
                                     "\xE2\x96\x81"  // NOLINT(bugprone-suspicious-missing-comma): one literal
                                     "hello",
                                     "\xE2\x96\x81"
                                     "he",
                                     "llo",
                                     "\xE2\x96\x81"
                                     "!",
                                     "\xE2\x96\x81"
                                     "cafe"};
  std::vector<int32_t> types = {3, 3, 3, 3, 3, 1, 1, 1, 1, 1};
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "bert")
      .StrArray("tokenizer.ggml.tokens", tokens)
      .I32Array("tokenizer.ggml.token_type", types)
      .U32("tokenizer.ggml.unknown_token_id", 1)
      .U32("tokenizer.ggml.cls_token_id", 2)
      .U32("tokenizer.ggml.bos_token_id", 2)
      .U32("tokenizer.ggml.seperator_token_id", 3)
      .U32("tokenizer.ggml.padding_token_id", 0);
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // Lowercased; "!" is a word of its own; "Café" loses its accent; "xyz" is [UNK].
  EXPECT_EQ(tok->Tokenize("HELLO! Caf\xC3\xA9 xyz", false, false), (std::vector<int32_t>{5, 8, 9, 1}));
  EXPECT_EQ(tok->Tokenize("hello", true, false), (std::vector<int32_t>{2, 5, 3}));
}

// Found by a differential test against llama.cpp:
// per-model attributes and the flags only the vocabulary type reads.
TEST(Bpe, MaskTokensStripTheirLeftWhitespaceByModel) {
  // llama_vocab::impl::load: general.name containing "modern-bert" gives [MASK] LSTRIP; the
  // architectures nomic-bert-moe and jina-bert-v3 give <mask> LSTRIP.
  for (const auto& [key, value, mask] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"general.name", "ModernBERT modern-bert-base", "[MASK]"},
           {"general.architecture", "jina-bert-v3", "<mask>"},
           {"general.architecture", "nomic-bert-moe", "<mask>"}}) {
    GgufBuilder b = BpeVocab("gpt-2", mask);
    b.Str(key, value);
    auto tok = b.Build();
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    // "hello   [MASK]": the spaces before the mask token go with it ("hello" 11, the mask 22; without
    // the rule the spaces become byte-level "Ġ" tokens 7 in between).
    EXPECT_EQ(tok->Tokenize("hello   " + mask, false, true), (std::vector<int32_t>{11, 22})) << value;
  }
  // Another model name: the spaces stay in the text before the mask.
  GgufBuilder b = BpeVocab("gpt-2", "[MASK]");
  b.Str("general.name", "plain-bert");
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_NE(tok->Tokenize("hello   [MASK]", false, true), (std::vector<int32_t>{11, 22}));
}

TEST(FromGguf, FlagsTheVocabularyTypeDoesNotReadAreNotChecked) {
  // BPE never reads add_sep; WPM always adds [CLS] ... [SEP] and ignores add_bos / add_eos: llama.cpp
  // loads such files, so Stowage does too (it refused them for a missing separator / EOS id).
  auto bpe = BpeVocab("gpt-2");
  bpe.Bool("tokenizer.ggml.add_sep_token", true);
  auto b1 = bpe.Build();
  ASSERT_TRUE(b1.ok()) << b1.status().ToString();
  EXPECT_EQ(b1->Tokenize("hello", true, false), (std::vector<int32_t>{11}));
  GgufBuilder w;
  w.Str("tokenizer.ggml.model", "bert")
      .StrArray("tokenizer.ggml.tokens", {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81hello"})
      .I32Array("tokenizer.ggml.token_type", {3, 3, 3, 3, 1})
      .U32("tokenizer.ggml.unknown_token_id", 1)
      .U32("tokenizer.ggml.bos_token_id", 2)
      .U32("tokenizer.ggml.seperator_token_id", 3)
      .Bool("tokenizer.ggml.add_eos_token", true);
  auto b2 = w.Build();
  ASSERT_TRUE(b2.ok()) << b2.status().ToString();
  EXPECT_EQ(b2->Tokenize("hello", true, false), (std::vector<int32_t>{2, 4, 3}));
}

TEST(FromGguf, Errors) {
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama");
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.tokens"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "t5").StrArray("tokenizer.ggml.tokens", {"a"});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("'t5'"), std::string::npos) << r.status().message();
  }
  {
    auto r = BpeVocab("no-such-pre").Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(
        r.status().message().find("key 'tokenizer.ggml.pre': expected a pre-tokenizer Stowage implements, "
                                  "found unknown pre-tokenizer 'no-such-pre'"),
        std::string::npos)
        << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "gpt2").StrArray("tokenizer.ggml.tokens", {"a", "b"});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.merges"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama").StrArray("tokenizer.ggml.tokens", {"a", "b", "a"});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("duplicate token 'a'"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "c"})
        .F32Array("tokenizer.ggml.scores", {0.0f});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.scores"), std::string::npos) << r.status().message();
  }
  {
    // SPM adds BOS by default, but a 1-token vocabulary has no id 1 for it.
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama").StrArray("tokenizer.ggml.tokens", {"a"});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("add_bos_token"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "c"})
        .Str("tokenizer.ggml.bos_token_id", "one");
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("bos_token_id"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "c"})
        .F32Array("tokenizer.ggml.token_type", {1, 1, 1});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.token_type"), std::string::npos)
        << r.status().message();
  }
  {
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama").U32("tokenizer.ggml.tokens", 3);
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.tokens"), std::string::npos) << r.status().message();
  }
  {
    GgufBuilder b;
    b.U32("tokenizer.ggml.model", 1).StrArray("tokenizer.ggml.tokens", {"a", "b", "c"});
    auto r = b.Build();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("tokenizer.ggml.model"), std::string::npos) << r.status().message();
  }
}

TEST(FromGguf, OutOfRangeSpecialIdKeepsDefault) {
  auto b = SpmVocab({{"a", -1}});
  b.U32("tokenizer.ggml.bos_token_id", 4294967295u).U32("tokenizer.ggml.padding_token_id", 4294967295u);
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->pad(), kTokenNull);
  // -1 (0xFFFFFFFF) is LLAMA_TOKEN_NULL, "none", as converters write it: no warning for it.
  EXPECT_TRUE(tok->warnings().empty());
}

// Any other id outside the vocabulary is reported, as llama.cpp's "bad special token" warning
// (was silent).
TEST(FromGguf, OutOfRangeSpecialIdIsAWarning) {
  auto b = SpmVocab({{"a", -1}});
  b.U32("tokenizer.ggml.bos_token_id", 1000).U32("tokenizer.ggml.padding_token_id", 4294967294u);
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->pad(), kTokenNull);
  ASSERT_EQ(tok->warnings().size(), 2u);
  EXPECT_EQ(tok->warnings()[0].rfind("test.gguf: offset ", 0), 0u) << tok->warnings()[0];
  EXPECT_NE(tok->warnings()[0].find(": key 'tokenizer.ggml.bos_token_id': expected a token id below 260 (the "
                                    "vocabulary's size), found 1000; using the default id 1 (llama.cpp: bad "
                                    "special token)"),
            std::string::npos)
      << tok->warnings()[0];
  EXPECT_NE(tok->warnings()[1].find(
                "padding_token_id': expected a token id below 260 (the vocabulary's size), found "
                "4294967294; using no such token"),
            std::string::npos)
      << tok->warnings()[1];
  EXPECT_TRUE(SpmVocab({{"a", -1}}).Build()->warnings().empty());
}

// Token types outside llama_token_type (0..6) are read as undefined, as llama.cpp does, with one
// warning naming the first and counting the others (was silent).
TEST(FromGguf, UnknownTokenTypesAreUndefinedWithAWarning) {
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b"})
      .I32Array("tokenizer.ggml.token_type", {2, 3, 3, 99, -1});
  auto tok = b.Build();
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->TokenAttrs(3), kTokenAttrUndefined);
  EXPECT_EQ(tok->TokenAttrs(4), kTokenAttrUndefined);
  ASSERT_EQ(tok->warnings().size(), 1u);
  EXPECT_NE(tok->warnings()[0].find(
                ": key 'tokenizer.ggml.token_type': expected token types 0..6 (llama_token_type), "
                "found 99 for token 3 (and 1 more); read as undefined tokens, as llama.cpp does"),
            std::string::npos)
      << tok->warnings()[0];
}

TEST(Tokenize, InvalidUtf8DoesNotCrash) {
  auto tok = BpeVocab("llama-bpe").Build();
  ASSERT_TRUE(tok.ok());
  const std::string bad = std::string("he\xFF\xC3llo\xE2\x82", 9);
  const auto ids = tok->Tokenize(bad, true, true);
  for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < tok->n_vocab());
  auto spm = SpmVocab({{"\xE2\x96\x81", -1}, {"a", -1}}).Build();
  ASSERT_TRUE(spm.ok());
  const auto ids2 = spm->Tokenize(bad, false, false);
  EXPECT_FALSE(ids2.empty());
  std::string back;
  for (int32_t id : ids2) back += spm->TokenToPiece(id);
  EXPECT_EQ(back, " " + bad);  // byte fallback keeps every byte
}

}  // namespace
}  // namespace stowage
