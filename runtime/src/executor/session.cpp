// Session: plan + GGUF -> buffers -> graph execution (see session.h).
#include "stowage/runtime/session.h"

#include <algorithm>
#include <exception>
#include <new>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "backend.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/plan.h"

namespace stowage {

using exec::Backend;
using exec::Buffer;
using exec::NodeCall;
using exec::TensorView;
namespace fb = ::stowage::plan;

namespace {

struct Sym {
  int64_t n_tokens, n_kv, kv_head, n_outputs;
  /// c + tokens*n_tokens + kv*n_kv + kv_head*kv_head + outputs*n_outputs; false on int64 overflow
  /// (coefficients come from the plan file, which may be hostile).
  bool Eval(const fb::DimExpr& e, int64_t* out) const {
    int64_t acc = e.c(), term;
    const int64_t coef[4] = {e.tokens(), e.kv(), e.kv_head(), e.outputs()};
    const int64_t val[4] = {n_tokens, n_kv, kv_head, n_outputs};
    for (int i = 0; i < 4; ++i)
      if (__builtin_mul_overflow(coef[i], val[i], &term) || __builtin_add_overflow(acc, term, &acc)) return false;
    *out = acc;
    return true;
  }
};

// A graph tensor, decoded from the plan once.
struct GTensor {
  std::string name;
  GgmlOp op = GgmlOp::NONE;
  GgmlType type = GgmlType::F32;
  fb::TensorKind kind = fb::TensorKind::Intermediate;
  std::vector<fb::DimExpr> ne;
  std::vector<int> srcs;
  std::vector<int32_t> iparams;
  std::vector<float> fparams;
  fb::DimExpr view_offset{};
  std::vector<fb::DimExpr> view_nb;
  int global = -1;
  int buffer = -1;
  uint64_t offset = 0;
  int backend = -1;
  bool is_view = false;  // data aliases srcs[0] (RESHAPE/VIEW/PERMUTE/TRANSPOSE) or srcs[1] (CPY)
};

struct GSplit {
  int backend;
  uint32_t begin, end;
  std::vector<std::pair<int, int>> inputs;
};

struct GGraph {
  std::string name;
  int64_t max_tokens = 0, max_kv = 0, max_outputs = 0;
  std::vector<GTensor> tensors;
  std::vector<int> nodes;
  std::vector<GSplit> splits;
  int inp_tokens = -1, inp_pos = -1, kq_mask = -1, inp_out_ids = -1, result = -1;
  int kq_mask_swa = -1;  // phi3 with a sliding window (llama.cpp's inp_KQ_mask_swa)
  // Recurrent models (mamba, llm_build_copy_mask_state): which cell each used cell's state comes
  // from, and 0/1 to clear the states of new sequences. Their "KV" cells are sequences.
  int inp_s_copy = -1, inp_s_mask = -1;
  bool recurrent() const { return inp_s_copy >= 0 || inp_s_mask >= 0; }
};

struct Bound {
  TensorView v;
  int buffer = -1;     // buffer holding the bytes (for extent checks and copies)
  uint64_t offset = 0; // byte offset of v.data inside that buffer
  bool done = false;
};

/// Bytes spanned by a (possibly strided) view: last element's offset + its size. Returns
/// UINT64_MAX when the arithmetic overflows (a hostile plan), which no buffer can hold.
uint64_t Extent(const TensorView& t) {
  if (t.nelements() == 0) return 0;  // an empty view spans no bytes (mamba's state copy with one cell)
  const auto& tr = GetTypeTraits(t.type);
  uint64_t e = RowSize(t.type, t.ne[0]);
  if (e == 0) e = tr.type_size;
  // Dim 0 strided (a TRANSPOSE or PERMUTE of a matrix: nb0 is a row, not an element): the span of
  // dim 0 is (ne0-1)*nb0 + type_size, as ggml_nbytes counts it for a block size of 1. (Counting
  // ne0 contiguous elements instead under-sized the staging of a strided split input copy from
  // private memory, and cpu::Cpy read past it: NaN logits with -nkvo, breaker-24.)
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
int ViewOwner(const GGraph& g, int id) {
  for (int depth = 0; depth <= 64; ++depth) {
    const GTensor& t = g.tensors[id];
    if (!IsViewOp(t.op)) return id;
    if (t.srcs.empty() || t.srcs[0] < 0 || static_cast<size_t>(t.srcs[0]) >= g.tensors.size()) return -1;
    id = t.srcs[0];
  }
  return -1;
}

}  // namespace

class Session::Impl {
 public:
  std::unique_ptr<PlanFile> plan;
  std::unique_ptr<GgufFile> gguf;
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<int> buffer_backend;  // backend that owns each buffer
  std::vector<bool> buffer_mapped;  // read-only ranges of the GGUF mapping
  std::vector<BufferReport> reports;
  std::vector<GGraph> graphs;       // [0] = pp, [1] = tg
  std::vector<TensorView> globals;  // bound weights / KV
  std::vector<int> global_buffer;
  std::vector<uint64_t> global_offset;
  int64_t n_ctx = 0, n_ubatch = 0, n_vocab = 0, n_past = 0;
  int64_t kv_pad = 32;  ///< llama_kv_cache_get_padding: 256 with flash attention, else 32
  /// SessionOptions::llamacpp_numerics: n_kv as llama.cpp 2026 (at least 256 cells, padded to 256).
  bool kv_pad_2026 = false;
  /// A decode failed after a recurrent model's state was (partly) updated: Decode refuses until Reset.
  bool recurrent_state_lost = false;
  std::vector<float> unwanted_logits;  ///< Decode's logits when the caller passes nullptr
  int64_t n_swa = 0;                // sliding window of KQ_mask_swa (<arch>.attention.sliding_window)
  double load_seconds = 0;
  std::vector<Bound> bound;         // scratch per call
  // Op profile (SessionOptions::profile_ops): rows, and per graph the row of each tensor (-1: not
  // yet looked up).
  bool profile = false;
  std::vector<OpProfileEntry> prof_rows;
  std::vector<std::vector<int>> prof_slot;
  int ProfRow(const std::string& graph, const std::string& backend, const std::string& op);
  void ProfAdd(int row, std::chrono::steady_clock::time_point t0) {
    prof_rows[size_t(row)].calls += 1;
    prof_rows[size_t(row)].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  Status Init(const SessionOptions& opts);
  Status ReadSlidingWindow();
  Status CheckIdentity();
  Status CreateBackends(const SessionOptions& opts);
  Status AllocateBuffers(const SessionOptions& opts);
  Status LoadWeights(const SessionOptions& opts);
  Status RunSplits(GGraph& g);
  Status CopyTensor(GGraph& g, int src, int dst);
  Status WaitHostWrites();
  Status WaitHostReads();
  Status SyncAll();
  // Asynchronous split execution (RunSplits): queued copies the host must wait for before it
  // touches host memory again, and host staging kept alive until every queue has drained.
  std::vector<std::shared_ptr<exec::Event>> host_reads;   // async writes whose source is host memory
  std::vector<std::shared_ptr<exec::Event>> host_writes;  // async reads whose target is host memory
  std::vector<std::vector<uint8_t>> stages;
  Status CheckDefinedBeforeUse(const GGraph& g);
  Status CheckNodeShapes(const GGraph& g);
  cpu::ComputeContext copy_ctx;     // host-side copies (split inputs)
  Status BindTensor(GGraph& g, int id, const Sym& s, int depth);
  Status BindAll(GGraph& g, const Sym& s);
  Status RunUbatch(const int32_t* tokens, int64_t n, bool all_logits, float* out);
  Status RunUbatchOn(GGraph& g, const int32_t* tokens, int64_t n, bool all_logits, float* out);
  Status WriteInput(GGraph& g, int id, const void* data, uint64_t n);
  static Result<std::unique_ptr<Session>> Finish(std::unique_ptr<Impl> impl, const std::string& model_path,
                                                 const SessionOptions& opts, std::chrono::steady_clock::time_point t0);
};

Status Session::Impl::CheckIdentity() {
  const auto& m = *plan->root().model();
  const ModelIdentity id = ComputeModelIdentity(*gguf);
  if (id.file_size != m.file_size() || id.header_size != m.header_size() || id.header_xxh64 != m.header_xxh64()) {
    return FailedPrecondition(gguf->path() + ": does not match plan " + plan->path() + ": the plan was made for a file of " +
                              std::to_string(m.file_size()) + " bytes with header hash " + HashHex(m.header_xxh64()) +
                              " (" + (m.path() ? m.path()->str() : "?") + "), found " + std::to_string(id.file_size) +
                              " bytes with header hash " + HashHex(id.header_xxh64));
  }
  return Status::Ok();
}

Status CheckThreadCount(int n_threads, const std::string& subject) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n_threads < 0 || n_threads > 4 * hw)
    return InvalidArgument(subject + " " + std::to_string(n_threads) + " is outside [0, " + std::to_string(4 * hw) +
                           "] (0 = all " + std::to_string(hw) + " hardware threads; at most 4x oversubscription)");
  return Status::Ok();
}

Status Session::Impl::CreateBackends(const SessionOptions& opts) {
  const auto& r = plan->root();
  STOWAGE_RETURN_IF_ERROR(CheckThreadCount(opts.n_threads));
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n_threads = opts.n_threads > 0 ? opts.n_threads : hw;
  for (const auto* be : *r.backends()) {
    const auto* dev = r.devices()->Get(be->device());
    const std::string dname = dev->name() ? dev->name()->str() : "?";
    const std::string dtype = fb::EnumNameDeviceType(dev->type());
    std::unique_ptr<Backend> b;
    if (opts.backend_factory) b = opts.backend_factory->Create(dname, dtype, n_threads);
    if (!b) b = exec::CreateBuiltinBackend(dname, dtype, n_threads, opts.llamacpp_numerics, opts.cpu_max_isa);
    if (!b)
      return Unavailable(plan->path() + ": planned device '" + dname + "' (" + dtype +
                         ") is not on this machine or its backend is not built (backends built: " +
                         exec::BuiltinBackendNames() + "; list-devices shows this machine's devices)");
    backends.push_back(std::move(b));
  }
  return Status::Ok();
}

Status Session::Impl::AllocateBuffers(const SessionOptions& opts) {
  const auto& r = plan->root();
  static const char* kUsage[] = {"model", "KV", "compute", "output"};
  for (size_t i = 0; i < r.buffers()->size(); ++i) {
    const auto* b = r.buffers()->Get(i);
    // The backend of the buffer's device (the CPU backend for host buffers).
    int be = static_cast<int>(backends.size()) - 1;
    for (size_t k = 0; k < r.backends()->size(); ++k)
      if (r.backends()->Get(k)->device() == b->device()) { be = static_cast<int>(k); break; }
    BufferReport rep;
    rep.name = b->name() ? b->name()->str() : "";
    rep.usage = kUsage[static_cast<int>(b->usage()) & 3];
    rep.device = r.devices()->Get(b->device())->name() ? r.devices()->Get(b->device())->name()->str() : "";
    rep.planned = b->size();
    rep.mapped = b->mapped();
    if (b->mapped()) {
      if (b->file_offset() > gguf->file_size() || b->size() > gguf->file_size() - b->file_offset())
        return DataLoss(plan->path() + ": buffer '" + rep.name + "' maps bytes outside " + gguf->path());
      buffers.push_back(exec::HostBuffer::Wrap(gguf->bytes() + b->file_offset(), b->size(),
                                                     opts.copy_mapped_weights_to_huge_pages));
      if (!backends[be]->CanAccess(*buffers.back()))
        return Unimplemented(plan->path() + ": buffer '" + rep.name + "' maps the file on device '" + rep.device +
                             "', whose backend cannot read host memory");
    } else {
      STOWAGE_ASSIGN_OR_RETURN(auto buf, backends[be]->Allocate(b->buft() ? b->buft()->str() : "", b->size(), b->alignment()));
      if (b->tensor_split() && b->tensor_split()->size() > 0) {
        const std::vector<float> ts(b->tensor_split()->begin(), b->tensor_split()->end());
        Status st = buf->SetTensorSplit(ts);
        if (!st.ok()) return st.WithPrefix(plan->path() + ": buffer '" + rep.name + "' tensor_split");
      }
      buffers.push_back(std::move(buf));
    }
    rep.allocated = buffers.back()->size();
    buffer_backend.push_back(be);
    buffer_mapped.push_back(b->mapped());
    reports.push_back(rep);
  }
  return Status::Ok();
}

Status Session::Impl::LoadWeights(const SessionOptions& opts) {
  const auto& r = plan->root();
  const size_t n = r.tensors()->size();
  uint64_t total = 0, done = 0;
  for (size_t i = 0; i < n; ++i) total += r.tensors()->Get(i)->nbytes();
  globals.resize(n);
  global_buffer.resize(n);
  global_offset.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto* t = r.tensors()->Get(i);
    const std::string name = t->name()->str();
    TensorView v;
    v.type = static_cast<GgmlType>(t->type());
    for (int d = 0; d < 4; ++d) v.ne[d] = t->ne()->Get(d);
    cpu::SetContiguousStrides(v);
    Buffer& buf = *buffers[t->buffer()];
    v.data = buf.base() + t->offset();
    globals[i] = v;
    global_buffer[i] = t->buffer();
    global_offset[i] = t->offset();
    done += t->nbytes();
    if (opts.progress && total > 0) opts.progress(static_cast<float>(done) / static_cast<float>(total));
    if (t->kind() != fb::TensorKind::Weight) continue;
    // The model must hold this tensor with the planned type, shape and data offset.
    const GgufTensorInfo* ti = gguf->FindTensor(name);
    if (ti == nullptr) return FailedPrecondition(gguf->path() + ": tensor '" + name + "' of the plan is missing");
    bool same = ti->type == v.type && gguf->data_offset() + ti->offset == t->gguf_offset();
    for (int d = 0; d < 4; ++d) same = same && ti->ne[d] == v.ne[d];
    if (!same) return FailedPrecondition(gguf->path() + ": tensor '" + name + "' differs from the plan (type, shape or offset)");
    const auto* pb = r.buffers()->Get(t->buffer());
    if (pb->mapped()) {
      if (pb->file_offset() + t->offset() != t->gguf_offset())
        return DataLoss(plan->path() + ": tensor '" + name + "': mapped offset does not point at its file data");
      continue;
    }
    const uint8_t* src = gguf->bytes() + t->gguf_offset();
    const std::string repack = pb->repack() ? pb->repack()->str() : "";
    // A repack buffer type (llama.cpp's CPU_REPACK) converts the weights it can into the kernels'
    // interleaved layout on upload (ggml-cpu repack set_tensor); every other buffer stores the
    // tensor through its WriteTensor hook, which may keep it in its backend's preferred layout
    // (the ONEDNN buffer type reorders matmul weights into oneDNN's blocked layout) and reports it.
    if (repack.empty()) {
      STOWAGE_ASSIGN_OR_RETURN(const int stored, buf.WriteTensor(v, t->offset(), src));
      globals[i].layout = stored;
      continue;
    }
    const int layout = cpu::RepackLayoutFor(v);
    if (layout != cpu::kLayoutPlain) {
      TensorView s = v;
      s.data = const_cast<uint8_t*>(src);
      if (buf.is_host() && t->offset() <= buf.size() && t->nbytes() <= buf.size() - t->offset()) {
        // Straight into host memory: a staging copy of the largest tensor (the output matrix, tens
        // of MiB) would add to the peak resident memory of the load.
        STOWAGE_RETURN_IF_ERROR(cpu::RepackWeight(s, layout, buf.base() + t->offset()));
      } else {
        std::vector<uint8_t> tmp(t->nbytes());
        STOWAGE_RETURN_IF_ERROR(cpu::RepackWeight(s, layout, tmp.data()));
        STOWAGE_RETURN_IF_ERROR(buf.Write(t->offset(), tmp.data(), tmp.size()));
      }
      globals[i].layout = layout;
    } else {
      STOWAGE_RETURN_IF_ERROR(buf.Write(t->offset(), src, t->nbytes()));
    }
  }
  return Status::Ok();
}

