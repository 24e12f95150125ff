// GraphBuilder: ggml-style tensor constructors over the planner's Graph (see graph.h).
//
// Each method mirrors the ggml function of the same name (ggml.h): same sources in the same order,
// same result shape and type, views alias their source's memory. Methods return the new tensor's
// id. Invalid shapes are programming errors of an architecture builder and are reported through
// `status()` (the first error wins) instead of asserting.
#pragma once

#include <string>
#include <unordered_map>

#include "stowage/planner/graph.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// ROPE parameters in ggml_rope_ext's order.
struct RopeConfig {
  int n_dims = 0;
  int mode = 0;
  int n_ctx_orig = 0;
  float freq_base = 10000.f, freq_scale = 1.f, ext_factor = 0.f, attn_factor = 1.f;
  float beta_fast = 32.f, beta_slow = 1.f;
};

class GraphBuilder {
 public:
  GraphBuilder(Graph& graph, ModelGraphs& model) : g_(graph), m_(model) {}

  /// Leaf referring to global tensor `global_id` (memoized: one leaf per global per graph).
  int Global(int global_id);
  /// Graph input leaf (llama.cpp ggml_set_input): inp_tokens, inp_pos, KQ_mask, inp_out_ids.
  int Input(const std::string& name, GgmlType type, Shape ne);

  int GetRows(int a, int rows);
  int MulMat(int a, int b);
  int MulMatId(int as, int b, int ids);
  int Add(int a, int b);
  int Mul(int a, int b);
  int Scale(int a, float s);
  int RmsNorm(int a, float eps);
  int Norm(int a, float eps);
  int Silu(int a);
  int Gelu(int a);
  int SwiGluSplit(int a, int b);
  int GeGluSplit(int a, int b);
  int RopeExt(int a, int pos, int freq_factors, const RopeConfig& rc);
  int SoftMaxExt(int a, int mask, float scale, float max_bias);
  int Reshape(int a, Shape ne);
  int View(int a, Shape ne, std::array<DimExpr, 3> nb, DimExpr offset);
  int Permute(int a, int ax0, int ax1, int ax2, int ax3);
  int Transpose(int a);
  /// ggml_cpy(a, b): result is a view of b named "<b> (copy of <a>)".
  int Cpy(int a, int b);
  int Cont(int a, Shape ne);

  /// llama.cpp's graph callback: names `t` "name-il" (or "name" for il < 0) and records the layer.
  void Name(int t, const std::string& name, int il);
  /// ggml_build_forward_expand: appends `t` and its not yet visited ancestors in ggml order.
  void Expand(int t);

  Tensor& operator[](int id) { return g_.tensors[id]; }
  const Status& status() const { return status_; }

  /// Byte strides of a contiguous tensor of `type` and shape ne (nb[0] = type size).
  static std::array<DimExpr, 4> ContiguousStrides(GgmlType type, const Shape& ne);

 private:
  int NewTensor(GgmlOp op, GgmlType type, Shape ne, std::vector<int> srcs);
  void Fail(const std::string& msg);
  void Visit(int t, std::vector<char>& visited);

  Graph& g_;
  ModelGraphs& m_;
  Status status_;
  std::unordered_map<int, int> global_leaf_;
  std::vector<char> visited_;
};

}  // namespace stowage::planner
