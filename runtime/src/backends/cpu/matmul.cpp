// MUL_MAT driver and kernel dispatch. Like ggml_compute_forward_mul_mat: src1 is converted once per
// call into the weight type's vec_dot type (into ctx.work), then (rows of src0) x (rows of src1)
// tiles are spread over the threads and each dst element is one vec_dot.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "gemm.h"
#include "gemm_kquants_layout.h"
#include "kernels.h"
#include "ops.h"
#include "parallel.h"
#include "quants.h"

namespace stowage::cpu {
namespace {

void FromFloatQ8_0(const float* x, void* y, int64_t n) {
  QuantizeRowQ8_0Act(x, static_cast<BlockQ8_0*>(y), n);
}
void FromFloatQ8_1(const float* x, void* y, int64_t n) {
  QuantizeRowQ8_1Act(x, static_cast<BlockQ8_1*>(y), n);
}
void FromFloatQ8_K(const float* x, void* y, int64_t n) { QuantizeRowQ8_K(x, static_cast<BlockQ8_K*>(y), n); }

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
// SIMD activation quantizers of the vec_dot path: the GEMM families' SIMD from_float, which store
// exactly QuantizeRowQ8_K's / QuantizeRowQ8_0Act's integers, scales and sums (non-finite blocks
// included; gemm_kquants_test / gemm_q8_test), written per chunk into a record on the stack and
// moved into the vec_dot type's blocks. The scalar quantizers (nearbyintf is a libm call at
// baseline flags) were ~4% of token generation.
template <void (*kAct)(const float*, void*, int64_t)>
void FromFloatQ8_KVia(const float* x, void* vy, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(vy);
  alignas(64) uint8_t rec[gemm_kq::kActBlockBytes];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    kAct(x + b * kQK_K, rec, kQK_K);
    std::memcpy(y[b].qs, rec, kQK_K);
    std::memcpy(y[b].bsums, rec + gemm_kq::kActBsums16, sizeof y[b].bsums);
    std::memcpy(&y[b].d, rec + gemm_kq::kActD, sizeof y[b].d);
  }
}

void FromFloatQ8_0Vnni(const float* x, void* vy, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(vy);
  constexpr int kRec = 72, kChunk = 8;  // gemm_q8.cpp's activation record, 8 blocks at a time
  alignas(64) uint8_t rec[kRec * kChunk];
  for (int64_t b0 = 0; b0 < n / kQK8_0; b0 += kChunk) {
    const int nb = int(std::min<int64_t>(kChunk, n / kQK8_0 - b0));
    avx512::GemmQ8FromFloat(x + b0 * kQK8_0, rec, int64_t(nb) * kQK8_0, 0);
    for (int i = 0; i < nb; ++i) {
      float d;
      std::memcpy(&d, rec + kRec * i + 32, 4);
      y[b0 + i].d = FloatToHalf(d);  // exact: d is the fp16 scale's value (or NaN)
      std::memcpy(y[b0 + i].qs, rec + kRec * i, kQK8_0);
    }
  }
}
#endif

constexpr int kLevels = 4;
using Table = std::array<TypeKernels, kGgmlTypeCount>;

std::array<Table, kLevels> BuildTables() {
  std::array<Table, kLevels> t{};
  Table& s = t[0];
  auto set = [&](GgmlType w, GgmlType vdt, VecDotFn f, FromFloatFn ff) { s[size_t(w)] = {vdt, f, ff}; };
  set(GgmlType::F32, GgmlType::F32, scalar::VecDotF32, nullptr);
  set(GgmlType::F16, GgmlType::F16, scalar::VecDotF16, FromFloatF16);
  set(GgmlType::BF16, GgmlType::BF16, scalar::VecDotBF16, FromFloatBF16);
  set(GgmlType::Q4_0, GgmlType::Q8_0, scalar::VecDotQ4_0Q8_0, FromFloatQ8_0);
  set(GgmlType::Q4_1, GgmlType::Q8_1, scalar::VecDotQ4_1Q8_1, FromFloatQ8_1);
  set(GgmlType::Q5_0, GgmlType::Q8_0, scalar::VecDotQ5_0Q8_0, FromFloatQ8_0);
  set(GgmlType::Q5_1, GgmlType::Q8_1, scalar::VecDotQ5_1Q8_1, FromFloatQ8_1);
  set(GgmlType::Q8_0, GgmlType::Q8_0, scalar::VecDotQ8_0Q8_0, FromFloatQ8_0);
  set(GgmlType::Q2_K, GgmlType::Q8_K, scalar::VecDotQ2_KQ8_K, FromFloatQ8_K);
  set(GgmlType::Q3_K, GgmlType::Q8_K, scalar::VecDotQ3_KQ8_K, FromFloatQ8_K);
  set(GgmlType::Q4_K, GgmlType::Q8_K, scalar::VecDotQ4_KQ8_K, FromFloatQ8_K);
  set(GgmlType::Q5_K, GgmlType::Q8_K, scalar::VecDotQ5_KQ8_K, FromFloatQ8_K);
  set(GgmlType::Q6_K, GgmlType::Q8_K, scalar::VecDotQ6_KQ8_K, FromFloatQ8_K);
  set(GgmlType::IQ4_NL, GgmlType::Q8_0, scalar::VecDotIQ4_NLQ8_0, FromFloatQ8_0);
  set(GgmlType::IQ4_XS, GgmlType::Q8_K, scalar::VecDotIQ4_XSQ8_K, FromFloatQ8_K);
  set(GgmlType::MXFP4, GgmlType::Q8_0, scalar::VecDotMXFP4Q8_0, FromFloatQ8_0);
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  Table& a2 = t[1];
  a2 = s;
  for (GgmlType k :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS})
    a2[size_t(k)].from_float = FromFloatQ8_KVia<avx2::FromFloatQ8_KAct>;
  for (GgmlType k : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4})
    a2[size_t(k)].from_float = avx2::QuantizeRowQ8_0Act;
  for (GgmlType k : {GgmlType::Q4_1, GgmlType::Q5_1}) a2[size_t(k)].from_float = avx2::QuantizeRowQ8_1Act;
  a2[size_t(GgmlType::F32)].vec_dot = avx2::VecDotF32;
  a2[size_t(GgmlType::F16)] = {GgmlType::F16, avx2::VecDotF16, avx2::FromFloatF16};
  a2[size_t(GgmlType::BF16)].vec_dot = avx2::VecDotBF16;
  a2[size_t(GgmlType::Q8_0)].vec_dot = avx2::VecDotQ8_0Q8_0;
  a2[size_t(GgmlType::Q4_0)].vec_dot = avx2::VecDotQ4_0Q8_0;
  a2[size_t(GgmlType::Q4_K)].vec_dot = avx2::VecDotQ4_KQ8_K;
  a2[size_t(GgmlType::Q6_K)].vec_dot = avx2::VecDotQ6_KQ8_K;
  a2[size_t(GgmlType::Q4_1)].vec_dot = avx2::VecDotQ4_1Q8_1;
  a2[size_t(GgmlType::Q5_0)].vec_dot = avx2::VecDotQ5_0Q8_0;
  a2[size_t(GgmlType::Q5_1)].vec_dot = avx2::VecDotQ5_1Q8_1;
  a2[size_t(GgmlType::Q2_K)].vec_dot = avx2::VecDotQ2_KQ8_K;
  a2[size_t(GgmlType::Q3_K)].vec_dot = avx2::VecDotQ3_KQ8_K;
  a2[size_t(GgmlType::Q5_K)].vec_dot = avx2::VecDotQ5_KQ8_K;
  a2[size_t(GgmlType::IQ4_NL)].vec_dot = avx2::VecDotIQ4_NLQ8_0;
  a2[size_t(GgmlType::IQ4_XS)].vec_dot = avx2::VecDotIQ4_XSQ8_K;
  a2[size_t(GgmlType::MXFP4)].vec_dot = avx2::VecDotMXFP4Q8_0;
  Table& a5 = t[2];
  a5 = a2;
  a5[size_t(GgmlType::F32)].vec_dot = avx512::VecDotF32;
  a5[size_t(GgmlType::F16)].vec_dot = avx512::VecDotF16;
  // kAvx512Vnni: the integer dots and their activation quantizers (vpdpbusd). GetTypeKernels never
  // returns this table on a CPU without VNNI (the level is capped by DetectIsa()).
  Table& a5v = t[3];
  a5v = a5;
  for (GgmlType k :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS})
    a5v[size_t(k)].from_float = FromFloatQ8_KVia<avx512::FromFloatQ8_KAct>;
  for (GgmlType k : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4})
    a5v[size_t(k)].from_float = FromFloatQ8_0Vnni;
  a5v[size_t(GgmlType::Q8_0)].vec_dot = avx512::VecDotQ8_0Q8_0;
  a5v[size_t(GgmlType::Q4_0)].vec_dot = avx512::VecDotQ4_0Q8_0;
  a5v[size_t(GgmlType::Q4_K)].vec_dot = avx512::VecDotQ4_KQ8_K;
  a5v[size_t(GgmlType::Q6_K)].vec_dot = avx512::VecDotQ6_KQ8_K;
