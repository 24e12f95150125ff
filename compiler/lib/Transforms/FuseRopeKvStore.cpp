//===- FuseRopeKvStore.cpp - ROPE of K and its KV cache store -> one op ----===//
//
// Every RoPE model rotates K (Kcur = ggml_rope_ext(...)) and stores it into the layer's K cache:
// llama.cpp 2026 with llama_kv_cache::cpy_k, ggml_set_rows(k, ggml_reshape_2d(Kcur, n_embd_k_gqa,
// n_tokens), k_idxs); Feb 2025 with ggml_cpy(Kcur, view of the ubatch's cells). Here the store
// and the ROPE become one ggml.rope_set_rows / ggml.rope_cpy: the rotated rows go straight into
// the cache (converted to its type as SET_ROWS / CPY convert them), no Kcur tensor is allocated
// and one node less runs per layer.
//
//===----------------------------------------------------------------------===//

#include "FuseCommon.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEFUSEROPEKVSTORE
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

/// One K store the pass may fuse: the store (a SET_ROWS with the RESHAPE of its rows, or a CPY)
/// and the ROPE before it.
struct KStore {
  Operation *store = nullptr;
  ggml::ReshapeOp reshape; // the SET_ROWS form only
  ggml::RopeOp rope;
};

std::optional<KStore> matchKStore(Operation *op) {
  KStore k;
  k.store = op;
  if (auto store = dyn_cast<ggml::SetRowsOp>(op)) {
    k.reshape = store.getB().getDefiningOp<ggml::ReshapeOp>();
    if (!k.reshape)
      return std::nullopt;
    k.rope = k.reshape.getA().getDefiningOp<ggml::RopeOp>();
  } else if (auto copy = dyn_cast<ggml::CpyOp>(op)) {
    k.rope = copy.getA().getDefiningOp<ggml::RopeOp>();
  }
  if (!k.rope)
    return std::nullopt;
  return k;
}

struct FuseRopeKvStorePass : impl::StowageFuseRopeKvStoreBase<FuseRopeKvStorePass> {
  using StowageFuseRopeKvStoreBase::StowageFuseRopeKvStoreBase;

  /// Why `k` stays as it is, or "".
  std::string refusal(BackendOps &backends, KStore k) {
    if (std::string why = splitRefusal(k.rope, k.store); !why.empty())
      return why;
    if (k.reshape)
      if (std::string why = splitRefusal(k.reshape, k.store); !why.empty())
        return why;
    if (!k.rope.getResult().hasOneUse() || (k.reshape && !k.reshape.getResult().hasOneUse()))
      return "the rotated K has other users";
    auto setRows = dyn_cast<ggml::SetRowsOp>(k.store);
    if (setRows) {
      // The rows are the rotated heads of each token: [head_dim * n_head, n_tokens].
      auto rotated = cast<ggml::TensorType>(k.rope.getType());
      auto rows = cast<ggml::TensorType>(k.reshape.getType());
      if (!rotated.getNe(0).isStatic() || !rotated.getNe(1).isStatic() ||
          !rows.getNe(0).is(rotated.getNe(0).size() * rotated.getNe(1).size()) ||
          rows.getNe(1) != rotated.getNe(2) || !rows.getNe(2).is(1) || !rows.getNe(3).is(1) ||
          !rotated.getNe(3).is(1))
        return "the stored rows are not the rotated heads of each token";
    }
    OpQuery q;
    q.op = setRows ? GgmlOp::ROPE_SET_ROWS : GgmlOp::ROPE_CPY;
    std::optional<TensorDesc> dst = backends.describe(k.store->getResult(0));
    std::optional<TensorDesc> x = backends.describe(k.rope.getA());
    std::optional<TensorDesc> pos = backends.describe(k.rope.getPos());
    std::optional<TensorDesc> cache =
        backends.describe(setRows ? setRows.getA() : cast<ggml::CpyOp>(k.store).getB());
    if (!dst || !x || !pos || !cache)
      return "a shape cannot be evaluated";
    q.dst = *dst;
    q.src = {*x, *pos, *cache};
    if (setRows) {
      std::optional<TensorDesc> idx = backends.describe(setRows.getC());
      if (!idx)
        return "a shape cannot be evaluated";
      q.src.push_back(*idx);
    }
    if (Value ff = k.rope.getFreqFactors()) {
      std::optional<TensorDesc> f = backends.describe(ff);
      if (!f)
        return "a shape cannot be evaluated";
      q.src.push_back(*f);
    }
    return backends.refusal(enclosingSplit(k.store), q);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    BackendOps backends(module);
    SmallVector<KStore> found;
    module.walk([&](Operation *op) {
      if (std::optional<KStore> k = matchKStore(op))
        found.push_back(*k);
    });
    for (KStore &k : found) {
      const bool setRows = isa<ggml::SetRowsOp>(k.store);
      if (std::string why = refusal(backends, k); !why.empty()) {
        if (remarks)
          k.store->emitRemark() << (setRows ? "ROPE + SET_ROWS" : "ROPE + CPY")
                                << " not fused: " << why;
        continue;
      }
      ggml::RopeOp rope = k.rope;
      OpBuilder builder(k.store);
      Operation *fused;
      if (auto store = dyn_cast<ggml::SetRowsOp>(k.store))
        fused = builder.create<ggml::RopeSetRowsOp>(
            store.getLoc(), store.getType(), rope.getModeAttr(), rope.getA(), rope.getPos(),
            store.getA(), store.getC(), rope.getFreqFactors(), rope.getNDimsAttr(),
            rope.getNCtxOrigAttr(), rope.getFreqBaseAttr(), rope.getFreqScaleAttr(),
            rope.getExtFactorAttr(), rope.getAttnFactorAttr(), rope.getBetaFastAttr(),
            rope.getBetaSlowAttr(), rope.getNOffsAttr());
      else
        fused = builder.create<ggml::RopeCpyOp>(
            k.store->getLoc(), k.store->getResult(0).getType(), rope.getModeAttr(), rope.getA(),
            rope.getPos(), cast<ggml::CpyOp>(k.store).getB(), rope.getFreqFactors(),
            rope.getNDimsAttr(), rope.getNCtxOrigAttr(), rope.getFreqBaseAttr(),
            rope.getFreqScaleAttr(), rope.getExtFactorAttr(), rope.getAttnFactorAttr(),
            rope.getBetaFastAttr(), rope.getBetaSlowAttr(), rope.getNOffsAttr());
      // The store's name, backend and cause: the fused node writes the cache as it did.
      for (NamedAttribute attr : k.store->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      k.store->getResult(0).replaceAllUsesWith(fused->getResult(0));
      k.store->erase();
      if (k.reshape)
        k.reshape.erase();
      rope.erase();
      ++numFused;
    }
  }
};

} // namespace
} // namespace stowage::compiler
