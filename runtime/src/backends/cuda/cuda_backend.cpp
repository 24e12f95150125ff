// GPU backend (see cuda_backend.h): buffers, op dispatch with shape/type checks, cuBLAS matmuls and
// the row-split weights. Host C++; the kernels are in kernels.cu.
#include "cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>

#include "cuda_op_table.h"
#include "kernels.h"
#include "moe_rows.h"
#include "ops.h"
#include "split_views.h"
#include "tensor_tv.h"

namespace stowage::exec {
namespace {

using cuda::ToTv;
using cuda::Tv;

std::string Shape(const TensorView& t) {
  return std::string(GgmlTypeName(t.type)) + "[" + std::to_string(t.ne[0]) + "," + std::to_string(t.ne[1]) +
         "," + std::to_string(t.ne[2]) + "," + std::to_string(t.ne[3]) + "]";
}

Status CudaStatus(cudaError_t e, const std::string& where) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(where + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
Status CublasStatus(cublasStatus_t s, const std::string& where) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(where + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// cuBLAS is loaded when a device first runs a cuBLAS product (DeviceCtx::Blas), not linked:
// libcublasLt's static initializers touch ~130 MiB (its .bss and text) at process start, which every
// run of a CUDA-enabled build paid, CPU-only ones included (llama.cpp loads its CUDA backend with
// dlopen for the same reason). The four entry points this backend calls, with the header's
// signatures.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // (cublasGemmEx is overloaded in C++: the header adds an inline cudaDataType-compute variant)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*,
                            void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  std::string error;  ///< why loading failed (empty when loaded)
};

CublasApi LoadCublasApi() {
  CublasApi api;
  // The SONAME of the toolkit this was built with (found through the executable's RUNPATH or the
  // loader's paths), then cuBLAS's folder at build time (STOWAGE_CUBLAS_DIR, CMakeLists.txt here).
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* e = h == nullptr ? dlerror() : nullptr;
  std::string why = soname + ": " + (e ? e : "unknown error");
#ifdef STOWAGE_CUBLAS_DIR
  if (h == nullptr) {
    const std::string path = std::string(STOWAGE_CUBLAS_DIR) + "/" + soname;
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    e = h == nullptr ? dlerror() : nullptr;
    why += "; " + path + ": " + (e ? e : "unknown error");
  }
#endif
  if (h == nullptr) {
    api.error = "cannot load cuBLAS (" + why + ")";
    return api;
  }
  auto sym = [&](const char* name, auto* fn) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
    if (*fn == nullptr && api.error.empty()) api.error = soname + " has no symbol " + name;
  };
  sym("cublasCreate_v2", &api.create);
  sym("cublasDestroy_v2", &api.destroy);
  sym("cublasSetStream_v2", &api.set_stream);
  sym("cublasGemmEx", &api.gemm_ex);
  return api;  // the handle stays open for the process (as a linked library would)
}

/// The process's cuBLAS entry points, loaded once (thread-safe static initialization; immutable
/// afterwards). Errors: kFailedPrecondition naming the library and the loader's message.
Result<const CublasApi*> Cublas() {
  static const CublasApi api = LoadCublasApi();
  if (!api.error.empty()) return FailedPrecondition("CUDA backend: " + api.error);
  return &api;
}

/// A 2-D copy (`height` rows of `width` bytes at pitches dpitch / spitch) from device src_dev to
/// device dst_dev on `stream`. There is no cudaMemcpy2DPeerAsync, and cudaMemcpy2DAsync between two
/// devices needs peer access (which this backend does not enable): cudaMemcpy3DPeerAsync with depth
/// 1, as ggml-cuda does for its split-buffer gathers.
cudaError_t Memcpy2DPeerAsync(void* dst, int dst_dev, size_t dpitch, const void* src, int src_dev,
                              size_t spitch, size_t width, size_t height, cudaStream_t stream) {
  cudaMemcpy3DPeerParms p = {};
  p.dstDevice = dst_dev;
  p.dstPtr = make_cudaPitchedPtr(dst, dpitch, width, height);
  p.srcDevice = src_dev;
  p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), spitch, width, height);
  p.extent = make_cudaExtent(width, height, 1);
  return cudaMemcpy3DPeerAsync(&p, stream);
}

/// Per-device execution state: stream, cuBLAS handle, growable scratch (stream-ordered reuse).
struct DeviceCtx {
  // kMoe*: MUL_MAT_ID's batched path (its gathered src1, the experts' products, the pair list),
  // apart from the slots of the MUL_MATs it runs on them. kGluUp: MUL_MAT_GLU's up product (apart
  // from the slots of its two MUL_MATs).
  enum {
    kConvX = 0,
    kDequantW = 1,
    kSplitX = 2,
    kSplitDst = 3,
    kMoeX = 4,
    kMoeOut = 5,
    kMoePairs = 6,
    kGluUp = 7,
    kSlots = 8
  };
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  const CublasApi* blas = nullptr;  ///< set before `cublas` is created
  cublasHandle_t cublas = nullptr;  ///< made on first use (Blas())
  void* scratch[kSlots] = {};
  size_t scratch_size[kSlots] = {};
  /// Device-side error record of the GET_ROWS kernels (cuda::GetRows): {set, index, launch id}.
  int32_t* errors = nullptr;

  ~DeviceCtx() {
    cudaSetDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    for (void* p : scratch)
      if (p) cudaFree(p);
    if (errors) cudaFree(errors);
    if (cublas) blas->destroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }
  static Result<std::shared_ptr<DeviceCtx>> Create(int device) {
    auto c = std::make_shared<DeviceCtx>();
    c->device = device;
    c->name = "CUDA" + std::to_string(device);
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), c->name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                                       c->name + ": cudaStreamCreate"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&c->errors, 3 * sizeof(int32_t)), c->name + ": cudaMalloc"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(c->errors, 0, 3 * sizeof(int32_t), c->stream),
                                       c->name + ": cudaMemsetAsync"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(c->stream), c->name + ": cudaStreamSynchronize"));
    return c;
  }
  /// This device's cuBLAS handle on its stream, made (and cuBLAS loaded) on the first call, so a
  /// plan whose products all take the mat-vec kernels never loads it. Errors: kFailedPrecondition
  /// when cuBLAS cannot be loaded (names the library and the loader's messages); cuBLAS statuses.
  Status Blas() {
    if (cublas != nullptr) return Status::Ok();
    STOWAGE_ASSIGN_OR_RETURN(blas, Cublas());
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(CublasStatus(blas->create(&cublas), name + ": cublasCreate"));
    const cublasStatus_t st = blas->set_stream(cublas, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      blas->destroy(cublas);
      cublas = nullptr;
      return CublasStatus(st, name + ": cublasSetStream");
    }
    return Status::Ok();
  }

  /// Scratch slot `i` of at least `n` bytes (contents undefined). Growing waits for the stream.
  Result<void*> Scratch(int i, size_t n) {
    if (scratch_size[i] >= n && scratch[i]) return scratch[i];
    // cudaMalloc / cudaFree act on the current device: make it this one whatever the caller set.
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), name + ": cudaStreamSynchronize"));
    if (scratch[i]) cudaFree(scratch[i]);
    scratch[i] = nullptr;
    scratch_size[i] = 0;
    const size_t want = std::max<size_t>(n, 1 << 20);
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&scratch[i], want),
                                       name + ": cudaMalloc of " + std::to_string(want) + " scratch bytes"));
    scratch_size[i] = want;
    return scratch[i];
  }
};

/// CUDA<i>: device memory.
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(std::shared_ptr<DeviceCtx> ctx, uint8_t* p, uint64_t n)
      : ctx_(std::move(ctx)), data_(p), size_(n) {}
  ~CudaBuffer() override {
    cudaSetDevice(ctx_->device);
    cudaStreamSynchronize(ctx_->stream);
    cudaFree(data_);
  }
  uint8_t* base() override { return data_; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }
  int device() const { return ctx_->device; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset)
      return OutOfRange(ctx_->name + ": buffer write outside the buffer");
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), ctx_->name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(data_ + offset, src, n, cudaMemcpyHostToDevice, ctx_->stream),
                   ctx_->name + ": cudaMemcpyAsync host to device"));
    return CudaStatus(cudaStreamSynchronize(ctx_->stream),
                      ctx_->name + ": cudaStreamSynchronize after a write");
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset)
      return OutOfRange(ctx_->name + ": buffer read outside the buffer");
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), ctx_->name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(dst, data_ + offset, n, cudaMemcpyDeviceToHost, ctx_->stream),
                   ctx_->name + ": cudaMemcpyAsync device to host"));
    return CudaStatus(cudaStreamSynchronize(ctx_->stream),
                      ctx_->name + ": cudaStreamSynchronize after a read");
  }

 private:
  std::shared_ptr<DeviceCtx> ctx_;
  uint8_t* data_;
  uint64_t size_;
};

/// CUDA_Host: pinned host memory.
class CudaHostBuffer final : public Buffer {
 public:
  CudaHostBuffer(uint8_t* p, uint64_t n) : data_(p), size_(n) {}
  ~CudaHostBuffer() override { cudaFreeHost(data_); }
  uint8_t* base() override { return data_; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return true; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("CUDA_Host: buffer write outside the buffer");
    std::memcpy(data_ + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("CUDA_Host: buffer read outside the buffer");
    std::memcpy(dst, data_ + offset, n);
    return Status::Ok();
  }

 private:
  uint8_t* data_;
  uint64_t size_;
};

/// A cudaEvent_t recorded on a backend's stream (ggml-cuda's event_record / event_synchronize).
class CudaEvent final : public Event {
 public:
  CudaEvent(int device, cudaEvent_t ev) : device_(device), ev_(ev) {}
  ~CudaEvent() override {
    cudaSetDevice(device_);
    cudaEventDestroy(ev_);  // released by the driver once the recorded work completes
  }
  Status HostWait() override {
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaSetDevice(device_), "CUDA" + std::to_string(device_) + ": cudaSetDevice"));
    return CudaStatus(cudaEventSynchronize(ev_), "CUDA" + std::to_string(device_) + ": cudaEventSynchronize");
  }
  cudaEvent_t event() const { return ev_; }

 private:
  int device_;
  cudaEvent_t ev_;
};

