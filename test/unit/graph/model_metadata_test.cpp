// Hyper-parameters and vocabulary metadata that would give plans the runtime refuses or computes NaN
// or flat logits with, and tensors nothing reads: each refused when the model is read (ReadHParams /
// BuildModelGraphs, the planning entry point of plan-model and stowage-run) with one line naming
// the file, the key or tensor, its offset, and what was expected and found. Files: a valid small
// model of gguf-synth's test helper with one key or tensor changed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "stowage/planner/model_graphs.h"
#include "stowage/runtime/gguf_attn_temperature.h"
#include "stowage/runtime/gguf_sliding_window.h"
#include "stowage/runtime/gguf_vocab.h"
#include "stowage/runtime/tokenizer.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

using test::SynthGguf;
using test::SynthParams;

// "<file>: offset <N>: key '<key>'" of `key` in the file `s` writes. (Each SynthGguf::Parse
// rewrites the bytes the previous file parsed from `s` views: use a file before parsing again.)
std::string KeyAt(SynthGguf& s, const std::string& key) {
  auto f = s.Parse();
  for (const GgufKV& kv : f->kvs())
    if (kv.key == key) return f->path() + ": offset " + std::to_string(kv.offset) + ": key '" + key + "'";
  return "(no key " + key + ")";
}

std::string BuildError(SynthGguf& s) {
  auto f = s.Parse();
  auto m = BuildModelGraphs(*f, {});
  return m.ok() ? "(built)" : m.status().message();
}

// A vocabulary of n tokens as llama.cpp's converter writes it (SPM: <unk> <s> </s>, then pieces).
void AddVocab(SynthGguf& s, uint32_t n) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  while (tokens.size() < n) tokens.push_back("t" + std::to_string(tokens.size()));
  s.Set("tokenizer.ggml.model", GgufMetaValue::Str("llama"));
  s.Set("tokenizer.ggml.tokens", GgufMetaValue::ArrayStr(tokens));
}

TEST(HParamsValidation, RmsEpsilonMustBeFiniteAndNonNegative) {
  const std::string key = "llama.attention.layer_norm_rms_epsilon";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& [value, text] :
       std::vector<std::pair<float, std::string>>{{nan, "nan"}, {-1e-5f, "-1e-05"}, {inf, "inf"}}) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Set(key, GgufMetaValue::F32(value));
    EXPECT_EQ(BuildError(s),
              KeyAt(s, key) + ": expected a finite epsilon >= 0 (ggml's norms), found " + text);
  }
}

TEST(HParamsValidation, HugeRmsEpsilonIsAWarning) {
  const std::string key = "llama.attention.layer_norm_rms_epsilon";
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Set(key, GgufMetaValue::F32(1e30f));
  auto f = s.Parse();
  auto hp = ReadHParams(*f);
  ASSERT_TRUE(hp.ok()) << hp.status().message();
  ASSERT_EQ(hp->warnings.size(), 1u);
  EXPECT_EQ(hp->warnings[0],
            KeyAt(s, key) +
                ": expected a small epsilon (models use 1e-6 to 1e-5), found 1e+30, which scales the "
                "activations toward 0 and flattens the logits");
  s.Set(key, GgufMetaValue::F32(1e-5f));
  auto ok = ReadHParams(*s.Parse());
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->warnings.empty());
}

TEST(HParamsValidation, RopeFreqBaseMustBePositive) {
  const std::string key = "llama.rope.freq_base";
  for (const auto& [value, text] : std::vector<std::pair<float, std::string>>{
           {0.f, "0"}, {std::numeric_limits<float>::quiet_NaN(), "nan"}, {-10000.f, "-10000"}}) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Set(key, GgufMetaValue::F32(value));
    EXPECT_EQ(BuildError(s), KeyAt(s, key) + ": expected a finite base > 0, found " + text);
  }
}

TEST(HParamsValidation, OtherFloatsMustBeFinite) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"llama.rope.scaling.factor", "a finite factor >= 0 (0: no scaling)"},
      {"llama.rope.scaling.attn_factor", "a finite factor > 0"},
      {"llama.attention.scale", "a finite scale >= 0 (0: 1/sqrt(head size))"},
      {"llama.attention.layer_norm_epsilon", "a finite epsilon >= 0 (ggml's norms)"},
  };
  for (const auto& [key, rule] : cases) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Set(key, GgufMetaValue::F32(nan));
    EXPECT_EQ(BuildError(s), KeyAt(s, key) + ": expected " + rule + ", found nan");
  }
}

