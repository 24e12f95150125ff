// Graph builders of every supported architecture, checked against llama.cpp's (Feb 2025)
// load_tensors and build_<arch>: which op consumes which weight, node names and order of a layer,
// shapes, the output, the cache, and the error messages of bad files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "stowage/planner/graph_builder.h"
#include "stowage/planner/model_graphs.h"
#include "synth_gguf.h"

namespace stowage::planner {
namespace {

using test::SynthGguf;
using test::SynthParams;

/// "OP name" for every node of `g` from the first node named `from` through the first node named
/// `to` after it (inclusive).
std::vector<std::string> NodeRange(const Graph& g, const std::string& from, const std::string& to) {
  std::vector<std::string> out;
  bool on = false;
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    if (!on && t.name == from) on = true;
    if (on) out.push_back(std::string(GgmlOpName(t.op)) + " " + t.name);
    if (on && t.name == to && out.size() > 1) break;
  }
  return out;
}

void Dump(const ModelGraphs& m, const Graph& g) {
  if (std::getenv("STOWAGE_DUMP_GRAPH") == nullptr) return;
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    const Bindings b = g.WorstCase();
    std::cerr << GgmlOpName(t.op) << " " << t.name << " [" << b.Eval(t.ne[0]) << "," << b.Eval(t.ne[1]) << ","
              << b.Eval(t.ne[2]) << "," << b.Eval(t.ne[3]) << "] <-";
    for (int s : t.srcs) std::cerr << " '" << (s >= 0 ? g.tensors[s].name : "-") << "'";
    std::cerr << "\n";
  }
  for (const auto& gt : m.globals)
    std::cerr << "global " << gt.name << " " << GgmlOpName(gt.consumer_op) << "\n";
}

/// Node of `g` named `name` (the last one with that name: llama.cpp renames as it goes).
const Tensor* Node(const Graph& g, const std::string& name) {
  const Tensor* found = nullptr;
  for (int n : g.nodes)
    if (g.tensors[n].name == name) found = &g.tensors[n];
  return found;
}

std::vector<int64_t> Shape(const Graph& g, const Tensor& t) {
  const Bindings b = g.WorstCase();
  return {b.Eval(t.ne[0]), b.Eval(t.ne[1]), b.Eval(t.ne[2]), b.Eval(t.ne[3])};
}

const GlobalTensor* Global(const ModelGraphs& m, const std::string& name) {
  const int i = m.FindGlobal(name);
  return i < 0 ? nullptr : &m.globals[i];
}

/// The graph nodes that read global `name` directly, as "OP node-name".
std::vector<std::string> Consumers(const Graph& g, const std::string& name) {
  std::vector<std::string> out;
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    for (int s : t.srcs)
      if (s >= 0 && g.tensors[s].name == name && g.tensors[s].op == GgmlOp::NONE)
        out.push_back(std::string(GgmlOpName(t.op)) + " " + t.name);
  }
  return out;
}

Result<ModelGraphs> Build(SynthGguf& s, ContextConfig cfg = {}) {
  auto f = s.Parse();
  auto m = BuildModelGraphs(*f, cfg);
  if (m.ok()) {
    Dump(*m, m->pp);
  }
  return m;
}

// The KV store of llama.cpp 2026 (llama_kv_cache::cpy_k / cpy_v without flash attention): K rows
// and V elements SET_ROWS'd into the caches reshaped to rows at the index inputs' cells.
std::vector<std::string> KvStore2026(const std::string& kname, const std::string& vname, int il) {
  const std::string l = std::to_string(il);
  return {"RESHAPE " + kname + " (reshaped)",
          "RESHAPE cache_k_l" + l + " (reshaped)",
          "SET_ROWS cache_k_l" + l + " (reshaped) (view)",
          "RESHAPE " + vname + " (reshaped)",
          "RESHAPE " + vname + " (reshaped) (reshaped)",
          "RESHAPE cache_v_l" + l + " (reshaped)",
          "SET_ROWS cache_v_l" + l + " (reshaped) (view)"};
}

// The attention block every llama-like builder shares (llm_build_kv: store K and V, then kqv),
// as ggml_build_forward_expand orders it for layer `il`; `store_2026`: llama.cpp 2026's build_attn
// (the KvStore2026 store, then the caches and Q `qname` viewed per stream and permuted) instead of
// Feb 2025's CPY into views and single views.
std::vector<std::string> KvBlock(const std::string& kname, const std::string& vname, int il,
                                 bool store_2026 = false, const std::string& qname = "") {
  const std::string s = "-" + std::to_string(il);
  std::vector<std::string> store = {"VIEW k_cache_view" + s,
                                    "CPY k_cache_view" + s + " (copy of " + kname + ")",
                                    "TRANSPOSE " + vname + " (transposed)", "VIEW v_cache_view" + s,
                                    "CPY v_cache_view" + s + " (copy of " + vname + " (transposed))"};
  if (store_2026) store = KvStore2026(kname, vname, il);
  std::vector<std::string> kqv = {"VIEW v" + s,
                                  "VIEW k" + s,
                                  "PERMUTE q" + s,
                                  "MUL_MAT kq" + s,
                                  "SOFT_MAX kq_soft_max_ext" + s,
                                  "MUL_MAT kqv" + s,
                                  "PERMUTE kqv_merged" + s,
                                  "CONT kqv_merged_cont" + s,
                                  "MUL_MAT kqv_out" + s};
  if (store_2026) {
    const std::string l = std::to_string(il);
    kqv.erase(kqv.begin(), kqv.begin() + 3);
    kqv.insert(kqv.begin(), {"VIEW cache_v_l" + l + " (view)", "PERMUTE v" + s,
                             "VIEW cache_k_l" + l + " (view)", "PERMUTE k" + s,
                             "VIEW " + (qname.empty() ? "Qcur" + s : qname) + " (view)", "PERMUTE q" + s});
  }
  store.insert(store.end(), kqv.begin(), kqv.end());
  return store;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------------------------------------
// llama

TEST(LlamaGraph, LayerNodesInLlamaCppOrder) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::string> want =
      Concat(Concat({"GET_ROWS inp_embd", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT Qcur-0",
                     "RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0", "MUL_MAT Kcur-0",
                     "RESHAPE Kcur-0 (reshaped)", "ROPE Kcur-0", "MUL_MAT Vcur-0"},
                    KvBlock("Kcur-0", "Vcur-0", 0)),
             {"ADD ffn_inp-0", "RMS_NORM norm-0", "MUL ffn_norm-0", "MUL_MAT ffn_gate-0", "SILU ffn_silu-0",
              "MUL_MAT ffn_up-0", "MUL ffn_gate_par-0", "MUL_MAT ffn_out-0", "ADD l_out-0"});
  EXPECT_EQ(NodeRange(m->pp, "inp_embd", "l_out-0"), want);
  EXPECT_EQ(NodeRange(m->tg, "inp_embd", "l_out-0"), want);
}

TEST(LlamaGraph, WeightsConsumersAndOutput) {
  SynthParams p;
  SynthGguf s = test::LlamaModel(p);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const GlobalTensor* q = Global(*m, "blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->consumer_op, GgmlOp::MUL_MAT);
  EXPECT_EQ(q->layer, 1);
  EXPECT_EQ(q->layer_class, LayerClass::kRepeating);
  const GlobalTensor* te = Global(*m, "token_embd.weight");
  EXPECT_EQ(te->consumer_op, GgmlOp::GET_ROWS);
  EXPECT_EQ(te->layer_class, LayerClass::kInput);
  const GlobalTensor* out = Global(*m, "output.weight");
  EXPECT_EQ(out->layer, 2);
  EXPECT_EQ(out->layer_class, LayerClass::kOutput);
  EXPECT_EQ(Consumers(m->pp, "blk.0.ffn_down.weight"), std::vector<std::string>{"MUL_MAT ffn_out-0"});
  EXPECT_EQ(Consumers(m->pp, "blk.1.attn_norm.weight"), std::vector<std::string>{"MUL attn_norm-1"});
  EXPECT_EQ(Consumers(m->pp, "output.weight"), std::vector<std::string>{"MUL_MAT result_output"});
  // the last layer keeps only the output rows (inp_out_ids) before its FFN
  const Tensor* res = Node(m->pp, "result_output");
  ASSERT_NE(res, nullptr);
  EXPECT_TRUE(res->is_output);
  EXPECT_EQ(res->ne[1], DimExpr::Outputs());
  EXPECT_EQ(Shape(m->pp, *res), (std::vector<int64_t>{128, 256, 1, 1}));
  EXPECT_EQ(Shape(m->tg, *Node(m->tg, "result_output")), (std::vector<int64_t>{128, 1, 1, 1}));
  EXPECT_EQ(NodeRange(m->pp, "kqv_out-1", "ffn_inp-1"),
            (std::vector<std::string>{"MUL_MAT kqv_out-1", "GET_ROWS ", "GET_ROWS ", "ADD ffn_inp-1"}));
  EXPECT_EQ(
      NodeRange(m->pp, "l_out-1", "result_output"),
      (std::vector<std::string>{"ADD l_out-1", "RMS_NORM norm", "MUL result_norm", "MUL_MAT result_output"}));
  // nodes: inp_embd + 32 per layer + 2 GET_ROWS (inp_out_ids) + output norm, mul, lm_head
  EXPECT_EQ(m->pp.nodes.size(), 1u + 32u * p.n_layer + 2u + 3u);
  EXPECT_EQ(m->tg.nodes.size(), m->pp.nodes.size());
  // KV cache: f16 K/V of n_embd_k_gqa * n_ctx per layer
  const GlobalTensor* k1 = Global(*m, "cache_k_l1");
  ASSERT_NE(k1, nullptr);
  EXPECT_EQ(k1->kind, TensorKind::kKvCache);
  EXPECT_EQ(k1->ne[0], 32 * 256);
  EXPECT_EQ(k1->type, GgmlType::F16);
  // normal rope (LLAMA_ROPE_TYPE_NORM), no freq factors
  const Tensor* rope = Node(m->pp, "Kcur-0");
  ASSERT_EQ(rope->op, GgmlOp::ROPE);
  EXPECT_EQ(rope->srcs.size(), 2u);
  EXPECT_EQ(rope->iparams[1], 0);
}

TEST(LlamaGraph, ContextPaddedAsLlamaCpp) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  auto f = s.Parse();
  ContextConfig cfg;
  cfg.n_ctx = 100;  // llama_init_from_model: GGML_PAD(n_ctx, 32)
  cfg.n_ubatch = 512;
  auto m = BuildModelGraphs(*f, cfg);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->cfg.n_ctx, 128u);
  EXPECT_EQ(m->pp.max_kv, 128);
  EXPECT_EQ(m->pp.max_tokens, 128);  // min(n_ctx, n_ubatch)
  EXPECT_EQ(Global(*m, "cache_v_l0")->ne[0], 32 * 128);
}

