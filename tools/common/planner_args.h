// The values of plan-model's and stowage-run's planning flags that name the planner's own
// constants: -ngl's "all" and "auto", and -fa's mode. Needs the planner's headers (link
// stowage_plan).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli_numbers.h"
#include "stowage/planner/plan.h"

namespace stowage::tools {

/// -ngl's value for "every layer and the output": planner::kAllGpuLayers (the layer map clamps
/// it to n_layer + 1).
using planner::kAllGpuLayers;
/// -ngl's value standing for "auto" after GpuLayersValue: fit the layers to the GPUs' free memory
/// (planner::PlanRequest::fit, as --fit).
inline constexpr int kAutoGpuLayers = -1;

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
        if (v == "all" || (negative && number && digits != "1")) {
          v = std::to_string(kAllGpuLayers);
          return "";
        }
        if (v == "auto" || v == "-1") {
          v = std::to_string(kAutoGpuLayers);
          return "";
        }
        if (!number || negative || std::stol(digits) > kAllGpuLayers)
          return "expected a layer count from 0 to " + std::to_string(kAllGpuLayers) +
                 ", 'all' (or <= -2) or 'auto' (or -1), found " + ShownValue(v);
        return "";
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

}  // namespace stowage::tools
