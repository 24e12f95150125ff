#include "stowage/planner/plan_export.h"

#include <algorithm>

#include "stowage/plan/plan_generated.h"
#include "stowage/planner/explain.h"
#include "stowage/runtime/model_identity.h"
#include "stowage/runtime/plan.h"

namespace stowage::planner {
namespace fb = ::stowage::plan;

namespace {

fb::DimExpr ToFb(const DimExpr& e) { return fb::DimExpr(e.c, e.tokens, e.kv, e.kv_head, e.outputs); }
fb::DimExprSwa ToFbSwa(const DimExpr& e) { return fb::DimExprSwa(e.kv_swa, e.kv_head_swa); }
bool HasSwa(const DimExpr& e) { return e.kv_swa != 0 || e.kv_head_swa != 0; }

flatbuffers::Offset<fb::Graph> SerializeGraph(flatbuffers::FlatBufferBuilder& b, const Graph& g,
                                              const Placement& p) {
  // Pipeline parallelism: every instance of the split inputs and graph inputs (absent with n_copies 1).
  const GraphCopies* gc = p.FindCopies(g.name);
  std::vector<flatbuffers::Offset<fb::GraphTensor>> tensors;
  tensors.reserve(g.tensors.size());
  for (const Tensor& t : g.tensors) {
    std::vector<fb::DimExpr> ne;
    for (const auto& d : t.ne) ne.push_back(ToFb(d));
    std::vector<fb::DimExpr> vnb;
    if (t.op == GgmlOp::VIEW)
      for (const auto& d : t.view_nb) vnb.push_back(ToFb(d));
    const auto voff = ToFb(t.view_offset);
    // The SWA cache's symbols (schema version 3), written only where they appear.
    std::vector<fb::DimExprSwa> ne_swa, vnb_swa;
    if (std::any_of(t.ne.begin(), t.ne.end(), HasSwa))
      for (const auto& d : t.ne) ne_swa.push_back(ToFbSwa(d));
    if (t.op == GgmlOp::VIEW && std::any_of(t.view_nb.begin(), t.view_nb.end(), HasSwa))
      for (const auto& d : t.view_nb) vnb_swa.push_back(ToFbSwa(d));
    const auto voff_swa = ToFbSwa(t.view_offset);
    tensors.push_back(fb::CreateGraphTensorDirect(
        b, t.name.c_str(), static_cast<fb::TensorKind>(t.kind), t.global, static_cast<uint32_t>(t.type), &ne,
        static_cast<uint16_t>(t.op), &t.srcs, &t.iparams, &t.fparams, t.view_src, &voff,
        vnb.empty() ? nullptr : &vnb, t.buffer, t.offset, t.backend, t.cause.c_str(), t.layer,
        ne_swa.empty() ? nullptr : &ne_swa, HasSwa(t.view_offset) ? &voff_swa : nullptr,
        vnb_swa.empty() ? nullptr : &vnb_swa));
  }
  std::vector<flatbuffers::Offset<fb::Split>> splits;
  for (size_t si = 0; si < g.splits.size(); ++si) {
    const Split& s = g.splits[si];
    std::vector<flatbuffers::Offset<fb::SplitInput>> inputs;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const auto& [src, copy] = s.inputs[k];
      const std::vector<int>* all = nullptr;
      if (gc && si < gc->splits.size() && k < gc->splits[si].size()) all = &gc->splits[si][k].copies;
      inputs.push_back(fb::CreateSplitInputDirect(b, src, copy, all));
    }
    splits.push_back(fb::CreateSplitDirect(b, s.backend, static_cast<uint32_t>(s.node_begin),
                                           static_cast<uint32_t>(s.node_end), &inputs));
  }
  std::vector<flatbuffers::Offset<fb::InputCopies>> input_copies;
  if (gc)
    for (const TensorCopies& tc : gc->inputs)
      input_copies.push_back(fb::CreateInputCopiesDirect(b, tc.tensor, &tc.copies));
  return fb::CreateGraphDirect(b, g.name.c_str(), g.max_tokens, g.max_kv, g.max_outputs, &tensors, &g.nodes,
                               &g.leafs, &splits, gc ? &input_copies : nullptr, g.max_kv_swa);
}

}  // namespace