int Session::Impl::ProfRow(const std::string& graph, const std::string& backend, const std::string& op) {
  for (size_t i = 0; i < prof_rows.size(); ++i)
    if (prof_rows[i].graph == graph && prof_rows[i].backend == backend && prof_rows[i].op == op) return int(i);
  OpProfileEntry e;
  e.graph = graph;
  e.backend = backend;
  e.op = op;
  prof_rows.push_back(e);
  return int(prof_rows.size() - 1);
}

Status Session::Impl::Init(const SessionOptions& opts) {
  profile = opts.profile_ops;
  STOWAGE_RETURN_IF_ERROR(CheckIdentity());
  const auto& r = plan->root();
  n_ctx = r.context()->n_ctx();
  n_ubatch = r.context()->n_ubatch();
  n_vocab = r.context()->n_vocab();
  kv_pad = r.context()->flash_attn() ? 256 : 32;
  kv_pad_2026 = opts.llamacpp_numerics;
  if (n_ctx <= 0 || n_ubatch <= 0 || n_vocab <= 0) return DataLoss(plan->path() + ": context: n_ctx, n_ubatch and n_vocab must be positive");
  STOWAGE_RETURN_IF_ERROR(CreateBackends(opts));
  STOWAGE_RETURN_IF_ERROR(AllocateBuffers(opts));
  STOWAGE_RETURN_IF_ERROR(LoadWeights(opts));
  for (const auto* g : *r.graphs()) {
    GGraph gg;
    gg.name = g->name() ? g->name()->str() : "";
    gg.max_tokens = g->max_tokens();
    gg.max_kv = g->max_kv();
    gg.max_outputs = g->max_outputs();
    for (size_t i = 0; i < g->tensors()->size(); ++i) {
      const auto* t = g->tensors()->Get(i);
      GTensor x;
      x.name = t->name() ? t->name()->str() : "";
      x.op = static_cast<GgmlOp>(t->op());
      x.type = static_cast<GgmlType>(t->type());
      x.kind = t->kind();
      for (size_t d = 0; d < 4; ++d) x.ne.push_back(*t->ne()->Get(d));
      if (t->srcs()) x.srcs.assign(t->srcs()->begin(), t->srcs()->end());
      if (t->iparams()) x.iparams.assign(t->iparams()->begin(), t->iparams()->end());
      if (t->fparams()) x.fparams.assign(t->fparams()->begin(), t->fparams()->end());
      if (t->view_offset()) x.view_offset = *t->view_offset();
      if (t->view_nb())
        for (size_t d = 0; d < t->view_nb()->size(); ++d) x.view_nb.push_back(*t->view_nb()->Get(d));
      x.global = t->global();
      x.buffer = t->buffer();
      x.offset = t->offset();
      x.backend = t->backend();
      // A CPY with a destination (src 1) writes into it and aliases it; one with a single source is
      // ggml_cast, a new tensor of its own (the F16 KQ_mask copy of flash attention).
      x.is_view = IsViewOp(x.op) || (x.op == GgmlOp::CPY && x.srcs.size() >= 2);
      const size_t need_src = x.op == GgmlOp::CPY ? (x.is_view ? 2 : 1) : (x.is_view ? 1 : 0);
      if (x.srcs.size() < need_src || (need_src && x.srcs[need_src - 1] < 0))
        return DataLoss(plan->path() + ": graph " + gg.name + " tensor '" + x.name + "': view without a source");
      if (x.srcs.size() > size_t(NodeCall::kMaxSrc))
        return DataLoss(plan->path() + ": graph " + gg.name + " tensor '" + x.name + "': more than " +
                        std::to_string(NodeCall::kMaxSrc) + " sources");
      if (x.op == GgmlOp::VIEW && x.view_nb.size() != 3)
        return DataLoss(plan->path() + ": graph " + gg.name + " tensor '" + x.name + "': VIEW needs 3 strides");
      if (x.kind == fb::TensorKind::Weight || x.kind == fb::TensorKind::KvCache) {
        if (x.global < 0) return DataLoss(plan->path() + ": graph " + gg.name + " tensor '" + x.name + "': no global tensor");
      } else if (!x.is_view && x.buffer < 0) {
        return DataLoss(plan->path() + ": graph " + gg.name + " tensor '" + x.name + "': no buffer");
      }
      if (x.kind == fb::TensorKind::Input) {
        // The runtime fills these graph inputs (llama.cpp's set_inputs); any other is an error.
        const GgmlType want =
            x.name == "KQ_mask" || x.name == "KQ_mask_swa" || x.name == "inp_s_mask" ? GgmlType::F32 : GgmlType::I32;
        if (x.name == "inp_tokens") gg.inp_tokens = static_cast<int>(i);
        else if (x.name == "inp_pos") gg.inp_pos = static_cast<int>(i);
        else if (x.name == "KQ_mask") gg.kq_mask = static_cast<int>(i);
        else if (x.name == "KQ_mask_swa") gg.kq_mask_swa = static_cast<int>(i);
        else if (x.name == "inp_s_copy") gg.inp_s_copy = static_cast<int>(i);
        else if (x.name == "inp_s_mask") gg.inp_s_mask = static_cast<int>(i);
        else if (x.name == "inp_out_ids") gg.inp_out_ids = static_cast<int>(i);
        else
          return DataLoss(plan->path() + ": graph " + gg.name + ": unknown graph input '" + x.name +
                          "' (this runtime fills inp_tokens, inp_pos, KQ_mask, KQ_mask_swa, inp_out_ids, inp_s_copy and inp_s_mask)");
        if (x.type != want)
          return DataLoss(plan->path() + ": graph " + gg.name + " input '" + x.name + "': expected type " +
                          GgmlTypeName(want) + ", found " + GgmlTypeName(x.type));
      }
      if (x.name == "result_output") gg.result = static_cast<int>(i);
      gg.tensors.push_back(std::move(x));
    }
    gg.nodes.assign(g->nodes()->begin(), g->nodes()->end());
    if (g->splits())
      for (const auto* s : *g->splits()) {
        GSplit gs{s->backend(), s->node_begin(), s->node_end(), {}};
        if (s->inputs())
          for (const auto* in : *s->inputs()) gs.inputs.emplace_back(in->tensor(), in->copy());
        gg.splits.push_back(std::move(gs));
      }
    if (gg.inp_tokens < 0 || gg.result < 0)
      return DataLoss(plan->path() + ": graph " + gg.name + ": expected inputs 'inp_tokens' and output 'result_output'");
    // A recurrent model's cells are sequences (one here), not tokens: any max_kv >= 1 will do.
    if (gg.max_kv < (gg.recurrent() ? 1 : n_ctx) || gg.max_tokens < 1 || gg.max_outputs < 1)
      return DataLoss(plan->path() + ": graph " + gg.name + ": max_kv " + std::to_string(gg.max_kv) +
                      " is smaller than context.n_ctx " + std::to_string(n_ctx) + " (or max_tokens/max_outputs < 1)");
    STOWAGE_RETURN_IF_ERROR(CheckDefinedBeforeUse(gg));
    graphs.push_back(std::move(gg));
  }
  if (graphs.size() < 2) return DataLoss(plan->path() + ": expected the pp and tg graphs");
  if (std::any_of(graphs.begin(), graphs.end(), [](const GGraph& g) { return g.kq_mask_swa >= 0; }))
    STOWAGE_RETURN_IF_ERROR(ReadSlidingWindow());
  if (graphs[0].max_tokens < std::min(n_ubatch, n_ctx) || graphs[0].max_outputs < graphs[0].max_tokens)
    return DataLoss(plan->path() + ": graph pp: max_tokens " + std::to_string(graphs[0].max_tokens) +
                    " / max_outputs " + std::to_string(graphs[0].max_outputs) + " below context.n_ubatch " +
                    std::to_string(n_ubatch));
  return Status::Ok();
}

