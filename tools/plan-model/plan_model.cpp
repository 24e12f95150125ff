// plan-model: plans where every weight, KV cache tensor and graph node of a GGUF model goes on a
// machine's devices (real or described by manifests), prints it in llama.cpp's log line formats and
// writes the plan file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli_numbers.h"
#include "cost_split.h"
#include "deploy_report.h"
#include "llama_args.h"
#include "planner_args.h"
#include "stdout_check.h"
#include "stowage/planner/cluster.h"
#include "stowage/planner/explain.h"
#include "stowage/planner/from_probe.h"
#include "stowage/planner/graph.h"
#include "stowage/planner/plan.h"
#include "stowage/planner/registry.h"
#include "stowage/planner/sm_tensor.h"
#include "stowage/planner/tensor_split_plan.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/host_devices.h"
#include "stowage/runtime/plan.h"
#ifdef STOWAGE_HAVE_COMPILER
#include "stowage/Compiler/CompilePlan.h"
#include "stowage/plan/plan_generated.h"
#endif

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
/// devices. A list without a CPU device gets the CPU manifest `host_cpu` names (a registry key or
/// manifest file), else this machine's CPU, which `*assumed_cpu` then describes (one line for the
/// log: the planning machine is not necessarily the target).
Result<std::vector<DeviceManifest>> MachineDevices(const std::string& device_list,
                                                   const std::vector<std::string>& registry_dirs,
                                                   LlamacppCompat compat, const std::string& free_overrides,
                                                   const std::string& host_cpu, const char* argv0,
                                                   std::string* assumed_cpu) {
  std::vector<MemoryOverride> ovr;
  if (!free_overrides.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(ovr, ParseMemoryOverrides(free_overrides));
  }
  const std::vector<std::string> dirs = RegistrySearchDirs(registry_dirs, ShippedRegistryDir(argv0), compat);
  std::vector<DeviceManifest> devices;
  // "--device none" (llama.cpp -dev none): no GPU or ACCEL device, only this machine's CPU.
  if (!device_list.empty() && device_list != "none") {
    STOWAGE_ASSIGN_OR_RETURN(Registry reg, Registry::Open(dirs));
    STOWAGE_ASSIGN_OR_RETURN(devices, reg.MakeDevices(device_list));
  }
  auto is_cpu = [](const DeviceManifest& d) { return d.type == DeviceType::kCpu; };
  const auto listed_cpu = std::find_if(devices.begin(), devices.end(), is_cpu);
  if (!host_cpu.empty()) {
    if (listed_cpu != devices.end())
      return InvalidArgument("--host-cpu " + host_cpu + ": --device already lists a CPU (" +
                             listed_cpu->name + "): give the CPU in one of them");
    STOWAGE_ASSIGN_OR_RETURN(Registry reg, Registry::Open(dirs));
    auto cpu = reg.MakeDevices(host_cpu);
    if (!cpu.ok()) return InvalidArgument("--host-cpu: " + cpu.status().message());
    if (cpu->size() != 1 || !is_cpu(cpu->front()))
      return InvalidArgument(
          "--host-cpu " + host_cpu + ": expected one CPU manifest, found " + std::to_string(cpu->size()) +
          " device(s)" + (cpu->empty() ? "" : std::string(" of type ") + DeviceTypeName(cpu->front().type)));
    devices.push_back(cpu->front());
  }
  const bool has_cpu = std::any_of(devices.begin(), devices.end(), is_cpu);
  if (devices.empty() || !has_cpu) {
    // A list, or "none": only the CPU of this machine; else every probed device (CUDA0, CUDA1, ...).
    STOWAGE_ASSIGN_OR_RETURN(std::vector<DeviceManifest> probed,
                             planner::ManifestsFromProbe(ProbeDevices().devices, [&](const ProbedDevice& d) {
                               return device_list.empty() || d.type == DeviceType::kCpu;
                             }));
    for (const DeviceManifest& d : probed) {
      if (d.type != DeviceType::kCpu || device_list.empty() || device_list == "none") continue;
      char free[64];
      std::snprintf(free, sizeof free, "%.2f MiB", d.memory_free / 1048576.0);
      *assumed_cpu = "plan-model: --device lists no CPU: assumed this machine's CPU (" + d.name + ", " +
                     d.description + ", " + free +
                     " free host memory); --host-cpu NAME (a registry CPU manifest such as cpu-avx512, or a "
                     "manifest file) plans for another host";
    }
    devices.insert(devices.end(), probed.begin(), probed.end());
  }
  // A listed device named like a probed one (a CPU manifest typed GPU, then this machine's CPU).
  STOWAGE_RETURN_IF_ERROR(CheckUniqueDeviceNames(devices));
  STOWAGE_RETURN_IF_ERROR(ApplyMemoryOverrides(devices, ovr));
  return devices;
}

}  // namespace