/// One device's rows of a split weight.
struct SplitSlice {
  int device = 0;
  int64_t lo = 0, hi = 0;
  uint8_t* data = nullptr;  // (hi - lo) rows on `device`
};

/// CUDA<i>_Split: pinned host staging of the planned bytes; per-weight device slices made at first use.
class CudaSplitBuffer;
/// The split buffers a backend made (the backend finds them by address; each buffer removes itself).
using SplitRegistry = std::vector<CudaSplitBuffer*>;

class CudaSplitBuffer final : public Buffer {
 public:
  CudaSplitBuffer(std::string name, uint8_t* p, uint64_t n, std::shared_ptr<SplitRegistry> reg)
      : name_(std::move(name)), data_(p), size_(n), reg_(std::move(reg)) {
    reg_->push_back(this);
  }
  ~CudaSplitBuffer() override {
    reg_->erase(std::remove(reg_->begin(), reg_->end(), this), reg_->end());
    (void)DropSlices(0, size_);  // nothing to report to in a destructor
    cudaFreeHost(data_);
  }
  uint8_t* base() override { return data_; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }  // a device buffer type (ggml: not host)
  Status SetTensorSplit(const std::vector<float>& proportions) override {
    for (float f : proportions)
      if (!(f >= 0.f) || f > 1e30f)
        return InvalidArgument(name_ + ": tensor split proportion " + std::to_string(f) +
                               " is negative or not finite");
    STOWAGE_RETURN_IF_ERROR(DropSlices(0, size_));  // slices follow the split
    tensor_split_ = proportions;
    return Status::Ok();
  }
  /// The plan's proportions (empty: ggml's default).
  const std::vector<float>& tensor_split() const { return tensor_split_; }
  bool Contains(const void* p) const {
    const uint8_t* q = static_cast<const uint8_t*>(p);
    return q >= data_ && q < data_ + size_;
  }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset) return OutOfRange(name_ + ": buffer write outside the buffer");
    STOWAGE_RETURN_IF_ERROR(DropSlices(offset, offset + n));
    std::memcpy(data_ + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset) return OutOfRange(name_ + ": buffer read outside the buffer");
    std::memcpy(dst, data_ + offset, n);
    return Status::Ok();
  }
  /// The slices of the weight at `offset` (rows of `row_bytes`, `nrows` rows), made on first use.
  Result<const std::vector<SplitSlice>*> Slices(uint64_t offset, int64_t nrows, size_t row_bytes,
                                                const std::vector<float>& cum, int64_t rounding) {
    auto it = slices_.find(offset);
    if (it != slices_.end()) return &it->second.parts;
    Entry e;
    e.bytes = static_cast<uint64_t>(nrows) * row_bytes;
    for (int id = 0; id < static_cast<int>(cum.size()); ++id) {
      SplitSlice s;
      s.device = id;
      RowSplit(nrows, cum, rounding, id, &s.lo, &s.hi);
      if (s.hi <= s.lo) continue;
      const size_t n = static_cast<size_t>(s.hi - s.lo) * row_bytes;
      Status st = CudaStatus(cudaSetDevice(id), name_ + ": cudaSetDevice");
      if (st.ok())
        st = CudaStatus(cudaMalloc(&s.data, n),
                        name_ + ": cudaMalloc of a split slice on CUDA" + std::to_string(id));
      if (st.ok())
        st = CudaStatus(cudaMemcpy(s.data, data_ + offset + s.lo * row_bytes, n, cudaMemcpyHostToDevice),
                        name_ + ": uploading a split slice to CUDA" + std::to_string(id));
      if (!st.ok()) {
        if (s.data) cudaFree(s.data);
        for (auto& p : e.parts) cudaFree(p.data);
        return st;
      }
      e.parts.push_back(s);
    }
    return &slices_.emplace(offset, std::move(e)).first->second.parts;
  }

 private:
  struct Entry {
    uint64_t bytes = 0;
    std::vector<SplitSlice> parts;
  };
  /// Frees the device slices of the weights overlapping bytes [lo, hi) after their devices are idle
  /// (work queued on them may still read the slices). Goes on after an error; returns the first.
  Status DropSlices(uint64_t lo, uint64_t hi) {
    Status first = Status::Ok();
    for (auto it = slices_.begin(); it != slices_.end();) {
      if (it->first < hi && it->first + it->second.bytes > lo) {
        for (auto& p : it->second.parts) {
          const std::string dev = "CUDA" + std::to_string(p.device);
          Status st = CudaStatus(cudaSetDevice(p.device), name_ + ": cudaSetDevice(" + dev + ")");
          if (st.ok()) {
            const Status sync =
                CudaStatus(cudaDeviceSynchronize(), name_ + ": cudaDeviceSynchronize on " + dev);
            const Status freed =
                CudaStatus(cudaFree(p.data), name_ + ": cudaFree of a split slice on " + dev);
            st = sync.ok() ? freed : sync;
          }
          if (first.ok() && !st.ok()) first = st;
        }
        it = slices_.erase(it);
      } else {
        ++it;
      }
    }
    return first;
  }
  std::string name_;
  uint8_t* data_;
  uint64_t size_;
  std::map<uint64_t, Entry> slices_;
  std::shared_ptr<SplitRegistry> reg_;
  std::vector<float> tensor_split_;
};

