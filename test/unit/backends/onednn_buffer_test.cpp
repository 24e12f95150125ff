// The ONEDNN buffer type: weights reordered at upload into the blocked layout oneDNN's
// matmul prefers, plain where that layout would not fit the planned (plain) size, private to the
// ACCEL backend; MUL_MAT on blocked weights against the CPU backend on plain ones, for prompt-sized
// and single-token (tg) batches.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend_test_util.h"
#include "onednn_backend.h"

namespace stowage {
namespace {

using exec::Backend;
using exec::Buffer;
using test::HostTensor;

/// Uploads `w` into a fresh ONEDNN buffer of exactly its plain size at offset 0.
struct Uploaded {
  std::unique_ptr<Buffer> buf;
  cpu::TensorView v;  ///< w's view over the buffer with the stored layout
  int layout = -1;
};

Uploaded Upload(Backend& dnn, const HostTensor& w) {
  Uploaded u;
  const uint64_t n = RowSize(w.v.type, w.v.ne[0]) * static_cast<uint64_t>(w.v.nrows());
  auto r = dnn.Allocate(exec::kOneDnnBuft, n, 64);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return u;
  u.buf = std::move(r).value();
  u.v = w.v;
  u.v.data = u.buf->base();
  auto layout = u.buf->WriteTensor(u.v, 0, w.v.data);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return u;
  u.layout = *layout;
  u.v.layout = u.layout;
  return u;
}

/// MUL_MAT of the uploaded weight (ONEDNN backend) vs the plain weight (CPU backend), src1 with M
/// rows; returns the worst scaled error.
double CompareMulMat(Backend& dnn, const Uploaded& u, const HostTensor& w, int64_t M, uint32_t seed,
                     double tol_rel) {
  const int64_t K = w.v.ne[0], N = w.v.ne[1];
  HostTensor b = test::RandomTensor(GgmlType::F32, {K, M, 1, 1}, seed);
  HostTensor d1 = test::ZeroF32({N, M, 1, 1}), d2 = test::ZeroF32({N, M, 1, 1});
  auto cpu = exec::CreateCpuBackend(2);
  Status s1 = dnn.Compute(test::MulMatCall(u.v, b.v, d1.v));
  Status s2 = cpu->Compute(test::MulMatCall(w.v, b.v, d2.v));
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(s2.ok()) << s2.ToString();
  if (!s1.ok() || !s2.ok()) return INFINITY;
  return test::MaxScaledError(d1.v, d2.v, tol_rel * std::sqrt(double(K)), tol_rel);
}

TEST(OneDnnBuffer, WeightBufferIsPrivateToTheAccelBackend) {
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  auto cpu = exec::CreateCpuBackend(1);
  auto r = dnn->Allocate(exec::kOneDnnBuft, 1000, 64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto buf = std::move(r).value();
  EXPECT_FALSE(buf->is_host());
  EXPECT_EQ(buf->size(), 1000u);  // the planned size, exactly
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->base()) % 64, 0u);
  EXPECT_TRUE(dnn->CanAccess(*buf));
  EXPECT_FALSE(cpu->CanAccess(*buf));  // the CPU backend's kernels cannot read the blocked layout
  // Another ONEDNN backend's weight buffer is readable too (same process memory, same layouts).
  auto other = exec::CreateOneDnnBackend("ONEDNN", 1);
  EXPECT_TRUE(other->CanAccess(*buf));
  // Uploads outside the buffer fail cleanly.
  HostTensor w = test::RandomTensor(GgmlType::F32, {64, 64, 1, 1}, 1);
  cpu::TensorView v = w.v;
  v.data = buf->base();
  auto bad = buf->WriteTensor(v, 0, w.v.data);  // 16 KiB into 1000 bytes
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange) << bad.status().ToString();
}

// A weight whose blocked layout is as large as the plain one (K, N multiples of oneDNN's blocks) is
// stored blocked: different bytes, the same values (a permutation for F32), and MUL_MAT on it
// matches the CPU backend for every batch, tg's M = 1 included.
TEST(OneDnnBuffer, ReordersIntoTheBlockedLayout) {
  const int64_t K = 256, N = 512;
  const exec::OneDnnWeightLayout l = exec::OneDnnWeightLayoutFor(GgmlType::F32, K, N);
  if (l.format == "plain") GTEST_SKIP() << "skipped: oneDNN prefers the plain layout on this CPU";
  ASSERT_TRUE(l.blocked) << "format " << l.format << ", " << l.blocked_bytes << " vs " << l.plain_bytes;
  EXPECT_EQ(l.blocked_bytes, l.plain_bytes);
  EXPECT_NE(l.format.find("inner blocks"), std::string::npos) << l.format;
  std::printf("[ oneDNN ] f32 [%lld, %lld] weights: %s\n", static_cast<long long>(K),
              static_cast<long long>(N), l.format.c_str());

  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 2);
  HostTensor w = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 7);
  Uploaded u = Upload(*dnn, w);
  ASSERT_EQ(u.layout, exec::kLayoutOneDnnBlocked);
  const size_t n = static_cast<size_t>(K * N);
  const float* plain = reinterpret_cast<const float*>(w.v.data);
  const float* stored = reinterpret_cast<const float*>(u.buf->base());
  EXPECT_NE(std::memcmp(plain, stored, n * 4), 0) << "the weight was stored in the plain layout";
  std::vector<float> a(plain, plain + n), b(stored, stored + n);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b) << "the blocked weight does not hold the same values";

  uint32_t seed = 100;
  for (int64_t M : {1, 2, 7, 32, 33, 512})
    EXPECT_LT(CompareMulMat(*dnn, u, w, M, ++seed, 1e-5), 1.0) << "M = " << M;
}

