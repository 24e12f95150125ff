// plan-diff: what moved between two plan files (e.g. -ngl 40 vs -ngl 41, or two llama.cpp
// compatibility modes): the planning flags and context, the devices, every buffer whose size
// changed (or that exists in one plan only), every weight and KV cache tensor whose buffer type or
// device changed, and per graph (pp, tg) the nodes whose backend changed, the splits (count and
// sequence of backends), their inputs and the input copies made for them. Both plans are verified
// first by the runtime's own verifier (stowage::PlanFile::Load, as plan-dump and stowage-run): a
// plan it refuses is its one-line error and exit status 1.
//
// Identity: buffers by (name, usage), tensors by name, graph nodes by name and occurrence (the
// builders name every node; a name used twice in a graph is told apart by its order: "name#1").
// Tensors and nodes are listed in plan order, grouped by (from, to). Text by
// default; --json prints one object with the same content (nlohmann, ordered keys).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llama_args.h"
#include "mib_text.h"
#include "stdout_check.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/plan.h"

namespace fb = stowage::plan;
using nlohmann::ordered_json;

namespace {

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::string Mib(int64_t bytes, bool sign) {
  return stowage::tools::MibText(static_cast<double>(bytes), sign) + " MiB";
}

/// Where a weight or KV cache tensor lives: its buffer's name (buffer type as llama.cpp prints it)
/// and device.
struct Home {
  std::string buffer, device;
  uint64_t nbytes = 0;
  bool operator!=(const Home& o) const { return buffer != o.buffer || device != o.device; }
  std::string Key() const { return buffer + "\n" + device; }
};

std::string DeviceName(const fb::Plan& p, int d) {
  return p.devices() && d >= 0 && d < static_cast<int>(p.devices()->size()) ? Str(p.devices()->Get(d)->name())
                                                                            : "device#" + std::to_string(d);
}

/// Values in plan order, with a lookup by key.
template <typename T>
struct Ordered {
  std::vector<std::pair<std::string, T>> items;
  std::map<std::string, size_t> index;
  void Add(const std::string& key, T v) {
    if (index.emplace(key, items.size()).second) items.emplace_back(key, std::move(v));
  }
  const T* Find(const std::string& key) const {
    const auto it = index.find(key);
    return it == index.end() ? nullptr : &items[it->second].second;
  }
};

Ordered<Home> Homes(const fb::Plan& p) {
  Ordered<Home> out;
  if (!p.tensors()) return out;
  for (const auto* t : *p.tensors()) {
    Home h;
    h.nbytes = t->nbytes();
    if (p.buffers() && t->buffer() >= 0 && t->buffer() < static_cast<int>(p.buffers()->size())) {
      const auto* b = p.buffers()->Get(t->buffer());
      h.buffer = Str(b->name());
      h.device = DeviceName(p, b->device());
    }
    out.Add(Str(t->name()), h);
  }
  return out;
}

/// Buffers by "name usage" (one per buffer type and usage in a plan).
std::map<std::string, uint64_t> Buffers(const fb::Plan& p) {
  std::map<std::string, uint64_t> out;
  if (p.buffers())
    for (const auto* b : *p.buffers())
      out[Str(b->name()) + " " + fb::EnumNameBufferUsage(b->usage())] += b->size();
  return out;
}

/// A graph's nodes by "name" or "name#k" (the k-th repeat), each with its backend's name.
Ordered<std::string> NodeBackends(const fb::Plan& p, const fb::Graph& g) {
  Ordered<std::string> out;
  std::map<std::string, int> seen;
  if (!g.nodes() || !g.tensors()) return out;
  for (int id : *g.nodes()) {
    const auto* t = g.tensors()->Get(id);
    std::string key = Str(t->name());
    if (const int k = seen[key]++; k > 0) key += "#" + std::to_string(k);
    const int be = t->backend();
    out.Add(key, p.backends() && be >= 0 && be < static_cast<int>(p.backends()->size())
                     ? Str(p.backends()->Get(be)->name())
                     : "NULL");
  }
  return out;
}

/// A graph's split summary: each split as "CPU[0,12)" (backend, node range), split inputs, input
/// instances (pipeline parallelism's copies included).
struct SplitSummary {
  int splits = 0, inputs = 0, copies = 0;
  std::vector<std::string> sequence;
};

SplitSummary Splits(const fb::Plan& p, const fb::Graph& g) {
  SplitSummary s;
  if (!g.splits()) return s;
  for (const auto* sp : *g.splits()) {
    ++s.splits;
    const int be = sp->backend();
    const std::string name = p.backends() && be >= 0 && be < static_cast<int>(p.backends()->size())
                                 ? Str(p.backends()->Get(be)->name())
                                 : "NULL";
    s.sequence.push_back(name + "[" + std::to_string(sp->node_begin()) + "," +
                         std::to_string(sp->node_end()) + ")");
    if (!sp->inputs()) continue;
    for (const auto* in : *sp->inputs()) {
      ++s.inputs;
      s.copies += in->copies() ? static_cast<int>(in->copies()->size()) : 1;
    }
  }
  return s;
}

const fb::Graph* FindGraph(const fb::Plan& p, const std::string& name) {
  if (p.graphs())
    for (const auto* g : *p.graphs())
      if (Str(g->name()) == name) return g;
  return nullptr;
}

/// The header fields compared as text: flags, model identity, context, scheduler, devices.
std::vector<std::pair<std::string, std::string>> HeaderFields(const fb::Plan& p) {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("flags", Str(p.flags()));
  if (const auto* m = p.model()) {
    f.emplace_back("model", Str(m->path()));
    f.emplace_back("model file_size", std::to_string(m->file_size()));
    f.emplace_back("model header_xxh64", std::to_string(m->header_xxh64()));
  }
  if (const auto* c = p.context()) {
    f.emplace_back("n_ctx", std::to_string(c->n_ctx()));
    f.emplace_back("n_batch", std::to_string(c->n_batch()));
    f.emplace_back("n_ubatch", std::to_string(c->n_ubatch()));
    f.emplace_back("type_k", std::to_string(c->type_k()));
    f.emplace_back("type_v", std::to_string(c->type_v()));
    f.emplace_back("offload_kqv", std::to_string(c->offload_kqv()));
    f.emplace_back("flash_attn", std::to_string(c->flash_attn()));
    f.emplace_back("n_ctx_swa", std::to_string(c->n_ctx_swa()));
  }
  f.emplace_back("n_copies", std::to_string(p.n_copies()));
  std::string devs;
  if (p.devices())
    for (const auto* d : *p.devices()) devs += (devs.empty() ? "" : ",") + Str(d->name());
  f.emplace_back("devices", devs);
  return f;
}

/// The differences of `a` and `b` as one JSON object (the text form prints the same).
ordered_json Diff(const fb::Plan& a, const fb::Plan& b) {
  ordered_json j;
  j["header"] = ordered_json::array();
  const auto fa = HeaderFields(a), fb_ = HeaderFields(b);
  for (size_t i = 0; i < fa.size() || i < fb_.size(); ++i) {
    const std::string name = i < fa.size() ? fa[i].first : fb_[i].first;
    std::string va, vb;
    for (const auto& [k, v] : fa)
      if (k == name) va = v;
    for (const auto& [k, v] : fb_)
      if (k == name) vb = v;
    if (va != vb) j["header"].push_back({{"field", name}, {"a", va}, {"b", vb}});
  }
  // Buffers: sizes changed, or present in one plan only (size 0 in the other).
  j["buffers"] = ordered_json::array();
  const auto ba = Buffers(a), bb = Buffers(b);
  std::map<std::string, std::pair<uint64_t, uint64_t>> sizes;
  for (const auto& [k, v] : ba) sizes[k].first = v;
  for (const auto& [k, v] : bb) sizes[k].second = v;
  for (const auto& [k, v] : sizes)
    if (v.first != v.second || ba.count(k) != bb.count(k))
      j["buffers"].push_back({{"buffer", k},
                              {"a", ba.count(k) ? ordered_json(v.first) : ordered_json(nullptr)},
                              {"b", bb.count(k) ? ordered_json(v.second) : ordered_json(nullptr)},
                              {"delta", static_cast<int64_t>(v.second) - static_cast<int64_t>(v.first)}});
  // Tensors whose buffer type or device changed, grouped by (from, to).
  const auto ha = Homes(a), hb = Homes(b);
  struct Moved {
    Home from, to;
    std::vector<std::string> names;
    uint64_t bytes = 0;  // in B
  };
  std::map<std::pair<std::string, std::string>, Moved> moved;
  int only_a = 0, only_b = 0;
  for (const auto& [name, h] : ha.items) {
    const Home* other = hb.Find(name);
    if (!other) {
      ++only_a;
      continue;
    }
    if (h != *other) {
      Moved& m = moved[{h.Key(), other->Key()}];
      m.from = h;
      m.to = *other;
      m.names.push_back(name);
      m.bytes += other->nbytes;
    }
  }
  for (const auto& [name, h] : hb.items)
    if (!ha.Find(name)) ++only_b;
  j["tensors"] = ordered_json::array();
  for (const auto& [pair, m] : moved)
    j["tensors"].push_back({{"from", {{"buffer", m.from.buffer}, {"device", m.from.device}}},
                            {"to", {{"buffer", m.to.buffer}, {"device", m.to.device}}},
                            {"bytes", m.bytes},
                            {"names", m.names}});
  j["tensors_only_a"] = only_a;
  j["tensors_only_b"] = only_b;
  // Graphs: nodes whose backend changed, and the splits.
  j["graphs"] = ordered_json::array();
  if (a.graphs())
    for (const auto* ga : *a.graphs()) {
      const std::string gname = Str(ga->name());
      const fb::Graph* gb = FindGraph(b, gname);
      if (!gb) continue;
      const auto na = NodeBackends(a, *ga), nb = NodeBackends(b, *gb);
      std::map<std::pair<std::string, std::string>, std::vector<std::string>> nmoved;
      int nodes_only_a = 0, nodes_only_b = 0;
      for (const auto& [name, be] : na.items) {
        const std::string* other = nb.Find(name);
        if (!other)
          ++nodes_only_a;
        else if (*other != be)
          nmoved[{be, *other}].push_back(name);
      }
      for (const auto& [name, be] : nb.items)
        if (!na.Find(name)) ++nodes_only_b;
      ordered_json jm = ordered_json::array();
      for (const auto& [pair, names] : nmoved)
        jm.push_back({{"from", pair.first}, {"to", pair.second}, {"names", names}});
      const SplitSummary sa = Splits(a, *ga), sb = Splits(b, *gb);
      // The splits that differ: what lies between the common first and last ones (at 671B scale a
      // graph has hundreds of splits and a one-layer change touches a few).
      size_t head = 0, tail = 0;
      const size_t na_ = sa.sequence.size(), nb_ = sb.sequence.size();
      while (head < na_ && head < nb_ && sa.sequence[head] == sb.sequence[head]) ++head;
      while (tail < na_ - head && tail < nb_ - head &&
             sa.sequence[na_ - 1 - tail] == sb.sequence[nb_ - 1 - tail])
        ++tail;
      const std::vector<std::string> wa(sa.sequence.begin() + head, sa.sequence.end() - tail),
          wb(sb.sequence.begin() + head, sb.sequence.end() - tail);
      j["graphs"].push_back({{"name", gname},
                             {"nodes_moved", jm},
                             {"nodes_only_a", nodes_only_a},
                             {"nodes_only_b", nodes_only_b},
                             {"splits", {{"a", sa.splits}, {"b", sb.splits}}},
                             {"split_inputs", {{"a", sa.inputs}, {"b", sb.inputs}}},
                             {"input_copies", {{"a", sa.copies}, {"b", sb.copies}}},
                             {"splits_same_first", head},
                             {"splits_same_last", tail},
                             {"splits_differing", {{"a", wa}, {"b", wb}}}});
    }
  return j;
}

bool GraphChanged(const ordered_json& g) {
  return !g["nodes_moved"].empty() || g["nodes_only_a"] != 0 || g["nodes_only_b"] != 0 ||
         !g["splits_differing"]["a"].empty() || !g["splits_differing"]["b"].empty() ||
         g["input_copies"]["a"] != g["input_copies"]["b"];
}

/// Names joined with `sep`, the first `max` of them, then "... (N more)"; "(none)" for none.
std::string Names(const ordered_json& names, size_t max, const char* sep = ", ") {
  if (names.empty()) return "(none)";
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? sep : "") + names[i].get<std::string>();
  if (names.size() > max) s += sep + std::string("... (") + std::to_string(names.size() - max) + " more)";
  return s;
}

