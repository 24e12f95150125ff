// plan-dump: prints a plan file (runtime/schema/plan.fbs) as text or JSON. The plan is verified
// first by the runtime's own verifier (stowage::PlanFile: everything stowage-run checks before it
// creates backends and allocates -- identifier, size, flatbuffers verifier, schema version,
// checksum, cross references, the graphs decoded and bound at their worst case, op shapes, buffer
// overlaps); a plan it refuses is a one-line error and exit status 1. The model identity is checked
// only when a model is given (-m MODEL: stowage::CheckPlanAgainstModel, as stowage-run does);
// what needs the machine (the planned devices present, memory) only stowage-run can check. A buffer line ends
// with "tensor_split [0.75, 0.25]" (JSON: "tensor_split": [0.75, 0.25]) when the plan carries the -ts
// proportions of a row-split buffer (Buffer.tensor_split). "scheduler: n_copies N" (JSON "n_copies")
// is ggml_backend_sched's n_copies; with pipeline parallelism (N > 1) a split input lists every
// instance ("[src -> copy0, copy1, ...]", JSON "copies") and each graph prints
// "  input copies: INPUT on BACKEND -> INPUT (buffer B offset O), BACKEND#INPUT#1 (...), ..."
// (JSON "input_copies").
// A tensor split across MPI ranks (plan-model --cluster -sm tensor; Plan.tp_n_ranks > 1) prints one
// line per rank, "tensor split: rank R of N: weights B bytes (M MiB), KV ..., compute ..., output ..."
// (JSON "tensor_split_ranks"), from the rank's own plan (rank 0: the file's root, the others nested in
// it), and a sliced weight's line ends with "slice axis A from B of [full_ne]" (JSON "slice").
// --svg: the plan as a picture (plan_svg.h).
// --check-memory: instead of printing, checks that no two graph tensors live at the same time share
// bytes of a compute buffer, and no two weights / KV cache tensors share bytes of an allocated
// buffer (stowage::CheckComputeMemory, liveness re-derived from the plan; the verifier runs the same
// check at every load, and stops at the first conflict); after every other check of the verifier,
// prints "plan-dump: compute memory OK (N tensors checked)" and exits 0, or one line per conflict
// and exits 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llama_args.h"
#include "plan_svg.h"
#include "stdout_check.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/plan.h"

namespace fb = stowage::plan;
using nlohmann::ordered_json;

