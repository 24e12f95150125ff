// Host emulations of the CUDA backend's launches for the ops of the MoE graphs (kernels.cu,
// CudaBackend::MulMatId): each loops over its kernel's grid (blocks, warps, lanes; a warp's sum as
// the plain sum of its lanes) and calls the per-thread functions of cuda_math.h that the kernels
// call; the MUL_MATs of MUL_MAT_ID's batched path (cuBLAS or the quantized mat-vec on a GPU) are run
// by the CPU backend. Used op by op by cuda_math_test and for whole models by
// cuda_emulation_model_test. Header-only; needs stowage_cuda_math and stowage_cpu.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_math.h"
#include "moe_rows.h"
#include "ops.h"
#include "tensor_tv.h"

namespace stowage::test {

/// Calls f(std::integral_constant<int, T>()) for the kernels' type `type` (kernels.cu's
/// STOWAGE_DISPATCH_TYPE); false for a type the kernels do not take.
template <typename F>
bool DispatchCudaType(int type, F&& f) {
  using cuda::kBF16, cuda::kF16, cuda::kF32, cuda::kIQ4_NL, cuda::kIQ4_XS, cuda::kMXFP4, cuda::kQ2_K,
      cuda::kQ3_K, cuda::kQ4_0, cuda::kQ4_1, cuda::kQ4_K, cuda::kQ5_0, cuda::kQ5_1, cuda::kQ5_K, cuda::kQ6_K,
      cuda::kQ8_0;
  switch (type) {
#define STOWAGE_EMULATION_CASE(T)        \
  case T:                                \
    f(std::integral_constant<int, T>()); \
    return true;
    STOWAGE_EMULATION_CASE(kF32)
    STOWAGE_EMULATION_CASE(kF16)
    STOWAGE_EMULATION_CASE(kBF16)
    STOWAGE_EMULATION_CASE(kQ4_0)
    STOWAGE_EMULATION_CASE(kQ4_1)
    STOWAGE_EMULATION_CASE(kQ5_0)
    STOWAGE_EMULATION_CASE(kQ5_1)
    STOWAGE_EMULATION_CASE(kQ8_0)
    STOWAGE_EMULATION_CASE(kQ2_K)
    STOWAGE_EMULATION_CASE(kQ3_K)
    STOWAGE_EMULATION_CASE(kQ4_K)
    STOWAGE_EMULATION_CASE(kQ5_K)
    STOWAGE_EMULATION_CASE(kQ6_K)
    STOWAGE_EMULATION_CASE(kIQ4_NL)
    STOWAGE_EMULATION_CASE(kIQ4_XS)
    STOWAGE_EMULATION_CASE(kMXFP4)
#undef STOWAGE_EMULATION_CASE
    default:
      return false;
  }
}

/// f(l) for every element l of d (the element-wise kernels' threads).
template <typename F>
void EmulateElements(const cuda::Tv& d, F&& f) {
  for (int64_t l = 0; l < cuda::Nelements(d); ++l) f(l);
}

/// MulMatVecIdK over its grid (weight rows x slots x tokens): dst [N, n_used, n_tokens]. False when
/// the kernels do not take the experts' type.
inline bool EmulateMulMatVecId(const cuda::Tv& as, const cuda::Tv& b, const cuda::Tv& ids,
                               const cuda::Tv& d) {
  return DispatchCudaType(as.type, [&](auto tag) {
    constexpr int T = decltype(tag)::value;
    for (int64_t t = 0; t < ids.ne[1]; ++t)
      for (int64_t s = 0; s < ids.ne[0]; ++s)
        for (int64_t n = 0; n < as.ne[1]; ++n) {
          cuda::Tv w, x, o;
          if (!cuda::MulMatIdVecViews(as, b, ids, d, s, t, &w, &x, &o)) {
            cuda::StoreF32(cuda::At(d, n, s, t, 0), NAN);
            continue;
          }
          float sum = 0.f;
          for (int lane = 0; lane < 32; ++lane) {
            float acc[cuda::kMmvCols];
            cuda::MulMatVecLane<T>(w, x, o, n, 0, 0, lane, acc);
            sum += acc[0];
          }
          cuda::StoreF32(cuda::At(o, n, 0, 0, 0), sum);
        }
  });
}

/// CudaBackend::MulMatId's batched path: the pairs grouped by cpu::GroupRowsByExpert (its
/// kOutOfRange for a bad id), src1 gathered (MoeGatherElement), each expert's run multiplied by
/// cpu::MulMat standing in for the GPU's MUL_MAT, the products scattered (MoeScatterElement).
inline Status EmulateMulMatIdBatched(cpu::ComputeContext& ctx, const cpu::TensorView& as,
                                     const cpu::TensorView& b, const cpu::TensorView& ids,
                                     const cpu::TensorView& d) {
  const int64_t K = as.ne[0], N = as.ne[1], n_as = as.ne[2], n_used = ids.ne[0];
  std::vector<std::vector<int64_t>> rows;
  STOWAGE_RETURN_IF_ERROR(cpu::GroupRowsByExpert(ids, n_as, &rows));
  std::vector<int32_t> pairs;
  for (const auto& r : rows)
    for (int64_t p : r) pairs.push_back(static_cast<int32_t>(p));
  const int64_t n_pairs = static_cast<int64_t>(pairs.size());
  std::vector<float> xg_data(static_cast<size_t>(K * n_pairs)), out_data(static_cast<size_t>(N * n_pairs));
  auto matrix = [](float* p, int64_t ne0, int64_t ne1) {
    cpu::TensorView v;
    v.data = p;
    v.type = GgmlType::F32;
    v.ne[0] = ne0;
    v.ne[1] = ne1;
    cpu::SetContiguousStrides(v);
    return v;
  };
  const cuda::Tv tb = cuda::ToTv(b), txg = cuda::ToTv(matrix(xg_data.data(), K, n_pairs)),
                 tout = cuda::ToTv(matrix(out_data.data(), N, n_pairs)), td = cuda::ToTv(d);
  EmulateElements(txg, [&](int64_t l) { cuda::MoeGatherElement(tb, pairs.data(), n_used, txg, l); });
  int64_t j0 = 0;
  for (int64_t e = 0; e < n_as; ++e) {
    const int64_t m = static_cast<int64_t>(rows[static_cast<size_t>(e)].size());
    if (m == 0) continue;
    cpu::TensorView w = as;
    w.data = static_cast<uint8_t*>(as.data) + e * as.nb[2];
    w.ne[2] = 1;
    cpu::TensorView oe = matrix(out_data.data() + j0 * N, N, m);
    STOWAGE_RETURN_IF_ERROR(cpu::MulMat(ctx, w, matrix(xg_data.data() + j0 * K, K, m), oe));
    j0 += m;
  }
  EmulateElements(tout, [&](int64_t l) { cuda::MoeScatterElement(tout, pairs.data(), n_used, td, l); });
  return Status::Ok();
}

/// CudaBackend::MulMatId: the mat-vec up to cuda::kMmvIdMaxTokens tokens, the batched path above.
inline Status EmulateMulMatId(cpu::ComputeContext& ctx, const cpu::TensorView& as, const cpu::TensorView& b,
                              const cpu::TensorView& ids, const cpu::TensorView& d) {
  if (ids.ne[1] > cuda::kMmvIdMaxTokens) return EmulateMulMatIdBatched(ctx, as, b, ids, d);
  if (!EmulateMulMatVecId(cuda::ToTv(as), cuda::ToTv(b), cuda::ToTv(ids), cuda::ToTv(d)))
    return Unimplemented("MUL_MAT_ID: experts of a type the kernels do not take");
  return Status::Ok();
}

/// ArgSortK: per row, the bitonic network's stages in order, each stage's compare-exchanges in
/// thread order (they touch distinct pairs), then the first ncols indices stored.
inline void EmulateArgsort(const cuda::Tv& src, const cuda::Tv& dst, bool desc) {
  const int64_t ncols = src.ne[0];
  const int width = cuda::ArgsortWidth(ncols);
  std::vector<int> idx(static_cast<size_t>(width));
  for (int64_t r = 0; r < src.ne[1] * src.ne[2] * src.ne[3]; ++r) {
    int64_t i1, i2, i3;
    cuda::RowIndex(r, src.ne, &i1, &i2, &i3);
    const uint8_t* row = cuda::At(src, 0, i1, i2, i3);
    for (int i = 0; i < width; ++i) idx[static_cast<size_t>(i)] = i;
    for (int k = 2; k <= width; k *= 2)
      for (int j = k / 2; j > 0; j /= 2)
        for (int i = 0; i < width; ++i)
          cuda::ArgsortCompareExchange(idx.data(), row, src.nb[0], ncols, i, j, k, desc);
    for (int64_t i = 0; i < ncols; ++i) {
      const int32_t v = idx[static_cast<size_t>(i)];
      std::memcpy(cuda::At(dst, i, i1, i2, i3), &v, 4);
    }
  }
}

/// SumRowsK: one thread per row.
inline void EmulateSumRows(const cuda::Tv& a, const cuda::Tv& d) {
  for (int64_t r = 0; r < a.ne[1] * a.ne[2] * a.ne[3]; ++r) cuda::SumRowsThread(a, d, r);
}

}  // namespace stowage::test