std::vector<uint8_t> SerializePlan(const GgufFile& gguf, const ModelGraphs& m, const Placement& p,
                                   const MemoryPlan& mem, const std::string& flags,
                                   const TensorSplitRank* tp) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  const ModelIdentity id = ComputeModelIdentity(gguf);
  std::string name = "";
  if (auto n = gguf.GetStringOr("general.name", ""); n.ok()) name = *n;
  uint64_t n_params = 0;
  for (const auto& g : m.globals)
    if (g.kind == TensorKind::kWeight && !g.duplicated)
      n_params += uint64_t(g.ne[0]) * g.ne[1] * g.ne[2] * g.ne[3];
  auto model = fb::CreateModelIdentityDirect(b, gguf.path().c_str(), id.file_size, id.header_size,
                                             id.header_xxh64, m.hp.arch.c_str(), name.c_str(), n_params);
  auto ctx = fb::CreateContextParams(b, m.cfg.n_ctx, m.cfg.n_batch, m.cfg.n_ubatch,
                                     static_cast<uint32_t>(m.cfg.type_k), static_cast<uint32_t>(m.cfg.type_v),
                                     p.offload_kqv, m.hp.n_layer, m.hp.n_vocab, m.hp.n_embd, m.cfg.flash_attn,
                                     m.cfg.n_ctx_swa, m.cfg.n_ctx_swa > 0 && m.cfg.swa_full, m.cfg.n_seq_max,
                                     m.cfg.kv_unified);
  std::vector<flatbuffers::Offset<fb::Device>> devices;
  for (const auto& d : p.devices)
    devices.push_back(fb::CreateDeviceDirect(b, d.name.c_str(), d.description.c_str(),
                                             static_cast<fb::DeviceType>(d.type), d.manifest_digest.c_str(),
                                             d.memory_total, d.memory_free));
  // Backend -> its compute buffer index.
  std::vector<flatbuffers::Offset<fb::Backend>> backends;
  for (const auto& be : p.backends) {
    int cb = -1;
    for (size_t i = 0; i < mem.buffers.size(); ++i)
      if (mem.buffers[i].usage == BufferUsage::kCompute && mem.buffers[i].buft == be.compute_buft)
        cb = static_cast<int>(i);
    backends.push_back(fb::CreateBackendDirect(b, be.name.c_str(), be.device, cb));
  }
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  for (const auto& pb : mem.buffers) {
    // Row-split bufts carry the normalized -ts (RecordTensorSplit); absent = ggml's default split.
    const std::vector<float>& ts = p.bufts[pb.buft].tensor_split;
    buffers.push_back(fb::CreateBufferDirect(b, pb.name.c_str(), p.bufts[pb.buft].name.c_str(), pb.device,
                                             static_cast<fb::BufferUsage>(pb.usage), pb.size, pb.alignment,
                                             pb.mapped, pb.file_offset, p.bufts[pb.buft].repack.c_str(),
                                             ts.empty() ? nullptr : &ts));
  }
  std::vector<flatbuffers::Offset<fb::GlobalTensor>> tensors;
  for (size_t i = 0; i < m.globals.size(); ++i) {
    const GlobalTensor& g = m.globals[i];
    std::vector<int64_t> ne(g.ne, g.ne + 4);
    flatbuffers::Offset<fb::TensorSlice> slice = 0;
    if (tp && i < tp->slices.size() && tp->slices[i].axis >= 0) {
      const TensorSliceRecord& r = tp->slices[i];
      std::vector<int64_t> full(r.full_ne, r.full_ne + 4);
      slice = fb::CreateTensorSliceDirect(b, r.axis, r.begin, &full);
    }
    tensors.push_back(fb::CreateGlobalTensorDirect(
        b, g.name.c_str(), static_cast<fb::TensorKind>(g.kind), static_cast<uint32_t>(g.type), &ne, g.buffer,
        g.offset, g.nbytes, g.gguf_offset, g.layer, slice, g.parts.empty() ? nullptr : &g.parts));
  }
  std::vector<flatbuffers::Offset<fb::Graph>> graphs{SerializeGraph(b, m.pp, p), SerializeGraph(b, m.tg, p)};
  std::vector<flatbuffers::Offset<fb::ExplainRecord>> explain;
  for (const auto& e : p.explain) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> rej;
    for (const auto& r : e.rejected) rej.push_back(b.CreateString(r));
    explain.push_back(fb::CreateExplainRecordDirect(b, e.subject.c_str(), e.graph.c_str(), e.device.c_str(),
                                                    e.buft.c_str(), e.rule.c_str(), &rej,
                                                    ExplainRuleCode(e.code)));
  }
  // content_xxh64: a non-zero placeholder so that the field is written; SealPlan replaces it.
  bool sinks = false;
  for (const Graph* g : {&m.pp, &m.tg})
    for (const Tensor& t : g->tensors) sinks = sinks || NeedsSinksSchema(t.op, t.srcs.data(), t.srcs.size());
  const uint32_t version = tp && tp->n_ranks > 1
                               ? kPlanSchemaVersionTensorSplit
                               : PlanSchemaVersionFor(m.cfg.n_ctx_swa > 0, sinks, m.cfg.n_seq_max > 1);
  std::vector<flatbuffers::Offset<fb::RankPlan>> rank_plans;
  if (tp)
    for (const std::vector<uint8_t>& rp : tp->other_rank_plans)
      rank_plans.push_back(fb::CreateRankPlanDirect(b, &rp));
  auto plan =
      fb::CreatePlanDirect(b, version, "stowage plan-model 0.1", model, ctx, &devices, &backends, &buffers,
                           &tensors, &graphs, &explain, flags.c_str(), static_cast<uint32_t>(p.n_copies),
                           /*content_xxh64=*/1, tp ? static_cast<uint32_t>(tp->n_ranks) : 1u,
                           tp ? static_cast<uint32_t>(tp->rank) : 0u, tp ? &rank_plans : nullptr);
  fb::FinishPlanBuffer(b, plan);
  std::vector<uint8_t> bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  const Status sealed = SealPlan(bytes.data(), bytes.size());
  (void)sealed;  // the buffer was just built with the field: sealing cannot fail
  return bytes;
}

}  // namespace stowage::planner