namespace {

/// The command line's values, as CLI11 fills them.
struct Options {
  std::string model_path, out_path, ctk = "f16", ctv = "f16", device_list, sm = "layer", ts, explain, report;
  std::string flash_attn, header_path, host_cpu, cluster, split = "memory";
  std::string llamacpp_compat = planner::LlamacppCompatName(planner::kDefaultLlamacppCompat);
  uint64_t file_size = 0;
  std::vector<std::string> registry_dirs, ot, free_ovr;
  ContextConfig cfg;
  PlacementOptions opt;
  bool no_mmap = false, no_kv_offload = false, no_op_offload = false, fit = false, cpu_moe = false,
       timing = false, no_fit_check = false, verbose = false;
  int n_cpu_moe = 0, debug_splits = 0;
  int opt_level =
      tools::kDefaultOptLevel;  ///< -O: 0 the planner's graphs, 1 the compiler without rewrites, 2 every pass
  std::vector<double> fit_target_mib = {planner::kDefaultFitTargetBytes / 1048576.0};
  uint32_t fit_ctx = 4096;
  CLI::Option* out_opt = nullptr;  // -o, to tell "-o ''" from no -o
};

/// Declares every option of plan-model on `app`, bound to `o`.
void AddOptions(CLI::App& app, Options& o) {
  app.add_option("-m,--model", o.model_path, "GGUF model file (or --header-only)");
  app.add_option(
      "--header-only", o.header_path,
      "plan a model that is not here from its header: the first bytes of its GGUF file (e.g. head -c "
      "20M, or gguf-dump --save-header), with --file-size (instead of -m)");
  app.add_option("--file-size", o.file_size, "--header-only: the whole GGUF file's size in bytes")
      ->check(tools::IntegerIn(1, UINT64_MAX));
  app.add_option("--cluster", o.cluster,
                 "plan across hosts: a cluster file (JSON: hosts, each a device list with free memory, and "
                 "links; planner/registry/clusters); host h >= 1's devices become model devices MPI<h>:NAME "
                 "and get pipeline stages (contiguous layer ranges, -ts rule by memory); run under mpirun, "
                 "rank h = host h (instead of --device, --host-cpu and --free)");
  app.add_option("--split", o.split,
                 "--cluster: how the offloaded layers become pipeline stages: memory (the -ts rule by free "
                 "memory, the default) or cost (the least time per generated token by the manifests' "
                 "bandwidth and FLOP figures and the links', within each device's memory; sets -ts)")
      ->check(CLI::IsMember({"memory", "cost"}));
  app.add_option(
      "--host-cpu", o.host_cpu,
      "the CPU manifest (registry key or file) when --device lists no CPU (default: this machine's CPU, "
      "named on the log)");
  o.out_opt = app.add_option("-o,--output", o.out_path, "plan file to write (default: none)");
  app.add_option(
      "--device", o.device_list,
      "devices of the machine: registry keys or manifest files, comma-separated; a list without a CPU "
      "device gets this machine's CPU; 'none': the CPU only (default: this machine's devices)");
  app.add_option("--registry", o.registry_dirs,
                 "extra folder of device manifests (searched before the shipped one)");
  app.add_option(
         "--free", o.free_ovr,
         "what-if free memory: NAME=SIZE[,NAME=SIZE...] (e.g. CUDA0=10GiB), repeatable; one value per device")
      ->allow_extra_args(false);
  app.add_option(
         "-c,--ctx-size", o.cfg.n_ctx,
         "context size in tokens (0 = the model's training context; default: --llamacpp-compat's, 4096 for "
         "feb25, 0 for 2026, llama.cpp common's)")
      ->check(tools::IntegerIn(0, kMaxTokens));
  app.add_option("-b,--batch-size", o.cfg.n_batch, "logical batch size")
      ->check(tools::IntegerIn(1, kMaxTokens));
  app.add_option("--ubatch-size", o.cfg.n_ubatch, "physical batch size")
      ->check(tools::IntegerIn(1, kMaxTokens));
  app.add_option("--cache-type-k", o.ctk, "KV cache type for K (f16, f32, q8_0, ...)");
  app.add_option("--cache-type-v", o.ctv, "KV cache type for V");
  app.add_option(
         "--flash-attn", o.flash_attn,
         "flash attention: on (one FLASH_ATTN_EXT per layer, V cache untransposed, n_ctx padded to 256), "
         "off (the default with --llamacpp-compat feb25), or auto (on unless a layer's attention would run "
         "on another device than the layer, as llama.cpp DEC25; the default with 2026)")
      ->transform(tools::FlashAttnValue());
  app.add_option("--n-gpu-layers", o.opt.n_gpu_layers,
                 "layers to offload: N, 'all' or <= -2 (every layer and the output), 'auto' or -1 (= --fit) "
                 "(llama.cpp -ngl; default: --llamacpp-compat's, 0 for feb25, auto for 2026)")
      ->transform(tools::GpuLayersValue());
  app.add_option(
      "--split-mode", o.sm,
      "none, layer, row or tensor (llama.cpp -sm; tensor: per-device shares printed, no plan file; with "
      "--cluster: a tensor split across the hosts' MPI ranks, one plan file)");
  app.add_option("--tensor-split", o.ts, "proportions per model device, e.g. 3,1 (llama.cpp -ts)");
  app.add_option("--main-gpu", o.opt.main_gpu, "the model device used with -sm none (llama.cpp -mg)")
      ->check(tools::IntegerIn(0, kMaxDevices - 1));
  app.add_option("--override-tensor", o.ot, "REGEX=BUFFER_TYPE[,...] (llama.cpp -ot), repeatable");
  app.add_flag("--cpu-moe", o.cpu_moe, "keep all MoE expert weights on the CPU");
  app.add_option("--n-cpu-moe", o.n_cpu_moe, "keep the MoE expert weights of the first N layers on the CPU")
      ->check(tools::IntegerIn(0, tools::kAllGpuLayers));
  app.add_flag("--no-kv-offload", o.no_kv_offload, "KV cache on the CPU (llama.cpp -nkvo)");
  app.add_option(
         "--parallel", o.cfg.n_seq_max,
         "sequences kept at once (llama.cpp -np, n_seq_max; default 1): the output buffer holds a row "
         "per sequence and the tg graph a token per sequence; several need --kv-unified")
      ->check(tools::IntegerIn(1, 256));
  app.add_flag("--kv-unified", o.cfg.kv_unified,
               "one KV cache of n_ctx cells shared by the sequences (llama.cpp -kvu, llama-server's default "
               "with its automatic slots)");
  app.add_option("--n-outputs-max", o.cfg.n_outputs_max,
                 "the most outputs one batch may ask for (llama_context_params n_outputs_max; default 0: "
                 "n_batch, llama.cpp's; llama-server sets its slots, -np): with --llamacpp-compat 2026 the "
                 "outputs of the pp graph")
      ->check(tools::IntegerIn(0, 1 << 20));
  app.add_flag("--swa-full", o.cfg.swa_full,
               "full-size SWA cache: the sliding-window layers of gemma2/gemma3 get n_ctx cells instead of "
               "min(n_ctx, n_swa + n_ubatch) padded to 256 (llama.cpp --swa-full)");
  app.add_flag("--no-mmap", o.no_mmap, "load weights into allocated buffers instead of mapping the file");
  app.add_flag("--no-repack", o.opt.no_repack, "no CPU extra buffer types (CPU_REPACK)");
  app.add_flag("--no-host", o.opt.no_host, "no GPU host buffer type in the CPU list");
  app.add_flag("--no-op-offload", o.no_op_offload, "do not offload large-batch ops of host weights to GPUs");
  app.add_option("--explain", o.explain, "print why every weight and node is where it is: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--report", o.report,
                 "print the deployment report: per device the bytes of weights, KV, compute and output "
                 "against free memory and the --fit target, what would move next, every device over "
                 "(text or json; also when the plan does not fit)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--debug-splits", o.debug_splits,
                 "print the scheduler's splits as GGML_SCHED_DEBUG=N does (0, 1, 2)")
      ->check(tools::IntegerIn(0, 2));
  app.add_flag("--timing", o.timing, "print the time spent building the graphs and placing them");
  app.add_flag("--no-fit-check", o.no_fit_check,
               "write the plan even when it does not fit a device's memory (a warning instead of the error)");
  app.add_flag("-v,--verbose", o.verbose,
               "also llama.cpp's debug-level log lines (\"layer N assigned to device D\", \"cannot be used "
               "with preferred buffer type\")");
  app.add_option("--fit-target", o.fit_target_mib,
                 "MiB --fit keeps free on each model device: one value for every device, or MiB0,MiB1,... "
                 "(llama.cpp -fitt; default 1024)")
      ->delimiter(',')
      ->check(tools::NumberIn(0, 1048576));
  app.add_option("--fit-ctx", o.fit_ctx,
                 "the smallest context --fit shrinks an automatic one (-c 0) to (llama.cpp -fitc; default "
                 "4096; an explicit -c 0 alone keeps the whole context)")
      ->check(tools::IntegerIn(0, UINT32_MAX));
  app.add_flag("--fit", o.fit,
               "choose the context (when automatic), -ngl, -ts and -ot that fit the devices' free memory as "
               "llama.cpp 2026's --fit does, and print them as llama-fit-params does");
  tools::AddLlamacppCompatOption(app, o.llamacpp_compat);
  tools::AddOptLevelOption(app, o.opt_level);
}

/// argv with "--explain" and "--report" given their optional value ("--explain", "--explain json"
/// and "--explain=json" all become "--explain=<value>", "text" when none).
std::vector<std::string> WithOptionalValues(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--explain" || a == "--report") {
      const bool valued =
          i + 1 < argc && (std::string(argv[i + 1]) == "text" || std::string(argv[i + 1]) == "json");
      a += "=" + std::string(valued ? argv[++i] : "text");
    }
    args.push_back(a);
  }
  return args;
}

