#include "stowage/planner/graph_builder.h"

namespace stowage::planner {

int Graph::Find(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return static_cast<int>(i);
  return -1;
}

int ModelGraphs::FindGlobal(const std::string& name) const {
  for (size_t i = 0; i < globals.size(); ++i)
    if (globals[i].name == name) return static_cast<int>(i);
  return -1;
}

void GraphBuilder::Fail(const std::string& msg) {
  if (status_.ok()) status_ = Internal("graph builder: " + msg);
}

std::array<DimExpr, 4> GraphBuilder::ContiguousStrides(GgmlType type, const Shape& ne) {
  const auto& tr = GetTypeTraits(type);
  std::array<DimExpr, 4> nb;
  nb[0] = DimExpr::Const(static_cast<int64_t>(tr.type_size));
  // nb1 = row size: ne0 must be constant for quantized types; linear for plain types.
  if (ne[0].is_const()) nb[1] = DimExpr::Const(static_cast<int64_t>(RowSize(type, ne[0].c)));
  else nb[1] = ne[0] * static_cast<int64_t>(tr.type_size);
  // Higher strides are products; they are only needed as DimExpr when at most one factor is
  // symbolic. Otherwise leave them zero: the runtime recomputes strides from bound shapes.
  for (int i = 2; i < 4; ++i) {
    if (ne[i - 1].is_const()) nb[i] = nb[i - 1] * ne[i - 1].c;
    else if (nb[i - 1].is_const()) nb[i] = ne[i - 1] * nb[i - 1].c;
    else nb[i] = DimExpr{};
  }
  return nb;
}

int GraphBuilder::NewTensor(GgmlOp op, GgmlType type, Shape ne, std::vector<int> srcs) {
  Tensor t;
  t.op = op;
  t.type = type;
  t.ne = ne;
  t.srcs = std::move(srcs);
  g_.tensors.push_back(std::move(t));
  return static_cast<int>(g_.tensors.size() - 1);
}

int GraphBuilder::Global(int global_id) {
  auto it = global_leaf_.find(global_id);
  if (it != global_leaf_.end()) return it->second;
  const GlobalTensor& gt = m_.globals[global_id];
  Shape ne{DimExpr::Const(gt.ne[0]), DimExpr::Const(gt.ne[1]), DimExpr::Const(gt.ne[2]), DimExpr::Const(gt.ne[3])};
  const int id = NewTensor(GgmlOp::NONE, gt.type, ne, {});
  g_.tensors[id].name = gt.name;
  g_.tensors[id].kind = gt.kind;
  g_.tensors[id].global = global_id;
  g_.tensors[id].layer = gt.layer;
  global_leaf_[global_id] = id;
  return id;
}

int GraphBuilder::Input(const std::string& name, GgmlType type, Shape ne) {
  const int id = NewTensor(GgmlOp::NONE, type, ne, {});
  g_.tensors[id].name = name;
  g_.tensors[id].kind = TensorKind::kInput;
  return id;
}

static const DimExpr kOne = DimExpr::Const(1);

int GraphBuilder::GetRows(int a, int rows) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[rows];
  const GgmlType out = A.type == GgmlType::I32 ? GgmlType::I32 : GgmlType::F32;
  return NewTensor(GgmlOp::GET_ROWS, out, {A.ne[0], B.ne[0], B.ne[1], B.ne[2]}, {a, rows});
}

int GraphBuilder::MulMat(int a, int b) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[b];
  if (A.ne[0] != B.ne[0]) Fail("mul_mat: ne0 mismatch for " + A.name + " x " + B.name);
  return NewTensor(GgmlOp::MUL_MAT, GgmlType::F32, {A.ne[1], B.ne[1], B.ne[2], B.ne[3]}, {a, b});
}

int GraphBuilder::MulMatId(int as, int b, int ids) {
  const Tensor& A = g_.tensors[as];
  const Tensor& B = g_.tensors[b];
  const Tensor& I = g_.tensors[ids];
  // ggml_mul_mat_id: as [K, N, n_expert], b [K, n_expert_used or 1, n_tokens], ids [n_used, n_tokens]
  return NewTensor(GgmlOp::MUL_MAT_ID, GgmlType::F32, {A.ne[1], I.ne[0], B.ne[2], kOne}, {as, b, ids});
}

int GraphBuilder::Add(int a, int b) {
  return NewTensor(GgmlOp::ADD, g_.tensors[a].type, g_.tensors[a].ne, {a, b});
}

int GraphBuilder::Mul(int a, int b) {
  return NewTensor(GgmlOp::MUL, g_.tensors[a].type, g_.tensors[a].ne, {a, b});
}

int GraphBuilder::Scale(int a, float s) {
  const int t = NewTensor(GgmlOp::SCALE, g_.tensors[a].type, g_.tensors[a].ne, {a});
  g_.tensors[t].fparams = {s, 0.f};
  return t;
}

int GraphBuilder::RmsNorm(int a, float eps) {
  const int t = NewTensor(GgmlOp::RMS_NORM, g_.tensors[a].type, g_.tensors[a].ne, {a});
  g_.tensors[t].fparams = {eps};
  return t;
}