namespace {

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::string TypeName(uint32_t t) { return stowage::GgmlTypeName(static_cast<stowage::GgmlType>(t)); }

std::string OpName(uint16_t op) {
  return op < static_cast<uint16_t>(stowage::GgmlOp::kCount)
             ? stowage::GgmlOpName(static_cast<stowage::GgmlOp>(op))
             : "op#" + std::to_string(op);
}

/// " tensor_split [0.75, 0.25]" for a buffer whose plan entry carries Buffer.tensor_split (a
/// row-split buft planned with -ts; proportions per device of the split, %g), else "".
std::string SplitText(const fb::Buffer* b) {
  if (!b->tensor_split()) return "";
  std::string s = " tensor_split [";
  for (flatbuffers::uoffset_t i = 0; i < b->tensor_split()->size(); ++i) {
    char v[32];
    std::snprintf(v, sizeof v, "%g", static_cast<double>(b->tensor_split()->Get(i)));
    s += (i ? ", " : "") + std::string(v);
  }
  return s + "]";
}

// `d` with the SWA cache's terms `swa` (GraphTensor.ne_swa, schema version 3; nullptr: none).
std::string Dim(const fb::DimExpr* d, const fb::DimExprSwa* swa = nullptr) {
  if (!d) return "?";
  std::string s;
  auto term = [&](int64_t k, const char* sym) {
    if (k == 0) return;
    if (!s.empty())
      s += k < 0 ? "-" : "+";
    else if (k < 0)
      s += "-";
    // |k| in uint64: -k overflows for INT64_MIN (a verified plan may hold any coefficient).
    const uint64_t a = k < 0 ? 0 - static_cast<uint64_t>(k) : static_cast<uint64_t>(k);
    s += (a == 1 ? std::string() : std::to_string(a) + "*") + sym;
  };
  term(d->tokens(), "n_tokens");
  term(d->kv(), "n_kv");
  term(d->kv_head(), "kv_head");
  term(d->outputs(), "n_outputs");
  if (swa) {
    term(swa->kv_swa(), "n_kv_swa");
    term(swa->kv_head_swa(), "kv_head_swa");
  }
  if (d->c() != 0 || s.empty()) s += (s.empty() ? "" : (d->c() < 0 ? "" : "+")) + std::to_string(d->c());
  return s;
}

std::string Shape(const flatbuffers::Vector<const fb::DimExpr*>* ne,
                  const flatbuffers::Vector<const fb::DimExprSwa*>* ne_swa = nullptr) {
  std::string s = "[";
  if (ne)
    for (flatbuffers::uoffset_t i = 0; i < ne->size(); ++i)
      s += (i ? ", " : "") + Dim(ne->Get(i), ne_swa && i < ne_swa->size() ? ne_swa->Get(i) : nullptr);
  return s + "]";
}

double MiB(uint64_t b) { return static_cast<double>(b) / 1048576.0; }

/// Bytes of `p`'s buffers of `usage`.
uint64_t UsageBytes(const fb::Plan& p, fb::BufferUsage usage) {
  uint64_t n = 0;
  if (p.buffers())
    for (const auto* b : *p.buffers()) n += b->usage() == usage ? b->size() : 0;
  return n;
}

/// The plans of a tensor split across MPI ranks, rank by rank: `p` itself, then its nested plans
/// (verified with the root by the flatbuffers verifier); just `p` for any other plan.
std::vector<const fb::Plan*> RankPlans(const fb::Plan& p) {
  std::vector<const fb::Plan*> ranks{&p};
  if (p.tp_rank_plans())
    for (const auto* r : *p.tp_rank_plans())
      if (r->plan()) ranks.push_back(fb::GetPlan(r->plan()->data()));
  return ranks;
}

std::string Text(const fb::Plan& p, bool nodes) {
  std::string o;
  char buf[1024];
  auto line = [&](const char* fmt, auto... a) {
    std::snprintf(buf, sizeof buf, fmt, a...);
    o += buf;
    o += "\n";
  };
  line("plan: schema %u, generator '%s'", p.schema_version(), Str(p.generator()).c_str());
  // Its own line: plans made from one model by two routes (plan-model, the MLIR passes) differ in
  // their flags and so in their checksum; tests compare the rest.
  if (p.content_xxh64() != 0)
    line("checksum: xxh64 %016llx", static_cast<unsigned long long>(p.content_xxh64()));
  if (const auto* m = p.model())
    line("model: %s (%s, '%s', %llu parameters), file %llu bytes, header %llu bytes, xxh64 %016llx",
         Str(m->path()).c_str(), Str(m->architecture()).c_str(), Str(m->name()).c_str(),
         static_cast<unsigned long long>(m->n_params()), static_cast<unsigned long long>(m->file_size()),
         static_cast<unsigned long long>(m->header_size()),
         static_cast<unsigned long long>(m->header_xxh64()));
  if (const auto* c = p.context())
    line(
        "context: n_ctx %u, n_batch %u, n_ubatch %u, type_k %s, type_v %s, offload_kqv %d, n_layer %u, "
        "n_vocab %u, n_embd %u%s%s",
        c->n_ctx(), c->n_batch(), c->n_ubatch(), TypeName(c->type_k()).c_str(), TypeName(c->type_v()).c_str(),
        c->offload_kqv() ? 1 : 0, c->n_layer(), c->n_vocab(), c->n_embd(),
        c->flash_attn() ? ", flash_attn 1" : "",
        c->n_ctx_swa() > 0
            ? (", n_ctx_swa " + std::to_string(c->n_ctx_swa()) + (c->swa_full() ? " (swa_full)" : "")).c_str()
            : "");
  line("scheduler: n_copies %u%s", p.n_copies(), p.n_copies() > 1 ? " (pipeline parallelism)" : "");
  if (p.tp_n_ranks() > 1)
    for (const fb::Plan* r : RankPlans(p)) {
      const double mib = 1048576.0;
      const uint64_t w = UsageBytes(*r, fb::BufferUsage::Weights),
                     kv = UsageBytes(*r, fb::BufferUsage::KvCache),
                     c = UsageBytes(*r, fb::BufferUsage::Compute),
                     out = UsageBytes(*r, fb::BufferUsage::Output);
      line(
          "tensor split: rank %u of %u: weights %llu bytes (%.2f MiB), KV %llu bytes (%.2f MiB), compute "
          "%llu "
          "bytes (%.2f MiB), output %llu bytes (%.2f MiB)",
          r->tp_rank(), p.tp_n_ranks(), static_cast<unsigned long long>(w), w / mib,
          static_cast<unsigned long long>(kv), kv / mib, static_cast<unsigned long long>(c), c / mib,
          static_cast<unsigned long long>(out), out / mib);
    }
  if (p.flags()) line("flags: %s", p.flags()->c_str());
  if (const auto* d = p.devices()) {
    for (flatbuffers::uoffset_t i = 0; i < d->size(); ++i) {
      if (d->Get(i)->memory_total() == 0)  // a registry CPU: host memory is not part of the manifest
        line("device %u: %s (%s) type %s, memory not given (host memory)", i, Str(d->Get(i)->name()).c_str(),
             Str(d->Get(i)->description()).c_str(), fb::EnumNameDeviceType(d->Get(i)->type()));
      else
        line("device %u: %s (%s) type %s, %.2f MiB free of %.2f MiB", i, Str(d->Get(i)->name()).c_str(),
             Str(d->Get(i)->description()).c_str(), fb::EnumNameDeviceType(d->Get(i)->type()),
             MiB(d->Get(i)->memory_free()), MiB(d->Get(i)->memory_total()));
    }
  }
  if (const auto* b = p.backends())
    for (flatbuffers::uoffset_t i = 0; i < b->size(); ++i)
      line("backend %u: %s on device %d, compute buffer %d", i, Str(b->Get(i)->name()).c_str(),
           b->Get(i)->device(), b->Get(i)->compute_buffer());
  if (const auto* b = p.buffers())
    for (flatbuffers::uoffset_t i = 0; i < b->size(); ++i) {
      const auto* x = b->Get(i);
      line("buffer %u: %-12s %-8s %10llu bytes (%8.2f MiB) buft %s device %d align %llu%s%s%s", i,
           Str(x->name()).c_str(), fb::EnumNameBufferUsage(x->usage()),
           static_cast<unsigned long long>(x->size()), MiB(x->size()), Str(x->buft()).c_str(), x->device(),
           static_cast<unsigned long long>(x->alignment()),
           x->mapped() ? (" mapped at file offset " + std::to_string(x->file_offset())).c_str() : "",
           Str(x->repack()).empty()       ? ""
           : Str(x->repack()) == "repack" ? " (repacked on upload)"
                                          : (" repack " + Str(x->repack())).c_str(),
           SplitText(x).c_str());
    }
  if (const auto* t = p.tensors())
    for (flatbuffers::uoffset_t i = 0; i < t->size(); ++i) {
      const auto* x = t->Get(i);
      std::string ne = "[";
      if (x->ne())
        for (flatbuffers::uoffset_t k = 0; k < x->ne()->size(); ++k)
          ne += (k ? ", " : "") + std::to_string(x->ne()->Get(k));
      std::string slice;
      if (const auto* s = x->slice()) {
        slice = " slice axis " + std::to_string(s->axis()) + " from " + std::to_string(s->begin()) + " of [";
        if (s->full_ne())
          for (flatbuffers::uoffset_t k = 0; k < s->full_ne()->size(); ++k)
            slice += (k ? ", " : "") + std::to_string(s->full_ne()->Get(k));
        slice += "]";
      }
      line("tensor %u: %s %s %s %s buffer %d offset %llu (%llu bytes) layer %d%s", i, Str(x->name()).c_str(),
           fb::EnumNameTensorKind(x->kind()), TypeName(x->type()).c_str(), (ne + "]").c_str(), x->buffer(),
           static_cast<unsigned long long>(x->offset()), static_cast<unsigned long long>(x->nbytes()),
           x->layer(), slice.c_str());
    }
  if (const auto* gs = p.graphs())
    for (const auto* g : *gs) {
      const auto* ts = g->tensors();
      const auto* be = p.backends();
      auto bname = [&](int b) {
        return be && b >= 0 && b < static_cast<int>(be->size()) ? Str(be->Get(b)->name())
                                                                : std::string("NULL");
      };
      line(
          "graph %s: max n_tokens %lld, n_kv %lld, n_outputs %lld%s; %u tensors, %u nodes, %u leafs, %u "
          "splits",
          Str(g->name()).c_str(), static_cast<long long>(g->max_tokens()),
          static_cast<long long>(g->max_kv()), static_cast<long long>(g->max_outputs()),
          g->max_kv_swa() > 0 ? (", n_kv_swa " + std::to_string(g->max_kv_swa())).c_str() : "",
          ts ? ts->size() : 0u, g->nodes() ? g->nodes()->size() : 0u, g->leafs() ? g->leafs()->size() : 0u,
          g->splits() ? g->splits()->size() : 0u);
      if (g->input_copies())
        for (const auto* ic : *g->input_copies()) {
          std::string cs;
          if (ic->copies())
            for (int c : *ic->copies()) {
              const auto* t = ts->Get(c);
              cs += std::string(cs.empty() ? "" : ", ") + Str(t->name()) + " (buffer " +
                    std::to_string(t->buffer()) + " offset " + std::to_string(t->offset()) + ")";
            }
          line("  input copies: %s on %s -> %s", Str(ts->Get(ic->tensor())->name()).c_str(),
               bname(ts->Get(ic->tensor())->backend()).c_str(), cs.c_str());
        }
      if (!g->splits()) continue;
      for (flatbuffers::uoffset_t s = 0; s < g->splits()->size(); ++s) {
        const auto* sp = g->splits()->Get(s);
        std::string in;
        if (sp->inputs())
          for (const auto* x : *sp->inputs()) {
            in += " [" + Str(ts->Get(x->tensor())->name()) + " -> " + Str(ts->Get(x->copy())->name());
            // Pipeline parallelism: the other instances (copy 0 is the one the nodes read).
            if (x->copies())
              for (flatbuffers::uoffset_t c = 1; c < x->copies()->size(); ++c)
                in += ", " + Str(ts->Get(x->copies()->Get(c))->name());
            in += "]";
          }
        line("  split %u: %s nodes [%u, %u) %u inputs%s", s, bname(sp->backend()).c_str(), sp->node_begin(),
             sp->node_end(), sp->inputs() ? sp->inputs()->size() : 0u, in.c_str());
        if (!nodes) continue;
        for (uint32_t k = sp->node_begin(); k < sp->node_end(); ++k) {
          const int id = g->nodes()->Get(k);
          const auto* t = ts->Get(id);
          std::string srcs;
          if (t->srcs())
            for (int sid : *t->srcs())
              srcs += " " + (sid >= 0 ? Str(ts->Get(sid)->name()) : std::string("-"));
          line("    node %u: %s = %s(%s) %s %s on %s buffer %d offset %llu [%s]", k, Str(t->name()).c_str(),
               OpName(t->op()).c_str(), srcs.empty() ? "" : srcs.substr(1).c_str(),
               TypeName(t->type()).c_str(), Shape(t->ne(), t->ne_swa()).c_str(), bname(t->backend()).c_str(),
               t->buffer(), static_cast<unsigned long long>(t->offset()), Str(t->cause()).c_str());
        }
      }
    }
  if (const auto* e = p.explain()) line("explain: %u records", e->size());
  return o;
}

/// The plan's buffers as JSON objects (tensor_split only where the plan has one).
ordered_json JsonBuffers(const fb::Plan& p) {
  ordered_json buffers = ordered_json::array();
  if (p.buffers())
    for (const auto* b : *p.buffers()) {
      buffers.push_back({{"name", Str(b->name())},
                         {"buft", Str(b->buft())},
                         {"device", b->device()},
                         {"usage", fb::EnumNameBufferUsage(b->usage())},
                         {"size", b->size()},
                         {"alignment", b->alignment()},
                         {"mapped", b->mapped()},
                         {"file_offset", b->file_offset()},
                         {"repack", Str(b->repack())}});
      if (b->tensor_split()) {  // row-split bufts with -ts only (absent: ggml's default split)
        ordered_json ts = ordered_json::array();
        for (float f : *b->tensor_split()) ts.push_back(f);
        buffers.back()["tensor_split"] = ts;
      }
    }
  return buffers;
}

/// The plan's weight and KV cache tensors as JSON objects.
ordered_json JsonTensors(const fb::Plan& p) {
  ordered_json tensors = ordered_json::array();
  if (p.tensors())
    for (const auto* t : *p.tensors()) {
      ordered_json ne = ordered_json::array();
      if (t->ne())
        for (int64_t v : *t->ne()) ne.push_back(v);
      tensors.push_back({{"name", Str(t->name())},
                         {"kind", fb::EnumNameTensorKind(t->kind())},
                         {"type", TypeName(t->type())},
                         {"ne", ne},
                         {"buffer", t->buffer()},
                         {"offset", t->offset()},
                         {"nbytes", t->nbytes()},
                         {"gguf_offset", t->gguf_offset()},
                         {"layer", t->layer()}});
      if (const auto* s = t->slice()) {
        ordered_json full = ordered_json::array();
        if (s->full_ne())
          for (int64_t v : *s->full_ne()) full.push_back(v);
        tensors.back()["slice"] = {{"axis", s->axis()}, {"begin", s->begin()}, {"full_ne", full}};
      }
    }
  return tensors;
}

/// One graph as a JSON object: its bounds, splits (inputs, their copies), input copies and, with
/// `nodes`, every tensor.
ordered_json JsonGraph(const fb::Graph& g, bool nodes) {
  ordered_json jg;
  jg["name"] = Str(g.name());
  jg["max_tokens"] = g.max_tokens();
  jg["max_kv"] = g.max_kv();
  if (g.max_kv_swa() > 0) jg["max_kv_swa"] = g.max_kv_swa();
  jg["max_outputs"] = g.max_outputs();
  jg["n_tensors"] = g.tensors() ? g.tensors()->size() : 0;
  jg["n_nodes"] = g.nodes() ? g.nodes()->size() : 0;
  jg["splits"] = ordered_json::array();
  if (g.splits())
    for (const auto* s : *g.splits()) {
      ordered_json in = ordered_json::array();
      if (s->inputs())
        for (const auto* x : *s->inputs()) {
          in.push_back({{"tensor", Str(g.tensors()->Get(x->tensor())->name())},
                        {"copy", Str(g.tensors()->Get(x->copy())->name())}});
          if (x->copies()) {  // pipeline parallelism: every instance
            ordered_json cs = ordered_json::array();
            for (int c : *x->copies()) cs.push_back(Str(g.tensors()->Get(c)->name()));
            in.back()["copies"] = cs;
          }
        }
      jg["splits"].push_back({{"backend", s->backend()},
                              {"node_begin", s->node_begin()},
                              {"node_end", s->node_end()},
                              {"inputs", in}});
    }
  if (g.input_copies()) {
    jg["input_copies"] = ordered_json::array();
    for (const auto* ic : *g.input_copies()) {
      ordered_json cs = ordered_json::array();
      if (ic->copies())
        for (int c : *ic->copies())
          cs.push_back({{"name", Str(g.tensors()->Get(c)->name())},
                        {"buffer", g.tensors()->Get(c)->buffer()},
                        {"offset", g.tensors()->Get(c)->offset()}});
      jg["input_copies"].push_back({{"tensor", Str(g.tensors()->Get(ic->tensor())->name())}, {"copies", cs}});
    }
  }
  if (nodes && g.tensors()) {
    jg["tensors"] = ordered_json::array();
    for (const auto* t : *g.tensors()) {
      ordered_json srcs = ordered_json::array();
      if (t->srcs())
        for (int s : *t->srcs()) srcs.push_back(s);
      jg["tensors"].push_back({{"name", Str(t->name())},
                               {"kind", fb::EnumNameTensorKind(t->kind())},
                               {"op", OpName(t->op())},
                               {"type", TypeName(t->type())},
                               {"ne", Shape(t->ne(), t->ne_swa())},
                               {"srcs", srcs},
                               {"backend", t->backend()},
                               {"cause", Str(t->cause())},
                               {"buffer", t->buffer()},
                               {"offset", t->offset()}});
    }
  }
  return jg;
}

/// The placement records (--explain=json's form) as JSON objects.
ordered_json JsonExplain(const fb::Plan& p) {
  ordered_json explain = ordered_json::array();
  if (p.explain())
    for (const auto* e : *p.explain()) {
      // The records as plan-model --explain=json prints them (planner/lib/placement/explain.cpp):
      // each rejected "<candidate>: <reason>" as {candidate, reason}.
      ordered_json rej = ordered_json::array();
      if (e->rejected())
        for (const auto* r : *e->rejected()) {
          const std::string text = r->str();
          const size_t c = text.find(": ");
          rej.push_back({{"candidate", c == std::string::npos ? text : text.substr(0, c)},
                         {"reason", c == std::string::npos ? std::string() : text.substr(c + 2)}});
        }
      explain.push_back({{"subject", Str(e->subject())},
                         {"graph", Str(e->graph())},
                         {"device", Str(e->device())},
                         {"buffer_type", Str(e->buft())},
                         {"rule", Str(e->rule())},
                         {"code", Str(e->code())},
                         {"rejected", rej}});
    }
  return explain;
}

ordered_json Json(const fb::Plan& p, bool nodes) {
  ordered_json j;
  j["schema_version"] = p.schema_version();
  if (p.content_xxh64() != 0) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(p.content_xxh64()));
    j["content_xxh64"] = hex;
  }
  j["generator"] = Str(p.generator());
  if (const auto* m = p.model())
    j["model"] = {{"path", Str(m->path())},           {"architecture", Str(m->architecture())},
                  {"name", Str(m->name())},           {"n_params", m->n_params()},
                  {"file_size", m->file_size()},      {"header_size", m->header_size()},
                  {"header_xxh64", m->header_xxh64()}};
  if (const auto* c = p.context())
    j["context"] = {{"n_ctx", c->n_ctx()},
                    {"n_batch", c->n_batch()},
                    {"n_ubatch", c->n_ubatch()},
                    {"type_k", TypeName(c->type_k())},
                    {"type_v", TypeName(c->type_v())},
                    {"offload_kqv", c->offload_kqv()},
                    {"n_layer", c->n_layer()},
                    {"n_vocab", c->n_vocab()},
                    {"n_embd", c->n_embd()},
                    {"flash_attn", c->flash_attn()}};
  if (const auto* c = p.context(); c && c->n_ctx_swa() > 0) {
    j["context"]["n_ctx_swa"] = c->n_ctx_swa();
    j["context"]["swa_full"] = c->swa_full();
  }
  j["flags"] = Str(p.flags());
  j["n_copies"] = p.n_copies();
  j["devices"] = ordered_json::array();
  if (p.devices())
    for (const auto* d : *p.devices())
      j["devices"].push_back({{"name", Str(d->name())},
                              {"description", Str(d->description())},
                              {"type", fb::EnumNameDeviceType(d->type())},
                              {"memory_total", d->memory_total()},
                              {"memory_free", d->memory_free()}});
  j["backends"] = ordered_json::array();
  if (p.backends())
    for (const auto* b : *p.backends())
      j["backends"].push_back(
          {{"name", Str(b->name())}, {"device", b->device()}, {"compute_buffer", b->compute_buffer()}});
  j["buffers"] = JsonBuffers(p);
  if (p.tp_n_ranks() > 1) {
    j["tensor_split_ranks"] = ordered_json::array();
    for (const fb::Plan* r : RankPlans(p))
      j["tensor_split_ranks"].push_back({{"rank", r->tp_rank()},
                                         {"weights", UsageBytes(*r, fb::BufferUsage::Weights)},
                                         {"kv", UsageBytes(*r, fb::BufferUsage::KvCache)},
                                         {"compute", UsageBytes(*r, fb::BufferUsage::Compute)},
                                         {"output", UsageBytes(*r, fb::BufferUsage::Output)}});
  }
  j["tensors"] = JsonTensors(p);
  j["graphs"] = ordered_json::array();
  if (p.graphs())
    for (const auto* g : *p.graphs()) j["graphs"].push_back(JsonGraph(*g, nodes));
  j["explain"] = JsonExplain(p);
  return j;
}

}  // namespace

