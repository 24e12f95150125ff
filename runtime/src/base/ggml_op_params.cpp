#include "stowage/runtime/ggml_op_params.h"

#include <string>

namespace stowage {
namespace {

// Names of the parameters of each modeled op, for the count error (layouts of ggml_op_params.h).
const char* IparamNames(GgmlOp op) {
  switch (op) {
    case GgmlOp::ROPE:
    case GgmlOp::ROPE_SET_ROWS:
    case GgmlOp::ROPE_CPY:
      return "{n_dims, mode, n_ctx_orig, n_offs}";
    case GgmlOp::FLASH_ATTN_EXT:
      return "{prec}";
    case GgmlOp::ARGSORT:
      return "{order}";
    case GgmlOp::MUL_MAT_GLU:
      return "{glu}";
    case GgmlOp::TOP_K:
      return "{k}";
    case GgmlOp::CONCAT:
      return "{dim}";
    case GgmlOp::PERMUTE:
      return "{axis0, axis1, axis2, axis3}";
    default:
      return "";
  }
}

const char* FparamNames(GgmlOp op) {
  switch (op) {
    case GgmlOp::ROPE:
    case GgmlOp::ROPE_SET_ROWS:
    case GgmlOp::ROPE_CPY:
      return "{freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow}";
    case GgmlOp::SOFT_MAX:
      return "{scale, max_bias}";
    case GgmlOp::FLASH_ATTN_EXT:
      return "{scale, max_bias, logit_softcap}";
    case GgmlOp::NORM:
    case GgmlOp::RMS_NORM:
    case GgmlOp::RMS_NORM_MUL:
      return "{eps}";
    case GgmlOp::SCALE:
      return "{s, b}";
    case GgmlOp::SWIGLU_OAI:
      return "{alpha, limit}";
    case GgmlOp::FILL:
      return "{c}";
    case GgmlOp::CLAMP:
      return "{min, max}";
    default:
      return "";
  }
}

std::string Counted(int n, const char* kind, const char* names) {
  return std::to_string(n) + " " + kind + " parameter" + (n == 1 ? " " : "s ") + names;
}

}  // namespace

Status CheckParamCounts(GgmlOp op, const OpParamsRef& p) {
  const GgmlOpTraits& t = GetOpTraits(op);
  if (t.n_iparams < 0 || t.n_fparams < 0) return Status::Ok();
  if (p.n_iparams >= static_cast<size_t>(t.n_iparams) &&
      p.n_iparams <= static_cast<size_t>(t.n_iparams + t.n_iparams_opt) &&
      p.n_fparams == static_cast<size_t>(t.n_fparams))
    return Status::Ok();
  std::string want;
  if (t.n_iparams > 0)
    want = (t.n_iparams_opt > 0 ? std::to_string(t.n_iparams) + " to " : std::string()) +
           Counted(t.n_iparams + t.n_iparams_opt, "integer", IparamNames(op));
  if (t.n_fparams > 0) want += (want.empty() ? "" : " and ") + Counted(t.n_fparams, "float", FparamNames(op));
  if (want.empty()) want = "no parameters";
  return InvalidArgument(std::string(GgmlOpName(op)) + ": expected " + want + ", found " +
                         std::to_string(p.n_iparams) + " integer and " + std::to_string(p.n_fparams) +
                         " float");
}

Status CheckParams(GgmlOp op, const OpParamsRef& p) {
  switch (op) {
    case GgmlOp::ROPE:
    case GgmlOp::ROPE_SET_ROWS:
    case GgmlOp::ROPE_CPY:
      return DecodeRope(p).status();
    case GgmlOp::SOFT_MAX:
      return DecodeSoftMax(p).status();
    case GgmlOp::FLASH_ATTN_EXT:
      return DecodeFlashAttnExt(p).status();
    case GgmlOp::NORM:
    case GgmlOp::RMS_NORM:
    case GgmlOp::RMS_NORM_MUL:
      return DecodeNorm(op, p).status();
    case GgmlOp::SCALE:
      return DecodeScale(p).status();
    case GgmlOp::ARGSORT:
      return DecodeArgsort(p).status();
    case GgmlOp::MUL_MAT_GLU:
      return DecodeMulMatGlu(p).status();
    case GgmlOp::TOP_K:
      return DecodeTopK(p).status();
    case GgmlOp::CONCAT:
      return DecodeConcat(p).status();
    case GgmlOp::PERMUTE:
      return DecodePermute(p).status();
    case GgmlOp::SWIGLU_OAI:
      return DecodeSwiGluOai(p).status();
    case GgmlOp::FILL:
      return DecodeFill(p).status();
    case GgmlOp::CLAMP:
      return DecodeClamp(p).status();
    default:
      return CheckParamCounts(op, p);
  }
}

EncodedOpParams Encode(const RopeParams& p) {
  EncodedOpParams e{{p.n_dims, p.mode, p.n_ctx_orig},
                    {p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow}};
  if (p.n_offs != 0) e.iparams.push_back(p.n_offs);
  return e;
}
EncodedOpParams Encode(const SoftMaxParams& p) { return {{}, {p.scale, p.max_bias}}; }
EncodedOpParams Encode(const FlashAttnExtParams& p) {
  return {{p.prec}, {p.scale, p.max_bias, p.logit_softcap}};
}
EncodedOpParams Encode(const NormParams& p) { return {{}, {p.eps}}; }
EncodedOpParams Encode(const ScaleParams& p) { return {{}, {p.s, p.b}}; }
EncodedOpParams Encode(const ArgsortParams& p) { return {{p.order}, {}}; }
EncodedOpParams Encode(const MulMatGluParams& p) { return {{static_cast<int32_t>(p.glu)}, {}}; }
EncodedOpParams Encode(const TopKParams& p) { return {{p.k}, {}}; }
EncodedOpParams Encode(const ConcatParams& p) { return {{p.dim}, {}}; }
EncodedOpParams Encode(const PermuteParams& p) { return {{p.axis[0], p.axis[1], p.axis[2], p.axis[3]}, {}}; }
EncodedOpParams Encode(const SwiGluOaiParams& p) { return {{}, {p.alpha, p.limit}}; }
EncodedOpParams Encode(const FillParams& p) { return {{}, {p.c}}; }
EncodedOpParams Encode(const ClampParams& p) { return {{}, {p.min, p.max}}; }

Result<RopeParams> DecodeRope(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::ROPE, p));
  RopeParams r;
  r.n_dims = p.iparams[0];
  r.mode = p.iparams[1];
  r.n_ctx_orig = p.iparams[2];
  r.freq_base = p.fparams[0];
  r.freq_scale = p.fparams[1];
  r.ext_factor = p.fparams[2];
  r.attn_factor = p.fparams[3];
  r.beta_fast = p.fparams[4];
  r.beta_slow = p.fparams[5];
  r.n_offs = p.n_iparams > 3 ? p.iparams[3] : 0;
  if (!(r.freq_base > 0))
    return InvalidArgument("ROPE: freq_base " + std::to_string(r.freq_base) + " must be positive");
  if (r.n_offs < 0 || r.n_offs % 2 != 0)
    return InvalidArgument("ROPE: n_offs " + std::to_string(r.n_offs) + " must be even and >= 0");
  return r;
}

