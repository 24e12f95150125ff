//===- FuseMulMatQkv.cpp - Q, K and V MUL_MATs -> one MUL_MAT over a weight group -===//
//
// Attention multiplies the same activations by attn_q, attn_k and attn_v (llama.cpp build_attn's
// inputs: Qcur, Kcur, Vcur; the bias ADDs of qwen2 follow the products). Here the three weights
// become one ggml.weight_group (their rows laid out back to back at load, no data moved at run
// time) and the three products one ggml.mul_mat over it: the activations converted to the
// weights' vec_dot type once and every row computed in one thread team. Q, K and V are views of
// its result ([q rows | k rows | v rows] per token); a RESHAPE of a product becomes a view with
// the same shape (a strided view is not contiguous, and ggml_reshape needs contiguous input).
// Every output element is the same dot product as before, so on the CPU backend the result is
// the three products' bit for bit; on CUDA the group is one product of more rows (the same
// mat-vec dots; cuBLAS for batches), its parts in the GPU's weight buffer back to back.
//
//===----------------------------------------------------------------------===//

#include <array>

#include "FuseCommon.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEFUSEMULMATQKV
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

/// Rows a CPU_REPACK layout interleaves (ggml-cpu repack: block_q4_0x8, block_q4_Kx8,
/// block_q8_0x8, block_mxfp4x8 each hold 8 rows): a weight group of repacked parts is the repack
/// of their concatenation only when every part is whole groups of 8 rows.
constexpr int64_t kRepackRows = 8;

/// One attention's Q, K and V products of one activation, in that order.
struct Qkv {
  std::array<ggml::MulMatOp, 3> mm;
  std::array<ggml::WeightOp, 3> w;
};

constexpr std::array<StringLiteral, 3> kRoles = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};

/// The Q, K and V products whose Q product is `q`: `q` multiplies a weight "<p>attn_q.weight" and
/// the activations are multiplied by "<p>attn_k.weight" and "<p>attn_v.weight" too.
std::optional<Qkv> matchQkv(ggml::MulMatOp q) {
  auto wq = q.getA().getDefiningOp<ggml::WeightOp>();
  if (!wq || !wq.getGgufName().ends_with(kRoles[0]))
    return std::nullopt;
  StringRef prefix = wq.getGgufName().drop_back(kRoles[0].size());
  Qkv f;
  f.mm[0] = q;
  f.w[0] = wq;
  for (unsigned r = 1; r < 3; ++r) {
    for (Operation *user : q.getB().getUsers()) {
      auto mm = dyn_cast<ggml::MulMatOp>(user);
      auto w = mm && mm.getB() == q.getB() ? mm.getA().getDefiningOp<ggml::WeightOp>() : nullptr;
      if (w && w.getGgufName() == (prefix + kRoles[r]).str()) {
        f.mm[r] = mm;
        f.w[r] = w;
      }
    }
    if (!f.mm[r])
      return std::nullopt;
  }
  return f;
}

ggml::TensorType tensorOf(Value v) { return cast<ggml::TensorType>(v.getType()); }

/// `d` times `f`.
ggml::Dim times(ggml::Dim d, int64_t f) {
  bool overflow = false;
  return d.scaled(f, overflow);
}

/// The byte strides nb1..nb3 of a view of shape `shape` into the fused product [rows, n] of
/// elements of `ts` bytes that reads one part's `own` rows per token, as a RESHAPE of the part's
/// product [own, n] to `shape` reads them: leading static dimensions that multiply to `own`, then
/// n, then 1s. std::nullopt for any other shape (a strided view cannot give it).
std::optional<std::array<ggml::Dim, 3>> partStrides(ggml::TensorType shape, int64_t own,
                                                    ggml::Dim n, int64_t rows, int64_t ts) {
  std::array<ggml::Dim, 3> nb;
  int64_t inner = 1;
  unsigned d = 0;
  for (; d < 4 && inner < own && shape.getNe(d).isStatic(); ++d) {
    if (d > 0)
      nb[d - 1] = ggml::Dim::of(inner * ts);
    inner *= shape.getNe(d).size();
  }
  if (inner != own || d >= 4 || shape.getNe(d) != n)
    return std::nullopt;
  if (d > 0)
    nb[d - 1] = ggml::Dim::of(rows * ts);
  for (unsigned e = d + 1; e < 4; ++e) {
    if (!shape.getNe(e).is(1))
      return std::nullopt;
    nb[e - 1] = times(n, rows * ts);
  }
  return nb;
}

