// Asynchronous split-input copies: the golden placement configurations (two GPU-type RPC
// devices, -ngl 0/4/99, -sm none -mg 1) run on the asynchronous lazy test backend
// (async_private_backend.h), whose queued work only runs when waited for, so a wait the session
// misses shows up deterministically as NaN / wrong logits. Logits must equal the CPU-only plan's
// (same tolerance as multi_device_test). Also: a decode that fails part-way leaves n_past unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "accel_plan_generated.h"
#include "async_private_backend.h"
#include "golden_placement_plan.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "test_paths.h"

namespace stowage {
namespace {

const char* kManifestDir = STOWAGE_TEST_MANIFESTS;

struct Config {
  const char* name;
  int ngl;
  planner::SplitMode sm;
  int main_gpu;
  bool device_to_device;  // the plan copies between the two GPU-type devices
  bool direct = true;     // device -> device copies by CopyFromAsync (else staged through the host)
};

Result<std::vector<uint8_t>> Plan(const std::string& model, const Config& c, bool cpu_only,
                                  uint32_t n_ubatch) {
  return test::PlanGoldenPlacement(kManifestDir, model, c.ngl, c.sm, c.main_gpu, c.name, cpu_only, n_ubatch);
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    d = std::max(d, std::fabs(a[i] - b[i]));
  }
  return d;
}

class AsyncCopies : public ::testing::TestWithParam<Config> {};

TEST_P(AsyncCopies, SameLogitsAsCpuOnly) {
  const Config c = GetParam();
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  auto plan = Plan(model, c, false, 512);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto ref_plan = Plan(model, Config{"cpu", 0, planner::SplitMode::kLayer, 0, false}, true, 512);
  ASSERT_TRUE(ref_plan.ok()) << ref_plan.status().ToString();

  auto stats = std::make_shared<test::AsyncStats>();
  SessionOptions opts;
  opts.n_threads = 1;
  stats->allow_direct = c.direct;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto multi = Session::CreateFromPlanBytes(*plan, model, opts);
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  for (const auto& b : (*multi)->Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;
  SessionOptions cpu_opts;
  cpu_opts.n_threads = 1;
  auto ref = Session::CreateFromPlanBytes(*ref_plan, model, cpu_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300, 42, 7};
  std::vector<float> a, b;
  Status st = (*multi)->Decode(prompt, true, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*ref)->Decode(prompt, true, &b).ok());
  for (int step = 0; step < 3; ++step) {
    // Repacked (CPU_REPACK) vs plain Q4_0 accumulation order: up to 0.013 measured (multi_device_test).
    EXPECT_LE(MaxDiff(a, b), 0.03f) << "step " << step;
    const int32_t next = static_cast<int32_t>(std::max_element(b.end() - (*ref)->n_vocab(), b.end()) -
                                              (b.end() - (*ref)->n_vocab()));
    st = (*multi)->Decode({next}, false, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE((*ref)->Decode({next}, false, &b).ok());
  }
  // The asynchronous paths ran: queued computes and copies in and out of the devices.
  if (c.ngl > 0) {
    EXPECT_GT(stats->computes.load(), 0);
    EXPECT_GT(stats->write_async.load(), 0);
  }
  if (c.ngl > 0 && c.ngl < 99) EXPECT_GT(stats->read_async.load(), 0);  // back to CPU layers
  if (c.device_to_device && c.direct) EXPECT_GT(stats->direct_copies.load(), 0);
  if (c.device_to_device && !c.direct) EXPECT_GT(stats->event_waits.load(), 0);
  if (!c.direct) EXPECT_EQ(stats->direct_copies.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    GoldenPlacement, AsyncCopies,
    ::testing::Values(Config{"ngl0", 0, planner::SplitMode::kLayer, 0, false},
                      Config{"ngl4", 4, planner::SplitMode::kLayer, 0, true},
                      Config{"ngl99", 99, planner::SplitMode::kLayer, 0, true},
                      Config{"ngl99_sm_none_mg1", 99, planner::SplitMode::kNone, 1, false},
                      Config{"ngl4_staged", 4, planner::SplitMode::kLayer, 0, true, false},
                      Config{"ngl99_staged", 99, planner::SplitMode::kLayer, 0, true, false}),
    [](const ::testing::TestParamInfo<Config>& i) { return std::string(i.param.name); });

// A decode whose second ubatch fails (injected compute fault on the GPU-type device) leaves n_past
// where it was, and the session continues exactly as if the failed call had not happened.
TEST(AsyncCopiesFault, FailedDecodeKeepsNPast) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  const Config c{"ngl4", 4, planner::SplitMode::kLayer, 0, true};
  auto plan = Plan(model, c, false, 4);  // n_ubatch 4: an 8-token batch is two ubatches
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto ref_plan = Plan(model, Config{"cpu", 0, planner::SplitMode::kLayer, 0, false}, true, 4);
  ASSERT_TRUE(ref_plan.ok()) << ref_plan.status().ToString();
  auto stats = std::make_shared<test::AsyncStats>();
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto s = Session::CreateFromPlanBytes(*plan, model, opts);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  SessionOptions cpu_opts;
  cpu_opts.n_threads = 1;
  auto ref = Session::CreateFromPlanBytes(*ref_plan, model, cpu_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();

  std::vector<float> a, b;
  const std::vector<int32_t> head = {1, 403};
  ASSERT_TRUE((*s)->Decode(head, false, &a).ok());
  const int per_ubatch = stats->computes.load();  // device nodes of one pp ubatch
  ASSERT_GT(per_ubatch, 1);
  ASSERT_EQ((*s)->n_past(), 2);
  // Fail in the middle of the second ubatch of the next call.
  stats->fail_compute_after = stats->computes.load() + per_ubatch + per_ubatch / 2;
  const std::vector<int32_t> tail = {407, 261, 378, 300, 42, 7, 99, 12};
  Status st = (*s)->Decode(tail, true, &a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("injected fault"), std::string::npos) << st.ToString();
  EXPECT_EQ(stats->computes.load(), stats->fail_compute_after.load() + 1) << "failed in the second ubatch";
  EXPECT_EQ((*s)->n_past(), 2) << "a failed decode must not advance n_past";

  // Retried without the fault: the same logits as a CPU-only session that never failed.
  stats->fail_compute_after = -1;
  st = (*s)->Decode(tail, true, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ((*s)->n_past(), 10);
  ASSERT_TRUE((*ref)->Decode(head, false, &b).ok());
  ASSERT_TRUE((*ref)->Decode(tail, true, &b).ok());
  EXPECT_LE(MaxDiff(a, b), 0.03f);
}

// The plan's Buffer.tensor_split (-ts for row-split buffer types) reaches the buffer before any
// upload; bad proportions are refused with the buffer's name.
TEST(TensorSplit, PlanProportionsReachTheBuffer) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  auto plan = Plan(model, Config{"ngl99", 99, planner::SplitMode::kLayer, 0, true}, false, 512);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto edit = [&](const std::vector<float>& ts) {
    std::unique_ptr<::accel::plan::PlanT> p = ::accel::plan::UnPackPlan(plan->data());
    for (auto& b : p->buffers)
      if (b->usage == ::accel::plan::BufferUsage::Weights && !b->mapped &&
          p->devices[b->device]->type == ::accel::plan::DeviceType::GPU)
        b->tensor_split = ts;
    flatbuffers::FlatBufferBuilder fbb;
    ::accel::plan::FinishPlanBuffer(fbb, ::accel::plan::Plan::Pack(fbb, p.get()));
    std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    EXPECT_TRUE(SealPlan(out.data(), out.size()).ok());
    return out;
  };
  auto stats = std::make_shared<test::AsyncStats>();
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto s = Session::CreateFromPlanBytes(edit({3.f, 1.f}), model, opts);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  {
    std::lock_guard<std::mutex> l(stats->mu);
    ASSERT_FALSE(stats->tensor_splits.empty());
    for (const auto& ts : stats->tensor_splits) EXPECT_EQ(ts, (std::vector<float>{3.f, 1.f}));
  }
  auto bad = Session::CreateFromPlanBytes(edit({1.f, -2.f}), model, opts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor_split"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("-2"), std::string::npos) << bad.status().ToString();
}

// Pipeline parallelism (n_copies = 4): the golden placement machine with both GPU-type devices
// given caps async and events (as CUDA devices have) and -ngl 99 is the case where llama.cpp enables
// it (llama_init_from_model, FEB25). The plan then holds 4 instances of every graph input and split
// input, and its nodes read copy 0. The runtime executes such a plan without any change (it runs
// every graph on copy 0, which is correct: rotating ggml's cur_copy only lets graph computes
// overlap), with the same logits as the CPU-only plan, and allocates exactly the larger buffers.
Result<std::vector<uint8_t>> PlanPipelineParallel(const std::string& model, int ngl, bool async_events,
                                                  int* n_copies) {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model));
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs m, planner::BuildModelGraphs(*gguf, cfg));
  std::vector<planner::DeviceManifest> machine;
  for (const char* f : {"rpc0.json", "rpc1.json"}) {
    STOWAGE_ASSIGN_OR_RETURN(auto d, planner::LoadManifestFile(std::string(kManifestDir) + "/" + f));
    d.caps.async = d.caps.events = async_events;
    machine.push_back(std::move(d));
  }
  STOWAGE_ASSIGN_OR_RETURN(auto cpu,
                           planner::LoadManifestFile(std::string(kManifestDir) + "/llamacpp-cpu.json"));
  machine.push_back(std::move(cpu));
  planner::PlacementOptions opt;
  opt.n_gpu_layers = ngl;
  STOWAGE_ASSIGN_OR_RETURN(auto outcome, planner::PlaceModel(m, machine, opt));
  *n_copies = outcome.placement.n_copies;
  return planner::SerializePlan(*gguf, m, outcome.placement, outcome.memory, "pipeline");
}

uint64_t ComputeBytes(const std::vector<uint8_t>& plan) {
  std::unique_ptr<::accel::plan::PlanT> p = ::accel::plan::UnPackPlan(plan.data());
  uint64_t s = 0;
  for (const auto& b : p->buffers)
    if (b->usage == ::accel::plan::BufferUsage::Compute) s += b->size;
  return s;
}

TEST(PipelineParallel, FourCopiesSameLogitsAsCpuOnly) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  int n_copies = 0, n_copies_off = 0;
  auto plan = PlanPipelineParallel(model, 99, true, &n_copies);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(n_copies, 4);
  // Without the caps the same placement has one copy and smaller compute buffers.
  auto plan1 = PlanPipelineParallel(model, 99, false, &n_copies_off);
  ASSERT_TRUE(plan1.ok()) << plan1.status().ToString();
  ASSERT_EQ(n_copies_off, 1);
  EXPECT_GT(ComputeBytes(*plan), ComputeBytes(*plan1));
  {
    std::unique_ptr<::accel::plan::PlanT> p = ::accel::plan::UnPackPlan(plan->data());
    EXPECT_EQ(p->n_copies, 4u);
    size_t with_copies = 0;
    for (const auto& g : p->graphs) {
      EXPECT_FALSE(g->input_copies.empty()) << g->name;
      for (const auto& sp : g->splits)
        for (const auto& in : sp->inputs) {
          ASSERT_EQ(in->copies.size(), 4u);
          EXPECT_EQ(in->copies[0], in->copy);
          ++with_copies;
        }
    }
    EXPECT_GT(with_copies, 0u);
  }
  auto ref_plan = Plan(model, Config{"cpu", 0, planner::SplitMode::kLayer, 0, false}, true, 512);
  ASSERT_TRUE(ref_plan.ok()) << ref_plan.status().ToString();
  auto stats = std::make_shared<test::AsyncStats>();
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto multi = Session::CreateFromPlanBytes(*plan, model, opts);
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  for (const auto& b : (*multi)->Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;
  SessionOptions cpu_opts;
  cpu_opts.n_threads = 1;
  auto ref = Session::CreateFromPlanBytes(*ref_plan, model, cpu_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300, 42, 7};
  std::vector<float> a, b;
  ASSERT_TRUE((*multi)->Decode(prompt, true, &a).ok());
  ASSERT_TRUE((*ref)->Decode(prompt, true, &b).ok());
  for (int step = 0; step < 4; ++step) {  // several graph computes: ggml would rotate cur_copy here
    EXPECT_LE(MaxDiff(a, b), 0.03f) << "step " << step;
    const int32_t next = static_cast<int32_t>(std::max_element(b.end() - (*ref)->n_vocab(), b.end()) -
                                              (b.end() - (*ref)->n_vocab()));
    Status st = (*multi)->Decode({next}, false, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE((*ref)->Decode({next}, false, &b).ok());
  }
  EXPECT_GT(stats->computes.load(), 0);
  EXPECT_GT(stats->direct_copies.load(), 0);  // CUDA0-side layers -> CUDA1-side layers
}

// -nkvo (KV cache on the host) with offloaded layers: the CPU split of every offloaded
// layer's attention copies views of device results as split inputs ("Vcur-N (transposed)", a
// TRANSPOSE whose dim 0 is strided, and "q-N", a PERMUTE), which ggml places at their consumer, after
// the split's start. The session must count them as defined through the tensor that owns their
// memory (computed by an earlier split) and copy them through the view (the staging of a strided
// view out of private memory spans (ne0-1)*nb0 + type_size bytes of dim 0). Before the fix: "split
// input 'Vcur-4 (transposed)' is copied before it is computed", then NaN logits. n_copies 1 (the
// RPC manifests have no async/events caps); pp (8 tokens, all logits) and tg (4 steps) against the
// CPU-only plan, with device -> device copies direct and staged.
Result<std::vector<uint8_t>> PlanNoKvOffload(const std::string& model, int ngl, int* n_copies) {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model));
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs m, planner::BuildModelGraphs(*gguf, cfg));
  std::vector<planner::DeviceManifest> machine;
  for (const char* f : {"rpc0.json", "rpc1.json", "llamacpp-cpu.json"}) {
    STOWAGE_ASSIGN_OR_RETURN(auto d, planner::LoadManifestFile(std::string(kManifestDir) + "/" + f));
    machine.push_back(std::move(d));
  }
  planner::PlacementOptions opt;
  opt.n_gpu_layers = ngl;
  opt.offload_kqv = false;  // -nkvo
  STOWAGE_ASSIGN_OR_RETURN(auto outcome, planner::PlaceModel(m, machine, opt));
  *n_copies = outcome.placement.n_copies;
  return planner::SerializePlan(*gguf, m, outcome.placement, outcome.memory, "nkvo");
}

