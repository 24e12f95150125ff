// The shape rules of ggml ops (ggml_op_shapes.h): per rule family, shapes ggml accepts give ggml's
// result, the rest are refused with a one-line message naming the op and ggml's function.
#include "stowage/runtime/ggml_op_shapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace stowage {
namespace {

const OpParamsRef kNoParams;

OpParamsRef Ref(const EncodedOpParams& e) { return OpParamsRef(e.iparams, e.fparams); }

// The shape InferShape gives, failing the test on an error.
Ne4 Infer(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& p = kNoParams) {
  Result<Ne4> r = InferShape(op, srcs, p);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Ne4{-1, -1, -1, -1};
}

// InferShape's error message, checked to be one line that names the op.
std::string Refusal(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& p = kNoParams) {
  Result<Ne4> r = InferShape(op, srcs, p);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  const std::string m = r.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.rfind(GgmlOpName(op), 0), 0u) << m;
  return m;
}

TEST(OpShapes, ElementwiseAndBroadcast) {
  EXPECT_EQ(Infer(GgmlOp::SILU, {Ne4{8, 3, 2, 1}}), (Ne4{8, 3, 2, 1}));
  EXPECT_EQ(Infer(GgmlOp::TANH, {Ne4{256000, 5, 1, 1}}), (Ne4{256000, 5, 1, 1}));  // logit soft-capping
  EXPECT_EQ(Infer(GgmlOp::RMS_NORM, {Ne4{8, 3, 1, 1}}, Ref(Encode(NormParams{1e-5f}))), (Ne4{8, 3, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::ADD, {Ne4{8, 3, 2, 1}, Ne4{8, 1, 1, 1}}), (Ne4{8, 3, 2, 1}));
  // ggml_can_repeat: multiples, not only 1 or equal.
  EXPECT_EQ(Infer(GgmlOp::MUL, {Ne4{8, 4, 1, 1}, Ne4{4, 2, 1, 1}}), (Ne4{8, 4, 1, 1}));
  EXPECT_NE(Refusal(GgmlOp::ADD, {Ne4{8, 3, 1, 1}, Ne4{3, 1, 1, 1}}).find("ggml_can_repeat"),
            std::string::npos);
  EXPECT_EQ(Infer(GgmlOp::SUM_ROWS, {Ne4{8, 3, 2, 1}}), (Ne4{1, 3, 2, 1}));
  EXPECT_EQ(Infer(GgmlOp::SWIGLU, {Ne4{8, 3, 1, 1}, Ne4{8, 3, 1, 1}}), (Ne4{8, 3, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::GEGLU, {Ne4{8, 3, 1, 1}}), (Ne4{4, 3, 1, 1}));
  Refusal(GgmlOp::SWIGLU, {Ne4{8, 3, 1, 1}, Ne4{8, 2, 1, 1}});
  Refusal(GgmlOp::SILU, {Ne4{8, -1, 1, 1}});
  EXPECT_EQ(Refusal(GgmlOp::SILU, {}), "SILU: source 0 is missing");
  EXPECT_EQ(Refusal(GgmlOp::TANH, {}), "TANH: source 0 is missing");
}

TEST(OpShapes, MatMul) {
  EXPECT_EQ(Infer(GgmlOp::MUL_MAT, {Ne4{64, 32, 2, 1}, Ne4{64, 7, 8, 1}}), (Ne4{32, 7, 8, 1}));
  EXPECT_EQ(Refusal(GgmlOp::MUL_MAT, {Ne4{64, 32, 1, 1}, Ne4{32, 7, 1, 1}}),
            "MUL_MAT: a.ne0 (64) must equal b.ne0 (32) (ggml_can_mul_mat)");
  Refusal(GgmlOp::MUL_MAT, {Ne4{64, 32, 3, 1}, Ne4{64, 7, 8, 1}});
  // as [K, M, n_expert], b [K, 1, n_t], ids [n_used, n_t]
  EXPECT_EQ(Infer(GgmlOp::MUL_MAT_ID, {Ne4{16, 32, 8, 1}, Ne4{16, 1, 5, 1}, Ne4{2, 5, 1, 1}}),
            (Ne4{32, 2, 5, 1}));
  Refusal(GgmlOp::MUL_MAT_ID, {Ne4{16, 32, 8, 1}, Ne4{16, 1, 5, 1}, Ne4{2, 4, 1, 1}});
  Refusal(GgmlOp::MUL_MAT_ID, {Ne4{16, 32, 8, 1}, Ne4{16, 3, 5, 1}, Ne4{2, 5, 1, 1}});
  EXPECT_EQ(Infer(GgmlOp::GET_ROWS, {Ne4{16, 100, 1, 1}, Ne4{7, 1, 1, 1}}), (Ne4{16, 7, 1, 1}));
  EXPECT_NE(Refusal(GgmlOp::GET_ROWS, {Ne4{16, 100, 2, 1}, Ne4{7, 1, 1, 1}}).find("ggml_get_rows"),
            std::string::npos);
}

TEST(OpShapes, Attention) {
  RopeParams rp;
  rp.n_dims = 64;
  const EncodedOpParams rope = Encode(rp);
  EXPECT_EQ(Infer(GgmlOp::ROPE, {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}}, Ref(rope)), (Ne4{64, 4, 7, 1}));
  EXPECT_EQ(Infer(GgmlOp::ROPE, {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{32, 1, 1, 1}}, Ref(rope)),
            (Ne4{64, 4, 7, 1}));
  Refusal(GgmlOp::ROPE, {Ne4{64, 4, 7, 1}, Ne4{6, 1, 1, 1}}, Ref(rope));
  Refusal(GgmlOp::ROPE, {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{16, 1, 1, 1}}, Ref(rope));
  EXPECT_NE(Refusal(GgmlOp::ROPE, {Ne4{32, 4, 7, 1}, Ne4{7, 1, 1, 1}}, Ref(rope)).find("ne0"),
            std::string::npos);

  const EncodedOpParams sm = Encode(SoftMaxParams{0.125f, 0.f});
  EXPECT_EQ(Infer(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{256, 7, 1, 1}}, Ref(sm)), (Ne4{256, 7, 4, 1}));
  EXPECT_EQ(Infer(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{256, 32, 1, 1}}, Ref(sm)), (Ne4{256, 7, 4, 1}));
  Refusal(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{256, 6, 1, 1}}, Ref(sm));
  Refusal(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{128, 7, 1, 1}}, Ref(sm));

  const EncodedOpParams fa = Encode(FlashAttnExtParams{0.125f, 0.f, 0.f, 1});
  // q [D, n_t, n_head], k [D, n_kv, n_head_kv], v [Dv, n_kv, n_head_kv], mask [n_kv, n_t]
  const SrcShapes ok{Ne4{64, 7, 8, 1}, Ne4{64, 256, 2, 1}, Ne4{32, 256, 2, 1}, Ne4{256, 7, 1, 1}};
  EXPECT_EQ(Infer(GgmlOp::FLASH_ATTN_EXT, ok, Ref(fa)), (Ne4{32, 8, 7, 1}));
  Refusal(GgmlOp::FLASH_ATTN_EXT, {Ne4{64, 7, 8, 1}, Ne4{64, 256, 3, 1}, Ne4{32, 256, 3, 1}}, Ref(fa));
  Refusal(GgmlOp::FLASH_ATTN_EXT, {Ne4{64, 7, 8, 1}, Ne4{64, 256, 2, 1}, Ne4{32, 128, 2, 1}}, Ref(fa));
  Refusal(GgmlOp::FLASH_ATTN_EXT,
          {Ne4{64, 7, 8, 1}, Ne4{64, 256, 2, 1}, Ne4{32, 256, 2, 1}, Ne4{256, 6, 1, 1}}, Ref(fa));
}

