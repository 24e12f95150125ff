#include "stowage/runtime/ggml_op_shapes.h"

#include <string>

namespace stowage {

std::string ShapeString(const Ne4& ne) {
  return "[" + std::to_string(ne[0]) + ", " + std::to_string(ne[1]) + ", " + std::to_string(ne[2]) + ", " +
         std::to_string(ne[3]) + "]";
}

namespace {

// The element count of `ne`, or -1 past 2^62 (no real tensor is that large).
int64_t Elements(const Ne4& ne) {
  int64_t n = 1;
  for (int64_t d : ne)
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t(1) << 62)) return -1;
  return n;
}

// One rule evaluation: the op's name for messages and its sources.
class Rule {
 public:
  Rule(GgmlOp op, const SrcShapes& srcs, const DimNamer* namer) : op_(op), srcs_(srcs), namer_(namer) {}

  bool Has(size_t i) const { return i < srcs_.size() && srcs_[i].has_value(); }
  const Ne4& Src(size_t i) const { return *srcs_[i]; }
  int64_t Ne(size_t i, int d) const { return (*srcs_[i])[d]; }

  Status Fail(const std::string& msg) const {
    return InvalidArgument(std::string(GgmlOpName(op_)) + ": " + msg);
  }
  // Dimension d of source i as the caller names it (its value by default).
  std::string D(size_t i, int d) const {
    return namer_ && *namer_ ? (*namer_)(i, d) : std::to_string(Ne(i, d));
  }
  // "<what> (<src i dim d>) must equal <name> (<src j dim e>) (<fn>)"
  Status Equal(const std::string& what, size_t i, int d, const std::string& name, size_t j, int e,
               const char* fn) const {
    if (Ne(i, d) == Ne(j, e)) return Status::Ok();
    return Fail(what + " (" + D(i, d) + ") must equal " + name + " (" + D(j, e) + ") (" + fn + ")");
  }
  // ggml's broadcast rule for one dimension: x is a whole number of copies of y.
  static bool Repeats(int64_t y, int64_t x) { return y > 0 ? x % y == 0 : x == 0; }
  std::string Shape(size_t i) const {
    return "[" + D(i, 0) + ", " + D(i, 1) + ", " + D(i, 2) + ", " + D(i, 3) + "]";
  }

 private:
  GgmlOp op_;
  const SrcShapes& srcs_;
  const DimNamer* namer_;
};

#define RETURN_IF_ERR(expr)                         \
  do {                                              \
    if (Status st_ = (expr); !st_.ok()) return st_; \
  } while (0)

// ggml_can_repeat(b, a) (ggml.c): every a.ne[i] is a multiple of b.ne[i].
Result<Ne4> Broadcast(const Rule& r, const char* fn) {
  for (int d = 0; d < 4; ++d)
    if (!Rule::Repeats(r.Ne(1, d), r.Ne(0, d)))
      return r.Fail("b " + r.Shape(1) + " cannot be repeated to a " + r.Shape(0) + " (" + fn +
                    ": ggml_can_repeat(b, a))");
  return r.Src(0);
}

Result<Ne4> Glu(const Rule& r) {
  if (r.Has(1)) {  // ggml_glu_split
    if (r.Src(1) != r.Src(0))
      return r.Fail("a " + r.Shape(0) + " and b " + r.Shape(1) +
                    " must have the same shape (ggml_glu_split)");
    return r.Src(0);
  }
  if (r.Ne(0, 0) % 2 != 0)
    return r.Fail("a.ne0 (" + r.D(0, 0) + ") must be even: it holds both halves (ggml_glu)");
  return Ne4{r.Ne(0, 0) / 2, r.Ne(0, 1), r.Ne(0, 2), r.Ne(0, 3)};
}

