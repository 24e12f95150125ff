// supports_op / supports_buft / offload_op of the test manifests that model the golden placement
// configurations: llama.cpp's CPU with CPU_REPACK, the BLAS-like ACCEL, the seed-era CUDA GPU,
// the RPC devices and the oneDNN ACCEL (the BLAS-like test manifest sharing the CPU buft, and the
// shipped one with its own ONEDNN weight buft).
#include <gtest/gtest.h>

#include <string>

#include "stowage/planner/manifest.h"

namespace stowage::planner {
namespace {

DeviceManifest Load(const std::string& name) {
  auto m = LoadManifestFile(std::string(STOWAGE_TEST_MANIFESTS_DIR) + "/" + name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m.value().WithIndex(0) : DeviceManifest{};
}

TensorDesc T(GgmlType type, std::array<int64_t, 4> ne, std::string buft = "", bool is_host = false) {
  TensorDesc t;
  t.type = type;
  t.ne = ne;
  t.buft = std::move(buft);
  t.buft_is_host = is_host;
  return t;
}

// A MUL_MAT node as llama.cpp's weight_buft_supported builds it: weight [K, N] in `buft`,
// activations F32 [K, batch] (unallocated), dst F32 [N, batch].
OpQuery MulMat(GgmlType wtype, int64_t k, int64_t n, int64_t batch, const std::string& buft, bool is_host) {
  OpQuery q;
  q.op = GgmlOp::MUL_MAT;
  q.src = {T(wtype, {k, n, 1, 1}, buft, is_host), T(GgmlType::F32, {k, batch, 1, 1})};
  q.dst = T(GgmlType::F32, {n, batch, 1, 1});
  return q;
}

OpQuery GetRows(GgmlType wtype, const std::string& buft, bool is_host) {
  OpQuery q;
  q.op = GgmlOp::GET_ROWS;
  q.src = {T(wtype, {256, 512, 1, 1}, buft, is_host), T(GgmlType::I32, {512, 1, 1, 1})};
  q.dst = T(GgmlType::F32, {256, 512, 1, 1});
  return q;
}

TEST(CpuManifest, RepackTakesQ4_0MulMatWeightsWithNe1MultipleOf8) {
  DeviceManifest cpu = Load("llamacpp-cpu.json");
  ASSERT_EQ(cpu.extra_bufts.size(), 1u);
  EXPECT_EQ(cpu.extra_bufts[0].name, "CPU_REPACK");
  EXPECT_FALSE(cpu.extra_bufts[0].is_host);
  EXPECT_TRUE(cpu.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, 512, "CPU_REPACK", false)));
  // ne1 = 260 has no 8x8 repack layout; CPU_REPACK is not host memory -> unsupported.
  EXPECT_FALSE(cpu.SupportsOp(MulMat(GgmlType::Q4_0, 256, 260, 512, "CPU_REPACK", false)));
  // q6_K and F32 weights are not repacked (golden: output q6_K and the norms stay in CPU).
  EXPECT_FALSE(cpu.SupportsOp(MulMat(GgmlType::Q6_K, 256, 256, 512, "CPU_REPACK", false)));
  EXPECT_FALSE(cpu.SupportsOp(MulMat(GgmlType::F32, 256, 256, 512, "CPU_REPACK", false)));
  // GET_ROWS (token_embd) is never repacked.
  EXPECT_FALSE(cpu.SupportsOp(GetRows(GgmlType::Q4_0, "CPU_REPACK", false)));
  // A 3-D MUL_MAT src0 is not accepted by the repack buft (MUL_MAT_ID is).
  OpQuery q3 = MulMat(GgmlType::Q4_0, 256, 256, 512, "CPU_REPACK", false);
  q3.src[0].ne[2] = 4;
  EXPECT_FALSE(cpu.SupportsOp(q3));
  q3.op = GgmlOp::MUL_MAT_ID;
  EXPECT_TRUE(cpu.SupportsOp(q3));
  // In the plain CPU buffer type everything runs.
  EXPECT_TRUE(cpu.SupportsOp(MulMat(GgmlType::Q6_K, 256, 260, 512, "CPU", true)));
  EXPECT_TRUE(cpu.SupportsOp(GetRows(GgmlType::Q4_0, "CPU", true)));
}

TEST(CpuManifest, GenericRules) {
  DeviceManifest cpu = Load("llamacpp-cpu.json");
  // A source in a GPU buffer: unsupported, except for view ops.
  OpQuery add;
  add.op = GgmlOp::ADD;
  add.src = {T(GgmlType::F32, {64, 8, 1, 1}, "CUDA0", false), T(GgmlType::F32, {64, 8, 1, 1})};
  add.dst = T(GgmlType::F32, {64, 8, 1, 1});
  EXPECT_FALSE(cpu.SupportsOp(add));
  add.src[0].buft = "CUDA_Host";
  add.src[0].buft_is_host = true;
  EXPECT_TRUE(cpu.SupportsOp(add));
  OpQuery view = add;
  view.op = GgmlOp::VIEW;
  view.src[0] = T(GgmlType::F32, {64, 8, 1, 1}, "CUDA0", false);
  EXPECT_TRUE(cpu.SupportsOp(view));
  // CPY into a type without from_float.
  OpQuery cpy;
  cpy.op = GgmlOp::CPY;
  cpy.src = {T(GgmlType::F32, {256, 4, 1, 1}), T(GgmlType::IQ2_XXS, {256, 4, 1, 1}, "CPU", true)};
  cpy.dst = T(GgmlType::IQ2_XXS, {256, 4, 1, 1});
  EXPECT_FALSE(cpu.SupportsOp(cpy));
  cpy.dst.type = GgmlType::Q8_0;
  EXPECT_TRUE(cpu.SupportsOp(cpy));
  // MUL_MAT: src1 must be F32 or the vec_dot type of src0.
  OpQuery mm = MulMat(GgmlType::Q4_0, 256, 256, 4, "CPU", true);
  mm.src[1].type = GgmlType::Q8_0;
  EXPECT_TRUE(cpu.SupportsOp(mm));
  mm.src[1].type = GgmlType::F16;
  EXPECT_FALSE(cpu.SupportsOp(mm));
  // Every other op, e.g. SSM_SCAN, runs on the CPU.
  OpQuery ssm;
  ssm.op = GgmlOp::SSM_SCAN;
  ssm.src = {T(GgmlType::F32, {16, 32, 1, 1}, "CPU", true)};
  EXPECT_TRUE(cpu.SupportsOp(ssm));
  // supports_buft: host bufts and its extra buft, not GPU bufts.
  EXPECT_TRUE(cpu.SupportsBuft("CPU", true));
  EXPECT_TRUE(cpu.SupportsBuft("CUDA_Host", true));
  EXPECT_TRUE(cpu.SupportsBuft("CPU_REPACK", false));
  EXPECT_FALSE(cpu.SupportsBuft("CUDA0", false));
  EXPECT_FALSE(cpu.OffloadOp(GgmlOp::MUL_MAT, 512));
  EXPECT_TRUE(cpu.caps.buffer_from_host_ptr);
}

TEST(BlasManifest, ContiguousF32F16MulMatWithBatchAtLeast32) {
  DeviceManifest blas = Load("blas.json");
  EXPECT_EQ(blas.type, DeviceType::kAccel);
  EXPECT_EQ(blas.default_buft.name, "CPU");  // shares the CPU buffer type
  EXPECT_TRUE(blas.default_buft.is_host);
  EXPECT_TRUE(blas.SupportsOp(MulMat(GgmlType::F32, 256, 256, 169, "CPU", true)));
  EXPECT_TRUE(blas.SupportsOp(MulMat(GgmlType::F16, 256, 256, 32, "CPU", true)));
  EXPECT_FALSE(blas.SupportsOp(MulMat(GgmlType::F32, 256, 256, 31, "CPU", true)));  // tg / small batch
  EXPECT_FALSE(blas.SupportsOp(MulMat(GgmlType::F32, 256, 256, 1, "CPU", true)));
  EXPECT_FALSE(blas.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, 169, "CPU", true)));
  EXPECT_FALSE(blas.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, 169, "CPU_REPACK", false)));
  OpQuery permuted = MulMat(GgmlType::F32, 256, 256, 169, "CPU", true);
  permuted.src[1].contiguous = false;
  EXPECT_FALSE(blas.SupportsOp(permuted));
  OpQuery none;
  none.op = GgmlOp::NONE;
  none.src = {T(GgmlType::F32, {64, 1, 1, 1}, "CPU", true)};
  EXPECT_TRUE(blas.SupportsOp(none));
  none.src[0] = T(GgmlType::F32, {64, 1, 1, 1}, "CPU_REPACK", false);
  EXPECT_FALSE(blas.SupportsOp(none));
  OpQuery add = none;
  add.op = GgmlOp::ADD;
  add.src[0] = T(GgmlType::F32, {64, 1, 1, 1}, "CPU", true);
  EXPECT_FALSE(blas.SupportsOp(add));
  EXPECT_TRUE(blas.SupportsBuft("CPU", true));
  EXPECT_FALSE(blas.SupportsBuft("CPU_REPACK", false));
  EXPECT_FALSE(blas.OffloadOp(GgmlOp::MUL_MAT, 512));
}