/// Why the strided views that replace `v` (a part's product, or a RESHAPE of it, in `split`) and
/// the RESHAPEs of it cannot be made, or "": a reshape to a shape partStrides cannot give, or a
/// user outside the split (a split result or another split's copy source would be strided).
std::string viewRefusal(Value v, place::SplitOp split, int64_t own, ggml::Dim n) {
  for (Operation *user : v.getUsers()) {
    if (enclosingSplit(user) != split || isa<place::YieldOp>(user))
      return "a product is read outside its split";
    auto reshape = dyn_cast<ggml::ReshapeOp>(user);
    if (!reshape)
      continue;
    if (!partStrides(tensorOf(reshape.getResult()), own, n, own, 4))
      return "a product is reshaped into a shape no strided view gives";
    if (std::string why = viewRefusal(reshape.getResult(), split, own, n); !why.empty())
      return why;
  }
  return "";
}

struct FuseMulMatQkvPass : impl::StowageFuseMulMatQkvBase<FuseMulMatQkvPass> {
  using StowageFuseMulMatQkvBase::StowageFuseMulMatQkvBase;

  /// Why `f` stays as it is, or "".
  std::string refusal(BackendOps &backends, Qkv f) {
    for (unsigned r = 1; r < 3; ++r)
      if (std::string why = splitRefusal(f.mm[0], f.mm[r]); !why.empty())
        return why;
    place::SplitOp split = enclosingSplit(f.mm[0]);
    ggml::TensorType x = tensorOf(f.mm[0].getB());
    if (!x.getNe(2).is(1) || !x.getNe(3).is(1))
      return "the activations have batch dimensions";
    std::array<std::optional<TensorDesc>, 3> w;
    for (unsigned r = 0; r < 3; ++r)
      if (!(w[r] = backends.describe(f.w[r].getResult())))
        return "a shape cannot be evaluated";
    for (unsigned r = 1; r < 3; ++r)
      if (w[r]->type != w[0]->type || w[r]->ne[0] != w[0]->ne[0] || w[r]->buft != w[0]->buft)
        return "the Q, K and V weights differ in type, ne0 or buffer type";
    // The group is its parts' rows back to back where the planner put them: in host memory for
    // the CPU, in the split's own device buffer type for a GPU (CUDA<i>; the session uploads each
    // part there). A row-split buffer (CUDA<i>_Split) slices each weight on its own.
    auto buft = f.w[0]->getAttrOfType<place::BufferTypeAttr>(place::kBuftAttr);
    const std::string backend = split.getBackend().getName().str();
    if (backend == "CPU" ? !buft || !w[0]->buft_is_host : !buft || w[0]->buft != backend)
      return backend == "CPU" ? "the weights are not in a host buffer type (the CPU reads weight "
                                "groups in host memory)"
                              : "the weights are not in buffer type '" + backend +
                                    "' (a GPU reads weight groups in its own device buffer)";
    if (buft.getKind() == place::BuftKind::extra)
      for (unsigned r = 0; r < 3; ++r)
        if (w[r]->ne[1] % kRepackRows != 0)
          return "buffer type '" + buft.getName().str() + "' interleaves rows in groups of " +
                 std::to_string(kRepackRows) + " and '" + f.w[r].getGgufName().str() + "' has " +
                 std::to_string(w[r]->ne[1]) + " rows";
    for (unsigned r = 0; r < 3; ++r)
      if (std::string why = viewRefusal(f.mm[r].getResult(), split, w[r]->ne[1], x.getNe(1));
          !why.empty())
        return why;
    std::optional<TensorDesc> xd = backends.describe(f.mm[0].getB());
    std::optional<TensorDesc> dst = backends.describe(f.mm[0].getResult());
    if (!xd || !dst)
      return "a shape cannot be evaluated";
    OpQuery q;
    q.op = GgmlOp::MUL_MAT;
    q.dst = *dst;
    q.src = {*w[0], *xd};
    for (unsigned r = 1; r < 3; ++r) {
      q.dst.ne[0] += w[r]->ne[1];
      q.src[0].ne[1] += w[r]->ne[1];
    }
    return backends.refusal(split, q);
  }

