// The planner's one entry point: a GGUF model, a machine's devices and the flags of a request in,
// a placed, memory-planned, fit-checked and serialized plan out. plan-model, stowage-run's planning
// on the fly and the tests' plans for this machine (test/unit/plan_probed.h) all plan through it,
// so a flag means the same in every tool. The compiler stage runs after it, on its result
// (compiler/include/stowage/Compiler/CompilePlan.h: import, fusions, export, then CheckPlanFit of
// the exported memory plan); stowage-opt --import-gguf reports ResolvePlanContext's lines. The
// steps are llama.cpp's
// (llama_model_load_from_file + llama_init_from_model, FEB25; the -fa auto retry and --fit from DEC25):
//
//   ReadHParams -> [--fit: FitParams] -> ResolveContext -> BuildModelGraphs
//     -> PlaceModel -> [-fa auto: FlashAttnDeviceMismatch, planned again without flash attention]
//     -> CheckFit -> SerializePlan
//
// What llama.cpp would log while it loads (its warnings, the -fa auto decision, the --fit result)
// is reported as it happens through a PlanMessageSink, each with a kind, so that a tool prints what
// it printed before (plan-model prints them on its log, stowage-run only some, on stderr). The
// load-time report (ReportLines), --explain and --debug-splits are made from the result.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/planner/fit.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/manifest.h"
#include "stowage/planner/place_model.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// llama.cpp's -fa / --flash-attn (2026: on, off, auto). The tools' default follows
/// --llamacpp-compat (LlamacppDefaultsOf): kOff for feb25 (FEB25 has no auto), kAuto for 2026.
enum class FlashAttnMode {
  kOff,
  kOn,
  /// llama_context (DEC25): planned with flash attention, kept when every layer's FLASH_ATTN_EXT
  /// runs on the layer's device (FlashAttnDeviceMismatch), else planned again without.
  kAuto,
};

/// --llamacpp-compat's values: "feb25" (LlamacppCompat::kFeb25) or "2026" (k2026). The one parser
/// of plan-model, stowage-run and stowage-opt (tools/common/planner_args.h wraps it for CLI11).
/// Errors: kInvalidArgument "expected feb25 or 2026, found 'V'".
Result<LlamacppCompat> ParseLlamacppCompat(std::string_view value);

/// The name ParseLlamacppCompat reads: "feb25" or "2026".
const char* LlamacppCompatName(LlamacppCompat compat);

/// The defaults of llama.cpp's common parameters that a --llamacpp-compat changes.
struct LlamacppDefaults {
  /// -c: 4096 (Feb 2025 common_params.n_ctx) or 0, the model's training context (2026 common.h).
  uint32_t n_ctx = 4096;
  /// -fa: off (Feb 2025 has no auto) or auto (2026 common.h: LLAMA_FLASH_ATTN_TYPE_AUTO).
  FlashAttnMode flash_attn = FlashAttnMode::kOff;
  /// -ngl: 0 (Feb 2025 common_params.n_gpu_layers) or auto, which is --fit (2026: n_gpu_layers -1
  /// and fit_params on by default, common_init_result runs common_fit_params).
  bool fit = false;
};

/// The defaults of `compat` (above).
LlamacppDefaults LlamacppDefaultsOf(LlamacppCompat compat);

/// The llama.cpp the tools (plan-model, stowage-run and stowage-server planning on the fly,
/// stowage-opt --import-gguf) and PlanRequest follow when --llamacpp-compat is not given: llama.cpp
/// 2026 (node-llama-cpp 3.22.1, llama.cpp of 2026-09-28). kFeb25 keeps the seed's behaviour.
inline constexpr LlamacppCompat kDefaultLlamacppCompat = LlamacppCompat::k2026;

/// What the tools' flags ask for.
struct PlanRequest {
  /// The context as asked (-c, -b, -ub, -ctk, -ctv; n_ctx 0: the model's context_length). Its
  /// flash_attn is ignored: `flash_attn` decides it.
  ContextConfig context;
  FlashAttnMode flash_attn = FlashAttnMode::kOff;
  /// --llamacpp-compat: the llama.cpp the plan follows (ContextConfig::llamacpp_compat; the
  /// context's own field is ignored). The tools' defaults for -fa and -c follow it too
  /// (LlamacppDefaultsOf; this struct's `context` and `flash_attn` do not).
  LlamacppCompat llamacpp_compat = kDefaultLlamacppCompat;
  /// Placement flags (-ngl, -sm, -ts, -mg, -ot, -nkvo, --no-mmap, ...). n_gpu_layers is ignored
  /// with `fit`.
  PlacementOptions placement;
  /// --cpu-moe / --n-cpu-moe N: every MoE expert weight, or those of the first N layers, on the
  /// machine's CPU buffer type (CpuMoeOverrides, appended after placement.overrides).
  bool cpu_moe = false;
  int n_cpu_moe = 0;
  /// --fit / -ngl auto: the context (when n_ctx is 0), layers, tensor split and overrides are chosen
  /// as llama.cpp 2026's common_fit_params chooses them (FitPlanParams), keeping `fit_target` bytes
  /// free on every model device, or `fit_targets`' per device when given (-fitt MiB0,MiB1,...).
  bool fit = false;
  uint64_t fit_target = kDefaultFitTargetBytes;
  std::vector<uint64_t> fit_targets;
  /// -fitc: the smallest context --fit shrinks an automatic one to; UINT32_MAX: never (-c 0 given).
  uint32_t fit_n_ctx_min = 4096;
  /// false (--no-fit-check): a plan that does not fit the machine's memory is still serialized.
  bool fit_check = true;
  /// Serialize the plan (PlanResult::bytes); `flags` is recorded in it as the planner's command line.
  bool serialize = true;
  std::string flags;
  /// The caller loaded the model's tokenizer already (stowage-run's Tokenizer::FromGguf): planning
  /// does not validate it again (ReadHParams's check_tokenizer false).
  bool tokenizer_loaded = false;
};

