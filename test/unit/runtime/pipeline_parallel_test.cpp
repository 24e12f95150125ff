// pipeline parallelism (Plan.n_copies = 4) across models of every architecture.
//
//  - Plans made as plan-model makes them (registry manifests "h200,h200,llamacpp-cpu", -ngl 99;
//    also three GPUs of different kinds, and -ngl n_layer + 1) for the shared models and a
//    synthetic model of every supported architecture (gguf-synth's library: MoE, tied
//    embeddings, mamba, phi3's fused QKV, gemma) must: load (PlanFile::Verify), have no two live
//    tensors sharing compute-buffer bytes (CheckComputeMemory in stowage/runtime/plan.h, liveness re-derived
//    from the plan file: all copies stay live), allocate exactly the planned bytes and give the CPU-only
//    plan's logits when the GPU-type devices are the asynchronous test backend (copy 0 executed).
//  - The liveness check itself finds an overlap that is edited in (it can fail).
//  - The verifier refuses inconsistent pipeline fields (the SplitInput copies cases below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "async_private_backend.h"
#include "objapi_plan_generated.h"
#include "plan_cpu.h"
#include "stowage/planner/buft_select.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/plan_export.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage {
namespace {

namespace bp = ::objapi::plan;

const char* kRegistryDir = STOWAGE_TEST_REGISTRY;
const char* kManifestDir = STOWAGE_TEST_MANIFESTS;

struct Planned {
  std::vector<uint8_t> bytes;
  int n_copies = 0;
};

/// plan-model's pipeline for `model` on the registry device list `devices` (e.g. "h200,h200,
/// llamacpp-cpu"), n_ctx 256 (n_batch = n_ubatch = 256), -ngl `ngl` (-1: n_layer + 1). With
/// `no_host_buft` the GPU manifests lose their pinned host buffer type (CUDA_Host): the
/// asynchronous test backend allocates every buffer type as device memory, so a plan whose CPU
/// compute buffer is CUDA_Host cannot run on it (the CPU cannot access it).
Result<Planned> PlanOn(const std::string& model, const std::string& devices, int ngl,
                       bool no_host_buft = false,
                       const std::function<void(planner::PlacementOptions&)>& edit = nullptr) {
  STOWAGE_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(model));
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  STOWAGE_ASSIGN_OR_RETURN(planner::ModelGraphs m, planner::BuildModelGraphs(*gguf, cfg));
  STOWAGE_ASSIGN_OR_RETURN(planner::Registry reg, planner::Registry::Open({kManifestDir, kRegistryDir}));
  STOWAGE_ASSIGN_OR_RETURN(auto machine, reg.MakeDevices(devices));
  if (no_host_buft)
    for (auto& d : machine)
      if (d.type == planner::DeviceType::kGpu) {
        d.host_buft.reset();
        d.caps.host_buffer = false;
      }
  planner::PlacementOptions opt;
  opt.n_gpu_layers = ngl < 0 ? static_cast<int>(m.hp.n_layer) + 1 : ngl;
  if (edit) edit(opt);
  STOWAGE_ASSIGN_OR_RETURN(auto outcome, planner::PlaceModel(m, machine, opt));
  Planned p;
  p.n_copies = outcome.placement.n_copies;
  p.bytes = planner::SerializePlan(*gguf, m, outcome.placement, outcome.memory, "pipeline parallel test");
  return p;
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    d = std::max(d, std::fabs(a[i] - b[i]));
  }
  return d;
}

