// Several sequences in one session (llama.cpp's n_seq_max with a unified KV cache): a batch of
// interleaved sequences against each sequence alone, the KV cache operations (SeqRm, SeqCp,
// Reset), the batch rules and the plan fields (context.n_seq_max, kv_unified, schema version 5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "objapi_edit.h"
#include "plan_cpu.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "test_paths.h"

namespace stowage {
namespace {

// A plan of stories260K for n_seq_max sequences sharing one cache of n_ctx cells (-np N -kvu).
std::vector<uint8_t> SeqPlan(const std::string& model, uint32_t n_ctx, uint32_t n_seq_max, bool unified,
                             uint32_t n_ubatch = 512) {
  planner::ContextConfig cfg;
  cfg.n_ctx = n_ctx;
  cfg.n_ubatch = n_ubatch;
  cfg.n_seq_max = n_seq_max;
  cfg.kv_unified = unified;
  auto plan = test::PlanCpu(model, cfg, /*use_mmap=*/true);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : std::vector<uint8_t>{};
}

class SequencesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model_))
      GTEST_SKIP() << "skipped: " << model_ << " not found (shared models absent)";
    plan_ = SeqPlan(model_, 128, 4, true);
    ASSERT_FALSE(plan_.empty());
  }
  std::unique_ptr<Session> Open(const std::vector<uint8_t>& plan, bool llamacpp_numerics = false) {
    SessionOptions o;
    o.n_threads = 2;
    o.llamacpp_numerics = llamacpp_numerics;
    auto s = Session::CreateFromPlanBytes(plan, model_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string model_;
  std::vector<uint8_t> plan_;
};

// Prompts of different lengths (token ids of stories260K's 512).
const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 403, 407, 261, 378, 300, 301, 302, 303},
    {1, 87, 45, 310, 260, 399, 12},
    {1, 500, 2, 3, 4, 5, 6, 7, 8, 9, 10},
    {1, 111, 222, 333, 444},
};

std::vector<BatchToken> Tokens(const std::vector<int32_t>& ids, int32_t seq, int32_t pos0) {
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i) b.push_back({ids[i], pos0 + static_cast<int32_t>(i), seq, true});
  return b;
}

// Interleaves the prompts of `n_seq` sequences token by token (sequence k gets seq_id k); every
// token asks for its logits. `row[k][i]` is the output row of prompt k's token i.
std::vector<BatchToken> Interleave(size_t n_seq, std::vector<std::vector<size_t>>* row) {
  std::vector<BatchToken> b;
  row->assign(n_seq, {});
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (size_t k = 0; k < n_seq; ++k)
      if (i < kPrompts[k].size()) {
        (*row)[k].push_back(b.size());
        b.push_back({kPrompts[k][i], static_cast<int32_t>(i), static_cast<int32_t>(k), true});
        any = true;
      }
    if (!any) return b;
  }
}

// Largest |a - b| over the rows of one sequence.
float Tolerance(bool llamacpp_numerics) { return llamacpp_numerics ? 1e-3f : 1e-2f; }

float MaxDiff(const std::vector<float>& together, const std::vector<size_t>& rows,
              const std::vector<float>& alone, size_t n_vocab) {
  float d = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t v = 0; v < n_vocab; ++v)
      d = std::max(d, std::fabs(together[rows[i] * n_vocab + v] - alone[i * n_vocab + v]));
  return d;
}

