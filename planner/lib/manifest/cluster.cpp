// Cluster files: hosts, their device lists and links (see cluster.h).
#include "stowage/planner/cluster.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "stowage/planner/registry.h"
#include "stowage/runtime/host_devices.h"
#include "stowage/runtime/read_file.h"

namespace stowage::planner {
namespace {

using json = nlohmann::json;

Status Bad(const std::string& file, const std::string& key, const std::string& msg) {
  return InvalidArgument(file + ": $." + key + ": " + msg);
}

const char* JsonKind(const json& j) { return j.type_name(); }

Status CheckKeys(const json& j, const std::string& file, const std::string& at,
                 std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      std::string names;
      for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      return Bad(file, at + (at.empty() ? "" : ".") + it.key(), "unknown key, expected one of " + names);
    }
  return Status::Ok();
}

Result<std::string> String(const json& j, const std::string& file, const std::string& key, bool required) {
  if (!j.contains(key)) {
    if (required) return Bad(file, key, "missing, expected a string");
    return std::string();
  }
  if (!j[key].is_string()) return Bad(file, key, std::string("expected a string, found ") + JsonKind(j[key]));
  return j[key].get<std::string>();
}

// The device list with each item that names a file next to the cluster file `file` (a manifest
// such as "cpu-half.json") given as that file's path; registry keys and other items unchanged.
std::string ResolveNextToFile(const std::string& list, const std::string& file) {
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos) return list;
  std::string out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    std::string item = list.substr(at, comma - at);
    struct stat st;
    const std::string beside = file.substr(0, slash + 1) + item;
    if (!item.empty() && item[0] != '/' && stat(beside.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      item = beside;
    out += (at ? "," : "") + item;
    at = comma + 1;
  }
  return out;
}

Result<ClusterHost> ParseHost(const json& h, const std::string& file, const std::string& at,
                              const std::vector<std::string>& registry_dirs) {
  if (!h.is_object()) return Bad(file, at, std::string("expected an object, found ") + JsonKind(h));
  STOWAGE_RETURN_IF_ERROR(CheckKeys(h, file, at, {"name", "devices", "free"}));
  ClusterHost host;
  auto sub = [&](const char* k) { return at + "." + k; };
  if (!h.contains("name") || !h["name"].is_string() || h["name"].get<std::string>().empty())
    return Bad(file, sub("name"), "expected a non-empty string");
  host.name = h["name"].get<std::string>();
  if (!h.contains("devices") || !h["devices"].is_string() || h["devices"].get<std::string>().empty())
    return Bad(file, sub("devices"), "expected a device list such as \"cpu\" or \"h200,cpu\"");
  STOWAGE_ASSIGN_OR_RETURN(Registry reg, Registry::Open(registry_dirs));
  std::vector<MemoryOverride> ovr;
  if (h.contains("free")) {
    if (!h["free"].is_string()) return Bad(file, sub("free"), "expected a string such as \"CPU=16GiB\"");
    auto parsed = ParseMemoryOverrides(h["free"].get<std::string>());
    if (!parsed.ok()) return Bad(file, sub("free"), parsed.status().message());
    ovr = std::move(*parsed);
  }
  auto devices = reg.MakeDevices(ResolveNextToFile(h["devices"].get<std::string>(), file));
  if (!devices.ok()) return Bad(file, sub("devices"), devices.status().message());
  host.devices = std::move(*devices);
  if (Status st = ApplyMemoryOverrides(host.devices, ovr); !st.ok())
    return Bad(file, sub("free"), st.message());
  if (std::none_of(host.devices.begin(), host.devices.end(),
                   [](const DeviceManifest& d) { return d.type == DeviceType::kCpu; }))
    return Bad(file, sub("devices"), "no CPU device, expected one (each host runs its own CPU backend)");
  for (const auto& d : host.devices)
    if (d.name.find(':') != std::string::npos)
      return Bad(file, sub("devices"), "device name '" + d.name + "' holds ':', expected a host-local name");
  return host;
}

Result<ClusterLink> ParseLink(const json& l, const std::string& file, const std::string& at, size_t n_hosts) {
  if (!l.is_object()) return Bad(file, at, std::string("expected an object, found ") + JsonKind(l));
  STOWAGE_RETURN_IF_ERROR(CheckKeys(l, file, at, {"hosts", "bandwidth_bytes_per_second", "latency_seconds"}));
  ClusterLink link;
  const json* hs = l.contains("hosts") ? &l["hosts"] : nullptr;
  if (!hs || !hs->is_array() || hs->size() != 2 || !(*hs)[0].is_number_integer() ||
      !(*hs)[1].is_number_integer())
    return Bad(file, at + ".hosts", "expected two host indices such as [0, 1]");
  const int64_t a = (*hs)[0].get<int64_t>(), b = (*hs)[1].get<int64_t>();
  for (int64_t x : {a, b})
    if (x < 0 || x >= static_cast<int64_t>(n_hosts))
      return Bad(file, at + ".hosts",
                 "host " + std::to_string(x) + " is outside [0, " + std::to_string(n_hosts - 1) + "]");
  if (a == b) return Bad(file, at + ".hosts", "a link joins host " + std::to_string(a) + " with itself");
  link.host_a = static_cast<int>(a);
  link.host_b = static_cast<int>(b);
  if (!l.contains("bandwidth_bytes_per_second") || !l["bandwidth_bytes_per_second"].is_number() ||
      !(l["bandwidth_bytes_per_second"].get<double>() > 0))
    return Bad(file, at + ".bandwidth_bytes_per_second", "expected a number > 0");
  link.bandwidth_bytes_per_second = l["bandwidth_bytes_per_second"].get<double>();
  if (l.contains("latency_seconds")) {
    if (!l["latency_seconds"].is_number() || !(l["latency_seconds"].get<double>() >= 0))
      return Bad(file, at + ".latency_seconds", "expected a number >= 0");
    link.latency_seconds = l["latency_seconds"].get<double>();
  }
  return link;
}

}  // namespace

