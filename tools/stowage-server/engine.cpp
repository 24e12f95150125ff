#include "engine.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace stowage::server {

using Clock = std::chrono::steady_clock;

std::optional<CompletionEvent> CompletionStream::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  CompletionEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void CompletionStream::Cancel() { cancelled_.store(true); }

void CompletionStream::Push(CompletionEvent e) {
  if (cancelled()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

size_t CompleteUtf8Prefix(const std::string& text) {
  // Look back over at most 3 continuation bytes for the lead byte of the last character.
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const size_t len = c < 0x80             ? 1
                       : (c & 0xE0) == 0xC0 ? 2
                       : (c & 0xF0) == 0xE0 ? 3
                       : (c & 0xF8) == 0xF0 ? 4
                                            : 1;
    return back < len ? n - back : n;
  }
  return n;  // only continuation bytes (invalid UTF-8): nothing to wait for
}

size_t FindStop(const std::string& text, size_t from, const std::vector<std::string>& stop,
                size_t* partial_from) {
  size_t found = std::string::npos;
  *partial_from = text.size();
  for (const std::string& s : stop) {
    if (s.empty()) continue;
    const size_t p = text.find(s, from);
    if (p != std::string::npos) found = std::min(found, p);
    // The longest proper prefix of s that ends the text.
    for (size_t len = std::min(s.size() - 1, text.size() - std::min(from, text.size())); len > 0; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        *partial_from = std::min(*partial_from, text.size() - len);
        break;
      }
  }
  return found;
}

struct Engine::Slot {
  int32_t id = 0;
  bool busy = false;
  CompletionRequest request;
  std::shared_ptr<CompletionStream> stream;
  std::optional<Sampler> sampler;
  size_t n_prompt_done = 0;  // prompt tokens in the cache
  int32_t n_past = 0;        // the next token's position
  int32_t pending = -1;      // a sampled token not decoded yet
  int32_t n_decoded = 0;
  int32_t n_in_batch = 0;  // this step's tokens
  bool first_sampled = false;
  std::string text;  // generated so far
  size_t sent = 0;   // bytes of text pushed
  int64_t reserve = 0;
  Clock::time_point t_start, t_first;
  std::vector<float> embedding;  // an embedding request's, read after its decode
};

Engine::Engine(Session& session, const Tokenizer& tokenizer, int32_t n_batch)
    : session_(session),
      tok_(tokenizer),
      n_batch_(std::max<int32_t>(1, n_batch)),
      n_ctx_(session.n_ctx()),
      n_vocab_(session.n_vocab()) {
  const int64_t n = std::max<int64_t>(1, session.n_seq_max());
  for (int64_t i = 0; i < n; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->id = static_cast<int32_t>(i);
  }
  busy_.assign(slots_.size(), false);
  for (int32_t id = 0; id < n_vocab_ && id < tok_.n_vocab(); ++id)
    if (tok_.IsEog(id)) eog_ids_.push_back(id);
  published_.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) published_[i].id = static_cast<int32_t>(i);
}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { Loop(); });
}

Result<std::shared_ptr<CompletionStream>> Engine::Submit(CompletionRequest r) {
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  if (n_prompt == 0) return InvalidArgument("the prompt is empty (no tokens)");
  // llama-server: "request (N tokens) exceeds the available context size (M tokens)".
  if (n_prompt >= n_ctx_ || (r.n_predict >= 0 && n_prompt + r.n_predict > n_ctx_))
    return OutOfRange(
        "request (" + std::to_string(n_prompt) + " prompt tokens" +
        (r.n_predict >= 0 ? " + " + std::to_string(r.n_predict) + " max_tokens" : std::string()) +
        ") exceeds the available context size (" + std::to_string(n_ctx_) + " tokens)");
  if (r.embedding) {
    if (!session_.embeddings() || session_.pooling() == PoolingType::kNone)
      return Unimplemented(
          "embeddings are off or not pooled on this server (start it with --embeddings and "
          "--pooling mean, cls or last)");
    // The input's tokens go in one decode, whose pooled embedding is read (Session::SeqEmbeddings).
    if (n_prompt > n_batch_)
      return InvalidArgument("input (" + std::to_string(n_prompt) +
                             " tokens) is too large to process: increase the batch size -b (" +
                             std::to_string(n_batch_) + ")");
    r.n_predict = 0;
  }
  auto stream = std::make_shared<CompletionStream>();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    queue_.push_back({std::move(r), stream});
    ++metrics_.requests_total;
    metrics_.requests_deferred = static_cast<int32_t>(queue_.size());
  }
  cv_.notify_all();
  return stream;
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineMetrics Engine::Metrics() const {
  std::lock_guard<std::mutex> lk(mu_);
  return metrics_;
}

