// CPU backend kernels: the ggml ops the supported architectures need, in ggml's numeric scheme.
//
// Contract (internal to the runtime; the executor calls these):
// - Tensors are TensorView: ggml layout, ne[0] innermost, nb[i] byte strides (nb[0] = type size
//   for plain types, block size for quantized rows), unused dims are 1.
// - Every op computes `dst` from its sources; dst is preallocated by the caller with the shape
//   ggml's constructor gives. Ops use up to `ctx.n_threads` threads (OpenMP) and the caller's
//   scratch buffer `ctx.work` (grown as needed) — no global state.
// - Numerics follow ggml's CPU backend: MUL_MAT converts/quantizes src1 (activations) to the
//   weight type's vec_dot type (F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/
//   IQ4_NL -> Q8_0 (Q4_1/Q5_1 -> Q8_1), K-quants and IQ4_XS -> Q8_K) and accumulates like ggml's
//   vec_dot, so logits agree with llama.cpp. FP16<->FP32 conversions are IEEE round-to-nearest.
// - Errors (unsupported type combination) are reported with a Status; no assert, no abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/status.h"
#include "tensor_view.h"

namespace stowage::cpu {

// The executor's tensor type (runtime/src/executor/tensor_view.h), which every op takes.
using TensorView = exec::TensorView;
using exec::SetContiguousStrides;

/// Weight layouts a TensorView may carry (TensorView::layout).
enum : int {
  kLayoutPlain = exec::kLayoutPlain,  ///< ggml's layout: rows of blocks as in the GGUF file
  /// CPU_REPACK Q4_0 (see RepackQ4_0): groups of 8 rows interleaved block by block; only MulMat
  /// (as src0) reads it. nb[] keep describing the plain layout's strides (row = RowSize(Q4_0, ne0)),
  /// and the repacked tensor has exactly the plain tensor's size.
  kLayoutQ4_0x8 = 1,
  /// CPU_REPACK Q4_K (see RepackQ4_K): groups of 8 rows interleaved super-block by super-block, the
  /// 6-bit scales/mins of the 8 rows regrouped so that one decode serves all 8; only MulMat (as src0)
  /// reads it. Like kLayoutQ4_0x8: nb[] describe the plain strides, the size is the plain size.
  kLayoutQ4_Kx8 = 2,
  /// CPU_REPACK Q8_0 (see RepackQ8_0): groups of 8 rows interleaved block by block, two rows' quants
  /// per 64 bytes, stored offset by 128; only MulMat / MulMatId (as src0) read it. Like
  /// kLayoutQ4_0x8: nb[] describe the plain strides, the size is the plain size.
  kLayoutQ8_0x8 = 3,
  /// CPU_REPACK MXFP4 (see RepackMXFP4): groups of 8 rows interleaved block by block, the 8 scale
  /// bytes first; only MulMat / MulMatId (as src0) read it. Like kLayoutQ4_0x8: nb[] describe the
  /// plain strides, the size is the plain size.
  kLayoutMXFP4x8 = 4,
};

/// True for the CPU_REPACK layouts (kLayoutQ4_0x8, kLayoutQ4_Kx8, kLayoutQ8_0x8, kLayoutMXFP4x8).
inline bool IsRepackedLayout(int layout) {
  return layout == kLayoutQ4_0x8 || layout == kLayoutQ4_Kx8 || layout == kLayoutQ8_0x8 ||
         layout == kLayoutMXFP4x8;
}

/// Instruction-set levels of the kernels, chosen at run time from CPUID.
/// Each level includes the ones below it; a capped context (ComputeContext::max_isa) runs a lower
/// level's code on a better CPU, so one machine stands in for the others (an AVX-512 VNNI CPU runs
/// what an AVX2-only Zen 3 or an AVX-512 Skylake-X without VNNI runs).
enum class IsaLevel : int {
  kScalar = 0,      ///< baseline x86-64 (or any other CPU): the reference code
  kAvx2 = 1,        ///< AVX2 + FMA + F16C (llama.cpp's `haswell` CPU variant)
  kAvx512 = 2,      ///< AVX-512 F/BW/VL/DQ without VNNI (Skylake-X; llama.cpp's `skylakex`)
  kAvx512Vnni = 3,  ///< + AVX512-VNNI vpdpbusd integer dots (Cascade Lake, Ice Lake, Zen 4/5: `zen4`)
};

/// The best level this CPU supports (CPUID + XGETBV; cached after the first call).
IsaLevel DetectIsa();

/// Per-call execution context: thread count and a reusable scratch buffer. One context per
/// concurrently running op (ops resize `work`); ops never keep pointers into it across calls.
struct ComputeContext {
  int n_threads = 1;              ///< OpenMP threads per op (values < 1 are treated as 1)
  std::vector<uint8_t> work;      ///< scratch: MUL_MAT's converted src1, CPY's row buffers
  std::vector<float> fused_work;  ///< scratch of fused ops: MUL_MAT_GLU's up products (llamafile, F16 heads)
  /// Highest kernel level to use: the detected level is capped by this (tests force kScalar to
  /// compare SIMD paths against the reference).
  IsaLevel max_isa = IsaLevel::kAvx512Vnni;
  /// MUL_MAT sums in the orders of llama.cpp's CPU backend in prompt processing too: the GEMM
  /// path only where its order is the vec_dot path's (the q8 family's 8-lane kernels, gemm.h
  /// GetGemmKernels with batch_invariant), else the vec_dot path; repacked Q4_K in llama.cpp's
  /// GEMM order for the first M - M % 4 columns (kernels.h GemvQ4_Kx8Q8_KSb); M = 1 F16 products
  /// through the vec_dot instead of GemvF16Heads; F32/F16 products with K % KN == 0 and >= 2
  /// columns in llamafile's tinyBLAS order (see MulMat). Every column then gets
  /// the bits it gets alone except where llama.cpp's do not either (repacked Q4_K, IQ4_NL, those
  /// F32/F16 products). Costs prompt-processing speed. Also GELU / GEGLU / SCALE with a bias / ROPE
  /// with YaRN as llama.cpp's x86 builds compile them (GCC's FMA contractions; see each op).
  /// SessionOptions::llamacpp_numerics, stowage-run --llamacpp-numerics.
  bool llamacpp_numerics = false;
  /// ROPE's angle cache (n_dims cos/sin values) of its last one-position call and the bits of
  /// everything it depends on (position, n_dims, frequency parameters, freq_factors): token
  /// generation's ROPEs of one token (Q and K of every layer) share it instead of recomputing the
  /// n_dims / 2 cos/sin pairs each time. Same values as computing them.
  std::vector<uint32_t> rope_key;
  std::vector<float> rope_cache;
};

// ---- Ops (ggml semantics; shapes in ggml order) -------------------------------------------
//
// Common rules: F32 tensors may have any strides unless stated (rows need not be contiguous);
// dst may alias a source of the same shape (in-place: ADD/MUL/SCALE/unary/GLU/RMS_NORM/NORM/ROPE/
// SOFT_MAX read each element before writing it). Errors are kInvalidArgument with a one-line
// message "<OP>: <what>" naming the offending tensor as type[ne0,ne1,ne2,ne3]; a null data pointer
// of a non-empty tensor is an error. On error nothing has been written.

/// GET_ROWS (ggml_get_rows): dst[:, i10, i11, i12] = src0[:, idx[i10, i11, i12], i11, i12] as F32.
/// src0 [ne00, n_rows, ne02, ne03] of any type DequantizeRow supports (plain layout; ne02/ne03 may
/// be 1 and are then broadcast), idx I32 [n, ne11, ne12], dst F32 [ne00, n, ne11, ne12] with
/// contiguous rows. Errors: kOutOfRange naming the first index outside [0, n_rows);
/// kUnimplemented for types without a dequantizer.
Status GetRows(ComputeContext& ctx, const TensorView& src0, const TensorView& idx, TensorView& dst);

/// MUL_MAT (ggml_mul_mat): dst[n, m, i2, i3] = dot(src0 row (n, i2 / (ne12/ne02), i3 / (ne13/ne03)),
/// src1 row (m, i2, i3)). src0 [K, N, ne02, ne03] of a SupportsMulMatType type with contiguous rows
/// (layout plain, kLayoutQ4_0x8 or kLayoutQ4_Kx8), src1 F32 [K, M, ne12, ne13] with any strides (permuted
/// views and nb10 != 4 are gathered), dst F32 [N, M, ne12, ne13] with nb0 = 4. ne12 % ne02 == 0 and ne13 %
/// ne03 == 0 (GQA broadcast). With ctx.llamacpp_numerics, F32/F16 src0 at AVX2/AVX-512 with M >= 2 and K % KN
/// == 0 (KN = 16 at AVX-512, 8 at AVX2; F32 only for a contiguous src1) are computed in llamafile's tinyBLAS
/// order, as llama.cpp's CPU backend does (kernels.h MatMulLlamafile). Else, with M >= kGemmMinCols (8)
/// columns per src1 matrix and a weight type that has GEMM kernels (gemm.h: every type above at AVX-512 VNNI,
/// all but IQ4_XS at AVX2, all at the scalar level), src1 is converted into the kernel family's activation
/// rows and packed 16-row weight panels are multiplied with column chunks (prompt processing). Otherwise src1
/// is converted once per call into ctx.work (ggml's vec_dot_type, see VecDotType) and each dst
/// element is one vec_dot (token generation: contiguous chunks of row tiles taken dynamically; the
/// repacked layouts use an 8-row gemv: Q4_0x8 x Q8_0, Q4_Kx8 x Q8_K). F16 src0 with M == 1 at
/// AVX2/AVX-512 (K <= 256 and K % 16 == 0, or several src1 matrices: the attention products of
/// token generation) uses GemvF16Heads: 16-row blocks of one kv head against every q head sharing
/// it, F32 sums in another order than VecDotF16's (not with ctx.llamacpp_numerics).
/// Errors: kUnimplemented for unsupported src0 types; kInvalidArgument for shape/type/stride
/// mismatches (K % block size, dst shape, broadcast, layout).
Status MulMat(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);

/// MUL_MAT_GLU (Stowage's fused FFN-in): dst = GLU(MUL_MAT(gate, x), MUL_MAT(up, x)) with the GLU
/// `glu` names (MulMatGluKind: SWIGLU / GEGLU split, or SILU / GELU then MUL), bit for bit as those
/// ops in sequence. gate and up: MulMat's src0 of one type, layout, shape and strides (two weight
/// tensors where the model has them: no weights laid out together, so the plan's weight buffers and
/// the CPU_REPACK conversions stay those of the unfused graph); x: MulMat's src1; dst F32 [N, M,
/// ne12, ne13] with nb0 = 4. Where MulMat takes the general path (token generation), x is
/// converted to the vec_dot type once and both products run in one thread team, the GLU applied to
/// each tile as it is produced; on the GEMM path (prompt processing) x is converted to the family's
/// activation rows once and one thread team runs items of a panel group of both weights times a
/// block of columns, each followed by its piece of the GLU (up's products in the thread's scratch of
/// ctx.work, never written out); on llamafile's path (llamacpp_numerics, F32/F16) and the F16-heads gemv each
/// product runs on its own, then the GLU row by row. Errors: MulMat's; kInvalidArgument when up differs from
/// gate.
Status MulMatGlu(ComputeContext& ctx, const TensorView& gate, const TensorView& x, const TensorView& up,
                 TensorView& dst, MulMatGluKind glu);

/// RMS_NORM over ne0 (ggml_rms_norm): dst = x * 1/sqrt(sum(x^2)/ne0 + eps), the sum in double as
/// ggml_float. F32 src and dst of equal shape.
Status RmsNorm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps);
/// RMS_NORM_MUL (Stowage's fused op): MUL(RMS_NORM(src) {eps}, w) bit for bit, in one pass over
/// each row (no intermediate tensor, one thread team). `w` F32 or F16, repeatable to src (as MUL's
/// src1; the norm weight [ne0]); F32 src and dst of equal shape; dst may be src (in place).
Status RmsNormMul(ComputeContext& ctx, const TensorView& src, const TensorView& w, TensorView& dst,
                  float eps);
