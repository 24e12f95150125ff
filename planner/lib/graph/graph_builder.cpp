#include "stowage/planner/graph_builder.h"

#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_op_shapes.h"

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
  term(d.kv_swa, "n_kv_swa");
  term(d.kv_head_swa, "kv_head_swa");
  term(d.c, nullptr);
  return s;
}

static std::string ShapeStr(const Shape& ne) {
  return "[" + DimStr(ne[0]) + ", " + DimStr(ne[1]) + ", " + DimStr(ne[2]) + ", " + DimStr(ne[3]) + "]";
}

std::string GraphBuilder::Describe(const std::vector<int>& srcs) const {
  std::string s;
  for (int id : srcs)
    if (id >= 0) s += (s.empty() ? "" : ", ") + g_.tensors[id].name + " " + ShapeStr(g_.tensors[id].ne);
  return s;
}

// The rule (InferShape) is a function of concrete shapes. The result as DimExprs: evaluated at the
// graph's worst-case bindings w and at w with each symbol one larger, the differences are the
// symbols' coefficients; an eighth binding, every symbol larger by another amount, checks that the
// result is affine in them (a product of two symbolic dimensions is not).
static constexpr int kSamples = 8;
static std::array<Bindings, kSamples> SamplePoints(const Bindings& w) {
  std::array<Bindings, kSamples> at{w, w, w, w, w, w, w, w};
  at[1].n_tokens += 1;
  at[2].n_kv += 1;
  at[3].kv_head += 1;
  at[4].n_outputs += 1;
  at[5].n_kv_swa += 1;
  at[6].kv_head_swa += 1;
  at[7] = {w.n_tokens + 2, w.n_kv + 3, w.kv_head + 5, w.n_outputs + 7, w.n_kv_swa + 11, w.kv_head_swa + 13};
  return at;
}

static Ne4 Eval(const Bindings& b, const Shape& ne) {
  return Ne4{b.Eval(ne[0]), b.Eval(ne[1]), b.Eval(ne[2]), b.Eval(ne[3])};
}

Shape GraphBuilder::RuleShape(GgmlOp op, const std::vector<int>& srcs, const EncodedOpParams& p) {
  const OpParamsRef params(p.iparams, p.fparams);
  const Bindings w = g_.WorstCase();
  const std::array<Bindings, kSamples> at = SamplePoints(w);
  Ne4 r[kSamples];
  SrcShapes shapes(srcs.size());
  const DimNamer namer = [&](size_t i, int d) { return DimStr(g_.tensors[srcs[i]].ne[d]); };
  for (int k = 0; k < kSamples; ++k) {
    for (size_t j = 0; j < srcs.size(); ++j) {
      shapes[j].reset();
      if (srcs[j] < 0) continue;
      shapes[j] = Eval(at[k], g_.tensors[srcs[j]].ne);
    }
    Result<Ne4> x = InferShape(op, shapes, params, namer);
    if (!x.ok()) {
      Fail(x.status().message() + "; sources " + Describe(srcs));
      return g_.tensors[srcs[0]].ne;
    }
    r[k] = *x;
  }
  Shape ne;
  for (int d = 0; d < 4; ++d) {
    DimExpr& e = ne[d];
    e.tokens = r[1][d] - r[0][d];
    e.kv = r[2][d] - r[0][d];
    e.kv_head = r[3][d] - r[0][d];
    e.outputs = r[4][d] - r[0][d];
    e.kv_swa = r[5][d] - r[0][d];
    e.kv_head_swa = r[6][d] - r[0][d];
    e.c = r[0][d] - e.tokens * w.n_tokens - e.kv * w.n_kv - e.kv_head * w.kv_head - e.outputs * w.n_outputs -
          e.kv_swa * w.n_kv_swa - e.kv_head_swa * w.kv_head_swa;
    if (at[kSamples - 1].Eval(e) != r[kSamples - 1][d])
      Fail(std::string(GgmlOpName(op)) + ": result ne" + std::to_string(d) +
           " is not affine in the graph symbols; sources " + Describe(srcs));
  }
  return ne;
}

void GraphBuilder::CheckGivenShape(GgmlOp op, int a, const Shape& ne) {
  for (const Bindings& b : SamplePoints(g_.WorstCase()))
    if (Status st = CheckShape(op, {Eval(b, g_.tensors[a].ne)}, OpParamsRef(), Eval(b, ne)); !st.ok()) {
      Fail(st.message() + "; source " + Describe({a}) + ", result " + ShapeStr(ne));
      return;
    }
}

