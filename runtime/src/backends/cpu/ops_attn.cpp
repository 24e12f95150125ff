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

Status Need(bool cond, const std::string& what) {
  return cond ? Status::Ok() : InvalidArgument("FLASH_ATTN_EXT: " + what);
}

const char* Row(const TensorView& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
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

MadF16Fn GetMadF16(IsaLevel isa) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  if (IsaLevel(std::min(int(isa), int(DetectIsa()))) >= IsaLevel::kAvx2) return avx2::MadF16;
#else
  (void)isa;
#endif
  return scalar::MadF16;
}

ScaleF16Fn GetScaleF16(IsaLevel isa) {
#if defined(STOWAGE_CPU_HAVE_X86_SIMD)
  if (IsaLevel(std::min(int(isa), int(DetectIsa()))) >= IsaLevel::kAvx2) return avx2::ScaleF16;
#else
  (void)isa;
#endif
  return scalar::ScaleF16;
}

Status FlashAttnExt(ComputeContext& ctx, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& mask, TensorView& dst, float scale, float max_bias, float logit_softcap) {
  const int64_t D = q.ne[0], N = q.ne[1], H = q.ne[2], Q3 = q.ne[3];
  const int64_t n_kv = k.ne[1], Dv = v.ne[0];
  const TensorView* const all[] = {&q, &k, &v, &dst};
  for (const TensorView* t : all)
    for (int i = 0; i < 4; ++i)
      STOWAGE_RETURN_IF_ERROR(Need(t->ne[i] >= 0, "negative dimension in " + ShapeString(*t)));
  STOWAGE_RETURN_IF_ERROR(Need(q.type == GgmlType::F32, "q: expected F32, got " + ShapeString(q)));
  STOWAGE_RETURN_IF_ERROR(Need(dst.type == GgmlType::F32, "dst: expected F32, got " + ShapeString(dst)));
  STOWAGE_RETURN_IF_ERROR(Need(k.ne[0] == D && v.ne[1] == n_kv && Dv == D,
                               "q " + ShapeString(q) + ", k " + ShapeString(k) + " and v " + ShapeString(v) +
                                   " do not fit (ne0 of q, k and v equal, k and v with the same n_kv)"));
  STOWAGE_RETURN_IF_ERROR(Need(k.ne[2] > 0 && v.ne[2] > 0 && k.ne[3] > 0 && v.ne[3] > 0 && H % k.ne[2] == 0 &&
                                   H % v.ne[2] == 0 && Q3 % k.ne[3] == 0 && Q3 % v.ne[3] == 0,
                               "q " + ShapeString(q) + " has heads that k " + ShapeString(k) + " / v " +
                                   ShapeString(v) + " do not divide"));
  STOWAGE_RETURN_IF_ERROR(Need(dst.ne[0] == Dv && dst.ne[1] == H && dst.ne[2] == N && dst.ne[3] == Q3,
                               "dst " + ShapeString(dst) + " is not [ne0 of v, n_head, n_tokens, ne3 of q]"));
  STOWAGE_RETURN_IF_ERROR(Need(dst.nb[0] == sizeof(float) && dst.nb[1] == size_t(Dv) * sizeof(float) &&
                                   dst.nb[2] == dst.nb[1] * H && dst.nb[3] == dst.nb[2] * N,
                               "dst " + ShapeString(dst) + " must be contiguous"));
  const TypeKernels* kk = GetTypeKernels(k.type, EffectiveIsa(ctx));
  STOWAGE_RETURN_IF_ERROR(Need(kk != nullptr && kk->vec_dot != nullptr && k.layout == kLayoutPlain,
                               "unsupported K type " + ShapeString(k)));
  const auto& kt = GetTypeTraits(k.type);
  const auto& vt = GetTypeTraits(v.type);
  STOWAGE_RETURN_IF_ERROR(Need(D % kt.block_size == 0 && k.nb[0] == kt.type_size,
                               "k " + ShapeString(k) + " needs contiguous rows of whole blocks"));
  STOWAGE_RETURN_IF_ERROR(Need(D % vt.block_size == 0 && v.nb[0] == vt.type_size && v.layout == kLayoutPlain,
                               "v " + ShapeString(v) + " needs contiguous rows of whole blocks"));
  {  // V rows are converted with DequantizeRow: probe that it knows the type
    std::vector<uint8_t> block(vt.type_size, 0);
    std::vector<float> out(size_t(std::max<int64_t>(1, vt.block_size)));
    STOWAGE_RETURN_IF_ERROR(Need(DequantizeRow(v.type, block.data(), out.data(), vt.block_size).ok(),
                                 "unsupported V type " + ShapeString(v)));
  }
  STOWAGE_RETURN_IF_ERROR(Need(q.nb[0] == sizeof(float), "q " + ShapeString(q) + " needs contiguous rows"));
  const bool has_mask = mask.data != nullptr;
  if (has_mask) {
    STOWAGE_RETURN_IF_ERROR(Need(mask.type == GgmlType::F16 && mask.nb[0] == 2,
                                 "mask: expected contiguous F16 rows, got " + ShapeString(mask)));
    STOWAGE_RETURN_IF_ERROR(Need(mask.ne[0] >= n_kv && mask.ne[1] >= N && mask.ne[2] == 1 && mask.ne[3] == 1,
                                 "mask " + ShapeString(mask) + " does not cover [n_kv, n_tokens] = [" +
                                     std::to_string(n_kv) + ", " + std::to_string(N) + "]"));
  }
  STOWAGE_RETURN_IF_ERROR(Need(max_bias <= 0.0f || has_mask, "ALiBi (max_bias > 0) needs a mask"));
  for (const TensorView* t : all)
    STOWAGE_RETURN_IF_ERROR(
        Need(t->data != nullptr || t->nelements() == 0, "tensor " + ShapeString(*t) + " has no data"));
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
  const MadF16Fn mad_f16 = GetMadF16(isa);
  const ScaleF16Fn scale_f16 = GetScaleF16(isa);
  const VecDotFn kq_dot = kk->vec_dot;
  const FromFloatFn q_conv = kk->from_float;  // nullptr: K's vec_dot type is F32

  // Per thread: the F32 accumulator (or V row), the F16 accumulator, Q in K's vec_dot type.
  const size_t q_bytes = RowSize(kk->vec_dot_type, D);
  const size_t per_thread = (2 * D * sizeof(float) + D * sizeof(fp16_t) + q_bytes + 63) / 64 * 64;
  const int nt = std::max(1, ctx.n_threads);
  // A team for a few query rows costs more than it saves (token generation: n_head rows of n_kv
  // dots each); one thread below 64 K rows of work in total.
  const bool parallel = nt > 1 && rows > 1 && rows * n_kv >= 64;
  const int teams = parallel ? nt : 1;
  if (ctx.work.size() < per_thread * teams) ctx.work.resize(per_thread * teams);
  uint8_t* work = ctx.work.data();
  ParallelFor(teams, parallel, rows, Schedule::kStatic, 1, [&](int64_t ir, int tid) {
    uint8_t* w = work + per_thread * size_t(tid);
    float* acc32 = reinterpret_cast<float*>(w);
    float* v32 = acc32 + D;
    fp16_t* acc16 = reinterpret_cast<fp16_t*>(v32 + D);
    void* qq = acc16 + D;
    const int64_t iq3 = ir / (H * N);
    const int64_t iq2 = (ir - iq3 * H * N) / N;
    const int64_t iq1 = ir - iq3 * H * N - iq2 * N;
    const uint32_t h = uint32_t(iq2);
    const float slope = max_bias > 0.0f ? (h < n_head_log2 ? std::pow(m0, float(h + 1))
                                                          : std::pow(m1, float(2 * (h - n_head_log2) + 1)))
                                        : 1.0f;
    const float* pq = reinterpret_cast<const float*>(Row(q, iq1, iq2, iq3));
    if (q_conv) q_conv(pq, qq, D);
    else std::memcpy(qq, pq, size_t(D) * sizeof(float));
    if (v_f16) std::memset(acc16, 0, size_t(D) * sizeof(fp16_t));
    else std::memset(acc32, 0, size_t(D) * sizeof(float));
    const fp16_t* mp = has_mask ? reinterpret_cast<const fp16_t*>(Row(mask, iq1, 0, 0)) : nullptr;
    const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3, iv2 = iq2 / rv2, iv3 = iq3 / rv3;
    float S = 0.0f, M = -INFINITY;
    for (int64_t ic = 0; ic < n_kv; ++ic) {
      const float mv = mp ? slope * HalfToFloat(mp[ic]) : 0.0f;
      if (mv == -INFINITY) continue;
      float s = 0.0f;
      kq_dot(D, &s, Row(k, ic, ik2, ik3), qq);
      s *= scale;
      if (logit_softcap != 0.0f) s = logit_softcap * std::tanh(s);
      s += mv;
      const float m_old = M;
      float ms = 1.0f, vs = 1.0f;
      const char* vrow = Row(v, ic, iv2, iv3);
      if (s > M) {  // a new maximum: rescale what was accumulated, this value's weight is 1
        M = s;
        ms = std::exp(m_old - M);
        if (v_f16) scale_f16(D, acc16, ms);
        else
          for (int64_t d = 0; d < D; ++d) acc32[d] *= ms;
      } else {
        vs = std::exp(s - M);
      }
      if (v_f16) {
        mad_f16(D, acc16, reinterpret_cast<const fp16_t*>(vrow), vs);
      } else {
        (void)DequantizeRow(v.type, vrow, v32, D);  // types checked above
        for (int64_t d = 0; d < D; ++d) acc32[d] += v32[d] * vs;
      }
      S = S * ms + vs;
    }
    if (v_f16)
      for (int64_t d = 0; d < D; ++d) acc32[d] = HalfToFloat(acc16[d]);
    const float inv = 1.0f / S;  // no unmasked key: 1/0, as ggml (inf or NaN results)
    float* out = reinterpret_cast<float*>(static_cast<char*>(dst.data) + iq1 * dst.nb[2] + iq2 * dst.nb[1] +
                                          iq3 * dst.nb[3]);
    for (int64_t d = 0; d < D; ++d) out[d] = acc32[d] * inv;
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
