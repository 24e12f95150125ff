// The shipped manifests' op tables against the backends' supports_op.
//
// The shipped manifests (planner/registry) describe llama.cpp's backends as of build 4748 (FEB25),
// whose placement plans mirror: ggml-cuda for h100/h200/rtx3090/rtx4090 (the shared table
// op_tables/ggml-cuda.json), ggml-cpu for cpu-avx2/cpu-avx512 (op_tables/ggml-cpu.json), and the
// oneDNN ACCEL device. Stowage's own backends (their op tables: the CPU's in
// runtime/src/backends/cpu/cpu_op_table.cpp and CUDA's in runtime/src/backends/cuda/cuda_op_table.cpp,
// which the backends' Compute also runs by, answered without a GPU; oneDNN's in runtime/src/devices) run a
// subset of what ggml runs, so a table and its backend are not equal; this test pins their difference
// exactly: per backend, the ops the table accepts and the backend runs in no form, and the ops with a query
// that the backend accepts and the table refuses. An op added to a backend, or a rule changed in a table,
// fails here until the lists below say so. (A manifest that list-devices --emit-manifest writes equals its
// backend: probe_agreement_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "stowage/planner/manifest.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/device_probe.h"
#include "support_comparison.h"

namespace stowage::planner {
namespace {

using support_check::ForEachQuery;

const std::string kRegistry = STOWAGE_SHIPPED_REGISTRY_DIR;

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : " ") + x;
  return out;
}

struct Difference {
  std::set<std::string> table_only;    ///< ops the table accepts in some query, the backend in none
  std::set<std::string> backend_only;  ///< ops with a query the backend accepts and the table refuses
  std::string first_backend_only;      ///< such a query, for the message
  size_t backend_supported = 0;
};

Difference Differ(const ProbedDevice& dev, const DeviceManifest& m) {
  std::map<GgmlOp, bool> table_any, backend_any;
  Difference d;
  ForEachQuery([&](const OpQuery& rq) {
    const bool backend = dev.SupportsOp(rq);
    const bool table = m.SupportsOp(rq);
    d.backend_supported += backend;
    table_any[rq.op] = table_any[rq.op] || table;
    backend_any[rq.op] = backend_any[rq.op] || backend;
    if (backend && !table && d.backend_only.insert(GgmlOpName(rq.op)).second && d.first_backend_only.empty())
      d.first_backend_only = support_check::Describe(rq);
  });
  for (const auto& [op, any] : table_any) {
    if (any && !backend_any[op]) d.table_only.insert(GgmlOpName(op));
  }
  return d;
}

Result<DeviceManifest> Shipped(const std::string& key) {
  return LoadManifestFile(kRegistry + "/" + key + ".json");
}

const ProbedDevice* Backend(const std::vector<ProbedDevice>& devs, const std::string& backend) {
  for (const auto& d : devs) {
    if (d.backend == backend) return &d;
  }
  return nullptr;
}

struct Expected {
  const char* manifest;
  const char* backend;  ///< ProbedDevice::backend
  bool avx512;          ///< the CPU the backend devices are made for
  const char* table_only;
  const char* backend_only;
};

// What each shipped manifest's table accepts beyond its Stowage backend (ops the backend does not
// run in any of the compared queries: FLASH_ATTN_EXT and SSM_SCAN need shapes or six sources the
// comparison does not build, and ADD_ID and MUL_MAT_ID an I32 third source where its optional third
// source is F32, so they are not judged here), and the ops where the backend accepts more. Ops
// named in neither list are run by both, the table accepting the same queries or more.
// Adding an op to a backend: remove it from its table_only list here. ALL_REDUCE, the sum over the
// MPI ranks of a tensor split (CPU ranks only), has no CUDA kernel (the ggml-cuda table's default
// "supported" accepts it; the tensor split asks Stowage's CUDA table, which leaves it out);
// ROPE_SET_ROWS, a fused K store, needs its row-index source, which the compared queries do not
// build (its CUDA kernel is checked by cuda_math_test).
const char kGgmlCudaOnly[] =
    "ABS ADD1 ADD_ID ALL_REDUCE ARANGE ARGMAX CONV_TRANSPOSE_1D DIAG_MASK_INF ELU EXP GELU_QUICK GROUP_NORM "
    "HARDSWISH IM2COL L2_NORM MEAN MUL_MAT_ID NEG OUT_PROD PAD POOL_2D REGLU RELU "
    "ROPE_SET_ROWS RWKV_WKV6 RWKV_WKV7 SET SOFTPLUS SQR SQRT SSM_CONV SSM_SCAN SUB TOP_K UPSCALE";
// On the CPU, ALL_REDUCE is summed by the session over the transport (no backend kernel), and
// ROPE_SET_ROWS needs its row-index source, which the compared queries do not build (its CPU
// kernel is checked by cpu_rope_store_test).
const char kGgmlCpuOnly[] =
    "ABS ADD1 ADD_ID ALL_REDUCE ARANGE ARGMAX CONV_TRANSPOSE_1D DIAG_MASK_INF ELU EXP GELU_QUICK GROUP_NORM "
    "HARDSWISH IM2COL L2_NORM MEAN NEG OUT_PROD PAD POOL_2D REGLU RELU ROPE_SET_ROWS RWKV_WKV6 RWKV_WKV7 SET "
    "SOFTPLUS SQR SQRT SSM_SCAN SUB TOP_K UPSCALE";