#else
  t[1] = s;
  t[2] = s;
  t[3] = s;
#endif
  return t;
}

}  // namespace

const TypeKernels* GetTypeKernels(GgmlType type, IsaLevel isa) {
  static const std::array<Table, kLevels> tables = BuildTables();  // immutable after first use
  if (uint32_t(type) >= kGgmlTypeCount) return nullptr;
  const TypeKernels& k = tables[size_t(std::min(int(isa), int(DetectIsa())))][size_t(type)];
  return k.vec_dot ? &k : nullptr;
}

IsaLevel EffectiveIsa(const ComputeContext& ctx) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  return IsaLevel(std::min(int(ctx.max_isa), int(DetectIsa())));
#else
  return IsaLevel::kScalar;
#endif
}

void FromFloatF16(const float* x, void* y, int64_t n) {
  fp16_t* d = static_cast<fp16_t*>(y);
  for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(x[i]);
}

void FromFloatBF16(const float* x, void* y, int64_t n) {
  bf16_t* d = static_cast<bf16_t*>(y);
  for (int64_t i = 0; i < n; ++i) d[i] = FloatToBf16(x[i]);
}

Result<GgmlType> VecDotType(GgmlType type) {
  const TypeKernels* k = GetTypeKernels(type, IsaLevel::kScalar);
  if (!k) {
    return Unimplemented(std::string("MUL_MAT: weight type ") +
                         (IsValidGgmlType(uint32_t(type)) ? GgmlTypeName(type) : "(invalid)") +
                         " is not supported by the CPU backend");
  }
  return k->vec_dot_type;
}

bool SupportsMulMatType(GgmlType type) { return GetTypeKernels(type, IsaLevel::kScalar) != nullptr; }

// ---- MUL_MAT -----------------------------------------------------------------------------------

namespace {

// GEMM path (gemm.h) of an already validated MUL_MAT.
//
// Work layout in ctx.work (64-byte aligned): the converted src1 rows (act_row_bytes(K) each, in
// (i11, i12, i13) order), then one scratch per thread of kGemmGroupPanels packed panels, then one
// K-float gather row per thread (only for src1 with nb0 != 4).
//
// Schedule: a work item is (i12, i13, a group of kGemmGroupPanels consecutive 16-row panels, and a
// range of columns: all of them unless there are fewer than 4 groups per thread). The thread packs
// the group's panels once into its scratch, then walks its columns in chunks of kGemmColBlock and
// multiplies every packed panel of the group with the chunk, so the chunk's activations stay in
// L1/L2 while the group's panels (a few tens of KB each) stay in L2. Items are handed out
// dynamically, one at a time: on a shared machine a descheduled thread's share moves to the other.
// Two panels per item: 2/4/8 measured the same on one thread (BenchMulMat, +-3%); the smaller
// item halves the wait for the last item at the end of the loop.
constexpr int kGemmGroupPanels = 2;
constexpr int64_t kGemmColBlock = 64;

size_t RoundUp64(size_t n) { return (n + 63) & ~size_t(63); }

// Row (i11, i12, i13) of src1 (F32) as K contiguous floats: the row in place when its elements are
// adjacent (nb0 == 4), else gathered into buf (K floats; permuted views, e.g. a transposed src1).
const float* Src1Row(const TensorView& src1, int64_t i11, int64_t i12, int64_t i13, int64_t K, float* buf) {
  const char* row =
      static_cast<const char*>(src1.data) + i11 * src1.nb[1] + i12 * src1.nb[2] + i13 * src1.nb[3];
  if (src1.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(row);
  for (int64_t k = 0; k < K; ++k) std::memcpy(&buf[k], row + k * src1.nb[0], 4);
  return buf;
}

/// One product of a GEMM call: src0 times the call's src1 into dst.
struct GemmProduct {
  const TensorView* src0;
  TensorView* dst;
};

/// The GEMM family's products of `n_products` weights of one type, layout and shape with one src1
/// (src1 converted once) in one thread team. With a `glu` (MUL_MAT_GLU: n_products == 2, the gate
/// then up) an item multiplies the same panel group of both weights with its columns, up's products
/// into a tile of the thread's scratch, and calls glu(d, u, n) for each column: d the column's n
/// gate products in dst (GLU'd in place), u its n up products. The group's rows start at a multiple
/// of kGemmGroupRows (32), so a row's GLU pieces keep the whole row's SIMD chunks (GluRow); the up
/// products never leave the cache and the GLU needs no pass of its own over the result.
template <typename Glu = std::nullptr_t>
void MulMatGemm(ComputeContext& ctx, const GemmKernels& gk, const GemmProduct* products, int n_products,
                const TensorView& src1, int nt, Glu glu = nullptr) {
  constexpr bool kPaired = !std::is_same_v<Glu, std::nullptr_t>;
  constexpr int64_t kGroupRows = kGemmGroupPanels * kGemmPanelRows;
  const TensorView& src0 = *products[0].src0;
  const int64_t K = src0.ne[0], N = src0.ne[1], M = src1.ne[1];
  const int64_t ne12 = src1.ne[2], ne13 = src1.ne[3];
  const int64_t nrows1 = M * ne12 * ne13;
  const size_t act_row = gk.act_row_bytes(K);
  const size_t conv_bytes = RoundUp64(act_row * size_t(nrows1));
  const size_t panel_b = RoundUp64(gk.panel_bytes(K));
  const size_t group_b = panel_b * kGemmGroupPanels;
  // Per thread: the packed group (both products' when paired), then the up tile.
  const size_t thread_scratch =
      kPaired ? 2 * group_b + RoundUp64(size_t(kGemmColBlock * kGroupRows) * sizeof(float)) : group_b;
  const bool gather = src1.nb[0] != sizeof(float);
  const size_t gather_bytes = gather ? size_t(nt) * size_t(K) * sizeof(float) : 0;
  const size_t total = conv_bytes + thread_scratch * size_t(nt) + gather_bytes + 64;
  if (ctx.work.size() < total) ctx.work.resize(total);
  uint8_t* conv =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(ctx.work.data()) + 63) & ~uintptr_t(63));
  uint8_t* panels = conv + conv_bytes;
  float* gather_buf = reinterpret_cast<float*>(panels + thread_scratch * size_t(nt));