/// NORM over ne0 (ggml_norm): dst = (x - mean) / sqrt(var + eps), sums in double. F32.
Status Norm(ComputeContext& ctx, const TensorView& src, TensorView& dst, float eps);

/// ADD / MUL with ggml broadcasting: dst[i] = src0[i] op src1[i0 % ne10, i1 % ne11, i2 % ne12,
/// i3 % ne13]. src0 and dst F32 of equal shape, src1 F32 or F16 with src0.ne[d] % src1.ne[d] == 0.
Status Add(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);
Status Mul(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);

/// SCALE (ggml_scale_bias): dst = x * s + b. F32 src and dst of equal shape. With
/// ctx.llamacpp_numerics as ggml-cpu: x * s for b == 0, else fma(x, s, b) (ggml_vec_mad1_f32).
Status Scale(ComputeContext& ctx, const TensorView& src, TensorView& dst, float s, float b);
/// FILL (ggml_fill): every element of dst is c (src gives only the shape; dst may alias it, ggml's
/// in-place form). F32 src and dst of equal shape. Differs from ggml-cpu: F16 is not supported (the
/// graphs fill F32 selection probabilities only).
Status Fill(ComputeContext& ctx, const TensorView& src, TensorView& dst, float c);
/// CLAMP (ggml_clamp): dst = max(min(x, max), min) with ggml-cpu's comparisons (MAX(MIN(x, max), min):
/// NaN becomes max; min > max gives min), bit for bit in both modes. F32 src and dst of equal shape.
/// Differs from ggml-cpu: F16 is not supported (the graphs clamp F32 weight sums only).
Status Clamp(ComputeContext& ctx, const TensorView& src, TensorView& dst, float min, float max);

