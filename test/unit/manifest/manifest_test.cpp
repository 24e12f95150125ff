// Manifest parsing: every shipped and test manifest parses and round-trips; each kind of bad
// manifest is rejected with file, JSON path and expectation.
#include "stowage/planner/manifest.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace stowage::planner {
namespace {

std::vector<std::string> JsonFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string f = e->d_name;
      if (f.size() > 5 && f.substr(f.size() - 5) == ".json") out.push_back(dir + "/" + f);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgmlOp, NamesRoundTrip) {
  for (size_t i = 0; i < kGgmlOpCount; ++i) {
    auto op = static_cast<GgmlOp>(i);
    auto parsed = ParseGgmlOp(GgmlOpName(op));
    ASSERT_TRUE(parsed.ok()) << GgmlOpName(op);
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(*ParseGgmlOp("MUL_MAT"), GgmlOp::MUL_MAT);
  EXPECT_FALSE(ParseGgmlOp("mul_mat").ok());  // manifests spell ops as ggml prints them
  EXPECT_STREQ(GgmlOpName(GgmlOp::SSM_SCAN), "SSM_SCAN");
  auto bad = ParseGgmlOp("MULMAT");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown ggml op 'MULMAT'");
  EXPECT_TRUE(IsUnaryOp(GgmlOp::SILU));
  EXPECT_FALSE(IsUnaryOp(GgmlOp::SWIGLU));
  EXPECT_TRUE(IsGluOp(GgmlOp::SWIGLU));
  EXPECT_TRUE(IsViewOrNoneOp(GgmlOp::PERMUTE));
  EXPECT_FALSE(IsViewOrNoneOp(GgmlOp::CPY));
}

TEST(GgmlOp, BatchSizeFollowsGgmlCuda) {
  OpQuery q;
  q.dst.ne = {256, 7, 5, 1};
  q.op = GgmlOp::GET_ROWS;
  EXPECT_EQ(OpBatchSize(q), 0);
  q.op = GgmlOp::MUL_MAT;
  EXPECT_EQ(OpBatchSize(q), 7);
  q.op = GgmlOp::ROPE;
  EXPECT_EQ(OpBatchSize(q), 5);
  q.op = GgmlOp::MUL_MAT_ID;
  EXPECT_EQ(OpBatchSize(q), 5);
  q.op = GgmlOp::ADD;
  EXPECT_EQ(OpBatchSize(q), 35);
}

TEST(GgmlOp, VecDotType) {
  EXPECT_EQ(VecDotType(GgmlType::Q4_0), GgmlType::Q8_0);
  EXPECT_EQ(VecDotType(GgmlType::Q4_1), GgmlType::Q8_1);
  EXPECT_EQ(VecDotType(GgmlType::Q6_K), GgmlType::Q8_K);
  EXPECT_EQ(VecDotType(GgmlType::F16), GgmlType::F16);
}

void ExpectAllParseAndRoundTrip(const std::string& dir, size_t min_count) {
  auto files = JsonFiles(dir);
  ASSERT_GE(files.size(), min_count) << dir;
  for (const auto& f : files) {
    auto m = LoadManifestFile(f);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::string text = SerializeManifest(*m);
    auto again = ParseManifest(text, f + " (reserialized)");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(*again == *m) << f << " does not round-trip:\n" << text;
    EXPECT_EQ(SerializeManifest(*again), text) << f;
  }
}

TEST(Manifest, ShippedRegistryParsesAndRoundTrips) {
  ExpectAllParseAndRoundTrip(STOWAGE_SHIPPED_REGISTRY_DIR, 8);
}

TEST(Manifest, TestInputsParseAndRoundTrip) { ExpectAllParseAndRoundTrip(STOWAGE_TEST_MANIFESTS_DIR, 6); }

TEST(Manifest, ShippedFiguresHaveSources) {
  for (const auto& f : JsonFiles(STOWAGE_SHIPPED_REGISTRY_DIR)) {
    auto m = LoadManifestFile(f);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const Performance& p = m->performance;
    EXPECT_TRUE(p.memory_bandwidth || p.host_link_bandwidth) << f << ": no bandwidth figure";
    if (p.memory_bandwidth) EXPECT_FALSE(p.memory_bandwidth->source.empty());
    for (const auto& [k, fig] : p.peak_flops) EXPECT_GT(fig.source.size(), 10u) << f << " " << k;
  }
}

TEST(Manifest, H200Fields) {
  auto m = LoadManifestFile(std::string(STOWAGE_SHIPPED_REGISTRY_DIR) + "/h200.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->type, DeviceType::kGpu);
  EXPECT_EQ(m->backend, "CUDA");
  EXPECT_EQ(m->memory_total, 141ull << 30);
  EXPECT_TRUE(m->caps.async);
  EXPECT_TRUE(m->caps.host_buffer);
  ASSERT_TRUE(m->host_buft.has_value());
  EXPECT_EQ(m->host_buft->name, "CUDA_Host");
  EXPECT_EQ(m->default_buft.alignment, 128u);
  ASSERT_TRUE(m->offload_op.has_value());
  EXPECT_EQ(m->offload_op->min_batch, 32);
  EXPECT_DOUBLE_EQ(m->performance.memory_bandwidth->value, 4.8e12);
  EXPECT_TRUE(m->IsIndexed());
  DeviceManifest d1 = m->WithIndex(1);
  EXPECT_EQ(d1.name, "CUDA1");
  EXPECT_EQ(d1.default_buft.name, "CUDA1");
  EXPECT_EQ(d1.split_buft->name, "CUDA1_Split");
  EXPECT_EQ(d1.host_buft->name, "CUDA_Host");
}

// ---- bad manifests ----------------------------------------------------------------------------

const char* kMinimal = R"({
  "manifest_version": 1, "backend": "RPC", "name": "RPC[x]", "description": "d", "type": "GPU",
  "memory": {"total": 1000, "free": 500},
  "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": false, "events": false},
  "buffer_types": {"default": {"name": "RPC[x]", "alignment": 32, "is_host": false}},
  "op_support": {"default": "supported"}
})";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

