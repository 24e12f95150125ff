#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/ggml_ops.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/plan.h"

namespace stowage {
namespace {

constexpr int64_t kStart = -1;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::string Time(int64_t t) {
  if (t == kStart) return "start";
  if (t == kNever) return "end";
  return (t % 2 ? "node " : "split start at node ") + std::to_string(t / 2);
}

struct Owned {
  int id = -1;
  int buffer = -1;
  uint64_t begin = 0, end = 0;  // bytes [begin, end)
  int64_t born = kStart, dies = kNever;
};

// The live ranges of one graph's tensors, in the times Time() names (2 * node + 1: the node runs;
// 2 * node: the split starting at that node copies its inputs).
struct GraphLife {
  const flatbuffers::Vector<flatbuffers::Offset<plan::GraphTensor>>* ts = nullptr;
  size_t nt = 0;
  std::vector<int64_t> born, last_read;
  std::vector<char> pinned;  // never freed (n_copies > 1 instances)
  std::vector<int> node_pos;

  // The tensor owning a tensor's memory (views resolved; a cycle or a bad index ends the walk).
  int Owner(int t) const {
    for (size_t step = 0; step <= nt; ++step) {
      const int v = ts->Get(t)->view_src();
      if (v < 0 || static_cast<size_t>(v) >= nt) return t;
      t = v;
    }
    return t;
  }
};

// CheckComputeMemory's steps over one plan; conflicts past max_conflicts are counted in `dropped`.
class MemoryChecker {
 public:
  MemoryChecker(const plan::Plan& p, size_t max_conflicts, bool overlaps_only)
      : p_(p),
        max_conflicts_(max_conflicts),
        overlaps_only_(overlaps_only),
        buffers_(p.buffers()),
        n_buf_(buffers_ ? buffers_->size() : 0),
        n_copies_(p.n_copies()) {}

  MemoryCheckReport Run() {
    CheckGlobalTensors();
    if (!p_.graphs()) return rep_;  // (without the "... and N more" line, as it always was)
    for (const auto* g : *p_.graphs()) CheckGraph(*g);
    if (dropped_ > 0) rep_.conflicts.push_back("... and " + std::to_string(dropped_) + " more");
    return rep_;
  }

 private:
  void Conflict(const std::string& s) {
    if (rep_.conflicts.size() < max_conflicts_)
      rep_.conflicts.push_back(s);
    else
      ++dropped_;
  }

  // Weights and KV cache live for the whole run: in an allocated (not mapped) buffer no two may
  // share a byte, unless they are the same data (one weight listed twice, same file offset).
  void CheckGlobalTensors() {
    const auto* gt = p_.tensors();
    if (!gt) return;
    struct Range {
      uint64_t begin, end, gguf;
      int id;
    };
    std::vector<std::vector<Range>> per_buffer(n_buf_);
    for (flatbuffers::uoffset_t i = 0; i < gt->size(); ++i) {
      const auto* t = gt->Get(i);
      if (t->buffer() < 0 || static_cast<size_t>(t->buffer()) >= n_buf_ ||
          buffers_->Get(t->buffer())->mapped())
        continue;
      if (t->nbytes() == 0 || t->offset() + t->nbytes() < t->offset())
        continue;  // the verifier bounds the rest
      // A weight group in its parts' buffer is their union (the verifier checked the layout).
      if (t->parts() && t->parts()->size() > 0 && t->parts()->Get(0) >= 0 &&
          static_cast<flatbuffers::uoffset_t>(t->parts()->Get(0)) < gt->size() &&
          gt->Get(t->parts()->Get(0))->buffer() == t->buffer())
        continue;
      per_buffer[t->buffer()].push_back(
          {t->offset(), t->offset() + t->nbytes(), t->gguf_offset(), static_cast<int>(i)});
    }
    for (size_t b = 0; b < n_buf_; ++b) {
      auto& v = per_buffer[b];
      std::sort(v.begin(), v.end(), [](const Range& x, const Range& y) { return x.begin < y.begin; });
      size_t far = 0;  // among the ranges before i, the one reaching furthest
      for (size_t i = 1; i < v.size(); ++i) {
        if (v[i - 1].end > v[far].end) far = i - 1;
        const Range* prev = &v[far];
        if (v[i].begin >= prev->end) continue;
        // One weight listed twice (same file offset); never a KV cache tensor (their gguf_offset is
        // 0: two layers' caches at one offset shared their cells).
        if (v[i].begin == prev->begin && v[i].end == prev->end && v[i].gguf == prev->gguf &&
            gt->Get(v[i].id)->kind() == plan::TensorKind::Weight &&
            gt->Get(prev->id)->kind() == plan::TensorKind::Weight)
          continue;
        Conflict("tensors: buffer " + std::to_string(b) + " '" + Str(buffers_->Get(b)->name()) + "': '" +
                 Str(gt->Get(prev->id)->name()) + "' [" + std::to_string(prev->begin) + ", " +
                 std::to_string(prev->end) + ") overlaps '" + Str(gt->Get(v[i].id)->name()) + "' [" +
                 std::to_string(v[i].begin) + ", " + std::to_string(v[i].end) + ")");
      }
    }
  }

