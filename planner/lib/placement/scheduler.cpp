#include "stowage/planner/scheduler.h"

#include <cstdio>
#include <map>

#include "op_query.h"

namespace stowage::planner {
namespace {

const char* CauseText(const std::string& c) {
  if (c == "1.dst") return "the tensor lives in a buffer of this backend's buffer type";
  if (c == "1.vsrc") return "view of a tensor in a buffer of this backend's buffer type";
  if (c == "1.inp") return "graph input, set on the CPU";
  if (c.rfind("1.wgt", 0) == 0) return "runs where its weight is";
  if (c == "1.off") return "op offload: weight in host memory, this backend's offload_op wants the batch";
  if (c == "2.sup") return "expanded from the neighbouring node's backend";
  if (c == "3.best") return "backend supporting the op with the most usable sources";
  if (c == "3.upg") return "upgraded to a higher-priority backend sharing the buffer type";
  if (c == "4.vsrc") return "view: backend of its view source";
  if (c == "4.cur") return "source: backend of its consumer";
  if (c == "4.cpy") return "split input copy";
  if (c == "pin.norm")
    return "llama.cpp graph callback: norm pinned to its layer's device (n_tokens < 32 or full offload)";
  if (c == "pin.nkvo") return "llama.cpp graph callback: -nkvo pins kqv_merged_cont to the CPU";
  return "";
}

class Scheduler {
 public:
  Scheduler(Graph& g, const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm, Placement* p,
            const SchedulerOptions& opt)
      : g_(g),
        m_(m),
        ds_(ds),
        lm_(lm),
        p_(p),
        opt_(opt),
        wc_(g.WorstCase()),
        B_(static_cast<int>(ds.devices.size())),
        cpu_(ds.cpu) {
    const size_t n = g.tensors.size();
    backend_.assign(n, -1);
    cause_.assign(n, "");
    supports_.assign(n * B_, -1);
    queries_.resize(n);
    have_query_.assign(n, 0);
  }

  Status Run() {
    Pins();
    STOWAGE_RETURN_IF_ERROR(AssignPreallocatedTensors());
    ExpandBackends();
    AssignRemainingNodes();
    AssignRemainingSources();
    STOWAGE_RETURN_IF_ERROR(SplitGraph());
    STOWAGE_RETURN_IF_ERROR(CheckRemainingSourcesSupported());
    Finish();
    return Status::Ok();
  }

 private:
  bool IsView(int t) const { return IsViewOp(g_.tensors[t].op); }
  int Owner(int t) const { return g_.tensors[t].view_src >= 0 ? g_.tensors[t].view_src : t; }

  BufferInfo OwnBuf(int t) const {
    const Tensor& x = g_.tensors[t];
    if (x.kind == TensorKind::kWeight || x.kind == TensorKind::kKvCache)
      return GlobalBuffer(m_, *p_, x.global);
    return {};
  }
  BufferInfo BufOf(int t) const { return OwnBuf(Owner(t)); }

  TensorDesc Desc(int t) const {
    const Tensor& x = g_.tensors[t];
    TensorDesc d;
    d.type = x.type;
    int64_t ne[4];
    for (int i = 0; i < 4; ++i) d.ne[i] = ne[i] = wc_.Eval(x.ne[i]);
    d.contiguous = IsContiguous(x.type, ne, TensorStrides(g_, t, wc_));
    const BufferInfo bi = OwnBuf(t);
    if (bi.allocated) {
      d.buft = bi.buft;
      d.buft_is_host = bi.is_host;
    }
    return d;
  }

  const OpQuery& Query(int t) {
    if (!have_query_[t]) {
      OpQuery q;
      const Tensor& x = g_.tensors[t];
      q.op = x.op;
      q.dst = Desc(t);
      for (int s : x.srcs)
        if (s >= 0) q.src.push_back(Desc(s));
      queries_[t] = std::move(q);
      have_query_[t] = 1;
    }
    return queries_[t];
  }

