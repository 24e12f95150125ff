// CPU backend: Stowage's fused K stores, the ROPE of K and the op that writes it into the KV cache
// in one node: ROPE_SET_ROWS (llama.cpp 2026's llama_kv_cache::cpy_k, SET_ROWS) and ROPE_CPY (Feb
// 2025's, a CPY into a view of the cache).
#include "ops_rope_store.h"

#include <string>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

namespace {

// The tensor ROPE would have made of src, contiguous F32 in the fused-op scratch (SET_ROWS and CPY
// use ctx.work), computed by ROPE's kernel.
Status RotateIntoScratch(ComputeContext& ctx, const TensorView& src, const TensorView& pos,
                         const TensorView& freq_factors, const RopeParams& p, TensorView* rotated) {
  const size_t n = static_cast<size_t>(src.nelements());
  if (ctx.fused_work.size() < n) ctx.fused_work.resize(n);
  rotated->data = ctx.fused_work.data();
  rotated->type = GgmlType::F32;
  for (int i = 0; i < 4; ++i) rotated->ne[i] = src.ne[i];
  SetContiguousStrides(*rotated);
  return Rope(ctx, src, pos, freq_factors, *rotated, p);
}

}  // namespace

Status RopeSetRows(ComputeContext& ctx, const TensorView& src, const TensorView& pos,
                   const TensorView& freq_factors, const TensorView& idx, TensorView& dst,
                   const RopeParams& p) {
  const char* op = "ROPE_SET_ROWS";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  for (int i = 0; i < 4; ++i)
    STOWAGE_CPU_NEED(src.ne[i] >= 0, op, "negative dimension in src " + ShapeString(src));
  STOWAGE_CPU_NEED(src.ne[3] == 1, op,
                   "src " + ShapeString(src) + " must be 3-D [head_dim, n_head, n_tokens]");
  TensorView rotated;
  STOWAGE_RETURN_IF_ERROR(RotateIntoScratch(ctx, src, pos, freq_factors, p, &rotated));
  // Its 2-D reshape [head_dim * n_head, n_tokens] stored as SET_ROWS stores it.
  TensorView rows = rotated;
  rows.ne[0] = src.ne[0] * src.ne[1];
  rows.ne[1] = src.ne[2];
  rows.ne[2] = 1;
  SetContiguousStrides(rows);
  return SetRows(ctx, rows, idx, dst);
}

Status RopeCpy(ComputeContext& ctx, const TensorView& src, const TensorView& pos,
               const TensorView& freq_factors, TensorView& dst, const RopeParams& p) {
  const char* op = "ROPE_CPY";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  for (int i = 0; i < 4; ++i)
    STOWAGE_CPU_NEED(src.ne[i] >= 0, op, "negative dimension in src " + ShapeString(src));
  TensorView rotated;
  STOWAGE_RETURN_IF_ERROR(RotateIntoScratch(ctx, src, pos, freq_factors, p, &rotated));
  return Cpy(ctx, rotated, dst);
}

}  // namespace stowage::cpu
