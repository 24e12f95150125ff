// The oneDNN ACCEL backend's MUL_MAT against the CPU backend's, on odd shapes (K, N, M not multiples
// of 8), GQA-style broadcast dims, strided activations, and its refusals.
#include "onednn_backend.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backend_test_util.h"
#include "stowage/runtime/device_probe.h"

namespace stowage {
namespace {

using exec::Backend;
using test::HostTensor;

struct Case {
  int64_t K, N, M, ne02, ne03, ne12, ne13;
};

// Runs src0 (type wt) x src1 on the oneDNN and CPU backends; returns the worst scaled error.
double CompareWithCpu(GgmlType wt, const Case& c, double tol_rel, uint32_t seed) {
  HostTensor a = test::RandomTensor(wt, {c.K, c.N, c.ne02, c.ne03}, seed);
  HostTensor b = test::RandomTensor(GgmlType::F32, {c.K, c.M, c.ne12, c.ne13}, seed + 1);
  HostTensor d1 = test::ZeroF32({c.N, c.M, c.ne12, c.ne13});
  HostTensor d2 = test::ZeroF32({c.N, c.M, c.ne12, c.ne13});
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 2);
  auto cpu = exec::CreateCpuBackend(2);
  Status s1 = dnn->Compute(test::MulMatCall(a.v, b.v, d1.v));
  Status s2 = cpu->Compute(test::MulMatCall(a.v, b.v, d2.v));
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(s2.ok()) << s2.ToString();
  if (!s1.ok() || !s2.ok()) return INFINITY;
  // Sums of K products of values in (-1, 1): absolute error grows like sqrt(K) * eps.
  return test::MaxScaledError(d1.v, d2.v, tol_rel * std::sqrt(double(c.K)), tol_rel);
}

const Case kCases[] = {
    {37, 29, 13, 1, 1, 1, 1},    // all odd
    {1, 3, 5, 1, 1, 1, 1},       // K = 1
    {67, 45, 33, 2, 1, 6, 1},    // GQA: src0 matrix i02 serves i12 / 3
    {19, 7, 3, 1, 1, 4, 3},      // src0 broadcast over ne12 and ne13
    {23, 11, 9, 2, 3, 4, 6},     // broadcast in both batch dims, both > 1
    {257, 131, 41, 1, 1, 1, 1},  // larger than oneDNN's blocking
};

TEST(OneDnnBackend, MulMatF32MatchesCpu) {
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    EXPECT_LT(CompareWithCpu(GgmlType::F32, c, 1e-5, seed += 7), 1.0)
        << "K=" << c.K << " N=" << c.N << " M=" << c.M << " ne02=" << c.ne02 << " ne12=" << c.ne12;
  }
}

TEST(OneDnnBackend, MulMatBf16MatchesCpu) {
  if (!exec::OneDnnSupportsMulMatType(GgmlType::BF16))
    GTEST_SKIP() << "skipped: oneDNN has no bf16 matmul on this CPU";
  uint32_t seed = 100;
  for (const Case& c : kCases) {
    // Both sides convert src1 to BF16 with the same rounding; only the F32 summation order differs.
    EXPECT_LT(CompareWithCpu(GgmlType::BF16, c, 1e-5, seed += 7), 1.0)
        << "K=" << c.K << " N=" << c.N << " M=" << c.M;
  }
}

TEST(OneDnnBackend, MulMatF16MatchesCpuWhereSupported) {
  if (!exec::OneDnnSupportsMulMatType(GgmlType::F16))
    GTEST_SKIP() << "skipped: oneDNN has no f16 matmul on this CPU";
  uint32_t seed = 200;
  for (const Case& c : kCases) {
    EXPECT_LT(CompareWithCpu(GgmlType::F16, c, 1e-4, seed += 7), 1.0)
        << "K=" << c.K << " N=" << c.N << " M=" << c.M;
  }
}