// ggml_add_id(a, b, ids): row i1 of token i2 gets bias row ids[i1, i2] of b.
Result<Ne4> AddId(const Rule& r) {
  RETURN_IF_ERR(r.Equal("a.ne0", 0, 0, "b.ne0", 1, 0, "ggml_add_id"));
  RETURN_IF_ERR(r.Equal("a.ne1", 0, 1, "ids.ne0", 2, 0, "ggml_add_id"));
  RETURN_IF_ERR(r.Equal("a.ne2", 0, 2, "ids.ne1", 2, 1, "ggml_add_id"));
  return r.Src(0);
}

// The sink logits of ggml_soft_max_add_sinks / ggml_flash_attn_ext_add_sinks: one per head of
// source `heads` (a.ne2 of the soft_max, q.ne2 of the flash attention).
Status Sinks(const Rule& r, size_t sinks, size_t heads, const char* fn) {
  if (!r.Has(sinks)) return Status::Ok();
  if (r.Ne(sinks, 1) != 1 || r.Ne(sinks, 2) != 1 || r.Ne(sinks, 3) != 1)
    return r.Fail("sinks must be a vector [n_head], got " + r.Shape(sinks) + " (" + fn + ")");
  return r.Equal("sinks.ne0", sinks, 0, "the head count", heads, 2, fn);
}

// ggml_get_rows(a, b).
Result<Ne4> GetRows(const Rule& r) {
  if (r.Ne(1, 3) != 1) return r.Fail("b must have ne3 == 1 (ggml_get_rows), got " + r.Shape(1));
  RETURN_IF_ERR(r.Equal("a.ne2", 0, 2, "b.ne1", 1, 1, "ggml_get_rows"));
  return Ne4{r.Ne(0, 0), r.Ne(1, 0), r.Ne(1, 1), r.Ne(1, 2)};
}

// ggml_mul_mat(a, b): ggml_can_mul_mat.
Result<Ne4> MulMat(const Rule& r) {
  RETURN_IF_ERR(r.Equal("a.ne0", 0, 0, "b.ne0", 1, 0, "ggml_can_mul_mat"));
  if (!Rule::Repeats(r.Ne(0, 2), r.Ne(1, 2)) || !Rule::Repeats(r.Ne(0, 3), r.Ne(1, 3)))
    return r.Fail("a " + r.Shape(0) + " cannot be broadcast over the batch dimensions of b " + r.Shape(1) +
                  " (ggml_can_mul_mat)");
  return Ne4{r.Ne(0, 1), r.Ne(1, 1), r.Ne(1, 2), r.Ne(1, 3)};
}

// MUL_MAT_GLU(gate, x, up): MUL_MAT(gate, x)'s rule, up of gate's shape.
Result<Ne4> MulMatGlu(const Rule& r) {
  for (int d = 0; d < 4; ++d)
    RETURN_IF_ERR(
        r.Equal("up.ne" + std::to_string(d), 2, d, "gate.ne" + std::to_string(d), 0, d, "ggml_mul_mat"));
  return MulMat(r);
}

// ggml_mul_mat_id(as, b, ids).
Result<Ne4> MulMatId(const Rule& r) {
  if (r.Ne(0, 3) != 1)
    return r.Fail("as must be 3-D (one matrix per expert), got " + r.Shape(0) + " (ggml_mul_mat_id)");
  if (r.Ne(1, 3) != 1) return r.Fail("b must be 3-D, got " + r.Shape(1) + " (ggml_mul_mat_id)");
  if (r.Ne(2, 2) != 1 || r.Ne(2, 3) != 1)
    return r.Fail("ids must be 2-D [n_expert_used, n_tokens], got " + r.Shape(2) + " (ggml_mul_mat_id)");
  RETURN_IF_ERR(r.Equal("ids.ne1", 2, 1, "b.ne2", 1, 2, "ggml_mul_mat_id: one expert list per token"));
  RETURN_IF_ERR(r.Equal("as.ne0", 0, 0, "b.ne0", 1, 0, "ggml_mul_mat_id"));
  if (!Rule::Repeats(r.Ne(1, 1), r.Ne(2, 0)))
    return r.Fail("ids.ne0 (" + r.D(2, 0) + ") must be a multiple of b.ne1 (" + r.D(1, 1) +
                  ") (ggml_mul_mat_id)");
  return Ne4{r.Ne(0, 1), r.Ne(2, 0), r.Ne(1, 2), 1};
}

