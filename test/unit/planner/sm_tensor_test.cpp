// -sm tensor split states (llama.cpp 2026 llama_meta_device_get_split_state) on gguf-synth models:
// axes, the GQA / block / 128-column granularity, the per-layer rotation, -ts, per-device bytes and
// the refusals.
#include "stowage/planner/sm_tensor.h"

#include <gtest/gtest.h>

#include "stowage/planner/model_graphs.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

ModelGraphs Build(test::SynthGguf synth) {
  auto gguf = synth.Parse();
  EXPECT_TRUE(gguf);
  auto hp = ReadHParams(*gguf);
  EXPECT_TRUE(hp.ok()) << hp.status().message();
  ContextConfig cfg;
  cfg.n_ctx = 256;
  cfg.n_batch = cfg.n_ubatch = 64;
  EXPECT_TRUE(ResolveContext(*hp, gguf->path(), &cfg).ok());
  auto m = BuildModelGraphs(*gguf, *hp, cfg);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(*m);
}

SmSplitState StateOf(const ModelGraphs& m, const std::string& name, int n,
                     const std::vector<float>& ts = {}) {
  const int g = m.FindGlobal(name);
  EXPECT_GE(g, 0) << name;
  auto s = SmTensorSplitState(m, m.globals[g], n, ts);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : SmSplitState{};
}

std::vector<int64_t> Elements(const SmSplitState& s, int n) {
  std::vector<int64_t> e;
  for (int j = 0; j < n; ++j) e.push_back(s.DeviceElements(n, j));
  return e;
}

TEST(SmTensor, LlamaSplitsHeadsKvAndFfnWithRotation) {
  // n_embd 64, 4 heads of 16 over 2 KV heads, n_ff 96, F32
  const ModelGraphs m = Build(test::LlamaModel({}));
  using V = std::vector<int64_t>;
  // Q by whole GQA groups (granularity 32), K/V by KV heads (16)
  EXPECT_EQ(StateOf(m, "blk.0.attn_q.weight", 2).axis, SmAxis::k1);
  EXPECT_EQ(Elements(StateOf(m, "blk.0.attn_q.weight", 2), 2), (V{32, 32}));
  EXPECT_EQ(Elements(StateOf(m, "blk.0.attn_k.weight", 2), 2), (V{16, 16}));
  EXPECT_EQ(StateOf(m, "blk.0.attn_output.weight", 2).axis, SmAxis::k0);
  EXPECT_EQ(Elements(StateOf(m, "blk.0.attn_output.weight", 2), 2), (V{32, 32}));
  EXPECT_EQ(StateOf(m, "cache_k_l0", 2).axis, SmAxis::k0);
  EXPECT_EQ(Elements(StateOf(m, "cache_v_l1", 2), 2), (V{16, 16}));
  // FFN columns in multiples of 128: 96 columns cannot be cut, the whole FFN goes to the device
  // that takes the remainder, which rotates from layer to layer
  EXPECT_EQ(Elements(StateOf(m, "blk.0.ffn_up.weight", 2), 2), (V{0, 96}));
  EXPECT_EQ(Elements(StateOf(m, "blk.1.ffn_up.weight", 2), 2), (V{96, 0}));
  EXPECT_EQ(StateOf(m, "blk.1.ffn_down.weight", 2).axis, SmAxis::k0);
  EXPECT_EQ(Elements(StateOf(m, "blk.1.ffn_down.weight", 2), 2), (V{96, 0}));
  // output by vocabulary rows; norms and embeddings on every device
  EXPECT_EQ(StateOf(m, "output.weight", 2).axis, SmAxis::k1);
  EXPECT_EQ(Elements(StateOf(m, "output.weight", 2), 2), (V{64, 64}));
  EXPECT_EQ(StateOf(m, "token_embd.weight", 2).axis, SmAxis::kMirrored);
  EXPECT_EQ(StateOf(m, "blk.0.attn_norm.weight", 2).axis, SmAxis::kMirrored);
}

