// Mamba ops of the CPU backend (ops.h): CONCAT, SSM_CONV, SSM_SCAN. Semantics follow ggml of Feb 2025
// (ggml.c ggml_concat / ggml_ssm_conv / ggml_ssm_scan and ggml-cpu's forward functions, as
// llama.cpp's llm_build_mamba uses them); the code is this project's own.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels.h"
#include "ops.h"
#include "parallel.h"

namespace stowage::cpu {
namespace {

inline const float* F(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) {
  return reinterpret_cast<const float*>(static_cast<const char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] +
                                        i2 * t.nb[2] + i3 * t.nb[3]);
}
inline float* Fw(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3 = 0) {
  return reinterpret_cast<float*>(static_cast<char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] +
                                  i3 * t.nb[3]);
}
// Threads for `work` independent element updates: one below 8192 (a team costs more than it saves).
inline int Threads(const ComputeContext& ctx, int64_t work) {
  return work < 8192 ? 1 : std::max(1, ctx.n_threads);
}

inline bool AllF32(std::initializer_list<const TensorView*> ts) {
  for (const TensorView* t : ts)
    if (t->type != GgmlType::F32) return false;
  return true;
}
inline bool FloatAligned(const TensorView& t) {
  for (int i = 0; i < 4; ++i)
    if (t.nb[i] % sizeof(float) != 0) return false;
  return reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0;
}

}  // namespace

Status Concat(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst, int dim) {
  (void)ctx;
  auto bad = [&](const std::string& why) {
    return InvalidArgument("CONCAT: a " + ShapeString(a) + ", b " + ShapeString(b) + ", dst " +
                           ShapeString(dst) + ": " + why);
  };
  if (!AllF32({&a, &b, &dst})) return bad("a, b and dst must be F32");
  if (dim < 0 || dim > 3) return bad("dim must be 0..3, got " + std::to_string(dim));
  for (int d = 0; d < 4; ++d) {
    const int64_t want = d == dim ? a.ne[d] + b.ne[d] : a.ne[d];
    if (d != dim && b.ne[d] != a.ne[d]) return bad("a and b differ outside dim " + std::to_string(dim));
    if (dst.ne[d] != want) return bad("dst has the wrong shape");
  }
  if (dst.nelements() == 0) return Status::Ok();
  if (a.data == nullptr || b.data == nullptr || dst.data == nullptr) return bad("null data pointer");
  if (!FloatAligned(a) || !FloatAligned(b) || !FloatAligned(dst))
    return bad("strides must be multiples of 4 bytes");
  const int64_t split = a.ne[dim];
  for (int64_t i3 = 0; i3 < dst.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < dst.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < dst.ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
          int64_t j[4] = {i0, i1, i2, i3};
          const TensorView* src = &a;
          if (j[dim] >= split) {
            j[dim] -= split;
            src = &b;
          }
          *Fw(dst, i0, i1, i2, i3) = *F(*src, j[0], j[1], j[2], j[3]);
        }
  return Status::Ok();
}

Status SsmConv(ComputeContext& ctx, const TensorView& sx, const TensorView& c, TensorView& dst) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("SSM_CONV: sx " + ShapeString(sx) + ", c " + ShapeString(c) + ", dst " +
                           ShapeString(dst) + ": " + why);
  };
  if (!AllF32({&sx, &c, &dst})) return bad("sx, c and dst must be F32");
  const int64_t d_conv = c.ne[0], d_inner = c.ne[1];
  const int64_t n_t = sx.ne[0] - d_conv + 1, n_s = sx.ne[2];
  if (d_conv < 1 || n_t < 0 || c.ne[2] != 1 || c.ne[3] != 1 || sx.ne[1] != d_inner || sx.ne[3] != 1)
    return bad("expected sx [d_conv - 1 + n_t, d_inner, n_s] and c [d_conv, d_inner]");
  if (dst.ne[0] != d_inner || dst.ne[1] != n_t || dst.ne[2] != n_s || dst.ne[3] != 1)
    return bad("dst must be [d_inner, n_t, n_s]");
  if (dst.nelements() == 0) return Status::Ok();
  if (sx.data == nullptr || c.data == nullptr || dst.data == nullptr) return bad("null data pointer");
  if (!FloatAligned(sx) || !FloatAligned(c) || !FloatAligned(dst))
    return bad("strides must be multiples of 4 bytes");
  // dst[r, t, s] = sum_k sx[t + k, r, s] * c[k, r]: a sliding window of d_conv columns (float sum
  // in k order, as ggml's ssm_conv row loop).
  // Channels are independent: threads split them.
  const int nt = Threads(ctx, d_inner * n_t * n_s * d_conv);
  ParallelFor(nt, nt > 1, d_inner, Schedule::kStatic, 1, [&](int64_t r, int) {
    for (int64_t s = 0; s < n_s; ++s)
      for (int64_t t = 0; t < n_t; ++t) {
        float sum = 0.0f;
        for (int64_t k = 0; k < d_conv; ++k) sum += *F(sx, t + k, r, s) * *F(c, k, r, 0);
        *Fw(dst, r, t, s) = sum;
      }
  });
  return Status::Ok();
}

