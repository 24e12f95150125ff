#include "stowage/planner/place_model.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "stowage/planner/fit.h"
#include "stowage/planner/kv_place.h"
#include "stowage/planner/model_graphs.h"

namespace stowage::planner {

namespace {

const char* UsageName(BufferUsage u) {
  switch (u) {
    case BufferUsage::kWeights:
      return "weights";
    case BufferUsage::kKvCache:
      return "KV cache";
    case BufferUsage::kCompute:
      return "compute";
    case BufferUsage::kOutput:
      return "output";
  }
  return "?";
}

// ggml_backend_buft_get_max_size: llama.cpp allocates a buft's weights (and KV cache) in several
// buffers of at most max_size bytes each (ggml_backend_alloc_ctx_tensors_from_buft) and fails on a
// single tensor larger than that. A plan holds one buffer per buft and usage, so a buffer above
// its buft's max_size is refused here rather than planned as a buffer the device cannot allocate.
Status CheckMaxBufferSizes(const PlacementOutcome& o) {
  for (const PlannedBuffer& b : o.memory.buffers) {
    if (b.mapped || b.buft < 0 || static_cast<size_t>(b.buft) >= o.placement.bufts.size()) continue;
    const PlacedBuft& pb = o.placement.bufts[b.buft];
    if (pb.device < 0 || static_cast<size_t>(pb.device) >= o.devices.devices.size()) continue;
    const DeviceManifest& d = o.devices.devices[pb.device];
    uint64_t max_size = UINT64_MAX;
    auto consider = [&](const BufferType& bt) {
      if (bt.name == pb.name) max_size = std::min(max_size, bt.max_size);
    };
    consider(d.default_buft);
    if (d.host_buft) consider(*d.host_buft);
    if (d.split_buft) consider(*d.split_buft);
    for (const BufferType& bt : d.extra_bufts) consider(bt);
    if (b.size > max_size)
      return ResourceExhausted("buffer '" + b.name + "' (" + UsageName(b.usage) + ") needs " +
                               std::to_string(b.size) + " bytes but buffer type " + pb.name + " of device " +
                               d.name + " allocates at most " + std::to_string(max_size) +
                               " bytes per buffer (manifest max_size); llama.cpp would use "
                               "several buffers, which Stowage plans do not yet");
  }
  return Status::Ok();
}

}  // namespace

Status PlaceModelStep(PlaceStep step, ModelGraphs& m, const std::vector<DeviceManifest>& machine,
                      const PlacementOptions& opt, PlacementOutcome* o) {
  switch (step) {
    case PlaceStep::kLayers: {
      STOWAGE_ASSIGN_OR_RETURN(o->devices, MakeDeviceSet(machine, opt.split_mode, opt.main_gpu));
      STOWAGE_ASSIGN_OR_RETURN(o->layers, AssignLayers(o->devices, m.hp.n_layer, opt.n_gpu_layers,
                                                       opt.tensor_split, m.cfg.llamacpp_compat));
      return Status::Ok();
    }
    case PlaceStep::kWeights: {
      InitPlacement(o->devices, opt.use_mmap, &o->placement);
      RecordTensorSplit(o->devices, opt.tensor_split, &o->placement);
      RecordHostBufts(o->devices, &o->placement);
      for (uint32_t il = 0; il <= m.hp.n_layer; ++il)
        o->placement.log.push_back("layer " + std::to_string(il) + " -> " +
                                   o->devices.devices[o->layers.device[il]].name);
      WeightBuftOptions wo;
      wo.split_mode = opt.split_mode;
      wo.no_host = opt.no_host;
      wo.no_repack = opt.no_repack;
      wo.overrides = opt.overrides;
      return SelectWeightBufts(m, o->devices, o->layers, wo, &o->placement, &o->moved);
    }
    case PlaceStep::kKvCache:
      return PlaceKvCache(m, o->devices, o->layers, opt.offload_kqv, &o->placement);
    case PlaceStep::kSchedule: {
      SchedulerOptions so;
      so.op_offload = opt.op_offload;
      so.offload_kqv = opt.offload_kqv;
      so.full_offload = opt.n_gpu_layers > static_cast<int>(m.hp.n_layer);
      const PipelineDecision pipeline =
          PipelineParallelism(o->devices, m.hp.n_layer, opt.n_gpu_layers, opt.split_mode, opt.offload_kqv,
                              !opt.overrides.empty());
      so.n_copies = pipeline.n_copies;
      o->pp_nodes = GraphNodeCount(m.pp);
      o->tg_nodes = GraphNodeCount(m.tg);
      STOWAGE_RETURN_IF_ERROR(ScheduleGraph(m.pp, m, o->devices, o->layers, &o->placement, so));
      STOWAGE_RETURN_IF_ERROR(ScheduleGraph(m.tg, m, o->devices, o->layers, &o->placement, so));
      o->placement.explain.push_back(PipelineExplain(pipeline));
      return Status::Ok();
    }
    case PlaceStep::kMemory: {
      STOWAGE_RETURN_IF_ERROR(PlanMemory(m, o->placement, &o->memory));
      STOWAGE_RETURN_IF_ERROR(CheckMaxBufferSizes(*o));
      STOWAGE_ASSIGN_OR_RETURN(o->split_shares, RowSplitShares(m, *o));
      return Status::Ok();
    }
  }
  return Internal("unknown placement step");
}

Result<PlacementOutcome> PlaceModel(ModelGraphs& m, const std::vector<DeviceManifest>& machine,
                                    const PlacementOptions& opt) {
  PlacementOutcome o;
  for (PlaceStep step : {PlaceStep::kLayers, PlaceStep::kWeights, PlaceStep::kKvCache, PlaceStep::kSchedule,
                         PlaceStep::kMemory})
    STOWAGE_RETURN_IF_ERROR(PlaceModelStep(step, m, machine, opt, &o));
  return o;
}

void RecordHostBufts(const DeviceSet& ds, Placement* p) {
  p->device_host_buft.assign(p->devices.size(), -1);
  for (size_t i = 0; i < p->devices.size() && i < ds.devices.size(); ++i)
    if (const auto& host = ds.devices[i].host_buft) p->device_host_buft[i] = p->FindBuft(host->name);
}

void RecordTensorSplit(const DeviceSet& ds, const std::vector<float>& tensor_split, Placement* p) {
  for (PlacedBuft& pb : p->bufts) {
    pb.tensor_split.clear();
    if (pb.device < 0 || pb.device >= ds.n_model) continue;
    const DeviceManifest& owner = ds.devices[pb.device];
    if (!owner.split_buft || owner.split_buft->name != pb.name) continue;
    // The devices the split spreads over (as RowSplitShares, fit.h): model devices of the owner's
    // backend with a split buft, in model order.
    std::vector<float> share;
    double sum = 0.0;  // double: -ts 3e38,3e38 must not overflow to inf (and record zeros)
    for (int i = 0; i < ds.n_model; ++i) {
      const DeviceManifest& d = ds.devices[i];
      if (d.backend != owner.backend || !d.split_buft) continue;
      const float v = static_cast<size_t>(i) < tensor_split.size() ? std::max(tensor_split[i], 0.f) : 0.f;
      share.push_back(v);
      sum += v;
    }
    if (!(sum > 0.0)) continue;  // absent or all zero: ggml's default (total memory), left to the runtime
    for (float& v : share) v = static_cast<float>(static_cast<double>(v) / sum);
    pb.tensor_split = std::move(share);
  }
}

namespace {

double MiB(uint64_t b) { return static_cast<double>(b) / 1024.0 / 1024.0; }

template <typename... A>
std::string Fmt(const char* f, A... a) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

// llama.cpp 2026 llama_kv_cache's lines for one cache, the layers with UsesSwaCache == swa and
// `cells` cells: its KV buffers, one per buffer type in the order of their names (its ctx_map), of its
// layers' K/V tensors aligned as ggml_backend_alloc_ctx_tensors_from_buft lays them out, then its
// summary line (sizes as floats, as it prints them; "4/1 seqs": n_seq_max over n_stream, 1 with
// kv_unified or one sequence). An MLA cache (HParams::is_mla) has no V tensors: V 0.00 MiB.
void KvCacheLines(const ModelGraphs& m, const PlacementOutcome& o, bool swa, uint32_t cells,
                  std::vector<std::string>* out) {
  const uint32_t n_seq_max = std::max<uint32_t>(1, m.cfg.n_seq_max);
  std::map<std::string, uint64_t> buffer_bytes;  // by buffer type name
  uint64_t k_bytes = 0, v_bytes = 0;
  int layers = 0;
  for (const GlobalTensor& g : m.globals) {
    if (g.kind != TensorKind::kKvCache || g.layer < 0 || UsesSwaCache(m, g.layer) != swa) continue;
    const bool k = g.name.rfind("cache_k", 0) == 0;
    (k ? k_bytes : v_bytes) += g.nbytes;
    layers += k ? 1 : 0;
    if (g.buffer >= 0 && g.buffer < static_cast<int>(o.memory.buffers.size())) {
      const PlannedBuffer& b = o.memory.buffers[g.buffer];
      buffer_bytes[b.name] += (g.nbytes + b.alignment - 1) / b.alignment * b.alignment;
    }
  }
  for (const auto& [name, bytes] : buffer_bytes)
    out->push_back(Fmt("llama_kv_cache: %10s KV buffer size = %8.2f MiB", name.c_str(), MiB(bytes)));
  const float mib = 1024.0f * 1024.0f;
  out->push_back(
      Fmt("llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f "
          "MiB, V (%s): %7.2f MiB",
          static_cast<double>(static_cast<float>(k_bytes + v_bytes) / mib), cells, layers, n_seq_max,
          m.cfg.kv_unified ? 1u : n_seq_max, GgmlTypeName(m.cfg.type_k),
          static_cast<double>(static_cast<float>(k_bytes) / mib), GgmlTypeName(m.cfg.type_v),
          static_cast<double>(static_cast<float>(v_bytes) / mib)));
  // llama.cpp 2026's attention rotation: n_embd_head_*_all is the layers' common head size (an
  // MLA cache has no V heads: 0; the V line says n_embd_head_k_all as llama.cpp words it).
  // llama.cpp rotates a quantized cache whose heads are multiples of 64 (a Hadamard rotation of K /
  // V, attn_rot 1); Stowage's graphs do not, so its plans say 0 and differ there. Feb 2025 mode
  // keeps the lines it printed.
  if (m.cfg.llamacpp_compat != LlamacppCompat::k2026) return;
  const int head_k = static_cast<int>(m.hp.n_embd_head_k);
  const int head_v = m.hp.is_mla() ? 0 : static_cast<int>(m.hp.n_embd_head_v);
  out->push_back(Fmt("llama_kv_cache: attn_rot_k = 0, n_embd_head_k_all = %d", head_k));
  out->push_back(Fmt("llama_kv_cache: attn_rot_v = 0, n_embd_head_k_all = %d", head_v));
}

// llama.cpp 2026 llama_kv_cache_iswa's constructor and its two llama_kv_cache constructors (the
// base cache of the global layers, n_ctx cells, then the SWA cache of the sliding-window layers,
// n_ctx_swa cells): each cache's KvCacheLines after its "creating" line.
void IswaKvLines(const ModelGraphs& m, const PlacementOutcome& o, std::vector<std::string>* out) {
  if (m.cfg.swa_full)
    out->push_back(
        "llama_kv_cache_iswa: using full-size SWA cache (ref: "
        "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)");
  for (const bool swa : {false, true}) {
    const uint32_t cells = swa ? m.cfg.n_ctx_swa : m.cfg.n_ctx;
    out->push_back(Fmt("llama_kv_cache_iswa: creating %s KV cache, size = %u cells",
                       swa ? "    SWA" : "non-SWA", cells));
    KvCacheLines(m, o, swa, cells, out);
  }
}

// Appends each '\n'-separated line of `text` (none for an empty one).
void AppendLines(const std::string& text, std::vector<std::string>* out) {
  for (size_t at = 0; at < text.size();) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    out->push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
}

// llama.cpp 2026 llama_model_loader's lines for the weights that -ot (and --cpu-moe) placed, in the
// order it creates them: its warning at the first one overridden to the CPU with mmap on, and with
// `debug_lines` "tensor <name> (<MiB> MiB <type>) buffer type overridden to <buft>", the buffer type
// chosen before the host-buffer rule of mmap (its explain record's rejected host buffer type).
void OverrideLines(const ModelGraphs& m, const PlacementOutcome& o, bool use_mmap, bool debug_lines,
                   std::vector<std::string>* out) {
  const std::string host_with_mmap = ": host buffer type with mmap";
  bool warned = false;
  for (const ExplainEntry& e : o.placement.explain) {
    if (e.code != ExplainRule::kWeightOverride && e.code != ExplainRule::kWeightOverrideCpu) continue;
    const std::string name = e.subject.substr(0, e.subject.find(" ("));
    const int gi = m.FindGlobal(name);
    if (gi < 0) continue;
    if (e.code == ExplainRule::kWeightOverrideCpu && use_mmap && !warned) {
      out->push_back(
          "llama_model_loader: tensor overrides to CPU are used with mmap enabled - consider using "
          "--load-mode none for better performance");
      warned = true;
    }
    if (!debug_lines) continue;
    const int b = o.placement.global_buft.at(gi);
    std::string buft = b >= 0 ? o.placement.bufts[b].name : e.buft;
    for (const std::string& r : e.rejected)
      if (r.find(host_with_mmap) != std::string::npos) buft = r.substr(0, r.find(": "));
    const GlobalTensor& g = m.globals[gi];
    out->push_back(Fmt("tensor %s (%llu MiB %s) buffer type overridden to %s", name.c_str(),
                       static_cast<unsigned long long>(g.nbytes / 1024 / 1024), GgmlTypeName(g.type),
                       buft.c_str()));
  }
}

// The llm_graph_input_i object of llama.cpp 2026 an input of Stowage's graphs belongs to (its
// llm_graph_input_* class): the attention's masks and KV indices are one object (inp_attn, or
// inp_attn_iswa's), the token input the embeddings' (inp_embd); any other input is its own.
std::string InputObjectOf(const std::string& name) {
  if (name == "inp_tokens" || name == "inp_embd") return "embd";
  if (name.rfind("KQ_mask", 0) == 0 || name.rfind("attn_inp_", 0) == 0) return "attn";
  if (name.rfind("inp_s_", 0) == 0) return "rs";
  return name;
}

// llama.cpp 2026's lines after the model buffers (llama_context's constructor, its KV cache and
// sched_reserve; ReportLines says which).
void ContextLines2026(const ModelGraphs& m, const PlacementOutcome& o, const AskedContext& asked,
                      std::vector<std::string>* out) {
  const uint32_t n_seq_max = std::max<uint32_t>(1, m.cfg.n_seq_max);
  const uint32_t n_ctx_seq = m.cfg.kv_unified ? m.cfg.n_ctx : m.cfg.n_ctx / n_seq_max;
  std::string fa_type =
      asked.flash_attn_type.empty() ? (m.cfg.flash_attn ? "enabled" : "disabled") : asked.flash_attn_type;
  if (fa_type == "auto" && QuantizedVCacheEnablesFlashAttn(m.cfg, m.hp)) {
    out->push_back("llama_init_from_model: enabling flash_attn since it is required for quantized V cache");
    fa_type = "enabled";
  }
  out->push_back("llama_context: constructing llama_context");
  out->push_back(Fmt("llama_context: n_seq_max             = %u", n_seq_max));
  out->push_back(Fmt("llama_context: n_ctx                 = %u", m.cfg.n_ctx));
  out->push_back(Fmt("llama_context: n_ctx_seq             = %u", n_ctx_seq));
  out->push_back(Fmt("llama_context: n_batch               = %u", m.cfg.n_batch));
  out->push_back(Fmt("llama_context: n_ubatch              = %u", m.cfg.n_ubatch));
  out->push_back("llama_context: causal_attn           = 1");
  out->push_back(Fmt("llama_context: flash_attn            = %s", fa_type.c_str()));
  out->push_back(Fmt("llama_context: kv_unified            = %s", m.cfg.kv_unified ? "true" : "false"));
  out->push_back(Fmt("llama_context: freq_base             = %.1f", m.hp.rope_freq_base));
  out->push_back(Fmt("llama_context: freq_scale            = %g", m.hp.rope_freq_scale));
  // n_rs_seq: the recurrent states kept for partial rollback, 0 for an attention model
  // (llm_arch_supports_rs_rollback); n_outputs_max as asked, 0: n_batch; per sequence:
  // common_params' 1.
  out->push_back("llama_context: n_rs_seq              = 0");
  out->push_back(Fmt("llama_context: n_outputs_max         = %u",
                     m.cfg.n_outputs_max > 0 ? m.cfg.n_outputs_max : m.cfg.n_batch));
  out->push_back("llama_context: n_outputs_max_per_seq = 1");
  if (n_ctx_seq < m.hp.n_ctx_train)
    out->push_back(
        Fmt("llama_context: n_ctx_seq (%u) < n_ctx_train (%u) -- the full capacity of the model will "
            "not be utilized",
            n_ctx_seq, m.hp.n_ctx_train));
  if (n_ctx_seq > m.hp.n_ctx_train)
    out->push_back(
        Fmt("llama_context: n_ctx_seq (%u) > n_ctx_train (%u) -- possible training context overflow",
            n_ctx_seq, m.hp.n_ctx_train));
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kOutput)
      out->push_back(Fmt("llama_context: %10s  output buffer size = %8.2f MiB", b.name.c_str(), MiB(b.size)));
  if (m.cfg.n_ctx_swa > 0)
    IswaKvLines(m, o, out);
  else
    KvCacheLines(m, o, false, m.cfg.n_ctx, out);
  if (o.placement.n_copies > 1) out->push_back("llama_context: pipeline parallelism enabled");
  out->push_back("sched_reserve: reserving ...");
  AppendLines(asked.fused_op_lines, out);
  // resolve_fused_ops checks DeepSeek V4's fused HC ops for every model; none of Stowage's
  // architectures has them, so none runs away from its layer's device.
  out->push_back("resolve_fused_ops: resolving fused DeepSeek V4 HC support:");
  for (const char* part : {"pre", "comb", "post"})
    out->push_back(Fmt("resolve_fused_ops: fused DeepSeek V4 HC %s enabled", part));
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kCompute && b.size > 1)
      out->push_back(Fmt("sched_reserve: %10s compute buffer size = %8.2f MiB", b.name.c_str(), MiB(b.size)));
  const GraphInputCounts in_pp = CountGraphInputs(m.pp), in_tg = CountGraphInputs(m.tg);
  const int counts[4][2] = {{o.pp_nodes, o.tg_nodes},
                            {static_cast<int>(m.pp.splits.size()), static_cast<int>(m.tg.splits.size())},
                            {in_pp.objects, in_tg.objects},
                            {in_pp.tensors, in_tg.tensors}};
  bool diff = false;
  for (const auto& c : counts) diff = diff || c[0] != c[1];
  auto val = [diff](const int* c) { return diff ? Fmt("%d / %d", c[0], c[1]) : Fmt("%d", c[0]); };
  // sched_reserve's pp graph is of min(n_ctx, n_ubatch) tokens, its tg graph of n_seq_max.
  const std::string sizes =
      diff ? Fmt(" (pp bs=%u, tg bs=%u)", std::min(m.cfg.n_ctx, m.cfg.n_ubatch), n_seq_max) : "";
  out->push_back(
      Fmt("sched_reserve: graph%s: nodes = %s, splits = %s, input objects = %s, input tensors = %s",
          sizes.c_str(), val(counts[0]).c_str(), val(counts[1]).c_str(), val(counts[2]).c_str(),
          val(counts[3]).c_str()));
}

}  // namespace