std::string ErrorOf(const std::string& text) {
  auto m = ParseManifest(text, "bad.json");
  if (m.ok()) return "(parsed)";
  return m.status().message();
}

TEST(ManifestErrors, MinimalIsValid) {
  auto m = ParseManifest(kMinimal, "min.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->memory_reserve, 0u);
  EXPECT_FALSE(m->offload_op.has_value());
  EXPECT_TRUE(m->op_support.default_supported);
}

TEST(ManifestErrors, Syntax) {
  auto m = ParseManifest("{\"manifest_version\": 1,,}", "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find("bad.json: byte 24: JSON syntax error"), std::string::npos)
      << m.status().message();
  EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  auto overflow = ParseManifest("{\"manifest_version\": 1e999}", "bad.json");
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().message(), "bad.json: JSON value error: number overflow parsing '1e999'");
}

TEST(ManifestErrors, UnknownKeys) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"free\": 500", "\"fre\": 500")),
            "bad.json: $.memory: unknown key 'fre' (expected one of: total, free, reserve)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"type\": \"GPU\"", "\"type\": \"GPU\", \"colour\": 1")).substr(0, 36),
            "bad.json: $: unknown key 'colour' (e");
  // supports_op is only allowed on extra buffer types.
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"is_host\": false}}", "\"is_host\": false, \"supports_op\": []}}")),
            "bad.json: $.buffer_types.default: unknown key 'supports_op' (expected one of: name, alignment, "
            "max_size, is_host, note)");
}

TEST(ManifestErrors, MissingFields) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"type\": \"GPU\",", "")),
            "bad.json: $: missing required field 'type' (CPU | GPU | ACCEL)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"events\": false", "\"event\": false")),
            "bad.json: $.caps: unknown key 'event' (expected one of: async, host_buffer, "
            "buffer_from_host_ptr, events)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"alignment\": 32, ", "")),
            "bad.json: $.buffer_types.default: missing required field 'alignment' (bytes)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"manifest_version\": 1, ", "")),
            "bad.json: $: missing required field 'manifest_version' (format version)");
}

