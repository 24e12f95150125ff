// DeviceManifest queries: supports_op / supports_buft / offload_op evaluated from the manifest.
#include "stowage/planner/manifest.h"

#include <algorithm>

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

bool TensorConstraint::Matches(const TensorDesc* t) const {
  if (!present) return t == nullptr;
  if (t == nullptr) return optional;
  if (!types.empty() && std::find(types.begin(), types.end(), t->type) == types.end()) return false;
  if (contiguous && *contiguous != t->contiguous) return false;
  if (host && *host == t->InNonHostBuffer()) return false;
  if (buft && *buft != t->buft) return false;
  if (max_dims > 0 && t->NumDims() > max_dims) return false;
  for (int i = 0; i < 4; ++i) {
    if (t->ne[i] < min_ne[i]) return false;
    if (max_ne[i] > 0 && t->ne[i] > max_ne[i]) return false;
    if (ne_multiple_of[i] > 1 && t->ne[i] % ne_multiple_of[i] != 0) return false;
  }
  return true;
}

bool TensorConstraint::operator==(const TensorConstraint& o) const {
  return present == o.present && optional == o.optional && types == o.types && contiguous == o.contiguous &&
         host == o.host && buft == o.buft && max_dims == o.max_dims && min_ne == o.min_ne &&
         max_ne == o.max_ne && ne_multiple_of == o.ne_multiple_of;
}

bool OpRule::AppliesTo(GgmlOp op) const {
  return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
}

bool OpRule::Matches(const OpQuery& q) const {
  if (!AppliesTo(q.op)) return false;
  if (all_srcs_host) {
    bool all_host =
        std::none_of(q.src.begin(), q.src.end(), [](const TensorDesc& t) { return t.InNonHostBuffer(); });
    if (all_host != *all_srcs_host) return false;
  }
  if (src1_f32_or_vec_dot) {
    if (q.src.size() < 2) return false;
    GgmlType t1 = q.src[1].type;
    if (t1 != GgmlType::F32 && t1 != VecDotType(q.src[0].type)) return false;
  }
  if (min_batch > 0 && OpBatchSize(q) < min_batch) return false;
  if (dst && !dst->Matches(&q.dst)) return false;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i]) continue;
    const TensorDesc* t = i < q.src.size() ? &q.src[i] : nullptr;
    if (!src[i]->Matches(t)) return false;
  }
  return true;
}

bool OpRule::operator==(const OpRule& o) const {
  return ops == o.ops && supported == o.supported && all_srcs_host == o.all_srcs_host &&
         src1_f32_or_vec_dot == o.src1_f32_or_vec_dot && min_batch == o.min_batch && dst == o.dst &&
         src == o.src && note == o.note;
}

bool OpSupportTable::Evaluate(const OpQuery& q, int* decided_by) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].Matches(q)) {
      if (decided_by) *decided_by = static_cast<int>(i);
      return rules[i].supported;
    }
  }
  if (decided_by) *decided_by = -1;
  return default_supported;
}

bool OpSupportTable::operator==(const OpSupportTable& o) const {
  return default_supported == o.default_supported && rules == o.rules;
}

bool BufferType::operator==(const BufferType& o) const {
  return name == o.name && alignment == o.alignment && max_size == o.max_size && is_host == o.is_host &&
         supports_op == o.supports_op && note == o.note;
}

bool SupportsBuftRule::operator==(const SupportsBuftRule& o) const {
  return any_host == o.any_host && names == o.names;
}

bool Performance::operator==(const Performance& o) const {
  return memory_bandwidth == o.memory_bandwidth && host_link_bandwidth == o.host_link_bandwidth &&
         peak_flops == o.peak_flops;
}

bool DeviceManifest::SupportsOp(const OpQuery& q) const {
  if (split_buft && q.op != GgmlOp::MUL_MAT &&
      std::any_of(q.src.begin(), q.src.end(),
                  [&](const TensorDesc& t) { return t.buft == split_buft->name; }))
    return false;
  // ggml-cpu supports_op: an extra buffer type that accepts the op makes it supported.
  for (const auto& extra : extra_bufts) {
    for (const auto& rule : extra.supports_op) {
      if (rule.Matches(q)) {
        if (rule.supported) return true;
        break;
      }
    }
  }
  return op_support.Evaluate(q);
}

bool DeviceManifest::SupportsBuft(std::string_view buft_name, bool buft_is_host) const {
  if (buft_name == default_buft.name) return true;
  if (split_buft && buft_name == split_buft->name) return true;
  for (const auto& e : extra_bufts) {
    if (buft_name == e.name) return true;
  }
  if (supports_buft.any_host && buft_is_host) return true;
  return std::find(supports_buft.names.begin(), supports_buft.names.end(), buft_name) !=
         supports_buft.names.end();
}

bool DeviceManifest::OffloadOp(GgmlOp op, int64_t batch) const {
  return offload_op.has_value() && batch >= offload_op->min_batch;
}

uint64_t DeviceManifest::UsableMemory() const {
  return memory_free > memory_reserve ? memory_free - memory_reserve : 0;
}

const BufferType* DeviceManifest::FindBuft(std::string_view n) const {
  if (default_buft.name == n) return &default_buft;
  if (host_buft && host_buft->name == n) return &*host_buft;
  if (split_buft && split_buft->name == n) return &*split_buft;
  for (const auto& e : extra_bufts) {
    if (e.name == n) return &e;
  }
  return nullptr;
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
  return manifest_version == o.manifest_version && backend == o.backend && name == o.name &&
         description == o.description && type == o.type && memory_total == o.memory_total &&
         memory_free == o.memory_free && memory_reserve == o.memory_reserve && caps == o.caps &&
         default_buft == o.default_buft && host_buft == o.host_buft && split_buft == o.split_buft &&
         extra_bufts == o.extra_bufts && supports_buft == o.supports_buft && op_support == o.op_support &&
         offload_op == o.offload_op && performance == o.performance && notes == o.notes;
}

}  // namespace stowage::planner