// ggml_rope_ext(a, pos, freq_factors).
Result<Ne4> Rope(const Rule& r, const OpParamsRef& params) {
  if (r.Ne(1, 1) != 1 || r.Ne(1, 2) != 1 || r.Ne(1, 3) != 1)
    return r.Fail("pos must be a vector [n_tokens], got " + r.Shape(1) + " (ggml_rope_ext)");
  RETURN_IF_ERR(r.Equal("a.ne2", 0, 2, "pos.ne0", 1, 0, "ggml_rope_ext: one position per token"));
  Result<RopeParams> p = DecodeRope(params);
  if (!p.ok()) return p.status();
  RETURN_IF_ERR(CheckRopeDims(*p, r.Ne(0, 0)));
  if (r.Has(2) && r.Ne(2, 0) < p->n_dims / 2)
    return r.Fail("freq_factors.ne0 (" + r.D(2, 0) + ") must be >= n_dims / 2 (" +
                  std::to_string(p->n_dims / 2) + ") (ggml_rope_ext)");
  return r.Src(0);
}

// ggml_soft_max_ext(a, mask).
Result<Ne4> SoftMax(const Rule& r) {
  if (r.Has(1)) {
    RETURN_IF_ERR(r.Equal("mask.ne0", 1, 0, "a.ne0", 0, 0, "ggml_soft_max_ext"));
    if (r.Ne(1, 1) < r.Ne(0, 1))
      return r.Fail("mask.ne1 (" + r.D(1, 1) + ") must be >= a.ne1 (" + r.D(0, 1) + ") (ggml_soft_max_ext)");
    if (!Rule::Repeats(r.Ne(1, 2), r.Ne(0, 2)) || !Rule::Repeats(r.Ne(1, 3), r.Ne(0, 3)))
      return r.Fail("mask " + r.Shape(1) + " cannot be broadcast over a " + r.Shape(0) +
                    " (ggml_soft_max_ext)");
  }
  RETURN_IF_ERR(Sinks(r, 2, 0, "ggml_soft_max_add_sinks"));
  return r.Src(0);
}

// ggml_flash_attn_ext(q, k, v, mask).
Result<Ne4> FlashAttnExt(const Rule& r) {
  RETURN_IF_ERR(r.Equal("k.ne0", 1, 0, "q.ne0", 0, 0, "ggml_flash_attn_ext: ggml_can_mul_mat(k, q)"));
  if (r.Ne(2, 1) != r.Ne(1, 1) || r.Ne(2, 2) != r.Ne(1, 2) || r.Ne(2, 3) != r.Ne(1, 3))
    return r.Fail("v " + r.Shape(2) + " must have k's n_kv and heads " + r.Shape(1) +
                  " (ggml_flash_attn_ext)");
  if (!Rule::Repeats(r.Ne(1, 2), r.Ne(0, 2)) || !Rule::Repeats(r.Ne(1, 3), r.Ne(0, 3)))
    return r.Fail("k " + r.Shape(1) + " cannot be broadcast over the heads of q " + r.Shape(0) +
                  " (ggml_flash_attn_ext: ggml_can_mul_mat(k, q))");
  if (r.Has(3)) {
    RETURN_IF_ERR(r.Equal("mask.ne0", 3, 0, "k.ne1", 1, 1, "ggml_flash_attn_ext"));
    if (r.Ne(3, 1) < r.Ne(0, 1))
      return r.Fail("mask.ne1 (" + r.D(3, 1) + ") must be >= q.ne1 (" + r.D(0, 1) +
                    ") (ggml_flash_attn_ext)");
    if (r.Ne(3, 2) != 1 || r.Ne(3, 3) != 1)
      return r.Fail("mask must be 2-D, got " + r.Shape(3) + " (ggml_flash_attn_ext)");
  }
  RETURN_IF_ERR(Sinks(r, 4, 0, "ggml_flash_attn_ext_add_sinks"));
  return Ne4{r.Ne(2, 0), r.Ne(0, 2), r.Ne(0, 1), r.Ne(0, 3)};
}

