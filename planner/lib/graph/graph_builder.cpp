#include "stowage/planner/graph_builder.h"

#include "stowage/runtime/ggml_op_params.h"

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
  if (ne[0].is_const())
    nb[1] = DimExpr::Const(static_cast<int64_t>(RowSize(type, ne[0].c)));
  else
    nb[1] = ne[0] * static_cast<int64_t>(tr.type_size);
  // Higher strides are products; they are only needed as DimExpr when at most one factor is
  // symbolic. Otherwise leave them zero: the runtime recomputes strides from bound shapes.
  for (int i = 2; i < 4; ++i) {
    if (ne[i - 1].is_const())
      nb[i] = nb[i - 1] * ne[i - 1].c;
    else if (nb[i - 1].is_const())
      nb[i] = ne[i - 1] * nb[i - 1].c;
    else
      nb[i] = DimExpr{};
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

// The op parameters in the plan's layout (ggml_op_params.h).
static void SetParams(Tensor& t, EncodedOpParams p) {
  t.iparams = std::move(p.iparams);
  t.fparams = std::move(p.fparams);
}

int GraphBuilder::Global(int global_id) {
  auto it = global_leaf_.find(global_id);
  if (it != global_leaf_.end()) return it->second;
  const GlobalTensor& gt = m_.globals[global_id];
  Shape ne{DimExpr::Const(gt.ne[0]), DimExpr::Const(gt.ne[1]), DimExpr::Const(gt.ne[2]),
           DimExpr::Const(gt.ne[3])};
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

static std::string DimStr(const DimExpr& d) {
  if (d.is_const()) return std::to_string(d.c);
  std::string s;
  auto term = [&s](int64_t k, const char* sym) {
    if (k == 0) return;
    if (!s.empty())
      s += k > 0 ? "+" : "-";
    else if (k < 0)
      s += "-";
    const int64_t m = k < 0 ? -k : k;
    if (sym == nullptr) {
      s += std::to_string(m);
      return;
    }
    if (m != 1) s += std::to_string(m) + "*";
    s += sym;
  };
  term(d.tokens, "n_tokens");
  term(d.kv, "n_kv");
  term(d.kv_head, "kv_head");
  term(d.outputs, "n_outputs");
  term(d.c, nullptr);
  return s;
}

static std::string ShapeStr(const Shape& ne) {
  return "[" + DimStr(ne[0]) + ", " + DimStr(ne[1]) + ", " + DimStr(ne[2]) + ", " + DimStr(ne[3]) + "]";
}

int GraphBuilder::GetRows(int a, int rows) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[rows];
  if (A.ne[2] != B.ne[1])
    Fail("get_rows: a.ne2 != rows.ne1 for " + A.name + " " + ShapeStr(A.ne) + " and " + B.name);
  if (B.type != GgmlType::I32) Fail("get_rows: rows must be I32: " + B.name);
  const GgmlType out = A.type == GgmlType::I32 ? GgmlType::I32 : GgmlType::F32;
  return NewTensor(GgmlOp::GET_ROWS, out, {A.ne[0], B.ne[0], B.ne[1], B.ne[2]}, {a, rows});
}

int GraphBuilder::MulMat(int a, int b) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[b];
  if (A.ne[0] != B.ne[0])
    Fail("mul_mat: ne0 mismatch for " + A.name + " " + ShapeStr(A.ne) + " x " + B.name + " " +
         ShapeStr(B.ne));
  return NewTensor(GgmlOp::MUL_MAT, GgmlType::F32, {A.ne[1], B.ne[1], B.ne[2], B.ne[3]}, {a, b});
}

