// ggml-diff: bit-for-bit comparison of the CPU backend's kernels and ops with llama.cpp's CPU
// library (libggml-cpu-<variant>.so of npm node-llama-cpp@3.21.1, linked by
// scripts/diff-vs-llamacpp.sh), on random inputs, one thread. Not a test (the reference library is
// fetched on demand): a measuring tool behind the claims of runtime/src/backends/cpu/README.md
// ("Bit-exact ops and batch invariance").
//
// Usage: ggml-diff avx512|avx2 — the Stowage ISA level to compare; link the libggml-cpu variant
// built for that level (zen4/icelake/skylakex for avx512, haswell for avx2).
// Prints one line per kernel/op: how many of the compared floats (or activation bytes) differ.
// Exit status: 0 when nothing differs, 1 otherwise, 2 on bad usage.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels.h"
#include "ops.h"
#include "quants.h"

// ggml-cpu's exported row kernels (ggml-cpu/quants.h, not installed as a header).
extern "C" {
void quantize_row_q8_0(const float* x, void* y, int64_t k);
void quantize_row_q8_1(const float* x, void* y, int64_t k);
void quantize_row_q8_K(const float* x, void* y, int64_t k);
void ggml_vec_dot_q4_0_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q4_1_q8_1(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q5_0_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q5_1_q8_1(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q8_0_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_iq4_nl_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy,
                              size_t by, int nrc);
void ggml_vec_dot_q2_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q3_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q4_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q5_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_q6_K_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                            int nrc);
void ggml_vec_dot_iq4_xs_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy,
                              size_t by, int nrc);
void ggml_vec_dot_mxfp4_q8_0(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                             int nrc);
// ggml-cpu/repack.h: CPU_REPACK's MXFP4 8x8 kernels (block_mxfp4x8: e[8], then the 8 rows' qs in
// 8-byte chunks, chunk i from row i % 8) and the 4-row Q8_0 activations of its GEMM.
void ggml_gemv_mxfp4_8x8_q8_0(int n, float* s, size_t bs, const void* vx, const void* vy, int nr, int nc);
void ggml_gemm_mxfp4_8x8_q8_0(int n, float* s, size_t bs, const void* vx, const void* vy, int nr, int nc);
void ggml_quantize_mat_q8_0_4x8(const float* x, void* vy, int64_t k);
}

