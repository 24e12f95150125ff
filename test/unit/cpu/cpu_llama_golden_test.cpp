// End-to-end numeric check of the CPU kernels: a minimal llama forward pass (prompt only, F16 KV
// cache, no flash attention) built directly from ops.h on the shared models, compared with
// llama.cpp's logits (../shared/golden/logits). Tolerances from the kernel issue: 0.02 for F32/F16
// models, 0.25 for quantized ones. Not the runtime's executor: a test harness for the kernels.
#include <gtest/gtest.h>

#include <algorithm>
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
    v.ne[0] = ne0;
    v.ne[1] = ne1;
    v.ne[2] = ne2;
    SetContiguousStrides(v);
    v.data = data.data();
  }
};

#define OK(expr)                                            \
  do {                                                      \
    Status s_ = (expr);                                     \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.ToString(); \
  } while (0)

class LlamaGolden : public ::testing::TestWithParam<std::string> {};

// Weights as TensorViews over the mapping; with `repack`, the matrices that llama.cpp's CPU_REPACK
// takes (Q4_0 and Q4_K with ne1 % 8 == 0) are repacked into `store` as the runtime does
// (RepackLayoutFor / RepackWeight) and viewed as kLayoutQ4_0x8 / kLayoutQ4_Kx8.
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
    const int layout = repack && matmul ? RepackLayoutFor(v) : kLayoutPlain;
    if (layout != kLayoutPlain) {
      store.emplace_back(new std::vector<uint8_t>(t->nbytes));
      if (!RepackWeight(v, layout, store.back()->data()).ok()) return TensorView();
      v.data = store.back()->data();
      v.layout = layout;
    }
    return v;
  }
};

