// Internal: per-architecture weight tables and graph builders.
#pragma once

#include "model_loader.h"
#include "stowage/planner/graph_builder.h"

namespace stowage::planner {

/// llama.cpp's llama_layer: global ids of a block's weights, -1 when absent.
struct LayerWeights {
  int attn_norm = -1, wq = -1, wk = -1, wv = -1, wo = -1, wqkv = -1, bq = -1, bk = -1, bv = -1, bo = -1, bqkv = -1;
  int ffn_norm = -1, ffn_gate = -1, ffn_up = -1, ffn_down = -1;
  int ffn_gate_inp = -1, ffn_gate_exps = -1, ffn_up_exps = -1, ffn_down_exps = -1;
  int rope_freqs = -1;
};

struct ModelWeights {
  int tok_embd = -1, output_norm = -1, output = -1;
  std::vector<LayerWeights> layers;
};

/// Symbols of one graph (the worst case it is built for).
struct GraphShape {
  bool decode = false;  ///< tg graph (n_tokens = 1)
};

/// llama family (llama, and the llama-like variants that share its graph).
Status LoadLlamaWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w);
Status BuildLlamaGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w);

/// Adds the KV cache globals cache_k_l<il> / cache_v_l<il> (llama.cpp llama_kv_cache_init):
/// 1-D tensors of n_embd_{k,v}_gqa * n_ctx elements of type_k / type_v.
void AddKvCache(ModelGraphs& m);

}  // namespace stowage::planner