int GraphBuilder::NewNode(GgmlOp op, GgmlType type, std::vector<int> srcs, EncodedOpParams p) {
  const Shape ne = RuleShape(op, srcs, p);
  const int t = NewTensor(op, type, ne, std::move(srcs));
  SetParams(g_.tensors[t], std::move(p));
  return t;
}

int GraphBuilder::GetRows(int a, int rows) {
  if (g_.tensors[rows].type != GgmlType::I32) Fail("get_rows: rows must be I32: " + g_.tensors[rows].name);
  const GgmlType out = g_.tensors[a].type == GgmlType::I32 ? GgmlType::I32 : GgmlType::F32;
  return NewNode(GgmlOp::GET_ROWS, out, {a, rows});
}

int GraphBuilder::MulMat(int a, int b) { return NewNode(GgmlOp::MUL_MAT, GgmlType::F32, {a, b}); }

int GraphBuilder::MulMatId(int as, int b, int ids) {
  if (g_.tensors[ids].type != GgmlType::I32) Fail("mul_mat_id: ids must be I32: " + g_.tensors[ids].name);
  return NewNode(GgmlOp::MUL_MAT_ID, GgmlType::F32, {as, b, ids});
}

int GraphBuilder::Add(int a, int b) { return NewNode(GgmlOp::ADD, g_.tensors[a].type, {a, b}); }
int GraphBuilder::Mul(int a, int b) { return NewNode(GgmlOp::MUL, g_.tensors[a].type, {a, b}); }
int GraphBuilder::Div(int a, int b) { return NewNode(GgmlOp::DIV, g_.tensors[a].type, {a, b}); }

int GraphBuilder::SumRows(int a) { return NewNode(GgmlOp::SUM_ROWS, g_.tensors[a].type, {a}); }

int GraphBuilder::Scale(int a, float s) {
  return NewNode(GgmlOp::SCALE, g_.tensors[a].type, {a}, Encode(ScaleParams{s, 0.f}));
}

int GraphBuilder::RmsNorm(int a, float eps) {
  return NewNode(GgmlOp::RMS_NORM, g_.tensors[a].type, {a}, Encode(NormParams{eps}));
}

int GraphBuilder::Norm(int a, float eps) {
  return NewNode(GgmlOp::NORM, g_.tensors[a].type, {a}, Encode(NormParams{eps}));
}

int GraphBuilder::Silu(int a) { return NewNode(GgmlOp::SILU, g_.tensors[a].type, {a}); }
int GraphBuilder::Gelu(int a) { return NewNode(GgmlOp::GELU, g_.tensors[a].type, {a}); }
int GraphBuilder::Sigmoid(int a) { return NewNode(GgmlOp::SIGMOID, g_.tensors[a].type, {a}); }
int GraphBuilder::Tanh(int a) { return NewNode(GgmlOp::TANH, g_.tensors[a].type, {a}); }
int GraphBuilder::SwiGluSplit(int a, int b) { return NewNode(GgmlOp::SWIGLU, g_.tensors[a].type, {a, b}); }
int GraphBuilder::SwiGlu(int a) { return NewNode(GgmlOp::SWIGLU, g_.tensors[a].type, {a}); }
int GraphBuilder::GeGluSplit(int a, int b) { return NewNode(GgmlOp::GEGLU, g_.tensors[a].type, {a, b}); }
int GraphBuilder::SwiGluOai(int a, int b, float alpha, float limit) {
  return NewNode(GgmlOp::SWIGLU_OAI, g_.tensors[a].type, {a, b}, Encode(SwiGluOaiParams{alpha, limit}));
}
int GraphBuilder::AddId(int a, int b, int ids) {
  if (g_.tensors[ids].type != GgmlType::I32) Fail("add_id: ids must be I32: " + g_.tensors[ids].name);
  return NewNode(GgmlOp::ADD_ID, g_.tensors[a].type, {a, b, ids});
}

int GraphBuilder::RopeExt(int a, int pos, int freq_factors, const RopeConfig& rc) {
  std::vector<int> srcs{a, pos};
  if (freq_factors >= 0) srcs.push_back(freq_factors);
  return NewNode(GgmlOp::ROPE, g_.tensors[a].type, std::move(srcs), Encode(rc));
}

int GraphBuilder::SoftMaxExt(int a, int mask, float scale, float max_bias, int sinks) {
  std::vector<int> srcs{a};
  if (mask >= 0) srcs.push_back(mask);
  if (sinks >= 0) {
    if (mask < 0) Fail("soft_max: sinks without a mask: " + g_.tensors[sinks].name);
    srcs.push_back(sinks);
  }
  return NewNode(GgmlOp::SOFT_MAX, g_.tensors[a].type, std::move(srcs),
                 Encode(SoftMaxParams{scale, max_bias}));
}