Result<SoftMaxParams> DecodeSoftMax(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::SOFT_MAX, p));
  return SoftMaxParams{p.fparams[0], p.fparams[1]};
}

Result<FlashAttnExtParams> DecodeFlashAttnExt(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::FLASH_ATTN_EXT, p));
  const int prec = p.iparams[0];
  if (prec != 0 && prec != 1)
    return InvalidArgument("FLASH_ATTN_EXT: prec " + std::to_string(prec) +
                           " is not 0 (GGML_PREC_DEFAULT) or 1 (GGML_PREC_F32)");
  return FlashAttnExtParams{p.fparams[0], p.fparams[1], p.fparams[2], prec};
}

Result<NormParams> DecodeNorm(GgmlOp op, const OpParamsRef& p) {
  if (op != GgmlOp::NORM && op != GgmlOp::RMS_NORM && op != GgmlOp::RMS_NORM_MUL)
    return InvalidArgument(std::string("DecodeNorm: ") + GgmlOpName(op) +
                           " is not NORM, RMS_NORM or RMS_NORM_MUL");
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(op, p));
  const float eps = p.fparams[0];
  if (!(eps >= 0))
    return InvalidArgument(std::string(GgmlOpName(op)) + ": expected eps >= 0, found " + std::to_string(eps));
  return NormParams{eps};
}

