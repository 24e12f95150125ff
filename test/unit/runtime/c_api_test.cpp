// The C API as a library user meets it (c_api.h): tokenize / detokenize with llama_tokenize's
// buffer negotiation, the sampler chain over a session's logits, embeddings, state save / load
// (bit-identical logits after a load; another model, a truncated or corrupted file refused in one
// line), status names. On stories260K with a plan of two sequences (-np 2 -kvu).
#include "stowage/runtime/c_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "plan_cpu.h"
#include "scratch_dir.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/tokenizer.h"
#include "test_paths.h"

namespace stowage {
namespace {

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model_))
      GTEST_SKIP() << "skipped: " << model_ << " not found (shared models absent)";
    plan_path_ = Plan(model_, "s.plan");
    s_ = Open(plan_path_, model_);
    ASSERT_NE(s_, nullptr);
  }
  void TearDown() override { stowage_session_free(s_); }
  std::string Plan(const std::string& model, const std::string& name) {
    planner::ContextConfig cfg;
    cfg.n_ctx = 64;
    cfg.n_seq_max = 2;
    cfg.kv_unified = true;
    auto plan = test::PlanCpu(model, cfg, /*use_mmap=*/true);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    const std::string p = dir_.File(name);
    EXPECT_TRUE(WriteFileAtomic(p, plan.ok() ? *plan : std::vector<uint8_t>{}).ok());
    return p;
  }
  static stowage_session* Open(const std::string& plan, const std::string& model) {
    char err[512] = "";
    stowage_session* s = nullptr;
    EXPECT_EQ(stowage_session_create(plan.c_str(), model.c_str(), 2, &s, err, sizeof err), STOWAGE_OK) << err;
    return s;
  }
  std::vector<int32_t> Tokenize(const std::string& text, bool add_special = true) {
    const int32_t need =
        -stowage_tokenize(s_, text.c_str(), static_cast<int32_t>(text.size()), nullptr, 0, add_special, 0);
    std::vector<int32_t> ids(static_cast<size_t>(std::max(need, 0)));
    const int32_t n = stowage_tokenize(s_, text.c_str(), static_cast<int32_t>(text.size()), ids.data(),
                                       static_cast<int32_t>(ids.size()), add_special, 0);
    EXPECT_EQ(n, need);
    return ids;
  }
  test::ScratchDir dir_{"stowage-c-api"};
  std::string model_, plan_path_;
  stowage_session* s_ = nullptr;
};

TEST_F(CApiTest, TokenizeNegotiatesTheBufferAndMatchesTheTokenizer) {
  const std::string text = "Once upon a time, there was a dog.";
  auto gguf = GgufFile::Open(model_);
  ASSERT_TRUE(gguf.ok());
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok());
  const std::vector<int32_t> want = tok->Tokenize(text, true, false);
  ASSERT_GT(want.size(), 3u);
  int32_t small[2];
  // Too small: -(the count needed), as llama_tokenize.
  EXPECT_EQ(stowage_tokenize(s_, text.c_str(), -1, small, 2, 1, 0), -static_cast<int32_t>(want.size()));
  EXPECT_EQ(Tokenize(text), want);
  EXPECT_EQ(Tokenize(text)[0], stowage_token_bos(s_));
  EXPECT_NE(Tokenize(text, false)[0], stowage_token_bos(s_));  // add_special off: no BOS
  // Detokenize: the text back (BOS dropped), with the same negotiation.
  const std::vector<int32_t> ids = Tokenize(text);
  const int32_t need =
      -stowage_detokenize(s_, ids.data(), static_cast<int32_t>(ids.size()), nullptr, 0, 1, 0);
  ASSERT_GT(need, 0);
  std::string back(static_cast<size_t>(need), '\0');
  ASSERT_EQ(stowage_detokenize(s_, ids.data(), static_cast<int32_t>(ids.size()), back.data(), need, 1, 0),
            need);
  EXPECT_EQ(back, " " + text);  // llama_detokenize: a dropped BOS keeps the space after it
  const std::vector<int32_t> plain = Tokenize(text, false);
  std::string text_back(text.size(), '\0');
  ASSERT_EQ(stowage_detokenize(s_, plain.data(), static_cast<int32_t>(plain.size()), text_back.data(),
                               static_cast<int32_t>(text_back.size()), 0, 0),
            static_cast<int32_t>(text.size()));
  EXPECT_EQ(text_back, text);
  // Pieces: "▁upon" is " upon"; lstrip 1 drops the space; a buffer too small asks for its size.
  char piece[16];
  const int32_t upon = ids[2];
  ASSERT_EQ(stowage_token_to_piece(s_, upon, piece, sizeof piece, 0, 0), 5);
  EXPECT_EQ(std::string(piece, 5), " upon");
  ASSERT_EQ(stowage_token_to_piece(s_, upon, piece, sizeof piece, 1, 0), 4);
  EXPECT_EQ(std::string(piece, 4), "upon");
  EXPECT_EQ(stowage_token_to_piece(s_, upon, piece, 2, 0, 0), -5);
  EXPECT_EQ(stowage_token_is_eog(s_, stowage_token_eos(s_)), 1);
  EXPECT_EQ(stowage_token_is_eog(s_, upon), 0);
}