// ggml_concat(a, b, dim).
Result<Ne4> Concat(const Rule& r, const OpParamsRef& params) {
  Result<ConcatParams> p = DecodeConcat(params);
  if (!p.ok()) return p.status();
  Ne4 ne = r.Src(0);
  for (int d = 0; d < 4; ++d) {
    if (d == p->dim)
      ne[d] += r.Ne(1, d);
    else if (r.Ne(0, d) != r.Ne(1, d))
      return r.Fail("a " + r.Shape(0) + " and b " + r.Shape(1) + " must agree in every dimension but " +
                    std::to_string(p->dim) + " (ggml_concat)");
  }
  return ne;
}

// ggml_set_rows(a, b, c), sources in the plan's order b, c, a.
Result<Ne4> SetRows(const Rule& r) {
  const char* fn = "ggml_set_rows";
  if (!r.Has(2)) return r.Fail("source 2 (the destination a) is missing (ggml_set_rows)");
  RETURN_IF_ERR(r.Equal("a.ne0", 2, 0, "b.ne0", 0, 0, fn));
  RETURN_IF_ERR(r.Equal("a.ne2", 2, 2, "b.ne2", 0, 2, fn));
  RETURN_IF_ERR(r.Equal("a.ne3", 2, 3, "b.ne3", 0, 3, fn));
  RETURN_IF_ERR(r.Equal("b.ne1", 0, 1, "c.ne0 (one index per row)", 1, 0, fn));
  if (!Rule::Repeats(r.Ne(1, 1), r.Ne(0, 2)) || !Rule::Repeats(r.Ne(1, 2), r.Ne(0, 3)))
    return r.Fail("c " + r.Shape(1) + " cannot be broadcast over b " + r.Shape(0) + " (ggml_set_rows)");
  if (r.Ne(1, 3) != 1) return r.Fail("c must have ne3 == 1, got " + r.Shape(1) + " (ggml_set_rows)");
  return r.Src(2);
}

// ROPE_SET_ROWS(x, pos, dst, idx[, freq_factors]): ggml_set_rows(dst, ggml_reshape_2d(
// ggml_rope_ext(x, pos, freq_factors), x.ne0 * x.ne1, x.ne2), idx), each step's rule.
Result<Ne4> RopeSetRows(const Rule& r, const SrcShapes& srcs, const OpParamsRef& params) {
  if (r.Ne(0, 3) != 1) return r.Fail("x must be 3-D [head_dim, n_head, n_tokens], got " + r.Shape(0));
  const SrcShapes rope = {srcs[0], srcs[1], r.Has(4) ? srcs[4] : std::nullopt};
  const Result<Ne4> rotated = Rope(Rule(GgmlOp::ROPE_SET_ROWS, rope, nullptr), params);
  if (!rotated.ok()) return rotated.status();
  const SrcShapes store = {Ne4{r.Ne(0, 0) * r.Ne(0, 1), r.Ne(0, 2), 1, 1}, srcs[3], srcs[2]};
  return SetRows(Rule(GgmlOp::ROPE_SET_ROWS, store, nullptr));
}

