// The bench subcommand, as llama-bench (llama.cpp 2026 tools/llama-bench): prompt processing (pp)
// and token generation (tg) speed over lists of settings, printed as each test finishes in
// llama-bench's markdown table, CSV, JSON, JSON lines or SQL (its columns, field names and number
// formats), or as one JSON line for the benchmark harness.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "run_common.h"
#include "stowage/runtime/status.h"

namespace stowage::run {

/// bench's flags as given. Every list option may be repeated; llama-bench appends the values of
/// each occurrence ("-p 64 -p 128,256" is 64,128,256), so these keep every occurrence.
struct BenchFlags {
  std::vector<std::string> prompts;     ///< -p
  std::vector<std::string> gens;        ///< -n
  std::vector<std::string> depths;      ///< -d
  std::vector<std::string> pgs;         ///< -pg pp,tg
  std::vector<std::string> threads;     ///< -t
  std::vector<std::string> gpu_layers;  ///< -ngl
  std::vector<std::string> flash_attn;  ///< -fa
  std::vector<std::string> batches;     ///< -b
  std::vector<std::string> ubatches;    ///< -ub
  std::vector<std::string> types_k;     ///< -ctk
  std::vector<std::string> types_v;     ///< -ctv
  int reps = 5;                         ///< -r
  std::string format = "md";            ///< -o
  bool json = false, profile = false, no_warmup = false;
};

/// Adds the bench subcommand and its options (stored in `f`) to `app`.
CLI::App* AddBench(CLI::App* app, BenchFlags* f);

/// What bench measures, its lists parsed (validated). Each list is not empty.
struct BenchOptions {
  std::vector<int> prompts = {512};            ///< -p: prompt tokens of the pp tests (0: none)
  std::vector<int> gens = {128};               ///< -n: generated tokens of the tg tests (0: none)
  std::vector<std::pair<int, int>> pgs;        ///< -pg: a prompt then generated tokens in one test
  std::vector<int> depths = {0};               ///< -d: tokens in the KV cache before each test
  std::vector<int> threads;                    ///< -t (default: the physical cores, as llama-bench)
  std::vector<int> gpu_layers = {-1};          ///< -ngl as llama-bench: < 0 = every layer
  std::vector<int> flash_attn = {-1};          ///< -fa: -1 auto, 0 off, 1 on (llama_flash_attn_type)
  std::vector<int> batches = {2048};           ///< -b
  std::vector<int> ubatches = {512};           ///< -ub
  std::vector<std::string> types_k = {"f16"};  ///< -ctk: KV cache types (ggml names)
  std::vector<std::string> types_v = {"f16"};  ///< -ctv
  int reps = 5;                                ///< -r: timed repetitions after one warm-up run
  bool warmup = true;                          ///< false with --no-warmup
  bool threads_default = true;                 ///< -t not given (llama-bench's column choice)
  bool json_summary = false;                   ///< --json: the harness's one line
  std::string format = "md";                   ///< -o: md, csv, json, jsonl or sql
  bool profile = false;                        ///< --profile: op tables after the markdown table
};

/// llama-bench's list values (parse_int_range): "512", "128,256,512", "1-4" (first to last),
/// "1-8+2" (step 2), "1-64*2" (times 2), a trailing comma allowed; each value from `lo` to `hi`
/// (with lo < 0 the first value of an item may be negative, as -ngl's), at most 4096 of them.
/// Unlike llama-bench, an empty list and a range whose last value is below its first are errors.
/// Errors (kInvalidArgument) name the option (`name`) and the item.
Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& name, int lo, int hi);

/// bench's flags parsed and checked against each other and the options given before the
/// subcommand (`c`; `app` tells which were given), before any model is read. Errors: a malformed
/// list item, nothing to measure, --json with lists or -o, --profile with another format than md,
/// a thread count Session refuses, an unknown cache type, with --plan a list of what the plan fixes
/// (-ngl, -fa, -b, -ub, -ctk, -ctv).
Result<BenchOptions> ParseBenchOptions(const CLI::App& app, const CLI::App& bench, const CommonOptions& c,
                                       const BenchFlags& f);

/// Runs the tests in llama-bench's order (for each -ngl, -b, -ub, -ctk, -ctv, -fa, -t, -d: each -p,
/// then each -n, then each -pg), each in a session planned on the fly with llama-bench's context of
/// n_prompt + n_gen + n_depth tokens (or -c `c.n_ctx` when `ctx_given`; or the --plan's, one session
/// per thread count), printing each result as it finishes in `b.format` (or, at the end, the --json
/// line). Before each timed repetition the KV cache is cleared and filled with n_depth tokens
/// (untimed). Returns the exit status (errors: one line on stderr, status 1; a test that does not fit
/// the context given with -c or --plan is refused before any output).
int Bench(const CommonOptions& c, bool ctx_given, const BenchOptions& b);

}  // namespace stowage::run