TEST_F(CApiTest, TokenizerErrorsAreOneLineAndNoCrash) {
  EXPECT_EQ(stowage_tokenize(s_, nullptr, 3, nullptr, 0, 1, 0), INT32_MIN);
  EXPECT_STREQ(stowage_last_error(s_),
               "stowage_tokenize: text NULL, n_tokens_max 0 < 0, or tokens NULL with n_tokens_max > 0");
  EXPECT_EQ(stowage_tokenize(s_, "a", 1, nullptr, 4, 1, 0), INT32_MIN);
  EXPECT_EQ(stowage_detokenize(s_, nullptr, 2, nullptr, 0, 0, 0), INT32_MIN);
  EXPECT_EQ(stowage_token_to_piece(s_, 5, nullptr, 3, 0, 0), INT32_MIN);
  EXPECT_EQ(stowage_tokenize(nullptr, "a", 1, nullptr, 0, 1, 0), INT32_MIN);
  char piece[4];
  EXPECT_EQ(stowage_token_to_piece(s_, 1 << 30, piece, 4, 0, 0), 0);  // out of range: no bytes
  EXPECT_STREQ(stowage_status_name(STOWAGE_DATA_LOSS), "data loss");
  EXPECT_STREQ(stowage_status_name(static_cast<stowage_status>(99)), "unknown");
}

TEST_F(CApiTest, SamplerChainGreedyAndSeededDist) {
  const std::vector<int32_t> ids = Tokenize("Once upon a time");
  ASSERT_EQ(stowage_decode(s_, ids.data(), ids.size(), 0), STOWAGE_OK);
  const float* row = stowage_get_logits_ith(s_, -1);
  ASSERT_NE(row, nullptr);
  int32_t argmax = 0;
  for (int32_t v = 1; v < static_cast<int32_t>(stowage_n_vocab(s_)); ++v)
    if (row[v] > row[argmax]) argmax = v;
  stowage_sampler* greedy = stowage_sampler_chain_init();
  ASSERT_EQ(stowage_sampler_chain_add(greedy, stowage_sampler_init_greedy()), STOWAGE_OK);
  EXPECT_EQ(stowage_sampler_sample(greedy, s_, -1), argmax);
  // No logits for token 0 (only the last asked): -1 with a message.
  EXPECT_EQ(stowage_sampler_sample(greedy, s_, 0), -1);
  EXPECT_NE(std::string(stowage_last_error(s_)).find("no logits for token 0"), std::string::npos);
  // A chain without a picking step picks nothing.
  stowage_sampler* nopick = stowage_sampler_chain_init();
  ASSERT_EQ(stowage_sampler_chain_add(nopick, stowage_sampler_init_top_k(5)), STOWAGE_OK);
  EXPECT_EQ(stowage_sampler_sample(nopick, s_, -1), -1);
  // A chain cannot be a step; the step is freed anyway (no leak under ASan).
  EXPECT_EQ(stowage_sampler_chain_add(greedy, stowage_sampler_chain_init()), STOWAGE_INVALID_ARGUMENT);
  EXPECT_EQ(stowage_sampler_chain_n(greedy), 1);
  // top-k 1 before dist is greedy whatever the seed.
  auto dist_chain = [](uint32_t seed, int32_t k) {
    stowage_sampler* c = stowage_sampler_chain_init();
    stowage_sampler_chain_add(c, stowage_sampler_init_penalties(64, 1.1f, 0.f, 0.f));
    stowage_sampler_chain_add(c, stowage_sampler_init_top_k(k));
    stowage_sampler_chain_add(c, stowage_sampler_init_top_p(0.95f, 1));
    stowage_sampler_chain_add(c, stowage_sampler_init_min_p(0.05f, 1));
    stowage_sampler_chain_add(c, stowage_sampler_init_temp(1.5f));
    stowage_sampler_chain_add(c, stowage_sampler_init_dist(seed));
    return c;
  };
  for (uint32_t seed = 0; seed < 5; ++seed) {
    stowage_sampler* c = dist_chain(seed, 1);
    EXPECT_EQ(stowage_sampler_sample(c, s_, -1), argmax);
    stowage_sampler_free(c);
  }
  // The same seed draws the same tokens; reset restarts the generator.
  stowage_sampler* a = dist_chain(42, 40);
  stowage_sampler* b = dist_chain(42, 40);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 20; ++i) {
    ta.push_back(stowage_sampler_sample(a, s_, -1));
    tb.push_back(stowage_sampler_sample(b, s_, -1));
  }
  EXPECT_EQ(ta, tb);
  stowage_sampler_reset(a);
  EXPECT_EQ(stowage_sampler_sample(a, s_, -1), ta[0]);
  for (stowage_sampler* x : {greedy, nopick, a, b}) stowage_sampler_free(x);
  stowage_sampler_free(nullptr);
}

