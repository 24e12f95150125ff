// The CUDA backend: every op against the CPU backend (or a double-precision reference for the
// quantized matmuls), its buffer types, the row split rule, and the logits of whole models planned
// onto the GPU against CPU-only plans. Without a CUDA device the device tests report
// "skipped: no CUDA device"; the row split rule and the absence checks run everywhere.
#include "cuda_backend.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "e2e_util.h"
#include "test_paths.h"

namespace stowage {
namespace {

using exec::Backend;
using exec::Buffer;
using test::HostTensor;

// ---- without a device ---------------------------------------------------------------------------

// The row split rules (RowSplit, CumulativeSplit, RowRounding) are tested without CUDA in
// row_split_test.cpp.

TEST(CudaBackend, AbsentDeviceGivesNoBackend) {
  const int n = exec::CudaDeviceCount();
  EXPECT_GE(n, 0);
  EXPECT_EQ(exec::CreateCudaBackend(n), nullptr);  // one past the last device
  EXPECT_EQ(exec::CreateCudaBackend(-1), nullptr);
  EXPECT_EQ(exec::CreateBuiltinBackend("CUDA" + std::to_string(n), "GPU", 1), nullptr);
  EXPECT_EQ(exec::CreateBuiltinBackend("CUDAx", "GPU", 1), nullptr);
  EXPECT_NE(exec::BuiltinBackendNames().find("CUDA"), std::string::npos);
}

// Whether a library whose file name contains `name` is mapped into this process.
bool LibraryMapped(const char* name) {
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::strstr(line, name) != nullptr;
  std::fclose(f);
  return found;
}

// The DT_NEEDED entries of this executable (the libraries the loader maps before main).
std::vector<std::string> NeededLibraries() {
  std::vector<std::string> out;
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* d = _DYNAMIC; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
  if (strtab == nullptr) return out;
  for (const ElfW(Dyn)* d = _DYNAMIC; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_NEEDED) out.emplace_back(strtab + d->d_un.d_val);
  return out;
}

// cuBLAS is loaded when a device first runs a cuBLAS product (cuda_backend.cpp DeviceCtx::Blas),
// not at start-up: this test executable (linked like stowage-run) does not need it, and a CPU-only
// run of a CUDA-enabled build, device probing included, never maps it (its static initializers
// cost ~130 MiB of resident memory and ~0.3 s per process).
TEST(CudaBackend, CpuOnlyRunLoadsNoCublas) {
  const std::vector<std::string> needed = NeededLibraries();
  EXPECT_FALSE(needed.empty()) << "no DT_NEEDED entries read";
  for (const std::string& lib : needed) EXPECT_EQ(lib.find("libcublas"), std::string::npos) << lib;
  const int n_gpu = exec::CudaDeviceCount();
  EXPECT_GE(n_gpu, 0);
  // Without a device nothing here can have made a device context: a mapped cuBLAS is a failure.
  // With one, an earlier test of this process may have run a cuBLAS product.
  if (n_gpu > 0 && LibraryMapped("libcublas"))
    GTEST_SKIP() << "skipped: an earlier test of this process used cuBLAS (run this test alone)";
  EXPECT_FALSE(LibraryMapped("libcublas"));
  const std::string model = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(model);
  test::E2eRun cpu = test::RunPlanned(model, {1, 2, 3}, nullptr, {});
  EXPECT_FALSE(cpu.logits.empty());
  EXPECT_FALSE(LibraryMapped("libcublas"));
  EXPECT_FALSE(LibraryMapped("libcublasLt"));
}

// The op table of the probed CUDA device (runtime/src/devices, MakeCudaDevice) promises nothing the
// backend cannot run: every MUL_MAT / GET_ROWS weight type and every CPY pair the table accepts.
TEST(CudaBackend, RunsEverythingTheProbedTableAccepts) {
  CudaDeviceInfo info;
  info.name = "test GPU";
  const ProbedDevice dev = MakeCudaDevice(info);
  std::vector<GgmlType> all;
  for (uint32_t id = 0; id < kGgmlTypeCount; ++id)
    if (IsValidGgmlType(id)) all.push_back(static_cast<GgmlType>(id));
  auto tensor = [](GgmlType t, int64_t ne0, int64_t ne1) {
    TensorDesc r;
    r.type = t;
    r.ne = {ne0, ne1, 1, 1};
    r.buft = "CUDA0";
    return r;
  };
  int accepted = 0;
  for (GgmlType t : all) {
    OpQuery mm = test::Query(GgmlOp::MUL_MAT, tensor(GgmlType::F32, 64, 64),
                             {tensor(t, 256, 64), tensor(GgmlType::F32, 256, 64)});
    if (dev.SupportsOp(mm)) {
      ++accepted;
      EXPECT_TRUE(exec::CudaSupportsWeightType(t)) << "MUL_MAT with " << GgmlTypeName(t) << " weights";
    }
    OpQuery gr = test::Query(GgmlOp::GET_ROWS, tensor(GgmlType::F32, 256, 4),
                             {tensor(t, 256, 64), tensor(GgmlType::I32, 4, 1)});
    if (dev.SupportsOp(gr)) EXPECT_TRUE(exec::CudaSupportsWeightType(t)) << "GET_ROWS of " << GgmlTypeName(t);
    for (GgmlType d : all) {
      OpQuery cp = test::Query(GgmlOp::CPY, tensor(d, 256, 4), {tensor(t, 256, 4), tensor(d, 256, 4)});
      if (dev.SupportsOp(cp))
        EXPECT_TRUE(exec::CudaSupportsCpy(t, d)) << "CPY " << GgmlTypeName(t) << " -> " << GgmlTypeName(d);
    }
  }
  EXPECT_GT(accepted, 3);  // the table is not empty
}

// ---- on a device --------------------------------------------------------------------------------

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (exec::CudaDeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device";
    gpu_ = exec::CreateCudaBackend(0);
    ASSERT_NE(gpu_, nullptr);
    cpu_ = exec::CreateCpuBackend(2);
  }

  // Copies a host tensor into a new CUDA0 buffer (same strides); returns the device view.
  cpu::TensorView Upload(const cpu::TensorView& h, size_t bytes, const std::string& buft = "CUDA0") {
    auto r = gpu_->Allocate(buft, bytes, 256);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return h;
    bufs_.push_back(std::move(r).value());
    EXPECT_TRUE(bufs_.back()->Write(0, h.data, bytes).ok());
    cpu::TensorView d = h;
    d.data = bufs_.back()->base();
    return d;
  }

