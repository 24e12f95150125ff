// oneDNN ACCEL backend (see onednn_backend.h). Uses oneDNN's C API, which reports errors by status
// (the C++ API throws; the runtime has no exceptions).
#include "onednn_backend.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "ops.h"

namespace stowage::exec {
namespace {

std::string DnnlError(dnnl_status_t s) {
  switch (s) {
    case dnnl_out_of_memory:
      return "out of memory";
    case dnnl_invalid_arguments:
      return "invalid arguments";
    case dnnl_unimplemented:
      return "no implementation for these types/strides on this CPU";
    case dnnl_runtime_error:
      return "runtime error";
    default:
      return "status " + std::to_string(static_cast<int>(s));
  }
}

std::string Shape(const TensorView& t) {
  return std::string(GgmlTypeName(t.type)) + "[" + std::to_string(t.ne[0]) + "," + std::to_string(t.ne[1]) +
         "," + std::to_string(t.ne[2]) + "," + std::to_string(t.ne[3]) + "]";
}

dnnl_data_type_t DnnlType(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return dnnl_f32;
    case GgmlType::BF16:
      return dnnl_bf16;
    case GgmlType::F16:
      return dnnl_f16;
    default:
      return dnnl_data_type_undef;
  }
}

/// oneDNN's CPU engine and stream, shared by a backend and the buffers it allocates (the buffers
/// reorder weights on upload).
struct Dnnl {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_status_t status = dnnl_success;
  Dnnl() {
    status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (status == dnnl_success) status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
  }
  ~Dnnl() {
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
  }
  Dnnl(const Dnnl&) = delete;
  Dnnl& operator=(const Dnnl&) = delete;
};

/// Multiply-accumulates below which a MUL_MAT runs on one thread (~20 us of F32 arithmetic).
constexpr int64_t kMinParallelMacs = int64_t{1} << 20;

/// Sets the calling thread's OpenMP thread count for oneDNN and restores it on scope exit.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(prev_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int prev_;
};

/// Rows of activations of the matmul whose weight layout is queried (any fixed M gives the same
/// layout in oneDNN 2.x; see OneDnnWeightLayoutFor).
constexpr dnnl_dim_t kLayoutQueryRows = 512;

/// ggml's plain layout of weights [K, N] as oneDNN's K x N matrix: row n holds K contiguous values.
dnnl_status_t PlainWeightsMd(dnnl_data_type_t dt, dnnl_dim_t K, dnnl_dim_t N, dnnl_memory_desc_t* md) {
  const dnnl_dims_t dims = {K, N};
  const dnnl_dims_t strides = {1, K};
  return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

/// The weights memory descriptor oneDNN's matmul chooses for K x N weights of `dt` (format_tag::any,
/// M = kLayoutQueryRows, F32 dst).
dnnl_status_t PreferredWeightsMd(dnnl_engine_t eng, dnnl_data_type_t dt, dnnl_dim_t K, dnnl_dim_t N,
                                 dnnl_memory_desc_t* out) {
  dnnl_memory_desc_t src_md, wei_md, dst_md;
  const dnnl_dims_t sd = {kLayoutQueryRows, K}, wd = {K, N}, dd = {kLayoutQueryRows, N};
  dnnl_status_t s = dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dt, dnnl_ab);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&wei_md, 2, wd, dt, dnnl_format_tag_any);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_md, 2, dd, dnnl_f32, dnnl_ab);
  dnnl_matmul_desc_t desc;
  if (s == dnnl_success) s = dnnl_matmul_desc_init(&desc, &src_md, &wei_md, nullptr, &dst_md);
  dnnl_primitive_desc_t pd = nullptr;
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &desc, nullptr, eng, nullptr);
  if (s != dnnl_success) return s;
  const dnnl_memory_desc_t* w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (w == nullptr)
    s = dnnl_runtime_error;
  else
    *out = *w;
  dnnl_primitive_desc_destroy(pd);
  return s;
}

/// A weight layout decision with the descriptor behind it.
struct LayoutChoice {
  OneDnnWeightLayout info;
  dnnl_memory_desc_t md{};  ///< oneDNN's preferred weights descriptor (valid when info.blocked)
  /// dnnl_success when oneDNN has a matmul for these weights on this CPU (else no layout was chosen:
  /// a type it lacks, e.g. F16 without AVX512-FP16/AMX, or BF16 without AVX-512).
  dnnl_status_t status = dnnl_unimplemented;
};