TEST(ManifestErrors, WrongTypes) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"free\": 500", "\"free\": \"500\"")),
            "bad.json: $.memory.free: expected an unsigned integer (bytes), got string");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"async\": false", "\"async\": 0")),
            "bad.json: $.caps.async: expected true or false, got number");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"total\": 1000", "\"total\": 1e3")),
            "bad.json: $.memory.total: expected an unsigned integer (bytes), got number");
  EXPECT_EQ(
      ErrorOf(Replace(kMinimal, "\"default\": \"supported\"}", "\"default\": \"supported\", \"rules\": {}}")),
      "bad.json: $.op_support.rules: expected an array of rules, got object");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"type\": \"GPU\"", "\"type\": \"NPU\"")),
            "bad.json: $.type: expected CPU, GPU or ACCEL, got \"NPU\"");
}

TEST(ManifestErrors, OutOfRange) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"free\": 500", "\"free\": 2000")),
            "bad.json: $.memory.free: 2000 is out of range (must be <= memory.total = 1000)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"free\": 500", "\"free\": -5")),
            "bad.json: $.memory.free: -5 is out of range (expected bytes, >= 0)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"alignment\": 32", "\"alignment\": 48")),
            "bad.json: $.buffer_types.default.alignment: 48 is out of range (must be a power of two up to "
            "65536, the most a "
            "plan records)");
  // A power of two above what a plan can record (the plan verifier's limit) is refused here, not
  // after planning (plan-model must not write plans that plan-dump then rejects).
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"alignment\": 32", "\"alignment\": 131072")),
            "bad.json: $.buffer_types.default.alignment: 131072 is out of range (must be a power of two up "
            "to 65536, the "
            "most a plan records)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"manifest_version\": 1", "\"manifest_version\": 7")),
            "bad.json: $.manifest_version: unsupported version 7 (this build reads 1)");
  EXPECT_EQ(
      ErrorOf(Replace(kMinimal, "\"op_support\": {\"default\": \"supported\"}",
                      "\"op_support\": {\"default\": \"supported\"}, \"offload_op\": {\"min_batch\": 0}")),
      "bad.json: $.offload_op.min_batch: 0 is out of range (must be 1..2^30)");
}

TEST(ManifestErrors, RuleContents) {
  auto with_rules = [](const std::string& rules) {
    return Replace(kMinimal, "\"default\": \"supported\"}",
                   "\"default\": \"supported\", \"rules\": " + rules + "}");
  };
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": ["MUL_MAT", "MULMAT"], "supported": true}])")),
            "bad.json: $.op_support.rules[0].ops[1]: unknown ggml op 'MULMAT'");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*", "supported": true, "src": [null, {"types": ["q4_9"]}]}])")),
            "bad.json: $.op_support.rules[0].src[1].types[0]: unknown ggml type 'q4_9'");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*"}])")),
            "bad.json: $.op_support.rules[0]: missing required field 'supported' (true or false)");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*", "supported": true, "dst": {"max_dims": 5}}])")),
            "bad.json: $.op_support.rules[0].dst.max_dims: 5 is out of range (must be 1..4)");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*", "supported": true, "dst": {"ne_multiple_of": [1, 0]}}])")),
            "bad.json: $.op_support.rules[0].dst.ne_multiple_of[1]: 0 is out of range (must be >= 1)");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "all", "supported": true}])")),
            "bad.json: $.op_support.rules[0].ops: expected \"*\" or an array of ggml op names, got \"all\"");
}