bool QuantizedVCacheEnablesFlashAttn(const ContextConfig& cfg, const HParams& hp) {
  return cfg.llamacpp_compat == LlamacppCompat::k2026 && !hp.recurrent() &&
         GetTypeTraits(cfg.type_v).is_quantized;
}

GraphInputCounts CountGraphInputs(const Graph& g) {
  // A node scheduled away from an input reads the input's split copy: counted as the input read.
  std::map<int, int> copied_from;
  for (const Split& s : g.splits)
    for (const auto& [source, copy] : s.inputs) copied_from[copy] = source;
  std::set<int> tensors;
  std::set<std::string> objects;
  for (int id : g.nodes)
    for (int src : g.tensors[id].srcs) {
      if (auto it = copied_from.find(src); it != copied_from.end()) src = it->second;
      if (src >= 0 && g.tensors[src].kind == TensorKind::kInput && tensors.insert(src).second)
        objects.insert(InputObjectOf(g.tensors[src].name));
    }
  return {static_cast<int>(objects.size()), static_cast<int>(tensors.size())};
}

std::vector<std::string> ReportLines(const ModelGraphs& m, const PlacementOutcome& o,
                                     const PlacementOptions& opt, bool debug_lines,
                                     const AskedContext& asked) {
  std::vector<std::string> out;
  const bool today = m.cfg.llamacpp_compat == LlamacppCompat::k2026;
  // Only llama.cpp 2026's context lines place resolve_fused_ops's among them; else they come first,
  // where Plan reported them.
  if (!today || m.hp.recurrent()) AppendLines(asked.fused_op_lines, &out);
  const DeviceSet& ds = o.devices;
  for (int i = 0; i < ds.n_model; ++i)
    out.push_back(Fmt("llama_model_load_from_file_impl: using device %s (%s) - %llu MiB free",
                      ds.devices[i].name.c_str(), ds.devices[i].description.c_str(),
                      static_cast<unsigned long long>(ds.devices[i].memory_free / 1024 / 1024)));
  // llama.cpp 2026 says how it loads the weights (llama_model::load_tensors: mmap or read, "none"),
  // adds each layer's is_swa and reports the moved weights from
  // llama_model_loader::done_getting_tensors.
  if (today)
    out.push_back(Fmt("load_tensors: loading model tensors, this can take a while... (load_mode = %s)",
                      opt.use_mmap ? "mmap" : "none"));
  for (size_t il = 0; debug_lines && il < o.layers.device.size(); ++il)
    out.push_back(Fmt("load_tensors: layer %3d assigned to device %s", static_cast<int>(il),
                      ds.devices[o.layers.device[il]].name.c_str()) +
                  (today ? Fmt(", is_swa = %d", m.hp.is_swa(static_cast<uint32_t>(il)) ? 1 : 0) : ""));
  if (today) OverrideLines(m, o, opt.use_mmap, debug_lines, &out);
  if (debug_lines && o.moved.count > 0)
    out.push_back(
        Fmt("%s: tensor '%s' (%s) (and %d others) cannot be used with preferred buffer type %s, using %s "
            "instead",
            today ? "done_getting_tensors" : "load_tensors", o.moved.tensor.c_str(), o.moved.type.c_str(),
            o.moved.count - 1, o.moved.from.c_str(), o.moved.to.c_str()));
  if (ds.n_model > 0) {  // llama_supports_gpu_offload()
    const int n_layer = static_cast<int>(m.hp.n_layer);
    const int ngl = std::max(opt.n_gpu_layers, 0);
    if (today) {  // llama.cpp 2026 load_tensors: the output layer first, of at most n_layer
      const int n_gpu = std::min(ngl, n_layer);
      if (n_gpu > 0) out.push_back("load_tensors: offloading output layer to GPU");
      out.push_back(Fmt("load_tensors: offloading %d repeating layers to GPU", std::max(n_gpu - 1, 0)));
    } else {
      out.push_back(Fmt("load_tensors: offloading %d repeating layers to GPU", std::min(ngl, n_layer)));
      if (ngl > n_layer) out.push_back("load_tensors: offloading output layer to GPU");
    }
    out.push_back(
        Fmt("load_tensors: offloaded %d/%d layers to GPU", std::min(ngl, n_layer + 1), n_layer + 1));
  }
  std::vector<const PlannedBuffer*> weights;
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kWeights) weights.push_back(&b);
  // llama.cpp 2026 prints them in the order of llama_model_loader's ctx_map, sorted by buffer-type
  // name (ctx_key_comparator; a mapped buffer's is the CPU's).
  if (m.cfg.llamacpp_compat == LlamacppCompat::k2026)
    std::stable_sort(weights.begin(), weights.end(), [&](const PlannedBuffer* a, const PlannedBuffer* b) {
      return o.placement.bufts[a->buft].name < o.placement.bufts[b->buft].name;
    });
  for (const PlannedBuffer* b : weights)
    out.push_back(Fmt("load_tensors: %12s model buffer size = %8.2f MiB", b->name.c_str(), MiB(b->size)));
  uint64_t k_bytes = 0, v_bytes = 0;
  for (const auto& g : m.globals) {
    if (g.kind != TensorKind::kKvCache) continue;
    (g.name.rfind("cache_k", 0) == 0 ? k_bytes : v_bytes) += g.nbytes;
  }
  if (today && !m.hp.recurrent()) {
    ContextLines2026(m, o, asked, &out);
    return out;
  }
  // llama_init_from_model's context summary (FEB25 src/llama.cpp), then its warnings for a context
  // below or beyond the one the model was trained with.
  if (m.flash_attn_forced_off)
    out.push_back("llama_init_from_model: flash_attn requires n_embd_head_k == n_embd_head_v - forcing off");
  const uint32_t n_seq_max = std::max<uint32_t>(1, m.cfg.n_seq_max);
  // llama.cpp 2026 llama_context's n_ctx_seq: n_ctx with a unified cache, else n_ctx / n_seq_max.
  const uint32_t n_ctx_per_seq = m.cfg.kv_unified ? m.cfg.n_ctx : m.cfg.n_ctx / n_seq_max;
  out.push_back(Fmt("llama_init_from_model: n_seq_max     = %u", n_seq_max));
  out.push_back(Fmt("llama_init_from_model: n_ctx         = %u", m.cfg.n_ctx));
  out.push_back(Fmt("llama_init_from_model: n_ctx_per_seq = %u", n_ctx_per_seq));
  out.push_back(Fmt("llama_init_from_model: n_batch       = %u", m.cfg.n_batch));
  out.push_back(Fmt("llama_init_from_model: n_ubatch      = %u", m.cfg.n_ubatch));
  out.push_back(Fmt("llama_init_from_model: flash_attn    = %d", m.cfg.flash_attn ? 1 : 0));
  out.push_back(Fmt("llama_init_from_model: freq_base     = %.1f", m.hp.rope_freq_base));
  out.push_back(Fmt("llama_init_from_model: freq_scale    = %g", m.hp.rope_freq_scale));
  if (!m.hp.recurrent() && n_ctx_per_seq < m.hp.n_ctx_train)
    out.push_back(
        Fmt("llama_init_from_model: n_ctx_per_seq (%u) < n_ctx_train (%u) -- the full capacity of the model "
            "will not be utilized",
            n_ctx_per_seq, m.hp.n_ctx_train));
  if (!m.hp.recurrent() && n_ctx_per_seq > m.hp.n_ctx_train)
    out.push_back(Fmt(
        "llama_init_from_model: n_ctx_per_seq (%u) > n_ctx_train (%u) -- possible training context overflow",
        n_ctx_per_seq, m.hp.n_ctx_train));
  // kv_size: n_ctx, or max(1, n_seq_max) state cells for a recurrent model; can_shift = !recurrent
  // (FEB25 llama_init_from_model / llama_kv_cache_init).
  // Interleaved-SWA models (2026 architectures): llama_kv_cache_iswa's lines instead; deepseek2
  // (2026; the absorbed MLA cache and the older form's K / V cache alike) llama_kv_cache's.
  const bool kv_2026 = m.cfg.n_ctx_swa > 0 || m.hp.arch == "deepseek2";
  if (m.cfg.n_ctx_swa > 0) IswaKvLines(m, o, &out);
  if (m.cfg.n_ctx_swa == 0 && m.hp.arch == "deepseek2") KvCacheLines(m, o, false, m.cfg.n_ctx, &out);
  if (!kv_2026)
    out.push_back(
        Fmt("llama_kv_cache_init: kv_size = %u, offload = %d, type_k = '%s', type_v = '%s', n_layer = %u, "
            "can_shift = %d",
            m.hp.recurrent() ? n_seq_max : m.cfg.n_ctx, opt.offload_kqv ? 1 : 0, GgmlTypeName(m.cfg.type_k),
            GgmlTypeName(m.cfg.type_v), m.hp.n_layer, m.hp.recurrent() ? 0 : 1));
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kKvCache && !kv_2026)
      out.push_back(Fmt("llama_kv_cache_init: %10s KV buffer size = %8.2f MiB", b.name.c_str(), MiB(b.size)));
  if (!kv_2026)
    out.push_back(
        Fmt("llama_init_from_model: KV self size  = %7.2f MiB, K (%s): %7.2f MiB, V (%s): %7.2f MiB",
            MiB(k_bytes + v_bytes), GgmlTypeName(m.cfg.type_k), MiB(k_bytes), GgmlTypeName(m.cfg.type_v),
            MiB(v_bytes)));
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kOutput)
      out.push_back(
          Fmt("llama_init_from_model: %10s  output buffer size = %8.2f MiB", b.name.c_str(), MiB(b.size)));
  if (o.placement.n_copies > 1)  // llama_init_from_model, after creating the scheduler
    out.push_back(
        Fmt("llama_init_from_model: pipeline parallelism enabled (n_copies=%d)", o.placement.n_copies));
  for (const auto& b : o.memory.buffers)
    if (b.usage == BufferUsage::kCompute && b.size > 1)
      out.push_back(
          Fmt("llama_init_from_model: %10s compute buffer size = %8.2f MiB", b.name.c_str(), MiB(b.size)));
  out.push_back(Fmt("llama_init_from_model: graph nodes  = %d", o.pp_nodes));
  out.push_back(Fmt("llama_init_from_model: graph splits = %zu (with bs=%lld), %zu (with bs=1)",
                    m.pp.splits.size(), static_cast<long long>(m.pp.max_tokens), m.tg.splits.size()));
  return out;
}

