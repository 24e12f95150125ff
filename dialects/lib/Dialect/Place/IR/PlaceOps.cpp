//===- PlaceOps.cpp - split / yield / copy --------------------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace stowage::place;

#define GET_OP_CLASSES
#include "stowage/Dialect/Place/IR/PlaceOps.cpp.inc"

LogicalResult SplitOp::verify() {
  // I32Attr is signless: read the index as a signed number.
  int32_t index = static_cast<int32_t>(getIndex());
  if (index < 0)
    return emitOpError() << "index must be >= 0, got " << index;
  if ((*this)->getParentOfType<SplitOp>())
    return emitOpError() << "splits do not nest";
  // ggml_backend_sched numbers splits in graph order.
  for (Operation *prev = (*this)->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto split = dyn_cast<SplitOp>(prev)) {
      if (static_cast<int32_t>(split.getIndex()) >= index)
        return emitOpError() << "split " << index << " follows split "
                             << static_cast<int32_t>(split.getIndex())
                             << "; indices must increase in graph order";
      break;
    }
  }
  if (failed(verifyBackendIsDevice(*this, getBackend())))
    return failure();
  auto yield = cast<YieldOp>(getBody().front().getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from the split's " << getNumResults()
                         << " result types";
  return success();
}

LogicalResult CopyOp::verify() {
  if (failed(verifyBackendIsDevice(*this, getBackend())))
    return failure();
  auto split = (*this)->getParentOfType<SplitOp>();
  if (!split)
    return success();
  if (split.getBackend() != getBackend())
    return emitOpError() << "copies to " << getBackend() << " inside a split on "
                         << split.getBackend() << "; a split's inputs go to its backend";
  // A split input comes from an earlier split, or is a view (which computes nothing) of such a
  // value: ggml copies a view's bytes, which an earlier split wrote.
  // Op verifiers run before dominance is checked, so a view chain may loop back on itself (a view
  // of its own result): a visited set ends the walk, and dominance verification then reports it.
  Value source = getSource();
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (Operation *def = source.getDefiningOp()) {
    if (!split->isAncestor(def) || !seen.insert(def).second)
      break;
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      return emitOpError() << "source is computed inside the same split; only values from "
                              "earlier splits (or views of them) are split inputs";
    source = view.getViewSource();
  }
  return success();
}
