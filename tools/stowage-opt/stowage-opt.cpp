//===- stowage-opt.cpp - mlir-opt for Stowage's dialects ------------------===//
//
// Parses, verifies, transforms and prints IR in the ggml and place dialects (plus func, which
// holds @pp / @tg). Usage as mlir-opt: `stowage-opt in.mlir`, `--emit-bytecode`,
// `--verify-diagnostics`, `--split-input-file`, pass pipelines.
//
// `--import-gguf FILE` (when built with the compiler) imports a GGUF model instead of reading IR:
// the module of func @pp / func @tg then goes through the same pipeline and printer.
// `--gguf-n-ctx`, `--gguf-n-ubatch`, `--gguf-n-batch`, `--gguf-flash-attn[=on|off|auto]`,
// `--gguf-swa-full`, `--gguf-llamacpp-compat feb25|2026` set the context the graphs are built for;
// `--place-devices LIST [--place-ngl N] [--place-ot REGEX=BUFT] [--place-no-kv-offload]
// [--place-no-mmap] [--place-registry DIR] [--place-fit-target MIB]` also places the model
// (planner::Plan) and records devices, buffer types, backends, causes, splits and split
// input copies in the place dialect.
//
// `--import-plan FILE` imports the placed graphs of a plan file (plan-model's output, read through
// the runtime's plan verifier) into the same dialects: what the placed GGUF import records, taken
// from the plan.
//
//===----------------------------------------------------------------------===//

#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/version.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#ifdef STOWAGE_HAVE_COMPILER
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/Compiler/Import/ImportPlan.h"
#include "stowage/Compiler/Pipeline.h"
#include "stowage/Compiler/Transforms/Passes.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/registry.h"
#endif

namespace cl = llvm::cl;

#ifdef STOWAGE_HAVE_COMPILER
static cl::opt<std::string>
    importGguf("import-gguf",
               cl::desc("Import this GGUF model (func @pp, func @tg) instead of "
                        "reading IR from the input file"),
               cl::value_desc("file"), cl::init(""));
static cl::opt<std::string>
    importPlan("import-plan",
               cl::desc("Import the placed graphs of this plan file (func @pp, func @tg, the "
                        "place dialect) instead of reading IR from the input file"),
               cl::value_desc("file"), cl::init(""));
static cl::opt<unsigned>
    ggufNCtx("gguf-n-ctx", cl::desc("--import-gguf: context size (0: n_ctx_train)"), cl::init(0));
static cl::opt<bool>
    ggufSwaFull("gguf-swa-full",
                cl::desc("--import-gguf: full-size SWA cache of interleaved sliding-window models "
                         "(plan-model --swa-full)"),
                cl::init(false));
static cl::opt<unsigned> ggufNUbatch("gguf-n-ubatch",
                                     cl::desc("--import-gguf: ubatch size (n_tokens of @pp)"),
                                     cl::init(512));
static cl::opt<std::string>
    placeDevices("place-devices",
                 cl::desc("--import-gguf: place the model on these devices (registry keys or "
                          "manifest files, comma-separated, with a CPU) and record the placement "
                          "in the place dialect"),
                 cl::init(""));
static cl::list<std::string> placeRegistry("place-registry",
                                           cl::desc("--place-devices: a registry folder"));
static cl::opt<int> placeNgl("place-ngl",
                             cl::desc("--place-devices: n_gpu_layers (-ngl; <= -2: all, -1: auto, "
                                      "plan-model's --fit)"),
                             cl::init(0));
static cl::opt<double>
    placeFitTarget("place-fit-target",
                   cl::desc("--place-ngl -1: MiB kept free on each GPU (plan-model --fit-target)"),
                   cl::init(1024));
static cl::list<std::string>
    placeOverrides("place-ot", cl::desc("--place-devices: tensor buffer-type overrides "
                                        "REGEX=BUFT[,...] (-ot)"));
static cl::opt<bool> placeNoKvOffload("place-no-kv-offload",
                                      cl::desc("--place-devices: keep the KV cache and the "
                                               "attention on the CPU (-nkvo)"),
                                      cl::init(false));