/// SILU: x / (1 + exp(-x)). GELU: ggml's tanh approximation 0.5x(1 + tanh(sqrt(2/pi) x (1 +
/// 0.044715 x^2))) evaluated like GGML_GELU_FP16 (input and result rounded through fp16; x <= -10
/// gives 0, x >= 10 gives x); with ctx.llamacpp_numerics the table of llama.cpp's GCC builds, whose
/// 1 + 0.044715 x^2 is fma(0.044715 x, x, 1). F32 src and dst of equal shape.
Status Silu(ComputeContext& ctx, const TensorView& src, TensorView& dst);
Status Gelu(ComputeContext& ctx, const TensorView& src, TensorView& dst);
/// TANH (ggml_tanh): libm's tanhf per element, as ggml-cpu unary-ops.cpp op_tanh (gemma2's logit
/// soft-capping, cap * tanh(x / cap), is SCALE -> TANH -> SCALE). F32 src and dst of equal shape,
/// rows contiguous or strided; in place allowed (dst may alias src).
Status Tanh(ComputeContext& ctx, const TensorView& src, TensorView& dst);
/// GLU (ggml_swiglu_split / ggml_geglu_split): dst = silu(a) * b, resp. gelu(a) * b; a, b, dst F32
/// of equal shape. Fused form (ggml_swiglu / ggml_geglu of one tensor, swapped = 0): b.data ==
/// nullptr and a is [2 * ne0, ne1, ne2, ne3]; the first half of each row of a is the gate, the
/// second half the value. In place only in the split form (dst may alias a or b). GEGLU with
/// ctx.llamacpp_numerics: +0 for a <= -10 whatever b (ggml_vec_geglu_f32), GELU's numerics table.
Status SwiGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst);
Status GeGlu(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst);