  bool Supports(int b, int t) {
    int8_t& c = supports_[static_cast<size_t>(t) * B_ + b];
    if (c < 0) {
      const OpQuery& q = Query(t);
      c = q.op != planner::GgmlOp::kCount && ds_.devices[b].SupportsOp(q) ? 1 : 0;
    }
    return c == 1;
  }
  bool SupportsBuft(int b, const BufferInfo& bi) const {
    return ds_.devices[b].SupportsBuft(bi.buft, bi.is_host);
  }
  const PlacedBuft& ComputeBuft(int b) const { return p_->bufts[p_->backends[b].compute_buft]; }

  int BackendFromBuffer(int t, int op) {
    const BufferInfo bi = BufOf(t);
    if (!bi.allocated) return -1;
    for (int b = 0; b < B_; ++b)
      if (SupportsBuft(b, bi) && Supports(b, op)) return b;
    return -1;
  }

  bool BufferSupported(int t, int b) const {
    const BufferInfo bi = BufOf(t);
    if (bi.allocated) return SupportsBuft(b, bi);
    int tb = backend_[t];
    if (tb == -1 && g_.tensors[t].view_src >= 0) tb = backend_[g_.tensors[t].view_src];
    if (tb == -1) return false;
    const PlacedBuft& cb = ComputeBuft(tb);
    return ds_.devices[b].SupportsBuft(cb.name, cb.is_host);
  }

  void Pins() {
    const bool pin_norm = g_.max_tokens < 32 || opt_.full_offload;
    for (int n : g_.nodes) {
      const Tensor& x = g_.tensors[n];
      if (x.layer < 0) continue;
      const std::string suffix = "-" + std::to_string(x.layer);
      if (pin_norm && x.name == "norm" + suffix) {
        const int dev = lm_.device.at(x.layer);
        if (Supports(dev, n)) {
          backend_[n] = dev;
          cause_[n] = "pin.norm";
        }
      }
      if (!opt_.offload_kqv && x.name == "kqv_merged_cont" + suffix) {
        backend_[n] = cpu_;
        cause_[n] = "pin.nkvo";
      }
    }
  }

  Status FromCur(int t, int* out, std::string* cause) {
    *out = -1;
    int r = BackendFromBuffer(t, t);
    if (r != -1) {
      *out = r;
      *cause = "1.dst";
      return Status::Ok();
    }
    const Tensor& x = g_.tensors[t];
    if (x.view_src >= 0) {
      r = BackendFromBuffer(x.view_src, t);
      if (r != -1) {
        *out = r;
        *cause = "1.vsrc";
        return Status::Ok();
      }
    }
    const BufferInfo bi = BufOf(t);
    if (bi.allocated)
      return FailedPrecondition("pre-allocated tensor (" + x.name + ") in a buffer (" + bi.buft +
                                ") that cannot run the operation (" + GgmlOpName(x.op) + ")");
    if (x.kind == TensorKind::kInput) {
      *out = cpu_;
      *cause = "1.inp";
      return Status::Ok();
    }
    for (size_t i = 0; i < x.srcs.size(); ++i) {
      const int s = x.srcs[i];
      if (s < 0) continue;
      // ROPE is not dragged by its tiny freq-factors weight (llama.cpp PR #10026).
      if (x.op == stowage::GgmlOp::ROPE) break;
      const BufferInfo sb = OwnBuf(s);
      if (!sb.allocated || !sb.weights) continue;
      const int b = BackendFromBuffer(s, t);
      if (b == cpu_ && sb.is_host && opt_.op_offload) {
        for (int o = 0; o < b; ++o) {
          if (Supports(o, t) && ds_.devices[o].OffloadOp(Query(t))) {
            *out = o;
            *cause = "1.off";
            return Status::Ok();
          }
        }
      }
      *out = b;
      *cause = "1.wgt" + std::to_string(i);
      return Status::Ok();
    }
    return Status::Ok();
  }

