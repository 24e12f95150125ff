#include "synth_gguf.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace stowage::test {

SynthGguf::SynthGguf(std::string arch) : arch_(std::move(arch)) { Str("general.architecture", arch_); }

void SynthGguf::U32(const std::string& key, uint32_t v) { kvs_.emplace_back(key, GgufMetaValue::U32(v)); }
void SynthGguf::F32(const std::string& key, float v) { kvs_.emplace_back(key, GgufMetaValue::F32(v)); }
void SynthGguf::Str(const std::string& key, const std::string& v) {
  kvs_.emplace_back(key, GgufMetaValue::Str(v));
}
void SynthGguf::Bool(const std::string& key, bool v) { kvs_.emplace_back(key, GgufMetaValue::Bool(v)); }

void SynthGguf::Set(const std::string& key, GgufMetaValue v) {
  for (auto& kv : kvs_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kvs_.emplace_back(key, std::move(v));
}

void SynthGguf::DropKey(const std::string& key) {
  kvs_.erase(std::remove_if(kvs_.begin(), kvs_.end(), [&](const auto& kv) { return kv.first == key; }),
             kvs_.end());
}

void SynthGguf::Rename(const std::string& name, const std::string& new_name) {
  for (T& t : tensors_)
    if (t.name == name) t.name = new_name;
}

void SynthGguf::Tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type) {
  tensors_.push_back({name, std::move(ne), type});
}

void SynthGguf::Drop(const std::string& name) {
  tensors_.erase(std::remove_if(tensors_.begin(), tensors_.end(), [&](const T& t) { return t.name == name; }),
                 tensors_.end());
}

void SynthGguf::Replace(const std::string& name, std::vector<int64_t> ne, GgmlType type) {
  for (T& t : tensors_)
    if (t.name == name) {
      t.ne = ne;
      t.type = type;
    }
}

Status SynthGguf::Fill(GgufWriter& w) const {
  for (const auto& kv : kvs_) STOWAGE_RETURN_IF_ERROR(w.AddKV(kv.first, kv.second));
  for (const T& t : tensors_) STOWAGE_RETURN_IF_ERROR(w.AddTensor(t.name, t.type, t.ne));
  return Status::Ok();
}

std::unique_ptr<GgufFile> SynthGguf::Parse() {
  GgufWriter w;
  if (Status s = Fill(w); !s.ok()) {
    std::cerr << s.message() << "\n";
    std::abort();
  }
  auto buf = w.WriteToBuffer();
  if (!buf.ok()) {
    std::cerr << buf.status().message() << "\n";
    std::abort();
  }
  bytes_ = std::move(*buf);
  auto f = GgufFile::Parse(bytes_.data(), bytes_.size(), arch_ + ".gguf");
  if (!f.ok()) {
    std::cerr << f.status().message() << "\n";
    std::abort();
  }
  return std::move(*f);
}

namespace {

void CommonKeys(SynthGguf& g, const std::string& a, const SynthParams& p, bool attention = true) {
  g.U32(a + ".context_length", p.n_ctx);
  g.U32(a + ".embedding_length", p.n_embd);
  g.U32(a + ".block_count", p.n_layer);
  g.U32(a + ".vocab_size", p.n_vocab);
  if (attention) {
    g.U32(a + ".feed_forward_length", p.n_ff);
    g.U32(a + ".attention.head_count", p.n_head);
    g.U32(a + ".attention.head_count_kv", p.n_head_kv);
  }
  g.F32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (p.n_expert) {
    g.U32(a + ".expert_count", p.n_expert);
    g.U32(a + ".expert_used_count", p.n_expert_used);
  }
}

// The table's hyper-parameters of an attention model with heads of `head_dim`.
planner::TensorDims AttentionDims(const SynthParams& p, int64_t head_dim) {
  planner::TensorDims d =
      planner::UniformHeadDims(p.n_embd, p.n_vocab, p.n_ff, p.n_head, p.n_head_kv, head_dim);
  d.n_expert = p.n_expert;
  return d;
}

planner::TensorFileOptions Options(const SynthParams& p, bool rope_factors = false) {
  planner::TensorFileOptions o;
  o.output = !p.tied;
  o.rope_factors = rope_factors;
  return o;
}

}  // namespace

