// The parameters of ggml ops as plans carry them: one typed struct per op and one encoding.
//
// A plan's graph tensor holds its op's parameters as two arrays, `iparams` (int32) and `fparams`
// (float), in the order of ggml's op_params for that op (ggml.c ggml_<op>_impl: ggml_set_op_params).
// The graph builder writes them with Encode, and every reader (plan verifier, backends, MLIR
// importer) reads them with the Decode of the op: the counts must be exactly the op's
// (GgmlOpTraits::n_iparams / n_fparams in ggml_ops.h), nothing is filled in with a default.
// The layouts are part of the plan format: append only (runtime/schema/COMPATIBILITY.md).
//
// Layouts:
//   ROPE            iparams {n_dims, mode, n_ctx_orig} or {n_dims, mode, n_ctx_orig, n_offs}
//                   (n_offs, ggml's op_params slot 15 from ggml_rope_set_offset, only when not 0)
//                   fparams {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow}
//   SOFT_MAX        fparams {scale, max_bias}
//   FLASH_ATTN_EXT  fparams {scale, max_bias, logit_softcap}, iparams {prec}
//   NORM, RMS_NORM  fparams {eps}
//   RMS_NORM_MUL    fparams {eps}   (Stowage's fused RMS_NORM + MUL: the RMS_NORM's eps)
//   MUL_MAT_GLU     iparams {glu}   (Stowage's fused FFN-in: MulMatGluKind, the GLU it replaces)
//   SCALE           fparams {s, b}
//   ARGSORT         iparams {order}
//   TOP_K           iparams {k}
//   CONCAT          iparams {dim}
//   PERMUTE         iparams {axis0, axis1, axis2, axis3}
//   SWIGLU_OAI      fparams {alpha, limit}   (ggml's op_params f32 slots 2 and 3)
// Every other op the planner builds has no parameters (VIEW's offset and strides are fields of
// their own in the plan).
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// A node's parameters as stored: borrowed arrays (a plan's vectors, a backend call's pointers).
struct OpParamsRef {
  const int32_t* iparams = nullptr;
  size_t n_iparams = 0;
  const float* fparams = nullptr;
  size_t n_fparams = 0;

  OpParamsRef() = default;
  OpParamsRef(const int32_t* i, size_t n_i, const float* f, size_t n_f)
      : iparams(i), n_iparams(n_i), fparams(f), n_fparams(n_f) {}
  OpParamsRef(const std::vector<int32_t>& i, const std::vector<float>& f)
      : iparams(i.data()), n_iparams(i.size()), fparams(f.data()), n_fparams(f.size()) {}
};

/// Parameters in the stored form, as Encode writes them.
struct EncodedOpParams {
  std::vector<int32_t> iparams;
  std::vector<float> fparams;
};

/// ggml_rope_ext's arguments (same names and meaning).
struct RopeParams {
  int n_dims = 0;      ///< rotated dims (even, <= ne0); the rest of each row is copied
  int mode = 0;        ///< 0 = normal (adjacent pairs, LLAMA_ROPE_TYPE_NORM), 2 = NEOX (halves)
  int n_ctx_orig = 0;  ///< training context (YaRN correction dims)
  float freq_base = 10000.f;
  float freq_scale = 1.f;   ///< 1 / context scaling factor
  float ext_factor = 0.f;   ///< YaRN extrapolation mix (0 = off)
  float attn_factor = 1.f;  ///< magnitude scale (mscale)
  float beta_fast = 32.f;
  float beta_slow = 1.f;
  /// ggml_rope_set_offset: the rotated dims are [n_offs, n_offs + n_dims) of each row instead of
  /// [0, n_dims) (even, n_offs + n_dims <= ne0); the others are copied. deepseek2's MHA form ropes
  /// the last n_rot dims of its query heads this way (llama.cpp 2026 llama_model_deepseek2::graph).
  int n_offs = 0;
};

