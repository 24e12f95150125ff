// A device as ggml-backend describes it (see stowage/runtime/device_desc.h).
#include "stowage/runtime/device_desc.h"

#include <algorithm>

namespace stowage {

const char* DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::kCpu:
      return "CPU";
    case DeviceType::kGpu:
      return "GPU";
    case DeviceType::kAccel:
      return "ACCEL";
  }
  return "?";
}

Result<DeviceType> ParseDeviceType(std::string_view s) {
  if (s == "CPU") return DeviceType::kCpu;
  if (s == "GPU") return DeviceType::kGpu;
  if (s == "ACCEL") return DeviceType::kAccel;
  return InvalidArgument("unknown device type '" + std::string(s) + "' (expected CPU, GPU or ACCEL)");
}

bool DeviceCaps::operator==(const DeviceCaps& o) const {
  return async == o.async && host_buffer == o.host_buffer && buffer_from_host_ptr == o.buffer_from_host_ptr &&
         events == o.events;
}

bool BufferType::operator==(const BufferType& o) const {
  return name == o.name && alignment == o.alignment && max_size == o.max_size && is_host == o.is_host &&
         supports_op == o.supports_op && note == o.note;
}

bool SupportsBuftRule::operator==(const SupportsBuftRule& o) const {
  return any_host == o.any_host && names == o.names;
}

bool DeviceDesc::SupportsOp(const OpQuery& q) const {
  if (split_buft && RefusedBySplitBuft(q, split_buft->name)) return false;
  // ggml-cpu supports_op: an extra buffer type that accepts the op makes it supported.
  for (const auto& extra : extra_bufts) {
    if (ExtraBuftAccepts(extra.supports_op, q)) return true;
  }
  return op_support.Evaluate(q);
}

bool DeviceDesc::SupportsBuft(std::string_view buft_name, bool buft_is_host) const {
  if (buft_name == default_buft.name) return true;
  if (split_buft && buft_name == split_buft->name) return true;
  for (const auto& e : extra_bufts) {
    if (buft_name == e.name) return true;
  }
  if (supports_buft.any_host && buft_is_host) return true;
  return std::find(supports_buft.names.begin(), supports_buft.names.end(), buft_name) !=
         supports_buft.names.end();
}

bool DeviceDesc::OffloadOp(GgmlOp /*op*/, int64_t batch) const {
  return offload_op.has_value() && batch >= offload_op->min_batch;
}

const BufferType* DeviceDesc::FindBuft(std::string_view n) const {
  if (default_buft.name == n) return &default_buft;
  if (host_buft && host_buft->name == n) return &*host_buft;
  if (split_buft && split_buft->name == n) return &*split_buft;
  for (const auto& e : extra_bufts) {
    if (e.name == n) return &e;
  }
  return nullptr;
}

bool DeviceDesc::operator==(const DeviceDesc& o) const {
  return backend == o.backend && name == o.name && description == o.description && type == o.type &&
         memory_total == o.memory_total && memory_free == o.memory_free && caps == o.caps &&
         default_buft == o.default_buft && host_buft == o.host_buft && split_buft == o.split_buft &&
         extra_bufts == o.extra_bufts && supports_buft == o.supports_buft && op_support == o.op_support &&
         offload_op == o.offload_op;
}

}  // namespace stowage
