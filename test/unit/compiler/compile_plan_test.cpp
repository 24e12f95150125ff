// The compiler stage on planned models: with no rewriting pass, import -> pipeline -> export ->
// memory plan gives the planner's plan byte for byte; what a pass changes in the IR is what the
// exported plan holds (and the runtime's verifier accepts it).
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "stowage/Compiler/CompilePlan.h"
#include "stowage/Compiler/Export/ExportModelGraphs.h"
#include "stowage/Compiler/Import/ImportModelGraphs.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/plan_export.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/plan.h"
#include "test_paths.h"

namespace stowage::compiler {
namespace {

/// The registry's h200 and cpu manifests (plan-model --device h200,cpu).
std::vector<planner::DeviceManifest> Machine() {
  auto reg = planner::Registry::Open({STOWAGE_SHIPPED_REGISTRY_DIR});
  if (!reg.ok()) return {};
  auto m = reg->MakeDevices("h200,cpu");
  return m.ok() ? *m : std::vector<planner::DeviceManifest>();
}

std::vector<std::string> SharedModels() {
  std::vector<std::string> out;
  if (DIR* d = opendir(test::ModelsDir().c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".gguf") out.push_back(test::ModelPath(n));
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<planner::PlanResult> PlanModel(const GgufFile& gguf, int ngl) {
  planner::PlanRequest req;
  req.context.n_ctx = 256;
  req.placement.n_gpu_layers = ngl;
  req.fit_check = false;
  req.flags = "compile_plan_test -ngl " + std::to_string(ngl);
  return planner::Plan(gguf, Machine(), req);
}

// Every shared model at -ngl 0 / 4 / 99 on h200,cpu (CPU only, a split between CPU and GPU, all
// on the GPU; pipeline copies where two backends share the graph): the compiled plan is the
// planner's plan, byte for byte.
TEST(CompilePlan, WithoutRewritesGivesThePlannersPlanByteForByte) {
  ASSERT_FALSE(Machine().empty());
  const std::vector<std::string> models = SharedModels();
  if (models.empty()) GTEST_SKIP() << "no shared models in " << test::ModelsDir();
  int compared = 0;
  for (const std::string& path : models) {
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status().message();
    for (int ngl : {0, 4, 99}) {
      auto planned = PlanModel(**gguf, ngl);
      ASSERT_TRUE(planned.ok()) << path << ": " << planned.status().message();
      ASSERT_FALSE(planned->bytes.empty());
      PipelineOptions no_rewrites;
      no_rewrites.fuse = false;
      auto compiled =
          CompilePlan(**gguf, *planned, "compile_plan_test -ngl " + std::to_string(ngl), no_rewrites);
      ASSERT_TRUE(compiled.ok()) << path << " -ngl " << ngl << ": " << compiled.status().message();
      EXPECT_TRUE(compiled->bytes == planned->bytes) << path << " -ngl " << ngl;
      EXPECT_EQ(compiled->fit.ok(), planned->fit.ok()) << path << " -ngl " << ngl;
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(models.size()) * 3);
}

// A planned graph the dialects cannot represent (a quantized K cache: its views have a symbolic
// ne0 of a block type) is not compiled: the planner's plan comes back, with the importer's line.
TEST(CompilePlan, AGraphTheImporterRefusesKeepsThePlannersPlan) {
  const std::string path = test::ModelPath("tiny8-untied-q4_0.gguf");
  if (!test::FileExists(path)) GTEST_SKIP() << "shared model " << path << " is absent";
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().message();
  planner::PlanRequest req;
  req.llamacpp_compat = planner::LlamacppCompat::kFeb25;  // Feb 2025's K store: a CPY into a K view
  req.context.n_ctx = 256;
  req.context.type_k = GgmlType::Q8_0;
  req.flags = "test";
  auto planned = planner::Plan(**gguf, Machine(), req);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  auto compiled = CompilePlan(**gguf, *planned, "test");
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_NE(compiled->not_compiled.find("compiler: import: graph pp node 'k_cache_view-0'"),
            std::string::npos)
      << compiled->not_compiled;
  EXPECT_TRUE(compiled->bytes == planned->bytes);
  // An f16 cache is compiled.
  req.context.type_k = GgmlType::F16;
  planned = planner::Plan(**gguf, Machine(), req);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  compiled = CompilePlan(**gguf, *planned, "test");
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->not_compiled, "");
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(path_)) GTEST_SKIP() << "shared model " << path_ << " is absent";
    auto g = GgufFile::Open(path_);
    ASSERT_TRUE(g.ok()) << g.status().message();
    gguf_ = std::move(*g);
    auto planned = PlanModel(*gguf_, 0);
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    planned_ = std::move(*planned);
    context_.loadDialect<ggml::GGMLDialect, place::PlaceDialect, mlir::func::FuncDialect>();
    module_ = importModelGraphs(&context_, planned_.graphs, mlir::UnknownLoc::get(&context_),
                                &planned_.outcome.placement);
    ASSERT_TRUE(module_);
  }
  /// The first op named `name` in function `func`.
  mlir::Operation* Find(llvm::StringRef func, llvm::StringRef name) {
    mlir::Operation* found = nullptr;
    module_->lookupSymbol<mlir::func::FuncOp>(func)->walk([&](mlir::Operation* op) {
      auto n = op->getAttrOfType<mlir::StringAttr>(ggml::kNodeNameAttr);
      if (!found && n && n.getValue() == name) found = op;
    });
    return found;
  }
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  planner::PlanResult planned_;
  mlir::MLIRContext context_{mlir::MLIRContext::Threading::DISABLED};
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

// A node a pass adds (a CONT of "norm-0" that the norm weight's MUL "attn_norm-0" then reads) is exported
// from the IR: a tensor after the imported ones, the node before its user, its source and backend; the memory
// plan is made again for it and the runtime's verifier accepts the plan. Without the change the
// export is the planner's graph.
TEST_F(ExportTest, ANodeAPassAddsIsInThePlan) {
  mlir::Operation* q = Find("pp", "attn_norm-0");
  ASSERT_TRUE(q);
  mlir::OpBuilder b(q);
  mlir::Value norm = q->getOperand(0);  // norm-0, through its split's result
  auto cont = b.create<ggml::ContOp>(b.getUnknownLoc(), norm.getType(), norm);
  cont->setAttr(ggml::kNodeNameAttr, b.getStringAttr("norm-0 (cont)"));
  q->setOperand(0, cont.getResult());

  planner::ModelGraphs graphs = planned_.graphs;
  planner::Placement placement = planned_.outcome.placement;
  ASSERT_TRUE(mlir::succeeded(exportModelGraphs(*module_, &graphs, &placement)));
  const planner::Graph& base = planned_.graphs.pp;
  const planner::Graph& pp = graphs.pp;
  ASSERT_EQ(pp.tensors.size(), base.tensors.size() + 1);
  ASSERT_EQ(pp.nodes.size(), base.nodes.size() + 1);
  const int id = static_cast<int>(base.tensors.size());
  const planner::Tensor& t = pp.tensors[id];
  EXPECT_EQ(t.name, "norm-0 (cont)");
  EXPECT_EQ(t.op, GgmlOp::CONT);
  EXPECT_EQ(t.kind, planner::TensorKind::kIntermediate);
  const int normId = base.Find("norm-0"), qId = base.Find("attn_norm-0");
  ASSERT_EQ(t.srcs, std::vector<int>{normId});
  EXPECT_EQ(t.backend, base.tensors[normId].backend);
  EXPECT_EQ(t.ne, base.tensors[normId].ne);
  EXPECT_EQ(pp.tensors[qId].srcs[0], id);
  auto at = [&](int tensor) {
    return std::find(pp.nodes.begin(), pp.nodes.end(), tensor) - pp.nodes.begin();
  };
  EXPECT_EQ(at(id) + 1, at(qId));
  // The tg graph is untouched.
  EXPECT_EQ(graphs.tg.tensors.size(), planned_.graphs.tg.tensors.size());

  planner::MemoryPlan mem;
  ASSERT_TRUE(planner::PlanMemory(graphs, placement, &mem).ok());
  std::vector<uint8_t> bytes = planner::SerializePlan(*gguf_, graphs, placement, mem, "test");
  EXPECT_NE(bytes, planned_.bytes);
  auto verified = PlanFile::FromBytes(std::move(bytes), "edited");
  EXPECT_TRUE(verified.ok()) << verified.status().message();
}

// A node renamed in the IR is renamed in the plan (the name is the IR's, not the planner's).
TEST_F(ExportTest, TheIrNamesTheNodes) {
  mlir::Operation* out = Find("tg", "result_output");
  ASSERT_TRUE(out);
  out->setAttr(ggml::kNodeNameAttr, mlir::StringAttr::get(&context_, "renamed"));
  planner::ModelGraphs graphs = planned_.graphs;
  planner::Placement placement = planned_.outcome.placement;
  ASSERT_TRUE(mlir::succeeded(exportModelGraphs(*module_, &graphs, &placement)));
  EXPECT_EQ(graphs.tg.Find("result_output"), -1);
  const int id = graphs.tg.Find("renamed");
  ASSERT_GE(id, 0);
  EXPECT_TRUE(graphs.tg.tensors[id].is_output);
  EXPECT_EQ(graphs.pp.Find("renamed"), -1);
}

// An op with op parameters that a pass made cannot be exported without an encoding: an error
// naming the op, and the graphs unchanged.
TEST_F(ExportTest, AParamOpAPassMadeIsRefused) {
  mlir::Operation* norm = Find("pp", "norm-0");
  ASSERT_TRUE(norm);
  mlir::OpBuilder b(norm->getContext());
  b.setInsertionPointAfter(norm);
  auto scale = b.create<ggml::ScaleOp>(norm->getLoc(), norm->getResult(0).getType(), norm->getResult(0),
                                       b.getF32FloatAttr(2.f), b.getF32FloatAttr(0.f));
  (void)scale;
  std::string error;
  mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& d) {
    error = d.str();
    return mlir::success();
  });
  planner::ModelGraphs graphs = planned_.graphs;
  planner::Placement placement = planned_.outcome.placement;
  // The scale is a copy of norm-0's location: the first op keeps the imported tensor, the new
  // one is a pass's.
  EXPECT_TRUE(mlir::failed(exportModelGraphs(*module_, &graphs, &placement)));
  EXPECT_NE(error.find("'ggml.scale' made by a pass"), std::string::npos) << error;
  EXPECT_EQ(graphs.pp.tensors.size(), planned_.graphs.pp.tensors.size());
}

// The splits are the planner's: a split moved to another backend, or a split input dropped, is an
// export error naming the split (a pass rewrites only inside a split).
TEST_F(ExportTest, SplitsArePlannersOnly) {
  std::string error;
  mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& d) {
    error = d.str();
    return mlir::success();
  });
  auto splits = [&] {
    std::vector<place::SplitOp> out;
    module_->lookupSymbol<mlir::func::FuncOp>("pp")->walk([&](place::SplitOp s) { out.push_back(s); });
    return out;
  };
  std::vector<place::SplitOp> pp = splits();
  ASSERT_GE(pp.size(), 2u);
  planner::ModelGraphs graphs = planned_.graphs;
  planner::Placement placement = planned_.outcome.placement;
  ASSERT_TRUE(mlir::succeeded(exportModelGraphs(*module_, &graphs, &placement)));

  // Split 1 claimed by another backend.
  const place::BackendAttr own = pp[1].getBackend(), other = pp[0].getBackend();
  ASSERT_NE(own.getPriority(), other.getPriority());
  pp[1].setBackendAttr(other);
  graphs = planned_.graphs;
  EXPECT_TRUE(mlir::failed(exportModelGraphs(*module_, &graphs, &placement)));
  EXPECT_NE(error.find("export: split 1 of @pp runs on backend"), std::string::npos) << error;
  pp[1].setBackendAttr(own);

  // A split input's copy replaced by its source (the copy left unused, then erased).
  place::CopyOp copy;
  pp[1].walk([&](place::CopyOp c) {
    if (!copy) copy = c;
  });
  ASSERT_TRUE(copy);
  copy.getResult().replaceAllUsesWith(copy.getSource());
  copy.erase();
  error.clear();
  graphs = planned_.graphs;
  EXPECT_TRUE(mlir::failed(exportModelGraphs(*module_, &graphs, &placement)));
  EXPECT_NE(error.find("export: split 1 of @pp has other inputs than the planner's"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace stowage::compiler
