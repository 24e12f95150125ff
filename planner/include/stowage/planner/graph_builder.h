// GraphBuilder: ggml-style tensor constructors over the planner's Graph (see graph.h).
//
// Each method mirrors the ggml function of the same name (ggml.h): same sources in the same order,
// same result type, views alias their source's memory. Result shapes and the checks on the
// sources' shapes are the op's shape rule (ggml_op_shapes.h, evaluated around the graph's
// worst-case bindings); parameters are stored in the plan's layout (ggml_op_params.h). Methods
// return the new tensor's id. Invalid shapes are programming errors of an architecture builder and
// are reported through `status()` (the first error wins, "graph builder: <the rule's message>;
// sources <name> <shape>, ...") instead of asserting.
#pragma once

#include <string>
#include <unordered_map>

#include "stowage/planner/graph.h"
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// ROPE parameters in ggml_rope_ext's order (the plan's layout: ggml_op_params.h).
using RopeConfig = ::stowage::RopeParams;

class GraphBuilder {
 public:
  GraphBuilder(Graph& graph, ModelGraphs& model) : g_(graph), m_(model) {}

  /// Leaf referring to global tensor `global_id` (memoized: one leaf per global per graph).
  int Global(int global_id);
  /// Graph input leaf (llama.cpp ggml_set_input): inp_tokens, inp_pos, KQ_mask, inp_out_ids.
  int Input(const std::string& name, GgmlType type, Shape ne);
  /// The input leaf made by Input(name, ...) in this graph, or -1 when there is none.
  int FindInput(const std::string& name) const {
    for (size_t id = 0; id < g_.tensors.size(); ++id)
      if (g_.tensors[id].kind == TensorKind::kInput && g_.tensors[id].name == name)
        return static_cast<int>(id);
    return -1;
  }

