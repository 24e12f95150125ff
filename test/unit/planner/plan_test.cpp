// planner::Plan, the entry point plan-model, stowage-run and the tests' plans call: the same bytes
// as the step-by-step pipeline, the -fa auto retry, the fit check, --fit, the messages and the
// offload_kqv the plan records; the steps it exposes to the MLIR passes.
#include "stowage/planner/plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stowage/plan/plan_generated.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan_export.h"
#include "test_manifests.h"
#include "test_paths.h"

namespace stowage::planner {
namespace {

using testing::Cpu;
using testing::Gpu;

/// A GPU like testing::Gpu that runs every op but FLASH_ATTN_EXT (as a device whose manifest lacks
/// it), so that -fa auto moves attention off the layer's device.
DeviceManifest GpuWithoutFlashAttn(uint64_t free_mib) {
  const std::string j =
      R"({"manifest_version": 1, "backend": "RPC", "name": "GPU0", "description": "test GPU", "type": "GPU",
      "memory": {"total": )" +
      std::to_string(free_mib << 20) + R"(, "free": )" + std::to_string(free_mib << 20) +
      R"(}, "caps": {"async": false, "host_buffer": false, "buffer_from_host_ptr": false, "events": false},
      "buffer_types": {"default": {"name": "GPU0", "alignment": 32, "is_host": false}},
      "op_support": {"default": "supported", "rules": [{"ops": ["FLASH_ATTN_EXT"], "supported": false}]}})";
  auto m = ParseManifest(j, "gpu0");
  if (!m.ok()) std::abort();
  return *m;
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(path_)) GTEST_SKIP() << "shared model " << path_ << " is absent";
    auto g = GgufFile::Open(path_);
    ASSERT_TRUE(g.ok()) << g.status().message();
    gguf_ = std::move(*g);
  }
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
};

/// Plan's bytes are the step-by-step pipeline's (BuildModelGraphs, PlaceModel, SerializePlan), as
/// plan-model and stowage-run planned before they called Plan, for several requests.
TEST_F(PlanTest, GivesThePipelinesBytes) {
  for (int variant = 0; variant < 3; ++variant) {
    PlanRequest req;
    req.context.n_ctx = 256;
    req.flags = "test";
    // Both llama.cpp's: the request's, not the context's, decides.
    req.llamacpp_compat = variant == 1 ? LlamacppCompat::k2026 : LlamacppCompat::kFeb25;
    std::vector<DeviceManifest> machine = {Cpu()};
    if (variant == 1) {
      machine = {Gpu("GPU0", 1024), Cpu()};
      req.placement.n_gpu_layers = 2;
      req.flash_attn = FlashAttnMode::kOn;
    } else if (variant == 2) {
      machine = {Gpu("GPU0", 1024), Gpu("GPU1", 1024), Cpu()};
      req.placement.n_gpu_layers = kAllGpuLayers;
      req.placement.offload_kqv = false;
      req.context.n_batch = 16;
    }
    auto r = Plan(*gguf_, machine, req);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->fit.ok()) << r->fit.message();
    ContextConfig cfg = req.context;
    cfg.flash_attn = req.flash_attn == FlashAttnMode::kOn;
    cfg.llamacpp_compat = req.llamacpp_compat;
    auto m = BuildModelGraphs(*gguf_, cfg);
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto o = PlaceModel(*m, machine, req.placement);
    ASSERT_TRUE(o.ok()) << o.status().message();
    EXPECT_EQ(r->bytes, SerializePlan(*gguf_, *m, o->placement, o->memory, "test")) << "variant " << variant;
    // -nkvo is recorded once (PlacementOptions::offload_kqv) and reaches the plan's context.
    EXPECT_EQ(plan::GetPlan(r->bytes.data())->context()->offload_kqv(), variant != 2);
  }
}