// ROPE_CPY(x, pos, dst[, freq_factors]): ggml_cpy(ggml_rope_ext(x, pos, freq_factors), dst).
Result<Ne4> RopeCpy(const Rule& r, const SrcShapes& srcs, const OpParamsRef& params) {
  const SrcShapes rope = {srcs[0], srcs[1], r.Has(3) ? srcs[3] : std::nullopt};
  const Result<Ne4> rotated = Rope(Rule(GgmlOp::ROPE_CPY, rope, nullptr), params);
  if (!rotated.ok()) return rotated.status();
  if (Elements(r.Src(0)) != Elements(r.Src(2)))
    return r.Fail("x " + r.Shape(0) + " and dst " + r.Shape(2) +
                  " must have the same number of elements (ggml_cpy)");
  return r.Src(2);
}

// ggml_ssm_conv(sx, c).
Result<Ne4> SsmConv(const Rule& r) {
  if (r.Ne(0, 3) != 1) return r.Fail("sx must be 3-D, got " + r.Shape(0) + " (ggml_ssm_conv)");
  if (r.Ne(1, 2) != 1 || r.Ne(1, 3) != 1)
    return r.Fail("c must be a matrix [d_conv, d_inner], got " + r.Shape(1) + " (ggml_ssm_conv)");
  const int64_t d_conv = r.Ne(1, 0);
  RETURN_IF_ERR(r.Equal("sx.ne1", 0, 1, "d_inner = c.ne1", 1, 1, "ggml_ssm_conv"));
  const int64_t n_t = r.Ne(0, 0) - d_conv + 1;
  if (d_conv < 1) return r.Fail("d_conv = c.ne0 (" + r.D(1, 0) + ") must be >= 1 (ggml_ssm_conv)");
  if (n_t < 0)
    return r.Fail("sx.ne0 (" + r.D(0, 0) + ") must be >= d_conv - 1, d_conv = c.ne0 (" + r.D(1, 0) +
                  ") (ggml_ssm_conv)");
  return Ne4{r.Ne(1, 1), n_t, r.Ne(0, 2), 1};
}