std::string DescribeMd(const dnnl_memory_desc_t& md) {
  if (md.format_kind != dnnl_blocked)
    return "format kind " + std::to_string(static_cast<int>(md.format_kind));
  const auto& b = md.format_desc.blocking;
  std::string out = "blocked: strides";
  for (int i = 0; i < md.ndims; ++i) out += " " + std::to_string(b.strides[i]);
  out += ", inner blocks";
  if (b.inner_nblks == 0) out += " none";
  for (int i = 0; i < b.inner_nblks; ++i)
    out += " " + std::to_string(b.inner_blks[i]) + static_cast<char>('a' + b.inner_idxs[i]);
  return out;
}

LayoutChoice ChooseLayout(dnnl_engine_t eng, GgmlType type, int64_t K, int64_t N) {
  LayoutChoice c;
  const dnnl_data_type_t dt = DnnlType(type);
  if (dt == dnnl_data_type_undef || K < 1 || N < 1) return c;
  c.info.plain_bytes = RowSize(type, K) * static_cast<uint64_t>(N);
  dnnl_memory_desc_t md, plain;
  if ((c.status = PreferredWeightsMd(eng, dt, K, N, &md)) != dnnl_success) return c;
  if ((c.status = PlainWeightsMd(dt, K, N, &plain)) != dnnl_success) return c;
  c.info.blocked_bytes = dnnl_memory_desc_get_size(&md);
  if (dnnl_memory_desc_equal(&md, &plain)) {
    c.info.format = "plain";
    return c;
  }
  c.info.format = DescribeMd(md);
  c.info.blocked = md.format_kind == dnnl_blocked && c.info.blocked_bytes <= c.info.plain_bytes;
  c.md = md;
  return c;
}

/// Memory of the ACCEL device, 64-byte aligned, zeroed: the ONEDNN weight buffer type (`weights`,
/// not host memory to the rest of the runtime; WriteTensor reorders matmul weights) or a host
/// buffer for any other buffer type. An anonymous private mapping (zero pages on first touch);
/// from 2 MiB on it starts on a 2 MiB boundary and is madvise(MADV_HUGEPAGE)d, as the CPU
/// backend's host buffers: token generation streams every weight once per token, and 4 KiB pages
/// cost TLB misses there (THP "madvise" mode gives huge pages only to advised ranges).
class OneDnnBuffer final : public Buffer {
 public:
  ~OneDnnBuffer() override {
    if (map_ != nullptr) munmap(map_, map_len_);
  }
  static Result<std::unique_ptr<Buffer>> Allocate(uint64_t size, uint64_t alignment, bool weights,
                                                  std::shared_ptr<Dnnl> dnnl, int n_threads) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (uint64_t(1) << 30))
      return InvalidArgument("ONEDNN: buffer alignment " + std::to_string(alignment) +
                             " is not a power of two in [1, 2^30]");
    if (size > (uint64_t(1) << 56))
      return ResourceExhausted("ONEDNN: cannot allocate " + std::to_string(size) + " bytes (more than 2^56)");
    constexpr uint64_t kHugePage = uint64_t(2) << 20;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t len = (std::max<uint64_t>(size, 1) + page - 1) / page * page;
    const uint64_t align = std::max({alignment, page, len >= kHugePage ? kHugePage : page});
    const uint64_t span = len + align - page;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      return ResourceExhausted("ONEDNN: cannot allocate " + std::to_string(size) +
                               " bytes of host memory: " + std::strerror(errno));
    const uintptr_t raw = reinterpret_cast<uintptr_t>(m);
    const uintptr_t base = (raw + align - 1) / align * align;
    if (base > raw) munmap(m, base - raw);
    if (raw + span > base + len) munmap(reinterpret_cast<void*>(base + len), raw + span - (base + len));
    if (len >= kHugePage) (void)madvise(reinterpret_cast<void*>(base), len, MADV_HUGEPAGE);  // a hint
    std::unique_ptr<OneDnnBuffer> b(new OneDnnBuffer());
    b->map_ = reinterpret_cast<void*>(base);
    b->map_len_ = len;
    b->data_ = reinterpret_cast<uint8_t*>(base);
    b->size_ = size;
    b->weights_ = weights;
    b->dnnl_ = std::move(dnnl);
    b->n_threads_ = n_threads;
    return std::unique_ptr<Buffer>(std::move(b));
  }
  uint8_t* base() override { return data_; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return !weights_; }
  bool is_weight_buffer() const { return weights_; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("ONEDNN: buffer write outside the buffer");
    std::memcpy(data_ + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("ONEDNN: buffer read outside the buffer");
    std::memcpy(dst, data_ + offset, n);
    return Status::Ok();
  }
  Result<int> WriteTensor(const TensorView& view, uint64_t offset, const void* data) override;

 private:
  OneDnnBuffer() = default;
  void* map_ = nullptr;
  uint64_t map_len_ = 0;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool weights_ = false;
  std::shared_ptr<Dnnl> dnnl_;
  int n_threads_ = 1;
};