  // Runs `c` (host views, with the byte sizes of each source and of dst) on the GPU (dst's bytes
  // uploaded as they are, the result read into *back) and then on the CPU (into dst); false when
  // either fails.
  bool RunBoth(exec::NodeCall c, const std::vector<size_t>& src_bytes, HostTensor& dst, HostTensor* back) {
    exec::NodeCall g = c;
    for (size_t i = 0; i < src_bytes.size(); ++i)
      if (c.has_src[i] && c.src[i].data) g.src[i] = Upload(c.src[i], src_bytes[i]);
    g.dst = Upload(dst.v, dst.bytes.size());
    Status s = gpu_->Compute(g);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(gpu_->Synchronize().ok());
    *back = dst;
    back->v.data = back->bytes.data();
    EXPECT_TRUE(bufs_.back()->Read(0, back->bytes.data(), back->bytes.size()).ok());
    Status sc = cpu_->Compute(c);
    EXPECT_TRUE(sc.ok()) << sc.ToString();
    return s.ok() && sc.ok();
  }

  // RunBoth; the worst scaled error of the GPU's dst against the CPU's.
  double Compare(exec::NodeCall c, const std::vector<size_t>& src_bytes, HostTensor& dst, double tol_abs,
                 double tol_rel) {
    HostTensor back;
    if (!RunBoth(c, src_bytes, dst, &back)) return INFINITY;
    return test::MaxScaledError(back.v, c.dst, tol_abs, tol_rel);
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<std::unique_ptr<Buffer>> bufs_;
};

exec::NodeCall Call(GgmlOp op, const cpu::TensorView& d, std::initializer_list<cpu::TensorView> srcs) {
  exec::NodeCall c;
  c.op = op;
  c.name = GgmlOpName(op);
  c.dst = d;
  int i = 0;
  for (const auto& s : srcs) {
    c.src[i] = s;
    c.has_src[i] = true;
    ++i;
  }
  return c;
}

TEST_F(CudaOps, BuffersAndAccess) {
  auto dev = gpu_->Allocate("CUDA0", 1000, 256);
  auto host = gpu_->Allocate("CUDA_Host", 1000, 32);
  auto split = gpu_->Allocate("CUDA0_Split", 1000, 256);
  ASSERT_TRUE(dev.ok() && host.ok() && split.ok());
  EXPECT_FALSE((*dev)->is_host());
  EXPECT_TRUE((*host)->is_host());
  EXPECT_FALSE((*split)->is_host());
  EXPECT_TRUE(gpu_->CanAccess(**dev));
  EXPECT_TRUE(gpu_->CanAccess(**split));
  EXPECT_FALSE(gpu_->CanAccess(**host));  // ggml-cuda: host buffers are copied, not computed on
  EXPECT_TRUE(cpu_->CanAccess(**host));
  EXPECT_FALSE(cpu_->CanAccess(**dev));
  std::vector<uint8_t> pattern(1000), back(1000, 0);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint8_t(i * 7);
  ASSERT_TRUE((*dev)->Write(0, pattern.data(), 1000).ok());
  ASSERT_TRUE((*dev)->Read(0, back.data(), 1000).ok());
  EXPECT_EQ(back, pattern);
  EXPECT_EQ((*dev)->Write(999, pattern.data(), 2).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(gpu_->Allocate("CUDA7", 10, 256).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CudaOps, ElementwiseAndNorms) {
  HostTensor a = test::RandomTensor(GgmlType::F32, {67, 5, 3, 2}, 1);
  HostTensor b = test::RandomTensor(GgmlType::F32, {67, 1, 3, 1}, 2);
  HostTensor h = test::RandomTensor(GgmlType::F16, {67, 5, 1, 1}, 3);
  const size_t ab = a.bytes.size(), bb = b.bytes.size();
  for (GgmlOp op : {GgmlOp::ADD, GgmlOp::MUL}) {
    HostTensor d = test::ZeroF32({67, 5, 3, 2});
    EXPECT_LT(Compare(Call(op, d.v, {a.v, b.v}), {ab, bb}, d, 1e-6, 1e-6), 1.0) << GgmlOpName(op);
    HostTensor d2 = test::ZeroF32({67, 5, 3, 2});
    EXPECT_LT(Compare(Call(op, d2.v, {a.v, h.v}), {ab, h.bytes.size()}, d2, 1e-6, 1e-6), 1.0)
        << GgmlOpName(op) << " F16 src1";
  }
  for (GgmlOp op : {GgmlOp::SILU, GgmlOp::GELU, GgmlOp::RMS_NORM, GgmlOp::NORM, GgmlOp::SCALE}) {
    HostTensor d = test::ZeroF32({67, 5, 3, 2});
    exec::NodeCall c = Call(op, d.v, {a.v});
    const float params[2] = {op == GgmlOp::SCALE ? 0.37f : 1e-5f, 0.25f};
    c.fparams = params;
    c.n_fparams = GetOpTraits(op).n_fparams;  // {s, b}, {eps} or none
    // GELU goes through fp16 like GGML_GELU_FP16: one fp16 ulp (~1e-3) apart at most.
    const double rel = op == GgmlOp::GELU ? 2e-3 : 1e-4;
    EXPECT_LT(Compare(c, {ab}, d, 1e-5, rel), 1.0) << GgmlOpName(op);
  }
  for (GgmlOp op : {GgmlOp::SWIGLU, GgmlOp::GEGLU}) {
    HostTensor d = test::ZeroF32({67, 5, 3, 2});
    HostTensor g = test::RandomTensor(GgmlType::F32, {67, 5, 3, 2}, 4);
    const double rel = op == GgmlOp::GEGLU ? 2e-3 : 1e-4;
    EXPECT_LT(Compare(Call(op, d.v, {a.v, g.v}), {ab, g.bytes.size()}, d, 1e-5, rel), 1.0) << GgmlOpName(op);
    HostTensor f = test::RandomTensor(GgmlType::F32, {134, 5, 3, 2}, 5);
    HostTensor d2 = test::ZeroF32({67, 5, 3, 2});
    exec::NodeCall c = Call(op, d2.v, {f.v});
    EXPECT_LT(Compare(c, {f.bytes.size()}, d2, 1e-5, rel), 1.0) << GgmlOpName(op) << " fused";
  }
}

TEST_F(CudaOps, RopeSoftMaxCpy) {
  const int64_t hd = 64, nh = 4, nt = 7;
  HostTensor x = test::RandomTensor(GgmlType::F32, {hd, nh, nt, 1}, 7);
  HostTensor pos;
  pos.v.type = GgmlType::I32;
  pos.v.ne[0] = nt;
  cpu::SetContiguousStrides(pos.v);
  pos.bytes.resize(nt * 4);
  for (int32_t i = 0; i < nt; ++i) {
    const int32_t p = 100 * i + 3;
    std::memcpy(pos.bytes.data() + 4 * i, &p, 4);
  }
  pos.v.data = pos.bytes.data();
  HostTensor ff = test::RandomTensor(GgmlType::F32, {24, 1, 1, 1}, 8);
  for (size_t i = 0; i < 24; ++i)
    reinterpret_cast<float*>(ff.bytes.data())[i] =
        1.f + std::fabs(reinterpret_cast<float*>(ff.bytes.data())[i]);
  for (int mode : {0, 2}) {
    for (bool yarn : {false, true}) {
      HostTensor d = test::ZeroF32({hd, nh, nt, 1});
      exec::NodeCall c = Call(GgmlOp::ROPE, d.v, {x.v, pos.v, ff.v});
      const int32_t ip[3] = {48, mode, 4096};
      const float fp[6] = {10000.f, yarn ? 0.25f : 1.f, yarn ? 1.f : 0.f, 1.f, 32.f, 1.f};
      c.iparams = ip;
      c.n_iparams = 3;
      c.fparams = fp;
      c.n_fparams = 6;
      EXPECT_LT(Compare(c, {x.bytes.size(), pos.bytes.size(), ff.bytes.size()}, d, 1e-4, 1e-3), 1.0)
          << "mode " << mode << " yarn " << yarn;
    }
  }
  HostTensor s = test::RandomTensor(GgmlType::F32, {37, 5, 4, 1}, 9);
  HostTensor mask = test::RandomTensor(GgmlType::F16, {37, 8, 1, 1}, 10);
  for (float max_bias : {0.f, 8.f}) {
    HostTensor d = test::ZeroF32({37, 5, 4, 1});
    exec::NodeCall c = Call(GgmlOp::SOFT_MAX, d.v, {s.v, mask.v});
    const float fp[2] = {0.125f, max_bias};
    c.fparams = fp;
    c.n_fparams = 2;
    EXPECT_LT(Compare(c, {s.bytes.size(), mask.bytes.size()}, d, 1e-6, 1e-4), 1.0) << "max_bias " << max_bias;
  }
  // CONT of a permuted view, and F32 -> F16 / F16 -> F32 copies.
  HostTensor src = test::RandomTensor(GgmlType::F32, {6, 5, 4, 1}, 11);
  cpu::TensorView perm = src.v;  // ggml_permute(src, 0, 2, 1, 3)
  std::swap(perm.ne[1], perm.ne[2]);
  std::swap(perm.nb[1], perm.nb[2]);
  HostTensor d = test::ZeroF32({6, 4, 5, 1});
  EXPECT_LT(Compare(Call(GgmlOp::CONT, d.v, {perm}), {src.bytes.size()}, d, 0, 1e-7), 1.0) << "CONT";
  HostTensor h = test::RandomTensor(GgmlType::F16, {6, 5, 4, 1}, 12);
  HostTensor d32 = test::ZeroF32({6, 5, 4, 1});
  EXPECT_LT(Compare(Call(GgmlOp::CPY, d32.v, {h.v}), {h.bytes.size()}, d32, 0, 1e-7), 1.0) << "F16 -> F32";
  // F32 -> F16: compare the halves bit for bit.
  HostTensor h2 = test::RandomTensor(GgmlType::F16, {6, 5, 4, 1}, 13), h3 = h2;
  h3.v.data = h3.bytes.data();
  exec::NodeCall c = Call(GgmlOp::CPY, h2.v, {src.v});
  exec::NodeCall g = c;
  g.src[0] = Upload(src.v, src.bytes.size());
  g.dst = Upload(h2.v, h2.bytes.size());
  ASSERT_TRUE(gpu_->Compute(g).ok());
  ASSERT_TRUE(bufs_.back()->Read(0, h3.bytes.data(), h3.bytes.size()).ok());
  ASSERT_TRUE(cpu_->Compute(c).ok());
  EXPECT_EQ(h2.bytes, h3.bytes) << "F32 -> F16 rounding differs from the CPU's";

  // F32 -> Q8_0 / Q4_0 (quantized KV cache): the same bytes as the CPU's reference quantizers.
  HostTensor kv = test::RandomTensor(GgmlType::F32, {64, 3, 2, 1}, 14);
  for (GgmlType qt : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    HostTensor q1 = test::RandomTensor(qt, {64, 3, 2, 1}, 15), q2 = q1;
    q2.v.data = q2.bytes.data();
    exec::NodeCall cq = Call(GgmlOp::CPY, q1.v, {kv.v});
    exec::NodeCall gq = cq;
    gq.src[0] = Upload(kv.v, kv.bytes.size());
    gq.dst = Upload(q1.v, q1.bytes.size());
    ASSERT_TRUE(gpu_->Compute(gq).ok()) << GgmlTypeName(qt);
    ASSERT_TRUE(bufs_.back()->Read(0, q2.bytes.data(), q2.bytes.size()).ok());
    ASSERT_TRUE(cpu_->Compute(cq).ok());
    EXPECT_EQ(q1.bytes, q2.bytes) << "F32 -> " << GgmlTypeName(qt) << " differs from the CPU's quantizer";
  }
}

// Random blocks of a type the test cannot quantize (K-quants, IQ4): random bytes, sane scales.
HostTensor RandomBlocks(GgmlType type, std::array<int64_t, 4> ne, uint32_t seed) {
  HostTensor t = test::RandomTensor(GgmlType::F32, ne, seed);  // for the shape only
  t.v.type = type;
  cpu::SetContiguousStrides(t.v);
  t.bytes.assign(t.v.nb[3] * ne[3] + 64, 0);
  t.v.data = t.bytes.data();
  std::mt19937 rng(seed);
  for (auto& b : t.bytes) b = uint8_t(rng());
  const auto& tr = GetTypeTraits(type);
  const size_t nblocks = t.v.nb[3] * ne[3] / tr.type_size;
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  for (size_t i = 0; i < nblocks; ++i) {
    uint8_t* blk = t.bytes.data() + i * tr.type_size;
    auto put = [&](size_t off) {
      const uint16_t h = cpu::Fp32ToFp16(u(rng));
      std::memcpy(blk + off, &h, 2);
    };
    switch (type) {  // offsets of the fp16 scales in ggml's block structs
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put(0);
        put(2);
        break;
      case GgmlType::Q6_K:
        put(208);
        break;
      case GgmlType::Q2_K:
        put(80);
        put(82);
        break;
      case GgmlType::Q3_K:
        put(108);
        break;
      case GgmlType::IQ4_NL:
      case GgmlType::IQ4_XS:
        put(0);
        break;
      case GgmlType::MXFP4:  // the E8M0 scale byte: half scales 2^-10 .. 2^5
        blk[0] = uint8_t(118 + rng() % 16);
        break;
      default:
        break;
    }
  }
  return t;
}

// The CPU backend's MUL_MAT weight types (cpu::SupportsMulMatType), all of which the GPU runs.
const GgmlType kAllWeightTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
                                    GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
                                    GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
                                    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

HostTensor Weights(GgmlType t, std::array<int64_t, 4> ne, uint32_t seed) {
  const bool quantizable = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
                           t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
                           t == GgmlType::Q5_1 || t == GgmlType::Q8_0;
  return quantizable ? test::RandomTensor(t, ne, seed) : RandomBlocks(t, ne, seed);
}

TEST(CudaTypes, EveryCpuWeightType) {
  for (GgmlType t : kAllWeightTypes) EXPECT_TRUE(cpu::SupportsMulMatType(t)) << GgmlTypeName(t);
}

// A contiguous I32 tensor [ne0, ne1] holding `values` (row indices, expert ids).
HostTensor I32Tensor(const std::vector<int32_t>& values, int64_t ne0, int64_t ne1 = 1) {
  HostTensor t;
  t.v.type = GgmlType::I32;
  t.v.ne[0] = ne0;
  t.v.ne[1] = ne1;
  cpu::SetContiguousStrides(t.v);
  t.bytes.assign(reinterpret_cast<const uint8_t*>(values.data()),
                 reinterpret_cast<const uint8_t*>(values.data() + values.size()));
  t.v.data = t.bytes.data();
  return t;
}

TEST_F(CudaOps, GetRowsAllTypes) {
  const HostTensor ids = I32Tensor({3, 0, 6, 3, 1}, 5);
  for (GgmlType t : kAllWeightTypes) {
    HostTensor w = Weights(t, {512, 7, 1, 1}, 20);
    HostTensor d = test::ZeroF32({512, 5, 1, 1});
    EXPECT_LT(
        Compare(Call(GgmlOp::GET_ROWS, d.v, {w.v, ids.v}), {w.bytes.size(), ids.bytes.size()}, d, 1e-6, 1e-6),
        1.0)
        << GgmlTypeName(t);
  }
}

// GPU MUL_MAT against a double-precision dot of the dequantized weights with the F32 activations
// (mat-vec kernel for ne11 <= 8 on quantized weights, cuBLAS otherwise).
TEST_F(CudaOps, MulMatAllWeightTypes) {
  struct S {
    int64_t K, N, M, ne02, ne12;
  };
  const S shapes[] = {
      {256, 37, 1, 1, 1}, {512, 29, 5, 1, 1}, {256, 45, 33, 1, 1}, {256, 13, 3, 2, 6}, {768, 130, 64, 1, 1}};
  for (GgmlType t : kAllWeightTypes) {
    for (const S& s : shapes) {
      HostTensor w = Weights(t, {s.K, s.N, s.ne02, 1}, 30);
      HostTensor x = test::RandomTensor(GgmlType::F32, {s.K, s.M, s.ne12, 1}, 31);
      HostTensor d = test::ZeroF32({s.N, s.M, s.ne12, 1});
      exec::NodeCall g = Call(GgmlOp::MUL_MAT, d.v, {w.v, x.v});
      g.src[0] = Upload(w.v, w.bytes.size());
      g.src[1] = Upload(x.v, x.bytes.size());
      g.dst = Upload(d.v, d.bytes.size());
      Status st = gpu_->Compute(g);
      ASSERT_TRUE(st.ok()) << GgmlTypeName(t) << ": " << st.ToString();
      ASSERT_TRUE(bufs_.back()->Read(0, d.bytes.data(), d.bytes.size()).ok());
      // Reference in double from dequantized rows; F16-rounded activations on the cuBLAS path.
      const double rel = (t == GgmlType::F32) ? 1e-5 : (t == GgmlType::BF16 ? 1e-2 : 2e-3);
      double worst = 0;
      std::vector<float> row(s.K);
      const int64_t r2 = s.ne12 / s.ne02;
      for (int64_t i12 = 0; i12 < s.ne12; ++i12)
        for (int64_t n = 0; n < s.N; ++n) {
          ASSERT_TRUE(
              cpu::DequantizeRow(t, w.bytes.data() + (i12 / r2) * w.v.nb[2] + n * w.v.nb[1], row.data(), s.K)
                  .ok());
          for (int64_t m = 0; m < s.M; ++m) {
            const float* xr =
                reinterpret_cast<const float*>(x.bytes.data() + i12 * x.v.nb[2] + m * x.v.nb[1]);
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < s.K; ++k) {
              ref += double(row[k]) * xr[k];
              mag += std::fabs(double(row[k]) * xr[k]);
            }
            const float got =
                reinterpret_cast<const float*>(d.bytes.data() + i12 * d.v.nb[2] + m * d.v.nb[1])[n];
            worst = std::max(worst, std::fabs(got - ref) / (1e-6 + rel * mag));
          }
        }
      EXPECT_LT(worst, 1.0) << GgmlTypeName(t) << " K=" << s.K << " N=" << s.N << " M=" << s.M
                            << " ne12=" << s.ne12;
    }
  }
}

TEST_F(CudaOps, MulMatRowSplitWeights) {
  for (GgmlType t : {GgmlType::F16, GgmlType::Q4_0}) {
    const int64_t K = 256, N = 300, M = 3;
    HostTensor w = test::RandomTensor(t, {K, N, 1, 1}, 40);
    HostTensor x = test::RandomTensor(GgmlType::F32, {K, M, 1, 1}, 41);
    HostTensor d = test::ZeroF32({N, M, 1, 1});
    exec::NodeCall c = Call(GgmlOp::MUL_MAT, d.v, {w.v, x.v});
    exec::NodeCall g = c;
    g.src[0] = Upload(w.v, w.bytes.size(), "CUDA0_Split");
    g.src[1] = Upload(x.v, x.bytes.size());
    g.dst = Upload(d.v, d.bytes.size());
    ASSERT_TRUE(gpu_->Compute(g).ok());
    HostTensor back = d;
    back.v.data = back.bytes.data();
    ASSERT_TRUE(bufs_.back()->Read(0, back.bytes.data(), back.bytes.size()).ok());
    ASSERT_TRUE(cpu_->Compute(c).ok());
    // CPU: activations quantized to Q8_0 (Q4_0) or F16; GPU: F32 or F16 activations.
    EXPECT_LT(test::MaxScaledError(back.v, d.v, 0.05, 0.02), 1.0) << GgmlTypeName(t);
  }
}

// Review fixes (each also emulated on the host by cuda_math_test):
// - NORM in two passes: rows with a large mean lost their variance to E[x^2] - mean^2.
// - Row kernels on a 1-D grid: more than 65535 rows in ne2 failed to launch with a (ne1, ne2, ne3) grid.
TEST_F(CudaOps, NormLargeMeanAndManyRows) {
  HostTensor a = test::RandomTensor(GgmlType::F32, {4096, 3, 1, 1}, 60);
  for (int64_t i = 0; i < 3 * 4096; ++i) reinterpret_cast<float*>(a.bytes.data())[i] += 300.f;
  HostTensor d = test::ZeroF32({4096, 3, 1, 1});
  exec::NodeCall c = Call(GgmlOp::NORM, d.v, {a.v});
  const float eps[1] = {1e-5f};
  c.fparams = eps;
  c.n_fparams = 1;
  EXPECT_LT(Compare(c, {a.bytes.size()}, d, 1e-4, 1e-4), 1.0) << "NORM of rows with mean 300";
  HostTensor many = test::RandomTensor(GgmlType::F32, {8, 2, 70000, 1}, 61);
  for (GgmlOp op : {GgmlOp::RMS_NORM, GgmlOp::SOFT_MAX}) {
    HostTensor dm = test::ZeroF32({8, 2, 70000, 1});
    exec::NodeCall cm = Call(op, dm.v, {many.v});
    const float fp[2] = {op == GgmlOp::SOFT_MAX ? 0.5f : 1e-5f, 0.f};
    cm.fparams = fp;
    cm.n_fparams = GetOpTraits(op).n_fparams;  // {scale, max_bias} or {eps}
    EXPECT_LT(Compare(cm, {many.bytes.size()}, dm, 1e-5, 1e-4), 1.0) << GgmlOpName(op) << " with 140000 rows";
  }
}

// The mat-vec with more batch matrices than gridDim.z allows (several launches).
TEST_F(CudaOps, MulMatVecBatchBeyondGridZ) {
  HostTensor w = test::RandomTensor(GgmlType::Q8_0, {32, 3, 1, 1}, 62);
  HostTensor x = test::RandomTensor(GgmlType::F32, {32, 1, 70001, 1}, 63);
  HostTensor d = test::ZeroF32({3, 1, 70001, 1});
  for (size_t i = 0; i < d.bytes.size() / 4; ++i) reinterpret_cast<float*>(d.bytes.data())[i] = NAN;
  exec::NodeCall g = Call(GgmlOp::MUL_MAT, d.v, {w.v, x.v});
  g.src[0] = Upload(w.v, w.bytes.size());
  g.src[1] = Upload(x.v, x.bytes.size());
  g.dst = Upload(d.v, d.bytes.size());
  Status st = gpu_->Compute(g);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(bufs_.back()->Read(0, d.bytes.data(), d.bytes.size()).ok());
  std::vector<float> row(32);
  ASSERT_TRUE(cpu::DequantizeRow(GgmlType::Q8_0, w.bytes.data() + 2 * w.v.nb[1], row.data(), 32).ok());
  const float* xl = reinterpret_cast<const float*>(x.bytes.data() + 70000 * x.v.nb[2]);
  double ref = 0;
  for (int k = 0; k < 32; ++k) ref += double(row[k]) * xl[k];
  const float got = reinterpret_cast<const float*>(d.bytes.data() + 70000 * d.v.nb[2])[2];
  EXPECT_NEAR(got, ref, 1e-4) << "last batch matrix, last row";
}

// GET_ROWS with an index outside src0: Synchronize reports it (kOutOfRange, naming the index), the
// row is NaN, and the device stays usable (no illegal address): the next run is clean.
TEST_F(CudaOps, GetRowsOutOfRangeIndex) {
  HostTensor w = test::RandomTensor(GgmlType::Q8_0, {64, 2, 1, 1}, 64);
  const HostTensor ids = I32Tensor({1, 1000000}, 2);
  HostTensor d = test::ZeroF32({64, 2, 1, 1});
  exec::NodeCall g = Call(GgmlOp::GET_ROWS, d.v, {w.v, ids.v});
  g.src[0] = Upload(w.v, w.bytes.size());
  g.src[1] = Upload(ids.v, ids.bytes.size());
  g.dst = Upload(d.v, d.bytes.size());
  ASSERT_TRUE(gpu_->Compute(g).ok());
  Status st = gpu_->Synchronize();
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("index 1000000 is outside [0, 2)"), std::string::npos) << st.ToString();
  ASSERT_TRUE(bufs_.back()->Read(0, d.bytes.data(), d.bytes.size()).ok());
  const float* out = reinterpret_cast<const float*>(d.bytes.data());
  EXPECT_FALSE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[64]));
  const int32_t good[2] = {1, 0};
  ASSERT_TRUE(bufs_[1]->Write(0, good, 8).ok());
  ASSERT_TRUE(gpu_->Compute(g).ok());
  EXPECT_TRUE(gpu_->Synchronize().ok()) << "the error record was not cleared";
}

