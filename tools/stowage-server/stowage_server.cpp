// stowage-server: an OpenAI-compatible HTTP server (llama-server's endpoints, flags and response
// shapes) over one Session with several sequences, on cpp-httplib. This file is the command line,
// the HTTP routes and the signal handling; engine.h runs the decode loop, oai.h the JSON shapes.
#include <httplib.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chat.h"
#include "cli_numbers.h"
#include "engine.h"
#include "llama_args.h"
#include "model_session.h"
#include "oai.h"
#include "planner_args.h"
#include "run_common.h"
#include "stdout_check.h"
#include "stowage/runtime/chat_template.h"
#include "stowage/runtime/gguf.h"

namespace stowage::server {
namespace {

/// The largest request body: 64 MiB (a prompt filling a 1M-token context is ~4 MiB of text).
constexpr size_t kMaxBodyBytes = size_t{64} << 20;

struct ServerOptions {
  run::CommonOptions common;
  std::string host = "127.0.0.1";
  int port = 8080;
  int n_parallel = 4;   // llama-server's default with the unified KV cache (-np, n_seq_max)
  std::string api_key;  // a comma-separated list
  int32_t n_predict = -1;
  std::string chat_template;
  std::string alias;
  int threads_http = 0;
  bool embeddings = false;
  std::string pooling;  // none, mean, cls, last; "" = the model's <arch>.pooling_type, else none
};

void AddOptions(CLI::App& app, ServerOptions* o) {
  run::CommonOptions& c = o->common;
  app.add_option("-m,--model", c.model, "GGUF model file")->required();
  app.add_option("--plan", c.plan,
                 "plan file made by plan-model (with -np N -kvu for N slots; default: plan on the fly for "
                 "this machine)");
  app.add_option(
         "-c,--ctx-size", c.n_ctx,
         "context size when planning on the fly, shared by the slots (unified KV cache; 0 = the model's "
         "training context, the default as llama-server 2026; 4096 with --llamacpp-compat feb25)")
      ->check(tools::IntegerIn(0, run::kMaxTokens));
  app.add_option("--parallel", o->n_parallel,
                 "slots (sequences decoded together) when planning on the fly, in one unified KV cache as "
                 "llama-server's default; with --plan the plan's n_seq_max")
      ->check(tools::IntegerIn(1, 256));
  app.add_option("-b,--batch-size", c.n_batch, "logical batch size: most tokens decoded per step")
      ->check(tools::IntegerIn(1, run::kMaxTokens));
  app.add_option("--ubatch-size", c.n_ubatch, "physical batch size when planning on the fly")
      ->check(tools::IntegerIn(1, run::kMaxTokens));
  app.add_option("--n-gpu-layers", c.n_gpu_layers,
                 "layers to offload when planning on the fly: N, 'all' or <= -2, 'auto' or -1 (fit to the "
                 "GPUs' free memory, as plan-model --fit; the default as llama-server 2026; 0 with "
                 "--llamacpp-compat feb25)")
      ->transform(tools::GpuLayersValue());
  app.add_option("-t,--threads", c.threads, "CPU threads (0 = all hardware threads)")
      ->check(tools::IntegerIn(0, run::MaxThreads()));
  app.add_option("--cache-type-k", c.cache_type_k, "KV cache type for K when planning on the fly");
  app.add_option("--cache-type-v", c.cache_type_v, "KV cache type for V when planning on the fly");
  app.add_option("--flash-attn", c.flash_attn, "flash attention when planning on the fly: on, off or auto")
      ->transform(tools::FlashAttnValue());
  tools::AddLlamacppCompatOption(app, c.llamacpp_compat)
      ->description(
          std::string(
              "when planning on the fly, the llama.cpp to follow, as stowage-run and plan-model: 2026 "
              "(its graph rules, -fa auto, -ngl auto, -c 0) or feb25 (the seed's behaviour: -fa off, -ngl 0, "
              "-c 4096); default ") +
          planner::LlamacppCompatName(planner::kDefaultLlamacppCompat));
  tools::AddOptLevelOption(app, c.opt_level,
                           "when planning on the fly, the compiler stage as plan-model -O: ");
  app.add_flag("--no-mmap", c.no_mmap, "when planning on the fly: load weights instead of mapping the file");
  app.add_flag("--no-fit-check", c.no_fit_check,
               "when planning on the fly: run even when the plan does not fit this machine's memory");
  app.add_flag("--llamacpp-numerics", c.llamacpp_numerics,
               "CPU matrix products in llama.cpp's orders over several tokens too, so that they do not "
               "depend on how many tokens of other requests share the batch (slower prompt processing)");
  app.add_option("--host", o->host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "port to listen on (0: any free port, printed)")
      ->check(tools::IntegerIn(0, 65535))
      ->capture_default_str();
  app.add_option("--api-key", o->api_key,
                 "API key(s), comma-separated: requests other than /health and /v1/models then need "
                 "'Authorization: Bearer KEY'")
      ->check(CLI::Validator(
          [](const std::string& v) {
            // A list of only separators would leave the server open: refuse it rather than serve.
            return v.find_first_not_of(',') == std::string::npos
                       ? "no key in '" + v + "', expected KEY[,KEY...]"
                       : std::string();
          },
          "KEY[,KEY...]"));
  app.add_option("-n,--n-predict", o->n_predict,
                 "max_tokens of a request that gives none (-1: until the end of text or a full context)")
      ->check(tools::IntegerIn(-1, run::kMaxTokens));
  app.add_option(
      "--chat-template", o->chat_template,
      "chat template by llama.cpp's built-in name (chatml, llama2, llama3, gemma, phi3, mistral-v7, "
      "deepseek3, ...; default: detected from the model's tokenizer.chat_template)");
  app.add_option("-a,--alias", o->alias,
                 "the model's id in /v1/models and requests (default: the file name)");
  app.add_option("--threads-http", o->threads_http,
                 "HTTP handler threads (0: 4 per slot, at least 32; each streaming client holds one)")
      ->check(tools::IntegerIn(0, 4096));
  app.add_flag("--embeddings", o->embeddings,
               "serve /v1/embeddings: the session keeps the final norm's output of every token, pooled per "
               "--pooling (every token is then an output: generation is slower)");
  app.add_option(
         "--pooling", o->pooling,
         "pooling of /v1/embeddings: mean, cls, last or none (default: the model's pooling_type, else "
         "none, which /v1/embeddings refuses as llama-server)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last"}));
  app.add_flag("--metrics", "accepted for llama-server compatibility: /metrics is always served");
}

