// Registry lookups: by name (case-insensitive), by path, extra folders, device lists with ggml's
// numbering, memory overrides, and the errors for unknown names.
#include "stowage/planner/registry.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace stowage::planner {
namespace {

const std::string kShipped = STOWAGE_SHIPPED_REGISTRY_DIR;
const std::string kInputs = STOWAGE_TEST_MANIFESTS_DIR;

Registry Open(std::vector<std::string> dirs) {
  auto r = Registry::Open(dirs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : Registry{};
}

TEST(Registry, ShippedNames) {
  Registry r = Open({kShipped});
  auto names = r.Names();
  for (const char* n :
       {"cpu", "cpu-avx2", "cpu-avx512", "onednn", "h200", "h100", "rtx4090", "rtx3090", "rpc"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

// MUL_MAT of a 2-D weight of `type` [256, 512] placed in CPU_REPACK, F32 activations.
OpQuery RepackMulMat(GgmlType type) {
  OpQuery q;
  q.op = GgmlOp::MUL_MAT;
  q.src.resize(2);
  q.src[0].type = type;
  q.src[0].ne = {256, 512, 1, 1};
  q.src[0].buft = "CPU_REPACK";
  q.src[1].type = GgmlType::F32;
  q.src[1].ne = {256, 512, 1, 1};
  q.dst.type = GgmlType::F32;
  q.dst.ne = {512, 512, 1, 1};
  return q;
}

TEST(Registry, Llamacpp2026SearchesItsCpuManifestsFirst) {
  EXPECT_EQ(RegistrySearchDirs({"mine"}, kShipped, LlamacppCompat::kFeb25),
            (std::vector<std::string>{"mine", kShipped}));
  EXPECT_EQ(RegistrySearchDirs({"mine"}, kShipped, LlamacppCompat::k2026),
            (std::vector<std::string>{"mine", kShipped + "/llamacpp-2026", kShipped}));
  const Registry feb25 = Open(RegistrySearchDirs({}, kShipped, LlamacppCompat::kFeb25));
  const Registry today = Open(RegistrySearchDirs({}, kShipped, LlamacppCompat::k2026));
  // repack.cpp ggml_repack_get_optimal_repack_type (2026): Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2,
  // Q2_K with AVX-512; Q8_0 and Q6_K on ARM only. Feb 2025: Q4_0 only.
  struct Case {
    const char* key;
    GgmlType type;
    bool in_feb25, in_2026;
  };
  for (const Case& c :
       {Case{"cpu-avx2", GgmlType::Q4_0, true, true}, Case{"cpu", GgmlType::Q4_K, false, true},
        Case{"cpu-avx2", GgmlType::IQ4_NL, false, true}, Case{"cpu-avx2", GgmlType::MXFP4, false, true},
        Case{"cpu-avx2", GgmlType::Q2_K, false, false}, Case{"cpu-avx512", GgmlType::Q2_K, false, true},
        Case{"cpu-avx512", GgmlType::Q8_0, false, false}, Case{"cpu-avx512", GgmlType::Q6_K, false, false}}) {
    auto old_cpu = feb25.Load(c.key);
    auto new_cpu = today.Load(c.key);
    ASSERT_TRUE(old_cpu.ok() && new_cpu.ok()) << c.key;
    const BufferType* old_repack = old_cpu->FindBuft("CPU_REPACK");
    const BufferType* new_repack = new_cpu->FindBuft("CPU_REPACK");
    ASSERT_TRUE(old_repack != nullptr && new_repack != nullptr) << c.key;
    // The extra buffer type's own rules (the CPU's table takes every type in CPU).
    EXPECT_EQ(ExtraBuftAccepts(old_repack->supports_op, RepackMulMat(c.type)), c.in_feb25)
        << c.key << " " << GgmlTypeName(c.type);
    EXPECT_EQ(ExtraBuftAccepts(new_repack->supports_op, RepackMulMat(c.type)), c.in_2026)
        << c.key << " " << GgmlTypeName(c.type);
  }
  // Every other key is the shipped one.
  EXPECT_EQ(*today.PathOf("h200"), kShipped + "/h200.json");
}

TEST(Registry, DeviceListNamesLikeGgml) {
  Registry r = Open({kShipped});
  auto devs = r.MakeDevices("h200,H200,cpu");
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 3u);
  EXPECT_EQ((*devs)[0].name, "CUDA0");
  EXPECT_EQ((*devs)[1].name, "CUDA1");
  EXPECT_EQ((*devs)[2].name, "CPU");
  EXPECT_EQ((*devs)[1].default_buft.name, "CUDA1");
  EXPECT_EQ((*devs)[1].split_buft->name, "CUDA1_Split");
  EXPECT_EQ((*devs)[0].host_buft->name, "CUDA_Host");
  EXPECT_EQ((*devs)[2].extra_bufts[0].name, "CPU_REPACK");
  // Different CUDA models share the numbering.
  auto mixed = r.MakeDevices("rtx4090,rtx3090");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ((*mixed)[0].name, "CUDA0");
  EXPECT_EQ((*mixed)[0].description, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ((*mixed)[1].name, "CUDA1");
  EXPECT_EQ((*mixed)[1].description, "NVIDIA GeForce RTX 3090");
}

TEST(Registry, UnknownNameListsKnownOnes) {
  Registry r = Open({kShipped});
  auto devs = r.MakeDevices("h200,a100");
  ASSERT_FALSE(devs.ok());
  EXPECT_EQ(devs.status().code(), StatusCode::kNotFound);
  const std::string msg = devs.status().message();
  EXPECT_EQ(msg.rfind("unknown device 'a100' (known: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("h200"), std::string::npos);
  EXPECT_NE(msg.find("rtx3090"), std::string::npos);
}

TEST(Registry, DuplicateDeviceNameAndEmptyItems) {
  Registry r = Open({kShipped});
  auto dup = r.MakeDevices("cpu,cpu-avx512");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.status().message(), "device name 'CPU' appears twice in the device list 'cpu,cpu-avx512' (" +
                                        kShipped + "/cpu.json and " + kShipped + "/cpu-avx512.json)");
  EXPECT_FALSE(r.MakeDevices("").ok());
  EXPECT_FALSE(r.MakeDevices("h200,,cpu").ok());
}

TEST(Registry, PathsAndExtraFolders) {
  Registry r = Open({kInputs, kShipped});
  auto devs = r.MakeDevices("rpc0,rpc1," + kInputs + "/llamacpp-cpu.json");
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  EXPECT_EQ((*devs)[0].name, "RPC[127.0.0.1:50052]");
  EXPECT_EQ((*devs)[1].name, "RPC[127.0.0.1:50053]");
  EXPECT_EQ((*devs)[2].description, "llama.cpp CPU (build 4748, x86-64 AVX-512)");
  // The earlier folder wins for equal keys: test inputs' onednn.json has no performance figures.
  auto one = r.Load("onednn");
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->performance.memory_bandwidth.has_value());
  Registry shipped_first = Open({kShipped, kInputs});
  EXPECT_TRUE(shipped_first.Load("ONEDNN")->performance.memory_bandwidth.has_value());
  // A missing folder and a missing file are clear errors.
  auto missing = Registry::Open({"/nonexistent/registry"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/registry: registry folder not found");
  auto nofile = r.Load("./nope.json");
  ASSERT_FALSE(nofile.ok());
  EXPECT_EQ(nofile.status().code(), StatusCode::kIoError);
}

TEST(Registry, SharedBufferTypesMustAgree) {
  Registry r = Open({kInputs, kShipped});
  auto ok = r.MakeDevices("blas,llamacpp-cpu");  // BLAS shares the CPU buffer type
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].default_buft.name, (*ok)[1].default_buft.name);
  char tmpl[] = "/tmp/stowage-registry-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto blas = r.Load("blas");
  ASSERT_TRUE(blas.ok());
  DeviceManifest odd = *blas;
  odd.default_buft.alignment = 64;
  {
    std::ofstream(dir + "/odd.json") << SerializeManifest(odd);
  }
  auto bad = r.MakeDevices(dir + "/odd.json,cpu");
  ASSERT_FALSE(bad.ok());
  // Both devices and the files they came from are named.
  EXPECT_EQ(bad.status().message(), "buffer type 'CPU' of device CPU (" + kShipped +
                                        "/cpu.json) differs from the one of device BLAS (" + dir +
                                        "/odd.json) (alignment 32 vs 64, is_host true vs true)");
  std::remove((dir + "/odd.json").c_str());
  rmdir(dir.c_str());
}

TEST(Registry, BrokenManifestOnlyFailsItsLookup) {
  char tmpl[] = "/tmp/stowage-registry-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  {
    std::ofstream(dir + "/broken.json") << "{\"manifest_version\": 1, \"nam\": 3}";
  }
  Registry r = Open({dir, kShipped});
  EXPECT_TRUE(r.MakeDevices("h200").ok());
  auto b = r.MakeDevices("broken");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            dir +
                "/broken.json: $: unknown key 'nam' (expected one of: manifest_version, backend, name, "
                "description, type, memory, caps, buffer_types, supports_buft, op_support, offload_op, "
                "performance, notes)");
  std::remove((dir + "/broken.json").c_str());
  rmdir(dir.c_str());
}

TEST(Registry, MemoryOverrides) {
  Registry r = Open({kShipped});
  auto ov = ParseMemoryOverrides("cuda1=10GiB, CUDA0=512MiB");
  ASSERT_TRUE(ov.ok()) << ov.status().ToString();
  auto devs = r.MakeDevices("h200,h200,cpu", *ov);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  EXPECT_EQ((*devs)[0].memory_free, 512ull << 20);
  EXPECT_EQ((*devs)[1].memory_free, 10ull << 30);
  EXPECT_EQ((*devs)[1].memory_total, 141ull << 30);
  // The CPU reports no total, so any free value is accepted.
  auto cpu = r.MakeDevices("cpu", *ParseMemoryOverrides("CPU=64GiB"));
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)[0].memory_free, 64ull << 30);
  auto too_big = r.MakeDevices("rtx4090", *ParseMemoryOverrides("CUDA0=25GiB"));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange);
  auto nodev = r.MakeDevices("rtx4090", *ParseMemoryOverrides("CUDA1=1GiB"));
  ASSERT_FALSE(nodev.ok());
  EXPECT_EQ(nodev.status().message(),
            "memory override for 'CUDA1': no such device in the device list (devices: CUDA0)");
  // RPC names contain ':' and '[', the size follows the last '='.
  auto rpc = ParseMemoryOverrides("RPC[127.0.0.1:50052]=1GiB");
  ASSERT_TRUE(rpc.ok());
  EXPECT_EQ((*rpc)[0].device, "RPC[127.0.0.1:50052]");
  EXPECT_FALSE(ParseMemoryOverrides("CUDA0").ok());
  EXPECT_FALSE(ParseMemoryOverrides("CUDA0=lots").ok());
  // One value per device: a second one (also in another case) is refused, not "the last wins".
  auto twice = ParseMemoryOverrides("CUDA0=1GiB,CUDA1=2GiB,cuda0=2GiB");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      twice.status().message(),
      "memory override 'cuda0=2GiB': device cuda0 is given a free memory twice (also CUDA0=1073741824 bytes; "
      "give each device once)");
}

