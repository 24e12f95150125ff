// Test helper: small GGUF files of each supported architecture, written in memory with the GGUF
// writer (tensor data left as zeros) and parsed back with GgufFile::Parse. The tensors come from
// the planner's tensor tables (stowage/planner/arch_tensors.h); tests then drop, rename or reshape
// them to make broken files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "stowage/planner/arch_tensors.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"

namespace stowage::test {

/// Hyper-parameters of a synthetic model; defaults give a tiny but non-degenerate one.
struct SynthParams {
  uint32_t n_layer = 2, n_embd = 64, n_head = 4, n_head_kv = 2, n_ff = 96, n_vocab = 128, n_ctx = 256;
  uint32_t n_expert = 0, n_expert_used = 0;
  bool tied = false;               ///< omit output.weight
  GgmlType wtype = GgmlType::F32;  ///< type of the matrices (1-D tensors stay F32)
};

/// A GGUF file being put together: keys and tensors in the order added.
class SynthGguf {
 public:
  explicit SynthGguf(std::string arch);
  void U32(const std::string& key, uint32_t v);
  void F32(const std::string& key, float v);
  void Str(const std::string& key, const std::string& v);
  void Bool(const std::string& key, bool v);
  /// Sets `key` to `v`: replaces the value of a key added earlier (in place), else adds it.
  void Set(const std::string& key, GgufMetaValue v);
  /// Removes a key added earlier (to make a file with a missing key).
  void DropKey(const std::string& key);
  /// Adds "<arch>.<suffix>" as u32.
  void ArchU32(const std::string& suffix, uint32_t v) { U32(arch_ + "." + suffix, v); }
  void Tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type = GgmlType::F32);
  /// Removes a tensor added earlier (to make a file with a missing tensor).
  void Drop(const std::string& name);
  /// Replaces the shape/type of a tensor added earlier.
  void Replace(const std::string& name, std::vector<int64_t> ne, GgmlType type = GgmlType::F32);
  /// Renames a tensor added earlier (to make a file with a misspelled tensor name).
  void Rename(const std::string& name, const std::string& new_name);
  /// Writes and parses the file (named "<arch>.gguf" in messages).
  std::unique_ptr<GgufFile> Parse();

 private:
  struct T {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
  };
  std::string arch_;
  std::vector<std::pair<std::string, GgufMetaValue>> kvs_;
  std::vector<T> tensors_;
  std::vector<uint8_t> bytes_;
  Status Fill(GgufWriter& w) const;
};

/// Adds the tensors of architecture `arch`'s table (ForEachFileTensor: file order, the optional
/// ones `opts` keeps) for `n_layer` layers: kMatrix tensors of type `wtype`, the others F32.
void AddTableTensors(SynthGguf& g, const std::string& arch, const planner::TensorDims& d, int n_layer,
                     const planner::TensorFileOptions& opts, GgmlType wtype);

/// Files with every required tensor llama.cpp's load_tensors asks for (and output.weight unless
/// tied), per architecture.
SynthGguf LlamaModel(const SynthParams& p);
SynthGguf Qwen2Model(const SynthParams& p);
/// qwen2moe with expert FFN width n_ff_exp and shared-expert width n_ff_shexp; `width_keys` writes
/// them as qwen2moe.expert_{,shared_}feed_forward_length.
SynthGguf Qwen2MoeModel(const SynthParams& p, uint32_t n_ff_exp, uint32_t n_ff_shexp, bool width_keys = true);
/// qwen3 with heads of `head_dim` (attention.key_length / value_length written when head_dim *
/// n_head != n_embd, as Qwen3-0.6B's file has them).
SynthGguf Qwen3Model(const SynthParams& p, uint32_t head_dim);
/// qwen3moe with heads of `head_dim` (key/value_length written when head_dim * n_head != n_embd)
/// and experts of width n_ff_exp (qwen3moe.expert_feed_forward_length).
SynthGguf Qwen3MoeModel(const SynthParams& p, uint32_t head_dim, uint32_t n_ff_exp);
/// glm4moe of p.n_layer blocks, the last `n_nextn` of them NextN blocks (nextn_predict_layers):
/// heads of 32 roped over 16 with q/k/v biases and q/k norms, block 0 dense, the others with
/// p.n_expert experts of 48 and one shared expert, weights normalized and scaled by 2.5, sigmoid
/// gating (GLM-4.5's keys).
SynthGguf Glm4MoeModel(const SynthParams& p, uint32_t n_nextn);
/// mistral3 with llama's keys and no temperature tuning or YaRN keys (tests add them).
SynthGguf Mistral3Model(const SynthParams& p);
/// smollm3 with llama's keys (no rope in every 4th layer).
SynthGguf SmolLM3Model(const SynthParams& p);
/// granite with Granite-3.3-8B's multipliers (logit 16, residual 0.22, embedding 12, attention
/// scale 1/128).
SynthGguf GraniteModel(const SynthParams& p);
SynthGguf Phi3Model(const SynthParams& p, bool rope_factors);
SynthGguf GemmaModel(const SynthParams& p, uint32_t head_dim);
/// gemma2 with heads of `head_dim` (key_length / value_length written, as Gemma-2's files),
/// attention.sliding_window `n_swa` and the soft-caps 50 / 30; no output.weight (the table has none).
SynthGguf Gemma2Model(const SynthParams& p, uint32_t head_dim, uint32_t n_swa);
/// gemma3 with heads of `head_dim`, rope.freq_base 1e6, attention.sliding_window `n_swa` and
/// rope.freq_base_swa 10000 (Gemma-3's keys), no final soft-cap; output.weight unless p.tied.
SynthGguf Gemma3Model(const SynthParams& p, uint32_t head_dim, uint32_t n_swa);
/// mamba: d_inner = 2 * n_embd, d_conv 4, d_state 16, dt_rank 8.
SynthGguf MambaModel(const SynthParams& p);

}  // namespace stowage::test
