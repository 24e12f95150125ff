// Flash attention of the CPU backend (ops.h FlashAttnExt): FLASH_ATTN_EXT with ggml's Feb 2025
// semantics and numeric scheme (ggml.c ggml_flash_attn_ext, ggml-cpu.c
// ggml_compute_forward_flash_attn_ext_f16: one online softmax per query row, Q converted to K's
// vec_dot type, an F16 accumulator for an F16 V cache and an F32 one otherwise); the code is this
// project's own.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "ops.h"
#include "parallel.h"

namespace stowage::cpu {
namespace {

// The message is built only when the check fails (the op runs once per layer and token).
#define FA_NEED(cond, what)                                                        \
  do {                                                                             \
    if (!(cond)) return InvalidArgument(std::string("FLASH_ATTN_EXT: ") + (what)); \
  } while (0)

const char* Row(const TensorView& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

constexpr int64_t kPrefetchCells = 4;

// Every 64-byte line of [p, p + bytes) into the cache (a hint: no effect on results).
void Prefetch(const char* p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

}  // namespace

namespace scalar {
void MadF16(int64_t n, fp16_t* y, const fp16_t* x, float v) {
  for (int64_t i = 0; i < n; ++i) y[i] = FloatToHalf(std::fma(HalfToFloat(x[i]), v, HalfToFloat(y[i])));
}
void ScaleF16(int64_t n, fp16_t* y, float v) {
  for (int64_t i = 0; i < n; ++i) y[i] = FloatToHalf(HalfToFloat(y[i]) * v);
}
}  // namespace scalar

void FlashF16RowsWith(MadF16Fn mad, ScaleF16Fn scale_f16, int64_t D, int64_t n, int64_t nh,
                      const float* scores, size_t lds, const char* v, const int32_t* cells, size_t v_stride,
                      fp16_t* acc, size_t ldacc, float* out, size_t ldo, const float* sinks) {
  for (int64_t h = 0; h < nh; ++h) {
    const float* sc = scores + size_t(h) * lds;
    fp16_t* a = acc + size_t(h) * ldacc;
    std::memset(a, 0, size_t(D) * sizeof(fp16_t));
    float m = -INFINITY, sum = 0.0f;
    for (int64_t c = 0; c < n; ++c) {
      const float s = sc[c];
      float ms = 1.0f, vs = 1.0f;
      if (c + 16 < n) Prefetch(v + size_t(cells[c + 16]) * v_stride, size_t(D) * sizeof(fp16_t));
      if (s > m) {  // a new maximum: rescale what was accumulated, this value's weight is 1
        ms = std::exp(m - s);
        m = s;
        scale_f16(D, a, ms);
      } else {
        vs = std::exp(s - m);
      }
      mad(D, a, reinterpret_cast<const fp16_t*>(v + size_t(cells[c]) * v_stride), vs);
      sum = std::fma(sum, ms, vs);  // fused, as ggml's x86 builds contract S = S*ms + vs
    }
    const float ms = sinks ? FlashSinkStep(sinks[h], m, sum) : 1.0f;
    const float inv = 1.0f / sum;
    float* o = out + size_t(h) * ldo;
    for (int64_t d = 0; d < D; ++d) o[d] = (HalfToFloat(a[d]) * ms) * inv;
  }
}

namespace scalar {
void FlashF16Rows(int64_t D, int64_t n, int64_t nh, const float* scores, size_t lds, const char* v,
                  const int32_t* cells, size_t v_stride, fp16_t* acc, size_t ldacc, float* out, size_t ldo,
                  const float* sinks) {
  FlashF16RowsWith(MadF16, ScaleF16, D, n, nh, scores, lds, v, cells, v_stride, acc, ldacc, out, ldo, sinks);
}
}  // namespace scalar

Status FlashAttnExt(ComputeContext& ctx, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& mask, TensorView& dst, float scale, float max_bias, float logit_softcap,
                    const TensorView& sinks) {
  const int64_t D = q.ne[0], N = q.ne[1], H = q.ne[2], Q3 = q.ne[3];
  const int64_t n_kv = k.ne[1], Dv = v.ne[0];
  const TensorView* const all[] = {&q, &k, &v, &dst};
  for (const TensorView* t : all)
    for (int i = 0; i < 4; ++i) FA_NEED(t->ne[i] >= 0, "negative dimension in " + ShapeString(*t));
  FA_NEED(q.type == GgmlType::F32, "q: expected F32, got " + ShapeString(q));
  FA_NEED(dst.type == GgmlType::F32, "dst: expected F32, got " + ShapeString(dst));
  // V rows may be narrower or wider than K's (deepseek2's MLA: K kv_lora_rank + n_rot, V kv_lora_rank)
  FA_NEED(k.ne[0] == D && v.ne[1] == n_kv && Dv > 0,
          "q " + ShapeString(q) + ", k " + ShapeString(k) + " and v " + ShapeString(v) +
              " do not fit (ne0 of q and k equal, k and v with the same n_kv)");
  FA_NEED(k.ne[2] > 0 && v.ne[2] > 0 && k.ne[3] > 0 && v.ne[3] > 0 && H % k.ne[2] == 0 && H % v.ne[2] == 0 &&
              Q3 % k.ne[3] == 0 && Q3 % v.ne[3] == 0,
          "q " + ShapeString(q) + " has heads that k " + ShapeString(k) + " / v " + ShapeString(v) +
              " do not divide");
  FA_NEED(dst.ne[0] == Dv && dst.ne[1] == H && dst.ne[2] == N && dst.ne[3] == Q3,
          "dst " + ShapeString(dst) + " is not [ne0 of v, n_head, n_tokens, ne3 of q]");
  FA_NEED(dst.nb[0] == sizeof(float) && dst.nb[1] == size_t(Dv) * sizeof(float) &&
              dst.nb[2] == dst.nb[1] * H && dst.nb[3] == dst.nb[2] * N,
          "dst " + ShapeString(dst) + " must be contiguous");
  const TypeKernels* kk = GetTypeKernels(k.type, EffectiveIsa(ctx));
  FA_NEED(kk != nullptr && kk->vec_dot != nullptr && k.layout == kLayoutPlain,
          "unsupported K type " + ShapeString(k));
  const auto& kt = GetTypeTraits(k.type);
  const auto& vt = GetTypeTraits(v.type);
  FA_NEED(D % kt.block_size == 0 && k.nb[0] == kt.type_size,
          "k " + ShapeString(k) + " needs contiguous rows of whole blocks");
  FA_NEED(Dv % vt.block_size == 0 && v.nb[0] == vt.type_size && v.layout == kLayoutPlain,
          "v " + ShapeString(v) + " needs contiguous rows of whole blocks");
  FA_NEED(GetTypeKernels(v.type, IsaLevel::kScalar) != nullptr,  // a MUL_MAT type: DequantizeRow knows it
          "unsupported V type " + ShapeString(v));
  FA_NEED(q.nb[0] == sizeof(float), "q " + ShapeString(q) + " needs contiguous rows");
  const bool has_mask = mask.data != nullptr;
  if (has_mask) {
    FA_NEED(mask.type == GgmlType::F16 && mask.nb[0] == 2,
            "mask: expected contiguous F16 rows, got " + ShapeString(mask));
    FA_NEED(mask.ne[0] >= n_kv && mask.ne[1] >= N && mask.ne[2] == 1 && mask.ne[3] == 1,
            "mask " + ShapeString(mask) + " does not cover [n_kv, n_tokens] = [" + std::to_string(n_kv) +
                ", " + std::to_string(N) + "]");
  }
  FA_NEED(max_bias <= 0.0f || has_mask, "ALiBi (max_bias > 0) needs a mask");
  const float* sink_of_head = nullptr;  // ggml_flash_attn_ext_add_sinks: one logit per query head
  if (sinks.data != nullptr) {
    FA_NEED(sinks.type == GgmlType::F32 && sinks.ne[0] == H && sinks.nrows() == 1 && sinks.nb[0] == 4,
            "sinks " + ShapeString(sinks) + " must be contiguous F32 [n_head = " + std::to_string(H) + "]");
    sink_of_head = static_cast<const float*>(sinks.data);
  }
  for (const TensorView* t : all)
    FA_NEED(t->data != nullptr || t->nelements() == 0, "tensor " + ShapeString(*t) + " has no data");
  const int64_t rows = N * H * Q3;
  if (rows == 0) return Status::Ok();

  if (logit_softcap != 0.0f) scale /= logit_softcap;
  const uint32_t n_head = uint32_t(H);
  const uint32_t n_head_log2 = 1u << uint32_t(std::floor(std::log2(double(n_head))));
  const float m0 = std::pow(2.0f, -(max_bias) / n_head_log2);
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / n_head_log2);
  const int64_t rk2 = H / k.ne[2], rk3 = Q3 / k.ne[3], rv2 = H / v.ne[2], rv3 = Q3 / v.ne[3];
  const bool v_f16 = v.type == GgmlType::F16;
  const IsaLevel isa = EffectiveIsa(ctx);
  const VecDotFn kq_dot = kk->vec_dot;
  const FromFloatFn q_conv = kk->from_float;  // nullptr: K's vec_dot type is F32

  // Work items: one token (iq1, iq3) and one group of the q heads that share a K and V head (GQA;
  // groups of one head when K and V have different head counts). The heads of a group read each K
  // and V row once; every head keeps its own online softmax, in ggml's order, so the results are
  // those of ggml's one-row-at-a-time loop bit for bit.
  const int64_t group = rk2 == rv2 ? rk2 : 1;
  const int64_t n_groups = H / group;
  const int64_t items = N * Q3 * n_groups;
  // Per thread: the token's unmasked cells and their mask values (n_kv each), a V row in F32, and per
  // head of the group the F32 accumulator, the F16 accumulator, Q in K's vec_dot type and its state.
  // F16 K at AVX2 and above: the scores of a group's heads come from GemvF16Heads over the cells from
  // the first to the last unmasked one (the non-flash KQ product's kernel: Q rounded to F16 and held
  // as F32, F32 sums in its order rather than ggml_vec_dot_f16's); the K rows are read once for all
  // heads of the group, ahead of the softmax loop. Other K types: one vec_dot per cell and head.
  GemvF16HeadsFn gemv = nullptr;
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  if (k.type == GgmlType::F16 && isa >= IsaLevel::kAvx2)
    gemv = isa >= IsaLevel::kAvx512 ? avx512::GemvF16Heads : avx2::GemvF16Heads;
#endif
  const FlashF16RowsFn flash_rows = GetRowKernels(isa).flash_f16_rows;
  // Scratch per thread: the token's unmasked cells and their mask values (n_kv each), a V row in
  // F32; then per head of the group a slot: the F32 accumulator (Dv), the F16 accumulator (Dv), Q in
  // K's vec_dot type (or F16-rounded F32 for the gemv), the head's scores (n_kv). Slots are
  // head_bytes apart, so the group's q rows and score rows are strided blocks for GemvF16Heads.
  auto pad64 = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t acc16_off = Dv * sizeof(float);
  const size_t q_off = acc16_off + pad64(Dv * sizeof(fp16_t));
  const size_t s_off = q_off + pad64(std::max(RowSize(kk->vec_dot_type, D), D * sizeof(float)));
  const size_t head_bytes = s_off + pad64(size_t(n_kv) * sizeof(float));
  const size_t cells_bytes = pad64(size_t(n_kv) * (sizeof(int32_t) + sizeof(float)) + Dv * sizeof(float));
  const int64_t max_group = std::min<int64_t>(group, 64);  // larger groups in parts of 64 heads
  const size_t per_thread = cells_bytes + size_t(max_group) * head_bytes;
  const int nt = std::max(1, ctx.n_threads);
  // A team for a few query rows costs more than it saves (token generation: n_head rows of n_kv
  // dots each); one thread below 64 K rows of work in total.
  const bool parallel = nt > 1 && items > 1 && rows * n_kv >= 64;
  const int teams = parallel ? nt : 1;
  if (ctx.work.size() < per_thread * teams) ctx.work.resize(per_thread * teams);
  uint8_t* work = ctx.work.data();
  ParallelFor(teams, parallel, items, Schedule::kStatic, 1, [&](int64_t item, int tid) {
    uint8_t* w = work + per_thread * size_t(tid);
    int32_t* cells = reinterpret_cast<int32_t*>(w);
    float* cell_mask = reinterpret_cast<float*>(cells + n_kv);
    float* v32 = cell_mask + n_kv;
    uint8_t* heads = w + cells_bytes;
    auto acc32_of = [&](int64_t j) { return reinterpret_cast<float*>(heads + size_t(j) * head_bytes); };
    auto acc16_of = [&](int64_t j) {
      return reinterpret_cast<fp16_t*>(heads + size_t(j) * head_bytes + acc16_off);
    };
    auto qq_of = [&](int64_t j) { return static_cast<void*>(heads + size_t(j) * head_bytes + q_off); };
    auto scores_of = [&](int64_t j) {
      return reinterpret_cast<float*>(heads + size_t(j) * head_bytes + s_off);
    };
    const int64_t ig = item % n_groups;
    const int64_t iq1 = (item / n_groups) % N;
    const int64_t iq3 = item / (n_groups * N);
    const int64_t ik2 = ig * group / rk2, ik3 = iq3 / rk3, iv2 = ig * group / rv2, iv3 = iq3 / rv3;
    // The token's unmasked cells: ggml skips a cell whose slope * mask is -inf, i.e. whose mask is
    // -inf (0xFC00; slope is positive and at most 1).
    int64_t n_cells = 0;
    if (has_mask) {
      const fp16_t* mp = reinterpret_cast<const fp16_t*>(Row(mask, iq1, 0, 0));
      for (int64_t ic = 0; ic < n_kv; ++ic) {
        if (mp[ic] == 0xFC00) continue;
        cells[n_cells] = int32_t(ic);
        cell_mask[n_cells++] = HalfToFloat(mp[ic]);
      }
    } else {
      for (int64_t ic = 0; ic < n_kv; ++ic) {
        cells[n_cells] = int32_t(ic);
        cell_mask[n_cells++] = 0.0f;
      }
    }
    const size_t k_row_bytes = RowSize(k.type, D), v_row_bytes = RowSize(v.type, Dv);
    const char* v_base = Row(v, 0, iv2, iv3);
    for (int64_t g0 = 0; g0 < group; g0 += max_group) {
      const int64_t ng = std::min(max_group, group - g0);
      float slope[64], M[64], S[64];
      for (int64_t j = 0; j < ng; ++j) {
        const int64_t iq2 = ig * group + g0 + j;
        const uint32_t h = uint32_t(iq2);
        slope[j] = max_bias > 0.0f ? (h < n_head_log2 ? std::pow(m0, float(h + 1))
                                                      : std::pow(m1, float(2 * (h - n_head_log2) + 1)))
                                   : 1.0f;
        S[j] = 0.0f;
        M[j] = -INFINITY;
        const float* pq = reinterpret_cast<const float*>(Row(q, iq1, iq2, iq3));
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
        if (gemv)
          avx2::RoundRowF16(pq, static_cast<float*>(qq_of(j)), D);
        else
#endif
            if (q_conv)
          q_conv(pq, qq_of(j), D);
        else
          std::memcpy(qq_of(j), pq, size_t(D) * sizeof(float));
        if (!v_f16) std::memset(acc32_of(j), 0, size_t(Dv) * sizeof(float));
      }
      // 1. The scores s of every unmasked cell for every head, in cell order: K . Q (GemvF16Heads
      //    over the cells first .. last unmasked, then compacted; or one vec_dot per cell and head),
      //    times scale, soft-capped, plus slope * mask.
      if (n_cells > 0) {
        if (gemv) {
          const int64_t lo = cells[0], n_rows = cells[n_cells - 1] - lo + 1;
          const size_t ld = head_bytes / sizeof(float);
          gemv(D, n_rows, Row(k, lo, ik2, ik3), k.nb[1], ng, static_cast<const float*>(qq_of(0)), ld,
               scores_of(0), ld);
          if (n_rows != n_cells)  // compact: cell c's score is at cells[c] - lo >= c
            for (int64_t j = 0; j < ng; ++j)
              for (int64_t c = 0; c < n_cells; ++c) scores_of(j)[c] = scores_of(j)[cells[c] - lo];
        } else {
          for (int64_t c = 0; c < n_cells; ++c) {
            const char* krow = Row(k, cells[c], ik2, ik3);
            if (c + kPrefetchCells < n_cells)
              Prefetch(Row(k, cells[c + kPrefetchCells], ik2, ik3), k_row_bytes);
            for (int64_t j = 0; j < ng; ++j) kq_dot(D, &scores_of(j)[c], krow, qq_of(j));
          }
        }
        for (int64_t j = 0; j < ng; ++j) {
          float* sc = scores_of(j);
          for (int64_t c = 0; c < n_cells; ++c) {
            float x = sc[c] * scale;
            if (logit_softcap != 0.0f) x = logit_softcap * std::tanh(x);
            sc[c] = x + slope[j] * cell_mask[c];
          }
        }
      }
      // 2. The online softmax and the V sum of each head, in cell order as ggml.
      auto out_of = [&](int64_t j) {
        return reinterpret_cast<float*>(static_cast<char*>(dst.data) + iq1 * dst.nb[2] +
                                        (ig * group + g0 + j) * dst.nb[1] + iq3 * dst.nb[3]);
      };
      if (v_f16) {
        // The group's score rows, accumulators and outputs are each evenly strided.
        flash_rows(Dv, n_cells, ng, scores_of(0), head_bytes / sizeof(float), v_base, cells, v.nb[1],
                   acc16_of(0), head_bytes / sizeof(fp16_t), out_of(0), dst.nb[1] / sizeof(float),
                   sink_of_head ? sink_of_head + ig * group + g0 : nullptr);
        continue;
      } else {
        for (int64_t c = 0; c < n_cells; ++c) {
          const char* vrow = v_base + size_t(cells[c]) * v.nb[1];
          if (c + kPrefetchCells < n_cells)
            Prefetch(v_base + size_t(cells[c + kPrefetchCells]) * v.nb[1], v_row_bytes);
          (void)DequantizeRow(v.type, vrow, v32, Dv);  // types checked above
          for (int64_t j = 0; j < ng; ++j) {
            const float sc = scores_of(j)[c];
            float ms = 1.0f, vs = 1.0f;
            float* a = acc32_of(j);
            if (sc > M[j]) {  // a new maximum: rescale what was accumulated, this value's weight is 1
              ms = std::exp(M[j] - sc);
              M[j] = sc;
              for (int64_t d = 0; d < Dv; ++d) a[d] *= ms;
            } else {
              vs = std::exp(sc - M[j]);
            }
            for (int64_t d = 0; d < Dv; ++d) a[d] = std::fma(v32[d], vs, a[d]);  // ggml_vec_mad_f32: FMA
            S[j] = std::fma(S[j], ms, vs);
          }
        }
      }
      for (int64_t j = 0; j < ng; ++j) {
        float* a = acc32_of(j);
        if (sink_of_head) {
          const float ms = FlashSinkStep(sink_of_head[ig * group + g0 + j], M[j], S[j]);
          for (int64_t d = 0; d < Dv; ++d) a[d] *= ms;
        }
        const float inv = 1.0f / S[j];  // no unmasked key: 1/0, as ggml (inf or NaN results)
        float* out = out_of(j);
        for (int64_t d = 0; d < Dv; ++d) out[d] = a[d] * inv;
      }
    }
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
