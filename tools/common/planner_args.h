// The values of plan-model's and stowage-run's planning flags that name the planner's own
// constants: -ngl's "all" and "auto", -fa's mode, and --llamacpp-compat (with the defaults it
// sets). Needs the planner's headers (link stowage_plan).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli_numbers.h"
#include "stowage/planner/gpu_layers.h"
#include "stowage/planner/plan.h"

namespace stowage::tools {

/// -ngl's value for "every layer and the output": planner::kAllGpuLayers (the layer map clamps
/// it to n_layer + 1).
using planner::kAllGpuLayers;
/// -ngl's value standing for "auto" after GpuLayersValue: fit the layers to the GPUs' free memory
/// (planner::PlanRequest::fit, as --fit).
using planner::kAutoGpuLayers;

/// CLI11 transform for -ngl / --n-gpu-layers with llama.cpp's values (common/arg.cpp and common.h,
/// 2026: "-1 is auto, <= -2 is all"): a layer count 0..2^20, "all" or a number <= -2 (every layer:
/// kAllGpuLayers), "auto" or -1 (kAutoGpuLayers). Anything else: "expected a layer count from 0 to
/// 1048576, 'all' (or <= -2) or 'auto' (or -1), found V" (cli_numbers.h's wording).
inline CLI::Validator GpuLayersValue() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const bool negative = v.size() > 1 && v[0] == '-';
        const std::string digits = negative ? v.substr(1) : v;
        const bool number = !digits.empty() && digits.size() <= 8 &&
                            digits.find_first_not_of("0123456789") == std::string::npos;
        if (v == "all" || v == "auto") {
          v = std::to_string(v == "all" ? kAllGpuLayers : kAutoGpuLayers);
          return "";
        }
        if (number) {  // planner::GpuLayersOf: -1 auto, <= -2 all
          const int64_t n = planner::GpuLayersOf(negative ? -std::stol(digits) : std::stol(digits));
          if (n <= kAllGpuLayers) {
            v = std::to_string(n);
            return "";
          }
        }
        return "expected a layer count from 0 to " + std::to_string(kAllGpuLayers) +
               ", 'all' (or <= -2) or 'auto' (or -1), found " + ShownValue(v);
      },
      "N|all|auto");
}

/// The planner's flash-attention mode for a FlashAttnValue-normalized -fa value (llama_args.h):
/// "on", "auto", anything else off.
inline planner::FlashAttnMode FlashAttnModeOf(const std::string& v) {
  return v == "on"     ? planner::FlashAttnMode::kOn
         : v == "auto" ? planner::FlashAttnMode::kAuto
                       : planner::FlashAttnMode::kOff;
}

/// CLI11 check for --llamacpp-compat: planner::ParseLlamacppCompat's values, "feb25" or "2026";
/// anything else its error, "expected feb25 or 2026, found 'V'".
inline CLI::Validator LlamacppCompatValue() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        auto compat = planner::ParseLlamacppCompat(v);
        return compat.ok() ? "" : compat.status().message();
      },
      "feb25|2026");
}

/// Declares --llamacpp-compat on `app`, bound to `value` (a LlamacppCompatValue-checked name; the
/// caller initializes it, e.g. to LlamacppCompatName(planner::kDefaultLlamacppCompat)), with one
/// help text for every tool.
inline CLI::Option* AddLlamacppCompatOption(CLI::App& app, std::string& value) {
  return app
      .add_option(
          "--llamacpp-compat", value,
          "the llama.cpp to follow: 2026 (the default; llama.cpp of 2026-09-28: its buffer-type order "
          "and CPU_REPACK types, its graph rules for every architecture, -fa auto and -c 0 by default) "
          "or feb25 (llama.cpp of February 2025, the seed's behaviour: -fa off and -c 4096 by default)")
      ->transform(LlamacppCompatValue());
}

/// The planner's compat for a LlamacppCompatValue-checked name (planner::kDefaultLlamacppCompat for
/// an empty one: not given).
inline planner::LlamacppCompat LlamacppCompatOf(const std::string& v) {
  auto compat = planner::ParseLlamacppCompat(v);
  return compat.ok() ? *compat : planner::kDefaultLlamacppCompat;
}

/// -fa's name for a mode ("on", "off", "auto"; the inverse of FlashAttnModeOf), for the defaults a
/// compat sets (planner::LlamacppDefaultsOf).
inline std::string FlashAttnName(planner::FlashAttnMode mode) {
  return mode == planner::FlashAttnMode::kOn ? "on" : mode == planner::FlashAttnMode::kAuto ? "auto" : "off";
}

/// -O's default in every tool that plans (plan-model; stowage-run and stowage-server when they plan
/// on the fly): 2, the compiler stage with its rewriting passes (compiler/Pipeline.h's
/// buildStowagePipeline: fused ops inside each split, each bit-identical on the CPU backend to the
/// ops it replaces, compiler/README.md). In pp512 / tg128 of the 0.85B llama (f16, q8_0, q4_0,
/// q4_k_m; 2 threads, -O0 and -O2 alternated) its plans were never slower than -O0's.
inline constexpr int kDefaultOptLevel = 2;

/// Whether -O `level` runs the compiler's rewriting passes (compiler::PipelineOptions::fuse): 2.
/// Level 1 runs the compiler stage without them, level 0 skips the stage.
inline bool RewritesAtOptLevel(int level) { return level >= 2; }

/// Declares -O LEVEL on `app`, bound to `level` (the caller initializes it to kDefaultOptLevel):
/// 0 keeps the planner's graphs as they are; 1 runs the compiler stage without rewriting passes
/// (compiler/CompilePlan.h: import, export, memory planned again, the runtime's verifier: the plan
/// equals -O0's but for the recorded command line); 2 (the default) also runs the rewriting
/// passes (fusions inside each split; placement, splits and split inputs stay the planner's). Without
/// MLIR every level gives the planner's graphs. `when` begins the help text (stowage-run's and
/// stowage-server's say that -O applies when they plan on the fly), else empty. Values other than 0..2:
/// IntegerIn's error.
inline CLI::Option* AddOptLevelOption(CLI::App& app, int& level, const std::string& when = "") {
  const char* const what[] = {
      "the planner's graphs as they are",
      "through the compiler (MLIR import, export, verifier) without rewriting passes, the same plan",
      "with the compiler's rewriting passes inside each split (fused ops; placement, splits and split "
      "inputs unchanged)"};
  std::string help = when;
  for (int l = 0; l <= 2; ++l)
    help += std::to_string(l) + (l == kDefaultOptLevel ? " (default): " : ": ") + what[l] + "; ";
  return app.add_option("-O", level, help + "without MLIR every level gives the planner's graphs")
      ->check(IntegerIn(0, 2));
}

}  // namespace stowage::tools