  /// ggml_get_rows: a [ne0, n, ne2], rows I32 [m, ne2, ne3'] -> [ne0, m, ne2, ne3'] (F32, or I32 for an
  /// I32 `a`).
  int GetRows(int a, int rows);
  /// ggml_mul_mat: a [K, M, ...] (the weight), b [K, N, ne2, ne3] -> F32 [M, N, ne2, ne3].
  int MulMat(int a, int b);
  /// ggml_mul_mat_id: as [K, M, n_expert] (one matrix per expert), b [K, n_b, n_tokens],
  /// ids I32 [n_used, n_tokens] -> F32 [M, n_used, n_tokens] (llama.cpp llm_build_moe_ffn).
  int MulMatId(int as, int b, int ids);
  /// Element-wise ops (ggml_add, ggml_mul, ggml_div): b is broadcast over a (ggml_can_repeat); the
  /// result has a's shape and type.
  int Add(int a, int b);
  int Mul(int a, int b);
  int Div(int a, int b);
  /// ggml_sum_rows: [ne0, ne1, ne2, ne3] -> [1, ne1, ne2, ne3].
  int SumRows(int a);
  /// ggml_scale (ScaleParams{s, 0}); shape and type of a.
  int Scale(int a, float s);
  /// ggml_rms_norm / ggml_norm over ne0 (NormParams); shape and type of a.
  int RmsNorm(int a, float eps);
  int Norm(int a, float eps);
  /// Unary ops (ggml_silu, ggml_gelu, ggml_sigmoid, ggml_tanh); shape and type of a.
  int Silu(int a);
  int Gelu(int a);
  int Sigmoid(int a);
  int Tanh(int a);
  /// ggml_swiglu_split / ggml_geglu_split: act(a) * b, shape of a (newer ggml's fused GLU).
  int SwiGluSplit(int a, int b);
  /// ggml_swiglu (one source, swapped = 0): a [2 * n, ne1, ne2, ne3] holds the gate in the first
  /// half of each row and the value in the second; silu(gate) * value, [n, ne1, ne2, ne3], type of a.
  int SwiGlu(int a);
  int GeGluSplit(int a, int b);
  /// ggml_swiglu_oai (gpt-oss's experts): min(a, limit) * sigmoid(alpha * min(a, limit)) *
  /// (clamp(b, -limit, limit) + 1), shape of a (SwiGluOaiParams).
  int SwiGluOai(int a, int b, float alpha, float limit);
  /// ggml_add_id (gpt-oss's expert biases): a [ne0, n_used, n_tokens] + b's row ids[i1, i2] (b
  /// [ne0, n_expert], ids I32 [n_used, n_tokens]); shape and type of a.
  int AddId(int a, int b, int ids);
  /// ggml_rope_ext: a [head_dim, n_head, n_tokens], pos I32 [n_tokens], optional freq factors
  /// (-1: none) [n_dims / 2]; parameters RopeParams.
  int RopeExt(int a, int pos, int freq_factors, const RopeConfig& rc);
  /// ggml_soft_max_ext: softmax over ne0 of a * scale + mask (optional, -1: none, [n_kv, n_tokens]
  /// broadcast over heads) with ALiBi max_bias (SoftMaxParams); `sinks` (-1: none; needs the mask)
  /// F32 [n_head] as src 2 (ggml_soft_max_add_sinks: one more logit per head, without a value).
  int SoftMaxExt(int a, int mask, float scale, float max_bias, int sinks = -1);
  /// ggml_flash_attn_ext + ggml_flash_attn_ext_set_prec (ggml Feb 2025): q F32 [D, n_tokens, n_head],
  /// k [D, n_kv, n_head_kv], v [Dv, n_kv, n_head_kv] (n_head % n_head_kv == 0), mask (-1: none) F16
  /// [n_kv, >= n_tokens] -> F32 [Dv, n_head, n_tokens] (the result is already permuted as
  /// kqv_merged). Parameters FlashAttnExtParams (prec 0 GGML_PREC_DEFAULT, 1 GGML_PREC_F32). `sinks`
  /// (-1: none; needs the mask) F32 [n_head] as src 4 (ggml_flash_attn_ext_add_sinks).
  int FlashAttnExt(int q, int k, int v, int mask, float scale, float max_bias, float logit_softcap, int prec,
                   int sinks = -1);
  /// ggml_soft_max: SoftMaxExt without mask, scale 1, max_bias 0.
  int SoftMax(int a);
  /// ggml_argsort: I32 indices of a's rows sorted; order 0 = GGML_SORT_ORDER_ASC, 1 = DESC.
  int Argsort(int a, int order);
  /// ggml_top_k as of ggml Feb 2025: Argsort(a, DESC) and a view of its first k columns
  /// ([k, ne1, ne2, ne3]); returns the view (its src is the ARGSORT node).
  int TopK(int a, int k);
  /// ggml_fill(a, c): a new tensor of a's shape and type (F32 or F16, contiguous) with every element
  /// c (FillParams); a gives only the shape.
  int Fill(int a, float c);
  /// ggml_clamp(a, min, max): a new tensor of a's shape and type, each element of a bounded to [min,
  /// max] (ClampParams; not in place, as ggml_clamp).
  int Clamp(int a, float min, float max);
  /// ggml_set_rows(a, b, c): the rows of b [ne0, n, ne2, ne3] (F32) stored into a [ne0, m, ne2, ne3]
  /// at the row indices c I32 / I64 [n, ne2', ne3'] (broadcast over b's ne2 / ne3); the result is a
  /// view of a (its memory), "<a> (view)", sources in ggml's order b, c, a.
  int SetRows(int a, int b, int c);
  /// ggml_concat: a and b joined along `dim` (other dims equal); type of a.
  int Concat(int a, int b, int dim);
  /// ggml_repeat_4d: a tiled to shape ne (each dimension a multiple of a's: ggml_can_repeat), type
  /// of a, unnamed as ggml leaves it (deepseek2's k_pe head over every head).
  int Repeat(int a, Shape ne);
  /// ggml_ssm_conv(sx, c): sx [d_conv - 1 + n_t, d_inner, n_s], c [d_conv, d_inner]
  /// -> F32 [d_inner, n_t, n_s] (mamba's depthwise causal conv1d).
  int SsmConv(int sx, int c);
  /// ggml_ssm_scan(s, x, dt, A, B, C): s [d_state, d_inner, n_s], x and dt [d_inner, n_t, n_s],
  /// A [d_state, d_inner], B and C [d_state, n_t, n_s] -> 1-D F32 of nelements(x) + nelements(s)
  /// (y followed by the last states).
  int SsmScan(int s, int x, int dt, int A, int B, int C);
  /// ggml_reshape_*: a view of a's memory with shape ne (same element count), "<a> (reshaped)".
  int Reshape(int a, Shape ne);
  /// ggml_view_4d: nb = nb1..nb3 in bytes (a zero stride means "contiguous continuation", as the
  /// runtime reads it), offset in bytes into a's memory.
  int View(int a, Shape ne, std::array<DimExpr, 3> nb, DimExpr offset);
  /// ggml_view_1d / _2d / _3d: the strides ggml derives (nb2 = nb1 * ne1, ...) stay implicit (0).
  int View1d(int a, DimExpr ne0, DimExpr offset);
  int View2d(int a, DimExpr ne0, DimExpr ne1, DimExpr nb1, DimExpr offset);
  int View3d(int a, DimExpr ne0, DimExpr ne1, DimExpr ne2, DimExpr nb1, DimExpr nb2, DimExpr offset);
  /// Byte strides nb0..nb3 of a contiguous (non-view) tensor `t` (ggml tensor->nb); reports an
  /// error through status() for views, whose strides are not tracked here.
  std::array<DimExpr, 4> Nb(int t);
  /// ggml_permute: dimension i of a becomes dimension ax_i of the result (a view, "(permuted)").
  int Permute(int a, int ax0, int ax1, int ax2, int ax3);
  /// ggml_transpose: swaps ne0 and ne1 (a view, "(transposed)").
  int Transpose(int a);
  /// ggml_cpy(a, b): result is a view of b named "<b> (copy of <a>)".
  int Cpy(int a, int b);
  /// ggml_cast(a, type): a CPY of a into a new contiguous tensor of `type` and a's shape,
  /// "<a> (copy)". ggml sets src[1] to the result itself; here the node has the single source a,
  /// which is how a CPY that is not a view of its destination is told apart.
  int Cast(int a, GgmlType type);
  /// ggml_cont / ggml_cont_Nd: a contiguous copy of a with shape ne, "<a> (cont)".
  int Cont(int a, Shape ne);