TEST(LlamaGraph, TiedOutputReusesTokenEmbd) {
  SynthParams p;
  p.tied = true;
  SynthGguf s = test::LlamaModel(p);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  int n = 0;
  for (const GlobalTensor& g : m->globals) {
    if (g.name != "token_embd.weight") continue;
    ++n;
    if (g.duplicated) {
      EXPECT_EQ(g.consumer_op, GgmlOp::MUL_MAT);
      EXPECT_EQ(g.layer_class, LayerClass::kOutput);
    } else {
      EXPECT_EQ(g.consumer_op, GgmlOp::GET_ROWS);
    }
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(Consumers(m->pp, "token_embd.weight"),
            (std::vector<std::string>{"GET_ROWS inp_embd", "MUL_MAT result_output"}));
}

TEST(LlamaGraph, RopeFreqsSharedByEveryLayer) {
  SynthParams p;
  SynthGguf s = test::LlamaModel(p);
  s.Tensor("rope_freqs.weight", {8});  // n_rot / 2
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  int n = 0, dup = 0;
  for (const GlobalTensor& g : m->globals)
    if (g.name == "rope_freqs.weight") {
      ++n;
      dup += g.duplicated;
      EXPECT_EQ(g.consumer_op, GgmlOp::ROPE);
    }
  EXPECT_EQ(n, 2);    // requested by layer 0 and layer 1
  EXPECT_EQ(dup, 1);  // duplicated for il > 0 (llama.cpp TENSOR_DUPLICATED)
  for (const char* name : {"Qcur-0", "Kcur-0", "Qcur-1", "Kcur-1"}) {
    const Tensor* r = Node(m->pp, name);
    ASSERT_EQ(r->op, GgmlOp::ROPE) << name;
    ASSERT_EQ(r->srcs.size(), 3u) << name;
    EXPECT_EQ(m->pp.tensors[r->srcs[2]].name, "rope_freqs.weight");
  }
}

TEST(LlamaGraph, RopeScalingKeys) {
  SynthParams p;
  {
    SynthGguf s = test::LlamaModel(p);
    s.Str("llama.rope.scaling.type", "yarn");
    s.F32("llama.rope.scaling.factor", 4.0f);
    s.U32("llama.rope.scaling.original_context_length", 64);
    s.F32("llama.rope.freq_base", 500000.f);
    auto m = Build(s);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Tensor* r = Node(m->pp, "Qcur-0");
    ASSERT_EQ(r->op, GgmlOp::ROPE);
    EXPECT_EQ(r->iparams[2], 64);              // n_ctx_orig
    EXPECT_FLOAT_EQ(r->fparams[0], 500000.f);  // freq_base
    EXPECT_FLOAT_EQ(r->fparams[1], 0.25f);     // freq_scale = 1 / factor
    EXPECT_FLOAT_EQ(r->fparams[2], 1.0f);      // ext_factor: yarn
  }
  {
    SynthGguf s = test::LlamaModel(p);
    s.Str("llama.rope.scaling.type", "none");
    s.F32("llama.rope.scale_linear", 2.0f);  // old key; ignored with scaling type none
    auto m = Build(s);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Tensor* r = Node(m->pp, "Qcur-0");
    EXPECT_FLOAT_EQ(r->fparams[1], 1.0f);
    EXPECT_FLOAT_EQ(r->fparams[2], 0.0f);
  }
  {
    SynthGguf s = test::LlamaModel(p);
    s.F32("llama.rope.scale_linear", 2.0f);  // linear by default
    auto m = Build(s);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_FLOAT_EQ(Node(m->pp, "Qcur-0")->fparams[1], 0.5f);
  }
  {
    SynthGguf s = test::LlamaModel(p);
    s.Str("llama.rope.scaling.type", "su");
    auto m = Build(s);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message().substr(m.status().message().find(": key")),
              ": key 'llama.rope.scaling.type': expected none, linear, yarn or longrope, found 'su'");
  }
}

TEST(LlamaGraph, LongropeFactorsChosenByContext) {
  SynthParams p;  // n_ctx_train 256
  SynthGguf s = test::LlamaModel(p);
  s.Str("llama.rope.scaling.type", "longrope");
  s.U32("llama.rope.scaling.original_context_length", 128);
  s.Tensor("rope_factors_long.weight", {8});
  s.Tensor("rope_factors_short.weight", {8});
  auto f = s.Parse();
  for (uint32_t n_ctx : {256u, 128u}) {
    ContextConfig cfg;
    cfg.n_ctx = n_ctx;
    auto m = BuildModelGraphs(*f, cfg);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Tensor* r = Node(m->pp, "Kcur-1");
    ASSERT_EQ(r->srcs.size(), 3u);
    EXPECT_EQ(m->pp.tensors[r->srcs[2]].name,
              n_ctx > 128 ? "rope_factors_long.weight" : "rope_factors_short.weight");
  }
}

TEST(LlamaGraph, MixtralMoeFfn) {
  SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  SynthGguf s = test::LlamaModel(p);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::string> want = {"MUL ffn_norm-0",
                                         "RESHAPE ffn_norm-0 (reshaped)",
                                         "MUL_MAT ffn_moe_logits-0",
                                         "SOFT_MAX ffn_moe_probs-0",
                                         "ARGSORT ffn_moe_argsort-0",
                                         "VIEW ffn_moe_topk-0",
                                         "MUL_MAT_ID ffn_moe_up-0",
                                         "MUL_MAT_ID ffn_moe_gate-0",
                                         "SILU ffn_moe_silu-0",
                                         "MUL ffn_moe_gate_par-0",
                                         "MUL_MAT_ID ffn_moe_down-0",
                                         "RESHAPE ffn_moe_probs-0 (reshaped)",
                                         "GET_ROWS ffn_moe_weights-0",
                                         "RESHAPE ffn_moe_weights-0 (reshaped)",
                                         "SUM_ROWS ffn_moe_weights_sum-0",
                                         "DIV ffn_moe_weights_norm-0",
                                         "RESHAPE ffn_moe_weights_norm-0 (reshaped)",
                                         "MUL ",
                                         "VIEW  (view)",
                                         "VIEW  (view)",
                                         "ADD ffn_moe_out-0",
                                         "ADD l_out-0"};
  EXPECT_EQ(NodeRange(m->pp, "ffn_norm-0", "l_out-0"), want);
  const Graph& g = m->pp;
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_topk-0")), (std::vector<int64_t>{2, 256, 1, 1}));
  EXPECT_EQ(Node(g, "ffn_moe_topk-0")->type, GgmlType::I32);
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_weights-0")), (std::vector<int64_t>{1, 2, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_up-0")), (std::vector<int64_t>{96, 2, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_down-0")), (std::vector<int64_t>{64, 2, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_out-1")), (std::vector<int64_t>{64, 256, 1, 1}));
  EXPECT_EQ(Node(g, "ffn_moe_argsort-0")->iparams, std::vector<int32_t>{1});  // descending
  EXPECT_EQ(Consumers(g, "blk.0.ffn_gate_inp.weight"), std::vector<std::string>{"MUL_MAT ffn_moe_logits-0"});
  EXPECT_EQ(Consumers(g, "blk.0.ffn_up_exps.weight"), std::vector<std::string>{"MUL_MAT_ID ffn_moe_up-0"});
  EXPECT_EQ(Consumers(g, "blk.1.ffn_down_exps.weight"),
            std::vector<std::string>{"MUL_MAT_ID ffn_moe_down-1"});
  EXPECT_EQ(Global(*m, "blk.0.ffn_gate_exps.weight")->consumer_op, GgmlOp::MUL_MAT_ID);
  EXPECT_EQ(Global(*m, "blk.0.ffn_gate_inp.weight")->consumer_op, GgmlOp::MUL_MAT);
  // the last layer routes only the output rows
  EXPECT_EQ(Node(g, "ffn_moe_topk-1")->ne[1], DimExpr::Outputs());
}

// ---------------------------------------------------------------------------------------------
// errors and reports

TEST(ModelGraphsErrors, UnknownArchitectureListsSupported) {
  SynthGguf s("falcon");
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(m.status().message(),
            "falcon.gguf: unknown model architecture 'falcon' (supported: llama, qwen2, "
            "qwen2moe, qwen3, qwen3moe, glm4moe, mistral3, smollm3, granite, phi3, gemma, gemma2, gemma3, "
            "deepseek2, gpt-oss, mamba)");
  EXPECT_EQ(SupportedArchitectures().size(), 16u);
}

TEST(ModelGraphsErrors, SplitTensorMoeRejected) {
  SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  SynthGguf s = test::LlamaModel(p);
  for (int il = 0; il < 2; ++il) {
    s.Drop("blk." + std::to_string(il) + ".ffn_up_exps.weight");
    for (int e = 0; e < 4; ++e)
      s.Tensor("blk." + std::to_string(il) + ".ffn_up." + std::to_string(e) + ".weight", {64, 96});
  }
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "llama.gguf: split-tensor MoE file (one tensor per expert, e.g. 'blk.0.ffn_up.0.weight'): "
            "re-convert it with merged ffn_*_exps tensors");
}

TEST(ModelGraphsErrors, MissingTensor) {
  SynthGguf s = test::Qwen2Model(SynthParams{});
  s.Drop("blk.1.attn_k.bias");
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "qwen2.gguf: missing tensor 'blk.1.attn_k.bias'");
}

TEST(ModelGraphsErrors, WrongShape) {
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Replace("blk.0.attn_k.weight", {64, 64});
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "llama.gguf: tensor 'blk.0.attn_k.weight' has wrong shape; expected [64, 32], got [64, 64]");
}

TEST(ModelGraphsErrors, WrongType) {
  {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Replace("blk.1.ffn_norm.weight", {64}, GgmlType::F16);
    auto m = Build(s);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(),
              "llama.gguf: tensor 'blk.1.ffn_norm.weight' has wrong type; expected f32, got f16");
  }
  {
    SynthGguf s = test::LlamaModel(SynthParams{});
    s.Replace("blk.0.ffn_up.weight", {64, 96}, GgmlType::I32);
    auto m = Build(s);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(),
              "llama.gguf: tensor 'blk.0.ffn_up.weight' has wrong type; expected a float or quantized type, "
              "got i32");
  }
  {  // quantized matrices are fine
    SynthParams p;
    p.wtype = GgmlType::Q4_0;
    SynthGguf s = test::LlamaModel(p);
    auto m = Build(s);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(Global(*m, "blk.0.ffn_down.weight")->type, GgmlType::Q4_0);
  }
}

TEST(ModelGraphsErrors, TensorsOfBlocksPastBlockCountAreRefused) {
  // stories260K with block_count 4 (5 blocks of tensors) ran with the last block ignored.
  SynthGguf s = test::LlamaModel(SynthParams{});
  s.Tensor("blk.7.attn_norm.weight", {64});
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(
                "wrong number of tensors: tensor 'blk.7.attn_norm.weight' belongs to block 7 but "
                "llama.block_count is"),
            std::string::npos)
      << m.status().message();
}

TEST(ModelGraphsErrors, MissingHyperParameter) {
  SynthGguf s("qwen2");
  s.U32("qwen2.context_length", 128);
  s.U32("qwen2.embedding_length", 64);
  s.U32("qwen2.block_count", 1);
  s.U32("qwen2.feed_forward_length", 96);
  s.U32("qwen2.attention.head_count", 4);
  s.U32("qwen2.vocab_size", 32);
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "qwen2.gguf: missing key 'qwen2.attention.layer_norm_rms_epsilon'");
}

// ---------------------------------------------------------------------------------------------
// qwen2, qwen2moe

TEST(Qwen2Graph, BiasesAndNeoxRope) {
  SynthGguf s = test::Qwen2Model(SynthParams{});
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::string> want =
      Concat(Concat({"GET_ROWS inp_embd", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT Qcur-0",
                     "ADD Qcur-0", "RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0", "MUL_MAT Kcur-0", "ADD Kcur-0",
                     "RESHAPE Kcur-0 (reshaped)", "ROPE Kcur-0", "MUL_MAT Vcur-0", "ADD Vcur-0"},
                    KvBlock("Kcur-0", "Vcur-0", 0)),
             {"ADD ffn_inp-0", "RMS_NORM norm-0", "MUL ffn_norm-0", "MUL_MAT ffn_gate-0", "SILU ffn_silu-0",
              "MUL_MAT ffn_up-0", "MUL ffn_gate_par-0", "MUL_MAT ffn_out-0", "ADD l_out-0"});
  EXPECT_EQ(NodeRange(m->pp, "inp_embd", "l_out-0"), want);
  EXPECT_EQ(Consumers(m->pp, "blk.0.attn_q.bias"), std::vector<std::string>{"ADD Qcur-0"});
  EXPECT_EQ(Global(*m, "blk.0.attn_v.bias")->consumer_op, GgmlOp::ADD);
  const Tensor* r = Node(m->pp, "Qcur-1");
  ASSERT_EQ(r->op, GgmlOp::ROPE);
  EXPECT_EQ(r->iparams[1], 2);                                           // GGML_ROPE_TYPE_NEOX
  EXPECT_FLOAT_EQ(Node(m->pp, "kq_soft_max_ext-0")->fparams[0], 0.25f);  // 1/sqrt(16)
}

// ---------------------------------------------------------------------------------------------
// qwen3