// ggml_fill: a's shape (DeepSeek-V3's grouped selection probabilities [per group, groups, n_tokens]).
TEST(OpShapes, Fill) {
  const EncodedOpParams f = Encode(FillParams{-INFINITY});
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::FILL), ShapeRuleKind::kInferred);
  EXPECT_EQ(Infer(GgmlOp::FILL, {Ne4{32, 8, 7, 1}}, Ref(f)), (Ne4{32, 8, 7, 1}));
  EXPECT_EQ(Refusal(GgmlOp::FILL, {}, Ref(f)), "FILL: source 0 is missing");
}

// ggml_clamp: a's shape (build_moe_ffn's weight sum [1, n_tokens]).
TEST(OpShapes, Clamp) {
  const EncodedOpParams c = Encode(ClampParams{0x1p-14f, INFINITY});
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::CLAMP), ShapeRuleKind::kInferred);
  EXPECT_EQ(Infer(GgmlOp::CLAMP, {Ne4{1, 7, 1, 1}}, Ref(c)), (Ne4{1, 7, 1, 1}));
  EXPECT_EQ(Refusal(GgmlOp::CLAMP, {}, Ref(c)), "CLAMP: source 0 is missing");
}

// RMS_NORM_MUL(a, w): MUL's broadcast of the norm weight over a; the result is a's shape.
TEST(OpShapes, RmsNormMul) {
  const EncodedOpParams e = Encode(NormParams{1e-5f});
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::RMS_NORM_MUL), ShapeRuleKind::kInferred);
  EXPECT_EQ(Infer(GgmlOp::RMS_NORM_MUL, {Ne4{64, 7, 1, 1}, Ne4{64, 1, 1, 1}}, Ref(e)), (Ne4{64, 7, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::RMS_NORM_MUL, {Ne4{128, 8, 7, 1}, Ne4{128, 1, 1, 1}}, Ref(e)), (Ne4{128, 8, 7, 1}));
  EXPECT_EQ(Refusal(GgmlOp::RMS_NORM_MUL, {Ne4{64, 7, 1, 1}, Ne4{48, 1, 1, 1}}, Ref(e)),
            "RMS_NORM_MUL: b [48, 1, 1, 1] cannot be repeated to a [64, 7, 1, 1] (ggml_mul: "
            "ggml_can_repeat(b, a))");
  EXPECT_EQ(Refusal(GgmlOp::RMS_NORM_MUL, {Ne4{64, 7, 1, 1}}, Ref(e)), "RMS_NORM_MUL: source 1 is missing");
}

