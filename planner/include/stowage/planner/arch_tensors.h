// The tensors of every supported architecture: one table per architecture, the single description
// of a model's weights that three readers share:
//   - the planner's loaders (planner/lib/graph/arch_*.cpp) take each tensor's name, shape,
//     presence, layer and consuming op from it (they still decide the creation order, which is
//     llama.cpp load_tensors' and fixes the planner's global ids, and build the graphs);
//   - gguf-synth (tools/gguf-synth/synth.cpp) writes a model's tensors from it;
//   - the tests' synthetic files (test/unit/graph/synth_gguf.cpp) are written from it.
// Names follow llama.cpp's LLM_TENSOR_NAMES (src/llama-arch.cpp), shapes (ggml order, ne0 first)
// and presence its load_tensors (src/llama-model.cpp, Feb 2025). Data only: no state, no I/O.
//
// How to add an architecture (its tensors):
//   1. Add a table to planner/lib/graph/arch_tensors.cpp: one ArchTensor per tensor, global ones
//      first, then the per-layer ones, in the order the converter writes them (gguf-synth writes
//      this order); shapes as lambdas of TensorDims (add a field there if a new hparam is needed,
//      and fill it in DimsOf (planner/lib/graph/arch_common.cpp) and gguf-synth's SpecDims).
//      Register the table in ArchTensorTables().
//   2. Write the loader and graph builder (planner/lib/graph/arch_<name>.cpp, ArchSpec in
//      model_graphs.cpp): the loader creates each table tensor by name with TableLoader (arch.h);
//      shapes and flags are never written there.
//   3. gguf-synth: add the name to SupportedArchs() and its metadata keys (tools/gguf-synth/synth.cpp);
//      the tensors come from the table. test/unit/graph/synth_gguf.{h,cpp}: a <Name>Model() that
//      writes the keys and calls AddTableTensors.
//   4. arch_tensors_test (test/unit/graph) checks every architecture gguf-synth knows: the file's
//      tensors are exactly the table's and the loader consumes every one of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/ggml_ops.h"