/// ROPE parameters (ggml_rope_ext's arguments; the plan's layout, ggml_op_params.h).
using RopeParams = ::stowage::RopeParams;
/// The ROPE parameters this runtime computes with, for rows of `ne0` elements: mode 0 or 2 (the
/// kernels' limit: no M-RoPE or vision modes), and ggml's rule on n_dims (CheckRopeDims). Rope
/// checks them; so does the plan verifier (plan_graph CheckNodes), before anything runs. Errors:
/// kInvalidArgument ("ROPE: ...").
Status CheckRopeParams(const RopeParams& p, int64_t ne0);
/// ROPE (ggml_rope_ext): rotates pairs of dims [n_offs, n_offs + n_dims) (ggml_rope_set_offset;
/// the other dims are copied) of src F32 [head_dim, n_head, n_tokens, ne3] by
/// theta = pos[i2] * freq_base^(-i0/n_dims) / freq_factors[i0/2], with YaRN mixing/mscale as
/// ggml's rope_yarn; angles follow ggml_rope_cache_init (theta multiplied by theta_scale in float
/// step by step; with ctx.llamacpp_numerics YaRN's mix and magnitude fused as GCC contracts
/// rope_yarn: fma(theta_interp, 1 - ramp_mix, theta_extrap * ramp_mix), fma(0.1, log(1 / freq_scale),
/// 1)). pos I32 [>= n_tokens]; freq_factors F32 [>= n_dims/2] or data == nullptr;
/// dst like src. Errors: mode other than 0/2 (M-RoPE/vision are not supported), odd or too large
/// n_dims, short pos/freq_factors.
Status Rope(ComputeContext& ctx, const TensorView& src, const TensorView& pos, const TensorView& freq_factors,
            TensorView& dst, const RopeParams& p);

/// SOFT_MAX_EXT (ggml_soft_max_ext): per row, w = x * scale + slope(h) * mask, dst = exp(w - max) /
/// sum (sum in double). slope(h) = 1, or the ALiBi slope of head h = i2 when max_bias > 0
/// (m0 = 2^(-max_bias / n_head_log2), m1 = 2^(-max_bias / 2 / n_head_log2)). src F32
/// [n_kv, n_tokens, n_head, ne3]; mask F16 or F32 [n_kv, >= n_tokens, ne12, ne13] broadcast over
/// dims 2, 3 (n_head % ne12 == 0), or data == nullptr for none; dst like src. A row whose w are
/// all -inf yields NaN, as in ggml. sinks (ggml_soft_max_add_sinks, llama.cpp 2026's attention
/// sinks): F32 [n_head] or data == nullptr; with it, head h's row is normalized as if it held one
/// more logit sinks[h] (max over w and sinks[h], sum += expf(sinks[h] - max)), which takes no output.
Status SoftMax(ComputeContext& ctx, const TensorView& src, const TensorView& mask, TensorView& dst,
               float scale, float max_bias, const TensorView& sinks = TensorView());

/// FLASH_ATTN_EXT (ggml_flash_attn_ext, Feb 2025; ops_attn.cpp): for each query row (token i1, head
/// i2) an online softmax over the n_kv keys: s = dot(k row, q row in K's vec_dot type) * scale
/// (logit_softcap != 0: softcap * tanh(s * scale / softcap)), plus slope(h) * mask[ic, i1]; keys
/// whose mask is -inf are skipped; the V rows are summed with weights exp(s - max) in an F16
/// accumulator (rounded at every step, as ggml) when V is F16, else in F32; the sum is divided by
/// the sum of the weights. q F32 [D, n_tokens, n_head, ne3] (any row strides, contiguous rows),
/// k [D, n_kv, n_head_kv, ne3k] and v [D, n_kv, n_head_v, ne3v] of a MUL_MAT weight type with
/// contiguous rows (n_head % n_head_kv == 0: GQA broadcast), mask F16 [>= n_kv, >= n_tokens, 1, 1]
/// or data == nullptr for none, dst F32 contiguous [D, n_head, n_tokens, ne3] (the permuted
/// kqv_merged layout). slope(h) as SoftMax's ALiBi slope; max_bias > 0 needs a mask. A row with
/// every key masked gives NaN, as ggml. sinks (ggml_flash_attn_ext_add_sinks): F32 [n_head] or
/// data == nullptr; with it, after the last key of head h's row (the accumulator in F32): when
/// sinks[h] > M, ms = expf(M - sinks[h]), acc *= ms, S = fma(S, ms, 1), else S = S + expf(sinks[h] -
/// M), as ggml-cpu 2026. Errors: kInvalidArgument for types and shapes.
Status FlashAttnExt(ComputeContext& ctx, const TensorView& q, const TensorView& k, const TensorView& v,
                    const TensorView& mask, TensorView& dst, float scale, float max_bias, float logit_softcap,
                    const TensorView& sinks = TensorView());