TEST_F(PlanTest, FlashAttnAutoKeepsItWhereTheLayersDeviceRunsIt) {
  PlanRequest req;
  req.llamacpp_compat = LlamacppCompat::kFeb25;
  req.context.n_ctx = 64;
  req.flash_attn = FlashAttnMode::kAuto;
  req.placement.n_gpu_layers = kAllGpuLayers;
  std::vector<PlanMessage> said;
  auto r = Plan(*gguf_, {Gpu("GPU0", 1024), Cpu()}, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->graphs.cfg.flash_attn);
  EXPECT_EQ(r->graphs.cfg.n_ctx, 256u);  // padded to 256 with flash attention
  ASSERT_FALSE(said.empty());
  EXPECT_EQ(said.back().kind, PlanMessageKind::kFlashAttnEnabled);
  EXPECT_EQ(said.back().text, "llama_context: Flash Attention was auto, set to enabled");
  // llama.cpp 2026 words it in llama_context::resolve_fused_ops.
  req.llamacpp_compat = LlamacppCompat::k2026;
  said.clear();
  r = Plan(*gguf_, {Gpu("GPU0", 1024), Cpu()}, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(said.empty());
  EXPECT_EQ(said.back().text, "resolve_fused_ops: Flash Attention enabled");
}

TEST_F(PlanTest, FlashAttnAutoPlansAgainWithoutWhenAttentionMovesOff) {
  PlanRequest req;
  req.llamacpp_compat = LlamacppCompat::kFeb25;
  req.context.n_ctx = 64;
  req.flash_attn = FlashAttnMode::kAuto;
  req.placement.n_gpu_layers = kAllGpuLayers;
  req.flags = "test";
  std::vector<PlanMessage> said;
  const std::vector<DeviceManifest> machine = {GpuWithoutFlashAttn(1024), Cpu()};
  auto r = Plan(*gguf_, machine, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->graphs.cfg.flash_attn);
  EXPECT_EQ(r->graphs.cfg.n_ctx, 64u);  // resolved again without flash attention: padded to 32
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].kind, PlanMessageKind::kFlashAttnDisabled);
  EXPECT_NE(said[0].text.find("but the Flash Attention tensor is assigned to device CPU"), std::string::npos)
      << said[0].text;
  EXPECT_NE(said[0].text.find("\nllama_context: Flash Attention was auto, set to disabled"),
            std::string::npos);
  // The same plan as -fa off.
  req.flash_attn = FlashAttnMode::kOff;
  auto off = Plan(*gguf_, machine, req);
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ(r->bytes, off->bytes);
  // llama.cpp 2026: resolve_fused_ops's lines.
  req.flash_attn = FlashAttnMode::kAuto;
  req.llamacpp_compat = LlamacppCompat::k2026;
  said.clear();
  r = Plan(*gguf_, machine, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].text.find("resolve_fused_ops: layer 0 is assigned to device GPU0 but Flash Attention is "
                              "assigned to device CPU (usually due to missing support)"),
            std::string::npos)
      << said[0].text;
  EXPECT_NE(said[0].text.find("\nresolve_fused_ops: Flash Attention not supported, set to disabled"),
            std::string::npos);
}

TEST(LlamacppCompat, ParsesItsTwoNamesAndRefusesOthers) {
  for (LlamacppCompat c : {LlamacppCompat::kFeb25, LlamacppCompat::k2026}) {
    auto parsed = ParseLlamacppCompat(LlamacppCompatName(c));
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, c);
  }
  auto bad = ParseLlamacppCompat("Feb25");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "expected feb25 or 2026, found 'Feb25'");
  EXPECT_EQ(LlamacppDefaultsOf(LlamacppCompat::kFeb25).n_ctx, 4096u);
  EXPECT_EQ(LlamacppDefaultsOf(LlamacppCompat::kFeb25).flash_attn, FlashAttnMode::kOff);
  EXPECT_EQ(LlamacppDefaultsOf(LlamacppCompat::k2026).n_ctx, 0u);
  EXPECT_EQ(LlamacppDefaultsOf(LlamacppCompat::k2026).flash_attn, FlashAttnMode::kAuto);
}

