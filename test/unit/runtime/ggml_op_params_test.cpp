// The op traits table (ggml_ops.h) and the parameter encodings (ggml_op_params.h): every layout
// round-trips, wrong counts are refused in one line, and the in-place / view facts are ggml's.
#include "stowage/runtime/ggml_op_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace stowage {
namespace {

OpParamsRef Ref(const EncodedOpParams& e) { return OpParamsRef(e.iparams, e.fparams); }

TEST(OpParams, RoundTrip) {
  RopeParams r;
  r.n_dims = 64;
  r.mode = 2;
  r.n_ctx_orig = 4096;
  r.freq_base = 500000.f;
  r.freq_scale = 0.25f;
  r.ext_factor = 1.f;
  r.attn_factor = 1.1f;
  r.beta_fast = 16.f;
  r.beta_slow = 2.f;
  const EncodedOpParams re = Encode(r);
  EXPECT_EQ(re.iparams, (std::vector<int32_t>{64, 2, 4096}));
  EXPECT_EQ(re.fparams, (std::vector<float>{500000.f, 0.25f, 1.f, 1.1f, 16.f, 2.f}));
  auto rd = DecodeRope(Ref(re));
  ASSERT_TRUE(rd.ok()) << rd.status().message();
  EXPECT_EQ(rd->n_dims, 64);
  EXPECT_EQ(rd->mode, 2);
  EXPECT_EQ(rd->n_ctx_orig, 4096);
  EXPECT_EQ(rd->freq_base, 500000.f);
  EXPECT_EQ(rd->freq_scale, 0.25f);
  EXPECT_EQ(rd->ext_factor, 1.f);
  EXPECT_EQ(rd->attn_factor, 1.1f);
  EXPECT_EQ(rd->beta_fast, 16.f);
  EXPECT_EQ(rd->beta_slow, 2.f);
  EXPECT_EQ(rd->n_offs, 0);
  // ggml_rope_set_offset's n_offs is a fourth integer, written only when not 0 (older plans keep
  // their bytes).
  r.n_offs = 16;
  const EncodedOpParams ro = Encode(r);
  EXPECT_EQ(ro.iparams, (std::vector<int32_t>{64, 2, 4096, 16}));
  auto rod = DecodeRope(Ref(ro));
  ASSERT_TRUE(rod.ok()) << rod.status().message();
  EXPECT_EQ(rod->n_offs, 16);

  auto sm = DecodeSoftMax(Ref(Encode(SoftMaxParams{0.125f, 8.f})));
  ASSERT_TRUE(sm.ok());
  EXPECT_EQ(sm->scale, 0.125f);
  EXPECT_EQ(sm->max_bias, 8.f);

  const EncodedOpParams fe = Encode(FlashAttnExtParams{0.5f, 1.f, 30.f, 1});
  EXPECT_EQ(fe.iparams, (std::vector<int32_t>{1}));
  EXPECT_EQ(fe.fparams, (std::vector<float>{0.5f, 1.f, 30.f}));
  auto fa = DecodeFlashAttnExt(Ref(fe));
  ASSERT_TRUE(fa.ok());
  EXPECT_EQ(fa->scale, 0.5f);
  EXPECT_EQ(fa->max_bias, 1.f);
  EXPECT_EQ(fa->logit_softcap, 30.f);
  EXPECT_EQ(fa->prec, 1);

  for (GgmlOp op : {GgmlOp::NORM, GgmlOp::RMS_NORM}) {
    auto n = DecodeNorm(op, Ref(Encode(NormParams{1e-6f})));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->eps, 1e-6f);
  }
  const EncodedOpParams se = Encode(ScaleParams{0.37f, 0.f});
  EXPECT_EQ(se.fparams, (std::vector<float>{0.37f, 0.f}));
  auto sc = DecodeScale(Ref(se));
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ(sc->s, 0.37f);
  EXPECT_EQ(sc->b, 0.f);

  auto as = DecodeArgsort(Ref(Encode(ArgsortParams{1})));
  ASSERT_TRUE(as.ok());
  EXPECT_EQ(as->order, 1);
  auto tk = DecodeTopK(Ref(Encode(TopKParams{3})));
  ASSERT_TRUE(tk.ok());
  EXPECT_EQ(tk->k, 3);
  auto cc = DecodeConcat(Ref(Encode(ConcatParams{2})));
  ASSERT_TRUE(cc.ok());
  EXPECT_EQ(cc->dim, 2);