// build_qwen3: qwen2's layer without biases, Q and K normed per head (RMS_NORM over each head's
// head_dim values, MUL by attn_{q,k}_norm) before the rope; heads of key_length 32 with n_embd 64.
TEST(Qwen3Graph, PerHeadQkNormBeforeRope) {
  SynthGguf s = test::Qwen3Model(SynthParams{}, 32);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::string> want =
      Concat(Concat({"GET_ROWS inp_embd", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT Qcur-0",
                     "RESHAPE Qcur-0 (reshaped)", "RMS_NORM norm-0", "MUL Qcur_normed-0", "ROPE Qcur-0",
                     "MUL_MAT Vcur-0", "RESHAPE Vcur-0 (reshaped)", "MUL_MAT Kcur-0",
                     "RESHAPE Kcur-0 (reshaped)", "RMS_NORM norm-0", "MUL Kcur_normed-0", "ROPE Kcur-0"},
                    KvBlock("Kcur-0", "Vcur-0 (reshaped)", 0, /*store_2026=*/true)),
             {"ADD ffn_inp-0", "RMS_NORM norm-0", "MUL ffn_norm-0", "MUL_MAT ffn_gate-0", "MUL_MAT ffn_up-0",
              "SWIGLU ffn_swiglu-0", "MUL_MAT ffn_out-0", "ADD l_out-0"});
  const Graph& g = m->pp;
  EXPECT_EQ(NodeRange(g, "inp_embd", "l_out-0"), want);
  EXPECT_EQ(Shape(g, *Node(g, "Qcur_normed-1")), (std::vector<int64_t>{32, 4, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "Kcur_normed-1")), (std::vector<int64_t>{32, 2, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "kqv_out-0")), (std::vector<int64_t>{64, 256, 1, 1}));
  EXPECT_EQ(Consumers(g, "blk.0.attn_q_norm.weight"), std::vector<std::string>{"MUL Qcur_normed-0"});
  EXPECT_EQ(Consumers(g, "blk.1.attn_k_norm.weight"), std::vector<std::string>{"MUL Kcur_normed-1"});
  EXPECT_EQ(Global(*m, "blk.0.attn_k_norm.weight")->consumer_op, GgmlOp::MUL);
  const Tensor* qn = Node(g, "Qcur_normed-0");
  const Tensor* rms = &g.tensors[qn->srcs[0]];
  ASSERT_EQ(rms->op, GgmlOp::RMS_NORM);
  EXPECT_FLOAT_EQ(rms->fparams[0], 1e-5f);  // attention.layer_norm_rms_epsilon
  const Tensor* r = Node(g, "Qcur-1");
  ASSERT_EQ(r->op, GgmlOp::ROPE);
  EXPECT_EQ(r->iparams[1], 2);                                             // GGML_ROPE_TYPE_NEOX
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 0.17677669f);  // 1/sqrt(32)
  EXPECT_EQ(Global(*m, "output.weight")->consumer_op, GgmlOp::MUL_MAT);
}

TEST(Qwen3Graph, TiedOutputIsTokenEmbd) {
  SynthParams p;
  p.tied = true;
  SynthGguf s = test::Qwen3Model(p, 16);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(Consumers(m->pp, "token_embd.weight").back(), "MUL_MAT result_output");
}

// A q/k norm of the wrong size: the loader's shape check names the file, tensor and expected size.
TEST(Qwen3Graph, WrongQkNormSizeIsAOneLineError) {
  SynthGguf s = test::Qwen3Model(SynthParams{}, 32);
  s.Replace("blk.1.attn_q_norm.weight", {64});
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "qwen3.gguf: tensor 'blk.1.attn_q_norm.weight' has wrong shape; expected [32], got [64]");
  SynthGguf missing = test::Qwen3Model(SynthParams{}, 32);
  missing.Drop("blk.0.attn_k_norm.weight");
  auto m2 = Build(missing);
  ASSERT_FALSE(m2.ok());
  EXPECT_EQ(m2.status().message(), "qwen3.gguf: missing tensor 'blk.0.attn_k_norm.weight'");
}

// ---------------------------------------------------------------------------------------------
// mistral3 (llama.cpp 2026 llama_model_mistral3)

// llama's layer; with attention.temperature_scale the roped Q is multiplied by the inp_attn_scale
// input (F32 [1, 1, n_tokens], llama 4 temperature tuning) before the attention; without it there
// is no such input or node.
TEST(Mistral3Graph, TemperatureScalesQBeforeTheAttention) {
  SynthGguf s = test::Mistral3Model(SynthParams{});
  s.F32("mistral3.attention.temperature_scale", 0.1f);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  const std::vector<std::string> want = Concat(
      Concat({"GET_ROWS inp_embd", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT Qcur-0",
              "RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0", "MUL Qcur_attn_temp_scaled-0", "MUL_MAT Vcur-0",
              "RESHAPE Vcur-0 (reshaped)", "MUL_MAT Kcur-0", "RESHAPE Kcur-0 (reshaped)", "ROPE Kcur-0"},
             KvBlock("Kcur-0", "Vcur-0 (reshaped)", 0, /*store_2026=*/true, "Qcur_attn_temp_scaled-0")),
      {"ADD ffn_inp-0", "RMS_NORM norm-0", "MUL ffn_norm-0", "MUL_MAT ffn_gate-0", "MUL_MAT ffn_up-0",
       "SWIGLU ffn_swiglu-0", "MUL_MAT ffn_out-0", "ADD l_out-0"});
  EXPECT_EQ(NodeRange(g, "inp_embd", "l_out-0"), want);
  const int scale = g.Find("inp_attn_scale");
  ASSERT_GE(scale, 0);
  EXPECT_EQ(g.tensors[scale].type, GgmlType::F32);
  EXPECT_EQ(Shape(g, g.tensors[scale]), (std::vector<int64_t>{1, 1, 256, 1}));
  const Tensor* q = Node(g, "Qcur_attn_temp_scaled-1");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(g.tensors[q->srcs[1]].name, "inp_attn_scale");
  EXPECT_EQ(Shape(g, *q), (std::vector<int64_t>{16, 4, 256, 1}));
  EXPECT_EQ(Node(g, "Qcur-1")->iparams[1], 0);  // LLAMA_ROPE_TYPE_NORM
  EXPECT_GE(m->tg.Find("inp_attn_scale"), 0);

  SynthGguf plain = test::Mistral3Model(SynthParams{});
  auto m2 = Build(plain);
  ASSERT_TRUE(m2.ok()) << m2.status().message();
  EXPECT_EQ(m2->pp.Find("inp_attn_scale"), -1);
  EXPECT_EQ(Node(m2->pp, "Qcur_attn_temp_scaled-0"), nullptr);
}

// YaRN as llama.cpp 2026 (llama_context): ext_factor 1; attn_factor get_mscale(4, 1) /
// get_mscale(4, log_mul) / (1 + 0.1 ln 4) = 1 / (1 + 0.1 * 0.1 ln 4) with yarn_log_multiplier 0.1;
// mistral3 reads yarn_beta_fast / slow, llama keeps 32 / 1 (llama.cpp reads them only for
// mistral3 among these).
TEST(Mistral3Graph, YarnKeys) {
  for (const char* arch : {"mistral3", "llama"}) {
    SynthGguf s =
        std::string(arch) == "llama" ? test::LlamaModel(SynthParams{}) : test::Mistral3Model(SynthParams{});
    const std::string p = std::string(arch) + ".";
    s.Str(p + "rope.scaling.type", "yarn");
    s.F32(p + "rope.scaling.factor", 4.0f);
    s.U32(p + "rope.scaling.original_context_length", 16);
    s.F32(p + "rope.scaling.yarn_beta_fast", 8.0f);
    s.F32(p + "rope.scaling.yarn_beta_slow", 0.25f);
    s.F32(p + "rope.scaling.yarn_log_multiplier", 0.1f);
    auto m = Build(s);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const Tensor* r = Node(m->pp, "Kcur-1");
    ASSERT_EQ(r->op, GgmlOp::ROPE);
    const bool mistral = std::string(arch) == "mistral3";
    EXPECT_EQ(r->iparams[2], 16) << arch;           // n_ctx_orig
    EXPECT_FLOAT_EQ(r->fparams[1], 0.25f) << arch;  // freq_scale
    EXPECT_FLOAT_EQ(r->fparams[2], 1.0f) << arch;   // ext_factor
    EXPECT_FLOAT_EQ(r->fparams[3], mistral ? 1.0f / (1.0f + 0.01f * std::log(4.0f)) : 1.0f) << arch;
    EXPECT_FLOAT_EQ(r->fparams[4], mistral ? 8.0f : 32.0f) << arch;
    EXPECT_FLOAT_EQ(r->fparams[5], mistral ? 0.25f : 1.0f) << arch;
  }
  // Without yarn the attention factor is rope.scaling.attn_factor alone.
  SynthGguf s = test::Mistral3Model(SynthParams{});
  s.F32("mistral3.rope.scaling.factor", 4.0f);
  s.F32("mistral3.rope.scaling.attn_factor", 0.5f);
  s.F32("mistral3.rope.scaling.yarn_log_multiplier", 0.1f);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FLOAT_EQ(Node(m->pp, "Qcur-0")->fparams[2], 0.0f);
  EXPECT_FLOAT_EQ(Node(m->pp, "Qcur-0")->fparams[3], 0.5f);
}

// ---------------------------------------------------------------------------------------------
// smollm3 (llama.cpp 2026 llama_model_smollm3)

// llama's layer; every 4th layer ((il + 1) % 4 == 0) has no rope: Q and K are the reshaped
// projections, named Qcur / Kcur, and go to the attention as they are.
TEST(SmolLM3Graph, EveryFourthLayerHasNoRope) {
  SynthParams p;
  p.n_layer = 8;
  SynthGguf s = test::SmolLM3Model(p);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  for (int il = 0; il < 8; ++il) {
    const std::string n = "-" + std::to_string(il);
    const bool rope = (il + 1) % 4 != 0;
    for (const char* name : {"Qcur", "Kcur"}) {
      const Tensor* t = Node(g, name + n);
      ASSERT_NE(t, nullptr) << name << n;
      EXPECT_EQ(t->op, rope ? GgmlOp::ROPE : GgmlOp::RESHAPE) << name << n;
    }
  }
  EXPECT_EQ(
      NodeRange(g, "attn_norm-3", "Vcur-3"),
      (std::vector<std::string>{"MUL attn_norm-3", "MUL_MAT Qcur-3", "RESHAPE Qcur-3", "MUL_MAT Vcur-3"}));
  EXPECT_EQ(Node(g, "Qcur-0")->iparams[1], 0);    // LLAMA_ROPE_TYPE_NORM
  EXPECT_EQ(Node(g, "Qcur-0")->srcs.size(), 2u);  // no rope factors
  // the llama file with the same tensors ropes every layer: 2 ROPEs more per no-rope layer; its
  // Feb 2025 KV store (CPY into views) has 2 nodes a layer fewer than smollm3's SET_ROWS one, and
  // its attention 3 fewer than llama.cpp 2026's build_attn (V reshaped to heads, Q and the caches
  // viewed then permuted) less build_ffn's SWIGLU
  SynthGguf l = test::LlamaModel(p);
  auto ml = Build(l);
  ASSERT_TRUE(ml.ok()) << ml.status().message();
  EXPECT_EQ(ml->pp.nodes.size() + 2 * 8 + 3 * 8, g.nodes.size() + 4);
  EXPECT_EQ(Consumers(g, "token_embd.weight"), std::vector<std::string>{"GET_ROWS inp_embd"});
}

// ---------------------------------------------------------------------------------------------
// granite (llama.cpp 2026 llama_model_granite, dense)