// n_swa as llama.cpp's load_hparams (Feb 2025, LLM_ARCH_PHI3) reads it: <arch>.attention.sliding_window,
// or for Phi-3 files converted before the key existed (PR #8931) the defaults of their sizes.
Status Session::Impl::ReadSlidingWindow() {
  STOWAGE_ASSIGN_OR_RETURN(const std::string arch, gguf->GetString("general.architecture"));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_layer, gguf->GetU32Or(arch + ".block_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_ctx_train, gguf->GetU32Or(arch + ".context_length", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head, gguf->GetU32Or(arch + ".attention.head_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t n_head_kv, gguf->GetU32Or(arch + ".attention.head_count_kv", n_head));
  uint32_t def = 0;
  if ((n_layer == 32 || n_layer == 40) && n_ctx_train == 4096) def = 2047;
  else if (n_layer == 32 && n_head_kv == 32 && n_ctx_train == 131072) def = 262144;
  else if (n_layer == 40 && n_ctx_train == 131072) def = 131072;
  STOWAGE_ASSIGN_OR_RETURN(const uint32_t swa, gguf->GetU32Or(arch + ".attention.sliding_window", def));
  if (swa == 0)
    return DataLoss(plan->path() + ": the graphs read KQ_mask_swa but " + gguf->path() + " has no sliding window (" +
                    arch + ".attention.sliding_window)");
  n_swa = swa;
  return Status::Ok();
}

