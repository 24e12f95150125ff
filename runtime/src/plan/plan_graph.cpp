// Decoding, binding and load-time checks of a plan's graphs (see plan_graph.h).
#include "plan_graph.h"

#include <algorithm>
#include <cmath>

#include "backend.h"
#include "ops.h"  // cpu::CheckRopeParams: the CPU kernels' ROPE modes
#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_op_shapes.h"

namespace stowage::plan_graph {

namespace fb = ::stowage::plan;

Dim Dim::From(const fb::DimExpr& e, const fb::DimExprSwa* swa) {
  Dim d{e.c(), e.tokens(), e.kv(), e.kv_head(), e.outputs(), 0, 0};
  if (swa != nullptr) {
    d.kv_swa = swa->kv_swa();
    d.kv_head_swa = swa->kv_head_swa();
  }
  return d;
}

bool Bindings::Eval(const Dim& e, int64_t* out) const {
  int64_t acc = e.c, term;
  const int64_t coef[6] = {e.tokens, e.kv, e.kv_head, e.outputs, e.kv_swa, e.kv_head_swa};
  const int64_t val[6] = {n_tokens, n_kv, kv_head, n_outputs, n_kv_swa, kv_head_swa};
  for (int i = 0; i < 6; ++i)
    if (__builtin_mul_overflow(coef[i], val[i], &term) || __builtin_add_overflow(acc, term, &acc))
      return false;
  *out = acc;
  return true;
}

uint64_t Extent(const TensorView& t) {
  if (t.nelements() == 0) return 0;  // an empty view spans no bytes (mamba's state copy with one cell)
  const auto& tr = GetTypeTraits(t.type);
  uint64_t e = RowSize(t.type, t.ne[0]);
  if (e == 0) e = tr.type_size;
  // Dim 0 strided (a TRANSPOSE or PERMUTE of a matrix: nb0 is a row, not an element): the span of
  // dim 0 is (ne0-1)*nb0 + type_size, as ggml_nbytes counts it for a block size of 1. (Counting
  // ne0 contiguous elements instead under-sized the staging of a strided split input copy from
  // private memory, and cpu::Cpy read past it: NaN logits with -nkvo.)
  if (tr.block_size == 1 && t.nb[0] != tr.type_size &&
      (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] - 1), static_cast<uint64_t>(t.nb[0]), &e) ||
       __builtin_add_overflow(e, static_cast<uint64_t>(tr.type_size), &e)))
    return UINT64_MAX;
  for (int i = 1; i < 4; ++i) {
    uint64_t term;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[i] - 1), static_cast<uint64_t>(t.nb[i]), &term) ||
        __builtin_add_overflow(e, term, &e))
      return UINT64_MAX;
  }
  return e;
}

