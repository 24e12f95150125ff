#include "plan_on_the_fly.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "planner_args.h"
#ifdef STOWAGE_HAVE_COMPILER
#include "stowage/Compiler/CompilePlan.h"
#endif
#include "stowage/planner/from_probe.h"
#include "stowage/planner/plan.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/ggml_types.h"

namespace stowage::run {

Result<std::vector<uint8_t>> PlanOnTheFly(const GgufFile& gguf, const CommonOptions& c, bool quiet,
                                          bool tokenizer_loaded) {
  planner::PlanRequest request;
  request.context.n_ctx = c.n_ctx;
  request.context.n_batch = c.n_batch;
  request.context.n_ubatch = c.n_ubatch;
  request.context.swa_full = c.swa_full;
  request.context.n_seq_max = c.n_seq_max;
  request.context.kv_unified = c.kv_unified;
  auto tk = planner::ParseKvCacheType(c.cache_type_k);
  if (!tk.ok()) return InvalidArgument("--cache-type-k: " + tk.status().message());
  auto tv = planner::ParseKvCacheType(c.cache_type_v);
  if (!tv.ok()) return InvalidArgument("--cache-type-v: " + tv.status().message());
  request.context.type_k = *tk;
  request.context.type_v = *tv;
  request.llamacpp_compat = tools::LlamacppCompatOf(c.llamacpp_compat);  // empty: the default
  request.flash_attn = c.flash_attn.empty() ? planner::LlamacppDefaultsOf(request.llamacpp_compat).flash_attn
                                            : tools::FlashAttnModeOf(c.flash_attn);
  request.fit = c.n_gpu_layers == tools::kAutoGpuLayers;
  request.placement.n_gpu_layers = request.fit ? 0 : c.n_gpu_layers;
  request.placement.use_mmap = !c.no_mmap;
  request.placement.no_repack = c.no_repack;
  request.placement.offload_kqv = !c.no_kv_offload;
  request.fit_check = !c.no_fit_check;
  request.flags = "stowage-run (planned on the fly for this machine)";
  request.tokenizer_loaded = tokenizer_loaded;
  // Probed GPUs numbered in probe order (CUDA0, CUDA1, ...), as plan-model does.
  STOWAGE_ASSIGN_OR_RETURN(std::vector<planner::DeviceManifest> machine,
                           planner::ManifestsFromProbe(ProbeDevices().devices));
  // The model's warnings always; llama.cpp's context and GPU warnings, the -ngl auto result and
  // -fa auto turning flash attention off unless quiet.
  // -ngl auto on a machine without a GPU has nothing to say ("0 layers fit the GPUs").
  const bool has_gpu = std::any_of(machine.begin(), machine.end(), [](const planner::DeviceManifest& d) {
    return d.type == planner::DeviceType::kGpu;
  });
  auto print = [quiet, has_gpu, &c](const planner::PlanMessage& msg) {
    using Kind = planner::PlanMessageKind;
    if (msg.kind == Kind::kWarning)
      std::fprintf(stderr, "%s: warning: %s\n", c.program.c_str(), msg.text.c_str());
    else if (quiet)
      return;
    else if (msg.kind == Kind::kContextOverflow || msg.kind == Kind::kGpuLayersIgnored)
      std::fprintf(stderr, "%s: warning: %s\n", c.program.c_str(), msg.text.c_str());
    else if (msg.kind == Kind::kFitSearched && has_gpu)
      std::fprintf(stderr, "%s: -ngl auto: %d layers fit the GPUs\n", c.program.c_str(), msg.n_gpu_layers);
    else if (msg.kind == Kind::kFlashAttnDisabled)
      std::fprintf(stderr, "%s\n", msg.text.c_str());
  };
  STOWAGE_ASSIGN_OR_RETURN(planner::PlanResult planned, planner::Plan(gguf, machine, request, print));
#ifdef STOWAGE_HAVE_COMPILER
  // The compiler stage at -O (plan-model's default unless given): the same plan as plan-model's.
  if (c.opt_level > 0 && !planned.bytes.empty()) {
    compiler::PipelineOptions options;
    options.fuse = tools::RewritesAtOptLevel(c.opt_level);
    STOWAGE_ASSIGN_OR_RETURN(compiler::CompiledPlan compiled,
                             compiler::CompilePlan(gguf, planned, request.flags, options));
    if (!compiled.not_compiled.empty() && !quiet)
      std::fprintf(stderr, "%s: note: %s (the planner's graphs are run)\n", c.program.c_str(),
                   compiled.not_compiled.c_str());
    planned.bytes = std::move(compiled.bytes);
    planned.fit = compiled.fit;
  }
#endif
  // A plan that does not fit this machine's memory would otherwise be allocated (and its weights
  // repacked) before anything fails.
  if (!planned.fit.ok()) {
    if (!c.no_fit_check) return planned.fit;
    std::fflush(stdout);
    std::fprintf(stderr, "%s: warning: %s (running anyway: --no-fit-check)\n", c.program.c_str(),
                 planned.fit.message().c_str());
  }
  return std::move(planned.bytes);
}

}  // namespace stowage::run
