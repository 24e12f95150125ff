// plan-model: plans where every weight, KV cache tensor and graph node of a GGUF model goes, and
// writes the plan file. Prints the placement in llama.cpp's log line formats.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "llama_args.h"

#include "stowage/planner/memory_plan.h"
#include "stowage/planner/model_graphs.h"
#include "stowage/planner/placement.h"
#include "stowage/planner/plan_export.h"

using namespace stowage;
using namespace stowage::planner;

namespace {

double MiB(uint64_t b) { return static_cast<double>(b) / 1048576.0; }

int Fail(const Status& s) {
  std::fprintf(stderr, "plan-model: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"plan-model: plan the placement and memory of a GGUF model ahead of time"};
  std::string model_path, out_path, ctk = "f16", ctv = "f16";
  ContextConfig cfg;
  bool no_mmap = false;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-o,--output", out_path, "plan file to write (default: no file)");
  app.add_option("-c,--ctx-size", cfg.n_ctx, "context size in tokens (0 = the model's training context)");
  app.add_option("-b,--batch-size", cfg.n_batch, "logical batch size (tokens)")->check(CLI::PositiveNumber);
  app.add_option("--ubatch-size", cfg.n_ubatch, "physical batch size (tokens)")->check(CLI::PositiveNumber);
  app.add_option("--cache-type-k", ctk, "KV cache type for K");
  app.add_option("--cache-type-v", ctv, "KV cache type for V");
  app.add_flag("--no-mmap", no_mmap, "do not memory-map the model (weights are loaded into allocated buffers)");
  if (int rc = tools::ParseWithAliases(app, argc, argv, {{"-ub", "--ubatch-size"}, {"-ctk", "--cache-type-k"}, {"-ctv", "--cache-type-v"}}); rc >= 0)
    return rc;

  auto tk = ParseGgmlType(ctk);
  if (!tk.ok()) return Fail(InvalidArgument("--cache-type-k: " + tk.status().message()));
  auto tv = ParseGgmlType(ctv);
  if (!tv.ok()) return Fail(InvalidArgument("--cache-type-v: " + tv.status().message()));
  cfg.type_k = *tk;
  cfg.type_v = *tv;

  auto gguf = GgufFile::Open(model_path);
  if (!gguf.ok()) return Fail(gguf.status());
  auto graphs = BuildModelGraphs(**gguf, cfg);
  if (!graphs.ok()) return Fail(graphs.status());
  ModelGraphs& m = *graphs;
  for (const auto& u : m.unused_tensors) std::printf("load_tensors: model has unused tensor %s -- ignoring\n", u.c_str());

  Placement p = PlaceAllOnCpu(m, !no_mmap);
  MemoryPlan mem;
  if (Status s = PlanMemory(m, p, &mem); !s.ok()) return Fail(s);

  for (uint32_t il = 0; il <= m.hp.n_layer; ++il) std::printf("load_tensors: layer %3u assigned to device CPU\n", il);
  for (const auto& b : mem.buffers)
    if (b.usage == BufferUsage::kWeights) std::printf("load_tensors: %12s model buffer size = %8.2f MiB\n", b.name.c_str(), MiB(b.size));
  for (const auto& b : mem.buffers)
    if (b.usage == BufferUsage::kKvCache) std::printf("llama_kv_cache_init: %10s KV buffer size = %8.2f MiB\n", b.name.c_str(), MiB(b.size));
  for (const auto& b : mem.buffers)
    if (b.usage == BufferUsage::kOutput) std::printf("llama_init_from_model: %10s  output buffer size = %8.2f MiB\n", b.name.c_str(), MiB(b.size));
  for (const auto& b : mem.buffers)
    if (b.usage == BufferUsage::kCompute) std::printf("llama_init_from_model: %10s compute buffer size = %8.2f MiB\n", b.name.c_str(), MiB(b.size));
  std::printf("llama_init_from_model: graph nodes  = %zu\n", m.prefill.nodes.size());
  std::printf("llama_init_from_model: graph splits = %zu (with bs=%lld), %zu (with bs=1)\n", m.prefill.splits.size(),
              static_cast<long long>(m.prefill.max_tokens), m.decode.splits.size());

  if (!out_path.empty()) {
    std::string flags;
    for (int i = 1; i < argc; ++i) flags += (i > 1 ? " " : "") + std::string(argv[i]);
    const auto bytes = SerializePlan(**gguf, m, p, mem, flags);
    if (Status s = WriteFileAtomic(out_path, bytes); !s.ok()) return Fail(s);
    std::printf("plan-model: wrote %s (%zu bytes)\n", out_path.c_str(), bytes.size());
  }
  return 0;
}