namespace {

// A float parameter of a plan node is finite (NaN or an infinity means a corrupt plan), except the
// infinities that llama.cpp's graphs pass on purpose: ggml_fill(-INFINITY) (build_moe_ffn's masked
// expert groups) and ggml_clamp(..., INFINITY) (its weight sum's lower bound only). NaN never.
bool ParamValueOk(GgmlOp op, float v) {
  if (std::isfinite(v)) return true;
  return !std::isnan(v) && (op == GgmlOp::FILL || op == GgmlOp::CLAMP);
}

/// Element count of bound dims, or -1 when it exceeds 2^56 (no real tensor is that large).
int64_t CheckedElements(const int64_t ne[4]) {
  int64_t n = 1;
  for (int i = 0; i < 4; ++i)
    if (__builtin_mul_overflow(n, ne[i], &n) || n > (int64_t(1) << 56)) return -1;
  return n;
}

/// The tensor that owns the memory of graph tensor `id`: `id` itself unless it is a view op
/// (RESHAPE/VIEW/PERMUTE/TRANSPOSE), else the end of its source chain (ggml's view_src). A CPY is
/// not followed: its result exists once the CPY node ran. -1 when the chain is deeper than 64
/// (BindTensor's limit; a cycle in a hostile plan) or a view has no source.
int ViewOwner(const Graph& g, int id) {
  for (int depth = 0; depth <= 64; ++depth) {
    const Tensor& t = g.tensors[id];
    if (!IsViewOp(t.op)) return id;
    if (t.srcs.empty() || t.srcs[0] < 0 || static_cast<size_t>(t.srcs[0]) >= g.tensors.size()) return -1;
    id = t.srcs[0];
  }
  return -1;
}

// Every source a node reads must exist when it runs: a weight, KV cache or graph input, a split
// input copy made at its split's start, or the result of an earlier node; and the graph must
// compute result_output. (Refuses plans whose splits skip or reorder nodes.)
Status CheckDefinedBeforeUse(const Graph& g, const std::string& path) {
  std::vector<char> defined(g.tensors.size(), 0);
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const auto k = g.tensors[i].kind;
    defined[i] = k == fb::TensorKind::Weight || k == fb::TensorKind::KvCache || k == fb::TensorKind::Input;
  }
  // A split input that views a KV cache tensor (mamba's reshaped recurrent-state caches, read by
  // another device's GET_ROWS) is copied at its split's start: only right when no node of that split
  // stores into the cache before the copy is read.
  // The weight / KV cache / input a view chain (or a CPY's destination) ends at; -1 if none.
  auto root = [&g](int t) {
    for (int depth = 0; t >= 0 && depth < 64; ++depth) {
      const Tensor& x = g.tensors[t];
      if (x.kind == fb::TensorKind::Weight || x.kind == fb::TensorKind::KvCache ||
          x.kind == fb::TensorKind::Input)
        return t;
      if (!x.is_view) return -1;
      t = x.srcs[AliasedSource(x.op, x.srcs.size())];  // DecodeGraph checked it exists
    }
    return -1;
  };
  for (const Split& sp : g.splits) {
    for (const auto& [src, copy] : sp.inputs) {
      const int r = root(src);
      if (r < 0 || g.tensors[r].kind != fb::TensorKind::KvCache) continue;
      for (uint32_t k = sp.begin; k < sp.end; ++k) {
        const Tensor& n = g.tensors[g.nodes[k]];
        if (std::find(n.srcs.begin(), n.srcs.end(), copy) != n.srcs.end()) break;  // read before any write
        // A node that stores into a destination source (a CPY into the cache).
        const int into = AliasedSource(n.op, n.srcs.size());
        if (into >= 0 && !IsViewOp(n.op) && root(n.srcs[into]) == r)
          return DataLoss(path + ": graph " + g.name + ": split input '" + g.tensors[src].name +
                          "' is copied before node '" + n.name + "' of the same split stores into '" +
                          g.tensors[r].name + "'");
      }
    }
  }
  for (const Split& sp : g.splits) {
    for (const auto& [src, copy] : sp.inputs) {
      // A split input that is a view (with -nkvo the CPU split copies "Vcur-0 (transposed)" and
      // "q-0", views of GPU results that ggml places at their consumer, after the split's start)
      // is copied as the view, reading its owner's bytes through it (ggml_backend_sched_compute_
      // splits; views are bound before the first split, as ggml_backend_view_init binds them at
      // allocation): defined once its owner is, i.e. computed by an earlier split or stored.
      const int owner = ViewOwner(g, src);
      if (!defined[src] && (owner < 0 || !defined[owner]))
        return DataLoss(path + ": graph " + g.name + ": split input '" + g.tensors[src].name +
                        "' is copied before it is computed");
      defined[copy] = 1;
    }
    for (uint32_t k = sp.begin; k < sp.end; ++k) {
      const int id = g.nodes[k];
      for (int s : g.tensors[id].srcs)
        if (s >= 0 && !defined[s])
          return DataLoss(path + ": graph " + g.name + ": node '" + g.tensors[id].name + "' reads '" +
                          g.tensors[s].name + "' before any node computes it");
      defined[id] = 1;
    }
  }
  if (!defined[g.result]) return DataLoss(path + ": graph " + g.name + ": no node computes result_output");
  return Status::Ok();
}