Result<int> OneDnnBuffer::WriteTensor(const TensorView& view, uint64_t offset, const void* data) {
  const uint64_t n = RowSize(view.type, view.ne[0]) * static_cast<uint64_t>(view.nrows());
  if (offset > size_ || n > size_ - offset)
    return OutOfRange("ONEDNN: tensor " + Shape(view) + " at offset " + std::to_string(offset) + " (" +
                      std::to_string(n) + " bytes) lies outside the buffer of " + std::to_string(size_) +
                      " bytes");
  const bool matrix = view.ne[2] == 1 && view.ne[3] == 1 && view.is_contiguous();
  if (!weights_ || !matrix || dnnl_->status != dnnl_success) {
    STOWAGE_RETURN_IF_ERROR(Write(offset, data, n));
    return static_cast<int>(cpu::kLayoutPlain);
  }
  const LayoutChoice c = ChooseLayout(dnnl_->engine, view.type, view.ne[0], view.ne[1]);
  // A weight of a type oneDNN knows but cannot multiply on this CPU fails here, at load, not at its
  // first matmul after the prompt was read (the plan's manifest listed the type; this CPU lacks the
  // instructions). Types oneDNN does not know at all stay plain (not matmul operands of this backend).
  if (c.status != dnnl_success && DnnlType(view.type) != dnnl_data_type_undef)
    return Unimplemented("ONEDNN: no oneDNN matmul for " + Shape(view) + " weights on this CPU (" +
                         DnnlError(c.status) +
                         "); plan without the ONEDNN device, or with a manifest that does "
                         "not list " +
                         GgmlTypeName(view.type));
  if (!c.info.blocked) {
    STOWAGE_RETURN_IF_ERROR(Write(offset, data, n));
    return static_cast<int>(cpu::kLayoutPlain);
  }
  // Reorder the plain rows into oneDNN's layout (ggml's repack set_tensor, done by oneDNN).
  const dnnl_data_type_t dt = DnnlType(view.type);
  dnnl_memory_desc_t plain;
  dnnl_status_t s = PlainWeightsMd(dt, view.ne[0], view.ne[1], &plain);
  dnnl_memory_t from = nullptr, to = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t reorder = nullptr;
  if (s == dnnl_success) s = dnnl_memory_create(&from, &plain, dnnl_->engine, const_cast<void*>(data));
  if (s == dnnl_success) s = dnnl_memory_create(&to, &c.md, dnnl_->engine, data_ + offset);
  if (s == dnnl_success)
    s = dnnl_reorder_primitive_desc_create(&pd, &plain, dnnl_->engine, &c.md, dnnl_->engine, nullptr);
  if (s == dnnl_success) s = dnnl_primitive_create(&reorder, pd);
  if (s == dnnl_success) {
    OmpThreads threads(n_threads_);
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    s = dnnl_primitive_execute(reorder, dnnl_->stream, 2, args);
    if (s == dnnl_success) s = dnnl_stream_wait(dnnl_->stream);
  }
  if (reorder) dnnl_primitive_destroy(reorder);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (to) dnnl_memory_destroy(to);
  if (from) dnnl_memory_destroy(from);
  if (s != dnnl_success)
    return Internal("ONEDNN: reordering weight " + Shape(view) + " into " + c.info.format + ": " +
                    DnnlError(s));
  return kLayoutOneDnnBlocked;
}

/// A created matmul with its memory objects (data handles are set per execution).
struct MatmulPrim {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t src = nullptr, wei = nullptr, dst = nullptr;
  void Release() {
    if (src) dnnl_memory_destroy(src);
    if (wei) dnnl_memory_destroy(wei);
    if (dst) dnnl_memory_destroy(dst);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    *this = MatmulPrim();
  }
};

/// Batch {b3, b2}, M x K activations times K x N weights (weights broadcast over the batch).
struct MatmulKey {
  int64_t layout;  // cpu::kLayoutPlain or kLayoutOneDnnBlocked (then b3 = b2 = 1, 2-D strides)
  dnnl_data_type_t wt;
  dnnl_dim_t b3, b2, M, K, N;
  dnnl_dim_t src_s[4], wei_s[2], dst_s[4];
  /// Member-wise (a memcmp of the struct would read the padding after `wt`, which is not
  /// initialized: equal keys could compare unequal and the primitive cache would miss or misorder).
  bool operator<(const MatmulKey& o) const {
    auto tie = [](const MatmulKey& k) {
      return std::tie(k.layout, k.wt, k.b3, k.b2, k.M, k.K, k.N, k.src_s[0], k.src_s[1], k.src_s[2],
                      k.src_s[3], k.wei_s[0], k.wei_s[1], k.dst_s[0], k.dst_s[1], k.dst_s[2], k.dst_s[3]);
    };
    return tie(*this) < tie(o);
  }
};