  PermuteParams pp;
  pp.axis[0] = 0;
  pp.axis[1] = 2;
  pp.axis[2] = 1;
  pp.axis[3] = 3;
  const EncodedOpParams pe = Encode(pp);
  EXPECT_EQ(pe.iparams, (std::vector<int32_t>{0, 2, 1, 3}));
  auto pd = DecodePermute(Ref(pe));
  ASSERT_TRUE(pd.ok());
  for (int d = 0; d < 4; ++d) EXPECT_EQ(pd->axis[d], pp.axis[d]);
}

// Every encoding has exactly the counts of its op's traits.
TEST(OpParams, EncodingsMatchTraits) {
  auto counts = [](GgmlOp op, const EncodedOpParams& e) {
    const GgmlOpTraits& t = GetOpTraits(op);
    EXPECT_GE(static_cast<int>(e.iparams.size()), t.n_iparams) << GgmlOpName(op);
    EXPECT_LE(static_cast<int>(e.iparams.size()), t.n_iparams + t.n_iparams_opt) << GgmlOpName(op);
    EXPECT_EQ(static_cast<int>(e.fparams.size()), GetOpTraits(op).n_fparams) << GgmlOpName(op);
  };
  counts(GgmlOp::ROPE, Encode(RopeParams{}));
  RopeParams offset;
  offset.n_offs = 2;
  counts(GgmlOp::ROPE, Encode(offset));
  counts(GgmlOp::SOFT_MAX, Encode(SoftMaxParams{}));
  counts(GgmlOp::FLASH_ATTN_EXT, Encode(FlashAttnExtParams{}));
  counts(GgmlOp::NORM, Encode(NormParams{}));
  counts(GgmlOp::RMS_NORM, Encode(NormParams{}));
  counts(GgmlOp::SCALE, Encode(ScaleParams{}));
  counts(GgmlOp::ARGSORT, Encode(ArgsortParams{}));
  counts(GgmlOp::TOP_K, Encode(TopKParams{}));
  counts(GgmlOp::CONCAT, Encode(ConcatParams{}));
  counts(GgmlOp::PERMUTE, Encode(PermuteParams{}));
  counts(GgmlOp::SWIGLU_OAI, Encode(SwiGluOaiParams{}));
  counts(GgmlOp::FILL, Encode(FillParams{}));
  counts(GgmlOp::CLAMP, Encode(ClampParams{}));
}

TEST(OpParams, WrongCountsAreRefusedInOneLine) {
  const std::vector<int32_t> i2{64, 0};
  const std::vector<float> f6{10000.f, 1.f, 0.f, 1.f, 32.f, 1.f};
  auto r = DecodeRope(OpParamsRef(i2, f6));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      r.status().message(),
      "ROPE: expected 3 to 4 integer parameters {n_dims, mode, n_ctx_orig, n_offs} and 6 float parameters "
      "{freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow}, found 2 integer and 6 float");
  auto s = DecodeSoftMax(OpParamsRef());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "SOFT_MAX: expected 2 float parameters {scale, max_bias}, found 0 integer and 0 float");
  // Too many is as wrong as too few: no plan stores more than its op's layout.
  EXPECT_FALSE(DecodeRope(OpParamsRef({64, 0, 0, 0, 0}, f6)).ok());
  const std::vector<float> f2{1e-5f, 0.25f};
  EXPECT_FALSE(DecodeNorm(GgmlOp::RMS_NORM, OpParamsRef({}, f2)).ok());
  EXPECT_FALSE(DecodeScale(OpParamsRef({}, {1.f})).ok());
  EXPECT_FALSE(DecodeFlashAttnExt(OpParamsRef({}, {1.f, 0.f, 0.f})).ok());
  EXPECT_FALSE(DecodePermute(OpParamsRef({0, 1, 2}, {})).ok());
  EXPECT_FALSE(DecodeConcat(OpParamsRef({}, {})).ok());
  EXPECT_FALSE(DecodeArgsort(OpParamsRef({0, 0}, {})).ok());
  // Ops without parameters take none; ops whose parameters are not modeled take anything.
  EXPECT_TRUE(CheckParamCounts(GgmlOp::MUL_MAT, OpParamsRef()).ok());
  EXPECT_EQ(CheckParamCounts(GgmlOp::SILU, OpParamsRef({}, {1.f})).message(),
            "SILU: expected no parameters, found 0 integer and 1 float");
  // CheckParams runs the op's Decode (its value checks too).
  EXPECT_TRUE(CheckParams(GgmlOp::ROPE, Ref(Encode(RopeParams{}))).ok());
  EXPECT_FALSE(CheckParams(GgmlOp::CONCAT, Ref(Encode(ConcatParams{7}))).ok());
  EXPECT_FALSE(CheckParams(GgmlOp::ADD, OpParamsRef({1}, {})).ok());
  EXPECT_TRUE(CheckParamCounts(GgmlOp::PAD, OpParamsRef({1, 2}, {})).ok());
}