Result<Graph> DecodeGraph(const fb::Graph& g, int64_t n_ctx, const std::string& path) {
  Graph gg;
  gg.name = g.name() ? g.name()->str() : "";
  gg.max_tokens = g.max_tokens();
  gg.max_kv = g.max_kv();
  gg.max_kv_swa = g.max_kv_swa();
  gg.max_outputs = g.max_outputs();
  for (size_t i = 0; i < g.tensors()->size(); ++i) {
    const auto* t = g.tensors()->Get(i);
    Tensor x;
    x.name = t->name() ? t->name()->str() : "";
    x.op = static_cast<GgmlOp>(t->op());
    x.type = static_cast<GgmlType>(t->type());
    x.kind = t->kind();
    // ne_swa / view_nb_swa have as many entries as ne / view_nb when present (VerifyGraphTensors).
    const auto* ne_swa = t->ne_swa();
    for (flatbuffers::uoffset_t d = 0; d < 4; ++d)
      x.ne.push_back(Dim::From(*t->ne()->Get(d), ne_swa ? ne_swa->Get(d) : nullptr));
    if (t->srcs()) x.srcs.assign(t->srcs()->begin(), t->srcs()->end());
    if (t->iparams()) x.iparams.assign(t->iparams()->begin(), t->iparams()->end());
    if (t->fparams()) x.fparams.assign(t->fparams()->begin(), t->fparams()->end());
    if (t->view_offset()) x.view_offset = Dim::From(*t->view_offset(), t->view_offset_swa());
    const auto* nb_swa = t->view_nb_swa();
    if (t->view_nb())
      for (flatbuffers::uoffset_t d = 0; d < t->view_nb()->size(); ++d)
        x.view_nb.push_back(Dim::From(*t->view_nb()->Get(d), nb_swa ? nb_swa->Get(d) : nullptr));
    x.global = t->global();
    x.buffer = t->buffer();
    x.offset = t->offset();
    x.backend = t->backend();
    // Views, and a CPY with a destination (src 1), which writes into it: the memory is a source's.
    // A CPY with a single source is ggml_cast, a new tensor of its own (the F16 KQ_mask copy of
    // flash attention).
    const int aliased = AliasedSource(x.op, x.srcs.size());
    x.is_view = aliased >= 0;
    if (x.is_view && (static_cast<size_t>(aliased) >= x.srcs.size() || x.srcs[aliased] < 0))
      return DataLoss(path + ": graph " + gg.name + " tensor '" + x.name + "': view without a source");
    if (x.srcs.size() > size_t(exec::NodeCall::kMaxSrc))
      return DataLoss(path + ": graph " + gg.name + " tensor '" + x.name + "': more than " +
                      std::to_string(exec::NodeCall::kMaxSrc) + " sources");
    if (x.op == GgmlOp::VIEW && x.view_nb.size() != 3)
      return DataLoss(path + ": graph " + gg.name + " tensor '" + x.name + "': VIEW needs 3 strides");
    if (x.kind == fb::TensorKind::Weight || x.kind == fb::TensorKind::KvCache) {
      if (x.global < 0)
        return DataLoss(path + ": graph " + gg.name + " tensor '" + x.name + "': no global tensor");
    } else if (!x.is_view && x.buffer < 0) {
      return DataLoss(path + ": graph " + gg.name + " tensor '" + x.name + "': no buffer");
    }
    if (x.kind == fb::TensorKind::Input) {
      // The runtime fills these graph inputs (llama.cpp's set_inputs); any other is an error.
      const bool mask = x.name == "KQ_mask" || x.name == "KQ_mask_swa";
      const bool idxs = x.name == "attn_inp_k_idxs" || x.name == "attn_inp_v_idxs" ||
                        x.name == "attn_inp_k_idxs_swa" || x.name == "attn_inp_v_idxs_swa";
      const GgmlType want = mask || x.name == "inp_s_mask" || x.name == "inp_attn_scale"
                                ? GgmlType::F32
                                : (idxs ? GgmlType::I64 : GgmlType::I32);
      if (x.name == "inp_tokens")
        gg.inp_tokens = static_cast<int>(i);
      else if (x.name == "inp_pos")
        gg.inp_pos = static_cast<int>(i);
      else if (x.name == "KQ_mask")
        gg.kq_mask = static_cast<int>(i);
      else if (x.name == "KQ_mask_swa")
        gg.kq_mask_swa = static_cast<int>(i);
      else if (x.name == "inp_s_copy")
        gg.inp_s_copy = static_cast<int>(i);
      else if (x.name == "inp_s_mask")
        gg.inp_s_mask = static_cast<int>(i);
      else if (x.name == "inp_out_ids")
        gg.inp_out_ids = static_cast<int>(i);
      else if (x.name == "inp_attn_scale")
        gg.inp_attn_scale = static_cast<int>(i);
      else if (x.name == "attn_inp_k_idxs")
        gg.inp_k_idxs = static_cast<int>(i);
      else if (x.name == "attn_inp_v_idxs")
        gg.inp_v_idxs = static_cast<int>(i);
      else if (x.name == "attn_inp_k_idxs_swa")
        gg.inp_k_idxs_swa = static_cast<int>(i);
      else if (x.name == "attn_inp_v_idxs_swa")
        gg.inp_v_idxs_swa = static_cast<int>(i);
      else
        return DataLoss(path + ": graph " + gg.name + ": unknown graph input '" + x.name +
                        "' (this runtime fills inp_tokens, inp_pos, KQ_mask, KQ_mask_swa, inp_out_ids, "
                        "inp_s_copy, inp_s_mask, inp_attn_scale and attn_inp_{k,v}_idxs{,_swa})");
      // The KQ masks may also be F16 (llama.cpp 2026's with flash attention, build_attn_inp_kq_mask).
      if (x.type != want && !(mask && x.type == GgmlType::F16))
        return DataLoss(path + ": graph " + gg.name + " input '" + x.name + "': expected type " +
                        (mask
                             ? std::string(GgmlTypeName(GgmlType::F32)) + " or " + GgmlTypeName(GgmlType::F16)
                             : std::string(GgmlTypeName(want))) +
                        ", found " + GgmlTypeName(x.type));
    }
    if (x.name == "result_output") gg.result = static_cast<int>(i);
    gg.tensors.push_back(std::move(x));
  }
  gg.nodes.assign(g.nodes()->begin(), g.nodes()->end());
  if (g.splits())
    for (const auto* s : *g.splits()) {
      Split gs{s->backend(), s->node_begin(), s->node_end(), {}};
      if (s->inputs())
        for (const auto* in : *s->inputs()) gs.inputs.emplace_back(in->tensor(), in->copy());
      gg.splits.push_back(std::move(gs));
    }
  if (gg.inp_tokens < 0 || gg.result < 0)
    return DataLoss(path + ": graph " + gg.name +
                    ": expected inputs 'inp_tokens' and output 'result_output'");
  // A recurrent model's cells are sequences (one here), not tokens: any max_kv >= 1 will do.
  if (gg.max_kv < (gg.recurrent() ? 1 : n_ctx) || gg.max_tokens < 1 || gg.max_outputs < 1)
    return DataLoss(path + ": graph " + gg.name + ": max_kv " + std::to_string(gg.max_kv) +
                    " is smaller than context.n_ctx " + std::to_string(n_ctx) +
                    " (or max_tokens/max_outputs < 1)");
  STOWAGE_RETURN_IF_ERROR(CheckDefinedBeforeUse(gg, path));
  return gg;
}

