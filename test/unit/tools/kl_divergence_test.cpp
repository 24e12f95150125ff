// stowage-run perplexity --kl-divergence (tools/stowage-run/kl_divergence.h): the record encoding
// against log-softmax computed here in double, the statistics on hand-made logits (identical
// distributions, a pair whose KL divergence is computed here independently), and the base file's
// round trip and errors.
#include "kl_divergence.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace stowage::tools {
namespace {

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double mx = logits[0];
  for (float v : logits) mx = std::max(mx, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  std::vector<double> out;
  for (float v : logits) out.push_back(double(v) - mx - std::log(sum));
  return out;
}

// The number printed after `label` in `text` (NaN when the label is missing).
double ValueAfter(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  return at == std::string::npos ? NAN : std::strtod(text.c_str() + at + label.size(), nullptr);
}

TEST(KlDivergenceTest, RecordSizes) {
  EXPECT_EQ(KlRecordSize(4), 8);   // 2 floats + 4 uint16
  EXPECT_EQ(KlRecordSize(5), 10);  // one uint16 of padding
  EXPECT_EQ(KlRecordSize(32000), 32004);
  EXPECT_EQ(KlScoredPerChunk(512), 255);
  EXPECT_EQ(KlScoredPerChunk(3), 1);
  EXPECT_EQ(KlScoredPerChunk(4), 1);
}

TEST(KlDivergenceTest, EncodeDecodeMatchesLogSoftmax) {
  // -30 is more than 16 below the top logit: clamped to code 0 (min_logit = 2 - 16).
  const std::vector<float> logits = {0.f, 1.f, 2.f, -1.f, -30.f};
  std::vector<uint16_t> rec(KlRecordSize(5), 0xffff);
  const double nll = EncodeLogProbs(logits.data(), 5, 1, rec.data());
  const std::vector<double> lp = LogSoftmax(logits);
  EXPECT_NEAR(nll, -lp[1], 1e-6);
  const double scale = 16.0 / 65535;
  EXPECT_NEAR(RecordScale(rec.data()), scale, 1e-9);
  EXPECT_NEAR(RecordMinLogProb(rec.data()), lp[2] - 16, 1e-5);  // log p of a logit of max - 16
  // Codes: round((logit - min_logit) / scale), the top logit at 65535.
  EXPECT_EQ(rec[4 + 2], 65535);
  EXPECT_EQ(rec[4 + 0], 57343);  // 14 / 16 * 65535 = 57343.125
  EXPECT_EQ(rec[4 + 4], 0);
  EXPECT_EQ(rec[4 + 5], 0);  // padding
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(DecodeLogProb(rec.data(), v), lp[v], scale / 2 + 1e-5) << v;
  EXPECT_NEAR(DecodeLogProb(rec.data(), 4), lp[2] - 16, 1e-5);  // stored as the floor, not -32

  // All logits equal: scale 0, every code 0, log p = -log(n_vocab).
  const std::vector<float> flat(4, 3.f);
  std::vector<uint16_t> rec2(KlRecordSize(4), 0xffff);
  EXPECT_NEAR(EncodeLogProbs(flat.data(), 4, 0, rec2.data()), std::log(4.0), 1e-6);
  EXPECT_EQ(RecordScale(rec2.data()), 0.f);
  for (int v = 0; v < 4; ++v) {
    EXPECT_EQ(rec2[4 + v], 0);
    EXPECT_NEAR(DecodeLogProb(rec2.data(), v), -std::log(4.0), 1e-6);
  }
}

TEST(KlDivergenceTest, IdenticalDistributions) {
  const std::vector<float> logits = {0.5f, -1.f, 2.5f, 0.f, 1.f, -3.f};
  std::vector<uint16_t> rec(KlRecordSize(6));
  EncodeLogProbs(logits.data(), 6, 3, rec.data());
  KlDivergenceSums sums;
  std::vector<float> klds, p_diffs;
  for (int i = 0; i < 120; ++i) {
    const KlTokenResult r = AccumulateKlDivergence(logits.data(), 6, rec.data(), 3, &sums);
    EXPECT_NEAR(r.kld, 0, 1e-4);
    EXPECT_NEAR(r.p_diff, 0, 1e-5);
    klds.push_back(float(r.kld));
    p_diffs.push_back(r.p_diff);
  }
  EXPECT_EQ(sums.count, 120u);
  EXPECT_EQ(sums.n_same_top, 120u);
  EXPECT_NEAR(sums.sum_nll / sums.count, -LogSoftmax(logits)[3], 1e-5);
  EXPECT_NEAR(sums.sum_nll_base / sums.count, -LogSoftmax(logits)[3], 1e-4);

  const std::string line = FormatKlChunkLine(1, sums);
  EXPECT_EQ(line.substr(0, 4), "   1");
  EXPECT_NE(line.find("100.000 \u00b1  0.000 %"), std::string::npos) << line;
  const std::string stats = FormatKlStatistics(sums, klds, p_diffs, /*feb25=*/false);
  EXPECT_NE(stats.find("Same top p: 100.000 \u00b1 0.000 %\n"), std::string::npos) << stats;
  // The printed numbers (rounding of the sums may print -0.000000).
  EXPECT_NEAR(ValueAfter(stats, "Mean    KLD:"), 0, 1e-6) << stats;
  EXPECT_NEAR(ValueAfter(stats, "Mean PPL(Q)/PPL(base)         :"), 1, 1e-4) << stats;
  EXPECT_NEAR(ValueAfter(stats, "Mean PPL(base)                :"), std::exp(-LogSoftmax(logits)[3]), 1e-3)
      << stats;
  // Fewer than 100 tokens: no statistics, as llama.cpp.
  KlDivergenceSums few = sums;
  few.count = 99;
  EXPECT_EQ(FormatKlStatistics(few, klds, p_diffs, /*feb25=*/false), "");
}

TEST(KlDivergenceTest, KnownPair) {
  // Base and Q disagree on the top token; all log-probabilities are above -16 (none skipped).
  const std::vector<float> base = {1.f, 2.f, 0.f, -0.5f};
  const std::vector<float> q = {2.f, 1.5f, 0.5f, -1.f};
  std::vector<uint16_t> rec(KlRecordSize(4));
  EncodeLogProbs(base.data(), 4, 1, rec.data());
  const std::vector<double> lb = LogSoftmax(base), lq = LogSoftmax(q);
  double kl = 0;
  for (int v = 0; v < 4; ++v) kl += std::exp(lb[v]) * (lb[v] - lq[v]);
  ASSERT_GT(kl, 0.05);
  KlDivergenceSums sums;
  const KlTokenResult r = AccumulateKlDivergence(q.data(), 4, rec.data(), 1, &sums);
  EXPECT_NEAR(r.kld, kl, 2e-4);
  EXPECT_NEAR(r.nll, -lq[1], 1e-5);
  EXPECT_NEAR(r.p_diff, std::exp(lq[1]) - std::exp(lb[1]), 2e-4);
  EXPECT_EQ(sums.n_same_top, 0u);
  EXPECT_EQ(sums.count, 1u);
  EXPECT_NEAR(sums.sum_kld, kl, 2e-4);
  EXPECT_NEAR(sums.sum_nll_base, -lb[1], 2e-4);
  EXPECT_NEAR(sums.max_p_diff, std::fabs(std::exp(lq[1]) - std::exp(lb[1])), 2e-4);
}

TEST(KlDivergenceTest, StatisticsPercentiles) {
  // 101 tokens with KLD 0..100 and dp -50%..50%: the percentiles and median are values of the list.
  KlDivergenceSums sums;
  std::vector<float> klds, p_diffs;
  for (int i = 100; i >= 0; --i) {  // unsorted: FormatKlStatistics sorts
    klds.push_back(float(i));
    p_diffs.push_back((i - 50) / 100.f);
    sums.sum_kld += i;
    sums.sum_kld2 += double(i) * i;
    ++sums.count;
    ++sums.n_same_top;
  }
  const std::string stats = FormatKlStatistics(sums, klds, p_diffs, /*feb25=*/false);
  for (const char* want :
       {"Maximum KLD: 100.000000\n", "99.0%   KLD:  99.000000\n", "Median  KLD:  50.000000\n",
        "10.0%   KLD:  10.000000\n", "Minimum KLD:   0.000000\n",
        "Mean    KLD:  50.000000 \u00b1   2.915476\n", "Maximum \u0394p: 50.000%\n",
        "Median  \u0394p:  0.000%\n", "Minimum \u0394p: -50.000%\n", "75.0%   \u0394p: 25.000%\n"})
    EXPECT_NE(stats.find(want), std::string::npos) << want << "\n" << stats;
  // llama-perplexity 2026: 95.0%, 90.0% and 0.1%, 99.0% once.
  for (const char* want : {"99.0%   KLD:  99.000000\n95.0%   KLD:  95.000000\n90.0%   KLD:  90.000000\n",
                           " 0.1%   KLD:   0.100000\n"})
    EXPECT_NE(stats.find(want), std::string::npos) << want << "\n" << stats;
  // Feb 2025: the 99.0% line twice, no 95.0%, 90.0% or 0.1%.
  const std::string feb25 = FormatKlStatistics(sums, klds, p_diffs, /*feb25=*/true);
  EXPECT_NE(feb25.find("99.0%   KLD:  99.000000\n99.0%   KLD:  99.000000\nMedian"), std::string::npos)
      << feb25;
  for (const char* absent : {"95.0%   KLD", "90.0%   KLD", " 0.1%   KLD"})
    EXPECT_EQ(feb25.find(absent), std::string::npos) << absent << "\n" << feb25;
}

class KlBaseFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stowage-kld-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string Bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Put(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
  std::string dir_;
};

TEST_F(KlBaseFileTest, RoundTrip) {
  const KlBaseHeader h{4, 5, 2};  // 1 record per chunk, 10 uint16 each
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 0, 4, 3, 2};
  const std::string path = dir_ + "/base.kld";
  auto w = KlBaseWriter::Create(path, h, tokens);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::vector<float> logits = {0.f, 1.f, 2.f, -1.f, 0.5f};
  std::vector<uint16_t> c0(10), c1(10);
  EncodeLogProbs(logits.data(), 5, 3, c0.data());
  EncodeLogProbs(logits.data(), 5, 2, c1.data());
  ASSERT_TRUE(w->WriteChunk(c0).ok());
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0) << "the file appears only at Commit";
  ASSERT_TRUE(w->WriteChunk(c1).ok());
  ASSERT_TRUE(w->Commit().ok());

  const std::string bytes = Bytes(path);
  ASSERT_EQ(bytes.size(), 20u + 8 * 4 + 2 * 10 * 2);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  int32_t f[3];
  std::memcpy(f, bytes.data() + 8, sizeof f);
  EXPECT_EQ(f[0], 4);
  EXPECT_EQ(f[1], 5);
  EXPECT_EQ(f[2], 2);

  auto r = KlBaseReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->header().n_ctx, 4);
  EXPECT_EQ(r->tokens(), tokens);
  std::vector<uint16_t> got;
  ASSERT_TRUE(r->ReadChunk(&got).ok());
  EXPECT_EQ(got, c0);
  ASSERT_TRUE(r->ReadChunk(&got).ok());
  EXPECT_EQ(got, c1);

  // Truncated: one error naming the offset where the file ends and what was expected there.
  Put(dir_ + "/short.kld", bytes.substr(0, bytes.size() - 3));
  auto t = KlBaseReader::Open(dir_ + "/short.kld");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(
                "truncated at offset 89: expected the log-probability records of chunk 2 of 2 "
                "(from offset 72)"),
            std::string::npos)
      << t.status().message();

  // A token outside [0, n_vocab).
  std::string bad = bytes;
  const int32_t big = 5;
  std::memcpy(&bad[20 + 4 * 5], &big, 4);
  Put(dir_ + "/tok.kld", bad);
  auto tk = KlBaseReader::Open(dir_ + "/tok.kld");
  ASSERT_FALSE(tk.ok());
  EXPECT_NE(tk.status().message().find("offset 40: token 5 (chunk 2, position 1) is out of range"),
            std::string::npos)
      << tk.status().message();

  // Wrong magic.
  Put(dir_ + "/magic.kld", "GGUF" + bytes.substr(4));
  auto m = KlBaseReader::Open(dir_ + "/magic.kld");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("offset 0: expected the magic \"_logits_\""), std::string::npos);
}

TEST_F(KlBaseFileTest, UnfinishedWriteLeavesNoFile) {
  const std::string path = dir_ + "/base.kld";
  Put(path, "old");
  {
    auto w = KlBaseWriter::Create(path, {3, 2, 2}, {0, 1, 1, 1, 0, 0});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->WriteChunk(std::vector<uint16_t>(KlRecordSize(2))).ok());
    EXPECT_FALSE(w->Commit().ok());  // one chunk of two
  }
  EXPECT_EQ(Bytes(path), "old");
}

}  // namespace
}  // namespace stowage::tools