namespace {

// -m MODEL: the plan against the model it is to run with (identity, weights, sliding window), as
// stowage-run checks it. 0, or 1 after a one-line error.
int CheckModel(const stowage::PlanFile& plan, const std::string& model) {
  auto gguf = stowage::GgufFile::Open(model);
  stowage::Status st = gguf.ok() ? stowage::CheckPlanAgainstModel(plan, **gguf) : gguf.status();
  if (st.ok()) return 0;
  std::fprintf(stderr, "plan-dump: error: %s\n", st.message().c_str());
  return 1;
}

// --seal: the plan's bytes with Plan.content_xxh64 recomputed (SealPlan), verified like any plan
// (and against `model` when one is given), written atomically to `out` (never a partial file).
int Seal(const std::string& path, const std::string& out, const std::string& model) {
  auto read = stowage::ReadPlanBytes(path);
  if (!read.ok()) {
    std::fprintf(stderr, "plan-dump: error: %s\n", read.status().message().c_str());
    return 1;
  }
  std::vector<uint8_t> bytes = std::move(*read);
  if (stowage::Status st = stowage::SealPlan(bytes.data(), bytes.size()); !st.ok()) {
    std::fprintf(stderr, "plan-dump: error: %s: %s\n", path.c_str(), st.message().c_str());
    return 1;
  }
  auto plan = stowage::PlanFile::FromBytes(bytes, path);
  if (!plan.ok()) {
    std::fprintf(stderr, "plan-dump: error: %s\n", plan.status().message().c_str());
    return 1;
  }
  if (!model.empty() && CheckModel(**plan, model) != 0) return 1;
  if (stowage::Status st = stowage::WriteFileAtomic(out, bytes); !st.ok()) {
    std::fprintf(stderr, "plan-dump: error: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{
      "plan-dump: print a Stowage plan file, verified first as stowage-run verifies it (against the model "
      "only with -m)"};
  std::string path;
  bool json = false, nodes = false, check_memory = false, svg = false;
  app.add_option("plan", path, "plan file written by plan-model -o")->required();
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_flag("--nodes", nodes, "also print every node of every split (text) or every graph tensor (JSON)");
  app.add_flag(
         "--svg", svg,
         "print the plan as an SVG picture: memory bars per device, tensor roles x layers by buffer type "
         "(repeated layers grouped), the splits of each graph with their copies")
      ->excludes("--json")
      ->excludes("--nodes");
  app.add_flag(
      "--check-memory", check_memory,
      "check that no two tensors live at the same time share buffer bytes (compute buffers; weights and "
      "KV cache of allocated buffers); exit 1 if any do; with --json, {ok, tensors_checked, conflicts}");
  std::string model;
  app.add_option(
      "-m,--model", model,
      "also check the plan against this GGUF model as stowage-run does (identity, every weight's type, "
      "shape and offset); without it the model is not checked");
  std::string seal_out;
  app.add_option(
         "--seal", seal_out,
         "write the plan to this file with its checksum (content_xxh64) recomputed, after a deliberate edit "
         "(e.g. a flatc JSON round trip); the result must pass every other check")
      ->excludes("--json")
      ->excludes("--nodes")
      ->excludes("--check-memory");
  if (int rc = stowage::tools::ParseWithAliases(app, argc, argv, {}); rc >= 0) return rc;
  if (app.count("--seal") > 0) {
    if (seal_out.empty()) {
      std::fprintf(stderr, "plan-dump: error: --seal needs an output file name (it was empty)\n");
      return 1;
    }
    return Seal(path, seal_out, model);
  }
  // --check-memory lists every overlap itself: every other check first.
  auto plan = stowage::PlanFile::Load(
      path, check_memory ? stowage::PlanChecks::kAllButOverlaps : stowage::PlanChecks::kAll);
  if (!plan.ok()) {
    std::fprintf(stderr, "plan-dump: error: %s\n", plan.status().message().c_str());
    return 1;
  }
  if (!model.empty() && CheckModel(**plan, model) != 0) return 1;
  const fb::Plan& p = (*plan)->root();
  if (check_memory) {
    const stowage::MemoryCheckReport rep = stowage::CheckComputeMemory(**plan);
    if (json) {  // {"ok", "tensors_checked", "conflicts"}; exit status as the text form
      ordered_json j = {{"ok", rep.conflicts.empty()},
                        {"tensors_checked", rep.tensors_checked},
                        {"conflicts", rep.conflicts}};
      std::printf("%s\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace).c_str());
      return rep.conflicts.empty() ? 0 : 1;
    }
    for (const auto& c : rep.conflicts) std::printf("plan-dump: conflict: %s\n", c.c_str());
    if (!rep.conflicts.empty()) return 1;
    std::printf("plan-dump: compute memory OK (%d tensors checked)\n", rep.tensors_checked);
    return 0;
  }
  if (svg) {
    std::printf("%s", stowage::tools::PlanSvg(p).c_str());
    return 0;
  }
  // Strings in a plan are bytes from the GGUF (general.name, tensor names) and the command line:
  // not necessarily UTF-8. JSON output replaces invalid sequences by U+FFFD instead of throwing.
  if (json)
    std::printf("%s\n", Json(p, nodes).dump(2, ' ', false, ordered_json::error_handler_t::replace).c_str());
  else
    std::printf("%s", Text(p, nodes).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("plan-dump", Run, argc, argv); }