// gemma and phi3 have no llama.cpp n_rot check; an odd or too large count reached the runtime's
// "ROPE: n_dims 7" about the plan in memory, and 0 its "ROPE: n_dims 0 must be even".
TEST(HParamsValidation, RopeDimensionCountMustBeEvenAndFitTheHead) {
  for (uint32_t n_rot : {7u, 4294967295u, 18u, 0u}) {
    for (const std::string arch : {"gemma", "phi3"}) {
      SynthGguf s = arch == "gemma" ? test::GemmaModel(SynthParams{}, /*head_dim=*/16)
                                    : test::Phi3Model(SynthParams{}, /*rope_factors=*/false);
      const std::string key = arch + ".rope.dimension_count";
      // gemma's head size is its key_length; phi3's llama.cpp's n_embd / n_head.
      const std::string head = arch == "gemma" ? "gemma.attention.key_length"
                                               : "phi3.embedding_length 64 / phi3.attention.head_count 4";
      s.Set(key, GgufMetaValue::U32(n_rot));
      EXPECT_EQ(BuildError(s), KeyAt(s, key) + ": expected an even count from 2 to the head size 16 (" +
                                   head + "), found " + std::to_string(n_rot))
          << arch;
    }
  }
  SynthGguf s = test::GemmaModel(SynthParams{}, /*head_dim=*/16);
  s.Set("gemma.rope.dimension_count", GgufMetaValue::U32(8));  // partial rotary: fine
  EXPECT_EQ(BuildError(s), "(built)");
}

// Was "llama.rope.dimension_count: invalid n_rot 16, expected 0".
TEST(HParamsValidation, EmbeddingLengthZero) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Set("llama.embedding_length", GgufMetaValue::U32(0));
  EXPECT_EQ(BuildError(s), KeyAt(s, "llama.embedding_length") + ": expected a positive width, found 0");
}

// Head sizes that disagree: the message names the key at fault with its offset and every value the
// rule combines (llama.cpp: n_embd_head_k = n_embd / n_head, n_gqa = n_head / n_head_kv). Was
// "llama.rope.dimension_count: invalid n_rot 16, expected 8" for a changed embedding_length or
// head_count, and "head_count_kv must divide head_count" without values.
TEST(HParamsValidation, HeadSizeInconsistenciesNameTheKeysAndValues) {
  const std::string rot = "llama.rope.dimension_count";
  for (const auto& [key, value, head] : std::vector<std::tuple<std::string, uint32_t, std::string>>{
           {"llama.embedding_length", 32, "8 (llama.embedding_length 32 / llama.attention.head_count 4"},
           {"llama.attention.head_count", 8,
            "8 (llama.embedding_length 64 / llama.attention.head_count 8"}}) {
    SynthGguf s = test::LlamaModel(SynthParams{});  // head size 16
    s.Set(rot, GgufMetaValue::U32(16));
    s.Set(key, GgufMetaValue::U32(value));
    s.Set("llama.attention.head_count_kv", GgufMetaValue::U32(4));
    EXPECT_EQ(BuildError(s),
              KeyAt(s, rot) + ": expected the head size " + head + "; llama.cpp: invalid n_rot), found 16");
  }
  for (uint32_t kv : {0u, 3u, 8u}) {
    SynthGguf s = test::LlamaModel(SynthParams{});  // head_count 4
    s.Set("llama.attention.head_count_kv", GgufMetaValue::U32(kv));
    EXPECT_EQ(BuildError(s), KeyAt(s, "llama.attention.head_count_kv") +
                                 ": expected a divisor of llama.attention.head_count 4, found " +
                                 std::to_string(kv));
  }
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Set("llama.embedding_length", GgufMetaValue::U32(62));
  EXPECT_EQ(BuildError(s), KeyAt(s, "llama.embedding_length") +
                               ": expected a multiple of llama.attention.head_count 4, found 62");
  SynthGguf v = test::LlamaModel(SynthParams{});
  v.Set("llama.attention.value_length", GgufMetaValue::U32(8));
  EXPECT_EQ(BuildError(v),
            KeyAt(v, "llama.attention.value_length") +
                ": expected the head size 16 (llama.embedding_length 64 / llama.attention.head_count "
                "4; build_llama asserts equal K and V head sizes), found 8");
  SynthGguf q = test::Qwen2Model(SynthParams{});
  q.Set("qwen2.rope.dimension_count", GgufMetaValue::U32(8));
  EXPECT_EQ(BuildError(q),
            KeyAt(q, "qwen2.rope.dimension_count") +
                ": expected the head size 16 (qwen2.embedding_length 64 / qwen2.attention.head_count "
                "4; build_qwen2 asserts n_rot == head size), found 8");
}

