// MPI transport: MPI_Isend / MPI_Irecv polled with MPI_Test until done or a deadline, errors
// returned (MPI_ERRORS_RETURN) as one-line Status values naming both ranks.
#include "stowage/runtime/mpi_transport.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace stowage {
namespace {

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

class MpiTransport final : public Transport {
 public:
  MpiTransport(int rank, int size, double deadline) : rank_(rank), size_(size), deadline_(deadline) {}
  ~MpiTransport() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status Send(int to, int tag, const void* data, uint64_t n) override {
    return Transfer(/*send=*/true, to, tag, const_cast<void*>(data), n);
  }
  Status Recv(int from, int tag, void* data, uint64_t n) override {
    return Transfer(false, from, tag, data, n);
  }

  [[noreturn]] void Abort(const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);  // MPI_Abort does not return; this keeps the promise if it ever did
  }

 private:
  // Messages above 1 GiB go in 1 GiB pieces of the same tag (MPI counts are int; messages of one
  // sender and tag arrive in order).
  Status Transfer(bool send, int peer, int tag, void* data, uint64_t n) {
    const char* what = send ? "sending to" : "receiving from";
    if (peer < 0 || peer >= size_ || peer == rank_)
      return InvalidArgument("MPI rank " + std::to_string(rank_) + ": " + what + " rank " +
                             std::to_string(peer) + ": expected another rank of [0, " +
                             std::to_string(size_) + ")");
    constexpr uint64_t kPiece = uint64_t{1} << 30;
    uint8_t* p = static_cast<uint8_t*>(data);
    uint64_t done = 0;
    do {
      const int count = static_cast<int>(std::min(kPiece, n - done));
      MPI_Request req;
      int rc = send ? MPI_Isend(p + done, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req)
                    : MPI_Irecv(p + done, count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req);
      if (rc != MPI_SUCCESS)
        return Unavailable("MPI rank " + std::to_string(rank_) + ": " + what + " rank " +
                           std::to_string(peer) + ": " + MpiError(rc));
      MPI_Status st;
      STOWAGE_RETURN_IF_ERROR(Wait(&req, &st, send, peer, tag, n));
      if (!send) {
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != count)
          return DataLoss("MPI rank " + std::to_string(rank_) + ": message from rank " +
                          std::to_string(peer) + " (tag " + std::to_string(tag) + ") has " +
                          std::to_string(got) + " bytes, expected " + std::to_string(count));
      }
      done += static_cast<uint64_t>(count);
    } while (done < n);
    return Status::Ok();
  }

  // Polls `req` until it completes or nothing happened for the deadline; spins briefly, then
  // sleeps 50 us between tests (ranks oversubscribe cores in tests).
  Status Wait(MPI_Request* req, MPI_Status* st, bool send, int peer, int tag, uint64_t n) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int spin = 0;; ++spin) {
      int flag = 0;
      const int rc = MPI_Test(req, &flag, st);
      if (rc != MPI_SUCCESS)
        return Unavailable("MPI rank " + std::to_string(rank_) + ": " +
                           (send ? "sending to" : "receiving from") + " rank " + std::to_string(peer) + ": " +
                           MpiError(rc));
      if (flag) return Status::Ok();
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline_) {
        MPI_Cancel(req);
        MPI_Request_free(req);
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", deadline_);
        return Unavailable("MPI rank " + std::to_string(rank_) + ": " +
                           (send ? "rank " + std::to_string(peer) + " took no message"
                                 : "no message from rank " + std::to_string(peer)) +
                           " (tag " + std::to_string(tag) + ", " + std::to_string(n) + " bytes) within " +
                           secs + " s (--mpi-timeout)");
      }
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  int rank_, size_;
  double deadline_;
};

}  // namespace

Result<std::shared_ptr<Transport>> CreateMpiTransport(double deadline_seconds) {
  if (!(deadline_seconds > 0))
    return InvalidArgument("MPI deadline " + std::to_string(deadline_seconds) + " s: expected > 0");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Unavailable("MPI is already initialized (one transport per process)");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return Unavailable("MPI_Init_thread failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::shared_ptr<Transport>(std::make_shared<MpiTransport>(rank, size, deadline_seconds));
}

}  // namespace stowage