// New CUDA0 buffers are zeroed on the backend's stream (a cudaMemset on the legacy stream could land
// after a Write on the non-blocking stream and erase it).
TEST_F(CudaOps, NewBufferZeroedBeforeWrites) {
  for (int rep = 0; rep < 20; ++rep) {
    auto buf = gpu_->Allocate("CUDA0", 64 << 20, 256);
    ASSERT_TRUE(buf.ok());
    std::vector<uint8_t> pattern(4096, uint8_t(rep + 1)), back(8192, 0xEE);
    ASSERT_TRUE((*buf)->Write((64 << 20) - 4096, pattern.data(), pattern.size()).ok());
    ASSERT_TRUE((*buf)->Read((64 << 20) - 8192, back.data(), back.size()).ok());
    for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(back[i], 0) << "byte " << i << " not zeroed";
    for (size_t i = 4096; i < 8192; ++i)
      ASSERT_EQ(back[i], uint8_t(rep + 1)) << "written byte " << i << " lost";
  }
}

// The KV cache's transposed V store: F32 [n_tokens, n_embd] (a transposed view) into an F16 cache
// view with nb0 = n_ctx * 2, bit for bit as the CPU.
TEST_F(CudaOps, TransposedF16CacheStore) {
  const int64_t n_embd = 24, n_tokens = 3, n_ctx = 32, kv_head = 7;
  HostTensor v = test::RandomTensor(GgmlType::F32, {n_embd, n_tokens, 1, 1}, 65);
  cpu::TensorView src = v.v;
  src.ne[0] = n_tokens;
  src.ne[1] = n_embd;
  src.nb[0] = size_t(n_embd) * 4;
  src.nb[1] = 4;
  HostTensor cache = test::RandomTensor(GgmlType::F16, {n_ctx, n_embd, 1, 1}, 66), back = cache;
  back.v.data = back.bytes.data();
  cpu::TensorView view = cache.v;
  view.ne[0] = n_tokens;
  view.data = cache.bytes.data() + kv_head * 2;
  exec::NodeCall c = Call(GgmlOp::CPY, view, {src});
  exec::NodeCall g = c;
  g.src[0] = Upload(v.v, v.bytes.size());
  g.src[0].ne[0] = n_tokens;
  g.src[0].ne[1] = n_embd;
  g.src[0].nb[0] = src.nb[0];
  g.src[0].nb[1] = 4;
  cpu::TensorView dev_cache = Upload(cache.v, cache.bytes.size());
  g.dst = view;
  g.dst.data = static_cast<uint8_t*>(dev_cache.data) + kv_head * 2;
  ASSERT_TRUE(gpu_->Compute(g).ok());
  ASSERT_TRUE(bufs_.back()->Read(0, back.bytes.data(), back.bytes.size()).ok());
  ASSERT_TRUE(cpu_->Compute(c).ok());
  EXPECT_TRUE(back.bytes == cache.bytes) << "the GPU's F16 cache differs from the CPU's";
}

