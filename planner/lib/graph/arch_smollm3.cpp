// smollm3 (SmolLM3-3B): weights as llama.cpp 2026 llama_model_smollm3::load_arch_tensors and the
// graph as llama_model_smollm3::graph: llama's layer (the shared attention block) without rope
// factors, and without rope in every n_no_rope_layer_step-th layer ((il + 1) % 4 == 0: NoPE).
#include "arch.h"

namespace stowage::planner {
namespace {
// llama_model_smollm3::load_arch_hparams sets it; no GGUF key.
constexpr int kNoRopeLayerStep = 4;
}  // namespace

Status LoadSmolLM3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "smollm3");
  LoadEmbeddingsAndOutput(t, w);  // tied embeddings when output.weight is absent (SmolLM3-3B)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadProjectionQkv(t, l, il);
    l.ffn_norm = t("ffn_norm.weight", il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
  }
  return wl.status();
}

Status BuildSmolLM3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  LlamaGraphOptions o;
  o.no_rope_layer_step = kNoRopeLayerStep;
  return BuildLlamaStyleGraph(b, m, w, o);
}

}  // namespace stowage::planner