/// ggml_soft_max_ext's scale and ALiBi max_bias.
struct SoftMaxParams {
  float scale = 1.f;
  float max_bias = 0.f;
};

/// ggml_flash_attn_ext's scale, max_bias and logit_softcap, and ggml_flash_attn_ext_set_prec's
/// precision (0 GGML_PREC_DEFAULT, 1 GGML_PREC_F32).
struct FlashAttnExtParams {
  float scale = 1.f;
  float max_bias = 0.f;
  float logit_softcap = 0.f;
  int prec = 0;
};

/// ggml_norm / ggml_rms_norm's epsilon.
struct NormParams {
  float eps = 0.f;
};

/// ggml_scale_bias: dst = src * s + b (ggml_scale: b = 0).
struct ScaleParams {
  float s = 1.f;
  float b = 0.f;
};

/// ggml_argsort's order: 0 = GGML_SORT_ORDER_ASC, 1 = GGML_SORT_ORDER_DESC.
struct ArgsortParams {
  int order = 0;
};

/// The GLU that MUL_MAT_GLU (Stowage's fused FFN-in) applies to gate = MUL_MAT(gate_w, x) and
/// up = MUL_MAT(up_w, x): the op or ops of the graph it replaces, whose bits it keeps.
enum class MulMatGluKind : int {
  kSwiGlu = 0,   ///< SWIGLU(gate, up), split form (llama.cpp 2026 build_ffn LLM_FFN_SILU + PAR)
  kGeGlu = 1,    ///< GEGLU(gate, up), split form (llama.cpp 2026 LLM_FFN_GELU + PAR)
  kSiluMul = 2,  ///< MUL(SILU(gate), up) (llama.cpp Feb 2025 build_ffn LLM_FFN_SILU + PAR)
  kGeluMul = 3,  ///< MUL(GELU(gate), up) (llama.cpp Feb 2025 LLM_FFN_GELU + PAR)
};

/// MUL_MAT_GLU's parameters.
struct MulMatGluParams {
  MulMatGluKind glu = MulMatGluKind::kSwiGlu;
};

/// ggml_top_k's k.
struct TopKParams {
  int k = 0;
};

/// ggml_concat's dimension (0..3).
struct ConcatParams {
  int dim = 0;
};

/// ggml_permute's axes: source dimension i becomes result dimension axis[i].
struct PermuteParams {
  int axis[4] = {0, 1, 2, 3};
};

/// ggml_swiglu_oai's alpha and limit (gpt-oss: 1.702 and 7): with x = min(a, limit) and
/// y = clamp(b, -limit, limit), result = x / (1 + exp(-alpha x)) * (y + 1).
struct SwiGluOaiParams {
  float alpha = 1.702f;
  float limit = 7.f;
};

/// ggml_fill's constant: every element of the result is c (llama.cpp 2026 build_moe_ffn fills the
/// masked expert groups with -INFINITY).
struct FillParams {
  float c = 0.f;
};

/// ggml_clamp's bounds: result = max(min(x, max), min) per element (ggml-cpu's MAX(MIN(x, max), min):
/// NaN becomes max). llama.cpp 2026 build_moe_ffn clamps the chosen experts' weight sum to
/// [6.103515625e-5 (2^-14), INFINITY] before dividing by it.
struct ClampParams {
  float min = 0.f;
  float max = 0.f;
};

/// The stored form of each op's parameters (layouts above).
EncodedOpParams Encode(const RopeParams& p);
EncodedOpParams Encode(const SoftMaxParams& p);
EncodedOpParams Encode(const FlashAttnExtParams& p);
EncodedOpParams Encode(const NormParams& p);
EncodedOpParams Encode(const ScaleParams& p);
EncodedOpParams Encode(const ArgsortParams& p);
EncodedOpParams Encode(const TopKParams& p);
EncodedOpParams Encode(const ConcatParams& p);
EncodedOpParams Encode(const PermuteParams& p);
EncodedOpParams Encode(const SwiGluOaiParams& p);
EncodedOpParams Encode(const FillParams& p);
EncodedOpParams Encode(const ClampParams& p);
EncodedOpParams Encode(const MulMatGluParams& p);

