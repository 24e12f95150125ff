// The attention sliding window of a GGUF model (n_swa): the one reading of it that the planner
// (ReadHParams: phi3's graphs, and gemma2/gemma3's sliding-window layers, read KQ_mask_swa when it
// is not 0) and the runtime (the window the session fills KQ_mask_swa with, CheckPlanAgainstModel)
// share.
#pragma once

#include <cstdint>
#include <optional>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// n_swa as llama.cpp's load_hparams reads it (Feb 2025, LLM_ARCH_PHI3; 2026 llama_model_gemma2 /
/// llama_model_gemma3::load_arch_hparams), arch = general.architecture:
/// `<arch>.attention.sliding_window` when present (0: no window, as Phi-4); else gemma2's default
/// 4096; else std::nullopt for gemma3 (no sliding window: every layer global); else, for Phi-3 files
/// converted before the key existed (llama.cpp PR #8931), the default of their size (n_layer =
/// `<arch>.block_count`, n_ctx_train = `<arch>.context_length`, n_head_kv =
/// `<arch>.attention.head_count_kv`, default `<arch>.attention.head_count`): 2047 for 32 or 40
/// layers trained on 4096 tokens, 262144 for 32 layers with 32 KV heads trained on 131072, 131072
/// for 40 layers trained on 131072. std::nullopt when the key is absent and no default applies
/// (llama.cpp refuses such a Phi-3 file: "invalid value for sliding_window").
/// Errors: GgufFile's typed-accessor errors (file, offset, key, expected vs found) for any of these
/// keys of the wrong type, and for general.architecture missing or not a string.
Result<std::optional<uint32_t>> GgufSlidingWindow(const GgufFile& gguf);

}  // namespace stowage