  void CheckGraph(const plan::Graph& g) {
    const auto* ts = g.tensors();
    const size_t nt = ts ? ts->size() : 0;
    if (nt == 0 || !g.nodes()) return;
    const GraphLife life = Lifetimes(g);
    std::vector<Owned> owned = ComputedTensors(g, life);
    rep_.tensors_checked += static_cast<int>(owned.size());
    AddGlobalTensors(owned);
    CheckOverlaps(g, life, owned);
  }

  // When each tensor of `g` is written first (its node, a split's input copy, or before the graph:
  // leafs, inputs, pipeline instances) and read last.
  GraphLife Lifetimes(const plan::Graph& g) const {
    GraphLife life;
    life.ts = g.tensors();
    const size_t nt = life.nt = life.ts->size();
    life.born.assign(nt, kStart);
    life.last_read.assign(nt, -2);
    life.pinned.assign(nt, 0);
    life.node_pos.assign(nt, -1);
    std::vector<int64_t>& born = life.born;
    std::vector<int64_t>& last_read = life.last_read;
    std::vector<char>& pinned = life.pinned;
    std::vector<int>& node_pos = life.node_pos;
    const auto* ts = life.ts;
    const auto* nodes = g.nodes();
    for (uint32_t i = 0; i < nodes->size(); ++i) {
      const int id = nodes->Get(i);
      if (id < 0 || static_cast<size_t>(id) >= nt) continue;
      if (node_pos[id] < 0) {
        node_pos[id] = static_cast<int>(i);
        born[id] = 2 * int64_t(i) + 1;
      }
      if (const auto* srcs = ts->Get(id)->srcs())
        for (int32_t s : *srcs)
          if (s >= 0 && static_cast<size_t>(s) < nt) {
            const int o = life.Owner(s);
            last_read[o] = std::max<int64_t>(last_read[o], 2 * int64_t(i) + 1);
          }
    }
    if (g.leafs())
      for (int32_t l : *g.leafs())
        if (l >= 0 && static_cast<size_t>(l) < nt) born[l] = kStart;
    for (size_t t = 0; t < nt; ++t)
      if (ts->Get(t)->kind() == plan::TensorKind::Input) born[t] = kStart;
    if (g.splits())
      for (const auto* sp : *g.splits()) {
        if (!sp->inputs()) continue;
        const int64_t at = 2 * int64_t(sp->node_begin());
        for (const auto* in : *sp->inputs()) {
          if (in->tensor() >= 0 && static_cast<size_t>(in->tensor()) < nt) {
            const int o = life.Owner(in->tensor());
            last_read[o] = std::max(last_read[o], at);
          }
          if (in->copy() >= 0 && static_cast<size_t>(in->copy()) < nt && node_pos[in->copy()] < 0)
            born[in->copy()] = n_copies_ > 1 ? kStart : at;
          if (n_copies_ > 1 && in->copies())
            for (int32_t c : *in->copies())
              if (c >= 0 && static_cast<size_t>(c) < nt) {
                born[c] = kStart;
                pinned[c] = 1;
              }
        }
      }
    if (n_copies_ > 1 && g.input_copies())
      for (const auto* ic : *g.input_copies())
        if (ic->copies())
          for (int32_t c : *ic->copies())
            if (c >= 0 && static_cast<size_t>(c) < nt) {
              born[c] = kStart;
              pinned[c] = 1;
            }
    return life;
  }