/// The matmul primitive of src_md x wei_md -> dst_md (no bias) and its three memory objects (no
/// data handle yet). dnnl status on failure (out left empty).
dnnl_status_t FinishMatmul(dnnl_engine_t eng, const dnnl_memory_desc_t& src_md,
                           const dnnl_memory_desc_t& wei_md, const dnnl_memory_desc_t& dst_md,
                           MatmulPrim* out) {
  dnnl_matmul_desc_t desc;
  dnnl_status_t s = dnnl_matmul_desc_init(&desc, &src_md, &wei_md, nullptr, &dst_md);
  MatmulPrim p;
  if (s == dnnl_success) s = dnnl_primitive_desc_create(&p.pd, &desc, nullptr, eng, nullptr);
  if (s == dnnl_success) s = dnnl_primitive_create(&p.prim, p.pd);
  if (s == dnnl_success) s = dnnl_memory_create(&p.src, &src_md, eng, DNNL_MEMORY_NONE);
  if (s == dnnl_success) s = dnnl_memory_create(&p.wei, &wei_md, eng, DNNL_MEMORY_NONE);
  if (s == dnnl_success) s = dnnl_memory_create(&p.dst, &dst_md, eng, DNNL_MEMORY_NONE);
  if (s != dnnl_success) {
    p.Release();
    return s;
  }
  *out = p;
  return dnnl_success;
}

/// Creates the matmul for `k` on `eng`. dnnl status on failure (prim left empty).
dnnl_status_t CreateMatmul(dnnl_engine_t eng, const MatmulKey& k, MatmulPrim* out) {
  dnnl_memory_desc_t src_md, wei_md, dst_md;
  const dnnl_dims_t sd = {k.b3, k.b2, k.M, k.K};
  const dnnl_dims_t wd = {1, 1, k.K, k.N};
  const dnnl_dims_t dd = {k.b3, k.b2, k.M, k.N};
  const dnnl_dims_t ws = {k.K * k.N, k.K * k.N, k.wei_s[0], k.wei_s[1]};
  dnnl_status_t s = dnnl_memory_desc_init_by_strides(&src_md, 4, sd, k.wt, k.src_s);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&wei_md, 4, wd, k.wt, ws);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&dst_md, 4, dd, dnnl_f32, k.dst_s);
  if (s != dnnl_success) return s;
  return FinishMatmul(eng, src_md, wei_md, dst_md, out);
}

/// The matmul of `k` (layout kLayoutOneDnnBlocked) for M x K activations with row stride
/// k.src_s[2], the K x N weights in `wei_md` (oneDNN's blocked layout) and M x N F32 results with
/// row stride k.dst_s[2]. dnnl status on failure (prim left empty).
dnnl_status_t CreateBlockedMatmul(dnnl_engine_t eng, const MatmulKey& k, const dnnl_memory_desc_t& wei_md,
                                  MatmulPrim* out) {
  dnnl_memory_desc_t src_md, dst_md;
  const dnnl_dims_t sd = {k.M, k.K}, dd = {k.M, k.N};
  const dnnl_dims_t ss = {k.src_s[2], 1}, ds = {k.dst_s[2], 1};
  dnnl_status_t s = dnnl_memory_desc_init_by_strides(&src_md, 2, sd, k.wt, ss);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&dst_md, 2, dd, dnnl_f32, ds);
  if (s != dnnl_success) return s;
  return FinishMatmul(eng, src_md, wei_md, dst_md, out);
}

class OneDnnBackend final : public Backend {
 public:
  OneDnnBackend(std::string name, int n_threads)
      : name_(std::move(name)), n_threads_(n_threads < 1 ? 1 : n_threads), dnnl_(std::make_shared<Dnnl>()) {
    engine_ = dnnl_->engine;
    stream_ = dnnl_->stream;
    engine_status_ = dnnl_->status;
    cpu_.n_threads = n_threads_;
  }
  ~OneDnnBackend() override {
    for (auto& [k, p] : prims_) p.Release();
  }

  const std::string& name() const override { return name_; }
  bool CanAccess(const Buffer& buf) const override {
    if (buf.is_host()) return true;
    const auto* own = dynamic_cast<const OneDnnBuffer*>(&buf);
    return own != nullptr && own->is_weight_buffer();
  }

  Result<std::unique_ptr<Buffer>> Allocate(const std::string& buft, uint64_t size,
                                           uint64_t alignment) override {
    return OneDnnBuffer::Allocate(size, alignment, buft == kOneDnnBuft, dnnl_, n_threads_);
  }

