#include "stowage/planner/plan.h"

#include <algorithm>
#include <string>

#include "stowage/planner/buft_select.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan_export.h"

namespace stowage::planner {

namespace {

// A fit refusal names the device and its memory; the model file it was planned for goes first, as
// in the planner's other errors.
Status NamingModel(const GgufFile& gguf, Status s) {
  if (s.ok() || s.code() != StatusCode::kResourceExhausted || s.message().rfind(gguf.path() + ": ", 0) == 0)
    return s;
  return Status(s.code(), gguf.path() + ": " + s.message());
}

}  // namespace

Result<LlamacppCompat> ParseLlamacppCompat(std::string_view value) {
  if (value == "feb25") return LlamacppCompat::kFeb25;
  if (value == "2026") return LlamacppCompat::k2026;
  return InvalidArgument("expected feb25 or 2026, found '" + std::string(value) + "'");
}

const char* LlamacppCompatName(LlamacppCompat compat) {
  return compat == LlamacppCompat::k2026 ? "2026" : "feb25";
}

LlamacppDefaults LlamacppDefaultsOf(LlamacppCompat compat) {
  if (compat == LlamacppCompat::k2026) return LlamacppDefaults{0, FlashAttnMode::kAuto, true};
  return LlamacppDefaults{};
}

void AddCpuMoeOverrides(const HParams& hp, const std::vector<DeviceManifest>& machine, bool cpu_moe,
                        int n_cpu_moe, PlacementOptions* placement, const PlanMessageSink& sink) {
  if (sink && (cpu_moe || n_cpu_moe > 0) && hp.n_expert == 0)
    sink(PlanMessage{PlanMessageKind::kWarning, "--cpu-moe/--n-cpu-moe given but the model has no experts"});
  std::string cpu_buft = "CPU";
  for (const DeviceManifest& d : machine)
    if (d.type == DeviceType::kCpu) cpu_buft = d.default_buft.name;
  const std::vector<TensorOverride> moe = CpuMoeOverrides(cpu_moe, n_cpu_moe, cpu_buft);
  placement->overrides.insert(placement->overrides.end(), moe.begin(), moe.end());
}

Result<ContextConfig> ResolvePlanContext(const HParams& hp, const std::string& path,
                                         const ContextConfig& asked, const PlanMessageSink& sink) {
  ContextConfig cfg = asked;
  STOWAGE_RETURN_IF_ERROR(ResolveContext(hp, path, &cfg));
  if (sink && asked.llamacpp_compat == LlamacppCompat::kFeb25 &&
      std::min(cfg.n_ctx, asked.n_batch) < kKqMaskPad)
    sink(PlanMessage{PlanMessageKind::kBatchRaised,
                     "llama_init_from_model: n_batch is less than GGML_KQ_MASK_PAD - increasing to " +
                         std::to_string(kKqMaskPad)});
  return cfg;
}

int FitGpuLayerCount(const FitChoice& c, const HParams& hp) {
  return c.n_gpu_layers < 0 ? static_cast<int>(hp.n_layer) + 1 : c.n_gpu_layers;
}

Result<FitChoice> FitPlanParams(const GgufFile& gguf, const ContextConfig& asked,
                                const std::vector<DeviceManifest>& machine, const PlacementOptions& placement,
                                const FitOptions& fit, const HParams& hp, const PlanMessageSink& sink) {
  Result<FitChoice> c = FitParams(gguf, hp, asked, machine, placement, fit);
  if (!c.ok()) return NamingModel(gguf, c.status());
  if (sink) {
    for (const std::string& line : c->log) sink(PlanMessage{PlanMessageKind::kFitTrace, line});
    if (!c->failure.empty())
      sink(PlanMessage{PlanMessageKind::kWarning, "--fit: failed to fit params to free device memory: " +
                                                      c->failure + " (parameters kept)"});
    sink(PlanMessage{PlanMessageKind::kFitSearched, c->Args(), FitGpuLayerCount(*c, hp)});
  }
  return c;
}

Status CheckPlanFit(const GgufFile& gguf, const PlacementOutcome& outcome) {
  return NamingModel(gguf, CheckFit(outcome));
}

Result<PlanResult> Plan(const GgufFile& gguf, const std::vector<DeviceManifest>& machine,
                        const PlanRequest& request, const PlanMessageSink& sink) {
  auto say = [&](PlanMessageKind kind, std::string text, int ngl = 0) {
    if (sink) sink(PlanMessage{kind, std::move(text), ngl});
  };
  STOWAGE_ASSIGN_OR_RETURN(HParams hp, ReadHParams(gguf, !request.tokenizer_loaded));
  for (const std::string& w : hp.warnings) say(PlanMessageKind::kWarning, w);
  PlanResult r;
  r.placement = request.placement;
  AddCpuMoeOverrides(hp, machine, request.cpu_moe, request.n_cpu_moe, &r.placement, sink);

  // -ot (and --cpu-moe's) overrides are checked before --fit measures anything, so that a bad one
  // is the first and only error (the devices in DeviceSet order, as the placement lists them; a
  // bad device set is reported by the placement itself).
  if (Result<DeviceSet> ds = MakeDeviceSet(machine, r.placement.split_mode, r.placement.main_gpu); ds.ok())
    STOWAGE_RETURN_IF_ERROR(CheckTensorOverrides(r.placement.overrides, ds->devices));

  // The context as asked, then as llama_init_from_model resolves it (-fa auto: first with flash
  // attention).
  ContextConfig asked = request.context;
  asked.flash_attn = request.flash_attn != FlashAttnMode::kOff;
  asked.llamacpp_compat = request.llamacpp_compat;
  // --fit chooses the context (when automatic), the layers, the split and the overrides before
  // llama.cpp loads the model (common_init_result: common_fit_params, then the load).
  const PlacementOptions user_placement = r.placement;
  FitOptions fit_options{request.fit_targets, request.fit_n_ctx_min};
  if (fit_options.margins.empty()) fit_options.margins = {request.fit_target};
  FitChoice chosen;
  auto fit_params = [&](ContextConfig* ctx) -> Status {
    if (!request.fit) return Status::Ok();
    r.placement = user_placement;
    STOWAGE_ASSIGN_OR_RETURN(chosen, FitPlanParams(gguf, *ctx, machine, r.placement, fit_options, hp, sink));
    ctx->n_ctx = chosen.n_ctx;
    r.placement.n_gpu_layers = FitGpuLayerCount(chosen, hp);
    if (!chosen.tensor_split.empty()) r.placement.tensor_split = chosen.tensor_split;
    r.placement.overrides.insert(r.placement.overrides.end(), chosen.overrides.begin(),
                                 chosen.overrides.end());
    return Status::Ok();
  };
  ContextConfig fitted = asked;
  STOWAGE_RETURN_IF_ERROR(fit_params(&fitted));
  STOWAGE_ASSIGN_OR_RETURN(ContextConfig cfg, ResolvePlanContext(hp, gguf.path(), fitted, sink));
  STOWAGE_ASSIGN_OR_RETURN(r.graphs, BuildModelGraphs(gguf, hp, cfg));
  if (!r.graphs.hp.recurrent() && r.graphs.cfg.n_ctx > r.graphs.hp.n_ctx_train)
    say(PlanMessageKind::kContextOverflow, "n_ctx_per_seq (" + std::to_string(r.graphs.cfg.n_ctx) +
                                               ") > n_ctx_train (" + std::to_string(r.graphs.hp.n_ctx_train) +
                                               ") -- possible training context overflow");
  if (!request.fit && request.placement.n_gpu_layers != 0 &&
      std::none_of(machine.begin(), machine.end(),
                   [](const DeviceManifest& d) { return d.type == DeviceType::kGpu; }))
    say(PlanMessageKind::kGpuLayersIgnored, "no usable GPU found, --n-gpu-layers option will be ignored");

  Result<PlacementOutcome> outcome = PlaceModel(r.graphs, machine, r.placement);
  const bool fa_auto =
      request.flash_attn == FlashAttnMode::kAuto && !QuantizedVCacheEnablesFlashAttn(asked, hp);
  if (outcome.ok() && fa_auto && r.graphs.cfg.flash_attn) {
    const std::string mismatch = FlashAttnDeviceMismatch(r.graphs, *outcome);
    // llama.cpp 2026 llama_context::resolve_fused_ops words the decision per fused op.
    const bool today = request.llamacpp_compat == LlamacppCompat::k2026;
    if (mismatch.empty()) {
      say(PlanMessageKind::kFlashAttnEnabled,
          today ? "resolve_fused_ops: Flash Attention enabled"
                : "llama_context: Flash Attention was auto, set to enabled");
    } else {
      say(PlanMessageKind::kFlashAttnDisabled,
          mismatch + (today ? "\nresolve_fused_ops: Flash Attention not supported, set to disabled"
                            : "\nllama_context: Flash Attention was auto, set to disabled"));
      cfg = asked;
      cfg.flash_attn = false;
      STOWAGE_RETURN_IF_ERROR(fit_params(&cfg));
      STOWAGE_RETURN_IF_ERROR(ResolveContext(hp, gguf.path(), &cfg));
      auto graphs = BuildModelGraphs(gguf, hp, cfg);
      if (graphs.ok()) {
        r.graphs = std::move(*graphs);
        outcome = PlaceModel(r.graphs, machine, r.placement);
      } else {
        outcome = graphs.status();
      }
    }
  }
  if (outcome.ok()) r.fit = CheckPlanFit(gguf, *outcome);
  // --fit's choice is the most the GPUs take within their targets (free - reserve - margin): when
  // it still fails the check, fewer layers cannot help the GPU over (it was over at its lower bound)
  // and more cannot help the host, so the line says that nothing fits instead of "fits".
  // With no model device, llama.cpp 2026 fits an automatic context to the host's buffer types only
  // (common_get_device_memory_data_impl): the CPU's extra buffer types (CPU_REPACK) are left out, so
  // the context it chooses can leave no room for them. The line then names the -fitt that does.
  if (request.fit) {
    const bool fits = outcome.ok() && r.fit.ok();
    std::string why = ": no setting --fit can choose fits this machine";
    if (!fits && outcome.ok() && outcome->devices.n_model == 0) {
      uint64_t extra = 0;
      for (const PlannedBuffer& b : outcome->memory.buffers)
        if (!b.mapped && !outcome->placement.bufts[b.buft].is_host && b.device == outcome->devices.cpu)
          extra += b.size;
      const uint64_t margin = request.fit_targets.empty() ? request.fit_target : request.fit_targets.front();
      constexpr uint64_t kMiB = 1024 * 1024;
      if (extra > 0)
        why = ": llama.cpp 2026's --fit leaves the CPU's extra buffer types (" +
              std::to_string((extra + kMiB - 1) / kMiB) +
              " MiB of CPU_REPACK weights) out of the host memory it fits; -fitt " +
              std::to_string((margin + extra + kMiB - 1) / kMiB) + " keeps room for them (or --no-repack)";
    }
    say(PlanMessageKind::kFitChosen,
        "-ngl " + std::to_string(r.placement.n_gpu_layers) + (fits ? " fits" : " does not fit") + " (of " +
            std::to_string(hp.n_layer) + " layers + output)" + (fits ? "" : why) + "\n" + chosen.Args(),
        r.placement.n_gpu_layers);
  }
  if (!outcome.ok()) return outcome.status();
  r.outcome = std::move(*outcome);
  r.memory_warnings = UnreportedMemoryWarnings(r.outcome);
  if (request.serialize && (r.fit.ok() || !request.fit_check))
    r.bytes = SerializePlan(gguf, r.graphs, r.outcome.placement, r.outcome.memory, request.flags);
  return r;
}

}  // namespace stowage::planner
