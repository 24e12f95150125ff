// The fusion passes end to end: every shared model planned for the CPU and compiled by CompilePlan
// (imported, fused by the pipeline, exported and memory-planned again), both plans run by the
// runtime. The fused plan must give the same logits bit for bit (prompt processing and
// token generation, both numerics modes), allocate exactly what it plans, and hold the fused nodes
// (counted by importing it back).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "stowage/Compiler/CompilePlan.h"
#include "stowage/Compiler/Import/ImportPlan.h"
#include "stowage/Dialect/GGML/IR/GGMLOps.h"
#include "stowage/Dialect/Place/IR/PlaceDialect.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/session.h"
#include "synth.h"
#include "test_paths.h"

namespace stowage::compiler {
namespace {

// The machine and ubatch a plan is made for: by default the CPU alone and ubatches of 16 tokens (a
// prompt of several ubatches).
struct Machine {
  const char* devices = "cpu";  // registry keys
  uint32_t n_ubatch = 16;
};

Result<planner::PlanResult> PlanForCpu(const GgufFile& gguf,
                                       planner::LlamacppCompat compat = planner::kDefaultLlamacppCompat,
                                       const Machine& machine = {}) {
  auto reg = planner::Registry::Open({STOWAGE_SHIPPED_REGISTRY_DIR});
  if (!reg.ok()) return reg.status();
  auto devices = reg->MakeDevices(machine.devices);
  if (!devices.ok()) return devices.status();
  planner::PlanRequest req;
  req.context.n_ctx = 256;
  req.context.n_ubatch = machine.n_ubatch;
  req.fit_check = false;
  req.llamacpp_compat = compat;
  req.flags = "fuse_passes_test";
  return planner::Plan(gguf, *devices, req);
}

// The plan of `planned` as the compiler stage makes it by default (CompilePlan: the pipeline's
// fusions, the memory planned again).
Result<std::vector<uint8_t>> FusedPlan(const GgufFile& gguf, const planner::PlanResult& planned) {
  STOWAGE_ASSIGN_OR_RETURN(CompiledPlan compiled, CompilePlan(gguf, planned, "fuse_passes_test"));
  return compiled.bytes;
}

struct OpCounts {
  int ops = 0, rms_norm = 0, rms_norm_mul = 0;
  int mul_mat = 0, mul_mat_glu = 0, act = 0;  // act: SILU and GELU (Feb 2025's GLU halves)
  int cont = 0, views = 0;                    // views: VIEW, PERMUTE, TRANSPOSE, RESHAPE
  int rope = 0, rope_store = 0;               // rope_store: ROPE_SET_ROWS and ROPE_CPY (K stores)
  int qkv = 0, qkv_views = 0;  // MUL_MATs over a weight group (Q, K and V fused), views of them
  int qkv_reshapes = 0;        // RESHAPEs of a product of attn_q / attn_k / attn_v (or of one)
  int split_result_conts = 0;  // CONTs reading (through views) a result of another split in place
};

// True when `v` is a result of a place.split, or a view of one.
bool IsSplitResult(mlir::Value v) {
  mlir::Operation* def = v.getDefiningOp();
  if (mlir::isa_and_nonnull<ggml::ViewOp, ggml::PermuteOp, ggml::TransposeOp, ggml::ReshapeOp>(def))
    return IsSplitResult(def->getOperand(0));
  return mlir::isa_and_nonnull<place::SplitOp>(def);
}

// True when `v` is a product of a layer's attn_q, attn_k or attn_v weight, or a RESHAPE of one.
bool IsQkvProduct(mlir::Value v) {
  if (auto reshape = v.getDefiningOp<ggml::ReshapeOp>()) return IsQkvProduct(reshape.getA());
  auto mm = v.getDefiningOp<ggml::MulMatOp>();
  auto w = mm ? mm.getA().getDefiningOp<ggml::WeightOp>() : nullptr;
  return w && (w.getGgufName().ends_with(".attn_q.weight") || w.getGgufName().ends_with(".attn_k.weight") ||
               w.getGgufName().ends_with(".attn_v.weight"));
}

// The ggml ops of function `name` of the plan `bytes` as the importer reads it back.
OpCounts CountOps(const std::vector<uint8_t>& bytes, llvm::StringRef name) {
  const std::string path = ::testing::TempDir() + "fuse_passes_test." + std::to_string(getpid()) + ".plan";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.loadDialect<ggml::GGMLDialect, place::PlaceDialect, mlir::func::FuncDialect>();
  OpCounts c;
  mlir::OwningOpRef<mlir::ModuleOp> module = importPlanFile(&context, path);
  std::remove(path.c_str());
  if (!module) return c;
  module->lookupSymbol<mlir::func::FuncOp>(name)->walk([&](mlir::Operation* op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "ggml" &&
        !mlir::isa<ggml::WeightOp, ggml::WeightGroupOp, ggml::InputOp, ggml::KvCacheOp>(op))
      ++c.ops;
    c.rms_norm += mlir::isa<ggml::RmsNormOp>(op);
    c.rms_norm_mul += mlir::isa<ggml::RmsNormMulOp>(op);
    c.mul_mat += mlir::isa<ggml::MulMatOp>(op);
    c.mul_mat_glu += mlir::isa<ggml::MulMatGluOp>(op);
    c.act += mlir::isa<ggml::SiluOp, ggml::GeluOp>(op);
    c.cont += mlir::isa<ggml::ContOp>(op);
    if (auto cont = mlir::dyn_cast<ggml::ContOp>(op)) c.split_result_conts += IsSplitResult(cont.getA());
    c.rope += mlir::isa<ggml::RopeOp>(op);
    c.rope_store += mlir::isa<ggml::RopeSetRowsOp, ggml::RopeCpyOp>(op);
    c.views += mlir::isa<ggml::ViewOp, ggml::PermuteOp, ggml::TransposeOp, ggml::ReshapeOp>(op);
    if (auto mm = mlir::dyn_cast<ggml::MulMatOp>(op))
      c.qkv += bool(mm.getA().getDefiningOp<ggml::WeightGroupOp>());
    if (auto view = mlir::dyn_cast<ggml::ViewOp>(op))
      if (auto mm = view.getA().getDefiningOp<ggml::MulMatOp>())
        c.qkv_views += bool(mm.getA().getDefiningOp<ggml::WeightGroupOp>());
    if (auto reshape = mlir::dyn_cast<ggml::ReshapeOp>(op)) c.qkv_reshapes += IsQkvProduct(reshape.getA());
  });
  return c;
}

// Logits of a 40-token prompt (three ubatches, every row) and then of 4 tokens one at a time.
std::vector<float> RunPlan(const std::vector<uint8_t>& plan, const std::string& model, bool numerics,
                           std::vector<BufferReport>* buffers) {
  SessionOptions opts;
  opts.n_threads = 2;
  opts.llamacpp_numerics = numerics;
  auto s = Session::CreateFromPlanBytes(plan, model, opts);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  const int32_t n_vocab = (*s)->n_vocab();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((7 * i + 3) % n_vocab);
  std::vector<float> all, logits;
  EXPECT_TRUE((*s)->Decode(prompt, true, &all).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE((*s)->Decode({(11 * i + 5) % n_vocab}, false, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  *buffers = (*s)->Buffers();
  return all;
}

// Plans `path` for the CPU with and without the fusions, checks the fused nodes (`all_fused`: every
// RMS_NORM of the graphs is followed by its weight's MUL) and runs both: the same logits bit for bit
// in both numerics modes, planned == allocated. MUL_MAT_GLU replaces two MUL_MATs and the GLU (2026)
// or the SILU / GELU and the MUL (Feb 2025); a CONT elided becomes a VIEW, and the view ops that
// only fed it go; a QKV fusion replaces three MUL_MATs by one over a weight group, read through
// views (the products' RESHAPEs become views). Returns the fused nodes of both graphs; `ffn_fused`
// (optional) gets the MUL_MAT_GLU nodes, `tg_conts` (optional) the tg graph's CONTs before and after,
// `qkv_fused` (optional) the MUL_MATs over a weight group. `machine` is what it is planned
// for; `split_result_conts` (optional) gets the unfused plan's CONTs that read another
// split's result in place.
int ExpectFusedPlanEqual(const std::string& path, bool all_fused, int* ffn_fused = nullptr,
                         planner::LlamacppCompat compat = planner::kDefaultLlamacppCompat,
                         std::pair<int, int>* tg_conts = nullptr, int* qkv_fused = nullptr,
                         const Machine& machine = {}, int* split_result_conts = nullptr) {
  SCOPED_TRACE(path);
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status().message();
  if (!gguf.ok()) return 0;
  auto planned = PlanForCpu(**gguf, compat, machine);
  EXPECT_TRUE(planned.ok()) << planned.status().message();
  if (!planned.ok()) return 0;
  auto fused = FusedPlan(**gguf, *planned);
  EXPECT_TRUE(fused.ok()) << fused.status().message();
  if (!fused.ok()) return 0;
  int n_fused = 0;
  for (llvm::StringRef graph : {"pp", "tg"}) {
    const OpCounts before = CountOps(planned->bytes, graph), after = CountOps(*fused, graph);
    const int elided = before.cont - after.cont;
    n_fused += after.rms_norm_mul + after.mul_mat_glu + elided + after.qkv;
    // The RESHAPEs of fused products became views (a layer whose weights differ in type keeps its).
    const int qkv_reshapes = before.qkv_reshapes - after.qkv_reshapes;
    if (ffn_fused) *ffn_fused += after.mul_mat_glu;
    if (qkv_fused) *qkv_fused += after.qkv;
    if (tg_conts && graph == "tg") *tg_conts = {before.cont, after.cont};
    if (split_result_conts) *split_result_conts += before.split_result_conts;
    EXPECT_GE(elided, 0) << graph.str();
    EXPECT_EQ(after.rms_norm + after.rms_norm_mul, before.rms_norm) << graph.str();
    EXPECT_EQ(after.mul_mat + 2 * after.mul_mat_glu + 2 * after.qkv, before.mul_mat) << graph.str();
    const int views_erased = before.views + elided - after.views + after.qkv_views - qkv_reshapes;
    EXPECT_GE(views_erased, 0) << graph.str();
    EXPECT_EQ(after.ops, before.ops - after.rms_norm_mul - 2 * after.mul_mat_glu - (before.act - after.act) -
                             views_erased - 2 * after.qkv + after.qkv_views - qkv_reshapes - after.rope_store)
        << graph.str();
    // A fused K store replaces its ROPE and its SET_ROWS / CPY (the reshape counts among the views).
    EXPECT_EQ(after.rope + after.rope_store, before.rope) << graph.str();
    if (all_fused) {
      EXPECT_GT(before.rms_norm, 0) << graph.str();
      EXPECT_EQ(after.rms_norm, 0) << graph.str();
    }
  }
  if (n_fused == 0) EXPECT_EQ(*fused, planned->bytes);
  for (bool numerics : {false, true}) {
    std::vector<BufferReport> b0, b1;
    const std::vector<float> want = RunPlan(planned->bytes, path, numerics, &b0);
    const std::vector<float> got = RunPlan(*fused, path, numerics, &b1);
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(got.size(), want.size());
    if (want.empty() || got.size() != want.size()) break;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
        << (numerics ? "--llamacpp-numerics" : "default numerics");
    // Planned == allocated, buffer by buffer, for the plan whose memory was planned again.
    for (const BufferReport& r : b1) EXPECT_EQ(r.planned, r.allocated) << r.name << " " << r.usage;
    // One more buffer where a weight group copies parts that lie apart in the mapped file.
    EXPECT_LE(b1.size(), b0.size() + 1);
  }
  return n_fused;
}

TEST(FusePasses, FusedPlansGiveTheSameLogitsBitForBit) {
  const std::vector<std::string> models = test::SharedModelPaths();
  if (models.empty()) GTEST_SKIP() << "no shared models in " << test::ModelsDir();
  for (const std::string& path : models) {
    int ffn = 0;
    ExpectFusedPlanEqual(path, true, &ffn);
    std::cout << path << ": " << ffn << " MUL_MAT_GLU in pp and tg\n";
  }
}

// Feb 2025's attention without flash attention merges the heads with a CONT of a permute
// (kqv_merged_cont); with one token its bytes are in order, and stowage-elide-cont makes every such
// CONT of the tg graph a view of kqv. The logits stay the same bit for bit (ExpectFusedPlanEqual).
TEST(FusePasses, TokenGenerationReadsTheMergedHeadsInPlace) {
  const std::vector<std::string> models = test::SharedModelPaths();
  if (models.empty()) GTEST_SKIP() << "no shared models in " << test::ModelsDir();
  for (const std::string& path : models) {
    SCOPED_TRACE(path);
    std::pair<int, int> tg_conts{-1, -1};
    ExpectFusedPlanEqual(path, true, nullptr, planner::LlamacppCompat::kFeb25, &tg_conts);
    EXPECT_GT(tg_conts.first, 0);
    EXPECT_EQ(tg_conts.second, 0);
  }
}

// Every architecture gguf-synth writes (the golden-arch models' generator), F32 and Q8_0: its norms
// (per-head q/k norms, post-norms, MoE, Mamba, ...) fused where the rules allow, the logits the
// unfused plan's.
TEST(FusePasses, EverySynthArchitectureGivesTheSameLogits) {
  std::string unfused, no_ffn, no_qkv;
  for (const std::string& arch : synth::SupportedArchs()) {
    for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
      synth::ModelSpec spec;
      spec.arch = arch;
      spec.weight_type = type;
      const std::string path = ::testing::TempDir() + "fuse_passes_" + arch + "_" + GgmlTypeName(type) + "_" +
                               std::to_string(getpid()) + ".gguf";
      Status st = synth::WriteModel(spec, path);
      ASSERT_TRUE(st.ok()) << arch << ": " << st.ToString();
      int ffn = 0, qkv = 0;
      if (ExpectFusedPlanEqual(path, false, &ffn, planner::kDefaultLlamacppCompat, nullptr, &qkv) == 0 &&
          type == GgmlType::F32)
        unfused += " " + arch;
      if (ffn == 0 && type == GgmlType::F32) no_ffn += " " + arch;
      if (qkv == 0) no_qkv += " " + arch + "/" + GgmlTypeName(type);
      std::remove(path.c_str());
    }
  }
  // Architectures without RMS_NORM (LayerNorm's NORM, phi2, ...) keep their graphs.
  std::cout << "no RMS_NORM + MUL fused:" << unfused << "\n";
  EXPECT_EQ((unfused + " ").find(" llama "), std::string::npos);
  EXPECT_EQ((unfused + " ").find(" qwen3 "), std::string::npos);
  // Gated FFNs of dense models get MUL_MAT_GLU (MoE experts are MUL_MAT_ID, not fused).
  std::cout << "no MUL_MAT_GLU:" << no_ffn << "\n";
  EXPECT_EQ((no_ffn + " ").find(" llama "), std::string::npos);
  EXPECT_EQ((no_ffn + " ").find(" qwen3 "), std::string::npos);
  // Separate Q, K and V weights (llama.cpp's llama family, qwen2's with biases) become one MUL_MAT
  // over a weight group, in the mapped file (F32) and repacked (Q8_0).
  std::cout << "no QKV fused:" << no_qkv << "\n";
  for (const char* fused : {" llama/f32 ", " llama/q8_0 ", " qwen2/f32 ", " qwen3/q8_0 "})
    EXPECT_EQ((no_qkv + " ").find(fused), std::string::npos) << fused;
}

// With the ONEDNN device (this machine's default list: ONEDNN, CPU) and ubatches of 64 tokens (op
// offload from 32) F32 weights put matmuls and the views of their products (deepseek2's permuted MLA output,
// phi3's Q/K/V rows of wqkv) on ONEDNN, and the CPU split after it reads them in place, without a split input
// copy: a CONT of such a strided result must stay a copy (pp), and becomes a view only where the result's own
// strides are in order (tg). The logits stay the unfused plan's bit for bit.
TEST(FusePasses, ContsOfAnotherSplitsStridedResultsGiveTheSameLogits) {
  for (const char* arch : {"deepseek2", "phi3"}) {
    SCOPED_TRACE(arch);
    synth::ModelSpec spec;
    spec.arch = arch;
    spec.weight_type = GgmlType::F32;
    const std::string path =
        ::testing::TempDir() + "fuse_passes_accel_" + arch + "_" + std::to_string(getpid()) + ".gguf";
    Status st = synth::WriteModel(spec, path);
    ASSERT_TRUE(st.ok()) << st.ToString();
    int split_result_conts = 0;
    ExpectFusedPlanEqual(path, false, nullptr, planner::kDefaultLlamacppCompat, nullptr, nullptr,
                         Machine{"onednn,cpu", 64}, &split_result_conts);
    EXPECT_GT(split_result_conts, 0);
    std::remove(path.c_str());
  }
}

// Plans `path` (stories260K) for the CPU, applies `edit` to every tensor of both graphs (it returns
// true where it changed one), compiles the edited plan with the fusions and expects its logits to
// differ from the unedited plan's. Returns the fused plan's tg op counts.
OpCounts ExpectEditedFusedPlanDiffers(const std::string& path,
                                      const std::function<bool(planner::Tensor&)>& edit) {
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok());
  if (!gguf.ok()) return {};
  auto planned = PlanForCpu(**gguf);
  EXPECT_TRUE(planned.ok()) << planned.status().message();
  if (!planned.ok()) return {};
  planner::PlanResult changed = *planned;
  int edited = 0;
  for (auto* g : {&changed.graphs.pp, &changed.graphs.tg})
    for (planner::Tensor& t : g->tensors) edited += edit(t);
  EXPECT_GT(edited, 0);
  auto fused = FusedPlan(**gguf, changed);
  EXPECT_TRUE(fused.ok()) << fused.status().message();
  if (!fused.ok()) return {};
  std::vector<BufferReport> b;
  const std::vector<float> want = RunPlan(planned->bytes, path, false, &b);
  const std::vector<float> got = RunPlan(*fused, path, false, &b);
  EXPECT_EQ(got.size(), want.size());
  if (got.size() == want.size())
    EXPECT_NE(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  return CountOps(*fused, "tg");
}

// The comparison above can fail: a fused plan whose norm epsilon differs gives other logits.
TEST(FusePasses, AChangedFusedNodeChangesTheLogits) {
  const std::string path = test::ModelPath("stories260K.gguf");
  if (!test::FileExists(path)) GTEST_SKIP() << path << " is absent";
  EXPECT_GT(ExpectEditedFusedPlanDiffers(path,
                                         [](planner::Tensor& t) {
                                           if (t.op != GgmlOp::RMS_NORM) return false;
                                           t.fparams = {1e-2f};
                                           return true;
                                         })
                .rms_norm_mul,
            0);
}

// The CONT comparison can fail: a plan that merges the heads without permuting them (its CONTs in
// order at every n_tokens, so all of them become views) gives other logits than the planner's plan.
TEST(FusePasses, AChangedHeadMergeChangesTheLogits) {
  const std::string path = test::ModelPath("stories260K.gguf");
  if (!test::FileExists(path)) GTEST_SKIP() << path << " is absent";
  const OpCounts tg = ExpectEditedFusedPlanDiffers(path, [](planner::Tensor& t) {
    if (t.op != GgmlOp::PERMUTE || t.name.rfind("kqv_merged", 0) != 0) return false;
    t.iparams = Encode(PermuteParams{}).iparams;  // (0, 2, 1, 3) -> the identity
    std::swap(t.ne[1], t.ne[2]);
    return true;
  });
  EXPECT_EQ(tg.cont, 0);
}

// The MUL_MAT_GLU comparison can fail: a plan whose FFN activation is GELU (GEGLU) instead of SILU
// (SWIGLU) fuses into another MUL_MAT_GLU kind and gives other logits than the planner's plan.
TEST(FusePasses, AChangedFfnInChangesTheLogits) {
  const std::string path = test::ModelPath("stories260K.gguf");
  if (!test::FileExists(path)) GTEST_SKIP() << path << " is absent";
  EXPECT_GT(ExpectEditedFusedPlanDiffers(path,
                                         [](planner::Tensor& t) {
                                           if (t.op != GgmlOp::SILU && t.op != GgmlOp::SWIGLU) return false;
                                           // Feb 2025's and 2026's forms
                                           t.op = t.op == GgmlOp::SILU ? GgmlOp::GELU : GgmlOp::GEGLU;
                                           return true;
                                         })
                .mul_mat_glu,
            0);
}

}  // namespace
}  // namespace stowage::compiler
