// llama.cpp's tokenizer test vectors (test-tokenizer-0: add_special=false, parse_special=false)
// on the vocab-only GGUF files of ../shared/models/vocab, plus the golden prompt/greedy texts.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "stowage/runtime/tokenizer.h"
#include "test_paths.h"

namespace stowage {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> expected;
};

// Inputs are separated by "\n__ggml_vocab_test__\n"; the .out file holds one line of ids per
// input (test-tokenizer-0.cpp read_tests).
std::vector<VocabCase> ReadCases(const std::string& inp_path, const std::string& out_path) {
  const std::string raw = ReadAll(inp_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(out_path);
  std::vector<VocabCase> cases;
  std::string line;
  size_t i = 0;
  while (std::getline(out, line)) {
    VocabCase c;
    if (i < inputs.size()) c.text = inputs[i];
    std::istringstream ls(line);
    int32_t id;
    while (ls >> id) c.expected.push_back(id);
    cases.push_back(std::move(c));
    ++i;
  }
  EXPECT_EQ(cases.size(), inputs.size()) << inp_path;
  return cases;
}

std::string Ids(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += std::to_string(x) + " ";
  return s;
}

Result<Tokenizer> Load(const std::string& path) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return Tokenizer::FromGguf(**file);
}

class VocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabTest, MatchesLlamaCppTestVectors) {
  const std::string path = test::ModelPath(std::string("vocab/ggml-vocab-") + GetParam() + ".gguf");
  STOWAGE_REQUIRE_FILE(path);
  STOWAGE_REQUIRE_FILE(path + ".inp");
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto cases = ReadCases(path + ".inp", path + ".out");
  ASSERT_GT(cases.size(), 40u);
  int failures = 0;
  for (const VocabCase& c : cases) {
    const std::vector<int32_t> got = tok->Tokenize(c.text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(got, c.expected) << "text: '" << c.text << "'\n  expected: " << Ids(c.expected)
                               << "\n  got:      " << Ids(got);
    failures += got != c.expected;
  }
  EXPECT_EQ(failures, 0);
}

// Detokenizing the expected ids gives the input back, up to what the vocabulary cannot represent
// (SPM's leading space is removed by Detokenize). Not WPM: it lowercases and drops accents.
class RoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTripTest, DetokenizeRoundTrips) {
  const std::string path = test::ModelPath(std::string("vocab/ggml-vocab-") + GetParam() + ".gguf");
  STOWAGE_REQUIRE_FILE(path);
  STOWAGE_REQUIRE_FILE(path + ".inp");
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (const VocabCase& c : ReadCases(path + ".inp", path + ".out")) {
    std::string pieces;
    for (int32_t id : c.expected) pieces += tok->TokenToPiece(id);
    if (tok->type() == VocabType::kSpm) {
      // Pieces carry the add_space_prefix space; Detokenize removes it again.
      EXPECT_EQ(pieces, c.expected.empty() ? "" : " " + c.text) << c.text;
      EXPECT_EQ(tok->Detokenize(c.expected), c.text) << c.text;
    } else {
      EXPECT_EQ(pieces, c.text) << c.text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "qwen2", "bert-bge"));
INSTANTIATE_TEST_SUITE_P(Vocabs, RoundTripTest, ::testing::Values("llama-spm", "phi-3", "gpt-2", "qwen2"));

TEST(VocabFiles, AquilaLoadsWithDefaultPreTokenizer) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-aquila.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->type(), VocabType::kBpe);
  EXPECT_EQ(tok->pre(), "default");
  EXPECT_EQ(tok->n_vocab(), 100008);
  // The default regex list splits "1234567" into "123" "456" "7"; BPE then round-trips.
  const std::string text = "Hello, world! 1234567 fine.";
  const std::vector<int32_t> ids = tok->Tokenize(text, false, false);
  ASSERT_FALSE(ids.empty());
  std::string back;
  for (int32_t id : ids) back += tok->TokenToPiece(id);
  EXPECT_EQ(back, text);
  const std::vector<int32_t> digits = tok->Tokenize("1234567", false, false);
  ASSERT_EQ(digits.size(), 3u) << Ids(digits);
  EXPECT_EQ(tok->TokenToPiece(digits[0]), "123");
  EXPECT_EQ(tok->TokenToPiece(digits[1]), "456");
  EXPECT_EQ(tok->TokenToPiece(digits[2]), "7");
}