TEST(OneDnnBuffer, Bf16WeightsBlockedWhereSupported) {
  if (!exec::OneDnnSupportsMulMatType(GgmlType::BF16)) GTEST_SKIP() << "skipped: no bf16 matmul on this CPU";
  const int64_t K = 128, N = 256;
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 2);
  HostTensor w = test::RandomTensor(GgmlType::BF16, {K, N, 1, 1}, 9);
  Uploaded u = Upload(*dnn, w);
  EXPECT_EQ(u.layout == exec::kLayoutOneDnnBlocked,
            exec::OneDnnWeightLayoutFor(GgmlType::BF16, K, N).blocked);
  uint32_t seed = 200;
  for (int64_t M : {1, 5, 64}) EXPECT_LT(CompareMulMat(*dnn, u, w, M, ++seed, 1e-5), 1.0) << "M = " << M;
}

// An F32 weight shape [K, N] oneDNN's matmul keeps plain on this CPU (false when none of the
// candidates is): K and N that are not multiples of its blocks, so a blocked layout pads and would
// exceed the plan's plain size. Which shapes those are depends on the CPU's ISA: AVX-512 brgemm
// blocks N by 16 and pads 37 x 29; on an AVX2-only CPU oneDNN takes 37 x 29 in a layout of the same
// size (blocked, then), and smaller shapes stay plain.
bool PlainF32Shape(int64_t* K, int64_t* N) {
  for (int64_t k : {37, 17, 5, 3})
    for (int64_t n : {29, 13, 3})
      if (!exec::OneDnnWeightLayoutFor(GgmlType::F32, k, n).blocked) {
        *K = k;
        *N = n;
        return true;
      }
  return false;
}

// A weight oneDNN keeps plain (its blocked layout would exceed the plain size, or it prefers plain):
// it stays plain in the ONEDNN buffer, and MUL_MAT still runs.
TEST(OneDnnBuffer, StaysPlainWhereTheBlockedLayoutIsLarger) {
  int64_t K = 0, N = 0;
  if (!PlainF32Shape(&K, &N))
    GTEST_SKIP() << "skipped: this CPU's oneDNN blocks every candidate shape without growth";
  const exec::OneDnnWeightLayout l = exec::OneDnnWeightLayoutFor(GgmlType::F32, K, N);
  EXPECT_FALSE(l.blocked);
  if (l.format != "plain") EXPECT_GT(l.blocked_bytes, l.plain_bytes) << l.format;
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  HostTensor w = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 11);
  Uploaded u = Upload(*dnn, w);
  ASSERT_EQ(u.layout, cpu::kLayoutPlain);
  EXPECT_EQ(std::memcmp(u.buf->base(), w.v.data, static_cast<size_t>(K * N * 4)), 0);
  uint32_t seed = 300;
  for (int64_t M : {1, 3, 40}) EXPECT_LT(CompareMulMat(*dnn, u, w, M, ++seed, 1e-5), 1.0) << "M = " << M;
}

// Tensors the ACCEL MUL_MAT does not take (1-D norms, quantized types) are stored as they are.
TEST(OneDnnBuffer, OtherTensorsStayPlain) {
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  HostTensor norm = test::RandomTensor(GgmlType::F32, {256, 1, 1, 1}, 12);
  Uploaded a = Upload(*dnn, norm);
  EXPECT_EQ(a.layout, cpu::kLayoutPlain);
  EXPECT_EQ(std::memcmp(a.buf->base(), norm.v.data, 256 * 4), 0);
  HostTensor q = test::RandomTensor(GgmlType::Q4_0, {256, 64, 1, 1}, 13);
  Uploaded b = Upload(*dnn, q);
  EXPECT_EQ(b.layout, cpu::kLayoutPlain);
  // A host buffer of the backend (any other buffer type) never converts.
  auto host = dnn->Allocate("CPU", 256 * 512 * 4, 64);
  ASSERT_TRUE(host.ok());
  HostTensor w = test::RandomTensor(GgmlType::F32, {256, 512, 1, 1}, 14);
  auto layout = (*host)->WriteTensor(w.v, 0, w.v.data);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*layout, cpu::kLayoutPlain);
  EXPECT_TRUE((*host)->is_host());
}

