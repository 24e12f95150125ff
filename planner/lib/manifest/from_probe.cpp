// ProbedDevice -> DeviceManifest (see stowage/planner/from_probe.h).
#include "stowage/planner/from_probe.h"

#include <cctype>
#include <map>
#include <utility>

namespace stowage::planner {
namespace {

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
  static_cast<DeviceDesc&>(m) = d;  // the same description: buffer types, rules, caps, offload_op

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

Result<std::vector<DeviceManifest>> ManifestsFromProbe(const std::vector<ProbedDevice>& probed,
                                                       const std::function<bool(const ProbedDevice&)>& keep) {
  std::vector<DeviceManifest> out;
  std::map<std::string, int> next_index;  // per backend
  for (const ProbedDevice& d : probed) {
    if (keep && !keep(d)) continue;
    STOWAGE_ASSIGN_OR_RETURN(DeviceManifest m, ManifestFromProbe(d));
    out.push_back(m.IsIndexed() ? m.WithIndex(next_index[m.backend]++) : std::move(m));
  }
  return out;
}

}  // namespace stowage::planner
