#include "stowage/planner/model_graphs.h"

#include <algorithm>

#include "arch.h"

namespace stowage::planner {

std::vector<std::string> SupportedArchitectures() { return {"llama"}; }

Result<HParams> ReadHParams(const GgufFile& f) {
  HParams hp;
  STOWAGE_ASSIGN_OR_RETURN(hp.arch, f.GetString("general.architecture"));
  const auto archs = SupportedArchitectures();
  if (std::find(archs.begin(), archs.end(), hp.arch) == archs.end()) {
    std::string list;
    for (const auto& a : archs) list += (list.empty() ? "" : ", ") + a;
    return Unimplemented(f.path() + ": unknown model architecture '" + hp.arch + "' (supported: " + list + ")");
  }
  const std::string p = hp.arch + ".";
  STOWAGE_ASSIGN_OR_RETURN(hp.n_layer, f.GetU32(p + "block_count"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_embd, f.GetU32(p + "embedding_length"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_ff, f.GetU32(p + "feed_forward_length"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_head, f.GetU32(p + "attention.head_count"));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_head_kv, f.GetU32Or(p + "attention.head_count_kv", hp.n_head));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_ctx_train, f.GetU32(p + "context_length"));
  if (hp.n_head == 0 || hp.n_embd % hp.n_head != 0)
    return InvalidArgument(f.path() + ": " + p + "embedding_length " + std::to_string(hp.n_embd) +
                           " is not a multiple of head_count " + std::to_string(hp.n_head));
  if (hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0)
    return InvalidArgument(f.path() + ": " + p + "attention.head_count_kv must divide head_count");
  STOWAGE_ASSIGN_OR_RETURN(hp.n_embd_head_k, f.GetU32Or(p + "attention.key_length", hp.n_embd / hp.n_head));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_embd_head_v, f.GetU32Or(p + "attention.value_length", hp.n_embd / hp.n_head));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_rot, f.GetU32Or(p + "rope.dimension_count", hp.n_embd_head_k));
  STOWAGE_ASSIGN_OR_RETURN(hp.f_norm_rms_eps, f.GetF32Or(p + "attention.layer_norm_rms_epsilon", 1e-5f));
  STOWAGE_ASSIGN_OR_RETURN(hp.f_norm_eps, f.GetF32Or(p + "attention.layer_norm_epsilon", 1e-5f));
  STOWAGE_ASSIGN_OR_RETURN(hp.rope_freq_base, f.GetF32Or(p + "rope.freq_base", 10000.f));
  STOWAGE_ASSIGN_OR_RETURN(float scale_factor, f.GetF32Or(p + "rope.scaling.factor", 0.f));
  if (scale_factor != 0.f) hp.rope_freq_scale = 1.f / scale_factor;
  STOWAGE_ASSIGN_OR_RETURN(hp.n_expert, f.GetU32Or(p + "expert_count", 0));
  STOWAGE_ASSIGN_OR_RETURN(hp.n_expert_used, f.GetU32Or(p + "expert_used_count", 0));
  if (hp.n_expert > 0 && hp.n_expert_used == 0)
    return InvalidArgument(f.path() + ": model has expert layers but no expert layers are used");
  STOWAGE_ASSIGN_OR_RETURN(hp.f_attention_scale, f.GetF32Or(p + "attention.scale", 0.f));
  if (const GgufValue* toks = f.Find("tokenizer.ggml.tokens"); toks && toks->is_array()) {
    hp.n_vocab = static_cast<uint32_t>(toks->count);
  } else {
    STOWAGE_ASSIGN_OR_RETURN(hp.n_vocab, f.GetU32(p + "vocab_size"));
  }
  hp.rope_type = 0;  // LLAMA_ROPE_TYPE_NORM for llama
  return hp;
}

void AddKvCache(ModelGraphs& m) {
  for (uint32_t il = 0; il < m.hp.n_layer; ++il) {
    for (int kv = 0; kv < 2; ++kv) {
      GlobalTensor g;
      g.name = (kv == 0 ? "cache_k_l" : "cache_v_l") + std::to_string(il);
      g.kind = TensorKind::kKvCache;
      g.type = kv == 0 ? m.cfg.type_k : m.cfg.type_v;
      g.ne[0] = int64_t(kv == 0 ? m.hp.n_embd_k_gqa() : m.hp.n_embd_v_gqa()) * m.cfg.n_ctx;
      g.nbytes = RowSize(g.type, g.ne[0]);
      g.layer = static_cast<int>(il);
      g.consumer_op = GgmlOp::NONE;
      m.globals.push_back(std::move(g));
    }
  }
}

Result<ModelGraphs> BuildModelGraphs(const GgufFile& gguf, const ContextConfig& cfg) {
  ModelGraphs m;
  STOWAGE_ASSIGN_OR_RETURN(m.hp, ReadHParams(gguf));
  m.cfg = cfg;
  if (m.cfg.n_ctx == 0) m.cfg.n_ctx = m.hp.n_ctx_train;
  if (m.cfg.n_ubatch == 0 || m.cfg.n_batch == 0) return InvalidArgument("n_batch and n_ubatch must be positive");
  m.cfg.n_ubatch = std::min(m.cfg.n_ubatch, m.cfg.n_batch);
  for (GgmlType t : {m.cfg.type_k, m.cfg.type_v}) {
    const int64_t bs = GetTypeTraits(t).block_size;
    if ((m.hp.n_embd_head_k % bs) != 0)
      return InvalidArgument(std::string("KV cache type ") + GgmlTypeName(t) + " needs head size divisible by " +
                             std::to_string(bs));
  }
  // Split-tensor MoE files (one tensor per expert, pre-2024 llama.cpp) are not supported.
  if (m.hp.n_expert > 0 && gguf.FindTensor("blk.0.ffn_gate.0.weight") != nullptr)
    return Unimplemented(gguf.path() + ": split-tensor MoE file (one tensor per expert, e.g. "
                         "'blk.0.ffn_gate.0.weight'): re-convert it with merged ffn_*_exps tensors");

  WeightLoader wl(gguf, m);
  ModelWeights w;
  STOWAGE_RETURN_IF_ERROR(LoadLlamaWeights(wl, m.hp, w));
  m.unused_tensors = wl.Unused();
  AddKvCache(m);

  const int64_t n_ctx = m.cfg.n_ctx;
  const int64_t pp_tokens = std::min<int64_t>(n_ctx, m.cfg.n_ubatch);
  struct Spec { Graph* g; const char* name; int64_t tokens; };
  for (const Spec& s : {Spec{&m.prefill, "pp", pp_tokens}, Spec{&m.decode, "tg", 1}}) {
    s.g->name = s.name;
    s.g->max_tokens = s.tokens;
    s.g->max_kv = n_ctx;
    s.g->max_outputs = s.tokens;
    GraphBuilder b(*s.g, m);
    STOWAGE_RETURN_IF_ERROR(BuildLlamaGraph(b, m, w));
  }
  return m;
}

}  // namespace stowage::planner