/// The liveness conflicts of a serialized plan (empty: none), or the verifier's error.
std::vector<std::string> Conflicts(const std::vector<uint8_t>& bytes) {
  // Every check but the overlaps, which the verifier stops at first: as plan-dump --check-memory.
  auto pf = PlanFile::FromBytes(bytes, "p.plan", PlanChecks::kAllButOverlaps);
  if (!pf.ok()) return {"verifier: " + pf.status().ToString()};
  auto rep = CheckComputeMemory(**pf, 1000);
  if (rep.tensors_checked == 0) rep.conflicts.push_back("nothing checked");
  return rep.conflicts;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

/// Synthetic models of every architecture, written once per test program into a temporary folder.
class SynthModels : public ::testing::Environment {
 public:
  void SetUp() override {
    char tmpl[] = "/tmp/hostile-pipeline-XXXXXX";
    const char* d = mkdtemp(tmpl);
    ASSERT_NE(d, nullptr);
    dir_ = d;
    struct M {
      const char* file;
      const char* arch;
      bool tied;
      uint32_t n_layer, n_ctx;
    };
    // phi3: gguf-synth writes attention.sliding_window (2047); n_layer 32 / n_ctx_train 4096 would
    // also give llama.cpp's pre-key default.
    for (const M& m :
         {M{"llama", "llama", false, 4, 2048}, M{"llama-tied", "llama", true, 3, 2048},
          M{"qwen2", "qwen2", false, 4, 2048}, M{"phi3", "phi3", false, 32, 4096},
          M{"gemma", "gemma", true, 4, 2048}, M{"mamba", "mamba", true, 4, 2048},
          M{"qwen2moe", "qwen2moe", false, 4, 2048}, M{"mixtral", "mixtral", false, 4, 2048},
          M{"qwen3moe", "qwen3moe", false, 3, 2048}, M{"glm4moe", "glm4moe", false, 3, 2048},
          M{"gpt-oss", "gpt-oss", false, 3, 2048}, M{"deepseek2", "deepseek2", false, 3, 2048}}) {
      synth::ModelSpec s;
      s.arch = m.arch;
      s.tied_output = m.tied;
      s.n_layer = m.n_layer;
      s.n_ctx = m.n_ctx;
      s.n_embd = 64;
      s.n_ff = 128;
      s.n_vocab = 512;
      s.weight_type = GgmlType::Q8_0;
      s.rope_freqs = std::string(m.file) == "llama-tied";
      const std::string path = dir_ + "/" + m.file + ".gguf";
      Status st = synth::WriteModel(s, path);
      ASSERT_TRUE(st.ok()) << m.file << ": " << st.ToString();
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  static std::string Path(const std::string& name) { return dir_ + "/" + name + ".gguf"; }

 private:
  static std::string dir_;
};
std::string SynthModels::dir_;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new SynthModels);

/// "shared:<file>" or "synth:<name>".
std::string ModelFile(const std::string& key) {
  if (key.rfind("shared:", 0) == 0) return test::ModelPath(key.substr(7));
  return SynthModels::Path(key.substr(6));
}

struct Case {
  const char* name;
  const char* model;
  const char* devices;
  int ngl;
  int n_copies = 4;
  const char* flags = "";  // "nkvo" (-nkvo), or an -ot override "REGEX=BUFT"
  bool run = true;         // false: only the plan is checked (the runtime cannot execute the model)
};

/// Runs `bytes` (a plan of `model`) with its GPU-type devices on the asynchronous test backend and
/// the CPU-only plan of the same model (n_ctx 256): an 8-token prompt then 4 greedy tokens (several
/// graph computes, where ggml would rotate cur_copy); logits within 0.03 (CPU_REPACK vs plain Q4_0
/// accumulation order, as multi_device_test); every buffer allocated exactly as planned.
void RunAgainstCpuOnly(const std::string& model, const std::vector<uint8_t>& bytes) {
  planner::ContextConfig cfg;
  cfg.n_ctx = 256;
  auto ref_plan = test::PlanCpu(model, cfg, /*use_mmap=*/true);
  ASSERT_TRUE(ref_plan.ok()) << ref_plan.status().ToString();
  auto stats = std::make_shared<test::AsyncStats>();
  SessionOptions opts;
  opts.n_threads = 1;
  opts.backend_factory = test::MakeAsyncPrivateBackendFactory(stats);
  auto multi = Session::CreateFromPlanBytes(bytes, model, opts);
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  for (const auto& b : (*multi)->Buffers()) EXPECT_EQ(b.planned, b.allocated) << b.name;
  SessionOptions cpu_opts;
  cpu_opts.n_threads = 1;
  auto ref = Session::CreateFromPlanBytes(*ref_plan, model, cpu_opts);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const int32_t nv = static_cast<int32_t>((*ref)->n_vocab());
  std::vector<int32_t> prompt = {1, 403 % nv, 407 % nv, 261 % nv, 378 % nv, 300 % nv, 42, 7};
  std::vector<float> a, b;
  Status st = (*multi)->Decode(prompt, true, &a);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE((*ref)->Decode(prompt, true, &b).ok());
  for (int step = 0; step < 4; ++step) {  // several graph computes (ggml would rotate cur_copy)
    EXPECT_LE(MaxDiff(a, b), 0.03f) << "step " << step;
    const int32_t next = static_cast<int32_t>(std::max_element(b.end() - nv, b.end()) - (b.end() - nv));
    st = (*multi)->Decode({next}, false, &a);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE((*ref)->Decode({next}, false, &b).ok());
  }
  EXPECT_GT(stats->computes.load(), 0);
}

class PipelinePlans : public ::testing::TestWithParam<Case> {};

TEST_P(PipelinePlans, AllCopiesLiveAndLogitsEqualCpuOnly) {
  const Case c = GetParam();
  const std::string model = ModelFile(c.model);
  STOWAGE_REQUIRE_FILE(model);
  auto flags = [&](planner::PlacementOptions& o) {
    const std::string f = c.flags;
    if (f == "nkvo")
      o.offload_kqv = false;
    else if (!f.empty())
      o.overrides.push_back({f.substr(0, f.find('=')), f.substr(f.find('=') + 1)});
  };
  for (bool no_host : {false, true}) {
    auto plan = PlanOn(model, c.devices, c.ngl, no_host, flags);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->n_copies, c.n_copies);
    const auto conflicts = Conflicts(plan->bytes);
    EXPECT_TRUE(conflicts.empty()) << (no_host ? "without host bufts\n" : "") << Join(conflicts);
  }
  if (!c.run) return;
  auto plan = PlanOn(model, c.devices, c.ngl, /*no_host_buft=*/true, flags);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();

  RunAgainstCpuOnly(model, plan->bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Models, PipelinePlans,
    ::testing::Values(
        Case{"tiny8_untied", "shared:tiny8-untied-q4_0.gguf", "h200,h200,llamacpp-cpu", 99},
        Case{"tiny_tied_f32", "shared:tiny-tied-f32.gguf", "h200,h200,llamacpp-cpu", 99},
        Case{"stories260K_three_gpus", "shared:stories260K.gguf", "h200,h100,rtx4090,llamacpp-cpu", 99},
        Case{"stories260K_ngl_n_layer_plus_1", "shared:stories260K.gguf", "h200,h200,llamacpp-cpu", -1},
        // -ot / --cpu-moe: n_copies 1 (TensorOverridesTurnPipelineParallelismOff)
        // n_copies 1: -ngl n_layer (the output layer stays on the CPU); -nkvo: see
        // NkvoWithOffloadedLayersRuns
        Case{"tiny8_ngl_n_layer", "shared:tiny8-untied-q4_0.gguf", "h200,h200,llamacpp-cpu", 8, 1},
        Case{"synth_llama", "synth:llama", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_llama_tied_rope_freqs", "synth:llama-tied", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_qwen2", "synth:qwen2", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_phi3", "synth:phi3", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_gemma", "synth:gemma", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_mamba", "synth:mamba", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_qwen2moe", "synth:qwen2moe", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_mixtral", "synth:mixtral", "h200,h100,rtx4090,llamacpp-cpu", 99},
        Case{"synth_qwen3moe", "synth:qwen3moe", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_glm4moe", "synth:glm4moe", "h200,h200,llamacpp-cpu", 99},
        Case{"synth_gpt_oss", "synth:gpt-oss", "h200,h100,llamacpp-cpu", 99},
        Case{"synth_deepseek2", "synth:deepseek2", "h200,h200,llamacpp-cpu", 99}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// ---- the liveness check can fail -------------------------------------------------------------

std::vector<uint8_t> Edit(const std::vector<uint8_t>& bytes, const std::function<void(bp::PlanT&)>& f) {
  std::unique_ptr<bp::PlanT> p = bp::UnPackPlan(bytes.data());
  f(*p);
  flatbuffers::FlatBufferBuilder fbb;
  bp::FinishPlanBuffer(fbb, bp::Plan::Pack(fbb, p.get()));
  std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  EXPECT_TRUE(SealPlan(out.data(), out.size()).ok());  // the edit, not the checksum, is under test
  return out;
}

int Find(const bp::GraphT& g, const std::string& name) {
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i]->name == name) return static_cast<int>(i);
  return -1;
}

class PipelineTiny8 : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::ModelPath("tiny8-untied-q4_0.gguf");
    STOWAGE_REQUIRE_FILE(model_);
    auto p = PlanOn(model_, "h200,h200,llamacpp-cpu", 99);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_EQ(p->n_copies, 4);
    plan_ = p->bytes;
  }
  std::string model_;
  std::vector<uint8_t> plan_;
};

TEST_F(PipelineTiny8, LivenessCheckFindsACopyMovedOntoALiveTensor) {
  ASSERT_TRUE(Conflicts(plan_).empty()) << Join(Conflicts(plan_));
  // CUDA0#inp_embd#2 is never read while copy 0 is current, but it must keep its bytes: put it
  // where norm-0 (a node of the same buffer) is.
  auto bad = Edit(plan_, [](bp::PlanT& p) {
    bp::GraphT& g = *p.graphs[0];
    const int c2 = Find(g, "CUDA0#inp_embd#2"), n = Find(g, "norm-0");
    ASSERT_GE(c2, 0);
    ASSERT_GE(n, 0);
    ASSERT_EQ(g.tensors[c2]->buffer, g.tensors[n]->buffer);
    g.tensors[c2]->offset = g.tensors[n]->offset;
  });
  const auto c = Conflicts(bad);
  ASSERT_FALSE(c.empty());
  bool named = false;
  for (const auto& line : c)
    named = named || (line.find("'CUDA0#inp_embd#2'") != std::string::npos &&
                      line.find("'norm-0'") != std::string::npos);
  EXPECT_TRUE(named) << Join(c);
}

// ---- the verifier and the pipeline fields -----------------------------------------------------

/// The verifier's message for `bytes`, or "" when it accepts the plan.
std::string VerifierError(const std::vector<uint8_t>& bytes) {
  auto pf = PlanFile::FromBytes(bytes, "p.plan");
  return pf.ok() ? std::string() : pf.status().message();
}

bp::SplitInputT& FirstSplitInput(bp::PlanT& p, size_t k = 0) {
  for (auto& g : p.graphs)
    for (auto& sp : g->splits)
      if (sp->inputs.size() > k) return *sp->inputs[k];
  std::abort();
}

bp::GraphT& GraphOfFirstSplitInput(bp::PlanT& p) {
  for (auto& g : p.graphs)
    for (auto& sp : g->splits)
      if (!sp->inputs.empty()) return *g;
  std::abort();
}

// with n_copies 1 a one-entry SplitInput.copies list was not checked at all (only
// "more than one entry" was refused): an out-of-range index passed the verifier and plan-dump
// --json read graph tensor 99999 of a much shorter vector (flatbuffers Vector::Get out of bounds).
TEST(PipelineVerifier, OneEntryCopiesListIsCheckedWithOneCopy) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  auto p = PlanOn(model, "rpc0,rpc1,llamacpp-cpu", 4);  // golden -ngl 4: n_copies 1, split inputs
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->n_copies, 1);
  EXPECT_EQ(VerifierError(p->bytes), "");
  // The copy itself as the one entry is fine (old writers may list it).
  EXPECT_EQ(VerifierError(
                Edit(p->bytes, [](bp::PlanT& x) { FirstSplitInput(x).copies = {FirstSplitInput(x).copy}; })),
            "");
  const std::string e =
      VerifierError(Edit(p->bytes, [](bp::PlanT& x) { FirstSplitInput(x).copies = {99999}; }));
  EXPECT_NE(e.find(".copies: copies[0] must be the tensor the nodes read"), std::string::npos) << e;
}

