// The shape rule of each ggml op: the result shape an op has from its sources' shapes and its
// parameters, with the checks ggml's constructor asserts (ggml/src/ggml.c ggml_<op>). This is the
// only copy of these rules: the planner's graph builder (at its graphs' bindings), the plan
// verifier (at every binding corner it checks) and the GGML dialect's verifiers call it.
//
// Shapes are concrete: ne in ggml order, ne0 innermost. A caller with symbolic shapes (the
// planner's DimExpr, affine in n_tokens, n_kv, kv_head, n_outputs) evaluates them at concrete
// bindings of the symbols and calls the rule at each.
//
// Sources are ggml's `src[]` in order (the plan's order: SET_ROWS's are b, c, a), an absent optional
// source is std::nullopt; parameters are the plan's (ggml_op_params.h). Only shapes are checked
// here: element types, strides (ggml_is_contiguous, ggml_is_transposed) and source counts
// (GgmlOpTraits) are the callers'.
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/status.h"

namespace stowage {

/// A tensor shape in ggml order (ne0 innermost).
using Ne4 = std::array<int64_t, 4>;

/// The sources' shapes of one node, ggml `src[]` order; std::nullopt for an absent optional source.
using SrcShapes = std::vector<std::optional<Ne4>>;

/// How a caller names dimension `d` of source `src` in messages ("n_tokens", "n_kv+3" for symbolic
/// shapes); empty: the rules print the values.
using DimNamer = std::function<std::string(size_t src, int d)>;

/// How an op's result shape follows from its sources.
enum class ShapeRuleKind : uint8_t {
  kNone,      ///< no rule here (ops the builders never emit: SET, IM2COL, POOL_2D, ...)
  kInferred,  ///< InferShape computes it
  kGiven,     ///< an argument of the constructor (ggml_reshape_4d, ggml_view_4d, ggml_cont_4d,
              ///< ggml_repeat_4d):
              ///< CheckShape checks it against the sources
};

/// The kind of `op`'s shape rule.
ShapeRuleKind GetShapeRuleKind(GgmlOp op);

/// The result shape of a node of `op` (kind kInferred), after ggml's asserts on the sources'
/// shapes. Rules (ggml.c):
/// Sources are named as ggml.c names the constructor's arguments (a, b, pos, mask, q, k, v, ...).
///   element-wise unary ops, SCALE, NORM, RMS_NORM, L2_NORM, ARGSORT: like a (ggml_unary_impl, ...)
///   ADD, SUB, MUL, DIV: like a; ggml_can_repeat(b, a): a.ne[i] % b.ne[i] == 0
///   RMS_NORM_MUL  (a, w): MUL(RMS_NORM(a), w)'s rule: like a, ggml_can_repeat(w, a)
///   SWIGLU, GEGLU, REGLU: split (ggml_glu_impl with b): b like a, result like a; one
///                 source: a.ne0 even, result [ne0 / 2, ne1, ne2, ne3]
///   SWIGLU_OAI    ggml_swiglu_oai(a, b): b like a, result like a
///   ADD_ID        ggml_add_id(a, b, ids): a.ne0 == b.ne0, a.ne1 == ids.ne0, a.ne2 == ids.ne1; like a
///   SUM_ROWS, MEAN: [1, ne1, ne2, ne3]
///   ALL_REDUCE    (a): like a (the sum over the ranks, written into a)
///   GET_ROWS      b.ne3 == 1, a.ne2 == b.ne1 -> [a.ne0, b.ne0, b.ne1, b.ne2]
///   MUL_MAT       ggml_can_mul_mat: ne0 equal, b.ne2 % a.ne2 == 0, b.ne3 % a.ne3 == 0
///   MUL_MAT_GLU   (gate, x, up): MUL_MAT(gate, x)'s rule, up of gate's shape
///                 -> [a.ne1, b.ne1, b.ne2, b.ne3]
///   MUL_MAT_ID    as [K, M, n_expert], b [K, n_b, n_t], ids [n_used, n_t]; ids.ne0 % b.ne1 == 0
///                 -> [M, n_used, n_t, 1]
///   ROPE          ggml_rope_ext: pos a vector of a.ne2 positions; freq_factors.ne0 >=
///                 n_dims / 2; CheckRopeDims against a.ne0; like a
///   ROPE_SET_ROWS (x, pos, dst, idx[, freq_factors]): x.ne3 == 1, ROPE(x, pos, freq_factors)'s
///                 rule, then SET_ROWS's with b = [x.ne0 * x.ne1, x.ne2], c = idx, a = dst; like dst
///   ROPE_CPY      (x, pos, dst[, freq_factors]): ROPE(x, pos, freq_factors)'s rule, then CPY's
///                 (as many elements as dst); like dst
///   SOFT_MAX      ggml_soft_max_ext: mask.ne0 == a.ne0, mask.ne1 >= a.ne1, a.ne2 % mask.ne2 == 0,
///                 a.ne3 % mask.ne3 == 0; sinks (src 2, ggml_soft_max_add_sinks) a vector of
///                 a.ne2 (one logit per head); like a
///   FLASH_ATTN_EXT q, k, v, mask: ggml_can_mul_mat(k, q); v has k's n_kv and heads; mask [k.ne1,
///                 >= q.ne1] (2-D); sinks (src 4, ggml_flash_attn_ext_add_sinks) a vector of q.ne2
///                 -> [v.ne0, q.ne2, q.ne1, q.ne3]
///   TOP_K         k <= ne0 -> [k, ne1, ne2, ne3]
///   CONCAT        every dim but `dim` equal -> the sum along `dim`
///   PERMUTE       result.ne[axis[i]] = a.ne[i];  TRANSPOSE: ne0 and ne1 swapped
///   CPY           with a destination: nelements equal, like the destination; without: like a
///   SET_ROWS      (b, c, a): a.ne0 == b.ne0, a.ne2 == b.ne2, a.ne3 == b.ne3, b.ne1 == c.ne0,
///                 b.ne2 % c.ne1 == 0, b.ne3 % c.ne2 == 0, c.ne3 == 1; like a
///   SSM_CONV      sx 3-D [d_conv - 1 + n_t, d_inner, n_s], c a matrix [d_conv, d_inner], n_t >= 0
///                 -> [d_inner, n_t, n_s, 1]
///   SSM_SCAN      ggml Feb 2025 (6 sources): s [d_state, d_inner, n_s], x and dt [d_inner, n_t,
///                 n_s], A [d_state, d_inner], B and C [d_state, n_t, n_s] -> [nelements(x) +
///                 nelements(s)]; with ids (7 sources, ggml Jun 2025): x [head_dim, n_head, n_t,
///                 n_s], dt [n_head, n_t, n_s], s [d_state, head_dim, n_head, ...], A [1 or d_state,
///                 n_head], B and C [d_state, n_group, n_t, n_s], ids [n_s] -> [nelements(x) +
///                 d_state * head_dim * n_head * n_s]
/// Negative dimensions are refused for every op. Messages print source dimensions with `namer`
/// when given (a caller evaluating symbolic shapes names them as it wrote them).
/// Errors: kInvalidArgument, one line naming the op, the rule and ggml's function, e.g.
/// "MUL_MAT: a.ne0 (64) must equal b.ne0 (32) (ggml_can_mul_mat)"; kUnimplemented for an op
/// of another kind ("RESHAPE: the result shape is an argument of ggml_reshape_4d").
Result<Ne4> InferShape(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& params,
                       const DimNamer& namer = DimNamer());

/// Checks that `result` is the shape of a node of `op`: for kInferred ops InferShape's result, for
/// kGiven ops RESHAPE and CONT the same element count as a (src 0) (ggml_reshape_4d, ggml_cont_4d),
/// REPEAT each result dimension a multiple of a's (ggml_repeat_4d's ggml_can_repeat; any result
/// when a has no elements),
/// VIEW any shape (its bounds are checked with its strides and offset by the caller). Ops of kind
/// kNone pass. Errors: InferShape's, or kInvalidArgument "ADD: result [4, 2, 1, 1] must be
/// [4, 3, 1, 1] (the shape of its sources)", "RESHAPE: result [...] has 6 elements, a [...] 8
/// (ggml_reshape_4d)".
Status CheckShape(GgmlOp op, const SrcShapes& srcs, const OpParamsRef& params, const Ne4& result);

/// "[ne0, ne1, ne2, ne3]", as the rules' messages print shapes.
std::string ShapeString(const Ne4& ne);

}  // namespace stowage
