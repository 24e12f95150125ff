// End-to-end numeric check of the CPU kernels: a minimal llama forward pass (prompt only, F16 KV
// cache, no flash attention) built directly from ops.h on the shared models, compared with
// llama.cpp's logits (../shared/golden/logits). Tolerances from the kernel issue: 0.02 for F32/F16
// models, 0.25 for quantized ones. Not the runtime's executor: a test harness for the kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops.h"
#include "stowage/runtime/gguf.h"
#include "test_paths.h"

namespace stowage::cpu {
namespace {

struct Buf {
  std::vector<float> data;
  TensorView v;
  Buf(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) : data(size_t(ne0 * ne1 * ne2)) {
    v.type = GgmlType::F32;
    v.ne[0] = ne0; v.ne[1] = ne1; v.ne[2] = ne2;
    SetContiguousStrides(v);
    v.data = data.data();
  }
};

#define OK(expr) do { Status s_ = (expr); ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); } while (0)

class LlamaGolden : public ::testing::TestWithParam<std::string> {};

// Weights as TensorViews over the mapping; with `repack`, Q4_0 matrices that llama.cpp's
// CPU_REPACK takes (ne1 % 8 == 0) are repacked into `store` and viewed as kLayoutQ4_0x8.
struct Weights {
  const GgufFile& f;
  bool repack;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> store;
  TensorView operator()(const std::string& name, bool matmul = true) {
    const GgufTensorInfo* t = f.FindTensor(name);
    TensorView v;
    if (!t) return v;
    v.type = t->type;
    for (int i = 0; i < 4; ++i) v.ne[i] = t->ne[i];
    SetContiguousStrides(v);
    v.data = const_cast<uint8_t*>(f.TensorData(*t));
    if (repack && matmul && CanRepackQ4_0(v)) {
      store.emplace_back(new std::vector<uint8_t>(t->nbytes));
      if (!RepackQ4_0(v, store.back()->data()).ok()) return TensorView();
      v.data = store.back()->data();
      v.layout = kLayoutQ4_0x8;
    }
    return v;
  }
};

void RunModel(const std::string& model, int n_threads, IsaLevel isa, bool repack, double* max_err_out) {
  const std::string path = test::ModelPath(model + ".gguf");
  const std::string golden = test::GoldenDir() + "/logits/" + model + ".json";
  if (!test::FileExists(path) || !test::FileExists(golden)) GTEST_SKIP() << "skipped: " << path << " or golden absent";
  auto fr = GgufFile::Open(path);
  ASSERT_TRUE(fr.ok()) << fr.status().ToString();
  const GgufFile& f = **fr;
  nlohmann::json g;
  std::ifstream(golden) >> g;
  const std::vector<int32_t> tokens = g["prompt_tokens"].get<std::vector<int32_t>>();
  const int64_t T = int64_t(tokens.size());
  const int64_t E = *f.GetU32("llama.embedding_length");
  const int64_t H = *f.GetU32("llama.attention.head_count");
  const int64_t Hkv = *f.GetU32Or("llama.attention.head_count_kv", uint32_t(H));
  const int64_t L = *f.GetU32("llama.block_count");
  const int64_t D = E / H;
  const int n_rot = int(*f.GetU32Or("llama.rope.dimension_count", uint32_t(D)));
  const float eps = *f.GetF32Or("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  RopeParams rp;
  rp.n_dims = n_rot;
  rp.mode = 0;
  rp.n_ctx_orig = int(*f.GetU32("llama.context_length"));
  rp.freq_base = *f.GetF32Or("llama.rope.freq_base", 10000.f);

  ComputeContext ctx;
  ctx.n_threads = n_threads;
  ctx.max_isa = isa;
  Weights Weight{f, repack, {}};
  TensorView tok_embd = Weight("token_embd.weight", false);
  TensorView out_w = Weight("output.weight");
  if (!out_w.data) out_w = Weight("token_embd.weight");  // tied embeddings
  const int64_t V = out_w.ne[1];

  Buf ids_buf(T);
  TensorView ids = ids_buf.v;
  ids.type = GgmlType::I32;
  SetContiguousStrides(ids);
  std::memcpy(ids_buf.data.data(), tokens.data(), size_t(T) * 4);
  TensorView pos = ids;
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) positions[size_t(i)] = int32_t(i);
  pos.data = positions.data();

  Buf x(E, T);
  OK(GetRows(ctx, tok_embd, ids, x.v));
  // Causal mask, F32 [n_kv, T].
  Buf mask(T, T);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) mask.data[size_t(i * T + j)] = j <= i ? 0.0f : -INFINITY;
  // F16 KV cache per layer: K [D*Hkv, T] (one row per cell), V transposed [T, D*Hkv].
  std::vector<uint16_t> kcache(size_t(D * Hkv * T)), vcache(size_t(D * Hkv * T));
  TensorView none;

  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Buf cur(E, T), q(D * H, T), k(D * Hkv, T), v(D * Hkv, T);
    OK(RmsNorm(ctx, x.v, cur.v, eps));
    OK(Mul(ctx, cur.v, Weight(p + "attn_norm.weight"), cur.v));
    OK(MulMat(ctx, Weight(p + "attn_q.weight"), cur.v, q.v));
    OK(MulMat(ctx, Weight(p + "attn_k.weight"), cur.v, k.v));
    OK(MulMat(ctx, Weight(p + "attn_v.weight"), cur.v, v.v));
    TensorView q3 = q.v, k3 = k.v;
    q3.ne[0] = D; q3.ne[1] = H; q3.ne[2] = T; SetContiguousStrides(q3);
    k3.ne[0] = D; k3.ne[1] = Hkv; k3.ne[2] = T; SetContiguousStrides(k3);
    OK(Rope(ctx, q3, pos, none, q3, rp));
    OK(Rope(ctx, k3, pos, none, k3, rp));
    // Store K rows and V columns (ggml_cpy into cache views).
    TensorView kdst;
    kdst.type = GgmlType::F16;
    kdst.ne[0] = D; kdst.ne[1] = Hkv; kdst.ne[2] = T;
    kdst.nb[0] = 2; kdst.nb[1] = size_t(D) * 2; kdst.nb[2] = size_t(D * Hkv) * 2; kdst.nb[3] = kdst.nb[2] * size_t(T);
    kdst.data = kcache.data();
    OK(Cpy(ctx, k3, kdst));
    TensorView vdst;
    vdst.type = GgmlType::F16;
    vdst.ne[0] = D * Hkv; vdst.ne[1] = T;
    vdst.nb[0] = size_t(T) * 2; vdst.nb[1] = 2; vdst.nb[2] = vdst.nb[3] = size_t(T * D * Hkv) * 2;
    vdst.data = vcache.data();
    OK(Cpy(ctx, v.v, vdst));
    // kq = K^T q per head: K view [D, n_kv, Hkv], q permuted [D, T, H].
    TensorView kv;
    kv.type = GgmlType::F16;
    kv.ne[0] = D; kv.ne[1] = T; kv.ne[2] = Hkv;
    kv.nb[0] = 2; kv.nb[1] = size_t(D * Hkv) * 2; kv.nb[2] = size_t(D) * 2; kv.nb[3] = kv.nb[1] * size_t(T);
    kv.data = kcache.data();
    TensorView qp = q3;
    qp.ne[1] = T; qp.ne[2] = H; qp.nb[1] = q3.nb[2]; qp.nb[2] = q3.nb[1];
    Buf kq(T, T, H);
    OK(MulMat(ctx, kv, qp, kq.v));
    OK(SoftMax(ctx, kq.v, mask.v, kq.v, 1.0f / std::sqrt(float(D)), 0.0f));
    // kqv = V^T kq: V view [n_kv, D, Hkv].
    TensorView vv;
    vv.type = GgmlType::F16;
    vv.ne[0] = T; vv.ne[1] = D; vv.ne[2] = Hkv;
    vv.nb[0] = 2; vv.nb[1] = size_t(T) * 2; vv.nb[2] = size_t(T * D) * 2; vv.nb[3] = vv.nb[2] * size_t(Hkv);
    vv.data = vcache.data();
    Buf kqv(D, T, H);
    OK(MulMat(ctx, vv, kq.v, kqv.v));
    // permute [D, T, H] -> [D, H, T] and make contiguous [E, T]
    TensorView kqvp = kqv.v;
    kqvp.ne[1] = H; kqvp.ne[2] = T; kqvp.nb[1] = kqv.v.nb[2]; kqvp.nb[2] = kqv.v.nb[1];
    Buf attn(E, T), o(E, T);
    OK(Cpy(ctx, kqvp, attn.v));
    OK(MulMat(ctx, Weight(p + "attn_output.weight"), attn.v, o.v));
    OK(Add(ctx, x.v, o.v, x.v));
    // FFN (SwiGLU).
    const TensorView wg = Weight(p + "ffn_gate.weight");
    const int64_t F = wg.ne[1];
    Buf gate(F, T), up(F, T), hbuf(F, T), down(E, T);
    OK(RmsNorm(ctx, x.v, cur.v, eps));
    OK(Mul(ctx, cur.v, Weight(p + "ffn_norm.weight"), cur.v));
    OK(MulMat(ctx, wg, cur.v, gate.v));
    OK(MulMat(ctx, Weight(p + "ffn_up.weight"), cur.v, up.v));
    OK(SwiGlu(ctx, gate.v, up.v, hbuf.v));
    OK(MulMat(ctx, Weight(p + "ffn_down.weight"), hbuf.v, down.v));
    OK(Add(ctx, x.v, down.v, x.v));
  }
  Buf cur(E, T), logits(V, T);
  OK(RmsNorm(ctx, x.v, cur.v, eps));
  OK(Mul(ctx, cur.v, Weight("output_norm.weight"), cur.v));
  OK(MulMat(ctx, out_w, cur.v, logits.v));

