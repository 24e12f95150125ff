// The CPU-only placement the runtime tests plan with (plan_cpu.h, backends/e2e_util.h): test
// support, not planner code (plan-model and the MLIR passes place with planner::PlaceModel).
// Header-only.
#pragma once

#include "stowage/planner/graph.h"
#include "stowage/planner/placement.h"

namespace stowage::test {

/// The degenerate placement of a CPU-only machine without repack buffer types: every weight and
/// KV tensor in the CPU buffer type, every node (cause "cpu-only") and leaf on the CPU backend, one
/// split per graph; weights mapped from the file when `use_mmap`. Edits `m`'s graphs (backends,
/// splits). (The full placement engine reproduces this for a CPU manifest without extra bufts.)
inline planner::Placement PlaceAllOnCpu(planner::ModelGraphs& m, bool use_mmap) {
  planner::Placement p;
  planner::PlacedDevice cpu;
  cpu.name = "CPU";
  cpu.description = "CPU";
  cpu.type = planner::DeviceKind::kCpu;
  cpu.buffer_from_host_ptr = true;
  p.devices.push_back(cpu);
  planner::PlacedBuft buft;
  buft.name = "CPU";
  buft.is_host = true;
  p.bufts.push_back(buft);
  p.backends.push_back({"CPU", 0, 0});
  p.global_buft.assign(m.globals.size(), 0);
  p.use_mmap = use_mmap;
  for (planner::Graph* g : {&m.pp, &m.tg}) {
    for (int n : g->nodes) {
      g->tensors[n].backend = 0;
      g->tensors[n].cause = "cpu-only";
    }
    for (int l : g->leafs) g->tensors[l].backend = 0;
    g->splits.clear();
    planner::Split s;
    s.backend = 0;
    s.node_begin = 0;
    s.node_end = static_cast<int>(g->nodes.size());
    g->splits.push_back(s);
  }
  return p;
}

}  // namespace stowage::test
