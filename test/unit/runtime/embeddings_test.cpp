// Session embeddings (SessionOptions::embeddings, Session::SetEmbeddings): against llama.cpp's
// (test/data/golden-embd, every pooling type), the final norm's output per token is what the lm_head
// multiplies (logits = output.weight x embedding, checked against the model's own weight), pooling
// mean / cls / last per sequence, two sequences in one batch against each alone, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan_cpu.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "test_paths.h"

namespace stowage {
namespace {

const std::vector<int32_t> kA = {1, 403, 407, 261, 378, 300, 301};
const std::vector<int32_t> kB = {87, 45, 310, 260, 399};  // no BOS: CLS rows differ

class EmbeddingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model_))
      GTEST_SKIP() << "skipped: " << model_ << " not found (shared models absent)";
    planner::ContextConfig cfg;
    cfg.n_ctx = 64;
    cfg.n_seq_max = 2;
    cfg.kv_unified = true;
    auto plan = test::PlanCpu(model_, cfg, /*use_mmap=*/true);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = *plan;
  }
  std::unique_ptr<Session> Open(bool embeddings, PoolingType pooling) {
    SessionOptions o;
    o.n_threads = 2;
    o.embeddings = embeddings;
    o.pooling = pooling;
    auto s = Session::CreateFromPlanBytes(plan_, model_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static std::vector<BatchToken> Seq(const std::vector<int32_t>& ids, int32_t seq, bool logits) {
    std::vector<BatchToken> b;
    for (size_t i = 0; i < ids.size(); ++i) b.push_back({ids[i], static_cast<int32_t>(i), seq, logits});
    return b;
  }
  std::string model_;
  std::vector<uint8_t> plan_;
};

float MaxDiff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// The embedding of a token is the lm_head's input: output.weight (F32 [n_embd, n_vocab]) times it
// gives that token's logits; the next token's embedding does not.
TEST_F(EmbeddingsTest, TokenEmbeddingIsTheLmHeadInput) {
  auto s = Open(true, PoolingType::kNone);
  ASSERT_NE(s, nullptr);
  const int64_t ne = s->n_embd(), nv = s->n_vocab();
  ASSERT_EQ(ne, 64);
  std::vector<float> logits;
  // Only the last token asks for logits; the embeddings are of every token (llama.cpp output_all).
  ASSERT_TRUE(s->Decode(kA, /*all_logits=*/false, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(nv));
  const std::vector<float>& e = s->Embeddings();
  ASSERT_EQ(e.size(), kA.size() * static_cast<size_t>(ne));
  auto gguf = GgufFile::Open(model_);
  ASSERT_TRUE(gguf.ok());
  const GgufTensorInfo* w = (*gguf)->FindTensor("output.weight");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->type, GgmlType::F32);
  const auto* wd = reinterpret_cast<const float*>((*gguf)->TensorData(*w));
  auto head = [&](const float* x) {
    std::vector<float> l(static_cast<size_t>(nv));
    for (int64_t v = 0; v < nv; ++v) {
      double acc = 0;
      for (int64_t j = 0; j < ne; ++j) acc += double(wd[v * ne + j]) * x[j];
      l[static_cast<size_t>(v)] = static_cast<float>(acc);
    }
    return l;
  };
  const size_t last = kA.size() - 1;
  EXPECT_LT(MaxDiff(head(e.data() + last * ne).data(), logits.data(), nv), 1e-4f);
  // Turned off (another token's row): far beyond the tolerance.
  EXPECT_GT(MaxDiff(head(e.data() + (last - 1) * ne).data(), logits.data(), nv), 0.1f);
  // The logits are those of a session without embeddings, bit for bit.
  auto plain = Open(false, PoolingType::kNone);
  std::vector<float> ref;
  ASSERT_TRUE(plain->Decode(kA, false, &ref).ok());
  EXPECT_EQ(ref, logits);
  EXPECT_TRUE(plain->Embeddings().empty());
  EXPECT_EQ(plain->SeqEmbeddings(0), nullptr);
}

// Mean / cls / last of each sequence of a two-sequence batch against the per-token rows of each
// sequence decoded alone (a session without pooling).
TEST_F(EmbeddingsTest, PoolingPerSequenceInOneBatch) {
  auto none = Open(true, PoolingType::kNone);
  ASSERT_NE(none, nullptr);
  std::vector<std::vector<float>> rows(2);
  for (int q = 0; q < 2; ++q) {
    none->Reset();
    ASSERT_TRUE(none->DecodeBatch(Seq(q == 0 ? kA : kB, 0, false), nullptr).ok());
    rows[q] = none->Embeddings();
  }
  const auto ne = static_cast<size_t>(none->n_embd());
  std::vector<BatchToken> both;  // interleaved
  for (size_t i = 0; i < kA.size(); ++i) {
    both.push_back({kA[i], static_cast<int32_t>(i), 0, false});
    if (i < kB.size()) both.push_back({kB[i], static_cast<int32_t>(i), 1, false});
  }
  for (PoolingType p : {PoolingType::kMean, PoolingType::kCls, PoolingType::kLast}) {
    SCOPED_TRACE(static_cast<int>(p));
    auto s = Open(true, p);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->DecodeBatch(both, nullptr).ok());
    EXPECT_TRUE(s->Embeddings().empty());
    EXPECT_EQ(s->SeqEmbeddings(2), nullptr);
    for (int q = 0; q < 2; ++q) {
      const size_t n = (q == 0 ? kA : kB).size();
      std::vector<float> want(ne, 0.f);
      for (size_t j = 0; j < ne; ++j) {
        if (p == PoolingType::kCls) want[j] = rows[q][j];
        if (p == PoolingType::kLast) want[j] = rows[q][(n - 1) * ne + j];
        if (p == PoolingType::kMean) {
          for (size_t i = 0; i < n; ++i) want[j] += rows[q][i * ne + j];
          want[j] *= 1.0f / static_cast<float>(n);
        }
      }
      const float* got = s->SeqEmbeddings(q);
      ASSERT_NE(got, nullptr);
      // Interleaved against alone: equal up to the summation order over the shared cache's cells
      // (sequences_test's 1e-2 for logits; measured here at most 3.1e-3).
      EXPECT_LT(MaxDiff(got, want.data(), ne), 1e-2f);
      // The other sequence's pooled row is far from it (the check can fail).
      const float* other = s->SeqEmbeddings(1 - q);
      EXPECT_GT(MaxDiff(other, want.data(), ne), 0.05f);
    }
  }
}