Result<ScaleParams> DecodeScale(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::SCALE, p));
  return ScaleParams{p.fparams[0], p.fparams[1]};
}

Result<ArgsortParams> DecodeArgsort(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::ARGSORT, p));
  const int order = p.iparams[0];
  if (order != 0 && order != 1)
    return InvalidArgument("ARGSORT: order " + std::to_string(order) +
                           " is not 0 (ascending) or 1 (descending)");
  return ArgsortParams{order};
}

Result<MulMatGluParams> DecodeMulMatGlu(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::MUL_MAT_GLU, p));
  const int glu = p.iparams[0];
  if (glu < 0 || glu > 3)
    return InvalidArgument("MUL_MAT_GLU: glu " + std::to_string(glu) +
                           " is not 0 (SWIGLU), 1 (GEGLU), 2 (SILU, MUL) or 3 (GELU, MUL)");
  return MulMatGluParams{static_cast<MulMatGluKind>(glu)};
}

Result<TopKParams> DecodeTopK(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::TOP_K, p));
  const int k = p.iparams[0];
  if (k < 1) return InvalidArgument("TOP_K: k " + std::to_string(k) + " must be positive");
  return TopKParams{k};
}

Result<ConcatParams> DecodeConcat(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::CONCAT, p));
  const int dim = p.iparams[0];
  if (dim < 0 || dim > 3) return InvalidArgument("CONCAT: dim " + std::to_string(dim) + " is not in 0..3");
  return ConcatParams{dim};
}

Result<PermuteParams> DecodePermute(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::PERMUTE, p));
  PermuteParams r;
  int seen = 0;
  for (int d = 0; d < 4; ++d) {
    const int ax = p.iparams[d];
    if (ax < 0 || ax > 3 || (seen & (1 << ax)))
      return InvalidArgument("PERMUTE: axes are not a permutation of 0..3");
    seen |= 1 << ax;
    r.axis[d] = ax;
  }
  return r;
}

Result<SwiGluOaiParams> DecodeSwiGluOai(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::SWIGLU_OAI, p));
  const SwiGluOaiParams r{p.fparams[0], p.fparams[1]};
  if (!(r.limit >= 0))
    return InvalidArgument("SWIGLU_OAI: limit " + std::to_string(r.limit) + " must be >= 0");
  return r;
}

Status CheckRopeDims(const RopeParams& p, int64_t ne0) {
  if (p.n_dims <= 0 || p.n_dims % 2 != 0)
    return InvalidArgument("ROPE: n_dims " + std::to_string(p.n_dims) + " must be even and positive");
  if (p.n_dims > ne0)
    return InvalidArgument("ROPE: n_dims " + std::to_string(p.n_dims) +
                           " must not exceed ne0 = " + std::to_string(ne0));
  if (p.n_offs > ne0 - p.n_dims)
    return InvalidArgument("ROPE: n_offs " + std::to_string(p.n_offs) + " + n_dims " +
                           std::to_string(p.n_dims) + " must not exceed ne0 = " + std::to_string(ne0));
  return Status::Ok();
}

Result<FillParams> DecodeFill(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::FILL, p));
  return FillParams{p.fparams[0]};
}

Result<ClampParams> DecodeClamp(const OpParamsRef& p) {
  STOWAGE_RETURN_IF_ERROR(CheckParamCounts(GgmlOp::CLAMP, p));
  return ClampParams{p.fparams[0], p.fparams[1]};
}

}  // namespace stowage