// Two and four sequences decoded interleaved in one batch give each sequence the logits it gets
// alone. Not bit for bit: the attention's softmax sums and V products run over the cells of all the
// sequences (the others' masked to exp(-inf) = 0), so the non-zero terms fall into other SIMD
// lanes and partial sums than alone, and the matrix products of a ubatch of more tokens take other
// GEMM blocks (the default mode's prompt-processing kernels; SessionTest.UbatchSplitMatchesOneBatch
// allows 1e-3 for that alone). Measured on stories260K (logits of magnitude ~15): at most 5.4e-3 in
// the default mode, 2.7e-4 with llamacpp_numerics (products in token-generation order); the bounds
// are 1e-2 and 1e-3, while a mask that let one sequence see another's cells moves them by more than
// 0.5 (WithoutTheSequenceMaskTheLogitsMove).
TEST_F(SequencesTest, InterleavedEqualsAlone) {
  for (const bool numerics : {false, true}) {
    for (const size_t n_seq : {size_t{2}, size_t{4}}) {
      SCOPED_TRACE("n_seq " + std::to_string(n_seq) + (numerics ? " llamacpp_numerics" : ""));
      std::vector<std::vector<size_t>> rows;
      const std::vector<BatchToken> batch = Interleave(n_seq, &rows);
      auto s = Open(plan_, numerics);
      ASSERT_NE(s, nullptr);
      std::vector<float> together;
      ASSERT_TRUE(s->DecodeBatch(batch, &together).ok());
      const size_t nv = static_cast<size_t>(s->n_vocab());
      ASSERT_EQ(together.size(), batch.size() * nv);
      for (size_t k = 0; k < n_seq; ++k) {
        EXPECT_EQ(s->SeqPosMax(static_cast<int32_t>(k)), static_cast<int32_t>(kPrompts[k].size()) - 1);
        auto alone = Open(plan_, numerics);
        std::vector<float> one;
        ASSERT_TRUE(alone->DecodeBatch(Tokens(kPrompts[k], 0, 0), &one).ok());
        EXPECT_LE(MaxDiff(together, rows[k], one, nv), Tolerance(numerics)) << "sequence " << k;
      }
      // One more token per sequence in one batch (a ubatch of n_seq tokens) against alone (1 token).
      std::vector<BatchToken> next;
      for (size_t k = 0; k < n_seq; ++k)
        next.push_back({static_cast<int32_t>(17 + k), static_cast<int32_t>(kPrompts[k].size()),
                        static_cast<int32_t>(k), true});
      ASSERT_TRUE(s->DecodeBatch(next, &together).ok());
      ASSERT_EQ(together.size(), n_seq * nv);
      for (size_t k = 0; k < n_seq; ++k) {
        auto alone = Open(plan_, numerics);
        std::vector<float> one;
        std::vector<BatchToken> b = Tokens(kPrompts[k], 0, 0);
        b.push_back({static_cast<int32_t>(17 + k), static_cast<int32_t>(kPrompts[k].size()), 0, true});
        ASSERT_TRUE(alone->DecodeBatch(b, &one).ok());
        one.erase(one.begin(), one.end() - static_cast<std::ptrdiff_t>(nv));
        EXPECT_LE(MaxDiff(together, {k}, one, nv), Tolerance(numerics)) << "sequence " << k;
      }
    }
  }
}

// The mask is what keeps the sequences apart: the same interleaved tokens all in sequence 0 (one
// sequence attending to every token) are far from the separate sequences' logits.
TEST_F(SequencesTest, WithoutTheSequenceMaskTheLogitsMove) {
  std::vector<std::vector<size_t>> rows;
  std::vector<BatchToken> batch = Interleave(2, &rows);
  auto s = Open(plan_);
  std::vector<float> apart, mixed;
  ASSERT_TRUE(s->DecodeBatch(batch, &apart).ok());
  // One sequence: positions 0..n-1 in batch order, as one prompt would be.
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].seq_id = 0;
    batch[i].pos = static_cast<int32_t>(i);
  }
  s->Reset();
  ASSERT_TRUE(s->DecodeBatch(batch, &mixed).ok());
  const size_t nv = static_cast<size_t>(s->n_vocab());
  std::vector<float> alone;
  auto one = Open(plan_);
  ASSERT_TRUE(one->DecodeBatch(Tokens(kPrompts[1], 0, 0), &alone).ok());
  EXPECT_LE(MaxDiff(apart, rows[1], alone, nv), Tolerance(false));
  EXPECT_GT(MaxDiff(mixed, rows[1], alone, nv), 0.5f) << MaxDiff(mixed, rows[1], alone, nv);
}