// ALL_REDUCE(a): the sum over the ranks has a's shape.
TEST(OpShapes, AllReduce) {
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::ALL_REDUCE), ShapeRuleKind::kInferred);
  EXPECT_EQ(Infer(GgmlOp::ALL_REDUCE, {Ne4{64, 7, 1, 1}}, OpParamsRef({}, {})), (Ne4{64, 7, 1, 1}));
  EXPECT_EQ(Refusal(GgmlOp::ALL_REDUCE, {}, OpParamsRef({}, {})), "ALL_REDUCE: source 0 is missing");
}

TEST(OpShapes, MulMatGlu) {
  const EncodedOpParams e = Encode(MulMatGluParams{});
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::MUL_MAT_GLU), ShapeRuleKind::kInferred);
  EXPECT_EQ(Infer(GgmlOp::MUL_MAT_GLU, {Ne4{64, 128, 1, 1}, Ne4{64, 7, 1, 1}, Ne4{64, 128, 1, 1}}, Ref(e)),
            (Ne4{128, 7, 1, 1}));
  EXPECT_EQ(Refusal(GgmlOp::MUL_MAT_GLU, {Ne4{64, 128, 1, 1}, Ne4{64, 7, 1, 1}, Ne4{64, 96, 1, 1}}, Ref(e)),
            "MUL_MAT_GLU: up.ne1 (96) must equal gate.ne1 (128) (ggml_mul_mat)");
  EXPECT_EQ(Refusal(GgmlOp::MUL_MAT_GLU, {Ne4{64, 128, 1, 1}, Ne4{32, 7, 1, 1}, Ne4{64, 128, 1, 1}}, Ref(e)),
            "MUL_MAT_GLU: a.ne0 (64) must equal b.ne0 (32) (ggml_can_mul_mat)");
}

