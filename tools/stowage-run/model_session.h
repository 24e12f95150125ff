// Loading what a subcommand runs: the model file (mapped once), its tokenizer, and a session for
// the plan given with --plan or one made on the fly (plan_on_the_fly.h).
#pragma once

#include <memory>

#include "run_common.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/status.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::run {

/// The model file (-m), mapped once for everything this process reads from it (tokenizer,
/// planning on the fly, the session's weights), with a truncation of the file while it is in use
/// reported by name instead of a silent SIGBUS (mapped_file_guard.h). Errors: GgufFile::Open's.
Result<std::shared_ptr<const GgufFile>> OpenModel(const CommonOptions& c);

/// A session of the model `gguf` (OpenModel), for the plan given with --plan or one made on the
/// fly (PlanOnTheFly, whose messages `quiet` limits), with `c`'s threads, huge pages, numerics and
/// CPU level; `profile_ops` times every node (Session::OpProfile); `tokenizer_loaded`: the caller
/// loaded the model's tokenizer (LoadModel), so planning does not validate it again. Unless
/// `quiet`, a loading percentage on stderr when it is a terminal. Errors: planning's,
/// Session::Create's, and SetUpHosts' (hosts.h) for a plan across hosts, whose output host goes to
/// `output_host` when given.
Result<std::unique_ptr<Session>> OpenSession(const CommonOptions& c,
                                             const std::shared_ptr<const GgufFile>& gguf, bool quiet,
                                             bool profile_ops = false, bool tokenizer_loaded = false,
                                             int* output_host = nullptr);

/// A model with its tokenizer and a session: what text generation, perplexity and --kl-divergence
/// run. The tokenizer is built once, here, and handed to the subcommand.
struct LoadedModel {
  std::shared_ptr<const GgufFile> gguf;
  Tokenizer tokenizer;
  std::unique_ptr<Session> session;
  int output_host = 0;  ///< the host (MPI rank) that holds the logits (hosts.h SetUpHosts)
};

/// OpenModel, the model's tokenizer (Tokenizer::FromGguf; what it accepted with llama.cpp's
/// fallbacks printed as warnings on stderr) and OpenSession(c, gguf, quiet), in that order: the
/// first error is returned.
Result<LoadedModel> LoadModel(const CommonOptions& c, bool quiet);

/// Prints the session's buffers on stderr (name, usage, device, size), flagging one whose
/// allocated size differs from the plan's; with `host` >= 0 only that host's (a plan across hosts
/// under mpirun: another rank allocates the others).
void PrintBuffers(const Session& s, int host = -1);

}  // namespace stowage::run