// ggml_ssm_scan(s, x, dt, A, B, C[, ids]).
Result<Ne4> SsmScan(const Rule& r) {
  const char* fn = "ggml_ssm_scan";
  const Ne4 &s = r.Src(0), &x = r.Src(1), &dt = r.Src(2), &A = r.Src(3), &B = r.Src(4), &C = r.Src(5);
  if (B != C)
    return r.Fail("B " + r.Shape(4) + " and C " + r.Shape(5) + " must have the same shape (ggml_ssm_scan)");
  int64_t states = 0;
  if (!r.Has(6)) {  // ggml Feb 2025
    if (x != dt)
      return r.Fail("x " + r.Shape(1) + " and dt " + r.Shape(2) +
                    " must have the same shape (ggml_ssm_scan)");
    if (s[3] != 1 || x[3] != 1 || B[3] != 1)
      return r.Fail("s, x and B must be 3-D without ids (ggml_ssm_scan)");
    if (A[2] != 1 || A[3] != 1)
      return r.Fail("A must be a matrix [d_state, d_inner], got " + r.Shape(3) + " (ggml_ssm_scan)");
    RETURN_IF_ERR(r.Equal("s.ne2", 0, 2, "n_seqs = x.ne2", 1, 2, fn));
    RETURN_IF_ERR(r.Equal("x.ne0", 1, 0, "d_inner = s.ne1", 0, 1, fn));
    RETURN_IF_ERR(r.Equal("A.ne0", 3, 0, "d_state = s.ne0", 0, 0, fn));
    RETURN_IF_ERR(r.Equal("A.ne1", 3, 1, "d_inner = s.ne1", 0, 1, fn));
    RETURN_IF_ERR(r.Equal("B.ne0", 4, 0, "d_state = s.ne0", 0, 0, fn));
    RETURN_IF_ERR(r.Equal("B.ne1", 4, 1, "n_seq_tokens = x.ne1", 1, 1, fn));
    RETURN_IF_ERR(r.Equal("B.ne2", 4, 2, "n_seqs = x.ne2", 1, 2, fn));
    states = Elements(s);
  } else {  // ggml Jun 2025: x [head_dim, n_head, n_seq_tokens, n_seqs]
    const Ne4& ids = r.Src(6);
    RETURN_IF_ERR(r.Equal("dt.ne0", 2, 0, "n_head = x.ne1", 1, 1, fn));
    RETURN_IF_ERR(r.Equal("dt.ne1", 2, 1, "n_seq_tokens = x.ne2", 1, 2, fn));
    RETURN_IF_ERR(r.Equal("dt.ne2", 2, 2, "n_seqs = x.ne3", 1, 3, fn));
    if (dt[3] != 1) return r.Fail("dt must be 3-D, got " + r.Shape(2) + " (ggml_ssm_scan)");
    RETURN_IF_ERR(r.Equal("s.ne1", 0, 1, "head_dim = x.ne0", 1, 0, fn));
    RETURN_IF_ERR(r.Equal("s.ne2", 0, 2, "n_head = x.ne1", 1, 1, fn));
    RETURN_IF_ERR(r.Equal("B.ne0", 4, 0, "d_state = s.ne0", 0, 0, fn));
    RETURN_IF_ERR(r.Equal("B.ne2", 4, 2, "n_seq_tokens = x.ne2", 1, 2, fn));
    RETURN_IF_ERR(r.Equal("B.ne3", 4, 3, "n_seqs = x.ne3", 1, 3, fn));
    if (ids[1] != 1 || ids[2] != 1 || ids[3] != 1)
      return r.Fail("ids must be a vector [n_seqs], got " + r.Shape(6) + " (ggml_ssm_scan)");
    RETURN_IF_ERR(r.Equal("ids.ne0", 6, 0, "n_seqs = x.ne3", 1, 3, fn));
    if (A[2] != 1 || A[3] != 1)
      return r.Fail("A must be a matrix [d_state or 1, n_head], got " + r.Shape(3) + " (ggml_ssm_scan)");
    RETURN_IF_ERR(r.Equal("A.ne1", 3, 1, "n_head = x.ne1", 1, 1, fn));
    if (A[0] != 1) RETURN_IF_ERR(r.Equal("A.ne0", 3, 0, "1 or d_state = s.ne0", 0, 0, fn));
    states = Elements({s[0], x[0], x[1], ids[0]});
  }
  const int64_t y = Elements(x);
  if (y < 0 || states < 0) return r.Fail("the result size overflows (ggml_ssm_scan)");
  return Ne4{y + states, 1, 1, 1};
}

}  // namespace

ShapeRuleKind GetShapeRuleKind(GgmlOp op) {
  switch (op) {
    case GgmlOp::RESHAPE:
    case GgmlOp::VIEW:
    case GgmlOp::CONT:
    case GgmlOp::REPEAT:
      return ShapeRuleKind::kGiven;
    case GgmlOp::DUP:
    case GgmlOp::ADD:
    case GgmlOp::SUB:
    case GgmlOp::MUL:
    case GgmlOp::DIV:
    case GgmlOp::SQR:
    case GgmlOp::SQRT:
    case GgmlOp::SUM_ROWS:
    case GgmlOp::MEAN:
    case GgmlOp::CONCAT:
    case GgmlOp::NORM:
    case GgmlOp::RMS_NORM:
    case GgmlOp::L2_NORM:
    case GgmlOp::MUL_MAT:
    case GgmlOp::MUL_MAT_ID:
    case GgmlOp::SCALE:
    case GgmlOp::CPY:
    case GgmlOp::PERMUTE:
    case GgmlOp::TRANSPOSE:
    case GgmlOp::GET_ROWS:
    case GgmlOp::SET_ROWS:
    case GgmlOp::SOFT_MAX:
    case GgmlOp::ROPE:
    case GgmlOp::ARGSORT:
    case GgmlOp::TOP_K:
    case GgmlOp::FLASH_ATTN_EXT:
    case GgmlOp::SSM_CONV:
    case GgmlOp::SSM_SCAN:
    case GgmlOp::ABS:
    case GgmlOp::NEG:
    case GgmlOp::TANH:
    case GgmlOp::ELU:
    case GgmlOp::RELU:
    case GgmlOp::SIGMOID:
    case GgmlOp::GELU:
    case GgmlOp::GELU_QUICK:
    case GgmlOp::SILU:
    case GgmlOp::HARDSWISH:
    case GgmlOp::EXP:
    case GgmlOp::SOFTPLUS:
    case GgmlOp::REGLU:
    case GgmlOp::GEGLU:
    case GgmlOp::SWIGLU:
    case GgmlOp::SWIGLU_OAI:
    case GgmlOp::ADD_ID:
    case GgmlOp::FILL:
    case GgmlOp::CLAMP:
    case GgmlOp::RMS_NORM_MUL:
    case GgmlOp::MUL_MAT_GLU:
    case GgmlOp::ALL_REDUCE:
    case GgmlOp::ROPE_SET_ROWS:
    case GgmlOp::ROPE_CPY:
      return ShapeRuleKind::kInferred;
    default:
      return ShapeRuleKind::kNone;
  }
}

