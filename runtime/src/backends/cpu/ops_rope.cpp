// CPU backend: ROPE with YaRN (angles as ggml_rope_cache_init / rope_yarn in ggml-cpu/ops.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.h"
#include "ops_common.h"

namespace stowage::cpu {

using namespace op_detail;  // ops_common.h

namespace {

// ggml_rope_yarn_corr_dim / ggml_rope_yarn_corr_dims (ggml.c).
float RopeYarnCorrDim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2 * float(M_PI))) / (2 * std::log(base));
}

void RopeYarnCorrDims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]) {
  const float start = std::floor(RopeYarnCorrDim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(RopeYarnCorrDim(n_dims, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(float(n_dims - 1), end);
}

// rope_yarn (ggml-cpu/ops.cpp): YaRN-corrected angle -> cos/sin scaled by mscale. `contracted`
// (ComputeContext::llamacpp_numerics): its two sums of products as llama.cpp's x86 builds (GCC,
// FMA) contract them, theta = fma(theta_interp, 1 - ramp_mix, theta_extrap * ramp_mix) and
// 1 + 0.1 log(1 / freq_scale) = fma(0.1, log(..), 1); else each product rounded on its own.
void RopeYarn(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0, float ext_factor,
              float mscale, bool contracted, float* cos_theta, float* sin_theta) {
  const float theta_interp = freq_scale * theta_extrap;
  float theta = theta_interp;
  if (ext_factor != 0.0f) {
    const float y = (i0 / 2 - corr_dims[0]) / std::max(0.001f, corr_dims[1] - corr_dims[0]);
    const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
    if (contracted) {
      theta = std::fma(theta_interp, 1 - ramp_mix, theta_extrap * ramp_mix);
      mscale *= std::fma(0.1f, std::log(1.0f / freq_scale), 1.0f);
    } else {
      theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
    }
  }
  *cos_theta = std::cos(theta) * mscale;
  *sin_theta = std::sin(theta) * mscale;
}

}  // namespace

Status Rope(ComputeContext& ctx, const TensorView& src, const TensorView& pos, const TensorView& freq_factors,
            TensorView& dst, const RopeParams& p) {
  const char* op = "ROPE";
  STOWAGE_RETURN_IF_ERROR(NeedType(src, GgmlType::F32, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedType(dst, GgmlType::F32, op, "dst"));
  STOWAGE_RETURN_IF_ERROR(NeedType(pos, GgmlType::I32, op, "pos"));
  STOWAGE_RETURN_IF_ERROR(NeedSameShape(src, dst, op, "src", "dst"));
  STOWAGE_RETURN_IF_ERROR(CheckRopeParams(p, src.ne[0]));
  STOWAGE_CPU_NEED(
      pos.ne[0] >= src.ne[2] && pos.nb[0] == 4, op,
      "pos " + ShapeString(pos) + " must hold ne2 = " + std::to_string(src.ne[2]) + " positions");
  if (freq_factors.data != nullptr) {
    STOWAGE_RETURN_IF_ERROR(NeedType(freq_factors, GgmlType::F32, op, "freq_factors"));
    STOWAGE_CPU_NEED(freq_factors.ne[0] >= p.n_dims / 2 && freq_factors.nb[0] == 4, op,
                     "freq_factors " + ShapeString(freq_factors) +
                         " must hold n_dims/2 = " + std::to_string(p.n_dims / 2) + " values");
  }
  STOWAGE_RETURN_IF_ERROR(NeedData(src, op, "src"));
  STOWAGE_RETURN_IF_ERROR(NeedData(pos, op, "pos"));
  STOWAGE_RETURN_IF_ERROR(NeedData(dst, op, "dst"));
  float corr_dims[2];
  RopeYarnCorrDims(p.n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow, corr_dims);
  const float theta_scale = std::pow(p.freq_base, -2.0f / p.n_dims);
  const float* ff = static_cast<const float*>(freq_factors.data);
  const int32_t* positions = static_cast<const int32_t*>(pos.data);
  const int64_t ne0 = src.ne[0], ne1 = src.ne[1], ne2 = src.ne[2], ne3 = src.ne[3];
  const bool neox = p.mode == 2;
  const int n_dims = p.n_dims;
  const int64_t n_offs = p.n_offs;  // ggml_rope_set_offset: dims [n_offs, n_offs + n_dims) rotate
  const int64_t n_items = ne2 * ne3;
  // One angle cache per (i2, i3), n_dims floats.
  auto fill_cache = [&](int32_t position, float* cache) {
    float theta = float(position);
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
      const float f = ff ? ff[i0 / 2] : 1.0f;
      RopeYarn(theta / f, p.freq_scale, corr_dims, i0, p.ext_factor, p.attn_factor, ctx.llamacpp_numerics,
               &cache[i0], &cache[i0 + 1]);
      theta *= theta_scale;
    }
  };
  // One position (token generation): the cache of the previous call when it was made for the same
  // position and parameters (ComputeContext::rope_key).
  const float* shared_cache = nullptr;
  if (n_items == 1) {
    auto bits = [](float v) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      return u;
    };
    std::vector<uint32_t> key = {uint32_t(positions[0]),
                                 uint32_t(n_dims),
                                 uint32_t(p.n_ctx_orig),
                                 bits(p.freq_base),
                                 bits(p.freq_scale),
                                 bits(p.ext_factor),
                                 bits(p.attn_factor),
                                 bits(p.beta_fast),
                                 bits(p.beta_slow),
                                 ff ? 1u : 0u,
                                 ctx.llamacpp_numerics ? 1u : 0u};
    if (ff)
      for (int64_t i = 0; i < n_dims / 2; ++i) key.push_back(bits(ff[i]));
    if (key != ctx.rope_key || ctx.rope_cache.size() != size_t(n_dims)) {
      ctx.rope_cache.resize(size_t(n_dims));
      fill_cache(positions[0], ctx.rope_cache.data());
      ctx.rope_key = std::move(key);
    }
    shared_cache = ctx.rope_cache.data();
  }
  // The rotation of ggml's rotate_pairs as GCC contracts it in llama.cpp's builds with FMA:
  // y0 = fma(x0, cos, -(x1 * sin)), y1 = fma(x0, sin, x1 * cos) — bit-identical to its CPU backend.
  const RopeRotateFn rotate = GetRowKernels(EffectiveIsa(ctx)).rope_rotate;
  const int rope_threads = Threads(ctx, src.nelements());
  ParallelFor(rope_threads, rope_threads > 1, n_items, Schedule::kStatic, 1, [&](int64_t it, int) {
    const int64_t i2 = it % ne2, i3 = it / ne2;
    std::vector<float> own;
    const float* cache = shared_cache;
    if (cache == nullptr) {
      own.resize(static_cast<size_t>(n_dims));
      fill_cache(positions[i2], own.data());
      cache = own.data();
    }
    for (int64_t i1 = 0; i1 < ne1; ++i1) {
      const char* s = At(src, 0, i1, i2, i3);
      char* d = At(dst, 0, i1, i2, i3);
      if (src.nb[0] == 4 && dst.nb[0] == 4) {  // contiguous rows: plain indexing (same arithmetic)
        const float* x = reinterpret_cast<const float*>(s);
        float* y = reinterpret_cast<float*>(d);
        rotate(n_dims, neox, cache, x + n_offs, y + n_offs);
        if (y != x) {
          for (int64_t i0 = 0; i0 < n_offs; ++i0) y[i0] = x[i0];
          for (int64_t i0 = n_offs + n_dims; i0 < ne0; ++i0) y[i0] = x[i0];
        }
        continue;
      }
      auto ld = [&](int64_t i) {
        float v;
        std::memcpy(&v, s + i * src.nb[0], 4);
        return v;
      };
      auto st = [&](int64_t i, float v) { std::memcpy(d + i * dst.nb[0], &v, 4); };
      for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const float c = cache[i0], sn = cache[i0 + 1];
        const int64_t a = n_offs + (neox ? i0 / 2 : i0);
        const int64_t b = n_offs + (neox ? i0 / 2 + n_dims / 2 : i0 + 1);
        const float x0 = ld(a), x1 = ld(b);
        st(a, std::fma(x0, c, -(x1 * sn)));
        st(b, std::fma(x0, sn, x1 * c));
      }
      for (int64_t i0 = 0; i0 < n_offs; ++i0) st(i0, ld(i0));
      for (int64_t i0 = n_offs + n_dims; i0 < ne0; ++i0) st(i0, ld(i0));
    }
  });
  return Status::Ok();
}

}  // namespace stowage::cpu
