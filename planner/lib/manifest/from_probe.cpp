// ProbedDevice -> DeviceManifest (see stowage/planner/from_probe.h).
#include "stowage/planner/from_probe.h"

#include <cctype>

namespace stowage::planner {
namespace {

BufferType ToBuft(const ProbedBufferType& b) {
  BufferType out;
  out.name = b.name;
  out.alignment = b.alignment;
  out.is_host = b.is_host;
  out.supports_op = b.supports_op;  // the same rules
  return out;
}

void Templatize(std::string& s, const std::string& concrete, const std::string& templ) {
  if (s == concrete) s = templ;
}

}  // namespace

std::string LocalManifestKey(const ProbedDevice& device) {
  std::string key = "local-";
  for (char c : device.name) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    key += (std::isalnum(static_cast<unsigned char>(l)) || l == '.' || l == '_' || l == '-') ? l : '-';
  }
  return key;
}

Result<DeviceManifest> ManifestFromProbe(const ProbedDevice& d) {
  DeviceManifest m;
  m.backend = d.backend;
  m.name = d.name;
  m.description = d.description;
  m.type = d.type == ProbedDeviceType::kCpu   ? DeviceType::kCpu
           : d.type == ProbedDeviceType::kGpu ? DeviceType::kGpu
                                              : DeviceType::kAccel;
  m.memory_total = d.memory_total;
  m.memory_free = d.memory_free;
  m.caps = {d.caps_async, d.caps_host_buffer, d.caps_buffer_from_host_ptr, d.caps_events};
  m.default_buft = ToBuft(d.default_buft);
  if (d.host_buft) m.host_buft = ToBuft(*d.host_buft);
  if (d.split_buft) m.split_buft = ToBuft(*d.split_buft);
  for (const auto& e : d.extra_bufts) m.extra_bufts.push_back(ToBuft(e));
  m.supports_buft.any_host = d.supports_any_host_buft;
  m.op_support = d.op_support;  // the same rules, in the order ProbedDevice::SupportsOp asks
  if (d.offload_min_batch > 0) m.offload_op = OffloadRule{d.offload_min_batch};

  std::string notes = "Probed by list-devices.";
  for (const auto& [k, v] : d.properties) notes += " " + k + ": " + v + ";";
  if (notes.back() == ';') notes.back() = '.';
  m.notes = notes;

  if (d.backend == "CUDA") {
    const std::string concrete = d.name;
    Templatize(m.name, concrete, "CUDA{index}");
    Templatize(m.default_buft.name, concrete, "CUDA{index}");
    if (m.split_buft) Templatize(m.split_buft->name, concrete + "_Split", "CUDA{index}_Split");
  }
  return m;
}

}  // namespace stowage::planner
