// The server's decode loop: continuous batching of concurrent completions over the sequences of
// one Session (llama-server's slots, tools/server/server-context.cpp of llama.cpp 2026).
//
// One thread (Engine::Start) owns the Session. HTTP handler threads Submit requests and read each
// request's events from its own CompletionStream. A request waits in a FIFO queue until a slot (a
// sequence id of the plan, 0 .. n_seq_max-1) is free and its tokens fit the KV cache next to the
// other slots' reservations; every step then decodes one batch holding the next token of every
// generating slot and prompt chunks of new requests (at most n_batch tokens), samples each slot's
// token from its own row of logits, and pushes the text. A stream that its reader cancels (a client
// that disconnected) has its slot's cells removed (Session::SeqRm) at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stowage/runtime/sampler.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/status.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::server {

/// What one completion asks for, in tokens (the HTTP layer tokenizes and validates).
struct CompletionRequest {
  std::vector<int32_t> prompt;  ///< not empty; fewer tokens than the context
  SamplerParams sampling;       ///< per request (temperature <= 0: greedy)
  /// Tokens to generate at most; < 0: until an end-of-generation token or the context is full.
  int32_t n_predict = -1;
  /// Generation stops before the first occurrence of any of these in the generated text (which is
  /// then not returned), as llama-server's "stop".
  std::vector<std::string> stop;
  bool ignore_eos = false;  ///< end-of-generation tokens are never sampled (a -inf logit bias)
  /// An embedding instead of a completion (the engine's session has embeddings on, pooled):
  /// the prompt is decoded in one batch (so at most n_batch tokens) and its pooled embedding
  /// returned (Session::SeqEmbeddings); the sampling fields are ignored.
  bool embedding = false;
};

/// One event of a completion, in order: any number of kText, then one kDone or one kError; of an
/// embedding: one kEmbedding or one kError.
struct CompletionEvent {
  enum class Kind { kText, kDone, kError, kEmbedding };
  Kind kind = Kind::kText;
  std::string text;              ///< kText: the next piece of generated text (whole UTF-8 characters)
  std::string finish_reason;     ///< kDone: "stop" (end of generation or a stop string) or "length"
  int32_t n_prompt = 0;          ///< kDone: prompt tokens
  int32_t n_predicted = 0;       ///< kDone: generated tokens
  double prompt_ms = 0;          ///< kDone: from the slot's start to its first sampled token
  double predicted_ms = 0;       ///< kDone: from the first sampled token to the end
  Status error;                  ///< kError: why the completion failed
  std::vector<float> embedding;  ///< kEmbedding: the pooled embedding, n_embd floats (n_prompt set)
};

/// The events of one request: the engine's thread pushes, one reader pops. Thread-safe.
class CompletionStream {
 public:
  /// The next event, waiting up to `timeout`; nullopt when none came in time.
  std::optional<CompletionEvent> Next(std::chrono::milliseconds timeout);
  /// The reader is gone (its client disconnected): the engine drops the request at its next step
  /// and frees its slot. Events pushed afterwards are discarded.
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }
  /// Engine side: appends an event and wakes the reader.
  void Push(CompletionEvent e);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CompletionEvent> events_;
  std::atomic<bool> cancelled_{false};
};

/// Counters since the engine started (/metrics: llama-server's as llamacpp:*, the others stowage:*).
struct EngineMetrics {
  uint64_t requests_total = 0;       ///< completions submitted
  uint64_t prompt_tokens_total = 0;  ///< prompt tokens of finished completions
  double prompt_seconds_total = 0;   ///< their prompt time
  uint64_t tokens_predicted_total = 0;
  double tokens_predicted_seconds_total = 0;
  uint64_t n_decode_total = 0;            ///< DecodeBatch calls
  uint64_t n_busy_slots_total = 0;        ///< busy slots summed over the decode steps
  uint64_t requests_cancelled_total = 0;  ///< completions whose client went away before the end
  int32_t requests_processing = 0;        ///< slots busy now
  int32_t requests_deferred = 0;          ///< requests queued now
};

/// A slot as /slots shows it.
struct SlotState {
  int32_t id = 0;
  bool is_processing = false;
  int32_t n_prompt = 0;   ///< the current request's prompt tokens
  int32_t n_decoded = 0;  ///< tokens generated so far
};

class Engine {
 public:
  /// Completions over `session`'s sequences, one slot per sequence of the plan (n_seq_max);
  /// at most `n_batch` tokens per decode. `session` and `tokenizer` must outlive the engine; the
  /// engine's thread is the only one to use the session once Start was called.
  Engine(Session& session, const Tokenizer& tokenizer, int32_t n_batch);
  ~Engine();  ///< Stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Starts the decode loop thread.
  void Start();
  /// Queues `r` and returns its stream. Errors: kUnavailable after Stop; kOutOfRange when the
  /// prompt (plus n_predict when >= 0) does not fit the context, with llama-server's wording, or an
  /// embedding's input is longer than n_batch; kUnimplemented for an embedding when the session
  /// has embeddings off or unpooled.
  Result<std::shared_ptr<CompletionStream>> Submit(CompletionRequest r);
  /// Ends every queued and running completion with a kUnavailable error ("the server is shutting
  /// down") and joins the loop thread. Idempotent.
  void Stop();

  EngineMetrics Metrics() const;
  std::vector<SlotState> Slots() const;
  int32_t n_slots() const { return static_cast<int32_t>(slots_.size()); }
  int64_t n_ctx() const { return n_ctx_; }

 private:
  struct Slot;
  struct Queued {
    CompletionRequest request;
    std::shared_ptr<CompletionStream> stream;
  };

  void Loop();
  bool AnyBusy() const;  // under mu_
  void Admit();          // under mu_: queued requests into free slots
  void Step();
  std::shared_ptr<CompletionStream> Release(Slot& s);  // frees the slot, returns its stream
  void Finish(Slot& s, const std::string& reason);
  void Fail(Slot& s, const Status& error);
  void EmitText(Slot& s, bool final);
  void Decode(std::vector<BatchToken>& batch, size_t b, size_t e, const std::vector<int32_t>& row_of,
              std::vector<char>* failed);
  void KeepEmbeddings(const std::vector<BatchToken>& sub);
  void Publish();  // under mu_: the slots' states for Slots()

  Session& session_;
  const Tokenizer& tok_;
  const int32_t n_batch_;
  const int64_t n_ctx_;
  const int64_t n_vocab_;
  std::vector<std::unique_ptr<Slot>> slots_;  // the loop thread's
  std::vector<float> logits_;                 // one row per output of the step
  std::vector<float> sub_logits_;
  std::vector<Status> errors_;    // per slot: why its tokens of this step failed
  std::vector<int32_t> eog_ids_;  // end-of-generation tokens (ignore_eos)

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  std::vector<SlotState> published_;
  std::vector<bool> busy_;
  int64_t reserved_ = 0;  // KV cells the busy slots may take
  EngineMetrics metrics_;
  bool stopping_ = false;
  std::thread thread_;
};

/// Bytes at the start of `text` that form whole UTF-8 characters: a trailing lead byte and its
/// continuation bytes are held back until the rest of the character arrives (llama-server's
/// validate_utf8).
size_t CompleteUtf8Prefix(const std::string& text);

/// Where the first stop string occurs in `text` at or after `from` (npos when none), and in
/// `*partial_from` the start of the longest suffix of `text` that begins a stop string (text.size()
/// when none): that suffix is held back, as llama-server's find_partial_stop_string.
size_t FindStop(const std::string& text, size_t from, const std::vector<std::string>& stop,
                size_t* partial_from);

}  // namespace stowage::server
