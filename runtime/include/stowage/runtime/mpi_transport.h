// The MPI transport (transport.h): point-to-point messages between the ranks of MPI_COMM_WORLD,
// non-blocking calls polled against a deadline so that a rank never waits forever on a peer that
// failed. Built when MPI is found (STOWAGE_ENABLE_MPI=AUTO|ON|OFF); library stowage_mpi.
#pragma once

#include <memory>

#include "stowage/runtime/transport.h"

namespace stowage {

/// Initializes MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: only the calling thread makes MPI calls)
/// and returns the transport of MPI_COMM_WORLD; MPI_Finalize runs when it is destroyed. Send and
/// Recv give up after `deadline_seconds` (> 0) without progress: kUnavailable "MPI rank 1:
/// no message from rank 0 (tag T, N bytes) within 60 s". Errors: kUnavailable when MPI cannot be
/// initialized or was already; kInvalidArgument for a deadline <= 0. At most one per process.
Result<std::shared_ptr<Transport>> CreateMpiTransport(double deadline_seconds);

}  // namespace stowage