TEST(SeedCudaManifest, NoSsmKernels) {
  DeviceManifest gpu = Load("cuda-seed.json");
  EXPECT_EQ(gpu.name, "CUDA0");
  OpQuery conv;
  conv.op = GgmlOp::SSM_CONV;
  conv.src = {T(GgmlType::F32, {19, 64, 1, 1}), T(GgmlType::F32, {4, 64, 1, 1}, "CUDA0", false)};
  conv.dst = T(GgmlType::F32, {64, 16, 1, 1});
  EXPECT_FALSE(gpu.SupportsOp(conv));
  conv.op = GgmlOp::SSM_SCAN;
  EXPECT_FALSE(gpu.SupportsOp(conv));
  EXPECT_TRUE(gpu.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, 512, "CUDA0", false)));
  // As in llama.cpp FEB25, ggml-cuda answers supports_op without looking at the weight's buffer, so
  // the CPU list's CUDA_Host entry is accepted for weights of ops the GPU can run.
  EXPECT_TRUE(gpu.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, 512, "CUDA_Host", true)));
  EXPECT_TRUE(gpu.SupportsBuft("CUDA0", false));
  EXPECT_TRUE(gpu.SupportsBuft("CUDA0_Split", false));
  EXPECT_FALSE(gpu.SupportsBuft("CUDA_Host", true));
  EXPECT_FALSE(gpu.SupportsBuft("CUDA1", false));
  EXPECT_FALSE(gpu.SupportsBuft("CPU", true));
  // offload_op: batch >= 32; GET_ROWS has batch 0.
  EXPECT_TRUE(gpu.OffloadOp(MulMat(GgmlType::Q4_0, 256, 256, 32, "CPU", true)));
  EXPECT_FALSE(gpu.OffloadOp(MulMat(GgmlType::Q4_0, 256, 256, 31, "CPU", true)));
  EXPECT_FALSE(gpu.OffloadOp(GetRows(GgmlType::Q4_0, "CPU", true)));
  EXPECT_EQ(gpu.UsableMemory(), (24ull << 30) - (512ull << 20));
}

