// End-to-end helper of the backend tests: plan a shared model for a set of this machine's probed
// devices (the planner's pipeline, as plan-model does), run the plan, and return the logits of a
// prompt; the same for a CPU-only plan, so a backend's logits can be compared with the CPU's.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend.h"
#include "place_cpu.h"
#include "stowage/planner/from_probe.h"
#include "stowage/planner/memory_plan.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/place_model.h"
#include "stowage/planner/placement.h"
#include "stowage/planner/plan_export.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/session.h"

namespace stowage::test {

struct E2eRun {
  std::vector<float> logits;  ///< all prompt positions, n_vocab each
  int n_vocab = 0;
  std::vector<std::string> devices;     ///< devices of the plan's buffers
  std::map<std::string, int> computes;  ///< nodes computed per non-CPU backend
};

/// Forwards to a built-in backend and counts its Compute calls (proof that a plan used it).
class CountingBackend final : public exec::Backend {
 public:
  CountingBackend(std::unique_ptr<exec::Backend> inner, std::shared_ptr<std::map<std::string, int>> counts)
      : inner_(std::move(inner)), counts_(std::move(counts)) {}
  const std::string& name() const override { return inner_->name(); }
  Result<std::unique_ptr<exec::Buffer>> Allocate(const std::string& buft, uint64_t size,
                                                 uint64_t alignment) override {
    return inner_->Allocate(buft, size, alignment);
  }
  Status Compute(const exec::NodeCall& call) override {
    ++(*counts_)[inner_->name()];
    return inner_->Compute(call);
  }
  bool CanAccess(const exec::Buffer& buf) const override { return inner_->CanAccess(buf); }
  Status Synchronize() override { return inner_->Synchronize(); }
  bool is_async() const override { return inner_->is_async(); }
  Status WriteAsync(exec::Buffer& dst, uint64_t offset, const void* src, uint64_t n) override {
    return inner_->WriteAsync(dst, offset, src, n);
  }
  Status ReadAsync(exec::Buffer& src, uint64_t offset, void* dst, uint64_t n) override {
    return inner_->ReadAsync(src, offset, dst, n);
  }
  Result<std::shared_ptr<exec::Event>> RecordEvent() override { return inner_->RecordEvent(); }
  Status WaitEvent(exec::Event& ev) override { return inner_->WaitEvent(ev); }
  Result<bool> CopyFromAsync(exec::Backend& from, exec::Buffer& src, uint64_t src_offset, exec::Buffer& dst,
                             uint64_t dst_offset, uint64_t n) override {
    auto* counted = dynamic_cast<CountingBackend*>(&from);  // the inner backends copy between themselves
    return inner_->CopyFromAsync(counted != nullptr ? *counted->inner_ : from, src, src_offset, dst,
                                 dst_offset, n);
  }

 private:
  std::unique_ptr<exec::Backend> inner_;
  std::shared_ptr<std::map<std::string, int>> counts_;
};

class CountingFactory final : public exec::BackendFactory {
 public:
  std::shared_ptr<std::map<std::string, int>> counts = std::make_shared<std::map<std::string, int>>();
  std::unique_ptr<exec::Backend> Create(const std::string& name, const std::string& type,
                                        int n_threads) override {
    if (type == "CPU") return nullptr;
    auto b = exec::CreateBuiltinBackend(name, type, n_threads);
    if (!b) return nullptr;
    return std::make_unique<CountingBackend>(std::move(b), counts);
  }
};

/// Plans `model` with n_ctx 128 for the CPU plus the probed devices `keep` accepts (none: CPU only,
/// via PlaceAllOnCpu), `opt` as given, and decodes `prompt` with all logits. Failures are gtest
/// failures (ADD_FAILURE) and leave logits empty.
inline E2eRun RunPlanned(const std::string& model, const std::vector<int32_t>& prompt,
                         const std::function<bool(const ProbedDevice&)>& keep,
                         planner::PlacementOptions opt) {
  E2eRun out;
  auto gguf = GgufFile::Open(model);
  if (!gguf.ok()) {
    ADD_FAILURE() << gguf.status().ToString();
    return out;
  }
  planner::ContextConfig cfg;
  cfg.n_ctx = 128;
  auto graphs = planner::BuildModelGraphs(**gguf, cfg);
  if (!graphs.ok()) {
    ADD_FAILURE() << graphs.status().ToString();
    return out;
  }
  std::vector<uint8_t> bytes;
  if (!keep) {
    planner::Placement p = test::PlaceAllOnCpu(*graphs, true);
    planner::MemoryPlan mem;
    Status st = planner::PlanMemory(*graphs, p, &mem);
    if (!st.ok()) {
      ADD_FAILURE() << st.ToString();
      return out;
    }
    bytes = planner::SerializePlan(**gguf, *graphs, p, mem, "test cpu");
  } else {
    std::vector<planner::DeviceManifest> machine;
    int gpu = 0;
    for (const auto& d : ProbeDevices().devices) {
      if (d.type != DeviceType::kCpu && !keep(d)) continue;
      auto m = planner::ManifestFromProbe(d);
      if (!m.ok()) {
        ADD_FAILURE() << m.status().ToString();
        return out;
      }
      machine.push_back(m->IsIndexed() ? m->WithIndex(gpu++) : *m);
    }
    auto o = planner::PlaceModel(*graphs, machine, opt);
    if (!o.ok()) {
      ADD_FAILURE() << o.status().ToString();
      return out;
    }
    bytes = planner::SerializePlan(**gguf, *graphs, o->placement, o->memory, "test devices");
  }
  SessionOptions so;
  auto factory = std::make_shared<CountingFactory>();
  so.backend_factory = factory;
  auto session = Session::CreateFromPlanBytes(std::move(bytes), model, so);
  if (!session.ok()) {
    ADD_FAILURE() << session.status().ToString();
    return out;
  }
  for (const auto& b : (*session)->Buffers()) {
    EXPECT_EQ(b.planned, b.allocated) << b.name;
    out.devices.push_back(b.device);
  }
  out.n_vocab = (*session)->n_vocab();
  Status st = (*session)->Decode(prompt, /*all_logits=*/true, &out.logits);
  if (!st.ok()) {
    ADD_FAILURE() << st.ToString();
    out.logits.clear();
  }
  out.computes = *factory->counts;
  return out;
}

/// Max |x - y| over two equally long logit vectors (infinity when the sizes differ or are 0).
inline float MaxAbsDiff(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.empty() || x.size() != y.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

}  // namespace stowage::test