// A minimal llama (prompt + incremental decode) over ops.h, with an F16 KV cache of n_ctx cells.
class MiniLlama {
 public:
  MiniLlama(const GgufFile& f, int n_threads, IsaLevel isa, bool repack, int64_t n_ctx)
      : f_(f), w_{f, repack, {}}, n_ctx_(n_ctx) {
    ctx_.n_threads = n_threads;
    ctx_.max_isa = isa;
    E_ = *f.GetU32("llama.embedding_length");
    H_ = *f.GetU32("llama.attention.head_count");
    Hkv_ = *f.GetU32Or("llama.attention.head_count_kv", uint32_t(H_));
    L_ = *f.GetU32("llama.block_count");
    D_ = E_ / H_;
    eps_ = *f.GetF32Or("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    rp_.n_dims = int(*f.GetU32Or("llama.rope.dimension_count", uint32_t(D_)));
    rp_.mode = 0;
    rp_.n_ctx_orig = int(*f.GetU32("llama.context_length"));
    rp_.freq_base = *f.GetF32Or("llama.rope.freq_base", 10000.f);
    tok_embd_ = w_("token_embd.weight", false);
    out_w_ = w_("output.weight");
    if (!out_w_.data) out_w_ = w_("token_embd.weight");  // tied embeddings
    V_ = out_w_.ne[1];
    kcache_.assign(size_t(L_), std::vector<uint16_t>(size_t(D_ * Hkv_ * n_ctx_)));
    vcache_.assign(size_t(L_), std::vector<uint16_t>(size_t(D_ * Hkv_ * n_ctx_)));
  }
  int64_t n_vocab() const { return V_; }

  // Evaluates `tokens` at positions pos0.. (cells pos0..), logits [V, T] into *logits.
  Status Eval(const std::vector<int32_t>& tokens, int64_t pos0, std::vector<float>* logits) {
    // n_kv padded to 32 cells as llama.cpp (Feb 2025) without flash attention
    // (llama_kv_cache_get_padding): SOFT_MAX's 16-lane groups then fall where llama.cpp's do.
    const int64_t T = int64_t(tokens.size());
    if (pos0 + T > n_ctx_) return OutOfRange("context full");
    const int64_t n_kv = std::min<int64_t>(n_ctx_, (pos0 + T + 31) / 32 * 32);
    const int64_t E = E_, H = H_, Hkv = Hkv_, D = D_;
    std::vector<int32_t> ids(tokens), positions(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) positions[size_t(i)] = int32_t(pos0 + i);
    TensorView idv;
    idv.type = GgmlType::I32;
    idv.ne[0] = T;
    SetContiguousStrides(idv);
    idv.data = ids.data();
    TensorView pos = idv;
    pos.data = positions.data();
    Buf x(E, T);
    STOWAGE_RETURN_IF_ERROR(GetRows(ctx_, tok_embd_, idv, x.v));
    Buf mask(n_kv, T);  // causal: token i (position pos0 + i) sees cells <= pos0 + i
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < n_kv; ++j) mask.data[size_t(i * n_kv + j)] = j <= pos0 + i ? 0.0f : -INFINITY;
    TensorView none;
    for (int64_t il = 0; il < L_; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      Buf cur(E, T), q(D * H, T), k(D * Hkv, T), v(D * Hkv, T);
      STOWAGE_RETURN_IF_ERROR(RmsNorm(ctx_, x.v, cur.v, eps_));
      STOWAGE_RETURN_IF_ERROR(Mul(ctx_, cur.v, w_(p + "attn_norm.weight"), cur.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "attn_q.weight"), cur.v, q.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "attn_k.weight"), cur.v, k.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "attn_v.weight"), cur.v, v.v));
      TensorView q3 = q.v, k3 = k.v;
      q3.ne[0] = D;
      q3.ne[1] = H;
      q3.ne[2] = T;
      SetContiguousStrides(q3);
      k3.ne[0] = D;
      k3.ne[1] = Hkv;
      k3.ne[2] = T;
      SetContiguousStrides(k3);
      STOWAGE_RETURN_IF_ERROR(Rope(ctx_, q3, pos, none, q3, rp_));
      STOWAGE_RETURN_IF_ERROR(Rope(ctx_, k3, pos, none, k3, rp_));
      uint16_t* kc = kcache_[size_t(il)].data();
      uint16_t* vc = vcache_[size_t(il)].data();
      // K store: cells pos0.. of the K cache [D*Hkv, n_ctx] (ggml_set_rows with the cell indices).
      TensorView kcv;
      kcv.type = GgmlType::F16;
      kcv.ne[0] = D * Hkv;
      kcv.ne[1] = n_ctx_;
      SetContiguousStrides(kcv);
      kcv.data = kc;
      std::vector<int64_t> cells(static_cast<size_t>(T));
      for (int64_t i = 0; i < T; ++i) cells[size_t(i)] = pos0 + i;
      TensorView cidx;
      cidx.type = GgmlType::I64;
      cidx.ne[0] = T;
      SetContiguousStrides(cidx);
      cidx.data = cells.data();
      STOWAGE_RETURN_IF_ERROR(SetRows(ctx_, k.v, cidx, kcv));
      // V store, transposed (ggml_cpy into a strided view): V cache [n_ctx, D*Hkv]; element (c, t)
      // at row c, column pos0 + t.
      TensorView vdst;
      vdst.type = GgmlType::F16;
      vdst.ne[0] = D * Hkv;
      vdst.ne[1] = T;
      vdst.nb[0] = size_t(n_ctx_) * 2;
      vdst.nb[1] = 2;
      vdst.nb[2] = vdst.nb[3] = size_t(n_ctx_ * D * Hkv) * 2;
      vdst.data = vc + pos0;
      STOWAGE_RETURN_IF_ERROR(Cpy(ctx_, v.v, vdst));
      // kq = K^T q per head: K view [D, n_kv, Hkv], q permuted [D, T, H].
      TensorView kv;
      kv.type = GgmlType::F16;
      kv.ne[0] = D;
      kv.ne[1] = n_kv;
      kv.ne[2] = Hkv;
      kv.nb[0] = 2;
      kv.nb[1] = size_t(D * Hkv) * 2;
      kv.nb[2] = size_t(D) * 2;
      kv.nb[3] = kv.nb[1] * size_t(n_ctx_);
      kv.data = kc;
      TensorView qp = q3;
      qp.ne[1] = T;
      qp.ne[2] = H;
      qp.nb[1] = q3.nb[2];
      qp.nb[2] = q3.nb[1];
      Buf kq(n_kv, T, H);
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, kv, qp, kq.v));
      STOWAGE_RETURN_IF_ERROR(SoftMax(ctx_, kq.v, mask.v, kq.v, 1.0f / std::sqrt(float(D)), 0.0f));
      // kqv = V^T kq: V view [n_kv, D, Hkv].
      TensorView vv;
      vv.type = GgmlType::F16;
      vv.ne[0] = n_kv;
      vv.ne[1] = D;
      vv.ne[2] = Hkv;
      vv.nb[0] = 2;
      vv.nb[1] = size_t(n_ctx_) * 2;
      vv.nb[2] = size_t(n_ctx_ * D) * 2;
      vv.nb[3] = vv.nb[2] * size_t(Hkv);
      vv.data = vc;
      Buf kqv(D, T, H);
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, vv, kq.v, kqv.v));
      TensorView kqvp = kqv.v;  // [D, T, H] -> [D, H, T], made contiguous as [E, T]
      kqvp.ne[1] = H;
      kqvp.ne[2] = T;
      kqvp.nb[1] = kqv.v.nb[2];
      kqvp.nb[2] = kqv.v.nb[1];
      Buf attn(E, T), o(E, T);
      STOWAGE_RETURN_IF_ERROR(Cpy(ctx_, kqvp, attn.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "attn_output.weight"), attn.v, o.v));
      STOWAGE_RETURN_IF_ERROR(Add(ctx_, x.v, o.v, x.v));
      const TensorView wg = w_(p + "ffn_gate.weight");
      const int64_t F = wg.ne[1];
      Buf gate(F, T), up(F, T), hbuf(F, T), down(E, T);
      STOWAGE_RETURN_IF_ERROR(RmsNorm(ctx_, x.v, cur.v, eps_));
      STOWAGE_RETURN_IF_ERROR(Mul(ctx_, cur.v, w_(p + "ffn_norm.weight"), cur.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, wg, cur.v, gate.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "ffn_up.weight"), cur.v, up.v));
      STOWAGE_RETURN_IF_ERROR(SwiGlu(ctx_, gate.v, up.v, hbuf.v));
      STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, w_(p + "ffn_down.weight"), hbuf.v, down.v));
      STOWAGE_RETURN_IF_ERROR(Add(ctx_, x.v, down.v, x.v));
    }
    Buf cur(E, T), out(V_, T);
    STOWAGE_RETURN_IF_ERROR(RmsNorm(ctx_, x.v, cur.v, eps_));
    STOWAGE_RETURN_IF_ERROR(Mul(ctx_, cur.v, w_("output_norm.weight"), cur.v));
    STOWAGE_RETURN_IF_ERROR(MulMat(ctx_, out_w_, cur.v, out.v));
    *logits = std::move(out.data);
    return Status::Ok();
  }

 private:
  const GgufFile& f_;
  Weights w_;
  int64_t n_ctx_;
  ComputeContext ctx_;
  int64_t E_ = 0, H_ = 0, Hkv_ = 0, L_ = 0, D_ = 0, V_ = 0;
  float eps_ = 1e-5f;
  RopeParams rp_;
  TensorView tok_embd_, out_w_;
  std::vector<std::vector<uint16_t>> kcache_, vcache_;
};