int GraphBuilder::MulMatId(int as, int b, int ids) {
  const Tensor& A = g_.tensors[as];
  const Tensor& B = g_.tensors[b];
  const Tensor& I = g_.tensors[ids];
  // ggml_mul_mat_id: as [K, N, n_expert], b [K, n_expert_used or 1, n_tokens], ids [n_used, n_tokens]
  if (A.ne[0] != B.ne[0]) Fail("mul_mat_id: ne0 mismatch for " + A.name + " x " + B.name);
  if (I.type != GgmlType::I32 || I.ne[1] != B.ne[2])
    Fail("mul_mat_id: ids must be I32 [n_used, b.ne2]: " + I.name);
  return NewTensor(GgmlOp::MUL_MAT_ID, GgmlType::F32, {A.ne[1], I.ne[0], B.ne[2], kOne}, {as, b, ids});
}

int GraphBuilder::Binary(GgmlOp op, const char* what, int a, int b) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[b];
  for (int i = 0; i < 4; ++i)
    if (B.ne[i] != A.ne[i] && B.ne[i] != kOne)
      Fail(std::string(what) + ": cannot broadcast " + B.name + " " + ShapeStr(B.ne) + " to " + A.name + " " +
           ShapeStr(A.ne));
  return NewTensor(op, A.type, A.ne, {a, b});
}

int GraphBuilder::Add(int a, int b) { return Binary(GgmlOp::ADD, "add", a, b); }
int GraphBuilder::Mul(int a, int b) { return Binary(GgmlOp::MUL, "mul", a, b); }
int GraphBuilder::Div(int a, int b) { return Binary(GgmlOp::DIV, "div", a, b); }

int GraphBuilder::SumRows(int a) {
  const Tensor& A = g_.tensors[a];
  return NewTensor(GgmlOp::SUM_ROWS, A.type, {kOne, A.ne[1], A.ne[2], A.ne[3]}, {a});
}

int GraphBuilder::Scale(int a, float s) {
  const int t = NewTensor(GgmlOp::SCALE, g_.tensors[a].type, g_.tensors[a].ne, {a});
  SetParams(g_.tensors[t], Encode(ScaleParams{s, 0.f}));
  return t;
}

int GraphBuilder::RmsNorm(int a, float eps) {
  const int t = NewTensor(GgmlOp::RMS_NORM, g_.tensors[a].type, g_.tensors[a].ne, {a});
  SetParams(g_.tensors[t], Encode(NormParams{eps}));
  return t;
}

int GraphBuilder::Norm(int a, float eps) {
  const int t = NewTensor(GgmlOp::NORM, g_.tensors[a].type, g_.tensors[a].ne, {a});
  SetParams(g_.tensors[t], Encode(NormParams{eps}));
  return t;
}

int GraphBuilder::Silu(int a) { return NewTensor(GgmlOp::SILU, g_.tensors[a].type, g_.tensors[a].ne, {a}); }
int GraphBuilder::Gelu(int a) { return NewTensor(GgmlOp::GELU, g_.tensors[a].type, g_.tensors[a].ne, {a}); }
int GraphBuilder::Sigmoid(int a) {
  return NewTensor(GgmlOp::SIGMOID, g_.tensors[a].type, g_.tensors[a].ne, {a});
}
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
  SetParams(g_.tensors[t], Encode(rc));
  return t;
}

int GraphBuilder::SoftMaxExt(int a, int mask, float scale, float max_bias) {
  std::vector<int> srcs{a};
  if (mask >= 0) srcs.push_back(mask);
  const int t = NewTensor(GgmlOp::SOFT_MAX, g_.tensors[a].type, g_.tensors[a].ne, std::move(srcs));
  SetParams(g_.tensors[t], Encode(SoftMaxParams{scale, max_bias}));
  return t;
}