  // ggml pass 1: tensors in a buffer, graph inputs, nodes with a weight source (scheduler.h).
  Status AssignPreallocatedTensors() {
    for (int pass = 0; pass < 2; ++pass) {
      for (int t : pass == 0 ? g_.leafs : g_.nodes) {
        if (backend_[t] != -1) continue;
        STOWAGE_RETURN_IF_ERROR(FromCur(t, &backend_[t], &cause_[t]));
      }
    }
    return Status::Ok();
  }

  void SetIfSupported(int t, int b) {
    if (Supports(b, t)) {
      backend_[t] = b;
      cause_[t] = "2.sup";
    }
  }

  void Expand(bool gpu_only, bool down) {
    int cur = -1;
    const int n = static_cast<int>(g_.nodes.size());
    for (int k = 0; k < n; ++k) {
      const int t = g_.nodes[down ? k : n - 1 - k];
      if (IsView(t)) continue;
      if (backend_[t] != -1) {
        cur = gpu_only && backend_[t] == B_ - 1 ? -1 : backend_[t];
      } else if (cur != -1) {
        SetIfSupported(t, cur);
      }
    }
  }

  // ggml pass 2: expand the assigned backends down then up (non-CPU first, then every backend).
  void ExpandBackends() {
    Expand(true, true);
    Expand(true, false);
    Expand(false, true);
    Expand(false, false);
  }

  // ggml pass 3: unassigned nodes, and upgrades to a higher-priority backend with the same buft.
  void AssignRemainingNodes() {
    for (int t : g_.nodes) {
      if (IsView(t)) continue;
      const Tensor& x = g_.tensors[t];
      if (backend_[t] == -1) {
        int best = -1;
        for (int b = 0; b < B_; ++b) {
          if (!Supports(b, t)) continue;
          int n_sup = 0;
          for (int s : x.srcs) {
            if (s < 0) continue;
            const bool assigned =
                backend_[s] != -1 || (g_.tensors[s].view_src >= 0 && backend_[g_.tensors[s].view_src] != -1);
            if (assigned && BufferSupported(s, b)) ++n_sup;
          }
          if (n_sup > best) {
            best = n_sup;
            backend_[t] = b;
            cause_[t] = "3.best";
          }
        }
      } else {
        const int cur = backend_[t];
        for (int b = 0; b < cur; ++b) {
          if (p_->backends[b].compute_buft != p_->backends[cur].compute_buft || !Supports(b, t)) continue;
          bool ok = true;
          for (int s : x.srcs)
            if (s >= 0 && !BufferSupported(s, b)) {
              ok = false;
              break;
            }
          if (ok) {
            backend_[t] = b;
            cause_[t] = "3.upg";
            break;
          }
        }
      }
    }
  }

  // ggml pass 4: remaining sources take their view source's or their consumer's backend.
  void AssignRemainingSources() {
    for (int t : g_.nodes) {
      const Tensor& x = g_.tensors[t];
      if (x.view_src >= 0 && backend_[t] == -1) {
        backend_[t] = backend_[x.view_src];
        cause_[t] = "4.vsrc";
      }
      for (int s : x.srcs) {
        if (s < 0 || backend_[s] != -1) continue;
        if (g_.tensors[s].view_src >= 0) {
          backend_[s] = backend_[g_.tensors[s].view_src];
          cause_[s] = "4.vsrc";
        } else {
          backend_[s] = backend_[t];
          cause_[s] = "4.cur";
        }
      }
    }
  }

  // ggml's pass 4 gives a node that no earlier pass could place its consumer's backend without
  // asking that backend (ggml_backend_sched_split_graph, FEB25), which then aborts at compute: e.g.
  // -ot of a norm weight into a buffer type only a MUL_MAT backend reads. Refused here instead (after
  // SplitGraph, whose refusal to copy a converted-layout weight names the cause more precisely).
  Status CheckRemainingSourcesSupported() {
    for (int t : g_.nodes) {
      if (IsView(t) || cause_[t] != "4.cur") continue;
      const int nb = backend_[t];
      if (nb >= 0 && !Supports(nb, t))
        return FailedPrecondition(
            "node '" + g_.tensors[t].name + "' (" + GgmlOpName(g_.tensors[t].op) + ") of graph " + g_.name +
            " has no backend that supports it (ggml's pass 4 gave it " + p_->backends[nb].name +
            ", which cannot run it; check -ot overrides of its weights)");
    }
    return Status::Ok();
  }