TEST(OpParams, ValuesAreChecked) {
  RopeParams r;
  r.n_dims = 64;
  r.freq_base = 0.f;
  auto rd = DecodeRope(Ref(Encode(r)));
  ASSERT_FALSE(rd.ok());
  EXPECT_EQ(rd.status().message(), "ROPE: freq_base 0.000000 must be positive");
  auto n = DecodeNorm(GgmlOp::NORM, Ref(Encode(NormParams{-1.f})));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), "NORM: expected eps >= 0, found -1.000000");
  EXPECT_FALSE(DecodeNorm(GgmlOp::SCALE, Ref(Encode(NormParams{1.f}))).ok());
  PermuteParams p;
  p.axis[1] = 0;
  auto pd = DecodePermute(Ref(Encode(p)));
  ASSERT_FALSE(pd.ok());
  EXPECT_EQ(pd.status().message(), "PERMUTE: axes are not a permutation of 0..3");
  EXPECT_FALSE(DecodeConcat(Ref(Encode(ConcatParams{4}))).ok());
  EXPECT_FALSE(DecodeArgsort(Ref(Encode(ArgsortParams{2}))).ok());
  EXPECT_FALSE(DecodeTopK(Ref(Encode(TopKParams{0}))).ok());
  EXPECT_FALSE(DecodeFlashAttnExt(Ref(Encode(FlashAttnExtParams{1.f, 0.f, 0.f, 10}))).ok());

  r.freq_base = 10000.f;
  EXPECT_TRUE(CheckRopeDims(r, 64).ok());
  EXPECT_TRUE(CheckRopeDims(r, 128).ok());
  const Status big = CheckRopeDims(r, 32);
  EXPECT_EQ(big.message(), "ROPE: n_dims 64 must not exceed ne0 = 32");
  r.n_offs = 64;  // ggml_rope_set_offset: [n_offs, n_offs + n_dims) must lie in the row
  EXPECT_TRUE(CheckRopeDims(r, 128).ok());
  EXPECT_EQ(CheckRopeDims(r, 96).message(), "ROPE: n_offs 64 + n_dims 64 must not exceed ne0 = 96");
  r.n_offs = 3;
  EXPECT_EQ(DecodeRope(Ref(Encode(r))).status().message(), "ROPE: n_offs 3 must be even and >= 0");
  r.n_offs = 0;
  r.n_dims = 7;
  EXPECT_FALSE(CheckRopeDims(r, 64).ok());
  r.n_dims = 0;
  EXPECT_FALSE(CheckRopeDims(r, 64).ok());
}