  Status Compute(const NodeCall& c) override {
    if (c.op != GgmlOp::MUL_MAT)
      return Unimplemented(name_ + ": op " + GgmlOpName(c.op) + " (node '" + c.name +
                           "') runs on the CPU backend; the oneDNN backend only runs MUL_MAT");
    for (int i = 0; i < GetOpTraits(c.op).min_srcs; ++i)  // a and b
      if (!c.has_src[i]) return InvalidArgument(name_ + ": MUL_MAT needs two sources");
    return MulMat(c.src[0], c.src[1], c.dst);
  }

 private:
  /// src1 as the matmul reads it: data and byte strides nb[0..3] (src1's own, or a scratch's).
  struct Activations {
    const uint8_t* data = nullptr;
    size_t nb[4] = {0, 0, 0, 0};
  };

  /// d = a x b as ggml_mul_mat (a: src0 [K, N, ne02, ne03] F32/BF16/F16 weights, plain or
  /// oneDNN-blocked; b: src1 [K, M, ne12, ne13] F32; d: [N, M, ne12, ne13] F32).
  Status MulMat(const TensorView& a, const TensorView& b, const TensorView& d);
  /// InvalidArgument "MUL_MAT: <what> (src0 .., src1 .., dst ..)".
  static Status MulMatError(const TensorView& a, const TensorView& b, const TensorView& d,
                            const std::string& what);
  /// The engine, types, layouts, shapes and strides MulMat accepts; the first violation as an error.
  Status CheckMulMat(const TensorView& a, const TensorView& b, const TensorView& d) const;
  /// src1 as read directly (F32 weights, nb10 = 4, rows far enough apart for the blocked path) or
  /// gathered into the contiguous scratch conv_ / gather_ (converted to the weight type: ggml's
  /// vec_dot_type), on `nt` threads. Internal when a conversion fails.
  Result<Activations> PrepareActivations(const TensorView& a, const TensorView& b, int nt);
  /// The matmul of `key` from the cache prims_ (created, and the cache emptied past 256 entries,
  /// when missing): blocked over the weights descriptor `blocked_wei_md`, or plain when it is null.
  /// Unimplemented naming a and b when oneDNN has no such matmul.
  Result<MatmulPrim*> CachedMatmul(const MatmulKey& key, const dnnl_memory_desc_t* blocked_wei_md,
                                   const TensorView& a, const TensorView& b);
  /// Runs `p` on the given src / weights / dst data and waits. Internal on a oneDNN error.
  Status Execute(MatmulPrim& p, const void* src, const void* wei, void* dst);
  /// MulMat for oneDNN-blocked 2-D weights: one (M x K) x (K x N) matmul per src1 matrix.
  Status MulMatBlocked(const TensorView& a, const TensorView& b, const TensorView& d, const Activations& act);
  /// MulMat for plain weights: one matmul per src0 matrix over its broadcast src1 matrices.
  Status MulMatPlain(const TensorView& a, const TensorView& b, const TensorView& d, const Activations& act);
  /// The blocked weights descriptor of src0 `a` (cached per type and shape).
  Result<const dnnl_memory_desc_t*> BlockedMd(const TensorView& a);

  std::string name_;
  int n_threads_;
  std::shared_ptr<Dnnl> dnnl_;
  std::map<std::tuple<int, int64_t, int64_t>, dnnl_memory_desc_t> blocked_mds_;
  dnnl_engine_t engine_ = nullptr;
  dnnl_stream_t stream_ = nullptr;
  dnnl_status_t engine_status_ = dnnl_success;
  std::map<MatmulKey, MatmulPrim> prims_;
  std::vector<uint8_t> conv_;  // src1 converted to the weight type (BF16 / F16)
  std::vector<float> gather_;  // src1 made row-contiguous when nb10 != 4
  cpu::ComputeContext cpu_;
};

Status OneDnnBackend::MulMat(const TensorView& a, const TensorView& b, const TensorView& d) {
  STOWAGE_RETURN_IF_ERROR(CheckMulMat(a, b, d));
  if (d.nelements() == 0) return Status::Ok();
  if (a.data == nullptr || b.data == nullptr || d.data == nullptr) return MulMatError(a, b, d, "null data");
  const int64_t K = a.ne[0], N = a.ne[1], M = b.ne[1];
  if (K == 0) {
    for (int64_t i3 = 0; i3 < d.ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < d.ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < d.ne[1]; ++i1)
          std::memset(static_cast<uint8_t*>(d.data) + i3 * d.nb[3] + i2 * d.nb[2] + i1 * d.nb[1], 0, N * 4);
    return Status::Ok();
  }

  // Small products (a tiny model's, or tg of narrow layers) run on the calling thread: a oneDNN
  // parallel region costs more than their arithmetic, and on a loaded machine every region waits
  // for a descheduled team member (stories260K at 2 threads next to two other jobs: 198 t/s
  // instead of 4235 with one thread). The CPU backend's ParallelFor has the same rule. Creation
  // and execution of a primitive run under the same count (the shape decides it).
  const int64_t macs = M * N * K * b.ne[2] * b.ne[3];
  const int nt = macs < kMinParallelMacs ? 1 : n_threads_;
  OmpThreads threads(nt);
  STOWAGE_ASSIGN_OR_RETURN(const Activations act, PrepareActivations(a, b, nt));
  if (a.layout == kLayoutOneDnnBlocked) return MulMatBlocked(a, b, d, act);
  return MulMatPlain(a, b, d, act);
}