TEST_F(CApiTest, EmbeddingsThroughTheCApi) {
  EXPECT_EQ(stowage_get_embeddings_ith(s_, 0), nullptr);  // off
  EXPECT_EQ(stowage_set_embeddings(s_, 1, static_cast<stowage_pooling_type>(9)), STOWAGE_INVALID_ARGUMENT);
  EXPECT_STREQ(stowage_last_error(s_), "SetEmbeddings: pooling 9 outside [0, 3] (none, mean, cls, last)");
  ASSERT_EQ(stowage_set_embeddings(s_, 1, STOWAGE_POOLING_NONE), STOWAGE_OK);
  const std::vector<int32_t> ids = Tokenize("Once upon a time");
  ASSERT_EQ(stowage_decode(s_, ids.data(), ids.size(), 0), STOWAGE_OK);
  ASSERT_EQ(stowage_n_embd(s_), 64u);
  const float* first = stowage_get_embeddings_ith(s_, 0);
  const float* last = stowage_get_embeddings_ith(s_, -1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(last, stowage_get_embeddings_ith(s_, static_cast<int32_t>(ids.size()) - 1));
  EXPECT_EQ(stowage_get_embeddings_ith(s_, static_cast<int32_t>(ids.size())), nullptr);
  size_t rows = 0;
  ASSERT_NE(stowage_get_logits(s_, &rows), nullptr);
  EXPECT_EQ(rows, 1u);  // the logits asked for only
  std::vector<float> last_tok(last, last + 64);
  stowage_reset(s_);
  ASSERT_EQ(stowage_set_embeddings(s_, 1, STOWAGE_POOLING_LAST), STOWAGE_OK);
  ASSERT_EQ(stowage_decode(s_, ids.data(), ids.size(), 0), STOWAGE_OK);
  const float* pooled = stowage_get_embeddings_seq(s_, 0);
  ASSERT_NE(pooled, nullptr);
  EXPECT_EQ(std::vector<float>(pooled, pooled + 64), last_tok);
  EXPECT_EQ(stowage_get_embeddings_seq(s_, 1), nullptr);
}

// Decoding after a load gives the logits the saving session gave next, bit for bit; another
// session (fresh) restores the same state.
TEST_F(CApiTest, StateSaveLoadIsBitIdentical) {
  const std::vector<int32_t> a = Tokenize("Once upon a time");
  const std::vector<int32_t> b = Tokenize("The dog", true);
  // Two sequences in the cache.
  std::vector<int32_t> tok, seq;
  for (int32_t t : a) tok.push_back(t), seq.push_back(0);
  for (int32_t t : b) tok.push_back(t), seq.push_back(1);
  stowage_batch batch{static_cast<int32_t>(tok.size()), tok.data(), nullptr, seq.data(), nullptr};
  ASSERT_EQ(stowage_decode_batch(s_, &batch), STOWAGE_OK);
  const std::string state = dir_.File("s.state");
  ASSERT_EQ(stowage_state_save_file(s_, state.c_str()), STOWAGE_OK) << stowage_last_error(s_);
  // The next token of each sequence, then the reference logits.
  const int32_t next[2] = {300, 301};
  const int32_t next_seq[2] = {0, 1};
  const int8_t want[2] = {1, 1};
  stowage_batch step{2, next, nullptr, next_seq, want};
  ASSERT_EQ(stowage_decode_batch(s_, &step), STOWAGE_OK);
  const size_t nv = stowage_n_vocab(s_);
  std::vector<float> ref(stowage_get_logits(s_, nullptr), stowage_get_logits(s_, nullptr) + 2 * nv);
  // The same session after more tokens, and a fresh one: loaded, the same step, the same bits.
  stowage_session* fresh = Open(plan_path_, model_);
  for (stowage_session* s : {s_, fresh}) {
    ASSERT_EQ(stowage_state_load_file(s, state.c_str()), STOWAGE_OK) << stowage_last_error(s);
    EXPECT_EQ(stowage_kv_seq_pos_max(s, 0), static_cast<int32_t>(a.size()) - 1);
    EXPECT_EQ(stowage_kv_seq_pos_max(s, 1), static_cast<int32_t>(b.size()) - 1);
    EXPECT_EQ(stowage_n_past(s), a.size());
    ASSERT_EQ(stowage_decode_batch(s, &step), STOWAGE_OK);
    size_t rows = 0;
    const float* got = stowage_get_logits(s, &rows);
    ASSERT_EQ(rows, 2u);
    EXPECT_EQ(std::vector<float>(got, got + 2 * nv), ref);
  }
  // Without the load (an empty cache), the same step gives other logits: the test can fail.
  stowage_reset(fresh);
  const int32_t pos[2] = {0, 0};
  stowage_batch cold{2, next, pos, next_seq, want};
  ASSERT_EQ(stowage_decode_batch(fresh, &cold), STOWAGE_OK);
  const float* got = stowage_get_logits(fresh, nullptr);
  EXPECT_NE(std::vector<float>(got, got + 2 * nv), ref);
  stowage_session_free(fresh);
}

TEST_F(CApiTest, StateOfAnotherModelTruncatedOrCorruptIsRefused) {
  const std::vector<int32_t> a = Tokenize("Once upon a time");
  ASSERT_EQ(stowage_decode(s_, a.data(), a.size(), 0), STOWAGE_OK);
  const std::string state = dir_.File("s.state");
  ASSERT_EQ(stowage_state_save_file(s_, state.c_str()), STOWAGE_OK);
  std::ifstream in(state, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Truncated: one line naming the file, the offset and the sizes; the cache unchanged.
  const std::string cut = dir_.Write("cut.state", bytes.substr(0, bytes.size() - 100));
  EXPECT_EQ(stowage_state_load_file(s_, cut.c_str()), STOWAGE_DATA_LOSS);
  EXPECT_EQ(std::string(stowage_last_error(s_)), cut + ": offset " + std::to_string(bytes.size() - 100) +
                                                     ": size: expected " + std::to_string(bytes.size()) +
                                                     " bytes for this plan's state, found " +
                                                     std::to_string(bytes.size() - 100) + " (truncated)");
  EXPECT_EQ(stowage_n_past(s_), a.size());
  // A flipped byte in the KV data: the checksum.
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x40;
  const std::string bad = dir_.Write("bad.state", flipped);
  EXPECT_EQ(stowage_state_load_file(s_, bad.c_str()), STOWAGE_DATA_LOSS);
  EXPECT_NE(std::string(stowage_last_error(s_)).find(": checksum: expected "), std::string::npos);
  // Not a state file.
  const std::string other = dir_.Write("other.state", "GGUF and more bytes");
  EXPECT_EQ(stowage_state_load_file(s_, other.c_str()), STOWAGE_DATA_LOSS);
  EXPECT_EQ(std::string(stowage_last_error(s_)),
            other +
                ": offset 0: expected the magic \"STWSTATE\" of a session state file (Session::SaveState, "
                "stowage_state_save_file), found "
                "other bytes");
  // Another format version.
  std::string v2 = bytes;
  v2[8] = 2;
  const std::string ver = dir_.Write("v2.state", v2);
  EXPECT_EQ(stowage_state_load_file(s_, ver.c_str()), STOWAGE_DATA_LOSS);
  EXPECT_EQ(std::string(stowage_last_error(s_)), ver + ": offset 8: format version: expected 1, found 2");
  // The same model planned with another context: named before the (larger) size is read.
  {
    planner::ContextConfig cfg;
    cfg.n_ctx = 128;
    cfg.n_seq_max = 2;
    cfg.kv_unified = true;
    auto plan = test::PlanCpu(model_, cfg, /*use_mmap=*/true);
    ASSERT_TRUE(plan.ok());
    const std::string p128 = dir_.File("c128.plan");
    ASSERT_TRUE(WriteFileAtomic(p128, *plan).ok());
    stowage_session* big = Open(p128, model_);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(stowage_state_load_file(big, state.c_str()), STOWAGE_FAILED_PRECONDITION);
    EXPECT_EQ(std::string(stowage_last_error(big)), state + ": offset 36: n_ctx: expected 128, found 64");
    const std::string big_state = dir_.File("c128.state");
    ASSERT_EQ(stowage_state_save_file(big, big_state.c_str()), STOWAGE_OK);
    EXPECT_EQ(stowage_state_load_file(s_, big_state.c_str()), STOWAGE_FAILED_PRECONDITION);
    EXPECT_EQ(std::string(stowage_last_error(s_)), big_state + ": offset 36: n_ctx: expected 64, found 128");
    stowage_session_free(big);
  }
  // Another model (stories260K-Q8_0): its identity, before anything else.
  const std::string q8 = test::ModelPath("stories260K-Q8_0.gguf");
  if (!test::FileExists(q8)) GTEST_SKIP() << q8 << " not found";
  stowage_session* s2 = Open(Plan(q8, "q8.plan"), q8);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(stowage_state_load_file(s2, state.c_str()), STOWAGE_FAILED_PRECONDITION);
  const std::string msg = stowage_last_error(s2);
  EXPECT_EQ(msg.rfind(state + ": offset 12: model identity: expected " + q8 + "'s (", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_EQ(stowage_n_past(s2), 0u);
  stowage_session_free(s2);
}

// One sequence's state: saved from a session where it is alone in cells 0.., loaded into a fresh
// session's sequence 1, the next token gives the same logits bit for bit; loaded next to another
// sequence (other cells), within the summation-order tolerance of sequences_test; without the load,
// far from them.
TEST_F(CApiTest, SequenceStateMovesBetweenSessions) {
  const std::vector<int32_t> b = Tokenize("The little dog");
  std::vector<int32_t> seq1(b.size(), 1);
  stowage_batch batch{static_cast<int32_t>(b.size()), b.data(), nullptr, seq1.data(), nullptr};
  ASSERT_EQ(stowage_decode_batch(s_, &batch), STOWAGE_OK);
  const std::string state = dir_.File("seq.state");
  ASSERT_EQ(stowage_state_seq_save_file(s_, state.c_str(), 1), STOWAGE_OK) << stowage_last_error(s_);
  const int32_t next = 300, on1 = 1, on0 = 0;
  const int8_t want = 1;
  stowage_batch step1{1, &next, nullptr, &on1, &want};
  ASSERT_EQ(stowage_decode_batch(s_, &step1), STOWAGE_OK);
  const size_t nv = stowage_n_vocab(s_);
  const std::vector<float> ref(stowage_get_logits_ith(s_, 0), stowage_get_logits_ith(s_, 0) + nv);
  auto diff = [&](const float* got) {
    float d = 0;
    for (size_t v = 0; v < nv; ++v) d = std::max(d, std::fabs(got[v] - ref[v]));
    return d;
  };
  stowage_session* fresh = Open(plan_path_, model_);
  ASSERT_EQ(stowage_state_seq_load_file(fresh, state.c_str(), 1), STOWAGE_OK) << stowage_last_error(fresh);
  EXPECT_EQ(stowage_kv_seq_pos_max(fresh, 1), static_cast<int32_t>(b.size()) - 1);
  EXPECT_EQ(stowage_kv_seq_pos_max(fresh, 0), -1);
  ASSERT_EQ(stowage_decode_batch(fresh, &step1), STOWAGE_OK);
  EXPECT_EQ(std::vector<float>(stowage_get_logits_ith(fresh, 0), stowage_get_logits_ith(fresh, 0) + nv), ref);
  // Into sequence 0 of a session holding another sequence 1 (its cells first): the saved cells land
  // after them.
  stowage_session* other = Open(plan_path_, model_);
  const std::vector<int32_t> a = Tokenize("Once upon a time");
  std::vector<int32_t> ones(a.size(), 1);
  stowage_batch ba{static_cast<int32_t>(a.size()), a.data(), nullptr, ones.data(), nullptr};
  ASSERT_EQ(stowage_decode_batch(other, &ba), STOWAGE_OK);
  ASSERT_EQ(stowage_state_seq_load_file(other, state.c_str(), 0), STOWAGE_OK) << stowage_last_error(other);
  stowage_batch step0{1, &next, nullptr, &on0, &want};
  ASSERT_EQ(stowage_decode_batch(other, &step0), STOWAGE_OK);
  EXPECT_LE(diff(stowage_get_logits_ith(other, 0)), 1e-2f);
  EXPECT_EQ(stowage_kv_seq_pos_max(other, 1), static_cast<int32_t>(a.size()) - 1);  // untouched
  // Without the load, the same token at the same position sees sequence 0 empty: far off.
  stowage_kv_seq_rm(other, 0, -1, -1);
  const int32_t pos = static_cast<int32_t>(b.size());
  stowage_batch cold{1, &next, &pos, &on0, &want};
  stowage_reset(fresh);
  ASSERT_EQ(stowage_decode_batch(fresh, &cold), STOWAGE_OK);
  EXPECT_GT(diff(stowage_get_logits_ith(fresh, 0)), 0.5f);
  // Errors: a whole-state file, a truncated one, a destination out of range.
  const std::string whole = dir_.File("whole.state");
  ASSERT_EQ(stowage_state_save_file(s_, whole.c_str()), STOWAGE_OK);
  EXPECT_EQ(stowage_state_seq_load_file(other, whole.c_str(), 0), STOWAGE_DATA_LOSS);
  EXPECT_EQ(
      std::string(stowage_last_error(other)),
      whole +
          ": offset 0: expected the magic \"STWSEQST\" of a sequence state file (Session::SaveSeqState, "
          "stowage_state_seq_save_file), found other bytes");
  std::ifstream in(state, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = dir_.Write("cut.seq", bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(stowage_state_seq_load_file(other, cut.c_str(), 0), STOWAGE_DATA_LOSS);
  EXPECT_NE(std::string(stowage_last_error(other)).find(" (truncated)"), std::string::npos);
  EXPECT_EQ(stowage_state_seq_load_file(other, state.c_str(), 999), STOWAGE_INVALID_ARGUMENT);
  EXPECT_EQ(stowage_kv_seq_pos_max(other, 1), static_cast<int32_t>(a.size()) - 1);
  stowage_session_free(fresh);
  stowage_session_free(other);
}

// A careless embedder: NULL sessions, pointers and out-of-range sizes everywhere are refused with
// an error code (or the documented empty answer), never a crash.
TEST_F(CApiTest, NullAndOutOfRangeArgumentsAreRefused) {
  EXPECT_NE(stowage_decode(nullptr, nullptr, 1, 0), STOWAGE_OK);
  EXPECT_NE(stowage_decode(s_, nullptr, 1, 0), STOWAGE_OK);
  EXPECT_NE(stowage_decode(s_, nullptr, 0, 0), STOWAGE_OK);
  EXPECT_NE(stowage_decode_batch(s_, nullptr), STOWAGE_OK);
  EXPECT_NE(stowage_decode_batch(nullptr, nullptr), STOWAGE_OK);
  const int32_t tok[2] = {1, 2};
  const int32_t bad_seq[2] = {0, 256};  // [0, stowage_n_seq_ids): 256 with -kvu
  stowage_batch b{2, tok, nullptr, bad_seq, nullptr};
  EXPECT_NE(stowage_decode_batch(s_, &b), STOWAGE_OK);
  stowage_batch neg{-3, tok, nullptr, nullptr, nullptr};
  EXPECT_NE(stowage_decode_batch(s_, &neg), STOWAGE_OK);
  stowage_batch nulltok{2, nullptr, nullptr, nullptr, nullptr};
  EXPECT_NE(stowage_decode_batch(s_, &nulltok), STOWAGE_OK);
  const int32_t big[1] = {1 << 30};
  EXPECT_NE(stowage_decode(s_, big, 1, 0), STOWAGE_OK);
  const int32_t negtok[1] = {-5};
  EXPECT_NE(stowage_decode(s_, negtok, 1, 0), STOWAGE_OK);
  std::vector<int32_t> too_many(1000, 1);  // more than n_ctx 64
  EXPECT_NE(stowage_decode(s_, too_many.data(), too_many.size(), 0), STOWAGE_OK);
  EXPECT_EQ(stowage_get_logits(nullptr, nullptr), nullptr);
  EXPECT_EQ(stowage_get_logits_ith(nullptr, 0), nullptr);
  EXPECT_EQ(stowage_get_logits_ith(s_, 1 << 20), nullptr);
  EXPECT_EQ(stowage_get_logits_ith(s_, -(1 << 20)), nullptr);
  EXPECT_NE(stowage_kv_seq_rm(nullptr, 0, 0, -1), STOWAGE_OK);
  EXPECT_NE(stowage_kv_seq_rm(s_, 256, 0, -1), STOWAGE_OK);
  EXPECT_NE(stowage_kv_seq_cp(s_, 0, 256, 0, -1), STOWAGE_OK);
  EXPECT_NE(stowage_kv_seq_cp(s_, -2, 0, 0, -1), STOWAGE_OK);
  EXPECT_NE(stowage_kv_seq_cp(nullptr, 0, 1, 0, -1), STOWAGE_OK);
  stowage_kv_seq_pos_max(nullptr, 0);
  stowage_kv_seq_pos_max(s_, 99);
  stowage_kv_seq_pos_min(s_, -99);
  stowage_kv_clear(nullptr);
  stowage_reset(nullptr);
  EXPECT_EQ(stowage_n_vocab(nullptr), 0u);
  EXPECT_EQ(stowage_n_ctx(nullptr), 0u);
  EXPECT_EQ(stowage_n_past(nullptr), 0u);
  EXPECT_NE(stowage_set_embeddings(nullptr, 1, static_cast<stowage_pooling_type>(0)), STOWAGE_OK);
  EXPECT_NE(stowage_set_embeddings(s_, 1, static_cast<stowage_pooling_type>(99)), STOWAGE_OK);
  EXPECT_EQ(stowage_get_embeddings_ith(nullptr, 0), nullptr);
  EXPECT_EQ(stowage_get_embeddings_ith(s_, 0), nullptr);
  EXPECT_EQ(stowage_get_embeddings_seq(s_, 99), nullptr);
  // Tokenizer: negative sizes, a NULL text with length 0, tiny buffers.
  EXPECT_EQ(stowage_tokenize(s_, "abc", -1, nullptr, 0, 1, 0), -4);  // up to the NUL: BOS a b c
  EXPECT_EQ(stowage_tokenize(s_, "abc", 3, nullptr, -4, 1, 0), INT32_MIN);
  int32_t one[1];
  EXPECT_LT(stowage_tokenize(s_, "Once upon a time", 16, one, 1, 1, 0), 0);
  const std::string junk = "\xff\xfe\xc3(\xe2\x82 \xf0\x9f";  // invalid UTF-8
  EXPECT_GE(stowage_tokenize(s_, junk.c_str(), static_cast<int32_t>(junk.size()), nullptr, 0, 1, 0),
            INT32_MIN + 1);
  char text[2];
  const int32_t ids[3] = {300, 301, 302};
  EXPECT_LT(stowage_detokenize(s_, ids, 3, text, 2, 0, 0), 0);
  EXPECT_EQ(stowage_detokenize(s_, ids, -3, text, 2, 0, 0), INT32_MIN);
  EXPECT_EQ(stowage_detokenize(s_, ids, 3, text, -2, 0, 0), INT32_MIN);
  const int32_t bad_ids[2] = {-1, 1 << 30};
  stowage_detokenize(s_, bad_ids, 2, text, 2, 0, 0);
  EXPECT_EQ(stowage_token_to_piece(s_, -1, text, 2, 0, 0), 0);
  EXPECT_EQ(stowage_token_to_piece(s_, 300, text, -1, 0, 0), INT32_MIN);
  EXPECT_EQ(stowage_token_to_piece(s_, 300, text, 2, 1000, 0) >= INT32_MIN, true);
  EXPECT_EQ(stowage_token_is_eog(nullptr, 0), 0);
  // Samplers.
  EXPECT_NE(stowage_sampler_chain_add(nullptr, stowage_sampler_init_greedy()), STOWAGE_OK);
  stowage_sampler* c = stowage_sampler_chain_init();
  EXPECT_NE(stowage_sampler_chain_add(c, nullptr), STOWAGE_OK);
  EXPECT_EQ(stowage_sampler_chain_n(nullptr), 0);
  EXPECT_EQ(stowage_sampler_sample(nullptr, s_, -1), -1);
  EXPECT_EQ(stowage_sampler_sample(c, nullptr, -1), -1);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_top_k(-5)), STOWAGE_OK);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_top_p(NAN, 0)), STOWAGE_OK);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_min_p(-1.f, 1u << 30)), STOWAGE_OK);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_temp(NAN)), STOWAGE_OK);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_penalties(-7, NAN, INFINITY, -INFINITY)),
            STOWAGE_OK);
  ASSERT_EQ(stowage_sampler_chain_add(c, stowage_sampler_init_dist(0)), STOWAGE_OK);
  EXPECT_EQ(stowage_sampler_sample(c, s_, -1), -1);  // no logits yet
  const std::vector<int32_t> p = Tokenize("Once upon a time");
  ASSERT_EQ(stowage_decode(s_, p.data(), p.size(), 0), STOWAGE_OK);
  const int32_t t = stowage_sampler_sample(c, s_, -1);
  EXPECT_TRUE(t == -1 || (t >= 0 && t < static_cast<int32_t>(stowage_n_vocab(s_)))) << t;
  stowage_sampler_accept(c, -1);
  stowage_sampler_accept(c, 1 << 30);
  stowage_sampler_accept(nullptr, 1);
  stowage_sampler_reset(nullptr);
  stowage_sampler_free(c);
  // State files: NULL and missing paths, a directory, an out-of-range sequence.
  EXPECT_EQ(stowage_state_save_file(s_, nullptr), STOWAGE_INVALID_ARGUMENT);
  EXPECT_EQ(stowage_state_load_file(s_, nullptr), STOWAGE_INVALID_ARGUMENT);
  EXPECT_NE(stowage_state_save_file(nullptr, "x"), STOWAGE_OK);
  EXPECT_NE(stowage_state_load_file(nullptr, "x"), STOWAGE_OK);
  EXPECT_NE(stowage_state_load_file(s_, dir_.File("missing.state").c_str()), STOWAGE_OK);
  EXPECT_NE(stowage_state_load_file(s_, dir_.File("").c_str()), STOWAGE_OK);
  EXPECT_NE(stowage_state_save_file(s_, "/nonexistent-dir/x.state"), STOWAGE_OK);
  EXPECT_EQ(stowage_state_seq_save_file(s_, dir_.File("q.state").c_str(), 256), STOWAGE_INVALID_ARGUMENT);
  EXPECT_EQ(stowage_state_seq_save_file(s_, dir_.File("q.state").c_str(), -1), STOWAGE_INVALID_ARGUMENT);
  ASSERT_EQ(stowage_state_seq_save_file(s_, dir_.File("q.state").c_str(), 0), STOWAGE_OK);
  EXPECT_NE(stowage_state_seq_load_file(s_, dir_.File("q.state").c_str(), 256), STOWAGE_OK);
  EXPECT_NE(stowage_state_seq_load_file(s_, dir_.File("q.state").c_str(), -1), STOWAGE_OK);
  EXPECT_EQ(std::string(stowage_last_error(nullptr)).find('\n'), std::string::npos);
  EXPECT_EQ(stowage_n_past(s_), p.size());
}