// ggml_swiglu_oai's alpha and limit (op_params f32 slots 2 and 3 in ggml) in the plan's order.
TEST(OpParams, SwiGluOai) {
  const EncodedOpParams e = Encode(SwiGluOaiParams{1.702f, 7.f});
  EXPECT_TRUE(e.iparams.empty());
  EXPECT_EQ(e.fparams, (std::vector<float>{1.702f, 7.f}));
  auto d = DecodeSwiGluOai(Ref(e));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->alpha, 1.702f);
  EXPECT_EQ(d->limit, 7.f);
  EXPECT_EQ(DecodeSwiGluOai(OpParamsRef({}, {1.f})).status().message(),
            "SWIGLU_OAI: expected 2 float parameters {alpha, limit}, found 0 integer and 1 float");
  EXPECT_EQ(CheckParams(GgmlOp::SWIGLU_OAI, Ref(Encode(SwiGluOaiParams{1.702f, -1.f}))).message(),
            "SWIGLU_OAI: limit -1.000000 must be >= 0");
  EXPECT_FALSE(DecodeSwiGluOai(Ref(Encode(SwiGluOaiParams{1.702f, std::nanf("")}))).ok());
  EXPECT_EQ(std::string(GgmlOpName(GgmlOp::SWIGLU_OAI)), "SWIGLU_OAI");
  EXPECT_EQ(GetOpTraits(GgmlOp::SWIGLU_OAI).min_srcs, 2);
  EXPECT_EQ(GetOpTraits(GgmlOp::ADD_ID).min_srcs, 3);
  EXPECT_EQ(GetOpTraits(GgmlOp::SOFT_MAX).max_srcs, 3);        // mask, sinks
  EXPECT_EQ(GetOpTraits(GgmlOp::FLASH_ATTN_EXT).max_srcs, 5);  // mask at 3, sinks at 4
}

// ggml_fill's constant (op_params f32 slot 0); -INFINITY is what build_moe_ffn fills with.
TEST(OpParams, Fill) {
  const EncodedOpParams e = Encode(FillParams{-INFINITY});
  EXPECT_TRUE(e.iparams.empty());
  auto d = DecodeFill(Ref(e));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->c, -INFINITY);
  EXPECT_EQ(CheckParams(GgmlOp::FILL, OpParamsRef({}, {})).message(),
            "FILL: expected 1 float parameter {c}, found 0 integer and 0 float");
  EXPECT_EQ(std::string(GgmlOpName(GgmlOp::FILL)), "FILL");
  EXPECT_EQ(GetOpTraits(GgmlOp::FILL).min_srcs, 1);
  EXPECT_EQ(GetOpTraits(GgmlOp::FILL).max_srcs, 1);
}

// ggml_clamp's bounds (op_params f32 slots 0 and 1); build_moe_ffn's [2^-14, INFINITY].
TEST(OpParams, Clamp) {
  const EncodedOpParams e = Encode(ClampParams{6.103515625e-5f, INFINITY});
  EXPECT_TRUE(e.iparams.empty());
  ASSERT_EQ(e.fparams.size(), 2u);
  auto d = DecodeClamp(Ref(e));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->min, 0x1p-14f);
  EXPECT_EQ(d->max, INFINITY);
  EXPECT_EQ(CheckParams(GgmlOp::CLAMP, OpParamsRef({}, {1.f})).message(),
            "CLAMP: expected 2 float parameters {min, max}, found 0 integer and 1 float");
  EXPECT_EQ(GetOpTraits(GgmlOp::CLAMP).min_srcs, 1);
  EXPECT_EQ(GetOpTraits(GgmlOp::CLAMP).max_srcs, 1);
}

// Stowage's fused RMS_NORM + MUL carries its RMS_NORM's eps, decoded and checked by DecodeNorm.
TEST(OpParams, RmsNormMul) {
  const EncodedOpParams e = Encode(NormParams{1e-6f});
  auto d = DecodeNorm(GgmlOp::RMS_NORM_MUL, Ref(e));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->eps, 1e-6f);
  EXPECT_EQ(CheckParams(GgmlOp::RMS_NORM_MUL, OpParamsRef({}, {})).message(),
            "RMS_NORM_MUL: expected 1 float parameter {eps}, found 0 integer and 0 float");
  EXPECT_EQ(DecodeNorm(GgmlOp::RMS_NORM_MUL, OpParamsRef({}, {-1.f})).status().message(),
            "RMS_NORM_MUL: expected eps >= 0, found -1.000000");
  EXPECT_EQ(DecodeNorm(GgmlOp::MUL, Ref(e)).status().message(),
            "DecodeNorm: MUL is not NORM, RMS_NORM or RMS_NORM_MUL");
  EXPECT_EQ(GetOpTraits(GgmlOp::RMS_NORM_MUL).min_srcs, 2);
  EXPECT_EQ(GetOpTraits(GgmlOp::RMS_NORM_MUL).max_srcs, 2);
  EXPECT_TRUE(GetOpTraits(GgmlOp::RMS_NORM_MUL).can_inplace);
  EXPECT_EQ(ParseGgmlOp("RMS_NORM_MUL").value(), GgmlOp::RMS_NORM_MUL);
}