Status Session::Impl::BindTensor(GGraph& g, int id, const Sym& s, int depth) {
  Bound& b = bound[id];
  if (b.done) return Status::Ok();
  if (depth > 64) return DataLoss(plan->path() + ": graph " + g.name + ": view chain too deep (cycle?) at '" + g.tensors[id].name + "'");
  const GTensor& t = g.tensors[id];
  TensorView v;
  v.type = t.type;
  // Built only for an error message (this runs for every tensor of every ubatch).
  auto where = [&] {
    return plan->path() + ": graph " + g.name + " tensor " +
           (t.name.empty() ? "#" + std::to_string(id) + " (unnamed)" : "'" + t.name + "'");
  };
  for (int d = 0; d < 4; ++d) {
    if (!s.Eval(t.ne[d], &v.ne[d])) return DataLoss(where() + ": dimension " + std::to_string(d) + " overflows int64");
    // 0 is allowed: ggml tensors may be empty (mamba's llm_build_copy_mask_state copies the states
    // of n_kv - n_seqs cells, none with one sequence); their nodes are skipped.
    if (v.ne[d] < 0) return DataLoss(where() + ": dimension " + std::to_string(d) + " evaluates to " + std::to_string(v.ne[d]));
  }
  if (CheckedElements(v.ne) < 0)
    return DataLoss(where() + ": element count overflows");
  if (RowSize(v.type, v.ne[0]) == 0 && GetTypeTraits(v.type).block_size > 1)
    return DataLoss(where() + ": ne0 not a multiple of the block size");
  if (t.kind == fb::TensorKind::Weight || t.kind == fb::TensorKind::KvCache) {
    v = globals[t.global];
    b.buffer = global_buffer[t.global];
    b.offset = global_offset[t.global];
  } else if (t.is_view) {
    const int src = t.op == GgmlOp::CPY ? t.srcs[1] : t.srcs[0];
    STOWAGE_RETURN_IF_ERROR(BindTensor(g, src, s, depth + 1));
    const Bound& sb = bound[src];
    b.buffer = sb.buffer;
    b.offset = sb.offset;
    v.layout = sb.v.layout;
    switch (t.op) {
      case GgmlOp::CPY: v = sb.v; break;
      case GgmlOp::RESHAPE: cpu::SetContiguousStrides(v); break;
      case GgmlOp::VIEW: {
        int64_t off = 0;
        if (!s.Eval(t.view_offset, &off) || off < 0 ||
            __builtin_add_overflow(b.offset, static_cast<uint64_t>(off), &b.offset))
          return DataLoss(where() + ": negative view offset, or the offset overflows");
        v.nb[0] = GetTypeTraits(v.type).type_size;
        for (int d = 0; d < 3; ++d) {
          int64_t nb = 0;
          if (!s.Eval(t.view_nb[d], &nb) || nb < 0) return DataLoss(where() + ": view stride nb" + std::to_string(d + 1) + " is negative or overflows");
          v.nb[d + 1] = static_cast<size_t>(nb);
        }
        // Unset strides (0) of a 1-D/2-D view: contiguous continuation.
        for (int d = 1; d < 4; ++d)
          if (v.nb[d] == 0) v.nb[d] = d == 1 ? RowSize(v.type, v.ne[0]) : v.nb[d - 1] * static_cast<size_t>(v.ne[d - 1]);
        break;
      }
      case GgmlOp::PERMUTE: {
        if (t.iparams.size() != 4) return DataLoss(plan->path() + ": tensor '" + t.name + "': PERMUTE needs 4 axes");
        int seen = 0;
        for (int d = 0; d < 4; ++d) {
          const int ax = t.iparams[d];
          if (ax < 0 || ax > 3 || (seen & (1 << ax)))
            return DataLoss(plan->path() + ": tensor '" + t.name + "': PERMUTE axes are not a permutation of 0..3");
          seen |= 1 << ax;
          v.nb[ax] = sb.v.nb[d];
        }
        break;
      }
      case GgmlOp::TRANSPOSE:
        v.nb[0] = sb.v.nb[1];
        v.nb[1] = sb.v.nb[0];
        v.nb[2] = sb.v.nb[2];
        v.nb[3] = sb.v.nb[3];
        break;
      default: break;
    }
  } else {
    cpu::SetContiguousStrides(v);
    b.buffer = t.buffer;
    b.offset = t.offset;
  }
  // Memory safety against malformed plans: the bytes the view spans lie inside its buffer (checked
  // before any pointer is formed), and offsets and strides keep elements aligned for the kernels.
  if (b.buffer < 0 || static_cast<size_t>(b.buffer) >= buffers.size()) return DataLoss(where() + ": no buffer");
  const uint64_t ext = v.layout == cpu::kLayoutPlain ? Extent(v) : 0;
  if (b.offset > buffers[b.buffer]->size() || ext > buffers[b.buffer]->size() - b.offset)
    return DataLoss(where() + " (" + std::to_string(ext) + " bytes at offset " + std::to_string(b.offset) +
                    ") does not fit in its buffer of " + std::to_string(buffers[b.buffer]->size()) + " bytes");
  const auto& tr = GetTypeTraits(v.type);
  const uint64_t align = tr.is_quantized ? 2 : std::min<uint64_t>(tr.type_size, 4);
  bool aligned = b.offset % align == 0;
  for (int d = 1; d < 4; ++d) aligned = aligned && v.nb[d] % align == 0;
  if (!aligned)
    return DataLoss(where() + ": offset " + std::to_string(b.offset) + " or strides are not multiples of " +
                    std::to_string(align) + " bytes (the element alignment of " + tr.name + ")");
  if (t.kind != fb::TensorKind::Weight && t.kind != fb::TensorKind::KvCache && !(t.op == GgmlOp::CPY && t.is_view))
    v.data = buffers[b.buffer]->base() + b.offset;
  b.v = v;
  b.done = true;
  return Status::Ok();
}