int GraphBuilder::Norm(int a, float eps) {
  const int t = NewTensor(GgmlOp::NORM, g_.tensors[a].type, g_.tensors[a].ne, {a});
  g_.tensors[t].fparams = {eps};
  return t;
}

int GraphBuilder::Silu(int a) { return NewTensor(GgmlOp::SILU, g_.tensors[a].type, g_.tensors[a].ne, {a}); }
int GraphBuilder::Gelu(int a) { return NewTensor(GgmlOp::GELU, g_.tensors[a].type, g_.tensors[a].ne, {a}); }
int GraphBuilder::SwiGluSplit(int a, int b) {
  return NewTensor(GgmlOp::SWIGLU, g_.tensors[a].type, g_.tensors[a].ne, {a, b});
}
int GraphBuilder::GeGluSplit(int a, int b) {
  return NewTensor(GgmlOp::GEGLU, g_.tensors[a].type, g_.tensors[a].ne, {a, b});
}

int GraphBuilder::RopeExt(int a, int pos, int freq_factors, const RopeConfig& rc) {
  std::vector<int> srcs{a, pos};
  if (freq_factors >= 0) srcs.push_back(freq_factors);
  const int t = NewTensor(GgmlOp::ROPE, g_.tensors[a].type, g_.tensors[a].ne, std::move(srcs));
  g_.tensors[t].iparams = {rc.n_dims, rc.mode, rc.n_ctx_orig};
  g_.tensors[t].fparams = {rc.freq_base, rc.freq_scale, rc.ext_factor, rc.attn_factor, rc.beta_fast, rc.beta_slow};
  return t;
}

int GraphBuilder::SoftMaxExt(int a, int mask, float scale, float max_bias) {
  std::vector<int> srcs{a};
  if (mask >= 0) srcs.push_back(mask);
  const int t = NewTensor(GgmlOp::SOFT_MAX, g_.tensors[a].type, g_.tensors[a].ne, std::move(srcs));
  g_.tensors[t].fparams = {scale, max_bias};
  return t;
}

static int OwnerOf(const Graph& g, int a) { return g.tensors[a].view_src >= 0 ? g.tensors[a].view_src : a; }

int GraphBuilder::Reshape(int a, Shape ne) {
  const int t = NewTensor(GgmlOp::RESHAPE, g_.tensors[a].type, ne, {a});
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (reshaped)";
  return t;
}

int GraphBuilder::View(int a, Shape ne, std::array<DimExpr, 3> nb, DimExpr offset) {
  const int t = NewTensor(GgmlOp::VIEW, g_.tensors[a].type, ne, {a});
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].view_nb = nb;
  g_.tensors[t].view_offset = offset;
  g_.tensors[t].name = g_.tensors[a].name + " (view)";
  return t;
}

int GraphBuilder::Permute(int a, int ax0, int ax1, int ax2, int ax3) {
  const Tensor& A = g_.tensors[a];
  Shape ne;
  const int ax[4] = {ax0, ax1, ax2, ax3};
  for (int i = 0; i < 4; ++i) ne[ax[i]] = A.ne[i];
  const int t = NewTensor(GgmlOp::PERMUTE, A.type, ne, {a});
  g_.tensors[t].iparams = {ax0, ax1, ax2, ax3};
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (permuted)";
  return t;
}

int GraphBuilder::Transpose(int a) {
  const Tensor& A = g_.tensors[a];
  const int t = NewTensor(GgmlOp::TRANSPOSE, A.type, {A.ne[1], A.ne[0], A.ne[2], A.ne[3]}, {a});
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (transposed)";
  return t;
}

int GraphBuilder::Cpy(int a, int b) {
  const int t = NewTensor(GgmlOp::CPY, g_.tensors[b].type, g_.tensors[b].ne, {a, b});
  g_.tensors[t].view_src = OwnerOf(g_, b);
  g_.tensors[t].name = g_.tensors[b].name + " (copy of " + g_.tensors[a].name + ")";
  return t;
}

int GraphBuilder::Cont(int a, Shape ne) {
  const int t = NewTensor(GgmlOp::CONT, g_.tensors[a].type, ne, {a});
  g_.tensors[t].name = g_.tensors[a].name + " (cont)";
  return t;
}

void GraphBuilder::Name(int t, const std::string& name, int il) {
  g_.tensors[t].name = il >= 0 ? name + "-" + std::to_string(il) : name;
  g_.tensors[t].layer = il;
}

void GraphBuilder::Visit(int t, std::vector<char>& visited) {
  if (visited[t]) return;
  visited[t] = 1;
  for (int s : g_.tensors[t].srcs)
    if (s >= 0) Visit(s, visited);
  if (g_.tensors[t].op == GgmlOp::NONE) g_.leafs.push_back(t);
  else g_.nodes.push_back(t);
}

void GraphBuilder::Expand(int t) {
  if (visited_.size() < g_.tensors.size()) visited_.resize(g_.tensors.size(), 0);
  Visit(t, visited_);
}

}  // namespace stowage::planner