TEST(SmTensor, TensorSplitProportionsRotateWithTheLayer) {
  test::SynthParams p;
  p.n_ff = 512;
  const ModelGraphs m = Build(test::LlamaModel(p));
  using V = std::vector<int64_t>;
  EXPECT_EQ(Elements(StateOf(m, "blk.0.ffn_gate.weight", 2, {3, 1}), 2), (V{384, 128}));
  // layer 1 starts the scan at device 1: its quarter is 128 columns, the rest device 0's
  EXPECT_EQ(Elements(StateOf(m, "blk.1.ffn_gate.weight", 2, {3, 1}), 2), (V{384, 128}));
  // the heads: 64 * 3/4 = 48, rounded down to a GQA group of 32
  EXPECT_EQ(Elements(StateOf(m, "blk.0.attn_q.weight", 2, {3, 1}), 2), (V{32, 32}));
  // even proportions over three devices: 512 / 3 rounds down to 128, 2 * 512 / 3 to 256
  EXPECT_EQ(Elements(StateOf(m, "blk.0.ffn_gate.weight", 3), 3), (V{128, 128, 256}));
}

TEST(SmTensor, DeviceBytesAddUpAndKvIsSplitByHeads) {
  const ModelGraphs m = Build(test::LlamaModel({}));
  auto plan = PlanSmTensor(m, 2, {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  uint64_t total_w = 0, total_kv = 0;
  for (const GlobalTensor& g : m.globals) {
    if (g.duplicated || (g.kind == TensorKind::kWeight && g.layer < 0)) continue;
    (g.kind == TensorKind::kKvCache ? total_kv : total_w) += g.nbytes;
  }
  // the split tensors' bytes once, the mirrored ones on each device
  EXPECT_EQ(plan->weight_bytes[0] + plan->weight_bytes[1] - plan->mirrored_bytes[0], total_w);
  EXPECT_EQ(plan->mirrored_bytes[0], plan->mirrored_bytes[1]);
  // 2 KV heads over 2 devices: half each
  EXPECT_EQ(plan->kv_bytes[0], total_kv / 2);
  EXPECT_EQ(plan->kv_bytes[1], total_kv / 2);
  // one device holds everything
  auto one = PlanSmTensor(m, 1, {});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->weight_bytes[0], total_w);
  EXPECT_EQ(one->kv_bytes[0], total_kv);
  // two all-reduces per layer (attention, FFN) and the output's
  EXPECT_EQ(plan->n_allreduce, 2 * 2 + 1);
}

// llama.cpp 3.22.1 on two RPC devices (test/data/sm-tensor/llama-2dev.log, made by
// scripts/llamacpp-ref/make-sm-tensor.sh from gguf-synth --arch llama: n_ff 128, 512 tokens):
// "Meta() model buffer size = 0.20 MiB", "Meta() KV buffer size = 0.03 MiB" per device. 214272
// bytes: each layer's attention halves and norms (2 x 25088), one layer's whole FFN (98304: 128
// columns cannot be cut in 128s, the rotation gives each device one layer's), half the output
// (65536) and output_norm (256). Without the rotation one device would hold both FFNs (312576).
TEST(SmTensor, MetaBuffersEqualTheReferences) {
  test::SynthParams p;
  p.n_ff = 128;
  p.n_vocab = 512;
  const ModelGraphs m = Build(test::LlamaModel(p));
  auto plan = PlanSmTensor(m, 2, {});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->weight_bytes, (std::vector<uint64_t>{214272, 214272}));
  EXPECT_EQ(plan->kv_bytes, (std::vector<uint64_t>{32768, 32768}));
}

