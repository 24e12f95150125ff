// A test-only ASYNCHRONOUS private-memory backend (asynchronous split-input copies): like
// test/unit/runtime/private_backend.h (buffers are not host memory, the CPU kernels run on them),
// but every Compute / WriteAsync / ReadAsync is queued and run by the backend's own worker thread,
// and LAZILY: queued work only runs when someone waits for it (Event::HostWait, Synchronize,
// Buffer::Read/Write, or another backend's queue waiting on one of its events). So any wait the
// session misses is deterministic, not a race:
//   - ReadAsync fills the host destination with 0xFF bytes (NaN for F32) when it is issued and
//     writes the real bytes only when it runs: host kernels that read it without waiting its
//     event compute on NaN;
//   - WriteAsync reads its host source only when it runs: host kernels that overwrite the source
//     before its event completes change what is copied;
//   - device -> device copies stage through host memory that the source backend fills lazily: a
//     destination queue that does not wait the source's event copies 0xFF bytes; direct copies
//     (CopyFromAsync) order the two queues themselves, as a CUDA peer copy with two events does.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.h"

namespace stowage::test {

/// What the asynchronous backends of one factory did (all devices together).
struct AsyncStats {
  std::atomic<int> computes{0};
  std::atomic<int> write_async{0};    ///< host -> device copies queued
  std::atomic<int> read_async{0};     ///< device -> host copies queued
  std::atomic<int> event_waits{0};    ///< cross-queue waits (Backend::WaitEvent on a queue)
  std::atomic<int> direct_copies{0};  ///< device -> device copies without host staging (CopyFromAsync)
  /// When false, CopyFromAsync declines and the session stages device -> device copies through host
  /// memory (both paths are tested).
  std::atomic<bool> allow_direct{true};
  std::atomic<int> host_waits{0};  ///< Event::HostWait calls
  /// Fault injection: when >= 0, the Compute call that makes `computes` exceed it fails
  /// (kInternal "injected fault") instead of queuing the node.
  std::atomic<int> fail_compute_after{-1};
  /// Buffer::SetTensorSplit calls received by the buffers (the plan's Buffer.tensor_split).
  std::mutex mu;
  std::vector<std::vector<float>> tensor_splits;
};

/// Factory answering for every planned device whose type is "GPU" with an asynchronous private
/// backend; `stats` (may be null) counts their work.
std::shared_ptr<exec::BackendFactory> MakeAsyncPrivateBackendFactory(std::shared_ptr<AsyncStats> stats);

}  // namespace stowage::test