void AddTableTensors(SynthGguf& g, const std::string& arch, const planner::TensorDims& d, int n_layer,
                     const planner::TensorFileOptions& opts, GgmlType wtype) {
  const planner::ArchTensorTable* table = planner::FindArchTensorTable(arch);
  if (table == nullptr) {
    std::cerr << "synth_gguf: no tensor table for " << arch << "\n";
    std::abort();
  }
  planner::ForEachFileTensor(
      *table, d, n_layer, opts,
      [&](const planner::ArchTensor& t, int, const std::string& name, const std::vector<int64_t>& ne) {
        g.Tensor(name, ne, t.role == planner::TensorRole::kMatrix ? wtype : GgmlType::F32);
      });
}

namespace {
// An attention model of `arch` with the common keys and the table's tensors (heads of n_embd / n_head).
SynthGguf PlainModel(const std::string& arch, const SynthParams& p) {
  SynthGguf g(arch);
  CommonKeys(g, arch, p);
  AddTableTensors(g, arch, AttentionDims(p, p.n_embd / p.n_head), p.n_layer, Options(p), p.wtype);
  return g;
}
}  // namespace

SynthGguf LlamaModel(const SynthParams& p) { return PlainModel("llama", p); }

SynthGguf Qwen2Model(const SynthParams& p) { return PlainModel("qwen2", p); }

SynthGguf Qwen2MoeModel(const SynthParams& p, uint32_t n_ff_exp, uint32_t n_ff_shexp, bool width_keys) {
  SynthGguf g("qwen2moe");
  CommonKeys(g, "qwen2moe", p);
  if (width_keys) {
    g.U32("qwen2moe.expert_feed_forward_length", n_ff_exp);
    g.U32("qwen2moe.expert_shared_feed_forward_length", n_ff_shexp);
  }
  planner::TensorDims d = AttentionDims(p, p.n_embd / p.n_head);
  d.n_ff_exp = n_ff_exp;
  d.n_ff_shexp = n_ff_shexp;
  AddTableTensors(g, "qwen2moe", d, p.n_layer, Options(p), p.wtype);
  return g;
}

SynthGguf Qwen3Model(const SynthParams& p, uint32_t head_dim) {
  SynthGguf g("qwen3");
  CommonKeys(g, "qwen3", p);
  if (head_dim * p.n_head != p.n_embd) {
    g.U32("qwen3.attention.key_length", head_dim);
    g.U32("qwen3.attention.value_length", head_dim);
  }
  AddTableTensors(g, "qwen3", AttentionDims(p, head_dim), p.n_layer, Options(p), p.wtype);
  return g;
}

SynthGguf Qwen3MoeModel(const SynthParams& p, uint32_t head_dim, uint32_t n_ff_exp) {
  SynthGguf g("qwen3moe");
  CommonKeys(g, "qwen3moe", p);
  if (head_dim * p.n_head != p.n_embd) {
    g.U32("qwen3moe.attention.key_length", head_dim);
    g.U32("qwen3moe.attention.value_length", head_dim);
  }
  g.U32("qwen3moe.expert_feed_forward_length", n_ff_exp);
  planner::TensorDims d = AttentionDims(p, head_dim);
  d.n_ff_exp = n_ff_exp;
  AddTableTensors(g, "qwen3moe", d, p.n_layer, Options(p), p.wtype);
  return g;
}

SynthGguf Glm4MoeModel(const SynthParams& p, uint32_t n_nextn) {
  SynthGguf g("glm4moe");
  CommonKeys(g, "glm4moe", p);
  g.U32("glm4moe.attention.key_length", 32);
  g.U32("glm4moe.attention.value_length", 32);
  g.U32("glm4moe.rope.dimension_count", 16);
  g.U32("glm4moe.leading_dense_block_count", 1);
  g.U32("glm4moe.expert_feed_forward_length", 48);
  g.U32("glm4moe.expert_shared_count", 1);
  g.F32("glm4moe.expert_weights_scale", 2.5f);
  g.Bool("glm4moe.expert_weights_norm", true);
  g.U32("glm4moe.expert_gating_func", 2);
  if (n_nextn) g.U32("glm4moe.nextn_predict_layers", n_nextn);
  planner::TensorDims d = AttentionDims(p, 32);
  d.n_rot = 16;
  d.n_ff_exp = d.n_ff_shexp = 48;
  d.n_layer_dense_lead = 1;
  if (n_nextn) d.n_layer_trunk = p.n_layer - n_nextn;
  planner::TensorFileOptions o = Options(p);
  o.other_optional = true;
  AddTableTensors(g, "glm4moe", d, p.n_layer, o, p.wtype);
  return g;
}

