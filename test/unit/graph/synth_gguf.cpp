#include "synth_gguf.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace stowage::test {

SynthGguf::SynthGguf(std::string arch) : arch_(std::move(arch)) { Str("general.architecture", arch_); }

void SynthGguf::U32(const std::string& key, uint32_t v) { kvs_.emplace_back(key, GgufMetaValue::U32(v)); }
void SynthGguf::F32(const std::string& key, float v) { kvs_.emplace_back(key, GgufMetaValue::F32(v)); }
void SynthGguf::Str(const std::string& key, const std::string& v) { kvs_.emplace_back(key, GgufMetaValue::Str(v)); }
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
      t.ne = std::move(ne);
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
  if (Status s = Fill(w); !s.ok()) { std::cerr << s.message() << "\n"; std::abort(); }
  auto buf = w.WriteToBuffer();
  if (!buf.ok()) { std::cerr << buf.status().message() << "\n"; std::abort(); }
  bytes_ = std::move(*buf);
  auto f = GgufFile::Parse(bytes_.data(), bytes_.size(), arch_ + ".gguf");
  if (!f.ok()) { std::cerr << f.status().message() << "\n"; std::abort(); }
  return std::move(*f);
}

namespace {

std::string Blk(int il, const char* s) { return "blk." + std::to_string(il) + "." + s; }

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

void EmbdAndOutput(SynthGguf& g, const SynthParams& p) {
  g.Tensor("token_embd.weight", {p.n_embd, p.n_vocab}, p.wtype);
  g.Tensor("output_norm.weight", {p.n_embd});
  if (!p.tied) g.Tensor("output.weight", {p.n_embd, p.n_vocab}, p.wtype);
}

}  // namespace