/// CPY / CONT (ggml_cpy, ggml_cont): element l of src in ggml order (i0 fastest) is written to
/// element l of dst in ggml order; shapes may differ but element counts must be equal; any strides
/// on both sides (KV stores into strided cache views, transposed V stores, CONT of permuted
/// views). src F32, F16 or BF16; dst F32, F16, BF16 (any src) or Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (F32
/// src only, dst rows of whole blocks with nb0 = block bytes, quantized with QuantizeRow).
/// Conversions round to nearest even. Uses ctx.work (n_threads * ne0 floats).
Status Cpy(ComputeContext& ctx, const TensorView& src, TensorView& dst);
/// REPEAT (ggml_repeat_4d): dst[i0, i1, i2, i3] = src[i0 % src.ne0, i1 % src.ne1, i2 % src.ne2,
/// i3 % src.ne3]; F32, any strides on both sides. Errors: kInvalidArgument when a dst dimension is
/// not a multiple of src's (ggml_can_repeat) or a type is not F32.
Status Repeat(ComputeContext& ctx, const TensorView& src, TensorView& dst);

/// SET_ROWS (ggml_set_rows, llama.cpp's KV-cache store): dst[:, idx[i, i2 % ne11, i3 % ne12], i2, i3]
/// = src[:, i, i2, i3] converted to dst's type. dst [ne0, n_dst_rows, ne2, ne3] of a type
/// SupportsCpyTypes(F32, type) accepts (rows of whole blocks with nb0 = block bytes when quantized;
/// any nb0 otherwise), src F32 [ne0, n, ne2, ne3], idx I64 or I32 [n, ne11, ne12] with ne2 % ne11
/// == 0 and ne3 % ne12 == 0. Rows not named by idx are untouched; two equal indices write the same
/// row twice (undefined order, as in ggml). Errors: kOutOfRange naming the first index outside
/// [0, n_dst_rows); kInvalidArgument for shape/type mismatches.
Status SetRows(ComputeContext& ctx, const TensorView& src, const TensorView& idx, TensorView& dst);

// ---- Mixture of experts (ops_moe.cpp; DIV and SIGMOID in ops_elementwise.cpp) ---------------

/// MUL_MAT_ID (ggml_mul_mat_id, mixtral / qwen2moe expert FFNs): dst[:, s, t] = as[ids[s, t]] x
/// b[:, s % ne11, t], i.e. slot s of token t multiplies the column of b (broadcast over slots when
/// b.ne1 == 1) with the expert ids[s, t]'s matrix. as [K, N, n_expert] of a SupportsMulMatType type
/// (contiguous rows; plain layout, or a CPU_REPACK layout from a CPU_REPACK upload, whose expert
/// slices MulMat reads as repacked matrices), b F32 [K, ne11, n_tokens] with any strides and n_used % ne11 ==
/// 0, ids I32 [n_used, n_tokens], dst F32 [N, n_used, n_tokens] with nb0 = 4. Each expert's columns are
/// gathered and multiplied by MulMat (same vec_dot / GEMM kernels and src1 quantization as MUL_MAT; ggml-cpu
/// ops.cpp likewise groups rows per expert); the experts with fewer than kGemmMinCols columns (token
/// generation) in one pass with the same kernels and bits (kernels.h MulMatIdFewCols). With
/// ctx.llamacpp_numerics every column gets the bits llama.cpp's MUL_MAT_ID gives it: its vec_dot's (repacked:
/// its gemv's) for every type, IQ4_XS from 8 columns per expert in its "iqp" order — so each column equals
/// that column multiplied alone (except IQ4_XS), unlike MUL_MAT's tinyBLAS / repacked-Q4_K GEMM orders. Uses
/// temporary buffers beside ctx.work. Errors: kOutOfRange naming the first id outside [0, n_expert);
/// kInvalidArgument for shape/type mismatches; MulMat's errors for the expert weights.
Status MulMatId(ComputeContext& ctx, const TensorView& as, const TensorView& b, const TensorView& ids,
                TensorView& dst);

/// ARGSORT (ggml_argsort): per row of src F32 [ne0, ne1, ne2, ne3] (any strides), dst I32 of the
/// same shape gets the indices 0..ne0-1 ordered by value, ascending (order 0, GGML_SORT_ORDER_ASC)
/// or descending (order 1, GGML_SORT_ORDER_DESC). Ties keep index order (stable); with
/// ctx.llamacpp_numerics they are ordered as ggml-cpu's argsort orders them (std::sort, libstdc++'s
/// introsort: index order up to 16 elements, reordered by its partitions above), so that a top-k over
/// more than 16 tied experts picks llama.cpp's. TOP_K as the graph builds it (ggml_top_k of Feb 2025,
/// ggml_argsort_top_k of 2026) is a view of the first k columns of the descending argsort.
/// Errors: kInvalidArgument for types, shapes or another order.
Status ArgSort(ComputeContext& ctx, const TensorView& src, TensorView& dst, int order);