// Stowage's fused FFN-in carries the GLU it replaces (MulMatGluKind), 0..3.
TEST(OpParams, MulMatGlu) {
  const EncodedOpParams e = Encode(MulMatGluParams{MulMatGluKind::kGeluMul});
  auto d = DecodeMulMatGlu(Ref(e));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->glu, MulMatGluKind::kGeluMul);
  EXPECT_EQ(CheckParams(GgmlOp::MUL_MAT_GLU, OpParamsRef({}, {})).message(),
            "MUL_MAT_GLU: expected 1 integer parameter {glu}, found 0 integer and 0 float");
  EXPECT_EQ(DecodeMulMatGlu(OpParamsRef({4}, {})).status().message(),
            "MUL_MAT_GLU: glu 4 is not 0 (SWIGLU), 1 (GEGLU), 2 (SILU, MUL) or 3 (GELU, MUL)");
  EXPECT_EQ(GetOpTraits(GgmlOp::MUL_MAT_GLU).min_srcs, 3);
  EXPECT_EQ(GetOpTraits(GgmlOp::MUL_MAT_GLU).max_srcs, 3);
  EXPECT_FALSE(GetOpTraits(GgmlOp::MUL_MAT_GLU).can_inplace);
  EXPECT_EQ(ParseGgmlOp("MUL_MAT_GLU").value(), GgmlOp::MUL_MAT_GLU);
}

// The fused K store carries ROPE's parameters and writes into its destination (src 2).
TEST(OpParams, RopeSetRows) {
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE_SET_ROWS).min_srcs, 4);
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE_SET_ROWS).max_srcs, 5);
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE_SET_ROWS).dst_src, 2);
  EXPECT_EQ(AliasedSource(GgmlOp::ROPE_SET_ROWS, 4), 2);
  EXPECT_EQ(ParseGgmlOp("ROPE_SET_ROWS").value(), GgmlOp::ROPE_SET_ROWS);
  RopeParams rp;
  rp.n_dims = 64;
  rp.mode = 2;
  EXPECT_TRUE(CheckParams(GgmlOp::ROPE_SET_ROWS, Ref(Encode(rp))).ok());
  EXPECT_EQ(
      CheckParamCounts(GgmlOp::ROPE_SET_ROWS, OpParamsRef({64}, {})).message(),
      "ROPE_SET_ROWS: expected 3 to 4 integer parameters {n_dims, mode, n_ctx_orig, n_offs} and 6 float "
      "parameters {freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow}, found 1 integer "
      "and 0 float");
}

// Feb 2025's fused K store: ROPE's parameters, written into its destination (src 2).
TEST(OpParams, RopeCpy) {
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE_CPY).min_srcs, 3);
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE_CPY).max_srcs, 4);
  EXPECT_EQ(AliasedSource(GgmlOp::ROPE_CPY, 3), 2);
  EXPECT_EQ(ParseGgmlOp("ROPE_CPY").value(), GgmlOp::ROPE_CPY);
  RopeParams rp;
  rp.n_dims = 64;
  EXPECT_TRUE(CheckParams(GgmlOp::ROPE_CPY, Ref(Encode(rp))).ok());
}

// The all-reduce of a tensor split across ranks: one source, no parameters, summed into the source.
TEST(OpParams, AllReduce) {
  EXPECT_TRUE(CheckParams(GgmlOp::ALL_REDUCE, OpParamsRef({}, {})).ok());
  EXPECT_EQ(CheckParams(GgmlOp::ALL_REDUCE, OpParamsRef({1}, {})).message(),
            "ALL_REDUCE: expected no parameters, found 1 integer and 0 float");
  EXPECT_EQ(GetOpTraits(GgmlOp::ALL_REDUCE).min_srcs, 1);
  EXPECT_EQ(GetOpTraits(GgmlOp::ALL_REDUCE).max_srcs, 1);
  EXPECT_EQ(AliasedSource(GgmlOp::ALL_REDUCE, 1), 0);
  EXPECT_FALSE(IsViewOp(GgmlOp::ALL_REDUCE));
  EXPECT_EQ(ParseGgmlOp("ALL_REDUCE").value(), GgmlOp::ALL_REDUCE);
}