TEST(OneDnnBackend, F32IsAlwaysSupportedAndQuantsNever) {
  EXPECT_TRUE(exec::OneDnnSupportsMulMatType(GgmlType::F32));
  EXPECT_FALSE(exec::OneDnnSupportsMulMatType(GgmlType::Q4_0));
  EXPECT_FALSE(exec::OneDnnSupportsMulMatType(GgmlType::Q8_0));
}

// src1 as a permuted view (ggml_permute(x, 0, 2, 1, 3)): rows of one matrix are not adjacent.
TEST(OneDnnBackend, MulMatStridedActivations) {
  const int64_t K = 21, N = 17, M = 5, H = 3;
  HostTensor a = test::RandomTensor(GgmlType::F32, {K, N, H, 1}, 11);
  HostTensor raw = test::RandomTensor(GgmlType::F32, {K, H, M, 1}, 12);  // stored [K, H, M]
  cpu::TensorView b = raw.v;                                             // viewed as [K, M, H]
  b.ne[1] = M;
  b.ne[2] = H;
  b.nb[1] = raw.v.nb[2];
  b.nb[2] = raw.v.nb[1];
  HostTensor d1 = test::ZeroF32({N, M, H, 1}), d2 = test::ZeroF32({N, M, H, 1});
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  auto cpu = exec::CreateCpuBackend(1);
  ASSERT_TRUE(dnn->Compute(test::MulMatCall(a.v, b, d1.v)).ok());
  ASSERT_TRUE(cpu->Compute(test::MulMatCall(a.v, b, d2.v)).ok());
  EXPECT_LT(test::MaxScaledError(d1.v, d2.v, 1e-5 * std::sqrt(double(K)), 1e-5), 1.0);

  // Element stride != 4 (a transposed view): gathered first.
  HostTensor t = test::RandomTensor(GgmlType::F32, {M, K, 1, 1}, 13);  // stored [M, K]
  cpu::TensorView bt = t.v;                                            // viewed as [K, M]
  bt.ne[0] = K;
  bt.ne[1] = M;
  bt.nb[0] = t.v.nb[1];
  bt.nb[1] = 4;
  HostTensor a2 = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 14);
  HostTensor e1 = test::ZeroF32({N, M, 1, 1}), e2 = test::ZeroF32({N, M, 1, 1});
  ASSERT_TRUE(dnn->Compute(test::MulMatCall(a2.v, bt, e1.v)).ok());
  ASSERT_TRUE(cpu->Compute(test::MulMatCall(a2.v, bt, e2.v)).ok());
  EXPECT_LT(test::MaxScaledError(e1.v, e2.v, 1e-5 * std::sqrt(double(K)), 1e-5), 1.0);
}

// The result really comes from the weights: a changed weight changes exactly its output column.
TEST(OneDnnBackend, MulMatReadsEveryWeightRow) {
  const int64_t K = 9, N = 5, M = 3;
  HostTensor a = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 21);
  HostTensor b = test::RandomTensor(GgmlType::F32, {K, M, 1, 1}, 22);
  HostTensor d = test::ZeroF32({N, M, 1, 1});
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  ASSERT_TRUE(dnn->Compute(test::MulMatCall(a.v, b.v, d.v)).ok());
  const float* A = reinterpret_cast<const float*>(a.v.data);
  const float* B = reinterpret_cast<const float*>(b.v.data);
  const float* D = reinterpret_cast<const float*>(d.v.data);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += double(A[n * K + k]) * B[m * K + k];
      EXPECT_NEAR(D[m * N + n], ref, 1e-5) << "n=" << n << " m=" << m;
    }
}