std::string FlashAttnDeviceMismatch(const ModelGraphs& m, const PlacementOutcome& o) {
  const Graph& g = m.tg;
  const Placement& p = o.placement;
  for (int id : g.nodes) {
    const Tensor& t = g.tensors[id];
    if (t.op != stowage::GgmlOp::FLASH_ATTN_EXT || t.srcs.size() < 2 || t.srcs[1] < 0) continue;
    const int il = g.tensors[t.srcs[1]].layer;  // the K view "k-<il>"
    if (il < 0 || il >= static_cast<int>(o.layers.device.size()) || t.backend < 0 ||
        t.backend >= static_cast<int>(p.backends.size()))
      continue;
    const std::string& dev_kv = o.devices.devices[o.layers.device[il]].name;
    const int d = p.backends[t.backend].device;
    const std::string dev_fa = d >= 0 && d < static_cast<int>(p.devices.size()) ? p.devices[d].name : "?";
    if (dev_fa == dev_kv) continue;
    if (m.cfg.llamacpp_compat == LlamacppCompat::k2026)  // llama_context::resolve_fused_ops
      return Fmt(
          "resolve_fused_ops: layer %d is assigned to device %s but Flash Attention is assigned to device %s "
          "(usually due to missing support)",
          il, dev_kv.c_str(), dev_fa.c_str());
    return Fmt(
        "llama_context: layer %d is assigned to device %s but the Flash Attention tensor is assigned to "
        "device %s (usually due to missing support)",
        il, dev_kv.c_str(), dev_fa.c_str());
  }
  return "";
}

}  // namespace stowage::planner
