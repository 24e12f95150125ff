#include "stowage/planner/buft_select.h"

#include <regex>

#include "op_query.h"

namespace stowage::planner {
namespace {

TensorDesc Desc(GgmlType type, std::array<int64_t, 4> ne) {
  TensorDesc d;
  d.type = type;
  d.ne = ne;
  return d;
}

}  // namespace

Result<std::vector<TensorOverride>> ParseTensorOverrides(std::string_view text) {
  std::vector<TensorOverride> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(start, end - start));
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return InvalidArgument("invalid -ot value '" + item + "' (expected REGEX=BUFFER_TYPE)");
    out.push_back({item.substr(0, eq), item.substr(eq + 1)});
    start = end + 1;
  }
  return out;
}

std::vector<TensorOverride> CpuMoeOverrides(bool cpu_moe, int n_cpu_moe, const std::string& cpu_buft) {
  std::vector<TensorOverride> out;
  if (cpu_moe) out.push_back({"\\.ffn_(up|down|gate)_exps", cpu_buft});
  for (int i = 0; i < n_cpu_moe; ++i)
    out.push_back({"blk\\." + std::to_string(i) + "\\.ffn_(up|down|gate)_exps", cpu_buft});
  return out;
}

Result<bool> WeightBuftSupported(const HParams& hp, const GlobalTensor& w, stowage::GgmlOp op,
                                 const BufferType& buft, const DeviceManifest& dev, std::string* why) {
  if (op == stowage::GgmlOp::NONE) return true;
  TensorDesc wd = Desc(w.type, {w.ne[0], w.ne[1], w.ne[2], w.ne[3]});
  wd.buft = buft.name;  // the zero-size dummy buffer of `buft`
  wd.buft_is_host = buft.is_host;
  OpQuery q;
  q.op = op;
  const int64_t N = 512;
  switch (op) {
    case stowage::GgmlOp::GET_ROWS:
      q.src = {wd, Desc(GgmlType::I32, {N, 1, 1, 1})};
      q.dst = Desc(GgmlType::F32, {w.ne[0], N, 1, 1});
      break;
    case stowage::GgmlOp::MUL_MAT:
      q.src = {wd, Desc(GgmlType::F32, {w.ne[0], N, w.ne[2], w.ne[3]})};
      q.dst = Desc(GgmlType::F32, {w.ne[1], N, w.ne[2], w.ne[3]});
      break;
    case stowage::GgmlOp::MUL_MAT_ID: {
      const int64_t u = hp.n_expert_used;
      q.src = {wd, Desc(GgmlType::F32, {w.ne[0], u, N, 1}), Desc(GgmlType::I32, {u, N, 1, 1})};
      q.dst = Desc(GgmlType::F32, {w.ne[1], u, N, 1});
      break;
    }
    case stowage::GgmlOp::ADD:
    case stowage::GgmlOp::MUL: {
      const TensorDesc a = Desc(GgmlType::F32, wd.ne);
      q.src = {a, wd};
      q.dst = a;
      break;
    }
    case stowage::GgmlOp::ADD_ID: {  // llama.cpp 2026: expert biases, [ne0, n_expert_used, 512] + w by ids
      const int64_t u = hp.n_expert_used;
      const TensorDesc a = Desc(GgmlType::F32, {w.ne[0], u, N, 1});
      q.src = {a, wd, Desc(GgmlType::I32, {u, N, 1, 1})};
      q.dst = a;
      break;
    }
    case stowage::GgmlOp::SCALE:  // llama.cpp 2026: ggml_scale(w, 1) (gpt-oss's attention sinks)
      q.src = {wd};
      q.dst = Desc(GgmlType::F32, wd.ne);
      break;
    case stowage::GgmlOp::DIV: {
      const TensorDesc a = Desc(GgmlType::F32, {w.ne[0], 1, 1, 1});
      q.src = {a, wd};
      q.dst = a;
      break;
    }
    case stowage::GgmlOp::ROPE: {
      const TensorDesc a = Desc(GgmlType::F32, {hp.n_embd_head_v, hp.n_head, N, 1});
      q.src = {a, Desc(GgmlType::I32, {N, 1, 1, 1}), wd};
      q.dst = a;
      break;
    }
    case stowage::GgmlOp::SSM_CONV: {  // llama.cpp's FIXME dummy shapes
      const TensorDesc x = Desc(GgmlType::F32, {12345, w.ne[1], 6789, 1});
      q.src = {x, wd};
      q.dst = Desc(GgmlType::F32, {w.ne[1], 12345 - w.ne[0] + 1, 6789, 1});
      break;
    }
    case stowage::GgmlOp::SSM_SCAN: {
      const int64_t d_state = w.ne[0], d_inner = w.ne[1];
      const TensorDesc s = Desc(GgmlType::F32, {d_state, d_inner, 1, 1});
      const TensorDesc x = Desc(GgmlType::F32, {d_inner, N, 1, 1});
      const TensorDesc bc = Desc(GgmlType::F32, {d_state, N, 1, 1});
      q.src = {s, x, x, wd, bc, bc};
      q.dst = Desc(GgmlType::F32, {d_inner * N + d_state * d_inner, 1, 1, 1});
      break;
    }
    default:
      return Unimplemented(std::string("weight_buft_supported: missing test for op ") +
                           stowage::GgmlOpName(op) + " (tensor '" + w.name + "')");
  }
  if (q.op == planner::GgmlOp::kCount)
    return Internal(std::string("op ") + stowage::GgmlOpName(op) + " has no device-manifest name");
  const bool ok = dev.SupportsOp(q);
  if (!ok && why) {
    *why = dev.name + " does not support " + QueryString(q);
  }
  return ok;
}