  const int64_t npanels = (N + kGemmPanelRows - 1) / kGemmPanelRows;
  const int64_t ngroups = (npanels + kGemmGroupPanels - 1) / kGemmGroupPanels;
  // Few panel groups (small N, one matrix): also split the columns so every thread has work (each
  // split packs its panels itself).
  const int64_t col_blocks = (M + kGemmColBlock - 1) / kGemmColBlock;
  const int64_t base_items = ngroups * ne12 * ne13;
  const int64_t nsplit =
      base_items >= 4 * nt ? 1 : std::min(col_blocks, (4 * nt + base_items - 1) / base_items);
  const int64_t split_cols = (col_blocks + nsplit - 1) / nsplit * kGemmColBlock;
  const int64_t nitems = base_items * nsplit, nitems_all = kPaired ? nitems : nitems * n_products;
  const int64_t r2 = ne12 / src0.ne[2], r3 = ne13 / src0.ne[3];
  const bool team = nt > 1 && N * M * ne12 * ne13 * K * n_products >= 65536;
  // 1) src1 -> the family's activation rows.
  auto convert = [&](int64_t r, int tid) {
    const int64_t i11 = r % M, i12 = (r / M) % ne12, i13 = r / (M * ne12);
    const float* x = Src1Row(src1, i11, i12, i13, K, gather_buf + size_t(tid) * size_t(K));
    gk.from_float(x, conv + size_t(r) * act_row, K);
  };
  // 2) (product unless paired, matrix, panel group, columns) items.
  auto item = [&](int64_t it_all, int tid) {
    const int prod = kPaired ? 0 : int(it_all / nitems);
    const int64_t it = kPaired ? it_all : it_all % nitems;
    uint8_t* mine = panels + thread_scratch * size_t(tid);
    const int64_t split = it % nsplit, gi = it / nsplit;
    const int64_t g = gi % ngroups;
    const int64_t i12 = (gi / ngroups) % ne12, i13 = gi / (ngroups * ne12);
    const int64_t m_begin = split * split_cols, m_end = std::min(M, m_begin + split_cols);
    const int64_t p0 = g * kGemmGroupPanels, p1 = std::min(npanels, p0 + kGemmGroupPanels);
    const int64_t n_first = p0 * kGemmPanelRows, n_rows = std::min(N, p1 * kGemmPanelRows) - n_first;
    // The group's panels of product q, packed at `at`.
    auto pack = [&](int q, uint8_t* at) {
      const TensorView& w0 = *products[q].src0;
      const char* w = static_cast<const char*>(w0.data) + (i12 / r2) * w0.nb[2] + (i13 / r3) * w0.nb[3];
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kGemmPanelRows;
        const int nr = int(std::min<int64_t>(kGemmPanelRows, N - n0));
        gk.pack(K, w + n0 * w0.nb[1], w0.nb[1], nr, w0.layout, at + size_t(p - p0) * panel_b);
      }
    };
    const uint8_t* act = conv + size_t(M * (i12 + ne12 * i13)) * act_row;
    // The panels packed at `at` times columns [m0, m0 + nc): (column m, row n) to out[(m - m0) * ld + n -
    // n_first].
    auto multiply = [&](const uint8_t* at, int64_t m0, int nc, float* out, size_t ld) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kGemmPanelRows;
        const int nr = int(std::min<int64_t>(kGemmPanelRows, N - n0));
        gk.kernel(K, at + size_t(p - p0) * panel_b, act + size_t(m0) * act_row, act_row, nc,
                  out + (n0 - n_first), ld, nr);
      }
    };
    const TensorView& out0 = *products[prod].dst;
    char* out = static_cast<char*>(out0.data) + i12 * out0.nb[2] + i13 * out0.nb[3];
    const size_t ld = out0.nb[1] / sizeof(float);
    pack(prod, mine);
    if constexpr (kPaired) pack(1, mine + group_b);
    for (int64_t m0 = m_begin; m0 < m_end; m0 += kGemmColBlock) {
      const int nc = int(std::min(kGemmColBlock, m_end - m0));
      float* d = reinterpret_cast<float*>(out + m0 * out0.nb[1]) + n_first;
      multiply(mine, m0, nc, d, ld);
      if constexpr (kPaired) {
        float* up_tile = reinterpret_cast<float*>(mine + 2 * group_b);
        multiply(mine + group_b, m0, nc, up_tile, size_t(kGroupRows));
        for (int c = 0; c < nc; ++c) glu(d + size_t(c) * ld, up_tile + c * kGroupRows, n_rows);
      }
    }
  };
  if (!team) {  // no OpenMP construct at all (parallel.h: ParallelFor)
    for (int64_t r = 0; r < nrows1; ++r) convert(r, 0);
    for (int64_t it = 0; it < nitems_all; ++it) item(it, 0);
    return;
  }
  // One thread team for both phases (one fork/join per MUL_MAT; the implicit barrier of the first
  // loop orders conversion before use). Dynamic chunks: a descheduled thread on a shared machine
  // does not hold the other at the barrier with its static share.
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num();
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < nrows1; ++r) convert(r, tid);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t it = 0; it < nitems_all; ++it) item(it, tid);
  }
}

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
// Token-generation attention products on an F16 KV cache (kernels.h GemvF16Heads): src0 F16 plain,
// one src1 row per matrix (M == 1). A work item is (i13, kv head i02, a block of kHeadsRows rows);
// its kernel call multiplies the block with the q rows of all r2 q heads of that kv head (i12 =
// i02 * r2 .. i02 * r2 + r2 - 1), so each K / V row is read from memory once per token instead of
// once per q head. Item order: where a row holds all kv heads side by side (nb02 < nb01: the K
// cache, row stride D * n_head_kv) the kv head is innermost, so a block's heads together read the
// cache sequentially (head-outer read 128 of every 512 bytes per pass: small-q40 tg2000 ~563 ->
// ~594 t/s); otherwise (the transposed V cache, one long row per head and dim) the row block is
// innermost, so the kernels' prefetch 16 rows ahead lands on the next item (cold KQV at n_kv 2000:
// 227 -> 175 us). src1 rows are rounded to F16 (ggml's vec_dot_type) and held as F32 in ctx.work.
// Items are handed out as contiguous ranges (like the M == 1 tiles of MulMat).
constexpr int64_t kHeadsRows = 16;

constexpr int64_t kHeadsTeamBytes = int64_t(256) << 10;