TEST(OneDnnBackend, RefusesWhatItCannotRun) {
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  HostTensor q = test::RandomTensor(GgmlType::Q4_0, {64, 4, 1, 1}, 31);
  HostTensor b = test::RandomTensor(GgmlType::F32, {64, 2, 1, 1}, 32);
  HostTensor d = test::ZeroF32({4, 2, 1, 1});
  Status s = dnn->Compute(test::MulMatCall(q.v, b.v, d.v));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("q4_0"), std::string::npos) << s.ToString();

  HostTensor a = test::RandomTensor(GgmlType::F32, {64, 4, 1, 1}, 33);
  HostTensor wrong = test::ZeroF32({5, 2, 1, 1});
  s = dnn->Compute(test::MulMatCall(a.v, b.v, wrong.v));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("dst shape"), std::string::npos) << s.ToString();

  exec::NodeCall add;
  add.op = GgmlOp::ADD;
  add.name = "add";
  s = dnn->Compute(add);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
}

class DeviceOnlyBuffer final : public exec::Buffer {
 public:
  uint8_t* base() override { return nullptr; }
  uint64_t size() const override { return 0; }
  bool is_host() const override { return false; }
  Status Write(uint64_t, const void*, uint64_t) override { return Status::Ok(); }
  Status Read(uint64_t, void*, uint64_t) const override { return Status::Ok(); }
};

TEST(OneDnnBackend, BuffersAreHostMemory) {
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  auto r = dnn->Allocate("CPU", 100, 32);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto buf = std::move(r).value();
  EXPECT_TRUE(buf->is_host());
  EXPECT_EQ(buf->size(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->base()) % 64, 0u);
  EXPECT_EQ(buf->base()[99], 0);  // zeroed
  const char msg[] = "weights";
  ASSERT_TRUE(buf->Write(90, msg, 8).ok());
  char back[8] = {};
  ASSERT_TRUE(buf->Read(90, back, 8).ok());
  EXPECT_STREQ(back, "weights");
  EXPECT_EQ(buf->Write(95, msg, 8).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(buf->Read(101, back, 1).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(dnn->CanAccess(*buf));
  DeviceOnlyBuffer dev;
  EXPECT_FALSE(dnn->CanAccess(dev));
  auto cpu = exec::CreateCpuBackend(1);
  EXPECT_TRUE(cpu->CanAccess(*buf));  // shares the CPU buffer type
}

// The probed ONEDNN device's op table (runtime/src/devices/onednn_probe.cpp) and the backend agree on
// the MUL_MAT weight types, both ways: the table accepts a type exactly when oneDNN has the matmul.
TEST(OneDnnBackend, AgreesWithTheProbedTable) {
  const ProbeReport report = ProbeDevices();
  const ProbedDevice* dev = nullptr;
  for (const auto& d : report.devices)
    if (d.type == DeviceType::kAccel && d.name == "ONEDNN") dev = &d;
  ASSERT_NE(dev, nullptr) << "no ONEDNN device probed in a build with oneDNN";
  auto tensor = [](GgmlType t, int64_t ne0, int64_t ne1) {
    TensorDesc r;
    r.type = t;
    r.ne = {ne0, ne1, 1, 1};
    r.buft = "CPU";
    r.buft_is_host = true;
    return r;
  };
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    OpQuery q = test::Query(GgmlOp::MUL_MAT, tensor(GgmlType::F32, 64, 64),
                            {tensor(t, 256, 64), tensor(GgmlType::F32, 256, 64)});
    EXPECT_EQ(dev->SupportsOp(q), exec::OneDnnSupportsMulMatType(t))
        << "MUL_MAT with " << GgmlTypeName(t) << " weights";
    // Weights in its own buffer type: every batch, tg's 1 included; host weights from 32 rows.
    for (int64_t batch : {1, 31, 32}) {
      TensorDesc w = tensor(t, 256, 64);
      w.buft = exec::kOneDnnBuft;
      w.buft_is_host = false;
      OpQuery own = test::Query(GgmlOp::MUL_MAT, tensor(GgmlType::F32, 64, batch),
                                {w, tensor(GgmlType::F32, 256, batch)});
      EXPECT_EQ(dev->SupportsOp(own), exec::OneDnnSupportsMulMatType(t))
          << GgmlTypeName(t) << " batch " << batch;
      OpQuery host = test::Query(GgmlOp::MUL_MAT, tensor(GgmlType::F32, 64, batch),
                                 {tensor(t, 256, 64), tensor(GgmlType::F32, 256, batch)});
      EXPECT_EQ(dev->SupportsOp(host), exec::OneDnnSupportsMulMatType(t) && batch >= 32)
          << GgmlTypeName(t) << " batch " << batch;
    }
  }
  EXPECT_EQ(dev->default_buft.name, exec::kOneDnnBuft);
  EXPECT_FALSE(dev->default_buft.is_host);
}

TEST(OneDnnBackend, BuiltInForAccelDevices) {
  auto b = exec::CreateBuiltinBackend("ONEDNN", "ACCEL", 1);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name(), "ONEDNN");
  EXPECT_EQ(exec::CreateBuiltinBackend("AMX", "ACCEL", 1), nullptr);
  EXPECT_NE(exec::BuiltinBackendNames().find("oneDNN"), std::string::npos);
}

}  // namespace
}  // namespace stowage