// SeqRm of a tail and decoding it again gives the same bits (same cells, same ubatch shapes); the
// other sequence is untouched.
TEST_F(SequencesTest, SeqRmThenRedecodeEqualsOriginal) {
  auto s = Open(plan_);
  std::vector<float> first, again, other;
  const std::vector<int32_t>& p = kPrompts[2];
  const std::vector<int32_t> head(p.begin(), p.begin() + 6), tail(p.begin() + 6, p.end());
  ASSERT_TRUE(s->DecodeBatch(Tokens(head, 0, 0), nullptr).ok());
  ASSERT_TRUE(s->DecodeBatch(Tokens(kPrompts[1], 1, 0), &other).ok());
  ASSERT_TRUE(s->DecodeBatch(Tokens(tail, 0, 6), &first).ok());
  ASSERT_TRUE(s->SeqRm(0, 6, -1).ok());
  EXPECT_EQ(s->SeqPosMax(0), 5);
  EXPECT_EQ(s->SeqPosMax(1), static_cast<int32_t>(kPrompts[1].size()) - 1);
  ASSERT_TRUE(s->DecodeBatch(Tokens(tail, 0, 6), &again).ok());
  EXPECT_EQ(first, again);
  // Removing the whole of sequence 1 and decoding it again reuses its cells: same bits.
  std::vector<float> other_again;
  ASSERT_TRUE(s->SeqRm(1, -1, -1).ok());
  EXPECT_EQ(s->SeqPosMax(1), -1);
  ASSERT_TRUE(s->DecodeBatch(Tokens(kPrompts[1], 1, 0), &other_again).ok());
  EXPECT_EQ(other, other_again);
  // seq_id -1: every sequence.
  ASSERT_TRUE(s->SeqRm(-1, -1, -1).ok());
  EXPECT_EQ(s->SeqPosMax(0), -1);
  EXPECT_EQ(s->SeqPosMax(1), -1);
  EXPECT_EQ(s->n_past(), 0);
}

// SeqCp shares a prompt: sequence 1 continues sequence 0's cells, bit for bit what a session that
// decodes the prompt and the token in one sequence computes (the same cells, in the same places).
TEST_F(SequencesTest, SeqCpSharesThePrompt) {
  auto s = Open(plan_);
  const std::vector<int32_t>& p = kPrompts[0];
  ASSERT_TRUE(s->DecodeBatch(Tokens(p, 0, 0), nullptr).ok());
  ASSERT_TRUE(s->SeqCp(0, 1, -1, -1).ok());
  EXPECT_EQ(s->SeqPosMax(1), static_cast<int32_t>(p.size()) - 1);
  EXPECT_EQ(s->SeqPosMin(1), 0);
  const int32_t n = static_cast<int32_t>(p.size());
  std::vector<float> in1, in0;
  ASSERT_TRUE(s->DecodeBatch({{42, n, 1, true}}, &in1).ok());
  auto one = Open(plan_);
  ASSERT_TRUE(one->DecodeBatch(Tokens(p, 0, 0), nullptr).ok());
  ASSERT_TRUE(one->DecodeBatch({{42, n, 0, true}}, &in0).ok());
  EXPECT_EQ(in1, in0);
  // Sequence 0 does not see sequence 1's token.
  std::vector<float> next0, next0_alone;
  ASSERT_TRUE(s->DecodeBatch({{43, n, 0, true}}, &next0).ok());
  auto two = Open(plan_);
  ASSERT_TRUE(two->DecodeBatch(Tokens(p, 0, 0), nullptr).ok());
  ASSERT_TRUE(two->DecodeBatch({{43, n, 0, true}}, &next0_alone).ok());
  EXPECT_LE(MaxDiff(next0, {0}, next0_alone, static_cast<size_t>(s->n_vocab())), Tolerance(false));
  // Removing sequence 0 keeps the shared cells for sequence 1.
  ASSERT_TRUE(s->SeqRm(0, -1, -1).ok());
  EXPECT_EQ(s->SeqPosMax(1), n);
  EXPECT_EQ(s->SeqPosMin(1), 0);
}