bool IsFloatType(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<DeviceCtx> ctx, int n_devices)
      : ctx_(std::move(ctx)), name_(ctx_->name), n_devices_(n_devices) {}
  ~CudaBackend() override {
    for (auto& [d, e] : events_) {
      cudaEventDestroy(e.first);
      cudaEventDestroy(e.second);
    }
  }

  const std::string& name() const override { return name_; }

  bool CanAccess(const Buffer& buf) const override {
    if (const auto* b = dynamic_cast<const CudaBuffer*>(&buf)) return b->device() == ctx_->device;
    // Only this backend's split buffers: another backend's (CUDA<j>_Split) is not in splits_, and
    // its pinned staging would be read as if it were device memory.
    const auto* sb = dynamic_cast<const CudaSplitBuffer*>(&buf);
    return sb != nullptr && std::find(splits_->begin(), splits_->end(), sb) != splits_->end();
  }

  Result<std::unique_ptr<Buffer>> Allocate(const std::string& buft, uint64_t size,
                                           uint64_t alignment) override {
    const uint64_t n = std::max<uint64_t>(size, 1);
    if (alignment > 256)
      return InvalidArgument(name_ + ": buffer alignment " + std::to_string(alignment) +
                             " exceeds cudaMalloc's 256");
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    if (buft == "CUDA_Host" || buft == name_ + "_Split") {
      void* p = nullptr;
      cudaError_t e = cudaMallocHost(&p, n);
      if (e != cudaSuccess)
        return ResourceExhausted(name_ + ": cudaMallocHost of " + std::to_string(size) +
                                 " bytes: " + cudaGetErrorString(e));
      std::memset(p, 0, n);
      if (buft == "CUDA_Host")
        return std::unique_ptr<Buffer>(new CudaHostBuffer(static_cast<uint8_t*>(p), size));
      return std::unique_ptr<Buffer>(new CudaSplitBuffer(buft, static_cast<uint8_t*>(p), size, splits_));
    }
    if (buft != name_ && !buft.empty())
      return InvalidArgument(name_ + ": unknown buffer type '" + buft + "' (expected " + name_ +
                             ", CUDA_Host or " + name_ + "_Split)");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
      return ResourceExhausted(name_ + ": cudaMalloc of " + std::to_string(size) +
                               " bytes: " + cudaGetErrorString(e));
    // Zeroed on this backend's stream and waited for: a plain cudaMemset runs on the legacy default
    // stream, which does not order against the non-blocking streams of the backends, so a later
    // Write or kernel could run before the zeros land (and be overwritten by them).
    e = cudaMemsetAsync(p, 0, n, ctx_->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(ctx_->stream);
    if (e != cudaSuccess) {
      cudaFree(p);
      return CudaStatus(e, name_ + ": zeroing a new buffer (cudaMemsetAsync)");
    }
    return std::unique_ptr<Buffer>(new CudaBuffer(ctx_, static_cast<uint8_t*>(p), size));
  }

  // Waits for the stream, then reports the first out-of-range GET_ROWS index recorded by the kernels
  // since the last Synchronize (kOutOfRange, as the CPU backend's GET_ROWS; the rows got NaN).
  Status Synchronize() override {
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(ctx_->stream), name_ + ": cudaStreamSynchronize"));
    return CheckGetRowsErrors();
  }

  Status Compute(const NodeCall& c) override;

  // Asynchronous copies and events on this backend's stream (ggml-cuda set_tensor_async /
  // get_tensor_async / event_record / event_wait). Copies touch CUDA<i> buffers of this device;
  // other buffers (the split buffer's pinned staging, CUDA_Host) take the synchronous path.
  bool is_async() const override { return true; }
  Status WriteAsync(Buffer& dst, uint64_t offset, const void* src, uint64_t n) override {
    auto* b = dynamic_cast<CudaBuffer*>(&dst);
    if (b == nullptr || b->device() != ctx_->device) return dst.Write(offset, src, n);
    if (offset > b->size() || n > b->size() - offset)
      return OutOfRange(name_ + ": asynchronous write outside the buffer");
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    return CudaStatus(cudaMemcpyAsync(b->base() + offset, src, n, cudaMemcpyHostToDevice, ctx_->stream),
                      name_ + ": cudaMemcpyAsync host to device");
  }
  Status ReadAsync(Buffer& src, uint64_t offset, void* dst, uint64_t n) override {
    auto* b = dynamic_cast<CudaBuffer*>(&src);
    if (b == nullptr || b->device() != ctx_->device) return src.Read(offset, dst, n);
    if (offset > b->size() || n > b->size() - offset)
      return OutOfRange(name_ + ": asynchronous read outside the buffer");
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    return CudaStatus(cudaMemcpyAsync(dst, b->base() + offset, n, cudaMemcpyDeviceToHost, ctx_->stream),
                      name_ + ": cudaMemcpyAsync device to host");
  }
  Result<std::shared_ptr<Event>> RecordEvent() override {
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    cudaEvent_t ev = nullptr;
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), name_ + ": cudaEventCreate"));
    auto e = std::make_shared<CudaEvent>(ctx_->device, ev);  // owns ev from here on
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev, ctx_->stream), name_ + ": cudaEventRecord"));
    return std::shared_ptr<Event>(std::move(e));
  }
  // Device to device (ggml-cuda cpy_tensor_async): on this (the destination) stream after an event
  // of the source stream; the source stream then waits for the copy before its later work, which
  // may overwrite the source. cudaMemcpyPeerAsync between devices (staged by the driver when peer
  // access is off), cudaMemcpyAsync within one.
  Result<bool> CopyFromAsync(Backend& from, Buffer& src, uint64_t src_offset, Buffer& dst,
                             uint64_t dst_offset, uint64_t n) override {
    auto* fb = dynamic_cast<CudaBackend*>(&from);
    auto* sb = dynamic_cast<CudaBuffer*>(&src);
    auto* db = dynamic_cast<CudaBuffer*>(&dst);
    if (fb == nullptr || sb == nullptr || db == nullptr || db->device() != ctx_->device ||
        sb->device() != fb->ctx_->device)
      return false;
    if (src_offset > sb->size() || n > sb->size() - src_offset || dst_offset > db->size() ||
        n > db->size() - dst_offset)
      return OutOfRange(name_ + ": device to device copy outside a buffer");
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<Event> produced, fb->RecordEvent());
    STOWAGE_RETURN_IF_ERROR(WaitEvent(*produced));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    if (sb->device() == db->device()) {
      STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(db->base() + dst_offset, sb->base() + src_offset, n,
                                                         cudaMemcpyDeviceToDevice, ctx_->stream),
                                         name_ + ": cudaMemcpyAsync device to device"));
    } else {
      STOWAGE_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyPeerAsync(db->base() + dst_offset, db->device(), sb->base() + src_offset,
                                         sb->device(), n, ctx_->stream),
                     name_ + ": cudaMemcpyPeerAsync from " + fb->name()));
    }
    STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<Event> copied, RecordEvent());
    STOWAGE_RETURN_IF_ERROR(fb->WaitEvent(*copied));
    return true;
  }
  Status WaitEvent(Event& ev) override {
    auto* e = dynamic_cast<CudaEvent*>(&ev);
    if (e == nullptr) return ev.HostWait();
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    // Works across devices: the stream waits for an event of another device's stream.
    return CudaStatus(cudaStreamWaitEvent(ctx_->stream, e->event(), 0), name_ + ": cudaStreamWaitEvent");
  }

 private:
  Status MulMat(DeviceCtx& ctx, const TensorView& a, const TensorView& b, const TensorView& d);
  Status MulMatGlu(const NodeCall& c);
  Status MulMatSplit(CudaSplitBuffer& sb, const TensorView& a, const TensorView& b, const TensorView& d);
  Status MulMatId(const NodeCall& c);
  Result<DeviceCtx*> Peer(int device);
  CudaSplitBuffer* SplitOf(const void* p) const;
  /// Reads (after the stream is idle) and clears the GET_ROWS error record of ctx_.
  Status CheckGetRowsErrors() {
    if (getrows_launches_.empty()) return Status::Ok();
    int32_t rec[3] = {0, 0, 0};
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(rec, ctx_->errors, sizeof rec, cudaMemcpyDeviceToHost),
                                       name_ + ": reading the GET_ROWS error record"));
    std::vector<std::pair<std::string, int64_t>> launches;
    launches.swap(getrows_launches_);
    if (rec[0] == 0) return Status::Ok();
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(ctx_->errors, 0, sizeof rec, ctx_->stream),
                                       name_ + ": clearing the GET_ROWS error record"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(ctx_->stream), name_ + ": cudaStreamSynchronize"));
    const size_t id = static_cast<size_t>(rec[2]);
    const std::string node = id < launches.size() ? launches[id].first : "?";
    const std::string rows = id < launches.size() ? std::to_string(launches[id].second) : "?";
    return OutOfRange(name_ + ": GET_ROWS (node '" + node + "'): index " + std::to_string(rec[1]) +
                      " is outside [0, " + rows + "); its row was set to NaN");
  }

  std::shared_ptr<DeviceCtx> ctx_;
  std::string name_;
  int n_devices_;
  std::map<int, std::shared_ptr<DeviceCtx>> peers_;
  std::map<int, std::pair<cudaEvent_t, cudaEvent_t>> events_;  // per peer: (main ready, peer done)
  std::shared_ptr<SplitRegistry> splits_ = std::make_shared<SplitRegistry>();
  /// GET_ROWS launches since the last Synchronize (node name, src0 rows), indexed by launch id.
  static constexpr size_t kMaxUncheckedGetRows = 1 << 16;
  std::vector<std::pair<std::string, int64_t>> getrows_launches_;
  /// MUL_MAT_ID's batched path: the expert order it uploads (MulMatId).
  std::vector<int32_t> moe_pairs_;
};

Status Fail(const char* op, const std::string& what, const NodeCall& c) {
  std::string shapes;
  if (c.has_src[0]) shapes += " src0 " + Shape(c.src[0]);
  if (c.has_src[1]) shapes += " src1 " + Shape(c.src[1]);
  shapes += " dst " + Shape(c.dst);
  return Unimplemented(std::string(op) + ": " + what + " (node '" + c.name + "':" + shapes + ")");
}

/// A shape/stride/parameter error (the op and types are supported).
Status Bad(const char* op, const std::string& what, const NodeCall& c) {
  Status s = Fail(op, what, c);
  return InvalidArgument(s.message());
}

bool SameShape(const TensorView& a, const TensorView& b) {
  return a.ne[0] == b.ne[0] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}

/// The attention sinks of SOFT_MAX / FLASH_ATTN_EXT: contiguous F32 [n_head].
bool SinksFit(const TensorView& sinks, int64_t n_head) {
  return sinks.type == GgmlType::F32 && sinks.ne[0] == n_head && sinks.ne[1] == 1 && sinks.ne[2] == 1 &&
         sinks.ne[3] == 1 && sinks.nb[0] == 4;
}

/// SET_ROWS's shapes (ggml_set_rows): dst [ne0, rows, ne2, ne3] of the rows src, indices [ne1 of
/// src, divisors of ne2, ne3, 1].
bool SetRowsShapesFit(const TensorView& src, const TensorView& idx, const TensorView& d) {
  return d.ne[0] == src.ne[0] && d.ne[2] == src.ne[2] && d.ne[3] == src.ne[3] && idx.ne[0] == src.ne[1] &&
         idx.ne[3] == 1 && idx.ne[1] > 0 && idx.ne[2] > 0 && src.ne[2] % idx.ne[1] == 0 &&
         src.ne[3] % idx.ne[2] == 0;
}

/// What a ROPE kernel launch takes besides its tensors.
struct RopeLaunch {
  cuda::RopeArgs args;
  const int32_t* pos = nullptr;
  const float* freq_factors = nullptr;  ///< nullptr for none
};

/// The ROPE of node c (ROPE, ROPE_SET_ROWS, ROPE_CPY): x = src0 F32, I32 positions src1 [>= ne2 of
/// x], optional F32 freq factors at source `ff_src` [>= n_dims / 2], ROPE's parameters (normal or
/// NEOX mode; CheckRopeDims against x.ne0), as the kernels take them (theta_scale and the YaRN
/// correction dims computed here). Errors: kUnimplemented for other types or modes, kInvalidArgument
/// for the dims and freq factors.
Status RopeOf(const NodeCall& c, int ff_src, RopeLaunch* r) {
  const TensorView& x = c.src[0];
  const TensorView& pos = c.src[1];
  const char* op = GgmlOpName(c.op);
  STOWAGE_ASSIGN_OR_RETURN(const RopeParams rp, DecodeRope(c.params()));
  if (x.type != GgmlType::F32 || pos.type != GgmlType::I32 || pos.ne[0] < x.ne[2] || pos.nb[0] != 4)
    return Fail(op, "needs F32 src and I32 positions [>= ne2]", c);
  if (rp.mode != 0 && rp.mode != 2)
    return Fail(op, "mode " + std::to_string(rp.mode) + " is not supported (0 = normal, 2 = NEOX)", c);
  if (Status dims = CheckRopeDims(rp, x.ne[0]); !dims.ok())
    return InvalidArgument(dims.message() + " (node '" + c.name + "')");
  r->pos = static_cast<const int32_t*>(pos.data);
  r->freq_factors = nullptr;
  if (c.has_src[ff_src] && c.src[ff_src].data != nullptr) {
    const TensorView& ff = c.src[ff_src];
    if (ff.type != GgmlType::F32 || ff.ne[0] < rp.n_dims / 2 || ff.nb[0] != 4)
      return Bad(op, "freq_factors must be F32 [>= n_dims/2]", c);
    r->freq_factors = static_cast<const float*>(ff.data);
  }
  r->args = cuda::ToRopeArgs(rp);
  return Status::Ok();
}