// Blocks SIGINT and SIGTERM in every thread made from here on, so that only WaitForSignal sees them.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end of the server
  return set;
}

// --pooling, else the model's <arch>.pooling_type (llama.cpp llama_pooling_type's values), else none.
Result<PoolingType> PoolingOf(const GgufFile& gguf, const std::string& flag) {
  if (!flag.empty())
    return flag == "mean"   ? PoolingType::kMean
           : flag == "cls"  ? PoolingType::kCls
           : flag == "last" ? PoolingType::kLast
                            : PoolingType::kNone;
  STOWAGE_ASSIGN_OR_RETURN(std::string arch, gguf.GetString("general.architecture"));
  const std::string key = arch + ".pooling_type";
  if (gguf.Find(key) == nullptr) return PoolingType::kNone;
  STOWAGE_ASSIGN_OR_RETURN(uint32_t v, gguf.GetU32(key));
  if (v > static_cast<uint32_t>(PoolingType::kLast))  // 4, rank: a classifier head
    return gguf.KeyError(key, "a pooling type 0 to 3 (none, mean, cls, last; --pooling chooses one)",
                         std::to_string(v));
  return static_cast<PoolingType>(v);
}

void Reply(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  res.set_content(ErrorBody(e), "application/json; charset=utf-8");
}

