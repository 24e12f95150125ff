// Plans with this machine's ONEDNN ACCEL device: which weights the ONEDNN buffer type gets
// (MUL_MAT weights oneDNN multiplies; never GET_ROWS tables; a tied output gets its own copy), that
// the scheduler gives every node reading such a weight to the ACCEL backend (pp and tg) and never
// to the CPU, that a mixed Q4_0 + F32 model splits between CPU_REPACK/CPU and ONEDNN, that the
// runtime allocates exactly the planned bytes, and that logits (prompt and token by token) equal
// the CPU-only plan's within the F32 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "e2e_util.h"
#include "onednn_backend.h"
#include "ops.h"
#include "stowage/runtime/gguf_writer.h"
#include "test_paths.h"

namespace stowage {
namespace {

using planner::ModelGraphs;
using planner::PlacementOutcome;

/// This machine's probed devices as manifests: the CPU, plus the ONEDNN device when `accel`.
std::vector<planner::DeviceManifest> Machine(bool accel) {
  std::vector<planner::DeviceManifest> out;
  for (const auto& d : ProbeDevices().devices) {
    if (d.type == DeviceType::kGpu) continue;
    if (d.type == DeviceType::kAccel && (!accel || d.name != "ONEDNN")) continue;
    auto m = planner::ManifestFromProbe(d);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) out.push_back(*m);
  }
  return out;
}

struct Planned {
  std::unique_ptr<GgufFile> gguf;
  ModelGraphs graphs;
  PlacementOutcome o;
  std::vector<uint8_t> bytes;  ///< the serialized plan
  bool ok = false;
};

Planned Plan(const std::string& model, bool accel, int n_ctx = 128) {
  Planned p;
  auto g = GgufFile::Open(model);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return p;
  p.gguf = std::move(g).value();
  planner::ContextConfig cfg;
  cfg.n_ctx = n_ctx;
  auto graphs = planner::BuildModelGraphs(*p.gguf, cfg);
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  if (!graphs.ok()) return p;
  p.graphs = std::move(graphs).value();
  auto o = planner::PlaceModel(p.graphs, Machine(accel), {});
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return p;
  p.o = std::move(o).value();
  p.bytes = planner::SerializePlan(*p.gguf, p.graphs, p.o.placement, p.o.memory, "onednn test");
  p.ok = true;
  return p;
}

const std::string& BuftOf(const Planned& p, int global) {
  return p.o.placement.bufts[p.o.placement.global_buft[global]].name;
}

/// The buffer-type name of the memory graph tensor `t` of `g` reads (weights only; "" otherwise).
std::string WeightBuft(const Planned& p, const planner::Graph& g, int t) {
  while (t >= 0 && g.tensors[t].view_src >= 0) t = g.tensors[t].view_src;
  if (t < 0 || g.tensors[t].kind != planner::TensorKind::kWeight) return "";
  return BuftOf(p, g.tensors[t].global);
}

/// Checks the scheduler's promise for ONEDNN weights in both graphs: every node reading one runs on
/// the ONEDNN backend, no CPU node reads one, no split input copies one. Returns the number of
/// nodes reading an ONEDNN weight per graph ("pp", "tg").
std::map<std::string, int> CheckOnednnNodes(const Planned& p) {
  std::map<std::string, int> count;
  const auto& backends = p.o.placement.backends;
  for (const planner::Graph* g : {&p.graphs.pp, &p.graphs.tg}) {
    int& n = count[g->name];
    for (int t : g->nodes) {
      const planner::Tensor& x = g->tensors[t];
      if (IsViewOp(x.op)) continue;
      const std::string be = x.backend >= 0 ? backends[x.backend].name : "?";
      for (int s : x.srcs) {
        if (s < 0 || WeightBuft(p, *g, s) != exec::kOneDnnBuft) continue;
        ++n;
        EXPECT_EQ(be, "ONEDNN") << g->name << " node '" << x.name << "' (" << GgmlOpName(x.op)
                                << ") reads ONEDNN weight '" << g->tensors[s].name << "' on backend " << be;
      }
    }
    for (const auto& sp : g->splits)
      for (const auto& [src, copy] : sp.inputs)
        EXPECT_NE(WeightBuft(p, *g, src), exec::kOneDnnBuft)
            << g->name << ": split input copy of ONEDNN weight '" << g->tensors[src].name << "'";
  }
  return count;
}

TEST(OneDnnPlacement, F32MatmulWeightsGoToTheOnednnBufferType) {
  const std::string model = test::ModelPath("tiny-tied-f32.gguf");
  STOWAGE_REQUIRE_FILE(model);
  Planned p = Plan(model, true);
  ASSERT_TRUE(p.ok);
  ASSERT_GE(p.o.placement.FindBuft(exec::kOneDnnBuft), 0) << "no ONEDNN buffer type in the placement";
  int onednn = 0;
  std::multiset<std::string> embd_bufts;
  for (size_t gi = 0; gi < p.graphs.globals.size(); ++gi) {
    const auto& w = p.graphs.globals[gi];
    if (w.kind != planner::TensorKind::kWeight) continue;
    const std::string& b = BuftOf(p, static_cast<int>(gi));
    if (w.name == "token_embd.weight")
      embd_bufts.insert(b + (w.layer_class == planner::LayerClass::kOutput ? ":out" : ":in"));
    const bool matmul2d = w.consumer_op == GgmlOp::MUL_MAT && w.ne[2] == 1 && w.ne[3] == 1;
    if (matmul2d) {
      EXPECT_EQ(b, exec::kOneDnnBuft) << w.name;
    } else {
      EXPECT_NE(b, exec::kOneDnnBuft) << w.name << " (" << GgmlOpName(w.consumer_op) << ")";
    }
    onednn += b == exec::kOneDnnBuft;
  }
  EXPECT_GT(onednn, 0);
  // Tied embeddings: the GET_ROWS table stays in host memory, the output MUL_MAT gets its own copy in
  // ONEDNN (llama.cpp: a duplicated tensor is shared only within one buffer type).
  EXPECT_EQ(embd_bufts, (std::multiset<std::string>{"CPU:in", "ONEDNN:out"}));
  const auto n = CheckOnednnNodes(p);
  EXPECT_GT(n.at("pp"), 0);
  EXPECT_GT(n.at("tg"), 0) << "tg (M = 1) must run ONEDNN weights on the ACCEL backend";
  // The plan's ONEDNN buffer: on the ONEDNN device, not mapped, its size the sum of the plain
  // tensors' sizes at the buft's alignment.
  int found = 0;
  for (const auto& b : p.o.memory.buffers) {
    if (b.name != exec::kOneDnnBuft) continue;
    ++found;
    EXPECT_EQ(b.usage, planner::BufferUsage::kWeights);
    EXPECT_FALSE(b.mapped);
    EXPECT_EQ(p.o.placement.devices[b.device].name, "ONEDNN");
    uint64_t sum = 0;
    std::set<std::string> names;
    for (size_t gi = 0; gi < p.graphs.globals.size(); ++gi) {
      const auto& w = p.graphs.globals[gi];
      if (w.kind == planner::TensorKind::kWeight && BuftOf(p, static_cast<int>(gi)) == exec::kOneDnnBuft &&
          names.insert(w.name).second)
        sum += (w.nbytes + 63) / 64 * 64;
    }
    EXPECT_EQ(b.size, sum);
  }
  EXPECT_EQ(found, 1);
}

TEST(OneDnnPlacement, WithoutTheAccelDeviceNothingChanges) {
  const std::string model = test::ModelPath("tiny-tied-f32.gguf");
  STOWAGE_REQUIRE_FILE(model);
  Planned p = Plan(model, false);
  ASSERT_TRUE(p.ok);
  EXPECT_LT(p.o.placement.FindBuft(exec::kOneDnnBuft), 0);
  for (const auto& b : p.o.placement.backends) EXPECT_NE(b.name, "ONEDNN");
  EXPECT_EQ(p.graphs.pp.splits.size(), 1u);
  EXPECT_EQ(p.graphs.tg.splits.size(), 1u);
}

/// Writes a copy of the F32 model `src_path` in which every F32 tensor gets the type `type_of`
/// returns for it (converted with the CPU backend's QuantizeRow), to the test temp dir as `out_name`.
/// Returns the path, or "" on failure.
std::string WriteConverted(const std::string& src_path,
                           const std::function<GgmlType(const GgufTensorInfo&)>& type_of,
                           const std::string& out_name) {
  auto src = GgufFile::Open(src_path);
  if (!src.ok()) return "";
  GgufWriter w;
  for (const auto& kv : (*src)->kvs()) {
    if (!w.AddKV(kv.key, GgufMetaValue::FromValue(kv.value)).ok()) return "";
  }
  std::vector<std::vector<uint8_t>> keep;
  for (const auto& t : (*src)->tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const float* f = reinterpret_cast<const float*>((*src)->TensorData(t));
    const GgmlType to = t.type == GgmlType::F32 ? type_of(t) : t.type;
    if (to != t.type) {
      const uint64_t row = RowSize(to, t.ne[0]);
      const int64_t rows = t.nelements() / t.ne[0];
      if (row == 0) return "";
      keep.emplace_back(row * rows);
      for (int64_t r = 0; r < rows; ++r)
        if (!cpu::QuantizeRow(to, f + r * t.ne[0], keep.back().data() + r * row, t.ne[0]).ok()) return "";
      if (!w.AddTensorData(t.name, to, ne, keep.back().data(), keep.back().size()).ok()) return "";
    } else {
      if (!w.AddTensorData(t.name, t.type, ne, (*src)->TensorData(t), t.nbytes).ok()) return "";
    }
  }
  std::string out = ::testing::TempDir() + out_name;
  if (!w.WriteFile(out).ok()) return "";
  return out;
}

/// tiny-tied-f32 with Q4_0 attention matrices (the rest stays F32): a mixed model whose Q4_0
/// weights go to CPU_REPACK and F32 matmul weights to ONEDNN.
std::string WriteMixedModel(const std::string& src_path) {
  return WriteConverted(
      src_path,
      [](const GgufTensorInfo& t) {
        const bool attn =
            t.name.find(".attn_q.") != std::string::npos || t.name.find(".attn_k.") != std::string::npos ||
            t.name.find(".attn_v.") != std::string::npos || t.name.find(".attn_output.") != std::string::npos;
        return attn && t.ne[0] % 32 == 0 ? GgmlType::Q4_0 : GgmlType::F32;
      },
      "onednn-mixed-q4_0-f32.gguf");
}

TEST(OneDnnPlacement, MixedQ4_0AndF32ModelSplits) {
  const std::string base = test::ModelPath("tiny-tied-f32.gguf");
  STOWAGE_REQUIRE_FILE(base);
  const std::string model = WriteMixedModel(base);
  ASSERT_FALSE(model.empty()) << "could not write the mixed model";
  Planned p = Plan(model, true);
  ASSERT_TRUE(p.ok);
  std::map<std::string, int> by_buft;  // MUL_MAT weights per buffer type
  for (size_t gi = 0; gi < p.graphs.globals.size(); ++gi) {
    const auto& w = p.graphs.globals[gi];
    if (w.kind != planner::TensorKind::kWeight || w.consumer_op != GgmlOp::MUL_MAT) continue;
    const std::string& b = BuftOf(p, static_cast<int>(gi));
    ++by_buft[b];
    if (w.type == GgmlType::Q4_0) EXPECT_EQ(b, "CPU_REPACK") << w.name;
    if (w.type == GgmlType::F32) EXPECT_EQ(b, exec::kOneDnnBuft) << w.name;
  }
  EXPECT_EQ(by_buft["CPU_REPACK"], 8);               // 2 layers x q, k, v, output
  EXPECT_EQ(by_buft[exec::kOneDnnBuft], 2 * 3 + 1);  // 2 layers x gate, up, down + the tied output copy
  CheckOnednnNodes(p);
  // Q4_0 matmuls run on the CPU, F32 ones on ONEDNN: the graphs alternate, in pp and in tg.
  for (const planner::Graph* g : {&p.graphs.pp, &p.graphs.tg}) {
    std::set<std::string> backends;
    for (const auto& sp : g->splits) backends.insert(p.o.placement.backends[sp.backend].name);
    EXPECT_EQ(backends, (std::set<std::string>{"CPU", "ONEDNN"})) << g->name;
    // Per layer: CPU (attention, Q4_0) -> ONEDNN (gate, up) -> CPU -> ONEDNN (down) -> CPU ..., then
    // the output on ONEDNN: at least 4 splits per layer.
    EXPECT_GE(g->splits.size(), 4u * p.graphs.hp.n_layer) << g->name;
    for (const auto& sp : g->splits)
      EXPECT_TRUE(sp.inputs.empty()) << g->name << ": no copies needed (host activations)";
  }
  std::printf("[ mixed ] graph splits = %zu (pp), %zu (tg)\n", p.graphs.pp.splits.size(),
              p.graphs.tg.splits.size());
  // And it runs: logits equal the CPU-only plan's.
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + (i * 37) % 200);
  test::E2eRun cpu = test::RunPlanned(model, prompt, nullptr, {});
  test::E2eRun acc =
      test::RunPlanned(model, prompt, [](const ProbedDevice& d) { return d.type == DeviceType::kAccel; }, {});
  ASSERT_FALSE(acc.logits.empty());
  EXPECT_LE(test::MaxAbsDiff(cpu.logits, acc.logits), 1e-3f);
  EXPECT_GT(acc.computes.count("ONEDNN") ? acc.computes.at("ONEDNN") : 0, 0);
  std::remove(model.c_str());
}