namespace {

// The buffer type of `o` must be the default buft of one of `devices`; its pattern is compiled as
// TensorOverride says.
Result<std::regex> CompileOverride(const TensorOverride& o, const std::vector<DeviceManifest>& devices) {
  bool found = false;
  std::string known;
  for (const DeviceManifest& d : devices) {
    const std::string& n = d.default_buft.name;
    if (known.find(n) == std::string::npos) known += (known.empty() ? "" : ", ") + n;
    if (n == o.buft) found = true;
  }
  if (!found)
    return InvalidArgument("unknown buffer type '" + o.buft + "' in -ot '" + o.pattern + "=" + o.buft +
                           "' (available: " + known + ")");
  try {
    // Only whether a name matches counts, so the polynomial (breadth-first) matcher gives the
    // same answers as llama.cpp's std::regex_search; the default backtracking one takes
    // exponential time on a pattern such as '(.*)*(.*)*(.*)*Z' (plan-model ran for minutes).
    // That matcher has no back-references: one is refused as an invalid expression.
    std::regex::flag_type flags = std::regex::ECMAScript;
#if defined(__GLIBCXX__)
    flags |= std::regex_constants::__polynomial;
#endif
    return std::regex(o.pattern, flags);
  } catch (const std::regex_error& e) {
    return InvalidArgument("invalid regular expression '" + o.pattern + "' in -ot: " + e.what());
  }
}

}  // namespace

Status CheckTensorOverrides(const std::vector<TensorOverride>& overrides,
                            const std::vector<DeviceManifest>& devices) {
  for (const TensorOverride& o : overrides) STOWAGE_RETURN_IF_ERROR(CompileOverride(o, devices).status());
  return Status::Ok();
}

