//===- Pipeline.cpp - the compiler's pass pipeline ------------------------===//

#include "stowage/Compiler/Pipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "stowage/Compiler/Transforms/Passes.h"

namespace stowage::compiler {

void buildStowagePipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  // The rewriting passes, in the order they run. Each rewrites only inside one place.split (same
  // backend, same split inputs and results) and only where the backend has the op it makes;
  // each has its own lit test in test/lit/Passes. Add a pass here, one line each:
  if (options.fuse) {
    pm.addPass(createStowageFuseRmsNormMul());
    pm.addPass(createStowageFuseMulMatGlu());
    pm.addPass(createStowageFuseMulMatQkv());
    pm.addPass(createStowageFuseRopeKvStore());
    pm.addPass(createStowageElideCont());
  }
}

void registerStowagePipeline() {
  mlir::PassPipelineRegistration<>(
      "stowage-pipeline", "The compiler's rewriting passes, as plan-model runs them",
      [](mlir::OpPassManager &pm) { buildStowagePipeline(pm, PipelineOptions()); });
}

} // namespace stowage::compiler