/// SUM_ROWS (ggml_sum_rows): dst[0, i1, i2, i3] = sum over i0 of src[i0, i1, i2, i3], accumulated
/// in double (ggml_vec_sum_f32's ggml_float). src F32 any strides, dst F32 [1, ne1, ne2, ne3].
Status SumRows(ComputeContext& ctx, const TensorView& src, TensorView& dst);

/// DIV with ggml broadcasting (as ADD / MUL): dst[i] = src0[i] / src1[i mod src1.ne]. Used by
/// mixtral's expert-weight normalization and qwen2moe's shared-expert gate (silu(x) / x).
Status Div(ComputeContext& ctx, const TensorView& src0, const TensorView& src1, TensorView& dst);

/// SIGMOID (ggml_sigmoid): dst = 1 / (1 + exp(-x)). F32 src and dst of equal shape.
Status Sigmoid(ComputeContext& ctx, const TensorView& src, TensorView& dst);

/// ADD_ID (ggml_add_id, gpt-oss's expert biases; ops_gpt_oss.cpp): dst[:, i1, i2, i3] = a[:, i1, i2, i3] +
/// b[:, ids[i1, i2]]. a and dst F32 [ne0, n_used, n_tokens, ne3] of equal shape, b F32 [ne0, n_expert]
/// (one bias row per expert), ids I32 [n_used, n_tokens]; contiguous rows. Errors: kOutOfRange naming the
/// first id outside [0, n_expert); kInvalidArgument for types and shapes.
Status AddId(ComputeContext& ctx, const TensorView& a, const TensorView& b, const TensorView& ids,
             TensorView& dst);

/// SWIGLU_OAI (ggml_swiglu_oai, gpt-oss's expert activation; ops_gpt_oss.cpp): with x = min(a, limit) and
/// y = clamp(b, -limit, limit), dst = x / (1 + expf(alpha * -x)) * (y + 1), per element as ggml-cpu. a, b,
/// dst F32 of equal shape with contiguous rows (the split form; dst may alias a or b).
Status SwiGluOai(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst, float alpha,
                 float limit);

// ---- Mamba (ops_ssm.cpp) ---------------------------------------------------------------------

/// CONCAT (ggml_concat): dst = a followed by b along `dim` (0..3); a, b, dst F32 with any strides
/// (4-byte multiples), equal in every other dim; dst.ne[dim] = a.ne[dim] + b.ne[dim]. Mamba joins the
/// conv state [d_conv - 1, d_inner, n_s] with the transposed new columns along dim 0.
Status Concat(ComputeContext& ctx, const TensorView& a, const TensorView& b, TensorView& dst, int dim);

/// SSM_CONV (ggml_ssm_conv, Feb 2025): the depthwise causal convolution of Mamba.
/// dst[r, t, s] = sum_{k < d_conv} sx[t + k, r, s] * c[k, r] (float sum in k order). sx F32
/// [d_conv - 1 + n_t, d_inner, n_s] (conv state then new columns), c F32 [d_conv, d_inner],
/// dst F32 [d_inner, n_t, n_s]; any strides (4-byte multiples).
Status SsmConv(ComputeContext& ctx, const TensorView& sx, const TensorView& c, TensorView& dst);

/// SSM_SCAN (ggml_ssm_scan, Feb 2025: s, x, dt, A, B, C): Mamba's selective scan. Per sequence q,
/// token t, channel r: dt+ = softplus(dt[r, t, q]) (dt itself above 20), h[:, r] = h[:, r] *
/// exp(dt+ * A[:, r]) + B[:, t, q] * x[r, t, q] * dt+, y[r, t, q] = sum_i h[i, r] * C[i, t, q], with h
/// starting at s[:, :, q]. s F32 [d_state, d_inner, n_s], x and dt F32 [d_inner, n_t, n_s], A F32
/// [d_state, d_inner] (stored as -exp(A_log)), B and C F32 [d_state, n_t, n_s], any strides. dst F32,
/// contiguous, nelements(x) + nelements(s) floats (ggml's 1-D result): y [d_inner, n_t, n_s], then the
/// final states [d_state, d_inner, n_s]. Errors: kInvalidArgument for types and shapes.
Status SsmScan(ComputeContext& ctx, const TensorView& s, const TensorView& x, const TensorView& dt,
               const TensorView& A, const TensorView& B, const TensorView& C, TensorView& dst);

// ---- Quant helpers (also used by tests and other backends) ----------------------------------

