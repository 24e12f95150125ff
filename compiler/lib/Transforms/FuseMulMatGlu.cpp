//===- FuseMulMatGlu.cpp - gate and up MUL_MATs with their GLU -> MUL_MAT_GLU -===//
//
// Every gated FFN multiplies the same activations by ffn_gate and ffn_up and joins the two with a
// GLU (llama.cpp build_ffn LLM_FFN_PAR: 2026 ggml_swiglu_split / ggml_geglu_split, Feb 2025
// ggml_silu / ggml_gelu then ggml_mul). Here the two products and the GLU become one
// ggml.mul_mat_glu: the activations converted to the weights' vec_dot type once, both products in
// one thread team, the GLU applied as each tile is produced (cpu::MulMatGlu). The weights stay two
// tensors where the planner put them.
//
//===----------------------------------------------------------------------===//

#include "FuseCommon.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_STOWAGEFUSEMULMATGLU
#include "stowage/Compiler/Transforms/Passes.h.inc"

namespace {

/// One FFN-in the pass may fuse: the GLU op (`last`, whose result the fused op replaces), the
/// activation op of the Feb 2025 form (null for the 2026 GLU), the two products and the kind.
struct FfnIn {
  Operation *last = nullptr;
  Operation *act = nullptr;
  ggml::MulMatOp gate, up;
  ggml::MulMatGluKind kind = ggml::MulMatGluKind::swiglu;
};

/// The FFN-in that ends at `op`, if `op` is a split-form swiglu / geglu GLU of two MUL_MATs, or a
/// MUL of a SILU / GELU of a MUL_MAT (as a) and a MUL_MAT (as b).
std::optional<FfnIn> matchFfnIn(Operation *op) {
  FfnIn f;
  f.last = op;
  Value gate, up;
  if (auto glu = dyn_cast<ggml::GluOp>(op)) {
    if (!glu.getB() || glu.getSwapped() ||
        (glu.getOp() != ggml::GluKind::swiglu && glu.getOp() != ggml::GluKind::geglu))
      return std::nullopt;
    f.kind = glu.getOp() == ggml::GluKind::swiglu ? ggml::MulMatGluKind::swiglu
                                                  : ggml::MulMatGluKind::geglu;
    gate = glu.getA();
    up = glu.getB();
  } else if (auto mul = dyn_cast<ggml::MulOp>(op)) {
    Operation *act = mul.getA().getDefiningOp();
    if (auto silu = dyn_cast_or_null<ggml::SiluOp>(act)) {
      f.kind = ggml::MulMatGluKind::silu_mul;
      gate = silu->getOperand(0);
    } else if (auto gelu = dyn_cast_or_null<ggml::GeluOp>(act)) {
      f.kind = ggml::MulMatGluKind::gelu_mul;
      gate = gelu->getOperand(0);
    } else {
      return std::nullopt;
    }
    f.act = act;
    up = mul.getB();
  } else {
    return std::nullopt;
  }
  f.gate = gate.getDefiningOp<ggml::MulMatOp>();
  f.up = up.getDefiningOp<ggml::MulMatOp>();
  if (!f.gate || !f.up)
    return std::nullopt;
  return f;
}

struct FuseMulMatGluPass : impl::StowageFuseMulMatGluBase<FuseMulMatGluPass> {
  using StowageFuseMulMatGluBase::StowageFuseMulMatGluBase;

  /// Why `f` stays as it is, or "".
  std::string refusal(BackendOps &backends, FfnIn f) {
    for (Operation *op : {f.gate.getOperation(), f.up.getOperation(), f.act})
      if (op)
        if (std::string why = splitRefusal(op, f.last); !why.empty())
          return why;
    if (f.gate.getB() != f.up.getB())
      return "the gate and up MUL_MATs read different activations";
    if (f.gate == f.up)
      return "gate and up are one MUL_MAT";
    if (!f.gate.getResult().hasOneUse() || !f.up.getResult().hasOneUse() ||
        (f.act && !f.act->getResult(0).hasOneUse()))
      return "an intermediate result has other users";
    OpQuery q;
    q.op = GgmlOp::MUL_MAT_GLU;
    std::optional<TensorDesc> dst = backends.describe(f.last->getResult(0));
    std::optional<TensorDesc> gate = backends.describe(f.gate.getA());
    std::optional<TensorDesc> x = backends.describe(f.gate.getB());
    std::optional<TensorDesc> up = backends.describe(f.up.getA());
    if (!dst || !gate || !x || !up)
      return "a shape cannot be evaluated";
    if (gate->type != up->type || gate->ne != up->ne || gate->buft != up->buft)
      return "the gate and up weights differ in type, shape or buffer type";
    q.dst = *dst;
    q.src = {*gate, *x, *up};
    return backends.refusal(enclosingSplit(f.last), q);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    BackendOps backends(module);
    SmallVector<FfnIn> found;
    module.walk([&](Operation *op) {
      if (std::optional<FfnIn> f = matchFfnIn(op))
        found.push_back(*f);
    });
    for (FfnIn &f : found) {
      if (std::string why = refusal(backends, f); !why.empty()) {
        if (remarks)
          f.last->emitRemark() << "gate, up and GLU not fused: " << why;
        continue;
      }
      OpBuilder builder(f.last);
      auto fused =
          builder.create<ggml::MulMatGluOp>(f.last->getLoc(), f.last->getResult(0).getType(),
                                            f.kind, f.gate.getA(), f.gate.getB(), f.up.getA());
      // The GLU's (or MUL's) name, backend and cause: the fused node is the one the graph reads on.
      for (NamedAttribute attr : f.last->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      f.last->getResult(0).replaceAllUsesWith(fused.getResult());
      f.last->erase();
      if (f.act)
        f.act->erase();
      f.gate->erase();
      f.up->erase();
      ++numFused;
    }
  }
};

} // namespace
} // namespace stowage::compiler