/// The kinds of line Plan reports while it plans, in the order it can report them.
enum class PlanMessageKind {
  /// A warning about the model or the request: each HParams::warnings line (ReadHParams), and
  /// "--cpu-moe/--n-cpu-moe given but the model has no experts".
  kWarning,
  /// llama_init_from_model: "n_batch is less than GGML_KQ_MASK_PAD - increasing to 64" (the asked
  /// n_batch, or the resolved n_ctx, is below kKqMaskPad; --llamacpp-compat feb25 only).
  kBatchRaised,
  /// "n_ctx_per_seq (N) > n_ctx_train (T) -- possible training context overflow", for the context of
  /// the first graphs built (llama_init_from_model's warning; ReportLines has it too).
  kContextOverflow,
  /// "no usable GPU found, --n-gpu-layers option will be ignored" (llama.cpp common's warning): a
  /// layer count was given (no --fit) and the machine has no GPU device.
  kGpuLayersIgnored,
  /// Each line of --fit's trace (FitChoice::log: common_params_fit_impl's lines, without its name),
  /// then, when the fit gave up, a kWarning "--fit: failed to fit params to free device memory:
  /// <why> (parameters kept)".
  kFitTrace,
  /// After each --fit search (once, or twice when -fa auto plans again): llama-fit-params' line
  /// (FitChoice::Args, "-c N -ngl N[ -ts A,B][ -ot \"...\"]"); PlanMessage::n_gpu_layers is the
  /// layers offloaded (every layer and the output for -ngl -1).
  kFitSearched,
  /// -fa auto kept flash attention: "llama_context: Flash Attention was auto, set to enabled"
  /// (llama.cpp 2026, LlamacppCompat::k2026: "resolve_fused_ops: Flash Attention enabled").
  kFlashAttnEnabled,
  /// -fa auto dropped it: FlashAttnDeviceMismatch's line, a newline, then "llama_context: Flash
  /// Attention was auto, set to disabled" (k2026: "resolve_fused_ops: Flash Attention not
  /// supported, set to disabled").
  kFlashAttnDisabled,
  /// With --fit, once, after the last placement (whether it succeeded or not): two lines, "-ngl N
  /// fits (of L layers + output)" (N the layers offloaded) and the choice it used, as kFitSearched's.
  /// When the placement failed or the plan fails its fit check (PlanResult::fit), the first line is
  /// "-ngl N does not fit (of L layers + output): no setting --fit can choose fits this machine".
  kFitChosen,
};

/// One line (kFlashAttnDisabled: two) Plan reports, without a trailing newline or tool prefix.
struct PlanMessage {
  PlanMessageKind kind = PlanMessageKind::kWarning;
  std::string text;
  int n_gpu_layers = 0;  ///< kFitSearched, kFitChosen: the layers offloaded
};

/// Receives Plan's messages as they happen (before Plan returns, also when it then fails).
using PlanMessageSink = std::function<void(const PlanMessage&)>;

/// A plan.
struct PlanResult {
  ModelGraphs graphs;        ///< placed and memory-planned; graphs.cfg is the context as resolved
  PlacementOutcome outcome;  ///< placement, memory plan, explain records (outcome.placement.explain)
  /// The placement options used: the request's, with --cpu-moe's overrides appended and
  /// n_gpu_layers, tensor split and overrides as --fit chose them (what ReportLines needs).
  PlacementOptions placement;
  /// CheckFit of the whole plan (every device, no margin): Ok, or kResourceExhausted naming the
  /// model file and the first device that does not fit ("<model>: does not fit: device ..."). Plan does not
  /// fail on it, so that a caller can print its report first; with PlanRequest::fit_check the caller refuses
  /// the plan with this status.
  Status fit;
  /// UnreportedMemoryWarnings: GPUs holding bytes of the plan whose manifest reports no memory.
  std::vector<std::string> memory_warnings;
  /// The plan file's bytes (SerializePlan): empty unless PlanRequest::serialize, and empty when
  /// the plan does not fit and PlanRequest::fit_check is set.
  std::vector<uint8_t> bytes;
};