// Counts refused with their key's offset (was "block_count 0 must be positive", no offset).
TEST(HParamsValidation, CountsNameTheirKeyAndOffset) {
  const std::vector<std::tuple<std::string, uint32_t, std::string>> cases = {
      {"llama.block_count", 0, "a positive layer count"},
      {"llama.block_count", 513, "at most 512 layers (llama.cpp LLAMA_MAX_LAYERS)"},
      {"llama.attention.head_count", 0, "a positive head count"},
      {"llama.expert_used_count", 3, "0 (llama.expert_count is 0 or absent)"},
  };
  for (const auto& [key, value, rule] : cases) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Set(key, GgufMetaValue::U32(value));
    EXPECT_EQ(BuildError(s), KeyAt(s, key) + ": expected " + rule + ", found " + std::to_string(value));
  }
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Set("llama.expert_count", GgufMetaValue::U32(4));
  s.Set("llama.expert_used_count", GgufMetaValue::U32(0));
  EXPECT_EQ(BuildError(s),
            KeyAt(s, "llama.expert_used_count") + ": expected 1..4 (llama.expert_count 4), found 0");
  SynthGguf m = test::MambaModel(SynthParams{});
  m.Set("mamba.ssm.state_size", GgufMetaValue::U32(0));
  EXPECT_EQ(BuildError(m), KeyAt(m, "mamba.ssm.state_size") + ": expected a positive size, found 0");
}

// Values llama.cpp runs that are no model's: accepted with a warning naming the key (as an
// out-of-range special token id is): an epsilon of 0 (a row of zeros normalizes to NaN), a rope
// base below 1.
TEST(HParamsValidation, ZeroEpsilonAndTinyRopeBaseAreWarnings) {
  const std::vector<std::tuple<std::string, float, std::string>> cases = {
      {"llama.attention.layer_norm_rms_epsilon", 0.f,
       "expected a small positive epsilon (models use 1e-6 to 1e-5), found 0, which makes the norm of a row "
       "of "
       "zeros 0/0 = NaN"},
      {"llama.rope.freq_base", 1e-30f,
       "expected a base >= 1 (models use 1e4 to 1e7), found 1e-30, which makes the rotation faster for "
       "higher "
       "dimensions"},
  };
  for (const auto& [key, value, text] : cases) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Set(key, GgufMetaValue::F32(value));
    auto f = s.Parse();
    auto hp = ReadHParams(*f);
    ASSERT_TRUE(hp.ok()) << hp.status().message();
    ASSERT_EQ(hp->warnings.size(), 1u) << key;
    EXPECT_EQ(hp->warnings[0], KeyAt(s, key) + ": " + text);
  }
}