static cl::opt<bool> placeNoMmap("place-no-mmap",
                                 cl::desc("--place-devices: load weights instead of mapping them"),
                                 cl::init(false));
static cl::opt<std::string> ggufFlashAttn(
    "gguf-flash-attn", cl::ValueOptional,
    cl::desc("--import-gguf: llama.cpp's -fa: on (given alone; ggml.flash_attn_ext over an "
             "untransposed V cache, n_ctx padded to 256), off, or auto (with --place-devices: "
             "planner::Plan keeps it when every layer's attention runs on the layer's device)"),
    cl::value_desc("on|off|auto"), cl::init("off"));
static cl::opt<unsigned> ggufNBatch("gguf-n-batch", cl::desc("--import-gguf: logical batch size"),
                                    cl::init(2048));
static cl::opt<std::string> ggufLlamacppCompat(
    "gguf-llamacpp-compat",
    cl::desc("--import-gguf: the llama.cpp the graphs and the placement follow (plan-model "
             "--llamacpp-compat): 2026 (llama.cpp of 2026-09-28, the default) or feb25 (February "
             "2025, the seed's)"),
    cl::value_desc("feb25|2026"),
    cl::init(stowage::planner::LlamacppCompatName(stowage::planner::kDefaultLlamacppCompat)));

/// Prints the import's diagnostics, one line each ("stowage-opt: error: <file>: ..."); a node's
/// name is in the message or its NameLoc (the importer's node NameLoc around its graph's), after
/// the file (the GGUF or plan file) and the graph, as the runtime names a plan's nodes
/// ("<file>: graph pp node '<name>': ..."). Warnings (unused tensors) are printed too.
static void printImportDiagnostics(mlir::MLIRContext &context) {
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) {
    const char *severity = diag.getSeverity() == mlir::DiagnosticSeverity::Error     ? "error"
                           : diag.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning"
                                                                                     : "note";
    llvm::errs() << "stowage-opt: " << severity << ": ";
    const std::string message = diag.str();
    mlir::Location loc = diag.getLocation();
    // An op's location: its node's NameLoc fused with its tensor id (getTensorLoc).
    if (auto fused = llvm::dyn_cast<mlir::FusedLoc>(loc); fused && fused.getLocations().size() == 1)
      loc = fused.getLocations().front();
    if (auto name = llvm::dyn_cast<mlir::NameLoc>(loc)) {
      mlir::Location inner = name.getChildLoc();
      llvm::StringRef graph;
      if (auto g = llvm::dyn_cast<mlir::NameLoc>(inner)) {
        graph = g.getName().getValue();
        inner = g.getChildLoc();
      }
      if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(inner);
          file && !file.getFilename().empty())
        llvm::errs() << file.getFilename().getValue() << ": ";
      if (!graph.empty())
        llvm::errs() << "graph " << graph << " ";
      if (!llvm::StringRef(message).starts_with("node '"))
        llvm::errs() << "node '" << name.getName().getValue() << "': ";
    }
    llvm::errs() << message << "\n";
    return mlir::success();
  });
}

/// An imported module as textual IR for MlirOptMain (named `name`); null for a failed import.
static std::unique_ptr<llvm::MemoryBuffer> moduleToBuffer(mlir::ModuleOp module,
                                                          llvm::StringRef name) {
  if (!module)
    return nullptr;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*pretty=*/false));
  return llvm::MemoryBuffer::getMemBufferCopy(text, name);
}

/// Imports the plan file as textual IR for MlirOptMain; null after reporting an error.
static std::unique_ptr<llvm::MemoryBuffer> importPlanToBuffer(mlir::DialectRegistry &registry) {
  mlir::MLIRContext context(registry);
  printImportDiagnostics(context);
  auto module = stowage::compiler::importPlanFile(&context, importPlan);
  return moduleToBuffer(module.get(), importPlan);
}