std::string Text(const ordered_json& d, const std::string& pa, const std::string& pb, bool all_names) {
  std::string o = "plan-diff: " + pa + " -> " + pb + "\n";
  const size_t max = all_names ? SIZE_MAX : 8;
  for (const auto& h : d["header"])
    o += h["field"].get<std::string>() + ": " + h["a"].get<std::string>() + " -> " +
         h["b"].get<std::string>() + "\n";
  for (const auto& b : d["buffers"]) {
    const std::string name = b["buffer"];
    if (b["a"].is_null())
      o += "buffer " + name + ": only in B, " + std::to_string(b["b"].get<uint64_t>()) + " bytes\n";
    else if (b["b"].is_null())
      o += "buffer " + name + ": only in A, " + std::to_string(b["a"].get<uint64_t>()) + " bytes\n";
    else
      o += "buffer " + name + ": " + std::to_string(b["a"].get<uint64_t>()) + " -> " +
           std::to_string(b["b"].get<uint64_t>()) + " bytes (" + Mib(b["delta"].get<int64_t>(), true) + ")\n";
  }
  auto home = [](const ordered_json& h) {
    const std::string b = h["buffer"], dev = h["device"];
    return b == dev ? b : b + " (" + dev + ")";
  };
  for (const auto& t : d["tensors"])
    o += "tensors " + home(t["from"]) + " -> " + home(t["to"]) + ": " + std::to_string(t["names"].size()) +
         " (" + Mib(t["bytes"].get<int64_t>(), false) + "): " + Names(t["names"], max) + "\n";
  if (d["tensors_only_a"] != 0 || d["tensors_only_b"] != 0)
    o += "tensors only in A: " + d["tensors_only_a"].dump() + ", only in B: " + d["tensors_only_b"].dump() +
         "\n";
  for (const auto& g : d["graphs"]) {
    if (!GraphChanged(g)) continue;
    const std::string gn = g["name"];
    for (const auto& m : g["nodes_moved"])
      o += "graph " + gn + " nodes " + m["from"].get<std::string>() + " -> " + m["to"].get<std::string>() +
           ": " + std::to_string(m["names"].size()) + ": " + Names(m["names"], max) + "\n";
    if (g["nodes_only_a"] != 0 || g["nodes_only_b"] != 0)
      o += "graph " + gn + " nodes only in A: " + g["nodes_only_a"].dump() +
           ", only in B: " + g["nodes_only_b"].dump() + "\n";
    o += "graph " + gn + " splits " + g["splits"]["a"].dump() + " -> " + g["splits"]["b"].dump() +
         ", split inputs " + g["split_inputs"]["a"].dump() + " -> " + g["split_inputs"]["b"].dump() +
         ", input copies " + g["input_copies"]["a"].dump() + " -> " + g["input_copies"]["b"].dump() + "\n";
    o += "  same first " + g["splits_same_first"].dump() + " and last " + g["splits_same_last"].dump() +
         " splits; between them A: " + Names(g["splits_differing"]["a"], max, " ") +
         "; B: " + Names(g["splits_differing"]["b"], max, " ") + "\n";
  }
  bool same = d["header"].empty() && d["buffers"].empty() && d["tensors"].empty() &&
              d["tensors_only_a"] == 0 && d["tensors_only_b"] == 0;
  for (const auto& g : d["graphs"]) same = same && !GraphChanged(g);
  if (same) o += "no difference in placement, buffers or splits\n";
  return o;
}

