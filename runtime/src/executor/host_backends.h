// The placeholder backend of a device of another host (transport.h): its buffers hold no memory,
// its splits are not run here, and it carries the transport its split inputs go through.
#pragma once

#include <memory>
#include <string>

#include "backend.h"
#include "stowage/runtime/transport.h"

namespace stowage::exec {

class RemoteBackend final : public Backend {
 public:
  RemoteBackend(std::string name, int host, std::shared_ptr<Transport> transport)
      : name_(std::move(name)), host_(host), transport_(std::move(transport)) {}
  const std::string& name() const override { return name_; }
  /// A buffer of `size` bytes that holds none: base() is null, writes are dropped, reads give zeros.
  Result<std::unique_ptr<Buffer>> Allocate(const std::string& buft, uint64_t size,
                                           uint64_t alignment) override;
  /// kInternal: another host runs this device's nodes (the session skips its splits).
  Status Compute(const NodeCall& call) override;
  bool CanAccess(const Buffer&) const override { return true; }
  /// The rank that runs the device.
  int host() const { return host_; }
  Transport& transport() const { return *transport_; }

 private:
  std::string name_;
  int host_;
  std::shared_ptr<Transport> transport_;
};

/// The placeholder backend behind `b`, or nullptr when `b` runs here.
inline const RemoteBackend* AsRemote(const Backend& b) { return dynamic_cast<const RemoteBackend*>(&b); }

}  // namespace stowage::exec