/// Imports the GGUF file as textual IR for MlirOptMain; null after reporting an error.
static std::unique_ptr<llvm::MemoryBuffer> importToBuffer(mlir::DialectRegistry &registry) {
  mlir::MLIRContext context(registry);
  printImportDiagnostics(context);
  stowage::planner::ContextConfig config;
  config.n_ctx = ggufNCtx;
  config.n_ubatch = ggufNUbatch;
  config.n_batch = ggufNBatch;
  config.swa_full = ggufSwaFull;
  auto compat = stowage::planner::ParseLlamacppCompat(ggufLlamacppCompat);
  if (!compat.ok()) {
    llvm::errs() << "stowage-opt: error: --gguf-llamacpp-compat: " << compat.status().message()
                 << "\n";
    return nullptr;
  }
  config.llamacpp_compat = *compat;
  // -fa as plan-model reads it (true/false/1/0: the bool this option was).
  const std::string fa = ggufFlashAttn.getNumOccurrences() > 0 && ggufFlashAttn.empty()
                             ? std::string("on")
                             : ggufFlashAttn.getValue();
  const bool faAuto = fa == "auto";
  if (!faAuto && fa != "on" && fa != "off" && fa != "true" && fa != "false" && fa != "1" &&
      fa != "0") {
    llvm::errs() << "stowage-opt: error: --gguf-flash-attn=" << fa
                 << ": expected on, off or auto\n";
    return nullptr;
  }
  if (faAuto && placeDevices.empty()) {
    llvm::errs() << "stowage-opt: error: --gguf-flash-attn=auto decides with the placement: give "
                    "--place-devices\n";
    return nullptr;
  }
  config.flash_attn = fa == "on" || fa == "true" || fa == "1" || faAuto;
  // llama_init_from_model's n_batch line, as plan-model prints it (planner::ResolvePlanContext, the
  // resolution the import and planner::Plan make). A file that cannot be read is left to the
  // import, which reports it.
  if (auto file = stowage::GgufFile::Open(importGguf); file.ok())
    if (auto hp = stowage::planner::ReadHParams(**file); hp.ok())
      (void)stowage::planner::ResolvePlanContext(
          *hp, importGguf, config, [](const stowage::planner::PlanMessage &m) {
            if (m.kind == stowage::planner::PlanMessageKind::kBatchRaised)
              llvm::errs() << "stowage-opt: warning: " << m.text << "\n";
          });
  stowage::compiler::ImportPlacement placement;
  placement.devices = placeDevices;
  placement.registry_dirs = stowage::planner::RegistrySearchDirs(
      {placeRegistry.begin(), placeRegistry.end()}, STOWAGE_SHIPPED_REGISTRY_DIR, *compat);
  // llama.cpp's -ngl values, as plan-model: <= -2 is all layers; -1 (auto) is plan-model's --fit.
  if (!(placeFitTarget >= 0 && placeFitTarget <= 1048576)) {
    llvm::errs() << "stowage-opt: error: --place-fit-target "
                 << llvm::formatv("{0}", placeFitTarget.getValue())
                 << ": expected MiB from 0 to 1048576\n";
    return nullptr;
  }
  placement.fit = placeNgl == -1;
  placement.fit_target = static_cast<uint64_t>(placeFitTarget * 1048576.0);
  placement.options.n_gpu_layers = placeNgl <= -2 ? stowage::planner::kAllGpuLayers : int(placeNgl);
  placement.options.offload_kqv = !placeNoKvOffload;
  placement.options.use_mmap = !placeNoMmap;
  placement.flash_attn_auto = faAuto;
  for (const std::string &ot : placeOverrides) {
    auto parsed = stowage::planner::ParseTensorOverrides(ot);
    if (!parsed.ok()) {
      llvm::errs() << "stowage-opt: error: " << parsed.status().message() << "\n";
      return nullptr;
    }
    placement.options.overrides.insert(placement.options.overrides.end(), parsed->begin(),
                                       parsed->end());
  }
  auto module = stowage::compiler::importGgufFile(&context, importGguf, config,
                                                  placeDevices.empty() ? nullptr : &placement);
  return moduleToBuffer(module.get(), importGguf);
}
#endif

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --version: Stowage's one line, as every other tool prints it (tools/common/llama_args.h).
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "stowage-opt " << stowage_version_string() << "\n"; });
  mlir::registerTransformsPasses(); // canonicalize, cse, ... for pipelines in tests
