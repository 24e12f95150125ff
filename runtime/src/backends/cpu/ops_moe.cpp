// Mixture-of-experts ops of the CPU backend (ops.h): MUL_MAT_ID, ARGSORT, SUM_ROWS.
// Semantics follow ggml (ggml.c ggml_mul_mat_id / ggml_argsort / ggml_sum_rows and ggml-cpu's
// ops.cpp forward functions); the code is this project's own.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernels.h"
#include "moe_rows.h"
#include "ops.h"

namespace stowage::cpu {
namespace {

inline const char* AtC(const TensorView& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

}  // namespace

Status GroupRowsByExpert(const TensorView& ids, int64_t n_as, std::vector<std::vector<int64_t>>* rows) {
  const int64_t n_used = ids.ne[0], n_tokens = ids.ne[1];
  rows->assign(static_cast<size_t>(n_as), {});
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t s = 0; s < n_used; ++s) {
      int32_t e;
      std::memcpy(&e, AtC(ids, s, t, 0, 0), sizeof e);
      if (e < 0 || e >= n_as)
        return OutOfRange("MUL_MAT_ID: ids[" + std::to_string(s) + ", " + std::to_string(t) +
                          "] = " + std::to_string(e) + " is outside [0, " + std::to_string(n_as) + ")");
      (*rows)[static_cast<size_t>(e)].push_back(t * n_used + s);
    }
  }
  return Status::Ok();
}

Status MulMatId(ComputeContext& ctx, const TensorView& as, const TensorView& b, const TensorView& ids,
                TensorView& dst) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("MUL_MAT_ID: as " + ShapeString(as) + ", b " + ShapeString(b) + ", ids " +
                           ShapeString(ids) + ", dst " + ShapeString(dst) + ": " + why);
  };
  const int64_t K = as.ne[0], N = as.ne[1], n_as = as.ne[2];
  const int64_t n_used = ids.ne[0], n_tokens = ids.ne[1];
  if (as.ne[3] != 1) return bad("as must be 3-D [K, N, n_expert]");
  // CPU_REPACK experts: each expert's [K, N] slice of a repacked [K, N, n_expert] tensor is itself a
  // repacked matrix (groups of 8 rows never straddle matrices), which MulMat reads.
  if (as.layout != kLayoutPlain && !IsRepackedLayout(as.layout))
    return bad("unknown as layout " + std::to_string(as.layout));
  if (b.type != GgmlType::F32) return bad("b must be F32");
  if (ids.type != GgmlType::I32) return bad("ids must be I32");
  if (dst.type != GgmlType::F32) return bad("dst must be F32");
  if (b.ne[0] != K) return bad("as and b differ in ne0");
  if (b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1) return bad("b and ids must be at most 3-D / 2-D");
  if (b.ne[2] != n_tokens) return bad("ids.ne1 must equal b.ne2");
  if (b.ne[1] <= 0 || n_used % b.ne[1] != 0) return bad("ids.ne0 must be a multiple of b.ne1");
  if (dst.ne[0] != N || dst.ne[1] != n_used || dst.ne[2] != n_tokens || dst.ne[3] != 1)
    return bad("dst must be [as.ne1, ids.ne0, b.ne2, 1]");
  if (dst.nb[0] != sizeof(float)) return bad("dst rows must be contiguous");
  if (n_as <= 0) return bad("no experts");
  if (N * n_used * n_tokens == 0) return Status::Ok();
  if (as.data == nullptr || b.data == nullptr || ids.data == nullptr || dst.data == nullptr)
    return bad("null data pointer");

  std::vector<std::vector<int64_t>> rows;
  STOWAGE_RETURN_IF_ERROR(GroupRowsByExpert(ids, n_as, &rows));
  // The experts with few columns (token generation: one each) in one pass, each b row converted
  // once and one thread team for all (kernels.h MulMatIdFewCols; same bits); the others below.
  STOWAGE_RETURN_IF_ERROR(MulMatIdFewCols(ctx, as, b, rows, n_used, dst));

  // Per expert: gather its src1 columns (b[:, s % ne11, t]) into a contiguous F32 matrix, multiply
  // with the expert's [K, N] slice through MulMat (the same vec_dot / GEMM kernels and activation
  // quantization as MUL_MAT; quantization is per row, so gathering does not change it), scatter the
  // result columns to dst[:, s, t].
  std::vector<float> in, out;
  for (int64_t e = 0; e < n_as; ++e) {
    const auto& r = rows[static_cast<size_t>(e)];
    if (r.empty() || MulMatIdFewColsExpert(as, static_cast<int64_t>(r.size()))) continue;
    const int64_t m = static_cast<int64_t>(r.size());
    in.resize(static_cast<size_t>(K * m));
    out.resize(static_cast<size_t>(N * m));
    for (int64_t j = 0; j < m; ++j) {
      const int64_t t = r[j] / n_used, s = r[j] % n_used;
      const char* src = AtC(b, 0, s % b.ne[1], t, 0);
      float* d = in.data() + j * K;
      if (b.nb[0] == sizeof(float)) {
        std::memcpy(d, src, static_cast<size_t>(K) * sizeof(float));
      } else {
        for (int64_t k = 0; k < K; ++k) std::memcpy(d + k, src + k * b.nb[0], sizeof(float));
      }
    }
    TensorView a_e = as;
    a_e.data = static_cast<char*>(as.data) + e * as.nb[2];
    a_e.ne[2] = 1;
    TensorView in_v;
    in_v.data = in.data();
    in_v.type = GgmlType::F32;
    in_v.ne[0] = K;
    in_v.ne[1] = m;
    SetContiguousStrides(in_v);
    TensorView out_v;
    out_v.data = out.data();
    out_v.type = GgmlType::F32;
    out_v.ne[0] = N;
    out_v.ne[1] = m;
    SetContiguousStrides(out_v);
    STOWAGE_RETURN_IF_ERROR(MulMatImpl(ctx, a_e, in_v, out_v, /*expert=*/true));
    for (int64_t j = 0; j < m; ++j) {
      const int64_t t = r[j] / n_used, s = r[j] % n_used;
      char* d = static_cast<char*>(dst.data) + s * dst.nb[1] + t * dst.nb[2];
      std::memcpy(d, out.data() + j * N, static_cast<size_t>(N) * sizeof(float));
    }
  }
  return Status::Ok();
}