struct RunResult {
  double max_err = -1;      // max |logit - golden| over all prompt positions
  int greedy_matched = -1;  // leading greedy tokens equal to llama.cpp's
  int greedy_total = 0;
};

void RunModel(const std::string& model, int n_threads, IsaLevel isa, bool repack, bool greedy_decode,
              RunResult* r) {
  const std::string path = test::ModelPath(model + ".gguf");
  const std::string golden = test::GoldenDir() + "/logits/" + model + ".json";
  if (!test::FileExists(path) || !test::FileExists(golden))
    GTEST_SKIP() << "skipped: " << path << " or golden absent";
  auto fr = GgufFile::Open(path);
  ASSERT_TRUE(fr.ok()) << fr.status().ToString();
  nlohmann::json g;
  std::ifstream(golden) >> g;
  const std::vector<int32_t> tokens = g["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> greedy = g["greedy"].get<std::vector<int32_t>>();
  const int64_t T = int64_t(tokens.size());
  MiniLlama m(**fr, n_threads, isa, repack, 256);
  std::vector<float> logits;
  OK(m.Eval(tokens, 0, &logits));
  const int64_t V = m.n_vocab();
  const auto& gl = g["prompt_logits"];
  ASSERT_EQ(int64_t(gl.size()), T);
  r->max_err = 0;
  for (int64_t t = 0; t < T; ++t) {
    ASSERT_EQ(int64_t(gl[size_t(t)].size()), V);
    for (int64_t i = 0; i < V; ++i)
      r->max_err = std::max(
          r->max_err, std::fabs(double(logits[size_t(t * V + i)]) - gl[size_t(t)][size_t(i)].get<double>()));
  }
  if (!greedy_decode) return;
  // Greedy decode, one token at a time through the KV cache (the tg shapes: M = 1).
  auto argmax = [&](const float* l) { return int32_t(std::max_element(l, l + V) - l); };
  int32_t next = argmax(logits.data() + (T - 1) * V);
  r->greedy_total = int(greedy.size());
  r->greedy_matched = 0;
  bool same = true;
  for (size_t i = 0; i < greedy.size(); ++i) {
    if (same && next == greedy[i])
      ++r->greedy_matched;
    else
      same = false;
    if (i + 1 == greedy.size()) break;
    OK(m.Eval({next}, T + int64_t(i), &logits));
    next = argmax(logits.data());
  }
}

bool IsQuantized(const std::string& m) {
  return m.find('Q') != std::string::npos || m.find("q4") != std::string::npos;
}

TEST_P(LlamaGolden, LogitsAndGreedyTokensMatchLlamaCpp) {
  const std::string model = GetParam();
  const double tol = IsQuantized(model) ? 0.25 : 0.02;  // the kernel issue's tolerances
  // Models with weights CPU_REPACK takes (Q4_0, Q4_K).
  const bool q4_0 = model.find("q4_0") != std::string::npos || model.find("Q4_0") != std::string::npos ||
                    model.find("Q4_K") != std::string::npos;
  const IsaLevel best = DetectIsa();
  for (bool repack : {false, true}) {
    if (repack && !q4_0) break;
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
      if (isa > best) continue;
      // Greedy decoding (24 single-token steps) once per model, on the best level, 2 threads;
      // llama.cpp repacks Q4_0 and (since mid-2025) Q4_K weights with ne1 % 8 == 0 on AVX2, so those
      // models decode repacked.
      const bool decode = isa == best && (repack || !q4_0);
      RunResult r;
      RunModel(model, decode ? 2 : 1, isa, repack, decode, &r);
      if (IsSkipped() || HasFatalFailure()) return;
      const std::string what = model + " isa " + std::to_string(int(isa)) + (repack ? " CPU_REPACK" : "");
      EXPECT_LE(r.max_err, tol) << what;
      // On the best SIMD level the arithmetic follows ggml's x86 kernels, so the logits agree far
      // below the tolerance and greedy decoding reproduces llama.cpp's tokens. (llama.cpp's AVX2
      // and AVX-512 builds differ in SILU's and SOFT_MAX's exp, as this backend's levels do, so a
      // lower level of an F16 model may differ by ~0.01 from goldens made on an AVX-512 machine.)
      // Greedy equality is asserted for the real and tiny models; the synthetic random-weight
      // models decode near ties through K-quant dots whose float order is not yet ggml's
      // (runtime/src/backends/cpu/README.md, "Agreement with llama.cpp"), so a flip is reported.
      // The goldens come from an AVX-512 machine: on a CPU whose best level is AVX2 the logits follow
      // llama.cpp's haswell build instead (test/data/golden-exact/haswell checks that bit for bit),
      // up to ~0.01 away from these goldens on the F16 model, so the close check needs AVX-512.
      if (isa == best && best >= IsaLevel::kAvx512 && (repack || !q4_0)) EXPECT_LE(r.max_err, 1e-3) << what;
      const bool synthetic = model.rfind("synth-", 0) == 0;
      if (decode && best >= IsaLevel::kAvx2 && !synthetic)
        EXPECT_EQ(r.greedy_matched, r.greedy_total) << what;
      std::printf("%-20s isa %d %-10s max |logit - llama.cpp| = %.5f", model.c_str(), int(isa),
                  repack ? "CPU_REPACK" : "plain", r.max_err);
      if (decode) std::printf(", greedy %d/%d", r.greedy_matched, r.greedy_total);
      std::printf("\n");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LlamaGolden,
                         ::testing::Values("stories260K", "stories260K-F16", "stories260K-Q8_0",
                                           "stories260K-Q4_0", "stories260K-Q4_K_M", "tiny-tied-f32",
                                           "tiny-tied-q4_0", "tiny-untied-q4_0", "tiny8-untied-q4_0",
                                           "synth-Q4_K_M", "synth-Q6_K", "synth-Q2_K", "synth-IQ4_XS",
                                           "llama-2-tiny-random"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace stowage::cpu
