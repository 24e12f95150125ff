#include "stowage/planner/fit.h"

#include <algorithm>
#include <cstdio>

#include "stowage/runtime/row_split.h"  // the split rules the CUDA backend applies

namespace stowage::planner {

Result<std::vector<SplitBufferShare>> RowSplitShares(const ModelGraphs& m, const PlacementOutcome& o) {
  const DeviceSet& ds = o.devices;
  std::vector<SplitBufferShare> out;
  for (size_t bi = 0; bi < o.memory.buffers.size(); ++bi) {
    const PlannedBuffer& b = o.memory.buffers[bi];
    if (b.usage != BufferUsage::kWeights || b.mapped) continue;
    const PlacedBuft& pb = o.placement.bufts[b.buft];
    const DeviceManifest& owner = ds.devices[pb.device];
    if (!owner.split_buft || owner.split_buft->name != pb.name) continue;
    // The devices the split spreads over: the model devices of the owner's backend with a split buft.
    std::vector<int> devs;
    std::vector<uint64_t> totals;
    for (int i = 0; i < ds.n_model; ++i) {
      const DeviceManifest& d = ds.devices[i];
      if (d.backend != owner.backend || !d.split_buft) continue;
      devs.push_back(i);
      totals.push_back(d.memory_total);
    }
    if (devs.empty())
      return Internal("split buffer " + b.name + " has no model device of backend " + owner.backend);
    // The split the plan records for this buft (RecordTensorSplit: one proportion per device above,
    // or empty for ggml's default), which is what the runtime's split buffer receives: the fit check
    // counts the rows the runtime will really put on each device.
    const std::vector<float> starts = exec::RowSplitStarts(pb.tensor_split, totals);
    SplitBufferShare share;
    share.buffer = static_cast<int>(bi);
    share.device_bytes.assign(ds.devices.size(), 0);
    std::vector<uint64_t> seen;  // offsets of stored tensors (a duplicated weight shares one copy)
    for (const GlobalTensor& g : m.globals) {
      if (g.kind != TensorKind::kWeight || g.buffer != static_cast<int>(bi)) continue;
      if (std::find(seen.begin(), seen.end(), g.offset) != seen.end()) continue;
      seen.push_back(g.offset);
      const int64_t nrows = g.ne[1] * g.ne[2] * g.ne[3];
      const uint64_t row_bytes = RowSize(g.type, g.ne[0]);
      const uint64_t pad = g.ne[0] % kMatrixRowPadding != 0
                               ? RowSize(g.type, kMatrixRowPadding - g.ne[0] % kMatrixRowPadding)
                               : 0;
      for (size_t k = 0; k < devs.size(); ++k) {
        int64_t lo = 0, hi = 0;
        exec::RowSplit(nrows, starts, kRowSplitRounding, static_cast<int>(k), &lo, &hi);
        if (hi > lo) share.device_bytes[devs[k]] += static_cast<uint64_t>(hi - lo) * row_bytes + pad;
      }
    }
    out.push_back(std::move(share));
  }
  return out;
}

int BufferDevice(const PlacementOutcome& o, int buffer) {
  const PlannedBuffer& b = o.memory.buffers[buffer];
  if (b.mapped) return kNoDevice;
  if (std::any_of(o.split_shares.begin(), o.split_shares.end(),
                  [&](const SplitBufferShare& s) { return s.buffer == buffer; }))
    return kSplitShares;
  const DeviceSet& ds = o.devices;
  const PlacedBuft& pb = o.placement.bufts[b.buft];
  // ACCEL devices (ggml's BLAS, AMX; here ONEDNN) keep their buffers in host memory, like the CPU
  // (their manifests report the same host memory): counted once, for the CPU, so that weights on
  // ONEDNN plus the CPU's KV cache and compute buffers are checked together.
  const bool host = pb.is_host || (pb.device >= 0 && ds.devices[pb.device].type == DeviceType::kAccel);
  return host ? ds.cpu : pb.device;
}

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
  for (size_t bi = 0; bi < o.memory.buffers.size(); ++bi) {
    const PlannedBuffer& b = o.memory.buffers[bi];
    const int usage = static_cast<int>(b.usage);
    const int d = BufferDevice(o, static_cast<int>(bi));
    if (d == kNoDevice) continue;
    if (d == kSplitShares) {
      const auto share =
          std::find_if(o.split_shares.begin(), o.split_shares.end(),
                       [&](const SplitBufferShare& s) { return s.buffer == static_cast<int>(bi); });
      for (size_t k = 0; k < out.size() && k < share->device_bytes.size(); ++k) {
        out[k].needed += share->device_bytes[k];
        out[k].by_usage[usage] += share->device_bytes[k];
      }
      continue;
    }
    out[d].needed += b.size;
    out[d].by_usage[usage] += b.size;
  }
  return out;
}