// copies c > 0 were only checked for kind SplitCopy and a buffer: another type, shape,
// buffer or backend than copy 0 (ggml_dup_tensor_layout on the same backend) passed.
TEST_F(PipelineTiny8, CopyUnlikeCopy0IsRefused) {
  auto expect = [&](const std::function<void(bp::PlanT&)>& f, const std::string& what) {
    const std::string e = VerifierError(Edit(plan_, f));
    EXPECT_NE(e.find(what), std::string::npos) << "got: '" << e << "'";
  };
  const std::string differs = "differs from copy 0 in type, shape, buffer or backend";
  expect(
      [](bp::PlanT& p) {
        bp::GraphT& g = GraphOfFirstSplitInput(p);
        g.tensors[FirstSplitInput(p).copies[1]]->type = static_cast<uint32_t>(GgmlType::F16);
      },
      differs);
  expect(
      [](bp::PlanT& p) {
        bp::GraphT& g = GraphOfFirstSplitInput(p);
        g.tensors[FirstSplitInput(p).copies[2]]->ne[0] = bp::DimExpr(7, 0, 0, 0, 0);
      },
      differs);
  expect(
      [](bp::PlanT& p) {
        bp::GraphT& g = GraphOfFirstSplitInput(p);
        auto& t = *g.tensors[FirstSplitInput(p).copies[3]];
        t.buffer = 0;  // a weights buffer
      },
      differs);
  expect(
      [](bp::PlanT& p) {  // a graph input's instance on another backend
        auto& g = *p.graphs[0];
        auto& t = *g.tensors[g.input_copies[0]->copies[1]];
        t.backend = 0;
      },
      differs);
}