namespace stowage::planner {

/// The hyper-parameters tensor shapes are written in (llama.cpp llama_hparams names). The planner
/// fills them from the file's metadata (DimsOf), gguf-synth from its ModelSpec; a field an
/// architecture does not use is 0.
struct TensorDims {
  int64_t n_embd = 0, n_vocab = 0, n_ff = 0, n_head = 0, n_head_kv = 0;
  int64_t n_embd_q = 0;      ///< n_embd_head_k * n_head (llama: attn_q columns)
  int64_t n_embd_k_gqa = 0;  ///< n_embd_head_k * n_head_kv
  int64_t n_embd_v_gqa = 0;  ///< n_embd_head_v * n_head_kv
  int64_t n_rot = 0;         ///< rope.dimension_count
  int64_t n_expert = 0;
  int64_t n_ff_exp = 0;    ///< qwen2moe expert width (llama.cpp: n_ff_exp, else n_ff / n_expert_used)
  int64_t n_ff_shexp = 0;  ///< qwen2moe shared expert width (llama.cpp: n_ff_shexp, else n_ff)
  int64_t ssm_d_conv = 0, ssm_d_inner = 0, ssm_d_state = 0, ssm_dt_rank = 0;
  /// deepseek2's MLA: q_lora_rank (0: attn_q), kv_lora_rank, the heads' sizes as MHA
  /// (n_embd_head_k_mla / _v_mla), whether the file has the absorbed attn_k_b / attn_v_b (mla)
  /// instead of attn_kv_b, and the leading dense layers (leading_dense_block_count).
  int64_t n_lora_q = 0, n_lora_kv = 0, n_embd_head_k_mla = 0, n_embd_head_v_mla = 0, n_layer_dense_lead = 0;
  bool mla = false;
  /// glm4moe: the trunk's block count when the file has NextN / MTP blocks after it (0: none).
  int64_t n_layer_trunk = 0;
  bool longrope = false;  ///< rope.scaling.type is longrope (llama: rope_factors_long/short, not rope_freqs)
};

/// The TensorDims of a model whose key and value heads are all `head_dim` wide, rotated in full
/// (n_rot = head_dim), as gguf-synth and the tests write their files; the MoE and SSM fields stay 0.
TensorDims UniformHeadDims(int64_t n_embd, int64_t n_vocab, int64_t n_ff, int64_t n_head, int64_t n_head_kv,
                           int64_t head_dim);

/// Where a tensor lives (llama.cpp llm_tensor_info layer, and the "blk.%d." prefix).
enum class TensorScope : uint8_t {
  kInput,       ///< global name, input layer (token_embd)
  kOutput,      ///< global name, output layer (layer n_layer)
  kLayer,       ///< "blk.<il>.<name>", layer il
  kEveryLayer,  ///< global name requested by every layer (rope factors): created by layer 0, the
                ///< others' requests are TENSOR_DUPLICATED (llama.cpp PR #7447, #10026)
};

/// When an architecture asks for a tensor at all (load_tensors' branches on hparams).
enum class TensorWhen : uint8_t {
  kAlways,
  kDense,        ///< n_expert == 0: the dense FFN (llama)
  kMoe,          ///< n_expert > 0: merged expert tensors (mixtral)
  kNotLongRope,  ///< rope scaling other than longrope (llama's rope_freqs)
  kLongRope,     ///< longrope scaling (llama's rope_factors_long/short)
  kQLora,        ///< n_lora_q > 0 (deepseek2's attn_q_a, attn_q_a_norm, attn_q_b)
  kNoQLora,      ///< n_lora_q == 0 (deepseek2's attn_q)
  kMla,          ///< mla: the absorbed attn_k_b / attn_v_b (deepseek2)
  kNotMla,       ///< !mla: attn_kv_b (deepseek2 files of before the absorbed form)
  kLeadDense,    ///< the leading dense layers, il < n_layer_dense_lead (deepseek2's dense FFN)
  kAfterLead,    ///< the layers il >= n_layer_dense_lead (deepseek2's experts)
  kNextN,        ///< the NextN / MTP blocks, il >= n_layer_trunk > 0 (glm4moe's nextn.* tensors)
};

/// What a tensor holds: its type rule (llama.cpp's converter and llama-quant: only kMatrix is
/// quantized, every other role stays F32) and how gguf-synth makes its values.
enum class TensorRole : uint8_t {
  kMatrix,     ///< weight matrix: any float or quantized type
  kNorm,       ///< norm weight, F32
  kBias,       ///< bias, F32
  kRouter,     ///< MoE router (ffn_gate_inp, ffn_gate_inp_shexp, deepseek2's exp_probs_b.bias), F32
  kConv,       ///< ssm_conv1d weight, F32
  kSsmA,       ///< mamba A (-exp(A_log)), F32
  kSsmD,       ///< mamba D, F32
  kRopeFreqs,  ///< Llama-3.1 rope frequency factors, F32
  kRopeLong,   ///< LongRoPE long factors, F32
  kRopeShort,  ///< LongRoPE short factors, F32
};

/// A tensor's shape (ggml order; trailing 1s may be left out) from the hyper-parameters.
using TensorShapeFn = std::vector<int64_t> (*)(const TensorDims& d);

/// One tensor of an architecture (llama.cpp: one create_tensor call of load_tensors).
struct ArchTensor {
  const char* name;  ///< "attn_q.weight"; kLayer tensors are "blk.<il>." + name
  TensorScope scope;
  TensorShapeFn shape;
  bool required;  ///< false: llama.cpp TENSOR_NOT_REQUIRED
  GgmlOp op;      ///< the op that reads it (GlobalTensor::consumer_op; placement relies on it)
  TensorRole role;
  TensorWhen when;
};

/// The tensors of one architecture, global ones first, then one layer's, in file order.
struct ArchTensorTable {
  const char* arch;  ///< general.architecture
  std::vector<ArchTensor> tensors;
  /// The entry named `name` ("attn_q.weight"), or nullptr.
  const ArchTensor* Find(std::string_view name) const;
};

/// Every architecture's table, in the order of the planner's ArchSpec list.
const std::vector<ArchTensorTable>& ArchTensorTables();
/// The table of general.architecture `arch`, or nullptr when unknown.
const ArchTensorTable* FindArchTensorTable(std::string_view arch);

/// Whether an architecture with hyper-parameters `d` asks for `t` (its TensorWhen) in layer `il`;
/// with il -1 (any layer) kLeadDense holds when n_layer_dense_lead > 0, kAfterLead always and kNextN
/// when n_layer_trunk > 0.
bool Applies(const ArchTensor& t, const TensorDims& d, int il = -1);
/// The GGUF name of `t` in layer `il` ("blk.<il>.<name>" for kLayer, else the name).
std::string TensorName(const ArchTensor& t, int il);

/// Which optional tensors a file written from a table carries (gguf-synth, the tests' files).
struct TensorFileOptions {
  bool output = true;           ///< output.weight (false: tied embeddings, even where required)
  bool rope_factors = false;    ///< the rope factor tensors (kRopeFreqs / kRopeLong / kRopeShort)
  bool other_optional = false;  ///< every other optional tensor (llama's q/k/v/o and FFN biases)
};

/// The tensors of a file of `n_layer` layers written from `table`, in file order: the global
/// tensors (kInput, kOutput, kEveryLayer, once each) in table order, then for each layer its
/// kLayer tensors in table order. Calls `fn(t, il, name, ne)` for each tensor that Applies and that
/// `opts` keeps (required ones always, except output.weight without opts.output); il is -1 for
/// global tensors.
void ForEachFileTensor(const ArchTensorTable& table, const TensorDims& d, int n_layer,
                       const TensorFileOptions& opts,
                       const std::function<void(const ArchTensor& t, int il, const std::string& name,
                                                const std::vector<int64_t>& ne)>& fn);

}  // namespace stowage::planner