// Tokenizer metadata the runtime's tokenizer refuses (stowage-run: one line) gave plans: the planner
// now runs the tokenizer's own check (Tokenizer::Validate), so both refuse with the same message.
TEST(TokenizerValidation, PlannerRefusesWhatTheTokenizerRefuses) {
  const std::vector<std::pair<std::string, std::function<void(SynthGguf&)>>> cases = {
      {"model bogus", [](SynthGguf& s) { s.Set("tokenizer.ggml.model", GgufMetaValue::Str("bogus")); }},
      {"model t5", [](SynthGguf& s) { s.Set("tokenizer.ggml.model", GgufMetaValue::Str("t5")); }},
      {"model no_vocab with tokens",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.model", GgufMetaValue::Str("no_vocab")); }},
      {"model missing", [](SynthGguf& s) { s.DropKey("tokenizer.ggml.model"); }},
      {"model u32", [](SynthGguf& s) { s.Set("tokenizer.ggml.model", GgufMetaValue::U32(1)); }},
      {"gpt2 without merges",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.model", GgufMetaValue::Str("gpt2")); }},
      {"scores short",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.scores", GgufMetaValue::ArrayF32(std::vector<float>(10))); }},
      {"token_type short",
       [](SynthGguf& s) {
         s.Set("tokenizer.ggml.token_type", GgufMetaValue::ArrayI32(std::vector<int32_t>(100, 1)));
       }},
      {"token_type f32",
       [](SynthGguf& s) {
         s.Set("tokenizer.ggml.token_type", GgufMetaValue::ArrayF32(std::vector<float>(128, 1.f)));
       }},
      {"duplicate token",
       [](SynthGguf& s) {
         std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
         while (tokens.size() < 128) tokens.push_back("t" + std::to_string(tokens.size()));
         tokens[100] = "t101";
         s.Set("tokenizer.ggml.tokens", GgufMetaValue::ArrayStr(tokens));
       }},
      {"add_bos_token str",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.add_bos_token", GgufMetaValue::Str("true")); }},
      {"add_space_prefix u32",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.add_space_prefix", GgufMetaValue::U32(1)); }},
      {"bos_token_id str",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.bos_token_id", GgufMetaValue::Str("1")); }},
      {"fim_pre_token_id str",
       [](SynthGguf& s) { s.Set("tokenizer.ggml.fim_pre_token_id", GgufMetaValue::Str("1")); }},
  };
  for (const auto& [name, change] : cases) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    AddVocab(s, 128);
    EXPECT_EQ(BuildError(s), "(built)") << name;
    change(s);
    const std::string planned = BuildError(s);
    auto f = s.Parse();
    auto tok = Tokenizer::FromGguf(*f);
    ASSERT_FALSE(tok.ok()) << name;
    EXPECT_EQ(planned, tok.status().message()) << name;
    EXPECT_EQ(planned.rfind("llama.gguf: ", 0), 0u) << name << ": " << planned;
  }
}

// An out-of-range fim_pre/suf/mid id (read by llama.cpp, not by Stowage) is llama.cpp's "bad special
// token" fallback with a warning, as eot/eom are (was: accepted silently); the plan is made.
TEST(TokenizerValidation, OutOfRangeFimIdsAreWarnings) {
  for (const std::string key : {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
                                "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.prefix_token_id"}) {
    SynthGguf s = test::LlamaModel(SynthParams{});
    AddVocab(s, 128);
    s.Set(key, GgufMetaValue::U32(9999));
    EXPECT_EQ(BuildError(s), "(built)") << key;
    auto f = s.Parse();
    auto tok = Tokenizer::FromGguf(*f);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    ASSERT_EQ(tok->warnings().size(), 1u) << key;
    EXPECT_EQ(tok->warnings()[0],
              KeyAt(s, key) +
                  ": expected a token id below 128 (the vocabulary's size), found 9999; using "
                  "no such token (llama.cpp: bad special token)");
  }
}

// The planner and the tokenizer read the vocabulary's size the same way: same message from both.
void ExpectSameVocabError(SynthGguf& s, const std::string& want) {
  EXPECT_EQ(BuildError(s), want);
  auto f = s.Parse();  // after BuildError: each Parse rewrites the bytes the last file views
  auto tok = Tokenizer::FromGguf(*f);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().message(), want);
}

// Was "missing key 'llama.vocab_size'", a key the file never had.
TEST(VocabularyValidation, MissingOrMisspelledTokens) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.DropKey("llama.vocab_size");
  AddVocab(s, 128);
  s.DropKey("tokenizer.ggml.tokens");
  s.Set("tokenizer.ggml.tokenz", GgufMetaValue::ArrayStr(std::vector<std::string>(1, "x")));
  ExpectSameVocabError(
      s, "llama.gguf: missing key 'tokenizer.ggml.tokens' (the vocabulary of tokenizer.ggml.model 'llama')");
  // With vocab_size present the planner planned it and the runtime then refused it.
  s.Set("llama.vocab_size", GgufMetaValue::U32(128));
  ExpectSameVocabError(
      s, "llama.gguf: missing key 'tokenizer.ggml.tokens' (the vocabulary of tokenizer.ggml.model 'llama')");
  // No vocabulary and no size at all: the message names the vocabulary, not only vocab_size.
  SynthGguf none = test::LlamaModel(SynthParams{});
  none.DropKey("llama.vocab_size");
  EXPECT_EQ(BuildError(none),
            "llama.gguf: missing key 'tokenizer.ggml.tokens' (the vocabulary; a model without one "
            "gives llama.vocab_size)");
}

TEST(VocabularyValidation, TokensOfTheWrongType) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  AddVocab(s, 128);
  s.Set("tokenizer.ggml.tokens", GgufMetaValue::U32(128));
  ExpectSameVocabError(s, KeyAt(s, "tokenizer.ggml.tokens") + ": expected arr of str, found u32");
}

// Was silently ignored (the token count won).
TEST(VocabularyValidation, VocabSizeContradictingTheTokens) {
  SynthGguf s = test::LlamaModel(SynthParams{});  // llama.vocab_size 128
  AddVocab(s, 128);
  EXPECT_EQ(BuildError(s), "(built)");
  s.Set("llama.vocab_size", GgufMetaValue::U32(130));
  ExpectSameVocabError(
      s, KeyAt(s, "llama.vocab_size") + ": expected 128 (the tokens of tokenizer.ggml.tokens), found 130");
}

TEST(VocabularyValidation, ModelWithoutVocabularyUsesVocabSize) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Set("tokenizer.ggml.model", GgufMetaValue::Str("none"));
  auto f = s.Parse();
  auto n = GgufVocabularySize(*f);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 128u);
  s.Set("llama.vocab_size", GgufMetaValue::U32(0));
  EXPECT_EQ(BuildError(s), KeyAt(s, "llama.vocab_size") + ": expected a positive token count, found 0");
}

