// stowage-run across hosts: a plan made with plan-model --cluster runs under `mpirun -np N`, rank h
// running host h's devices (stowage/runtime/transport.h). Without mpirun, every host's devices of
// such a plan run in this process (the single-process reference of the same plan).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "run_common.h"
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

/// --dump-logits: appends the rows of `logits` (float32, native byte order) to `path` on the host
/// that holds them (nothing on another rank); `truncate` starts the file anew.
Status DumpLogits(const CommonOptions& c, int output_host, const std::string& path,
                  const std::vector<float>& logits, bool truncate);

/// Ends every rank (Transport::Abort) after this rank failed with exit status `rc`, naming the
/// rank; returns `rc` when there is no transport or rc is 0.
int EndHostsOnFailure(const std::shared_ptr<Transport>& transport, int rc);

}  // namespace stowage::run