std::vector<SlotState> Engine::Slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  return published_;
}

bool Engine::AnyBusy() const { return std::find(busy_.begin(), busy_.end(), true) != busy_.end(); }

void Engine::Admit() {
  while (!queue_.empty()) {
    Queued& q = queue_.front();
    if (q.stream->cancelled()) {
      ++metrics_.requests_cancelled_total;
      queue_.pop_front();
      continue;
    }
    const auto free = std::find(busy_.begin(), busy_.end(), false);
    if (free == busy_.end()) break;
    // Cells the request may take: its prompt and max_tokens (one cell when unbounded, which then
    // stops with "length" when the cache is full). It waits while the busy slots' reservations
    // leave too little room, so that bounded requests never meet a full cache.
    const int64_t need =
        static_cast<int64_t>(q.request.prompt.size()) + (q.request.n_predict >= 0 ? q.request.n_predict : 1);
    if (reserved_ > 0 && reserved_ + need > n_ctx_) break;
    Slot& s = *slots_[static_cast<size_t>(free - busy_.begin())];
    s.busy = true;
    s.request = std::move(q.request);
    s.stream = std::move(q.stream);
    s.sampler.emplace(s.request.sampling);
    for (int32_t t : s.request.prompt) s.sampler->Accept(t);  // the prompt counts for the penalties
    s.n_prompt_done = 0;
    s.n_past = 0;
    s.pending = -1;
    s.n_decoded = 0;
    s.first_sampled = false;
    s.text.clear();
    s.sent = 0;
    s.reserve = need;
    s.embedding.clear();
    s.t_start = Clock::now();
    *free = true;
    reserved_ += need;
    queue_.pop_front();
  }
}

void Engine::Publish() {
  int32_t busy = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = *slots_[i];
    published_[i] = {s.id, s.busy, s.busy ? static_cast<int32_t>(s.request.prompt.size()) : 0,
                     s.busy ? s.n_decoded : 0};
    busy += s.busy ? 1 : 0;
  }
  metrics_.requests_processing = busy;
  metrics_.requests_deferred = static_cast<int32_t>(queue_.size());
}

void Engine::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || AnyBusy(); });
      if (stopping_) break;
      Admit();
      Publish();
    }
    Step();
    std::lock_guard<std::mutex> lk(mu_);
    Publish();
  }
  const Status down = Unavailable("the server is shutting down");
  for (auto& s : slots_)
    if (s->busy) Fail(*s, down);
  std::lock_guard<std::mutex> lk(mu_);
  for (Queued& q : queue_) {
    CompletionEvent e;
    e.kind = CompletionEvent::Kind::kError;
    e.error = down;
    q.stream->Push(std::move(e));
  }
  queue_.clear();
  Publish();
}

std::shared_ptr<CompletionStream> Engine::Release(Slot& s) {
  (void)session_.SeqRm(s.id, -1, -1);  // removing a whole sequence does not fail for a valid id
  s.busy = false;
  s.sampler.reset();
  std::lock_guard<std::mutex> lk(mu_);
  busy_[static_cast<size_t>(s.id)] = false;
  reserved_ -= s.reserve;
  Publish();  // a client that got its last event sees the slot free in /slots and /metrics
  return std::move(s.stream);
}

void Engine::EmitText(Slot& s, bool final) {
  size_t end = s.text.size();
  if (!final) {
    size_t partial = end;
    (void)FindStop(s.text, s.sent, s.request.stop, &partial);
    end = std::min(partial, CompleteUtf8Prefix(s.text));
  }
  if (end <= s.sent) return;
  CompletionEvent e;
  e.text = s.text.substr(s.sent, end - s.sent);
  s.sent = end;
  s.stream->Push(std::move(e));
}