// A misspelled output.weight made the model tied (perplexity 541 -> 576); llama.cpp refuses it.
TEST(TensorValidation, TensorNothingReadsIsRefused) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Rename("output.weight", "outptu.weight");
  auto f = s.Parse();
  const std::string at = "offset " + std::to_string(f->FindTensor("outptu.weight")->info_offset);
  const size_t n = f->tensors().size();
  EXPECT_EQ(BuildError(s),
            "llama.gguf: " + at +
                ": tensor 'outptu.weight': expected only tensors architecture llama reads, found one "
                "nothing reads; llama.cpp: wrong number of tensors; expected " +
                std::to_string(n) + ", got " + std::to_string(n - 1));
  SynthGguf two = test::LlamaModel(SynthParams{});
  two.Tensor("blk.0.attn_rot_embd", {8});
  two.Tensor("mm.projector.weight", {64, 64});
  EXPECT_NE(
      BuildError(two).find("tensor 'blk.0.attn_rot_embd': expected only tensors architecture llama reads, "
                           "found one nothing reads (and 1 more)"),
      std::string::npos)
      << BuildError(two);
}

// GgufSlidingWindow of the file `s` writes: the window, "none", or the error message.
std::string Window(SynthGguf& s) {
  auto f = s.Parse();
  auto w = GgufSlidingWindow(*f);
  if (!w.ok()) return w.status().message();
  return *w ? std::to_string(**w) : "none";
}

// n_swa: one reading (gguf_sliding_window.h) for the planner (phi3's KQ_mask_swa graphs) and the
// runtime (the window the session masks with): the key when present (0 included), else the
// defaults of Phi-3 files converted before it existed, else none (the planner refuses the file).
TEST(SlidingWindow, KeyOrPhi3DefaultsOrNone) {
  SynthGguf s = test::Phi3Model(SynthParams{}, /*rope_factors=*/false);
  EXPECT_EQ(Window(s), "128");
  s.Set("phi3.attention.sliding_window", GgufMetaValue::U32(0));  // Phi-4: no window
  EXPECT_EQ(Window(s), "0");
  s.DropKey("phi3.attention.sliding_window");
  EXPECT_EQ(Window(s), "none");
  EXPECT_EQ(BuildError(s),
            "phi3.gguf: missing key 'phi3.attention.sliding_window' (invalid value for sliding_window)");
  s.Set("phi3.block_count", GgufMetaValue::U32(32));
  s.Set("phi3.context_length", GgufMetaValue::U32(4096));
  EXPECT_EQ(Window(s), "2047");
  s.Set("phi3.block_count", GgufMetaValue::U32(40));
  EXPECT_EQ(Window(s), "2047");
  s.Set("phi3.context_length", GgufMetaValue::U32(131072));
  EXPECT_EQ(Window(s), "131072");
  s.Set("phi3.block_count", GgufMetaValue::U32(32));
  EXPECT_EQ(Window(s), "none");  // 32 layers at 131072 need 32 KV heads
  s.Set("phi3.attention.head_count", GgufMetaValue::U32(32));
  s.Set("phi3.attention.head_count_kv", GgufMetaValue::U32(32));
  EXPECT_EQ(Window(s), "262144");
  s.Set("phi3.attention.sliding_window", GgufMetaValue::Str("2047"));
  const std::string at = KeyAt(s, "phi3.attention.sliding_window");
  EXPECT_EQ(Window(s).rfind(at + ": expected ", 0), 0u) << Window(s);
}

