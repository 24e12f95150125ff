// schedule: the scheduler passes and split inputs on hand-built graphs.
#include "stowage/planner/scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "stowage/planner/graph.h"
#include "stowage/planner/graph_builder.h"
#include "stowage/planner/memory_plan.h"
#include "test_manifests.h"

namespace stowage::planner {
namespace {

using testing::Accel;
using testing::Cpu;
using testing::Gpu;

/// x (input [64, n_tokens]) -> y = w1 x (layer 0) -> z = w2 y (layer 1, output).
struct TwoMatmuls {
  ModelGraphs m;
  DeviceSet ds;
  LayerMap lm;
  Placement p;
  int x = -1, y = -1, z = -1;

  TwoMatmuls(std::vector<DeviceManifest> devs, const std::string& w1_buft, const std::string& w2_buft,
             int64_t tokens) {
    m.hp.n_layer = 1;
    for (int i = 0; i < 2; ++i) {
      GlobalTensor g;
      g.name = "w" + std::to_string(i + 1);
      g.type = GgmlType::F32;
      g.ne[0] = g.ne[1] = 64;
      g.nbytes = 64 * 64 * 4;
      g.layer = i;
      g.consumer_op = stowage::GgmlOp::MUL_MAT;
      m.globals.push_back(g);
    }
    Graph& g = m.pp;
    g.name = "pp";
    g.max_tokens = tokens;
    g.max_kv = 64;
    g.max_outputs = tokens;
    GraphBuilder b(g, m);
    const DimExpr T = DimExpr::Tokens(), C1 = DimExpr::Const(1);
    x = b.Input("x", GgmlType::F32, {DimExpr::Const(64), T, C1, C1});
    y = b.MulMat(b.Global(0), x);
    b.Name(y, "y", 0);
    z = b.MulMat(b.Global(1), y);
    b.Name(z, "z", -1);
    b[z].is_output = true;
    b.Expand(z);
    ds = *MakeDeviceSet(devs, SplitMode::kLayer, 0);
    lm = *AssignLayers(ds, 1, 0, {});
    InitPlacement(ds, /*use_mmap=*/false, &p);
    p.global_buft = {p.FindBuft(w1_buft), p.FindBuft(w2_buft)};
  }
  const Tensor& T(int id) const { return m.pp.tensors[id]; }
  std::string Backend(int id) const { return p.backends[T(id).backend].name; }
};

// A weight in a buffer type that converts it on upload (an ACCEL device's own non-host buft, as
// ONEDNN) read by a node no backend holding that buft can run: the node falls back to the CPU and
// would need a copy of the weight, which would be read as the plain layout — refused by name.
TEST(Scheduler, RefusesToCopyAWeightStoredInAConvertedLayout) {
  auto accel = ParseManifest(
      R"({"manifest_version": 1, "backend": "ONEDNN", "name": "XDNN", "description": "test ACCEL",
    "type": "ACCEL", "memory": {"total": 0, "free": 0},
    "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": false, "events": false},
    "buffer_types": {"default": {"name": "XDNN", "alignment": 64, "is_host": false}},
    "supports_buft": {"any_host": true},
    "op_support": {"default": "unsupported", "rules": [
      {"ops": ["NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"], "supported": true}]}})",
      "xdnn");
  ASSERT_TRUE(accel.ok()) << accel.status().ToString();
  TwoMatmuls t({*accel, Cpu()}, "XDNN", "CPU", 64);
  Status s = ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("reads weight 'w1' in buffer type XDNN, which stores it in a converted layout"),
            std::string::npos)
      << s.message();
}

TEST(Scheduler, NodesFollowWeightsAndInputsAreCopied) {
  TwoMatmuls t({Gpu("G", 100), Cpu()}, "G", "CPU", 64);
  ASSERT_TRUE(ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {}).ok());
  EXPECT_EQ(t.Backend(t.y), "G");
  EXPECT_EQ(t.T(t.y).cause, "1.wgt0");
  EXPECT_EQ(t.Backend(t.z), "CPU");
  EXPECT_EQ(t.Backend(t.x), "CPU");
  EXPECT_EQ(t.T(t.x).cause, "1.inp");
  const Graph& g = t.m.pp;
  ASSERT_EQ(g.splits.size(), 2u);
  ASSERT_EQ(g.splits[0].inputs.size(), 1u);
  EXPECT_EQ(g.splits[0].inputs[0].first, t.x);
  const int xc = g.splits[0].inputs[0].second;
  EXPECT_EQ(g.tensors[xc].name, "G#x#0");
  EXPECT_EQ(g.tensors[xc].kind, TensorKind::kSplitCopy);
  EXPECT_EQ(g.tensors[t.y].srcs[1], xc);  // the consumer reads the copy
  ASSERT_EQ(g.splits[1].inputs.size(), 1u);
  EXPECT_EQ(g.tensors[g.splits[1].inputs[0].second].name, "CPU#y-0#0");
  EXPECT_EQ(GraphNodeCount(g), 2);
  EXPECT_EQ(FormatSchedDebug(g, t.p, 1),
            "\n## SPLIT #0: G # 1 inputs: [x (  16K)] \n\n## SPLIT #1: CPU # 1 inputs: [y-0 (  16K)] \n");
}