Result<Cluster> ParseCluster(const std::string& json_text, const std::string& file,
                             const std::vector<std::string>& registry_dirs) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(file + ": not valid JSON, expected a cluster object");
  if (!j.is_object()) return InvalidArgument(file + ": expected a JSON object, found " + JsonKind(j));
  STOWAGE_RETURN_IF_ERROR(CheckKeys(j, file, "", {"cluster_version", "description", "hosts", "links"}));
  if (!j.contains("cluster_version") || !j["cluster_version"].is_number_integer() ||
      j["cluster_version"].get<int64_t>() < 1 || j["cluster_version"].get<int64_t>() > kClusterVersion)
    return Bad(file, "cluster_version",
               (kClusterVersion == 1 ? std::string("expected 1")
                                     : "expected 1 to " + std::to_string(kClusterVersion)) +
                   ", found " +
                   (j.contains("cluster_version") ? j["cluster_version"].dump() : std::string("none")));
  Cluster c;
  c.path = file;
  STOWAGE_ASSIGN_OR_RETURN(c.description, String(j, file, "description", false));
  if (!j.contains("hosts") || !j["hosts"].is_array() || j["hosts"].empty())
    return Bad(file, "hosts", "expected a non-empty array of hosts");
  if (j["hosts"].size() > static_cast<size_t>(kMaxClusterHosts))
    return Bad(
        file, "hosts",
        std::to_string(j["hosts"].size()) + " hosts, expected at most " + std::to_string(kMaxClusterHosts));
  for (size_t i = 0; i < j["hosts"].size(); ++i) {
    const std::string at = "hosts[" + std::to_string(i) + "]";
    STOWAGE_ASSIGN_OR_RETURN(ClusterHost h, ParseHost(j["hosts"][i], file, at, registry_dirs));
    for (const auto& o : c.hosts)
      if (o.name == h.name) return Bad(file, at + ".name", "host name '" + h.name + "' appears twice");
    if (i > 0)
      for (const auto& d : h.devices)
        if (d.memory_free == 0)
          return Bad(
              file, at + ".free",
              "device " + d.name + " has no memory, expected its free memory (\"" + d.name + "=SIZE\")");
    c.hosts.push_back(std::move(h));
  }
  if (j.contains("links")) {
    if (!j["links"].is_array()) return Bad(file, "links", "expected an array");
    for (size_t i = 0; i < j["links"].size(); ++i) {
      STOWAGE_ASSIGN_OR_RETURN(
          ClusterLink l, ParseLink(j["links"][i], file, "links[" + std::to_string(i) + "]", c.hosts.size()));
      c.links.push_back(l);
    }
  }
  return c;
}

Result<Cluster> LoadClusterFile(const std::string& path, const std::vector<std::string>& registry_dirs) {
  STOWAGE_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path, 1u << 20, "a cluster file (JSON)"));
  return ParseCluster(text, path, registry_dirs);
}

std::vector<DeviceManifest> ClusterDevices(const Cluster& cluster) {
  std::vector<DeviceManifest> out;
  for (size_t h = 0; h < cluster.hosts.size(); ++h) {
    for (const DeviceManifest& d : cluster.hosts[h].devices) {
      if (h == 0) {
        out.push_back(d);
        continue;
      }
      DeviceManifest m = d;
      const std::string prefix = HostDevicePrefix(static_cast<int>(h));
      m.backend = "MPI";
      m.type = DeviceType::kGpu;
      m.name = prefix + d.name;
      m.description =
          "host " + cluster.hosts[h].name + " (MPI rank " + std::to_string(h) + "): " + d.description;
      m.default_buft.name = prefix + d.default_buft.name;
      m.default_buft.is_host = false;
      m.default_buft.supports_op.clear();
      m.host_buft.reset();
      m.split_buft.reset();
      m.extra_bufts.clear();
      m.supports_buft = SupportsBuftRule{};
      m.offload_op.reset();
      m.caps = DeviceCaps{};
      // A host's CPU reads its own memory: ggml-cpu's "a source in a non-host buffer" rule would
      // refuse every op here, where the device's buffer type is not host memory of host 0 (the
      // scheduler copies any source from elsewhere into this device's buffer first).
      if (d.type == DeviceType::kCpu) {
        auto& rules = m.op_support.rules;
        rules.erase(
            std::remove_if(rules.begin(), rules.end(),
                           [](const OpRule& r) { return r.all_srcs_host == std::optional<bool>(false); }),
            rules.end());
        for (auto& r : rules) r.all_srcs_host.reset();
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace stowage::planner