// llama's layer with Granite's multipliers: the embeddings scaled after GET_ROWS, the attention and
// FFN outputs scaled before their residual adds, the logits scaled by 1 / logit_scale; the
// attention scale is attention.scale. rope.scaling.finetuned false: no ROPE and no inp_pos.
TEST(GraniteGraph, MultipliersAndRopeSwitch) {
  SynthGguf s = test::GraniteModel(SynthParams{});
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  auto scale_of = [&](const Tensor* t) {
    return t != nullptr && t->op == GgmlOp::SCALE ? t->fparams[0] : -1.f;
  };
  const Tensor* attn_norm = Node(g, "attn_norm-0");
  ASSERT_NE(attn_norm, nullptr);
  const Tensor* rms = &g.tensors[attn_norm->srcs[0]];  // MUL(RMS_NORM(x), attn_norm.weight)
  ASSERT_EQ(rms->op, GgmlOp::RMS_NORM);
  EXPECT_FLOAT_EQ(scale_of(&g.tensors[rms->srcs[0]]), 12.0f);  // embedding_scale on inp_embd
  const Tensor* ffn_inp = Node(g, "ffn_inp-0");
  EXPECT_FLOAT_EQ(scale_of(&g.tensors[ffn_inp->srcs[0]]), 0.22f);  // residual_scale on the attention
  const Tensor* l_out = Node(g, "l_out-0");
  EXPECT_FLOAT_EQ(scale_of(&g.tensors[l_out->srcs[0]]), 0.22f);  // and on the FFN output
  const Tensor* out = Node(g, "result_output");
  EXPECT_FLOAT_EQ(scale_of(out), 1.0f / 16.0f);  // logits / logit_scale
  EXPECT_EQ(g.tensors[out->srcs[0]].op, GgmlOp::MUL_MAT);
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 0.0078125f);  // attention.scale
  EXPECT_EQ(Node(g, "Qcur-0")->op, GgmlOp::ROPE);
  EXPECT_GE(g.Find("inp_pos"), 0);

  SynthGguf off = test::GraniteModel(SynthParams{});
  off.Bool("granite.rope.scaling.finetuned", false);
  auto m2 = Build(off);
  ASSERT_TRUE(m2.ok()) << m2.status().message();
  EXPECT_EQ(Node(m2->pp, "Qcur-1")->op, GgmlOp::RESHAPE);
  EXPECT_EQ(m2->pp.Find("inp_pos"), -1);
}

// Bad granite files: logit_scale missing (llama.cpp requires it) or 0, experts.
TEST(GraniteGraph, BadInputIsAOneLineError) {
  auto error = [](SynthGguf s) {
    auto m = Build(s);
    return m.ok() ? std::string("ok") : m.status().message();
  };
  SynthGguf s = test::GraniteModel(SynthParams{});
  s.DropKey("granite.logit_scale");
  EXPECT_NE(error(std::move(s)).find("granite.logit_scale"), std::string::npos);
  SynthGguf z = test::GraniteModel(SynthParams{});
  z.Set("granite.logit_scale", GgufMetaValue::F32(0.f));
  const std::string e = error(std::move(z));
  EXPECT_EQ(e.substr(e.find(": key")), ": key 'granite.logit_scale': expected a finite scale > 0, found 0");
  SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  EXPECT_EQ(
      error(test::GraniteModel(p)),
      "granite.gguf: key 'granite.expert_count': granite with experts (4) is not supported yet (the dense "
      "model only: expected 0 or absent)");
}

// Bad mistral3 files: one line naming the file, key, expected and found.
TEST(Mistral3Graph, BadInputIsAOneLineError) {
  auto error = [](SynthGguf s) {
    auto m = Build(s);
    return m.ok() ? std::string("ok") : m.status().message();
  };
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.F32("mistral3.attention.temperature_scale", 0.1f);
    s.U32("mistral3.rope.scaling.original_context_length", 0);
    EXPECT_NE(error(std::move(s))
                  .find("key 'mistral3.rope.scaling.original_context_length': expected a positive "
                        "context length (llama.cpp: invalid n_ctx_orig_yarn for attention "
                        "temperature scaling"),
              std::string::npos);
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.F32("mistral3.attention.temperature_scale", 0.1f);
    s.Set("mistral3.context_length", GgufMetaValue::U32(0));
    EXPECT_NE(error(std::move(s)).find("key 'mistral3.context_length': expected a positive context length"),
              std::string::npos);
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.Str("mistral3.rope.scaling.type", "dynamic");
    const std::string e = error(std::move(s));
    EXPECT_EQ(e.substr(e.find(": key")),
              ": key 'mistral3.rope.scaling.type': expected none, linear, yarn or longrope, found 'dynamic'");
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.F32("mistral3.rope.scaling.factor", -4.0f);
    const std::string e = error(std::move(s));
    EXPECT_EQ(
        e.substr(e.find(": key")),
        ": key 'mistral3.rope.scaling.factor': expected a finite factor >= 0 (0: no scaling), found -4");
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.Set("mistral3.attention.head_count_kv", GgufMetaValue::U32(3));
    const std::string e = error(std::move(s));
    EXPECT_EQ(
        e.substr(e.find(": key")),
        ": key 'mistral3.attention.head_count_kv': expected a divisor of mistral3.attention.head_count 4, "
        "found 3");
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.Set("mistral3.attention.head_count", GgufMetaValue::U32(5));
    const std::string e = error(std::move(s));
    EXPECT_EQ(e.substr(e.find(": key")),
              ": key 'mistral3.embedding_length': expected a multiple of mistral3.attention.head_count 5, "
              "found 64");
  }
  {
    SynthGguf s = test::Mistral3Model(SynthParams{});
    s.Set("mistral3.rope.dimension_count", GgufMetaValue::U32(8));
    const std::string e = error(std::move(s));
    EXPECT_NE(e.find("key 'mistral3.rope.dimension_count'"), std::string::npos) << e;
    EXPECT_NE(e.find("build_mistral3 asserts n_rot == head size"), std::string::npos) << e;
  }
  {
    SynthParams p;
    p.n_expert = 4;
    p.n_expert_used = 2;
    SynthGguf s = test::Mistral3Model(p);
    EXPECT_EQ(
        error(std::move(s)),
        "mistral3.gguf: key 'mistral3.expert_count': mistral3 with experts (4) is not supported yet (the "
        "dense model only: expected 0 or absent)");
  }
}

TEST(Qwen2MoeGraph, RoutedAndSharedExperts) {
  SynthParams p;
  p.n_expert = 8;
  p.n_expert_used = 2;
  SynthGguf s = test::Qwen2MoeModel(p, 32, 64);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  // llama.cpp names the ffn_norm output "ffn_moe_out" in build_qwen2moe; the routed sum stays unnamed
  const std::vector<std::string> want = {"MUL ffn_moe_out-0",
                                         "RESHAPE ffn_norm-0 (reshaped)",
                                         "MUL_MAT ffn_moe_logits-0",
                                         "SOFT_MAX ffn_moe_probs-0",
                                         "ARGSORT ffn_moe_argsort-0",
                                         "VIEW ffn_moe_topk-0",
                                         "MUL_MAT_ID ffn_moe_up-0",
                                         "MUL_MAT_ID ffn_moe_gate-0",
                                         "SILU ffn_moe_silu-0",
                                         "MUL ffn_moe_gate_par-0",
                                         "MUL_MAT_ID ffn_moe_down-0",
                                         "RESHAPE ffn_moe_probs-0 (reshaped)",
                                         "GET_ROWS ffn_moe_weights-0",  // not normalized (norm_w = false)
                                         "MUL ",
                                         "VIEW  (view)",
                                         "VIEW  (view)",
                                         "ADD ",
                                         "MUL_MAT ffn_gate-0",
                                         "SILU ffn_silu-0",
                                         "MUL_MAT ffn_up-0",
                                         "MUL ffn_gate_par-0",
                                         "MUL_MAT ffn_shexp-0",
                                         "MUL_MAT ffn_shexp_gate_inp-0",
                                         "SILU ",
                                         "DIV ffn_shexp_gate-0",
                                         "MUL ffn_shexp_out-0",
                                         "ADD ffn_out-0",
                                         "ADD l_out-0"};
  EXPECT_EQ(NodeRange(m->pp, "ffn_moe_out-0", "l_out-0"), want);
  const Graph& g = m->pp;
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_up-0")), (std::vector<int64_t>{32, 2, 256, 1}));    // n_ff_exp
  EXPECT_EQ(Shape(g, *Node(g, "ffn_gate_par-0")), (std::vector<int64_t>{64, 256, 1, 1}));  // n_ff_shexp
  EXPECT_EQ(Shape(g, *Node(g, "ffn_shexp_gate-0")), (std::vector<int64_t>{1, 256, 1, 1}));
  EXPECT_EQ(Consumers(g, "blk.0.ffn_gate_inp_shexp.weight"),
            std::vector<std::string>{"MUL_MAT ffn_shexp_gate_inp-0"});
  EXPECT_EQ(Consumers(g, "blk.0.ffn_down_shexp.weight"), std::vector<std::string>{"MUL_MAT ffn_shexp-0"});
  EXPECT_EQ(Global(*m, "blk.1.ffn_up_exps.weight")->consumer_op, GgmlOp::MUL_MAT_ID);
}