namespace {

namespace sc = stowage::cpu;
using stowage::GgmlType;
using VecDot = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
using QuantRow = void (*)(const float*, void*, int64_t);

int g_differing_lines = 0;

void Report(const std::string& what, int64_t bad, int64_t total, double max_abs = 0) {
  std::printf("%-34s %7lld of %7lld differ", what.c_str(), static_cast<long long>(bad),
              static_cast<long long>(total));
  if (bad > 0) std::printf(" (max |diff| %.3g)", max_abs);
  std::printf("\n");
  if (bad > 0) ++g_differing_lines;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Random weight rows of `type`: random bits (every quant pattern) with sane fp16 scales where the
// block type keeps them (ggml's block layouts: d / dmin offsets per type).
std::vector<uint8_t> RandomRow(GgmlType type, int64_t K, std::mt19937& rng) {
  std::vector<uint8_t> out(stowage::RowSize(type, K));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  std::vector<size_t> scales;  // byte offsets of the block's fp16 scales
  switch (type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      scales = {0, 2};
      break;  // d, m
    case GgmlType::Q2_K:
      scales = {80, 82};
      break;
    case GgmlType::Q3_K:
      scales = {108};
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      scales = {0, 2};
      break;
    case GgmlType::Q6_K:
      scales = {208};
      break;
    case GgmlType::MXFP4:  // E8M0 scale byte first: 2^-6 .. 2^1 (finite products)
      for (size_t o = 0; o < out.size(); o += 17) out[o] = static_cast<uint8_t>(121 + rng() % 8);
      return out;
    default:
      scales = {0};
      break;  // Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS: d first
  }
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  const size_t bs = stowage::GetTypeTraits(type).type_size;
  for (size_t o = 0; o < out.size(); o += bs)
    for (size_t off : scales) {
      const uint16_t h = sc::FloatToHalf(u(rng));
      std::memcpy(&out[o + off], &h, 2);
    }
  return out;
}

// Every vec_dot of the level against ggml's, with the activation quantizer of its vec_dot type.
void CompareVecDots(sc::IsaLevel isa) {
  struct Case {
    GgmlType type;
    VecDot ref;
    QuantRow quant;
  };
  const Case cases[] = {
      {GgmlType::Q4_0, ggml_vec_dot_q4_0_q8_0, quantize_row_q8_0},
      {GgmlType::Q4_1, ggml_vec_dot_q4_1_q8_1, quantize_row_q8_1},
      {GgmlType::Q5_0, ggml_vec_dot_q5_0_q8_0, quantize_row_q8_0},
      {GgmlType::Q5_1, ggml_vec_dot_q5_1_q8_1, quantize_row_q8_1},
      {GgmlType::Q8_0, ggml_vec_dot_q8_0_q8_0, quantize_row_q8_0},
      {GgmlType::IQ4_NL, ggml_vec_dot_iq4_nl_q8_0, quantize_row_q8_0},
      {GgmlType::Q2_K, ggml_vec_dot_q2_K_q8_K, quantize_row_q8_K},
      {GgmlType::Q3_K, ggml_vec_dot_q3_K_q8_K, quantize_row_q8_K},
      {GgmlType::Q4_K, ggml_vec_dot_q4_K_q8_K, quantize_row_q8_K},
      {GgmlType::Q5_K, ggml_vec_dot_q5_K_q8_K, quantize_row_q8_K},
      {GgmlType::Q6_K, ggml_vec_dot_q6_K_q8_K, quantize_row_q8_K},
      {GgmlType::IQ4_XS, ggml_vec_dot_iq4_xs_q8_K, quantize_row_q8_K},
      {GgmlType::MXFP4, ggml_vec_dot_mxfp4_q8_0, quantize_row_q8_0},
  };
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Case& c : cases) {
    const sc::TypeKernels* k = sc::GetTypeKernels(c.type, isa);
    const int64_t block = stowage::GetTypeTraits(c.type).block_size;
    int64_t bad_dot = 0, bad_act = 0, max_n = 0;
    double max_abs = 0;
    const int kRows = 400;
    for (int it = 0; it < kRows; ++it) {
      const int64_t K = block * (1 + it % 9);
      std::vector<float> x(static_cast<size_t>(K));
      // every 8th row tiny: 127 / amax overflows to inf (the quantizers' -128 / wrapped-sum case)
      for (float& v : x) v = nd(rng) * (it % 8 == 1 ? 1e-38f : it % 4 == 0 ? 0.01f : 1.f);
      std::vector<uint8_t> qa(stowage::RowSize(k->vec_dot_type, K)), qb(qa.size());
      c.quant(x.data(), qa.data(), K);
      k->from_float(x.data(), qb.data(), K);
      if (qa != qb) ++bad_act;
      const std::vector<uint8_t> w = RandomRow(c.type, K, rng);
      float r = 0, g = 0;
      c.ref(int(K), &r, 0, w.data(), 0, qa.data(), 0, 1);
      k->vec_dot(K, &g, w.data(), qa.data());
      if (!SameBits(r, g)) {
        ++bad_dot;
        max_abs = std::max(max_abs, double(std::fabs(r - g)));
      }
      max_n = it + 1;
    }
    Report(std::string("vec_dot ") + stowage::GgmlTypeName(c.type), bad_dot, max_n, max_abs);
    Report(std::string("  activations ") + stowage::GgmlTypeName(k->vec_dot_type), bad_act, max_n);
  }
}

// MXFP4's row conversions against ggml-base's type traits: to_float (dequantize_row_mxfp4) on every
// scale byte and code, from_float_ref (quantize_row_mxfp4_ref: llama-quantize's MXFP4) and ggml-cpu's
// from_float on random rows of several magnitudes (zeros and ties included).
void CompareMXFP4Rows() {
  const ggml_type_traits* tt = ggml_get_type_traits(GGML_TYPE_MXFP4);
  const ggml_type_traits_cpu* ct = ggml_get_type_traits_cpu(GGML_TYPE_MXFP4);
  std::mt19937 rng(3);
  int64_t bad = 0, total = 0;
  double max_abs = 0;
  for (int e = 0; e < 256; ++e) {  // one block per scale byte, random codes
    uint8_t blk[17];
    blk[0] = static_cast<uint8_t>(e);
    for (int j = 1; j < 17; ++j) blk[j] = static_cast<uint8_t>(rng());
    float r[32], g[32];
    tt->to_float(blk, r, 32);
    (void)sc::DequantizeRow(GgmlType::MXFP4, blk, g, 32);
    for (int j = 0; j < 32; ++j, ++total)
      if (!SameBits(r[j], g[j])) {
        ++bad;
        max_abs = std::max(max_abs, double(std::fabs(r[j] - g[j])));
      }
  }
  Report("dequantize mxfp4 (every scale)", bad, total, max_abs);
  std::normal_distribution<float> nd(0.f, 1.f);
  int64_t bad_ref = 0, bad_cpu = 0, rows = 0;
  for (int it = 0; it < 400; ++it, ++rows) {
    const int64_t K = 32 * (1 + it % 9);
    std::vector<float> x(static_cast<size_t>(K));
    const float scale = it % 5 == 0 ? 1e-3f : it % 5 == 1 ? 100.f : 1.f;
    for (float& v : x) v = nd(rng) * scale;
    if (it % 7 == 0)  // exact levels and midpoints (ties)
      for (size_t j = 0; j < x.size(); ++j)
        x[j] = 0.25f * static_cast<float>(static_cast<int>(rng() % 49) - 24);
    if (it % 11 == 0) std::fill(x.begin(), x.begin() + 32, 0.f);
    std::vector<uint8_t> r(stowage::RowSize(GgmlType::MXFP4, K)), c(r.size()), g(r.size());
    tt->from_float_ref(x.data(), r.data(), K);
    ct->from_float(x.data(), c.data(), K);
    (void)sc::QuantizeRow(GgmlType::MXFP4, x.data(), g.data(), K);
    bad_ref += r != g;
    bad_cpu += c != g;
  }
  Report("quantize mxfp4 (from_float_ref)", bad_ref, rows);
  Report("quantize mxfp4 (ggml-cpu from_float)", bad_cpu, rows);
}

// CPU_REPACK MXFP4: llama.cpp's mxfp4_8x8 gemv (one activation row) and gemm (4 rows) on its own
// layout against this backend's MUL_MAT on kLayoutMXFP4x8 (M = 1: the gemv; M = 4: the GEMM path at
// >= kGemmMinCols, else the gemv per column), default and llamacpp_numerics.
void CompareMXFP4Repack(sc::IsaLevel isa) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  int64_t bad_v = 0, bad_m = 0, tot_v = 0, tot_m = 0;
  double max_abs = 0;
  for (int64_t K : {32, 96, 2880}) {
    const int64_t N = 64, nb = K / 32;
    std::vector<uint8_t> plain;
    for (int r = 0; r < N; ++r) {
      const std::vector<uint8_t> row = RandomRow(GgmlType::MXFP4, K, rng);
      plain.insert(plain.end(), row.begin(), row.end());
    }
    std::vector<uint8_t> ref_layout(plain.size()), ours(plain.size());
    for (int64_t g = 0; g < N / 8; ++g)
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* out = ref_layout.data() + size_t((g * nb + b) * 136);
        for (int r = 0; r < 8; ++r) {
          const uint8_t* blk = plain.data() + size_t(((g * 8 + r) * nb + b) * 17);
          out[r] = blk[0];
          for (int half = 0; half < 2; ++half)
            std::memcpy(out + 8 + 8 * (8 * half + r), blk + 1 + 8 * half, 8);
        }
      }
    sc::TensorView w;
    w.type = GgmlType::MXFP4;
    w.ne[0] = K;
    w.ne[1] = N;
    w.ne[2] = w.ne[3] = 1;
    stowage::exec::SetContiguousStrides(w);
    w.data = plain.data();
    (void)sc::RepackWeight(w, sc::kLayoutMXFP4x8, ours.data());
    w.data = ours.data();
    w.layout = sc::kLayoutMXFP4x8;
    for (int64_t M : {1, 4, 16}) {
      std::vector<float> x(size_t(K * M));
      for (float& v : x) v = nd(rng);
      std::vector<float> ref(size_t(N * M));
      if (M == 1) {
        std::vector<uint8_t> q(stowage::RowSize(GgmlType::Q8_0, K));
        quantize_row_q8_0(x.data(), q.data(), K);
        ggml_gemv_mxfp4_8x8_q8_0(int(K), ref.data(), size_t(N), ref_layout.data(), q.data(), 1, int(N));
      } else {
        std::vector<uint8_t> q(size_t(4 * nb * 34));
        for (int64_t m0 = 0; m0 < M; m0 += 4) {
          ggml_quantize_mat_q8_0_4x8(x.data() + m0 * K, q.data(), K);
          ggml_gemm_mxfp4_8x8_q8_0(int(K), ref.data() + m0 * N, size_t(N), ref_layout.data(), q.data(), 4,
                                   int(N));
        }
      }
      sc::TensorView xv;
      xv.type = GgmlType::F32;
      xv.ne[0] = K;
      xv.ne[1] = M;
      xv.ne[2] = xv.ne[3] = 1;
      stowage::exec::SetContiguousStrides(xv);
      xv.data = x.data();
      for (bool numerics : {false, true}) {
        sc::ComputeContext ctx;
        ctx.max_isa = isa;
        ctx.llamacpp_numerics = numerics;
        std::vector<float> got(ref.size());
        sc::TensorView d;
        d.type = GgmlType::F32;
        d.ne[0] = N;
        d.ne[1] = M;
        d.ne[2] = d.ne[3] = 1;
        stowage::exec::SetContiguousStrides(d);
        d.data = got.data();
        (void)sc::MulMat(ctx, w, xv, d);
        for (size_t i = 0; i < ref.size(); ++i)
          if (!SameBits(ref[i], got[i])) {
            ++(M == 1 ? bad_v : bad_m);
            max_abs = std::max(max_abs, double(std::fabs(ref[i] - got[i])));
          }
        (M == 1 ? tot_v : tot_m) += int64_t(ref.size());
      }
    }
  }
  Report("MUL_MAT mxfp4x8 vs gemv_mxfp4_8x8", bad_v, tot_v, max_abs);
  Report("MUL_MAT mxfp4x8 vs gemm_mxfp4_8x8", bad_m, tot_m, max_abs);
}

