// glm4moe (llama.cpp 2026 llama_model_glm4_moe: GLM-4.5, GLM-4.5-Air, GLM-4.6): llama-style blocks
// with q/k/v biases, optional per-head q/k norms and a partial NEOX rope (rope.dimension_count below
// the head size: only the first n_rot dimensions of each head turn), the FFN after
// post_attention_norm; the leading_dense_block_count first blocks have a dense SwiGLU FFN, the
// others routed experts (sigmoid gating by default, the expert-score bias exp_probs_b for the
// selection only, weights normalized by expert_weights_norm and scaled by expert_weights_scale)
// plus a shared expert. The nextn_predict_layers NextN / MTP blocks after the trunk are loaded
// and ignored as llama.cpp does without load_mtp (TENSOR_SKIP: no buffer, no KV cache, no graph).
#include <cmath>

#include "arch.h"

namespace stowage::planner {

Status ReadGlm4MoeHParams(const GgufFile& f, HParams* hp) {
  const std::string p = hp->arch + ".";
  // llama.cpp 2026 load_hparams: n_layer_nextn <= n_layer_all (asserted); the trunk is the rest. A
  // file of NextN blocks only (llama.cpp's mtp_only, a draft model) has no trunk to plan.
  STOWAGE_ASSIGN_OR_RETURN(hp->n_layer_nextn, f.GetU32Or(p + "nextn_predict_layers", 0));
  if (hp->n_layer_nextn >= hp->n_layer)
    return f.KeyError(p + "nextn_predict_layers",
                      "fewer than " + p + "block_count " + std::to_string(hp->n_layer) +
                          " (the NextN / MTP blocks follow the trunk's)",
                      std::to_string(hp->n_layer_nextn));
  hp->n_layer -= hp->n_layer_nextn;
  if (hp->n_expert == 0)
    return f.KeyError(p + "expert_count", "a positive expert count (glm4moe's MoE layers)", "0 or absent");
  STOWAGE_ASSIGN_OR_RETURN(hp->n_layer_dense_lead, f.GetU32Or(p + "leading_dense_block_count", 0));
  if (hp->n_layer_dense_lead > hp->n_layer)
    return f.KeyError(p + "leading_dense_block_count",
                      "at most the trunk's " + std::to_string(hp->n_layer) + " blocks (" + p +
                          "block_count " + std::to_string(hp->n_layer + hp->n_layer_nextn) +
                          " - nextn_predict_layers " + std::to_string(hp->n_layer_nextn) + ")",
                      std::to_string(hp->n_layer_dense_lead));
  // "GLM-4.5 uses sigmoid": none (0, or no key) means sigmoid
  STOWAGE_RETURN_IF_ERROR(ReadSharedExpertRouting(f, /*default_gating=*/2, hp));
  // GLM-4.xV's multimodal rope (use_mrope): not this graph
  if (f.Find(p + "rope.dimension_sections") != nullptr)
    return Unimplemented(f.path() + ": key '" + p +
                         "rope.dimension_sections': glm4moe's multimodal rope (M-RoPE) is not supported");
  return Status::Ok();
}

Status LoadGlm4MoeWeights(WeightLoader& wl, const HParams& hp, ModelWeights& w) {
  TableLoader t(wl, hp, "glm4moe");
  LoadEmbeddingsAndOutput(t, w);  // output.weight, else token_embd (tied)
  w.layers.resize(hp.n_layer);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    LayerWeights& l = w.layers[il];
    LoadProjectionQkv(t, l, il);
    l.attn_q_norm = t("attn_q_norm.weight", il);
    l.attn_k_norm = t("attn_k_norm.weight", il);
    // the FFN's norm: BuildLlamaAttentionBlock's ffn_norm is glm4moe's post_attention_norm
    l.ffn_norm = t("post_attention_norm.weight", il);
    if (il < static_cast<int>(hp.n_layer_dense_lead)) {
      l.ffn_gate = t("ffn_gate.weight", il);
      l.ffn_down = t("ffn_down.weight", il);
      l.ffn_up = t("ffn_up.weight", il);
      continue;
    }
    l.ffn_gate_inp = t("ffn_gate_inp.weight", il);
    l.ffn_exp_probs_b = t("exp_probs_b.bias", il);
    l.ffn_gate_exps = t("ffn_gate_exps.weight", il);
    l.ffn_down_exps = t("ffn_down_exps.weight", il);
    l.ffn_up_exps = t("ffn_up_exps.weight", il);
    if (hp.n_expert_shared > 0) {
      l.ffn_gate_shexp = t("ffn_gate_shexp.weight", il);
      l.ffn_down_shexp = t("ffn_down_shexp.weight", il);
      l.ffn_up_shexp = t("ffn_up_shexp.weight", il);
    }
  }
  for (uint32_t i = 0; i < hp.n_layer_nextn; ++i) wl.SkipBlock(static_cast<int>(hp.n_layer + i));
  return wl.status();
}

// llama_model_glm4_moe::graph: BuildAttentionFfnLayers (q/k/v biases, the q/k norms where present,
// the partial rope of MakeRopeConfig's n_dims = n_rot; the FFN norm is post_attention_norm) with
// BuildLeadDenseMoeFfn (the dense FFN, or the routed experts "ffn_moe_out" plus the shared expert
// "ffn_shexp_out"; "ffn_out") added to the residual ("l_out").
Status BuildGlm4MoeGraph(GraphBuilder& b, ModelGraphs& m, const ModelWeights& w) {
  const HParams& hp = m.hp;
  MoeFfnOptions moe;
  moe.gating = hp.expert_gating_func == 1 ? MoeGating::kSoftmax : MoeGating::kSigmoid;
  moe.norm_w = hp.expert_weights_norm;
  moe.w_scale = hp.expert_weights_scale;
  moe.fused_glu = true;
  return BuildAttentionFfnLayers(b, m, w, [&](const LayerWeights& l, int cur, int ffn_inp, int il) {
    cur = BuildLeadDenseMoeFfn(b, hp, l, cur, moe, "ffn_shexp_out", il);
    cur = b.Add(cur, ffn_inp);
    b.Name(cur, "l_out", il);
    return cur;
  });
}

}  // namespace stowage::planner