void MulMatF16Heads(ComputeContext& ctx, GemvF16HeadsFn gemv, const TensorView& src0, const TensorView& src1,
                    TensorView& dst, int nt) {
  const int64_t K = src0.ne[0], N = src0.ne[1];
  const int64_t ne02 = src0.ne[2], ne12 = src1.ne[2], ne13 = src1.ne[3];
  const int64_t r2 = ne12 / ne02, r3 = ne13 / src0.ne[3];
  const int64_t nrows1 = ne12 * ne13;
  const size_t yrow = RoundUp64(size_t(K) * sizeof(float));
  const bool gather = src1.nb[0] != sizeof(float);
  const size_t gather_bytes = gather ? size_t(nt) * yrow : 0;
  const size_t total = yrow * size_t(nrows1) + gather_bytes + 64;
  if (ctx.work.size() < total) ctx.work.resize(total);
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(ctx.work.data()) + 63) & ~uintptr_t(63));
  float* ys = reinterpret_cast<float*>(base);
  float* gather_buf = reinterpret_cast<float*>(base + yrow * size_t(nrows1));
  const size_t ldy = yrow / sizeof(float), lds = dst.nb[2] / sizeof(float);

  const int64_t nblk = (N + kHeadsRows - 1) / kHeadsRows;
  const int64_t nitems = nblk * ne02 * ne13;
  const int64_t chunk = std::max<int64_t>(1, nitems / (int64_t(nt) * 4));
  const int64_t nchunks = (nitems + chunk - 1) / chunk;
  // A thread team only when the F16 rows read are large: below 256 KiB (n_kv < 256 for 8 kv heads
  // of 64) the K/V cache and q sit in the cache of the thread that wrote them, and a second
  // thread's share arrives slower than the first computes it when the two vCPUs are far apart
  // (0.85B q4_k_m tg128: attention 297 us per token on 1 thread, 526-562 us on 2 with a team from
  // 64 Ki multiply-adds, 337-371 us with this threshold; tg1024 unchanged).
  const bool team = nt > 1 && N * K * src0.ne[2] * src0.ne[3] * int64_t(sizeof(uint16_t)) >= kHeadsTeamBytes;
  const bool head_inner = src0.nb[2] < src0.nb[1];
  auto round_row = [&](int64_t r, int tid) {
    const int64_t i12 = r % ne12, i13 = r / ne12;
    const float* x = Src1Row(src1, 0, i12, i13, K, gather_buf + size_t(tid) * ldy);
    avx2::RoundRowF16(x, ys + size_t(r) * ldy, K);
  };
  auto chunk_items = [&](int64_t c) {
    for (int64_t it = c * chunk, e = std::min(nitems, it + chunk); it < e; ++it) {
      int64_t i02, blk;
      if (head_inner)
        i02 = it % ne02, blk = (it / ne02) % nblk;
      else
        blk = it % nblk, i02 = (it / nblk) % ne02;
      const int64_t i13 = it / (ne02 * nblk);
      const int64_t n0 = blk * kHeadsRows, n1 = std::min(N, n0 + kHeadsRows);
      const char* w =
          static_cast<const char*>(src0.data) + i02 * src0.nb[2] + (i13 / r3) * src0.nb[3] + n0 * src0.nb[1];
      const int64_t i12 = i02 * r2;
      float* out =
          reinterpret_cast<float*>(static_cast<char*>(dst.data) + i12 * dst.nb[2] + i13 * dst.nb[3]) + n0;
      gemv(K, n1 - n0, w, src0.nb[1], r2, ys + size_t(i12 + ne12 * i13) * ldy, ldy, out, lds);
    }
  };
  if (!team) {  // no OpenMP construct at all (parallel.h: ParallelFor)
    for (int64_t r = 0; r < nrows1; ++r) round_row(r, 0);
    for (int64_t c = 0; c < nchunks; ++c) chunk_items(c);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t r = 0; r < nrows1; ++r) round_row(r, tid);
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < nchunks; ++c) chunk_items(c);
  }
}
#endif

}  // namespace

#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
// MulMat's llamafile-order path (F32/F16 src0, see MulMat): src1 rows as floats (for F16 weights
// rounded to F16 first, into ctx.work; F32 weights read a contiguous src1 in place), then row
// blocks of every (i12, i13) matrix on the team.
void MulMatLlamafile(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst,
                     IsaLevel isa, int nt) {
  const int64_t K = src0.ne[0], N = src0.ne[1], M = src1.ne[1];
  const int64_t ne12 = src1.ne[2], ne13 = src1.ne[3];
  const int64_t r2 = ne12 / src0.ne[2], r3 = ne13 / src0.ne[3];
  const bool f16 = src0.type == GgmlType::F16;
  const float* act = nullptr;
  size_t lda = 0, amat = 0, a3 = 0;  // floats between rows, (i12) matrices, (i13) groups
  if (f16) {
    const int64_t rows = M * ne12 * ne13;
    const size_t bytes = size_t(rows) * size_t(K) * (sizeof(float) + sizeof(uint16_t));
    if (ctx.work.size() < bytes + 64) ctx.work.resize(bytes + 64);
    float* conv = reinterpret_cast<float*>(ctx.work.data());
    uint16_t* h = reinterpret_cast<uint16_t*>(conv + size_t(rows) * size_t(K));
    const int conv_threads = rows * K >= 8192 ? nt : 1;
    ParallelFor(conv_threads, conv_threads > 1, rows, Schedule::kStatic, 1, [&](int64_t r, int) {
      const int64_t i11 = r % M, i12 = (r / M) % ne12, i13 = r / (M * ne12);
      const char* row =
          static_cast<const char*>(src1.data) + i11 * src1.nb[1] + i12 * src1.nb[2] + i13 * src1.nb[3];
      float* out = conv + size_t(r) * size_t(K);
      for (int64_t k = 0; k < K; ++k) std::memcpy(out + k, row + k * src1.nb[0], sizeof(float));
      uint16_t* hr = h + size_t(r) * size_t(K);
      FromFloatF16(out, hr, K);
      for (int64_t k = 0; k < K; ++k) out[k] = HalfToFloat(hr[k]);
    });
    act = conv;
    lda = size_t(K);
    amat = size_t(M) * size_t(K);
    a3 = amat * size_t(ne12);
  } else {
    act = static_cast<const float*>(src1.data);
    lda = src1.nb[1] / sizeof(float);
    amat = src1.nb[2] / sizeof(float);
    a3 = src1.nb[3] / sizeof(float);
  }
  const auto kernel = isa >= IsaLevel::kAvx512 ? avx512::MatMulLlamafile : avx2::MatMulLlamafile;
  constexpr int64_t kRows = 48;  // a multiple of both levels' tile heights (4 and 3)
  const int64_t nblk = (N + kRows - 1) / kRows, items = nblk * ne12 * ne13;
  const bool team = nt > 1 && N * M * K >= 65536;
  ParallelFor(nt, team, items, Schedule::kDynamic, 1, [&](int64_t it, int) {
    const int64_t b = it % nblk, i12 = (it / nblk) % ne12, i13 = it / (nblk * ne12);
    const int64_t r0 = b * kRows, nr = std::min(kRows, N - r0);
    const char* w = static_cast<const char*>(src0.data) + (i12 / r2) * src0.nb[2] + (i13 / r3) * src0.nb[3] +
                    size_t(r0) * src0.nb[1];
    float* d =
        reinterpret_cast<float*>(static_cast<char*>(dst.data) + i12 * dst.nb[2] + i13 * dst.nb[3]) + r0;
    kernel(K, f16, w, src0.nb[1], nr, act + size_t(i12) * amat + size_t(i13) * a3, lda, M, d,
           dst.nb[1] / sizeof(float));
  });
}
#endif