  /// llama.cpp's graph callback: names `t` "name-il" (or "name" for il < 0) and records the layer.
  void Name(int t, const std::string& name, int il);
  /// ggml_build_forward_expand: appends `t` and its not yet visited ancestors in ggml order.
  void Expand(int t);

  /// The tensor `id` of the graph being built.
  Tensor& operator[](int id) { return g_.tensors[id]; }
  /// Ok, or the first inconsistency found (kInternal, "graph builder: ...").
  const Status& status() const { return status_; }

  /// Byte strides of a contiguous tensor of `type` and shape ne (nb[0] = type size).
  static std::array<DimExpr, 4> ContiguousStrides(GgmlType type, const Shape& ne);

 private:
  int NewTensor(GgmlOp op, GgmlType type, Shape ne, std::vector<int> srcs);
  /// A node of `op` whose shape is its rule's (RuleShape) with parameters `p`.
  int NewNode(GgmlOp op, GgmlType type, std::vector<int> srcs, EncodedOpParams p = {});
  /// The result shape of `op` over `srcs` by its rule (InferShape, ggml_op_shapes.h), evaluated at
  /// bindings around the graph's worst case and read back as DimExprs; reports the rule's error
  /// (the result is then src 0's shape).
  Shape RuleShape(GgmlOp op, const std::vector<int>& srcs, const EncodedOpParams& p = {});
  /// Checks a shape given to RESHAPE or CONT against src `a` (CheckShape) at those bindings.
  void CheckGivenShape(GgmlOp op, int a, const Shape& ne);
  /// "name [ne0, ...], ..." of `srcs`, for messages.
  std::string Describe(const std::vector<int>& srcs) const;
  void Fail(const std::string& msg);
  void Visit(int t, std::vector<char>& visited);

  Graph& g_;
  ModelGraphs& m_;
  Status status_;
  std::unordered_map<int, int> global_leaf_;
  std::vector<char> visited_;
};

}  // namespace stowage::planner