// The MoE graphs' routing ops (qwen3moe, glm4moe, gpt-oss, deepseek2 with -ngl 99) against the CPU
// backend: SIGMOID, DIV (expert weights over their sum), SUM_ROWS, CONCAT (deepseek2's heads),
// SET_ROWS and FILL (deepseek2's group-limited routing) and ARGSORT (the top-k; indices equal, ties
// included).
TEST_F(CudaOps, MoeRoutingOps) {
  HostTensor a = test::RandomTensor(GgmlType::F32, {67, 5, 3, 2}, 60);
  HostTensor b = test::RandomTensor(GgmlType::F32, {1, 5, 3, 1}, 61);
  const size_t ab = a.bytes.size();
  HostTensor d = test::ZeroF32({67, 5, 3, 2});
  EXPECT_LT(Compare(Call(GgmlOp::SIGMOID, d.v, {a.v}), {ab}, d, 1e-6, 1e-5), 1.0) << "SIGMOID";
  HostTensor d2 = test::ZeroF32({67, 5, 3, 2});
  EXPECT_LT(Compare(Call(GgmlOp::DIV, d2.v, {a.v, b.v}), {ab, b.bytes.size()}, d2, 1e-6, 1e-6), 1.0) << "DIV";
  HostTensor d3 = test::ZeroF32({1, 5, 3, 2});
  EXPECT_LT(Compare(Call(GgmlOp::SUM_ROWS, d3.v, {a.v}), {ab}, d3, 1e-6, 1e-6), 1.0) << "SUM_ROWS";
  HostTensor c = test::RandomTensor(GgmlType::F32, {13, 5, 3, 2}, 62);
  HostTensor d4 = test::ZeroF32({80, 5, 3, 2});
  exec::NodeCall cc = Call(GgmlOp::CONCAT, d4.v, {a.v, c.v});
  const int32_t dim0[1] = {0};
  cc.iparams = dim0;
  cc.n_iparams = 1;
  EXPECT_LT(Compare(cc, {ab, c.bytes.size()}, d4, 0, 0), 1.0) << "CONCAT";
  // SET_ROWS of 2 F32 rows into an F16 [67, 9] at I32 indices (deepseek2's group routing writes F32).
  HostTensor rows = test::RandomTensor(GgmlType::F32, {67, 2, 1, 1}, 64);
  const HostTensor at = I32Tensor({7, 2}, 2);
  for (GgmlType dt : {GgmlType::F32, GgmlType::F16}) {
    HostTensor want = test::RandomTensor(dt, {67, 9, 1, 1}, 65), got;
    ASSERT_TRUE(RunBoth(Call(GgmlOp::SET_ROWS, want.v, {rows.v, at.v}), {rows.bytes.size(), at.bytes.size()},
                        want, &got));
    EXPECT_EQ(got.bytes, want.bytes) << "SET_ROWS into " << GgmlTypeName(dt);
  }
  // FILL: every element -inf.
  HostTensor filled = test::ZeroF32({67, 5, 3, 2});
  exec::NodeCall fc = Call(GgmlOp::FILL, filled.v, {a.v});
  const float minus_inf[1] = {-INFINITY};
  fc.fparams = minus_inf;
  fc.n_fparams = 1;
  fc.src[0] = Upload(a.v, ab);
  fc.dst = Upload(filled.v, filled.bytes.size());
  ASSERT_TRUE(gpu_->Compute(fc).ok());
  ASSERT_TRUE(bufs_.back()->Read(0, filled.bytes.data(), filled.bytes.size()).ok());
  for (int64_t i = 0; i < filled.v.nelements(); ++i)
    EXPECT_EQ(reinterpret_cast<const float*>(filled.bytes.data())[i], -INFINITY) << "FILL " << i;
  for (int64_t ncols : {8, 128, 256, 1000}) {
    HostTensor x = test::RandomTensor(GgmlType::F32, {ncols, 9, 1, 1}, 63);
    float* xs = reinterpret_cast<float*>(x.bytes.data());
    for (int64_t i = 0; i < ncols; i += 3) xs[i] = 0.5f;  // ties in row 0
    HostTensor want, got;
    want.v = x.v;
    want.v.type = GgmlType::I32;
    want.bytes.assign(x.bytes.size(), 0);
    want.v.data = want.bytes.data();
    const int32_t desc[1] = {1};
    exec::NodeCall g = Call(GgmlOp::ARGSORT, want.v, {x.v});
    g.iparams = desc;
    g.n_iparams = 1;
    ASSERT_TRUE(RunBoth(g, {x.bytes.size()}, want, &got));
    EXPECT_EQ(got.bytes, want.bytes) << "ARGSORT of rows of " << ncols;
  }
}