int GraphBuilder::FlashAttnExt(int q, int k, int v, int mask, float scale, float max_bias,
                               float logit_softcap, int prec) {
  const Tensor& Q = g_.tensors[q];
  const Tensor& Kt = g_.tensors[k];
  const Tensor& V = g_.tensors[v];
  // ggml_flash_attn_ext: ggml_can_mul_mat(k, q); V's rows are summed with the softmax weights.
  if (Kt.ne[0] != Q.ne[0])
    Fail("flash_attn_ext: ne0 mismatch for " + Kt.name + " " + ShapeStr(Kt.ne) + " x " + Q.name + " " +
         ShapeStr(Q.ne));
  if (V.ne[1] != Kt.ne[1] || V.ne[2] != Kt.ne[2])
    Fail("flash_attn_ext: " + V.name + " " + ShapeStr(V.ne) + " does not match " + Kt.name + " " +
         ShapeStr(Kt.ne));
  if (Q.ne[2].is_const() && Kt.ne[2].is_const() && (Kt.ne[2].c <= 0 || Q.ne[2].c % Kt.ne[2].c != 0))
    Fail("flash_attn_ext: " + Q.name + " has " + std::to_string(Q.ne[2].c) + " heads, not a multiple of " +
         std::to_string(Kt.ne[2].c));
  std::vector<int> srcs{q, k, v};
  if (mask >= 0) srcs.push_back(mask);
  const int t =
      NewTensor(GgmlOp::FLASH_ATTN_EXT, GgmlType::F32, {V.ne[0], Q.ne[2], Q.ne[1], Q.ne[3]}, std::move(srcs));
  SetParams(g_.tensors[t], Encode(FlashAttnExtParams{scale, max_bias, logit_softcap, prec}));
  return t;
}

int GraphBuilder::SoftMax(int a) { return SoftMaxExt(a, -1, 1.0f, 0.0f); }

int GraphBuilder::Argsort(int a, int order) {
  const int t = NewTensor(GgmlOp::ARGSORT, GgmlType::I32, g_.tensors[a].ne, {a});
  SetParams(g_.tensors[t], Encode(ArgsortParams{order}));
  return t;
}

int GraphBuilder::TopK(int a, int k) {
  const Tensor& A = g_.tensors[a];
  if (!A.ne[0].is_const() || A.ne[0].c < k) Fail("top_k: k larger than ne0 of " + A.name);
  const int sorted = Argsort(a, /*GGML_SORT_ORDER_DESC=*/1);
  const auto nb = ContiguousStrides(GgmlType::I32, g_.tensors[sorted].ne);
  const Shape src_ne = g_.tensors[sorted].ne;
  return View(sorted, {DimExpr::Const(k), src_ne[1], src_ne[2], src_ne[3]}, {nb[1], nb[2], nb[3]}, DimExpr{});
}

int GraphBuilder::Concat(int a, int b, int dim) {
  const Tensor& A = g_.tensors[a];
  const Tensor& B = g_.tensors[b];
  Shape ne = A.ne;
  for (int d = 0; d < 4; ++d) {
    if (d == dim)
      ne[d] = A.ne[d] + B.ne[d];
    else if (A.ne[d] != B.ne[d])
      Fail("concat: dim " + std::to_string(d) + " differs for " + A.name + " and " + B.name);
  }
  const int t = NewTensor(GgmlOp::CONCAT, A.type, ne, {a, b});
  SetParams(g_.tensors[t], Encode(ConcatParams{dim}));
  return t;
}

int GraphBuilder::SsmConv(int sx, int c) {
  const Tensor& SX = g_.tensors[sx];
  const Tensor& Cw = g_.tensors[c];
  const DimExpr d_conv = Cw.ne[0], d_inner = Cw.ne[1];
  const DimExpr n_t = SX.ne[0] + (d_conv * -1) + kOne;
  if (SX.ne[1] != d_inner || SX.ne[3] != kOne || Cw.ne[2] != kOne)
    Fail("ssm_conv: expected sx [d_conv-1+n_t, d_inner, n_s] and c [d_conv, d_inner], got " + SX.name + " " +
         ShapeStr(SX.ne) + " and " + Cw.name + " " + ShapeStr(Cw.ne));
  return NewTensor(GgmlOp::SSM_CONV, GgmlType::F32, {d_inner, n_t, SX.ne[2], kOne}, {sx, c});
}