namespace {

/// InvalidArgument "MUL_MAT: src0 .., src1 .., dst ..: <why>".
Status MulMatError(const TensorView& src0, const TensorView& src1, const TensorView& dst,
                   const std::string& why) {
  return InvalidArgument("MUL_MAT: src0 " + ShapeString(src0) + ", src1 " + ShapeString(src1) + ", dst " +
                         ShapeString(dst) + ": " + why);
}

/// The shapes, types, strides, layouts and data MulMatImpl accepts for src0's kernels `kern`; the
/// first violation as an error. Null data is accepted for an empty product.
Status CheckMulMat(const TypeKernels& kern, const TensorView& src0, const TensorView& src1,
                   const TensorView& dst) {
  auto bad = [&](const std::string& why) { return MulMatError(src0, src1, dst, why); };
  for (int i = 0; i < 4; ++i)
    if (src0.ne[i] < 0 || src1.ne[i] < 0 || dst.ne[i] < 0) return bad("negative dimension");
  if (src1.type != GgmlType::F32) return bad("src1 must be F32");
  if (dst.type != GgmlType::F32) return bad("dst must be F32");
  const int64_t K = src0.ne[0], N = src0.ne[1], M = src1.ne[1];
  const int64_t ne12 = src1.ne[2], ne13 = src1.ne[3];
  if (src1.ne[0] != K) return bad("src0 and src1 differ in ne0");
  if (dst.ne[0] != N || dst.ne[1] != M || dst.ne[2] != ne12 || dst.ne[3] != ne13)
    return bad("dst has the wrong shape");
  if (src0.ne[2] <= 0 || src0.ne[3] <= 0 || ne12 % src0.ne[2] != 0 || ne13 % src0.ne[3] != 0)
    return bad("src0 cannot be broadcast over src1's dims 2, 3");
  const GgmlTypeTraits& t0 = GetTypeTraits(src0.type);
  if (K % t0.block_size != 0 || K % GetTypeTraits(kern.vec_dot_type).block_size != 0)
    return bad("ne0 is not a multiple of the block size");
  if (src0.nb[0] != t0.type_size) return bad("src0 rows must be contiguous");
  if (dst.nb[0] != sizeof(float)) return bad("dst rows must be contiguous");
  const bool repacked = IsRepackedLayout(src0.layout);
  if (src0.layout != kLayoutPlain && !repacked)
    return bad("unknown src0 layout " + std::to_string(src0.layout));
  if (repacked) {
    const GgmlType want = src0.layout == kLayoutQ4_0x8    ? GgmlType::Q4_0
                          : src0.layout == kLayoutQ4_Kx8  ? GgmlType::Q4_K
                          : src0.layout == kLayoutMXFP4x8 ? GgmlType::MXFP4
                                                          : GgmlType::Q8_0;
    const char* name = want == GgmlType::Q4_0    ? "Q4_0"
                       : want == GgmlType::Q4_K  ? "Q4_K"
                       : want == GgmlType::MXFP4 ? "MXFP4"
                                                 : "Q8_0";
    if (src0.type != want || N % 8 != 0 || src0.nb[1] != RowSize(want, K))
      return bad(std::string("the ") + name + "x8 layout needs a " + name +
                 " src0 with ne1 % 8 == 0 and plain row strides");
  }
  if ((src0.data == nullptr || src1.data == nullptr || dst.data == nullptr) && N * M * ne12 * ne13 != 0)
    return bad("null data pointer");
  return Status::Ok();
}

/// The paths of a product other than the tiled vec_dot (MulMatVecDot).
enum class SpecialPath { kNone, kLlamafile, kGemm, kF16Heads };
struct PathChoice {
  SpecialPath path = SpecialPath::kNone;
  const GemmKernels* gemm = nullptr;  ///< kGemm's kernels
};

/// Which of the other paths takes the product, if one does: llamafile's order with
/// llamacpp_numerics, the GEMM family, the tg attention gemv (kNone: the tiled vec_dot).
PathChoice ChooseSpecialPath(const ComputeContext& ctx, IsaLevel isa, bool vec_dot_order,
                             const TensorView& src0, const TensorView& src1, const TensorView& dst) {
  const int64_t K = src0.ne[0], N = src0.ne[1], M = src1.ne[1];
  const int64_t ne12 = src1.ne[2], ne13 = src1.ne[3];
  PathChoice c;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  // F32/F16 weights with >= 2 columns, K % KN == 0 and N (ne01) % 4 == 0: llama.cpp's CPU backend
  // runs these through llamafile's tinyBLAS (its F16 weights after converting src1 to F16; its F32
  // weights only for a contiguous src1; tinyBLAS::matmul declines an m = ne01 that is not a multiple
  // of 4, e.g. qwen2moe's [n_embd, 1] shared-expert gate, which then takes the vec_dot). With
  // llamacpp_numerics they follow its order (kernels.h MatMulLlamafile), so prompt processing gives
  // llama.cpp's bits, attention products included. Not by default: its
  // per-output horizontal sums make it ~30% slower than the float GEMM family on a model's mix of
  // shapes (0.3B F16 pp512: 460 vs 668 t/s; the attention products' K = head_dim is short).
  if (ctx.llamacpp_numerics && !vec_dot_order && (src0.type == GgmlType::F16 || src0.type == GgmlType::F32) &&
      src0.layout == kLayoutPlain && M >= 2 && N % 4 == 0 && isa >= IsaLevel::kAvx2 &&
      K % (isa >= IsaLevel::kAvx512 ? 16 : 8) == 0 && dst.nb[1] % sizeof(float) == 0 &&
      dst.nb[2] % sizeof(float) == 0 && dst.nb[3] % sizeof(float) == 0 &&
      (src0.type == GgmlType::F16 || (src1.is_contiguous() && src1.nb[0] == sizeof(float)))) {
    c.path = SpecialPath::kLlamafile;
    return c;
  }
#endif
  const bool gemm_ok = !vec_dot_order || src0.type == GgmlType::Q8_0 || src0.type == GgmlType::Q4_0 ||
                       src0.type == GgmlType::Q5_0 || src0.type == GgmlType::Q4_1 ||
                       src0.type == GgmlType::Q5_1 || src0.type == GgmlType::MXFP4;
  if (M >= kGemmMinCols && dst.nb[1] % sizeof(float) == 0 && gemm_ok) {
    if (const GemmKernels* gk = GetGemmKernels(src0.type, src0.layout, isa, ctx.llamacpp_numerics)) {
      c.path = SpecialPath::kGemm;
      c.gemm = gk;
      return c;
    }
  }
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  // Token-generation attention (KQ: K = head_dim, one row per cache cell; KQV: K = n_kv, rows =
  // head_dim, several heads): F16 rows against one F16-rounded src1 row per matrix. Not with
  // llamacpp_numerics (its sums are ordered per 16-row block, not as the vec_dot's).
  if (src0.type == GgmlType::F16 && src0.layout == kLayoutPlain && M == 1 && isa >= IsaLevel::kAvx2 &&
      !ctx.llamacpp_numerics && dst.nb[2] % sizeof(float) == 0 &&
      ((K <= 256 && K % 16 == 0) || ne12 * ne13 > 1)) {
    c.path = SpecialPath::kF16Heads;
    return c;
  }
#else
  (void)K;
  (void)N;
  (void)ne12;
  (void)ne13;
#endif
  return c;
}

/// Runs the product on one of the paths other than the tiled vec_dot when one applies
/// (ChooseSpecialPath); false when none does.
bool MulMatSpecialized(ComputeContext& ctx, IsaLevel isa, bool vec_dot_order, const TensorView& src0,
                       const TensorView& src1, TensorView& dst, int nt) {
  const PathChoice c = ChooseSpecialPath(ctx, isa, vec_dot_order, src0, src1, dst);
  switch (c.path) {
    case SpecialPath::kNone:
      return false;
    case SpecialPath::kGemm: {
      const GemmProduct product{&src0, &dst};
      MulMatGemm(ctx, *c.gemm, &product, 1, src1, nt);
      return true;
    }
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    case SpecialPath::kLlamafile:
      MulMatLlamafile(ctx, src0, src1, dst, isa, nt);
      return true;
    case SpecialPath::kF16Heads:
      MulMatF16Heads(ctx, isa >= IsaLevel::kAvx512 ? avx512::GemvF16Heads : avx2::GemvF16Heads, src0, src1,
                     dst, nt);
      return true;
#else
    default:
      return false;
#endif
  }
  return false;
}

/// src1 as the vec_dot reads it: in place (`direct`: F32 vec_dot type and nb10 = 4), or its rows
/// converted to the vec_dot type, `vrow` bytes each, contiguous in (i11, i12, i13) order at `conv`.
struct VecDotRows {
  bool direct = false;
  size_t vrow = 0;
  const uint8_t* conv = nullptr;
};

/// Converts src1 for the vec_dot of `kern` into ctx.work (64-byte aligned) unless it is read in place.
VecDotRows ConvertSrc1(ComputeContext& ctx, const TypeKernels& kern, const TensorView& src1, int64_t K,
                       int nt) {
  const int64_t M = src1.ne[1], ne12 = src1.ne[2], ne13 = src1.ne[3];
  VecDotRows rows;
  rows.direct = kern.vec_dot_type == GgmlType::F32 && src1.nb[0] == sizeof(float);
  rows.vrow = RowSize(kern.vec_dot_type, K);
  const size_t vrow = rows.vrow;
  const int64_t nrows1 = M * ne12 * ne13;
  const size_t conv_bytes = rows.direct ? 0 : vrow * size_t(nrows1);
  const bool gather = src1.nb[0] != sizeof(float);
  const size_t scratch_bytes = gather ? size_t(nt) * size_t(K) * sizeof(float) : 0;
  if (ctx.work.size() < conv_bytes + scratch_bytes + 64) ctx.work.resize(conv_bytes + scratch_bytes + 64);
  uint8_t* wbase = ctx.work.data();
  uint8_t* conv = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(wbase) + 63) & ~uintptr_t(63));
  float* scratch = reinterpret_cast<float*>(conv + conv_bytes);
  rows.conv = conv;
  if (!rows.direct) {
    const FromFloatFn from_float = kern.from_float;
    ParallelFor(nt, nrows1 * K >= 8192, nrows1, Schedule::kStatic, 1, [&](int64_t r, int tid) {
      const int64_t i11 = r % M, i12 = (r / M) % ne12, i13 = r / (M * ne12);
      const float* x = Src1Row(src1, i11, i12, i13, K, scratch + size_t(tid) * size_t(K));
      if (from_float)
        from_float(x, conv + size_t(r) * vrow, K);
      else
        std::memcpy(conv + size_t(r) * vrow, x, size_t(K) * 4);
    });
  }
  return rows;
}