// ---- ops through ggml graphs ----

sc::TensorView View(ggml_tensor* t) {
  sc::TensorView v;
  v.data = t->data;
  v.type = GgmlType(int(t->type));
  for (int i = 0; i < 4; ++i) {
    v.ne[i] = t->ne[i];
    v.nb[i] = t->nb[i];
  }
  return v;
}

void Fill(ggml_tensor* t, std::mt19937& rng, float scale) {
  std::normal_distribution<float> nd(0.f, scale);
  float* p = static_cast<float*>(t->data);
  for (int64_t i = 0; i < ggml_nelements(t); ++i) p[i] = nd(rng);
}

void Compute(ggml_context* ctx, ggml_tensor* out) {
  ggml_cgraph* g = ggml_new_graph(ctx);
  ggml_build_forward_expand(g, out);
  ggml_graph_compute_with_ctx(ctx, g, 1);
}

// Compares ggml's F32 (or F16) result `ref` with `got` (floats).
void CompareOut(const std::string& what, ggml_tensor* ref, const std::vector<float>& got) {
  int64_t bad = 0;
  double max_abs = 0;
  for (int64_t i = 0; i < ggml_nelements(ref); ++i) {
    const float r = ref->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(static_cast<ggml_fp16_t*>(ref->data)[i])
                                               : static_cast<float*>(ref->data)[i];
    if (!SameBits(r, got[size_t(i)])) {
      ++bad;
      max_abs = std::max(max_abs, double(std::fabs(r - got[size_t(i)])));
    }
  }
  Report(what, bad, ggml_nelements(ref), max_abs);
}

