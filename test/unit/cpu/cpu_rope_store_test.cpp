// ROPE_SET_ROWS and ROPE_CPY (ops_rope_store.cpp) against ROPE then SET_ROWS / CPY, bit for bit:
// the KV cache they write (F16, F32, BF16 rows; I64 / I32 indices), with and without freq factors,
// normal and neox, YaRN, one token (the cached angles) and several, thread counts, ISA caps and
// both numerics modes; cells outside the store stay untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ops_rope_store.h"
#include "test_util.h"

namespace stowage::cpu {
namespace {
using kt::Ctx;
using kt::Fill;
using kt::Tensor;

struct StoreCase {
  int64_t head_dim, n_head, n_tokens, n_rows;
  int mode, n_dims;
  float ext_factor;
  bool freq_factors;
  GgmlType cache, idx;
};

Tensor Indices(GgmlType type, int64_t n_tokens, int64_t n_rows) {
  Tensor idx(type, n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t row = (3 * t + 1) % n_rows;  // scattered cells, as a KV cache after removals
    if (type == GgmlType::I64)
      std::memcpy(idx.buf.data() + 8 * t, &row, 8);
    else
      idx.i32()[t] = int32_t(row);
  }
  return idx;
}

// A case's ROPE inputs: x [head_dim, n_head, n_tokens] and freq factors [n_dims / 2] filled from
// *seed (advanced), positions pos0 + pos_step * t, and ROPE's parameters (YaRN with freq_scale 0.25
// when the case has an ext_factor).
struct RopeInputs {
  Tensor x, pos, ff;
  RopeParams p;
};
RopeInputs InputsOf(const StoreCase& c, uint32_t* seed, int32_t pos0, int32_t pos_step) {
  RopeInputs in{Tensor(GgmlType::F32, c.head_dim, c.n_head, c.n_tokens), Tensor(GgmlType::I32, c.n_tokens),
                Tensor(GgmlType::F32, c.n_dims / 2), RopeParams{}};
  Fill(in.x, (*seed)++, -3, 3);
  for (int64_t t = 0; t < c.n_tokens; ++t) in.pos.i32()[t] = int32_t(pos0 + pos_step * t);
  Fill(in.ff, (*seed)++, 0.5f, 4.f);
  in.p.n_dims = c.n_dims;
  in.p.mode = c.mode;
  in.p.n_ctx_orig = 4096;
  in.p.freq_scale = c.ext_factor != 0.f ? 0.25f : 1.f;
  in.p.ext_factor = c.ext_factor;
  return in;
}

TEST(CpuRopeStore, RopeSetRowsEqualsRopeThenSetRows) {
  const StoreCase cases[] = {
      {64, 4, 1, 16, 0, 64, 0.f, false, GgmlType::F16, GgmlType::I64},  // token generation, llama
      {64, 4, 7, 16, 0, 64, 0.f, false, GgmlType::F16, GgmlType::I64},
      {128, 2, 5, 9, 2, 128, 0.f, false, GgmlType::F16, GgmlType::I64},  // neox (qwen3)
      {32, 3, 4, 8, 2, 16, 1.f, true, GgmlType::F32, GgmlType::I32},     // partial dims, YaRN, rope_freqs
      {40, 2, 3, 5, 0, 40, 0.f, true, GgmlType::BF16, GgmlType::I64},
      {8, 1, 33, 40, 0, 8, 0.f, false, GgmlType::F16, GgmlType::I32},
  };
  uint32_t seed = 7;
  for (const StoreCase& c : cases) {
    SCOPED_TRACE(c.head_dim * 1000 + c.n_tokens);
    const RopeInputs in = InputsOf(c, &seed, 17, 5);
    const Tensor &x = in.x, &pos = in.pos, &ff = in.ff;
    const RopeParams& p = in.p;
    const TensorView none;
    const Tensor idx = Indices(c.idx, c.n_tokens, c.n_rows);
    for (IsaLevel isa : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512})
      for (int threads : {1, 2, 5})
        for (bool numerics : {false, true}) {
          ComputeContext ctx = Ctx(threads);
          ctx.max_isa = isa;
          ctx.llamacpp_numerics = numerics;
          // The sequence: ROPE into its own tensor, its 2-D reshape stored by SET_ROWS.
          Tensor want(c.cache, c.head_dim * c.n_head, c.n_rows),
              got(c.cache, c.head_dim * c.n_head, c.n_rows);
          Fill(want, 99, -1, 1);
          got.buf = want.buf;
          got.v.data = got.buf.data();
          Tensor rotated(GgmlType::F32, c.head_dim, c.n_head, c.n_tokens);
          ASSERT_TRUE(Rope(ctx, x.v, pos.v, c.freq_factors ? ff.v : none, rotated.v, p).ok());
          TensorView rows = rotated.v;
          rows.ne[0] = c.head_dim * c.n_head;
          rows.ne[1] = c.n_tokens;
          rows.ne[2] = 1;
          SetContiguousStrides(rows);
          ASSERT_TRUE(SetRows(ctx, rows, idx.v, want.v).ok());
          ComputeContext fused_ctx = Ctx(threads);
          fused_ctx.max_isa = isa;
          fused_ctx.llamacpp_numerics = numerics;
          ASSERT_TRUE(RopeSetRows(fused_ctx, x.v, pos.v, c.freq_factors ? ff.v : none, idx.v, got.v, p).ok());
          ASSERT_EQ(got.buf, want.buf)
              << "isa " << int(isa) << " threads " << threads << " numerics " << numerics;
        }
  }
}

// ROPE_CPY against ROPE then CPY: Feb 2025's K store, the rotated K copied into the cache's view of
// the ubatch's cells ([n_tokens * head_dim * n_head] at kv_head rows), F16 / F32 / BF16 caches.
TEST(CpuRopeStore, RopeCpyEqualsRopeThenCpy) {
  const StoreCase cases[] = {
      {64, 4, 1, 16, 0, 64, 0.f, false, GgmlType::F16, GgmlType::I64},  // token generation
      {64, 4, 7, 16, 0, 64, 0.f, true, GgmlType::F16, GgmlType::I64},
      {32, 3, 5, 8, 2, 16, 1.f, false, GgmlType::F32, GgmlType::I64},
      {40, 2, 3, 5, 0, 40, 0.f, false, GgmlType::BF16, GgmlType::I64},
  };
  uint32_t seed = 70;
  for (const StoreCase& c : cases) {
    SCOPED_TRACE(c.head_dim * 1000 + c.n_tokens);
    const RopeInputs in = InputsOf(c, &seed, 40, 1);
    const Tensor &x = in.x, &pos = in.pos, &ff = in.ff;
    const RopeParams& p = in.p;
    const TensorView none;
    const int64_t row = c.head_dim * c.n_head, kv_head = 2;
    for (int threads : {1, 2, 5})
      for (bool numerics : {false, true}) {
        Tensor want(c.cache, row * (c.n_tokens + 4)), got(c.cache, row * (c.n_tokens + 4));
        Fill(want, 98, -1, 1);
        got.buf = want.buf;
        got.v.data = got.buf.data();
        // The k_cache_view: n_tokens rows from cell kv_head, as one vector.
        auto view = [&](Tensor& cache) {
          TensorView v = cache.v;
          v.ne[0] = row * c.n_tokens;
          SetContiguousStrides(v);
          v.data = static_cast<char*>(cache.v.data) + kv_head * row * GetTypeTraits(c.cache).type_size;
          return v;
        };
        ComputeContext ctx = Ctx(threads);
        ctx.llamacpp_numerics = numerics;
        Tensor rotated(GgmlType::F32, c.head_dim, c.n_head, c.n_tokens);
        ASSERT_TRUE(Rope(ctx, x.v, pos.v, c.freq_factors ? ff.v : none, rotated.v, p).ok());
        TensorView want_view = view(want), got_view = view(got);
        ASSERT_TRUE(Cpy(ctx, rotated.v, want_view).ok());
        ComputeContext fused_ctx = Ctx(threads);
        fused_ctx.llamacpp_numerics = numerics;
        ASSERT_TRUE(RopeCpy(fused_ctx, x.v, pos.v, c.freq_factors ? ff.v : none, got_view, p).ok());
        ASSERT_EQ(got.buf, want.buf) << "threads " << threads << " numerics " << numerics;
      }
  }
}

// The comparison can fail: another position or another mode writes other bytes.
TEST(CpuRopeStore, OtherPositionsOrModeDiffer) {
  Tensor x(GgmlType::F32, 64, 4, 2);
  Fill(x, 3, -3, 3);
  Tensor pos(GgmlType::I32, 2);
  pos.i32()[0] = 10;
  pos.i32()[1] = 11;
  const Tensor idx = Indices(GgmlType::I64, 2, 8);
  const TensorView none;
  RopeParams p;
  p.n_dims = 64;
  ComputeContext ctx = Ctx(2);
  Tensor a(GgmlType::F16, 256, 8), b(GgmlType::F16, 256, 8);
  ASSERT_TRUE(RopeSetRows(ctx, x.v, pos.v, none, idx.v, a.v, p).ok());
  pos.i32()[1] = 12;
  ASSERT_TRUE(RopeSetRows(ctx, x.v, pos.v, none, idx.v, b.v, p).ok());
  EXPECT_NE(a.buf, b.buf);
  pos.i32()[1] = 11;
  p.mode = 2;
  ASSERT_TRUE(RopeSetRows(ctx, x.v, pos.v, none, idx.v, b.v, p).ok());
  EXPECT_NE(a.buf, b.buf);
}

// Bad input: a 4-D x, an index outside the cache, a quantized cache are refused with one line.
TEST(CpuRopeStore, Errors) {
  const TensorView none;
  RopeParams p;
  p.n_dims = 8;
  ComputeContext ctx = Ctx(1);
  Tensor pos(GgmlType::I32, 2);
  Tensor x4(GgmlType::F32, 8, 1, 2, 2), cache(GgmlType::F16, 8, 4);
  const Tensor idx = Indices(GgmlType::I64, 2, 4);
  Status st = RopeSetRows(ctx, x4.v, pos.v, none, idx.v, cache.v, p);
  EXPECT_NE(st.message().find("must be 3-D"), std::string::npos) << st.message();
  Tensor x(GgmlType::F32, 8, 1, 2);
  const Tensor far = Indices(GgmlType::I64, 2, 40);  // row 4 of a 4-row cache
  st = RopeSetRows(ctx, x.v, pos.v, none, far.v, cache.v, p);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.message();
  EXPECT_NE(st.message().find("SET_ROWS: idx[1,0,0] = 4"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace stowage::cpu