Status SsmScan(ComputeContext& ctx, const TensorView& s, const TensorView& x, const TensorView& dt,
               const TensorView& A, const TensorView& B, const TensorView& C, TensorView& dst) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("SSM_SCAN: s " + ShapeString(s) + ", x " + ShapeString(x) + ", dt " +
                           ShapeString(dt) + ", A " + ShapeString(A) + ", B " + ShapeString(B) + ", C " +
                           ShapeString(C) + ": " + why);
  };
  if (!AllF32({&s, &x, &dt, &A, &B, &C, &dst})) return bad("every tensor must be F32");
  const int64_t d_state = s.ne[0], d_inner = s.ne[1], n_s = s.ne[2];
  const int64_t n_t = x.ne[1];
  bool ok = s.ne[3] == 1 && x.ne[0] == d_inner && x.ne[2] == n_s && x.ne[3] == 1;
  for (int d = 0; d < 4; ++d) ok = ok && dt.ne[d] == x.ne[d] && C.ne[d] == B.ne[d];
  ok = ok && A.ne[0] == d_state && A.ne[1] == d_inner && A.ne[2] == 1 && A.ne[3] == 1;
  ok = ok && B.ne[0] == d_state && B.ne[1] == n_t && B.ne[2] == n_s && B.ne[3] == 1;
  if (!ok)
    return bad(
        "expected s [d_state, d_inner, n_s], x/dt [d_inner, n_t, n_s], A [d_state, d_inner], B/C [d_state, "
        "n_t, n_s]");
  const int64_t n_y = d_inner * n_t * n_s, n_state = d_state * d_inner * n_s;
  if (dst.nelements() != n_y + n_state || !dst.is_contiguous())
    return bad("dst must be contiguous with nelements(x) + nelements(s) = " + std::to_string(n_y + n_state) +
               " floats, got " + ShapeString(dst));
  if (n_y + n_state == 0) return Status::Ok();
  if (s.data == nullptr || x.data == nullptr || dt.data == nullptr || A.data == nullptr ||
      B.data == nullptr || C.data == nullptr || dst.data == nullptr)
    return bad("null data pointer");
  for (const TensorView* t : {&s, &x, &dt, &A, &B, &C})
    if (!FloatAligned(*t)) return bad("strides must be multiples of 4 bytes");
  float* y = static_cast<float*>(dst.data);  // y [d_inner, n_t, n_s], then the final states
  float* state = y + n_y;                    // [d_state, d_inner, n_s], contiguous
  // Selective scan (Mamba): per sequence, token by token, for every inner channel r:
  //   dt+ = softplus(dt) (= dt above 20, as ggml), h = h * exp(dt+ * A[:, r]) + B[:, t] * (x * dt+),
  //   y[r, t] = sum_i h[i] * C[i, t]. The state starts from s and is left in dst after y.
  // Channels (q, r) are independent recurrences: threads split them; each runs its tokens in order.
  // The initial state is read before the channel's first write, so s may alias dst's state part.
  const int nt = Threads(ctx, n_s * d_inner * n_t * d_state);
  ParallelFor(nt, nt > 1, n_s * d_inner, Schedule::kStatic, 1, [&](int64_t qr, int) {
    const int64_t q = qr / d_inner, r = qr % d_inner;
    float* h = state + (q * d_inner + r) * d_state;
    for (int64_t i = 0; i < d_state; ++i) h[i] = *F(s, i, r, q);
    for (int64_t t = 0; t < n_t; ++t) {
      const float dtv = *F(dt, r, t, q);
      const float dt_soft_plus = dtv <= 20.0f ? std::log1p(std::exp(dtv)) : dtv;
      const float x_dt = *F(x, r, t, q) * dt_soft_plus;
      float sum = 0.0f;
      for (int64_t i = 0; i < d_state; ++i) {
        const float v = h[i] * std::exp(dt_soft_plus * *F(A, i, r, 0)) + *F(B, i, t, q) * x_dt;
        sum += v * *F(C, i, t, q);
        h[i] = v;
      }
      y[(q * n_t + t) * d_inner + r] = sum;
    }
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