TEST(VocabFiles, BertAddsClsSepAndDetokenizesWithCleanSpaces) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-bert-bge.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->type(), VocabType::kWpm);
  const std::vector<int32_t> ids = tok->Tokenize("Hello World!", true, false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 101);  // [CLS]
  EXPECT_EQ(ids.back(), 102);   // [SEP]
  // Word-start pieces carry the "▁" space; clean_spaces joins " !" (llama.cpp detokenize).
  EXPECT_EQ(tok->Detokenize(ids, /*remove_special=*/false, /*unparse_special=*/false), " hello world!");
  EXPECT_EQ(tok->Detokenize(ids, false, true), "[CLS] hello world![SEP]");
}

TEST(VocabFiles, SpecialTokensAndEog) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-qwen2.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const int32_t im_start = tok->TextToToken("<|im_start|>");
  const int32_t im_end = tok->TextToToken("<|im_end|>");
  ASSERT_NE(im_start, kTokenNull);
  EXPECT_TRUE(tok->IsEog(im_end));
  EXPECT_EQ(tok->eot(), im_end);
  EXPECT_EQ(tok->nl(), tok->TextToToken("\xC4\x8A"));  // "Ċ" = byte 0x0A
  EXPECT_TRUE(tok->IsEog(tok->eos()));
  EXPECT_FALSE(tok->IsEog(im_start));
  EXPECT_FALSE(tok->IsEog(kTokenNull));
  // parse_special recognises control tokens written in the text; without it they are text.
  const auto with = tok->Tokenize("<|im_start|>user", false, true);
  ASSERT_GE(with.size(), 2u);
  EXPECT_EQ(with[0], im_start);
  const auto without = tok->Tokenize("<|im_start|>user", false, false);
  EXPECT_NE(without[0], im_start);
  EXPECT_GT(without.size(), with.size());
  // Control tokens render only when asked to.
  EXPECT_EQ(tok->TokenToPiece(im_end, true), "<|im_end|>");
  EXPECT_EQ(tok->TokenToPiece(im_end, false), "");
  EXPECT_EQ(tok->Detokenize(with, false, true), "<|im_start|>user");
}

