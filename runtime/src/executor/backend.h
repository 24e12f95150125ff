// Internal backend interface of the executor (one implementation per folder under src/backends,
// like ggml's backend / buffer split). A backend owns buffers of its buffer types and runs graph
// nodes whose tensors live in memory it can read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ops.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/status.h"

namespace stowage::exec {

using cpu::TensorView;

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
};

/// One node as the backend sees it: op, params, bound sources and destination.
struct NodeCall {
  GgmlOp op = GgmlOp::NONE;
  const char* name = "";
  TensorView dst;
  TensorView src[4];
  bool has_src[4] = {false, false, false, false};
  const int32_t* iparams = nullptr;
  size_t n_iparams = 0;
  const float* fparams = nullptr;
  size_t n_fparams = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  /// Allocates `size` bytes (zeroed) for buffer type `buft`. Errors: kResourceExhausted.
  virtual Result<std::unique_ptr<Buffer>> Allocate(const std::string& buft, uint64_t size, uint64_t alignment) = 0;
  /// Runs one node. Errors: kUnimplemented for an op/type combination the backend lacks.
  virtual Status Compute(const NodeCall& call) = 0;
  /// True when this backend's kernels can read and write `buf` in place (ggml supports_buft).
  virtual bool CanAccess(const Buffer& buf) const = 0;
  /// Waits for queued work (no-op for synchronous backends).
  virtual Status Synchronize() { return Status::Ok(); }
};

/// Creates backends for plan devices that are not built into this runtime (test-only devices).
/// Passed through SessionOptions::backend_factory; consulted before the built-in backends.
class BackendFactory {
 public:
  virtual ~BackendFactory() = default;
  /// A backend for device `name` of `type` ("CPU", "GPU", "ACCEL"), or nullptr to decline.
  virtual std::unique_ptr<Backend> Create(const std::string& name, const std::string& type, int n_threads) = 0;
};

/// Host memory buffer (aligned allocation or a wrapped range of the file mapping).
class HostBuffer final : public Buffer {
 public:
  static Result<std::unique_ptr<HostBuffer>> Allocate(uint64_t size, uint64_t alignment);
  static std::unique_ptr<HostBuffer> Wrap(const uint8_t* data, uint64_t size);
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

/// The CPU backend: stowage_cpu kernels, `n_threads` OpenMP threads.
std::unique_ptr<Backend> CreateCpuBackend(int n_threads);

/// The backend this build provides for a planned device (`type` "CPU", "GPU" or "ACCEL"; `name`
/// as in the plan, e.g. "CUDA0"), or nullptr when it has none (builtin_backends.cpp).
std::unique_ptr<Backend> CreateBuiltinBackend(const std::string& name, const std::string& type, int n_threads);
/// Comma-separated names of the device kinds this build can run ("CPU, CUDA, oneDNN").
std::string BuiltinBackendNames();

}  // namespace stowage::exec
