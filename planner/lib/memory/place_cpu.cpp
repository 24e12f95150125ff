#include "stowage/planner/placement.h"

namespace stowage::planner {

Placement PlaceAllOnCpu(ModelGraphs& m, bool use_mmap) {
  Placement p;
  PlacedDevice cpu;
  cpu.name = "CPU";
  cpu.description = "CPU";
  cpu.type = DeviceKind::kCpu;
  cpu.buffer_from_host_ptr = true;
  p.devices.push_back(cpu);
  PlacedBuft buft;
  buft.name = "CPU";
  buft.is_host = true;
  p.bufts.push_back(buft);
  p.backends.push_back({"CPU", 0, 0});
  p.global_buft.assign(m.globals.size(), 0);
  p.use_mmap = use_mmap;
  for (Graph* g : {&m.prefill, &m.decode}) {
    for (int n : g->nodes) {
      g->tensors[n].backend = 0;
      g->tensors[n].cause = "cpu-only";
    }
    for (int l : g->leafs) g->tensors[l].backend = 0;
    g->splits.clear();
    Split s;
    s.backend = 0;
    s.node_begin = 0;
    s.node_end = static_cast<int>(g->nodes.size());
    g->splits.push_back(s);
  }
  return p;
}

}  // namespace stowage::planner