// qwen3moe (llama.cpp 2026 llama_model_qwen3moe): qwen3's attention, then in every layer the routed
// experts with softmax gating, weights normalized by their sum, SWIGLU of gate and up; no shared
// expert.
TEST(Qwen3MoeGraph, QkNormsAndNormalizedSoftmaxExperts) {
  SynthParams p;
  p.n_expert = 8;
  p.n_expert_used = 2;
  SynthGguf s = test::Qwen3MoeModel(p, 32, 48);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  const std::vector<std::string> attn = {"GET_ROWS inp_embd",
                                         "RMS_NORM norm-0",
                                         "MUL attn_norm-0",
                                         "MUL_MAT Qcur-0",
                                         "RESHAPE Qcur-0 (reshaped)",
                                         "RMS_NORM norm-0",
                                         "MUL Qcur_normed-0",
                                         "ROPE Qcur-0",
                                         "MUL_MAT Vcur-0"};
  EXPECT_EQ(NodeRange(g, "inp_embd", "Vcur-0"), attn);
  const std::vector<std::string> want = {"ADD ffn_inp-0",
                                         "RMS_NORM norm-0",
                                         "MUL ffn_norm-0",
                                         "MUL_MAT ffn_moe_logits-0",
                                         "SOFT_MAX ffn_moe_probs-0",
                                         "RESHAPE ffn_moe_probs-0 (reshaped)",
                                         "ARGSORT ffn_moe_argsort-0",
                                         "VIEW ffn_moe_topk-0",
                                         "GET_ROWS ffn_moe_weights-0",
                                         "RESHAPE ffn_moe_weights-0 (reshaped)",
                                         "SUM_ROWS ffn_moe_weights_sum-0",
                                         "CLAMP ffn_moe_weights_sum_clamped-0",
                                         "DIV ffn_moe_weights_norm-0",
                                         "RESHAPE ffn_moe_weights_norm-0 (reshaped)",
                                         "RESHAPE ffn_norm-0 (reshaped)",
                                         "MUL_MAT_ID ffn_moe_gate-0",
                                         "MUL_MAT_ID ffn_moe_up-0",
                                         "SWIGLU ffn_moe_swiglu-0",
                                         "MUL_MAT_ID ffn_moe_down-0",
                                         "MUL ffn_moe_weighted-0",
                                         "VIEW ffn_moe_weighted-0 (view)",
                                         "VIEW ffn_moe_weighted-0 (view)",
                                         "ADD ffn_moe_out-0",
                                         "ADD l_out-0"};
  EXPECT_EQ(NodeRange(g, "ffn_inp-0", "l_out-0"), want);
  EXPECT_EQ(Shape(g, *Node(g, "Qcur_normed-1")), (std::vector<int64_t>{32, 4, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_probs-0")), (std::vector<int64_t>{8, 256, 1, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_topk-0")), (std::vector<int64_t>{2, 256, 1, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_swiglu-0")), (std::vector<int64_t>{48, 2, 256, 1}));  // n_ff_exp
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_out-1")), (std::vector<int64_t>{64, 256, 1, 1}));
  EXPECT_EQ(Node(g, "ffn_shexp-0"), nullptr);
  EXPECT_EQ(Consumers(g, "blk.1.ffn_gate_inp.weight"), std::vector<std::string>{"MUL_MAT ffn_moe_logits-1"});
  EXPECT_EQ(Consumers(g, "blk.0.attn_q_norm.weight"), std::vector<std::string>{"MUL Qcur_normed-0"});
  EXPECT_EQ(Global(*m, "blk.1.ffn_down_exps.weight")->consumer_op, GgmlOp::MUL_MAT_ID);
  EXPECT_EQ(Global(*m, "blk.1.ffn_down_exps.weight")->ne[0], 48);
  EXPECT_EQ(Node(g, "Qcur-0")->iparams[1], 2);                             // GGML_ROPE_TYPE_NEOX
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 0.17677669f);  // 1/sqrt(32)
}

// Bad qwen3moe files: one line naming the file, the key or tensor and what was expected.
TEST(Qwen3MoeGraph, BadInputIsAOneLineError) {
  SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  auto error = [](SynthGguf s) {
    auto m = Build(s);
    return m.ok() ? std::string("ok") : m.status().message();
  };
  SynthGguf no_experts = test::Qwen3MoeModel(p, 32, 48);
  no_experts.DropKey("qwen3moe.expert_count");
  no_experts.DropKey("qwen3moe.expert_used_count");
  EXPECT_EQ(
      error(no_experts),
      "qwen3moe.gguf: key 'qwen3moe.expert_count': expected a positive expert count (qwen3moe routes every "
      "layer to experts), found 0 or absent");
  SynthGguf too_many = test::Qwen3MoeModel(p, 32, 48);
  too_many.Set("qwen3moe.expert_used_count", GgufMetaValue::U32(5));
  EXPECT_EQ(error(too_many),
            "qwen3moe.gguf: offset 454: key 'qwen3moe.expert_used_count': expected 1..4 "
            "(qwen3moe.expert_count 4), found 5");
  SynthGguf qk = test::Qwen3MoeModel(p, 32, 48);
  qk.Replace("blk.1.attn_k_norm.weight", {64});
  EXPECT_EQ(error(qk),
            "qwen3moe.gguf: tensor 'blk.1.attn_k_norm.weight' has wrong shape; expected [32], got [64]");
  SynthGguf width = test::Qwen3MoeModel(p, 32, 48);
  width.Set("qwen3moe.expert_feed_forward_length", GgufMetaValue::U32(32));
  EXPECT_EQ(error(width),
            "qwen3moe.gguf: tensor 'blk.0.ffn_gate_exps.weight' has wrong shape; expected [64, 32, 4], got "
            "[64, 48, 4]");
  SynthGguf router = test::Qwen3MoeModel(p, 32, 48);
  router.Drop("blk.1.ffn_gate_inp.weight");
  EXPECT_EQ(error(router), "qwen3moe.gguf: missing tensor 'blk.1.ffn_gate_inp.weight'");
}

// glm4moe (llama.cpp 2026 llama_model_glm4_moe): block 0 dense, block 1 routed (sigmoid, the
// selection bias, normalized weights scaled by 2.5, SWIGLU) plus the shared expert (SWIGLU as the
// dense block's, build_ffn's); q/k/v biases, q/k
// norms and a rope over the first 16 of 32 dimensions; the NextN block 2 is skipped: no weights, no
// cache, no nodes.
TEST(Glm4MoeGraph, SharedExpertSigmoidRoutingAndPartialRope) {
  SynthParams p;
  p.n_layer = 3;  // 2 trunk blocks + 1 NextN block
  p.n_expert = 8;
  p.n_expert_used = 2;
  SynthGguf s = test::Glm4MoeModel(p, 1);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  EXPECT_EQ(m->hp.n_layer, 2u);
  EXPECT_EQ(m->hp.n_layer_nextn, 1u);
  EXPECT_EQ(Global(*m, "blk.2.nextn.eh_proj.weight"), nullptr);
  EXPECT_EQ(Global(*m, "blk.2.attn_q.weight"), nullptr);
  EXPECT_EQ(Global(*m, "cache_k_l2"), nullptr);
  EXPECT_NE(Global(*m, "cache_v_l1"), nullptr);
  EXPECT_EQ(Node(g, "l_out-2"), nullptr);
  const std::vector<std::string> dense = {"ADD ffn_inp-0",      "RMS_NORM norm-0",  "MUL ffn_norm-0",
                                          "MUL_MAT ffn_gate-0", "MUL_MAT ffn_up-0", "SWIGLU ffn_swiglu-0",
                                          "MUL_MAT ffn_out-0",  "ADD l_out-0"};
  EXPECT_EQ(NodeRange(g, "ffn_inp-0", "l_out-0"), dense);
  const std::vector<std::string> moe = {"ADD ffn_inp-1",
                                        "RMS_NORM norm-1",
                                        "MUL ffn_norm-1",
                                        "MUL_MAT ffn_moe_logits-1",
                                        "SIGMOID ffn_moe_probs-1",
                                        "RESHAPE ffn_moe_probs-1 (reshaped)",
                                        "ADD ffn_moe_probs_biased-1",
                                        "ARGSORT ffn_moe_argsort-1",
                                        "VIEW ffn_moe_topk-1",
                                        "GET_ROWS ffn_moe_weights-1",
                                        "RESHAPE ffn_moe_weights-1 (reshaped)",
                                        "SUM_ROWS ffn_moe_weights_sum-1",
                                        "CLAMP ffn_moe_weights_sum_clamped-1",
                                        "DIV ffn_moe_weights_norm-1",
                                        "RESHAPE ffn_moe_weights_norm-1 (reshaped)",
                                        "SCALE ffn_moe_weights_scaled-1",
                                        "RESHAPE ffn_norm-1 (reshaped)",
                                        "MUL_MAT_ID ffn_moe_gate-1",
                                        "MUL_MAT_ID ffn_moe_up-1",
                                        "SWIGLU ffn_moe_swiglu-1",
                                        "MUL_MAT_ID ffn_moe_down-1",
                                        "MUL ffn_moe_weighted-1",
                                        "VIEW ffn_moe_weighted-1 (view)",
                                        "VIEW ffn_moe_weighted-1 (view)",
                                        "ADD ffn_moe_out-1",
                                        "MUL_MAT ffn_gate-1",
                                        "MUL_MAT ffn_up-1",
                                        "SWIGLU ffn_swiglu-1",
                                        "MUL_MAT ffn_shexp_out-1",
                                        "ADD ffn_out-1",
                                        "ADD l_out-1"};
  EXPECT_EQ(NodeRange(g, "ffn_inp-1", "l_out-1"), moe);
  EXPECT_FLOAT_EQ(Node(g, "ffn_moe_weights_scaled-1")->fparams[0], 2.5f);
  EXPECT_EQ(Consumers(g, "blk.1.exp_probs_b.bias"), std::vector<std::string>{"ADD ffn_moe_probs_biased-1"});
  EXPECT_EQ(Consumers(g, "blk.1.post_attention_norm.weight"), std::vector<std::string>{"MUL ffn_norm-1"});
  EXPECT_EQ(Consumers(g, "blk.0.attn_q.bias"), std::vector<std::string>{"ADD Qcur-0"});
  EXPECT_EQ(Consumers(g, "blk.1.attn_k_norm.weight"), std::vector<std::string>{"MUL Kcur_normed-1"});
  EXPECT_EQ(Shape(g, *Node(g, "ffn_moe_swiglu-1")), (std::vector<int64_t>{48, 2, 256, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_swiglu-1")), (std::vector<int64_t>{48, 256, 1, 1}));  // shared
  const Tensor* r = Node(g, "Qcur-1");
  ASSERT_EQ(r->op, GgmlOp::ROPE);
  EXPECT_EQ(Shape(g, *r), (std::vector<int64_t>{32, 4, 256, 1}));
  EXPECT_EQ(r->iparams[0], 16);                                            // n_dims: half the head
  EXPECT_EQ(r->iparams[1], 2);                                             // GGML_ROPE_TYPE_NEOX
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 0.17677669f);  // 1/sqrt(32)
}

// Bad glm4moe files: one line naming the file, the key or tensor and what was expected.
TEST(Glm4MoeGraph, BadInputIsAOneLineError) {
  SynthParams p;
  p.n_layer = 3;
  p.n_expert = 4;
  p.n_expert_used = 2;
  auto error = [](SynthGguf s) {
    auto m = Build(s);
    return m.ok() ? std::string("ok") : m.status().message();
  };
  EXPECT_EQ(error(test::Glm4MoeModel(p, 1)), "ok");
  SynthGguf no_experts = test::Glm4MoeModel(p, 1);
  no_experts.DropKey("glm4moe.expert_count");
  no_experts.DropKey("glm4moe.expert_used_count");
  EXPECT_EQ(
      error(no_experts),
      "glm4moe.gguf: key 'glm4moe.expert_count': expected a positive expert count (glm4moe's MoE layers), "
      "found 0 or absent");
  SynthGguf used = test::Glm4MoeModel(p, 1);
  used.Set("glm4moe.expert_used_count", GgufMetaValue::U32(6));
  EXPECT_NE(
      error(used).find("key 'glm4moe.expert_used_count': expected 1..4 (glm4moe.expert_count 4), found 6"),
      std::string::npos);
  SynthGguf lead = test::Glm4MoeModel(p, 1);
  lead.Set("glm4moe.leading_dense_block_count", GgufMetaValue::U32(3));
  EXPECT_NE(error(lead).find("key 'glm4moe.leading_dense_block_count': expected at most the trunk's 2 blocks "
                             "(glm4moe.block_count 3 - nextn_predict_layers 1), found 3"),
            std::string::npos);
  SynthGguf nextn = test::Glm4MoeModel(p, 1);
  nextn.Set("glm4moe.nextn_predict_layers", GgufMetaValue::U32(3));
  EXPECT_NE(error(nextn).find("key 'glm4moe.nextn_predict_layers': expected fewer than glm4moe.block_count 3 "
                              "(the NextN / MTP blocks follow the trunk's), found 3"),
            std::string::npos);
  SynthGguf qk = test::Glm4MoeModel(p, 1);
  qk.Replace("blk.1.attn_q_norm.weight", {64});
  EXPECT_EQ(error(qk),
            "glm4moe.gguf: tensor 'blk.1.attn_q_norm.weight' has wrong shape; expected [32], got [64]");
  SynthGguf bias = test::Glm4MoeModel(p, 1);
  bias.Drop("blk.1.exp_probs_b.bias");
  EXPECT_EQ(error(bias), "glm4moe.gguf: missing tensor 'blk.1.exp_probs_b.bias'");
  // without its NextN key the last block is a trunk block, and its nextn.* tensors nothing reads
  SynthGguf no_key = test::Glm4MoeModel(p, 1);
  no_key.DropKey("glm4moe.nextn_predict_layers");
  EXPECT_NE(error(no_key).find("tensor 'blk.2.nextn.eh_proj.weight'"), std::string::npos) << error(no_key);
}

TEST(Qwen2MoeGraph, ExpertWidthDefaultsAsLlamaCpp) {
  SynthParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  // without the expert_*_feed_forward_length keys: n_ff_exp = n_ff / n_expert_used, n_ff_shexp = n_ff
  SynthGguf ok = test::Qwen2MoeModel(p, 48, 96, /*width_keys=*/false);
  auto m = Build(ok);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(Global(*m, "blk.0.ffn_up_exps.weight")->ne[1], 48);
  SynthGguf bad = test::Qwen2MoeModel(p, 32, 96, /*width_keys=*/false);
  auto e = Build(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "qwen2moe.gguf: tensor 'blk.0.ffn_gate_exps.weight' has wrong shape; expected [64, 48, 4], got "
            "[64, 32, 4]");
}

// ---------------------------------------------------------------------------------------------
// phi3

TEST(Phi3Graph, FusedQkvViewsAndSwiglu) {
  SynthGguf s = test::Phi3Model(SynthParams{}, /*rope_factors=*/true);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::string> want =
      Concat(Concat({"GET_ROWS inp_embd", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT wqkv-0",
                     "VIEW wqkv-0 (view)", "CONT Qcur-0", "RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0",
                     "SCALE Qcur-0", "VIEW wqkv-0 (view)", "CONT Kcur-0", "RESHAPE Kcur-0 (reshaped)",
                     "ROPE Kcur-0", "VIEW wqkv-0 (view)", "CONT Vcur-0"},
                    KvBlock("Kcur-0", "Vcur-0", 0)),
             {"ADD ", "RMS_NORM norm-0", "MUL ffn_norm-0", "MUL_MAT ffn_silu-0", "VIEW ffn_up-0 (view)",
              "CONT ffn_up-0 (view) (cont)", "SILU ", "VIEW ffn_up-0 (view)", "CONT ffn_up-0 (view) (cont)",
              "MUL ffn_mul-0", "MUL_MAT ffn_out-0", "ADD l_out-0"});
  EXPECT_EQ(NodeRange(m->pp, "inp_embd", "l_out-0"), want);
  const Graph& g = m->pp;
  // q, k, v views of wqkv [n_embd + 2 * n_embd_gqa, n_tokens] at byte offsets 0, 4*64, 4*(64+32)
  std::vector<int64_t> offsets;
  for (int n : g.nodes)
    if (g.tensors[n].name == "wqkv-0 (view)") offsets.push_back(g.WorstCase().Eval(g.tensors[n].view_offset));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 256, 384}));
  EXPECT_EQ(Shape(g, *Node(g, "wqkv-0")), (std::vector<int64_t>{128, 256, 1, 1}));
  EXPECT_EQ(Shape(g, *Node(g, "ffn_silu-0")), (std::vector<int64_t>{192, 256, 1, 1}));  // fused 2 * n_ff
  // sliding window: the mask input is KQ_mask_swa
  EXPECT_EQ(m->pp.tensors[Node(g, "kq_soft_max_ext-0")->srcs[1]].name, "KQ_mask_swa");
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 1.0f);  // Q is scaled before attention
  // n_ctx 256 > original context 128: the long factors
  const Tensor* r = Node(g, "Kcur-1");
  ASSERT_EQ(r->srcs.size(), 3u);
  EXPECT_EQ(g.tensors[r->srcs[2]].name, "rope_factors_long.weight");
  EXPECT_EQ(r->iparams[1], 2);  // NEOX
  EXPECT_EQ(Global(*m, "rope_factors_short.weight")->consumer_op, GgmlOp::ROPE);
  EXPECT_EQ(Consumers(g, "blk.0.attn_qkv.weight"), std::vector<std::string>{"MUL_MAT wqkv-0"});
}