/// Parses the command line into the options bound to `app` (llama.cpp's short aliases too): a
/// negative value to go on, else the exit code (help, a parse error).
int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args = WithOptionalValues(argc, argv);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  return tools::ParseWithAliases(app, static_cast<int>(av.size()), av.data(),
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
                                  {"-fitc", "--fit-ctx"},
                                  {"-fa", "--flash-attn"},
                                  {"-np", "--parallel"},
                                  {"-kvu", "--kv-unified"}});
}

/// Checks the options (in the order plan-model always reported them) and turns them into the
/// planning request; --fit / -ngl auto settle `o.fit` and `o.opt.n_gpu_layers` first.
Result<PlanRequest> MakeRequest(Options& o, const CLI::App& app, int argc, char** argv) {
  PlacementOptions& opt = o.opt;
  if (opt.n_gpu_layers == tools::kAutoGpuLayers) {  // -ngl auto: llama.cpp fits the layers to free memory
    o.fit = true;
    opt.n_gpu_layers = 0;
  } else if (o.fit && app.count("--n-gpu-layers") > 0) {
    // llama_params_fit leaves an -ngl the user set alone; here --fit exists only to choose it.
    return InvalidArgument("--fit chooses -ngl: give --fit or -ngl N, not both (-ngl auto is --fit)");
  }
  if (o.model_path.empty() == o.header_path.empty())
    return InvalidArgument(o.model_path.empty()
                               ? "no model: give -m FILE, or --header-only FILE --file-size BYTES"
                               : "-m and --header-only both given: give one model");
  if (!o.header_path.empty() && app.count("--file-size") == 0)
    return InvalidArgument("--header-only " + o.header_path +
                           ": give the whole file's size with --file-size BYTES (the header holds no size)");
  if (o.header_path.empty() && app.count("--file-size") > 0)
    return InvalidArgument("--file-size is for --header-only (with -m the file's own size is used)");
  if (o.explain == "json" && o.report == "json")
    return InvalidArgument("--explain=json and --report json both print JSON on standard output: give one");
  if (o.out_opt->count() > 0 && o.out_path.empty())
    return InvalidArgument(
        "-o/--output: empty file name (give the plan file to write, or no -o for no plan)");
  for (const auto& dir : o.registry_dirs)
    if (dir.empty()) return InvalidArgument("--registry: empty folder name");
  if (!o.registry_dirs.empty()) {  // checked even when no --device list reads it
    auto reg = Registry::Open(o.registry_dirs);
    if (!reg.ok()) return InvalidArgument("--registry: " + reg.status().message());
  }
  auto tk = planner::ParseKvCacheType(o.ctk);
  if (!tk.ok()) return InvalidArgument("--cache-type-k: " + tk.status().message());
  auto tv = planner::ParseKvCacheType(o.ctv);
  if (!tv.ok()) return InvalidArgument("--cache-type-v: " + tv.status().message());
  PlanRequest request;
  request.llamacpp_compat = tools::LlamacppCompatOf(o.llamacpp_compat);
  const LlamacppDefaults defaults = LlamacppDefaultsOf(request.llamacpp_compat);
  if (app.count("--ctx-size") == 0) o.cfg.n_ctx = defaults.n_ctx;
  if (app.count("--n-gpu-layers") == 0 && defaults.fit) o.fit = true;  // 2026: -ngl auto, --fit on
  if (!o.fit) {
    // llama.cpp 2026 takes -fitt / -fitc whenever its fit runs (common_init_result: --fit is on by
    // default, and runs with a user's -ngl too, up to the layers); here --fit only chooses -ngl and
    // does not run with -ngl N or feb25's default -ngl 0: say so rather than ignore them.
    const int ngl = opt.n_gpu_layers;
    const std::string why =
        app.count("--n-gpu-layers") > 0
            ? "-ngl " + (ngl == tools::kAllGpuLayers ? std::string("all") : std::to_string(ngl)) + " given"
            : "--llamacpp-compat feb25 plans -ngl 0 unless -ngl auto or --fit";
    if (app.count("--fit-target") > 0 && o.report.empty())
      std::fprintf(stderr,
                   "plan-model: warning: --fit-target (-fitt) is not used: --fit does not run (%s); --report "
                   "would show it as each GPU's fit target\n",
                   why.c_str());
    if (app.count("--fit-ctx") > 0)
      std::fprintf(stderr, "plan-model: warning: --fit-ctx (-fitc) is not used: --fit does not run (%s)\n",
                   why.c_str());
  }
  if (app.count("--flash-attn") == 0) o.flash_attn = tools::FlashAttnName(defaults.flash_attn);
  request.context = o.cfg;
  request.context.type_k = *tk;
  request.context.type_v = *tv;
  request.flash_attn = tools::FlashAttnModeOf(o.flash_attn);
  STOWAGE_ASSIGN_OR_RETURN(opt.split_mode, ParseSplitMode(o.sm));
  if (!o.ts.empty()) {
    auto v = ParseTensorSplit(o.ts);
    if (!v.ok()) return InvalidArgument("--tensor-split: " + v.status().message());
    opt.tensor_split = *v;
  }
  for (const auto& ov : o.ot) {
    STOWAGE_ASSIGN_OR_RETURN(auto v, ParseTensorOverrides(ov));
    opt.overrides.insert(opt.overrides.end(), v.begin(), v.end());
  }
  opt.use_mmap = !o.no_mmap;
  opt.offload_kqv = !o.no_kv_offload;
  opt.op_offload = !o.no_op_offload;
  request.placement = opt;
  request.cpu_moe = o.cpu_moe;
  request.n_cpu_moe = o.n_cpu_moe;
  request.fit = o.fit;
  for (double mib : o.fit_target_mib) request.fit_targets.push_back(static_cast<uint64_t>(mib * 1048576.0));
  request.fit_target = request.fit_targets.front();
  // llama.cpp: -c 0 given turns the context reduction off; a later -fitc turns it on again.
  request.fit_n_ctx_min =
      app.count("--fit-ctx") == 0 && app.count("--ctx-size") > 0 && o.cfg.n_ctx == 0 ? UINT32_MAX : o.fit_ctx;
  request.fit_check = !o.no_fit_check;
  request.serialize = !o.out_path.empty();
  for (int i = 1; i < argc; ++i) request.flags += (i > 1 ? " " : "") + std::string(argv[i]);
  return request;
}