TEST(RpcManifests, GoldenPlacementDevices) {
  DeviceManifest r0 = Load("rpc0.json");
  DeviceManifest r1 = Load("rpc1.json");
  EXPECT_EQ(r0.name, "RPC[127.0.0.1:50052]");
  EXPECT_EQ(r1.name, "RPC[127.0.0.1:50053]");
  EXPECT_EQ(r0.memory_free, 512ull << 20);
  EXPECT_EQ(r1.memory_free, 256ull << 20);
  EXPECT_EQ(r0.type, DeviceType::kGpu);
  EXPECT_EQ(r0.caps, DeviceCaps{});
  EXPECT_FALSE(r0.host_buft.has_value());
  EXPECT_FALSE(r0.split_buft.has_value());
  EXPECT_TRUE(r0.extra_bufts.empty());
  EXPECT_EQ(r0.default_buft.name, r0.name);
  EXPECT_FALSE(r0.OffloadOp(GgmlOp::MUL_MAT, 4096));
  OpQuery ssm;
  ssm.op = GgmlOp::SSM_SCAN;
  EXPECT_TRUE(r0.SupportsOp(ssm));
  EXPECT_TRUE(r0.SupportsBuft(r0.default_buft));
  EXPECT_FALSE(r0.SupportsBuft(r1.default_buft));
  EXPECT_FALSE(r0.SupportsBuft("CPU", true));
}

TEST(OneDnnManifest, F32Bf16MatmulOnly) {
  DeviceManifest d = Load("onednn.json");
  EXPECT_EQ(d.type, DeviceType::kAccel);
  EXPECT_EQ(d.default_buft.name, "CPU");
  EXPECT_TRUE(d.SupportsOp(MulMat(GgmlType::BF16, 256, 256, 64, "CPU", true)));
  EXPECT_TRUE(d.SupportsOp(MulMat(GgmlType::F32, 256, 256, 64, "CPU", true)));
  EXPECT_FALSE(d.SupportsOp(MulMat(GgmlType::F16, 256, 256, 64, "CPU", true)));
  EXPECT_FALSE(d.SupportsOp(MulMat(GgmlType::F32, 256, 256, 8, "CPU", true)));
  OpQuery silu;
  silu.op = GgmlOp::SILU;
  silu.src = {T(GgmlType::F32, {64, 64, 1, 1})};
  EXPECT_FALSE(d.SupportsOp(silu));
}

