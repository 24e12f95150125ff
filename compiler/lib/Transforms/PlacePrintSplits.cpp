//===- PlacePrintSplits.cpp - GGML_SCHED_DEBUG-style split report ---------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/scheduler.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace stowage::compiler {

#define GEN_PASS_DEF_PLACEPRINTSPLITS
#include "stowage/Compiler/Transforms/Passes.h.inc"

std::optional<int64_t> evaluateDim(const ggml::Dim &dim, const SymbolBindings &b) {
  const int64_t values[ggml::kNumSyms] = {b.n_tokens, b.n_kv,     b.n_outputs,  b.n_ctx,
                                          b.kv_head,  b.n_kv_swa, b.kv_head_swa};
  int64_t v = dim.c;
  for (unsigned i = 0; i < ggml::kNumSyms; ++i) {
    if (dim.k[i] == 0)
      continue;
    if (values[i] < 0)
      return std::nullopt;
    v += dim.k[i] * values[i];
  }
  return v;
}

std::optional<uint64_t> tensorBytes(ggml::TensorType type, const SymbolBindings &b) {
  uint64_t n[4];
  for (unsigned i = 0; i < 4; ++i) {
    std::optional<int64_t> v = evaluateDim(type.getNe(i), b);
    if (!v || *v < 0)
      return std::nullopt;
    n[i] = static_cast<uint64_t>(*v);
  }
  return n[0] / static_cast<uint64_t>(type.getBlockSize()) * type.getElementBytes() * n[1] * n[2] *
         n[3];
}

namespace {

/// The ggml tensor name of `value`: a node's `name`, a leaf's GGUF / input / cache name, or,
/// for a split result, the name of the value the split yields.
std::string tensorName(Value value) {
  if (auto result = dyn_cast<OpResult>(value)) {
    Operation *op = result.getOwner();
    if (auto split = dyn_cast<place::SplitOp>(op)) {
      auto yield = cast<place::YieldOp>(split.getBody().front().getTerminator());
      return tensorName(yield.getValues()[result.getResultNumber()]);
    }
    if (auto w = dyn_cast<ggml::WeightOp>(op))
      return w.getGgufName().str();
    if (auto in = dyn_cast<ggml::InputOp>(op))
      return in.getInputName().str();
    if (auto kv = dyn_cast<ggml::KvCacheOp>(op))
      return kv.getCacheName().str();
    return ggml::getNodeName(op).str();
  }
  return "";
}

int64_t intAttr(Operation *op, StringRef name) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return -1;
}

struct PlacePrintSplitsPass : impl::PlacePrintSplitsBase<PlacePrintSplitsPass> {
  using PlacePrintSplitsBase::PlacePrintSplitsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    raw_ostream &os = llvm::outs();
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<place::SplitOp> splits(func.getOps<place::SplitOp>());
      if (splits.empty())
        continue;
      SymbolBindings b;
      b.n_tokens = nTokens >= 0 ? nTokens : intAttr(func, "ggml.n_tokens");
      b.n_kv = nKv >= 0 ? nKv : intAttr(func, "ggml.n_kv");
      b.n_outputs = nOutputs >= 0 ? nOutputs : intAttr(func, "ggml.n_outputs");
      b.n_ctx = intAttr(module, "ggml.n_ctx");
      if (func->hasAttr("ggml.n_kv_swa"))
        b.n_kv_swa = intAttr(func, "ggml.n_kv_swa");
      os << "# @" << func.getSymName() << ": " << splits.size()
         << " splits (n_tokens = " << b.n_tokens << ", n_kv = " << b.n_kv << ")\n";
      for (place::SplitOp split : splits) {
        // One input per source: with pipeline parallelism the copies 1..n-1 follow copy 0.
        SmallVector<place::CopyOp> inputs;
        for (place::CopyOp copy : split.getBody().front().getOps<place::CopyOp>())
          if (copy.getCopy() == 0)
            inputs.push_back(copy);
        std::vector<planner::SchedDebugInput> listed;
        for (place::CopyOp copy : inputs) {
          auto type = dyn_cast<ggml::TensorType>(copy.getSource().getType());
          std::optional<uint64_t> bytes = type ? tensorBytes(type, b) : std::nullopt;
          listed.push_back(
              {tensorName(copy.getSource()), bytes ? planner::FormatGgmlSize(*bytes) : "?"});
        }
        os << planner::FormatSchedSplitHeader(split.getIndex(), split.getBackend().getName().str(),
                                              listed);
      }
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace stowage::compiler