// qwen3-2dev.log / qwen3moe-2dev.log (heads of 32, n_ff and n_ff_exp 128, 8 experts): "Meta()
// model buffer size = 0.25 MiB" (263936) and "= 0.91 MiB" (956160: each layer's attention halves,
// norms and router, one layer's 8 experts (128 columns are not cut in 128s: the rotation gives
// each device one layer's), half the output), KV 0.06 MiB (65536) per device.
TEST(SmTensor, Qwen3AndQwen3MoeMetaBuffersEqualTheReferences) {
  test::SynthParams p;
  p.n_ff = 128;
  p.n_vocab = 512;
  auto dense = PlanSmTensor(Build(test::Qwen3Model(p, 32)), 2, {});
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  EXPECT_EQ(dense->weight_bytes, (std::vector<uint64_t>{263936, 263936}));
  EXPECT_EQ(dense->kv_bytes, (std::vector<uint64_t>{65536, 65536}));
  p.n_expert = 8;
  p.n_expert_used = 2;
  auto moe = PlanSmTensor(Build(test::Qwen3MoeModel(p, 32, 128)), 2, {});
  ASSERT_TRUE(moe.ok()) << moe.status().message();
  EXPECT_EQ(moe->weight_bytes, (std::vector<uint64_t>{956160, 956160}));
  EXPECT_EQ(moe->kv_bytes, (std::vector<uint64_t>{65536, 65536}));
}

TEST(SmTensor, QuantizedWeightsKeepWholeBlocks) {
  test::SynthParams p;
  p.wtype = GgmlType::Q4_0;
  p.n_ff = 256;
  const ModelGraphs m = Build(test::LlamaModel(p));
  using V = std::vector<int64_t>;
  EXPECT_EQ(Elements(StateOf(m, "blk.0.attn_output.weight", 2), 2), (V{32, 32}));
  EXPECT_EQ(Elements(StateOf(m, "blk.0.ffn_down.weight", 2), 2), (V{128, 128}));
  const GlobalTensor& down = m.globals[m.FindGlobal("blk.0.ffn_down.weight")];
  const SmSplitState s = StateOf(m, "blk.0.ffn_down.weight", 2);
  EXPECT_EQ(SmDeviceBytes(down, s, 2, 0) + SmDeviceBytes(down, s, 2, 1), down.nbytes);
}

TEST(SmTensor, MoeExpertsSplitByColumns) {
  test::SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  const ModelGraphs m = Build(test::Qwen3MoeModel(p, 16, 256));
  using V = std::vector<int64_t>;
  EXPECT_EQ(StateOf(m, "blk.0.ffn_up_exps.weight", 2).axis, SmAxis::k1);
  EXPECT_EQ(Elements(StateOf(m, "blk.0.ffn_up_exps.weight", 2), 2), (V{128, 128}));
  EXPECT_EQ(StateOf(m, "blk.0.ffn_down_exps.weight", 2).axis, SmAxis::k0);
  EXPECT_EQ(StateOf(m, "blk.0.ffn_gate_inp.weight", 2).axis, SmAxis::kMirrored);
  // q/k norms of one head width: mirrored
  EXPECT_EQ(StateOf(m, "blk.0.attn_q_norm.weight", 2).axis, SmAxis::kMirrored);
}

TEST(SmTensor, ArchitecturesTheReferenceRefusesAreRefused) {
  const ModelGraphs m = Build(test::MambaModel({}));
  auto plan = PlanSmTensor(m, 2, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(plan.status().message(), "LLAMA_SPLIT_MODE_TENSOR not implemented for architecture 'mamba'");
  EXPECT_FALSE(ArchSupportsSmTensor("deepseek2"));
  EXPECT_TRUE(ArchSupportsSmTensor("qwen3moe"));
  EXPECT_TRUE(ArchSupportsSmTensor("llama"));
}

TEST(SmTensor, BadInputIsNamed) {
  ModelGraphs m = Build(test::LlamaModel({}));
  auto none = PlanSmTensor(m, 0, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "LLAMA_SPLIT_MODE_TENSOR needs >= 1 devices");
  // a layer without attn_output.weight: its Q cannot be sized
  m.globals[m.FindGlobal("blk.1.attn_output.weight")].name = "blk.1.attn_out.weight";
  auto s = SmTensorSplitState(m, m.globals[m.FindGlobal("blk.1.attn_q.weight")], 2, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "sm tensor: blk.1.attn_q.weight: expected blk.1.attn_output.weight or blk.1.ssm_out.weight, "
            "found none");
}

}  // namespace
}  // namespace stowage::planner