Status BindTensor(const Graph& g, int id, const Bindings& s, const Memory& mem, const std::string& path,
                  std::vector<Bound>& bound, int depth) {
  Bound& b = bound[id];
  if (b.done) return Status::Ok();
  if (depth > 64)
    return DataLoss(path + ": graph " + g.name + ": view chain too deep (cycle?) at '" + g.tensors[id].name +
                    "'");
  const Tensor& t = g.tensors[id];
  TensorView v;
  v.type = t.type;
  // Built only for an error message (this runs for every tensor of every ubatch).
  auto where = [&] {
    return path + ": graph " + g.name + " tensor " +
           (t.name.empty() ? "#" + std::to_string(id) + " (unnamed)" : "'" + t.name + "'");
  };
  for (int d = 0; d < 4; ++d) {
    if (!s.Eval(t.ne[d], &v.ne[d]))
      return DataLoss(where() + ": dimension " + std::to_string(d) + " overflows int64");
    // 0 is allowed: ggml tensors may be empty (mamba's llm_build_copy_mask_state copies the states
    // of n_kv - n_seqs cells, none with one sequence); their nodes are skipped.
    if (v.ne[d] < 0)
      return DataLoss(where() + ": dimension " + std::to_string(d) + " evaluates to " +
                      std::to_string(v.ne[d]));
  }
  if (CheckedElements(v.ne) < 0) return DataLoss(where() + ": element count overflows");
  if (RowSize(v.type, v.ne[0]) == 0 && GetTypeTraits(v.type).block_size > 1)
    return DataLoss(where() + ": ne0 not a multiple of the block size");
  bool owns = true;  // the tensor owns its bytes (not a view of another one)
  if (t.kind == fb::TensorKind::Weight || t.kind == fb::TensorKind::KvCache) {
    v = mem.globals[t.global];
    b.buffer = mem.global_buffer[t.global];
    b.offset = mem.global_offset[t.global];
  } else if (t.is_view) {
    owns = false;
    const int src = t.srcs[AliasedSource(t.op, t.srcs.size())];
    STOWAGE_RETURN_IF_ERROR(BindTensor(g, src, s, mem, path, bound, depth + 1));
    const Bound& sb = bound[src];
    b.buffer = sb.buffer;
    b.offset = sb.offset;
    b.own_begin = sb.own_begin;
    b.own_end = sb.own_end;
    v.layout = sb.v.layout;
    switch (t.op) {
      case GgmlOp::RESHAPE:
        // ggml_reshape asserts ggml_is_contiguous(a): a reshape of a strided view (a permute, a
        // transpose, rows of a wider tensor) would read its bytes in another order than ggml.
        if (!sb.v.is_contiguous()) {
          std::string nb;
          for (int d = 0; d < 4; ++d) nb += (d ? ", " : "") + std::to_string(sb.v.nb[d]);
          return DataLoss(where() + ": RESHAPE of '" + g.tensors[src].name + "' " + exec::ShapeString(sb.v) +
                          " with strides nb [" + nb + "]: expected a contiguous source (ggml_reshape)");
        }
        exec::SetContiguousStrides(v);
        break;
      case GgmlOp::VIEW: {
        int64_t off = 0;
        if (!s.Eval(t.view_offset, &off) || off < 0 ||
            __builtin_add_overflow(b.offset, static_cast<uint64_t>(off), &b.offset))
          return DataLoss(where() + ": negative view offset, or the offset overflows");
        v.nb[0] = GetTypeTraits(v.type).type_size;
        for (int d = 0; d < 3; ++d) {
          int64_t nb = 0;
          if (!s.Eval(t.view_nb[d], &nb) || nb < 0)
            return DataLoss(where() + ": view stride nb" + std::to_string(d + 1) +
                            " is negative or overflows");
          v.nb[d + 1] = static_cast<size_t>(nb);
        }
        // Unset strides (0) of a 1-D/2-D view: contiguous continuation.
        for (int d = 1; d < 4; ++d)
          if (v.nb[d] == 0)
            v.nb[d] = d == 1 ? RowSize(v.type, v.ne[0]) : v.nb[d - 1] * static_cast<size_t>(v.ne[d - 1]);
        break;
      }
      case GgmlOp::PERMUTE: {
        const Result<PermuteParams> p = DecodePermute(OpParamsRef(t.iparams, t.fparams));
        if (!p.ok()) return DataLoss(path + ": tensor '" + t.name + "': " + p.status().message());
        for (int d = 0; d < 4; ++d) v.nb[p->axis[d]] = sb.v.nb[d];
        break;
      }
      case GgmlOp::TRANSPOSE:
        v.nb[0] = sb.v.nb[1];
        v.nb[1] = sb.v.nb[0];
        v.nb[2] = sb.v.nb[2];
        v.nb[3] = sb.v.nb[3];
        break;
      default:  // an op that writes into its destination (CPY): the destination's view
        v = sb.v;
        break;
    }
  } else {
    exec::SetContiguousStrides(v);
    b.buffer = t.buffer;
    b.offset = t.offset;
  }
  // Memory safety against malformed plans: the bytes the view spans (in ggml's plain layout, the
  // same for every layout: a backend's own layout of a weight takes at most its plain bytes) lie
  // inside the planned size of its buffer (checked before any pointer is formed), and offsets and
  // strides keep elements aligned for the kernels.
  if (b.buffer < 0 || static_cast<size_t>(b.buffer) >= mem.buffer_size.size())
    return DataLoss(where() + ": no buffer");
  const uint64_t size = mem.buffer_size[b.buffer];
  const uint64_t ext = Extent(v);
  if (b.offset > size || ext > size - b.offset)
    return DataLoss(where() + " (" + std::to_string(ext) + " bytes at offset " + std::to_string(b.offset) +
                    ") does not fit in its buffer of " + std::to_string(size) + " bytes");
  if (owns) {
    b.own_begin = b.offset;
    b.own_end = b.offset + ext;
  } else if (b.offset < b.own_begin || b.offset + ext > b.own_end) {
    // ggml_view_impl asserts view_offs + size <= ggml_nbytes(view_src): a view past its tensor
    // reads or writes another tensor's bytes (the K view of a layer reading its V cache).
    const int root = ViewOwner(g, id);
    return DataLoss(where() + " (" + std::to_string(ext) + " bytes at offset " + std::to_string(b.offset) +
                    ") extends outside the tensor it views" +
                    (root >= 0 ? " '" + g.tensors[root].name + "'" : std::string()) + " (bytes [" +
                    std::to_string(b.own_begin) + ", " + std::to_string(b.own_end) + ") of its buffer)");
  }
  const auto& tr = GetTypeTraits(v.type);
  // A quantized block's widest field is a ggml_half scale (2 bytes) for every block type but those
  // of an odd size: MXFP4's {u8 e; u8 qs[16]} (17 bytes) is read byte by byte, and a row of one
  // block (deepseek2's attn_v_b with 32 columns) has a 17-byte stride in ggml too.
  const uint64_t align =
      tr.is_quantized ? (tr.type_size % 2 == 0 ? 2 : 1) : std::min<uint64_t>(tr.type_size, 4);
  bool aligned = b.offset % align == 0;
  for (int d = 1; d < 4; ++d) aligned = aligned && v.nb[d] % align == 0;
  if (!aligned)
    return DataLoss(where() + ": offset " + std::to_string(b.offset) + " or strides are not multiples of " +
                    std::to_string(align) + " bytes (the element alignment of " + tr.name + ")");
  if (!mem.buffer_base.empty() && t.kind != fb::TensorKind::Weight && t.kind != fb::TensorKind::KvCache &&
      !(t.is_view && !IsViewOp(t.op)))
    v.data = mem.buffer_base[b.buffer] + b.offset;
  b.v = v;
  b.done = true;
  return Status::Ok();
}

}  // namespace