// an instance listed twice (two copies of one input sharing a tensor, or one tensor
// serving two inputs) passed: ggml makes one tensor per (input, backend, copy).
TEST_F(PipelineTiny8, CopyListedTwiceIsRefused) {
  auto expect = [&](const std::function<void(bp::PlanT&)>& f) {
    const std::string e = VerifierError(Edit(plan_, f));
    EXPECT_NE(e.find("is listed twice"), std::string::npos) << "got: '" << e << "'";
  };
  expect([](bp::PlanT& p) { FirstSplitInput(p).copies[3] = FirstSplitInput(p).copies[2]; });
  expect([](bp::PlanT& p) { FirstSplitInput(p, 1).copies[1] = FirstSplitInput(p, 0).copies[1]; });
  expect([](bp::PlanT& p) {
    auto& g = *p.graphs[0];
    auto dup = std::make_unique<bp::InputCopiesT>(*g.input_copies[0]);
    g.input_copies.push_back(std::move(dup));
  });
}

// Regression guards: weights as copies, n_copies 0 / 5 / 2^32-1, copies naming a non-input.
TEST_F(PipelineTiny8, CopiesPointingElsewhereAreRefused) {
  auto err = [&](const std::function<void(bp::PlanT&)>& f) { return VerifierError(Edit(plan_, f)); };
  EXPECT_NE(err([](bp::PlanT& p) {
              bp::GraphT& g = GraphOfFirstSplitInput(p);
              for (size_t i = 0; i < g.tensors.size(); ++i)
                if (g.tensors[i]->kind == bp::TensorKind::Weight) {
                  FirstSplitInput(p).copies[1] = static_cast<int>(i);
                  return;
                }
            }).find("has the wrong kind"),
            std::string::npos);
  for (uint32_t n : {0u, 5u, 0xffffffffu})
    EXPECT_NE(err([n](bp::PlanT& p) { p.n_copies = n; }).find("n_copies: expected 1 to 4"), std::string::npos)
        << n;
  EXPECT_NE(err([](bp::PlanT& p) {
              auto& g = *p.graphs[0];
              g.input_copies[0]->tensor = g.nodes[3];
            }).find("expected a graph input"),
            std::string::npos);
  EXPECT_NE(err([](bp::PlanT& p) { FirstSplitInput(p).copies[2] = 1 << 30; }).find("index out of range"),
            std::string::npos);
}

