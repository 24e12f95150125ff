// mistral3 (Ministral 3 and other text models of type ministral3): weights as llama.cpp 2026
// llama_model_mistral3::load_arch_tensors and the graph as llama_model_mistral3::graph: llama's
// layer (the shared attention block) with YaRN keys of its own (ReadHParams) and, when
// attention.temperature_scale is set, Q multiplied by the per-token temperature factor of the
// inp_attn_scale input (llama 4 temperature tuning) before the attention. Dense only: ReadHParams
// refuses experts.
#include "arch.h"

namespace stowage::planner {

Status LoadMistral3Weights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, hp.arch.c_str());  // mistral3's table, or granite's (the same)
  LoadEmbeddingsAndOutput(t, w);           // tied embeddings when output.weight is absent
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadProjectionQkv(t, l, il);
    l.bo = t("attn_output.bias", il);
    l.ffn_norm = t("ffn_norm.weight", il);
    LoadRopeFactors(t, hp, l, il);
    l.ffn_gate = t("ffn_gate.weight", il);
    l.ffn_down = t("ffn_down.weight", il);
    l.ffn_up = t("ffn_up.weight", il);
    l.ffn_gate_b = t("ffn_gate.bias", il);
    l.ffn_down_b = t("ffn_down.bias", il);
    l.ffn_up_b = t("ffn_up.bias", il);
  }
  return wl.status();
}

Status BuildMistral3Graph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  LlamaGraphOptions o;
  o.attn_temperature = m.hp.f_attn_temp_scale != 0.f;
  return BuildLlamaStyleGraph(b, m, w, o);
}

// llama_model_granite::graph (dense): llama's with the embeddings times embedding_scale, the
// attention and FFN outputs times residual_scale (BuildLlamaAttentionBlock, BuildLlamaStyleGraph),
// the logits over logit_scale (BuildOutput), and no rope at all when rope.scaling.finetuned is false.
Status BuildGraniteGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  LlamaGraphOptions o;
  o.rope = m.hp.rope_finetuned;
  return BuildLlamaStyleGraph(b, m, w, o);
}

}  // namespace stowage::planner