  // ggml pass 5: splits where the backend changes, and the split-input copies.
  Status SplitGraph() {
    g_.splits.clear();
    const int n = static_cast<int>(g_.nodes.size());
    int i = 0;
    Split split;
    for (; i < n; ++i)
      if (!IsView(g_.nodes[i])) {
        split.backend = backend_[g_.nodes[i]];
        break;
      }
    split.node_begin = 0;
    int cur = split.backend;
    std::map<std::pair<int, int>, int> copies;  // (source, backend) -> copy tensor (copy 0)
    const size_t kMaxInputs = 10;               // GGML_SCHED_MAX_SPLIT_INPUTS = GGML_MAX_SRC (FEB25)
    const int n_copies = opt_.n_copies;
    GraphCopies gc;  // with n_copies > 1: every instance, for Placement::copies
    gc.graph = g_.name;
    std::vector<TensorCopies> split_copies;  // of the current split, parallel to split.inputs
    std::map<int, bool> input_seen;          // graph inputs that already have their instances
    auto new_copy = [&](int s, int backend, int c) {
      Tensor t;
      const Tensor& src = g_.tensors[s];
      t.name = p_->backends[backend].name + "#" + src.name + "#" + std::to_string(c);
      t.kind = TensorKind::kSplitCopy;
      t.type = src.type;
      t.ne = src.ne;
      t.layer = src.layer;
      t.backend = backend;
      t.cause = "4.cpy";
      g_.tensors.push_back(std::move(t));
      backend_.push_back(backend);
      cause_.push_back("4.cpy");
      return static_cast<int>(g_.tensors.size()) - 1;
    };
    for (; i < n; ++i) {
      const int t = g_.nodes[i];
      if (IsView(t)) continue;
      const int nb = backend_[t];
      if (nb == -1)
        return FailedPrecondition("node '" + g_.tensors[t].name + "' (" + GgmlOpName(g_.tensors[t].op) +
                                  ") of graph " + g_.name + " has no backend: no device supports it");
      bool need_new = false;
      if (nb == cur && !split.inputs.empty()) {
        for (int s : g_.tensors[t].srcs) {
          if (s < 0) continue;
          const BufferInfo sb = OwnBuf(s);
          if (sb.allocated && sb.weights && backend_[s] != cur && !BufferSupported(s, cur)) {
            need_new = true;
            break;
          }
          if (split.inputs.size() == kMaxInputs && backend_[s] != cur && !copies.count({s, cur}) &&
              !BufferSupported(s, cur)) {
            need_new = true;
            break;
          }
        }
      }
      if (nb != cur || need_new) {
        split.node_end = i;
        g_.splits.push_back(split);
        gc.splits.push_back(std::move(split_copies));
        split_copies.clear();
        split = Split();
        split.backend = nb;
        split.node_begin = i;
        cur = nb;
      }
      for (size_t j = 0; j < g_.tensors[t].srcs.size(); ++j) {
        const int s = g_.tensors[t].srcs[j];
        if (s < 0) continue;
        if (backend_[s] == -1)
          return Internal("source '" + g_.tensors[s].name + "' of '" + g_.tensors[t].name +
                          "' has no backend");
        // A graph input read by a node gets n_copies instances on its own backend; the input
        // itself is the current copy (cur_copy = 0 when llama.cpp reserves).
        if (n_copies > 1 && g_.tensors[s].kind == TensorKind::kInput && !input_seen[s]) {
          input_seen[s] = true;
          TensorCopies tc;
          tc.tensor = s;
          tc.backend = backend_[s];
          tc.copies.push_back(s);
          for (int c = 1; c < n_copies; ++c) tc.copies.push_back(new_copy(s, backend_[s], c));
          gc.inputs.push_back(std::move(tc));
          if (gc.inputs.size() >
              kMaxInputs)  // ggml asserts n_graph_inputs < GGML_SCHED_MAX_SPLIT_INPUTS (FEB25)
            return FailedPrecondition("graph " + g_.name + " has more than " + std::to_string(kMaxInputs) +
                                      " graph inputs with n_copies > 1 (GGML_SCHED_MAX_SPLIT_INPUTS): '" +
                                      g_.tensors[s].name + "' is one too many");
        }
        if (backend_[s] == cur || BufferSupported(s, cur)) continue;
        auto it = copies.find({s, cur});
        if (it == copies.end()) {
          // A weight stored in a layout its buffer type converts it into on upload (CPU_REPACK,
          // an ACCEL device's own buft such as ONEDNN) cannot be copied to another backend: the
          // copy would be read as the plain layout (ggml's AMX/repack buffers have no get_tensor
          // either). The runtime refuses such a plan too; say it here, naming the node.
          if (const int w = Owner(s);
              g_.tensors[w].kind == TensorKind::kWeight && g_.tensors[w].global >= 0) {
            const PlacedBuft& wb = p_->bufts[p_->global_buft[g_.tensors[w].global]];
            const bool converts =
                !wb.repack.empty() || (!wb.is_host && p_->devices[wb.device].type == DeviceKind::kAccel);
            if (converts)
              return FailedPrecondition(
                  "node '" + g_.tensors[t].name + "' (" + GgmlOpName(g_.tensors[t].op) + ") on backend " +
                  p_->backends[cur].name + " reads weight '" + g_.tensors[w].name + "' in buffer type " +
                  wb.name +
                  ", which stores it in a converted layout: it cannot be copied to another backend");
          }
          TensorCopies tc;
          tc.tensor = s;
          tc.backend = cur;
          for (int c = 0; c < n_copies; ++c) tc.copies.push_back(new_copy(s, cur, c));
          it = copies.emplace(std::make_pair(s, cur), tc.copies[0]).first;
          split.inputs.push_back({s, tc.copies[0]});
          split_copies.push_back(std::move(tc));
        }
        g_.tensors[t].srcs[j] = it->second;
      }
    }
    split.node_end = n;
    g_.splits.push_back(split);
    gc.splits.push_back(std::move(split_copies));
    p_->n_copies = n_copies;
    for (size_t k = 0; k < p_->copies.size(); ++k)
      if (p_->copies[k].graph == g_.name) {
        p_->copies.erase(p_->copies.begin() + static_cast<long>(k));
        break;
      }
    if (n_copies > 1) p_->copies.push_back(std::move(gc));
    return Status::Ok();
  }