// A node (or split input) reading copy c > 0 of a pipeline-parallel input: the runtime fills copy 0
// only. Not a wrong run before (the session's data-flow check refused it at the first Decode:
// "node 'norm-0' reads 'CUDA0#inp_embd#1' before any node computes it"); the verifier now refuses
// it at load, naming the field, as COMPATIBILITY.md states the rule.
TEST_F(PipelineTiny8, NodeReadingAnUnfilledCopyIsRefused) {
  auto e = VerifierError(Edit(plan_, [](bp::PlanT& p) {
    bp::GraphT& g = GraphOfFirstSplitInput(p);
    const auto& in = FirstSplitInput(p);
    for (int n : g.nodes)
      for (int& s : g.tensors[n]->srcs)
        if (s == in.copy) {
          s = in.copies[1];
          return;
        }
    FAIL() << "no node reads the first split input's copy";
  }));
  EXPECT_NE(e.find("of a pipeline-parallel input (only copy 0 is ever filled)"), std::string::npos) << e;
  e = VerifierError(Edit(plan_, [](bp::PlanT& p) {  // a split input copying an unfilled instance
    auto& g = *p.graphs[0];
    for (auto& sp : g.splits)
      for (auto& in : sp->inputs)
        for (const auto& ic : g.input_copies)
          if (in->tensor == ic->tensor) {
            in->tensor = ic->copies[2];
            return;
          }
    FAIL() << "no split input copies a graph input";
  }));
  EXPECT_NE(e.find("of a pipeline-parallel input (only copy 0 is ever filled)"), std::string::npos) << e;
}

