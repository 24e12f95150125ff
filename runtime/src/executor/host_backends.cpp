// Backends of a plan made across hosts: this rank's devices, placeholders for the others' (see
// stowage/runtime/transport.h).
#include "host_backends.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../plan/plan_graph.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/host_devices.h"
#include "stowage/runtime/plan.h"

namespace stowage {
namespace exec {
namespace {

class RemoteBuffer final : public Buffer {
 public:
  explicit RemoteBuffer(uint64_t size) : size_(size) {}
  uint8_t* base() override { return nullptr; }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }
  Status Write(uint64_t, const void*, uint64_t) override { return Status::Ok(); }
  Status Read(uint64_t, void* dst, uint64_t n) const override {
    std::memset(dst, 0, n);
    return Status::Ok();
  }

 private:
  uint64_t size_;
};

// The device type of a host-local device name ("CPU", "CUDA0", "ONEDNN"), as builtin backends
// take it; the planned type (GPU for every device of host >= 1) otherwise.
std::string LocalType(std::string_view local, const std::string& planned) {
  if (local == "CPU") return "CPU";
  if (local.rfind("CUDA", 0) == 0) return "GPU";
  if (local.rfind("ONEDNN", 0) == 0) return "ACCEL";
  return planned;
}

class HostBackendFactory final : public BackendFactory {
 public:
  HostBackendFactory(std::shared_ptr<Transport> t, bool numerics, CpuIsa isa)
      : transport_(std::move(t)), numerics_(numerics), isa_(isa) {}
  std::unique_ptr<Backend> Create(const std::string& name, const std::string& type, int n_threads) override {
    const int host = HostOfDevice(name);
    if (transport_ && host != transport_->rank())
      return std::make_unique<RemoteBackend>(name, host, transport_);
    const std::string local(LocalDeviceName(name));
    return CreateBuiltinBackend(local, LocalType(local, type), n_threads, numerics_, isa_);
  }

 private:
  std::shared_ptr<Transport> transport_;
  bool numerics_;
  CpuIsa isa_;
};

}  // namespace

Result<std::unique_ptr<Buffer>> RemoteBackend::Allocate(const std::string&, uint64_t size, uint64_t) {
  return std::unique_ptr<Buffer>(std::make_unique<RemoteBuffer>(size));
}

Status RemoteBackend::Compute(const NodeCall& call) {
  return Internal(std::string("node '") + call.name + "' of device " + name_ + " runs on MPI rank " +
                  std::to_string(host_) + ", not on rank " + std::to_string(transport_->rank()));
}

}  // namespace exec

bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

int SplitInputTag(uint64_t step, int split, int input) {
  return static_cast<int>((step * 4099u + static_cast<uint64_t>(split) * 67u + static_cast<uint64_t>(input)) %
                          32768u);
}

int PlanHostCount(const PlanFile& plan) {
  if (plan.root().tp_n_ranks() > 1) return static_cast<int>(plan.root().tp_n_ranks());
  int n = 1;
  for (const auto* d : *plan.root().devices())
    if (d->name()) n = std::max(n, HostOfDevice(d->name()->string_view()) + 1);
  return n;
}

int PlanOutputHost(const PlanFile& plan) {
  const auto& graphs = plan.graphs().graphs;
  if (graphs.empty() || graphs.back().splits.empty()) return 0;
  const auto* be = plan.root().backends()->Get(graphs.back().splits.back().backend);
  const auto* dev = plan.root().devices()->Get(be->device());
  return dev->name() ? HostOfDevice(dev->name()->string_view()) : 0;
}

std::shared_ptr<exec::BackendFactory> MakeHostBackendFactory(std::shared_ptr<Transport> transport,
                                                             bool llamacpp_numerics, CpuIsa cpu_max_isa) {
  return std::make_shared<exec::HostBackendFactory>(std::move(transport), llamacpp_numerics, cpu_max_isa);
}

}  // namespace stowage