void Engine::Finish(Slot& s, const std::string& reason) {
  EmitText(s, /*final=*/true);
  const auto now = Clock::now();
  if (!s.first_sampled) s.t_first = now;
  CompletionEvent e;
  e.kind = CompletionEvent::Kind::kDone;
  e.finish_reason = reason;
  e.n_prompt = static_cast<int32_t>(s.request.prompt.size());
  e.n_predicted = s.n_decoded;
  e.prompt_ms = std::chrono::duration<double, std::milli>(s.t_first - s.t_start).count();
  e.predicted_ms = std::chrono::duration<double, std::milli>(now - s.t_first).count();
  {
    std::lock_guard<std::mutex> lk(mu_);
    metrics_.prompt_tokens_total += static_cast<uint64_t>(e.n_prompt);
    metrics_.prompt_seconds_total += e.prompt_ms / 1e3;
    metrics_.tokens_predicted_total += static_cast<uint64_t>(e.n_predicted);
    metrics_.tokens_predicted_seconds_total += e.predicted_ms / 1e3;
  }
  Release(s)->Push(std::move(e));
}

void Engine::Fail(Slot& s, const Status& error) {
  CompletionEvent e;
  e.kind = CompletionEvent::Kind::kError;
  e.error = error;
  Release(s)->Push(std::move(e));
}

// Decodes the tokens [b, e) of `batch` whose slots have not failed and copies their logits rows to
// logits_ at row_of. A batch the cache has no room for is halved (llama-server retries with half
// the batch too); a single token without room marks its slot failed (1); any other error fails
// every slot of the sub-batch (2), with the status kept in errors_.
void Engine::Decode(std::vector<BatchToken>& batch, size_t b, size_t e, const std::vector<int32_t>& row_of,
                    std::vector<char>* failed) {
  std::vector<BatchToken> sub;
  std::vector<int32_t> rows;
  for (size_t i = b; i < e; ++i)
    if ((*failed)[static_cast<size_t>(batch[i].seq_id)] == 0) {
      sub.push_back(batch[i]);
      rows.push_back(row_of[i]);
    }
  if (sub.empty()) return;
  const Status st = session_.DecodeBatch(sub, &sub_logits_);
  if (st.ok()) {
    KeepEmbeddings(sub);
    size_t k = 0;
    for (size_t j = 0; j < sub.size(); ++j)
      if (sub[j].logits) {
        std::memcpy(logits_.data() + static_cast<size_t>(rows[j]) * n_vocab_,
                    sub_logits_.data() + k * n_vocab_, sizeof(float) * n_vocab_);
        ++k;
      }
    return;
  }
  if (st.code() == StatusCode::kOutOfRange && e - b > 1) {
    const size_t mid = b + (e - b) / 2;
    Decode(batch, b, mid, row_of, failed);
    Decode(batch, mid, e, row_of, failed);
    return;
  }
  for (const BatchToken& t : sub) {
    (*failed)[static_cast<size_t>(t.seq_id)] = st.code() == StatusCode::kOutOfRange ? 1 : 2;
    errors_[static_cast<size_t>(t.seq_id)] = st;
  }
}

// The pooled embedding of each embedding slot whose input was all in `sub` (one decode); an input
// split over two decodes (a halved batch) is left without one and fails.
void Engine::KeepEmbeddings(const std::vector<BatchToken>& sub) {
  for (auto& s : slots_) {
    if (!s->busy || !s->request.embedding || s->n_in_batch == 0) continue;
    const auto n =
        std::count_if(sub.begin(), sub.end(), [&](const BatchToken& t) { return t.seq_id == s->id; });
    if (n != s->n_in_batch) continue;
    if (const float* e = session_.SeqEmbeddings(s->id)) s->embedding.assign(e, e + session_.n_embd());
  }
}