struct NkvoCase {
  const char* name;
  int ngl;
  bool direct;  // device -> device copies by CopyFromAsync (else staged through the host)
};

class AsyncNoKvOffload : public ::testing::TestWithParam<NkvoCase> {};

TEST_P(AsyncNoKvOffload, SameLogitsAsCpuOnly) {
  const NkvoCase c = GetParam();
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  int n_copies = 0;
  auto plan = PlanNoKvOffload(model, c.ngl, &n_copies);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(n_copies, 1);
  // The plan has what this test is about: in both graphs, split inputs that are TRANSPOSE and
  // PERMUTE views of tensors computed on a GPU-type backend, copied into a CPU split.
  {
    std::unique_ptr<::accel::plan::PlanT> p = ::accel::plan::UnPackPlan(plan->data());
    ASSERT_EQ(p->graphs.size(), 2u);
    for (const auto& g : p->graphs) {
      int transposed = 0, permuted = 0;
      for (const auto& sp : g->splits)
        for (const auto& in : sp->inputs) {
          const auto& t = *g->tensors[in->tensor];
          const GgmlOp op = static_cast<GgmlOp>(t.op);
          if (op != GgmlOp::TRANSPOSE && op != GgmlOp::PERMUTE) continue;
          ASSERT_FALSE(t.srcs.empty()) << t.name;
          EXPECT_NE(g->tensors[t.srcs[0]]->backend, sp->backend)
              << t.name << ": a view of another backend's result";
          (op == GgmlOp::TRANSPOSE ? transposed : permuted)++;
        }
      EXPECT_GT(transposed, 0) << g->name;
      EXPECT_GT(permuted, 0) << g->name;
    }
  }
  auto ref_plan = Plan(model, Config{"cpu", 0, planner::SplitMode::kLayer, 0, false}, true, 512);
  ASSERT_TRUE(ref_plan.ok()) << ref_plan.status().ToString();
  auto stats = std::make_shared<test::AsyncStats>();
  stats->allow_direct = c.direct;
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto multi = Session::CreateFromPlanBytes(*plan, model, opts);
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  for (const auto& b : (*multi)->Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;
  SessionOptions cpu_opts;
  cpu_opts.n_threads = 1;
  auto ref = Session::CreateFromPlanBytes(*ref_plan, model, cpu_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300, 42, 7};
  std::vector<float> a, b;
  Status st = (*multi)->Decode(prompt, true, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*ref)->Decode(prompt, true, &b).ok());
  EXPECT_LE(MaxDiff(a, b), 0.03f) << "pp (8 tokens, all logits)";
  for (int step = 0; step < 4; ++step) {
    const int32_t next = static_cast<int32_t>(std::max_element(b.end() - (*ref)->n_vocab(), b.end()) -
                                              (b.end() - (*ref)->n_vocab()));
    st = (*multi)->Decode({next}, false, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE((*ref)->Decode({next}, false, &b).ok());
    EXPECT_LE(MaxDiff(a, b), 0.03f) << "tg step " << step;
  }
  EXPECT_EQ((*multi)->n_past(), 12);
  EXPECT_GT(stats->computes.load(), 0);
  EXPECT_GT(stats->read_async.load() + stats->host_waits.load(), 0);  // device results reached the CPU splits
  if (!c.direct) EXPECT_EQ(stats->direct_copies.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Nkvo, AsyncNoKvOffload,
                         ::testing::Values(NkvoCase{"ngl4", 4, true}, NkvoCase{"ngl99", 99, true},
                                           NkvoCase{"ngl4_staged", 4, false},
                                           NkvoCase{"ngl99_staged", 99, false}),
                         [](const ::testing::TestParamInfo<NkvoCase>& i) {
                           return std::string(i.param.name);
                         });

// The verifier checks the pipeline-parallelism fields (COMPATIBILITY.md): n_copies in [1, 4], n_copies
// entries per list, copies[0] the tensor the nodes read, the others of kind SplitCopy.
TEST(PipelineParallel, VerifierRefusesInconsistentCopies) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  int n_copies = 0;
  auto plan = PlanPipelineParallel(model, 99, true, &n_copies);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto edit = [&](const std::function<void(::accel::plan::PlanT&)>& f) {
    std::unique_ptr<::accel::plan::PlanT> p = ::accel::plan::UnPackPlan(plan->data());
    f(*p);
    flatbuffers::FlatBufferBuilder fbb;
    ::accel::plan::FinishPlanBuffer(fbb, ::accel::plan::Plan::Pack(fbb, p.get()));
    std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    EXPECT_TRUE(SealPlan(out.data(), out.size()).ok());
    return PlanFile::FromBytes(std::move(out), "p.plan");
  };
  auto first_input = [](::accel::plan::PlanT& p) -> ::accel::plan::SplitInputT& {
    for (auto& g : p.graphs)
      for (auto& sp : g->splits)
        if (!sp->inputs.empty()) return *sp->inputs[0];
    std::abort();
  };
  ASSERT_TRUE(edit([](::accel::plan::PlanT&) {}).ok());
  auto expect_error = [](const Result<std::unique_ptr<PlanFile>>& r, const std::string& what) {
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  };
  expect_error(edit([](::accel::plan::PlanT& p) { p.n_copies = 5; }), "n_copies: expected 1 to 4");
  expect_error(edit([&](::accel::plan::PlanT& p) { first_input(p).copies.pop_back(); }),
               "expected n_copies = 4 entries, found 3");
  expect_error(
      edit([&](::accel::plan::PlanT& p) { std::swap(first_input(p).copies[0], first_input(p).copies[1]); }),
      "copies[0] must be the tensor the nodes read");
  expect_error(edit([&](::accel::plan::PlanT& p) { first_input(p).copies[2] = first_input(p).tensor; }),
               "has the wrong kind");
  expect_error(edit([](::accel::plan::PlanT& p) { p.n_copies = 1; }),
               "n_copies is 1 but 4 copies are listed");
  expect_error(edit([](::accel::plan::PlanT& p) { p.graphs[0]->input_copies[0]->copies[0] += 1; }),
               "input_copies[0].copies");
}

}  // namespace
}  // namespace stowage
