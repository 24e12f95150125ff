// list-devices: this machine's devices (or registry devices) like llama.cpp's --list-devices.
//
//   list-devices                         probe this machine
//   list-devices --json                  the same as JSON
//   list-devices --emit-manifest DIR     also write DIR/local-<device>.json manifests
//   list-devices --device h200,h200,cpu [--registry DIR]... [--free CUDA1=10GiB]
//                                        show devices made from registry manifests (what-ifs)
//
// A device whose manifest gives no memory (memory.total 0, as the registry's CPUs: the planner then
// never checks it, fit.h) shows "(memory not given)" instead of llama.cpp's "(N MiB, M MiB free)",
// and null memory_total / memory_free in the JSON.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llama_args.h"
#include "stdout_check.h"
#include "stowage/planner/from_probe.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/device_probe.h"

namespace {

using stowage::Status;
using stowage::planner::DeviceManifest;
using json = nlohmann::ordered_json;

uint64_t MiB(uint64_t bytes) { return bytes / 1024 / 1024; }

// One device as list-devices shows it, whichever way it was obtained.
struct Shown {
  std::string name, description, type, backend;
  uint64_t total = 0, free = 0;  ///< bytes; total 0: the manifest gives no memory
  bool async = false, host_buffer = false, from_host_ptr = false, events = false;
  std::vector<std::pair<std::string, std::string>> bufts;  // (name, "default, host, alignment 32")
  std::vector<std::pair<std::string, std::string>> properties;
};

std::string BuftDesc(const char* kind, uint64_t alignment, bool is_host) {
  return std::string(kind) + (is_host ? ", host" : "") + ", alignment " + std::to_string(alignment);
}

Shown FromProbe(const stowage::ProbedDevice& d) {
  Shown s{d.name,
          d.description,
          stowage::DeviceTypeName(d.type),
          d.backend,
          d.memory_total,
          d.memory_free,
          d.caps.async,
          d.caps.host_buffer,
          d.caps.buffer_from_host_ptr,
          d.caps.events,
          {},
          d.properties};
  s.bufts.push_back(
      {d.default_buft.name, BuftDesc("default", d.default_buft.alignment, d.default_buft.is_host)});
  if (d.host_buft) s.bufts.push_back({d.host_buft->name, BuftDesc("host", d.host_buft->alignment, false)});
  for (const auto& e : d.extra_bufts) s.bufts.push_back({e.name, BuftDesc("extra", e.alignment, e.is_host)});
  return s;
}

Shown FromManifest(const DeviceManifest& m) {
  Shown s{m.name,
          m.description,
          stowage::planner::DeviceTypeName(m.type),
          m.backend,
          m.memory_total,
          m.memory_free,
          m.caps.async,
          m.caps.host_buffer,
          m.caps.buffer_from_host_ptr,
          m.caps.events,
          {},
          {}};
  s.bufts.push_back(
      {m.default_buft.name, BuftDesc("default", m.default_buft.alignment, m.default_buft.is_host)});
  if (m.host_buft) s.bufts.push_back({m.host_buft->name, BuftDesc("host", m.host_buft->alignment, false)});
  if (m.split_buft)
    s.bufts.push_back(
        {m.split_buft->name, BuftDesc("split", m.split_buft->alignment, m.split_buft->is_host)});
  for (const auto& e : m.extra_bufts) s.bufts.push_back({e.name, BuftDesc("extra", e.alignment, e.is_host)});
  s.properties.push_back({"manifest", m.source_path});
  if (m.memory_reserve > 0)
    s.properties.push_back({"reserve", std::to_string(MiB(m.memory_reserve)) + " MiB"});
  if (m.offload_op)
    s.properties.push_back({"offload_op", "batch >= " + std::to_string(m.offload_op->min_batch)});
  return s;
}

void PrintText(const std::vector<Shown>& devices, const std::vector<std::string>& notes, bool verbose) {
  // llama.cpp common/arg.cpp --list-devices: "Available devices:" then "  %s: %s (%zu MiB, %zu MiB free)".
  std::printf("Available devices:\n");
  for (const auto& d : devices) {
    if (d.total == 0)
      std::printf("  %s: %s (memory not given)\n", d.name.c_str(), d.description.c_str());
    else
      std::printf("  %s: %s (%llu MiB, %llu MiB free)\n", d.name.c_str(), d.description.c_str(),
                  static_cast<unsigned long long>(MiB(d.total)),
                  static_cast<unsigned long long>(MiB(d.free)));
    if (!verbose) continue;
    std::printf("    type: %s, backend: %s\n", d.type.c_str(), d.backend.c_str());
    std::printf("    caps: async=%d host_buffer=%d buffer_from_host_ptr=%d events=%d\n", d.async,
                d.host_buffer, d.from_host_ptr, d.events);
    for (const auto& [n, desc] : d.bufts) std::printf("    buffer type %s: %s\n", n.c_str(), desc.c_str());
    for (const auto& [k, v] : d.properties) std::printf("    %s: %s\n", k.c_str(), v.c_str());
  }
  if (verbose) {
    for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  }
}

void PrintJson(const std::vector<Shown>& devices, const std::vector<std::string>& notes) {
  json out = json::object();
  json arr = json::array();
  for (const auto& d : devices) {
    json j = {{"name", d.name},
              {"description", d.description},
              {"type", d.type},
              {"backend", d.backend},
              {"memory_total", d.total == 0 ? json(nullptr) : json(d.total)},
              {"memory_free", d.total == 0 ? json(nullptr) : json(d.free)},
              {"caps",
               {{"async", d.async},
                {"host_buffer", d.host_buffer},
                {"buffer_from_host_ptr", d.from_host_ptr},
                {"events", d.events}}}};
    json b = json::array();
    for (const auto& [n, desc] : d.bufts) b.push_back({{"name", n}, {"kind", desc}});
    j["buffer_types"] = b;
    json p = json::object();
    for (const auto& [k, v] : d.properties) p[k] = v;
    j["properties"] = p;
    arr.push_back(j);
  }
  out["devices"] = arr;
  out["notes"] = notes;
  std::printf("%s\n", out.dump(2).c_str());
}

// mkdir -p.
Status MakeDirs(const std::string& dir) {
  for (size_t pos = dir.find('/', 1);; pos = dir.find('/', pos + 1)) {
    std::string part = dir.substr(0, pos);
    if (!part.empty() && mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return stowage::IoError(part + ": cannot create folder: " + std::strerror(errno));
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return stowage::IoError(dir + ": cannot create folder: Not a directory");
  return Status::Ok();
}

// Builds every manifest first, then writes them: a failure writes nothing.
Status EmitManifests(const std::vector<stowage::ProbedDevice>& devices, const std::string& dir,
                     std::vector<std::string>* written) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& d : devices) {
    auto m = stowage::planner::ManifestFromProbe(d);
    if (!m.ok()) return m.status();
    std::string text = stowage::planner::SerializeManifest(*m);
    std::string path = dir + "/" + stowage::planner::LocalManifestKey(d) + ".json";
    // The emitted file must be one the planner accepts.
    auto check = stowage::planner::ParseManifest(text, path);
    if (!check.ok()) return stowage::Internal("emitted manifest does not parse: " + check.status().message());
    files.push_back({path, text});
  }
  STOWAGE_RETURN_IF_ERROR(MakeDirs(dir));
  for (const auto& [path, text] : files) {
    STOWAGE_RETURN_IF_ERROR(stowage::WriteFileAtomic(path, text.data(), text.size()));
    written->push_back(path);
  }
  return Status::Ok();
}

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed comes before the error line when both go to one file
  std::fprintf(stderr, "list-devices: error: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "List this machine's devices (like llama.cpp --list-devices), or devices made from registry manifests"};
  bool as_json = false, verbose = false;
  std::string emit_dir, device_list;
  std::vector<std::string> registry_dirs, free_spec;
  app.add_flag("--json", as_json, "print JSON instead of text");
  app.add_flag("-v,--verbose", verbose, "also print type, caps, buffer types, properties and notes");
  CLI::Option* emit_opt = app.add_option("--emit-manifest", emit_dir,
                                         "write a manifest per probed device into DIR (local-<device>.json)");
  app.add_option("--device", device_list,
                 "show devices made from registry manifests instead of probing (e.g. h200,h200,cpu)");
  app.add_option("--registry", registry_dirs,
                 "extra manifest folder, searched before the shipped registry (repeatable)");
  app.add_option(
         "--free", free_spec,
         "override free memory of registry devices: NAME=SIZE[,NAME=SIZE] (e.g. CUDA1=10GiB), repeatable; "
         "one value per device")
      ->allow_extra_args(false);
  if (int rc = stowage::tools::ParseWithAliases(app, argc, argv, {}); rc >= 0) return rc;

  if (emit_opt->count() > 0 && emit_dir.empty())
    return Fail(stowage::InvalidArgument(
        "--emit-manifest: empty folder name (give the folder to write manifests into)"));
  for (const auto& dir : registry_dirs)
    if (dir.empty()) return Fail(stowage::InvalidArgument("--registry: empty folder name"));
  if (!registry_dirs.empty()) {  // named when missing, before anything else is said about it
    auto reg = stowage::planner::Registry::Open(registry_dirs);
    if (!reg.ok()) return Fail(stowage::InvalidArgument("--registry: " + reg.status().message()));
  }
  std::vector<Shown> shown;
  std::vector<std::string> notes;
  if (!device_list.empty() || !registry_dirs.empty() || !free_spec.empty()) {
    if (device_list.empty()) return Fail(stowage::InvalidArgument("--registry and --free need --device"));
    if (!emit_dir.empty())
      return Fail(stowage::InvalidArgument(
          "--emit-manifest writes probed devices; it cannot be combined with --device"));
    auto overrides = stowage::planner::ParseMemoryOverrides(stowage::tools::JoinValues(free_spec));
    if (!overrides.ok()) return Fail(overrides.status());
    std::vector<std::string> dirs = registry_dirs;
    dirs.push_back(stowage::planner::ShippedRegistryDir(argv[0]));
    auto registry = stowage::planner::Registry::Open(dirs);
    if (!registry.ok()) return Fail(registry.status());
    auto devices = registry->MakeDevices(device_list, *overrides);
    if (!devices.ok()) return Fail(devices.status());
    for (const auto& d : *devices) shown.push_back(FromManifest(d));
  } else {
    stowage::ProbeReport report = stowage::ProbeDevices();
    notes = report.notes;
    if (!emit_dir.empty()) {
      std::vector<std::string> written;
      Status s = EmitManifests(report.devices, emit_dir, &written);
      if (!s.ok()) return Fail(s);
      for (const auto& w : written) notes.push_back("wrote " + w);
      if (!as_json) {
        for (const auto& w : written) std::fprintf(stderr, "list-devices: wrote %s\n", w.c_str());
      }
    }
    for (const auto& d : report.devices) shown.push_back(FromProbe(d));
  }
  if (as_json) {
    PrintJson(shown, notes);
  } else {
    PrintText(shown, notes, verbose);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("list-devices", Run, argc, argv); }