// Stowage's CPU_REPACK also takes Q4_K and Q8_0 weights (llama.cpp FEB25 repacked Q4_0 only).
const char kStowageRepack[] = "MUL_MAT MUL_MAT_ID";
// Stowage's CUDA flash attention takes F32, BF16, Q8_0 and Q4_0 K and V at any head size up to 512
// (ggml-cuda FEB25: F16 K and V, or a quantized cache at head size 64 / 128 only; never BF16).
const char kStowageCudaFa[] = "FLASH_ATTN_EXT";

const Expected kExpected[] = {
    {"h100", "CUDA", false, kGgmlCudaOnly, kStowageCudaFa},
    {"h200", "CUDA", false, kGgmlCudaOnly, kStowageCudaFa},
    {"rtx3090", "CUDA", false, kGgmlCudaOnly, kStowageCudaFa},
    {"rtx4090", "CUDA", false, kGgmlCudaOnly, kStowageCudaFa},
    {"cpu-avx2", "CPU", false, kGgmlCpuOnly, kStowageRepack},
    {"cpu-avx512", "CPU", true, kGgmlCpuOnly, kStowageRepack},
    {"onednn", "ONEDNN", true, "", ""},
};
// Shipped manifests of backends Stowage does not have.
const char* const kNoStowageBackend[] = {"rpc"};

TEST(ShippedOpTables, DifferFromTheBackendsExactlyAsListed) {
  std::map<std::string, Difference> differences;
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.manifest);
    auto m = Shipped(e.manifest);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    CpuInfo cpu;
    cpu.features.avx = cpu.features.avx2 = cpu.features.fma = cpu.features.f16c = true;
    cpu.features.avx512f = cpu.features.avx512bw = cpu.features.avx512vl = e.avx512;
    auto devs = BackendDevicesOfThisBuild(cpu);
    // The CUDA backend's op table is built without CUDA too (runtime/src/backends/cuda/
    // cuda_op_table.h); there its weight types are the CPU backend's set, which is the one
    // exec::CudaSupportsWeightType documents, so the GPU manifests are compared on every build.
    if (Backend(devs, "CUDA") == nullptr) devs.push_back(MakeCudaDevice(CudaDeviceInfo{}));
    const ProbedDevice* dev = Backend(devs, e.backend);
    if (dev == nullptr) {
      std::cout << e.manifest << ": this build has no " << e.backend << " backend; not compared\n";
      continue;
    }
    DeviceManifest inst = m->WithIndex(0);
    // Manifests that differ only in figures (the four GPUs) are compared once.
    DeviceManifest rules_only = inst;
    rules_only.description.clear();
    rules_only.memory_total = rules_only.memory_free = rules_only.memory_reserve = 0;
    rules_only.performance = {};
    rules_only.notes.clear();
    const std::string key = ManifestDigest(rules_only) + " " + e.backend + (e.avx512 ? " avx512" : "");
    auto cached = differences.find(key);
    if (cached == differences.end()) cached = differences.emplace(key, Differ(*dev, inst)).first;
    const Difference& d = cached->second;
    EXPECT_GT(d.backend_supported, 1000u);
    EXPECT_EQ(Join(d.table_only), e.table_only);
    EXPECT_EQ(Join(d.backend_only), e.backend_only) << "e.g. " << d.first_backend_only;
  }
}

}  // namespace
}  // namespace stowage::planner

namespace stowage::planner {
namespace {

std::vector<std::string> ShippedKeys() {
  auto reg = Registry::Open({kRegistry});
  EXPECT_TRUE(reg.ok()) << reg.status().ToString();
  std::vector<std::string> keys;
  if (reg.ok()) {
    keys = reg->Names();
  }
  return keys;
}

TEST(ShippedOpTables, EveryShippedManifestIsCompared) {
  for (const std::string& key : ShippedKeys()) {
    if (key == "cpu") continue;  // a link to cpu-avx2
    bool listed = std::any_of(std::begin(kExpected), std::end(kExpected),
                              [&](const Expected& e) { return key == e.manifest; }) ||
                  std::any_of(std::begin(kNoStowageBackend), std::end(kNoStowageBackend),
                              [&](const char* k) { return key == k; });
    EXPECT_TRUE(listed) << key << ".json: add it to kExpected (or kNoStowageBackend)";
  }
}

// The GPU manifests share ggml-cuda's table, the CPU manifests ggml-cpu's: by reference, so that one
// file holds each backend's rules.
TEST(ShippedOpTables, ManifestsReferenceTheSharedTables) {
  const std::map<std::string, std::string> table_of = {{"h100", "ggml-cuda"},    {"h200", "ggml-cuda"},
                                                       {"rtx3090", "ggml-cuda"}, {"rtx4090", "ggml-cuda"},
                                                       {"cpu-avx2", "ggml-cpu"}, {"cpu-avx512", "ggml-cpu"}};
  for (const auto& [key, table] : table_of) {
    SCOPED_TRACE(key);
    std::ifstream in(kRegistry + "/" + key + ".json");
    std::stringstream text;
    text << in.rdbuf();
    auto raw = nlohmann::json::parse(text.str());
    EXPECT_EQ(raw["op_support"], nlohmann::json({{"table", table}}));
    auto m = Shipped(key);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto t = LoadOpTableFile(kRegistry + "/op_tables/" + table + ".json");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE(m->op_support == *t);
    EXPECT_FALSE(t->rules.empty());
  }
}

}  // namespace
}  // namespace stowage::planner