// State and sequence-state files truncated at every header offset (and at a stride through the
// data) or with any header byte changed: an error with one line, never a crash, and the session
// unchanged (the next step's logits those of the saved state).
TEST_F(CApiTest, StateFilesFuzzedAreRefusedAndLeaveTheSessionUnchanged) {
  const std::vector<int32_t> a = Tokenize("Once upon a time");
  ASSERT_EQ(stowage_decode(s_, a.data(), a.size(), 0), STOWAGE_OK);
  const std::string whole = dir_.File("w.state"), seq = dir_.File("q.state");
  ASSERT_EQ(stowage_state_save_file(s_, whole.c_str()), STOWAGE_OK);
  ASSERT_EQ(stowage_state_seq_save_file(s_, seq.c_str(), 0), STOWAGE_OK);
  const int32_t next = 300;
  stowage_session* ref = Open(plan_path_, model_);
  ASSERT_EQ(stowage_state_load_file(ref, whole.c_str()), STOWAGE_OK);
  ASSERT_EQ(stowage_decode(ref, &next, 1, 0), STOWAGE_OK);
  const size_t nv = stowage_n_vocab(ref);
  const std::vector<float> want(stowage_get_logits_ith(ref, -1), stowage_get_logits_ith(ref, -1) + nv);
  stowage_session_free(ref);
  for (const std::string& path : {whole, seq}) {
    const bool is_seq = path == seq;
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto load = [&](const std::string& p) {
      return is_seq ? stowage_state_seq_load_file(s_, p.c_str(), 1) : stowage_state_load_file(s_, p.c_str());
    };
    const auto refused = [&](const std::string& content, const std::string& what) {
      const std::string p = dir_.Write("fuzz.state", content);
      const stowage_status st = load(p);
      EXPECT_NE(st, STOWAGE_OK) << what;  // every byte is checked (header fields, checksum, size)
      const std::string msg = stowage_last_error(s_);
      EXPECT_FALSE(msg.empty()) << what;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": " << msg;
      EXPECT_EQ(msg.rfind(p, 0), 0u) << what << ": " << msg;
    };
    const size_t header = std::min<size_t>(bytes.size(), 512);
    for (size_t n = 0; n < bytes.size(); n += n < header ? 1 : 997)
      refused(bytes.substr(0, n), "truncated at " + std::to_string(n));
    for (size_t i = 0; i < header; ++i)
      for (const char x : {'\x01', '\x80', '\xff'}) {
        std::string changed = bytes;
        changed[i] = static_cast<char>(changed[i] ^ x);
        refused(changed, "byte " + std::to_string(i) + " ^ " + std::to_string(static_cast<uint8_t>(x)));
      }
    refused(bytes + std::string(4096, '\0'), "4 KiB appended");
  }
  // The cache is the saved one: a refused load changed nothing.
  ASSERT_EQ(stowage_state_load_file(s_, whole.c_str()), STOWAGE_OK);
  ASSERT_EQ(stowage_decode(s_, &next, 1, 0), STOWAGE_OK);
  EXPECT_EQ(std::vector<float>(stowage_get_logits_ith(s_, -1), stowage_get_logits_ith(s_, -1) + nv), want);
}

}  // namespace
}  // namespace stowage