/// CudaBackend::MulMat's checks of a product of weights a (a kernels' type, plain layout, rows
/// contiguous whole blocks) and b (F32) into d (F32 [ne01, ne11, ne12, ne13], nb0 = 4) with
/// ggml_mul_mat's broadcast; sizes within cuBLAS's int. `where` names the device (kUnimplemented for
/// the weight type); kInvalidArgument naming the shapes otherwise.
Status CheckMulMat(const std::string& where, const TensorView& a, const TensorView& b, const TensorView& d) {
  auto fail = [&](const std::string& what) {
    return InvalidArgument("MUL_MAT: " + what + " (src0 " + Shape(a) + ", src1 " + Shape(b) + ", dst " +
                           Shape(d) + ")");
  };
  if (!cuda::KernelsCanDequantize(static_cast<int>(a.type)))
    return Unimplemented(where + ": weights of type " + GgmlTypeName(a.type) +
                         " are not supported by the CUDA backend");
  if (b.type != GgmlType::F32 || d.type != GgmlType::F32) return fail("src1 and dst must be F32");
  if (a.layout != cpu::kLayoutPlain) return fail("src0 must have the plain layout");
  const int64_t K = a.ne[0], N = a.ne[1], M = b.ne[1];
  if (b.ne[0] != K) return fail("src0 ne0 != src1 ne0");
  if (d.ne[0] != N || d.ne[1] != M || d.ne[2] != b.ne[2] || d.ne[3] != b.ne[3])
    return fail("dst shape is not [ne01, ne11, ne12, ne13]");
  if (a.ne[2] <= 0 || a.ne[3] <= 0 || b.ne[2] % a.ne[2] != 0 || b.ne[3] % a.ne[3] != 0)
    return fail("src1 ne2/ne3 must be multiples of src0's");
  const auto& tr = GetTypeTraits(a.type);
  if (K % tr.block_size != 0) return fail("ne00 must be a multiple of the block size");
  // The kernels and cuBLAS read each src0 row as consecutive elements / blocks (the permuted K and V
  // views of the KV cache keep nb0 = element size; only their nb1, nb2 differ).
  if (a.nb[0] != tr.type_size) return fail("src0 rows must be contiguous (nb00 = type size)");
  constexpr uint64_t kIntMax = 2147483647;
  if (uint64_t(K) > kIntMax || uint64_t(N) > kIntMax || uint64_t(M) > kIntMax ||
      uint64_t(a.nb[1] / tr.type_size) > kIntMax || uint64_t(b.nb[1] / 4) > kIntMax ||
      uint64_t(d.nb[1] / 4) > kIntMax)
    return fail("dimensions or row strides beyond cuBLAS's int range");
  if (d.nb[0] != 4 || d.nb[1] % 4 != 0) return fail("dst must have nb0 = 4");
  if (d.nelements() > 0 && (a.data == nullptr || b.data == nullptr || d.data == nullptr))
    return fail("null data");
  return Status::Ok();
}

/// b (F32) with contiguous rows (nb0 = 4, float-aligned strides) as a product reads it: b itself, or
/// b gathered into ctx's kConvX slot (queued on ctx's stream).
Result<TensorView> ContiguousRows(DeviceCtx& ctx, const TensorView& b, const std::string& where) {
  if (b.nb[0] == 4 && b.nb[1] % 4 == 0 && b.nb[2] % 4 == 0 && b.nb[3] % 4 == 0) return b;
  TensorView x = b;
  STOWAGE_ASSIGN_OR_RETURN(void* p, ctx.Scratch(DeviceCtx::kConvX, static_cast<size_t>(b.nelements()) * 4));
  x.data = p;
  cpu::SetContiguousStrides(x);
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cuda::Cpy(ToTv(b), ToTv(x), ctx.stream), where + ": gathering src1"));
  return x;
}