// MUL_MAT_ID of every weight type against a double dot of the dequantized expert rows: 3 tokens
// (the mat-vec reading the ids on the device) and 40 (ids copied to the host, the experts' runs
// gathered, multiplied by MUL_MAT's paths and scattered), src1 of one column per token (gate / up)
// or one per slot (down).
TEST_F(CudaOps, MulMatIdAllWeightTypes) {
  const int64_t K = 256, N = 40, n_as = 6, n_used = 4;
  for (GgmlType t : kAllWeightTypes) {
    for (int64_t n_tokens : {3, 40}) {
      for (int64_t ne11 : {1, 4}) {
        HostTensor w = Weights(t, {K, N, n_as, 1}, 70);
        HostTensor x = test::RandomTensor(GgmlType::F32, {K, ne11, n_tokens, 1}, 71);
        std::vector<int32_t> id(static_cast<size_t>(n_used * n_tokens));
        for (int64_t i = 0; i < n_used * n_tokens; ++i) id[size_t(i)] = int32_t((i * 5 + i / n_used) % n_as);
        const HostTensor ids = I32Tensor(id, n_used, n_tokens);
        HostTensor d = test::ZeroF32({N, n_used, n_tokens, 1});
        exec::NodeCall g = Call(GgmlOp::MUL_MAT_ID, d.v, {w.v, x.v, ids.v});
        g.src[0] = Upload(w.v, w.bytes.size());
        g.src[1] = Upload(x.v, x.bytes.size());
        g.src[2] = Upload(ids.v, ids.bytes.size());
        g.dst = Upload(d.v, d.bytes.size());
        const Status st = gpu_->Compute(g);
        ASSERT_TRUE(st.ok()) << GgmlTypeName(t) << ": " << st.ToString();
        ASSERT_TRUE(gpu_->Synchronize().ok());
        ASSERT_TRUE(bufs_.back()->Read(0, d.bytes.data(), d.bytes.size()).ok());
        const double rel = (t == GgmlType::F32) ? 1e-5 : (t == GgmlType::BF16 ? 1e-2 : 2e-3);
        double worst = 0;
        std::vector<float> row(K);
        for (int64_t tok = 0; tok < n_tokens; ++tok)
          for (int64_t s = 0; s < n_used; ++s) {
            const int32_t e = id[tok * n_used + s];
            const float* xr = reinterpret_cast<const float*>(x.bytes.data()) + (tok * ne11 + s % ne11) * K;
            for (int64_t n = 0; n < N; ++n) {
              ASSERT_TRUE(
                  cpu::DequantizeRow(t, w.bytes.data() + e * w.v.nb[2] + n * w.v.nb[1], row.data(), K).ok());
              double ref = 0, mag = 0;
              for (int64_t k = 0; k < K; ++k) {
                ref += double(row[k]) * xr[k];
                mag += std::fabs(double(row[k]) * xr[k]);
              }
              const float got = reinterpret_cast<const float*>(d.bytes.data())[(tok * n_used + s) * N + n];
              worst = std::max(worst, std::fabs(got - ref) / (1e-6 + rel * mag));
            }
          }
        EXPECT_LT(worst, 1.0) << GgmlTypeName(t) << " n_tokens " << n_tokens << " ne11 " << ne11;
      }
    }
  }
}