TEST(Phi3Graph, SlidingWindowKeyRequired) {
  SynthGguf s("phi3");
  s.U32("phi3.context_length", 256);
  s.U32("phi3.embedding_length", 64);
  s.U32("phi3.block_count", 2);
  s.U32("phi3.feed_forward_length", 96);
  s.U32("phi3.attention.head_count", 4);
  s.U32("phi3.vocab_size", 32);
  s.F32("phi3.attention.layer_norm_rms_epsilon", 1e-5f);
  auto m = Build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "phi3.gguf: missing key 'phi3.attention.sliding_window' (invalid value for sliding_window)");
}

// ---------------------------------------------------------------------------------------------
// gemma

TEST(GemmaGraph, ScaledEmbeddingsGeluAndTiedOutput) {
  SynthGguf s = test::GemmaModel(SynthParams{}, /*head_dim=*/32);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  EXPECT_EQ(NodeRange(g, "inp_embd", "attn_norm-0"),
            (std::vector<std::string>{"GET_ROWS inp_embd", "SCALE inp_scaled", "RMS_NORM norm-0",
                                      "MUL attn_norm-0"}));
  EXPECT_FLOAT_EQ(Node(g, "inp_scaled")->fparams[0], 8.0f);  // sqrt(n_embd)
  EXPECT_EQ(NodeRange(g, "Qcur-0 (reshaped)", "Kcur-0 (reshaped)"),
            (std::vector<std::string>{"RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0", "SCALE Qcur_scaled-0",
                                      "MUL_MAT Kcur-0", "RESHAPE Kcur-0 (reshaped)"}));
  EXPECT_EQ(
      NodeRange(g, "kqv_out-0", "l_out-0"),
      (std::vector<std::string>{"MUL_MAT kqv_out-0", "ADD sa_out-0", "RMS_NORM norm-0", "MUL ffn_norm-0",
                                "MUL_MAT ffn_gate-0", "GELU ffn_gelu-0", "MUL_MAT ffn_up-0",
                                "MUL ffn_gate_par-0", "MUL_MAT ffn_out-0", "ADD l_out-0"}));
  // head_dim 32 (key_length) with 4 heads: q is 128 wide although n_embd is 64
  EXPECT_EQ(Shape(g, *Node(g, "kqv_merged_cont-0")), (std::vector<int64_t>{128, 256, 1, 1}));
  EXPECT_EQ(Global(*m, "cache_k_l0")->ne[0], 64 * 256);
  EXPECT_EQ(Consumers(g, "token_embd.weight"),
            (std::vector<std::string>{"GET_ROWS inp_embd", "MUL_MAT result_output"}));
  EXPECT_EQ(Node(g, "Kcur-0")->iparams[1], 2);  // NEOX
}

// ---------------------------------------------------------------------------------------------
// gemma2, gemma3 (llama.cpp 2026 llama_model_gemma2 / gemma3)

// The soft_max / flash attention node of layer il and the mask it reads.
std::string MaskOf(const Graph& g, int il) {
  for (int n : g.nodes) {
    const Tensor& t = g.tensors[n];
    if ((t.op == GgmlOp::SOFT_MAX && t.name == "kq_soft_max_ext-" + std::to_string(il)) ||
        (t.op == GgmlOp::FLASH_ATTN_EXT && t.srcs.size() > 3 &&
         g.tensors[t.srcs[0]].name == "q-" + std::to_string(il))) {
      const Tensor& mask = g.tensors[t.srcs.back()];
      return mask.op == GgmlOp::NONE ? mask.name : g.tensors[mask.srcs[0]].name;  // FA: the F16 cast
    }
  }
  return "";
}

// gemma2's layer as llama.cpp 2026 builds it: scaled embeddings, NEOX rope, Q scaled by
// 1/sqrt(head size), K/V store, kq soft-capped (scale 1/50, tanh, scale 50) before the softmax
// (scale 1), attn_post_norm, sa_out, ffn_norm, the fused GEGLU, ffn_post_norm, l_out. Layer 0 is a
// sliding-window layer (pattern period 2) and reads KQ_mask_swa, layer 1 KQ_mask; the logits are
// soft-capped at 30 (unnamed scale, tanh, then the scale named result_output).
TEST(Gemma2Graph, LayerSoftCapsAndSlidingWindowMasks) {
  SynthGguf s = test::Gemma2Model(SynthParams{}, /*head_dim=*/32, /*n_swa=*/8);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  const std::vector<std::string> kv =
      Concat(KvStore2026("Kcur-0", "Vcur-0 (reshaped)", 0),
             {"VIEW cache_v_l0 (view)", "PERMUTE v-0", "VIEW cache_k_l0 (view)", "PERMUTE k-0",
              "VIEW Qcur_scaled-0 (view)", "PERMUTE q-0", "MUL_MAT kq-0", "SCALE kq_scaled_1-0",
              "TANH kq_tanh-0", "SCALE kq_scaled_2-0", "SOFT_MAX kq_soft_max_ext-0", "MUL_MAT kqv-0",
              "PERMUTE kqv_merged-0", "CONT kqv_merged_cont-0", "MUL_MAT kqv_out-0"});
  const std::vector<std::string> want = Concat(
      Concat({"GET_ROWS inp_embd", "SCALE inp_scaled", "RMS_NORM norm-0", "MUL attn_norm-0", "MUL_MAT Qcur-0",
              "RESHAPE Qcur-0 (reshaped)", "ROPE Qcur-0", "SCALE Qcur_scaled-0", "MUL_MAT Vcur-0",
              "RESHAPE Vcur-0 (reshaped)", "MUL_MAT Kcur-0", "RESHAPE Kcur-0 (reshaped)", "ROPE Kcur-0"},
             kv),
      {"RMS_NORM norm-0", "MUL attn_post_norm-0", "ADD sa_out-0", "RMS_NORM norm-0", "MUL ffn_norm-0",
       "MUL_MAT ffn_gate-0", "MUL_MAT ffn_up-0", "GEGLU ffn_geglu-0", "MUL_MAT ffn_out-0", "RMS_NORM norm-0",
       "MUL ffn_post_norm-0", "ADD l_out-0"});
  EXPECT_EQ(NodeRange(g, "inp_embd", "l_out-0"), want);
  EXPECT_EQ(
      NodeRange(g, "result_norm", "result_output"),
      (std::vector<std::string>{"MUL result_norm", "MUL_MAT ", "SCALE ", "TANH ", "SCALE result_output"}));
  EXPECT_FLOAT_EQ(Node(g, "inp_scaled")->fparams[0], 8.0f);                       // sqrt(n_embd)
  EXPECT_FLOAT_EQ(Node(g, "Qcur_scaled-1")->fparams[0], 1.0f / std::sqrt(32.f));  // 1/sqrt(head size)
  EXPECT_FLOAT_EQ(Node(g, "kq_scaled_1-1")->fparams[0], 1.0f / 50.f);
  EXPECT_FLOAT_EQ(Node(g, "kq_scaled_2-1")->fparams[0], 50.f);
  EXPECT_FLOAT_EQ(Node(g, "kq_soft_max_ext-0")->fparams[0], 1.0f);
  EXPECT_FLOAT_EQ(Node(g, "result_output")->fparams[0], 30.f);
  EXPECT_EQ(Node(g, "Qcur-0")->iparams[1], 2);  // NEOX
  EXPECT_EQ(MaskOf(g, 0), "KQ_mask_swa");
  EXPECT_EQ(MaskOf(g, 1), "KQ_mask");
  EXPECT_EQ(MaskOf(m->tg, 0), "KQ_mask_swa");
  EXPECT_EQ(MaskOf(m->tg, 1), "KQ_mask");
  EXPECT_EQ(m->hp.n_swa, 8u);
  // head_dim 32 with 4 heads: attn_q is 128 wide although n_embd is 64
  EXPECT_EQ(Shape(g, *Node(g, "kqv_merged_cont-0")), (std::vector<int64_t>{128, 256, 1, 1}));
  EXPECT_EQ(Shape(m->tg, *Node(m->tg, "ffn_post_norm-1")), (std::vector<int64_t>{64, 1, 1, 1}));
  EXPECT_EQ(Consumers(g, "token_embd.weight"), (std::vector<std::string>{"GET_ROWS inp_embd", "MUL_MAT "}));
  EXPECT_EQ(Consumers(g, "blk.1.post_attention_norm.weight"),
            std::vector<std::string>{"MUL attn_post_norm-1"});
  EXPECT_EQ(Consumers(g, "blk.0.post_ffw_norm.weight"), std::vector<std::string>{"MUL ffn_post_norm-0"});
  EXPECT_EQ(Global(*m, "blk.0.post_ffw_norm.weight")->consumer_op, GgmlOp::MUL);

  // With flash attention the cap is FLASH_ATTN_EXT's logit_softcap, over the same masks.
  ContextConfig fa;
  fa.flash_attn = true;
  SynthGguf s2 = test::Gemma2Model(SynthParams{}, 32, 8);
  auto m2 = Build(s2, fa);
  ASSERT_TRUE(m2.ok()) << m2.status().message();
  int n_fa = 0;
  for (int n : m2->pp.nodes) {
    const Tensor& t = m2->pp.tensors[n];
    if (t.op != GgmlOp::FLASH_ATTN_EXT) continue;
    ++n_fa;
    EXPECT_FLOAT_EQ(t.fparams[0], 1.0f);   // kq_scale
    EXPECT_FLOAT_EQ(t.fparams[2], 50.0f);  // logit_softcap
  }
  EXPECT_EQ(n_fa, 2);
  EXPECT_EQ(MaskOf(m2->pp, 0), "KQ_mask_swa");
  EXPECT_EQ(MaskOf(m2->pp, 1), "KQ_mask");
}

