// Device registry: manifest folders, device lists and memory overrides (see registry.h).
#include "stowage/planner/registry.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

namespace stowage::planner {
namespace {

std::string Lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitComma(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(',', start);
    out.push_back(
        Trim(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool LooksLikePath(std::string_view item) {
  return item.find('/') != std::string_view::npos ||
         (item.size() > 5 && Lower(item.substr(item.size() - 5)) == ".json");
}

std::vector<const BufferType*> Bufts(const DeviceManifest& d) {
  std::vector<const BufferType*> out = {&d.default_buft};
  if (d.host_buft) out.push_back(&*d.host_buft);
  if (d.split_buft) out.push_back(&*d.split_buft);
  for (const auto& e : d.extra_bufts) out.push_back(&e);
  return out;
}

// Where a device's description came from, for messages: its manifest file, or the probe.
std::string Origin(const DeviceManifest& d) {
  return d.source_path.empty() ? std::string("probed on this machine") : d.source_path;
}

// Buffer types are identified by name across devices (an ACCEL sharing the "CPU" buft, CUDA
// devices sharing "CUDA_Host"): equal names must describe the same buffer type.
Status CheckSharedBufts(const std::vector<DeviceManifest>& devices) {
  for (size_t a = 0; a < devices.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      for (const BufferType* x : Bufts(devices[a])) {
        for (const BufferType* y : Bufts(devices[b])) {
          if (x->name != y->name) continue;
          if (x->alignment != y->alignment || x->is_host != y->is_host || x->max_size != y->max_size)
            return InvalidArgument("buffer type '" + x->name + "' of device " + devices[a].name + " (" +
                                   Origin(devices[a]) + ") differs from the one of device " +
                                   devices[b].name + " (" + Origin(devices[b]) + ") (alignment " +
                                   std::to_string(x->alignment) + " vs " + std::to_string(y->alignment) +
                                   ", is_host " + (x->is_host ? "true" : "false") + " vs " +
                                   (y->is_host ? "true" : "false") + ")");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  std::string_view s = Trim(text);
  auto bad = [&]() {
    return InvalidArgument("invalid size '" + std::string(text) +
                           "' (expected a number with an optional unit such as 512MiB or 40GiB)");
  };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string num(s.substr(0, i));
  if (num.empty() || std::count(num.begin(), num.end(), '.') > 1 || num.front() == '.' || num.back() == '.')
    return bad();
  std::string unit = Lower(Trim(s.substr(i)));
  static const std::map<std::string, double> kUnits = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"kb", 1e3},
      {"m", 1048576.0},
      {"mib", 1048576.0},
      {"mb", 1e6},
      {"g", 1073741824.0},
      {"gib", 1073741824.0},
      {"gb", 1e9},
      {"t", 1099511627776.0},
      {"tib", 1099511627776.0},
      {"tb", 1e12},
  };
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) return bad();
  if (num.find('.') == std::string::npos) {
    // Exact integer arithmetic where possible.
    errno = 0;
    unsigned long long v = std::strtoull(num.c_str(), nullptr, 10);
    auto mul = static_cast<unsigned long long>(it->second);
    if (errno == ERANGE || (mul != 0 && v > UINT64_MAX / mul))
      return OutOfRange("size '" + std::string(text) + "' does not fit in 64 bits");
    return static_cast<uint64_t>(v * mul);
  }
  double v = std::strtod(num.c_str(), nullptr) * it->second;
  if (!(v < 18446744073709551615.0))
    return OutOfRange("size '" + std::string(text) + "' does not fit in 64 bits");
  return static_cast<uint64_t>(std::floor(v));
}

Result<std::vector<MemoryOverride>> ParseMemoryOverrides(std::string_view text) {
  std::vector<MemoryOverride> out;
  if (Trim(text).empty()) return out;
  for (std::string_view item : SplitComma(text)) {
    size_t eq = item.rfind('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return InvalidArgument("invalid memory override '" + std::string(item) +
                             "' (expected DEVICE=SIZE, e.g. CUDA0=40GiB)");
    auto size = ParseByteSize(item.substr(eq + 1));
    if (!size.ok()) return size.status().WithPrefix("memory override '" + std::string(item) + "'");
    const std::string device(Trim(item.substr(0, eq)));
    // One free-memory value per device: a second one is a mistake, not "the last wins".
    for (const MemoryOverride& o : out)
      if (Lower(o.device) == Lower(device))
        return InvalidArgument("memory override '" + std::string(item) + "': device " + device +
                               " is given a free memory twice (also " + o.device + "=" +
                               std::to_string(o.free_bytes) + " bytes; give each device once)");
    out.push_back({device, *size});
  }
  return out;
}

std::string ShippedRegistryDir(const char* argv0) {
  std::string exe;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    exe.assign(buf, static_cast<size_t>(n));
  } else if (argv0 != nullptr) {
    exe = argv0;
  }
  auto slash = exe.rfind('/');
  if (slash != std::string::npos) {
    std::string installed = exe.substr(0, slash) + "/../share/stowage/registry";
    if (IsDir(installed)) return installed;
  }
#ifdef STOWAGE_SOURCE_REGISTRY_DIR
  return STOWAGE_SOURCE_REGISTRY_DIR;
#else
  return "share/stowage/registry";
#endif
}

std::vector<std::string> RegistrySearchDirs(const std::vector<std::string>& user_dirs,
                                            const std::string& shipped, LlamacppCompat compat) {
  std::vector<std::string> dirs = user_dirs;
  if (compat == LlamacppCompat::k2026) dirs.push_back(shipped + "/llamacpp-2026");
  dirs.push_back(shipped);
  return dirs;
}

Result<Registry> Registry::Open(const std::vector<std::string>& dirs) {
  Registry r;
  r.dirs_ = dirs;
  for (const auto& dir : dirs) {
    if (!IsDir(dir)) return NotFound(dir + ": registry folder not found");
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return IoError(dir + ": cannot read registry folder: " + std::strerror(errno));
    std::vector<std::string> files;
    while (dirent* e = readdir(d)) {
      std::string f = e->d_name;
      if (f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0) files.push_back(f);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string key = f.substr(0, f.size() - 5);
      bool seen = std::any_of(r.entries_.begin(), r.entries_.end(),
                              [&](const Entry& en) { return Lower(en.key) == Lower(key); });
      if (!seen) r.entries_.push_back({key, dir + "/" + f});
    }
  }
  return r;
}

std::vector<std::string> Registry::Names() const {
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e.key);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> Registry::PathOf(std::string_view key) const {
  for (const auto& e : entries_) {
    if (Lower(e.key) == Lower(key)) return e.path;
  }
  std::string known;
  for (const auto& n : Names()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown device '" + std::string(key) + "' (known: " + (known.empty() ? "none" : known) +
                  ")");
}

Result<DeviceManifest> Registry::Load(std::string_view key_or_path) const {
  if (LooksLikePath(key_or_path)) return LoadManifestFile(std::string(key_or_path));
  STOWAGE_ASSIGN_OR_RETURN(std::string path, PathOf(key_or_path));
  return LoadManifestFile(path);
}

Status ApplyMemoryOverrides(std::vector<DeviceManifest>& devices,
                            const std::vector<MemoryOverride>& overrides) {
  for (const auto& o : overrides) {
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const DeviceManifest& d) { return Lower(d.name) == Lower(o.device); });
    if (it == devices.end()) {
      std::string names;
      for (const auto& d : devices) names += (names.empty() ? "" : ", ") + d.name;
      return NotFound("memory override for '" + o.device +
                      "': no such device in the device list (devices: " + names + ")");
    }
    if (it->memory_total > 0 && o.free_bytes > it->memory_total)
      return OutOfRange("memory override " + o.device + "=" + std::to_string(o.free_bytes) +
                        " bytes exceeds the device's total memory (" + std::to_string(it->memory_total) +
                        " bytes); for another machine, name its devices from the registry (plan-model "
                        "--device rtx4090,cpu: the registry's CPU reports no total memory)");
    it->memory_free = o.free_bytes;
    // A device that reports no memory (the registry's CPU, 0/0 as ggml-cpu FEB25) is given that much
    // in total too, so that the fit check counts it ("CPU=64GiB" plans a 64 GiB host).
    if (it->memory_total == 0) it->memory_total = o.free_bytes;
  }
  return Status::Ok();
}

Status CheckUniqueDeviceNames(const std::vector<DeviceManifest>& devices) {
  for (size_t a = 0; a < devices.size(); ++a)
    for (size_t b = 0; b < a; ++b)
      if (Lower(devices[a].name) == Lower(devices[b].name))
        return AlreadyExists("device name '" + devices[a].name + "' appears twice (" + Origin(devices[b]) +
                             " and " + Origin(devices[a]) + "): device names must be unique" +
                             (devices[a].type != devices[b].type
                                  ? std::string(" (types ") + DeviceTypeName(devices[b].type) + " and " +
                                        DeviceTypeName(devices[a].type) + ")"
                                  : std::string()));
  return Status::Ok();
}

Result<std::vector<DeviceManifest>> Registry::MakeDevices(
    std::string_view device_list, const std::vector<MemoryOverride>& overrides) const {
  if (Trim(device_list).empty()) return InvalidArgument("empty device list (expected e.g. h200,h200,cpu)");
  std::vector<DeviceManifest> devices;
  std::map<std::string, int> per_backend;
  for (std::string_view item : SplitComma(device_list)) {
    if (item.empty()) return InvalidArgument("device list '" + std::string(device_list) + "': empty item");
    STOWAGE_ASSIGN_OR_RETURN(DeviceManifest m, Load(item));
    int index = per_backend[Lower(m.backend)]++;
    DeviceManifest d = m.WithIndex(index);
    for (const auto& other : devices) {
      if (Lower(other.name) == Lower(d.name))
        return AlreadyExists("device name '" + d.name + "' appears twice in the device list '" +
                             std::string(device_list) + "' (" + Origin(other) + " and " + Origin(d) + ")");
    }
    devices.push_back(std::move(d));
  }
  STOWAGE_RETURN_IF_ERROR(CheckSharedBufts(devices));
  STOWAGE_RETURN_IF_ERROR(ApplyMemoryOverrides(devices, overrides));
  return devices;
}

}  // namespace stowage::planner