// src1 with a row stride larger than K, and a batch of src1 matrices over one blocked weight.
TEST(OneDnnBuffer, BlockedWeightsWithStridedAndBatchedActivations) {
  const int64_t K = 128, N = 128, M = 9, B = 3;
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 2);
  HostTensor w = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 21);
  Uploaded u = Upload(*dnn, w);
  if (u.layout != exec::kLayoutOneDnnBlocked) GTEST_SKIP() << "skipped: not blocked on this CPU";
  HostTensor raw = test::RandomTensor(GgmlType::F32, {K + 16, M, B, 1}, 22);
  cpu::TensorView b = raw.v;  // [K, M, B] view with rows K + 16 floats apart
  b.ne[0] = K;
  HostTensor d1 = test::ZeroF32({N, M, B, 1}), d2 = test::ZeroF32({N, M, B, 1});
  auto cpu = exec::CreateCpuBackend(2);
  ASSERT_TRUE(dnn->Compute(test::MulMatCall(u.v, b, d1.v)).ok());
  ASSERT_TRUE(cpu->Compute(test::MulMatCall(w.v, b, d2.v)).ok());
  EXPECT_LT(test::MaxScaledError(d1.v, d2.v, 1e-5 * std::sqrt(double(K)), 1e-5), 1.0);
}

// A view marked blocked for a shape oneDNN keeps plain (a corrupt plan/layout) is refused clearly.
TEST(OneDnnBuffer, RefusesAMislabelledLayout) {
  int64_t K = 0, N = 0;
  if (!PlainF32Shape(&K, &N))
    GTEST_SKIP() << "skipped: this CPU's oneDNN blocks every candidate shape without growth";
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 1);
  HostTensor w = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 31);
  HostTensor b = test::RandomTensor(GgmlType::F32, {K, 2, 1, 1}, 32);
  HostTensor d = test::ZeroF32({N, 2, 1, 1});
  cpu::TensorView a = w.v;
  a.layout = exec::kLayoutOneDnnBlocked;
  Status s = dnn->Compute(test::MulMatCall(a, b.v, d.v));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  a.layout = cpu::kLayoutQ4_0x8;
  s = dnn->Compute(test::MulMatCall(a, b.v, d.v));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace stowage

// ---- timing (not run by default: --gtest_also_run_disabled_tests) ------------------------------
#include <chrono>

namespace stowage {
namespace {

// MUL_MAT time of a blocked ONEDNN weight vs the CPU backend's plain one, alternating, for the
// batch sizes of tg (1) and a prompt (512): [K, N] as the 0.85B-class F32 bench model's FFN.
TEST(OneDnnBuffer, DISABLED_TimingBlockedVsCpu) {
  const int64_t K = 2048, N = 5632;
  auto dnn = exec::CreateOneDnnBackend("ONEDNN", 2);
  auto cpu = exec::CreateCpuBackend(2);
  HostTensor w = test::RandomTensor(GgmlType::F32, {K, N, 1, 1}, 41);
  Uploaded u = Upload(*dnn, w);
  ASSERT_EQ(u.layout, exec::kLayoutOneDnnBlocked);
  for (int64_t M : {1, 512}) {
    HostTensor b = test::RandomTensor(GgmlType::F32, {K, M, 1, 1}, 42);
    HostTensor d = test::ZeroF32({N, M, 1, 1});
    double t[3] = {0, 0, 0};  // ONEDNN blocked, ONEDNN plain (host weights), CPU
    const int reps = M == 1 ? 50 : 3;
    for (int r = 0; r < reps + 1; ++r) {
      for (int which = 0; which < 3; ++which) {
        const auto t0 = std::chrono::steady_clock::now();
        Status s = which == 0   ? dnn->Compute(test::MulMatCall(u.v, b.v, d.v))
                   : which == 1 ? dnn->Compute(test::MulMatCall(w.v, b.v, d.v))
                                : cpu->Compute(test::MulMatCall(w.v, b.v, d.v));
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_TRUE(s.ok()) << s.ToString();
        if (r > 0) t[which] += dt;  // the first round warms up
      }
    }
    std::printf(
        "[ timing ] M=%lld K=%lld N=%lld: ONEDNN blocked %.3f ms, ONEDNN plain %.3f ms, CPU %.3f ms (mean of "
        "%d)\n",
        static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N), 1e3 * t[0] / reps,
        1e3 * t[1] / reps, 1e3 * t[2] / reps, reps);
  }
}

}  // namespace
}  // namespace stowage
