#include <cmath>
#include <string>

#include "stowage/runtime/gguf_attn_temperature.h"

namespace stowage {

Result<AttnTemperature> GgufAttnTemperature(const GgufFile& gguf) {
  STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf.GetString("general.architecture"));
  AttnTemperature t;
  if (arch != "mistral3") return t;
  const std::string p = arch + ".";
  const std::string scale_key = p + "attention.temperature_scale";
  STOWAGE_ASSIGN_OR_RETURN(t.scale, gguf.GetF32Or(scale_key, 0.f));
  // Differs from llama.cpp, which runs a negative scale: the factor log(floor(pos / floor_scale) + 1) *
  // scale + 1 then falls to 0 and below with the position, zeroing or negating Q.
  if (!std::isfinite(t.scale) || t.scale < 0.f)
    return gguf.KeyError(scale_key, "a finite scale >= 0 (0: off)", std::to_string(t.scale));
  if (!t.on()) return t;
  // n_ctx_orig_yarn: rope.scaling.original_context_length, else context_length (load_hparams)
  const std::string orig_key = p + "rope.scaling.original_context_length";
  const std::string ctx_key = p + "context_length";
  const std::string& from = gguf.Find(orig_key) != nullptr ? orig_key : ctx_key;
  STOWAGE_ASSIGN_OR_RETURN(t.floor_scale, gguf.GetU32Or(from, 0));
  if (t.floor_scale == 0)
    return gguf.KeyError(from,
                         "a positive context length (llama.cpp: invalid n_ctx_orig_yarn for attention "
                         "temperature scaling, " +
                             scale_key + " is " + std::to_string(t.scale) + ")",
                         "0");
  return t;
}

float AttnTemperatureFactor(const AttnTemperature& t, int64_t pos) {
  const float p = static_cast<float>(pos);
  return static_cast<float>(std::log(std::floor((p + t.offset) / t.floor_scale) + 1.0) * t.scale + 1.0);
}

}  // namespace stowage