void ReplyJson(httplib::Response& res, const json& j) {
  res.set_content(Dump(j), "application/json; charset=utf-8");
}

// The API key check of llama-server's middleware: /health and /v1/models are public.
bool Authorized(const httplib::Request& req, const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  static const char* const kPublic[] = {"/health", "/v1/health", "/models", "/v1/models"};
  if (std::find(std::begin(kPublic), std::end(kPublic), req.path) != std::end(kPublic)) return true;
  std::string key = req.get_header_value("Authorization");
  if (key.empty()) key = req.get_header_value("X-Api-Key");
  if (key.rfind("Bearer ", 0) == 0) key = key.substr(7);
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// /metrics in Prometheus' text format. The metrics llama-server has keep its names (llamacpp:*, its
// server_context /metrics: prompt_tokens_total ... requests_deferred), so a dashboard made for
// llama-server works; Stowage's own counters are stowage:*.
std::string Metrics(const EngineMetrics& m) {
  struct Item {
    const char* prefix;  // "llamacpp" (llama-server's metric) or "stowage"
    const char* type;    // "counter" or "gauge"
    const char* name;
    const char* help;
    double value;
  };
  const Item items[] = {
      {"llamacpp", "counter", "prompt_tokens_total", "Number of prompt tokens processed",
       static_cast<double>(m.prompt_tokens_total)},
      {"llamacpp", "counter", "prompt_seconds_total", "Total time spent processing prompts",
       m.prompt_seconds_total},
      {"llamacpp", "counter", "tokens_predicted_total", "Number of generation tokens processed",
       static_cast<double>(m.tokens_predicted_total)},
      {"llamacpp", "counter", "tokens_predicted_seconds_total", "Total time spent generating tokens",
       m.tokens_predicted_seconds_total},
      {"llamacpp", "counter", "n_decode_total", "Total number of decode calls",
       static_cast<double>(m.n_decode_total)},
      {"llamacpp", "gauge", "n_busy_slots_per_decode", "Average number of busy slots per decode call",
       static_cast<double>(m.n_busy_slots_total) /
           std::max<double>(1.0, static_cast<double>(m.n_decode_total))},
      {"llamacpp", "gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s",
       m.prompt_seconds_total > 0 ? m.prompt_tokens_total / m.prompt_seconds_total : 0.0},
      {"llamacpp", "gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s",
       m.tokens_predicted_seconds_total > 0 ? m.tokens_predicted_total / m.tokens_predicted_seconds_total
                                            : 0.0},
      {"llamacpp", "gauge", "requests_processing", "Number of requests processing (slots busy)",
       static_cast<double>(m.requests_processing)},
      {"llamacpp", "gauge", "requests_deferred", "Number of requests deferred (queued: every slot busy)",
       static_cast<double>(m.requests_deferred)},
      {"stowage", "counter", "requests_total", "Number of completion requests accepted",
       static_cast<double>(m.requests_total)},
      {"stowage", "counter", "requests_cancelled_total",
       "Number of requests whose client went away before their end",
       static_cast<double>(m.requests_cancelled_total)},
  };
  std::ostringstream out;
  for (const Item& i : items) {
    const std::string name = std::string(i.prefix) + ":" + i.name;
    out << "# HELP " << name << " " << i.help << "\n# TYPE " << name << " " << i.type << "\n"
        << name << " " << i.value << "\n";
  }
  return out.str();
}

// A POST handler `handle(body, res)` that reads the body itself, whatever its Content-Type, as
// llama-server parses every body as JSON. httplib, left to read it, parses a body sent as
// application/x-www-form-urlencoded (curl -d and --data-binary's default) as a form and refuses one
// over 8 KiB with 413 (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH, compiled into the library).
// A multipart/form-data body (curl -F) holds no JSON body: it is read and answered with 415.
template <typename Handle>
httplib::Server::HandlerWithContentReader WithBody(Handle handle) {
  return [handle](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    if (req.is_multipart_form_data()) {
      read([](const httplib::MultipartFormData&) { return true; }, [](const char*, size_t) { return true; });
      if (res.status >= 400)
        return;  // httplib's own error (413 over the limit), answered by the error handler
      return Reply(res, {415, "invalid_request_error",
                         "a multipart/form-data body is not accepted: send the request's JSON as the body "
                         "(Content-Type: application/json)"});
    }
    std::string body;
    if (!read([&body](const char* data, size_t n) {
          body.append(data, n);
          return true;
        }))
      return;  // httplib set the status (413 over kMaxBodyBytes, 400), answered by the error handler
    handle(body, res);
  };
}

class Server {
 public:
  Server(const ServerOptions& o, run::LoadedModel& model, Engine& engine, ChatTemplate chat_template)
      : model_(model), engine_(engine), template_(chat_template), defaults_{o.alias, o.n_predict} {
    if (defaults_.model_id.empty()) {
      const std::string& m = o.common.model;
      defaults_.model_id = m.substr(m.find_last_of('/') == std::string::npos ? 0 : m.find_last_of('/') + 1);
    }
    std::stringstream keys(o.api_key);
    for (std::string k; std::getline(keys, k, ',');)
      if (!k.empty()) api_keys_.push_back(k);
  }

  void Route(httplib::Server& http) {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (Authorized(req, api_keys_)) return httplib::Server::HandlerResponse::Unhandled;
      Reply(res, InvalidApiKey());
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib answers itself (no route: 404, a body over the limit: 413, ...) in the same JSON.
    http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) return Reply(res, {404, "not_found_error", "File Not Found"});
      Reply(res, {res.status, res.status < 500 ? "invalid_request_error" : "server_error",
                  res.status == 413
                      ? "the request body is larger than " + std::to_string(kMaxBodyBytes >> 20) + " MiB"
                      : "HTTP error " + std::to_string(res.status)});
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      Reply(res, {500, "server_error", what});
    });
    for (const char* p : {"/health", "/v1/health"})
      http.Get(p,
               [](const httplib::Request&, httplib::Response& res) { ReplyJson(res, {{"status", "ok"}}); });
    for (const char* p : {"/v1/models", "/models"})
      http.Get(p, [this](const httplib::Request&, httplib::Response& res) { ReplyJson(res, Models()); });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(Metrics(engine_.Metrics()), "text/plain; version=0.0.4");
    });
    http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
      json slots = json::array();
      for (const SlotState& s : engine_.Slots())
        slots.push_back({{"id", s.id},
                         {"n_ctx", engine_.n_ctx()},
                         {"is_processing", s.is_processing},
                         {"n_prompt_tokens", s.n_prompt},
                         {"n_decoded", s.n_decoded}});
      ReplyJson(res, slots);
    });
    for (const char* p : {"/v1/completions", "/completions"})
      http.Post(p, WithBody([this](const std::string& body, httplib::Response& res) {
                  Complete(body, res, false);
                }));
    for (const char* p : {"/v1/chat/completions", "/chat/completions"})
      http.Post(p, WithBody([this](const std::string& body, httplib::Response& res) {
                  Complete(body, res, true);
                }));
    for (const char* p : {"/v1/embeddings", "/embeddings"})
      http.Post(p, WithBody([this](const std::string& body, httplib::Response& res) { Embed(body, res); }));
  }

  /// Waits up to `timeout` for the event streams to be written out (after Engine::Stop each ends
  /// with its error event): httplib's stop() ends a chunked response at once, unwritten events lost.
  void WaitForStreams(std::chrono::milliseconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (open_streams_.load() > 0 && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:
  json Models() const {
    return {{"object", "list"},
            {"data", json::array({{{"id", defaults_.model_id},
                                   {"object", "model"},
                                   {"created", started_},
                                   {"owned_by", "stowage"},
                                   {"meta",
                                    {{"n_ctx", engine_.n_ctx()},
                                     {"n_vocab", model_.tokenizer.n_vocab()},
                                     {"n_slots", engine_.n_slots()}}}}})}};
  }

  // The request's tokens and settings; chat bodies through the chat template.
  Result<ParsedCompletion> Parse(const std::string& text, bool chat) const {
    STOWAGE_ASSIGN_OR_RETURN(json body, ParseBody(text));
    ParsedCompletion pc;
    STOWAGE_RETURN_IF_ERROR(ParseCommon(body, defaults_, &pc));
    if (!chat) {
      STOWAGE_RETURN_IF_ERROR(ParseCompletionPrompt(body, model_.tokenizer, &pc));
      return pc;
    }
    STOWAGE_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages, ParseChatMessages(body));
    STOWAGE_ASSIGN_OR_RETURN(std::string prompt, template_.Apply(messages, /*add_assistant_prompt=*/true));
    // As llama-server: the vocabulary's BOS added, the template's special tokens parsed.
    pc.request.prompt = model_.tokenizer.Tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
    if (pc.request.prompt.empty()) return InvalidArgument("'messages': the conversation makes no tokens");
    return pc;
  }

  void Complete(const std::string& body, httplib::Response& res, bool chat) {
    auto pc = Parse(body, chat);
    if (!pc.ok()) return Reply(res, HttpErrorOf(pc.status()));
    auto submitted = engine_.Submit(std::move(pc->request));
    if (!submitted.ok()) return Reply(res, HttpErrorOf(submitted.status()));
    std::shared_ptr<CompletionStream> stream = std::move(*submitted);
    const ResponseHead head{CompletionId(chat ? "chatcmpl-" : "cmpl-"), defaults_.model_id,
                            std::time(nullptr), chat};
    if (!pc->stream) return CompleteWhole(head, stream, res);
    const bool include_usage = pc->include_usage;
    res.set_header("Cache-Control", "no-cache");
    ++open_streams_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream, head, include_usage, first = true](size_t, httplib::DataSink& sink) mutable {
          std::string out;
          if (first && head.chat) out = SseEvent(TextChunk(head, "", /*role_only=*/true));
          first = false;
          std::optional<CompletionEvent> e;
          while (!(e = stream->Next(std::chrono::milliseconds(200)))) {
            if (!sink.is_writable()) {  // the client went away while we waited
              stream->Cancel();
              return false;
            }
          }
          bool end = false;
          if (e->kind == CompletionEvent::Kind::kText) {
            out += SseEvent(TextChunk(head, e->text));
          } else if (e->kind == CompletionEvent::Kind::kDone) {
            out += SseEvent(FinalChunk(head, *e));
            if (include_usage) out += SseEvent(UsageChunk(head, *e));
            out += "data: [DONE]\n\n";
            end = true;
          } else {
            const HttpError err = HttpErrorOf(e->error);
            out += "data: " + ErrorBody(err) + "\n\n";
            end = true;
          }
          if (!sink.write(out.data(), out.size())) {
            stream->Cancel();  // the engine frees the slot at its next step
            return false;
          }
          if (end) sink.done();
          return true;
        },
        [this, stream](bool success) {
          --open_streams_;
          if (!success) stream->Cancel();
        });
  }

  // /v1/embeddings: each input a request of its own (they share the step's batch), answered together.
  void Embed(const std::string& text, httplib::Response& res) {
    if (!model_.session->embeddings())  // llama-server's wording
      return Reply(res, {501, "not_supported_error",
                         "This server does not support embeddings. Start it with `--embeddings`"});
    if (model_.session->pooling() == PoolingType::kNone)
      return Reply(res, {400, "invalid_request_error",
                         "Pooling type 'none' is not OAI compatible. Please use a different pooling type"});
    auto body = ParseBody(text);
    if (!body.ok()) return Reply(res, HttpErrorOf(body.status()));
    if (Status st = CheckModel(*body, defaults_); !st.ok()) return Reply(res, HttpErrorOf(st));
    auto inputs = ParseEmbeddingInputs(*body, model_.tokenizer);
    if (!inputs.ok()) return Reply(res, HttpErrorOf(inputs.status()));
    std::vector<std::shared_ptr<CompletionStream>> streams;
    for (std::vector<int32_t>& tokens : *inputs) {
      CompletionRequest r;
      r.prompt = std::move(tokens);
      r.embedding = true;
      auto submitted = engine_.Submit(std::move(r));
      if (!submitted.ok()) {
        for (auto& s : streams) s->Cancel();
        return Reply(res, HttpErrorOf(submitted.status()));
      }
      streams.push_back(std::move(*submitted));
    }
    std::vector<std::vector<float>> embeddings;
    int64_t n_tokens = 0;
    for (auto& s : streams) {
      std::optional<CompletionEvent> e;
      while (!(e = s->Next(std::chrono::milliseconds(1000)))) {
      }
      if (e->kind != CompletionEvent::Kind::kEmbedding) {
        for (auto& other : streams) other->Cancel();
        return Reply(res, HttpErrorOf(e->error));
      }
      n_tokens += e->n_prompt;
      embeddings.push_back(std::move(e->embedding));
    }
    ReplyJson(res, EmbeddingsResponse(defaults_.model_id, std::move(embeddings), n_tokens));
  }

  void CompleteWhole(const ResponseHead& head, const std::shared_ptr<CompletionStream>& stream,
                     httplib::Response& res) {
    std::string text;
    for (;;) {
      std::optional<CompletionEvent> e = stream->Next(std::chrono::milliseconds(1000));
      if (!e) continue;
      if (e->kind == CompletionEvent::Kind::kText) {
        text += e->text;
      } else if (e->kind == CompletionEvent::Kind::kDone) {
        return ReplyJson(res, FullResponse(head, text, *e));
      } else {
        return Reply(res, HttpErrorOf(e->error));
      }
    }
  }

  run::LoadedModel& model_;
  Engine& engine_;
  const ChatTemplate template_;
  ServerDefaults defaults_;
  std::vector<std::string> api_keys_;
  std::time_t started_ = std::time(nullptr);
  std::atomic<int> open_streams_{0};  // event streams httplib is still writing
};