TEST(VocabFiles, Phi3SpecialTokensStripTheSpaceToTheirRight) {
  const std::string path = test::ModelPath("vocab/ggml-vocab-phi-3.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const int32_t user = tok->TextToToken("<|user|>");
  ASSERT_NE(user, kTokenNull);
  EXPECT_TRUE(tok->TokenAttrs(user) & kTokenAttrRstrip);
  // "<|user|> Hi" == "<|user|>Hi": the space after the special token is dropped, and SPM's
  // add_space_prefix puts "▁" before the text that follows a special token.
  EXPECT_EQ(tok->Tokenize("<|user|> Hi", true, true), tok->Tokenize("<|user|>Hi", true, true));
  EXPECT_EQ(tok->Tokenize("<|user|>Hi", true, true)[0], tok->bos());
  EXPECT_EQ(tok->Tokenize("<|user|>Hi", true, true)[1], user);
  EXPECT_TRUE(tok->IsEog(tok->TextToToken("<|end|>")));
  EXPECT_EQ(tok->eot(), tok->TextToToken("<|end|>"));
  EXPECT_TRUE(tok->IsEog(32000));  // <|endoftext|>
}

TEST(Stories260K, PromptWithBos) {
  const std::string path = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(path);
  auto tok = Load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->IsEog(2));
  EXPECT_EQ(tok->nl(), tok->TextToToken("<0x0A>"));
  EXPECT_EQ(tok->Tokenize("Once upon a time", true, false), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->Tokenize("Once upon a time", false, false), (std::vector<int32_t>{403, 407, 261, 378}));
  // "<s>" is a control token: text unless parse_special.
  EXPECT_EQ(tok->Tokenize("<s>Once upon a time", false, true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_NE(tok->Tokenize("<s>Once upon a time", false, false)[0], 1);
  EXPECT_EQ(tok->Tokenize("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->Tokenize("", false, false).empty());
}

std::string HexToBytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Minimal extraction of a JSON array of ints / a string value (the golden files are flat).
std::vector<int32_t> JsonInts(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  const size_t b = json.find('[', k);
  const size_t e = json.find(']', b);
  std::vector<int32_t> out;
  std::string body = json.substr(b + 1, e - b - 1);
  for (char& c : body)
    if (c == ',') c = ' ';
  std::istringstream ss(body);
  int32_t x;
  while (ss >> x) out.push_back(x);
  return out;
}

std::string JsonString(const std::string& json, const std::string& key) {
  const size_t k = json.find("\"" + key + "\"");
  const size_t b = json.find('"', json.find(':', k));
  const size_t e = json.find('"', b + 1);
  return json.substr(b + 1, e - b - 1);
}

class GoldenText : public ::testing::TestWithParam<const char*> {};

// llama.cpp's prompt tokens and greedy continuation bytes for each golden model.
TEST_P(GoldenText, PromptTokensAndGreedyBytes) {
  const std::string model = test::ModelPath(std::string(GetParam()) + ".gguf");
  const std::string golden = test::GoldenDir() + "/logits/" + GetParam() + ".json";
  STOWAGE_REQUIRE_FILE(model);
  STOWAGE_REQUIRE_FILE(golden);
  auto tok = Load(model);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::string json = ReadAll(golden);
  EXPECT_EQ(tok->Tokenize(JsonString(json, "prompt"), true, false), JsonInts(json, "prompt_tokens"));
  const std::vector<int32_t> greedy = JsonInts(json, "greedy");
  ASSERT_FALSE(greedy.empty());
  std::string pieces;
  for (int32_t id : greedy) pieces += tok->TokenToPiece(id);
  EXPECT_EQ(pieces, HexToBytes(JsonString(json, "greedy_bytes_hex")));
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenText,
                         ::testing::Values("stories260K", "stories260K-Q8_0", "llama-2-tiny-random",
                                           "tiny-tied-f32"));

TEST(Stories260K, DetokenizeGreedyGivesGoldenBytes) {
  const std::string model = test::ModelPath("stories260K.gguf");
  const std::string golden = test::GoldenDir() + "/logits/stories260K.json";
  STOWAGE_REQUIRE_FILE(model);
  STOWAGE_REQUIRE_FILE(golden);
  auto tok = Load(model);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::string json = ReadAll(golden);
  EXPECT_EQ(tok->Detokenize(JsonInts(json, "greedy")), HexToBytes(JsonString(json, "greedy_bytes_hex")));
}

// Cases where a differential test against llama.cpp (node-llama-cpp@3.21.1's libllama, Sep 2026)
// found Stowage's tokens different; the expected ids are
// llama.cpp's (llama_tokenize with add_special and parse_special).
struct DiffCase {
  const char* vocab;
  const char* text;
  std::vector<int32_t> expected;
};

TEST(LlamaCppDifferential, Unicode151AndUnassignedCodePoints) {
  const std::vector<DiffCase> cases = {
      // BERT keeps unassigned code points (Cn: llama.cpp's "undefined" flag, not control): [UNK].
      {"bert-bge", "hello \xcd\xb8 world", {101, 7592, 100, 2088, 102}},
      {"bert-bge",
       "ab\xcd\xb8"
       "cd",
       {101, 100, 102}},
      {"bert-bge", "\xef\xb7\x90", {101, 100, 102}},  // U+FDD0, a noncharacter
      // Code points assigned in Unicode 15.0 / 15.1 (llama.cpp's tables are 15.1).
      {"bert-bge", "\xf0\x9f\xab\xa8", {101, 100, 102}},  // U+1FAE8 (So)
      {"gpt-2",
       "it\xf0\xb1\x8d\x90's",
       {270, 172, 109, 235, 238, 338}},  // U+31350 (Lo): 's stays a contraction
      {"qwen2", "it\xf0\xb1\x8d\x90's", {275, 172, 109, 235, 238, 594}},
      {"qwen2", " \xf0\x9d\x8b\x80", {220, 56252, 233, 222}},  // U+1D2C0 (No): no leading space
  };
  for (const DiffCase& c : cases) {
    const std::string path = test::ModelPath(std::string("vocab/ggml-vocab-") + c.vocab + ".gguf");
    STOWAGE_REQUIRE_FILE(path);
    auto tok = Load(path);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ(Ids(tok->Tokenize(c.text, true, true)), Ids(c.expected)) << c.vocab << ": " << c.text;
  }
}

}  // namespace
}  // namespace stowage