// Binds every tensor of `g` for the symbol values `s` (bound[] starts empty).
Status Session::Impl::BindAll(GGraph& g, const Sym& s) {
  bound.assign(g.tensors.size(), Bound{});
  for (size_t i = 0; i < g.tensors.size(); ++i) STOWAGE_RETURN_IF_ERROR(BindTensor(g, static_cast<int>(i), s, 0));
  return Status::Ok();
}

// The result shapes of the ops whose rule is simple, at the bound (worst-case) shapes: MUL_MAT
// [ne01, ne11, ne12, ne13] with ne00 == ne10 (ggml_mul_mat), and the ops whose result has their
// first source's shape (ggml_add/mul/scale/rms_norm/norm/silu/gelu/soft_max_ext/rope). The kernels
// check the same when they run; here an edited plan fails at load, before any text is streamed.
Status Session::Impl::CheckNodeShapes(const GGraph& g) {
  auto shape = [](const TensorView& v) {
    return "[" + std::to_string(v.ne[0]) + ", " + std::to_string(v.ne[1]) + ", " + std::to_string(v.ne[2]) + ", " +
           std::to_string(v.ne[3]) + "]";
  };
  for (int id : g.nodes) {
    const GTensor& t = g.tensors[id];
    if (t.srcs.empty() || t.srcs[0] < 0) continue;
    const TensorView& d = bound[id].v;
    const TensorView& a = bound[t.srcs[0]].v;
    auto fail = [&](const std::string& want) {
      return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name + "' (" + GgmlOpName(t.op) + ") is " +
                      shape(d) + "; its sources make it " + want);
    };
    switch (t.op) {
      case GgmlOp::MUL_MAT: {
        if (t.srcs.size() < 2 || t.srcs[1] < 0) break;
        const TensorView& b = bound[t.srcs[1]].v;
        const int64_t want[4] = {a.ne[1], b.ne[1], b.ne[2], b.ne[3]};
        if (a.ne[0] != b.ne[0] || d.ne[0] != want[0] || d.ne[1] != want[1] || d.ne[2] != want[2] || d.ne[3] != want[3])
          return fail("[" + std::to_string(want[0]) + ", " + std::to_string(want[1]) + ", " + std::to_string(want[2]) +
                      ", " + std::to_string(want[3]) + "] (src0 ne0 " + std::to_string(a.ne[0]) + ", src1 ne0 " +
                      std::to_string(b.ne[0]) + ")");
        break;
      }
      case GgmlOp::ADD: case GgmlOp::MUL: case GgmlOp::SCALE: case GgmlOp::RMS_NORM: case GgmlOp::NORM:
      case GgmlOp::SILU: case GgmlOp::GELU: case GgmlOp::SOFT_MAX: case GgmlOp::ROPE:
        for (int k = 0; k < 4; ++k)
          if (d.ne[k] != a.ne[k]) return fail(shape(a) + " (the shape of its first source)");
        break;
      default: break;
    }
  }
  return Status::Ok();
}

// Every source a node reads must exist when it runs: a weight, KV cache or graph input, a split
// input copy made at its split's start, or the result of an earlier node; and the graph must
// compute result_output. (Refuses plans whose splits skip or reorder nodes.)
Status Session::Impl::CheckDefinedBeforeUse(const GGraph& g) {
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
      const GTensor& x = g.tensors[t];
      if (x.kind == fb::TensorKind::Weight || x.kind == fb::TensorKind::KvCache || x.kind == fb::TensorKind::Input) return t;
      if (!x.is_view) return -1;
      const size_t k = x.op == GgmlOp::CPY ? 1 : 0;
      t = k < x.srcs.size() ? x.srcs[k] : -1;
    }
    return -1;
  };
  for (const GSplit& sp : g.splits) {
    for (const auto& [src, copy] : sp.inputs) {
      const int r = root(src);
      if (r < 0 || g.tensors[r].kind != fb::TensorKind::KvCache) continue;
      for (uint32_t k = sp.begin; k < sp.end; ++k) {
        const GTensor& n = g.tensors[g.nodes[k]];
        if (std::find(n.srcs.begin(), n.srcs.end(), copy) != n.srcs.end()) break;  // read before any write
        if (n.op == GgmlOp::CPY && n.srcs.size() > 1 && root(n.srcs[1]) == r)
          return DataLoss(plan->path() + ": graph " + g.name + ": split input '" + g.tensors[src].name +
                          "' is copied before node '" + n.name + "' of the same split stores into '" +
                          g.tensors[r].name + "'");
      }
    }
  }
  for (const GSplit& sp : g.splits) {
    for (const auto& [src, copy] : sp.inputs) {
      // A split input that is a view (with -nkvo the CPU split copies "Vcur-0 (transposed)" and
      // "q-0", views of GPU results that ggml places at their consumer, after the split's start)
      // is copied as the view, reading its owner's bytes through it (ggml_backend_sched_compute_
      // splits; views are bound before the first split, as ggml_backend_view_init binds them at
      // allocation): defined once its owner is, i.e. computed by an earlier split or stored.
      const int owner = ViewOwner(g, src);
      if (!defined[src] && (owner < 0 || !defined[owner]))
        return DataLoss(plan->path() + ": graph " + g.name + ": split input '" + g.tensors[src].name + "' is copied before it is computed");
      defined[copy] = 1;
    }
    for (uint32_t k = sp.begin; k < sp.end; ++k) {
      const int id = g.nodes[k];
      for (int s : g.tensors[id].srcs)
        if (s >= 0 && !defined[s])
          return DataLoss(plan->path() + ": graph " + g.name + ": node '" + g.tensors[id].name + "' reads '" +
                          g.tensors[s].name + "' before any node computes it");
      defined[id] = 1;
    }
  }
  if (!defined[g.result]) return DataLoss(plan->path() + ": graph " + g.name + ": no node computes result_output");
  return Status::Ok();
}