// The query scale by model type (gemma_pytorch's config, llama.cpp load_arch_hparams): the 27B
// models (gemma2 46 layers, gemma3 62) scale by 1/sqrt(n_embd / n_head), the others by
// 1/sqrt(head size); attention.sliding_window_pattern (a period) picks the sliding-window layers.
TEST(Gemma2Graph, QueryScaleByModelTypeAndWindowPattern) {
  for (const char* arch : {"gemma2", "gemma3"}) {
    const bool g2 = std::string(arch) == "gemma2";
    for (uint32_t n_layer : {g2 ? 46u : 62u, 4u}) {
      SynthParams p;
      p.n_layer = n_layer;
      SynthGguf s = g2 ? test::Gemma2Model(p, 32, 8) : test::Gemma3Model(p, 32, 8);
      s.U32(std::string(arch) + ".attention.sliding_window_pattern", 4);  // every 4th layer global
      auto m = Build(s);
      ASSERT_TRUE(m.ok()) << m.status().message();
      const float want = n_layer == 4 ? 1.0f / std::sqrt(32.f) : 1.0f / std::sqrt(64.f / 4.f);
      EXPECT_FLOAT_EQ(Node(m->pp, "Qcur_scaled-0")->fparams[0], want) << arch << " " << n_layer;
      for (int il : {0, 2, 3, 7})
        if (il < static_cast<int>(n_layer))
          EXPECT_EQ(MaskOf(m->pp, il), il % 4 == 3 ? "KQ_mask" : "KQ_mask_swa") << arch << " layer " << il;
    }
  }
}

// gemma3: per-head q/k RMS norms before the rope (BuildNormRopeHeads), the SWA layers roped with
// rope.freq_base_swa (10000, scale 1) and the global ones with rope.freq_base (1e6) and the
// linear scaling; 6 layers: 0-4 read KQ_mask_swa, 5 KQ_mask; no final soft-cap without the key;
// output.weight when present, else token_embd. Without attention.sliding_window every layer is
// global (KQ_mask only).
TEST(Gemma3Graph, QkNormsPerLayerRopeAndMasks) {
  SynthParams p;
  p.n_layer = 6;
  SynthGguf s = test::Gemma3Model(p, 32, 8);
  s.Str("gemma3.rope.scaling.type", "linear");
  s.F32("gemma3.rope.scaling.factor", 8.f);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const Graph& g = m->pp;
  EXPECT_EQ(NodeRange(g, "Qcur-0", "Vcur-0"),
            (std::vector<std::string>{"MUL_MAT Qcur-0", "RESHAPE Qcur-0 (reshaped)", "RMS_NORM norm-0",
                                      "MUL Qcur_normed-0", "ROPE Qcur-0", "SCALE Qcur_scaled-0",
                                      "MUL_MAT Vcur-0"}));
  EXPECT_EQ(NodeRange(g, "Kcur-0", "Kcur_normed-0"),
            (std::vector<std::string>{"MUL_MAT Kcur-0", "RESHAPE Kcur-0 (reshaped)", "RMS_NORM norm-0",
                                      "MUL Kcur_normed-0"}));
  for (int il = 0; il < 6; ++il) {
    const Tensor* r = Node(g, "Kcur-" + std::to_string(il));
    ASSERT_EQ(r->op, GgmlOp::ROPE);
    EXPECT_FLOAT_EQ(r->fparams[0], il == 5 ? 1e6f : 1e4f) << il;    // freq_base
    EXPECT_FLOAT_EQ(r->fparams[1], il == 5 ? 0.125f : 1.0f) << il;  // freq_scale
    EXPECT_EQ(MaskOf(g, il), il == 5 ? "KQ_mask" : "KQ_mask_swa") << il;
  }
  EXPECT_EQ(Node(g, "kq_tanh-0"), nullptr);  // no attention soft-cap
  EXPECT_EQ(NodeRange(g, "result_norm", "result_output"),
            (std::vector<std::string>{"MUL result_norm", "MUL_MAT result_output"}));
  EXPECT_EQ(Consumers(g, "blk.3.attn_q_norm.weight"), std::vector<std::string>{"MUL Qcur_normed-3"});
  EXPECT_EQ(Shape(g, *Node(g, "Kcur_normed-2")), (std::vector<int64_t>{32, 2, 256, 1}));
  EXPECT_EQ(Consumers(g, "output.weight"), std::vector<std::string>{"MUL_MAT result_output"});

  p.tied = true;
  SynthGguf global = test::Gemma3Model(p, 32, 8);
  global.DropKey("gemma3.attention.sliding_window");
  global.F32("gemma3.final_logit_softcapping", 5.f);
  auto m2 = Build(global);
  ASSERT_TRUE(m2.ok()) << m2.status().message();
  for (int il = 0; il < 6; ++il) {
    EXPECT_EQ(MaskOf(m2->pp, il), "KQ_mask") << il;
    EXPECT_FLOAT_EQ(Node(m2->pp, "Qcur-" + std::to_string(il))->fparams[0], 1e6f) << il;
  }
  EXPECT_FLOAT_EQ(Node(m2->pp, "result_output")->fparams[0], 5.f);
  EXPECT_EQ(Consumers(m2->pp, "token_embd.weight").back(), "MUL_MAT ");
}

// Bad gemma files: one line naming the file, key or tensor, and what was expected, before anything
// is planned.
TEST(Gemma2Graph, BadInputIsAOneLineError) {
  struct Bad {
    const char* arch;
    void (*edit)(SynthGguf&);
    const char* message;
  };
  const Bad cases[] = {
      {"gemma2", [](SynthGguf& s) { s.Set("gemma2.attention.sliding_window", GgufMetaValue::U32(0)); },
       "gemma2.gguf: offset 487: key 'gemma2.attention.sliding_window': expected a positive window (gemma2 "
       "alternates sliding-window and global layers), found 0"},
      {"gemma2",
       [](SynthGguf& s) {
         s.Set("gemma2.attention.sliding_window_pattern", GgufMetaValue::ArrayBool({true, false, true}));
       },
       "gemma2.gguf: offset 625: key 'gemma2.attention.sliding_window_pattern': expected an array of 2 bools "
       "(gemma2.block_count) or a period, found an array of 3 bool"},
      {"gemma3",
       [](SynthGguf& s) {
         s.Set("gemma3.attention.sliding_window_pattern", GgufMetaValue::ArrayF32({1.f, 0.f}));
       },
       "gemma3.gguf: offset 612: key 'gemma3.attention.sliding_window_pattern': expected an array of 2 bools "
       "(gemma3.block_count) or a period, found an array of 2 f32"},
      {"gemma2", [](SynthGguf& s) { s.Set("gemma2.attn_logit_softcapping", GgufMetaValue::F32(0.f)); },
       "gemma2.gguf: offset 534: key 'gemma2.attn_logit_softcapping': expected a finite cap > 0, found 0"},
      {"gemma2", [](SynthGguf& s) { s.Set("gemma2.final_logit_softcapping", GgufMetaValue::F32(-1.f)); },
       "gemma2.gguf: offset 579: key 'gemma2.final_logit_softcapping': expected a finite cap > 0, found -1"},
      {"gemma3", [](SynthGguf& s) { s.Set("gemma3.rope.freq_base_swa", GgufMetaValue::F32(0.f)); },
       "gemma3.gguf: offset 571: key 'gemma3.rope.freq_base_swa': expected a finite base > 0, found 0"},
      {"gemma3", [](SynthGguf& s) { s.Replace("blk.1.attn_k_norm.weight", {16}); },
       "gemma3.gguf: tensor 'blk.1.attn_k_norm.weight' has wrong shape; expected [32], got [16]"},
      {"gemma3", [](SynthGguf& s) { s.Drop("blk.0.attn_q_norm.weight"); },
       "gemma3.gguf: missing tensor 'blk.0.attn_q_norm.weight'"},
      {"gemma2", [](SynthGguf& s) { s.Drop("blk.1.post_ffw_norm.weight"); },
       "gemma2.gguf: missing tensor 'blk.1.post_ffw_norm.weight'"},
      {"gemma2", [](SynthGguf& s) { s.Set("gemma2.attention.head_count_kv", GgufMetaValue::U32(3)); },
       "gemma2.gguf: offset 298: key 'gemma2.attention.head_count_kv': expected a divisor of "
       "gemma2.attention.head_count 4, found 3"},
      // key_length / value_length given: n_embd need not be a multiple of the head count (GLM-4.5-Air)
      {"gemma3", [](SynthGguf& s) { s.Set("gemma3.attention.head_count", GgufMetaValue::U32(5)); },
       "gemma3.gguf: offset 298: key 'gemma3.attention.head_count_kv': expected a divisor of "
       "gemma3.attention.head_count 5, found 2"},
      // refused where llama.cpp runs them: a window wider than the training context (256 here)
      // never slides; a period past block_count leaves no global layer
      {"gemma2", [](SynthGguf& s) { s.Set("gemma2.attention.sliding_window", GgufMetaValue::U32(257)); },
       "gemma2.gguf: offset 487: key 'gemma2.attention.sliding_window': expected a window of at most "
       "gemma2.context_length 256, found 257"},
      {"gemma3",
       [](SynthGguf& s) { s.Set("gemma3.attention.sliding_window_pattern", GgufMetaValue::U32(3)); },
       "gemma3.gguf: offset 612: key 'gemma3.attention.sliding_window_pattern': expected a period from 0 to "
       "gemma3.block_count 2 (0: every layer sliding-window), found 3"},
      // llama.cpp's gemma2 / gemma3 are dense and ignore the key
      {"gemma2",
       [](SynthGguf& s) {
         s.U32("gemma2.expert_count", 4);
         s.U32("gemma2.expert_used_count", 2);
       },
       "gemma2.gguf: offset 625: key 'gemma2.expert_count': expected 0 or absent (gemma2 is a dense "
       "architecture), found 4"},
  };
  for (const Bad& c : cases) {
    SynthGguf s = std::string(c.arch) == "gemma2" ? test::Gemma2Model(SynthParams{}, 32, 8)
                                                  : test::Gemma3Model(SynthParams{}, 32, 8);
    c.edit(s);
    auto m = Build(s);
    ASSERT_FALSE(m.ok()) << c.message;
    EXPECT_EQ(m.status().message(), c.message);
  }
}

// The limits of the checks above: a window equal to the training context and a period equal to
// block_count (its last layer global) are planned; a rope.freq_base_swa below 1 is planned with a
// warning naming the key, as rope.freq_base is.
TEST(Gemma2Graph, WindowAndPeriodLimitsAccepted) {
  SynthGguf s = test::Gemma2Model(SynthParams{}, 32, 256);
  s.U32("gemma2.attention.sliding_window_pattern", 2);
  s.F32("gemma2.rope.freq_base_swa", 0.5f);
  auto hp = ReadHParams(*s.Parse());
  ASSERT_TRUE(hp.ok()) << hp.status().message();
  EXPECT_EQ(hp->n_swa, 256u);
  EXPECT_EQ(hp->swa_layers, (std::vector<uint8_t>{1, 0}));
  ASSERT_EQ(hp->warnings.size(), 1u);
  EXPECT_NE(hp->warnings[0].find("key 'gemma2.rope.freq_base_swa': expected a base >= 1 (models use 1e4 to "
                                 "1e7), found 0.5, which makes the rotation faster for higher dimensions"),
            std::string::npos)
      << hp->warnings[0];
}