  void Finish() {
    for (size_t t = 0; t < g_.tensors.size(); ++t) {
      g_.tensors[t].backend = backend_[t];
      g_.tensors[t].cause = cause_[t];
    }
    for (int t : g_.nodes) {
      if (IsView(t)) continue;
      const Tensor& x = g_.tensors[t];
      ExplainEntry ex;
      ex.subject = x.name;
      ex.graph = g_.name;
      ex.device = x.backend >= 0 ? p_->backends[x.backend].name : "";
      ex.buft = x.backend >= 0 ? ComputeBuft(x.backend).name : "";
      ex.code = ExplainRule::kNode;
      ex.rule = x.cause + ": " + CauseText(x.cause.rfind("1.wgt", 0) == 0 ? "1.wgt" : x.cause);
      for (int b = 0; b < x.backend; ++b) {
        if (!Supports(b, t)) {
          ex.rejected.push_back(p_->backends[b].name + ": does not support " + QueryString(Query(t)));
          continue;
        }
        for (int s : x.srcs) {
          const BufferInfo sb = s >= 0 ? BufOf(s) : BufferInfo{};
          if (sb.allocated && !SupportsBuft(b, sb)) {
            ex.rejected.push_back(p_->backends[b].name + ": cannot read buffer type " + sb.buft + " of " +
                                  g_.tensors[Owner(s)].name);
            break;
          }
        }
      }
      p_->explain.push_back(std::move(ex));
    }
  }