int GraphBuilder::FlashAttnExt(int q, int k, int v, int mask, float scale, float max_bias,
                               float logit_softcap, int prec, int sinks) {
  std::vector<int> srcs{q, k, v};
  if (mask >= 0) srcs.push_back(mask);
  if (sinks >= 0) {
    if (mask < 0) Fail("flash_attn_ext: sinks without a mask: " + g_.tensors[sinks].name);
    srcs.push_back(sinks);
  }
  return NewNode(GgmlOp::FLASH_ATTN_EXT, GgmlType::F32, std::move(srcs),
                 Encode(FlashAttnExtParams{scale, max_bias, logit_softcap, prec}));
}

int GraphBuilder::SoftMax(int a) { return SoftMaxExt(a, -1, 1.0f, 0.0f); }

int GraphBuilder::Argsort(int a, int order) {
  return NewNode(GgmlOp::ARGSORT, GgmlType::I32, {a}, Encode(ArgsortParams{order}));
}

int GraphBuilder::TopK(int a, int k) {
  // ggml_top_k's result shape (TOP_K's rule), as a view of the sorted indices.
  const Shape ne = RuleShape(GgmlOp::TOP_K, {a}, Encode(TopKParams{k}));
  const int sorted = Argsort(a, /*order=*/1);  // GGML_SORT_ORDER_DESC
  const auto nb = ContiguousStrides(GgmlType::I32, g_.tensors[sorted].ne);
  return View(sorted, ne, {nb[1], nb[2], nb[3]}, DimExpr{});
}

int GraphBuilder::Fill(int a, float c) {
  return NewNode(GgmlOp::FILL, g_.tensors[a].type, {a}, Encode(FillParams{c}));
}

int GraphBuilder::Clamp(int a, float min, float max) {
  return NewNode(GgmlOp::CLAMP, g_.tensors[a].type, {a}, Encode(ClampParams{min, max}));
}

int GraphBuilder::Concat(int a, int b, int dim) {
  return NewNode(GgmlOp::CONCAT, g_.tensors[a].type, {a, b}, Encode(ConcatParams{dim}));
}

int GraphBuilder::SsmConv(int sx, int c) { return NewNode(GgmlOp::SSM_CONV, GgmlType::F32, {sx, c}); }

int GraphBuilder::SsmScan(int s, int x, int dt, int A, int B, int C) {
  return NewNode(GgmlOp::SSM_SCAN, GgmlType::F32, {s, x, dt, A, B, C});
}

static int OwnerOf(const Graph& g, int a) { return g.tensors[a].view_src >= 0 ? g.tensors[a].view_src : a; }

int GraphBuilder::Reshape(int a, Shape ne) {
  CheckGivenShape(GgmlOp::RESHAPE, a, ne);
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
  PermuteParams pp;
  const int ax[4] = {ax0, ax1, ax2, ax3};
  for (int i = 0; i < 4; ++i) pp.axis[i] = ax[i];
  const int t = NewNode(GgmlOp::PERMUTE, g_.tensors[a].type, {a}, Encode(pp));
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (permuted)";
  return t;
}

int GraphBuilder::Transpose(int a) {
  const int t = NewNode(GgmlOp::TRANSPOSE, g_.tensors[a].type, {a});
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (transposed)";
  return t;
}

int GraphBuilder::Cpy(int a, int b) {
  const int t = NewNode(GgmlOp::CPY, g_.tensors[b].type, {a, b});
  g_.tensors[t].view_src = OwnerOf(g_, b);
  g_.tensors[t].name = g_.tensors[b].name + " (copy of " + g_.tensors[a].name + ")";
  return t;
}

int GraphBuilder::SetRows(int a, int b, int c) {
  const int t = NewNode(GgmlOp::SET_ROWS, g_.tensors[a].type, {b, c, a});
  g_.tensors[t].view_src = OwnerOf(g_, a);
  g_.tensors[t].name = g_.tensors[a].name + " (view)";
  return t;
}

int GraphBuilder::Cast(int a, GgmlType type) {
  const int t = NewNode(GgmlOp::CPY, type, {a});
  g_.tensors[t].name = g_.tensors[a].name + " (copy)";
  return t;
}

int GraphBuilder::Repeat(int a, Shape ne) {
  CheckGivenShape(GgmlOp::REPEAT, a, ne);
  return NewTensor(GgmlOp::REPEAT, g_.tensors[a].type, ne, {a});
}

int GraphBuilder::Cont(int a, Shape ne) {
  CheckGivenShape(GgmlOp::CONT, a, ne);
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
