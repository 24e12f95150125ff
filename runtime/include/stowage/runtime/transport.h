// Running one plan across hosts (a plan made with plan-model --cluster, stowage/runtime/
// host_devices.h): MPI rank h runs the devices of host h. Every rank creates a Session of the same
// plan and model file (its own local copy, checked against the plan's identity) with the backend
// factory of MakeHostBackendFactory: its own devices get real backends, the other hosts' devices a
// placeholder that allocates nothing, uploads nothing and computes nothing. Every rank runs the same
// Decode calls (the same batches, in lockstep); the session then runs only the splits of its own
// devices, receives a split's inputs that another host produced from that host, and sends the
// inputs of other hosts' splits that it produced. Only the activations (and per-ubatch inputs such
// as positions and masks) cross hosts, point to point; no weight does.
//
// The transport is the small interface these messages go through; the MPI one (mpi_transport.h) is
// built when MPI is found (STOWAGE_ENABLE_MPI). Thread-safety: one thread per rank uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stowage/runtime/session.h"
#include "stowage/runtime/status.h"

namespace stowage {

class PlanFile;

/// Point-to-point byte messages between the ranks of a fixed group.
class Transport {
 public:
  virtual ~Transport() = default;
  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;
  /// Sends `n` bytes to rank `to` with `tag` (>= 0, < 32768), returning once the bytes may be
  /// reused. Errors: kUnavailable when the peer takes none of it within the transport's
  /// deadline, kUnavailable for a transport error; each message names both ranks.
  virtual Status Send(int to, int tag, const void* data, uint64_t n) = 0;
  /// Receives exactly `n` bytes from rank `from` with `tag` into `data`. Errors as Send's, and
  /// kDataLoss when the message's size is not `n`.
  virtual Status Recv(int from, int tag, void* data, uint64_t n) = 0;
  /// Prints `message` (one line, naming this rank) to standard error and ends every rank with a
  /// non-zero exit status (MPI_Abort); does not return.
  [[noreturn]] virtual void Abort(const std::string& message) = 0;
};

/// True when this process was started by an MPI launcher (mpirun / mpiexec of Open MPI, MPICH or a
/// PMI-based launcher: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set), whether or not this
/// build has MPI.
bool LaunchedByMpi();

/// The tag of split input `input` of split `split` in the `step`-th graph run of a session (the
/// receiver posts its receives in the same order as the sender sends, so a tag only checks that
/// they agree): in [0, 32768), MPI's smallest guaranteed MPI_TAG_UB.
int SplitInputTag(uint64_t step, int split, int input);

/// The number of hosts a plan was made for: 1 + the largest HostOfDevice of its devices; a tensor
/// split across MPI ranks (Plan.tp_n_ranks > 1), its rank count.
int PlanHostCount(const PlanFile& plan);

/// The host whose device computes the logits: that of the last split of the token-generation graph.
int PlanOutputHost(const PlanFile& plan);

/// A backend factory (SessionOptions::backend_factory) for rank `transport->rank()` of a plan made
/// across hosts: a device of that host ("MPI<h>:CPU" runs on the CPU backend, "MPI<h>:CUDA0" on
/// CUDA device 0 of this machine, host 0's devices by their own names) gets the built-in backend
/// (`llamacpp_numerics`, `cpu_max_isa` as SessionOptions'), a device of another host a placeholder
/// that exchanges its split inputs through `transport`. With `transport` null, every host's devices
/// run in this process (the single-process reference of a plan made across hosts). The factory
/// declines (nullptr) a device it has no backend for, so the session reports it as absent.
std::shared_ptr<exec::BackendFactory> MakeHostBackendFactory(std::shared_ptr<Transport> transport,
                                                             bool llamacpp_numerics, CpuIsa cpu_max_isa);

}  // namespace stowage