  // The graph's tensors that own bytes of an allocated buffer, each at its worst-case size with its
  // live range; a size that cannot be computed or falls outside the buffer is a conflict (unless
  // overlaps_only).
  std::vector<Owned> ComputedTensors(const plan::Graph& g, const GraphLife& life) {
    const std::string gname = Str(g.name());
    const auto* ts = life.ts;
    // Each dimension at its largest over the symbol values a session binds (n_tokens, n_kv and
    // n_outputs from 1 to the graph's maxima, kv_head from 0 to n_ctx - 1; n_kv_swa from 1 to
    // max_kv_swa, kv_head_swa from 0 to n_ctx_swa - 1): each term of the affine DimExpr at the end
    // of its symbol's range that makes it largest.
    const int64_t n_ctx = p_.context() ? p_.context()->n_ctx() : 1;
    const int64_t n_ctx_swa = p_.context() ? p_.context()->n_ctx_swa() : 0;
    const int64_t lo[6] = {1, 1, 0, 1, 1, 0};
    const int64_t hi[6] = {g.max_tokens(),  g.max_kv(),     std::max<int64_t>(0, n_ctx - 1),
                           g.max_outputs(), g.max_kv_swa(), std::max<int64_t>(0, n_ctx_swa - 1)};
    std::vector<Owned> owned;
    for (size_t t = 0; t < life.nt; ++t) {
      const auto* x = ts->Get(t);
      if (x->buffer() < 0 || static_cast<size_t>(x->buffer()) >= n_buf_) continue;
      // Any buffer but the model file's mapping (nothing may write there: CheckNodes): a computed
      // tensor placed over a KV cache or a weight overwrites it.
      if (buffers_->Get(x->buffer())->mapped()) continue;
      if (x->view_src() >= 0 || x->global() >= 0) continue;
      const std::string what = gname + ": tensor '" + Str(x->name()) + "'";
      int64_t ne[4] = {0, 0, 0, 0};
      bool dims_ok = x->ne() && x->ne()->size() == 4;
      for (int d = 0; dims_ok && d < 4; ++d) {
        const auto* e = x->ne()->Get(d);
        const auto* w = x->ne_swa() && x->ne_swa()->size() == 4 ? x->ne_swa()->Get(d) : nullptr;
        const int64_t coef[6] = {
            e->tokens(), e->kv(), e->kv_head(), e->outputs(), w ? w->kv_swa() : 0, w ? w->kv_head_swa() : 0};
        __int128 v = e->c();
        for (int k = 0; k < 6; ++k) v += std::max(__int128(coef[k]) * lo[k], __int128(coef[k]) * hi[k]);
        if (v < 0 || v > std::numeric_limits<int32_t>::max() * __int128(1 << 20))
          dims_ok = false;
        else
          ne[d] = static_cast<int64_t>(v);
      }
      auto bytes = dims_ok && IsValidGgmlType(x->type())
                       ? TensorBytesChecked(static_cast<GgmlType>(x->type()), ne)
                       : Result<size_t>(InvalidArgument("bad shape"));
      if (!bytes.ok()) {
        if (!overlaps_only_) Conflict(what + ": size cannot be computed at the worst case");
        continue;
      }
      Owned o;
      o.id = static_cast<int>(t);
      o.buffer = x->buffer();
      o.begin = x->offset();
      o.end = x->offset() + *bytes;
      if (o.end < o.begin || o.end > buffers_->Get(x->buffer())->size()) {
        if (!overlaps_only_)
          Conflict(what + ": bytes [" + std::to_string(o.begin) + ", " + std::to_string(o.end) +
                   ") outside its buffer of " + std::to_string(buffers_->Get(x->buffer())->size()));
        continue;
      }
      if (*bytes == 0) continue;
      o.born = life.born[t];
      o.dies = life.pinned[t] || life.last_read[t] < o.born ? kNever : life.last_read[t];
      owned.push_back(o);
    }
    return owned;
  }