/// Prints planning's messages as they come: warnings on standard error, llama.cpp's load lines on
/// `log` (ReportLines has the context overflow warning; the "no usable GPU" warning is stowage-run's);
/// --fit's trace with -v. With `fused_op_lines` (llama.cpp 2026), -fa auto's resolution is kept there
/// instead, for ReportLines to print where sched_reserve prints it.
void PrintPlanMessage(const PlanMessage& msg, FILE* log, bool verbose, std::string* fused_op_lines) {
  switch (msg.kind) {
    case PlanMessageKind::kWarning:
      std::fprintf(stderr, "plan-model: warning: %s\n", msg.text.c_str());
      break;
    case PlanMessageKind::kFlashAttnEnabled:
    case PlanMessageKind::kFlashAttnDisabled:
      if (fused_op_lines) {
        *fused_op_lines = msg.text;
        break;
      }
      [[fallthrough]];
    case PlanMessageKind::kBatchRaised:
      std::fprintf(log, "%s\n", msg.text.c_str());
      break;
    case PlanMessageKind::kFitChosen:  // one line or several
      for (size_t at = 0; at <= msg.text.size();) {
        const size_t nl = std::min(msg.text.find('\n', at), msg.text.size());
        std::fprintf(log, "plan-model: --fit: %.*s\n", static_cast<int>(nl - at), msg.text.c_str() + at);
        at = nl + 1;
      }
      break;
    case PlanMessageKind::kFitTrace:
      if (verbose) std::fprintf(log, "common_params_fit_impl: %s\n", msg.text.c_str());
      break;
    case PlanMessageKind::kContextOverflow:
    case PlanMessageKind::kGpuLayersIgnored:
    case PlanMessageKind::kFitSearched:
      break;
  }
}