// ---- whole models: CPU + ONEDNN plans against CPU-only plans --------------------------------------
#include "e2e_util.h"
#include "test_paths.h"

namespace stowage {
namespace {

struct AccelCase {
  const char* model;
  bool accel_runs;  ///< the plan gives the ACCEL device MUL_MATs (F32 weights; not F16/Q4_0 here)
};
class OneDnnLogits : public ::testing::TestWithParam<AccelCase> {};

TEST_P(OneDnnLogits, MatchCpu) {
  const std::string model = test::ModelPath(GetParam().model);
  STOWAGE_REQUIRE_FILE(model);
  // 40 tokens (a batch the ACCEL device would also take from host memory; its ONEDNN weights it
  // takes at any batch).
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + (i * 37) % 200);
  test::E2eRun cpu = test::RunPlanned(model, prompt, nullptr, {});
  test::E2eRun acc =
      test::RunPlanned(model, prompt, [](const ProbedDevice& d) { return d.type == DeviceType::kAccel; }, {});
  ASSERT_FALSE(acc.logits.empty());
  const float diff = test::MaxAbsDiff(cpu.logits, acc.logits);
  EXPECT_LE(diff, 1e-3f) << "ACCEL+CPU logits differ from CPU-only";
  const int n = acc.computes.count("ONEDNN") ? acc.computes.at("ONEDNN") : 0;
  if (GetParam().accel_runs) {
    EXPECT_GT(n, 0) << "the plan ran no node on the ONEDNN backend";
    // Its weights live in the ONEDNN buffer type, allocated exactly as planned (RunPlanned checks
    // planned == allocated for every buffer).
    EXPECT_NE(std::find(acc.devices.begin(), acc.devices.end(), "ONEDNN"), acc.devices.end());
  }
  // F16 weights go to ACCEL only where oneDNN has an f16 matmul and the manifest lists F16.
  if (!GetParam().accel_runs && std::string(GetParam().model).find("Q4_0") != std::string::npos)
    EXPECT_EQ(n, 0);
  std::printf("[ %s ] ONEDNN+CPU vs CPU max |logit diff| = %.6f (%d nodes on ONEDNN)\n", GetParam().model,
              diff, n);
}

INSTANTIATE_TEST_SUITE_P(Models, OneDnnLogits,
                         ::testing::Values(AccelCase{"stories260K.gguf", true},
                                           AccelCase{"stories260K-F16.gguf", false},
                                           AccelCase{"tiny-tied-f32.gguf", true},
                                           AccelCase{"stories260K-Q4_0.gguf", false}),
                         [](const ::testing::TestParamInfo<AccelCase>& i) {
                           std::string n = i.param.model;
                           n = n.substr(0, n.size() - 5);
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace stowage