// Keys the graphs divide by (SCALE 1/cap, 1/logit_scale, ROPE's freq_scale 1/factor): a denormal
// passes "> 0" but its reciprocal is inf, a node parameter the plan verifier refuses after the plan
// is written; refused at the key instead. A YaRN factor below 1 makes llama_context's attention
// factor 1 / (1 + 0.1 ln factor) infinite (e^-10) or negative: refused (llama.cpp runs both).
TEST(ModelGraphsErrors, DivisorKeysNeedAFiniteReciprocal) {
  auto error = [](SynthGguf s) {
    auto m = Build(s);
    if (m.ok()) return std::string("ok");
    const std::string& e = m.status().message();
    return e.substr(e.find(": key") + 2);
  };
  const float denormal = 1e-45f;
  SynthGguf g2 = test::Gemma2Model(SynthParams{}, 32, 8);
  g2.Set("gemma2.attn_logit_softcapping", GgufMetaValue::F32(denormal));
  EXPECT_EQ(error(g2),
            "key 'gemma2.attn_logit_softcapping': expected a finite cap > 0 with a finite "
            "reciprocal (above 2.93874e-39), found 1.4013e-45");
  SynthGguf g3 = test::Gemma3Model(SynthParams{}, 32, 8);
  g3.F32("gemma3.final_logit_softcapping", denormal);
  EXPECT_EQ(error(g3),
            "key 'gemma3.final_logit_softcapping': expected a finite cap >= 0 (0: off) with a "
            "finite reciprocal (above 2.93874e-39), found 1.4013e-45");
  SynthGguf granite = test::GraniteModel(SynthParams{});
  granite.Set("granite.logit_scale", GgufMetaValue::F32(denormal));
  EXPECT_EQ(error(granite),
            "key 'granite.logit_scale': expected a finite scale > 0 with a finite reciprocal "
            "(above 2.93874e-39), found 1.4013e-45");
  SynthGguf linear = test::LlamaModel(SynthParams{});
  linear.F32("llama.rope.scaling.factor", denormal);
  EXPECT_EQ(error(linear),
            "key 'llama.rope.scaling.factor': expected a finite factor >= 0 (0: no scaling) "
            "with a finite reciprocal (above 2.93874e-39), found 1.4013e-45");
  SynthGguf yarn = test::Mistral3Model(SynthParams{});
  yarn.Str("mistral3.rope.scaling.type", "yarn");
  yarn.F32("mistral3.rope.scaling.factor", 0.5f);
  EXPECT_EQ(error(yarn),
            "key 'mistral3.rope.scaling.factor': expected a factor >= 1 with "
            "mistral3.rope.scaling.type yarn (0: no scaling), found 0.5");
  // the limits: a linear factor below 1 and a YaRN factor of 1 are planned
  SynthGguf linear_half = test::LlamaModel(SynthParams{});
  linear_half.F32("llama.rope.scaling.factor", 0.5f);
  EXPECT_EQ(error(linear_half), "ok");
  SynthGguf yarn_one = test::Mistral3Model(SynthParams{});
  yarn_one.Str("mistral3.rope.scaling.type", "yarn");
  yarn_one.F32("mistral3.rope.scaling.factor", 1.0f);
  EXPECT_EQ(error(yarn_one), "ok");
}

// qwen3 and smollm3 are dense in llama.cpp, which ignores an expert count; here it is refused.
TEST(Qwen3Graph, ExpertCountRefusedOnDenseArchitectures) {
  for (SynthGguf s : {test::Qwen3Model(SynthParams{}, 32), test::SmolLM3Model(SynthParams{})}) {
    auto f = s.Parse();
    const std::string arch = *f->GetString("general.architecture");
    s.U32(arch + ".expert_count", 8);
    s.U32(arch + ".expert_used_count", 2);
    auto m = Build(s);
    ASSERT_FALSE(m.ok()) << arch;
    EXPECT_NE(m.status().message().find("key '" + arch + ".expert_count': expected 0 or absent (" + arch +
                                        " is a dense architecture), found 8"),
              std::string::npos)
        << m.status().message();
  }
}

// ---------------------------------------------------------------------------------------------
// mamba

TEST(MambaGraph, RecurrentStatesAndSsmOps) {
  SynthParams p;
  SynthGguf s = test::MambaModel(p);
  auto m = Build(s);
  ASSERT_TRUE(m.ok()) << m.status().message();
  // states instead of KV: conv (d_conv-1)*d_inner and ssm d_state*d_inner per cell, F32, one cell
  const GlobalTensor* k = Global(*m, "cache_k_l1");
  const GlobalTensor* v = Global(*m, "cache_v_l1");
  ASSERT_TRUE(k && v);
  EXPECT_EQ(k->type, GgmlType::F32);
  EXPECT_EQ(k->ne[0], 3 * 128);
  EXPECT_EQ(v->ne[0], 16 * 128);
  EXPECT_EQ(v->nbytes, 16u * 128u * 4u);
  EXPECT_EQ(m->pp.max_kv, 1);
  const Graph& g = m->pp;
  EXPECT_EQ(Global(*m, "blk.0.ssm_conv1d.weight")->consumer_op, GgmlOp::SSM_CONV);
  EXPECT_EQ(Global(*m, "blk.0.ssm_conv1d.bias")->consumer_op, GgmlOp::ADD);
  EXPECT_EQ(Global(*m, "blk.0.ssm_a")->consumer_op, GgmlOp::SSM_SCAN);
  EXPECT_EQ(Global(*m, "blk.0.ssm_d")->consumer_op, GgmlOp::MUL);
  EXPECT_EQ(Global(*m, "blk.0.ssm_x.weight")->consumer_op, GgmlOp::MUL_MAT);
  EXPECT_EQ(Consumers(g, "blk.0.ssm_conv1d.weight"), std::vector<std::string>{"SSM_CONV "});
  EXPECT_EQ(Consumers(g, "blk.1.ssm_a"), std::vector<std::string>{"SSM_SCAN "});
  // the graph starts with the state gathers of layer 0 (expanded before its norm)
  EXPECT_EQ(NodeRange(g, "cache_k_l0 (reshaped)", "cache_k_l0 (view) (copy of  (view))"),
            (std::vector<std::string>{"RESHAPE cache_k_l0 (reshaped)", "GET_ROWS ", "MUL ", "VIEW  (view)",
                                      "VIEW cache_k_l0 (view)", "CPY cache_k_l0 (view) (copy of  (view))"}));
  EXPECT_EQ(g.tensors[g.nodes[0]].name, "cache_k_l0 (reshaped)");
  int conv = -1, scan = -1;
  for (int n : g.nodes) {
    if (g.tensors[n].op == GgmlOp::SSM_CONV && conv < 0) conv = n;
    if (g.tensors[n].op == GgmlOp::SSM_SCAN && scan < 0) scan = n;
  }
  ASSERT_GE(conv, 0);
  ASSERT_GE(scan, 0);
  // ssm_conv: [d_conv - 1 + n_tokens, d_inner, 1] -> [d_inner, n_tokens, 1]
  EXPECT_EQ(Shape(g, g.tensors[g.tensors[conv].srcs[0]]), (std::vector<int64_t>{259, 128, 1, 1}));
  EXPECT_EQ(Shape(g, g.tensors[conv]), (std::vector<int64_t>{128, 256, 1, 1}));
  // ssm_scan: y (d_inner * n_tokens) followed by the states (d_state * d_inner)
  EXPECT_EQ(Shape(g, g.tensors[scan]), (std::vector<int64_t>{128 * 256 + 16 * 128, 1, 1, 1}));
  EXPECT_EQ(g.tensors[scan].srcs.size(), 6u);
  EXPECT_EQ(NodeRange(g, "mamba_out-0", "l_out-0"),
            (std::vector<std::string>{"RESHAPE mamba_out-0", "ADD l_out-0"}));
  EXPECT_EQ(Shape(m->tg, *Node(m->tg, "result_output")), (std::vector<int64_t>{128, 1, 1, 1}));
  // inputs of the recurrent cache
  EXPECT_GE(g.Find("inp_s_copy"), 0);
  EXPECT_GE(g.Find("inp_s_mask"), 0);
  EXPECT_LT(g.Find("KQ_mask"), 0);
}

TEST(MambaGraph, StateCellsFollowSeqMax) {
  SynthGguf s = test::MambaModel(SynthParams{});
  auto f = s.Parse();
  ContextConfig cfg;
  cfg.n_seq_max = 4;
  cfg.type_k = GgmlType::Q8_0;  // ignored: recurrent states are F32
  auto m = BuildModelGraphs(*f, cfg);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(Global(*m, "cache_k_l0")->ne[0], 4 * 3 * 128);
  EXPECT_EQ(Global(*m, "cache_k_l0")->type, GgmlType::F32);
  EXPECT_EQ(m->tg.max_kv, 4);
  // the states of the other cells are written back (n_state * (n_kv - 1) elements, after the
  // first cell: offset (kv_head + 1) * n_state * 4), then the new conv state of the sequence
  const Graph& g = m->pp;
  std::vector<std::vector<int64_t>> views;
  std::vector<int64_t> offsets;
  for (int n : g.nodes)
    if (g.tensors[n].name == "cache_k_l0 (view)") {
      views.push_back(Shape(g, g.tensors[n]));
      offsets.push_back(g.WorstCase().Eval(g.tensors[n].view_offset));
    }
  EXPECT_EQ(views, (std::vector<std::vector<int64_t>>{{3 * 128 * 3, 1, 1, 1}, {3 * 128, 1, 1, 1}}));
  EXPECT_EQ(offsets, (std::vector<int64_t>{3 * 128 * 4, 0}));
}

TEST(MambaGraph, ExpansionFactorChecked) {
  SynthGguf t("mamba");
  t.U32("mamba.context_length", 256);
  t.U32("mamba.embedding_length", 64);
  t.U32("mamba.block_count", 1);
  t.U32("mamba.vocab_size", 32);
  t.F32("mamba.attention.layer_norm_rms_epsilon", 1e-5f);
  t.U32("mamba.ssm.conv_kernel", 4);
  t.U32("mamba.ssm.inner_size", 96);
  t.U32("mamba.ssm.state_size", 16);
  t.U32("mamba.ssm.time_step_rank", 8);
  auto m = Build(t);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(
      m.status().message(),
      "mamba.gguf: mamba: ssm.inner_size 96 is not 2 * embedding_length 64 (only an expansion factor of 2 is "
      "supported, as in llama.cpp)");
}

// ---------------------------------------------------------------------------------------------
// GraphBuilder: ggml constructor shapes and the errors of inconsistent ones

TEST(GraphBuilderOps, ShapesAsGgml) {
  ModelGraphs m;
  Graph g;
  GraphBuilder b(g, m);
  const DimExpr T = DimExpr::Tokens(), C1 = DimExpr::Const(1);
  auto K = [](int64_t v) { return DimExpr::Const(v); };
  const int probs = b.Input("probs", GgmlType::F32, {K(8), T, C1, C1});
  const int top = b.TopK(probs, 2);
  EXPECT_EQ(b[top].op, GgmlOp::VIEW);
  EXPECT_EQ(b[b[top].srcs[0]].op, GgmlOp::ARGSORT);
  EXPECT_EQ(b[top].ne[0], K(2));
  EXPECT_EQ(b[top].ne[1], T);
  EXPECT_EQ(b[top].view_nb[0], K(32));  // rows of the argsort result: 8 * sizeof(int32)
  EXPECT_EQ(b[b.SumRows(probs)].ne[0], K(1));
  const int x = b.Input("x", GgmlType::F32, {K(16), T, K(1), C1});
  const int cat = b.Concat(b.Input("state", GgmlType::F32, {K(3), K(16), K(1), C1}), b.Transpose(x), 0);
  EXPECT_EQ(b[cat].ne[0], T + K(3));
  const int conv = b.SsmConv(cat, b.Input("w", GgmlType::F32, {K(4), K(16), C1, C1}));
  EXPECT_EQ(b[conv].ne[0], K(16));
  EXPECT_EQ(b[conv].ne[1], T);
  EXPECT_TRUE(b.status().ok()) << b.status().message();
  // strides of a contiguous [16, n_tokens, 1] F32 tensor: nb2 = 64 * n_tokens
  EXPECT_EQ(b.Nb(conv)[2], DimExpr::Tokens(64));
}

TEST(GraphBuilderOps, InconsistentShapesReported) {
  ModelGraphs m;
  Graph g;
  GraphBuilder b(g, m);
  const DimExpr T = DimExpr::Tokens(), C1 = DimExpr::Const(1);
  const int w = b.Input("w", GgmlType::F32, {DimExpr::Const(32), DimExpr::Const(8), C1, C1});
  const int x = b.Input("x", GgmlType::F32, {DimExpr::Const(16), T, C1, C1});
  b.MulMat(w, x);
  EXPECT_EQ(
      b.status().message(),
      "graph builder: MUL_MAT: a.ne0 (32) must equal b.ne0 (16) (ggml_can_mul_mat); sources w [32, 8, 1, 1], "
      "x [16, n_tokens, 1, 1]");
  GraphBuilder b2(g, m);
  b2.Add(x, w);
  EXPECT_EQ(b2.status().message(),
            "graph builder: ADD: b [32, 8, 1, 1] cannot be repeated to a [16, n_tokens, 1, 1] (ggml_add: "
            "ggml_can_repeat(b, a)); "
            "sources x [16, n_tokens, 1, 1], w [32, 8, 1, 1]");
  GraphBuilder b3(g, m);
  b3.Nb(b3.Transpose(x));
  EXPECT_EQ(b3.status().message(),
            "graph builder: strides of the non-contiguous view x (transposed) are not tracked");
}

}  // namespace
}  // namespace stowage::planner