// The fused K store: ROPE's rule on x, pos, freq_factors, then SET_ROWS's on the rotated rows.
TEST(OpShapes, RopeSetRows) {
  RopeParams rp;
  rp.n_dims = 64;
  const EncodedOpParams e = Encode(rp);
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::ROPE_SET_ROWS), ShapeRuleKind::kInferred);
  // x [64, 4, 7], pos [7], dst [256, 32], idx [7] (-> dst), freq factors [32]
  EXPECT_EQ(Infer(GgmlOp::ROPE_SET_ROWS,
                  {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{256, 32, 1, 1}, Ne4{7, 1, 1, 1}}, Ref(e)),
            (Ne4{256, 32, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::ROPE_SET_ROWS,
                  {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{256, 32, 1, 1}, Ne4{7, 1, 1, 1}, Ne4{32, 1, 1, 1}},
                  Ref(e)),
            (Ne4{256, 32, 1, 1}));
  EXPECT_EQ(Refusal(GgmlOp::ROPE_SET_ROWS,
                    {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{128, 32, 1, 1}, Ne4{7, 1, 1, 1}}, Ref(e)),
            "ROPE_SET_ROWS: a.ne0 (128) must equal b.ne0 (256) (ggml_set_rows)");
  EXPECT_EQ(Refusal(GgmlOp::ROPE_SET_ROWS,
                    {Ne4{64, 4, 7, 1}, Ne4{6, 1, 1, 1}, Ne4{256, 32, 1, 1}, Ne4{7, 1, 1, 1}}, Ref(e)),
            "ROPE_SET_ROWS: a.ne2 (7) must equal pos.ne0 (6) (ggml_rope_ext: one position per token)");
  EXPECT_EQ(Refusal(GgmlOp::ROPE_SET_ROWS,
                    {Ne4{64, 4, 7, 2}, Ne4{7, 1, 1, 1}, Ne4{256, 32, 1, 1}, Ne4{7, 1, 1, 1}}, Ref(e)),
            "ROPE_SET_ROWS: x must be 3-D [head_dim, n_head, n_tokens], got [64, 4, 7, 2]");
}

// Feb 2025's fused K store: ROPE's rule, then CPY's (as many elements as dst).
TEST(OpShapes, RopeCpy) {
  RopeParams rp;
  rp.n_dims = 64;
  const EncodedOpParams e = Encode(rp);
  EXPECT_EQ(Infer(GgmlOp::ROPE_CPY, {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{1792, 1, 1, 1}}, Ref(e)),
            (Ne4{1792, 1, 1, 1}));
  EXPECT_EQ(
      Refusal(GgmlOp::ROPE_CPY, {Ne4{64, 4, 7, 1}, Ne4{7, 1, 1, 1}, Ne4{1024, 1, 1, 1}}, Ref(e)),
      "ROPE_CPY: x [64, 4, 7, 1] and dst [1024, 1, 1, 1] must have the same number of elements (ggml_cpy)");
  EXPECT_EQ(Refusal(GgmlOp::ROPE_CPY, {Ne4{64, 4, 7, 1}, Ne4{5, 1, 1, 1}, Ne4{1792, 1, 1, 1}}, Ref(e)),
            "ROPE_CPY: a.ne2 (7) must equal pos.ne0 (5) (ggml_rope_ext: one position per token)");
}