// A hole left by SeqRm is reused for a later ubatch that fits it; a ubatch longer than every run
// of empty cells fails without changing the cache.
TEST_F(SequencesTest, HolesAndAFullCache) {
  const std::vector<uint8_t> plan = SeqPlan(model_, 32, 4, true);
  auto s = Open(plan);
  std::vector<int32_t> ten(10, 7);
  ASSERT_TRUE(s->DecodeBatch(Tokens(ten, 0, 0), nullptr).ok());
  ASSERT_TRUE(s->DecodeBatch(Tokens(ten, 1, 0), nullptr).ok());
  ASSERT_TRUE(s->DecodeBatch(Tokens(ten, 2, 0), nullptr).ok());
  ASSERT_TRUE(s->SeqRm(1, -1, -1).ok());  // cells 10..19 empty, 30..31 empty
  std::vector<int32_t> twelve(12, 7);
  Status st = s->DecodeBatch(Tokens(twelve, 3, 0), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(),
            "KV cache full: no run of 12 empty cells for a ubatch (20 of 32 cells in use; remove "
            "sequences with SeqRm)");
  EXPECT_EQ(s->SeqPosMax(3), -1);
  ASSERT_TRUE(s->DecodeBatch(Tokens(ten, 3, 0), nullptr).ok());  // fits the hole
  st = s->DecodeBatch(Tokens(ten, 1, 0), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(), "context full: 30 tokens in the cache + 10 new > n_ctx 32");
}