/// The row kernel of plain src0: the type's vec_dot, or with llamacpp_numerics llama.cpp 2026's
/// "iqp" kernel for IQ4_XS weights (2D) with >= 8 src1 columns, in another float order than its
/// vec_dot (not batch-invariant then, as llama.cpp).
VecDotFn PlainRowKernel(const ComputeContext& ctx, const TypeKernels& kern, const TensorView& src0, int64_t M,
                        IsaLevel isa) {
  VecDotFn vec_dot = kern.vec_dot;
  if (ctx.llamacpp_numerics && src0.type == GgmlType::IQ4_XS && M >= 8 && src0.ne[2] == 1 &&
      src0.ne[3] == 1) {
    vec_dot = scalar::VecDotIQ4_XSQ8_KIqp;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
    if (isa >= IsaLevel::kAvx2) vec_dot = avx2::VecDotIQ4_XSQ8_KIqp;
#else
    (void)isa;
#endif
  }
  return vec_dot;
}

/// The Q4_Kx8 gemv in llama.cpp's GEMM float order (per sub-block pair) of the best level `isa` has.
VecDotFn Q4Kx8SubBlockGemv(IsaLevel isa) {
  VecDotFn gemv8_sb = scalar::GemvQ4_Kx8Q8_KSb;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  if (isa >= IsaLevel::kAvx512Vnni)
    gemv8_sb = avx512::GemvQ4_Kx8Q8_KSb;
  else if (isa >= IsaLevel::kAvx2)
    gemv8_sb = avx2::GemvQ4_Kx8Q8_KSb;
#else
  (void)isa;
#endif
  return gemv8_sb;
}

/// One src0's rows for the general path: Rows writes the products of src0 rows [n0, n1) with one
/// converted src1 row `y` to out[n0 .. n1), each by the vec_dot or, for the repacked layouts, 8
/// rows at a time by their gemv.
class VecDotRowProducts {
 public:
  VecDotRowProducts(const ComputeContext& ctx, const TypeKernels& kern, IsaLevel isa, bool vec_dot_order,
                    const TensorView& src0, const TensorView& src1)
      : src0_(src0),
        K_(src0.ne[0]),
        r2_(src1.ne[2] / src0.ne[2]),
        r3_(src1.ne[3] / src0.ne[3]),
        vec_dot_(PlainRowKernel(ctx, kern, src0, src1.ne[1], isa)),
        repacked_(IsRepackedLayout(src0.layout)),
        // 8-row gemv of the repacked layouts (one call per group of 8 rows, writes 8 dst elements).
        gemv8_(GetRepackedGemv(src0.layout, isa)),
        gemv8_sb_(Q4Kx8SubBlockGemv(isa)) {
    // Q4_Kx8 with llamacpp_numerics: llama.cpp's repacked Q4_K runs its GEMM (float part per
    // sub-block pair) on the first M - M % 4 src1 rows of each matrix and its gemv on the rest; the
    // same here, so prompts give its bits (this product is then not batch-invariant, as in llama.cpp).
    const int64_t M = src1.ne[1];
    const bool q4k = src0.layout == kLayoutQ4_Kx8;
    m_sb_ = q4k && ctx.llamacpp_numerics && !vec_dot_order && M > 3 ? M - M % 4 : 0;
  }

  void Rows(int64_t n0, int64_t n1, int64_t m, int64_t i12, int64_t i13, const void* y, float* out) const {
    const char* w =
        static_cast<const char*>(src0_.data) + (i12 / r2_) * src0_.nb[2] + (i13 / r3_) * src0_.nb[3];
    if (repacked_) {
      const VecDotFn g = m < m_sb_ ? gemv8_sb_ : gemv8_;
      for (int64_t n = n0; n < n1; n += 8) g(K_, out + n, w + n * src0_.nb[1], y);
    } else {
      for (int64_t n = n0; n < n1; ++n) vec_dot_(K_, out + n, w + n * src0_.nb[1], y);
    }
  }

 private:
  const TensorView& src0_;
  int64_t K_, r2_, r3_;
  VecDotFn vec_dot_;
  bool repacked_;
  VecDotFn gemv8_, gemv8_sb_;
  int64_t m_sb_ = 0;
};

