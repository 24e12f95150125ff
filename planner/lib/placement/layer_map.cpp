#include "stowage/planner/layer_map.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace stowage::planner {

Result<SplitMode> ParseSplitMode(std::string_view s) {
  if (s == "none") return SplitMode::kNone;
  if (s == "layer") return SplitMode::kLayer;
  if (s == "row") return SplitMode::kRow;
  return InvalidArgument("invalid split mode '" + std::string(s) + "' (expected none, layer or row)");
}

Result<std::vector<float>> ParseTensorSplit(std::string_view s) {
  std::vector<float> out;
  if (s.empty()) return out;
  size_t start = 0;
  for (int index = 1;; ++index) {
    size_t end = s.find_first_of(",/", start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    const std::string text(item);
    char* e = nullptr;
    const float v = text.empty() ? -1.f : std::strtof(text.c_str(), &e);
    if (text.empty() || e != text.c_str() + text.size() || !std::isfinite(v) || !(v >= 0.f))
      return InvalidArgument("invalid tensor split '" + std::string(s) + "': item " + std::to_string(index) +
                             " '" + text +
                             "' is not a non-negative number (expected proportions such as 3,1 or 3/1)");
    out.push_back(v);
    if (end == s.size()) break;
    start = end + 1;
  }
  return out;
}

Result<DeviceSet> MakeDeviceSet(const std::vector<DeviceManifest>& machine, SplitMode split_mode,
                                int main_gpu) {
  DeviceSet ds;
  std::vector<const DeviceManifest*> rpc, gpu, accel, cpu;
  for (const auto& d : machine) {
    switch (d.type) {
      case DeviceType::kGpu:
        (d.backend == "RPC" ? rpc : gpu).push_back(&d);
        break;
      case DeviceType::kAccel:
        accel.push_back(&d);
        break;
      case DeviceType::kCpu:
        cpu.push_back(&d);
        break;
    }
  }
  if (cpu.empty())
    return InvalidArgument("no CPU device in the device list (the CPU backend is always needed)");
  if (cpu.size() > 1)
    return InvalidArgument("the device list has " + std::to_string(cpu.size()) + " CPU devices ('" +
                           cpu[0]->name + "', '" + cpu[1]->name + "'); exactly one is expected");
  // llama.cpp: RPC devices in front of the other GPUs.
  std::vector<const DeviceManifest*> model = rpc;
  model.insert(model.end(), gpu.begin(), gpu.end());
  // llama.cpp checks main_gpu for -sm none only; here it must name a model device in every mode
  // (or stay at its default 0 when there are none and the mode does not need one).
  const int n_gpu = static_cast<int>(model.size());
  const bool mg_default_without_gpu = split_mode != SplitMode::kNone && n_gpu == 0 && main_gpu == 0;
  if (!mg_default_without_gpu && (main_gpu < 0 || main_gpu >= n_gpu)) {
    std::string valid = n_gpu == 0   ? ""
                        : n_gpu == 1 ? "; valid: 0 ("
                                     : "; valid: 0 to " + std::to_string(n_gpu - 1) + " (";
    for (int i = 0; i < n_gpu; ++i) valid += (i > 0 ? ", " : "") + model[i]->name;
    if (n_gpu > 0) valid += ")";
    // llama.cpp's message, plus why when -sm none has no GPU to pick (-mg was not necessarily given).
    const std::string why = n_gpu == 0 && split_mode == SplitMode::kNone
                                ? "; -sm none runs on the one GPU -mg picks, and there is none"
                                : "";
    return InvalidArgument("invalid value for main_gpu: " + std::to_string(main_gpu) +
                           " (available devices: " + std::to_string(n_gpu) + valid + ")" + why);
  }
  if (split_mode == SplitMode::kNone) {
    for (size_t i = 0; i < model.size(); ++i)
      if (static_cast<int>(i) != main_gpu) ds.unused.push_back(model[i]->name);
    model = {model[main_gpu]};
  }
  for (const auto* d : model) ds.devices.push_back(*d);
  ds.n_model = static_cast<int>(model.size());
  for (const auto* d : accel) ds.devices.push_back(*d);
  ds.devices.push_back(*cpu[0]);
  ds.cpu = static_cast<int>(ds.devices.size()) - 1;
  return ds;
}

BuftList MakeCpuBuftList(const DeviceSet& ds, bool no_host, bool no_extra, LlamacppCompat compat) {
  BuftList list;
  const DeviceManifest& cpu = ds.devices[ds.cpu];
  for (int i = ds.n_model; i < ds.cpu; ++i)
    if (ds.devices[i].default_buft.name != cpu.default_buft.name)
      list.push_back({i, ds.devices[i].default_buft.name});
  auto add_extra = [&] {
    if (!no_extra)
      for (const auto& e : cpu.extra_bufts) list.push_back({ds.cpu, e.name});
  };
  // Feb 2025 asks the CPU's extra buffer types before the GPU host buffer type, llama.cpp 2026
  // after it (make_cpu_buft_list since March 2025).
  if (compat == LlamacppCompat::kFeb25) add_extra();
  if (!no_host) {
    for (int i = 0; i < ds.n_model; ++i) {
      if (const auto& host = ds.devices[i].host_buft) {
        list.push_back({i, host->name});
        break;
      }
    }
  }
  if (compat == LlamacppCompat::k2026) add_extra();
  list.push_back({ds.cpu, cpu.default_buft.name});
  return list;
}

BuftList MakeGpuBuftList(const DeviceSet& ds, int device, SplitMode split_mode, const BuftList& cpu_list) {
  BuftList list;
  const DeviceManifest& d = ds.devices[device];
  if (split_mode == SplitMode::kRow && d.split_buft) list.push_back({device, d.split_buft->name});
  list.push_back({device, d.default_buft.name});
  list.insert(list.end(), cpu_list.begin(), cpu_list.end());
  return list;
}

namespace {

void AddBuft(Placement* p, const BufferType& bt, int device, bool is_default) {
  if (p->FindBuft(bt.name) >= 0) return;
  PlacedBuft pb;
  pb.name = bt.name;
  pb.device = device;
  pb.is_host = bt.is_host;
  pb.is_default = is_default;
  pb.alignment = bt.alignment;
  // Extra bufts of the CPU (CPU_REPACK) convert weights on upload; the runtime picks the layout per type.
  if (!is_default && !bt.is_host && device >= 0 && p->devices[device].type == DeviceKind::kCpu)
    pb.repack = "repack";
  p->bufts.push_back(pb);
}

DeviceKind KindOf(DeviceType t) {
  switch (t) {
    case DeviceType::kGpu:
      return DeviceKind::kGpu;
    case DeviceType::kAccel:
      return DeviceKind::kAccel;
    case DeviceType::kCpu:
      break;
  }
  return DeviceKind::kCpu;
}

}  // namespace

void InitPlacement(const DeviceSet& ds, bool use_mmap, Placement* p) {
  p->devices.clear();
  p->bufts.clear();
  p->backends.clear();
  p->use_mmap = use_mmap;
  for (const auto& d : ds.devices) {
    PlacedDevice pd;
    pd.name = d.name;
    pd.description = d.description;
    pd.type = KindOf(d.type);
    pd.memory_total = d.memory_total;
    pd.memory_free = d.memory_free;
    pd.memory_reserve = d.memory_reserve;
    pd.buffer_from_host_ptr = d.caps.buffer_from_host_ptr;
    pd.manifest_digest = ManifestDigest(d);  // the plan records which manifest described the device
    p->devices.push_back(pd);
  }
  const DeviceManifest& cpu = ds.devices[ds.cpu];
  for (int i = 0; i < ds.n_model; ++i) {
    const auto& d = ds.devices[i];
    if (d.split_buft) AddBuft(p, *d.split_buft, i, false);
    AddBuft(p, d.default_buft, i, true);
    if (d.host_buft) AddBuft(p, *d.host_buft, i, false);
  }
  for (int i = ds.n_model; i < ds.cpu; ++i)
    if (ds.devices[i].default_buft.name != cpu.default_buft.name)
      AddBuft(p, ds.devices[i].default_buft, i, true);
  for (const auto& e : cpu.extra_bufts) AddBuft(p, e, ds.cpu, false);
  AddBuft(p, cpu.default_buft, ds.cpu, true);
  for (int i = 0; i < static_cast<int>(ds.devices.size()); ++i) {
    PlacedBackend be;
    be.name = ds.devices[i].name;
    be.device = i;
    std::string buft = ds.devices[i].default_buft.name;
    if (i == ds.cpu && ds.n_model > 0)
      if (const auto& host0 = ds.devices[0].host_buft) buft = host0->name;
    // An ACCEL device whose default buft holds only its weights (not host memory) but that reads
    // every host buft computes into the CPU's compute buft: its results are host memory the CPU
    // reads in place, and pass 3 may move large host-weight matmuls to it (same compute buft).
    const DeviceManifest& d = ds.devices[i];
    if (d.type == DeviceType::kAccel && !d.default_buft.is_host && d.supports_buft.any_host)
      buft = cpu.default_buft.name;
    be.compute_buft = p->FindBuft(buft);
    p->backends.push_back(be);
  }
}

const BufferType* FindManifestBuft(const DeviceSet& ds, const Placement& p, int buft) {
  if (buft < 0 || static_cast<size_t>(buft) >= p.bufts.size()) return nullptr;
  const PlacedBuft& pb = p.bufts[buft];
  if (const BufferType* bt = ds.devices[pb.device].FindBuft(pb.name)) return bt;
  for (const auto& d : ds.devices)
    if (const BufferType* bt = d.FindBuft(pb.name)) return bt;
  return nullptr;
}

Result<LayerMap> AssignLayers(const DeviceSet& ds, uint32_t n_layer, int n_gpu_layers,
                              const std::vector<float>& tensor_split, LlamacppCompat compat) {
  LayerMap lm;
  const int n = ds.n_model;
  if (static_cast<int>(tensor_split.size()) > std::max(n, 1) && n > 0)
    return InvalidArgument("-ts has " + std::to_string(tensor_split.size()) + " values but there are only " +
                           std::to_string(n) + " model devices");
  for (float f : tensor_split)
    if (!(f >= 0.f)) return InvalidArgument("-ts: negative or invalid proportion " + std::to_string(f));
  lm.n_gpu_layers = std::max(n_gpu_layers, 0);
  // Split points: tensor_split when given and not all zero, else free memory (FEB25 load_tensors).
  std::vector<float> w(n, 0.f);
  bool all_zero = true;
  for (int i = 0; i < n && i < static_cast<int>(tensor_split.size()); ++i) {
    w[i] = tensor_split[i];
    all_zero = all_zero && tensor_split[i] == 0.f;
  }
  if (all_zero)
    for (int i = 0; i < n; ++i) w[i] = static_cast<float>(ds.devices[i].memory_free);
  float sum = 0.f;
  for (int i = 0; i < n; ++i) {
    sum += w[i];
    lm.splits.push_back(sum);
  }
  for (float& s : lm.splits) s = sum > 0.f ? s / sum : 1.f;
  const int L = static_cast<int>(n_layer);
  // llama.cpp 2026 llama_model::load_tensors counts the output layer among the first -ngl.
  lm.i_gpu_start = std::max(L + (compat == LlamacppCompat::k2026 ? 1 : 0) - lm.n_gpu_layers, 0);
  lm.act_gpu_layers = n == 0 ? 0 : std::min(lm.n_gpu_layers, L + 1);
  lm.device.assign(L + 1, ds.cpu);
  for (int il = 0; il <= L; ++il) {
    if (il < lm.i_gpu_start || il - lm.i_gpu_start >= lm.act_gpu_layers) continue;
    const float f = static_cast<float>(il - lm.i_gpu_start) / static_cast<float>(lm.act_gpu_layers);
    const int d =
        static_cast<int>(std::upper_bound(lm.splits.begin(), lm.splits.end(), f) - lm.splits.begin());
    lm.device[il] = std::min(d, n - 1);
  }
  return lm;
}

}  // namespace stowage::planner