  // Weights and KV cache tensors (allocated buffers) are live throughout: no computed tensor may
  // share their bytes. Entries with id -1 - i stand for Plan.tensors[i].
  void AddGlobalTensors(std::vector<Owned>& owned) const {
    const auto* gt = p_.tensors();
    if (!gt) return;
    for (flatbuffers::uoffset_t i = 0; i < gt->size(); ++i) {
      const auto* x = gt->Get(i);
      if (x->buffer() < 0 || static_cast<size_t>(x->buffer()) >= n_buf_ ||
          buffers_->Get(x->buffer())->mapped())
        continue;
      if (x->nbytes() == 0 || x->offset() + x->nbytes() < x->offset()) continue;
      Owned o;
      o.id = -1 - static_cast<int>(i);
      o.buffer = x->buffer();
      o.begin = x->offset();
      o.end = x->offset() + x->nbytes();
      owned.push_back(o);
    }
  }

  // Every two of `owned` that share bytes of a buffer while both are live, but a node writing in
  // place over its first source.
  void CheckOverlaps(const plan::Graph& g, const GraphLife& life, std::vector<Owned>& owned) {
    const std::string gname = Str(g.name());
    const auto* ts = life.ts;
    auto name_of = [&](const Owned& o) {
      return o.id >= 0 ? Str(ts->Get(o.id)->name()) : Str(p_.tensors()->Get(-1 - o.id)->name());
    };
    std::sort(owned.begin(), owned.end(), [](const Owned& a, const Owned& b) {
      return a.buffer != b.buffer ? a.buffer < b.buffer : a.begin < b.begin;
    });
    for (size_t a = 0; a < owned.size(); ++a)
      for (size_t b = a + 1;
           b < owned.size() && owned[b].buffer == owned[a].buffer && owned[b].begin < owned[a].end; ++b) {
        const Owned& A = owned[a];
        const Owned& B = owned[b];
        if (A.id < 0 && B.id < 0) continue;  // two global tensors: checked above
        if (std::max(A.born, B.born) > std::min(A.dies, B.dies)) continue;  // never live together
        // In place: the node overwrites its first source, whose last read it is, byte for byte.
        auto inplace = [&](const Owned& src, const Owned& dst) {
          if (src.id < 0 || dst.id < 0) return false;
          const auto* d = ts->Get(dst.id);
          return life.node_pos[dst.id] >= 0 && GetOpTraits(static_cast<GgmlOp>(d->op())).can_inplace &&
                 d->srcs() && d->srcs()->size() > 0 && d->srcs()->Get(0) >= 0 &&
                 static_cast<size_t>(d->srcs()->Get(0)) < life.nt &&
                 life.Owner(d->srcs()->Get(0)) == src.id && src.dies == dst.born && src.begin == dst.begin &&
                 src.end == dst.end;
        };
        if (inplace(A, B) || inplace(B, A)) continue;
        Conflict(gname + ": buffer " + std::to_string(A.buffer) + " '" +
                 Str(buffers_->Get(A.buffer)->name()) + "': '" + name_of(A) + "' [" +
                 std::to_string(A.begin) + ", " + std::to_string(A.end) + ") live " + Time(A.born) + " .. " +
                 Time(A.dies) + " overlaps '" + name_of(B) + "' [" + std::to_string(B.begin) + ", " +
                 std::to_string(B.end) + ") live " + Time(B.born) + " .. " + Time(B.dies));
      }
  }

  const plan::Plan& p_;
  size_t max_conflicts_;
  bool overlaps_only_;
  const flatbuffers::Vector<flatbuffers::Offset<plan::Buffer>>* buffers_;
  size_t n_buf_;
  uint32_t n_copies_;
  MemoryCheckReport rep_;
  size_t dropped_ = 0;
};

}  // namespace

MemoryCheckReport CheckComputeMemory(const PlanFile& plan, size_t max_conflicts, bool overlaps_only) {
  return MemoryChecker(plan.root(), max_conflicts, overlaps_only).Run();
}

}  // namespace stowage
