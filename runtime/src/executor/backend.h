// Internal backend interface of the executor (one implementation per folder under src/backends,
// like ggml's backend / buffer split). A backend owns buffers of its buffer types and runs graph
// nodes whose tensors live in memory it can read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stowage/runtime/ggml_op_params.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/status.h"
#include "tensor_view.h"

namespace stowage::exec {

/// A block of memory owned (or wrapped) by a backend.
class Buffer {
 public:
  virtual ~Buffer() = default;
  /// Base address the backend's kernels use.
  virtual uint8_t* base() = 0;
  virtual uint64_t size() const = 0;
  /// True when base() is addressable from the host (CPU); false for device memory.
  virtual bool is_host() const = 0;
  /// Host -> buffer and buffer -> host copies (bytes).
  virtual Status Write(uint64_t offset, const void* src, uint64_t n) = 0;
  virtual Status Read(uint64_t offset, void* dst, uint64_t n) const = 0;
  /// Row-split buffer types (CUDA<i>_Split): the per-device proportions the plan gives the buffer
  /// (plan Buffer.tensor_split, llama.cpp -ts as passed to ggml_backend_split_buffer_type; empty or
  /// all zero = ggml's default, each device's total memory). Called once, before any upload.
  /// Errors: kInvalidArgument for a negative or non-finite entry. Other buffers ignore it.
  virtual Status SetTensorSplit(const std::vector<float>& proportions) {
    (void)proportions;
    return Status::Ok();
  }
  /// Uploads one whole weight (ggml's set_tensor of a buffer type that converts on upload, such as
  /// the CPU repack buffer or llama.cpp's AMX buffer): `view` describes the tensor in ggml's plain
  /// layout (type, ne, contiguous nb; view.data = base() + offset), `data` holds its
  /// RowSize(type, ne0) * nrows plain bytes. The buffer may store it in another layout of at most
  /// that many bytes at `offset`; it returns the layout it stored (TensorView::layout for the
  /// kernels of its backend: kLayoutPlain, or a backend-specific value such as
  /// exec::kLayoutOneDnnBlocked). Default: Write(offset, data, nbytes), kLayoutPlain.
  /// Errors: kOutOfRange outside the buffer; the buffer's conversion errors.
  virtual Result<int> WriteTensor(const TensorView& view, uint64_t offset, const void* data) {
    const uint64_t n = RowSize(view.type, view.ne[0]) * static_cast<uint64_t>(view.nrows());
    STOWAGE_RETURN_IF_ERROR(Write(offset, data, n));
    return kLayoutPlain;
  }
};

/// One node as the backend sees it: op, params, bound sources and destination.
struct NodeCall {
  GgmlOp op = GgmlOp::NONE;
  const char* name = "";
  TensorView dst;
  static constexpr int kMaxSrc = 6;  ///< SSM_SCAN has six sources (ggml's GGML_MAX_SRC is 10)
  TensorView src[kMaxSrc];
  bool has_src[kMaxSrc] = {false, false, false, false, false, false};
  const int32_t* iparams = nullptr;
  size_t n_iparams = 0;
  const float* fparams = nullptr;
  size_t n_fparams = 0;
  /// The parameters, for the decodes of ggml_op_params.h.
  OpParamsRef params() const { return OpParamsRef(iparams, n_iparams, fparams, n_fparams); }
};

/// A point in a backend's queue (ggml_backend_event): everything queued on that backend before the
/// event was recorded. Made by Backend::RecordEvent; may be waited on by any backend or the host.
class Event {
 public:
  virtual ~Event() = default;
  /// Blocks the calling thread until the recorded work has completed (ggml_backend_event_synchronize).
  /// Errors: the backend's failure of that work (e.g. a CUDA error), as a one-line message.
  virtual Status HostWait() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  /// Allocates `size` bytes (zeroed) for buffer type `buft`. Errors: kResourceExhausted.
  virtual Result<std::unique_ptr<Buffer>> Allocate(const std::string& buft, uint64_t size,
                                                   uint64_t alignment) = 0;
  /// Runs one node. Errors: kUnimplemented for an op/type combination the backend lacks.
  virtual Status Compute(const NodeCall& call) = 0;
  /// True when this backend's kernels can read and write `buf` in place (ggml supports_buft).
  virtual bool CanAccess(const Buffer& buf) const = 0;
  /// Waits for queued work (no-op for synchronous backends).
  virtual Status Synchronize() { return Status::Ok(); }

  // Asynchronous execution (ggml_backend's *_async calls and events). A synchronous backend (the
  // CPU, oneDNN) keeps these defaults: everything is done when a call returns. An asynchronous
  // backend (CUDA streams, the test backend's worker thread) runs Compute, WriteAsync and ReadAsync
  // in the order they were issued, after the call returned; the session orders work across
  // backends and the host with events (session_splits.cpp RunSplits).