/// Dequantizes/converts `n` elements of one row of `type` into F32 (ggml's dequantize_row_* /
/// to_float). Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K,
/// Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4. Errors: kInvalidArgument when n % block_size != 0, kUnimplemented for
/// other types. `dst` holds n floats.
Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
/// Quantizes/converts `n` F32 values into `type` (reference quantizers, as ggml's
/// quantize_row_*_ref; llama-quantize uses the same ones without an imatrix, so the bytes match).
/// Supported targets: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K, IQ4_NL, MXFP4. `dst` holds
/// RowSize(type, n) bytes. Errors: kInvalidArgument when n % block_size != 0, kUnimplemented for
/// other targets (the K-quant and IQ quantizers, which need importance search, are not here).
Status QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

/// IEEE binary16 <-> binary32 (round-to-nearest-even; NaN stays NaN, overflow gives infinity).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);

/// The vec_dot type MUL_MAT converts src1 to for weights of `type` (ggml's type_traits_cpu
/// vec_dot_type). Errors: kUnimplemented for weight types this backend cannot multiply.
Result<GgmlType> VecDotType(GgmlType type);

/// True when MulMat accepts src0 of `type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
/// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4), for the backend's supports_op.
bool SupportsMulMatType(GgmlType type);

/// True when GetRows accepts src0 of `type` (the weight types of SupportsMulMatType).
bool SupportsGetRowsType(GgmlType type);

/// True when Cpy converts `src` to `dst`: src F32/F16/BF16 -> dst F32/F16/BF16, and F32 ->
/// Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 (quantized KV caches). For the backend's supports_op.
bool SupportsCpyTypes(GgmlType src, GgmlType dst);

// ---- CPU_REPACK ---------------------------------------------------------------------------------

/// True when `src` (a Q4_0 weight, plain layout, contiguous) can be repacked: ne1 % 8 == 0 and
/// ne0 % 32 == 0 (llama.cpp's CPU_REPACK rule for Q4_0 8x8 on AVX2, ggml-cpu/repack.cpp).
bool CanRepackQ4_0(const TensorView& src);

/// Repacks a Q4_0 weight [K, N, ne2, ne3] into the Q4_0x8 layout at `dst` (RowSize(Q4_0, K) * N *
/// ne2 * ne3 bytes, must not alias src). Each group of 8 consecutive rows g (rows 8g .. 8g+7 of one
/// (i2, i3) matrix) becomes K/32 consecutive 144-byte blocks, one per block column b:
///   { uint16 d[8] (fp16 scale of row 8g+r, block b); uint8 qs[8][16] (row 8g+r's qs of block b) }
/// so the 8 rows' blocks of one column sit side by side (a 32-byte load holds two rows' quants).
/// Group g of matrix (i2, i3) starts at i3*nb[3] + i2*nb[2] + 8g*nb[1]: the repacked tensor has the
/// plain tensor's size and strides. The result views as a TensorView with the same type/ne/nb and
/// layout = kLayoutQ4_0x8. Errors: kInvalidArgument when !CanRepackQ4_0(src) (names the reason).
Status RepackQ4_0(const TensorView& src, void* dst);

/// True when `src` (a Q4_K weight, plain layout, contiguous) can be repacked: ne1 % 8 == 0 (and
/// ne0 % 256 == 0, which every Q4_K tensor has). llama.cpp's CPU_REPACK rule for Q4_K 8x8 on AVX2
/// (ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type, Aug 2026: ne[1] % 8 == 0).
bool CanRepackQ4_K(const TensorView& src);

/// Repacks a Q4_K weight [K, N, ne2, ne3] into the Q4_Kx8 layout at `dst` (RowSize(Q4_K, K) * N *
/// ne2 * ne3 bytes, must not alias src). Each group of 8 consecutive rows g (rows 8g .. 8g+7 of one
/// (i2, i3) matrix) becomes K/256 consecutive 1152-byte columns (= 8 x 144, the 8 rows' super-blocks
/// b), and column b holds, with r the row in the group, j the 32-element sub-block (0..7), sc/mn the
/// 6-bit scale/min of ggml's get_scale_min_k4:
///   [0, 16)     uint16 d[8]     fp16 d of row r
///   [16, 32)    uint16 dmin[8]  fp16 dmin of row r
///   [32, 96)    uint8 lo[64]    lo[k] = (S[k] & 15) | (M[k] & 15) << 4
///   [96, 128)   uint8 hi[32]    hi[k] = S[k] >> 4 | (S[k+32] >> 4) << 2 | (M[k] >> 4) << 4 | (M[k+32] >> 4)
///   << 6
///               with S[8j + r] = sc of (row r, sub-block j) and M[8r + j] = mn of (row r, sub-block j)
///               (the scales ordered sub-block-major, the mins row-major: the order each is used in)
///   [128, 1152) 16 chunks t of 64 bytes: bytes 8r .. 8r+7 of chunk t = row r's qs[8t .. 8t+7]
///               (low nibbles: elements 64(t/4) + 8(t%4) + 0..7, high nibbles: the same + 32)
/// so the 6-bit scales and mins of the 8 rows decode with a few vector operations and each 64-byte
/// load of quants feeds 8 rows. Group g of matrix (i2, i3) starts at i3*nb[3] + i2*nb[2] + 8g*nb[1]
/// (the plain tensor's size and strides); the result views as a TensorView with the same type/ne/nb
/// and layout = kLayoutQ4_Kx8. Errors: kInvalidArgument when !CanRepackQ4_K(src) (names the reason).
Status RepackQ4_K(const TensorView& src, void* dst);

