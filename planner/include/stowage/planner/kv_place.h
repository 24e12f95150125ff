// place-kv: the buffer type of every KV cache tensor (llama.cpp llama_kv_cache_init, FEB25;
// reference/llamacpp-placement.md §2.6): cache_k_l<il> and cache_v_l<il> go to the default buffer
// type of layer il's device when offload_kqv, else to the CPU buffer type (-nkvo). Never a split or
// host buffer type.
#pragma once

#include "stowage/planner/graph.h"
#include "stowage/planner/layer_map.h"
#include "stowage/planner/placement.h"
#include "stowage/runtime/status.h"

namespace stowage::planner {

/// Sets Placement::global_buft of every KV cache global and appends an ExplainEntry for each;
/// records `offload_kqv` in Placement::offload_kqv.
/// Requires InitPlacement and the layer map. Errors: kInternal when a layer has no device.
Status PlaceKvCache(const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm, bool offload_kqv,
                    Placement* p);

}  // namespace stowage::planner
