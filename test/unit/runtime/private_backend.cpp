#include "private_backend.h"

#include <cstring>
#include <vector>

namespace stowage::test {
namespace {

class PrivateBackend;

class PrivateBuffer final : public exec::Buffer {
 public:
  PrivateBuffer(const PrivateBackend* owner, uint64_t size)
      : owner_(owner), bytes_(size + 64, 0), size_(size) {}
  uint8_t* base() override {
    // 64-byte aligned view of the private allocation (only the owning backend's kernels use it).
    auto p = reinterpret_cast<uintptr_t>(bytes_.data());
    return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t(63));
  }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("private buffer write out of range");
    std::memcpy(base() + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (offset > size_ || n > size_ - offset) return OutOfRange("private buffer read out of range");
    std::memcpy(dst, const_cast<PrivateBuffer*>(this)->base() + offset, n);
    return Status::Ok();
  }
  const PrivateBackend* owner() const { return owner_; }

 private:
  const PrivateBackend* owner_;
  std::vector<uint8_t> bytes_;
  uint64_t size_;
};

class PrivateBackend final : public exec::Backend {
 public:
  PrivateBackend(std::string name, int n_threads)
      : name_(std::move(name)), cpu_(exec::CreateCpuBackend(n_threads)) {}
  const std::string& name() const override { return name_; }
  Result<std::unique_ptr<exec::Buffer>> Allocate(const std::string&, uint64_t size, uint64_t) override {
    return std::unique_ptr<exec::Buffer>(new PrivateBuffer(this, size));
  }
  bool CanAccess(const exec::Buffer& buf) const override {
    auto* pb = dynamic_cast<const PrivateBuffer*>(&buf);
    return pb != nullptr && pb->owner() == this;  // never host memory, never another device's
  }
  Status Compute(const exec::NodeCall& call) override {
    ++nodes_run;
    return cpu_->Compute(call);  // the CPU kernels, on this backend's private memory
  }
  int nodes_run = 0;

 private:
  std::string name_;
  std::unique_ptr<exec::Backend> cpu_;
};

class Factory final : public exec::BackendFactory {
 public:
  std::unique_ptr<exec::Backend> Create(const std::string& name, const std::string& type,
                                        int n_threads) override {
    if (type != "GPU") return nullptr;
    return std::make_unique<PrivateBackend>(name, n_threads);
  }
};

}  // namespace

std::shared_ptr<exec::BackendFactory> MakePrivateBackendFactory() { return std::make_shared<Factory>(); }

}  // namespace stowage::test