/// True when `src` (a Q8_0 weight, plain layout, contiguous) can be repacked: ne1 % 8 == 0 and
/// ne0 % 32 == 0 (the Q4_0 rule; llama.cpp (ggml-cpu/repack.cpp, Aug 2026) repacks Q8_0 only on ARM
/// and RISC-V, this backend on every level: its Q8_0x8 gemv gives the plain vec_dot's bits).
bool CanRepackQ8_0(const TensorView& src);

/// Repacks a Q8_0 weight [K, N, ne2, ne3] into the Q8_0x8 layout at `dst` (RowSize(Q8_0, K) * N *
/// ne2 * ne3 bytes, must not alias src). Each group of 8 consecutive rows g (rows 8g .. 8g+7 of one
/// (i2, i3) matrix) becomes K/32 consecutive 272-byte blocks, one per block column b:
///   [0, 16)    uint16 d[8]      fp16 scale of row 8g+r, block b
///   [16, 272)  4 chunks t of 64 bytes: bytes 32h .. 32h+31 of chunk t = row 8g+2t+h's qs of block b,
///              each stored as the unsigned byte q + 128 (q ^ 0x80)
/// so one 64-byte load holds two rows' blocks, lined up with the activation block repeated twice,
/// and the unsigned bytes feed vpdpbusd directly (the +128 is taken out with -128 * sum(y)).
/// Group g of matrix (i2, i3) starts at i3*nb[3] + i2*nb[2] + 8g*nb[1]. The result views as a
/// TensorView with the same type/ne/nb and layout = kLayoutQ8_0x8. Errors: kInvalidArgument when
/// !CanRepackQ8_0(src) (names the reason).
Status RepackQ8_0(const TensorView& src, void* dst);

/// True when `src` (an MXFP4 weight, plain layout, contiguous) can be repacked: ne1 % 8 == 0 (and
/// ne0 % 32 == 0, which every MXFP4 tensor has). llama.cpp's CPU_REPACK rule for MXFP4 8x8 on AVX2
/// (ggml-cpu/repack.cpp 2026-09-28, ggml_repack_get_optimal_repack_type: ne[1] % 8 == 0).
bool CanRepackMXFP4(const TensorView& src);

/// Repacks an MXFP4 weight [K, N, ne2, ne3] into the MXFP4x8 layout at `dst` (RowSize(MXFP4, K) * N
/// * ne2 * ne3 bytes, must not alias src). Each group of 8 consecutive rows g (rows 8g .. 8g+7 of one
/// (i2, i3) matrix) becomes K/32 consecutive 136-byte blocks, one per block column b:
///   { uint8 e[8] (E8M0 scale of row 8g+r, block b); uint8 qs[8][16] (row 8g+r's qs of block b) }
/// (the Q4_0x8 layout with the scale bytes in place of the fp16 scales: a 32-byte load holds two
/// rows' codes). Group g of matrix (i2, i3) starts at i3*nb[3] + i2*nb[2] + 8g*nb[1]. The result
/// views as a TensorView with the same type/ne/nb and layout = kLayoutMXFP4x8; its gemv sums as
/// scalar::VecDotMXFP4Q8_0 (one float per row, llama.cpp's repacked mxfp4_8x8 order). Errors:
/// kInvalidArgument when !CanRepackMXFP4(src) (names the reason).
Status RepackMXFP4(const TensorView& src, void* dst);

/// The layout a weight uploaded into a CPU_REPACK buffer gets (ggml-cpu repack's set_tensor picks
/// the repacked layout per type): kLayoutQ4_0x8 for a tensor CanRepackQ4_0 accepts, kLayoutQ4_Kx8
/// for one CanRepackQ4_K accepts, kLayoutQ8_0x8 for one CanRepackQ8_0 accepts, kLayoutMXFP4x8 for
/// one CanRepackMXFP4 accepts; kLayoutPlain
/// (uploaded as is) for every other tensor. `src`
/// describes the plain tensor (layout kLayoutPlain). The probed CPU device's CPU_REPACK rule
/// (devices/op_support.cpp, MakeCpuDevice) states the same conditions.
int RepackLayoutFor(const TensorView& src);

/// Writes the plain tensor `src` in layout `layout` (a value RepackLayoutFor(src) returned) to `dst`
/// (exactly the plain tensor's bytes, RowSize(type, ne0) * nrows; must not alias src); kLayoutPlain
/// copies. When src lies in a read-only file mapping (the GGUF mapping the session uploads from),
/// the pages wholly inside it are then dropped from this process (madvise MADV_DONTNEED; the bytes
/// stay readable from the file), so a repacked weight does not also keep its source resident; other
/// memory is left alone. Errors: kInvalidArgument when `src` cannot take `layout` (names the tensor
/// shape).
Status RepackWeight(const TensorView& src, int layout, void* dst);

}  // namespace stowage::cpu