// gpt-oss's ops: the biased experts (ggml_add_id), the clamped SwiGLU and the attention sinks.
TEST(OpShapes, AddIdSwiGluOaiAndSinks) {
  // a [n_ff, n_used, n_tokens], b [n_ff, n_expert] (one bias row per expert), ids [n_used, n_tokens]
  EXPECT_EQ(Infer(GgmlOp::ADD_ID, {Ne4{24, 4, 7, 1}, Ne4{24, 32, 1, 1}, Ne4{4, 7, 1, 1}}),
            (Ne4{24, 4, 7, 1}));
  EXPECT_EQ(Refusal(GgmlOp::ADD_ID, {Ne4{24, 4, 7, 1}, Ne4{16, 32, 1, 1}, Ne4{4, 7, 1, 1}}),
            "ADD_ID: a.ne0 (24) must equal b.ne0 (16) (ggml_add_id)");
  EXPECT_EQ(Refusal(GgmlOp::ADD_ID, {Ne4{24, 4, 7, 1}, Ne4{24, 32, 1, 1}, Ne4{2, 7, 1, 1}}),
            "ADD_ID: a.ne1 (4) must equal ids.ne0 (2) (ggml_add_id)");
  Refusal(GgmlOp::ADD_ID, {Ne4{24, 4, 7, 1}, Ne4{24, 32, 1, 1}, Ne4{4, 6, 1, 1}});
  EXPECT_EQ(Refusal(GgmlOp::ADD_ID, {Ne4{24, 4, 7, 1}, Ne4{24, 32, 1, 1}}), "ADD_ID: source 2 is missing");

  const EncodedOpParams oai = Encode(SwiGluOaiParams{});
  EXPECT_EQ(Infer(GgmlOp::SWIGLU_OAI, {Ne4{24, 4, 7, 1}, Ne4{24, 4, 7, 1}}, Ref(oai)), (Ne4{24, 4, 7, 1}));
  Refusal(GgmlOp::SWIGLU_OAI, {Ne4{24, 4, 7, 1}, Ne4{24, 3, 7, 1}}, Ref(oai));
  EXPECT_EQ(Refusal(GgmlOp::SWIGLU_OAI, {Ne4{48, 4, 7, 1}}, Ref(oai)), "SWIGLU_OAI: source 1 is missing");

  // soft_max's src 2 and flash attention's src 4: one sink logit per head.
  const EncodedOpParams sm = Encode(SoftMaxParams{0.125f, 0.f});
  EXPECT_EQ(Infer(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{256, 7, 1, 1}, Ne4{4, 1, 1, 1}}, Ref(sm)),
            (Ne4{256, 7, 4, 1}));
  EXPECT_EQ(Refusal(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, Ne4{256, 7, 1, 1}, Ne4{8, 1, 1, 1}}, Ref(sm)),
            "SOFT_MAX: sinks.ne0 (8) must equal the head count (4) (ggml_soft_max_add_sinks)");
  Refusal(GgmlOp::SOFT_MAX, {Ne4{256, 7, 4, 1}, std::nullopt, Ne4{4, 2, 1, 1}}, Ref(sm));
  const EncodedOpParams fa = Encode(FlashAttnExtParams{0.125f, 0.f, 0.f, 1});
  SrcShapes q_k_v_mask_sinks{Ne4{64, 7, 8, 1}, Ne4{64, 256, 2, 1}, Ne4{64, 256, 2, 1}, Ne4{256, 7, 1, 1},
                             Ne4{8, 1, 1, 1}};
  EXPECT_EQ(Infer(GgmlOp::FLASH_ATTN_EXT, q_k_v_mask_sinks, Ref(fa)), (Ne4{64, 8, 7, 1}));
  q_k_v_mask_sinks[4] = Ne4{2, 1, 1, 1};  // the kv heads' count is not the query heads'
  EXPECT_EQ(Refusal(GgmlOp::FLASH_ATTN_EXT, q_k_v_mask_sinks, Ref(fa)),
            "FLASH_ATTN_EXT: sinks.ne0 (2) must equal the head count (8) (ggml_flash_attn_ext_add_sinks)");
}