// A device list made of a listed manifest and this machine's probed CPU (plan-model with a list
// whose CPU manifest says "type": "GPU"): two devices named CPU, named with where each came from.
TEST(Registry, DuplicateNamesAcrossListAndProbe) {
  Registry r = Open({kShipped});
  auto cpu = r.Load("cpu");
  ASSERT_TRUE(cpu.ok());
  DeviceManifest as_gpu = *cpu;
  as_gpu.type = DeviceType::kGpu;
  DeviceManifest probed = *cpu;
  probed.source_path.clear();
  EXPECT_TRUE(CheckUniqueDeviceNames({as_gpu}).ok());
  Status s = CheckUniqueDeviceNames({as_gpu, probed});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(),
            "device name 'CPU' appears twice (" + kShipped +
                "/cpu.json and probed on this machine): device names must be unique (types GPU and CPU)");
}

TEST(ByteSize, Units) {
  EXPECT_EQ(*ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseByteSize("80GB"), 80000000000ull);
  EXPECT_EQ(*ParseByteSize("123"), 123u);
  EXPECT_EQ(*ParseByteSize(" 4 kib "), 4096u);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("-1GiB").ok());
  EXPECT_FALSE(ParseByteSize("1..5G").ok());
  EXPECT_FALSE(ParseByteSize("12XB").ok());
  auto big = ParseByteSize("99999999999TiB");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
}