Status CudaBackend::Compute(const NodeCall& c) {
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
  const TensorView& d = c.dst;
  const TensorView& a = c.src[0];
  const TensorView& b = c.src[1];
  const char* op = GgmlOpName(c.op);
  const bool f32_dst = d.type == GgmlType::F32;
  for (int i = 0; i < 4; ++i) {
    const bool weight =
        (c.op == GgmlOp::MUL_MAT && i == 0) || (c.op == GgmlOp::MUL_MAT_GLU && (i == 0 || i == 2));
    if (c.has_src[i] && SplitOf(c.src[i].data) && !weight)
      return Fail(
          op, "a row-split tensor can only be the weight of MUL_MAT (src0) or MUL_MAT_GLU (src0, src2)", c);
  }
  if (!CudaTableHasOp(c.op))  // the backend's op table (cuda_op_table.cpp): other ops are unimplemented
    return Unimplemented(name_ + ": op " + op + " (node '" + c.name +
                         "') is not implemented by the CUDA backend");
  if (d.nelements() > 0 && d.data == nullptr)
    return InvalidArgument(std::string(op) + ": null dst data (node '" + c.name + "')");
  // Required sources (GgmlOpTraits::min_srcs; the optional ones, SOFT_MAX's mask, ROPE's freq
  // factors, GLU's second half, are absent with null data): a null pointer would be an illegal
  // address on the device.
  for (int i = 0; i < std::min<int>(GetOpTraits(c.op).min_srcs, NodeCall::kMaxSrc); ++i)
    if (d.nelements() > 0 && (!c.has_src[i] || c.src[i].data == nullptr))
      return InvalidArgument(std::string(op) + ": src" + std::to_string(i) +
                             " is missing or has null data (node '" + c.name + "')");
  cudaError_t e = cudaSuccess;
  switch (c.op) {
    case GgmlOp::GET_ROWS:
      if (!CudaSupportsWeightType(a.type) || b.type != GgmlType::I32 || !f32_dst)
        return Fail(op, "needs a dequantizable src0, I32 ids and an F32 dst", c);
      if (d.ne[0] != a.ne[0] || d.ne[1] != b.ne[0] || d.ne[2] != b.ne[1] || d.ne[3] != b.ne[2] ||
          b.ne[3] != 1)
        return Bad(op, "dst shape must be [ne00, ne10, ne11, ne12] with 3-D ids", c);
      if ((a.ne[2] != b.ne[1] && a.ne[2] != 1) || (a.ne[3] != b.ne[2] && a.ne[3] != 1))
        return Bad(op, "src0 dims 2 and 3 must equal the ids' dims 1 and 2, or be 1", c);
      if (a.nb[0] != GetTypeTraits(a.type).type_size || a.ne[0] % GetTypeTraits(a.type).block_size != 0)
        return Bad(op, "src0 rows must be contiguous whole blocks", c);
      if (getrows_launches_.size() >= kMaxUncheckedGetRows) STOWAGE_RETURN_IF_ERROR(Synchronize());
      getrows_launches_.push_back({c.name, a.ne[1]});
      e = cuda::GetRows(ToTv(a), ToTv(b), ToTv(d), ctx_->errors,
                        static_cast<int32_t>(getrows_launches_.size() - 1), ctx_->stream);
      break;
    case GgmlOp::MUL_MAT: {
      if (CudaSplitBuffer* sb = SplitOf(a.data)) return MulMatSplit(*sb, a, b, d);
      return MulMat(*ctx_, a, b, d);
    }
    case GgmlOp::MUL_MAT_GLU:
      return MulMatGlu(c);
    case GgmlOp::MUL_MAT_ID:
      return MulMatId(c);
    case GgmlOp::ADD:
    case GgmlOp::MUL:
    case GgmlOp::DIV:
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d) ||
          (b.type != GgmlType::F32 && b.type != GgmlType::F16))
        return Fail(op, "needs F32 src0/dst of equal shape and F32 or F16 src1", c);
      for (int i = 0; i < 4; ++i)
        if (b.ne[i] <= 0 || a.ne[i] % b.ne[i] != 0) return Bad(op, "src1 does not broadcast to src0", c);
      e = cuda::BinaryOp(c.op == GgmlOp::ADD   ? cuda::Binary::kAdd
                         : c.op == GgmlOp::MUL ? cuda::Binary::kMul
                                               : cuda::Binary::kDiv,
                         ToTv(a), ToTv(b), ToTv(d), ctx_->stream);
      break;
    case GgmlOp::CONCAT: {
      if (a.type != GgmlType::F32 || b.type != GgmlType::F32 || !f32_dst)
        return Fail(op, "needs F32 a, b and dst", c);
      STOWAGE_ASSIGN_OR_RETURN(const ConcatParams p, DecodeConcat(c.params()));
      for (int i = 0; i < 4; ++i)
        if ((i != p.dim && (b.ne[i] != a.ne[i] || d.ne[i] != a.ne[i])) ||
            (i == p.dim && d.ne[i] != a.ne[i] + b.ne[i]))
          return Bad(op, "a and b must agree outside dim " + std::to_string(p.dim) + " and dst be their join",
                     c);
      e = cuda::Concat(ToTv(a), ToTv(b), ToTv(d), p.dim, ctx_->stream);
      break;
    }
    case GgmlOp::FILL: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d))
        return Fail(op, "needs F32 src and dst of equal shape", c);
      STOWAGE_ASSIGN_OR_RETURN(const FillParams p, DecodeFill(c.params()));
      e = cuda::UnaryOp(cuda::Unary::kFill, ToTv(a), ToTv(d), p.c, 0.f, ctx_->stream);
      break;
    }
    case GgmlOp::CLAMP: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d))
        return Fail(op, "needs F32 src and dst of equal shape", c);
      STOWAGE_ASSIGN_OR_RETURN(const ClampParams p, DecodeClamp(c.params()));
      e = cuda::UnaryOp(cuda::Unary::kClamp, ToTv(a), ToTv(d), p.min, p.max, ctx_->stream);
      break;
    }
    case GgmlOp::SET_ROWS: {
      const bool i64 = b.type == GgmlType::I64;
      if (a.type != GgmlType::F32 || (b.type != GgmlType::I32 && !i64) || !IsFloatType(d.type))
        return Fail(op, "needs F32 rows, I32 or I64 indices and an F32, F16 or BF16 dst", c);
      if (!SetRowsShapesFit(a, b, d))
        return Bad(op, "dst must be [ne0, rows, ne2, ne3] of src and the indices [ne1, divisors of ne2, ne3]",
                   c);
      e = cuda::SetRows(ToTv(a), ToTv(b), i64, ToTv(d), ctx_->stream);
      break;
    }
    case GgmlOp::REPEAT:
      if (a.type != GgmlType::F32 || !f32_dst) return Fail(op, "needs F32 src and dst", c);
      for (int i = 0; i < 4; ++i)
        if (a.ne[i] <= 0 || d.ne[i] % a.ne[i] != 0)
          return Bad(op, "dst dimensions must be multiples of src's", c);
      e = cuda::Repeat(ToTv(a), ToTv(d), ctx_->stream);
      break;
    case GgmlOp::SUM_ROWS:
      if (a.type != GgmlType::F32 || !f32_dst) return Fail(op, "needs F32 src and dst", c);
      if (d.ne[0] != 1 || d.ne[1] != a.ne[1] || d.ne[2] != a.ne[2] || d.ne[3] != a.ne[3])
        return Bad(op, "dst must be [1, ne1, ne2, ne3] of src", c);
      e = cuda::SumRows(ToTv(a), ToTv(d), ctx_->stream);
      break;
    case GgmlOp::ARGSORT: {
      if (a.type != GgmlType::F32 || d.type != GgmlType::I32) return Fail(op, "needs F32 src and I32 dst", c);
      if (!SameShape(a, d)) return Bad(op, "src and dst differ in shape", c);
      if (a.ne[0] > cuda::kArgsortMaxCols)
        return Fail(
            op, "rows of " + std::to_string(a.ne[0]) + " above " + std::to_string(cuda::kArgsortMaxCols), c);
      STOWAGE_ASSIGN_OR_RETURN(const ArgsortParams p, DecodeArgsort(c.params()));
      if (p.order != 0 && p.order != 1) return Bad(op, "order must be 0 (ascending) or 1 (descending)", c);
      e = cuda::ArgSort(ToTv(a), ToTv(d), p.order == 1, ctx_->stream);
      break;
    }
    case GgmlOp::SCALE:
    case GgmlOp::SILU:
    case GgmlOp::GELU:
    case GgmlOp::TANH:
    case GgmlOp::SIGMOID: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d))
        return Fail(op, "needs F32 src and dst of equal shape", c);
      ScaleParams sp;  // SILU, GELU and TANH have no parameters (the kernel ignores them)
      if (c.op == GgmlOp::SCALE) {
        STOWAGE_ASSIGN_OR_RETURN(sp, DecodeScale(c.params()));
      }
      e = cuda::UnaryOp(c.op == GgmlOp::SCALE  ? cuda::Unary::kScale
                        : c.op == GgmlOp::SILU ? cuda::Unary::kSilu
                        : c.op == GgmlOp::GELU ? cuda::Unary::kGelu
                        : c.op == GgmlOp::TANH ? cuda::Unary::kTanh
                                               : cuda::Unary::kSigmoid,
                        ToTv(a), ToTv(d), sp.s, sp.b, ctx_->stream);
      break;
    }
    case GgmlOp::SWIGLU:
    case GgmlOp::GEGLU: {
      const bool fused = !c.has_src[1] || b.data == nullptr;
      if (a.type != GgmlType::F32 || !f32_dst) return Fail(op, "needs F32 tensors", c);
      if (fused ? (a.ne[0] != 2 * d.ne[0] || a.ne[1] != d.ne[1] || a.ne[2] != d.ne[2] || a.ne[3] != d.ne[3])
                : (b.type != GgmlType::F32 || !SameShape(a, d) || !SameShape(b, d)))
        return Bad(
            op, fused ? "fused form needs src0 [2 * ne0, ...] of dst" : "split form needs equal F32 shapes",
            c);
      Tv tb = fused ? Tv() : ToTv(b);
      e = cuda::GluOp(c.op == GgmlOp::SWIGLU ? cuda::Glu::kSwiglu : cuda::Glu::kGeglu, ToTv(a), tb, ToTv(d),
                      ctx_->stream);
      break;
    }
    case GgmlOp::SWIGLU_OAI: {
      if (a.type != GgmlType::F32 || b.type != GgmlType::F32 || !f32_dst || !SameShape(a, d) ||
          !SameShape(b, d))
        return Fail(op, "needs F32 a, b and dst of equal shape", c);
      STOWAGE_ASSIGN_OR_RETURN(const SwiGluOaiParams p, DecodeSwiGluOai(c.params()));
      e = cuda::SwiGluOai(ToTv(a), ToTv(b), ToTv(d), p.alpha, p.limit, ctx_->stream);
      break;
    }
    case GgmlOp::ADD_ID: {
      const TensorView& ids = c.src[2];
      if (a.type != GgmlType::F32 || b.type != GgmlType::F32 || ids.type != GgmlType::I32 || !f32_dst ||
          !SameShape(a, d))
        return Fail(op, "needs F32 a, b and dst (dst like a) and I32 ids", c);
      if (b.ne[0] != a.ne[0] || ids.ne[0] != a.ne[1] || ids.ne[1] != a.ne[2])
        return Bad(op, "b must be [ne0 of a, n_expert] and ids [ne1, ne2 of a]", c);
      e = cuda::AddId(ToTv(a), ToTv(b), ToTv(ids), ToTv(d), ctx_->stream);
      break;
    }
    case GgmlOp::RMS_NORM:
    case GgmlOp::NORM: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d))
        return Fail(op, "needs F32 src and dst of equal shape", c);
      STOWAGE_ASSIGN_OR_RETURN(const NormParams np, DecodeNorm(c.op, c.params()));
      e = cuda::NormOp(c.op == GgmlOp::RMS_NORM, ToTv(a), ToTv(d), np.eps, ctx_->stream);
      break;
    }
    case GgmlOp::RMS_NORM_MUL: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d) ||
          (b.type != GgmlType::F32 && b.type != GgmlType::F16))
        return Fail(op, "needs F32 src0/dst of equal shape and an F32 or F16 weight", c);
      for (int i = 0; i < 4; ++i)
        if (b.ne[i] <= 0 || a.ne[i] % b.ne[i] != 0)
          return Bad(op, "the weight does not broadcast to src0", c);
      STOWAGE_ASSIGN_OR_RETURN(const NormParams np, DecodeNorm(c.op, c.params()));
      e = cuda::RmsNormMul(ToTv(a), ToTv(b), ToTv(d), np.eps, ctx_->stream);
      break;
    }
    case GgmlOp::ROPE: {
      if (!f32_dst || !SameShape(a, d)) return Fail(op, "needs F32 src/dst of equal shape", c);
      RopeLaunch r;
      STOWAGE_RETURN_IF_ERROR(RopeOf(c, 2, &r));
      e = cuda::Rope(ToTv(a), r.pos, r.freq_factors, ToTv(d), r.args, ctx_->stream);
      break;
    }
    case GgmlOp::ROPE_SET_ROWS: {  // the rotated rows [ne0 * ne1, ne2] of x stored as SET_ROWS stores them
      const TensorView& idx = c.src[3];
      RopeLaunch r;
      STOWAGE_RETURN_IF_ERROR(RopeOf(c, 4, &r));
      const bool i64 = idx.type == GgmlType::I64;
      if ((idx.type != GgmlType::I32 && !i64) || !IsFloatType(d.type))
        return Fail(op, "needs I32 or I64 indices and an F32, F16 or BF16 cache", c);
      TensorView rows = a;
      rows.ne[0] = a.ne[0] * a.ne[1];
      rows.ne[1] = a.ne[2];
      rows.ne[2] = 1;
      if (a.ne[3] != 1 || !SetRowsShapesFit(rows, idx, d))
        return Bad(op, "x must be [head_dim, n_head, n_tokens] and the cache [head_dim * n_head, rows]", c);
      e = cuda::RopeSetRows(ToTv(a), r.pos, r.freq_factors, ToTv(idx), i64, ToTv(d), r.args, ctx_->stream);
      break;
    }
    case GgmlOp::ROPE_CPY: {  // the rotated x copied element by element into the cache view
      RopeLaunch r;
      STOWAGE_RETURN_IF_ERROR(RopeOf(c, 3, &r));
      if (!IsFloatType(d.type)) return Fail(op, "needs an F32, F16 or BF16 dst", c);
      if (a.nelements() != d.nelements()) return Bad(op, "element counts differ", c);
      e = cuda::RopeCpy(ToTv(a), r.pos, r.freq_factors, ToTv(d), r.args, ctx_->stream);
      break;
    }
    case GgmlOp::SOFT_MAX: {
      if (a.type != GgmlType::F32 || !f32_dst || !SameShape(a, d))
        return Fail(op, "needs F32 src and dst of equal shape", c);
      Tv mask;
      if (c.has_src[1] && b.data != nullptr) {
        if ((b.type != GgmlType::F32 && b.type != GgmlType::F16) || b.ne[0] != a.ne[0] || b.ne[1] < a.ne[1] ||
            b.ne[2] <= 0 || a.ne[2] % b.ne[2] != 0 || b.ne[3] <= 0 || a.ne[3] % b.ne[3] != 0)
          return Bad(op, "mask must be F16/F32 [ne0, >= ne1] broadcasting over dims 2 and 3", c);
        mask = ToTv(b);
      }
      const float* sinks = nullptr;
      if (c.has_src[2] && c.src[2].data != nullptr) {
        if (!SinksFit(c.src[2], a.ne[2])) return Bad(op, "sinks must be contiguous F32 [ne2 of src]", c);
        sinks = static_cast<const float*>(c.src[2].data);
      }
      STOWAGE_ASSIGN_OR_RETURN(const SoftMaxParams sm, DecodeSoftMax(c.params()));
      e = cuda::SoftMax(ToTv(a), mask, sinks, ToTv(d), sm.scale, sm.max_bias, ctx_->stream);
      break;
    }
    case GgmlOp::FLASH_ATTN_EXT: {
      const TensorView& v = c.src[2];
      const bool has_mask = c.has_src[3] && c.src[3].data != nullptr;
      const int64_t D = a.ne[0], Dv = v.ne[0];  // V rows may differ from K's (deepseek2's MLA)
      if (a.type != GgmlType::F32 || !f32_dst || !cuda::FaCacheType(int(b.type)) ||
          !cuda::FaCacheType(int(v.type)) || (has_mask && c.src[3].type != GgmlType::F16))
        return Fail(op, "needs F32 q and dst, K and V of F32, F16, BF16, Q8_0 or Q4_0 and an F16 mask", c);
      if (Dv > cuda::kFaMaxHeadDim)
        return Fail(op, "V head size " + std::to_string(Dv) + " above " + std::to_string(cuda::kFaMaxHeadDim),
                    c);
      if (b.ne[0] != D || v.ne[1] != b.ne[1])
        return Bad(op, "q and k need the same head size and k, v the same n_kv", c);
      if (b.ne[2] <= 0 || v.ne[2] <= 0 || b.ne[3] <= 0 || v.ne[3] <= 0 || a.ne[2] % b.ne[2] != 0 ||
          a.ne[2] % v.ne[2] != 0 || a.ne[3] % b.ne[3] != 0 || a.ne[3] % v.ne[3] != 0)
        return Bad(op, "k's and v's heads (dims 2, 3) must divide q's", c);
      if (a.nb[0] != sizeof(float)) return Bad(op, "q needs contiguous rows", c);
      for (const TensorView* t : {&b, &v})
        if (t->nb[0] != GetTypeTraits(t->type).type_size || t->ne[0] % GetTypeTraits(t->type).block_size != 0)
          return Bad(op, "k and v need contiguous rows of whole blocks", c);
      if (d.ne[0] != Dv || d.ne[1] != a.ne[2] || d.ne[2] != a.ne[1] || d.ne[3] != a.ne[3])
        return Bad(op, "dst must be [Dv, n_head, n_tokens, ne3 of q]", c);
      Tv mask;
      if (has_mask) {
        const TensorView& m = c.src[3];
        if (m.nb[0] != 2 || m.ne[0] < b.ne[1] || m.ne[1] < a.ne[1] || m.ne[2] != 1 || m.ne[3] != 1)
          return Bad(op, "the mask must be F16 rows [>= n_kv, >= n_tokens, 1, 1]", c);
        mask = ToTv(m);
      }
      STOWAGE_ASSIGN_OR_RETURN(const FlashAttnExtParams p, DecodeFlashAttnExt(c.params()));
      if (p.max_bias > 0.f && !has_mask) return Bad(op, "ALiBi (max_bias > 0) needs a mask", c);
      cuda::FlashAttnArgs fa =
          cuda::MakeFlashAttnArgs(uint32_t(a.ne[2]), p.scale, p.max_bias, p.logit_softcap);
      if (c.has_src[4] && c.src[4].data != nullptr) {
        if (!SinksFit(c.src[4], a.ne[2])) return Bad(op, "sinks must be contiguous F32 [n_head of q]", c);
        fa.sinks = static_cast<const float*>(c.src[4].data);
      }
      e = cuda::FlashAttn(ToTv(a), ToTv(b), ToTv(v), mask, ToTv(d), fa, ctx_->stream);
      break;
    }
    case GgmlOp::CPY:
    case GgmlOp::CONT:
    case GgmlOp::DUP:
      if (!CudaSupportsCpy(a.type, d.type))
        return Fail(op, "copies F32/F16/BF16 into F32, F16, BF16, Q8_0 or Q4_0 only", c);
      if (a.nelements() != d.nelements()) return Bad(op, "element counts differ", c);
      if (!IsFloatType(d.type) && (d.ne[0] % 32 != 0 || d.nb[0] != GetTypeTraits(d.type).type_size))
        return Bad(op, "a quantized dst needs rows of whole blocks", c);
      e = cuda::Cpy(ToTv(a), ToTv(d), ctx_->stream);
      break;
    default:
      return Unimplemented(name_ + ": op " + op + " (node '" + c.name +
                           "') is not implemented by the CUDA backend");
  }
  return CudaStatus(e, name_ + ": " + op + " kernel launch (node '" + c.name + "')");
}