Status OneDnnBackend::MulMatError(const TensorView& a, const TensorView& b, const TensorView& d,
                                  const std::string& what) {
  return InvalidArgument("MUL_MAT: " + what + " (src0 " + Shape(a) + ", src1 " + Shape(b) + ", dst " +
                         Shape(d) + ")");
}

Status OneDnnBackend::CheckMulMat(const TensorView& a, const TensorView& b, const TensorView& d) const {
  auto fail = [&](const std::string& what) { return MulMatError(a, b, d, what); };
  if (engine_status_ != dnnl_success)
    return Unavailable(name_ + ": oneDNN CPU engine: " + DnnlError(engine_status_));
  if (DnnlType(a.type) == dnnl_data_type_undef)
    return Unimplemented(name_ + ": MUL_MAT with src0 of type " + GgmlTypeName(a.type) +
                         " (oneDNN runs F32, BF16, F16 weights)");
  const bool blocked = a.layout == kLayoutOneDnnBlocked;
  if (a.layout != cpu::kLayoutPlain && !blocked)
    return fail("src0 layout " + std::to_string(a.layout) +
                " is not one this backend reads (plain, oneDNN blocked)");
  if (blocked && (a.ne[2] != 1 || a.ne[3] != 1)) return fail("a oneDNN-blocked src0 must be 2-D");
  if (b.type != GgmlType::F32 || d.type != GgmlType::F32) return fail("src1 and dst must be F32");
  const int64_t K = a.ne[0], N = a.ne[1], M = b.ne[1];
  if (b.ne[0] != K) return fail("src0 ne0 != src1 ne0");
  if (d.ne[0] != N || d.ne[1] != M || d.ne[2] != b.ne[2] || d.ne[3] != b.ne[3])
    return fail("dst shape is not [ne01, ne11, ne12, ne13]");
  if (a.ne[2] <= 0 || a.ne[3] <= 0 || b.ne[2] % a.ne[2] != 0 || b.ne[3] % a.ne[3] != 0)
    return fail("src1 ne2/ne3 must be multiples of src0's (broadcast)");
  const size_t wsz = GetTypeTraits(a.type).type_size;
  if (a.nb[0] != wsz || a.nb[1] % wsz != 0 || a.nb[2] % wsz != 0 || a.nb[3] % wsz != 0)
    return fail("src0 rows must be contiguous with element-aligned strides");
  if (d.nb[0] != 4 || d.nb[1] % 4 || d.nb[2] % 4 || d.nb[3] % 4)
    return fail("dst must have nb0 = 4 and float-aligned strides");
  if (b.nb[1] % 4 || b.nb[2] % 4 || b.nb[3] % 4 || b.nb[0] % 4)
    return fail("src1 strides must be float-aligned");
  return Status::Ok();
}

