// stowage-run across hosts: a plan made with plan-model --cluster runs under `mpirun -np N`, rank h
// running host h's devices (stowage/runtime/transport.h). Without mpirun, every host's devices of
// such a plan run in this process (the single-process reference of the same plan).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "run_common.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/status.h"

namespace stowage::run {

/// When started by mpirun (LaunchedByMpi): initializes MPI with `deadline_seconds` as the bound of
/// every wait and returns the transport; nullptr otherwise. Ranks other than 0 print nothing on
/// standard output (the text is rank 0's). Errors: kUnavailable when this stowage-run was built
/// without MPI, or MPI fails to start.
Result<std::shared_ptr<Transport>> StartHosts(double deadline_seconds);

/// Before a session of `c.plan` loads (the plan is read, nothing else): the plan's host count must
/// equal the MPI world size (kFailedPrecondition "<plan>: planned for N hosts (plan-model
/// --cluster), mpirun started M ranks: run mpirun -np N"); a plan of several hosts gets
/// MakeHostBackendFactory's backends in `opts` (with its llamacpp_numerics and cpu_max_isa), and
/// `*output_host` the host that holds the logits.
Status SetUpHosts(const CommonOptions& c, SessionOptions* opts, int* output_host);

/// The token the output host sampled, on every rank: that host sends `token` to every other rank,
/// which returns the one it receives (tag: `step`). Without a transport, `token` itself.
Result<int32_t> ShareToken(const CommonOptions& c, int output_host, int32_t token, uint64_t step);

/// --dump-logits FILE: every decode's logits rows (float32, native byte order), written on the host
/// that holds them (nothing on another rank). The file is opened before the prompt runs (so that an
/// unwritable path fails at once) through an AtomicFile: it appears at `path` whole, at Commit(), and
/// a run that fails or is interrupted leaves whatever was at `path` as it was.
class LogitsDump {
 public:
  /// Opens the temporary file for `path`; an empty `path`, or a rank other than `output_host`, dumps
  /// nothing. Errors: AtomicFile::Create's, prefixed "--dump-logits: " ("--dump-logits: <path>:
  /// cannot create a file in the folder ...: <reason>").
  static Result<LogitsDump> Open(const CommonOptions& c, int output_host, const std::string& path);

  /// Appends the rows of `logits`. Errors: kIoError "--dump-logits: <path>: write failed: <OS error>" (e.g.
  /// "No space left on device").
  Status Append(const std::vector<float>& logits);

  /// Gives the file its name (AtomicFile::Commit). Errors: AtomicFile::Commit's, prefixed as Append's.
  Status Commit();

 private:
  std::optional<AtomicFile> file_;
};

/// Ends every rank (Transport::Abort) after this rank failed with exit status `rc`, naming the
/// rank; returns `rc` when there is no transport or rc is 0.
int EndHostsOnFailure(const std::shared_ptr<Transport>& transport, int rc);

}  // namespace stowage::run