  double max_err = 0;
  const auto& gl = g["prompt_logits"];
  ASSERT_EQ(int64_t(gl.size()), T);
  for (int64_t t = 0; t < T; ++t) {
    ASSERT_EQ(int64_t(gl[size_t(t)].size()), V);
    for (int64_t i = 0; i < V; ++i)
      max_err = std::max(max_err, std::fabs(double(logits.data[size_t(t * V + i)]) - gl[size_t(t)][size_t(i)].get<double>()));
  }
  *max_err_out = max_err;
}

bool IsQuantized(const std::string& m) {
  return m.find("Q") != std::string::npos || m.find("q4") != std::string::npos;
}

TEST_P(LlamaGolden, PromptLogitsMatchLlamaCpp) {
  const std::string model = GetParam();
  const double tol = IsQuantized(model) ? 0.25 : 0.02;
  for (bool repack : {false, true}) {
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
      if (isa > DetectIsa()) continue;
      double err = -1;
      RunModel(model, 2, isa, repack, &err);
      if (IsSkipped() || HasFatalFailure()) return;
      EXPECT_LE(err, tol) << model << " isa " << int(isa) << (repack ? " CPU_REPACK" : "");
      std::printf("%-22s isa %d %-10s max |logit - llama.cpp| = %.5f\n", model.c_str(), int(isa),
                  repack ? "CPU_REPACK" : "plain", err);
    }
    if (model.find("q4_0") == std::string::npos && model.find("Q4_0") == std::string::npos) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LlamaGolden,
                         ::testing::Values("stories260K", "stories260K-F16", "stories260K-Q8_0", "stories260K-Q4_0",
                                           "stories260K-Q4_K_M", "tiny-tied-f32", "tiny-tied-q4_0", "tiny-untied-q4_0",
                                           "tiny8-untied-q4_0", "synth-Q4_K_M", "synth-Q6_K", "synth-Q2_K",
                                           "synth-IQ4_XS", "llama-2-tiny-random"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace stowage::cpu