TEST_F(CudaOps, RefusesWhatItCannotRun) {
  HostTensor w = test::RandomTensor(GgmlType::IQ2_XXS, {256, 4, 1, 1}, 50);
  HostTensor x = test::RandomTensor(GgmlType::F32, {256, 2, 1, 1}, 51);
  HostTensor d = test::ZeroF32({4, 2, 1, 1});
  exec::NodeCall g = Call(GgmlOp::MUL_MAT, d.v, {w.v, x.v});
  g.src[0] = Upload(w.v, w.bytes.size());
  g.src[1] = Upload(x.v, x.bytes.size());
  g.dst = Upload(d.v, d.bytes.size());
  Status s = gpu_->Compute(g);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  exec::NodeCall ssm;
  ssm.op = GgmlOp::SSM_CONV;
  ssm.name = "ssm";
  EXPECT_EQ(gpu_->Compute(ssm).code(), StatusCode::kUnimplemented);
}

// Stowage's fused ops on the device against the ops they replace, also run on the device: the same
// bytes. MUL_MAT_GLU of Q4_0 weights at 1 column (MulMatVecGluK) and 33 (cuBLAS), of F16 weights
// (cuBLAS), SWIGLU and the Feb 2025 form SILU then MUL; ROPE_SET_ROWS and ROPE_CPY into F16 caches.
TEST_F(CudaOps, FusedOpsEqualTheOpsTheyReplace) {
  auto run = [&](const exec::NodeCall& g) {
    Status s = gpu_->Compute(g);
    EXPECT_TRUE(s.ok()) << g.name << ": " << s.ToString();
  };
  // Reads the device tensor `v` (contiguous, of `host`'s size) back.
  auto read = [&](const cpu::TensorView& v, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    EXPECT_TRUE(gpu_->Synchronize().ok());
    EXPECT_EQ(cudaMemcpy(out.data(), v.data, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  };
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::F16}) {
    for (int64_t M : {1, 33}) {
      for (int glu : {0, 2}) {  // MulMatGluKind: SWIGLU, SILU then MUL
        const int64_t K = 256, N = 40;
        HostTensor gate = Weights(t, {K, N, 1, 1}, 60), up = Weights(t, {K, N, 1, 1}, 61);
        HostTensor x = test::RandomTensor(GgmlType::F32, {K, M, 1, 1}, 62), d = test::ZeroF32({N, M, 1, 1});
        const size_t db = d.bytes.size();
        const cpu::TensorView gd = Upload(gate.v, gate.bytes.size()), ud = Upload(up.v, up.bytes.size()),
                              xd = Upload(x.v, x.bytes.size()), fd = Upload(d.v, db), gp = Upload(d.v, db),
                              upd = Upload(d.v, db), act = Upload(d.v, db), sd = Upload(d.v, db);
        exec::NodeCall f = Call(GgmlOp::MUL_MAT_GLU, fd, {gd, xd, ud});
        f.iparams = &glu;
        f.n_iparams = 1;
        run(f);
        run(Call(GgmlOp::MUL_MAT, gp, {gd, xd}));
        run(Call(GgmlOp::MUL_MAT, upd, {ud, xd}));
        if (glu == 0) {
          run(Call(GgmlOp::SWIGLU, sd, {gp, upd}));
        } else {
          run(Call(GgmlOp::SILU, act, {gp}));
          run(Call(GgmlOp::MUL, sd, {act, upd}));
        }
        EXPECT_EQ(read(fd, db), read(sd, db))
            << "MUL_MAT_GLU " << GgmlTypeName(t) << " M " << M << " glu " << glu;
      }
    }
  }
  const int64_t hd = 64, nh = 4, nt = 7, n_rows = 16;
  HostTensor x = test::RandomTensor(GgmlType::F32, {hd, nh, nt, 1}, 63);
  std::vector<int32_t> p(nt);
  for (int64_t i = 0; i < nt; ++i) p[size_t(i)] = int32_t(100 * i + 3);
  const HostTensor pos = I32Tensor(p, nt);
  HostTensor idx = I32Tensor({5, 0, 15, 2, 9, 1, 3}, nt);
  HostTensor cache = test::RandomTensor(GgmlType::F16, {hd * nh, n_rows, 1, 1}, 64);
  HostTensor rot = test::ZeroF32({hd, nh, nt, 1});
  const int32_t ip[3] = {48, 2, 4096};
  const float fp[6] = {10000.f, 0.25f, 1.f, 1.f, 32.f, 1.f};
  const cpu::TensorView xd = Upload(x.v, x.bytes.size()), pd = Upload(pos.v, pos.bytes.size()),
                        id = Upload(idx.v, idx.bytes.size()), fused = Upload(cache.v, cache.bytes.size()),
                        plain = Upload(cache.v, cache.bytes.size()), rd = Upload(rot.v, rot.bytes.size());
  auto with_rope = [&](exec::NodeCall c) {
    c.iparams = ip;
    c.n_iparams = 3;
    c.fparams = fp;
    c.n_fparams = 6;
    return c;
  };
  run(with_rope(Call(GgmlOp::ROPE_SET_ROWS, fused, {xd, pd, fused, id})));
  run(with_rope(Call(GgmlOp::ROPE, rd, {xd, pd})));
  cpu::TensorView rows = rd;
  rows.ne[0] = hd * nh;
  rows.ne[1] = nt;
  rows.ne[2] = 1;
  cpu::SetContiguousStrides(rows);
  run(Call(GgmlOp::SET_ROWS, plain, {rows, id}));
  EXPECT_EQ(read(fused, cache.bytes.size()), read(plain, cache.bytes.size())) << "ROPE_SET_ROWS";
  // ROPE_CPY into the cache's view of rows 3 .. 3 + nt (Feb 2025's k_cache_view).
  cpu::TensorView fv = fused, pv = plain;
  for (cpu::TensorView* v : {&fv, &pv}) {
    v->data = static_cast<uint8_t*>(v->data) + 3 * v->nb[1];
    v->ne[0] = hd * nh * nt;
    v->ne[1] = 1;
    cpu::SetContiguousStrides(*v);
  }
  run(with_rope(Call(GgmlOp::ROPE_CPY, fv, {xd, pd, fv})));
  run(Call(GgmlOp::CPY, pv, {rd}));
  EXPECT_EQ(read(fused, cache.bytes.size()), read(plain, cache.bytes.size())) << "ROPE_CPY";
}

