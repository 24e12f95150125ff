// memory_plan: PlanMemory on a small hand-written graph on one CPU device. Every expected offset
// and size is worked out by hand in the comments from the rules PlanMemory implements
// (memory_plan.h; llama.cpp ggml-alloc's ggml_gallocr_alloc_graph_impl, simplified):
// - inputs (leafs that are not weights or KV) are allocated before any node;
// - each node is allocated when it is reached, best fit among the free blocks (the smallest block
//   that fits, the lowest offset among equals), else at the end of the arena (taking over a free
//   block that ends there); every size is rounded up to the buft alignment (32 here);
// - after a node is allocated, each of its sources whose last use is this node is freed and merged
//   with free neighbours; graph outputs are never freed;
// - an in-place op (ADD, SCALE, SILU, ...) takes over its first source's memory when that source is
//   an intermediate of the same type and shape, not an output, and this node is its last use;
// - views own no memory: a read through a view keeps the viewed tensor alive.
#include "stowage/planner/memory_plan.h"

#include <gtest/gtest.h>

#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"

namespace stowage::planner {
namespace {

/// An F32 vector of n elements (n * 4 bytes).
Tensor Vec(const std::string& name, TensorKind kind, int64_t n, GgmlOp op, std::vector<int> srcs) {
  Tensor t;
  t.name = name;
  t.kind = kind;
  t.type = GgmlType::F32;
  t.ne[0] = DimExpr::Const(n);
  t.op = op;
  t.srcs = std::move(srcs);
  t.backend = 0;
  return t;
}

/// One CPU device, its default host buft (alignment 32) and its backend.
Placement OneCpu() {
  Placement p;
  PlacedDevice cpu;
  cpu.name = "CPU";
  cpu.type = DeviceKind::kCpu;
  cpu.buffer_from_host_ptr = true;
  p.devices.push_back(cpu);
  PlacedBuft buft;
  buft.name = "CPU";
  buft.device = 0;
  buft.is_host = true;
  buft.is_default = true;
  buft.alignment = 32;
  p.bufts.push_back(buft);
  PlacedBackend be;
  be.name = "CPU";
  be.device = 0;
  be.compute_buft = 0;
  p.backends.push_back(be);
  return p;
}

/// A model of one 32-byte MUL_MAT weight "w" (global 0), n_vocab 8; llama.cpp 2026's graphs (ggml-alloc's
/// exact rules) when `llama2026`.
ModelGraphs OneWeightModel(bool llama2026) {
  ModelGraphs m;
  m.hp.n_vocab = 8;
  m.llama2026 = llama2026;
  GlobalTensor wg;
  wg.name = "w";
  wg.nbytes = 32;
  wg.consumer_op = GgmlOp::MUL_MAT;
  m.globals.push_back(wg);
  return m;
}

TEST(MemoryPlan, HandWrittenGraphOnOneCpu) {
  ModelGraphs m;
  m.hp.n_vocab = 8;
  m.cfg.n_seq_max = 1;
  GlobalTensor wg;
  wg.name = "w";
  wg.type = GgmlType::F32;
  wg.ne[0] = 10;
  wg.nbytes = 40;
  wg.consumer_op = GgmlOp::MUL_MAT;
  m.globals.push_back(wg);

  // The "pp" graph (shapes are constants, so the worst case is the only case):
  //   id  tensor                         bytes  aligned  last read by node
  //   0   w   weight (leaf)                40      -      (not in the arena)
  //   1   inp input (leaf)                 40      64     a
  //   2   a = MUL_MAT(w, inp)              64      64     c            (fork: read by b and c)
  //   3   b = SILU(a)                      64      64     d
  //   4   c = MUL_MAT(w, a)                96      96     d (through v)
  //   5   v = VIEW(c)                       -      -      d            (a view of c)
  //   6   d = ADD(b, v)                    64      64     e            (join)
  //   7   e = MUL_MAT(w, d), output        80      96     f
  //   8   f = SCALE(e), output             80      96     -
  Graph& g = m.pp;
  g.name = "pp";
  Tensor w = Vec("w", TensorKind::kWeight, 10, GgmlOp::NONE, {});
  w.global = 0;
  g.tensors.push_back(w);
  g.tensors.push_back(Vec("inp", TensorKind::kInput, 10, GgmlOp::NONE, {}));
  g.tensors.push_back(Vec("a", TensorKind::kIntermediate, 16, GgmlOp::MUL_MAT, {0, 1}));
  g.tensors.push_back(Vec("b", TensorKind::kIntermediate, 16, GgmlOp::SILU, {2}));
  g.tensors.push_back(Vec("c", TensorKind::kIntermediate, 24, GgmlOp::MUL_MAT, {0, 2}));
  Tensor v = Vec("v", TensorKind::kIntermediate, 16, GgmlOp::VIEW, {4});
  v.view_src = 4;
  g.tensors.push_back(v);
  g.tensors.push_back(Vec("d", TensorKind::kIntermediate, 16, GgmlOp::ADD, {3, 5}));
  Tensor e = Vec("e", TensorKind::kIntermediate, 20, GgmlOp::MUL_MAT, {0, 6});
  e.is_output = true;
  g.tensors.push_back(e);
  Tensor f = Vec("f", TensorKind::kIntermediate, 20, GgmlOp::SCALE, {7});
  f.is_output = true;
  g.tensors.push_back(f);
  g.leafs = {0, 1};
  g.nodes = {2, 3, 4, 5, 6, 7, 8};
  m.tg.name = "tg";  // empty: adds nothing to the arena

  Placement p = OneCpu();
  p.global_buft = {0};
  p.use_mmap = false;  // weights are copied into a "CPU" buffer instead of mapped

  MemoryPlan plan;
  ASSERT_TRUE(PlanMemory(m, p, &plan).ok());

  // Buffers: weights, then KV (none: zero-size buffers are not created), compute, output.
  ASSERT_EQ(plan.buffers.size(), 3u);
  // Weights: w at 0, padded to 32: 40 -> 64 bytes.
  EXPECT_EQ(plan.buffers[0].usage, BufferUsage::kWeights);
  EXPECT_EQ(plan.buffers[0].name, "CPU");
  EXPECT_FALSE(plan.buffers[0].mapped);
  EXPECT_EQ(plan.buffers[0].size, 64u);
  EXPECT_EQ(m.globals[0].buffer, 0);
  EXPECT_EQ(m.globals[0].offset, 0u);
  // Output: n_vocab * max(1, n_seq_max) * 4 = 8 * 1 * 4 = 32 bytes in the CPU buft.
  EXPECT_EQ(plan.buffers[2].usage, BufferUsage::kOutput);
  EXPECT_EQ(plan.buffers[2].size, 32u);

  // Compute arena, step by step (free blocks as {offset: size}, top = end of the arena):
  //   leafs:  inp  -> grows at 0, size 64.                       top 64,  free {}
  //   node a  -> no free block, grows at 64.                     top 128
  //           inp's last use is a: free it.                      free {0:64}
  //   node b  SILU(a): a is still read by c, so not in place;
  //           64 bytes, best fit {0:64} -> offset 0.             free {}
  //   node c  96 bytes, no free block, grows at 128.             top 224
  //           a's last use is c: free it.                        free {64:64}
  //   node v  a view: no memory; keeps c alive until d.
  //   node d  ADD(b, v): b is an intermediate of the same type and shape, read last here, not an
  //           output: in place, d takes b's offset 0.
  //           c (the owner of v) is last read here: free it, merged with {64:64}.
  //                                                              free {64:160}
  //   node e  96 bytes, best fit {64:160} -> offset 64.          free {160:64}
  //           d's last use is e: free {0:64} (not adjacent to 160).
  //                                                              free {0:64}, {160:64}
  //   node f  SCALE(e): e is an output, so not in place; 96 bytes fit in no free block; grows,
  //           taking over {160:64} which ends at top 224: offset 160. top 256
  //           e is an output: never freed.
  //   arena peak = 256.
  const PlannedBuffer& compute = plan.buffers[1];
  EXPECT_EQ(compute.usage, BufferUsage::kCompute);
  EXPECT_EQ(compute.name, "CPU");
  EXPECT_EQ(compute.alignment, 32u);
  EXPECT_EQ(compute.size, 256u);
  struct Expect {
    const char* name;
    uint64_t offset;
  };
  for (const Expect& x : {Expect{"inp", 0}, Expect{"a", 64}, Expect{"b", 0}, Expect{"c", 128}, Expect{"d", 0},
                          Expect{"e", 64}, Expect{"f", 160}}) {
    const Tensor& t = g.tensors[g.Find(x.name)];
    EXPECT_EQ(t.buffer, 1) << x.name;
    EXPECT_EQ(t.offset, x.offset) << x.name;
  }
  // The view and the weight get no arena memory.
  EXPECT_EQ(g.tensors[5].buffer, -1);
  EXPECT_EQ(g.tensors[0].buffer, -1);
}

// llama.cpp 2026's unread inp_embd input (Graph::unread_embd_ne0): F32 [ne0, max_tokens] allocated
// right after inp_tokens and never freed. Graph: inp_tokens (input, 8 floats = 32 bytes), a =
// SILU(inp_tokens) (32 bytes), b = ADD(c, a) with c an input of 32 floats (128 bytes).
//   without: inp_tokens 0, c 32..160; a grows at 160 (top 192), inp_tokens freed {0:32}; b 128
//            bytes: no block fits, grows taking nothing: 192..320.                   peak 320
//   with ne0 16, max_tokens 2 (128 bytes): inp_tokens 0, the block 32..160, c 160..288; a at 288
//            (top 320); inp_tokens freed {0:32}; b grows at 320 (top 448).            peak 448
TEST(MemoryPlan, UnreadEmbdInputHeldForTheWholeGraph) {
  for (const int64_t ne0 : {int64_t{0}, int64_t{16}}) {
    ModelGraphs m;
    m.hp.n_vocab = 8;
    Graph& g = m.pp;
    g.name = "pp";
    g.max_tokens = 2;
    g.unread_embd_ne0 = ne0;
    g.tensors.push_back(Vec("inp_tokens", TensorKind::kInput, 8, GgmlOp::NONE, {}));
    g.tensors.push_back(Vec("c", TensorKind::kInput, 32, GgmlOp::NONE, {}));
    g.tensors.push_back(Vec("a", TensorKind::kIntermediate, 8, GgmlOp::SILU, {0}));
    Tensor b = Vec("b", TensorKind::kIntermediate, 32, GgmlOp::ADD, {1, 2});
    b.is_output = true;
    g.tensors.push_back(b);
    g.leafs = {0, 1};
    g.nodes = {2, 3};
    m.tg.name = "tg";
    MemoryPlan plan;
    ASSERT_TRUE(PlanMemory(m, OneCpu(), &plan).ok());
    ASSERT_EQ(plan.buffers.size(), 2u);  // compute, output
    EXPECT_EQ(plan.buffers[0].usage, BufferUsage::kCompute);
    EXPECT_EQ(plan.buffers[0].size, ne0 ? 448u : 320u) << ne0;
    EXPECT_EQ(g.tensors[1].offset, ne0 ? 160u : 32u) << ne0;
    EXPECT_EQ(g.tensors[3].offset, ne0 ? 320u : 192u) << ne0;
  }
}

// ModelGraphs::llama2026: ggml-alloc's free-block rules exactly (ggml_dyn_tallocr_alloc /
// _free_bytes) against the simplified best fit. Every tensor is an F32 vector of a multiple of 32
// bytes; `in0` (32 bytes), `k`, `s1` and `s2` are read by the last nodes, so they stay.
// pp (a freed range at the arena's end joins the unbounded tail):
//   in0 0..32; h = MM(w, in0) 32..64; a = MM(w, in0) 64..160 (96 bytes); k 160..192;
//   e = MM(w, in0) 192..224; h2 = MM(w, h) 224..256, h freed {32:32};
//   f = MUL_MAT_ID(a, e, h2) best fit {32:32}; a, e, h2 freed: {64:96} and {192:64}, the latter
//   ending at the top (256);
//   g = MM(w, f) (32 bytes): simplified, the best fit {192:64} -> 192; exact, {192:64} has joined
//   the tail, so the one other block {64:96} -> 64.
// tg (ties): in0 0..32; p 32..64; s1 64..96; q 96..128; s2 128..160; r = MM(p, q) (64 bytes)
//   160..224, p and q freed {32:32}, {96:32}; t = MM(w, r) (32 bytes): simplified, the
//   lower of the equal blocks -> 32; exact (`<=`), the higher -> 96.
TEST(MemoryPlan, GgmlExactFreeBlocksForLlama2026Graphs) {
  for (const bool exact : {false, true}) {
    ModelGraphs m = OneWeightModel(exact);
    // Appends node `name` of `bytes` and op `op` reading `srcs` (names; "w" is the weight leaf).
    auto add = [](Graph& g, const char* name, int64_t bytes, GgmlOp op, std::vector<const char*> srcs) {
      std::vector<int> ids;
      for (const char* s : srcs) ids.push_back(g.Find(s));
      g.tensors.push_back(Vec(name, TensorKind::kIntermediate, bytes / 4, op, ids));
      g.nodes.push_back(static_cast<int>(g.tensors.size()) - 1);
    };
    for (Graph* g : {&m.pp, &m.tg}) {
      g->name = g == &m.pp ? "pp" : "tg";
      Tensor w = Vec("w", TensorKind::kWeight, 8, GgmlOp::NONE, {});
      w.global = 0;
      g->tensors.push_back(w);
      g->tensors.push_back(Vec("in0", TensorKind::kInput, 8, GgmlOp::NONE, {}));
      g->leafs = {0, 1};
    }
    Graph& pp = m.pp;
    add(pp, "h", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(pp, "a", 96, GgmlOp::MUL_MAT, {"w", "in0"});
    add(pp, "k", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(pp, "e", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(pp, "h2", 32, GgmlOp::MUL_MAT, {"w", "h"});
    add(pp, "f", 32, GgmlOp::MUL_MAT_ID, {"a", "e", "h2"});
    add(pp, "g", 32, GgmlOp::MUL_MAT, {"w", "f"});
    add(pp, "z", 32, GgmlOp::MUL_MAT_ID, {"in0", "k", "g"});
    Graph& tg = m.tg;
    add(tg, "p", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(tg, "s1", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(tg, "q", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(tg, "s2", 32, GgmlOp::MUL_MAT, {"w", "in0"});
    add(tg, "r", 64, GgmlOp::MUL_MAT, {"p", "q"});
    add(tg, "t", 32, GgmlOp::MUL_MAT, {"w", "r"});
    add(tg, "u", 32, GgmlOp::MUL_MAT_ID, {"s1", "s2", "t"});
    add(tg, "z", 32, GgmlOp::MUL_MAT, {"in0", "u"});
    for (Graph* g : {&m.pp, &m.tg}) g->tensors.back().is_output = true;
    Placement p = OneCpu();
    p.global_buft = {0};
    MemoryPlan plan;
    ASSERT_TRUE(PlanMemory(m, p, &plan).ok());
    EXPECT_EQ(pp.tensors[pp.Find("f")].offset, 32u) << exact;
    EXPECT_EQ(pp.tensors[pp.Find("g")].offset, exact ? 64u : 192u) << exact;
    EXPECT_EQ(tg.tensors[tg.Find("r")].offset, 160u) << exact;
    EXPECT_EQ(tg.tensors[tg.Find("t")].offset, exact ? 96u : 32u) << exact;
  }
}

// ModelGraphs::llama2026: a node computed in place over its source owns that memory from then on,
// so when it is the source of a split input copy it is freed after the copy, as ggml-alloc frees it
// (the MoE experts' split on the CPU: ffn_norm, in place over its RMS_NORM, copied to the CPU split
// of the experts). Two backends share one arena (compute buft 0); every tensor is 32 bytes.
//   split 0 (backend 0): in0 0..32; a = MM(w, in0) 32..64, in0 freed {0:32}; b = SCALE(a) in place
//     at 32.
//   split 1 (backend 1), input b -> bc: bc best fit {0:32} -> 0; b's last reader is the copy:
//     exact, b is freed (32..64 joins the tail); c = MM(w, bc): exact at 32 (the tail), else (b
//     still held) it grows at 64; bc freed {0:32}.
//   split 2 (backend 0), input c -> cc: cc at 0, c freed; d = MM(w, cc), output: exact at 32 (the
//     tail again), else the best fit {64:32}.
// The arena's peak: exact 64, else 96, since b's 32 bytes are never given back.
TEST(MemoryPlan, InPlaceResultCopiedToAnotherSplitIsFreedForLlama2026Graphs) {
  for (const bool exact : {false, true}) {
    ModelGraphs m = OneWeightModel(exact);
    Graph& g = m.pp;
    g.name = "pp";
    Tensor w = Vec("w", TensorKind::kWeight, 8, GgmlOp::NONE, {});
    w.global = 0;
    g.tensors.push_back(w);                                                                // 0
    g.tensors.push_back(Vec("in0", TensorKind::kInput, 8, GgmlOp::NONE, {}));              // 1
    g.tensors.push_back(Vec("a", TensorKind::kIntermediate, 8, GgmlOp::MUL_MAT, {0, 1}));  // 2
    g.tensors.push_back(Vec("b", TensorKind::kIntermediate, 8, GgmlOp::SCALE, {2}));       // 3
    Tensor bc = Vec("bc", TensorKind::kSplitCopy, 8, GgmlOp::NONE, {});
    bc.backend = 1;
    g.tensors.push_back(bc);  // 4
    Tensor c = Vec("c", TensorKind::kIntermediate, 8, GgmlOp::MUL_MAT, {0, 4});
    c.backend = 1;
    g.tensors.push_back(c);                                                       // 5
    g.tensors.push_back(Vec("cc", TensorKind::kSplitCopy, 8, GgmlOp::NONE, {}));  // 6
    Tensor d = Vec("d", TensorKind::kIntermediate, 8, GgmlOp::MUL_MAT, {0, 6});
    d.is_output = true;
    g.tensors.push_back(d);  // 7
    g.leafs = {0, 1};
    g.nodes = {2, 3, 5, 7};
    Split s0, s1, s2;
    s0.backend = 0, s0.node_begin = 0, s0.node_end = 2;
    s1.backend = 1, s1.node_begin = 2, s1.node_end = 3, s1.inputs = {{3, 4}};
    s2.backend = 0, s2.node_begin = 3, s2.node_end = 4, s2.inputs = {{5, 6}};
    g.splits = {s0, s1, s2};
    m.tg.name = "tg";
    Placement p = OneCpu();
    p.backends.push_back(p.backends[0]);
    p.backends[1].name = "CPU1";
    p.global_buft = {0};
    MemoryPlan plan;
    ASSERT_TRUE(PlanMemory(m, p, &plan).ok());
    EXPECT_EQ(g.tensors[g.Find("b")].offset, 32u) << exact;
    EXPECT_EQ(g.tensors[g.Find("c")].offset, exact ? 32u : 64u) << exact;
    uint64_t compute = 0;
    for (const PlannedBuffer& b : plan.buffers)
      if (b.usage == BufferUsage::kCompute) compute = b.size;
    EXPECT_EQ(compute, exact ? 64u : 96u) << exact;
  }
}

}  // namespace
}  // namespace stowage::planner