TEST_F(PlanTest, APlanThatDoesNotFitIsReportedAndNotSerializedUnlessAsked) {
  PlanRequest req;
  req.context.n_ctx = 4096;
  req.placement.n_gpu_layers = kAllGpuLayers;
  const std::vector<DeviceManifest> machine = {Gpu("GPU0", 1), Cpu()};  // 1 MiB free
  auto r = Plan(*gguf_, machine, req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->fit.code(), StatusCode::kResourceExhausted);
  // The model file first, as in the planner's other errors (was: no file named).
  EXPECT_EQ(r->fit.message().rfind(gguf_->path() + ": does not fit: device GPU0 needs", 0), 0u)
      << r->fit.message();
  EXPECT_TRUE(r->bytes.empty());
  EXPECT_FALSE(r->outcome.memory.buffers.empty());  // the report can still be printed
  req.fit_check = false;                            // --no-fit-check
  auto anyway = Plan(*gguf_, machine, req);
  ASSERT_TRUE(anyway.ok()) << anyway.status().message();
  EXPECT_EQ(anyway->fit.code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(anyway->bytes.empty());
}

TEST_F(PlanTest, FitChoosesTheLayersAndSaysSo) {
  PlanRequest req;
  req.context.n_ctx = 4096;
  req.fit = true;
  req.fit_target = 0;
  req.placement.n_gpu_layers = 99;  // ignored with fit
  std::vector<PlanMessage> said;
  auto r = Plan(*gguf_, {Gpu("GPU0", 1024), Cpu()}, req, [&](const PlanMessage& m) {
    if (m.kind != PlanMessageKind::kContextOverflow && m.kind != PlanMessageKind::kFitTrace)
      said.push_back(m);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int all = static_cast<int>(r->graphs.hp.n_layer) + 1;
  EXPECT_EQ(r->placement.n_gpu_layers, all);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0].kind, PlanMessageKind::kFitSearched);
  EXPECT_EQ(said[0].text, "-c 4096 -ngl -1");  // everything fits: llama.cpp's fit changes nothing
  EXPECT_EQ(said[1].kind, PlanMessageKind::kFitChosen);
  EXPECT_EQ(said[1].n_gpu_layers, all);
  EXPECT_EQ(said[1].text, "-ngl " + std::to_string(all) + " fits (of " + std::to_string(all - 1) +
                              " layers + output)\n-c 4096 -ngl -1");
}

TEST_F(PlanTest, ReportsLlamaCppsContextAndGpuWarnings) {
  PlanRequest req;
  req.context.n_ctx = 1 << 16;  // beyond the model's training context
  req.context.n_batch = 16;
  req.llamacpp_compat = LlamacppCompat::kFeb25;  // its GGML_KQ_MASK_PAD raise
  req.placement.n_gpu_layers = 4;
  req.cpu_moe = true;
  req.serialize = false;
  std::vector<PlanMessage> said;
  auto r = Plan(*gguf_, {Cpu()}, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->bytes.empty());
  std::vector<PlanMessageKind> kinds;
  for (const PlanMessage& m : said) kinds.push_back(m.kind);
  EXPECT_EQ(kinds, (std::vector<PlanMessageKind>{PlanMessageKind::kWarning, PlanMessageKind::kBatchRaised,
                                                 PlanMessageKind::kContextOverflow,
                                                 PlanMessageKind::kGpuLayersIgnored}));
  EXPECT_EQ(said[0].text, "--cpu-moe/--n-cpu-moe given but the model has no experts");
  // llama.cpp 2026 has no GGML_KQ_MASK_PAD raise: n_batch stays 16, without the line.
  req.llamacpp_compat = LlamacppCompat::k2026;
  said.clear();
  r = Plan(*gguf_, {Cpu()}, req, [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->graphs.cfg.n_batch, 16u);
  EXPECT_TRUE(std::none_of(said.begin(), said.end(),
                           [](const PlanMessage& m) { return m.kind == PlanMessageKind::kBatchRaised; }));
}

TEST_F(PlanTest, ErrorsAreTheSteps) {
  PlanRequest req;
  req.context.n_ctx = 64;
  req.context.type_v = GgmlType::Q8_0;  // needs flash attention
  auto r = Plan(*gguf_, {Cpu()}, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("V cache quantization requires flash_attn"), std::string::npos)
      << r.status().message();
}

/// The steps Plan exposes for the MLIR placement passes (compiler/lib/Transforms), which run them
/// one pass at a time: ResolvePlanContext says what Plan says, PlaceModelStep in order is
/// PlaceModel, CheckPlanFit is PlanResult::fit.
TEST_F(PlanTest, ItsStepsAreWhatItRuns) {
  auto hp = ReadHParams(*gguf_);
  ASSERT_TRUE(hp.ok()) << hp.status().message();
  for (uint32_t n_batch : {16u, 512u}) {
    ContextConfig asked;
    asked.n_ctx = 256;
    asked.n_batch = n_batch;
    std::vector<PlanMessage> said;
    auto cfg =
        ResolvePlanContext(*hp, gguf_->path(), asked, [&](const PlanMessage& m) { said.push_back(m); });
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    ContextConfig resolved = asked;
    ASSERT_TRUE(ResolveContext(*hp, gguf_->path(), &resolved).ok());
    EXPECT_EQ(cfg->n_batch, resolved.n_batch);
    EXPECT_EQ(cfg->n_ubatch, resolved.n_ubatch);
    if (n_batch < kKqMaskPad) {
      EXPECT_EQ(cfg->n_batch, kKqMaskPad);
      ASSERT_EQ(said.size(), 1u);
      EXPECT_EQ(said[0].kind, PlanMessageKind::kBatchRaised);
      EXPECT_EQ(said[0].text,
                "llama_init_from_model: n_batch is less than GGML_KQ_MASK_PAD - increasing to 64");
    } else {
      EXPECT_TRUE(said.empty());
    }
  }

  PlanRequest req;
  req.context.n_ctx = 4096;
  req.placement.n_gpu_layers = 3;
  req.fit_check = false;
  req.flags = "test";
  const std::vector<DeviceManifest> machine = {Gpu("GPU0", 1), Gpu("GPU1", 1024), Cpu()};
  auto r = Plan(*gguf_, machine, req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ContextConfig cfg = req.context;
  cfg.llamacpp_compat = req.llamacpp_compat;  // the request's, as Plan's
  auto m = BuildModelGraphs(*gguf_, cfg);
  ASSERT_TRUE(m.ok()) << m.status().message();
  PlacementOutcome o;
  for (PlaceStep step : {PlaceStep::kLayers, PlaceStep::kWeights, PlaceStep::kKvCache, PlaceStep::kSchedule,
                         PlaceStep::kMemory})
    ASSERT_TRUE(PlaceModelStep(step, *m, machine, req.placement, &o).ok());
  EXPECT_EQ(r->bytes, SerializePlan(*gguf_, *m, o.placement, o.memory, "test"));
  EXPECT_EQ(o.placement.log, r->outcome.placement.log);
  EXPECT_EQ(o.pp_nodes, r->outcome.pp_nodes);
  EXPECT_EQ(o.tg_nodes, r->outcome.tg_nodes);
  const Status fit = CheckPlanFit(*gguf_, o);
  EXPECT_EQ(fit.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fit.message(), r->fit.message());
  EXPECT_EQ(fit.message().rfind(gguf_->path() + ": does not fit: device GPU0 needs", 0), 0u) << fit.message();
}

/// The --fit and --cpu-moe steps, called alone, give what Plan chose and said.
TEST_F(PlanTest, ItsFitAndCpuMoeStepsAreWhatItRuns) {
  PlanRequest req;
  req.context.n_ctx = 4096;
  req.fit = true;
  req.fit_target = 0;
  req.serialize = false;
  const std::vector<DeviceManifest> machine = {Gpu("GPU0", 1024), Cpu()};
  std::vector<PlanMessage> plan_said;
  auto r = Plan(*gguf_, machine, req, [&](const PlanMessage& m) {
    if (m.kind == PlanMessageKind::kFitSearched) plan_said.push_back(m);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<PlanMessage> said;
  auto n = FitPlanParams(*gguf_, req.context, machine, req.placement, FitOptions{{0}, 4096}, r->graphs.hp,
                         [&](const PlanMessage& m) {
                           if (m.kind != PlanMessageKind::kFitTrace) said.push_back(m);
                         });
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(FitGpuLayerCount(*n, r->graphs.hp), r->placement.n_gpu_layers);
  ASSERT_EQ(said.size(), 1u);
  ASSERT_EQ(plan_said.size(), 1u);
  EXPECT_EQ(said[0].text, plan_said[0].text);

  // A model without experts: no pattern matches, and the warning Plan gives.
  auto hp = ReadHParams(*gguf_);
  ASSERT_TRUE(hp.ok()) << hp.status().message();
  PlacementOptions placement;
  placement.overrides.push_back({"ffn_down", "CPU"});
  said.clear();
  AddCpuMoeOverrides(*hp, machine, /*cpu_moe=*/false, /*n_cpu_moe=*/2, &placement,
                     [&](const PlanMessage& m) { said.push_back(m); });
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].kind, PlanMessageKind::kWarning);
  EXPECT_EQ(said[0].text, "--cpu-moe/--n-cpu-moe given but the model has no experts");
  // The patterns follow the given overrides, to the machine's CPU buffer type.
  std::vector<TensorOverride> want = {{"ffn_down", "CPU"}};
  for (const TensorOverride& t : CpuMoeOverrides(false, 2, Cpu().default_buft.name)) want.push_back(t);
  ASSERT_EQ(placement.overrides.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(placement.overrides[i].pattern, want[i].pattern);
    EXPECT_EQ(placement.overrides[i].buft, want[i].buft);
  }
}

}  // namespace
}  // namespace stowage::planner