// The one GGML_SCHED_DEBUG split-header formatter (FormatSchedDebug and stowage-opt
// --place-print-splits): ggml's fmt_size, sizes right-aligned in 5 and cut to 5, no ": " without
// inputs, a trailing space after each input.
TEST(Scheduler, SchedDebugSplitHeaderAsGgmlPrintsIt) {
  EXPECT_EQ(FormatGgmlSize(0), "0K");
  EXPECT_EQ(FormatGgmlSize(1024 * 1024 - 1), "1023K");
  EXPECT_EQ(FormatGgmlSize(1024 * 1024), "1M");
  EXPECT_EQ(FormatGgmlSize(uint64_t(123456) << 20), "123456M");
  EXPECT_EQ(FormatSchedSplitHeader(0, "CPU", {}), "\n## SPLIT #0: CPU # 0 inputs\n");
  EXPECT_EQ(FormatSchedSplitHeader(12, "RPC[127.0.0.1:50052]",
                                   {{"inp_embd", "256K"}, {"x", "?"}, {"y", "123456M"}}),
            "\n## SPLIT #12: RPC[127.0.0.1:50052] # 3 inputs: [inp_embd ( 256K)] [x (    ?)] [y (12345)] \n");
}

TEST(Scheduler, OpOffloadMovesLargeBatchesOfHostWeightsAndStartsANewSplit) {
  for (bool op_offload : {true, false}) {
    TwoMatmuls t({Gpu("G", 100, "CUDA", false, false, /*offload=*/true), Cpu()}, "G", "CPU", 64);
    SchedulerOptions o;
    o.op_offload = op_offload;
    ASSERT_TRUE(ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, o).ok());
    EXPECT_EQ(t.Backend(t.z), op_offload ? "G" : "CPU");
    const Graph& g = t.m.pp;
    ASSERT_EQ(g.splits.size(), 2u);
    if (op_offload) {
      EXPECT_EQ(t.T(t.z).cause, "1.off");
      // A weight the split backend cannot read arrives in a split that has inputs: new split.
      EXPECT_EQ(g.splits[1].backend, 0);
      ASSERT_EQ(g.splits[1].inputs.size(), 1u);
      EXPECT_EQ(g.tensors[g.splits[1].inputs[0].second].name, "G#w2#0");
    }
  }
  // Below the offload batch (32) the weight decides.
  TwoMatmuls small({Gpu("G", 100, "CUDA", false, false, true), Cpu()}, "G", "CPU", 16);
  ASSERT_TRUE(ScheduleGraph(small.m.pp, small.m, small.ds, small.lm, &small.p, {}).ok());
  EXPECT_EQ(small.Backend(small.z), "CPU");
}

TEST(Scheduler, AccelSharingTheCpuBuftTakesLargeBatchesOnly) {
  for (int64_t tokens : {64, 16}) {
    TwoMatmuls t({Accel(), Cpu(false)}, "CPU", "CPU", tokens);
    ASSERT_TRUE(ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {}).ok());
    const std::string want = tokens >= 32 ? "BLAS" : "CPU";
    EXPECT_EQ(t.Backend(t.y), want) << tokens;
    EXPECT_EQ(t.Backend(t.z), want) << tokens;
    // Same buffer type: nothing is copied.
    for (const Split& s : t.m.pp.splits) EXPECT_TRUE(s.inputs.empty());
  }
}

TEST(Scheduler, PreallocatedTensorNoBackendCanRunIsAnError) {
  // w1 lives in G's buffer but G (and the CPU) refuse everything but views: a GPU whose only rule
  // is "unsupported".
  DeviceManifest g = Gpu("G", 100);
  g.op_support.default_supported = false;
  TwoMatmuls t({g, Cpu()}, "G", "CPU", 64);
  Status s = ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "pre-allocated tensor (w1) in a buffer (G) that cannot run the operation (NONE)");
}

}  // namespace
}  // namespace stowage::planner