TEST(OpShapes, LayoutOps) {
  EXPECT_EQ(Infer(GgmlOp::PERMUTE, {Ne4{2, 3, 4, 5}}, Ref(Encode(PermuteParams{{0, 2, 1, 3}}))),
            (Ne4{2, 4, 3, 5}));
  EXPECT_EQ(Infer(GgmlOp::PERMUTE, {Ne4{2, 3, 4, 5}}, Ref(Encode(PermuteParams{{1, 2, 3, 0}}))),
            (Ne4{5, 2, 3, 4}));
  Refusal(GgmlOp::PERMUTE, {Ne4{2, 3, 4, 5}}, Ref(Encode(PermuteParams{{0, 0, 1, 3}})));
  EXPECT_EQ(Infer(GgmlOp::TRANSPOSE, {Ne4{2, 3, 4, 5}}), (Ne4{3, 2, 4, 5}));
  EXPECT_EQ(Infer(GgmlOp::CONCAT, {Ne4{2, 3, 1, 1}, Ne4{2, 5, 1, 1}}, Ref(Encode(ConcatParams{1}))),
            (Ne4{2, 8, 1, 1}));
  Refusal(GgmlOp::CONCAT, {Ne4{2, 3, 1, 1}, Ne4{3, 5, 1, 1}}, Ref(Encode(ConcatParams{1})));
  EXPECT_EQ(Infer(GgmlOp::CPY, {Ne4{6, 1, 1, 1}, Ne4{2, 3, 1, 1}}), (Ne4{2, 3, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::CPY, {Ne4{6, 1, 1, 1}}), (Ne4{6, 1, 1, 1}));
  Refusal(GgmlOp::CPY, {Ne4{6, 1, 1, 1}, Ne4{2, 2, 1, 1}});
  EXPECT_EQ(Infer(GgmlOp::ARGSORT, {Ne4{8, 3, 1, 1}}, Ref(Encode(ArgsortParams{1}))), (Ne4{8, 3, 1, 1}));
  EXPECT_EQ(Infer(GgmlOp::TOP_K, {Ne4{8, 3, 1, 1}}, Ref(Encode(TopKParams{2}))), (Ne4{2, 3, 1, 1}));
  Refusal(GgmlOp::TOP_K, {Ne4{8, 3, 1, 1}}, Ref(Encode(TopKParams{9})));
  // SET_ROWS in the plan's order b (rows), c (indices), a (destination).
  EXPECT_EQ(Infer(GgmlOp::SET_ROWS, {Ne4{16, 3, 1, 1}, Ne4{3, 1, 1, 1}, Ne4{16, 100, 1, 1}}),
            (Ne4{16, 100, 1, 1}));
  Refusal(GgmlOp::SET_ROWS, {Ne4{16, 3, 1, 1}, Ne4{2, 1, 1, 1}, Ne4{16, 100, 1, 1}});
}

TEST(OpShapes, GivenShapes) {
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::RESHAPE), ShapeRuleKind::kGiven);
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::IM2COL), ShapeRuleKind::kNone);
  EXPECT_TRUE(CheckShape(GgmlOp::RESHAPE, {Ne4{6, 4, 1, 1}}, kNoParams, Ne4{2, 3, 4, 1}).ok());
  EXPECT_EQ(CheckShape(GgmlOp::RESHAPE, {Ne4{6, 4, 1, 1}}, kNoParams, Ne4{2, 3, 1, 1}).message(),
            "RESHAPE: result [2, 3, 1, 1] has 6 elements, a [6, 4, 1, 1] 24 (ggml_reshape_4d)");
  EXPECT_FALSE(CheckShape(GgmlOp::CONT, {Ne4{6, 4, 1, 1}}, kNoParams, Ne4{5, 4, 1, 1}).ok());
  EXPECT_TRUE(CheckShape(GgmlOp::VIEW, {Ne4{6, 4, 1, 1}}, kNoParams, Ne4{2, 1, 1, 1}).ok());
  // ggml_repeat_4d (deepseek2's k_pe over the heads): every dimension a multiple of a's.
  EXPECT_EQ(GetShapeRuleKind(GgmlOp::REPEAT), ShapeRuleKind::kGiven);
  EXPECT_TRUE(CheckShape(GgmlOp::REPEAT, {Ne4{8, 1, 5, 1}}, kNoParams, Ne4{8, 16, 5, 1}).ok());
  EXPECT_TRUE(CheckShape(GgmlOp::REPEAT, {Ne4{8, 2, 5, 1}}, kNoParams, Ne4{16, 4, 10, 3}).ok());
  EXPECT_EQ(
      CheckShape(GgmlOp::REPEAT, {Ne4{8, 3, 5, 1}}, kNoParams, Ne4{8, 16, 5, 1}).message(),
      "REPEAT: result [8, 16, 5, 1] is not a repetition of a [8, 3, 5, 1]: ne1 16 is not a multiple of 3 "
      "(ggml_repeat_4d)");
  EXPECT_EQ(InferShape(GgmlOp::VIEW, {Ne4{6, 4, 1, 1}}, kNoParams).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_TRUE(CheckShape(GgmlOp::ADD, {Ne4{4, 3, 1, 1}, Ne4{4, 1, 1, 1}}, kNoParams, Ne4{4, 3, 1, 1}).ok());
  EXPECT_EQ(CheckShape(GgmlOp::ADD, {Ne4{4, 3, 1, 1}, Ne4{4, 1, 1, 1}}, kNoParams, Ne4{4, 2, 1, 1}).message(),
            "ADD: result [4, 2, 1, 1] must be [4, 3, 1, 1] (the shape its sources make)");
}