// gemma2 and gemma3 (llama.cpp 2026 load_arch_hparams): the key when present; without it gemma2's
// default 4096 and no window for gemma3. The planner's n_swa is this reading.
TEST(SlidingWindow, GemmaDefaults) {
  SynthGguf g2 = test::Gemma2Model(SynthParams{}, 16, 8);
  EXPECT_EQ(Window(g2), "8");
  g2.DropKey("gemma2.attention.sliding_window");
  EXPECT_EQ(Window(g2), "4096");
  auto m2 = BuildModelGraphs(*g2.Parse(), ContextConfig{});
  ASSERT_TRUE(m2.ok()) << m2.status().message();
  EXPECT_EQ(m2->hp.n_swa, 4096u);
  SynthGguf g3 = test::Gemma3Model(SynthParams{}, 16, 8);
  EXPECT_EQ(Window(g3), "8");
  g3.DropKey("gemma3.attention.sliding_window");
  EXPECT_EQ(Window(g3), "none");
  auto m3 = BuildModelGraphs(*g3.Parse(), ContextConfig{});
  ASSERT_TRUE(m3.ok()) << m3.status().message();
  EXPECT_EQ(m3->hp.n_swa, 0u);
  EXPECT_FALSE(m3->hp.iswa());
}

// The attention temperature tuning (llama.cpp 2026 llama_model_mistral3::load_arch_hparams and
// llm_graph_input_attn_temp::set_input), the one reading of the planner (the inp_attn_scale input)
// and the session (its factors): mistral3 only; floor_scale n_ctx_orig_yarn (original context
// length, else the training context); 0 there refused naming the key it came from.
TEST(AttnTemperature, Mistral3KeysAndFactors) {
  auto read = [](SynthGguf& s) -> std::string {
    auto t = GgufAttnTemperature(*s.Parse());
    if (!t.ok()) return t.status().message();
    return t->on() ? std::to_string(t->scale) + " / " + std::to_string(t->floor_scale) : "off";
  };
  SynthGguf s = test::Mistral3Model(SynthParams{});  // n_ctx_train 256
  EXPECT_EQ(read(s), "off");
  s.F32("mistral3.attention.temperature_scale", 0.5f);
  EXPECT_EQ(read(s), "0.500000 / 256");
  s.U32("mistral3.rope.scaling.original_context_length", 16);
  EXPECT_EQ(read(s), "0.500000 / 16");
  s.Set("mistral3.rope.scaling.original_context_length", GgufMetaValue::U32(0));
  EXPECT_NE(read(s).find("key 'mistral3.rope.scaling.original_context_length': expected a positive context "
                         "length (llama.cpp: invalid n_ctx_orig_yarn for attention temperature scaling, "
                         "mistral3.attention.temperature_scale is 0.500000), found 0"),
            std::string::npos)
      << read(s);
  s.Set("mistral3.attention.temperature_scale", GgufMetaValue::F32(std::nanf("")));
  EXPECT_NE(read(s).find("key 'mistral3.attention.temperature_scale': expected a finite scale >= 0 (0: off), "
                         "found nan"),
            std::string::npos)
      << read(s);
  // a negative scale (llama.cpp runs it) drives the factor to 0 and below: refused
  s.Set("mistral3.attention.temperature_scale", GgufMetaValue::F32(-0.5f));
  EXPECT_NE(read(s).find("key 'mistral3.attention.temperature_scale': expected a finite scale >= 0 (0: off), "
                         "found -0.500000"),
            std::string::npos)
      << read(s);
  SynthGguf llama = test::LlamaModel(SynthParams{});  // llama.cpp reads the key for mistral3 only
  llama.F32("llama.attention.temperature_scale", 0.5f);
  EXPECT_EQ(read(llama), "off");
  // log(floor(pos / 16) + 1) * 0.5 + 1
  AttnTemperature t;
  t.scale = 0.5f;
  t.floor_scale = 16;
  EXPECT_FLOAT_EQ(AttnTemperatureFactor(t, 0), 1.0f);
  EXPECT_FLOAT_EQ(AttnTemperatureFactor(t, 15), 1.0f);
  EXPECT_FLOAT_EQ(AttnTemperatureFactor(t, 16), 1.0f + 0.5f * std::log(2.0f));
  EXPECT_FLOAT_EQ(AttnTemperatureFactor(t, 81), 1.0f + 0.5f * std::log(6.0f));
}

}  // namespace
}  // namespace stowage::planner