/// Writes `bytes` to `path` atomically once the runtime's plan verifier (PlanFile::FromBytes, the one
/// every tool uses) accepts them, so that plan-model never writes a plan stowage-run refuses, at
/// every -O level and without MLIR. Errors: the verifier's (as kInternal: a planner bug) or the write's.
Status WriteVerifiedPlan(const std::string& path, const std::vector<uint8_t>& bytes, FILE* log) {
  if (auto verified = PlanFile::FromBytes(bytes, path); !verified.ok())
    return Internal("plan verifier refused the plan to write: " + verified.status().message());
  STOWAGE_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  std::fprintf(log, "plan-model: wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
  return Status();
}

/// Prints what was planned: the timing line, llama.cpp's report lines, the scheduler's splits,
/// --explain and the memory warnings; then the fit result, and writes the plan file. Returns the
/// exit code.
int ReportAndWrite(const Options& o, const PlanResult& planned, const planner::AskedContext& asked, FILE* log,
                   double ms, const std::vector<std::string>& cluster_explain) {
  const ModelGraphs& m = planned.graphs;
  const PlacementOutcome& outcome = planned.outcome;
  if (o.timing)
    std::fprintf(log, "plan-model: planning took %.1f ms (%u layers, %zu + %zu graph nodes)\n", ms,
                 m.hp.n_layer, m.pp.nodes.size(), m.tg.nodes.size());
  for (const auto& line : ReportLines(m, outcome, planned.placement, o.verbose, asked))
    std::fprintf(log, "%s\n", line.c_str());
  if (o.debug_splits > 0) {
    for (const Graph* g : {&m.pp, &m.tg}) {
      std::fprintf(log, "plan-model: scheduler splits of graph %s (n_tokens = %lld):", g->name.c_str(),
                   static_cast<long long>(g->max_tokens));
      std::fprintf(log, "%s", FormatSchedDebug(*g, outcome.placement, o.debug_splits).c_str());
    }
  }
  if (o.explain == "text") {
    std::printf("%s", ExplainText(outcome.placement).c_str());
    for (const std::string& line : cluster_explain) std::printf("%s\n", line.c_str());
  }
  if (o.explain == "json") std::printf("%s", ExplainJson(outcome.placement).c_str());
  if (!o.report.empty()) {
    const tools::DeploymentReport r = tools::MakeDeploymentReport(
        planned, o.model_path, static_cast<uint64_t>(o.fit_target_mib.front() * 1048576.0));
    if (o.report == "json")
      std::printf("%s", tools::DeploymentReportJson(r).c_str());
    else
      std::fprintf(log, "%s", tools::DeploymentReportText(r).c_str());
  }
  for (const std::string& w : planned.memory_warnings) {
    std::fflush(stdout);
    std::fprintf(stderr, "plan-model: warning: %s\n", w.c_str());
  }
  if (!planned.fit.ok()) {
    if (!o.no_fit_check) return Fail(planned.fit);
    // --no-fit-check: the plan is still written, to inspect with plan-dump (a runtime refuses to
    // allocate it on the machine described).
    std::fflush(stdout);
    std::fprintf(stderr, "plan-model: warning: %s (written anyway: --no-fit-check)\n",
                 planned.fit.message().c_str());
  }

  if (!o.out_path.empty()) {
    if (Status s = WriteVerifiedPlan(o.out_path, planned.bytes, log); !s.ok()) return Fail(s);
  }
  return 0;
}

/// The devices of every host of the --cluster file (cluster.h's ClusterDevices), the hosts printed
/// one line each on standard error.
Result<std::vector<DeviceManifest>> ClusterMachine(const Options& o, LlamacppCompat compat, const char* argv0,
                                                   planner::Cluster* out) {
  if (!o.device_list.empty() || !o.host_cpu.empty() || !o.free_ovr.empty())
    return InvalidArgument(
        "--cluster " + o.cluster +
        ": the cluster file gives every host's devices and memory, not --device, --host-cpu "
        "or --free");
  STOWAGE_ASSIGN_OR_RETURN(
      *out, planner::LoadClusterFile(o.cluster,
                                     RegistrySearchDirs(o.registry_dirs, ShippedRegistryDir(argv0), compat)));
  const planner::Cluster& cluster = *out;
  std::vector<DeviceManifest> devices = planner::ClusterDevices(cluster);
  for (size_t h = 0; h < cluster.hosts.size(); ++h) {
    std::string names;
    for (const auto& d : devices)
      if (HostOfDevice(d.name) == static_cast<int>(h)) names += (names.empty() ? "" : ", ") + d.name;
    std::fprintf(stderr, "plan-model: host %zu '%s' (MPI rank %zu): %s\n", h, cluster.hosts[h].name.c_str(),
                 h, names.c_str());
  }
  return devices;
}

/// -sm tensor (llama.cpp 2026 LLAMA_SPLIT_MODE_TENSOR): the Meta device over the GPU-type devices
/// and each device's share of the weights and KV (PlanSmTensor), in the reference's load-line
/// formats; its rules: flash attention required (auto turns it on), --fit not applied
/// (common_fit_params gives up), the architectures it refuses refused. No plan file: the graphs are
/// not planned per device yet. Returns the exit code.
int RunSmTensor(const Options& o, const GgufFile& gguf, const std::vector<DeviceManifest>& machine,
                const PlanRequest& request, FILE* log) {
  if (request.flash_attn == FlashAttnMode::kOff)
    return Fail(
        InvalidArgument("llama_init_from_model: SPLIT_MODE_TENSOR requires flash_attn to be enabled"));
  if (request.fit)
    std::fprintf(log,
                 "common_fit_params: failed to fit params to free device memory: "
                 "llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort\n");
  std::vector<const DeviceManifest*> gpus;
  for (const DeviceManifest& d : machine)
    if (d.type != DeviceType::kCpu) gpus.push_back(&d);
  if (gpus.empty()) return Fail(InvalidArgument("LLAMA_SPLIT_MODE_TENSOR needs >= 1 devices"));
  auto hp = ReadHParams(gguf);
  if (!hp.ok()) return Fail(hp.status());
  ContextConfig cfg = request.context;
  cfg.flash_attn = true;
  if (Status st = ResolveContext(*hp, o.model_path, &cfg); !st.ok()) return Fail(st);
  auto m = BuildModelGraphs(gguf, *hp, cfg);
  if (!m.ok()) return Fail(m.status());
  const int n = static_cast<int>(gpus.size());
  auto plan = PlanSmTensor(*m, n, request.placement.tensor_split);
  if (!plan.ok()) return Fail(plan.status());
  std::fprintf(
      log, "llama_prepare_model_devices: creating a Meta device for tensor parallelism from %d devices:\n",
      n);
  for (int j = 0; j < n; ++j)
    std::fprintf(log, "llama_prepare_model_devices: - device %d: %s\n", j, gpus[j]->name.c_str());
  if (request.flash_attn == FlashAttnMode::kAuto)
    std::fprintf(log,
                 "llama_init_from_model: enabling flash_attn since it is required for SPLIT_MODE_TENSOR\n");
  const double mib = 1048576.0;
  std::fprintf(log, "load_tensors: %12s model buffer size = %8.2f MiB\n", "Meta()",
               *std::max_element(plan->weight_bytes.begin(), plan->weight_bytes.end()) / mib);
  std::fprintf(log, "llama_kv_cache: %10s KV buffer size = %8.2f MiB\n", "Meta()",
               *std::max_element(plan->kv_bytes.begin(), plan->kv_bytes.end()) / mib);
  for (int j = 0; j < n; ++j)
    std::fprintf(log, "plan-model: -sm tensor: %s: weights %.2f MiB (mirrored %.2f MiB), KV %.2f MiB\n",
                 gpus[j]->name.c_str(), plan->weight_bytes[j] / mib, plan->mirrored_bytes[j] / mib,
                 plan->kv_bytes[j] / mib);
  std::fprintf(log, "plan-model: -sm tensor: %d all-reduces per graph\n", plan->n_allreduce);
  if (!o.out_path.empty())
    return Fail(
        Unimplemented("-o " + o.out_path + ": -sm tensor plans are not written yet (shares printed above)"));
  return 0;
}

/// -sm tensor with --cluster: a tensor split across the hosts as MPI ranks (tensor_split_plan.h):
/// each rank's heads, FFN columns and KV on its host's CPU, one plan file; flash attention as asked
/// (auto: on, as -sm tensor's). Prints a line per rank (its shares and memory against its free
/// memory) and refuses a rank over its free memory (unless --no-fit-check). Returns the exit code.
int RunTensorSplitRanks(const Options& o, const GgufFile& gguf, const PlanRequest& request, const char* argv0,
                        FILE* log) {
  auto cluster = planner::LoadClusterFile(
      o.cluster, RegistrySearchDirs(o.registry_dirs, ShippedRegistryDir(argv0), request.llamacpp_compat));
  if (!cluster.ok()) return Fail(cluster.status());
  auto hp = ReadHParams(gguf);
  if (!hp.ok()) return Fail(hp.status());
  ContextConfig cfg = request.context;
  cfg.flash_attn = request.flash_attn != FlashAttnMode::kOff;
  if (Status st = ResolveContext(*hp, o.model_path, &cfg); !st.ok()) return Fail(st);
  std::vector<std::vector<DeviceManifest>> hosts;
  for (const planner::ClusterHost& h : cluster->hosts) hosts.push_back(h.devices);
  auto tp = planner::PlanTensorSplitRanks(gguf, *hp, cfg, hosts, request.placement.tensor_split,
                                          request.placement, request.flags);
  if (!tp.ok()) return Fail(tp.status());
  const double mib = 1048576.0;
  std::string over;
  for (size_t r = 0; r < tp->ranks.size(); ++r) {
    const planner::TensorSplitRankMemory& m = tp->ranks[r];
    const uint64_t total = m.weights + m.kv + m.compute + m.output;
    std::fprintf(
        log,
        "plan-model: -sm tensor: rank %zu '%s': %u heads, %u KV heads, %u FFN columns per layer; "
        "weights %.2f MiB, KV %.2f MiB, compute %.2f MiB, output %.2f MiB = %.2f MiB of %.2f MiB free; "
        "%d all-reduces per token\n",
        r, cluster->hosts[r].name.c_str(), m.n_head, m.n_head_kv, m.n_ff, m.weights / mib, m.kv / mib,
        m.compute / mib, m.output / mib, total / mib, m.free / mib, m.n_allreduce);
    if (total > m.free)
      over += (over.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " needs " +
              std::to_string(total) + " bytes, " + std::to_string(m.free) + " free";
  }
  if (!over.empty() && !o.no_fit_check)
    return Fail(ResourceExhausted(o.model_path + ": does not fit: " + over));
  if (!o.out_path.empty()) {
    if (Status s = WriteVerifiedPlan(o.out_path, tp->bytes, log); !s.ok()) return Fail(s);
  }
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{
      "plan-model: plan the placement and memory of a GGUF model ahead of time (llama.cpp semantics)"};
  Options o;
  AddOptions(app, o);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  const bool sm_tensor = o.sm == "tensor";
  if (sm_tensor) o.sm = "layer";  // the rest of the request as -sm layer's; RunSmTensor decides
  auto request = MakeRequest(o, app, argc, argv);
  if (!request.ok()) return Fail(request.status());

  if (o.split == "cost") {
    if (o.cluster.empty())
      return Fail(InvalidArgument("--split cost: plans across hosts: give --cluster FILE"));
    if (!o.ts.empty())
      return Fail(InvalidArgument("--split cost chooses -ts: give --split cost or -ts, not both"));
    if (request->fit)
      return Fail(InvalidArgument(
          "--split cost: give -ngl N (--fit, and -ngl auto, choose -ngl and -ts by memory instead)"));
  }
  std::string assumed_cpu;
  planner::Cluster cluster;
  auto machine = o.cluster.empty()
                     ? MachineDevices(o.device_list, o.registry_dirs, request->llamacpp_compat,
                                      tools::JoinValues(o.free_ovr), o.host_cpu, argv[0], &assumed_cpu)
                     : ClusterMachine(o, request->llamacpp_compat, argv[0], &cluster);
  if (!machine.ok()) return Fail(machine.status());
  const bool header_only = !o.header_path.empty();
  if (header_only) o.model_path = o.header_path;

  // Log lines go to standard output as plan-model always printed them, except when standard output
  // carries the result: the plan itself (-o /dev/stdout) or --explain=json.
  FILE* log = (o.explain == "json" || o.report == "json" ||
               (!o.out_path.empty() && tools::IsStandardOutput(o.out_path)))
                  ? stderr
                  : stdout;
  if (!o.out_path.empty() && SameFile(o.out_path, o.model_path))
    return Fail(InvalidArgument("-o " + o.out_path +
                                ": is the model file given with -m (writing the plan would replace it)"));
  if (!assumed_cpu.empty()) std::fprintf(log, "%s\n", assumed_cpu.c_str());
  auto gguf = header_only ? GgufFile::OpenHeader(o.model_path, o.file_size) : GgufFile::Open(o.model_path);
  if (!gguf.ok()) return Fail(gguf.status());
  if (sm_tensor && !o.cluster.empty()) return RunTensorSplitRanks(o, **gguf, *request, argv[0], log);
  if (sm_tensor) return RunSmTensor(o, **gguf, *machine, *request, log);

  const auto t0 = std::chrono::steady_clock::now();
  std::optional<tools::CostSplitChoice> cost;
  if (o.split == "cost") {
    auto chosen = tools::ChooseCostSplit(**gguf, *machine, cluster, request.value(), log);
    if (!chosen.ok()) return Fail(chosen.status());
    cost = std::move(*chosen);
    request->placement.tensor_split = planner::TensorSplitOf(cost->split.layers_per_device);
  }
  // llama.cpp 2026's load log: -fa as asked, its auto resolution where sched_reserve prints it.
  planner::AskedContext asked;
  const bool today = request->llamacpp_compat == LlamacppCompat::k2026;
  if (today)
    asked.flash_attn_type = request->flash_attn == FlashAttnMode::kAuto ? "auto"
                            : request->flash_attn == FlashAttnMode::kOn ? "enabled"
                                                                        : "disabled";
  auto planned = Plan(**gguf, *machine, *request, [&](const PlanMessage& msg) {
    PrintPlanMessage(msg, log, o.verbose, today ? &asked.fused_op_lines : nullptr);
  });
  if (!planned.ok() && !asked.fused_op_lines.empty()) std::fprintf(log, "%s\n", asked.fused_op_lines.c_str());
  if (planned.ok() && cost) {
    // The layer map of the plan made with the chosen -ts must be the split chosen.
    std::vector<int> counts(cost->split.layers_per_device.size(), 0);
    for (int d : planned->outcome.layers.device)
      if (d < static_cast<int>(counts.size())) ++counts[static_cast<size_t>(d)];
    if (counts != cost->split.layers_per_device)
      return Fail(Internal("--split cost: the layer map of the chosen -ts differs from the split chosen"));
  }
#ifdef STOWAGE_HAVE_COMPILER
  // The compiler stage (compiler/CompilePlan.h) on the plan to write: its graphs after the rewriting
  // passes, memory planned again. The report, --explain and --debug-splits stay the planner's.
  if (planned.ok() && o.opt_level > 0 && !planned->bytes.empty()) {
    compiler::PipelineOptions options;
    options.fuse = tools::RewritesAtOptLevel(o.opt_level);  // -O1: the planner's plan through the exporter
    auto compiled = compiler::CompilePlan(**gguf, *planned, request->flags, options);
    if (!compiled.ok()) return Fail(compiled.status());
    if (!compiled->not_compiled.empty())
      std::fprintf(stderr, "plan-model: note: %s (the planner's graphs are written, as -O0)\n",
                   compiled->not_compiled.c_str());
    if (options.fuse && compiled->not_compiled.empty()) {
      // llama.cpp's "graph nodes" line stays the planner's count (llama.cpp's); the plan written
      // holds the graphs after the rewriting passes (its bytes are verified by CompilePlan).
      const auto* graphs = plan::GetPlan(compiled->bytes.data())->graphs();
      auto nodes = [&](unsigned i) { return graphs->Get(i)->nodes() ? graphs->Get(i)->nodes()->size() : 0u; };
      std::fprintf(log, "plan-model: compiler: -O%d: pp graph %d -> %u nodes, tg graph %d -> %u nodes\n",
                   o.opt_level, planned->outcome.pp_nodes, nodes(0), planned->outcome.tg_nodes, nodes(1));
    }
    planned->bytes = std::move(compiled->bytes);
    planned->fit = compiled->fit;
  }
#endif
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!planned.ok()) return Fail(planned.status());
  std::vector<std::string> cluster_explain;
  if (!o.cluster.empty())
    cluster_explain = planner::ExplainClusterLayers(cluster, planned->outcome, cost ? &cost->input : nullptr,
                                                    cost ? &cost->split : nullptr,
                                                    cost && cost->memory ? &*cost->memory : nullptr);
  return ReportAndWrite(o, *planned, asked, log, ms, cluster_explain);
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("plan-model", Run, argc, argv); }
