// Attention temperature tuning of a GGUF model (llama.cpp 2026 build_inp_attn_scale: Q multiplied
// per token by a factor that grows with the position): the one reading of it that the planner
// (ReadHParams: the graphs read the inp_attn_scale input when it is on) and the runtime (the
// factors the session fills inp_attn_scale with) share.
#pragma once

#include <cstdint>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// llama_hparams f_attn_temp_scale, n_attn_temp_floor_scale, f_attn_temp_offset. Off when scale is 0.
struct AttnTemperature {
  float scale = 0.f;
  uint32_t floor_scale = 0;
  float offset = 0.f;
  bool on() const { return scale != 0.f; }
};

/// The temperature tuning as llama.cpp 2026 reads it, arch = general.architecture: for mistral3
/// (llama_model_mistral3::load_arch_hparams) scale = `<arch>.attention.temperature_scale` (absent:
/// 0, off), floor_scale = n_ctx_orig_yarn (`<arch>.rope.scaling.original_context_length`, else
/// `<arch>.context_length`), offset 0; off for every other architecture.
/// Errors: GgufFile's typed-accessor errors for these keys of the wrong type or general.architecture
/// missing; a scale that is not finite or negative (llama.cpp runs a negative one, which drives the
/// factor to 0 and below); a floor_scale of 0 with the scale on (llama.cpp: "invalid
/// n_ctx_orig_yarn for attention temperature scaling"), naming the key it came from.
Result<AttnTemperature> GgufAttnTemperature(const GgufFile& gguf);

/// The factor of the token at position `pos` (llm_graph_input_attn_temp::set_input):
/// log(floor((pos + offset) / floor_scale) + 1) * scale + 1, in llama.cpp's float/double steps.
/// `t` must be on() with floor_scale > 0.
float AttnTemperatureFactor(const AttnTemperature& t, int64_t pos);

}  // namespace stowage