namespace stowage::planner {
namespace {

TEST(Scheduler, RefusesAGraphThatIsAlreadyScheduled) {
  TwoMatmuls t({testing::Gpu("G", 100), testing::Cpu()}, "G", "CPU", 64);
  ASSERT_TRUE(ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {}).ok());
  Status again = ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
}

// Pipeline parallelism (llama_init_from_model FEB25, reference §2.7): n_copies = 4 only with more
// than one model device, ngl > n_layer, -sm layer, KV offload, and caps async + events on every
// non-CPU device; each failing condition alone turns it off.
DeviceManifest AsyncGpu(const std::string& name, bool async = true, bool events = true) {
  DeviceManifest d = testing::Gpu(name, 100, "CUDA", /*host=*/true, /*split=*/true);
  d.caps.async = async;
  d.caps.events = events;
  return d;
}

TEST(PipelineParallelism, LlamaCppRule) {
  auto decide = [](std::vector<DeviceManifest> devs, int ngl, SplitMode sm = SplitMode::kLayer,
                   bool kqv = true, bool overrides = false) {
    auto ds = MakeDeviceSet(devs, sm, 0);
    EXPECT_TRUE(ds.ok()) << ds.status().ToString();
    return PipelineParallelism(*ds, /*n_layer=*/8, ngl, sm, kqv, overrides);
  };
  const auto two = [] { return std::vector<DeviceManifest>{AsyncGpu("G0"), AsyncGpu("G1"), testing::Cpu()}; };
  PipelineDecision on = decide(two(), 99);
  EXPECT_EQ(on.n_copies, 4) << on.reason;
  EXPECT_EQ(decide(two(), 9).n_copies, 4);  // n_layer + 1: the output layer is offloaded
  PipelineDecision d = decide(two(), 8);    // output layer on the CPU
  EXPECT_EQ(d.n_copies, 1);
  EXPECT_NE(d.reason.find("n_gpu_layers 8 <= n_layer 8"), std::string::npos) << d.reason;
  EXPECT_EQ(decide(two(), 99, SplitMode::kRow).n_copies, 1);
  EXPECT_EQ(decide(two(), 99, SplitMode::kNone).n_copies, 1);  // -sm none keeps one model device
  EXPECT_EQ(decide(two(), 99, SplitMode::kLayer, /*kqv=*/false).n_copies, 1);
  d = decide(two(), 99, SplitMode::kLayer, true, /*overrides=*/true);  // -ot / --cpu-moe
  EXPECT_EQ(d.n_copies, 1);
  EXPECT_NE(d.reason.find("tensor buffer type overrides"), std::string::npos) << d.reason;
  EXPECT_EQ(decide({AsyncGpu("G0"), testing::Cpu()}, 99).n_copies, 1);
  d = decide({AsyncGpu("G0"), AsyncGpu("G1", true, false), testing::Cpu()}, 99);
  EXPECT_EQ(d.n_copies, 1);
  EXPECT_EQ(d.reason, "device G1 lacks caps events");
  EXPECT_EQ(decide({AsyncGpu("G0", false, true), AsyncGpu("G1"), testing::Cpu()}, 99).n_copies, 1);
  // An ACCEL backend (BLAS: no async, no events) counts; the CPU (no caps either) does not.
  d = decide({AsyncGpu("G0"), AsyncGpu("G1"), testing::Accel(), testing::Cpu()}, 99);
  EXPECT_EQ(d.n_copies, 1);
  EXPECT_EQ(d.reason, "device BLAS lacks caps async and events");
  ExplainEntry e = PipelineExplain(on);
  EXPECT_EQ(e.graph, "sched");
  EXPECT_EQ(e.buft, "4");
  EXPECT_EQ(e.rule.rfind("pipeline parallelism enabled (n_copies=4): ", 0), 0u) << e.rule;
}

// n_copies = 4 on TwoMatmuls (x on the CPU -> y = w1 x on G -> z = w2 y on the CPU): the graph input
// x gets copies 1..3 on the CPU ("CPU#x#c"), each split input 4 copies on the split's backend
// ("G#x#c", "CPU#y-0#c"); the nodes read copy 0; the memory plan allocates every copy first and
// never frees it, so the compute buffers hold them all.
TEST(PipelineParallelism, CopiesAndComputeBuffers) {
  auto run = [](int n_copies, TwoMatmuls& t, MemoryPlan* mem) {
    SchedulerOptions so;
    so.n_copies = n_copies;
    ASSERT_TRUE(ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, so).ok());
    t.m.tg.name = "tg";
    ASSERT_TRUE(PlanMemory(t.m, t.p, mem).ok());
  };
  auto compute = [](const TwoMatmuls& t, const MemoryPlan& mem, const std::string& name) -> uint64_t {
    for (const auto& b : mem.buffers)
      if (b.usage == BufferUsage::kCompute && b.name == name) return b.size;
    ADD_FAILURE() << "no compute buffer " << name;
    return 0;
  };
  TwoMatmuls one({Gpu("G", 100), Cpu()}, "G", "CPU", 64);
  MemoryPlan mem1;
  run(1, one, &mem1);
  EXPECT_EQ(one.p.n_copies, 1);
  EXPECT_EQ(one.p.FindCopies("pp"), nullptr);
  TwoMatmuls t({Gpu("G", 100), Cpu()}, "G", "CPU", 64);
  MemoryPlan mem4;
  run(4, t, &mem4);
  const Graph& g = t.m.pp;
  EXPECT_EQ(t.p.n_copies, 4);
  const GraphCopies* gc = t.p.FindCopies("pp");
  ASSERT_NE(gc, nullptr);
  ASSERT_EQ(gc->inputs.size(), 1u);
  EXPECT_EQ(gc->inputs[0].tensor, t.x);
  ASSERT_EQ(gc->inputs[0].copies.size(), 4u);
  EXPECT_EQ(gc->inputs[0].copies[0], t.x);
  for (int c = 1; c < 4; ++c) {
    const Tensor& x = g.tensors[gc->inputs[0].copies[c]];
    EXPECT_EQ(x.name, "CPU#x#" + std::to_string(c));
    EXPECT_EQ(x.kind, TensorKind::kSplitCopy);
    EXPECT_EQ(t.p.backends[x.backend].name, "CPU");
  }
  ASSERT_EQ(g.splits.size(), 2u);
  ASSERT_EQ(gc->splits.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_EQ(gc->splits[s].size(), 1u);
    const TensorCopies& tc = gc->splits[s][0];
    EXPECT_EQ(tc.tensor, g.splits[s].inputs[0].first);
    ASSERT_EQ(tc.copies.size(), 4u);
    EXPECT_EQ(tc.copies[0], g.splits[s].inputs[0].second);
    const std::string prefix = s == 0 ? "G#x#" : "CPU#y-0#";
    for (int c = 0; c < 4; ++c) EXPECT_EQ(g.tensors[tc.copies[c]].name, prefix + std::to_string(c));
  }
  EXPECT_EQ(g.tensors[t.y].srcs[1], gc->splits[0][0].copies[0]);  // nodes read copy 0
  // Sizes by hand: x, its copies, y and z are [64, 64] F32 = 16384 bytes (alignment 32).
  // n_copies 1: G holds G#x#0 and y (32768); on the CPU x is freed when split 0 starts (its copy
  // was its last reader: ggml's input_dep node), CPU#y-0#0 reuses its bytes, then z (32768).
  EXPECT_EQ(compute(one, mem1, "G"), 32768u);
  EXPECT_EQ(compute(one, mem1, "CPU"), 32768u);
  EXPECT_EQ(one.m.pp.tensors[one.m.pp.splits[1].inputs[0].second].offset, one.T(one.x).offset);
  // n_copies 4: G holds G#x#0..3 and y (5 * 16384); the CPU x and CPU#x#1..3, CPU#y-0#0..3 and
  // z (9 * 16384).
  EXPECT_EQ(compute(t, mem4, "G"), 5u * 16384);
  EXPECT_EQ(compute(t, mem4, "CPU"), 9u * 16384);
  // Every copy has its own bytes: the four instances of x are at distinct offsets of the same buffer.
  std::set<uint64_t> offsets;
  for (int c : gc->inputs[0].copies) {
    EXPECT_EQ(g.tensors[c].buffer, g.tensors[t.x].buffer);
    offsets.insert(g.tensors[c].offset);
  }
  EXPECT_EQ(offsets.size(), 4u);
}

TEST(PipelineParallelism, RefusesMoreThanFourCopies) {
  TwoMatmuls t({Gpu("G", 100), Cpu()}, "G", "CPU", 64);
  SchedulerOptions so;
  so.n_copies = 5;
  Status s = ScheduleGraph(t.m.pp, t.m, t.ds, t.lm, &t.p, so);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_copies 5"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace stowage::planner