Status SelectWeightBufts(const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm,
                         const WeightBuftOptions& opt, Placement* p, MovedSummary* moved) {
  const BuftList cpu_list = MakeCpuBuftList(ds, opt.no_host, opt.no_repack, m.cfg.llamacpp_compat);
  std::vector<BuftList> dev_lists(ds.devices.size());
  for (int d = 0; d < ds.n_model; ++d) dev_lists[d] = MakeGpuBuftList(ds, d, opt.split_mode, cpu_list);
  dev_lists[ds.cpu] = cpu_list;
  const std::string cpu_buft = ds.devices[ds.cpu].default_buft.name;

  // Overrides: names must be a device's default buft (case-sensitive, as llama.cpp's parser).
  struct CompiledOverride {
    std::regex re;
    int buft;
  };
  std::vector<CompiledOverride> ovr;
  for (const auto& o : opt.overrides) {
    STOWAGE_ASSIGN_OR_RETURN(std::regex re, CompileOverride(o, ds.devices));
    ovr.push_back({std::move(re), p->FindBuft(o.buft)});
  }

  p->global_buft.assign(m.globals.size(), -1);
  *moved = MovedSummary{};
  for (size_t gi = 0; gi < m.globals.size(); ++gi) {
    const GlobalTensor& w = m.globals[gi];
    if (w.kind != TensorKind::kWeight) continue;
    const int dev = w.layer_class == LayerClass::kInput ? ds.cpu : lm.device.at(w.layer);
    const BuftList& list = dev_lists[dev];
    ExplainEntry ex;
    ex.subject = w.name;
    if (w.duplicated)
      ex.subject +=
          w.layer_class == LayerClass::kOutput ? " (output)" : " (layer " + std::to_string(w.layer) + ")";
    const char* cls = w.layer_class == LayerClass::kInput    ? "input layer"
                      : w.layer_class == LayerClass::kOutput ? "output layer"
                                                             : "layer";
    const std::string where =
        w.layer_class == LayerClass::kRepeating ? std::string(cls) + " " + std::to_string(w.layer) : cls;

    // Overrides first.
    int chosen_dev = -1;
    std::string chosen;
    int ovr_index = -1;
    for (size_t i = 0; i < ovr.size() && ovr_index < 0; ++i)
      if (std::regex_search(w.name, ovr[i].re)) ovr_index = static_cast<int>(i);
    const BuftList* select_list = &list;
    if (ovr_index >= 0) {
      const PlacedBuft& ob = p->bufts[ovr[ovr_index].buft];
      if (ob.name == cpu_buft) {
        select_list = &cpu_list;  // llama.cpp #14990: an override to CPU selects from the CPU list
        ex.rule = "override '" + opt.overrides[ovr_index].pattern + "=" + ob.name +
                  "': first supported entry of the CPU list";
        ex.code = ExplainRule::kWeightOverrideCpu;
      } else {
        chosen = ob.name;
        chosen_dev = ob.device;
        ex.rule = "override '" + opt.overrides[ovr_index].pattern + "=" + ob.name + "' (no support check)";
        ex.code = ExplainRule::kWeightOverride;
      }
    }
    if (chosen.empty()) {
      for (const BuftRef& e : *select_list) {
        const BufferType* bt = ds.devices[e.device].FindBuft(e.buft);
        if (bt == nullptr)
          return Internal("buffer type '" + e.buft + "' not found on device " + ds.devices[e.device].name);
        std::string why;
        STOWAGE_ASSIGN_OR_RETURN(
            bool ok, WeightBuftSupported(m.hp, w, w.consumer_op, *bt, ds.devices[e.device], &why));
        if (ok) {
          chosen = e.buft;
          chosen_dev = e.device;
          break;
        }
        ex.rejected.push_back(e.buft + ": " + why);
      }
      if (chosen.empty()) {
        // llama.cpp's message, then what each candidate said (e.g. the type no device supports).
        std::string why;
        for (const std::string& r : ex.rejected) why += (why.empty() ? "" : "; ") + r;
        return InvalidArgument("failed to find a compatible buffer type for tensor " + w.name + " (" +
                               GgmlTypeName(w.type) + (why.empty() ? "" : ": " + why) + ")");
      }
      if (ex.rule.empty()) {
        ex.rule = std::string("first entry of the ") + where + " list (" + ds.devices[dev].name +
                  ") whose device supports " + stowage::GgmlOpName(w.consumer_op) + " with it";
        ex.code = ex.rejected.empty() ? ExplainRule::kWeightHead : ExplainRule::kWeightFallback;
      }
    }
    // mmap: pinned host memory cannot wrap the file mapping; the CPU buft (mapped) is used instead.
    const DeviceManifest& cd = ds.devices[chosen_dev];
    if (p->use_mmap && cd.host_buft && cd.host_buft->name == chosen) {
      ex.rejected.push_back(chosen + ": host buffer type with mmap (the file mapping is used instead)");
      ex.rule += "; mmap: host buffer type -> " + cpu_buft;
      if (ex.code == ExplainRule::kWeightHead || ex.code == ExplainRule::kWeightFallback)
        ex.code = ExplainRule::kWeightMmap;
      chosen = cpu_buft;
      chosen_dev = ds.cpu;
    }
    const int b = p->FindBuft(chosen);
    if (b < 0) return Internal("buffer type '" + chosen + "' is not registered");
    p->global_buft[gi] = b;
    if (chosen != list.front().buft) {
      if (moved->count++ == 0) {
        moved->tensor = w.name;
        moved->type = GgmlTypeName(w.type);
        moved->from = list.front().buft;
        moved->to = chosen;
      }
    }
    if (w.duplicated) {
      for (size_t j = 0; j < gi; ++j)
        if (m.globals[j].name == w.name && p->global_buft[j] == b) {
          ex.rule += "; shares the copy already in " + chosen;
          if (ex.code == ExplainRule::kWeightHead || ex.code == ExplainRule::kWeightFallback)
            ex.code = ExplainRule::kWeightShared;
          break;
        }
    }
    ex.device = ds.devices[p->bufts[b].device].name;
    ex.buft = GlobalBuffer(m, *p, static_cast<int>(gi)).buft;
    p->explain.push_back(std::move(ex));
  }
  return Status::Ok();
}

}  // namespace stowage::planner