Result<Graphs> Decode(const fb::Plan& r, const std::string& path) {
  Graphs out;
  out.n_ctx = r.context()->n_ctx();
  out.n_ubatch = r.context()->n_ubatch();
  out.n_vocab = r.context()->n_vocab();
  out.n_ctx_swa = r.context()->n_ctx_swa();  // checked against n_ctx and n_ubatch (VerifySwaCache)
  if (out.n_ctx <= 0 || out.n_ubatch <= 0 || out.n_vocab <= 0)
    return DataLoss(path + ": context: n_ctx, n_ubatch and n_vocab must be positive");
  for (const auto* g : *r.graphs()) {
    STOWAGE_ASSIGN_OR_RETURN(Graph gg, DecodeGraph(*g, out.n_ctx, path));
    out.graphs.push_back(std::move(gg));
  }
  if (out.graphs.size() < 2) return DataLoss(path + ": expected the pp and tg graphs");
  const Graph& pp = out.graphs[0];
  if (pp.max_tokens < std::min(out.n_ubatch, out.n_ctx) || pp.max_outputs < pp.max_tokens)
    return DataLoss(path + ": graph pp: max_tokens " + std::to_string(pp.max_tokens) + " / max_outputs " +
                    std::to_string(pp.max_outputs) + " below context.n_ubatch " +
                    std::to_string(out.n_ubatch));
  return out;
}

