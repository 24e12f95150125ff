// The llama.cpp CPU manifest against the golden placement outcomes of real models
// (../shared/golden/placement/README.md §1-2): which weights CPU_REPACK accepts, asked the way
// llama.cpp's weight_buft_supported asks (a dummy op with a 512-token batch, the weight in the buft).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "stowage/planner/manifest.h"
#include "stowage/runtime/gguf.h"
#include "test_paths.h"

namespace stowage::planner {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// weight_buft_supported's dummy node for weight `w` placed in `buft`.
OpQuery WeightQuery(const GgufTensorInfo& w, const std::string& buft, bool is_host) {
  TensorDesc wt;
  wt.type = w.type;
  wt.ne = {w.ne[0], w.ne[1], w.ne[2], w.ne[3]};
  wt.buft = buft;
  wt.buft_is_host = is_host;
  OpQuery q;
  TensorDesc act;
  if (w.name.rfind("token_embd", 0) == 0) {  // (INPUT, GET_ROWS)
    q.op = GgmlOp::GET_ROWS;
    act.type = GgmlType::I32;
    act.ne = {512, 1, 1, 1};
    q.dst.ne = {w.ne[0], 512, 1, 1};
  } else if (EndsWith(w.name, "norm.weight")) {  // norms: (.., MUL)
    q.op = GgmlOp::MUL;
    act.ne = wt.ne;
    q.dst.ne = wt.ne;
    q.src = {act, wt};
    return q;
  } else {  // matrices: MUL_MAT with F32 activations [ne0, 512, ne2, ne3]
    q.op = GgmlOp::MUL_MAT;
    act.ne = {w.ne[0], 512, w.ne[2], w.ne[3]};
    q.dst.ne = {w.ne[1], 512, w.ne[2], w.ne[3]};
  }
  q.src = {wt, act};
  return q;
}

struct RepackOutcome {
  int moved = 0;                         // weights CPU_REPACK refused (they fall back to CPU)
  uint64_t repack_bytes = 0;             // bytes of the weights it took
  std::vector<std::string> moved_names;  // "name (type)", in file order
  bool Moved(const std::string& n) const {
    for (const auto& m : moved_names)
      if (m == n) return true;
    return false;
  }
};

RepackOutcome Place(const std::string& model) {
  auto cpu = LoadManifestFile(std::string(STOWAGE_TEST_MANIFESTS_DIR) + "/llamacpp-cpu.json");
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto f = GgufFile::Open(test::ModelPath(model));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  RepackOutcome out;
  if (!cpu.ok() || !f.ok()) return out;
  for (const auto& w : (*f)->tensors()) {
    if (cpu->SupportsOp(WeightQuery(w, "CPU_REPACK", false))) {
      out.repack_bytes += TensorBytes(w.type, w.ne);
    } else {
      ++out.moved;
      out.moved_names.push_back(w.name + " (" + GgmlTypeName(w.type) + ")");
      // The next entry of the CPU list, the plain CPU buffer type, takes every weight.
      EXPECT_TRUE(cpu->SupportsOp(WeightQuery(w, "CPU", true))) << w.name;
    }
  }
  return out;
}

std::string MiB(uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", bytes / 1048576.0);
  return s;
}

TEST(GoldenRepack, Stories260KAllF32StaysOnCpu) {
  STOWAGE_REQUIRE_FILE(test::ModelPath("stories260K.gguf"));
  RepackOutcome o = Place("stories260K.gguf");
  // "tensor 'token_embd.weight' (f32) (and 47 others) cannot be used with preferred buffer type
  // CPU_REPACK, using CPU instead"
  EXPECT_TRUE(o.Moved("token_embd.weight (f32)"));
  EXPECT_EQ(o.moved, 48);
  EXPECT_EQ(o.repack_bytes, 0u);
}

TEST(GoldenRepack, TinyUntiedQ4_0) {
  STOWAGE_REQUIRE_FILE(test::ModelPath("tiny-untied-q4_0.gguf"));
  RepackOutcome o = Place("tiny-untied-q4_0.gguf");
  // "(and 6 others)" moved: token_embd (GET_ROWS), output (q6_K) and the norms;
  // "CPU_REPACK model buffer size = 0.63 MiB".
  EXPECT_TRUE(o.Moved("token_embd.weight (q4_0)"));
  EXPECT_TRUE(o.Moved("output.weight (q6_K)"));
  EXPECT_EQ(o.moved, 7);
  EXPECT_EQ(MiB(o.repack_bytes), "0.63");
}

TEST(GoldenRepack, Tiny8UntiedQ4_0) {
  STOWAGE_REQUIRE_FILE(test::ModelPath("tiny8-untied-q4_0.gguf"));
  // -ngl 0: "CPU_REPACK 2.53" MiB.
  EXPECT_EQ(MiB(Place("tiny8-untied-q4_0.gguf").repack_bytes), "2.53");
}

// The llama.cpp manifest models build 4748 (FEB25), whose CPU_REPACK took Q4_0 only: every weight of
// a Q4_K_M model falls back to CPU (a newer llama.cpp, and the probed CPU device of this runtime,
// repack Q4_K with ne1 % 8 == 0 too: runtime/src/devices/op_support.cpp MakeCpuDevice).
TEST(GoldenRepack, SynthQ4_K_MNotRepackedByFeb25) {
  STOWAGE_REQUIRE_FILE(test::ModelPath("synth-Q4_K_M.gguf"));
  RepackOutcome o = Place("synth-Q4_K_M.gguf");
  EXPECT_TRUE(o.Moved("blk.0.attn_q.weight (q4_K)"));
  EXPECT_EQ(o.repack_bytes, 0u);
}

}  // namespace
}  // namespace stowage::planner