Status Session::Impl::WaitHostWrites() {
  for (auto& ev : host_writes) STOWAGE_RETURN_IF_ERROR(ev->HostWait());
  host_writes.clear();
  return Status::Ok();
}

Status Session::Impl::WaitHostReads() {
  for (auto& ev : host_reads) STOWAGE_RETURN_IF_ERROR(ev->HostWait());
  host_reads.clear();
  return Status::Ok();
}

// Drains every backend's queue (ggml_backend_sched_synchronize); afterwards no queued work refers
// to host memory or staging. Runs on errors too, keeping the first error. Any order is correct;
// the reverse of the backend list drains the later devices of a layer chain first, so the lazy test
// backend (test/unit/backends/async_private_backend.h) runs a destination queue before its source
// queue and exposes a missing cross-backend event wait.
Status Session::Impl::SyncAll() {
  Status first = Status::Ok();
  for (auto it = backends.rbegin(); it != backends.rend(); ++it) {
    Status st = (*it)->Synchronize();
    if (first.ok() && !st.ok()) first = st;
  }
  for (auto* evs : {&host_reads, &host_writes}) {
    for (auto& ev : *evs) {
      Status st = ev->HostWait();
      if (first.ok() && !st.ok()) first = st;
    }
    evs->clear();
  }
  stages.clear();
  return first;
}

// One split input copy (ggml_backend_sched_compute_splits). A copy into an asynchronous backend's
// memory is queued on that (the destination) backend, so it runs after the work that backend
// queued before it and before the split's nodes, with no wait; a copy out of an asynchronous
// backend's memory is queued on the source backend, after the node that computed it. The host
// waits only where host memory is involved: a host-side destination is written by a queued read
// (host_writes: waited before the host reads it), a host-side source is read by a queued write
// (host_reads: waited before host kernels may overwrite it). Device to device: a direct copy
// ordered on both queues (Backend::CopyFromAsync) where the backends have one, else through host
// staging, the destination backend waiting on an event of the source backend's read.
Status Session::Impl::CopyTensor(GGraph& g, int src, int dst) {
  const Bound& s = bound[src];
  const Bound& d = bound[dst];
  if (buffer_mapped[d.buffer])
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name +
                    "' targets the read-only mapping of the model file");
  // A weight stored in a backend's own layout (CPU_REPACK's interleaved blocks, ONEDNN's blocked
  // matmul layout) is only readable by that backend's kernels: its bytes copied elsewhere would be
  // read as ggml's plain layout (llama.cpp's repack buffers refuse get_tensor for the same reason).
  if (s.v.layout != cpu::kLayoutPlain)
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name + "' reads '" +
                    g.tensors[src].name + "', stored in a backend-specific layout (" + std::to_string(s.v.layout) +
                    ") that only its own backend reads");
  Buffer& sb = *buffers[s.buffer];
  Buffer& db = *buffers[d.buffer];
  Backend& from = *backends[buffer_backend[s.buffer]];
  Backend& to = *backends[buffer_backend[d.buffer]];
  if (s.v.nelements() != d.v.nelements() || s.v.type != d.v.type)
    return DataLoss(plan->path() + ": graph " + g.name + ": split input copy '" + g.tensors[dst].name +
                    "' does not match its source '" + g.tensors[src].name + "'");
  auto record = [](Backend& b, std::vector<std::shared_ptr<exec::Event>>* list) -> Status {
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<exec::Event> ev, b.RecordEvent());
    if (ev) list->push_back(std::move(ev));
    return Status::Ok();
  };
  const bool both_contiguous = s.v.is_contiguous() && d.v.is_contiguous();
  if (both_contiguous) {  // byte copy (any type, e.g. the I32 positions)
    const uint64_t n = RowSize(s.v.type, s.v.ne[0]) * static_cast<uint64_t>(s.v.nrows());
    if (sb.is_host() && db.is_host()) {
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
      return db.Write(d.offset, s.v.data, n);
    }
    if (sb.is_host()) {  // host -> device: queued on the destination backend
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(to.WriteAsync(db, d.offset, s.v.data, n));
      return record(to, &host_reads);
    }
    if (db.is_host()) {  // device -> host: queued on the source backend, after its producer
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
      STOWAGE_RETURN_IF_ERROR(from.ReadAsync(sb, s.offset, d.v.data, n));
      return record(from, &host_writes);
    }
    // device -> device: directly when the destination backend can (peer copy), else through host
    // staging (alive until SyncAll), the destination waiting on an event of the source's read.
    if (&from != &to) {
      STOWAGE_ASSIGN_OR_RETURN(const bool direct, to.CopyFromAsync(from, sb, s.offset, db, d.offset, n));
      if (direct) return Status::Ok();
    }
    stages.emplace_back(n);
    uint8_t* stage = stages.back().data();
    STOWAGE_RETURN_IF_ERROR(from.ReadAsync(sb, s.offset, stage, n));
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<exec::Event> ev, from.RecordEvent());
    if (ev) STOWAGE_RETURN_IF_ERROR(to.WaitEvent(*ev));
    return to.WriteAsync(db, d.offset, stage, n);
  }
  if (sb.is_host() && db.is_host()) {
    STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
    STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    TensorView dv = d.v;
    return cpu::Cpy(copy_ctx, s.v, dv);
  }
  // Strided and private on a side (rare): synchronously through host staging. Read the source's
  // bytes (keeping its strides), make them contiguous, queue the write into the destination
  // (contiguous by construction).
  STOWAGE_RETURN_IF_ERROR(from.Synchronize());
  STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
  const uint64_t ext = Extent(s.v);
  std::vector<uint8_t> strided(ext);
  STOWAGE_RETURN_IF_ERROR(sb.Read(s.offset, strided.data(), ext));
  TensorView hs = s.v;
  hs.data = strided.data();
  TensorView hd = d.v;
  if (db.is_host()) {
    STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    return cpu::Cpy(copy_ctx, hs, hd);
  }
  stages.emplace_back(Extent(d.v));
  hd.data = stages.back().data();
  STOWAGE_RETURN_IF_ERROR(cpu::Cpy(copy_ctx, hs, hd));
  return to.WriteAsync(db, d.offset, stages.back().data(), stages.back().size());
}