  /// True when Compute / WriteAsync / ReadAsync may return before the work is done.
  virtual bool is_async() const { return false; }
  /// Queues a copy of `n` bytes from host memory `src` into `dst` (a buffer of this backend) at
  /// byte `offset` (ggml_backend_tensor_set_async). `src` must stay unchanged and alive until an
  /// event recorded after this call completes. Errors: kOutOfRange outside `dst`, backend errors.
  /// Default: dst.Write (synchronous).
  virtual Status WriteAsync(Buffer& dst, uint64_t offset, const void* src, uint64_t n) {
    return dst.Write(offset, src, n);
  }
  /// Queues a copy of `n` bytes at byte `offset` of `src` (a buffer of this backend) into host
  /// memory `dst` (ggml_backend_tensor_get_async), after the work queued before it. `dst` holds the
  /// bytes once an event recorded after this call completes. Default: src.Read (synchronous).
  virtual Status ReadAsync(Buffer& src, uint64_t offset, void* dst, uint64_t n) {
    return src.Read(offset, dst, n);
  }
  /// Records an event after the work queued so far (ggml_backend_event_record). Returns nullptr
  /// for a synchronous backend (nothing is pending). Errors: event creation failures.
  virtual Result<std::shared_ptr<Event>> RecordEvent() { return std::shared_ptr<Event>(); }
  /// Queues a copy of `n` bytes from `src` (a buffer of backend `from`, another backend) at
  /// `src_offset` into `dst` (a buffer of this backend) at `dst_offset` without host staging
  /// (ggml's cpy_tensor_async, e.g. a CUDA peer copy). The copy runs after the work queued so far on
  /// both backends, and work queued later on either backend runs after it. Returns false, queuing
  /// nothing, when this backend cannot copy from `from` directly (the caller stages through host
  /// memory). Errors: kOutOfRange outside a buffer, backend errors.
  virtual Result<bool> CopyFromAsync(Backend& from, Buffer& src, uint64_t src_offset, Buffer& dst,
                                     uint64_t dst_offset, uint64_t n) {
    (void)from, (void)src, (void)src_offset, (void)dst, (void)dst_offset, (void)n;
    return false;
  }
  /// Makes the work queued on this backend from now on wait for `ev` (ggml_backend_event_wait),
  /// `ev` possibly from another backend. Default (and for events this backend cannot wait on in
  /// its queue): the host waits for `ev`.
  virtual Status WaitEvent(Event& ev) { return ev.HostWait(); }
};

/// Creates backends for plan devices that are not built into this runtime (test-only devices).
/// Passed through SessionOptions::backend_factory; consulted before the built-in backends.
class BackendFactory {
 public:
  virtual ~BackendFactory() = default;
  /// A backend for device `name` of `type` ("CPU", "GPU", "ACCEL"), or nullptr to decline.
  virtual std::unique_ptr<Backend> Create(const std::string& name, const std::string& type,
                                          int n_threads) = 0;
};

/// Host memory buffer (aligned allocation or a wrapped range of the file mapping); defined with the
/// CPU backend (runtime/src/backends/cpu/host_buffer.cpp), whose buffer types it implements.
class HostBuffer final : public Buffer {
 public:
  static Result<std::unique_ptr<HostBuffer>> Allocate(uint64_t size, uint64_t alignment);
  /// Wraps [data, data + size) of the model's read-only file mapping (a mapped buffer of the plan)
  /// without copying it; the 2 MiB-aligned interior is madvise(MADV_HUGEPAGE)d, a hint that lets
  /// kernels whose page cache holds large folios map it with huge pages. With
  /// `copy_to_huge_pages`, that interior is instead replaced in place by a read-only anonymous copy
  /// in transparent huge pages (same addresses and bytes; skipped when THP is off, when it would
  /// take more than half of MemAvailable, or when the range is not a read-only file mapping).
  static std::unique_ptr<HostBuffer> Wrap(const uint8_t* data, uint64_t size,
                                          bool copy_to_huge_pages = false);
  ~HostBuffer() override;
  uint8_t* base() override { return data_; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return true; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override;
  Status Read(uint64_t offset, void* dst, uint64_t n) const override;

 private:
  HostBuffer() = default;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool owned_ = false;
};

/// The CPU backend: stowage_cpu kernels, `n_threads` OpenMP threads; `llamacpp_numerics`: matrix
/// products in llama.cpp's CPU summation orders (cpu::ComputeContext::llamacpp_numerics);
/// `max_isa`: the highest kernel level used (SessionOptions::cpu_max_isa).
std::unique_ptr<Backend> CreateCpuBackend(int n_threads, bool llamacpp_numerics = false,
                                          CpuIsa max_isa = CpuIsa::kAvx512Vnni);

/// The backend this build provides for a planned device (`type` "CPU", "GPU" or "ACCEL"; `name`
/// as in the plan, e.g. "CUDA0"), or nullptr when it has none (builtin_backends.cpp).
/// `llamacpp_numerics` and `cpu_max_isa` apply to the CPU backend (SessionOptions).
std::unique_ptr<Backend> CreateBuiltinBackend(const std::string& name, const std::string& type, int n_threads,
                                              bool llamacpp_numerics = false,
                                              CpuIsa cpu_max_isa = CpuIsa::kAvx512Vnni);
/// Comma-separated names of the device kinds this build can run ("CPU, CUDA, oneDNN").
std::string BuiltinBackendNames();

}  // namespace stowage::exec
