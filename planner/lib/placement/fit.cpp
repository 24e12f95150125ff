#include "stowage/planner/fit.h"

#include <cstdio>

namespace stowage::planner {

std::vector<DeviceMemoryUse> DeviceMemory(const PlacementOutcome& o) {
  const DeviceSet& ds = o.devices;
  std::vector<DeviceMemoryUse> out(ds.devices.size());
  for (size_t d = 0; d < ds.devices.size(); ++d) {
    const DeviceManifest& m = ds.devices[d];
    out[d].device = static_cast<int>(d);
    out[d].name = m.name;
    out[d].available = m.UsableMemory();
    out[d].reported = m.memory_total > 0;
  }
  for (const auto& b : o.memory.buffers) {
    if (b.mapped) continue;
    const PlacedBuft& pb = o.placement.bufts[b.buft];
    const int d = pb.is_host ? ds.cpu : pb.device;
    out[d].needed += b.size;
  }
  return out;
}

Status CheckFit(const PlacementOutcome& o) {
  const auto use = DeviceMemory(o);
  for (const auto& u : use) {
    if (!u.reported || u.needed <= u.available) continue;
    const DeviceManifest& m = o.devices.devices[u.device];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "does not fit: device %s needs %llu bytes (%.2f MiB) but has %llu bytes (%.2f MiB) available "
                  "(free %.2f MiB - reserve %.2f MiB)",
                  u.name.c_str(), static_cast<unsigned long long>(u.needed), u.needed / 1048576.0,
                  static_cast<unsigned long long>(u.available), u.available / 1048576.0, m.memory_free / 1048576.0,
                  m.memory_reserve / 1048576.0);
    return ResourceExhausted(buf);
  }
  return Status::Ok();
}

Result<int> FitGpuLayers(int max_ngl, const std::function<Result<bool>(int, std::string*)>& fits) {
  std::string why;
  STOWAGE_ASSIGN_OR_RETURN(bool ok0, fits(0, &why));
  if (!ok0) return ResourceExhausted("--fit: even -ngl 0 " + why);
  int lo = 0, hi = max_ngl;  // lo fits; find the largest
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    std::string w;
    STOWAGE_ASSIGN_OR_RETURN(bool ok, fits(mid, &w));
    if (ok) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace stowage::planner