/// The tiles of the general path over dst [N, M, ne12, ne13] (M = src1.ne1): (kVecDotBlockN src0
/// rows) x (kVecDotBlockM src1 rows) per (i12, i13). Calls tile(n0, n1, m, i12, i13, y, out) for every
/// src1 row m of each tile, y the row as the vec_dot reads it, out dst's row (m, i12, i13), on a
/// thread team when `macs` (multiply-adds) is worth one.
constexpr int64_t kVecDotBlockN = 16, kVecDotBlockM = 16;
template <typename F>
void ForVecDotTiles(const VecDotRows& rows, const TensorView& src1, TensorView& dst, int64_t N, int nt,
                    int64_t macs, F&& tile_row) {
  const int64_t M = src1.ne[1], ne12 = src1.ne[2], ne13 = src1.ne[3];
  const int64_t tiles_n = (N + kVecDotBlockN - 1) / kVecDotBlockN,
                tiles_m = (M + kVecDotBlockM - 1) / kVecDotBlockM;
  const int64_t ntiles = tiles_n * tiles_m * ne12 * ne13;
  auto tile = [&](int64_t t) {
    const int64_t tn = t % tiles_n;
    const int64_t tm = (t / tiles_n) % tiles_m;
    const int64_t i12 = (t / (tiles_n * tiles_m)) % ne12;
    const int64_t i13 = t / (tiles_n * tiles_m * ne12);
    const int64_t n0 = tn * kVecDotBlockN, n1 = std::min(N, n0 + kVecDotBlockN);
    const int64_t m0 = tm * kVecDotBlockM, m1 = std::min(M, m0 + kVecDotBlockM);
    for (int64_t m = m0; m < m1; ++m) {
      const void* y =
          rows.direct ? static_cast<const void*>(static_cast<const char*>(src1.data) + m * src1.nb[1] +
                                                 i12 * src1.nb[2] + i13 * src1.nb[3])
                      : static_cast<const void*>(rows.conv + size_t(m + M * (i12 + ne12 * i13)) * rows.vrow);
      float* out = reinterpret_cast<float*>(static_cast<char*>(dst.data) + m * dst.nb[1] + i12 * dst.nb[2] +
                                            i13 * dst.nb[3]);
      tile_row(n0, n1, m, i12, i13, y, out);
    }
  };
  // A thread team only pays off with enough multiply-adds (tiny attention products run inline).
  const bool team = nt > 1 && macs >= 65536;
  if (tiles_m == 1) {
    // Token generation (M <= kVecDotBlockM): every tile costs the same, and the weights stream from
    // memory once. Contiguous tile ranges per thread keep each thread's reads sequential, which the
    // hardware prefetchers follow; interleaved tiles (dynamic, 1) halved the bandwidth we reached
    // (measured: Q4_0x8 gemv, 2 threads, 288 MiB of weights: 14.6 GB/s dynamic vs 35.1 GB/s static).
    // Guided chunks keep that (the first chunk is half the tiles, then a quarter, ...) and shrink
    // towards the end, so neither thread waits long for the other at the join: a static split waited
    // for the slower thread, fixed chunks of 1/8 for up to a whole chunk (0.85B, 2 threads, fast
    // mode of this VM: q4_0 tg128 ~88 -> ~92 t/s, q4_k_m ~83 -> ~89; 4-layer in-cache model +7%).
    ParallelFor(nt, team, ntiles, Schedule::kGuided, 2, [&](int64_t t, int) { tile(t); });
  } else {
    ParallelFor(nt, team, ntiles, Schedule::kDynamic, 1, [&](int64_t t, int) { tile(t); });
  }
}

/// The general path: src1 converted to the vec_dot type (ConvertSrc1), then ForVecDotTiles, each
/// row by VecDotRowProducts.
void MulMatVecDot(ComputeContext& ctx, const TypeKernels& kern, IsaLevel isa, bool vec_dot_order,
                  const TensorView& src0, const TensorView& src1, TensorView& dst, int nt) {
  const int64_t K = src0.ne[0], N = src0.ne[1];
  const VecDotRows rows = ConvertSrc1(ctx, kern, src1, K, nt);
  const VecDotRowProducts products(ctx, kern, isa, vec_dot_order, src0, src1);
  ForVecDotTiles(rows, src1, dst, N, nt, N * src1.ne[1] * src1.ne[2] * src1.ne[3] * K,
                 [&](int64_t n0, int64_t n1, int64_t m, int64_t i12, int64_t i13, const void* y, float* out) {
                   products.Rows(n0, n1, m, i12, i13, y, out);
                 });
}

}  // namespace

Status MulMat(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst) {
  return MulMatImpl(ctx, src0, src1, dst, /*expert=*/false);
}

Status MulMatImpl(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst,
                  bool expert) {
  // llama.cpp's MUL_MAT_ID (ggml-cpu.c ggml_compute_forward_mul_mat_id_one_chunk; repack.cpp
  // forward_mul_mat_id) multiplies every expert column by the vec_dot (repacked: the gemv), never
  // through tinyBLAS or the repacked GEMM; only the IQ "iqp" panels (>= 8 columns per expert) have a
  // batched path. With llamacpp_numerics an expert's product follows that: the GEMM only where its
  // order is the vec_dot's (the q8 family's lanes kernels, repacked Q4_0/Q8_0), no tinyBLAS order,
  // no repacked-Q4_K GEMM order.
  const bool vec_dot_order = expert && ctx.llamacpp_numerics;
  const IsaLevel isa = EffectiveIsa(ctx);
  const TypeKernels* kern = GetTypeKernels(src0.type, isa);
  if (!kern) return VecDotType(src0.type).status();
  STOWAGE_RETURN_IF_ERROR(CheckMulMat(*kern, src0, src1, dst));
  if (src0.ne[1] * src1.ne[1] * src1.ne[2] * src1.ne[3] == 0) return Status::Ok();
  const int nt = std::max(1, ctx.n_threads);
  if (!MulMatSpecialized(ctx, isa, vec_dot_order, src0, src1, dst, nt))
    MulMatVecDot(ctx, *kern, isa, vec_dot_order, src0, src1, dst, nt);
  return Status::Ok();
}

Status MulMatGlu(ComputeContext& ctx, const TensorView& gate, const TensorView& x, const TensorView& up,
                 TensorView& dst, MulMatGluKind glu) {
  const IsaLevel isa = EffectiveIsa(ctx);
  const TypeKernels* kern = GetTypeKernels(gate.type, isa);
  if (!kern) return VecDotType(gate.type).status();
  STOWAGE_RETURN_IF_ERROR(CheckMulMat(*kern, gate, x, dst));
  if (up.type != gate.type || up.layout != gate.layout || !std::equal(up.ne, up.ne + 4, gate.ne) ||
      !std::equal(up.nb, up.nb + 4, gate.nb))
    return InvalidArgument("MUL_MAT_GLU: up " + ShapeString(up) + " must have gate " + ShapeString(gate) +
                           "'s type, layout, shape and strides");
  STOWAGE_RETURN_IF_ERROR(CheckMulMat(*kern, up, x, dst));
  const int64_t K = gate.ne[0], N = gate.ne[1], M = x.ne[1], ne12 = x.ne[2], ne13 = x.ne[3];
  if (N * M * ne12 * ne13 == 0) return Status::Ok();
  const int nt = std::max(1, ctx.n_threads);
  const PathChoice path = ChooseSpecialPath(ctx, isa, /*vec_dot_order=*/false, gate, x, dst);
  if (path.path == SpecialPath::kGemm) {
    // The GEMM family: x converted once, each panel group of both products and its GLU in one item
    // of one thread team.
    const GemmProduct products[2] = {{&gate, &dst}, {&up, nullptr}};
    MulMatGemm(ctx, *path.gemm, products, 2, x, nt,
               [&](float* d, const float* u, int64_t n) { GluRow(ctx, glu, n, d, u, d); });
    return Status::Ok();
  }
  if (path.path != SpecialPath::kNone) {
    // The gate's products into dst, up's into ctx.fused_work (contiguous rows), then the GLU of
    // each row, in place.
    const int64_t nrows = M * ne12 * ne13;
    if (ctx.fused_work.size() < size_t(N * nrows)) ctx.fused_work.resize(size_t(N * nrows));
    float* up_rows = ctx.fused_work.data();
    TensorView up_out = dst;
    up_out.data = up_rows;
    up_out.nb[0] = sizeof(float);
    for (int d = 1; d < 4; ++d) up_out.nb[d] = up_out.nb[d - 1] * size_t(up_out.ne[d - 1]);
    auto glu_row = [&](int64_t r, const float* up_row) {
      const int64_t m = r % M, i12 = (r / M) % ne12, i13 = r / (M * ne12);
      float* g = reinterpret_cast<float*>(static_cast<char*>(dst.data) + m * dst.nb[1] + i12 * dst.nb[2] +
                                          i13 * dst.nb[3]);
      GluRow(ctx, glu, N, g, up_row, g);
    };
    // llamafile's order, the F16 heads gemv: each product on its own path.
    MulMatSpecialized(ctx, isa, false, gate, x, dst, nt);
    MulMatSpecialized(ctx, isa, false, up, x, up_out, nt);
    ParallelFor(nt, nt > 1 && N * nrows >= 8192, nrows, Schedule::kStatic, 1,
                [&](int64_t r, int) { glu_row(r, up_rows + size_t(r) * size_t(N)); });
    return Status::Ok();
  }
  // The general path for both: x converted once, gate and up rows of each tile in one thread team,
  // the GLU applied to the tile's piece of each row as it is produced (tiles start at multiples of
  // 16, so the GLU's SIMD chunks are the whole row's).
  const VecDotRows rows = ConvertSrc1(ctx, *kern, x, K, nt);
  const VecDotRowProducts gate_products(ctx, *kern, isa, false, gate, x);
  const VecDotRowProducts up_products(ctx, *kern, isa, false, up, x);
  ForVecDotTiles(rows, x, dst, N, nt, 2 * N * M * ne12 * ne13 * K,
                 [&](int64_t n0, int64_t n1, int64_t m, int64_t i12, int64_t i13, const void* y, float* out) {
                   float up_tile[kVecDotBlockN];
                   gate_products.Rows(n0, n1, m, i12, i13, y, out);
                   up_products.Rows(n0, n1, m, i12, i13, y, up_tile - n0);
                   GluRow(ctx, glu, n1 - n0, out + n0, up_tile, out + n0);
                 });
  return Status::Ok();
}