// ---- whole models: GPU plans (-ngl 99) against CPU-only plans ------------------------------------

struct ModelCase {
  const char* model;
  float tol;
};
class CudaLogits : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CudaLogits, MatchCpu) {
  if (exec::CudaDeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  const std::string model = test::ModelPath(GetParam().model);
  STOWAGE_REQUIRE_FILE(model);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + (i * 37) % 200);
  test::E2eRun cpu = test::RunPlanned(model, prompt, nullptr, {});
  planner::PlacementOptions opt;
  opt.n_gpu_layers = 99;
  test::E2eRun gpu =
      test::RunPlanned(model, prompt, [](const ProbedDevice& d) { return d.type == DeviceType::kGpu; }, opt);
  ASSERT_FALSE(gpu.logits.empty());
  EXPECT_NE(std::find(gpu.devices.begin(), gpu.devices.end(), "CUDA0"), gpu.devices.end())
      << "nothing was planned on CUDA0";
  EXPECT_GT(gpu.computes["CUDA0"], 0) << "no node ran on CUDA0";
  const float diff = test::MaxAbsDiff(cpu.logits, gpu.logits);
  EXPECT_LE(diff, GetParam().tol);
  std::printf("[ %s ] CUDA vs CPU max |logit diff| = %.5f\n", GetParam().model, diff);
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaLogits,
    ::testing::Values(ModelCase{"stories260K.gguf", 0.02f}, ModelCase{"stories260K-F16.gguf", 0.05f},
                      ModelCase{"stories260K-Q8_0.gguf", 0.25f}, ModelCase{"stories260K-Q4_0.gguf", 0.25f},
                      ModelCase{"stories260K-Q4_K_M.gguf", 0.25f},
                      ModelCase{"llama-2-tiny-random.gguf", 0.05f}, ModelCase{"synth-Q6_K.gguf", 0.25f}),
    [](const ::testing::TestParamInfo<ModelCase>& i) {
      std::string n = i.param.model;
      n = n.substr(0, n.size() - 5);
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace stowage