// ---- shared op tables: "op_support": {"table": "<name>"} -----------------------------------------

std::string TempDir() {
  char tmpl[] = "/tmp/stowage-optable-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string CpuManifestWith(const std::string& op_support) {
  return R"({"manifest_version": 1, "backend": "CPU", "name": "CPU", "description": "test", "type": "CPU",
  "memory": {"total": 0, "free": 0}, "caps": {"async": false, "host_buffer": false,
  "buffer_from_host_ptr": true, "events": false},
  "buffer_types": {"default": {"name": "CPU", "alignment": 32, "is_host": true}},
  "op_support": )" +
         op_support + "}";
}

TEST(OpTable, ManifestReadsTheTableBesideIt) {
  const std::string dir = TempDir();
  mkdir((dir + "/op_tables").c_str(), 0755);
  Write(dir + "/op_tables/mine.json",
        R"({"note": "n", "default": "unsupported", "rules": [{"ops": ["MUL_MAT"], "supported": true}]})");
  Write(dir + "/dev.json", CpuManifestWith(R"({"table": "mine"})"));
  auto m = LoadManifestFile(dir + "/dev.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->op_support.default_supported);
  ASSERT_EQ(m->op_support.rules.size(), 1u);
  EXPECT_EQ(m->op_support.rules[0].ops, std::vector<GgmlOp>{GgmlOp::MUL_MAT});
  // The same as the table written inline (and so the same digest in plans).
  auto inline_m = ParseManifest(CpuManifestWith(R"({"default": "unsupported", "rules": [{"ops": ["MUL_MAT"],
      "supported": true}]})"),
                                dir + "/dev.json");
  ASSERT_TRUE(inline_m.ok()) << inline_m.status().ToString();
  EXPECT_EQ(ManifestDigest(*m), ManifestDigest(*inline_m));
  // The folder's own table takes precedence over a shipped one of the same name.
  Write(dir + "/op_tables/ggml-cpu.json", R"({"default": "unsupported"})");
  Write(dir + "/dev2.json", CpuManifestWith(R"({"table": "ggml-cpu"})"));
  auto own = LoadManifestFile(dir + "/dev2.json");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_TRUE(own->op_support.rules.empty());
  for (const char* f : {"/op_tables/mine.json", "/op_tables/ggml-cpu.json", "/dev.json", "/dev2.json"})
    std::remove((dir + f).c_str());
  rmdir((dir + "/op_tables").c_str());
  rmdir(dir.c_str());
}