Memory PlannedMemory(const fb::Plan& r) {
  Memory m;
  if (r.buffers())
    for (const auto* b : *r.buffers()) {
      m.buffer_size.push_back(b->size());
      m.buffer_mapped.push_back(b->mapped());
    }
  if (r.tensors())
    for (const auto* t : *r.tensors()) {
      TensorView v;
      v.type = static_cast<GgmlType>(t->type());
      for (int d = 0; d < 4; ++d) v.ne[d] = t->ne()->Get(d);
      exec::SetContiguousStrides(v);
      m.globals.push_back(v);
      m.global_buffer.push_back(t->buffer());
      m.global_offset.push_back(t->offset());
    }
  return m;
}

std::vector<Bindings> Corners(const Graph& g, size_t graph_index, int64_t n_ctx, int64_t n_ubatch,
                              int64_t n_ctx_swa) {
  const int64_t n_max =
      graph_index == 1 ? 1 : std::max<int64_t>(1, std::min({g.max_tokens, n_ubatch, n_ctx}));
  // Without a SWA cache its symbols stay 0 (no tensor has terms in them: VerifyGraphTensors).
  const bool swa = n_ctx_swa > 0;
  std::vector<Bindings> out;
  for (const int64_t n : {int64_t(1), n_max}) {
    if (n == n_max && n == 1 && !out.empty()) break;
    for (const int64_t o : {int64_t(1), n}) {
      if (g.recurrent()) {
        out.push_back(Bindings{n, 1, 0, o});
        continue;
      }
      out.push_back(Bindings{n, n, 0, o, swa ? n : 0, 0});
      out.push_back(Bindings{n, n_ctx, 0, o, n_ctx_swa, 0});
      out.push_back(Bindings{n, n_ctx, n_ctx - n, o, n_ctx_swa, swa ? n_ctx_swa - n : 0});
    }
  }
  out.push_back(g.worst_case());  // what the plan sized the graph for
  return out;
}

