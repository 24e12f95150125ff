#include "async_private_backend.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stowage::test {
namespace {

class AsyncBackend;

/// The backend's queue: a worker thread runs task k once a waiter released it (k < released_).
class LazyQueue {
 public:
  LazyQueue() : worker_([this] { Run(); }) {}
  ~LazyQueue() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      released_ = issued_;
    }
    cv_.notify_all();
    worker_.join();
  }
  /// Queues `fn`; returns its ticket (the count of tasks once it has run).
  uint64_t Push(std::function<Status()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(fn));
    return ++issued_;
  }
  uint64_t issued() {
    std::lock_guard<std::mutex> l(mu_);
    return issued_;
  }
  /// Releases and waits for the tasks up to `ticket`; the first error of any task so far.
  Status WaitFor(uint64_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    if (ticket > released_) released_ = ticket;
    cv_.notify_all();
    done_cv_.wait(l, [&] { return done_ >= ticket; });
    return error_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || (done_ < released_ && !tasks_.empty()); });
      if (tasks_.empty()) {
        if (stop_) return;
        continue;
      }
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      l.unlock();
      Status st = fn();
      l.lock();
      if (error_.ok() && !st.ok()) error_ = st;
      ++done_;
      done_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<Status()>> tasks_;
  uint64_t issued_ = 0, released_ = 0, done_ = 0;
  bool stop_ = false;
  Status error_ = Status::Ok();
  std::thread worker_;  // last: starts after the members it uses
};

class AsyncBuffer final : public exec::Buffer {
 public:
  AsyncBuffer(LazyQueue* q, const AsyncBackend* owner, uint64_t size)
      : q_(q), owner_(owner), bytes_(size + 64, 0), size_(size) {}
  uint8_t* base() override {
    auto p = reinterpret_cast<uintptr_t>(bytes_.data());
    return reinterpret_cast<uint8_t*>((p + 63) & ~uintptr_t(63));
  }
  uint64_t size() const override { return size_; }
  bool is_host() const override { return false; }
  bool InRange(uint64_t offset, uint64_t n) const { return offset <= size_ && n <= size_ - offset; }
  // Synchronous accesses are ordered after the queued work (like a CUDA buffer's set/get on its stream).
  Status Write(uint64_t offset, const void* src, uint64_t n) override {
    if (!InRange(offset, n)) return OutOfRange("async private buffer write out of range");
    STOWAGE_RETURN_IF_ERROR(q_->WaitFor(q_->issued()));
    std::memcpy(base() + offset, src, n);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t n) const override {
    if (!InRange(offset, n)) return OutOfRange("async private buffer read out of range");
    STOWAGE_RETURN_IF_ERROR(q_->WaitFor(q_->issued()));
    std::memcpy(dst, const_cast<AsyncBuffer*>(this)->base() + offset, n);
    return Status::Ok();
  }
  const AsyncBackend* owner() const { return owner_; }
  // Records the plan's proportions (and refuses bad ones as the CUDA split buffer does).
  Status SetTensorSplit(const std::vector<float>& proportions) override;

 private:
  LazyQueue* q_;
  const AsyncBackend* owner_;
  std::vector<uint8_t> bytes_;
  uint64_t size_;
};

class AsyncEvent final : public exec::Event {
 public:
  AsyncEvent(LazyQueue* q, uint64_t ticket, AsyncStats* stats) : q_(q), ticket_(ticket), stats_(stats) {}
  Status HostWait() override {
    if (stats_) ++stats_->host_waits;
    return q_->WaitFor(ticket_);
  }
  LazyQueue* queue() const { return q_; }
  uint64_t ticket() const { return ticket_; }

 private:
  LazyQueue* q_;
  uint64_t ticket_;
  AsyncStats* stats_;
};