TEST(OpTable, CopiedShippedManifestFindsTheShippedTable) {
  const std::string dir = TempDir();
  std::ifstream in(kShipped + "/h200.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Write(dir + "/my-h200.json", text);
  auto copy = LoadManifestFile(dir + "/my-h200.json");
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  auto shipped = LoadManifestFile(kShipped + "/h200.json");
  ASSERT_TRUE(shipped.ok()) << shipped.status().ToString();
  EXPECT_TRUE(copy->op_support == shipped->op_support);
  EXPECT_GE(copy->op_support.rules.size(), 6u);
  std::remove((dir + "/my-h200.json").c_str());
  rmdir(dir.c_str());
}

TEST(OpTable, Errors) {
  const std::string dir = TempDir();
  mkdir((dir + "/op_tables").c_str(), 0755);
  auto err = [&](const std::string& op_support) {
    Write(dir + "/dev.json", CpuManifestWith(op_support));
    auto m = LoadManifestFile(dir + "/dev.json");
    EXPECT_FALSE(m.ok());
    std::string msg = m.ok() ? "" : m.status().message();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  };
  const std::string f = dir + "/dev.json: ";
  EXPECT_EQ(err(R"({"table": "nothere"})"), f + "$.op_support.table: no op table 'nothere' (expected " + dir +
                                                "/op_tables/nothere.json or " + ShippedRegistryDir(nullptr) +
                                                "/op_tables/nothere.json)");
  EXPECT_EQ(err(R"({"table": "ggml-cuda", "default": "supported"})"),
            f + "$.op_support: unknown key 'default' (expected one of: table)");
  EXPECT_EQ(err(R"({"table": 3})"), f + "$.op_support.table: expected a string (op table name), got number");
  EXPECT_NE(err(R"({"table": "../h200"})").find("$.op_support.table: expected an op table name"),
            std::string::npos);
  Write(dir + "/op_tables/bad.json", R"({"default": "supported", "rules": [{"ops": ["MUL_MATT"]}]})");
  std::string bad = err(R"({"table": "bad"})");
  EXPECT_EQ(
      bad.rfind(f + "$.op_support.table: op table 'bad': " + dir + "/op_tables/bad.json: $.rules[0].ops", 0),
      0u)
      << bad;
  Write(dir + "/op_tables/bad.json", R"({"default": "supported", "colour": 1})");
  EXPECT_NE(err(R"({"table": "bad"})").find("op_tables/bad.json: $: unknown key 'colour'"),
            std::string::npos);
  Write(dir + "/op_tables/bad.json", R"({"default": "supported",)");
  EXPECT_NE(err(R"({"table": "bad"})").find("op_tables/bad.json: byte"), std::string::npos);
  for (const char* p : {"/op_tables/bad.json", "/dev.json"}) std::remove((dir + p).c_str());
  rmdir((dir + "/op_tables").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace stowage::planner
