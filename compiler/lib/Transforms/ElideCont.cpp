//===- ElideCont.cpp - CONT of bytes already in order -> a VIEW ------------===//
//
// ggml_cont copies a permuted, transposed or strided view into a new contiguous tensor. Where the
// view's bytes already lie in ggml order (every dimension of size > 1 at its packed stride, as
// ggml_is_contiguous checks), the copy writes the same bytes again: the attention output of token
// generation (`kqv_merged_cont` = ggml_cont_2d(ggml_permute(kqv, 0, 2, 1, 3)) with n_tokens = 1),
// one row of a fused projection split by views (phi3's Q/K/V, a fused up's halves) at n_tokens
// = 1. Here such a CONT becomes a ggml.view of the memory the chain of views reads, at its offset
// with the CONT's shape and packed strides: no node computes, every consumer reads the bytes the
// copy held (bit for bit, whatever the consumer). A CONT whose source is not in order for every
// binding of the symbols stays.
//
//===----------------------------------------------------------------------===//

#include "FuseCommon.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEELIDECONT
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

using ggml::Dim;
using ggml::ElementCount;

/// Where a tensor's elements lie: in `root`'s memory (the value that owns it: not a view op) at
/// byte `offset`, with ne and byte strides nb (ggml's, nb0 the element size).
struct Layout {
  Value root;
  Dim offset;
  std::array<Dim, 4> ne;
  std::array<ElementCount, 4> nb;
};

ElementCount countOf(const Dim &d) {
  ElementCount e;
  e.multiply(d);
  return e;
}

/// ggml_nbytes-style strides of a contiguous tensor with `ne` and elements of `bytes` bytes.
std::array<ElementCount, 4> packedStrides(const std::array<Dim, 4> &ne, uint64_t bytes) {
  std::array<ElementCount, 4> nb;
  nb[0] = countOf(Dim::of(static_cast<int64_t>(bytes)));
  for (unsigned i = 1; i < 4; ++i) {
    nb[i] = nb[i - 1];
    nb[i].multiply(ne[i - 1]);
  }
  return nb;
}

/// ggml_is_contiguous for every binding of the symbols: each dimension not statically 1 at the
/// packed stride of the dimensions before it (ggml skips dimensions of size 1).
bool isContiguous(const Layout &l, uint64_t bytes) {
  ElementCount next = countOf(Dim::of(static_cast<int64_t>(bytes)));
  for (unsigned i = 0; i < 4; ++i) {
    if (l.ne[i].is(1))
      continue;
    if (l.nb[i] != next)
      return false;
    next.multiply(l.ne[i]);
  }
  return true;
}

/// The layout of `value` through the view ops that make it (ggml.view, permute, transpose,
/// reshape) and through the results of other splits, or std::nullopt for a block element type
/// (strides of blocks are not modelled) or a reshape of a source not in order.
std::optional<Layout> layoutOf(Value value) {
  auto type = dyn_cast<ggml::TensorType>(value.getType());
  if (!type || type.getBlockSize() != 1)
    return std::nullopt;
  const uint64_t bytes = type.getElementBytes();
  Layout l;
  for (unsigned i = 0; i < 4; ++i)
    l.ne[i] = type.getNe(i);
  Operation *def = value.getDefiningOp();
  if (auto view = dyn_cast_or_null<ggml::ViewOp>(def)) {
    std::optional<Layout> src = layoutOf(view.getA());
    if (!src)
      return std::nullopt;
    l.root = src->root;
    l.offset = src->offset + (view.getOffset() ? view.getOffset()->getValue() : Dim());
    l.nb[0] = countOf(Dim::of(static_cast<int64_t>(bytes)));
    ArrayRef<Dim> nb = view.getNb().getValues();
    for (unsigned i = 1; i < 4; ++i)
      l.nb[i] = countOf(nb[i - 1]);
    return l;
  }
  if (auto permute = dyn_cast_or_null<ggml::PermuteOp>(def)) {
    std::optional<Layout> src = layoutOf(permute.getA());
    if (!src)
      return std::nullopt;
    l = *src;
    ArrayRef<int32_t> axes = permute.getAxes();
    for (unsigned i = 0; i < 4; ++i) {
      l.ne[axes[i]] = src->ne[i];
      l.nb[axes[i]] = src->nb[i];
    }
    return l;
  }
  if (auto transpose = dyn_cast_or_null<ggml::TransposeOp>(def)) {
    std::optional<Layout> src = layoutOf(transpose.getA());
    if (!src)
      return std::nullopt;
    l = *src;
    std::swap(l.ne[0], l.ne[1]);
    std::swap(l.nb[0], l.nb[1]);
    return l;
  }
  if (auto reshape = dyn_cast_or_null<ggml::ReshapeOp>(def)) {
    std::optional<Layout> src = layoutOf(reshape.getA());
    if (!src || !isContiguous(*src, bytes))
      return std::nullopt;
    l.root = src->root;
    l.offset = src->offset;
    l.nb = packedStrides(l.ne, bytes);
    return l;
  }
  if (auto split = dyn_cast_or_null<place::SplitOp>(def)) {
    // A result of an earlier split read in place (no split input copy: backends sharing memory,
    // such as ONEDNN's and the CPU's): the tensor the other split yields, with that tensor's
    // strides, e.g. a PERMUTE or a VIEW placed with its source. Its bytes start at the result.
    auto yield = cast<place::YieldOp>(split.getBody().front().getTerminator());
    std::optional<Layout> src =
        layoutOf(yield.getValues()[cast<OpResult>(value).getResultNumber()]);
    if (!src)
      return std::nullopt;
    l.root = value;
    l.nb = src->nb;
    return l;
  }
  // Anything else owns a contiguous tensor: an op's result, a leaf, and a place.copy too (the
  // runtime's split input copy writes a strided source into a contiguous tensor).
  l.root = value;
  l.nb = packedStrides(l.ne, bytes);
  return l;
}