/// Checks that `p` has exactly the parameter counts of `op` (GgmlOpTraits; up to n_iparams_opt
/// more integers where the op has optional trailing ones); ops whose parameters are not modeled
/// (n_iparams < 0) pass. Errors: kInvalidArgument, one line, e.g. "ROPE: expected 3
/// integer parameters {n_dims, mode, n_ctx_orig} and 6 float parameters {...}, found 2 integer and
/// 6 float", "SILU: expected no parameters, found 0 integer and 1 float".
Status CheckParamCounts(GgmlOp op, const OpParamsRef& p);

/// The Decode of `op` for the ops that have one (its checks included), else CheckParamCounts: what
/// a verifier runs on every node. Errors: those of the Decode.
Status CheckParams(GgmlOp op, const OpParamsRef& p);

/// The Decode of each op: CheckParamCounts, then the values, then the checks listed (ggml's own
/// asserts or what makes the op meaningless). Errors: kInvalidArgument, one line naming the op.
/// ROPE: freq_base > 0 (the angles are powers of it); n_offs (absent: 0) even and >= 0 (ggml-cpu
/// rope asserts it).
Result<RopeParams> DecodeRope(const OpParamsRef& p);
Result<SoftMaxParams> DecodeSoftMax(const OpParamsRef& p);
/// prec 0 or 1 (this project's values of GGML_PREC_DEFAULT and GGML_PREC_F32).
Result<FlashAttnExtParams> DecodeFlashAttnExt(const OpParamsRef& p);
/// `op` is NORM, RMS_NORM or RMS_NORM_MUL (the error names it); eps >= 0 (ggml-cpu
/// ggml_compute_forward_norm_f32 asserts it).
Result<NormParams> DecodeNorm(GgmlOp op, const OpParamsRef& p);
Result<ScaleParams> DecodeScale(const OpParamsRef& p);
/// order 0 or 1.
Result<ArgsortParams> DecodeArgsort(const OpParamsRef& p);
/// k >= 1.
Result<TopKParams> DecodeTopK(const OpParamsRef& p);
/// dim in 0..3 (ggml_concat asserts it).
Result<ConcatParams> DecodeConcat(const OpParamsRef& p);
/// The axes are a permutation of 0..3 (ggml_permute asserts they differ).
Result<PermuteParams> DecodePermute(const OpParamsRef& p);
/// limit >= 0 (a negative limit would clamp b to an empty range; NaN refused too).
Result<SwiGluOaiParams> DecodeSwiGluOai(const OpParamsRef& p);
/// Any c, infinities included (NaN too: ggml stores what it is given).
Result<FillParams> DecodeFill(const OpParamsRef& p);
/// Any bounds, infinities included (ggml_clamp stores what it is given; min > max gives min).
Result<ClampParams> DecodeClamp(const OpParamsRef& p);
/// glu in 0..3 (MulMatGluKind).
Result<MulMatGluParams> DecodeMulMatGlu(const OpParamsRef& p);

/// ggml's rule for the rotated dims of rows of `ne0` elements: n_dims even and in (0, ne0], and
/// n_offs + n_dims <= ne0 (ggml-cpu ops.cpp rope: GGML_ASSERT(n_dims <= ne0), GGML_ASSERT(n_dims % 2
/// == 0), GGML_ASSERT(n_offs + n_dims <= ne0)). Needs the bound shape, so it is not part of
/// DecodeRope (a caller that does not know ne0 passes INT64_MAX). Errors: kInvalidArgument ("ROPE:
/// n_dims 7 must be even and positive", "... must not exceed ne0 = 64", "ROPE: n_offs 8 + n_dims 64
/// must not exceed ne0 = 64").
Status CheckRopeDims(const RopeParams& p, int64_t ne0);

}  // namespace stowage