// The shipped oneDNN manifest (planner/registry/onednn.json): its own weight buffer type ONEDNN
// (not host memory), MUL_MAT of F32/BF16 weights in it at any batch (tg too), host weights only
// from a batch of 32, nothing else; the CPU cannot read ONEDNN.
TEST(OneDnnManifest, ShippedManifestHasItsOwnWeightBuftype) {
  auto r = LoadManifestFile(std::string(STOWAGE_SHIPPED_REGISTRY_DIR) + "/onednn.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DeviceManifest& d = *r;
  EXPECT_EQ(d.type, DeviceType::kAccel);
  EXPECT_EQ(d.default_buft.name, "ONEDNN");
  EXPECT_FALSE(d.default_buft.is_host);
  EXPECT_TRUE(d.SupportsBuft("ONEDNN", false));
  EXPECT_TRUE(d.SupportsBuft("CPU", true));
  EXPECT_FALSE(d.SupportsBuft("CPU_REPACK", false));
  for (int64_t batch : {1, 7, 32, 512}) {
    EXPECT_TRUE(d.SupportsOp(MulMat(GgmlType::F32, 256, 256, batch, "ONEDNN", false))) << batch;
    EXPECT_TRUE(d.SupportsOp(MulMat(GgmlType::BF16, 256, 256, batch, "ONEDNN", false))) << batch;
    EXPECT_FALSE(d.SupportsOp(MulMat(GgmlType::Q4_0, 256, 256, batch, "ONEDNN", false))) << batch;
    EXPECT_FALSE(d.SupportsOp(MulMat(GgmlType::F16, 256, 256, batch, "ONEDNN", false))) << batch;
    EXPECT_EQ(d.SupportsOp(MulMat(GgmlType::F32, 256, 256, batch, "CPU", true)), batch >= 32) << batch;
  }
  EXPECT_FALSE(d.SupportsOp(MulMat(GgmlType::F32, 256, 256, 512, "CPU_REPACK", false)));
  EXPECT_FALSE(d.SupportsOp(GetRows(GgmlType::F32, "ONEDNN", false)));  // token_embd never goes there
  // A 3-D weight in ONEDNN is not taken (the blocked layout is per 2-D matrix).
  OpQuery q3 = MulMat(GgmlType::F32, 256, 256, 64, "ONEDNN", false);
  q3.src[0].ne[2] = 4;
  q3.src[1].ne[2] = 4;
  q3.dst.ne[2] = 4;
  EXPECT_FALSE(d.SupportsOp(q3));
  // Activations must be host memory.
  OpQuery dev = MulMat(GgmlType::F32, 256, 256, 64, "ONEDNN", false);
  dev.src[1].buft = "CUDA0";
  EXPECT_FALSE(d.SupportsOp(dev));
  // The CPU (llama.cpp's CPU device) cannot read it.
  DeviceManifest cpu = Load("llamacpp-cpu.json");
  EXPECT_FALSE(cpu.SupportsBuft("ONEDNN", false));
}

TEST(OpSupportTable, FirstMatchingRuleDecides) {
  OpSupportTable t;
  t.default_supported = true;
  OpRule deny;
  deny.ops = {GgmlOp::ADD};
  deny.supported = false;
  OpRule allow_all;
  allow_all.supported = true;
  t.rules = {deny, allow_all};
  OpQuery q;
  q.op = GgmlOp::ADD;
  int rule = 99;
  EXPECT_FALSE(t.Evaluate(q, &rule));
  EXPECT_EQ(rule, 0);
  q.op = GgmlOp::MUL;
  EXPECT_TRUE(t.Evaluate(q, &rule));
  EXPECT_EQ(rule, 1);
  t.rules = {deny};
  t.default_supported = false;
  EXPECT_FALSE(t.Evaluate(q, &rule));
  EXPECT_EQ(rule, -1);
}

TEST(TensorConstraint, PresenceAndShape) {
  TensorConstraint absent;
  absent.present = false;
  TensorDesc t = T(GgmlType::F32, {64, 8, 1, 1});
  EXPECT_TRUE(absent.Matches(nullptr));
  EXPECT_FALSE(absent.Matches(&t));
  TensorConstraint c;
  EXPECT_FALSE(c.Matches(nullptr));
  c.max_ne = {0, 8, 0, 0};
  EXPECT_TRUE(c.Matches(&t));
  t.ne[1] = 9;
  EXPECT_FALSE(c.Matches(&t));
  c = TensorConstraint{};
  c.max_dims = 1;
  EXPECT_FALSE(c.Matches(&t));
  t.ne[1] = 1;
  EXPECT_TRUE(c.Matches(&t));
}

}  // namespace
}  // namespace stowage::planner