  /// The ggml.weight_group of `f`'s weights in their function (one per function and name).
  Value groupOf(Qkv f) {
    StringRef q = f.w[0].getGgufName();
    std::string name = (q.drop_back(kRoles[0].size()) + "attn_q+k+v.weight").str();
    Operation *last = f.w[0];
    for (ggml::WeightOp w : f.w)
      if (last->isBeforeInBlock(w))
        last = w;
    for (Operation *user : f.w[0]->getUsers())
      if (auto g = dyn_cast<ggml::WeightGroupOp>(user); g && ggml::getNodeName(g) == name)
        return g.getResult();
    ggml::TensorType t = tensorOf(f.w[0].getResult());
    ggml::Dim rows = ggml::Dim::of(0);
    for (ggml::WeightOp w : f.w)
      rows = rows + tensorOf(w.getResult()).getNe(1);
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    auto group = b.create<ggml::WeightGroupOp>(
        f.w[0].getLoc(), t.withShape({t.getNe(0), rows, ggml::Dim::of(1), ggml::Dim::of(1)}),
        ValueRange{f.w[0].getResult(), f.w[1].getResult(), f.w[2].getResult()});
    group->setAttr(ggml::kNodeNameAttr, b.getStringAttr(name));
    if (Attribute buft = f.w[0]->getAttr(place::kBuftAttr))
      group->setAttr(place::kBuftAttr, buft);
    return group.getResult();
  }

  /// Replaces `f`'s products with views of one product over the group.
  void fuse(Qkv f) {
    Value group = groupOf(f);
    ggml::TensorType x = tensorOf(f.mm[0].getB());
    const ggml::Dim n = x.getNe(1);
    int64_t rows = 0;
    std::array<int64_t, 3> own;
    for (unsigned r = 0; r < 3; ++r)
      rows += own[r] = tensorOf(f.w[r].getResult()).getNe(1).size();
    ggml::TensorType out = tensorOf(f.mm[0].getResult());
    const int64_t ts = static_cast<int64_t>(out.getElementBytes());
    OpBuilder b(f.mm[0]);
    auto fused = b.create<ggml::MulMatOp>(
        f.mm[0].getLoc(),
        out.withShape({ggml::Dim::of(rows), n, ggml::Dim::of(1), ggml::Dim::of(1)}), group,
        f.mm[0].getB());
    for (NamedAttribute attr : f.mm[0]->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    std::string name;
    for (ggml::MulMatOp mm : f.mm)
      name += (name.empty() ? "" : "+") + ggml::getNodeName(mm).str();
    fused->setAttr(ggml::kNodeNameAttr, b.getStringAttr(name));
    const ggml::Dim rowBytes = ggml::Dim::of(rows * ts);
    int64_t first = 0;
    for (unsigned r = 0; r < 3; ++r) {
      ggml::MulMatOp mm = f.mm[r];
      auto offset = first == 0 ? ggml::DimAttr()
                               : ggml::DimAttr::get(b.getContext(), ggml::Dim::of(first * ts));
      auto makeView = [&](OpBuilder &at, Operation *like, ggml::TensorType type,
                          std::array<ggml::Dim, 3> nb) {
        auto view = at.create<ggml::ViewOp>(like->getLoc(), type, fused.getResult(),
                                            ggml::DimsAttr::get(at.getContext(), nb), offset);
        for (NamedAttribute attr : like->getDiscardableAttrs())
          view->setAttr(attr.getName(), attr.getValue());
        return view;
      };
      // A RESHAPE of the product (or of such a reshape, 2026's V): a view of that shape.
      SmallVector<Value> reshaped = {mm.getResult()};
      while (!reshaped.empty()) {
        Value v = reshaped.pop_back_val();
        for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
          auto reshape = dyn_cast<ggml::ReshapeOp>(user);
          if (!reshape)
            continue;
          ggml::TensorType rt = tensorOf(reshape.getResult());
          OpBuilder at(reshape);
          auto view = makeView(at, reshape, rt, *partStrides(rt, own[r], n, rows, ts));
          reshape.getResult().replaceAllUsesWith(view.getResult());
          reshape->erase();
          reshaped.push_back(view.getResult());
        }
      }
      if (!mm->use_empty()) {
        OpBuilder at(mm);
        auto view = makeView(at, mm, tensorOf(mm.getResult()),
                             {rowBytes, times(n, rows * ts), times(n, rows * ts)});
        mm.getResult().replaceAllUsesWith(view.getResult());
      }
      first += own[r];
    }
    for (ggml::MulMatOp mm : f.mm)
      mm->erase();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    BackendOps backends(module);
    SmallVector<Qkv> found;
    module.walk([&](ggml::MulMatOp op) {
      if (std::optional<Qkv> f = matchQkv(op))
        found.push_back(*f);
    });
    for (Qkv &f : found) {
      if (std::string why = refusal(backends, f); !why.empty()) {
        if (remarks)
          f.mm[0]->emitRemark() << "Q, K and V not fused: " << why;
        continue;
      }
      fuse(f);
      ++numFused;
    }
  }
};

} // namespace
} // namespace stowage::compiler
