// What stowage-run's subcommands (generate, perplexity, bench) share: the options given before the
// subcommand, the command-line limits, the error and output helpers, and the -f text reader.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "planner_args.h"
#include "stowage/runtime/status.h"

namespace stowage {
class Transport;
}

namespace stowage::run {

/// Upper bound of token counts on the command line (-c, -b, -ub, -n, -p): 2^24.
inline constexpr int kMaxTokens = 16777216;
/// --seed's default, as llama.cpp's LLAMA_DEFAULT_SEED: a random seed for each run (printed).
inline constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

/// The options every subcommand takes (given before the subcommand): the model, the plan or the
/// flags of planning on the fly, and the session's settings.
struct CommonOptions {
  /// The tool's name that begins its warnings and notes ("stowage-run", "stowage-server").
  std::string program = "stowage-run";
  std::string model, plan;
  int threads = 0;
  uint32_t n_ctx = 0, n_batch = 2048, n_ubatch = 512;
  /// -ngl when planning on the fly (tools::kAutoGpuLayers: --fit); stowage-run (but bench) and
  /// stowage-server set --llamacpp-compat's default when it is not given (auto for 2026, 0 for feb25).
  int n_gpu_layers = 0;
  std::string cache_type_k = "f16", cache_type_v = "f16";
  /// -fa: on, off or auto, normalized by tools::FlashAttnValue; empty (not given): the default of
  /// llamacpp_compat (planner::LlamacppDefaultsOf: off for feb25, auto for 2026).
  std::string flash_attn;
  /// --llamacpp-compat when planning on the fly: "feb25" or "2026" (tools::LlamacppCompatValue);
  /// empty: planner::kDefaultLlamacppCompat.
  std::string llamacpp_compat;
  /// -O when planning on the fly: the compiler stage's level, as plan-model's (tools::AddOptLevelOption;
  /// 0 the planner's graphs, 1 the compiler without rewriting passes, 2 with them).
  int opt_level = tools::kDefaultOptLevel;
  bool huge_pages = false;
  bool llamacpp_numerics = false;
  /// --cpu-isa: the highest CPU kernel level (avx512vnni, avx512, avx2, scalar; SessionOptions::cpu_max_isa)
  std::string cpu_isa = "avx512vnni";
  bool no_mmap = false, no_repack = false, no_kv_offload = false;
  bool swa_full =
      false;  ///< --swa-full: full-size SWA cache when planning on the fly (ContextConfig::swa_full)
  bool no_fit_check = false;  ///< --no-fit-check: run a plan made on the fly that does not fit (a warning)
  /// Sequences of a plan made on the fly (ContextConfig::n_seq_max, llama.cpp -np; stowage-server's
  /// slots) and whether they share one KV cache (ContextConfig::kv_unified, -kvu).
  uint32_t n_seq_max = 1;
  bool kv_unified = false;
  /// Under mpirun (hosts.h): the MPI transport, rank h running host h of a plan made across hosts;
  /// null otherwise. --mpi-timeout: the seconds any wait for another rank may last.
  std::shared_ptr<Transport> transport;
  double mpi_timeout = 60;
};

/// With --plan, a planning flag given on `app` (those of --ctx-size, --batch-size, --ubatch-size,
/// --n-gpu-layers, --cache-type-k/-v, --flash-attn, --no-mmap, --no-repack, --no-kv-offload,
/// --no-fit-check, --swa-full, --llamacpp-compat and -O that `app` declares) is refused with
/// kInvalidArgument naming it: the plan fixes what it would set. OK without --plan.
Status CheckPlanningFlagsUnused(const CLI::App& app, const CommonOptions& c);

/// How a context that is too small is enlarged, for messages: "-c" when planning on the fly,
/// else "the plan's; re-plan with plan-model -c".
const char* ContextHint(const CommonOptions& c);

using Clock = std::chrono::steady_clock;
/// Seconds from `a` to `b`.
double Seconds(Clock::time_point a, Clock::time_point b);

/// The largest -t a Session accepts on this machine: 4x the hardware threads (CheckThreadCount,
/// session.h), so that -t is refused, and --help states its range, in the common wording.
int MaxThreads();

/// Flushes stdout; false after printing FinishStdout's one line when the text cannot be written
/// (the stream's error state is then cleared, so main's FinishStdout does not print a second line).
/// Generation stops at the first lost write instead of computing text nobody can read.
bool FlushStdout();

/// Ends the streamed text's line and flushes it before an error line on (unbuffered) stderr.
void EndStreamedLine();

/// Prints "stowage-run: <message>" on stderr after flushing stdout (what was printed comes before
/// the error line when both go to one file); returns the exit status 1.
int Fail(const Status& s);

/// The text of a file given with -f (the prompt, or perplexity's text) as llama.cpp's common -f
/// handler reads it: the whole file, one final newline dropped, then the escapes expanded unless
/// --no-escape (common_params_parse_ex). Unlike llama.cpp, the file must be a regular file or a
/// pipe (`-f /dev/stdin`) of at most tools::kMaxTextFileBytes (256 MiB): a device (/dev/zero) or
/// folder, or more text, is one error naming it, what it should be (`what`) and the limit hit
/// (tools::ReadTextFile). A FIFO is read without waiting for its writer: one with no writer (nothing
/// read) is refused as such, rather than read as an empty file or waited on forever.
Result<std::string> ReadTextFile(const std::string& file, const char* what, bool escape);

}  // namespace stowage::run