// A rule's "buft" must name one of the device's own buffer types: a typo was accepted and the rule
// silently never matched.
TEST(ManifestErrors, RuleBuftMustBeDefined) {
  auto with_rules = [](const std::string& rules) {
    return Replace(kMinimal, "\"default\": \"supported\"}",
                   "\"default\": \"supported\", \"rules\": " + rules + "}");
  };
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*", "supported": true, "src": [{"buft": "RPC[x]"}]}])")),
            "(parsed)");
  EXPECT_EQ(ErrorOf(with_rules(R"([{"ops": "*", "supported": true, "src": [null, {"buft": "RPC[y]"}]}])")),
            "bad.json: $.op_support.rules[0].src[1].buft: buffer type 'RPC[y]' is not defined by this "
            "manifest (its "
            "buffer types: RPC[x])");
  EXPECT_EQ(
      ErrorOf(with_rules(R"([{"ops": "*", "supported": false, "dst": {"buft": "CUDA0"}}])")),
      "bad.json: $.op_support.rules[0].dst.buft: buffer type 'CUDA0' is not defined by this manifest (its "
      "buffer types: RPC[x])");
  // The rules of an extra buffer type too.
  const std::string extra = Replace(
      kMinimal, "\"is_host\": false}}",
      "\"is_host\": false}, \"extra\": [{\"name\": \"X_REPACK\", \"alignment\": 32, \"is_host\": true, "
      "\"supports_op\": [{\"ops\": [\"MUL_MAT\"], \"supported\": true, \"src\": [{\"buft\": "
      "\"X_REPAK\"}]}]}]}");
  EXPECT_EQ(ErrorOf(extra),
            "bad.json: $.buffer_types.extra[0].supports_op[0].src[0].buft: buffer type 'X_REPAK' is "
            "not defined by this manifest (its buffer types: RPC[x], X_REPACK)");
}

// supports_buft.names must name a buffer type of this manifest: "GHOST" was accepted, then placement
// failed with "pre-allocated tensor ... cannot run the operation (NONE)" naming no file.
TEST(ManifestErrors, SupportsBuftNamesMustBeDefined) {
  const std::string base =
      Replace(kMinimal, "\"op_support\"", "\"supports_buft\": {\"names\": [\"RPC[x]\"]}, \"op_support\"");
  EXPECT_EQ(ErrorOf(base), "(parsed)");
  EXPECT_EQ(
      ErrorOf(Replace(base, "[\"RPC[x]\"]", "[\"RPC[x]\", \"GHOST\"]")),
      "bad.json: $.supports_buft.names[1]: buffer type 'GHOST' is not defined by this manifest (its buffer "
      "types: RPC[x])");
}

// The backend is one this build knows, with ggml's device type for it: "VULKAN" was accepted, and so
// were a GPU-typed manifest of backend CPU and a GPU whose own buffers were said to be host memory.
TEST(ManifestErrors, BackendKnownAndMatchingItsType) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"backend\": \"RPC\"", "\"backend\": \"VULKAN\"")),
            "bad.json: $.backend: unknown backend \"VULKAN\" (expected one of CPU, CUDA, RPC, BLAS, ONEDNN)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"backend\": \"RPC\"", "\"backend\": \"CPU\"")),
            "bad.json: $.type: expected CPU for backend CPU (ggml's device type for it), got \"GPU\"");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"type\": \"GPU\"", "\"type\": \"ACCEL\"")),
            "bad.json: $.type: expected GPU for backend RPC (ggml's device type for it), got \"ACCEL\"");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"backend\": \"RPC\"", "\"backend\": \"CUDA\"")), "(parsed)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"alignment\": 32, \"is_host\": false}",
                            "\"alignment\": 32, \"is_host\": true}")),
            "bad.json: $.buffer_types.default.is_host: expected false (a GPU's default buffer type is device "
            "memory)");
}

