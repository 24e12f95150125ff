//===- stowage-opt.cpp - mlir-opt for Stowage's dialects ------------------===//
//
// Parses, verifies, transforms and prints IR in the ggml and place dialects (plus func, which
// holds @prefill / @decode). Usage as mlir-opt: `stowage-opt in.mlir`, `--emit-bytecode`,
// `--verify-diagnostics`, `--split-input-file`.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();  // canonicalize, cse, ... for pipelines in tests
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, stowage::ggml::GGMLDialect,
                  stowage::place::PlaceDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Stowage optimizer driver (ggml + place dialects)\n", registry));
}