SynthGguf LlamaModel(const SynthParams& p) {
  SynthGguf g("llama");
  CommonKeys(g, "llama", p);
  EmbdAndOutput(g, p);
  const int64_t hd = p.n_embd / p.n_head, gqa = hd * p.n_head_kv;
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    g.Tensor(Blk(il, "attn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "attn_q.weight"), {p.n_embd, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "attn_k.weight"), {p.n_embd, gqa}, p.wtype);
    g.Tensor(Blk(il, "attn_v.weight"), {p.n_embd, gqa}, p.wtype);
    g.Tensor(Blk(il, "attn_output.weight"), {p.n_embd, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_norm.weight"), {p.n_embd});
    if (p.n_expert == 0) {
      g.Tensor(Blk(il, "ffn_gate.weight"), {p.n_embd, p.n_ff}, p.wtype);
      g.Tensor(Blk(il, "ffn_down.weight"), {p.n_ff, p.n_embd}, p.wtype);
      g.Tensor(Blk(il, "ffn_up.weight"), {p.n_embd, p.n_ff}, p.wtype);
    } else {
      g.Tensor(Blk(il, "ffn_gate_inp.weight"), {p.n_embd, p.n_expert});
      g.Tensor(Blk(il, "ffn_gate_exps.weight"), {p.n_embd, p.n_ff, p.n_expert}, p.wtype);
      g.Tensor(Blk(il, "ffn_down_exps.weight"), {p.n_ff, p.n_embd, p.n_expert}, p.wtype);
      g.Tensor(Blk(il, "ffn_up_exps.weight"), {p.n_embd, p.n_ff, p.n_expert}, p.wtype);
    }
  }
  return g;
}

namespace {
void Qwen2Attention(SynthGguf& g, const SynthParams& p, int il) {
  const int64_t hd = p.n_embd / p.n_head, gqa = hd * p.n_head_kv;
  g.Tensor(Blk(il, "attn_norm.weight"), {p.n_embd});
  g.Tensor(Blk(il, "attn_q.weight"), {p.n_embd, p.n_embd}, p.wtype);
  g.Tensor(Blk(il, "attn_k.weight"), {p.n_embd, gqa}, p.wtype);
  g.Tensor(Blk(il, "attn_v.weight"), {p.n_embd, gqa}, p.wtype);
  g.Tensor(Blk(il, "attn_output.weight"), {p.n_embd, p.n_embd}, p.wtype);
  g.Tensor(Blk(il, "attn_q.bias"), {p.n_embd});
  g.Tensor(Blk(il, "attn_k.bias"), {gqa});
  g.Tensor(Blk(il, "attn_v.bias"), {gqa});
  g.Tensor(Blk(il, "ffn_norm.weight"), {p.n_embd});
}
}  // namespace

SynthGguf Qwen2Model(const SynthParams& p) {
  SynthGguf g("qwen2");
  CommonKeys(g, "qwen2", p);
  EmbdAndOutput(g, p);
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    Qwen2Attention(g, p, il);
    g.Tensor(Blk(il, "ffn_gate.weight"), {p.n_embd, p.n_ff}, p.wtype);
    g.Tensor(Blk(il, "ffn_down.weight"), {p.n_ff, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_up.weight"), {p.n_embd, p.n_ff}, p.wtype);
  }
  return g;
}

SynthGguf Qwen2MoeModel(const SynthParams& p, uint32_t n_ff_exp, uint32_t n_ff_shexp, bool width_keys) {
  SynthGguf g("qwen2moe");
  CommonKeys(g, "qwen2moe", p);
  if (width_keys) {
    g.U32("qwen2moe.expert_feed_forward_length", n_ff_exp);
    g.U32("qwen2moe.expert_shared_feed_forward_length", n_ff_shexp);
  }
  EmbdAndOutput(g, p);
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    Qwen2Attention(g, p, il);
    g.Tensor(Blk(il, "ffn_gate_inp.weight"), {p.n_embd, p.n_expert});
    g.Tensor(Blk(il, "ffn_gate_exps.weight"), {p.n_embd, n_ff_exp, p.n_expert}, p.wtype);
    g.Tensor(Blk(il, "ffn_down_exps.weight"), {n_ff_exp, p.n_embd, p.n_expert}, p.wtype);
    g.Tensor(Blk(il, "ffn_up_exps.weight"), {p.n_embd, n_ff_exp, p.n_expert}, p.wtype);
    g.Tensor(Blk(il, "ffn_gate_inp_shexp.weight"), {p.n_embd});
    g.Tensor(Blk(il, "ffn_gate_shexp.weight"), {p.n_embd, n_ff_shexp}, p.wtype);
    g.Tensor(Blk(il, "ffn_down_shexp.weight"), {n_ff_shexp, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_up_shexp.weight"), {p.n_embd, n_ff_shexp}, p.wtype);
  }
  return g;
}

SynthGguf Phi3Model(const SynthParams& p, bool rope_factors) {
  SynthGguf g("phi3");
  CommonKeys(g, "phi3", p);
  g.U32("phi3.attention.sliding_window", 128);
  g.U32("phi3.rope.scaling.original_context_length", p.n_ctx / 2);
  EmbdAndOutput(g, p);
  const int64_t hd = p.n_embd / p.n_head, gqa = hd * p.n_head_kv;
  if (rope_factors) {
    g.Tensor("rope_factors_long.weight", {hd / 2});
    g.Tensor("rope_factors_short.weight", {hd / 2});
  }
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    g.Tensor(Blk(il, "attn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "attn_qkv.weight"), {p.n_embd, p.n_embd + 2 * gqa}, p.wtype);
    g.Tensor(Blk(il, "attn_output.weight"), {p.n_embd, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "ffn_down.weight"), {p.n_ff, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_up.weight"), {p.n_embd, 2 * p.n_ff}, p.wtype);
  }
  return g;
}

SynthGguf GemmaModel(const SynthParams& p, uint32_t head_dim) {
  SynthGguf g("gemma");
  CommonKeys(g, "gemma", p);
  g.U32("gemma.attention.key_length", head_dim);
  g.U32("gemma.attention.value_length", head_dim);
  g.Tensor("token_embd.weight", {p.n_embd, p.n_vocab}, p.wtype);
  g.Tensor("output_norm.weight", {p.n_embd});
  const int64_t q = int64_t(head_dim) * p.n_head, gqa = int64_t(head_dim) * p.n_head_kv;
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    g.Tensor(Blk(il, "attn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "attn_q.weight"), {p.n_embd, q}, p.wtype);
    g.Tensor(Blk(il, "attn_k.weight"), {p.n_embd, gqa}, p.wtype);
    g.Tensor(Blk(il, "attn_v.weight"), {p.n_embd, gqa}, p.wtype);
    g.Tensor(Blk(il, "attn_output.weight"), {q, p.n_embd}, p.wtype);
    g.Tensor(Blk(il, "ffn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "ffn_gate.weight"), {p.n_embd, p.n_ff}, p.wtype);
    g.Tensor(Blk(il, "ffn_up.weight"), {p.n_embd, p.n_ff}, p.wtype);
    g.Tensor(Blk(il, "ffn_down.weight"), {p.n_ff, p.n_embd}, p.wtype);
  }
  return g;
}

SynthGguf MambaModel(const SynthParams& p) {
  SynthGguf g("mamba");
  CommonKeys(g, "mamba", p, /*attention=*/false);
  const int64_t d_inner = 2 * p.n_embd, d_conv = 4, d_state = 16, dt_rank = 8;
  g.U32("mamba.ssm.conv_kernel", d_conv);
  g.U32("mamba.ssm.inner_size", d_inner);
  g.U32("mamba.ssm.state_size", d_state);
  g.U32("mamba.ssm.time_step_rank", dt_rank);
  EmbdAndOutput(g, p);
  for (uint32_t i = 0; i < p.n_layer; ++i) {
    const int il = static_cast<int>(i);
    g.Tensor(Blk(il, "attn_norm.weight"), {p.n_embd});
    g.Tensor(Blk(il, "ssm_in.weight"), {p.n_embd, 2 * d_inner}, p.wtype);
    g.Tensor(Blk(il, "ssm_conv1d.weight"), {d_conv, d_inner});
    g.Tensor(Blk(il, "ssm_conv1d.bias"), {d_inner});
    g.Tensor(Blk(il, "ssm_x.weight"), {d_inner, dt_rank + 2 * d_state}, p.wtype);
    g.Tensor(Blk(il, "ssm_dt.weight"), {dt_rank, d_inner}, p.wtype);
    g.Tensor(Blk(il, "ssm_dt.bias"), {d_inner});
    g.Tensor(Blk(il, "ssm_a"), {d_state, d_inner});
    g.Tensor(Blk(il, "ssm_d"), {d_inner});
    g.Tensor(Blk(il, "ssm_out.weight"), {d_inner, p.n_embd}, p.wtype);
  }
  return g;
}

}  // namespace stowage::test
