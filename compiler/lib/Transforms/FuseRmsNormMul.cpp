//===- FuseRmsNormMul.cpp - RMS_NORM then MUL -> RMS_NORM_MUL -------------===//
//
// Every llama-style block normalizes with ggml_rms_norm and multiplies by the norm weight
// (llama.cpp build_norm: `attn_norm-N` = ggml_mul(ggml_rms_norm(x), w)); ggml-cuda fuses the pair
// at run time (ggml_cuda_can_fuse). Here the pair becomes one ggml.rms_norm_mul at compile time,
// for every backend that has it: one node, one pass over the row and one thread barrier fewer.
//
//===----------------------------------------------------------------------===//

#include "FuseCommon.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEFUSERMSNORMMUL
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

struct FuseRmsNormMulPass : impl::StowageFuseRmsNormMulBase<FuseRmsNormMulPass> {
  using StowageFuseRmsNormMulBase::StowageFuseRmsNormMulBase;

  /// Why `mul` (whose a is `norm`) stays as it is, or "".
  std::string refusal(BackendOps &backends, ggml::RmsNormOp norm, ggml::MulOp mul) {
    if (std::string why = splitRefusal(norm, mul); !why.empty())
      return why;
    if (!norm.getResult().hasOneUse())
      return "the RMS_NORM result has other users";
    OpQuery q;
    q.op = GgmlOp::RMS_NORM_MUL;
    std::optional<TensorDesc> dst = backends.describe(mul.getResult());
    std::optional<TensorDesc> a = backends.describe(norm.getA());
    std::optional<TensorDesc> w = backends.describe(mul.getB());
    if (!dst || !a || !w)
      return "a shape cannot be evaluated";
    q.dst = *dst;
    q.src = {*a, *w};
    return backends.refusal(enclosingSplit(mul), q);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    BackendOps backends(module);
    SmallVector<ggml::MulOp> muls;
    module.walk([&](ggml::MulOp mul) {
      if (mul.getA().getDefiningOp<ggml::RmsNormOp>())
        muls.push_back(mul);
    });
    for (ggml::MulOp mul : muls) {
      auto norm = mul.getA().getDefiningOp<ggml::RmsNormOp>();
      if (std::string why = refusal(backends, norm, mul); !why.empty()) {
        if (remarks)
          mul.emitRemark() << "RMS_NORM + MUL not fused: " << why;
        continue;
      }
      OpBuilder builder(mul);
      auto fused = builder.create<ggml::RmsNormMulOp>(mul.getLoc(), mul.getType(), norm.getA(),
                                                      mul.getB(), norm.getEpsAttr());
      // The MUL's name (`attn_norm-0`), backend and cause: the fused node is the one the graph
      // reads on.
      for (NamedAttribute attr : mul->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      mul.getResult().replaceAllUsesWith(fused.getResult());
      mul.erase();
      norm.erase();
      ++numFused;
    }
  }
};

} // namespace
} // namespace stowage::compiler
