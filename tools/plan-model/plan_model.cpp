// plan-model: plans where every weight, KV cache tensor and graph node of a GGUF model goes on a
// machine's devices (real or described by manifests), prints it in llama.cpp's log line formats and
// writes the plan file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_numbers.h"
#include "llama_args.h"
#include "planner_args.h"
#include "probed_machine.h"
#include "stdout_check.h"
#include "stowage/planner/explain.h"
#include "stowage/planner/from_probe.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/registry.h"
#include "stowage/runtime/atomic_file.h"

using namespace stowage;
using namespace stowage::planner;

namespace {

/// The largest context, batch and ubatch in tokens (2^24, as stowage-run's).
constexpr int64_t kMaxTokens = 1 << 24;
/// -mg is an index among the model devices; no machine has more than this many.
constexpr int64_t kMaxDevices = 1 << 16;

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed comes before the error line when both go to one file
  std::fprintf(stderr, "plan-model: error: %s\n", s.message().c_str());
  return 1;
}

/// The machine: the --device list (registry keys or manifest files), else this machine's probed
/// devices. A list without a CPU device gets this machine's CPU.
Result<std::vector<DeviceManifest>> MachineDevices(const std::string& device_list,
                                                   const std::vector<std::string>& registry_dirs,
                                                   const std::string& free_overrides, const char* argv0) {
  std::vector<MemoryOverride> ovr;
  if (!free_overrides.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(ovr, ParseMemoryOverrides(free_overrides));
  }
  std::vector<DeviceManifest> devices;
  // "--device none" (llama.cpp -dev none): no GPU or ACCEL device, only this machine's CPU.
  if (!device_list.empty() && device_list != "none") {
    std::vector<std::string> dirs = registry_dirs;
    dirs.push_back(ShippedRegistryDir(argv0));
    STOWAGE_ASSIGN_OR_RETURN(Registry reg, Registry::Open(dirs));
    STOWAGE_ASSIGN_OR_RETURN(devices, reg.MakeDevices(device_list));
  }
  const bool has_cpu = std::any_of(devices.begin(), devices.end(),
                                   [](const DeviceManifest& d) { return d.type == DeviceType::kCpu; });
  if (devices.empty() || !has_cpu) {
    // A list, or "none": only the CPU of this machine; else every probed device (CUDA0, CUDA1, ...).
    STOWAGE_ASSIGN_OR_RETURN(std::vector<DeviceManifest> probed,
                             tools::ProbedManifests(ProbeDevices().devices, [&](const ProbedDevice& d) {
                               return device_list.empty() || d.type == ProbedDeviceType::kCpu;
                             }));
    devices.insert(devices.end(), probed.begin(), probed.end());
  }
  // A listed device named like a probed one (a CPU manifest typed GPU, then this machine's CPU).
  STOWAGE_RETURN_IF_ERROR(CheckUniqueDeviceNames(devices));
  STOWAGE_RETURN_IF_ERROR(ApplyMemoryOverrides(devices, ovr));
  return devices;
}

}  // namespace