int Main(int argc, char** argv) {
  ServerOptions o;
  CLI::App app{"stowage-server: an OpenAI-compatible HTTP server (llama-server's endpoints and flags)"};
  AddOptions(app, &o);
  if (int rc = tools::ParseWithAliases(app, argc, argv,
                                       {{"-np", "--parallel"},
                                        {"-ngl", "--n-gpu-layers"},
                                        {"-ub", "--ubatch-size"},
                                        {"-ctk", "--cache-type-k"},
                                        {"-ctv", "--cache-type-v"},
                                        {"-fa", "--flash-attn"}});
      rc >= 0)
    return rc;
  run::CommonOptions& c = o.common;
  c.program = "stowage-server";
  if (Status st = run::CheckPlanningFlagsUnused(app, c); !st.ok()) {
    std::fprintf(stderr, "stowage-server: %s\n", st.message().c_str());
    return 1;
  }
  // llama-server's -c and -ngl of that llama.cpp (2026: the model's context, -ngl auto with --fit).
  const planner::LlamacppDefaults defaults =
      planner::LlamacppDefaultsOf(tools::LlamacppCompatOf(c.llamacpp_compat));
  if (app.count("--ctx-size") == 0) c.n_ctx = defaults.n_ctx;
  if (c.plan.empty() && app.count("--n-gpu-layers") == 0 && defaults.fit)
    c.n_gpu_layers = tools::kAutoGpuLayers;
  c.n_seq_max = static_cast<uint32_t>(o.n_parallel);
  c.kv_unified = true;

  if (!o.embeddings && app.count("--pooling") > 0) {
    std::fprintf(stderr,
                 "stowage-server: --pooling %s: give --embeddings too (pooling is for /v1/embeddings)\n",
                 o.pooling.c_str());
    return 1;
  }
  const sigset_t signals = BlockShutdownSignals();
  auto loaded = run::LoadModel(c, /*quiet=*/false);
  if (!loaded.ok()) {
    std::fprintf(stderr, "stowage-server: %s\n", loaded.status().message().c_str());
    return 1;
  }
  Session& session = *loaded->session;
  // The plan fixes the sequences, as it fixes -c (CheckPlanningFlagsUnused): -np must agree with it.
  if (!c.plan.empty() && app.count("--parallel") > 0 && session.n_seq_max() != o.n_parallel) {
    std::fprintf(stderr,
                 "stowage-server: --parallel %d: the plan %s has %lld sequences (re-plan with plan-model -np "
                 "%d -kvu)\n",
                 o.n_parallel, c.plan.c_str(), static_cast<long long>(session.n_seq_max()), o.n_parallel);
    return 1;
  }
  if (o.embeddings) {
    auto pooling = PoolingOf(*loaded->gguf, o.pooling);
    Status st = pooling.ok() ? session.SetEmbeddings(true, *pooling) : pooling.status();
    if (!st.ok()) {
      std::fprintf(stderr, "stowage-server: --embeddings: %s\n", st.message().c_str());
      return 1;
    }
  }
  auto chat_template = run::PickChatTemplate(*loaded->gguf, o.chat_template, "stowage-server");
  if (!chat_template.ok()) {
    std::fprintf(stderr, "stowage-server: %s\n", chat_template.status().message().c_str());
    return 1;
  }
  Engine engine(session, loaded->tokenizer, static_cast<int32_t>(c.n_batch));
  Server server(o, *loaded, engine, *chat_template);

  httplib::Server http;
  const int threads_http = o.threads_http > 0 ? o.threads_http : std::max(32, 4 * engine.n_slots());
  http.new_task_queue = [threads_http] { return new httplib::ThreadPool(static_cast<size_t>(threads_http)); };
  http.set_payload_max_length(kMaxBodyBytes);
  server.Route(http);
  // httplib's default socket options add SO_REUSEPORT, with which a second server on the same port
  // binds too and the kernel shares the connections between them; SO_REUSEADDR alone lets a
  // restarted server bind at once but refuses a port another server listens on (llama-server's).
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int port = o.port;
  if (port == 0 ? (port = http.bind_to_any_port(o.host)) < 0 : !http.bind_to_port(o.host, port)) {
    std::fprintf(stderr, "stowage-server: cannot listen on %s:%d (in use, or not an address of this host)\n",
                 o.host.c_str(), o.port);
    return 1;
  }
  engine.Start();
  std::printf("stowage-server: listening on http://%s:%d (%d slot%s, context %lld)\n", o.host.c_str(), port,
              engine.n_slots(), engine.n_slots() == 1 ? "" : "s", static_cast<long long>(engine.n_ctx()));
  std::fflush(stdout);

  // SIGINT / SIGTERM: finish the streams (each ends with an error event), stop listening, and let the
  // handler threads return.
  std::atomic<bool> listening{true};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!listening.load()) return;
    std::fprintf(stderr, "stowage-server: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    engine.Stop();
    server.WaitForStreams(std::chrono::seconds(5));
    http.stop();
  });
  const bool ok = http.listen_after_bind();
  listening.store(false);
  if (waiter.joinable()) {
    pthread_kill(waiter.native_handle(), SIGTERM);  // wakes sigwait when the server stopped by itself
    waiter.join();
  }
  engine.Stop();
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace stowage::server

int main(int argc, char** argv) {
  return stowage::tools::RunTool("stowage-server", stowage::server::Main, argc, argv);
}