Status CudaBackend::MulMat(DeviceCtx& ctx, const TensorView& a, const TensorView& b, const TensorView& d) {
  const std::string where = ctx.name + ": MUL_MAT";
  STOWAGE_RETURN_IF_ERROR(CheckMulMat(where, a, b, d));
  if (d.nelements() == 0) return Status::Ok();
  const int wt = static_cast<int>(a.type);
  const int64_t K = a.ne[0], N = a.ne[1], M = b.ne[1];
  const int64_t ne12 = b.ne[2], ne13 = b.ne[3], r2 = ne12 / a.ne[2], r3 = ne13 / a.ne[3];
  // src1 with contiguous rows (nb10 == 4, float-aligned strides), else gathered.
  STOWAGE_ASSIGN_OR_RETURN(const TensorView x, ContiguousRows(ctx, b, where));
  if (cuda::IsQuantized(wt) && M <= 8) {
    return CudaStatus(cuda::MulMatVec(ToTv(a), ToTv(x), ToTv(d), ctx.stream),
                      where + ": mat-vec kernel launch");
  }

  // cuBLAS: column-major C (N x M, ldc) = A^T (A: K x N, lda) * B (K x M, ldb).
  const float alpha = 1.f, beta = 0.f;
  cudaDataType_t at = CUDA_R_32F;
  const uint8_t* xb = static_cast<const uint8_t*>(x.data);
  size_t xnb[4] = {x.nb[0], x.nb[1], x.nb[2], x.nb[3]};
  size_t xe = 4;
  if (a.type != GgmlType::F32) {
    // src1 converted to the weight's half type (F16 for F16 and quantized weights, BF16 for BF16).
    const GgmlType ht = a.type == GgmlType::BF16 ? GgmlType::BF16 : GgmlType::F16;
    at = ht == GgmlType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
    TensorView h = x;
    h.type = ht;
    STOWAGE_ASSIGN_OR_RETURN(void* p, ctx.Scratch(DeviceCtx::kConvX, static_cast<size_t>(x.nelements()) * 2));
    if (p == x.data) {  // x already lives in this slot: convert through the split-x slot
      STOWAGE_ASSIGN_OR_RETURN(p, ctx.Scratch(DeviceCtx::kSplitDst, static_cast<size_t>(x.nelements()) * 2));
    }
    h.data = p;
    cpu::SetContiguousStrides(h);
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cuda::Cpy(ToTv(x), ToTv(h), ctx.stream), where + ": converting src1"));
    xb = static_cast<const uint8_t*>(p);
    for (int i = 0; i < 4; ++i) xnb[i] = h.nb[i];
    xe = 2;
  }
  const bool dequant = cuda::IsQuantized(wt);
  const size_t ae = dequant ? 2 : GetTypeTraits(a.type).type_size;
  for (int64_t i03 = 0; i03 < a.ne[3]; ++i03) {
    for (int64_t i02 = 0; i02 < a.ne[2]; ++i02) {
      const uint8_t* w = static_cast<const uint8_t*>(a.data) + i03 * a.nb[3] + i02 * a.nb[2];
      int64_t lda = static_cast<int64_t>(a.nb[1] / ae);
      if (dequant) {
        STOWAGE_ASSIGN_OR_RETURN(void* p, ctx.Scratch(DeviceCtx::kDequantW, static_cast<size_t>(K * N) * 2));
        STOWAGE_RETURN_IF_ERROR(
            CudaStatus(cuda::ToF16(wt, w, K, N, static_cast<int64_t>(a.nb[1]), p, ctx.stream),
                       where + ": dequantizing src0"));
        w = static_cast<const uint8_t*>(p);
        lda = K;
      }
      if (N == 1 || lda < K) lda = K;
      for (int64_t i13 = i03 * r3; i13 < (i03 + 1) * r3; ++i13) {
        for (int64_t i12 = i02 * r2; i12 < (i02 + 1) * r2; ++i12) {
          const uint8_t* xp = xb + i13 * xnb[3] + i12 * xnb[2];
          uint8_t* dp = static_cast<uint8_t*>(d.data) + i13 * d.nb[3] + i12 * d.nb[2];
          int64_t ldb = static_cast<int64_t>(xnb[1] / xe), ldc = static_cast<int64_t>(d.nb[1] / 4);
          if (M == 1 || ldb < K) ldb = K;
          if (M == 1 || ldc < N) ldc = N;
          STOWAGE_RETURN_IF_ERROR(ctx.Blas());
          STOWAGE_RETURN_IF_ERROR(CublasStatus(
              ctx.blas->gemm_ex(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                                static_cast<int>(M), static_cast<int>(K), &alpha, w, at,
                                static_cast<int>(lda), xp, at, static_cast<int>(ldb), &beta, dp, CUDA_R_32F,
                                static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              where + ": cublasGemmEx"));
        }
      }
    }
  }
  return Status::Ok();
}