void CompareOps(sc::IsaLevel isa) {
  ggml_init_params ip = {size_t(256) << 20, nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  sc::ComputeContext sctx;
  sctx.n_threads = 1;
  sctx.max_isa = isa;
  std::mt19937 rng(7);
  std::vector<float> out;
  auto dst = [&](ggml_tensor* ref) {
    out.assign(size_t(ggml_nelements(ref)), 0.f);
    sc::TensorView v = View(ref);
    v.data = out.data();
    return v;
  };
  for (int n : {64, 172, 2048}) {
    const std::string sz = " n=" + std::to_string(n);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, 33);
    ggml_tensor* y = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, 33);
    ggml_tensor* w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    Fill(x, rng, 3.f);
    Fill(y, rng, 1.f);
    Fill(w, rng, 1.f);
    ggml_tensor* r = ggml_rms_norm(ctx, x, 1e-5f);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::RmsNorm(sctx, View(x), d, 1e-5f);
    CompareOut("RMS_NORM" + sz, r, out);
    r = ggml_mul(ctx, x, w);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Mul(sctx, View(x), View(w), d);
    CompareOut("MUL" + sz, r, out);
    r = ggml_add(ctx, x, y);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Add(sctx, View(x), View(y), d);
    CompareOut("ADD" + sz, r, out);
    r = ggml_silu(ctx, x);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Silu(sctx, View(x), d);
    CompareOut("SILU" + sz, r, out);
    r = ggml_tanh(ctx, x);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Tanh(sctx, View(x), d);
    CompareOut("TANH" + sz, r, out);
    r = ggml_swiglu_split(ctx, x, y);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::SwiGlu(sctx, View(x), View(y), d);
    CompareOut("SWIGLU" + sz, r, out);
    // gpt-oss's clamped SwiGLU: gates and values beyond the limit (x of scale 3, limit 2)
    r = ggml_swiglu_oai(ctx, x, y, 1.702f, 2.f);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::SwiGluOai(sctx, View(x), View(y), d, 1.702f, 2.f);
    CompareOut("SWIGLU_OAI" + sz, r, out);
    ggml_tensor* h = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n, 33);
    r = ggml_cpy(ctx, x, h);
    Compute(ctx, r);
    std::vector<uint16_t> hv(size_t(ggml_nelements(h)));
    sc::TensorView hd = View(h);
    hd.data = hv.data();
    (void)sc::Cpy(sctx, View(x), hd);
    out.resize(hv.size());
    for (size_t i = 0; i < hv.size(); ++i) out[i] = sc::HalfToFloat(hv[i]);
    CompareOut("CPY f32->f16" + sz, h, out);
  }
  for (int hd : {8, 64, 128})
    for (int mode : {0, 2}) {
      ggml_tensor* x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, 8, 33);
      Fill(x, rng, 2.f);
      ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 33);
      for (int i = 0; i < 33; ++i) static_cast<int32_t*>(pos->data)[i] = i * 37 + 3;
      ggml_tensor* r = ggml_rope_ext(ctx, x, pos, nullptr, hd, mode, 0, 10000.f, 1.f, 0.f, 1.f, 32.f, 1.f);
      Compute(ctx, r);
      sc::TensorView d = dst(r);
      sc::RopeParams p;
      p.n_dims = hd;
      p.mode = mode;
      (void)sc::Rope(sctx, View(x), View(pos), sc::TensorView(), d, p);
      CompareOut("ROPE head_dim=" + std::to_string(hd) + (mode == 2 ? " neox" : " norm"), r, out);
    }
  // The ops of the newer architectures (gemma2/gemma3, qwen3, mistral3, YaRN / rope_freqs llama),
  // with llamacpp_numerics (GELU's table, SCALE with a bias and YaRN's angles follow llama.cpp's FMA
  // contractions only then): RMS_NORM over heads on activations of a wide dynamic range, GELU /
  // GEGLU (fused gate|up halves and split), SCALE with and without bias, gemma2's soft-cap chain
  // (SCALE 1/cap -> TANH -> SCALE cap), the temperature MUL broadcast over [1, 1, n_tokens].
  sctx.llamacpp_numerics = true;
  const std::string num = " (llamacpp_numerics)";
  for (int hd : {16, 32, 128}) {
    const std::string sz = " head_dim=" + std::to_string(hd);
    ggml_tensor* x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, 8, 33);
    std::uniform_real_distribution<float> ex(-5.f, 1.5f);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t i = 0; i < ggml_nelements(x); ++i)
      static_cast<float*>(x->data)[i] = nd(rng) * std::pow(10.f, ex(rng));
    ggml_tensor* r = ggml_rms_norm(ctx, x, 1e-6f);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::RmsNorm(sctx, View(x), d, 1e-6f);
    CompareOut("RMS_NORM wide range" + sz + num, r, out);
    ggml_tensor* t = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1, 1, 33);
    Fill(t, rng, 1.f);
    r = ggml_mul(ctx, x, t);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Mul(sctx, View(x), View(t), d);
    CompareOut("MUL by [1,1,n_tokens]" + sz + num, r, out);
  }
  for (int n : {64, 172}) {
    const std::string sz = " n=" + std::to_string(n);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, 33);
    ggml_tensor* y = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, 33);
    ggml_tensor* gu = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2 * n, 33);
    Fill(x, rng, 4.f);
    Fill(y, rng, 1.f);
    Fill(gu, rng, 4.f);
    ggml_tensor* r = ggml_gelu(ctx, x);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::Gelu(sctx, View(x), d);
    CompareOut("GELU" + sz + num, r, out);
    r = ggml_geglu_split(ctx, x, y);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::GeGlu(sctx, View(x), View(y), d);
    CompareOut("GEGLU split" + sz + num, r, out);
    r = ggml_geglu(ctx, gu);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::GeGlu(sctx, View(gu), sc::TensorView(), d);
    CompareOut("GEGLU fused" + sz + num, r, out);
    for (float b : {0.f, 0.5f}) {
      r = ggml_scale_bias(ctx, x, 0.0883883f, b);
      Compute(ctx, r);
      d = dst(r);
      (void)sc::Scale(sctx, View(x), d, 0.0883883f, b);
      CompareOut(std::string("SCALE") + (b != 0 ? " with bias" : "") + sz + num, r, out);
    }
    for (float cap : {0.5f, 30.f}) {
      r = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, x, 1.0f / cap)), cap);
      Compute(ctx, r);
      d = dst(r);
      std::vector<float> tmp(out.size());
      sc::TensorView tv = View(x);
      tv.data = tmp.data();
      (void)sc::Scale(sctx, View(x), tv, 1.0f / cap, 0.f);
      (void)sc::Tanh(sctx, tv, tv);
      (void)sc::Scale(sctx, tv, d, cap, 0.f);
      CompareOut("soft-cap " + std::to_string(int(cap * 10) / 10.f).substr(0, 4) + sz + num, r, out);
    }
  }
  {  // GELU of every finite fp16 value (its table entries, the ones GCC's FMA contraction changes too)
    ggml_tensor* x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 65536);
    float* xv = static_cast<float*>(x->data);
    for (int i = 0; i < 65536; ++i) {
      const float v = ggml_fp16_to_fp32(ggml_fp16_t(i));
      xv[i] = std::isfinite(v) ? v : 0.f;
    }
    ggml_tensor* r = ggml_gelu(ctx, x);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::Gelu(sctx, View(x), d);
    CompareOut("GELU every fp16 value" + num, r, out);
  }
  // ROPE as the newer models call it: YaRN (ext_factor 1, freq_scale 1/4, beta_slow 1 or 0.25 so
  // that the ramp takes values between 0 and 1, attn_factor 1 or mistral3's), linear scaling
  // (freq_scale 1/8, gemma3's global layers), Llama-3.1 freq factors.
  {
    struct RopeCase {
      const char* name;
      float base, freq_scale, ext_factor, attn_factor, beta_slow;
      bool factors;
    };
    const RopeCase cases[] = {{"yarn", 10000.f, 0.25f, 1.f, 1.f, 1.f, false},
                              {"yarn beta_slow 0.25", 10000.f, 0.25f, 1.f, 1.f, 0.25f, false},
                              {"yarn attn_factor 0.9", 10000.f, 0.25f, 1.f, 0.9f, 0.25f, false},
                              {"linear 1/8 base 1e6", 1e6f, 0.125f, 0.f, 1.f, 1.f, false},
                              {"freq_factors", 500000.f, 1.f, 0.f, 1.f, 1.f, true}};
    for (const RopeCase& rc : cases)
      for (int hd : {16, 64})
        for (int mode : {0, 2}) {
          ggml_tensor* x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, 8, 33);
          Fill(x, rng, 2.f);
          ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 33);
          for (int i = 0; i < 33; ++i) static_cast<int32_t*>(pos->data)[i] = i * 13 + 1;
          ggml_tensor* ff = nullptr;
          if (rc.factors) {
            ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, hd / 2);
            for (int i = 0; i < hd / 2; ++i) static_cast<float*>(ff->data)[i] = 1.f + 7.f * i / (hd / 2);
          }
          ggml_tensor* r = ggml_rope_ext(ctx, x, pos, ff, hd, mode, 16, rc.base, rc.freq_scale, rc.ext_factor,
                                         rc.attn_factor, 32.f, rc.beta_slow);
          Compute(ctx, r);
          sc::TensorView d = dst(r);
          sc::RopeParams p;
          p.n_dims = hd;
          p.mode = mode;
          p.n_ctx_orig = 16;
          p.freq_base = rc.base;
          p.freq_scale = rc.freq_scale;
          p.ext_factor = rc.ext_factor;
          p.attn_factor = rc.attn_factor;
          p.beta_slow = rc.beta_slow;
          (void)sc::Rope(sctx, View(x), View(pos), ff ? View(ff) : sc::TensorView(), d, p);
          CompareOut(std::string("ROPE ") + rc.name + " head_dim=" + std::to_string(hd) +
                         (mode == 2 ? " neox" : " norm") + num,
                     r, out);
        }
  }
  // ROPE of the last dims only (ggml_rope_set_offset): deepseek2's MHA form ropes dims 16..23 of
  // 24-wide query heads (qk_nope 16, n_rot 8) with YaRN, as llama_model_deepseek2::graph.
  for (int mode : {0, 2}) {
    ggml_tensor* x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 24, 8, 33);
    Fill(x, rng, 2.f);
    ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 33);
    for (int i = 0; i < 33; ++i) static_cast<int32_t*>(pos->data)[i] = i * 13 + 1;
    ggml_tensor* r = ggml_rope_ext(ctx, x, pos, nullptr, 8, mode, 16, 10000.f, 0.25f, 1.f, 1.1f, 32.f, 1.f);
    r = ggml_rope_set_offset(r, 16);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    sc::RopeParams p;
    p.n_dims = 8;
    p.n_offs = 16;
    p.mode = mode;
    p.n_ctx_orig = 16;
    p.freq_scale = 0.25f;
    p.ext_factor = 1.f;
    p.attn_factor = 1.1f;
    (void)sc::Rope(sctx, View(x), View(pos), sc::TensorView(), d, p);
    CompareOut(std::string("ROPE n_offs 16 of 24") + (mode == 2 ? " neox" : " norm") + num, r, out);
  }
  // SOFT_MAX with a sliding-window mask (F32, as llama.cpp 2026 without flash attention: key k of
  // token t visible for t - 8 < k <= t) at scale 1 (gemma: the query is scaled before KQ).
  for (int nkv : {49, 256}) {
    ggml_tensor* kq = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, nkv, 33, 4);
    Fill(kq, rng, 4.f);
    ggml_tensor* mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nkv, 33);
    for (int t = 0; t < 33; ++t)
      for (int k = 0; k < nkv; ++k)
        static_cast<float*>(mask->data)[t * nkv + k] = k <= t + 7 && k > t - 1 ? 0.f : -INFINITY;
    ggml_tensor* r = ggml_soft_max_ext(ctx, kq, mask, 1.0f, 0.f);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::SoftMax(sctx, View(kq), View(mask), d, 1.0f, 0.f);
    CompareOut("SOFT_MAX SWA mask n_kv=" + std::to_string(nkv) + num, r, out);
  }
  // gpt-oss: SOFT_MAX with one sink logit per head (ggml_soft_max_add_sinks), sinks below and above
  // the rows' maxima; ADD_ID of expert bias rows.
  for (int nkv : {49, 256}) {
    ggml_tensor* kq = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, nkv, 33, 4);
    Fill(kq, rng, 4.f);
    ggml_tensor* mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, nkv, 33);
    for (int t = 0; t < 33; ++t)
      for (int k = 0; k < nkv; ++k)
        static_cast<float*>(mask->data)[t * nkv + k] = k <= t + 7 ? 0.f : -INFINITY;
    ggml_tensor* sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    const float sv[4] = {-2.f, 0.5f, 3.f, 9.f};
    std::memcpy(sinks->data, sv, sizeof sv);
    ggml_tensor* r = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.f);
    ggml_soft_max_add_sinks(r, sinks);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::SoftMax(sctx, View(kq), View(mask), d, 0.125f, 0.f, View(sinks));
    CompareOut("SOFT_MAX sinks n_kv=" + std::to_string(nkv) + num, r, out);
  }
  {
    ggml_tensor* a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2880, 4, 7);
    ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2880, 32);
    ggml_tensor* ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, 7);
    Fill(a, rng, 1.f);
    Fill(b, rng, 1.f);
    for (int i = 0; i < 28; ++i) static_cast<int32_t*>(ids->data)[i] = (i * 11 + 3) % 32;
    ggml_tensor* r = ggml_add_id(ctx, a, b, ids);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::AddId(sctx, View(a), View(b), View(ids), d);
    CompareOut("ADD_ID" + num, r, out);
  }
  // The MoE router's ops (llama.cpp 2026 build_moe_ffn): SIGMOID (deepseek2 / glm4moe gating) and
  // SOFT_MAX (qwen3moe, gpt-oss over the chosen logits) over [n_expert, n_tokens] rows of a wide range,
  // SUM_ROWS and DIV of the weight normalization.
  for (int ne : {8, 32, 128, 256}) {
    const std::string sz = " n_expert=" + std::to_string(ne) + num;
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne, 33);
    Fill(x, rng, 8.f);
    ggml_tensor* r = ggml_sigmoid(ctx, x);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::Sigmoid(sctx, View(x), d);
    CompareOut("SIGMOID" + sz, r, out);
    r = ggml_soft_max(ctx, x);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::SoftMax(sctx, View(x), sc::TensorView(), d, 1.0f, 0.f);
    CompareOut("SOFT_MAX router" + sz, r, out);
    ggml_tensor* w = ggml_sigmoid(ctx, x);
    Compute(ctx, w);
    ggml_tensor* sum = ggml_sum_rows(ctx, w);
    Compute(ctx, sum);
    d = dst(sum);
    (void)sc::SumRows(sctx, View(w), d);
    CompareOut("SUM_ROWS" + sz, sum, out);
    r = ggml_div(ctx, w, sum);
    Compute(ctx, r);
    d = dst(r);
    (void)sc::Div(sctx, View(w), View(sum), d);
    CompareOut("DIV by the row sum" + sz, r, out);
  }
  // The weight sum's CLAMP to [2^-14, INFINITY] (llama.cpp 2026 build_moe_ffn) over sums from 2^-4
  // down to 2^-23, zeros, infinities and NaN.
  {
    ggml_tensor* s = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 64);
    float* ps = static_cast<float*>(s->data);
    for (int i = 0; i < 64; ++i) ps[i] = std::ldexp(1.f + float(rng() % 1000) / 1000.f, -4 - i % 20);
    ps[0] = 0.f, ps[1] = -0.f, ps[2] = INFINITY, ps[3] = -INFINITY, ps[4] = NAN;
    ggml_tensor* r = ggml_clamp(ctx, s, 6.103515625e-5f, INFINITY);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::Clamp(sctx, View(s), d, 6.103515625e-5f, INFINITY);
    CompareOut("CLAMP of the weight sum" + num, r, out);
  }
  // ARGSORT (descending, the top-k's) of rows full of ties: llama.cpp sorts with std::sort, whose
  // introsort keeps ties in index order only up to 16 elements (its insertion sort); above, the
  // partitions reorder them.
  for (int ne : {8, 16, 17, 32, 64, 128, 256}) {
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne, 64);
    float* px = static_cast<float*>(x->data);
    for (int64_t i = 0; i < ggml_nelements(x); ++i) px[i] = float(rng() % 5) * 0.25f;
    ggml_tensor* r = ggml_argsort(ctx, x, GGML_SORT_ORDER_DESC);
    Compute(ctx, r);
    std::vector<int32_t> ids(size_t(ggml_nelements(r)));
    sc::TensorView d = View(r);
    d.data = ids.data();
    (void)sc::ArgSort(sctx, View(x), d, 1);
    int64_t bad = 0;
    for (size_t i = 0; i < ids.size(); ++i) bad += ids[i] != static_cast<int32_t*>(r->data)[i];
    Report("ARGSORT ties n=" + std::to_string(ne) + num, bad, ggml_nelements(r));
  }
  sctx.llamacpp_numerics = false;
  for (int nkv : {49, 256}) {
    ggml_tensor* kq = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, nkv, 33, 4);
    Fill(kq, rng, 4.f);
    ggml_tensor* mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, nkv, 33);
    for (int t = 0; t < 33; ++t)
      for (int k = 0; k < nkv; ++k)
        static_cast<ggml_fp16_t*>(mask->data)[t * nkv + k] = ggml_fp32_to_fp16(k <= t + 7 ? 0.f : -INFINITY);
    ggml_tensor* r = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.f);
    Compute(ctx, r);
    sc::TensorView d = dst(r);
    (void)sc::SoftMax(sctx, View(kq), View(mask), d, 0.125f, 0.f);
    CompareOut("SOFT_MAX n_kv=" + std::to_string(nkv), r, out);
  }
  // F16/F32 weights: vec_dot (1 column; with llamacpp_numerics, no GemvF16Heads) and tinyBLAS order.
  for (ggml_type wt : {GGML_TYPE_F16, GGML_TYPE_F32})
    for (int K : {64, 172, 256})
      for (int M : {1, 33}) {
        ggml_tensor* w = ggml_new_tensor_2d(ctx, wt, K, 48);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (int64_t i = 0; i < ggml_nelements(w); ++i) {
          if (wt == GGML_TYPE_F16)
            static_cast<ggml_fp16_t*>(w->data)[i] = ggml_fp32_to_fp16(nd(rng));
          else
            static_cast<float*>(w->data)[i] = nd(rng);
        }
        ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
        Fill(x, rng, 1.f);
        ggml_tensor* r = ggml_mul_mat(ctx, w, x);
        Compute(ctx, r);
        sctx.llamacpp_numerics = true;
        sc::TensorView d = dst(r);
        (void)sc::MulMat(sctx, View(w), View(x), d);
        sctx.llamacpp_numerics = false;
        CompareOut(std::string("MUL_MAT ") + (wt == GGML_TYPE_F16 ? "f16" : "f32") +
                       " K=" + std::to_string(K) + " M=" + std::to_string(M) + " (llamacpp_numerics)",
                   r, out);
      }
  // MXFP4 weights (a plain ggml context: no CPU_REPACK, the vec_dot for every column) and GET_ROWS.
  for (int K : {32, 96, 2880})
    for (int M : {1, 33}) {
      ggml_tensor* w = ggml_new_tensor_2d(ctx, GGML_TYPE_MXFP4, K, 40);
      std::vector<uint8_t> bytes;
      for (int r = 0; r < 40; ++r) {
        const std::vector<uint8_t> row = RandomRow(GgmlType::MXFP4, K, rng);
        bytes.insert(bytes.end(), row.begin(), row.end());
      }
      std::memcpy(w->data, bytes.data(), bytes.size());
      ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
      Fill(x, rng, 1.f);
      for (bool numerics : {false, true}) {
        // Without the option, >= kGemmMinCols columns take the GEMM's one-float order (llama.cpp's
        // repacked mxfp4_8x8 order), not this plain context's vec_dot.
        if (!numerics && M > 1) continue;
        ggml_tensor* r = ggml_mul_mat(ctx, w, x);
        Compute(ctx, r);
        sctx.llamacpp_numerics = numerics;
        sc::TensorView d = dst(r);
        (void)sc::MulMat(sctx, View(w), View(x), d);
        sctx.llamacpp_numerics = false;
        CompareOut("MUL_MAT mxfp4 K=" + std::to_string(K) + " M=" + std::to_string(M) +
                       (numerics ? " (llamacpp_numerics)" : ""),
                   r, out);
      }
      if (M == 1) {
        ggml_tensor* ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5);
        for (int i = 0; i < 5; ++i) static_cast<int32_t*>(ids->data)[i] = (i * 17) % 40;
        ggml_tensor* r = ggml_get_rows(ctx, w, ids);
        Compute(ctx, r);
        sc::TensorView d = dst(r);
        (void)sc::GetRows(sctx, View(w), View(ids), d);
        CompareOut("GET_ROWS mxfp4 K=" + std::to_string(K), r, out);
      }
    }
  ggml_free(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (std::string(argv[1]) != "avx512" && std::string(argv[1]) != "avx2")) {
    std::fprintf(stderr, "usage: ggml-diff avx512|avx2\n");
    return 2;
  }
  // avx512: this CPU's AVX-512 level (with VNNI where it has it, as the variant ggml loads here).
  const bool avx512 = std::string(argv[1]) == "avx512";
  if (sc::DetectIsa() < (avx512 ? sc::IsaLevel::kAvx512 : sc::IsaLevel::kAvx2)) {
    std::fprintf(stderr, "ggml-diff: this CPU has no %s\n", argv[1]);
    return 2;
  }
  const sc::IsaLevel isa = avx512 ? sc::DetectIsa() : sc::IsaLevel::kAvx2;
  ggml_cpu_init();
  std::printf("Stowage CPU level %s vs the linked libggml-cpu, 1 thread\n", argv[1]);
  CompareVecDots(isa);
  CompareMXFP4Rows();
  CompareMXFP4Repack(isa);
  CompareOps(isa);
  std::printf("%s\n", g_differing_lines == 0 ? "no differing bits" : "some results differ (see above)");
  return g_differing_lines == 0 ? 0 : 1;
}