Status CheckFit(const PlacementOutcome& o, bool devices_only, uint64_t margin) {
  const auto use = DeviceMemory(o);
  for (const auto& u : use) {
    const DeviceManifest& m = o.devices.devices[u.device];
    const bool gpu = m.type == DeviceType::kGpu && u.device != o.devices.cpu;
    const uint64_t keep = gpu ? margin : 0;
    if (!u.reported || u.needed + keep <= u.available) continue;
    if (devices_only && !gpu) continue;
    char target[64] = "";  // the --fit-target margin, when one is kept
    if (keep > 0) std::snprintf(target, sizeof target, " + %.2f MiB --fit-target", keep / 1048576.0);
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "does not fit: device %s needs %llu bytes (%.2f MiB)%s but has %llu bytes (%.2f MiB) available "
        "(free %.2f MiB - reserve %.2f MiB)",
        u.name.c_str(), static_cast<unsigned long long>(u.needed), u.needed / 1048576.0, target,
        static_cast<unsigned long long>(u.available), u.available / 1048576.0, m.memory_free / 1048576.0,
        m.memory_reserve / 1048576.0);
    return ResourceExhausted(buf);
  }
  return Status::Ok();
}

std::vector<std::string> UnreportedMemoryWarnings(const PlacementOutcome& o) {
  std::vector<std::string> out;
  for (const DeviceMemoryUse& u : DeviceMemory(o)) {
    const DeviceManifest& m = o.devices.devices[u.device];
    if (u.reported || u.needed == 0 || m.type != DeviceType::kGpu) continue;
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.2f MiB", u.needed / 1048576.0);
    out.push_back("device " + u.name + " did not report memory (" +
                  (m.source_path.empty() ? std::string("probed") : m.source_path) +
                  ": memory.total 0): the " + mib +
                  " planned on it were not checked against its free memory");
  }
  return out;
}

Result<int> FitGpuLayers(int max_ngl, const std::function<Result<bool>(int, std::string*)>& fits) {
  std::string why;
  STOWAGE_ASSIGN_OR_RETURN(bool ok0, fits(0, &why));
  if (!ok0) return ResourceExhausted("--fit: even -ngl 0 " + why);
  // Device memory use grows with ngl (host memory shrinks, and is not fitted: see fit.h).
  int lo = 0, hi = max_ngl;  // lo fits; find the largest
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    std::string w;
    STOWAGE_ASSIGN_OR_RETURN(bool ok, fits(mid, &w));
    if (ok)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

Result<int> FitGpuLayersToDevices(const GgufFile& gguf, const HParams& hp, const ContextConfig& cfg,
                                  const std::vector<DeviceManifest>& machine, const PlacementOptions& opt,
                                  uint64_t margin) {
  if (std::none_of(machine.begin(), machine.end(),
                   [](const DeviceManifest& d) { return d.type == DeviceType::kGpu; }))
    return 0;
  // llama.cpp common/fit.cpp (DEC25): "device %s did not report memory; --fit will not use it".
  // Whole layers cannot be kept off one GPU of several here, so such a device is refused by name.
  for (const DeviceManifest& d : machine)
    if (d.type == DeviceType::kGpu && d.memory_total == 0)
      return InvalidArgument("--fit: device " + d.name + " did not report memory (" +
                             (d.source_path.empty() ? std::string("probed") : d.source_path) +
                             ": memory.total 0), so --fit cannot size it: give its free memory (--free " +
                             d.name + "=SIZE) or -ngl N");
  // The graphs once; each candidate places a copy, since PlaceModel writes its decisions into the
  // graphs.
  STOWAGE_ASSIGN_OR_RETURN(const ModelGraphs built, BuildModelGraphs(gguf, hp, cfg));
  auto fits = [&](int n, uint64_t keep, std::string* why) -> Result<bool> {
    PlacementOptions o = opt;
    o.n_gpu_layers = n;
    ModelGraphs g = built;
    STOWAGE_ASSIGN_OR_RETURN(PlacementOutcome out, PlaceModel(g, machine, o));
    Status s = CheckFit(out, /*devices_only=*/true, keep);
    if (s.ok()) return true;
    if (s.code() != StatusCode::kResourceExhausted) return s;
    *why = s.message();
    return false;
  };
  auto r = FitGpuLayers(static_cast<int>(hp.n_layer) + 1,
                        [&](int n, std::string* why) { return fits(n, margin, why); });
  if (r.ok() || r.status().code() != StatusCode::kResourceExhausted || margin == 0) return r;
  // Even -ngl 0 leaves less than the margin free (a small GPU): llama_params_fit then keeps the
  // parameters it was given; here -ngl 0, when that fits without the margin.
  std::string why;
  STOWAGE_ASSIGN_OR_RETURN(bool ok0, fits(0, 0, &why));
  if (ok0) return 0;
  return r;
}

}  // namespace stowage::planner