int Run(int argc, char** argv) {
  CLI::App app{
      "plan-diff: what moved between two plan files (flags, buffers, tensors, nodes, splits), both verified "
      "first as stowage-run verifies a plan"};
  std::string pa, pb;
  bool json = false, all = false;
  app.add_option("a", pa, "first plan file (A)")->required();
  app.add_option("b", pb, "second plan file (B)")->required();
  app.add_flag("--json", json, "print one JSON object instead of text");
  app.add_flag("--all", all, "text: list every moved tensor and node (default: the first 8 of each group)");
  if (int rc = stowage::tools::ParseWithAliases(app, argc, argv, {}); rc >= 0) return rc;
  auto a = stowage::PlanFile::Load(pa);
  if (!a.ok()) {
    std::fprintf(stderr, "plan-diff: error: %s\n", a.status().message().c_str());
    return 1;
  }
  auto b = stowage::PlanFile::Load(pb);
  if (!b.ok()) {
    std::fprintf(stderr, "plan-diff: error: %s\n", b.status().message().c_str());
    return 1;
  }
  const ordered_json d = Diff((*a)->root(), (*b)->root());
  // Names come from the GGUF and the command line: not necessarily UTF-8 (as plan-dump --json).
  if (json) {
    ordered_json out = {{"a", pa}, {"b", pb}};
    out.update(d);
    std::printf("%s\n", out.dump(2, ' ', false, ordered_json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s", Text(d, pa, pb, all).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("plan-diff", Run, argc, argv); }