// The batch rules of llama.cpp 2026 llama_batch_allocr::init, each in one line; the cache is
// unchanged after each.
TEST_F(SequencesTest, BadBatches) {
  auto s = Open(plan_);
  ASSERT_TRUE(s->DecodeBatch(Tokens({1, 2, 3}, 0, 0), nullptr).ok());
  auto expect = [&](const std::vector<BatchToken>& b, const std::string& msg) {
    const Status st = s->DecodeBatch(b, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << msg;
    EXPECT_EQ(st.message(), msg);
    EXPECT_EQ(s->SeqPosMax(0), 2);
  };
  expect({{5, 3, 256, true}}, "decode: token 0: seq_id 256 outside [0, 256)");
  expect({{5, 3, -1, true}}, "decode: token 0: seq_id -1 outside [0, 256)");
  expect({{5, -2, 1, true}}, "decode: token 0: position -2 < 0");
  expect({{5, 5, 0, true}},
         "decode: sequence 0: the cache holds positions up to X = 2, the batch starts at Y = 5 (expected Y = "
         "X + 1)");
  expect({{5, 0, 1, true}, {5, 2, 1, true}},
         "decode: sequence 1: positions 0 to 2 for 2 tokens are not consecutive");
  expect({}, "decode: empty batch (at least one token is needed)");
  expect({{512, 0, 1, true}}, "decode: token id 512 out of range [0, 512)");
  // Any order within the batch is fine (positions consecutive as a set).
  EXPECT_TRUE(s->DecodeBatch({{5, 1, 1, false}, {6, 0, 1, true}}, nullptr).ok());
  EXPECT_EQ(s->SeqRm(256, -1, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SeqCp(0, 300, -1, -1).message(), "SeqCp: dst 300 outside [0, 256)");
  EXPECT_EQ(s->SeqPosMax(999), -1);
  EXPECT_EQ(s->n_seq_max(), 4);
  EXPECT_EQ(s->n_seq_ids(), 256);
}

// A plan of one sequence (the default, -np 1) takes sequence 0 only, as llama.cpp 2026 with
// n_seq_max 1 and no unified cache does.
TEST_F(SequencesTest, OneSequencePlan) {
  auto plan = test::PlanCpu(model_, 64);
  ASSERT_TRUE(plan.ok());
  auto s = Open(*plan);
  EXPECT_EQ(s->n_seq_max(), 1);
  EXPECT_EQ(s->n_seq_ids(), 1);
  const Status st = s->DecodeBatch({{5, 0, 1, true}}, nullptr);
  EXPECT_EQ(st.message(),
            "decode: token 0: seq_id 1 outside [0, 1) (the plan keeps one sequence: plan-model -np N -kvu "
            "for more)");
  // Decode is DecodeBatch of sequence 0 at n_past: the same bits.
  std::vector<float> a, b;
  ASSERT_TRUE(s->Decode(kPrompts[0], true, &a).ok());
  auto t = Open(*plan);
  ASSERT_TRUE(t->DecodeBatch(Tokens(kPrompts[0], 0, 0), &b).ok());
  EXPECT_EQ(a, b);
}

// The plan's fields: n_seq_max > 1 needs schema version 5; n_seq_max from 1 to 256; a plan of
// one KV stream per sequence (no -kvu) is refused by this runtime in one line.
TEST_F(SequencesTest, PlanFields) {
  const std::string path = "p.plan";
  auto load = [&](const std::vector<uint8_t>& bytes) { return PlanFile::FromBytes(bytes, path).status(); };
  const auto* root = plan::GetPlan(plan_.data());
  EXPECT_EQ(root->schema_version(), kPlanSchemaVersionSeqs);
  EXPECT_EQ(root->context()->n_seq_max(), 4u);
  EXPECT_TRUE(root->context()->kv_unified());
  auto one = test::PlanCpu(model_, 64);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(plan::GetPlan(one->data())->schema_version(), kPlanSchemaVersionBase);
  EXPECT_EQ(load(test::EditPlan(plan_, [](objapi::plan::PlanT& p) { p.schema_version = 4; })).message(),
            "p.plan: schema_version: expected >= 5 for several sequences (context.n_seq_max 4), found 4");
  EXPECT_EQ(load(test::EditPlan(plan_, [](objapi::plan::PlanT& p) { p.context->n_seq_max = 0; })).message(),
            "p.plan: context.n_seq_max: expected 1 to 256 (LLAMA_MAX_SEQ), found 0");
  EXPECT_EQ(load(test::EditPlan(plan_, [](objapi::plan::PlanT& p) { p.context->n_seq_max = 257; })).message(),
            "p.plan: context.n_seq_max: expected 1 to 256 (LLAMA_MAX_SEQ), found 257");
  // The planner: more than LLAMA_MAX_SEQ sequences, or several in one stream each, in one line.
  {
    planner::ContextConfig cfg;
    cfg.n_ctx = 64;
    cfg.n_seq_max = 300;
    cfg.kv_unified = true;
    EXPECT_EQ(test::PlanCpu(model_, cfg, true).status().message(),
              model_ + ": n_seq_max 300 exceeds 256 (LLAMA_MAX_SEQ)");
    cfg.n_seq_max = 2;
    cfg.kv_unified = false;
    EXPECT_EQ(test::PlanCpu(model_, cfg, true).status().code(), StatusCode::kUnimplemented);
  }
  const std::vector<uint8_t> streams =
      test::EditPlan(plan_, [](objapi::plan::PlanT& p) { p.context->kv_unified = false; });
  EXPECT_TRUE(load(streams).ok());
  auto s = Session::CreateFromPlanBytes(streams, model_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.status().message(),
            "<plan in memory>: context.n_seq_max 4 without kv_unified: one KV stream per sequence is not "
            "supported by this runtime (plan with -kvu: one cache shared by the sequences)");
}

}  // namespace
}  // namespace stowage