#ifdef STOWAGE_HAVE_COMPILER
  stowage::compiler::registerStowageCompilerPasses();
  stowage::compiler::registerStowagePipeline();
#endif
  mlir::DialectRegistry registry;
  registry
      .insert<mlir::func::FuncDialect, stowage::ggml::GGMLDialect, stowage::place::PlaceDialect>();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "Stowage optimizer driver (ggml + place dialects)\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> input;
#ifdef STOWAGE_HAVE_COMPILER
  if (!importGguf.empty() && !importPlan.empty()) {
    llvm::errs() << "stowage-opt: error: --import-gguf and --import-plan both given: expected one "
                    "input\n";
    return EXIT_FAILURE;
  }
  if (!importGguf.empty() || !importPlan.empty()) {
    input = importGguf.empty() ? importPlanToBuffer(registry) : importToBuffer(registry);
    if (!input)
      return EXIT_FAILURE;
  }
#endif
  std::string error;
  if (!input) {
    input = mlir::openInputFile(inputFilename, &error);
    if (!input) {
      llvm::errs() << error << "\n";
      return EXIT_FAILURE;
    }
  }
  // -o never names an input: the IR file (mapped while it is parsed: truncating it faulted) or the
  // imported model (it was replaced by the IR text).
  auto sameFile = [](const std::string &a, const std::string &b) {
    bool same = false;
    return a != "-" && b != "-" && !a.empty() && !b.empty() &&
           !llvm::sys::fs::equivalent(a, b, same) && same;
  };
  std::string inputPath = inputFilename;
#ifdef STOWAGE_HAVE_COMPILER
  if (!importGguf.empty())
    inputPath = importGguf;
  if (!importPlan.empty())
    inputPath = importPlan;
#endif
  if (sameFile(outputFilename, inputPath)) {
    llvm::errs() << "stowage-opt: error: -o " << outputFilename << " is the input file "
                 << inputPath << " (writing the output would replace it)\n";
    return EXIT_FAILURE;
  }
  // The output is rendered in memory and written only after a successful run, through
  // stowage::AtomicFile (as plan-model writes plans): a failed run leaves an existing -o file as it
  // was and never removes anything; a symbolic link is followed (its target is replaced, the link
  // stays); a replaced file keeps its mode; /dev/stdout, FIFOs and devices are written in place;
  // short temporary names, so any valid file name works.
  std::string text;
  llvm::raw_string_ostream os(text);
  if (mlir::failed(mlir::MlirOptMain(os, std::move(input), registry, config)))
    return EXIT_FAILURE;
  os.flush();
  if (outputFilename == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      llvm::errs() << "stowage-opt: error: cannot write standard output: "
                   << llvm::outs().error().message() << "\n";
      llvm::outs().clear_error();
      return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
  }
  // A plan file there (e.g. the --import-plan input under another name) must not be replaced by IR
  // text. (Regular files only: opening a FIFO to read it would block.)
  if (auto existing =
          llvm::sys::fs::is_regular_file(outputFilename)
              ? llvm::MemoryBuffer::getFileSlice(outputFilename, 8, 0)
              : llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>>(std::errc::not_supported);
      existing && (*existing)->getBufferSize() == 8 &&
      (*existing)->getBuffer().substr(4) == "STWP") {
    llvm::errs() << "stowage-opt: error: -o " << outputFilename
                 << " is a Stowage plan; writing the IR would replace it\n";
    return EXIT_FAILURE;
  }
  auto file = stowage::AtomicFile::Create(outputFilename);
  stowage::Status st = file.ok() ? file->Write(text.data(), text.size()) : file.status();
  if (st.ok())
    st = file->Commit();
  if (!st.ok()) {
    llvm::errs() << "stowage-opt: error: " << st.message() << "\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