void Engine::Step() {
  for (auto& s : slots_)
    if (s->busy && s->stream->cancelled()) {  // the client went away
      Release(*s);
      std::lock_guard<std::mutex> lk(mu_);
      ++metrics_.requests_cancelled_total;
    }

  // One batch: each generating slot's pending token, then prompt chunks within n_batch.
  std::vector<BatchToken> batch;
  std::vector<int32_t> row_of;
  std::vector<Slot*> row_slot;
  for (auto& s : slots_) {
    s->n_in_batch = 0;
    if (!s->busy || s->pending < 0) continue;
    batch.push_back({s->pending, s->n_past, s->id, true});
    row_of.push_back(static_cast<int32_t>(row_slot.size()));
    row_slot.push_back(s.get());
    s->n_in_batch = 1;
  }
  int64_t budget = n_batch_ - static_cast<int64_t>(batch.size());
  for (auto& s : slots_) {
    if (!s->busy || s->pending >= 0 || budget <= 0) continue;
    const std::vector<int32_t>& p = s->request.prompt;
    if (s->request.embedding && static_cast<int64_t>(p.size()) > budget) continue;  // whole, next step
    const size_t k =
        static_cast<size_t>(std::min<int64_t>(budget, static_cast<int64_t>(p.size() - s->n_prompt_done)));
    for (size_t j = 0; j < k; ++j) {
      const bool last = s->n_prompt_done + j + 1 == p.size() && !s->request.embedding;
      batch.push_back({p[s->n_prompt_done + j], s->n_past + static_cast<int32_t>(j), s->id, last});
      row_of.push_back(last ? static_cast<int32_t>(row_slot.size()) : -1);
      if (last) row_slot.push_back(s.get());
    }
    s->n_in_batch = static_cast<int32_t>(k);
    budget -= static_cast<int64_t>(k);
  }
  if (batch.empty()) return;

  logits_.resize(row_slot.size() * static_cast<size_t>(n_vocab_));
  std::vector<char> failed(slots_.size(), 0);
  errors_.assign(slots_.size(), Status());
  Decode(batch, 0, batch.size(), row_of, &failed);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++metrics_.n_decode_total;
    for (auto& s : slots_) metrics_.n_busy_slots_total += s->n_in_batch > 0 ? 1 : 0;
  }

  for (auto& s : slots_) {
    if (!s->busy || s->n_in_batch == 0) continue;
    const size_t id = static_cast<size_t>(s->id);
    if (failed[id] == 2) {
      Fail(*s, errors_[id]);
    } else if (failed[id] == 1) {  // no room left in the KV cache for this slot
      if (s->pending >= 0)
        Finish(*s, "length");
      else
        Fail(*s, OutOfRange("the KV cache of " + std::to_string(n_ctx_) +
                            " cells has no room for the prompt while other requests run"));
    } else if (s->request.embedding) {
      if (s->embedding.empty()) {
        Fail(*s, OutOfRange("the input was split over two decodes (the KV cache is short of room): no pooled "
                            "embedding"));
        continue;
      }
      CompletionEvent e;
      e.kind = CompletionEvent::Kind::kEmbedding;
      e.n_prompt = static_cast<int32_t>(s->request.prompt.size());
      e.embedding = std::move(s->embedding);
      {
        std::lock_guard<std::mutex> lk(mu_);
        metrics_.prompt_tokens_total += static_cast<uint64_t>(e.n_prompt);
        metrics_.prompt_seconds_total += std::chrono::duration<double>(Clock::now() - s->t_start).count();
      }
      Release(*s)->Push(std::move(e));
    } else {
      s->n_past += s->n_in_batch;
      if (s->pending >= 0)
        s->pending = -1;
      else
        s->n_prompt_done += static_cast<size_t>(s->n_in_batch);
    }
  }

  for (size_t r = 0; r < row_slot.size(); ++r) {
    Slot& s = *row_slot[r];
    if (!s.busy || failed[static_cast<size_t>(s.id)] != 0) continue;
    if (s.request.n_predict >= 0 && s.n_decoded >= s.request.n_predict) {  // max_tokens 0
      Finish(s, "length");
      continue;
    }
    float* logits = logits_.data() + r * static_cast<size_t>(n_vocab_);
    if (s.request.ignore_eos)
      for (int32_t id : eog_ids_) logits[id] = -std::numeric_limits<float>::infinity();
    const int32_t next = s.sampler->Sample(logits, static_cast<int>(n_vocab_));
    if (!s.first_sampled) {
      s.first_sampled = true;
      s.t_first = Clock::now();
    }
    if (next < 0) {
      Fail(s, DataLoss("the logits at position " + std::to_string(s.n_past - 1) +
                       " are all NaN or -inf, so no token can be sampled"));
      continue;
    }
    s.sampler->Accept(next);
    if (tok_.IsEog(next)) {
      Finish(s, "stop");
      continue;
    }
    ++s.n_decoded;
    s.text += tok_.TokenToPiece(next, /*special=*/false);
    size_t partial = 0;
    if (const size_t at = FindStop(s.text, s.sent, s.request.stop, &partial); at != std::string::npos) {
      s.text.resize(at);
      Finish(s, "stop");
      continue;
    }
    if ((s.request.n_predict >= 0 && s.n_decoded >= s.request.n_predict) || s.n_past >= n_ctx_) {
      Finish(s, "length");
      continue;
    }
    EmitText(s, /*final=*/false);
    s.pending = next;
  }
}

}  // namespace stowage::server