class AsyncBackend final : public exec::Backend {
 public:
  AsyncBackend(std::string name, int n_threads, std::shared_ptr<AsyncStats> stats)
      : name_(std::move(name)), cpu_(exec::CreateCpuBackend(n_threads)), stats_(std::move(stats)) {}
  ~AsyncBackend() override { (void)q_.WaitFor(q_.issued()); }
  const std::string& name() const override { return name_; }
  Result<std::unique_ptr<exec::Buffer>> Allocate(const std::string&, uint64_t size, uint64_t) override {
    return std::unique_ptr<exec::Buffer>(new AsyncBuffer(&q_, this, size));
  }
  bool CanAccess(const exec::Buffer& buf) const override {
    auto* b = dynamic_cast<const AsyncBuffer*>(&buf);
    return b != nullptr && b->owner() == this;
  }
  Status Compute(const exec::NodeCall& call) override {
    if (stats_) {
      const int n = ++stats_->computes;
      const int limit = stats_->fail_compute_after.load();
      if (limit >= 0 && n > limit)
        return Internal(name_ + ": injected fault at compute " + std::to_string(n));
    }
    exec::Backend* cpu = cpu_.get();
    q_.Push([cpu, call] { return cpu->Compute(call); });
    return Status::Ok();
  }
  Status Synchronize() override { return q_.WaitFor(q_.issued()); }
  bool is_async() const override { return true; }
  AsyncStats* stats() const { return stats_.get(); }
  Status WriteAsync(exec::Buffer& dst, uint64_t offset, const void* src, uint64_t n) override {
    auto* b = Mine(dst);
    if (b == nullptr) return InvalidArgument(name_ + ": WriteAsync into a buffer of another backend");
    if (!b->InRange(offset, n)) return OutOfRange(name_ + ": WriteAsync outside the buffer");
    if (stats_) ++stats_->write_async;
    uint8_t* to = b->base() + offset;
    q_.Push([to, src, n] {
      std::memcpy(to, src, n);  // reads the host source only now
      return Status::Ok();
    });
    return Status::Ok();
  }
  Status ReadAsync(exec::Buffer& src, uint64_t offset, void* dst, uint64_t n) override {
    auto* b = Mine(src);
    if (b == nullptr) return InvalidArgument(name_ + ": ReadAsync from a buffer of another backend");
    if (!b->InRange(offset, n)) return OutOfRange(name_ + ": ReadAsync outside the buffer");
    if (stats_) ++stats_->read_async;
    std::memset(dst, 0xFF, n);  // poison until the copy has run
    const uint8_t* from = b->base() + offset;
    q_.Push([from, dst, n] {
      std::memcpy(dst, from, n);
      return Status::Ok();
    });
    return Status::Ok();
  }
  Result<std::shared_ptr<exec::Event>> RecordEvent() override {
    return std::shared_ptr<exec::Event>(std::make_shared<AsyncEvent>(&q_, q_.issued(), stats_.get()));
  }
  Result<bool> CopyFromAsync(exec::Backend& from, exec::Buffer& src, uint64_t src_offset, exec::Buffer& dst,
                             uint64_t dst_offset, uint64_t n) override {
    if (stats_ && !stats_->allow_direct) return false;
    auto* fa = dynamic_cast<AsyncBackend*>(&from);
    AsyncBuffer* sb = fa != nullptr ? fa->Mine(src) : nullptr;
    AsyncBuffer* db = Mine(dst);
    if (sb == nullptr || db == nullptr) return false;
    if (!sb->InRange(src_offset, n) || !db->InRange(dst_offset, n))
      return OutOfRange(name_ + ": direct copy outside a buffer");
    if (stats_) ++stats_->direct_copies;
    LazyQueue* fq = &fa->q_;
    const uint64_t produced = fq->issued();
    const uint8_t* p_src = sb->base() + src_offset;
    uint8_t* p_dst = db->base() + dst_offset;
    // On this queue: wait for the source queue's work so far, then copy.
    const uint64_t copied = q_.Push([fq, produced, p_src, p_dst, n] {
      STOWAGE_RETURN_IF_ERROR(fq->WaitFor(produced));
      std::memcpy(p_dst, p_src, n);
      return Status::Ok();
    });
    // On the source queue: later work (which may overwrite the source) waits for the copy.
    LazyQueue* mq = &q_;
    fq->Push([mq, copied] { return mq->WaitFor(copied); });
    return true;
  }
  Status WaitEvent(exec::Event& ev) override {
    auto* e = dynamic_cast<AsyncEvent*>(&ev);
    if (e == nullptr) return ev.HostWait();
    if (stats_) ++stats_->event_waits;
    LazyQueue* other = e->queue();
    const uint64_t t = e->ticket();
    if (other == &q_) return Status::Ok();              // own queue: already ordered
    q_.Push([other, t] { return other->WaitFor(t); });  // this queue blocks until the other's work ran
    return Status::Ok();
  }

 private:
  AsyncBuffer* Mine(exec::Buffer& b) {
    auto* ab = dynamic_cast<AsyncBuffer*>(&b);
    return ab != nullptr && ab->owner() == this ? ab : nullptr;
  }
  std::string name_;
  std::unique_ptr<exec::Backend> cpu_;
  std::shared_ptr<AsyncStats> stats_;
  LazyQueue q_;  // last: its worker stops before the members its tasks use are destroyed
};

Status AsyncBuffer::SetTensorSplit(const std::vector<float>& proportions) {
  for (float f : proportions)
    if (!(f >= 0.f) || f > 1e30f)
      return InvalidArgument("negative or non-finite proportion " + std::to_string(f));
  if (AsyncStats* st = owner_->stats()) {
    std::lock_guard<std::mutex> l(st->mu);
    st->tensor_splits.push_back(proportions);
  }
  return Status::Ok();
}

class Factory final : public exec::BackendFactory {
 public:
  explicit Factory(std::shared_ptr<AsyncStats> stats) : stats_(std::move(stats)) {}
  std::unique_ptr<exec::Backend> Create(const std::string& name, const std::string& type,
                                        int n_threads) override {
    if (type != "GPU") return nullptr;
    return std::make_unique<AsyncBackend>(name, n_threads, stats_);
  }

 private:
  std::shared_ptr<AsyncStats> stats_;
};

}  // namespace

std::shared_ptr<exec::BackendFactory> MakeAsyncPrivateBackendFactory(std::shared_ptr<AsyncStats> stats) {
  return std::make_shared<Factory>(std::move(stats));
}

}  // namespace stowage::test