// MUL_MAT_GLU (Stowage's fused FFN-in): dst = GLU(MUL_MAT(gate, x), MUL_MAT(up, x)) with the GLU
// its parameter names (SWIGLU or SILU then MUL: SILU(g) * u; GEGLU or GELU then MUL: GELU(g) * u,
// cuda_math.h GluValue). Where MUL_MAT takes the quantized mat-vec (quantized weights, up to 8
// columns, not row-split: token generation) one kernel computes both dots as MulMatVecK does and
// stores their GLU (cuda::MulMatVecGlu). Otherwise the node runs the unfused sequence itself:
// gate's MUL_MAT into dst, up's into the kGluUp scratch, the GLU over dst in place (GluOp), the same
// kernels and cuBLAS calls as MUL_MAT, MUL_MAT, SWIGLU with the same shapes, so the same floats.
// gate and up are of one type, shape and strides, both row-split (CUDA<i>_Split, MulMatSplit each)
// or neither.
Status CudaBackend::MulMatGlu(const NodeCall& c) {
  const TensorView& gate = c.src[0];
  const TensorView& x = c.src[1];
  const TensorView& up = c.src[2];
  const TensorView& d = c.dst;
  const char* op = "MUL_MAT_GLU";
  const std::string where = name_ + ": MUL_MAT_GLU (node '" + c.name + "')";
  STOWAGE_ASSIGN_OR_RETURN(const MulMatGluParams p, DecodeMulMatGlu(c.params()));
  const cuda::Glu glu = p.glu == MulMatGluKind::kSwiGlu || p.glu == MulMatGluKind::kSiluMul
                            ? cuda::Glu::kSwiglu
                            : cuda::Glu::kGeglu;
  bool same_layout = up.type == gate.type && up.layout == gate.layout && SameShape(up, gate);
  for (int i = 0; i < 4; ++i) same_layout = same_layout && up.nb[i] == gate.nb[i];
  if (!same_layout) return Bad(op, "up must have gate's type, layout, shape and strides", c);
  CudaSplitBuffer* gate_split = SplitOf(gate.data);
  CudaSplitBuffer* up_split = SplitOf(up.data);
  if ((gate_split == nullptr) != (up_split == nullptr))
    return Fail(op, "gate and up must both be row-split or neither", c);
  if (gate_split == nullptr) {
    STOWAGE_RETURN_IF_ERROR(CheckMulMat(where, gate, x, d));
    if (d.nelements() == 0) return Status::Ok();
    if (cuda::IsQuantized(static_cast<int>(gate.type)) && x.ne[1] <= 8) {
      STOWAGE_ASSIGN_OR_RETURN(const TensorView xc, ContiguousRows(*ctx_, x, where));
      return CudaStatus(cuda::MulMatVecGlu(glu, ToTv(gate), ToTv(up), ToTv(xc), ToTv(d), ctx_->stream),
                        where + ": mat-vec kernel launch");
    }
  }
  if (d.nelements() == 0) return Status::Ok();
  TensorView u = d;  // up's product: contiguous F32 of dst's shape
  STOWAGE_ASSIGN_OR_RETURN(void* up_data,
                           ctx_->Scratch(DeviceCtx::kGluUp, static_cast<size_t>(d.nelements()) * 4));
  u.type = GgmlType::F32;
  u.data = up_data;
  cpu::SetContiguousStrides(u);
  STOWAGE_RETURN_IF_ERROR(gate_split ? MulMatSplit(*gate_split, gate, x, d) : MulMat(*ctx_, gate, x, d));
  STOWAGE_RETURN_IF_ERROR(up_split ? MulMatSplit(*up_split, up, x, u) : MulMat(*ctx_, up, x, u));
  return CudaStatus(cuda::GluOp(glu, ToTv(d), ToTv(u), ToTv(d), ctx_->stream), where + ": GLU kernel launch");
}

// MUL_MAT_ID (ggml_mul_mat_id): as [K, N, n_expert], b [K, ne11, n_tokens] F32, ids I32 [n_used,
// n_tokens], dst [N, n_used, n_tokens] F32 (the CPU backend's checks, cpu::MulMatId). Up to
// cuda::kMmvIdMaxTokens tokens: the mat-vec reads the ids on the device (no synchronization; token
// generation). More tokens (prompts): the ids are copied to the host (the stream is waited for, as
// ggml-cuda's mul_mat_id does), grouped per expert (cpu::GroupRowsByExpert, so an id outside the
// experts is the CPU's kOutOfRange), the src1 columns gathered in that order, each expert's run
// multiplied by MulMat (cuBLAS, or the quantized mat-vec for runs of up to 8 columns), and the
// products scattered to dst.
Status CudaBackend::MulMatId(const NodeCall& c) {
  const TensorView& as = c.src[0];
  const TensorView& b = c.src[1];
  const TensorView& ids = c.src[2];
  const TensorView& d = c.dst;
  const char* op = "MUL_MAT_ID";
  const std::string where = name_ + ": MUL_MAT_ID (node '" + c.name + "')";
  if (!CudaSupportsWeightType(as.type) || b.type != GgmlType::F32 || ids.type != GgmlType::I32 ||
      d.type != GgmlType::F32)
    return Fail(op, "needs experts of a dequantizable type, F32 src1 and dst and I32 ids", c);
  if (as.layout != cpu::kLayoutPlain) return Bad(op, "experts must have the plain layout", c);
  const int64_t K = as.ne[0], N = as.ne[1], n_as = as.ne[2], n_used = ids.ne[0], n_tokens = ids.ne[1];
  const auto& tr = GetTypeTraits(as.type);
  if (as.ne[3] != 1 || n_as <= 0 || as.nb[0] != tr.type_size || K % tr.block_size != 0)
    return Bad(op, "experts must be [K, N, n_expert] with contiguous rows of whole blocks", c);
  if (b.ne[0] != K || b.ne[3] != 1 || b.ne[2] != n_tokens || b.ne[1] <= 0 || n_used % b.ne[1] != 0)
    return Bad(op, "src1 must be [K, ne11, n_tokens] with ne11 dividing ids.ne0", c);
  if (ids.ne[2] != 1 || ids.ne[3] != 1 || ids.nb[0] != 4) return Bad(op, "ids must be 2-D with nb0 = 4", c);
  if (d.ne[0] != N || d.ne[1] != n_used || d.ne[2] != n_tokens || d.ne[3] != 1 || d.nb[0] != 4)
    return Bad(op, "dst must be [N, ids.ne0, n_tokens] with nb0 = 4", c);
  if (d.nelements() == 0) return Status::Ok();
  DeviceCtx& ctx = *ctx_;
  // src1 with contiguous rows (the mat-vec and the gather read nb0 = 4), else gathered first (into
  // MulMat's src1 slot: stream order puts the experts' MulMats, which reuse it, after its readers).
  TensorView x = b;
  if (b.nb[0] != 4 || b.nb[1] % 4 != 0 || b.nb[2] % 4 != 0) {
    STOWAGE_ASSIGN_OR_RETURN(void* p, ctx.Scratch(DeviceCtx::kConvX, static_cast<size_t>(b.nelements()) * 4));
    x.data = p;
    cpu::SetContiguousStrides(x);
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cuda::Cpy(ToTv(b), ToTv(x), ctx.stream), where + ": gathering src1"));
  }
  if (n_tokens <= cuda::kMmvIdMaxTokens)
    return CudaStatus(cuda::MulMatVecId(ToTv(as), ToTv(x), ToTv(ids), ToTv(d), ctx.stream),
                      where + ": mat-vec kernel launch");
  // The ids on the host, grouped per expert into the pair list.
  std::vector<int32_t> host_ids(static_cast<size_t>(n_used * n_tokens));
  STOWAGE_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpy2DAsync(host_ids.data(), static_cast<size_t>(n_used) * 4, ids.data, ids.nb[1],
                                   static_cast<size_t>(n_used) * 4, static_cast<size_t>(n_tokens),
                                   cudaMemcpyDeviceToHost, ctx.stream),
                 where + ": copying the ids to the host"));
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(ctx.stream), where + ": cudaStreamSynchronize"));
  TensorView hv;
  hv.data = host_ids.data();
  hv.type = GgmlType::I32;
  hv.ne[0] = n_used;
  hv.ne[1] = n_tokens;
  cpu::SetContiguousStrides(hv);
  std::vector<std::vector<int64_t>> rows;
  if (Status st = cpu::GroupRowsByExpert(hv, n_as, &rows); !st.ok())
    return Status(st.code(), st.message() + " (node '" + c.name + "')");
  // moe_pairs_ outlives the call: the upload below reads it after this function returns (a
  // pageable-memory copy is staged before cudaMemcpyAsync returns, and the next MUL_MAT_ID of this
  // path waits for the stream before refilling it).
  moe_pairs_.clear();
  for (const auto& r : rows)
    for (int64_t p : r) moe_pairs_.push_back(static_cast<int32_t>(p));
  const int64_t n_pairs = static_cast<int64_t>(moe_pairs_.size());
  STOWAGE_ASSIGN_OR_RETURN(void* pairs_p, ctx.Scratch(DeviceCtx::kMoePairs, moe_pairs_.size() * 4));
  STOWAGE_ASSIGN_OR_RETURN(void* xg_p, ctx.Scratch(DeviceCtx::kMoeX, static_cast<size_t>(K * n_pairs) * 4));
  STOWAGE_ASSIGN_OR_RETURN(void* out_p,
                           ctx.Scratch(DeviceCtx::kMoeOut, static_cast<size_t>(N * n_pairs) * 4));
  STOWAGE_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(pairs_p, moe_pairs_.data(), moe_pairs_.size() * 4, cudaMemcpyHostToDevice, ctx.stream),
      where + ": uploading the expert order"));
  const int32_t* pairs = static_cast<const int32_t*>(pairs_p);
  auto matrix = [](void* data, int64_t ne0, int64_t ne1) {
    TensorView v;
    v.data = data;
    v.type = GgmlType::F32;
    v.ne[0] = ne0;
    v.ne[1] = ne1;
    cpu::SetContiguousStrides(v);
    return v;
  };
  const TensorView xg = matrix(xg_p, K, n_pairs), out = matrix(out_p, N, n_pairs);
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cuda::MoeGather(ToTv(x), pairs, n_used, ToTv(xg), ctx.stream),
                                     where + ": gather kernel launch"));
  int64_t j0 = 0;
  for (int64_t e = 0; e < n_as; ++e) {
    const int64_t m = static_cast<int64_t>(rows[static_cast<size_t>(e)].size());
    if (m == 0) continue;
    TensorView w = as;
    w.data = static_cast<uint8_t*>(as.data) + e * as.nb[2];
    w.ne[2] = 1;
    const TensorView xe = matrix(static_cast<float*>(xg_p) + j0 * K, K, m);
    const TensorView oe = matrix(static_cast<float*>(out_p) + j0 * N, N, m);
    STOWAGE_RETURN_IF_ERROR(MulMat(ctx, w, xe, oe));
    j0 += m;
  }
  return CudaStatus(cuda::MoeScatter(ToTv(out), pairs, n_used, ToTv(d), ctx.stream),
                    where + ": scatter kernel launch");
}

