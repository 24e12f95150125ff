#include "stowage/runtime/ggml_ops.h"

#include <string>

namespace stowage {
namespace {
constexpr const char* kNames[] = {
#define STOWAGE_OP_NAME(name) #name,
    STOWAGE_GGML_OPS(STOWAGE_OP_NAME)
#undef STOWAGE_OP_NAME
};

constexpr size_t kNumOps = static_cast<size_t>(GgmlOp::kCount);

// Builders of a traits entry: sources [lo, hi], then the parameter counts.
constexpr GgmlOpTraits Srcs(int lo, int hi, int n_i = 0, int n_f = 0) {
  GgmlOpTraits t;
  t.min_srcs = static_cast<int8_t>(lo);
  t.max_srcs = static_cast<int8_t>(hi);
  t.n_iparams = static_cast<int8_t>(n_i);
  t.n_fparams = static_cast<int8_t>(n_f);
  return t;
}
constexpr GgmlOpTraits Unmodeled(int lo, int hi) { return Srcs(lo, hi, -1, -1); }
constexpr GgmlOpTraits View(int n_i = 0) {
  GgmlOpTraits t = Srcs(1, 1, n_i, 0);
  t.is_view = true;
  return t;
}
constexpr GgmlOpTraits Inplace(GgmlOpTraits t) {
  t.can_inplace = true;
  return t;
}
constexpr GgmlOpTraits OptionalIparams(GgmlOpTraits t, int n) {
  t.n_iparams_opt = static_cast<int8_t>(n);
  return t;
}
constexpr GgmlOpTraits Into(GgmlOpTraits t, int dst_src) {
  t.dst_src = static_cast<int8_t>(dst_src);
  return t;
}

struct Entry {
  GgmlOp op;
  GgmlOpTraits traits;
};

// Sources from ggml.c's constructors; parameter counts from ggml_op_params.h (the layouts the
// graph builder writes); in place from ggml-alloc.c ggml_op_can_inplace (GGML_OP_UNARY: every
// unary op).
constexpr Entry kEntries[] = {
    {GgmlOp::NONE, Srcs(0, 0)},
    {GgmlOp::DUP, Srcs(1, 1)},
    {GgmlOp::ADD, Inplace(Srcs(2, 2))},
    {GgmlOp::ADD_ID, Inplace(Srcs(3, 3))},  // a, b (bias rows), ids (ggml_add_id)
    {GgmlOp::ADD1, Inplace(Srcs(2, 2))},
    {GgmlOp::SUB, Inplace(Srcs(2, 2))},
    {GgmlOp::MUL, Inplace(Srcs(2, 2))},
    {GgmlOp::DIV, Inplace(Srcs(2, 2))},
    {GgmlOp::SQR, Inplace(Srcs(1, 1))},
    {GgmlOp::SQRT, Inplace(Srcs(1, 1))},
    {GgmlOp::SUM_ROWS, Srcs(1, 1)},
    {GgmlOp::MEAN, Srcs(1, 1)},
    {GgmlOp::ARGMAX, Srcs(1, 1)},
    {GgmlOp::REPEAT, Srcs(1, 1)},
    {GgmlOp::CONCAT, Srcs(2, 2, 1, 0)},
    {GgmlOp::NORM, Srcs(1, 1, 0, 1)},
    {GgmlOp::RMS_NORM, Inplace(Srcs(1, 1, 0, 1))},
    {GgmlOp::GROUP_NORM, Unmodeled(1, 1)},
    {GgmlOp::L2_NORM, Unmodeled(1, 1)},
    {GgmlOp::MUL_MAT, Srcs(2, 2)},
    {GgmlOp::MUL_MAT_ID, Srcs(3, 3)},
    {GgmlOp::OUT_PROD, Srcs(2, 2)},
    {GgmlOp::SCALE, Inplace(Srcs(1, 1, 0, 2))},
    {GgmlOp::SET, Unmodeled(2, 2)},
    {GgmlOp::CPY, Into(Srcs(1, 2), 1)},
    {GgmlOp::CONT, Srcs(1, 1)},
    {GgmlOp::RESHAPE, View()},
    {GgmlOp::VIEW, View()},  // offset and strides are the plan's view_offset / view_nb
    {GgmlOp::PERMUTE, View(4)},
    {GgmlOp::TRANSPOSE, View()},
    {GgmlOp::GET_ROWS, Srcs(2, 2)},
    {GgmlOp::SET_ROWS, Into(Srcs(2, 3), 2)},
    {GgmlOp::DIAG_MASK_INF, Inplace(Unmodeled(1, 1))},
    {GgmlOp::SOFT_MAX, Inplace(Srcs(1, 3, 0, 2))},                  // mask, sinks (ggml_soft_max_add_sinks)
    {GgmlOp::ROPE, OptionalIparams(Inplace(Srcs(2, 3, 3, 6)), 1)},  // freq factors; n_offs
    {GgmlOp::CLAMP, Srcs(1, 1, 0, 2)},                              // {min, max}; not in ggml_op_can_inplace
    {GgmlOp::IM2COL, Unmodeled(2, 2)},
    {GgmlOp::CONV_TRANSPOSE_1D, Unmodeled(2, 2)},
    {GgmlOp::POOL_2D, Unmodeled(1, 1)},
    {GgmlOp::UPSCALE, Unmodeled(1, 1)},
    {GgmlOp::PAD, Unmodeled(1, 1)},
    {GgmlOp::ARANGE, Unmodeled(0, 0)},
    {GgmlOp::ARGSORT, Srcs(1, 1, 1, 0)},
    {GgmlOp::TOP_K, Srcs(1, 1, 1, 0)},
    {GgmlOp::FLASH_ATTN_EXT, Srcs(3, 5, 1, 3)},  // mask, sinks (ggml_flash_attn_ext_add_sinks)
    {GgmlOp::SSM_CONV, Srcs(2, 2)},
    {GgmlOp::SSM_SCAN, Srcs(6, 7)},  // ids (ggml Jun 2025)
    {GgmlOp::RWKV_WKV6, Srcs(6, 6)},
    {GgmlOp::RWKV_WKV7, Srcs(7, 7)},
    {GgmlOp::ABS, Inplace(Srcs(1, 1))},
    {GgmlOp::NEG, Inplace(Srcs(1, 1))},
    {GgmlOp::TANH, Inplace(Srcs(1, 1))},
    {GgmlOp::ELU, Inplace(Srcs(1, 1))},
    {GgmlOp::RELU, Inplace(Srcs(1, 1))},
    {GgmlOp::SIGMOID, Inplace(Srcs(1, 1))},
    {GgmlOp::GELU, Inplace(Srcs(1, 1))},
    {GgmlOp::GELU_QUICK, Inplace(Srcs(1, 1))},
    {GgmlOp::SILU, Inplace(Srcs(1, 1))},
    {GgmlOp::HARDSWISH, Inplace(Srcs(1, 1))},
    {GgmlOp::EXP, Inplace(Srcs(1, 1))},
    {GgmlOp::SOFTPLUS, Inplace(Srcs(1, 1))},
    // GLU: ggml_glu_split (gate, value) or the fused form of one source; ggml keeps `swapped` in
    // its op_params, the plans only the unswapped form without parameters.
    {GgmlOp::REGLU, Srcs(1, 2)},
    {GgmlOp::GEGLU, Srcs(1, 2)},
    {GgmlOp::SWIGLU, Srcs(1, 2)},
    // ggml_swiglu_oai(a, b, alpha, limit): split form only (llama.cpp builds it with both halves).
    {GgmlOp::SWIGLU_OAI, Srcs(2, 2, 0, 2)},
    // ggml_fill(a, c): a's shape and type, every element c (the value a only gives the shape).
    {GgmlOp::FILL, Inplace(Srcs(1, 1, 0, 1))},
    // Stowage's fused ops, made by the compiler's fusion passes from the sequence they replace.
    // RMS_NORM_MUL(a, w) {eps} = MUL(RMS_NORM(a) {eps}, w): both are in ggml_op_can_inplace.
    {GgmlOp::RMS_NORM_MUL, Inplace(Srcs(2, 2, 0, 1))},
    // MUL_MAT_GLU(gate, x, up) {glu} = the GLU of MUL_MAT(gate, x) and MUL_MAT(up, x) (the FFN-in).
    {GgmlOp::MUL_MAT_GLU, Srcs(3, 3, 1, 0)},
    // ALL_REDUCE(a): the element-wise sum of a over every rank of a tensor split across MPI ranks
    // (plan-model --cluster -sm tensor), written into a itself: each rank's partial sum of an axis-0
    // split matmul (attn_output, ffn_down) becomes the whole sum on every rank, as llama.cpp 2026's
    // meta device reduces a partial split (ggml_backend_meta; NCCL there, the Transport here). No
    // backend computes it: the session sums it (session_tensor_split.cpp); no op table lists it.
    {GgmlOp::ALL_REDUCE, Into(Srcs(1, 1), 0)},
    // ROPE_SET_ROWS(x, pos, dst, idx[, freq_factors]) {ROPE's parameters} = SET_ROWS(dst,
    // RESHAPE_2D(ROPE(x, pos, freq_factors), x.ne0 * x.ne1, x.ne2), idx): llama.cpp 2026's K store
    // (llama_kv_cache::cpy_k) of the rotated K, written into dst (src 2) as SET_ROWS writes it.
    {GgmlOp::ROPE_SET_ROWS, OptionalIparams(Into(Srcs(4, 5, 3, 6), 2), 1)},
    // ROPE_CPY(x, pos, dst[, freq_factors]) {ROPE's parameters} = CPY(ROPE(x, pos, freq_factors),
    // dst): Feb 2025's K store (llama_kv_cache_unified cpy_k: ggml_cpy into a view of the cache).
    {GgmlOp::ROPE_CPY, OptionalIparams(Into(Srcs(3, 4, 3, 6), 2), 1)},
};

constexpr bool InEnumOrder() {
  if (sizeof(kEntries) / sizeof(kEntries[0]) != kNumOps) return false;
  for (size_t i = 0; i < kNumOps; ++i)
    if (static_cast<size_t>(kEntries[i].op) != i) return false;
  return true;
}
static_assert(InEnumOrder(), "kEntries lists every GgmlOp once, in enum order");

}  // namespace

const char* GgmlOpName(GgmlOp op) {
  const auto i = static_cast<size_t>(op);
  return i < kNumOps ? kNames[i] : "?";
}

Result<GgmlOp> ParseGgmlOp(std::string_view name) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (name == kNames[i]) return static_cast<GgmlOp>(i);
  return InvalidArgument("unknown ggml op '" + std::string(name) + "'");
}

const GgmlOpTraits& GetOpTraits(GgmlOp op) {
  static constexpr GgmlOpTraits kOutside{};
  const auto i = static_cast<size_t>(op);
  return i < kNumOps ? kEntries[i].traits : kOutside;
}

int AliasedSource(GgmlOp op, size_t n_srcs) {
  const GgmlOpTraits& t = GetOpTraits(op);
  if (t.is_view) return 0;
  return t.dst_src >= 0 && static_cast<size_t>(t.dst_src) < n_srcs ? t.dst_src : -1;
}

}  // namespace stowage