Result<OneDnnBackend::Activations> OneDnnBackend::PrepareActivations(const TensorView& a, const TensorView& b,
                                                                     int nt) {
  // Activations as the matmul reads them: F32 with their strides (rows made contiguous when nb10 != 4),
  // or converted to the weight type into a contiguous [K, M, ne12, ne13] scratch (ggml's vec_dot_type).
  const int64_t K = a.ne[0], M = b.ne[1];
  const int64_t ne12 = b.ne[2], ne13 = b.ne[3];
  const bool blocked = a.layout == kLayoutOneDnnBlocked;
  Activations act;
  act.data = static_cast<const uint8_t*>(b.data);
  for (int i = 0; i < 4; ++i) act.nb[i] = b.nb[i];
  const int64_t rows = M * ne12 * ne13;
  // The blocked path reads each src1 matrix as M rows of K values, rows at least K apart.
  const bool gather =
      a.type != GgmlType::F32 || b.nb[0] != 4 || (blocked && b.nb[1] < static_cast<size_t>(K) * 4);
  if (!gather) return act;
  const size_t esz = a.type == GgmlType::F32 ? 4 : 2;
  std::vector<uint8_t>& buf = conv_;
  if (a.type == GgmlType::F32) {
    gather_.resize(static_cast<size_t>(rows * K));
  } else {
    buf.resize(static_cast<size_t>(rows * K) * esz);
  }
  uint8_t* out = a.type == GgmlType::F32 ? reinterpret_cast<uint8_t*>(gather_.data()) : buf.data();
  int bad = 0;
#pragma omp parallel for num_threads(nt) reduction(| : bad) schedule(static) if (nt > 1 && rows * K >= 8192)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i1 = r % M, i2 = (r / M) % ne12, i3 = r / (M * ne12);
    const uint8_t* row = static_cast<const uint8_t*>(b.data) + i3 * b.nb[3] + i2 * b.nb[2] + i1 * b.nb[1];
    std::vector<float> tmp;
    const float* f = reinterpret_cast<const float*>(row);
    if (b.nb[0] != 4) {
      tmp.resize(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) std::memcpy(&tmp[k], row + k * b.nb[0], 4);
      f = tmp.data();
    }
    uint8_t* o = out + static_cast<size_t>(r * K) * esz;
    if (a.type == GgmlType::F32) {
      std::memcpy(o, f, static_cast<size_t>(K) * 4);
    } else if (!cpu::QuantizeRow(a.type, f, o, K).ok()) {
      bad = 1;
    }
  }
  if (bad) return Internal(name_ + ": MUL_MAT: converting src1 to " + GgmlTypeName(a.type) + " failed");
  act.data = out;
  act.nb[0] = esz;
  act.nb[1] = static_cast<size_t>(K) * esz;
  act.nb[2] = act.nb[1] * M;
  act.nb[3] = act.nb[2] * ne12;
  return act;
}

Result<MatmulPrim*> OneDnnBackend::CachedMatmul(const MatmulKey& key,
                                                const dnnl_memory_desc_t* blocked_wei_md, const TensorView& a,
                                                const TensorView& b) {
  auto it = prims_.find(key);
  if (it == prims_.end()) {
    if (prims_.size() >= 256) {  // bounded: shapes change with n_tokens / n_kv
      for (auto& [k, p] : prims_) p.Release();
      prims_.clear();
    }
    MatmulPrim p;
    const dnnl_status_t s = blocked_wei_md ? CreateBlockedMatmul(engine_, key, *blocked_wei_md, &p)
                                           : CreateMatmul(engine_, key, &p);
    if (s != dnnl_success)
      return Unimplemented(name_ + ": oneDNN matmul for " + (blocked_wei_md ? "blocked " : "") + "src0 " +
                           Shape(a) + " x src1 " + Shape(b) + ": " + DnnlError(s));
    it = prims_.emplace(key, p).first;
  }
  return &it->second;
}

Status OneDnnBackend::Execute(MatmulPrim& p, const void* src, const void* wei, void* dst) {
  dnnl_memory_set_data_handle(p.src, const_cast<void*>(src));
  dnnl_memory_set_data_handle(p.wei, const_cast<void*>(wei));
  dnnl_memory_set_data_handle(p.dst, dst);
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.wei}, {DNNL_ARG_DST, p.dst}};
  dnnl_status_t st = dnnl_primitive_execute(p.prim, stream_, 3, args);
  if (st == dnnl_success) st = dnnl_stream_wait(stream_);
  if (st != dnnl_success) return Internal(name_ + ": oneDNN matmul execution: " + DnnlError(st));
  return Status::Ok();
}

Status OneDnnBackend::MulMatBlocked(const TensorView& a, const TensorView& b, const TensorView& d,
                                    const Activations& act) {
  // oneDNN's blocked weights: one 2-D matmul (M x K) x (K x N) per src1 matrix (i12, i13).
  const size_t asz = a.type == GgmlType::F32 ? 4 : 2;
  STOWAGE_ASSIGN_OR_RETURN(const dnnl_memory_desc_t* wmd, BlockedMd(a));
  MatmulKey key;
  std::memset(&key, 0, sizeof(key));
  key.layout = kLayoutOneDnnBlocked;
  key.wt = DnnlType(a.type);
  key.b3 = key.b2 = 1;
  key.M = b.ne[1];
  key.K = a.ne[0];
  key.N = a.ne[1];
  key.src_s[2] = static_cast<dnnl_dim_t>(act.nb[1] / asz);
  key.dst_s[2] = static_cast<dnnl_dim_t>(d.nb[1] / 4);
  STOWAGE_ASSIGN_OR_RETURN(MatmulPrim * p, CachedMatmul(key, wmd, a, b));
  for (int64_t i3 = 0; i3 < b.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < b.ne[2]; ++i2)
      STOWAGE_RETURN_IF_ERROR(Execute(*p, act.data + i3 * act.nb[3] + i2 * act.nb[2], a.data,
                                      static_cast<uint8_t*>(d.data) + i3 * d.nb[3] + i2 * d.nb[2]));
  return Status::Ok();
}