  Graph& g_;
  const ModelGraphs& m_;
  const DeviceSet& ds_;
  const LayerMap& lm_;
  Placement* p_;
  SchedulerOptions opt_;
  Bindings wc_;
  int B_, cpu_;
  std::vector<int> backend_;
  std::vector<std::string> cause_;
  std::vector<int8_t> supports_;
  std::vector<OpQuery> queries_;
  std::vector<char> have_query_;
};

}  // namespace

Status ScheduleGraph(Graph& g, const ModelGraphs& m, const DeviceSet& ds, const LayerMap& lm, Placement* p,
                     const SchedulerOptions& opt) {
  if (p->backends.size() != ds.devices.size())
    return Internal("scheduler: placement backends do not match the devices");
  for (const Tensor& t : g.tensors)
    if (t.kind == TensorKind::kSplitCopy)
      return FailedPrecondition("graph " + g.name +
                                " is already scheduled (it has split copies); build it again");
  if (opt.n_copies < 1 || opt.n_copies > 4)
    return InvalidArgument("scheduler: n_copies " + std::to_string(opt.n_copies) +
                           " outside [1, 4] (GGML_SCHED_MAX_COPIES = 4)");
  Scheduler s(g, m, ds, lm, p, opt);
  return s.Run();
}

PipelineDecision PipelineParallelism(const DeviceSet& ds, uint32_t n_layer, int n_gpu_layers,
                                     SplitMode split_mode, bool offload_kqv, bool has_tensor_overrides) {
  PipelineDecision d;
  if (ds.n_model <= 1) {
    d.reason = std::to_string(ds.n_model) + " model device" + (ds.n_model == 1 ? "" : "s") +
               " (needs more than one)";
    return d;
  }
  if (n_gpu_layers <= static_cast<int>(n_layer)) {
    d.reason = "n_gpu_layers " + std::to_string(n_gpu_layers) + " <= n_layer " + std::to_string(n_layer) +
               " (the output layer is not offloaded)";
    return d;
  }
  if (split_mode != SplitMode::kLayer) {
    d.reason =
        std::string("split mode ") + (split_mode == SplitMode::kRow ? "row" : "none") + " (needs layer)";
    return d;
  }
  if (!offload_kqv) {
    d.reason = "KV offload is off (-nkvo)";
    return d;
  }
  if (has_tensor_overrides) {
    d.reason = "tensor buffer type overrides are given (-ot, --cpu-moe, --n-cpu-moe)";
    return d;
  }
  for (const DeviceManifest& dev : ds.devices) {
    if (dev.type == DeviceType::kCpu) continue;  // llama.cpp ignores the CPU backend
    if (!dev.caps.async || !dev.caps.events) {
      d.reason = "device " + dev.name + " lacks caps " +
                 (!dev.caps.async && !dev.caps.events ? "async and events"
                  : !dev.caps.async                   ? "async"
                                                      : "events");
      return d;
    }
  }
  d.n_copies = 4;  // GGML_SCHED_MAX_COPIES
  d.reason = std::to_string(ds.n_model) +
             " model devices, all layers and the output offloaded, split mode layer, "
             "KV offload, no tensor overrides, every non-CPU device has caps async and events";
  return d;
}

ExplainEntry PipelineExplain(const PipelineDecision& d) {
  ExplainEntry e;
  e.subject = "n_copies";
  e.graph = "sched";
  e.device = "all backends";
  e.buft = std::to_string(d.n_copies);
  e.rule = std::string(d.n_copies > 1 ? "pipeline parallelism enabled" : "pipeline parallelism off") +
           " (n_copies=" + std::to_string(d.n_copies) + "): " + d.reason;
  return e;
}

int GraphNodeCount(const Graph& g) { return static_cast<int>(g.nodes.size()); }

}  // namespace stowage::planner