Result<Ne4> InferShape(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& params, const DimNamer& namer) {
  const Rule r(op, srcs, &namer);
  const GgmlOpTraits& traits = GetOpTraits(op);
  if (GetShapeRuleKind(op) != ShapeRuleKind::kInferred)
    return Unimplemented(
        std::string(GgmlOpName(op)) + ": no inferred shape rule (the result shape is " +
        (GetShapeRuleKind(op) == ShapeRuleKind::kGiven ? "an argument of its constructor)" : "not modeled)"));
  for (int i = 0; i < traits.min_srcs; ++i)
    if (!r.Has(i)) return r.Fail("source " + std::to_string(i) + " is missing");
  for (size_t i = 0; i < srcs.size(); ++i)
    if (r.Has(i))
      for (int d = 0; d < 4; ++d)
        if (r.Ne(i, d) < 0)
          return r.Fail("source " + std::to_string(i) + " has a negative dimension " + r.Shape(i));
  switch (op) {
    case GgmlOp::ADD:
    case GgmlOp::SUB:
    case GgmlOp::MUL:
    case GgmlOp::DIV:
      return Broadcast(r, op == GgmlOp::ADD   ? "ggml_add"
                          : op == GgmlOp::SUB ? "ggml_sub"
                          : op == GgmlOp::MUL ? "ggml_mul"
                                              : "ggml_div");
    case GgmlOp::RMS_NORM_MUL:  // ggml_mul(ggml_rms_norm(a), w)
      return Broadcast(r, "ggml_mul");
    case GgmlOp::REGLU:
    case GgmlOp::GEGLU:
    case GgmlOp::SWIGLU:
    case GgmlOp::SWIGLU_OAI:
      return Glu(r);
    case GgmlOp::ADD_ID:
      return AddId(r);
    case GgmlOp::SUM_ROWS:
    case GgmlOp::MEAN:
      return Ne4{1, r.Ne(0, 1), r.Ne(0, 2), r.Ne(0, 3)};
    case GgmlOp::GET_ROWS:
      return GetRows(r);
    case GgmlOp::MUL_MAT:
      return MulMat(r);
    case GgmlOp::MUL_MAT_GLU:
      return MulMatGlu(r);
    case GgmlOp::MUL_MAT_ID:
      return MulMatId(r);
    case GgmlOp::ROPE:
      return Rope(r, params);
    case GgmlOp::ROPE_SET_ROWS:
      return RopeSetRows(r, srcs, params);
    case GgmlOp::ROPE_CPY:
      return RopeCpy(r, srcs, params);
    case GgmlOp::SOFT_MAX:
      return SoftMax(r);
    case GgmlOp::FLASH_ATTN_EXT:
      return FlashAttnExt(r);
    case GgmlOp::TOP_K: {  // ggml_top_k
      Result<TopKParams> p = DecodeTopK(params);
      if (!p.ok()) return p.status();
      if (r.Ne(0, 0) < p->k)
        return r.Fail("k (" + std::to_string(p->k) + ") must not exceed a.ne0 (" + r.D(0, 0) +
                      ") (ggml_top_k)");
      return Ne4{p->k, r.Ne(0, 1), r.Ne(0, 2), r.Ne(0, 3)};
    }
    case GgmlOp::CONCAT:
      return Concat(r, params);
    case GgmlOp::PERMUTE: {  // ggml_permute
      Result<PermuteParams> p = DecodePermute(params);
      if (!p.ok()) return p.status();
      Ne4 ne{};
      for (int i = 0; i < 4; ++i) ne[p->axis[i]] = r.Ne(0, i);
      return ne;
    }
    case GgmlOp::TRANSPOSE:  // ggml_transpose
      return Ne4{r.Ne(0, 1), r.Ne(0, 0), r.Ne(0, 2), r.Ne(0, 3)};
    case GgmlOp::CPY:  // ggml_cpy(a, b); without b ggml_cast(a, type)
      if (!r.Has(1)) return r.Src(0);
      if (Elements(r.Src(0)) != Elements(r.Src(1)))
        return r.Fail("a " + r.Shape(0) + " and b " + r.Shape(1) +
                      " must have the same number of elements (ggml_cpy)");
      return r.Src(1);
    case GgmlOp::SET_ROWS:
      return SetRows(r);
    case GgmlOp::SSM_CONV:
      return SsmConv(r);
    case GgmlOp::SSM_SCAN:
      return SsmScan(r);
    default:  // element-wise: ggml_unary_impl, ggml_scale_impl, ggml_norm_impl, ggml_argsort, ggml_dup,
              // ggml_fill, ggml_clamp, ALL_REDUCE
      return r.Src(0);
  }
}