Status ArgSort(ComputeContext& ctx, const TensorView& src, TensorView& dst, int order) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("ARGSORT: src " + ShapeString(src) + ", dst " + ShapeString(dst) + ": " + why);
  };
  if (src.type != GgmlType::F32) return bad("src must be F32");
  if (dst.type != GgmlType::I32) return bad("dst must be I32");
  for (int i = 0; i < 4; ++i)
    if (src.ne[i] != dst.ne[i]) return bad("src and dst differ in shape");
  if (order != 0 && order != 1)
    return bad("order must be 0 (ascending) or 1 (descending), got " + std::to_string(order));
  if (src.nelements() == 0) return Status::Ok();
  if (src.data == nullptr || dst.data == nullptr) return bad("null data pointer");
  const int64_t ne0 = src.ne[0];
  std::vector<int32_t> idx(static_cast<size_t>(ne0));
  std::vector<float> x(static_cast<size_t>(ne0));
  for (int64_t i3 = 0; i3 < src.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < src.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < src.ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(&x[i0], AtC(src, i0, i1, i2, i3), sizeof(float));
        std::iota(idx.begin(), idx.end(), 0);
        auto asc = [&](int32_t a, int32_t c) { return x[a] < x[c]; };
        auto desc = [&](int32_t a, int32_t c) { return x[a] > x[c]; };
        if (ctx.llamacpp_numerics) {
          // ggml-cpu's argsort: std::sort of the indices 0..ne0-1 with the same comparison, whose
          // libstdc++ introsort keeps ties in index order up to 16 elements (insertion sort) and
          // reorders them in its partitions above (a top-k over more than 16 experts picks other
          // tied experts, or the same ones in another order, than a stable sort).
          if (order == 0)
            std::sort(idx.begin(), idx.end(), asc);
          else
            std::sort(idx.begin(), idx.end(), desc);
        } else if (order == 0) {
          std::stable_sort(idx.begin(), idx.end(), asc);  // ties keep index order
        } else {
          std::stable_sort(idx.begin(), idx.end(), desc);
        }
        char* d = static_cast<char*>(dst.data) + i1 * dst.nb[1] + i2 * dst.nb[2] + i3 * dst.nb[3];
        for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(d + i0 * dst.nb[0], &idx[i0], sizeof(int32_t));
      }
  return Status::Ok();
}

Status SumRows(ComputeContext& ctx, const TensorView& src, TensorView& dst) {
  (void)ctx;
  auto bad = [&](const std::string& why) {
    return InvalidArgument("SUM_ROWS: src " + ShapeString(src) + ", dst " + ShapeString(dst) + ": " + why);
  };
  if (src.type != GgmlType::F32 || dst.type != GgmlType::F32) return bad("src and dst must be F32");
  if (dst.ne[0] != 1 || dst.ne[1] != src.ne[1] || dst.ne[2] != src.ne[2] || dst.ne[3] != src.ne[3])
    return bad("dst must be [1, ne1, ne2, ne3] of src");
  if (dst.nelements() == 0) return Status::Ok();
  if (src.data == nullptr || dst.data == nullptr) return bad("null data pointer");
  for (int64_t i3 = 0; i3 < src.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < src.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < src.ne[1]; ++i1) {
        double sum = 0.0;  // ggml_vec_sum_f32 accumulates in ggml_float (double)
        for (int64_t i0 = 0; i0 < src.ne[0]; ++i0) {
          float v;
          std::memcpy(&v, AtC(src, i0, i1, i2, i3), sizeof v);
          sum += v;
        }
        const float r = static_cast<float>(sum);
        std::memcpy(static_cast<char*>(dst.data) + i1 * dst.nb[1] + i2 * dst.nb[2] + i3 * dst.nb[3], &r,
                    sizeof r);
      }
  return Status::Ok();
}

}  // namespace stowage::cpu
