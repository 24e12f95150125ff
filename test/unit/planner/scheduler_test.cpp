// schedule: the scheduler passes and split inputs on hand-built graphs.
#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "stowage/planner/graph_builder.h"
#include "stowage/planner/scheduler.h"
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

  TwoMatmuls(std::vector<DeviceManifest> devs, const std::string& w1_buft, const std::string& w2_buft, int64_t tokens) {
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
    Graph& g = m.prefill;
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
  const Tensor& T(int id) const { return m.prefill.tensors[id]; }
  std::string Backend(int id) const { return p.backends[T(id).backend].name; }
};

TEST(Scheduler, NodesFollowWeightsAndInputsAreCopied) {
  TwoMatmuls t({Gpu("G", 100), Cpu()}, "G", "CPU", 64);
  ASSERT_TRUE(ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, {}).ok());
  EXPECT_EQ(t.Backend(t.y), "G");
  EXPECT_EQ(t.T(t.y).cause, "1.wgt0");
  EXPECT_EQ(t.Backend(t.z), "CPU");
  EXPECT_EQ(t.Backend(t.x), "CPU");
  EXPECT_EQ(t.T(t.x).cause, "1.inp");
  const Graph& g = t.m.prefill;
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

TEST(Scheduler, OpOffloadMovesLargeBatchesOfHostWeightsAndStartsANewSplit) {
  for (bool op_offload : {true, false}) {
    TwoMatmuls t({Gpu("G", 100, "CUDA", false, false, /*offload=*/true), Cpu()}, "G", "CPU", 64);
    SchedulerOptions o;
    o.op_offload = op_offload;
    ASSERT_TRUE(ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, o).ok());
    EXPECT_EQ(t.Backend(t.z), op_offload ? "G" : "CPU");
    const Graph& g = t.m.prefill;
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
  ASSERT_TRUE(ScheduleGraph(small.m.prefill, small.m, small.ds, small.lm, &small.p, {}).ok());
  EXPECT_EQ(small.Backend(small.z), "CPU");
}

TEST(Scheduler, AccelSharingTheCpuBuftTakesLargeBatchesOnly) {
  for (int64_t tokens : {64, 16}) {
    TwoMatmuls t({Accel(), Cpu(false)}, "CPU", "CPU", tokens);
    ASSERT_TRUE(ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, {}).ok());
    const std::string want = tokens >= 32 ? "BLAS" : "CPU";
    EXPECT_EQ(t.Backend(t.y), want) << tokens;
    EXPECT_EQ(t.Backend(t.z), want) << tokens;
    // Same buffer type: nothing is copied.
    for (const Split& s : t.m.prefill.splits) EXPECT_TRUE(s.inputs.empty());
  }
}

TEST(Scheduler, PreallocatedTensorNoBackendCanRunIsAnError) {
  // w1 lives in G's buffer but G (and the CPU) refuse everything but views: a GPU whose only rule
  // is "unsupported".
  DeviceManifest g = Gpu("G", 100);
  g.op_support.default_supported = false;
  TwoMatmuls t({g, Cpu()}, "G", "CPU", 64);
  Status s = ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "pre-allocated tensor (w1) in a buffer (G) that cannot run the operation (NONE)");
}

}  // namespace
}  // namespace stowage::planner

namespace stowage::planner {
namespace {

TEST(Scheduler, RefusesAGraphThatIsAlreadyScheduled) {
  TwoMatmuls t({testing::Gpu("G", 100), testing::Cpu()}, "G", "CPU", 64);
  ASSERT_TRUE(ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, {}).ok());
  Status again = ScheduleGraph(t.m.prefill, t.m, t.ds, t.lm, &t.p, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stowage::planner
