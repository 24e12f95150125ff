// The graphs of a plan as the executor runs them (decoded from Graph.tensors / nodes / splits), and
// the checks on them that need no model file: decoding (sources, views, inputs, worst cases),
// defined-before-use, binding every tensor at the graph's worst case (shapes, view strides and
// offsets, extents inside the planned buffer sizes, alignment) and the result shapes of the simple
// ops. Internal to the runtime: the plan loader (PlanFile::Verify) runs them on the planned buffer
// sizes before anything is allocated; Session binds with the same code on every ubatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/status.h"
#include "tensor_view.h"

namespace stowage::plan_graph {

using exec::TensorView;

/// A symbolic dimension as decoded from the plan: a DimExpr with the terms of the SWA cache's
/// symbols (GraphTensor.ne_swa / view_offset_swa / view_nb_swa, zero when absent) beside it.
struct Dim {
  int64_t c = 0, tokens = 0, kv = 0, kv_head = 0, outputs = 0, kv_swa = 0, kv_head_swa = 0;
  /// The dimension `e` with SWA terms `swa` (nullptr: none).
  static Dim From(const plan::DimExpr& e, const plan::DimExprSwa* swa);
};

/// Values of a graph's symbolic dimensions for one call. n_kv_swa and kv_head_swa are the SWA
/// cache's (interleaved sliding-window models; 0 without one).
struct Bindings {
  int64_t n_tokens = 0, n_kv = 0, kv_head = 0, n_outputs = 0, n_kv_swa = 0, kv_head_swa = 0;
  /// c + tokens*n_tokens + kv*n_kv + kv_head*kv_head + outputs*n_outputs + kv_swa*n_kv_swa +
  /// kv_head_swa*kv_head_swa; false on int64 overflow (coefficients come from the plan file, which
  /// may be hostile).
  bool Eval(const Dim& e, int64_t* out) const;
};

/// The values of a KV index input of `n` I64 elements (llama.cpp 2026 llama_kv_cache::set_input_k_idxs
/// / set_input_v_idxs) for a ubatch of `n_tokens` tokens stored at cells first_cell ..
/// first_cell + n_tokens - 1 of a cache of `kv_size` cells: with n == n_tokens cell first_cell + i
/// for token i (K rows, and V rows with flash attention); else (the transposed V cache, n a multiple
/// n_tokens * n_embd_v of n_tokens) j * kv_size + first_cell + i at i * n_embd_v + j. Empty when n
/// is not a positive multiple of n_tokens.
std::vector<int64_t> KvStoreIndices(int64_t n, int64_t n_tokens, int64_t first_cell, int64_t kv_size);

/// A graph tensor, decoded from the plan once.
struct Tensor {
  std::string name;
  GgmlOp op = GgmlOp::NONE;
  GgmlType type = GgmlType::F32;
  plan::TensorKind kind = plan::TensorKind::Intermediate;
  std::vector<Dim> ne;
  std::vector<int> srcs;
  std::vector<int32_t> iparams;
  std::vector<float> fparams;
  Dim view_offset{};
  std::vector<Dim> view_nb;
  int global = -1;
  int buffer = -1;
  uint64_t offset = 0;
  int backend = -1;
  bool is_view = false;  ///< data aliases srcs[0] (RESHAPE/VIEW/PERMUTE/TRANSPOSE) or srcs[1] (CPY)
};

struct Split {
  int backend;
  uint32_t begin, end;
  std::vector<std::pair<int, int>> inputs;  ///< (source, copy) graph tensor indices
};

struct Graph {
  std::string name;
  int64_t max_tokens = 0, max_kv = 0, max_outputs = 0;
  int64_t max_kv_swa = 0;  ///< worst-case n_kv_swa (the SWA cache's cells); 0 without one
  std::vector<Tensor> tensors;
  std::vector<int> nodes;
  std::vector<Split> splits;
  int inp_tokens = -1, inp_pos = -1, kq_mask = -1, inp_out_ids = -1, result = -1;
  /// llama.cpp's inp_KQ_mask_swa: phi3 (over the one cache, [n_kv, n_tokens]) and interleaved
  /// sliding-window models (over the SWA cache, [n_kv_swa, n_tokens])
  int kq_mask_swa = -1;
  /// Recurrent models (mamba, llm_build_copy_mask_state): which cell each used cell's state comes
  /// from, and 0/1 to clear the states of new sequences. Their "KV" cells are sequences.
  int inp_s_copy = -1, inp_s_mask = -1;
  /// Attention temperature tuning (llama.cpp 2026 build_inp_attn_scale; mistral3): F32 [1, 1,
  /// n_tokens], one factor per token (gguf_attn_temperature.h).
  int inp_attn_scale = -1;
  /// llama.cpp 2026's KV store (llama_kv_cache::cpy_k / cpy_v, SET_ROWS): I64 cell indices of the
  /// ubatch's K rows ([n_tokens]) and V rows ([n_tokens] with flash attention, else [n_tokens *
  /// n_embd_v_gqa], one per element of the transposed cache); the _swa ones index the SWA cache.
  /// KvStoreIndices fills them.
  int inp_k_idxs = -1, inp_v_idxs = -1, inp_k_idxs_swa = -1, inp_v_idxs_swa = -1;
  bool recurrent() const { return inp_s_copy >= 0 || inp_s_mask >= 0; }
  /// The symbol values of the worst case the plan sized the graph for (kv_head and kv_head_swa 0).
  Bindings worst_case() const { return Bindings{max_tokens, max_kv, 0, max_outputs, max_kv_swa, 0}; }
};

/// The symbol values at which the verifier binds graph `g` (index `graph_index`: 0 = pp, 1 = tg)
/// of a context of `n_ctx` cells and `n_ubatch` tokens: the vertices of the range a session can
/// bind (RunUbatchOn), n_tokens n in [1, N] (N = 1 for tg, else min(max_tokens, n_ubatch, n_ctx)),
/// kv_head p in [0, n_ctx - n], n_kv in [p + n, n_ctx] (the cells in use, padded), n_outputs in
/// [1, n]; a recurrent graph binds kv_head 0 and n_kv 1. With a SWA cache of `n_ctx_swa` cells
/// (0: none), kv_head_swa and n_kv_swa take the corresponding corners of [0, n_ctx_swa - n] and
/// [n, n_ctx_swa] together with kv_head and n_kv (a tensor reads one cache: its terms are in one
/// pair of symbols). Every dimension, view offset and stride is
/// affine in the symbols, so its extremes over that range are attained at these vertices: a value
/// that is negative, or a tensor outside its buffer or its viewed tensor, anywhere in the range is
/// so at one of them (extents of strided views are products of affine terms in different symbols in
/// every plan the planner writes, which are extreme at the vertices too). The graph's worst case
/// (worst_case()) is the last entry.
std::vector<Bindings> Corners(const Graph& g, size_t graph_index, int64_t n_ctx, int64_t n_ubatch,
                              int64_t n_ctx_swa = 0);

/// The context and graphs of a plan, decoded.
struct Graphs {
  int64_t n_ctx = 0, n_ubatch = 0, n_vocab = 0;
  int64_t n_ctx_swa = 0;      ///< ContextParams.n_ctx_swa: the SWA cache's cells (0: none)
  std::vector<Graph> graphs;  ///< [0] = pp, [1] = tg
};

/// Decodes the context and every graph of `r`, a plan whose cross references PlanFile::Verify has
/// checked (indices in range, 4 dims each), and refuses what the executor cannot run: a view or
/// CPY without its source, more sources than a node call takes, a VIEW without 3 strides, a weight
/// or KV cache tensor without its global tensor, a computed tensor without a buffer, an unknown or
/// mistyped graph input, a graph without inp_tokens or result_output, worst cases below the context
/// (n_ctx, n_ubatch), fewer than two graphs, sources read before they are defined. `path` starts
/// every message. Errors: kDataLoss.
Result<Graphs> Decode(const plan::Plan& r, const std::string& path);

/// A bound tensor: its view and where its bytes are.
struct Bound {
  TensorView v;
  int buffer = -1;      ///< buffer holding the bytes (for extent checks and copies)
  uint64_t offset = 0;  ///< byte offset of v.data inside that buffer
  /// The bytes [own_begin, own_end) of the buffer that the tensor owning the memory spans (a
  /// weight / KV cache tensor, a computed tensor; a view's are its source's): ggml_view_impl
  /// asserts a view stays inside them.
  uint64_t own_begin = 0, own_end = 0;
  bool done = false;
};

/// What tensors bind against: the plan's buffer sizes, its weight / KV cache tensors, and (in a
/// session) the buffers' base addresses.
struct Memory {
  std::vector<uint64_t> buffer_size;  ///< Plan.buffers[i].size (bytes)
  std::vector<char> buffer_mapped;    ///< Plan.buffers[i].mapped: the model file's read-only mapping
  std::vector<uint8_t*> buffer_base;  ///< empty when verifying: no data pointer is formed
  std::vector<TensorView> globals;    ///< Plan.tensors, contiguous (data and layout set by a session)
  std::vector<int> global_buffer;
  std::vector<uint64_t> global_offset;
};

/// The Memory of `r` as planned: buffer sizes, globals in ggml's plain contiguous layout with no
/// data, their buffers and offsets.
Memory PlannedMemory(const plan::Plan& r);

/// Binds every tensor of `g` for the symbol values `s` into `bound` (resized to the tensor count):
/// dimensions that evaluate to a non-negative int64 with at most 2^56 elements and whole blocks,
/// views (offset, strides, PERMUTE axes) and chains at most 64 deep, the bytes spanned inside the
/// planned size of the tensor's buffer, offset and strides multiples of the element alignment.
/// Errors: kDataLoss naming `path`, the graph and the tensor.
Status BindAll(const Graph& g, const Bindings& s, const Memory& mem, const std::string& path,
               std::vector<Bound>* bound);

/// The result shape of every node, at the shapes in `bound`: ggml's rule of its op (CheckShape,
/// ggml_op_shapes.h). Nodes whose sources or parameters CheckNodes refuses are left to it. The
/// kernels check the same when they run; this fails at load, before any text is streamed. Errors:
/// kDataLoss "<path>: graph <g> node '<name>': <the rule's message>".
Status CheckNodeShapes(const Graph& g, const std::vector<Bound>& bound, const std::string& path);

/// The checks of each node that need only the plan (ggml's asserts and the kernels' preconditions,
/// made before anything runs): the sources its op reads are present (ROPE 2, MUL_MAT 2, RMS_NORM 1,
/// ...), its float parameters are finite, RMS_NORM/NORM carry eps >= 0, SOFT_MAX its scale, ROPE
/// n_dims and mode (cpu::CheckRopeParams) and a freq_base > 0; no node writes into a mapped (read-
/// only) buffer of the model file; a split on the oneDNN backend (device type ACCEL named ONEDNN*)
/// runs MUL_MAT only. `bound` is a binding of `g` (BindAll). Errors: kDataLoss naming `path`, the
/// graph and the node.
Status CheckNodes(const plan::Plan& r, const Graph& g, const std::vector<Bound>& bound, const Memory& mem,
                  const std::string& path);

/// result_output holds n_vocab logits for each of the `n_outputs` outputs (the session reads
/// exactly them). Errors: kDataLoss.
Status CheckResultShape(const Graph& g, const std::vector<Bound>& bound, int64_t n_vocab, int64_t n_outputs,
                        const std::string& path);

/// Bytes spanned by a (possibly strided) view: last element's offset + its size. UINT64_MAX when
/// the arithmetic overflows (a hostile plan), which no buffer can hold.
uint64_t Extent(const TensorView& t);

}  // namespace stowage::plan_graph