Status Session::Impl::RunSplits(GGraph& g) {
  using ProfClock = std::chrono::steady_clock;
  const size_t gi = size_t(&g - graphs.data());
  if (profile && prof_slot.size() < graphs.size()) prof_slot.resize(graphs.size());
  if (profile && prof_slot[gi].size() != g.tensors.size()) prof_slot[gi].assign(g.tensors.size(), -1);
  for (const GSplit& sp : g.splits) {
    Backend& be = *backends[sp.backend];
    // Split inputs: copy each source into the split backend's memory (ggml_backend_sched).
    const auto tc = profile ? ProfClock::now() : ProfClock::time_point();
    for (const auto& [src, copy] : sp.inputs) STOWAGE_RETURN_IF_ERROR(CopyTensor(g, src, copy));
    if (profile && !sp.inputs.empty()) ProfAdd(ProfRow(g.name, "", "(split input copies)"), tc);
    // Host kernels read and write host memory: queued copies into it must have landed, and queued
    // copies out of it must have read it before it may be overwritten. Asynchronous backends wait
    // for nothing here: their copies were queued ahead of their nodes.
    if (!be.is_async()) {
      STOWAGE_RETURN_IF_ERROR(WaitHostWrites());
      STOWAGE_RETURN_IF_ERROR(WaitHostReads());
    }
    for (uint32_t k = sp.begin; k < sp.end; ++k) {
      const int id = g.nodes[k];
      const GTensor& t = g.tensors[id];
      if (IsViewOp(t.op) || t.op == GgmlOp::NONE) continue;
      if (bound[id].v.nelements() == 0) continue;  // an empty node computes nothing (ggml skips it too)
      NodeCall c;
      c.op = t.op;
      c.name = t.name.c_str();
      c.dst = bound[id].v;
      for (size_t j = 0; j < t.srcs.size() && j < size_t(NodeCall::kMaxSrc); ++j) {
        if (t.srcs[j] < 0) continue;
        c.src[j] = bound[t.srcs[j]].v;
        c.has_src[j] = true;
      }
      c.iparams = t.iparams.data();
      c.n_iparams = t.iparams.size();
      c.fparams = t.fparams.data();
      c.n_fparams = t.fparams.size();
      if (buffer_mapped[bound[id].buffer])
        return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name +
                        "' writes into the read-only mapping of the model file");
      // The plan must only give a backend tensors it can access (else a split input copy is due).
      if (!be.CanAccess(*buffers[bound[id].buffer]))
        return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name + "' on backend " + be.name() +
                        " writes a buffer it cannot access");
      for (size_t j = 0; j < t.srcs.size() && j < size_t(NodeCall::kMaxSrc); ++j)
        if (t.srcs[j] >= 0 && !be.CanAccess(*buffers[bound[t.srcs[j]].buffer]))
          return DataLoss(plan->path() + ": graph " + g.name + " node '" + t.name + "' on backend " + be.name() +
                          " reads '" + g.tensors[t.srcs[j]].name + "' from a buffer it cannot access (no split input copy)");
      const auto t0 = profile ? ProfClock::now() : ProfClock::time_point();
      Status st = be.Compute(c);
      if (!st.ok())
        return st.WithPrefix(plan->path() + ": graph " + g.name + " node " +
                             (t.name.empty() ? "#" + std::to_string(id) + " (unnamed)" : "'" + t.name + "'"));
      if (profile) {
        int& row = prof_slot[gi][size_t(id)];
        if (row < 0) {
          std::string label = GgmlOpName(t.op);
          if ((t.op == GgmlOp::MUL_MAT || t.op == GgmlOp::MUL_MAT_ID) && c.has_src[0])
            label += std::string(" ") + GgmlTypeName(c.src[0].type);
          row = ProfRow(g.name, be.name(), label);
        }
        ProfAdd(row, t0);
      }
    }
  }
  // The end of the ubatch: every queue drains before the host reads the logits and writes the next
  // ubatch's inputs (llama_decode synchronizes the scheduler before reading outputs).
  const auto ts = profile ? ProfClock::now() : ProfClock::time_point();
  Status synced = SyncAll();
  if (profile) ProfAdd(ProfRow(g.name, "", "(sync)"), ts);
  return synced;
}

Status Session::Impl::WriteInput(GGraph& g, int id, const void* data, uint64_t n) {
  if (id < 0) return Status::Ok();
  const Bound& b = bound[id];
  return buffers[b.buffer]->Write(b.offset, data, n);
}

Status Session::Impl::RunUbatch(const int32_t* tokens, int64_t n, bool all_logits, float* out) {
  GGraph& g = n == 1 ? graphs[1] : graphs[0];
  const auto t_ubatch = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = RunUbatchOn(g, tokens, n, all_logits, out);
  if (profile && st.ok()) ProfAdd(ProfRow(g.name, "", "(ubatch)"), t_ubatch);
  return st;
}

Status Session::Impl::RunUbatchOn(GGraph& g, const int32_t* tokens, int64_t n, bool all_logits, float* out) {
  Sym s;
  s.n_tokens = n;
  s.kv_head = n_past;
  // llama_kv_cache_update / llama_kv_cache_get_padding (Feb 2025): n_kv covers the cells in use,
  // padded to 256 with flash attention, else 32. With llamacpp_numerics, llama.cpp 2026's
  // llama_kv_cache::get_n_kv: max(256, the cells in use padded to 256), at most the cache — the
  // attention dots then run over the same cells (a vec_dot over n_kv sums its tail past the last
  // multiple of 64 apart from the rest, so the padding changes its bits).
  if (kv_pad_2026)
    s.n_kv = std::min<int64_t>(n_ctx, std::max<int64_t>(256, (n_past + n + 255) / 256 * 256));
  else
    s.n_kv = std::min<int64_t>(n_ctx, (n_past + n + kv_pad - 1) / kv_pad * kv_pad);
  if (g.recurrent()) {
    // One sequence in cell 0 (llama_kv_cache_find_slot for recurrent models: n_kv = cells in use,
    // head = the first of them).
    s.kv_head = 0;
    s.n_kv = 1;
  }
  s.n_outputs = all_logits ? n : 1;
  if (n > g.max_tokens || s.n_kv > g.max_kv || s.n_outputs > g.max_outputs)
    return Internal("ubatch exceeds the planned worst case of graph " + g.name);
  STOWAGE_RETURN_IF_ERROR(BindAll(g, s));

  STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_tokens, tokens, n * sizeof(int32_t)));
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(n_past + i);
  STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_pos, pos.data(), n * sizeof(int32_t)));
  // KQ_mask: causal (cell j holds position j). KQ_mask_swa also hides cells that fell out of the
  // sliding window: llama_set_inputs (Feb 2025) masks cell j for the token at position p when
  // p - j >= n_swa.
  for (const int id : {g.kq_mask, g.kq_mask_swa}) {
    if (id < 0) continue;
    const int64_t window = id == g.kq_mask_swa ? n_swa : 0;
    const TensorView& mv = bound[id].v;
    std::vector<float> mask(static_cast<size_t>(mv.ne[0] * mv.ne[1]), -INFINITY);
    for (int64_t i = 0; i < mv.ne[1] && i < n; ++i)
      for (int64_t j = 0; j < mv.ne[0]; ++j) {
        const int64_t p = n_past + i;
        if (j <= p && (window == 0 || p - j < window)) mask[i * mv.ne[0] + j] = 0.f;
      }
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, id, mask.data(), mask.size() * sizeof(float)));
  }
  for (const int id : {g.inp_s_copy, g.inp_s_mask})
    if (id >= 0 && bound[id].v.nelements() != s.n_kv)
      return DataLoss(plan->path() + ": graph " + g.name + " input '" + g.tensors[id].name + "' has " +
                      std::to_string(bound[id].v.nelements()) + " elements, expected n_kv = " + std::to_string(s.n_kv));
  if (g.inp_s_copy >= 0) {
    const int32_t copy_from = 0;  // cell 0 keeps its own state
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_s_copy, &copy_from, sizeof copy_from));
  }
  if (g.inp_s_mask >= 0) {
    const float keep = n_past > 0 ? 1.0f : 0.0f;  // a new sequence starts from zero states
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_s_mask, &keep, sizeof keep));
  }
  if (g.inp_out_ids >= 0) {
    std::vector<int32_t> ids(s.n_outputs);
    for (int64_t i = 0; i < s.n_outputs; ++i) ids[i] = static_cast<int32_t>(all_logits ? i : n - 1);
    STOWAGE_RETURN_IF_ERROR(WriteInput(g, g.inp_out_ids, ids.data(), ids.size() * sizeof(int32_t)));
  }
  Status run = RunSplits(g);
  if (!run.ok()) {
    (void)SyncAll();  // no queued work may outlive the failed call (it refers to this ubatch's memory)
    return run;
  }
  const Bound& rb = bound[g.result];
  if (rb.v.ne[0] != n_vocab || rb.v.ne[1] != s.n_outputs)
    return DataLoss(plan->path() + ": result_output has an unexpected shape");
  STOWAGE_RETURN_IF_ERROR(buffers[rb.buffer]->Read(rb.offset, out, static_cast<uint64_t>(n_vocab * s.n_outputs) * sizeof(float)));
  n_past += n;
  return Status::Ok();
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Impl::Finish(std::unique_ptr<Impl> impl, const std::string& model_path,
                                                       const SessionOptions& opts, std::chrono::steady_clock::time_point t0) {
  STOWAGE_ASSIGN_OR_RETURN(impl->gguf, GgufFile::Open(model_path));
  STOWAGE_RETURN_IF_ERROR(impl->Init(opts));
  // The verifier and Init check each tensor (shapes, views, offsets within buffers); this checks
  // the offsets together (weights and KV cache in their buffers, live compute tensors in theirs):
  // a plan whose tensors share bytes (edited or corrupted) would compute wrong values without an
  // error. Nothing has run yet.
  const MemoryCheckReport mem = CheckComputeMemory(*impl->plan, 1, /*overlaps_only=*/true);
  if (!mem.conflicts.empty())
    return DataLoss(impl->plan->path() + ": buffer offsets overlap (plan-dump --check-memory lists all): " +
                    mem.conflicts.front());
  // Every tensor of every graph binds (shape, view, buffer extent, alignment) at the graph's worst
  // case, so a malformed plan fails here rather than after a prompt has been streamed.
  for (GGraph& g : impl->graphs) {
    Sym worst;
    worst.n_tokens = g.max_tokens;
    worst.n_kv = g.max_kv;
    worst.kv_head = 0;
    worst.n_outputs = g.max_outputs;
    STOWAGE_RETURN_IF_ERROR(impl->BindAll(g, worst));
    STOWAGE_RETURN_IF_ERROR(impl->CheckNodeShapes(g));
  }
  impl->bound.clear();
  impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Session::Create(const std::string& plan_path, const std::string& model_path,
                                                 const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::Load(plan_path));
  return Impl::Finish(std::move(impl), model_path, opts, t0);
}

