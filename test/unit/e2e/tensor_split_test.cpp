// A tensor split across ranks (planner tensor_split_plan.h, runtime session_tensor_split.cpp) with
// its ranks in one process: one session per rank on its own thread, joined by an in-memory
// Transport. The logits are compared with the unsplit model's session within an F32 tolerance (the
// ranks' partial sums add up in another order); planned == allocated on every rank; a model whose
// heads do not split evenly and a transport of another size are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "objapi_edit.h"
#include "plan_probed.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/sm_tensor.h"
#include "stowage/planner/tensor_split_plan.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/transport.h"
#include "test_paths.h"

namespace stowage {
namespace {

/// The message queues of the ranks of one process, one per (from, to, tag).
struct Hub {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint8_t>>> queues;
};

/// A Transport between threads of one process: Send queues a copy, Recv waits (10 s at most).
class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<Hub> hub, int rank, int size)
      : hub_(std::move(hub)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int to, int tag, const void* data, uint64_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    std::lock_guard<std::mutex> lock(hub_->mu);
    hub_->queues[{rank_, to, tag}].emplace_back(p, p + n);
    hub_->cv.notify_all();
    return Status::Ok();
  }
  Status Recv(int from, int tag, void* data, uint64_t n) override {
    std::unique_lock<std::mutex> lock(hub_->mu);
    auto& q = hub_->queues[{from, rank_, tag}];
    if (!hub_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return !q.empty(); }))
      return Unavailable("rank " + std::to_string(rank_) + ": nothing from rank " + std::to_string(from));
    std::vector<uint8_t> m = std::move(q.front());
    q.pop_front();
    if (m.size() != n)
      return DataLoss("message of " + std::to_string(m.size()) + " bytes, expected " + std::to_string(n));
    std::memcpy(data, m.data(), n);
    return Status::Ok();
  }
  [[noreturn]] void Abort(const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::abort();
  }

 private:
  std::shared_ptr<Hub> hub_;
  int rank_, size_;
};

const std::vector<int32_t> kPrompt = {1,   150, 292, 59, 102,
                                      338, 7,   42,  99, 3};  // ids < 512 (the tiny models' vocab)

/// The tensor split of `model` over `n` CPU hosts (this machine's CPU), as plan-model --cluster -sm
/// tensor makes it.
Result<planner::TensorSplitPlan> SplitPlan(const std::string& model, int n, bool flash_attn) {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model));
  STOWAGE_ASSIGN_OR_RETURN(planner::DeviceManifest cpu,
                           planner::ManifestFromProbe(MakeCpuDevice(ProbeCpu())));
  STOWAGE_ASSIGN_OR_RETURN(planner::HParams hp, planner::ReadHParams(*gguf));
  planner::ContextConfig cfg;
  cfg.n_ctx = 64;
  cfg.flash_attn = flash_attn;
  STOWAGE_RETURN_IF_ERROR(planner::ResolveContext(hp, model, &cfg));
  return planner::PlanTensorSplitRanks(
      *gguf, hp, cfg, std::vector<std::vector<planner::DeviceManifest>>(n, {cpu}), {}, {}, "test");
}

/// Runs the split plan's ranks on threads; returns rank 0's logits of every prompt token then one
/// more token, and each rank's buffers in *buffers.
std::vector<float> RunRanks(const std::string& model, const std::vector<uint8_t>& bytes, int n,
                            std::vector<std::vector<BufferReport>>* buffers) {
  auto hub = std::make_shared<Hub>();
  std::vector<std::vector<float>> logits(n);
  buffers->assign(n, {});
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      SessionOptions opts;
      opts.n_threads = 1;
      opts.tensor_split_transport = std::make_shared<LoopbackTransport>(hub, r, n);
      auto s = Session::CreateFromPlanBytes(bytes, model, opts);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.status().ToString();
      (*buffers)[r] = (*s)->Buffers();
      std::vector<float> out;
      const Status st = (*s)->Decode(kPrompt, true, &logits[r]);
      ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.ToString();
      ASSERT_TRUE((*s)->Decode({42}, false, &out).ok());
      logits[r].insert(logits[r].end(), out.begin(), out.end());
    });
  for (auto& t : threads) t.join();
  for (int r = 1; r < n; ++r) EXPECT_EQ(logits[r], logits[0]) << "rank " << r << " holds other logits";
  return logits[0];
}

/// The same prompt on the unsplit model (this machine's plan), its K cache of `type_k`.
std::vector<float> RunWhole(const std::string& model, bool flash_attn, GgmlType type_k = GgmlType::F16) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 64;
  cfg.flash_attn = flash_attn;
  cfg.type_k = type_k;
  auto plan = test::PlanForThisCpu(model, cfg);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  SessionOptions opts;
  opts.n_threads = 1;
  auto s = Session::CreateFromPlanBytes(*plan, model, opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::vector<float> all, out;
  const Status st = (*s)->Decode(kPrompt, true, &all);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE((*s)->Decode({42}, false, &out).ok());
  all.insert(all.end(), out.begin(), out.end());
  return all;
}

/// max |a - b| / max |a|.
double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    m = std::max(m, std::fabs(double(a[i])));
  }
  return m > 0 ? d / m : d;
}

// The tolerance: the ranks add their partial sums of attn_output and ffn_down in F32 in another
// order than one matmul does (measured below 1e-6 of the largest logit); a split that drops a rank's
// part (the test below) moves them by far more.
constexpr double kTol = 1e-4;