// Names are bounded (a 400 KB device name made a 147 MB plan), free text too; the error does not
// quote the string.
TEST(ManifestErrors, StringLengthLimits) {
  const std::string name(kMaxManifestNameBytes, 'N');
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"name\": \"RPC[x]\", \"desc", "\"name\": \"" + name + "\", \"desc")),
            "(parsed)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"name\": \"RPC[x]\", \"desc",
                            "\"name\": \"" + std::string(409600, 'N') + "\", \"desc")),
            "bad.json: $.name: a string of 409600 bytes, over the limit of 256 bytes (device name)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"name\": \"RPC[x]\", \"alignment",
                            "\"name\": \"" + name + "B\", \"alignment")),
            "bad.json: $.buffer_types.default.name: a string of 257 bytes, over the limit of 256 bytes "
            "(buffer type "
            "name)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"backend\": \"RPC\"", "\"backend\": \"" + name + "B\"")),
            "bad.json: $.backend: a string of 257 bytes, over the limit of 256 bytes (ggml backend name: "
            "CPU, CUDA, "
            "BLAS, RPC, ONEDNN, ...)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"description\": \"d\"",
                            "\"description\": \"" + std::string(4096, 'd') + "\"")),
            "(parsed)");
  EXPECT_EQ(
      ErrorOf(
          Replace(kMinimal, "\"description\": \"d\"", "\"description\": \"" + std::string(4097, 'd') + "\"")),
      "bad.json: $.description: a string of 4097 bytes, over the limit of 4096 bytes (device model name)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"op_support\"",
                            "\"notes\": \"" + std::string(5000, 'n') + "\", \"op_support\"")),
            "bad.json: $.notes: a string of 5000 bytes, over the limit of 4096 bytes (text)");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"op_support\"",
                            "\"supports_buft\": {\"names\": [\"" + name + "X\"]}, \"op_support\"")),
            "bad.json: $.supports_buft.names[0]: a string of 257 bytes, over the limit of 256 bytes (buffer "
            "type name)");
  // A huge unknown key is cut in the message.
  const std::string err =
      ErrorOf(Replace(kMinimal, "\"free\": 500", "\"free\": 500, \"" + std::string(100000, 'k') + "\": 1"));
  EXPECT_LE(err.size(), 1100u);
  EXPECT_NE(err.find("... ("), std::string::npos) << err;
}

TEST(ManifestErrors, Consistency) {
  // caps.host_buffer must match the presence of a host buffer type.
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"host_buffer\": false", "\"host_buffer\": true")),
            "bad.json: $.caps.host_buffer: expected false (must match whether buffer_types.host is given)");
  std::string dup = Replace(
      kMinimal, "\"is_host\": false}}",
      "\"is_host\": false}, \"split\": {\"name\": \"RPC[x]\", \"alignment\": 32, \"is_host\": false}}");
  EXPECT_EQ(ErrorOf(dup),
            "bad.json: $.buffer_types.split.name: duplicate buffer type name 'RPC[x]' (also "
            "$.buffer_types.default)");
}

TEST(ManifestErrors, DuplicateKeys) {
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"free\": 500", "\"free\": 500, \"free\": 600")),
            "bad.json: $.memory: duplicate key 'free'");
  EXPECT_EQ(ErrorOf(Replace(kMinimal, "\"type\": \"GPU\",", "\"type\": \"GPU\", \"type\": \"CPU\",")),
            "bad.json: $: duplicate key 'type'");
  // Paths inside arrays are indexed.
  std::string rules =
      Replace(kMinimal, "\"default\": \"supported\"}",
              "\"default\": \"supported\", \"rules\": [{\"ops\": \"*\", \"supported\": true}, "
              "{\"ops\": \"*\", \"supported\": true, \"supported\": false}]}");
  EXPECT_EQ(ErrorOf(rules), "bad.json: $.op_support.rules[1]: duplicate key 'supported'");
  // The same key in different objects is fine.
  EXPECT_EQ(ErrorOf(kMinimal), "(parsed)");
}

TEST(Manifest, Digest) {
  auto a = ParseManifest(kMinimal, "a.json");
  ASSERT_TRUE(a.ok());
  std::string d = ManifestDigest(*a);
  EXPECT_EQ(d.size(), 6u + 16u);
  EXPECT_EQ(d.rfind("xxh64:", 0), 0u);
  auto b = ParseManifest(SerializeManifest(*a), "elsewhere/b.json");  // other path and formatting
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(ManifestDigest(*b), d);
  DeviceManifest c = *a;
  c.memory_free = 400;
  EXPECT_NE(ManifestDigest(c), d);
}

