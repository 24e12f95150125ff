// stowage-run across hosts (hosts.h).
#include "hosts.h"

#include <cstdio>

#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/transport.h"
#if STOWAGE_HAVE_MPI
#include "stowage/runtime/mpi_transport.h"
#endif

namespace stowage::run {

Result<std::shared_ptr<Transport>> StartHosts(double deadline_seconds) {
  if (!LaunchedByMpi()) return std::shared_ptr<Transport>();
#if STOWAGE_HAVE_MPI
  STOWAGE_ASSIGN_OR_RETURN(std::shared_ptr<Transport> t, CreateMpiTransport(deadline_seconds));
  if (t->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    return Unavailable("MPI rank " + std::to_string(t->rank()) + ": cannot silence standard output");
  return t;
#else
  (void)deadline_seconds;
  return Unavailable(
      "started by mpirun, but this stowage-run was built without MPI (STOWAGE_ENABLE_MPI; "
      "apt-get install libopenmpi-dev)");
#endif
}

Status SetUpHosts(const CommonOptions& c, SessionOptions* opts, int* output_host) {
  *output_host = 0;
  const int ranks = c.transport ? c.transport->size() : 1;
  int hosts = 1;
  bool tensor_split = false;
  if (!c.plan.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(std::unique_ptr<PlanFile> plan, PlanFile::Load(c.plan));
    hosts = PlanHostCount(*plan);
    tensor_split = plan->root().tp_n_ranks() > 1;
    *output_host = tensor_split ? 0 : PlanOutputHost(*plan);
  }
  if (c.transport && hosts != ranks)
    return FailedPrecondition((c.plan.empty() ? std::string("the plan made on the fly") : c.plan) +
                              ": planned for " + std::to_string(hosts) + " host(s)" +
                              (hosts > 1 ? " (plan-model --cluster)" : "") + ", but mpirun started " +
                              std::to_string(ranks) + " rank(s): run mpirun -np " + std::to_string(hosts));
  if (hosts == 1 && !c.transport) return Status::Ok();
  if (tensor_split) {  // every rank computes the logits; rank 0 samples (the session checks the rest)
    opts->tensor_split_transport = c.transport;
    return Status::Ok();
  }
  if (!c.transport)
    std::fprintf(stderr,
                 "stowage-run: %s: planned for %d hosts; not under mpirun, every host's devices run here\n",
                 c.plan.c_str(), hosts);
  opts->backend_factory = MakeHostBackendFactory(c.transport, opts->llamacpp_numerics, opts->cpu_max_isa);
  return Status::Ok();
}

Result<int32_t> ShareToken(const CommonOptions& c, int output_host, int32_t token, uint64_t step) {
  if (!c.transport) return token;
  Transport& t = *c.transport;
  const int tag = static_cast<int>(step % 32768u);
  if (t.rank() == output_host) {
    for (int r = 0; r < t.size(); ++r)
      if (r != output_host) STOWAGE_RETURN_IF_ERROR(t.Send(r, tag, &token, sizeof token));
    return token;
  }
  int32_t got = -1;
  STOWAGE_RETURN_IF_ERROR(t.Recv(output_host, tag, &got, sizeof got));
  return got;
}

Result<LogitsDump> LogitsDump::Open(const CommonOptions& c, int output_host, const std::string& path) {
  LogitsDump d;
  if (path.empty() || (c.transport && c.transport->rank() != output_host)) return d;
  auto file = AtomicFile::Create(path);
  if (!file.ok()) return file.status().WithPrefix("--dump-logits");
  d.file_.emplace(std::move(*file));
  return d;
}

Status LogitsDump::Append(const std::vector<float>& logits) {
  if (!file_) return Status::Ok();
  if (Status st = file_->Write(logits.data(), logits.size() * sizeof(float)); !st.ok())
    return st.WithPrefix("--dump-logits");
  return Status::Ok();
}

Status LogitsDump::Commit() {
  if (!file_) return Status::Ok();
  if (Status st = file_->Commit(); !st.ok()) return st.WithPrefix("--dump-logits");
  return Status::Ok();
}

int EndHostsOnFailure(const std::shared_ptr<Transport>& transport, int rc) {
  if (!transport || rc == 0) return rc;
  transport->Abort("stowage-run: MPI rank " + std::to_string(transport->rank()) + " of " +
                   std::to_string(transport->size()) + " failed (exit status " + std::to_string(rc) +
                   ", the error above): ending every rank");
  return rc;  // not reached: Abort does not return
}

}  // namespace stowage::run
