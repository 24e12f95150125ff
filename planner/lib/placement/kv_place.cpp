#include "stowage/planner/kv_place.h"

namespace stowage::planner {

Status PlaceKvCache(const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm, bool offload_kqv,
                    Placement* p) {
  if (p->global_buft.size() != m.globals.size()) p->global_buft.resize(m.globals.size(), -1);
  p->offload_kqv = offload_kqv;
  for (size_t gi = 0; gi < m.globals.size(); ++gi) {
    const GlobalTensor& g = m.globals[gi];
    if (g.kind != TensorKind::kKvCache) continue;
    if (g.layer < 0 || static_cast<size_t>(g.layer) >= lm.device.size())
      return Internal("KV cache tensor '" + g.name + "' has no layer");
    const int dev = offload_kqv ? lm.device[g.layer] : ds.cpu;
    const int b = p->FindBuft(ds.devices[dev].default_buft.name);
    if (b < 0)
      return Internal("KV cache: buffer type of device " + ds.devices[dev].name + " is not registered");
    p->global_buft[gi] = b;
    ExplainEntry ex;
    ex.subject = g.name;
    ex.device = ds.devices[p->bufts[b].device].name;
    ex.buft = p->bufts[b].name;
    ex.code = offload_kqv ? ExplainRule::kKvLayer : ExplainRule::kKvNoOffload;
    ex.rule = offload_kqv ? "KV cache of layer " + std::to_string(g.layer) + " on its layer's device (" +
                                ds.devices[dev].name + ")"
                          : "-nkvo: KV cache on the CPU";
    p->explain.push_back(std::move(ex));
  }
  return Status::Ok();
}

}  // namespace stowage::planner
