// The bench subcommand, as llama-bench: prompt processing (pp) and token generation (tg) speed,
// printed as llama-bench's markdown table, CSV, JSON or JSON lines (its field names), or as one JSON
// line for the benchmark harness.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "run_common.h"
#include "stowage/runtime/status.h"

namespace stowage::run {

/// What bench measures and how it prints it, as its flags give it (validated by the caller).
struct BenchOptions {
  std::vector<int> prompts;              ///< -p: prompt tokens of the pp tests (0: none); not empty
  std::vector<int> gens;                 ///< -n: generated tokens of the tg tests (0: none); not empty
  std::vector<std::pair<int, int>> pgs;  ///< -pg pp,tg: a prompt then generated tokens in one test
  std::vector<int> threads;              ///< -t: one session each (0: all hardware threads)
  int reps = 5;                          ///< -r: repetitions after one warm-up run
  bool json_summary = false;             ///< --json: the harness's one line
  std::string format = "md";             ///< -o: md, csv, json or jsonl
  bool profile = false;                  ///< --profile: op tables after the markdown table
};

/// llama-bench's list values: "512", "128,256,512", "1-4" (first to last), "1-8+2" (step 2),
/// "1-64*2" (times 2), each value from `lo` to `hi`, at most 4096 of them. Errors
/// (kInvalidArgument) name the option (`name`) and the item.
Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& name, int lo, int hi);

/// Runs every test before printing anything (an error is then the only output): per thread count
/// one session, each -p (pp test), then each -n (tg test), then each -pg, in llama-bench's order;
/// then prints the results in `b.format` (or the --json line). Without -c (`ctx_given`) the
/// context planned on the fly is just large enough for the largest test. Returns the exit status
/// (errors: one line on stderr, status 1).
int Bench(CommonOptions c, bool ctx_given, BenchOptions b);

}  // namespace stowage::run