Status BindAll(const Graph& g, const Bindings& s, const Memory& mem, const std::string& path,
               std::vector<Bound>* bound) {
  bound->assign(g.tensors.size(), Bound{});
  for (size_t i = 0; i < g.tensors.size(); ++i)
    STOWAGE_RETURN_IF_ERROR(BindTensor(g, static_cast<int>(i), s, mem, path, *bound, 0));
  return Status::Ok();
}

Status CheckNodeShapes(const Graph& g, const std::vector<Bound>& bound, const std::string& path) {
  SrcShapes srcs;
  for (int id : g.nodes) {
    const Tensor& t = g.tensors[id];
    // Sources and parameters are CheckNodes' (its messages name what is wrong with them): a node
    // whose sources or parameters it will refuse is left to it.
    const GgmlOpTraits& traits = GetOpTraits(t.op);
    bool checkable = t.srcs.size() >= static_cast<size_t>(traits.min_srcs) &&
                     t.srcs.size() <= static_cast<size_t>(traits.max_srcs);
    for (int j = 0; checkable && j < traits.min_srcs; ++j) checkable = t.srcs[j] >= 0;
    for (float f : t.fparams) checkable = checkable && ParamValueOk(t.op, f);
    const OpParamsRef params(t.iparams, t.fparams);
    if (!checkable || !CheckParams(t.op, params).ok()) continue;
    srcs.assign(t.srcs.size(), std::nullopt);
    for (size_t j = 0; j < t.srcs.size(); ++j)
      if (t.srcs[j] >= 0) {
        const TensorView& v = bound[t.srcs[j]].v;
        srcs[j] = Ne4{v.ne[0], v.ne[1], v.ne[2], v.ne[3]};
      }
    const TensorView& d = bound[id].v;
    if (Status st = CheckShape(t.op, srcs, params, Ne4{d.ne[0], d.ne[1], d.ne[2], d.ne[3]}); !st.ok())
      return DataLoss(path + ": graph " + g.name + " node '" + t.name + "': " + st.message());
  }
  return Status::Ok();
}

