#include "run_common.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <new>
#include <thread>

#include "prompt_escapes.h"
#include "stdout_check.h"
#include "text_file.h"

namespace stowage::run {

const char* ContextHint(const CommonOptions& c) {
  return c.plan.empty() ? "-c" : "the plan's; re-plan with plan-model -c";
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int MaxThreads() { return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

bool FlushStdout() {
  if (tools::FinishStdout("stowage-run", 0) == 0) return true;
  // Reported once: clear both streams' error state (std::cout's flush goes through stdout and fails
  // with it), so that the check at exit (RunTool's FinishStdout) does not report it again.
  std::clearerr(stdout);
  std::cout.clear();
  return false;
}

void EndStreamedLine() {
  std::printf("\n");
  FlushStdout();
}

Status CheckPlanningFlagsUnused(const CLI::App& app, const CommonOptions& c) {
  if (c.plan.empty()) return Status();
  for (const char* name : {"--ctx-size", "--batch-size", "--ubatch-size", "--n-gpu-layers", "--cache-type-k",
                           "--cache-type-v", "--flash-attn", "--no-mmap", "--no-repack", "--no-kv-offload",
                           "--no-fit-check", "--swa-full", "--llamacpp-compat", "-O"}) {
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt != nullptr && opt->count() > 0)
      return InvalidArgument(std::string(name) +
                             " applies only when planning on the fly; the plan given with --plan fixes it "
                             "(re-plan with plan-model)");
  }
  return Status();
}

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed comes before the error line when both go to one file
  std::fprintf(stderr, "stowage-run: %s\n", s.message().c_str());
  return 1;
}

Result<std::string> ReadTextFile(const std::string& file, const char* what, bool escape) {
  if (file.empty()) return IoError("-f '': no file name (expected " + std::string(what) + ")");
  const auto out_of_memory = [&] {
    return ResourceExhausted(file + ": out of memory while reading it, expected " + std::string(what));
  };
  Result<std::string> read = IoError(file);
  try {
    read = tools::ReadTextFile(file, what);
  } catch (const std::bad_alloc&) {  // the text takes up to tools::kMaxTextFileBytes
    return out_of_memory();
  }
  STOWAGE_ASSIGN_OR_RETURN(std::string text, std::move(read));
  // A FIFO is opened without waiting for a writer (waiting could hang forever): one that gave no
  // bytes is said to be one, not an empty file; start its writer first (`-f /dev/stdin` from a pipe).
  struct stat st;
  if (text.empty() && ::stat(file.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
    return IoError(file +
                   ": a FIFO or pipe with no writer (nothing was read; start the writer before stowage-run), "
                   "expected " +
                   std::string(what));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!escape) return text;
  try {
    return tools::ProcessEscapes(text);
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  }
}

}  // namespace stowage::run
