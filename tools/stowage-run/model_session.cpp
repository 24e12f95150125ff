#include "model_session.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#include "hosts.h"
#include "mapped_file_guard.h"
#include "plan_on_the_fly.h"
#include "stowage/runtime/host_devices.h"

namespace stowage::run {

Result<std::shared_ptr<const GgufFile>> OpenModel(const CommonOptions& c) {
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> gguf, GgufFile::Open(c.model));
  tools::GuardMappedFile(c.program.c_str(), gguf->path(), gguf->bytes(), gguf->file_size());
  return gguf;
}

namespace {

// The model's tokenizer; what it accepted with llama.cpp's fallbacks is printed as warnings.
Result<Tokenizer> LoadTokenizer(const GgufFile& gguf, const std::string& program) {
  auto tok = Tokenizer::FromGguf(gguf);
  if (tok.ok())
    for (const std::string& w : tok->warnings())
      std::fprintf(stderr, "%s: warning: %s\n", program.c_str(), w.c_str());
  return tok;
}

}  // namespace

Result<std::unique_ptr<Session>> OpenSession(const CommonOptions& c,
                                             const std::shared_ptr<const GgufFile>& gguf, bool quiet,
                                             bool profile_ops, bool tokenizer_loaded, int* output_host) {
  SessionOptions opts;
  opts.profile_ops = profile_ops;
  opts.n_threads = c.threads;
  opts.copy_mapped_weights_to_huge_pages = c.huge_pages;
  opts.llamacpp_numerics = c.llamacpp_numerics;
  opts.cpu_max_isa = c.cpu_isa == "scalar"   ? CpuIsa::kScalar
                     : c.cpu_isa == "avx2"   ? CpuIsa::kAvx2
                     : c.cpu_isa == "avx512" ? CpuIsa::kAvx512
                                             : CpuIsa::kAvx512Vnni;
  // A percentage on the terminal while weights load; nothing when stderr is not a terminal.
  if (!quiet && isatty(fileno(stderr)))
    opts.progress = [last_pct = -1](float f) mutable {
      const int pct = static_cast<int>(f * 100);
      if (pct != last_pct) {
        std::fprintf(stderr, "\rloading model: %3d%%%s", pct, pct >= 100 ? "\r                    \r" : "");
        last_pct = pct;
      }
    };
  int out_host = 0;
  STOWAGE_RETURN_IF_ERROR(SetUpHosts(c, &opts, &out_host));
  if (output_host != nullptr) *output_host = out_host;
  if (!c.plan.empty()) return Session::Create(c.plan, gguf, opts);
  STOWAGE_ASSIGN_OR_RETURN(auto bytes, PlanOnTheFly(*gguf, c, quiet, tokenizer_loaded));
  return Session::CreateFromPlanBytes(std::move(bytes), gguf, opts);
}

Result<LoadedModel> LoadModel(const CommonOptions& c, bool quiet) {
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<const GgufFile> gguf, OpenModel(c));
  STOWAGE_ASSIGN_OR_RETURN(Tokenizer tokenizer, LoadTokenizer(*gguf, c.program));
  int output_host = 0;
  STOWAGE_ASSIGN_OR_RETURN(
      std::unique_ptr<Session> session,
      OpenSession(c, gguf, quiet, /*profile_ops=*/false, /*tokenizer_loaded=*/true, &output_host));
  return LoadedModel{std::move(gguf), std::move(tokenizer), std::move(session), output_host};
}

void PrintBuffers(const Session& s, int host) {
  if (host >= 0)
    std::fprintf(stderr, "memory allocated per buffer of host %d (MPI rank %d; planned == allocated):\n",
                 host, host);
  else
    std::fprintf(stderr, "memory allocated per buffer (planned == allocated):\n");
  std::fprintf(stderr, "  %-12s %-7s %-6s %14s\n", "buffer", "usage", "device", "size");
  for (const auto& b : s.Buffers()) {
    if (host >= 0 && HostOfDevice(b.device) != host) continue;  // another rank's (it allocates them)
    std::fprintf(stderr, "  %-12s %-7s %-6s %10.2f MiB%s%s\n", b.name.c_str(), b.usage.c_str(),
                 b.device.c_str(), b.allocated / 1048576.0, b.mapped ? " (mapped)" : "",
                 b.planned == b.allocated ? "" : "  MISMATCH with the plan");
  }
}

}  // namespace stowage::run