TEST(OpShapes, StateSpace) {
  // sx [d_conv - 1 + n_t, d_inner, n_s], c [d_conv, d_inner]
  EXPECT_EQ(Infer(GgmlOp::SSM_CONV, {Ne4{3 + 5, 16, 1, 1}, Ne4{4, 16, 1, 1}}), (Ne4{16, 5, 1, 1}));
  Refusal(GgmlOp::SSM_CONV, {Ne4{8, 15, 1, 1}, Ne4{4, 16, 1, 1}});
  Refusal(GgmlOp::SSM_CONV, {Ne4{2, 16, 1, 1}, Ne4{4, 16, 1, 1}});
  // s [d_state, d_inner, n_s], x, dt [d_inner, n_t, n_s], A [d_state, d_inner], B, C [d_state, n_t, n_s]
  const SrcShapes scan{Ne4{4, 16, 1, 1}, Ne4{16, 5, 1, 1}, Ne4{16, 5, 1, 1},
                       Ne4{4, 16, 1, 1}, Ne4{4, 5, 1, 1},  Ne4{4, 5, 1, 1}};
  EXPECT_EQ(Infer(GgmlOp::SSM_SCAN, scan), (Ne4{16 * 5 + 4 * 16, 1, 1, 1}));
  SrcShapes bad = scan;
  bad[3] = Ne4{4, 8, 1, 1};
  Refusal(GgmlOp::SSM_SCAN, bad);
  // With ids: x [head_dim, n_head, n_t, n_s], dt [n_head, n_t, n_s], s [d_state, head_dim, n_head, n_s],
  // A [1, n_head], B, C [d_state, n_group, n_t, n_s], ids [n_s].
  const SrcShapes scan2{Ne4{4, 8, 2, 1}, Ne4{8, 2, 5, 1}, Ne4{2, 5, 1, 1}, Ne4{1, 2, 1, 1},
                        Ne4{4, 1, 5, 1}, Ne4{4, 1, 5, 1}, Ne4{1, 1, 1, 1}};
  EXPECT_EQ(Infer(GgmlOp::SSM_SCAN, scan2), (Ne4{8 * 2 * 5 + 4 * 8 * 2, 1, 1, 1}));
}

}  // namespace
}  // namespace stowage