// (fixed; runtime/src/executor/session.cpp, the defined-before-use check of a00cedd) no
// plan with -nkvo and offloaded layers ran. With the KV cache on the CPU, the CPU split copies views
// computed on the GPU ("Vcur-0 (transposed)", "q-0": TRANSPOSE / PERMUTE of GPU results), and ggml
// places a view node at its consumer, after the split's start: Session::Impl::CheckDefinedBeforeUse
// refused the plan at the first Decode with "split input 'Vcur-0 (transposed)' is copied before it
// is computed", although the view's memory (its view_src) was computed earlier. Relaxing only that
// check gave NaN logits. The first report blamed view binding; the session binds every tensor, views
// included, before the first split (RunUbatch), and the NaN came from Extent: it counted dim 0 of a
// view as ne0 contiguous elements, so the host staging of a TRANSPOSE (nb0 = a row) read out of
// private memory was too small and cpu::Cpy read past it. Fix: a split input is defined once the
// tensor owning its memory is (ViewOwner), and Extent spans a strided dim 0 as ggml_nbytes does.
// Two RPC devices and two H200, -ngl 4 and 99 (test/unit/backends/async_copy_test: AsyncNoKvOffload).
TEST(HostileSessionInput, NkvoWithOffloadedLayersRuns) {
  const std::string model = test::ModelPath("tiny8-untied-q4_0.gguf");
  STOWAGE_REQUIRE_FILE(model);
  for (const char* devices : {"rpc0,rpc1,llamacpp-cpu", "h200,h200,llamacpp-cpu"})
    for (int ngl : {4, 99}) {
      SCOPED_TRACE(std::string(devices) + " -ngl " + std::to_string(ngl) + " -nkvo");
      auto plan = PlanOn(model, devices, ngl, /*no_host_buft=*/true,
                         [](planner::PlacementOptions& o) { o.offload_kqv = false; });
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      EXPECT_EQ(plan->n_copies, 1);
      EXPECT_TRUE(Conflicts(plan->bytes).empty()) << Join(Conflicts(plan->bytes));
      RunAgainstCpuOnly(model, plan->bytes);
    }
}

// (fixed: PipelineParallelism takes has_tensor_overrides) with a
// tensor override (-ot, --cpu-moe, --n-cpu-moe) the plan enabled pipeline parallelism (n_copies 4,
// four times the input copies in every compute buffer), but no llama.cpp version does: -ot arrived
// with `!model.has_tensor_overrides()` in the pipeline_parallel condition (llama.cpp PR 11397;
// reference/llamacpp-placement.md §4.1 "Pipeline parallelism is disabled when any override
// exists", llama-context.cpp), and --cpu-moe is made of overrides. The planner follows FEB25's
// rule, which predates -ot, so the combination it plans never existed. Fix: PipelineParallelism
// takes "has overrides" (PlacementOptions::overrides non-empty, after --cpu-moe patterns) and says
// "tensor overrides given"; its caller is place_model.cpp (PlaceModelStep, which the compiler's
// placement passes run too).
TEST(HostilePlanner, TensorOverridesTurnPipelineParallelismOff) {
  const std::string model = test::ModelPath("stories260K.gguf");
  STOWAGE_REQUIRE_FILE(model);
  auto ot = PlanOn(model, "h200,h200,llamacpp-cpu", 99, false,
                   [](planner::PlacementOptions& o) { o.overrides.push_back({"ffn_down", "CPU"}); });
  ASSERT_TRUE(ot.ok()) << ot.status().ToString();
  EXPECT_EQ(ot->n_copies, 1) << "-ot ffn_down=CPU";
  auto moe = PlanOn(SynthModels::Path("qwen2moe"), "h200,h200,llamacpp-cpu", 99, false,
                    [](planner::PlacementOptions& o) {
                      for (const auto& x : planner::CpuMoeOverrides(true, 0, "CPU")) o.overrides.push_back(x);
                    });
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ(moe->n_copies, 1) << "--cpu-moe";
  // Without overrides the same placement keeps n_copies 4 (the rule's other conditions hold).
  auto plain = PlanOn(model, "h200,h200,llamacpp-cpu", 99);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->n_copies, 4);
}

