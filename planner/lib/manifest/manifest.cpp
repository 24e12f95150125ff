// DeviceManifest's own queries (the device's are DeviceDesc's, stowage/runtime/device_desc.cpp).
#include "stowage/planner/manifest.h"

namespace stowage::planner {
namespace {

void ReplaceIndex(std::string& s, const std::string& index) {
  static const std::string kTag = "{index}";
  for (size_t pos = s.find(kTag); pos != std::string::npos; pos = s.find(kTag, pos + index.size())) {
    s.replace(pos, kTag.size(), index);
  }
}

void ReplaceIndexInRules(std::vector<OpRule>& rules, const std::string& index) {
  for (auto& r : rules) {
    if (r.dst && r.dst->buft) ReplaceIndex(*r.dst->buft, index);
    for (auto& c : r.src) {
      if (c && c->buft) ReplaceIndex(*c->buft, index);
    }
  }
}

void ReplaceIndexInBuft(BufferType& b, const std::string& index) {
  ReplaceIndex(b.name, index);
  ReplaceIndexInRules(b.supports_op, index);
}

}  // namespace

bool Performance::operator==(const Performance& o) const {
  return memory_bandwidth == o.memory_bandwidth && host_link_bandwidth == o.host_link_bandwidth &&
         peak_flops == o.peak_flops;
}

uint64_t DeviceManifest::UsableMemory() const {
  return memory_free > memory_reserve ? memory_free - memory_reserve : 0;
}

DeviceManifest DeviceManifest::WithIndex(int index) const {
  DeviceManifest m = *this;
  const std::string idx = std::to_string(index);
  ReplaceIndex(m.name, idx);
  ReplaceIndexInBuft(m.default_buft, idx);
  if (m.host_buft) ReplaceIndexInBuft(*m.host_buft, idx);
  if (m.split_buft) ReplaceIndexInBuft(*m.split_buft, idx);
  for (auto& e : m.extra_bufts) ReplaceIndexInBuft(e, idx);
  for (auto& n : m.supports_buft.names) ReplaceIndex(n, idx);
  ReplaceIndexInRules(m.op_support.rules, idx);
  return m;
}

bool DeviceManifest::IsIndexed() const { return name.find("{index}") != std::string::npos; }

bool DeviceManifest::operator==(const DeviceManifest& o) const {
  return static_cast<const DeviceDesc&>(*this) == o && manifest_version == o.manifest_version &&
         memory_reserve == o.memory_reserve && performance == o.performance && notes == o.notes;
}

}  // namespace stowage::planner