/// Decodes `prompt` and then `steps` single tokens (greedy from the session's own logits) with the
/// plan `bytes`; returns the logits of every call.
std::vector<std::vector<float>> DecodeSteps(std::vector<uint8_t> bytes, const std::string& model,
                                            const std::vector<int32_t>& prompt,
                                            const std::vector<int32_t>& next,
                                            std::map<std::string, int>* computes) {
  std::vector<std::vector<float>> out;
  SessionOptions so;
  auto factory = std::make_shared<test::CountingFactory>();
  so.backend_factory = factory;
  so.n_threads = 2;
  auto s = Session::CreateFromPlanBytes(std::move(bytes), model, so);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return out;
  for (const auto& b : (*s)->Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;
  std::vector<float> logits;
  Status st = (*s)->Decode(prompt, false, &logits);
  EXPECT_TRUE(st.ok()) << st.ToString();
  out.push_back(logits);
  factory->counts->clear();
  for (int32_t t : next) {
    st = (*s)->Decode({t}, false, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    out.push_back(logits);
  }
  *computes = *factory->counts;  // tg calls only
  return out;
}

// BF16 matrices (where oneDNN has a bf16 matmul here): all in ONEDNN, blocked; logits equal the
// CPU backend's BF16 path (both round src1 to BF16 and accumulate in F32), prompt and tg.
TEST(OneDnnPlacement, Bf16ModelRunsOnTheAccelDevice) {
  if (!exec::OneDnnSupportsMulMatType(GgmlType::BF16)) GTEST_SKIP() << "skipped: no bf16 matmul on this CPU";
  const std::string base = test::ModelPath("tiny-tied-f32.gguf");
  STOWAGE_REQUIRE_FILE(base);
  const std::string model = WriteConverted(
      base, [](const GgufTensorInfo& t) { return t.n_dims == 2 ? GgmlType::BF16 : GgmlType::F32; },
      "onednn-bf16.gguf");
  ASSERT_FALSE(model.empty());
  Planned p = Plan(model, true);
  ASSERT_TRUE(p.ok);
  for (size_t gi = 0; gi < p.graphs.globals.size(); ++gi) {
    const auto& w = p.graphs.globals[gi];
    if (w.kind == planner::TensorKind::kWeight && w.consumer_op == GgmlOp::MUL_MAT)
      EXPECT_EQ(BuftOf(p, static_cast<int>(gi)), exec::kOneDnnBuft) << w.name;
  }
  const auto n = CheckOnednnNodes(p);
  EXPECT_GT(n.at("tg"), 0);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + (i * 37) % 200);
  test::E2eRun cpu = test::RunPlanned(model, prompt, nullptr, {});
  test::E2eRun acc =
      test::RunPlanned(model, prompt, [](const ProbedDevice& d) { return d.type == DeviceType::kAccel; }, {});
  ASSERT_FALSE(acc.logits.empty());
  // Both sides round each layer's activations to BF16 (8-bit mantissa); a last-bit difference of the
  // F32 sums can flip such a rounding, so the bound is BF16's relative step on logits of magnitude
  // ~1 rather than the F32 tolerance (measured here: 9e-4).
  const float diff = test::MaxAbsDiff(cpu.logits, acc.logits);
  EXPECT_LE(diff, 1e-2f);
  std::printf("[ bf16 ] ONEDNN+CPU vs CPU max |logit diff| = %.6f\n", diff);
  std::remove(model.c_str());
}

class OneDnnTg : public ::testing::TestWithParam<const char*> {};

// Token generation (M = 1) through the ACCEL backend's blocked weights gives the CPU's logits.
TEST_P(OneDnnTg, TokenByTokenMatchesCpu) {
  const std::string model = test::ModelPath(GetParam());
  STOWAGE_REQUIRE_FILE(model);
  Planned cpu = Plan(model, false);
  Planned acc = Plan(model, true);
  ASSERT_TRUE(cpu.ok && acc.ok);
  const std::vector<int32_t> prompt = {1, 45, 97, 29, 263};
  const std::vector<int32_t> next = {17, 300, 42, 8, 99, 250};
  std::map<std::string, int> c_cpu, c_acc;
  auto a = DecodeSteps(cpu.bytes, model, prompt, next, &c_cpu);
  auto b = DecodeSteps(acc.bytes, model, prompt, next, &c_acc);
  ASSERT_EQ(a.size(), next.size() + 1);
  ASSERT_EQ(b.size(), a.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = test::MaxAbsDiff(a[i], b[i]);
    worst = std::max(worst, d);
    EXPECT_LE(d, 1e-3f) << "call " << i;
  }
  const int n = c_acc.count("ONEDNN") ? c_acc.at("ONEDNN") : 0;
  EXPECT_GT(n, 0) << "no tg node ran on the ONEDNN backend";
  std::printf("[ %s ] tg through ONEDNN: max |logit diff| = %.6f over %zu calls (%d tg nodes on ONEDNN)\n",
              GetParam(), worst, a.size(), n);
}

INSTANTIATE_TEST_SUITE_P(Models, OneDnnTg, ::testing::Values("stories260K.gguf", "tiny-tied-f32.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           n = n.substr(0, n.size() - 5);
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace stowage