// --cpu-moe and --n-cpu-moe plans of every MoE architecture run: the experts of the first layers
// (or all of them) stay in the CPU buffer type while the rest of each layer is on the GPU-type
// device (the asynchronous test backend), and the logits are the CPU-only plan's. The plan is
// checked to really split the layer: block 0's expert stacks on the CPU, block n_layer-1's on the
// GPU with --n-cpu-moe 1 (leading dense layers: deepseek2 and glm4moe start their experts at block
// 1, so --n-cpu-moe 2 there).
struct MoeCase {
  const char* arch;
  int n_cpu_moe;  // 0: --cpu-moe
  int first_moe_block;
};

class MoeCpuExperts : public ::testing::TestWithParam<MoeCase> {};

/// The device name of the buffer holding weight `name` in plan `bytes` ("" when absent).
std::string WeightDevice(const std::vector<uint8_t>& bytes, const std::string& name) {
  std::unique_ptr<bp::PlanT> p = bp::UnPackPlan(bytes.data());
  for (const auto& t : p->tensors)
    if (t->name == name) return p->devices[p->buffers[t->buffer]->device]->name;
  return "";
}

TEST_P(MoeCpuExperts, ExpertsOnTheCpuRunAsTheCpuOnlyPlan) {
  const MoeCase c = GetParam();
  const std::string model = SynthModels::Path(c.arch);
  auto plan =
      PlanOn(model, "h200,llamacpp-cpu", 99, /*no_host_buft=*/true, [&](planner::PlacementOptions& o) {
        for (const auto& x : planner::CpuMoeOverrides(c.n_cpu_moe == 0, c.n_cpu_moe, "CPU"))
          o.overrides.push_back(x);
      });
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->n_copies, 1) << "tensor overrides turn pipeline parallelism off";
  const std::string first = "blk." + std::to_string(c.first_moe_block) + ".ffn_gate_exps.weight";
  const std::string last = "blk.2.ffn_gate_exps.weight";  // the synthetic models have 3 blocks
  EXPECT_EQ(WeightDevice(plan->bytes, first), "CPU") << first;
  EXPECT_EQ(WeightDevice(plan->bytes, last), c.n_cpu_moe == 0 ? "CPU" : "CUDA0") << last;
  EXPECT_EQ(WeightDevice(plan->bytes, "blk.2.attn_norm.weight"), "CUDA0");
  EXPECT_TRUE(Conflicts(plan->bytes).empty()) << Join(Conflicts(plan->bytes));
  RunAgainstCpuOnly(model, plan->bytes);
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeCpuExperts,
                         ::testing::Values(MoeCase{"qwen3moe", 1, 0}, MoeCase{"qwen3moe", 0, 0},
                                           MoeCase{"glm4moe", 2, 1}, MoeCase{"glm4moe", 0, 1},
                                           MoeCase{"gpt-oss", 1, 0}, MoeCase{"gpt-oss", 0, 0},
                                           MoeCase{"deepseek2", 2, 1}, MoeCase{"deepseek2", 0, 1}),
                         [](const ::testing::TestParamInfo<MoeCase>& i) {
                           std::string n = i.param.arch;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n + (i.param.n_cpu_moe == 0 ? "_cpu_moe" : "_n_cpu_moe");
                         });

}  // namespace
}  // namespace stowage