namespace {

int Run(int argc, char** argv) {
  CLI::App app{
      "plan-model: plan the placement and memory of a GGUF model ahead of time (llama.cpp semantics)"};
  std::string model_path, out_path, ctk = "f16", ctv = "f16", device_list, sm = "layer", ts, explain;
  std::vector<std::string> registry_dirs, ot, free_ovr;
  ContextConfig cfg;
  cfg.n_ctx = 4096;  // llama.cpp common default
  PlacementOptions opt;
  bool no_mmap = false, no_kv_offload = false, no_op_offload = false, fit = false, cpu_moe = false,
       timing = false;
  int n_cpu_moe = 0, debug_splits = 0;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  CLI::Option* out_opt = app.add_option("-o,--output", out_path, "plan file to write (default: none)");
  app.add_option(
      "--device", device_list,
      "devices of the machine: registry keys or manifest files, comma-separated; a list without a CPU "
      "device gets this machine's CPU; 'none': the CPU only (default: this machine's devices)");
  app.add_option("--registry", registry_dirs,
                 "extra folder of device manifests (searched before the shipped one)");
  app.add_option(
         "--free", free_ovr,
         "what-if free memory: NAME=SIZE[,NAME=SIZE...] (e.g. CUDA0=10GiB), repeatable; one value per device")
      ->allow_extra_args(false);
  app.add_option(
         "-c,--ctx-size", cfg.n_ctx,
         "context size in tokens (0 = the model's training context; default 4096, llama.cpp common's)")
      ->check(tools::IntegerIn(0, kMaxTokens));
  app.add_option("-b,--batch-size", cfg.n_batch, "logical batch size")
      ->check(tools::IntegerIn(1, kMaxTokens));
  app.add_option("--ubatch-size", cfg.n_ubatch, "physical batch size")
      ->check(tools::IntegerIn(1, kMaxTokens));
  app.add_option("--cache-type-k", ctk, "KV cache type for K (f16, f32, q8_0, ...)");
  app.add_option("--cache-type-v", ctv, "KV cache type for V");
  std::string flash_attn = "off";
  app.add_option(
         "--flash-attn", flash_attn,
         "flash attention: on (one FLASH_ATTN_EXT per layer, V cache untransposed, n_ctx padded to 256), "
         "off (the default, llama.cpp FEB25's), or auto (on unless a layer's attention would run on "
         "another device than the layer, as llama.cpp DEC25)")
      ->transform(tools::FlashAttnValue());
  app.add_option("--n-gpu-layers", opt.n_gpu_layers,
                 "layers to offload: N, 'all' or <= -2 (every layer and the output), 'auto' or -1 (= --fit) "
                 "(llama.cpp -ngl; default 0, llama.cpp's before DEC25)")
      ->transform(tools::GpuLayersValue());
  app.add_option("--split-mode", sm, "none, layer or row (llama.cpp -sm)");
  app.add_option("--tensor-split", ts, "proportions per model device, e.g. 3,1 (llama.cpp -ts)");
  app.add_option("--main-gpu", opt.main_gpu, "the model device used with -sm none (llama.cpp -mg)")
      ->check(tools::IntegerIn(0, kMaxDevices - 1));
  app.add_option("--override-tensor", ot, "REGEX=BUFFER_TYPE[,...] (llama.cpp -ot), repeatable");
  app.add_flag("--cpu-moe", cpu_moe, "keep all MoE expert weights on the CPU");
  app.add_option("--n-cpu-moe", n_cpu_moe, "keep the MoE expert weights of the first N layers on the CPU")
      ->check(tools::IntegerIn(0, tools::kAllGpuLayers));
  app.add_flag("--no-kv-offload", no_kv_offload, "KV cache on the CPU (llama.cpp -nkvo)");
  app.add_flag("--no-mmap", no_mmap, "load weights into allocated buffers instead of mapping the file");
  app.add_flag("--no-repack", opt.no_repack, "no CPU extra buffer types (CPU_REPACK)");
  app.add_flag("--no-host", opt.no_host, "no GPU host buffer type in the CPU list");
  app.add_flag("--no-op-offload", no_op_offload, "do not offload large-batch ops of host weights to GPUs");
  app.add_option("--explain", explain, "print why every weight and node is where it is: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--debug-splits", debug_splits,
                 "print the scheduler's splits as GGML_SCHED_DEBUG=N does (0, 1, 2)")
      ->check(tools::IntegerIn(0, 2));
  app.add_flag("--timing", timing, "print the time spent building the graphs and placing them");
  bool no_fit_check = false;
  app.add_flag("--no-fit-check", no_fit_check,
               "write the plan even when it does not fit a device's memory (a warning instead of the error)");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose,
               "also llama.cpp's debug-level log lines (\"layer N assigned to device D\", \"cannot be used "
               "with preferred buffer type\")");
  double fit_target_mib = planner::kDefaultFitTargetBytes / 1048576.0;
  app.add_option("--fit-target", fit_target_mib,
                 "MiB --fit keeps free on each GPU (llama.cpp -fitt; default 1024)")
      ->check(tools::NumberIn(0, 1048576));
  app.add_flag("--fit", fit, "search the largest -ngl that fits the devices' free memory and print it");
  // --explain takes an optional value: "--explain", "--explain json" and "--explain=json".
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--explain") {
      const bool valued =
          i + 1 < argc && (std::string(argv[i + 1]) == "text" || std::string(argv[i + 1]) == "json");
      a = "--explain=" + std::string(valued ? argv[++i] : "text");
    }
    args.push_back(a);
  }
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  if (int rc = tools::ParseWithAliases(app, static_cast<int>(av.size()), av.data(),
                                       {{"-ub", "--ubatch-size"},
                                        {"-ctk", "--cache-type-k"},
                                        {"-ctv", "--cache-type-v"},
                                        {"-ngl", "--n-gpu-layers"},
                                        {"-sm", "--split-mode"},
                                        {"-ts", "--tensor-split"},
                                        {"-mg", "--main-gpu"},
                                        {"-ot", "--override-tensor"},
                                        {"-cmoe", "--cpu-moe"},
                                        {"-ncmoe", "--n-cpu-moe"},
                                        {"-nkvo", "--no-kv-offload"},
                                        {"-nr", "--no-repack"},
                                        {"-dev", "--device"},
                                        {"-nopo", "--no-op-offload"},
                                        {"-fitt", "--fit-target"},
                                        {"-fa", "--flash-attn"}});
      rc >= 0)
    return rc;

  if (opt.n_gpu_layers == tools::kAutoGpuLayers) {  // -ngl auto: llama.cpp fits the layers to free memory
    fit = true;
    opt.n_gpu_layers = 0;
  } else if (fit && app.count("--n-gpu-layers") > 0) {
    // llama_params_fit leaves an -ngl the user set alone; here --fit exists only to choose it.
    return Fail(InvalidArgument("--fit chooses -ngl: give --fit or -ngl N, not both (-ngl auto is --fit)"));
  }
  if (out_opt->count() > 0 && out_path.empty())
    return Fail(
        InvalidArgument("-o/--output: empty file name (give the plan file to write, or no -o for no plan)"));
  for (const auto& dir : registry_dirs)
    if (dir.empty()) return Fail(InvalidArgument("--registry: empty folder name"));
  if (!registry_dirs.empty()) {  // checked even when no --device list reads it
    auto reg = Registry::Open(registry_dirs);
    if (!reg.ok()) return Fail(InvalidArgument("--registry: " + reg.status().message()));
  }
  auto tk = ParseGgmlType(ctk);
  if (!tk.ok()) return Fail(InvalidArgument("--cache-type-k: " + tk.status().message()));
  auto tv = ParseGgmlType(ctv);
  if (!tv.ok()) return Fail(InvalidArgument("--cache-type-v: " + tv.status().message()));
  PlanRequest request;
  request.context = cfg;
  request.context.type_k = *tk;
  request.context.type_v = *tv;
  request.flash_attn = tools::FlashAttnModeOf(flash_attn);
  auto smode = ParseSplitMode(sm);
  if (!smode.ok()) return Fail(smode.status());
  opt.split_mode = *smode;
  if (!ts.empty()) {
    auto v = ParseTensorSplit(ts);
    if (!v.ok()) return Fail(InvalidArgument("--tensor-split: " + v.status().message()));
    opt.tensor_split = *v;
  }
  for (const auto& o : ot) {
    auto v = ParseTensorOverrides(o);
    if (!v.ok()) return Fail(v.status());
    opt.overrides.insert(opt.overrides.end(), v->begin(), v->end());
  }
  opt.use_mmap = !no_mmap;
  opt.offload_kqv = !no_kv_offload;
  opt.op_offload = !no_op_offload;
  request.placement = opt;
  request.cpu_moe = cpu_moe;
  request.n_cpu_moe = n_cpu_moe;
  request.fit = fit;
  request.fit_target = static_cast<uint64_t>(fit_target_mib * 1048576.0);
  request.fit_check = !no_fit_check;
  request.serialize = !out_path.empty();
  for (int i = 1; i < argc; ++i) request.flags += (i > 1 ? " " : "") + std::string(argv[i]);

  auto machine = MachineDevices(device_list, registry_dirs, tools::JoinValues(free_ovr), argv[0]);
  if (!machine.ok()) return Fail(machine.status());

  // Log lines go to standard output as plan-model always printed them, except when standard output
  // carries the result: the plan itself (-o /dev/stdout) or --explain=json.
  FILE* log =
      (explain == "json" || (!out_path.empty() && tools::IsStandardOutput(out_path))) ? stderr : stdout;
  if (!out_path.empty() && SameFile(out_path, model_path))
    return Fail(InvalidArgument("-o " + out_path +
                                ": is the model file given with -m (writing the plan would replace it)"));
  auto gguf = GgufFile::Open(model_path);
  if (!gguf.ok()) return Fail(gguf.status());

  // llama.cpp's load lines as planning goes (ReportLines has the context overflow warning; the
  // "no usable GPU" warning is stowage-run's).
  auto print = [&](const PlanMessage& msg) {
    switch (msg.kind) {
      case PlanMessageKind::kWarning:
        std::fprintf(stderr, "plan-model: warning: %s\n", msg.text.c_str());
        break;
      case PlanMessageKind::kBatchRaised:
      case PlanMessageKind::kFlashAttnEnabled:
      case PlanMessageKind::kFlashAttnDisabled:
        std::fprintf(log, "%s\n", msg.text.c_str());
        break;
      case PlanMessageKind::kFitChosen:
        std::fprintf(log, "plan-model: --fit: %s\n", msg.text.c_str());
        break;
      case PlanMessageKind::kContextOverflow:
      case PlanMessageKind::kGpuLayersIgnored:
      case PlanMessageKind::kFitSearched:
        break;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto planned = Plan(**gguf, *machine, request, print);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!planned.ok()) return Fail(planned.status());
  const ModelGraphs& m = planned->graphs;
  const PlacementOutcome& outcome = planned->outcome;
  if (timing)
    std::fprintf(log, "plan-model: planning took %.1f ms (%u layers, %zu + %zu graph nodes)\n", ms,
                 m.hp.n_layer, m.prefill.nodes.size(), m.decode.nodes.size());
  for (const auto& line : ReportLines(m, outcome, planned->placement, verbose))
    std::fprintf(log, "%s\n", line.c_str());
  if (debug_splits > 0) {
    for (const Graph* g : {&m.prefill, &m.decode}) {
      std::fprintf(log, "plan-model: scheduler splits of graph %s (n_tokens = %lld):", g->name.c_str(),
                   static_cast<long long>(g->max_tokens));
      std::fprintf(log, "%s", FormatSchedDebug(*g, outcome.placement, debug_splits).c_str());
    }
  }
  if (explain == "text") std::printf("%s", ExplainText(outcome.placement).c_str());
  if (explain == "json") std::printf("%s", ExplainJson(outcome.placement).c_str());
  for (const std::string& w : planned->memory_warnings) {
    std::fflush(stdout);
    std::fprintf(stderr, "plan-model: warning: %s\n", w.c_str());
  }
  if (!planned->fit.ok()) {
    if (!no_fit_check) return Fail(planned->fit);
    // --no-fit-check: the plan is still written, to inspect with plan-dump (a runtime refuses to
    // allocate it on the machine described).
    std::fflush(stdout);
    std::fprintf(stderr, "plan-model: warning: %s (written anyway: --no-fit-check)\n",
                 planned->fit.message().c_str());
  }

  if (!out_path.empty()) {
    const std::vector<uint8_t>& bytes = planned->bytes;
    if (Status s = WriteFileAtomic(out_path, bytes); !s.ok()) return Fail(s);
    std::fprintf(log, "plan-model: wrote %s (%zu bytes)\n", out_path.c_str(), bytes.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("plan-model", Run, argc, argv); }