int GraphBuilder::SsmScan(int s, int x, int dt, int A, int B, int C) {
  const Tensor& S = g_.tensors[s];
  const Tensor& X = g_.tensors[x];
  const Tensor& DT = g_.tensors[dt];
  const Tensor& AA = g_.tensors[A];
  const Tensor& BB = g_.tensors[B];
  const Tensor& CC = g_.tensors[C];
  bool ok = X.ne == DT.ne && BB.ne == CC.ne && S.ne[2] == X.ne[2] && X.ne[0] == S.ne[1] &&
            AA.ne[0] == S.ne[0] && AA.ne[1] == S.ne[1] && BB.ne[0] == S.ne[0] && BB.ne[1] == X.ne[1] &&
            BB.ne[2] == X.ne[2];
  if (!ok)
    Fail("ssm_scan: inconsistent shapes (s " + ShapeStr(S.ne) + ", x " + ShapeStr(X.ne) + ", A " +
         ShapeStr(AA.ne) + ", B " + ShapeStr(BB.ne) + ")");
  // nelements(x) + nelements(s); both have at most one symbolic factor (n_t) here.
  auto nel = [this](const Shape& ne) {
    DimExpr n = ne[0];
    for (int i = 1; i < 4; ++i) {
      if (ne[i].is_const())
        n = n * ne[i].c;
      else if (n.is_const())
        n = ne[i] * n.c;
      else
        Fail("ssm_scan: element count is not affine in the graph symbols");
    }
    return n;
  };
  const DimExpr n = nel(X.ne) + nel(S.ne);
  return NewTensor(GgmlOp::SSM_SCAN, GgmlType::F32, {n, kOne, kOne, kOne}, {s, x, dt, A, B, C});
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

int GraphBuilder::View1d(int a, DimExpr ne0, DimExpr offset) {
  return View(a, {ne0, kOne, kOne, kOne}, {DimExpr{}, DimExpr{}, DimExpr{}}, offset);
}

int GraphBuilder::View2d(int a, DimExpr ne0, DimExpr ne1, DimExpr nb1, DimExpr offset) {
  return View(a, {ne0, ne1, kOne, kOne}, {nb1, DimExpr{}, DimExpr{}}, offset);
}

int GraphBuilder::View3d(int a, DimExpr ne0, DimExpr ne1, DimExpr ne2, DimExpr nb1, DimExpr nb2,
                         DimExpr offset) {
  return View(a, {ne0, ne1, ne2, kOne}, {nb1, nb2, DimExpr{}}, offset);
}

std::array<DimExpr, 4> GraphBuilder::Nb(int t) {
  const Tensor& T = g_.tensors[t];
  if (T.op == GgmlOp::VIEW || T.op == GgmlOp::PERMUTE || T.op == GgmlOp::TRANSPOSE)
    Fail("strides of the non-contiguous view " + T.name + " are not tracked");
  return ContiguousStrides(T.type, T.ne);
}

int GraphBuilder::Permute(int a, int ax0, int ax1, int ax2, int ax3) {
  const Tensor& A = g_.tensors[a];
  Shape ne;
  const int ax[4] = {ax0, ax1, ax2, ax3};
  for (int i = 0; i < 4; ++i) ne[ax[i]] = A.ne[i];
  const int t = NewTensor(GgmlOp::PERMUTE, A.type, ne, {a});
  PermuteParams pp;
  for (int i = 0; i < 4; ++i) pp.axis[i] = ax[i];
  SetParams(g_.tensors[t], Encode(pp));
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

int GraphBuilder::Cast(int a, GgmlType type) {
  const int t = NewTensor(GgmlOp::CPY, type, g_.tensors[a].ne, {a});
  g_.tensors[t].name = g_.tensors[a].name + " (copy)";
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
  if (g_.tensors[t].op == GgmlOp::NONE)
    g_.leafs.push_back(t);
  else
    g_.nodes.push_back(t);
}

void GraphBuilder::Expand(int t) {
  if (visited_.size() < g_.tensors.size()) visited_.resize(g_.tensors.size(), 0);
  Visit(t, visited_);
}

}  // namespace stowage::planner
