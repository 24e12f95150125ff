// ProbedDevice -> DeviceManifest (see from_probe.h).
#include "from_probe.h"

#include <cctype>

namespace stowage::planner {
namespace {

TensorConstraint ToConstraint(const SrcRequirement& r) {
  TensorConstraint c;
  c.types = r.types;
  c.optional = r.optional;
  if (r.contiguous) c.contiguous = true;
  if (r.host) c.host = true;
  if (!r.buft.empty()) c.buft = r.buft;
  c.max_dims = r.max_dims;
  c.ne_multiple_of[1] = r.ne1_multiple_of;
  return c;
}

Result<std::vector<OpRule>> ToRules(const std::vector<OpSupportEntry>& entries) {
  std::vector<OpRule> rules;
  for (const auto& e : entries) {
    OpRule r;
    r.ops = e.ops;
    r.supported = true;
    r.min_batch = e.min_batch;
    if (!e.dst_types.empty()) {
      TensorConstraint dst;
      dst.types = e.dst_types;
      r.dst = dst;
    }
    for (const auto& s : e.src) r.src.push_back(ToConstraint(s));
    r.note = e.note;
    rules.push_back(std::move(r));
  }
  return rules;
}

BufferType ToBuft(const ProbedBufferType& b) {
  BufferType out;
  out.name = b.name;
  out.alignment = b.alignment;
  out.is_host = b.is_host;
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
  for (const auto& e : d.extra_bufts) {
    BufferType b = ToBuft(e);
    STOWAGE_ASSIGN_OR_RETURN(b.supports_op, ToRules(e.supports_op));
    m.extra_bufts.push_back(std::move(b));
  }
  m.supports_buft.any_host = d.supports_any_host_buft;

  // ProbedDevice::SupportsOp order: view ops, extra bufts (DeviceManifest::SupportsOp asks them
  // first), non-host sources, then the table; nothing else is supported.
  m.op_support.default_supported = false;
  OpRule views;
  views.ops = {GgmlOp::NONE, GgmlOp::RESHAPE, GgmlOp::VIEW, GgmlOp::PERMUTE, GgmlOp::TRANSPOSE};
  if (!d.view_ops_any_buffer) {
    views.all_srcs_host = true;
    OpRule refuse = views;
    refuse.supported = false;
    refuse.all_srcs_host.reset();
    m.op_support.rules.push_back(views);
    m.op_support.rules.push_back(refuse);
  } else {
    m.op_support.rules.push_back(views);
  }
  if (d.srcs_must_be_host) {
    OpRule non_host;
    non_host.supported = false;
    non_host.all_srcs_host = false;
    non_host.note = "a source in a non-host buffer";
    m.op_support.rules.push_back(non_host);
  }
  STOWAGE_ASSIGN_OR_RETURN(std::vector<OpRule> table, ToRules(d.ops));
  for (auto& r : table) m.op_support.rules.push_back(std::move(r));
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