Status CheckShape(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& params, const Ne4& result) {
  const std::string name = GgmlOpName(op);
  switch (GetShapeRuleKind(op)) {
    case ShapeRuleKind::kNone:
      return Status::Ok();
    case ShapeRuleKind::kGiven: {
      for (int64_t d : result)
        if (d < 0)
          return InvalidArgument(name + ": result " + ShapeString(result) + " has a negative dimension");
      if (op == GgmlOp::VIEW || srcs.empty() || !srcs[0]) return Status::Ok();
      if (op == GgmlOp::REPEAT) {  // ggml_repeat_4d: ggml_can_repeat(a, result)
        const Ne4& a = *srcs[0];
        bool empty_a = false;
        for (int64_t d : a) empty_a = empty_a || d == 0;
        for (int d = 0; d < 4 && !empty_a; ++d)
          if (result[d] % a[d] != 0)
            return InvalidArgument(name + ": result " + ShapeString(result) + " is not a repetition of a " +
                                   ShapeString(a) + ": ne" + std::to_string(d) + " " +
                                   std::to_string(result[d]) + " is not a multiple of " +
                                   std::to_string(a[d]) + " (ggml_repeat_4d)");
        return Status::Ok();
      }
      const int64_t n = Elements(result), m = Elements(*srcs[0]);
      if (n != m)
        return InvalidArgument(name + ": result " + ShapeString(result) + " has " + std::to_string(n) +
                               " elements, a " + ShapeString(*srcs[0]) + " " + std::to_string(m) + " (" +
                               (op == GgmlOp::RESHAPE ? "ggml_reshape_4d" : "ggml_cont_4d") + ")");
      return Status::Ok();
    }
    case ShapeRuleKind::kInferred:
      break;
  }
  Result<Ne4> want = InferShape(op, srcs, params);
  if (!want.ok()) return want.status();
  if (*want != result)
    return InvalidArgument(name + ": result " + ShapeString(result) + " must be " + ShapeString(*want) +
                           " (the shape its sources make)");
  return Status::Ok();
}

}  // namespace stowage