Status CheckNodes(const fb::Plan& r, const Graph& g, const std::vector<Bound>& bound, const Memory& mem,
                  const std::string& path) {
  for (const Split& sp : g.splits) {
    const auto* dev = r.devices()->Get(r.backends()->Get(sp.backend)->device());
    const bool onednn = dev->type() == fb::DeviceType::ACCEL && dev->name() &&
                        dev->name()->str().rfind("ONEDNN", 0) == 0;  // builtin_backends.cpp
    for (uint32_t k = sp.begin; k < sp.end; ++k) {
      const int id = g.nodes[k];
      const Tensor& t = g.tensors[id];
      if (IsViewOp(t.op) || t.op == GgmlOp::NONE) continue;
      auto node = [&] {
        return path + ": graph " + g.name + " node '" + t.name + "' (" + GgmlOpName(t.op) + ")";
      };
      const GgmlOpTraits& traits = GetOpTraits(t.op);
      const int need = traits.min_srcs;
      for (int j = 0; j < need; ++j)
        if (j >= static_cast<int>(t.srcs.size()) || t.srcs[j] < 0)
          return DataLoss(node() + ": source " + std::to_string(j) + " is missing (" + GgmlOpName(t.op) +
                          " reads " + std::to_string(need) + ")");
      if (t.srcs.size() > static_cast<size_t>(traits.max_srcs))
        return DataLoss(node() + ": " + std::to_string(t.srcs.size()) + " sources, " + GgmlOpName(t.op) +
                        " takes at most " + std::to_string(traits.max_srcs));
      for (size_t j = 0; j < t.fparams.size(); ++j)
        if (!ParamValueOk(t.op, t.fparams[j]))
          return DataLoss(node() + ": float parameter " + std::to_string(j) + " is not finite");
      const OpParamsRef params(t.iparams, t.fparams);
      if (Status st = CheckParams(t.op, params); !st.ok()) return DataLoss(node() + ": " + st.message());
      if (t.op == GgmlOp::ROPE) {  // the kernels' modes and ggml's n_dims rule, against the bound row
        Status st = cpu::CheckRopeParams(*DecodeRope(params), bound[t.srcs[0]].v.ne[0]);
        if (!st.ok()) return DataLoss(node() + ": " + st.message());
      }
      if (onednn && t.op != GgmlOp::MUL_MAT)
        return DataLoss(node() + " is in a split of backend " + std::to_string(sp.backend) + " (" +
                        dev->name()->str() + "), which runs only MUL_MAT (oneDNN)");
      if (bound[id].buffer >= 0 && static_cast<size_t>(bound[id].buffer) < mem.buffer_mapped.size() &&
          mem.buffer_mapped[bound[id].buffer])
        return DataLoss(path + ": graph " + g.name + " node '" + t.name +
                        "' writes into the read-only mapping of the model file");
      // ggml_backend_sched allocates each node in its backend's compute buffer (ggml_gallocr, one
      // buffer type per backend): a result elsewhere would be written by one device into another's
      // memory.
      const int compute_buffer = r.backends()->Get(sp.backend)->compute_buffer();
      if (!t.is_view && t.global < 0 && t.buffer >= 0 && t.buffer != compute_buffer) {
        auto buffer_name = [&](int b) {
          return b >= 0 && static_cast<flatbuffers::uoffset_t>(b) < r.buffers()->size() &&
                         r.buffers()->Get(b)->name()
                     ? r.buffers()->Get(b)->name()->str()
                     : std::string("none");
        };
        return DataLoss(node() + ": its result is in buffer " + std::to_string(t.buffer) + " (" +
                        buffer_name(t.buffer) + "), expected its backend " + std::to_string(sp.backend) +
                        "'s compute buffer " + std::to_string(compute_buffer) + " (" +
                        buffer_name(compute_buffer) + ")");
      }
    }
  }
  return Status::Ok();
}

Status CheckResultShape(const Graph& g, const std::vector<Bound>& bound, int64_t n_vocab, int64_t n_outputs,
                        const std::string& path) {
  const TensorView& v = bound[g.result].v;
  if (v.type != GgmlType::F32 || v.ne[0] != n_vocab || v.ne[1] != n_outputs || v.ne[2] != 1 || v.ne[3] != 1)
    return DataLoss(path + ": graph " + g.name + ": result_output is [" + std::to_string(v.ne[0]) + ", " +
                    std::to_string(v.ne[1]) + ", " + std::to_string(v.ne[2]) + ", " +
                    std::to_string(v.ne[3]) + "] " + GgmlTypeName(v.type) + ", expected f32 [n_vocab " +
                    std::to_string(n_vocab) + ", n_outputs " + std::to_string(n_outputs) + ", 1, 1]");
  return Status::Ok();
}

std::vector<int64_t> KvStoreIndices(int64_t n, int64_t n_tokens, int64_t first_cell, int64_t kv_size) {
  if (n_tokens <= 0 || n <= 0 || n % n_tokens != 0) return {};
  const int64_t n_embd_v = n / n_tokens;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n_tokens; ++i)
    for (int64_t j = 0; j < n_embd_v; ++j)
      idx[static_cast<size_t>(i * n_embd_v + j)] = j * kv_size + first_cell + i;
  return idx;
}

}  // namespace stowage::plan_graph