SynthGguf Mistral3Model(const SynthParams& p) { return PlainModel("mistral3", p); }

SynthGguf SmolLM3Model(const SynthParams& p) { return PlainModel("smollm3", p); }

SynthGguf GraniteModel(const SynthParams& p) {
  SynthGguf g = PlainModel("granite", p);
  g.F32("granite.logit_scale", 16.0f);
  g.F32("granite.residual_scale", 0.22f);
  g.F32("granite.embedding_scale", 12.0f);
  g.F32("granite.attention.scale", 0.0078125f);
  return g;
}

SynthGguf Phi3Model(const SynthParams& p, bool rope_factors) {
  SynthGguf g("phi3");
  CommonKeys(g, "phi3", p);
  g.U32("phi3.attention.sliding_window", 128);
  g.U32("phi3.rope.scaling.original_context_length", p.n_ctx / 2);
  AddTableTensors(g, "phi3", AttentionDims(p, p.n_embd / p.n_head), p.n_layer, Options(p, rope_factors),
                  p.wtype);
  return g;
}

namespace {

// gemma, gemma2, gemma3: the common keys, attention.key_length / value_length of `head_dim`, the
// architecture's `extra` keys in this order, then the table's tensors.
SynthGguf GemmaFamilyModel(const std::string& a, const SynthParams& p, uint32_t head_dim,
                           const std::vector<std::pair<std::string, GgufMetaValue>>& extra) {
  SynthGguf g(a);
  CommonKeys(g, a, p);
  g.U32(a + ".attention.key_length", head_dim);
  g.U32(a + ".attention.value_length", head_dim);
  for (const auto& [key, value] : extra) g.Set(a + "." + key, value);
  AddTableTensors(g, a, AttentionDims(p, head_dim), p.n_layer, Options(p), p.wtype);
  return g;
}

}  // namespace

SynthGguf GemmaModel(const SynthParams& p, uint32_t head_dim) {
  return GemmaFamilyModel("gemma", p, head_dim, {});
}

SynthGguf Gemma2Model(const SynthParams& p, uint32_t head_dim, uint32_t n_swa) {
  return GemmaFamilyModel("gemma2", p, head_dim,
                          {{"attention.sliding_window", GgufMetaValue::U32(n_swa)},
                           {"attn_logit_softcapping", GgufMetaValue::F32(50.f)},
                           {"final_logit_softcapping", GgufMetaValue::F32(30.f)}});
}

SynthGguf Gemma3Model(const SynthParams& p, uint32_t head_dim, uint32_t n_swa) {
  return GemmaFamilyModel("gemma3", p, head_dim,
                          {{"rope.freq_base", GgufMetaValue::F32(1000000.f)},
                           {"attention.sliding_window", GgufMetaValue::U32(n_swa)},
                           {"rope.freq_base_swa", GgufMetaValue::F32(10000.f)}});
}

SynthGguf MambaModel(const SynthParams& p) {
  SynthGguf g("mamba");
  CommonKeys(g, "mamba", p, /*attention=*/false);
  planner::TensorDims d;
  d.n_embd = p.n_embd;
  d.n_vocab = p.n_vocab;
  d.ssm_d_inner = 2 * p.n_embd;
  d.ssm_d_conv = 4;
  d.ssm_d_state = 16;
  d.ssm_dt_rank = 8;
  g.U32("mamba.ssm.conv_kernel", static_cast<uint32_t>(d.ssm_d_conv));
  g.U32("mamba.ssm.inner_size", static_cast<uint32_t>(d.ssm_d_inner));
  g.U32("mamba.ssm.state_size", static_cast<uint32_t>(d.ssm_d_state));
  g.U32("mamba.ssm.time_step_rank", static_cast<uint32_t>(d.ssm_dt_rank));
  AddTableTensors(g, "mamba", d, p.n_layer, Options(p), p.wtype);
  return g;
}

}  // namespace stowage::test