Status OneDnnBackend::MulMatPlain(const TensorView& a, const TensorView& b, const TensorView& d,
                                  const Activations& act) {
  // One 4-D matmul per src0 matrix (i02, i03), its src1 batch broadcast over r2 x r3 matrices.
  const size_t asz = a.type == GgmlType::F32 ? 4 : 2;
  const size_t wsz = GetTypeTraits(a.type).type_size;
  const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
  MatmulKey key;
  std::memset(&key, 0, sizeof(key));
  key.wt = DnnlType(a.type);
  key.b3 = r3;
  key.b2 = r2;
  key.M = b.ne[1];
  key.K = a.ne[0];
  key.N = a.ne[1];
  key.src_s[0] = static_cast<dnnl_dim_t>(act.nb[3] / asz);
  key.src_s[1] = static_cast<dnnl_dim_t>(act.nb[2] / asz);
  key.src_s[2] = static_cast<dnnl_dim_t>(act.nb[1] / asz);
  key.src_s[3] = static_cast<dnnl_dim_t>(act.nb[0] / asz);
  key.wei_s[0] = 1;
  key.wei_s[1] = static_cast<dnnl_dim_t>(a.nb[1] / wsz);
  key.dst_s[0] = static_cast<dnnl_dim_t>(d.nb[3] / 4);
  key.dst_s[1] = static_cast<dnnl_dim_t>(d.nb[2] / 4);
  key.dst_s[2] = static_cast<dnnl_dim_t>(d.nb[1] / 4);
  key.dst_s[3] = 1;
  STOWAGE_ASSIGN_OR_RETURN(MatmulPrim * p, CachedMatmul(key, nullptr, a, b));
  for (int64_t i03 = 0; i03 < a.ne[3]; ++i03)
    for (int64_t i02 = 0; i02 < a.ne[2]; ++i02)
      STOWAGE_RETURN_IF_ERROR(
          Execute(*p, act.data + i03 * r3 * act.nb[3] + i02 * r2 * act.nb[2],
                  static_cast<const uint8_t*>(a.data) + i03 * a.nb[3] + i02 * a.nb[2],
                  static_cast<uint8_t*>(d.data) + i03 * r3 * d.nb[3] + i02 * r2 * d.nb[2]));
  return Status::Ok();
}

Result<const dnnl_memory_desc_t*> OneDnnBackend::BlockedMd(const TensorView& a) {
  const auto key = std::make_tuple(static_cast<int>(a.type), a.ne[0], a.ne[1]);
  auto it = blocked_mds_.find(key);
  if (it == blocked_mds_.end()) {
    const LayoutChoice c = ChooseLayout(engine_, a.type, a.ne[0], a.ne[1]);
    if (!c.info.blocked)
      return FailedPrecondition(
          name_ + ": src0 " + Shape(a) +
          " is marked oneDNN-blocked but oneDNN prefers no blocked layout for it here (" +
          (c.info.format.empty() ? "no matmul" : c.info.format) + ")");
    it = blocked_mds_.emplace(key, c.md).first;
  }
  return &it->second;
}

}  // namespace

OneDnnWeightLayout OneDnnWeightLayoutFor(GgmlType type, int64_t K, int64_t N) {
  Dnnl dnnl;
  if (dnnl.status != dnnl_success) return {};
  return ChooseLayout(dnnl.engine, type, K, N).info;
}

std::unique_ptr<Backend> CreateOneDnnBackend(const std::string& name, int n_threads) {
  return std::make_unique<OneDnnBackend>(name, n_threads);
}

bool OneDnnSupportsMulMatType(GgmlType type) {
  const dnnl_data_type_t wt = DnnlType(type);
  if (wt == dnnl_data_type_undef) return false;
  dnnl_engine_t eng = nullptr;
  if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return false;
  MatmulKey k;
  std::memset(&k, 0, sizeof(k));
  k.wt = wt;
  k.b3 = k.b2 = 1;
  k.M = k.K = k.N = 32;
  k.src_s[0] = k.src_s[1] = 32 * 32;
  k.src_s[2] = 32;
  k.src_s[3] = 1;
  k.wei_s[0] = 1;
  k.wei_s[1] = 32;
  k.dst_s[0] = k.dst_s[1] = 32 * 32;
  k.dst_s[2] = 32;
  k.dst_s[3] = 1;
  MatmulPrim p;
  const bool ok = CreateMatmul(eng, k, &p) == dnnl_success;
  p.Release();
  dnnl_engine_destroy(eng);
  return ok;
}

}  // namespace stowage::exec