bool MulMatIdFewColsExpert(const TensorView& as, int64_t m) {
  return m > 0 && m < kGemmMinCols && GetTypeTraits(as.type).is_quantized;
}

Status MulMatIdFewCols(ComputeContext& ctx, const TensorView& as, const TensorView& b,
                       const std::vector<std::vector<int64_t>>& rows, int64_t n_used, TensorView& dst) {
  const int64_t K = as.ne[0], N = as.ne[1], ne11 = b.ne[1], n_tokens = b.ne[2];
  std::vector<int64_t> experts;
  int64_t n_cols = 0;
  for (size_t e = 0; e < rows.size(); ++e)
    if (MulMatIdFewColsExpert(as, int64_t(rows[e].size()))) {
      experts.push_back(int64_t(e));
      n_cols += int64_t(rows[e].size());
    }
  if (experts.empty()) return Status::Ok();
  const IsaLevel isa = EffectiveIsa(ctx);
  const TypeKernels* kern = GetTypeKernels(as.type, isa);
  if (!kern) return VecDotType(as.type).status();
  {  // the checks MulMatImpl makes of one expert's product
    TensorView a0 = as, b0, d0;
    a0.ne[2] = 1;
    b0.data = b.data;
    b0.type = GgmlType::F32;
    b0.ne[0] = K;
    SetContiguousStrides(b0);
    d0.data = dst.data;
    d0.type = GgmlType::F32;
    d0.ne[0] = N;
    SetContiguousStrides(d0);
    STOWAGE_RETURN_IF_ERROR(CheckMulMat(*kern, a0, b0, d0));
  }
  // The src1 rows these experts read, each converted once: slot[t * ne11 + i11] is its index in conv.
  std::vector<int64_t> slot(size_t(ne11 * n_tokens), -1), need;
  for (int64_t e : experts)
    for (int64_t r : rows[size_t(e)]) {
      const int64_t i = (r / n_used) * ne11 + (r % n_used) % ne11;
      if (slot[size_t(i)] < 0) {
        slot[size_t(i)] = int64_t(need.size());
        need.push_back(i);
      }
    }
  const int nt = std::max(1, ctx.n_threads);
  const size_t vrow = RowSize(kern->vec_dot_type, K);
  const size_t conv_bytes = RoundUp64(vrow * need.size());
  const size_t scratch_bytes = b.nb[0] != sizeof(float) ? size_t(nt) * size_t(K) * sizeof(float) : 0;
  if (ctx.work.size() < conv_bytes + scratch_bytes + 64) ctx.work.resize(conv_bytes + scratch_bytes + 64);
  uint8_t* conv =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(ctx.work.data()) + 63) & ~uintptr_t(63));
  float* scratch = reinterpret_cast<float*>(conv + conv_bytes);
  auto convert = [&](int64_t j, int tid) {
    const int64_t i = need[size_t(j)];
    const float* x = Src1Row(b, i % ne11, i / ne11, 0, K, scratch + size_t(tid) * size_t(K));
    kern->from_float(x, conv + size_t(j) * vrow, K);
  };
  // Tiles of kBlockN rows of one expert, each with all that expert's columns: the vec_dot (repacked:
  // the 8-row gemv) of MulMatVecDot, the expert's product's bits in both numerics modes (an expert's
  // columns never take the Q4_Kx8 sub-block order there).
  constexpr int64_t kBlockN = 16;
  const int64_t tiles_n = (N + kBlockN - 1) / kBlockN;
  const bool repacked = IsRepackedLayout(as.layout);
  const VecDotFn gemv8 = GetRepackedGemv(as.layout, isa);
  const VecDotFn vec_dot = kern->vec_dot;
  auto tile = [&](int64_t it) {
    const int64_t e = experts[size_t(it / tiles_n)];
    const int64_t n0 = (it % tiles_n) * kBlockN, n1 = std::min(N, n0 + kBlockN);
    const char* w = static_cast<const char*>(as.data) + e * as.nb[2];
    for (int64_t r : rows[size_t(e)]) {
      const int64_t t = r / n_used, s = r % n_used;
      const uint8_t* y = conv + size_t(slot[size_t(t * ne11 + s % ne11)]) * vrow;
      float* out = reinterpret_cast<float*>(static_cast<char*>(dst.data) + s * dst.nb[1] + t * dst.nb[2]);
      if (repacked) {
        for (int64_t n = n0; n < n1; n += 8) gemv8(K, out + n, w + n * as.nb[1], y);
      } else {
        for (int64_t n = n0; n < n1; ++n) vec_dot(K, out + n, w + n * as.nb[1], y);
      }
    }
  };
  const int64_t ntiles = tiles_n * int64_t(experts.size()), nconv = int64_t(need.size());
  if (nt <= 1 || N * n_cols * K < 65536) {  // no OpenMP construct (parallel.h ParallelFor)
    for (int64_t j = 0; j < nconv; ++j) convert(j, 0);
    for (int64_t it = 0; it < ntiles; ++it) tile(it);
    return Status::Ok();
  }
  // One thread team for the conversion and every expert's tiles (the implicit barrier of the first
  // loop orders them); guided chunks as MulMatVecDot's token generation: contiguous ranges, so each
  // thread streams its experts' rows sequentially.
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t j = 0; j < nconv; ++j) convert(j, tid);
#pragma omp for schedule(guided, 2)
    for (int64_t it = 0; it < ntiles; ++it) tile(it);
  }
  return Status::Ok();
}

}  // namespace stowage::cpu