class TensorSplit : public ::testing::TestWithParam<std::tuple<const char*, int, bool>> {};

TEST_P(TensorSplit, LogitsWithinToleranceOfOneProcess) {
  const auto [name, n, fa] = GetParam();
  const std::string model = test::ModelPath(name);
  STOWAGE_REQUIRE_FILE(model);
  auto tp = SplitPlan(model, n, fa);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  ASSERT_EQ(tp->ranks.size(), static_cast<size_t>(n));
  std::vector<std::vector<BufferReport>> buffers;
  const std::vector<float> split = RunRanks(model, tp->bytes, n, &buffers);
  const std::vector<float> whole = RunWhole(model, fa);
  ASSERT_EQ(split.size(), whole.size());
  const double d = RelDiff(whole, split);
  EXPECT_LE(d, kTol) << name << " over " << n << " ranks";
  std::printf("%s over %d ranks (fa %d): max |diff| / max |logit| = %.3g\n", name, n, fa ? 1 : 0, d);
  // planned == allocated, and the plan's per-rank totals are the rank's buffers
  for (int r = 0; r < n; ++r) {
    uint64_t weights = 0, kv = 0;
    for (const BufferReport& b : buffers[r]) {
      EXPECT_EQ(b.planned, b.allocated) << "rank " << r << " " << b.name << " " << b.usage;
      if (b.usage == "model") weights += b.allocated;
      if (b.usage == "KV") kv += b.allocated;
    }
    EXPECT_EQ(weights, tp->ranks[r].weights) << "rank " << r;
    EXPECT_EQ(kv, tp->ranks[r].kv) << "rank " << r;
  }
  // the KV cache is split by heads: each rank holds its share of the whole model's
  uint64_t kv_sum = 0;
  for (const auto& m : tp->ranks) kv_sum += m.kv;
  EXPECT_GT(tp->ranks[0].kv, 0u);
  EXPECT_LT(tp->ranks[0].kv, kv_sum);
}

INSTANTIATE_TEST_SUITE_P(Models, TensorSplit,
                         ::testing::Values(std::make_tuple("tiny8-untied-q4_0.gguf", 2, false),
                                           std::make_tuple("tiny8-untied-q4_0.gguf", 2, true),
                                           std::make_tuple("tiny-tied-f32.gguf", 2, false)));

// The check can fail: the unsplit model with its K cache in q8_0 instead of f16 (an error far
// smaller than a rank's part of a sum left out) is beyond the tolerance.
TEST(TensorSplit, ToleranceCatchesAQ8KCache) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  EXPECT_GT(RelDiff(RunWhole(model, false), RunWhole(model, false, GgmlType::Q8_0)), kTol);
}

// A model whose FFN does not split into the same columns in every layer (stories260K: 172 columns in
// multiples of 128, so one rank gets all of a layer's and the other none, taking turns) is refused
// naming the tensor; a transport of another size is refused
// before anything loads.
TEST(TensorSplit, Refusals) {
  const std::string stories = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(stories);
  auto bad = SplitPlan(stories, 2, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "tensor split across ranks: blk.1.ffn_up.weight: rank 1 gets no FFN columns (expected at least "
            "one over "
            "2 ranks)");
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  auto tp = SplitPlan(model, 2, false);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  SessionOptions opts;
  auto none = Session::CreateFromPlanBytes(tp->bytes, model, opts);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(
      none.status().message(),
      "<plan in memory>: planned as a tensor split across 2 MPI ranks (plan-model --cluster -sm tensor), "
      "not started by mpirun: run mpirun -np 2");
  opts.tensor_split_transport = std::make_shared<LoopbackTransport>(std::make_shared<Hub>(), 0, 3);
  auto three = Session::CreateFromPlanBytes(tp->bytes, model, opts);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("mpirun started 3 rank(s): run mpirun -np 2"), std::string::npos)
      << three.status().message();
}

// A slice the runtime cannot read as planned is refused before anything loads, in one line naming
// the plan, the tensor and expected vs found: one that cuts a quantized block, one outside its file
// tensor.
TEST(TensorSplit, BadSlicesRefused) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  auto tp = SplitPlan(model, 2, false);
  ASSERT_TRUE(tp.ok()) << tp.status().ToString();
  const auto load = [&](int64_t begin) {
    std::vector<uint8_t> edited = test::EditPlan(tp->bytes, [&](::objapi::plan::PlanT& p) {
      for (auto& t : p.tensors)
        if (t->name == "blk.0.attn_output.weight") t->slice->begin = begin;
    });
    SessionOptions opts;
    opts.tensor_split_transport = std::make_shared<LoopbackTransport>(std::make_shared<Hub>(), 0, 2);
    return Session::CreateFromPlanBytes(edited, model, opts).status();
  };
  EXPECT_EQ(
      load(16).message(),
      "<plan in memory>: tensor 'blk.0.attn_output.weight': slice: axis 0 from element 16, 128 elements: "
      "expected multiples of q4_0's block of 32 (a split that cuts a quantized block)");
  EXPECT_EQ(
      load(160).message(),
      "<plan in memory>: tensor 'blk.0.attn_output.weight': slice: ne[0] 128 from 160: expected inside the "
      "tensor's 256");
  EXPECT_TRUE(load(128).ok());  // the other rank's slice: whole blocks inside the tensor
}

}  // namespace
}  // namespace stowage