CudaSplitBuffer* CudaBackend::SplitOf(const void* p) const {
  if (p == nullptr) return nullptr;
  for (CudaSplitBuffer* b : *splits_)
    if (b->Contains(p)) return b;
  return nullptr;
}

Result<DeviceCtx*> CudaBackend::Peer(int device) {
  if (device == ctx_->device) return ctx_.get();
  auto it = peers_.find(device);
  if (it == peers_.end()) {
    STOWAGE_ASSIGN_OR_RETURN(auto p, DeviceCtx::Create(device));
    std::pair<cudaEvent_t, cudaEvent_t> ev{nullptr, nullptr};
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&ev.second, cudaEventDisableTiming),
                                       p->name + ": cudaEventCreate"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(&ev.first, cudaEventDisableTiming), name_ + ": cudaEventCreate"));
    events_[device] = ev;
    it = peers_.emplace(device, std::move(p)).first;
  }
  return it->second.get();
}

Status CudaBackend::MulMatSplit(CudaSplitBuffer& sb, const TensorView& a, const TensorView& b,
                                const TensorView& d) {
  const std::string where = name_ + ": MUL_MAT on a row-split weight";
  if (a.ne[2] != 1 || a.ne[3] != 1)
    return Unimplemented(where + ": only 2-D weights are split (src0 " + Shape(a) + ")");
  if (!cuda::KernelsCanDequantize(static_cast<int>(a.type)))
    return Unimplemented(where + ": weights of type " + GgmlTypeName(a.type) + " are not supported");
  if (b.type != GgmlType::F32 || d.type != GgmlType::F32 || b.ne[0] != a.ne[0] || d.ne[0] != a.ne[1] ||
      d.ne[1] != b.ne[1] || d.ne[2] != b.ne[2] || d.ne[3] != b.ne[3] || d.nb[0] != 4)
    return InvalidArgument("MUL_MAT: shapes do not match (src0 " + Shape(a) + ", src1 " + Shape(b) +
                           ", dst " + Shape(d) + ")");
  const int64_t N = a.ne[1], K = a.ne[0];
  const int64_t M = b.ne[1] * b.ne[2] * b.ne[3];
  // The device proportions: the plan's tensor split (-ts), else ggml-cuda's default (total memory
  // of each device); the row rounding from the devices with a share (row_split.h).
  std::vector<uint64_t> total(static_cast<size_t>(n_devices_));
  std::vector<int> cc(static_cast<size_t>(n_devices_));
  for (int i = 0; i < n_devices_; ++i) {
    cudaDeviceProp prop;
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaGetDeviceProperties(&prop, i), where + ": cudaGetDeviceProperties"));
    total[static_cast<size_t>(i)] = prop.totalGlobalMem;
    cc[static_cast<size_t>(i)] = prop.major * 100 + prop.minor * 10;
  }
  if (static_cast<int>(sb.tensor_split().size()) > n_devices_)
    return FailedPrecondition(
        where + ": the plan's tensor split has " + std::to_string(sb.tensor_split().size()) +
        " proportions but this machine has " + std::to_string(n_devices_) + " CUDA devices");
  const std::vector<float> cum =
      RowSplitStarts(sb.tensor_split(), total);  // as the planner's fit check (fit.cpp)
  const int64_t rounding = RowRounding(cum, cc);
  const uint64_t offset = static_cast<uint64_t>(static_cast<const uint8_t*>(a.data) - sb.base());
  STOWAGE_ASSIGN_OR_RETURN(const std::vector<SplitSlice>* slices,
                           sb.Slices(offset, N, a.nb[1], cum, rounding));
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
  // src1 as a contiguous F32 [K, M] matrix on the main device.
  STOWAGE_ASSIGN_OR_RETURN(void* xm, ctx_->Scratch(DeviceCtx::kSplitX, static_cast<size_t>(K * M) * 4));
  TensorView x = b;
  x.data = xm;
  cpu::SetContiguousStrides(x);
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cuda::Cpy(ToTv(b), ToTv(x), ctx_->stream), where + ": gathering src1"));
  TensorView x2 = x;  // [K, M] as one matrix
  x2.ne[1] = M;
  x2.ne[2] = x2.ne[3] = 1;
  cpu::SetContiguousStrides(x2);
  const bool dst_flat =
      d.nb[2] == d.nb[1] * static_cast<size_t>(d.ne[1]) && d.nb[3] == d.nb[2] * static_cast<size_t>(d.ne[2]);
  if (!dst_flat)
    return Unimplemented(where + ": dst must be contiguous over its rows (dst " + Shape(d) + ")");
  // Peers first, the main device's own rows last, the main stream's waits for the peers after that:
  // the peers start as soon as src1 is gathered and run while the main device multiplies its rows
  // (issuing the waits inside the loop would serialize the devices). Every peer reads xm and writes
  // its columns of dst; the main stream waits for all of them before later work (which may
  // overwrite xm, or read dst) is queued.
  std::vector<int> peers_used;
  for (const SplitSlice& s : *slices) {
    if (s.device == ctx_->device) continue;
    STOWAGE_ASSIGN_OR_RETURN(DeviceCtx * peer, Peer(s.device));
    auto& ev = events_[s.device];
    // Main stream -> peer: src1 is gathered.
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev.first, ctx_->stream), name_ + ": cudaEventRecord"));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(peer->device), peer->name + ": cudaSetDevice"));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaStreamWaitEvent(peer->stream, ev.first, 0), peer->name + ": cudaStreamWaitEvent"));
    STOWAGE_ASSIGN_OR_RETURN(void* xp, peer->Scratch(DeviceCtx::kSplitX, static_cast<size_t>(K * M) * 4));
    STOWAGE_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyPeerAsync(xp, peer->device, xm, ctx_->device, static_cast<size_t>(K * M) * 4, peer->stream),
        peer->name + ": cudaMemcpyPeerAsync of src1"));
    STOWAGE_ASSIGN_OR_RETURN(void* dp,
                             peer->Scratch(DeviceCtx::kSplitDst, static_cast<size_t>((s.hi - s.lo) * M) * 4));
    const SplitPartViews v = MakeSplitPartViews(a, d, M, s.lo, s.hi, s.data, dp);
    TensorView xpv = x2;
    xpv.data = xp;
    STOWAGE_RETURN_IF_ERROR(MulMat(*peer, v.w, xpv, v.packed));
    // Peer rows -> dst columns [lo, hi) of every dst row on the main device.
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(Memcpy2DPeerAsync(v.dst.data, ctx_->device, v.dst_pitch, dp, peer->device, v.packed_pitch,
                                     v.gather_width, v.gather_rows, peer->stream),
                   peer->name + ": cudaMemcpy3DPeerAsync of the partial result to " + name_));
    STOWAGE_RETURN_IF_ERROR(
        CudaStatus(cudaEventRecord(ev.second, peer->stream), peer->name + ": cudaEventRecord"));
    peers_used.push_back(s.device);
  }
  STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(ctx_->device), name_ + ": cudaSetDevice"));
  for (const SplitSlice& s : *slices) {
    if (s.device != ctx_->device) continue;
    const SplitPartViews v = MakeSplitPartViews(a, d, M, s.lo, s.hi, s.data, nullptr);
    STOWAGE_RETURN_IF_ERROR(MulMat(*ctx_, v.w, x2, v.dst));
  }
  for (int id : peers_used)
    STOWAGE_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(ctx_->stream, events_[id].second, 0),
                                       name_ + ": cudaStreamWaitEvent for CUDA" + std::to_string(id)));
  return Status::Ok();
}

}  // namespace

bool CudaSupportsWeightType(GgmlType type) { return cuda::KernelsCanDequantize(static_cast<int>(type)); }

bool CudaSupportsCpy(GgmlType src, GgmlType dst) { return CudaCopies(src, dst); }

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> CreateCudaBackend(int device) {
  const int n = CudaDeviceCount();
  if (device < 0 || device >= n) return nullptr;
  auto ctx = DeviceCtx::Create(device);
  if (!ctx.ok()) return nullptr;
  return std::make_unique<CudaBackend>(std::move(ctx).value(), n);
}

}  // namespace stowage::exec