struct ElideContPass : impl::StowageElideContBase<ElideContPass> {
  using StowageElideContBase::StowageElideContBase;

  /// Why `cont` stays, or "" with `*layout` its source's layout.
  std::string refusal(BackendOps &backends, ggml::ContOp cont, Layout *layout) {
    if (std::string why = splitRefusal(cont, cont); !why.empty())
      return why;
    auto type = cast<ggml::TensorType>(cont.getA().getType());
    std::optional<Layout> l = layoutOf(cont.getA());
    if (!l)
      return "the source's layout is not modelled (block type or reshape of a strided view)";
    if (!isContiguous(*l, type.getElementBytes()))
      return "the source is a strided view (not in ggml order)";
    if (Operation *root = l->root.getDefiningOp(); root && isa<ggml::KvCacheOp>(root))
      return "the source is a view of the KV cache (a later store would change what it reads)";
    if (cast<ggml::TensorType>(cont.getType()).getElementType() != type.getElementType())
      return "the result's element type differs";
    OpQuery q;
    q.op = GgmlOp::VIEW;
    std::optional<TensorDesc> dst = backends.describe(cont.getResult());
    std::optional<TensorDesc> src = backends.describe(l->root);
    if (!dst || !src)
      return "a shape cannot be evaluated";
    q.dst = *dst;
    q.src = {*src};
    if (std::string why = backends.refusal(enclosingSplit(cont), q); !why.empty())
      return why;
    *layout = *l;
    return "";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    BackendOps backends(module);
    SmallVector<ggml::ContOp> conts;
    module.walk([&](ggml::ContOp cont) { conts.push_back(cont); });
    for (ggml::ContOp cont : conts) {
      Layout l;
      if (std::string why = refusal(backends, cont, &l); !why.empty()) {
        if (remarks)
          cont.emitRemark() << "CONT kept: " << why;
        continue;
      }
      auto type = cast<ggml::TensorType>(cont.getType());
      std::array<Dim, 4> ne;
      for (unsigned i = 0; i < 4; ++i)
        ne[i] = type.getNe(i);
      std::array<ElementCount, 4> packed = packedStrides(ne, type.getElementBytes());
      SmallVector<Dim, 3> nb;
      for (unsigned i = 1; i < 4; ++i) {
        std::optional<Dim> d = packed[i].asDim();
        if (!d)
          break;
        nb.push_back(*d);
      }
      if (nb.size() != 3) {
        if (remarks)
          cont.emitRemark() << "CONT kept: its strides are not affine in the symbols";
        continue;
      }
      OpBuilder builder(cont);
      MLIRContext *ctx = cont.getContext();
      ggml::DimAttr offset =
          l.offset == Dim() ? ggml::DimAttr() : ggml::DimAttr::get(ctx, l.offset);
      auto view = builder.create<ggml::ViewOp>(cont.getLoc(), type, l.root,
                                               ggml::DimsAttr::get(ctx, nb), offset);
      // The CONT's name, backend and cause: consumers read the view as they read the copy.
      for (NamedAttribute attr : cont->getDiscardableAttrs())
        view->setAttr(attr.getName(), attr.getValue());
      Value source = cont.getA();
      cont.getResult().replaceAllUsesWith(view.getResult());
      cont.erase();
      // The view ops that only fed the copy read nothing now.
      while (Operation *def = source.getDefiningOp()) {
        if (!isa<ggml::ViewOp, ggml::PermuteOp, ggml::TransposeOp, ggml::ReshapeOp>(def) ||
            !def->use_empty())
          break;
        source = def->getOperand(0);
        def->erase();
      }
      ++numElided;
    }
  }
};

} // namespace
} // namespace stowage::compiler