TEST(OpTraits, ViewsAndInPlaceAsGgml) {
  // ggml_is_view_op
  for (int i = 0; i < static_cast<int>(GgmlOp::kCount); ++i) {
    const GgmlOp op = static_cast<GgmlOp>(i);
    const bool view =
        op == GgmlOp::RESHAPE || op == GgmlOp::VIEW || op == GgmlOp::PERMUTE || op == GgmlOp::TRANSPOSE;
    EXPECT_EQ(IsViewOp(op), view) << GgmlOpName(op);
    const GgmlOpTraits& t = GetOpTraits(op);
    EXPECT_LE(t.min_srcs, t.max_srcs) << GgmlOpName(op);
    EXPECT_LE(t.max_srcs, 7) << GgmlOpName(op);
    if (view) EXPECT_EQ(AliasedSource(op, 1), 0) << GgmlOpName(op);
  }
  // ggml-alloc.c ggml_op_can_inplace (UNARY: every unary op); GLU, NORM, CPY are not.
  for (GgmlOp op :
       {GgmlOp::ADD,      GgmlOp::ADD_ID,     GgmlOp::ADD1,      GgmlOp::SUB,   GgmlOp::MUL,
        GgmlOp::DIV,      GgmlOp::SQR,        GgmlOp::SQRT,      GgmlOp::SCALE, GgmlOp::DIAG_MASK_INF,
        GgmlOp::RMS_NORM, GgmlOp::SOFT_MAX,   GgmlOp::ROPE,      GgmlOp::SILU,  GgmlOp::GELU,
        GgmlOp::RELU,     GgmlOp::SIGMOID,    GgmlOp::TANH,      GgmlOp::ABS,   GgmlOp::NEG,
        GgmlOp::ELU,      GgmlOp::GELU_QUICK, GgmlOp::HARDSWISH, GgmlOp::EXP,   GgmlOp::SOFTPLUS,
        GgmlOp::FILL})
    EXPECT_TRUE(GetOpTraits(op).can_inplace) << GgmlOpName(op);
  for (GgmlOp op : {GgmlOp::NORM, GgmlOp::SWIGLU, GgmlOp::GEGLU, GgmlOp::CPY, GgmlOp::CONT, GgmlOp::MUL_MAT,
                    GgmlOp::GET_ROWS, GgmlOp::VIEW, GgmlOp::FLASH_ATTN_EXT, GgmlOp::CLAMP})
    EXPECT_FALSE(GetOpTraits(op).can_inplace) << GgmlOpName(op);
  // ggml_cpy(a, b) is a view of b; a one-source CPY (ggml_cast) owns its memory.
  EXPECT_EQ(AliasedSource(GgmlOp::CPY, 2), 1);
  EXPECT_EQ(AliasedSource(GgmlOp::CPY, 1), -1);
  EXPECT_EQ(AliasedSource(GgmlOp::ADD, 2), -1);
  EXPECT_FALSE(IsViewOp(GgmlOp::CPY));
  // Source counts the kernels rely on.
  EXPECT_EQ(GetOpTraits(GgmlOp::FLASH_ATTN_EXT).min_srcs, 3);
  EXPECT_EQ(GetOpTraits(GgmlOp::SSM_SCAN).min_srcs, 6);
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE).min_srcs, 2);
  EXPECT_EQ(GetOpTraits(GgmlOp::ROPE).max_srcs, 3);
  EXPECT_EQ(GetOpTraits(GgmlOp::SOFT_MAX).min_srcs, 1);
  // Outside the enum: a harmless entry.
  EXPECT_EQ(GetOpTraits(static_cast<GgmlOp>(60000)).max_srcs, 0);
  EXPECT_FALSE(IsViewOp(static_cast<GgmlOp>(60000)));
}

}  // namespace
}  // namespace stowage