Result<std::unique_ptr<Session>> Session::CreateFromPlanBytes(std::vector<uint8_t> plan_bytes, const std::string& model_path,
                                                              const SessionOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto impl = std::make_unique<Impl>();
  STOWAGE_ASSIGN_OR_RETURN(impl->plan, PlanFile::FromBytes(std::move(plan_bytes), "<plan in memory>"));
  return Impl::Finish(std::move(impl), model_path, opts, t0);
}

Status Session::Decode(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  Impl& s = *impl_;
  if (s.recurrent_state_lost)
    return FailedPrecondition("decode: a failed decode left the recurrent state of " + s.plan->path() +
                              "'s model partly updated; Reset() the session first");
  if (tokens.empty()) return InvalidArgument("decode: empty batch (at least one token is needed)");
  for (int32_t t : tokens)
    if (t < 0 || t >= s.n_vocab)
      return InvalidArgument("decode: token id " + std::to_string(t) + " out of range [0, " + std::to_string(s.n_vocab) + ")");
  if (s.n_past + static_cast<int64_t>(tokens.size()) > s.n_ctx)
    return OutOfRange("context full: " + std::to_string(s.n_past) + " tokens in the cache + " +
                      std::to_string(tokens.size()) + " new > n_ctx " + std::to_string(s.n_ctx));
  const int64_t n = static_cast<int64_t>(tokens.size());
  // A failed decode leaves the sequence as it was: n_past returns to its value before the call (the
  // KV cells written by the ubatches that succeeded lie beyond it and are overwritten next time).
  // A recurrent model's state (one cell, updated in place by every ubatch) cannot be rolled back:
  // the session refuses to decode until Reset().
  const int64_t n_past_before = s.n_past;
  // No logits wanted (nullptr): computed into the session's scratch and dropped.
  if (logits == nullptr) logits = &s.unwanted_logits;
  // Every element is written by the ubatches below (resize: no work when the caller reuses the
  // vector, as a generation loop does).
  logits->resize(static_cast<size_t>((all_logits ? n : 1) * s.n_vocab));
  std::vector<float> discard;  // logits of the last token of a ubatch that is not the last one
  // Any failure, a Status or an exception (std::bad_alloc in a later ubatch), leaves the sequence
  // as described above: n_past rolled back, a recurrent state marked lost.
  auto failed = [&](Status st) {
    s.n_past = n_past_before;
    for (const GGraph& g : s.graphs) s.recurrent_state_lost = s.recurrent_state_lost || g.recurrent();
    return st;
  };
  try {
    for (int64_t i = 0; i < n; i += s.n_ubatch) {
      const int64_t m = std::min<int64_t>(s.n_ubatch, n - i);
      const bool last = i + m == n;
      float* out = nullptr;
      if (all_logits) {
        out = logits->data() + i * s.n_vocab;
      } else if (last) {
        out = logits->data();
      } else {
        discard.resize(static_cast<size_t>(s.n_vocab));
        out = discard.data();
      }
      Status st = s.RunUbatch(tokens.data() + i, m, all_logits, out);
      if (!st.ok()) return failed(std::move(st));
    }
  } catch (const std::bad_alloc&) {
    return failed(ResourceExhausted("decode: out of memory"));
  } catch (const std::exception& e) {
    return failed(Internal(std::string("decode: ") + e.what()));
  }
  return Status::Ok();
}

void Session::Reset() {
  impl_->n_past = 0;
  impl_->recurrent_state_lost = false;
}
int64_t Session::n_past() const { return impl_->n_past; }
int64_t Session::n_ctx() const { return impl_->n_ctx; }
int64_t Session::n_vocab() const { return impl_->n_vocab; }
std::vector<BufferReport> Session::Buffers() const { return impl_->reports; }
double Session::load_seconds() const { return impl_->load_seconds; }

std::vector<OpProfileEntry> Session::OpProfile() const {
  std::vector<OpProfileEntry> rows;
  for (const OpProfileEntry& e : impl_->prof_rows)
    if (e.calls > 0) rows.push_back(e);
  std::stable_sort(rows.begin(), rows.end(), [](const OpProfileEntry& a, const OpProfileEntry& b) {
    return a.graph != b.graph ? a.graph < b.graph : a.seconds > b.seconds;
  });
  return rows;
}

void Session::ResetOpProfile() {
  for (OpProfileEntry& e : impl_->prof_rows) {
    e.calls = 0;
    e.seconds = 0;
  }
}

}  // namespace stowage