/// Plan's --cpu-moe / --n-cpu-moe (step 1): CpuMoeOverrides to `machine`'s CPU buffer type (its CPU
/// device's default buffer type; "CPU" without one) appended to `placement->overrides`, and kWarning
/// "--cpu-moe/--n-cpu-moe given but the model has no experts" to `sink` (may be null) when either is
/// given for a model whose `hp.n_expert` is 0.
void AddCpuMoeOverrides(const HParams& hp, const std::vector<DeviceManifest>& machine, bool cpu_moe,
                        int n_cpu_moe, PlacementOptions* placement, const PlanMessageSink& sink = nullptr);

/// Plan's step 2: `asked` (the context as asked, flash_attn included) resolved by ResolveContext,
/// reporting kBatchRaised to `sink` (may be null) when min(resolved n_ctx, asked n_batch) <
/// kKqMaskPad (llama_init_from_model, FEB25). Also stowage-opt's --import-gguf, for the n_batch
/// warning plan-model prints. Errors: ResolveContext's.
Result<ContextConfig> ResolvePlanContext(const HParams& hp, const std::string& path,
                                         const ContextConfig& asked, const PlanMessageSink& sink = nullptr);

/// Plan's step 2 with --fit (-ngl auto): FitParams (fit.h, llama.cpp 2026 common_fit_params) for
/// the context as asked `asked` (n_ctx 0: automatic, may shrink) and `placement` (the user's -ts,
/// -ot and --cpu-moe overrides make it give up), with `fit`'s margins and -fitc, for the model's
/// hyper-parameters `hp` (ReadHParams(gguf)'s: the model is not read again); reports its trace
/// (kFitTrace), a kWarning when it gave up, and kFitSearched (FitChoice::Args) to `sink` (may be
/// null). Errors: FitParams's, a kResourceExhausted prefixed with the model file.
Result<FitChoice> FitPlanParams(const GgufFile& gguf, const ContextConfig& asked,
                                const std::vector<DeviceManifest>& machine, const PlacementOptions& placement,
                                const FitOptions& fit, const HParams& hp,
                                const PlanMessageSink& sink = nullptr);

/// The layers a FitChoice offloads: its n_gpu_layers, or every layer and the output for -1.
int FitGpuLayerCount(const FitChoice& c, const HParams& hp);

/// Plan's fit check (step 7) of a placed model: CheckFit of the whole plan (every device, no margin),
/// a refusal naming the model file first. Also the compiler stage's (CompilePlan, on the exported
/// graphs' memory plan), so that both refuse the same way. Ok, or kResourceExhausted "<model>: does not fit:
/// device ...".
Status CheckPlanFit(const GgufFile& gguf, const PlacementOutcome& outcome);

/// Plans `gguf` for the devices `machine` (registry manifests or probed ones; a CPU device must be
/// among them, it is the scheduler's last backend) as `request` asks, reporting llama.cpp's load
/// lines to `sink` (may be null) as they happen. The steps, in order:
///   1. ReadHParams; each of its warnings (kWarning); AddCpuMoeOverrides (kWarning when
///      --cpu-moe/--n-cpu-moe are given for a model without experts).
///   2. With request.fit: FitPlanParams on request.context (flash attention as below), its choice
///      of n_ctx, n_gpu_layers, tensor split and overrides applied; kFitTrace, kFitSearched.
///   3. ResolvePlanContext on that context with flash attention as request.flash_attn asks
///      (kAuto: on): ResolveContext, and (feb25) kBatchRaised when min(resolved n_ctx, asked n_batch) <
///      kKqMaskPad.
///   4. BuildModelGraphs on the resolved context; kContextOverflow; kGpuLayersIgnored.
///   5. PlaceModel (CheckMaxBufferSizes and RowSplitShares included).
///   6. kAuto with flash attention on (not with a quantized V cache in 2026 mode, which llama.cpp
///      2026 plans as -fa on: QuantizedVCacheEnablesFlashAttn): kFlashAttnEnabled when
///      FlashAttnDeviceMismatch finds nothing,
///      else kFlashAttnDisabled and steps 2, 3 (without kBatchRaised), 4 and 5 again without flash
///      attention (a fit of its own: the compute buffers differ).
///   7. PlanResult::fit = CheckPlanFit; with request.fit: kFitChosen (also when step 5 failed;
///      "does not fit" then, or when the fit check failed).
///   8. memory_warnings; bytes = SerializePlan(request.flags).
/// Errors: those of each step, one line each, unchanged (ReadHParams, ResolveContext,
/// BuildModelGraphs, FitParams, PlaceModel), except that FitParams's kResourceExhausted is prefixed
/// with the model file. A plan that does not fit is not an error (PlanResult::fit).
Result<PlanResult> Plan(const GgufFile& gguf, const std::vector<DeviceManifest>& machine,
                        const PlanRequest& request, const PlanMessageSink& sink = nullptr);

}  // namespace stowage::planner