// Bad input never crashes the reader: random byte edits of real manifests either parse or give a
// one-line error naming the file.
TEST(ManifestErrors, MutatedManifestsGiveOneLineErrors) {
  std::mt19937 rng(12345);
  const char kBytes[] = "{}[],:\"0123456789-.eE truefalsnul\\\x01\xff";
  size_t rejected = 0;
  for (const auto& f : JsonFiles(STOWAGE_TEST_MANIFESTS_DIR)) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string original = ss.str();
    for (int iter = 0; iter < 300; ++iter) {
      std::string text = original;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        size_t pos = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text[pos] = kBytes[rng() % (sizeof(kBytes) - 1)];
            break;
          case 1:
            text.erase(pos, 1 + rng() % 8);
            break;
          default:
            text.insert(pos, 1, kBytes[rng() % (sizeof(kBytes) - 1)]);
            break;
        }
        if (text.empty()) text = "{";
      }
      auto m = ParseManifest(text, "mutated.json");
      if (m.ok()) continue;
      ++rejected;
      const std::string msg = m.status().message();
      EXPECT_EQ(msg.rfind("mutated.json: ", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_GT(rejected, 1000u);
}

TEST(ManifestErrors, DeepNestingIsRefusedCheaply) {
  // 100000 nested arrays (200 KB): the parse stops at depth 32 instead of building paths of every
  // depth (building them all took 14.7 GB and 23 s).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ErrorOf(deep),
            "bad.json: $[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]"
            "[0][0][0]: JSON nested deeper than 32 levels (device manifests nest at most about 10)");
  // The shipped manifests' own depth is far below the limit (they all parse:
  // ShippedRegistryParsesAndRoundTrips).
}

TEST(ManifestErrors, FolderIsNotAManifest) {
  auto m = LoadManifestFile("/tmp");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
  EXPECT_EQ(m.status().message(), "/tmp: not a regular file (a folder), expected a manifest file (.json)");
}

TEST(ManifestErrors, MissingFile) {
  auto m = LoadManifestFile("/nonexistent/x.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
  EXPECT_EQ(m.status().message(), "/nonexistent/x.json: cannot open: No such file or directory");
}

// A device or FIFO is refused before anything is read (a FIFO would block, /dev/zero never ends).
TEST(ManifestErrors, DeviceIsNotAManifest) {
  auto m = LoadManifestFile("/dev/zero");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "/dev/zero: not a regular file (a device, FIFO or socket), expected a manifest file (.json)");
}

class ManifestFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/manifest_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string dir_;
};

// A 2 GiB file was read whole (38 s, 4.2 GB) before "syntax error at byte 1": now refused from its
// size before reading.
TEST_F(ManifestFileTest, SizeLimitBeforeReading) {
  const std::string p = Write("big.json", "");
  ASSERT_EQ(truncate(p.c_str(), off_t{2} << 30), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto m = LoadManifestFile(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(m.status().message(),
            p + ": 2147483648 bytes, over the limit of 4194304 bytes for a manifest file (.json)");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// Not a JSON object (a GGUF model given by mistake, an empty file): said so, not a syntax error.
TEST_F(ManifestFileTest, MagicIsAJsonObject) {
  auto gguf = LoadManifestFile(Write("model.json", std::string("GGUF\x03\0\0\0", 8)));
  ASSERT_FALSE(gguf.ok());
  EXPECT_EQ(gguf.status().message(),
            dir_ +
                "/model.json: not a device manifest: expected a JSON object starting "
                "with '{', found byte 0x47 at offset 0");
  auto array = LoadManifestFile(Write("array.json", "  \n [1]"));
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().message(),
            dir_ +
                "/array.json: not a device manifest: expected a JSON object starting "
                "with '{', found byte 0x5b at offset 4");
  auto empty = LoadManifestFile(Write("empty.json", " \n"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(),
            dir_ + "/empty.json: empty file, expected a device manifest (a JSON object starting with '{')");
}

}  // namespace
}  // namespace stowage::planner
