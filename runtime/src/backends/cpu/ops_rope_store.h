// CPU backend: Stowage's fused K stores (ops_rope_store.cpp). The compiler's
// stowage-fuse-rope-kv-store pass makes them from the ops they replace.
#ifndef STOWAGE_RUNTIME_BACKENDS_CPU_OPS_ROPE_STORE_H_
#define STOWAGE_RUNTIME_BACKENDS_CPU_OPS_ROPE_STORE_H_

#include "ops.h"

namespace stowage::cpu {

/// ROPE_SET_ROWS: SET_ROWS(dst, RESHAPE_2D(ROPE(src, pos, freq_factors), ne0 * ne1, ne2), idx)
/// in one node, bit for bit as the two (llama.cpp 2026 llama_kv_cache::cpy_k of the rotated K):
/// Rope computes the rotated F32 rows (into ctx.fused_work, never written out), then SetRows
/// converts each token's row [head_dim * n_head] to dst's type at row idx[token]. src F32
/// [head_dim, n_head, n_tokens, 1], pos I32 [>= n_tokens], freq_factors F32 or data == nullptr,
/// idx I64 or I32 [n_tokens], dst [head_dim * n_head, n_rows] of a type SetRows writes. Errors:
/// Rope's and SetRows's (naming ROPE / SET_ROWS), kInvalidArgument for a src that is not 3-D.
Status RopeSetRows(ComputeContext& ctx, const TensorView& src, const TensorView& pos,
                   const TensorView& freq_factors, const TensorView& idx, TensorView& dst,
                   const RopeParams& p);

/// ROPE_CPY: CPY(ROPE(src, pos, freq_factors), dst) in one node, bit for bit as the two (llama.cpp
/// Feb 2025's K store: ggml_cpy of the rotated K into a view of the cache): Rope computes the
/// rotated F32 tensor (into ctx.fused_work), Cpy converts it into dst in ggml element order. src
/// F32 [head_dim, n_head, n_tokens, ne3], dst of a type and shape Cpy takes (as many elements).
/// Errors: Rope's and Cpy's (naming ROPE / CPY).
Status RopeCpy(ComputeContext& ctx, const TensorView& src, const TensorView& pos,
               const TensorView& freq_factors, TensorView& dst, const RopeParams& p);

}  // namespace stowage::cpu

#endif  // STOWAGE_RUNTIME_BACKENDS_CPU_OPS_ROPE_STORE_H_