// A golden of make_goldens.sh: the prompt's token ids, then rows of floats.
struct Golden {
  std::vector<int32_t> tokens;
  std::vector<float> rows;
};
Golden ReadGolden(const std::string& path) {
  Golden g;
  std::ifstream in(path);
  std::string line;
  EXPECT_TRUE(std::getline(in, line)) << path;
  std::istringstream ids(line);
  for (int32_t t; ids >> t;) g.tokens.push_back(t);
  for (float x; in >> x;) g.rows.push_back(x);
  return g;
}

// Every pooling type against llama.cpp 2026 (refembd: llama_context_params.embeddings, the prompt
// in one batch, n_ctx 256) on stories260K F32 and Q8_0, with golden_logits_test's tolerances (0.02
// F32, 0.25 quantized: the summation orders of the default numerics, and Q8_0's activations).
// Measured (embeddings up to ~7 in magnitude): at most 1.6e-3 (F32) and 0.11 (Q8_0). The wrong
// pooling (mean compared with cls's golden and so on) is more than 0.5 away.
TEST(EmbeddingsGolden, EqualsLlamaCpp) {
  const char* names[] = {"none", "mean", "cls", "last"};
  for (const char* model : {"stories260K", "stories260K-Q8_0"}) {
    const float tol = std::string(model) == "stories260K" ? 0.02f : 0.25f;
    const std::string path = test::ModelPath(std::string(model) + ".gguf");
    if (!test::FileExists(path)) GTEST_SKIP() << "skipped: " << path << " not found (shared models absent)";
    auto plan = test::PlanCpu(path, 256);  // refembd's n_ctx
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    std::vector<std::vector<float>> got(4);
    std::vector<Golden> want(4);
    for (int p = 0; p < 4; ++p) {
      SCOPED_TRACE(std::string(model) + " " + names[p]);
      want[p] =
          ReadGolden(std::string(STOWAGE_TEST_DATA_DIR) + "/golden-embd/" + model + "-" + names[p] + ".txt");
      SessionOptions o;
      o.n_threads = 2;
      o.embeddings = true;
      o.pooling = static_cast<PoolingType>(p);
      auto s = Session::CreateFromPlanBytes(*plan, path, o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      ASSERT_TRUE((*s)->Decode(want[p].tokens, false, nullptr).ok());
      const float* e = p == 0 ? (*s)->Embeddings().data() : (*s)->SeqEmbeddings(0);
      ASSERT_NE(e, nullptr);
      got[p].assign(e, e + want[p].rows.size());
      ASSERT_EQ(want[p].rows.size(),
                static_cast<size_t>((*s)->n_embd()) * (p == 0 ? want[p].tokens.size() : 1));
      EXPECT_LT(MaxDiff(got[p].data(), want[p].rows.data(), got[p].size()), tol);
    }
    for (int p = 1; p < 4; ++p)  // the wrong pooling is far off: the comparison can fail
      EXPECT_GT(MaxDiff(got[p].data(), want[p % 3 + 1].rows.data(), got[p].size()), 0.5f) << names[p];
  }
}

TEST_F(EmbeddingsTest, SetEmbeddingsTogglesAndRefusesABadPooling) {
  auto s = Open(false, PoolingType::kNone);
  ASSERT_NE(s, nullptr);
  Status bad = s->SetEmbeddings(true, static_cast<PoolingType>(7));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "SetEmbeddings: pooling 7 outside [0, 3] (none, mean, cls, last)");
  EXPECT_FALSE(s->embeddings());
  ASSERT_TRUE(s->SetEmbeddings(true, PoolingType::kLast).ok());
  ASSERT_TRUE(s->DecodeBatch(Seq(kA, 0, true), nullptr).ok());
  ASSERT_NE(s->SeqEmbeddings(0), nullptr);
  s->Reset();
  EXPECT_EQ(s->SeqEmbeddings(0), nullptr);  // dropped with the cache
  ASSERT_TRUE(s->SetEmbeddings(false, PoolingType::kNone).ok());
  ASSERT_TRUE(s->DecodeBatch(Seq(kA, 0, true), nullptr).ok());
  EXPECT_EQ(s->SeqEmbeddings(0), nullptr);
  EXPECT_TRUE(s->Embeddings().empty());
}

}  // namespace
}  // namespace stowage
