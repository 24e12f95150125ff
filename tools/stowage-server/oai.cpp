#include "oai.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <utility>

#include "stowage/runtime/version.h"

namespace stowage::server {

HttpError HttpErrorOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return {400, "invalid_request_error", s.message()};
    case StatusCode::kOutOfRange:
      return {400, "exceed_context_size_error", s.message()};
    case StatusCode::kNotFound:
      return {404, "not_found_error", s.message()};
    case StatusCode::kUnimplemented:
      return {501, "not_supported_error", s.message()};
    case StatusCode::kUnavailable:
      return {503, "unavailable_error", s.message()};
    default:
      return {500, "server_error", s.message()};
  }
}

HttpError InvalidApiKey() { return {401, "authentication_error", "Invalid API Key"}; }

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ErrorBody(const HttpError& e) {
  return Dump({{"error", {{"code", e.status}, {"message", e.message}, {"type", e.type}}}});
}

Result<json> ParseBody(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number such as 1e400
    return InvalidArgument(std::string("malformed JSON body: ") + e.what());
  }
  if (!j.is_object())
    return InvalidArgument(std::string("the body must be a JSON object, found ") + j.type_name());
  return j;
}

namespace {

Status WrongType(const std::string& field, const char* expected, const json& v) {
  return InvalidArgument("'" + field + "': expected " + expected + ", found " + v.type_name() +
                         (v.is_primitive() && !v.is_null() ? " " + Dump(v).substr(0, 40) : std::string()));
}

// A range bound as a person writes it: "0", "1", "2147483647", "0.5".
std::string Bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", v);
  return buf;
}

// A number field in [lo, hi] into *out; absent or null leaves *out.
template <typename T>
Status Number(const json& body, const std::string& field, double lo, double hi, T* out) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_number()) return WrongType(field, "a number", *it);
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return InvalidArgument("'" + field + "': " + Dump(*it) + " is outside [" + Bound(lo) + ", " + Bound(hi) +
                           "]");
  if (std::is_integral_v<T> && !it->is_number_integer()) return WrongType(field, "an integer", *it);
  *out = static_cast<T>(v);
  return {};
}

Status Bool(const json& body, const std::string& field, bool* out) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_boolean()) return WrongType(field, "true or false", *it);
  *out = it->get<bool>();
  return {};
}

// Refuses (kUnimplemented: HTTP 501) the OpenAI and llama-server request fields this server does not
// implement when they ask for something, so that a client never gets a reply silently without what
// it asked for: logprobs / top_logprobs, echo, tools / functions, a response_format other than text,
// grammar / json_schema, logit_bias, suffix (infill). Absent, null, false, 0, empty or "text" is fine.
Status RefuseUnsupported(const json& body) {
  auto asks = [](const json& v) {
    if (v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    return !v.empty();  // an array or object
  };
  static const struct {
    const char* field;
    const char* what;
  } kFields[] = {
      {"logprobs", "log probabilities"}, {"top_logprobs", "log probabilities"},
      {"n_probs", "log probabilities"},  {"echo", "echoing the prompt"},
      {"tools", "tool calls"},           {"functions", "function calls"},
      {"grammar", "grammars"},           {"json_schema", "JSON schemas"},
      {"logit_bias", "logit biases"},    {"suffix", "infill (a suffix)"},
  };
  for (const auto& f : kFields) {
    const auto it = body.find(f.field);
    if (it != body.end() && asks(*it))
      return Unimplemented(std::string("'") + f.field + "': " + f.what +
                           " are not supported by stowage-server");
  }
  if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    const auto type = it->is_object() ? it->find("type") : it->end();
    if (!it->is_object() || type == it->end() || !type->is_string())
      return WrongType("response_format", "an object with a string 'type'", *it);
    if (type->get<std::string>() != "text")
      return Unimplemented("'response_format': type " + Dump(*type) +
                           " is not supported by stowage-server (only \"text\")");
  }
  return {};
}

}  // namespace

Status CheckModel(const json& body, const ServerDefaults& d) {
  if (const auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return WrongType("model", "a string", *it);
    if (it->get<std::string>() != d.model_id)
      return NotFound("model '" + it->get<std::string>() + "' not found; this server serves '" + d.model_id +
                      "'");
  }
  return {};
}

Status ParseCommon(const json& body, const ServerDefaults& d, ParsedCompletion* out) {
  STOWAGE_RETURN_IF_ERROR(CheckModel(body, d));
  STOWAGE_RETURN_IF_ERROR(RefuseUnsupported(body));
  CompletionRequest& r = out->request;
  r.n_predict = d.n_predict;
  constexpr double kMaxInt = 2147483647.0;
  for (const char* f : {"n_predict", "max_tokens", "max_completion_tokens"})
    STOWAGE_RETURN_IF_ERROR(Number(body, f, -1, kMaxInt, &r.n_predict));
  SamplerParams& sp = r.sampling;
  STOWAGE_RETURN_IF_ERROR(Number(body, "temperature", -1e4, 1e4, &sp.temperature));
  STOWAGE_RETURN_IF_ERROR(Number(body, "top_k", -kMaxInt, kMaxInt, &sp.top_k));
  STOWAGE_RETURN_IF_ERROR(Number(body, "top_p", 0, 1, &sp.top_p));
  STOWAGE_RETURN_IF_ERROR(Number(body, "min_p", 0, 1, &sp.min_p));
  STOWAGE_RETURN_IF_ERROR(Number(body, "repeat_penalty", 0, 1e4, &sp.penalty_repeat));
  STOWAGE_RETURN_IF_ERROR(Number(body, "repeat_last_n", -1, kMaxInt, &sp.penalty_last_n));
  STOWAGE_RETURN_IF_ERROR(Number(body, "presence_penalty", -1e4, 1e4, &sp.penalty_present));
  STOWAGE_RETURN_IF_ERROR(Number(body, "frequency_penalty", -1e4, 1e4, &sp.penalty_freq));
  int64_t seed = -1;  // llama.cpp LLAMA_DEFAULT_SEED: a random seed
  STOWAGE_RETURN_IF_ERROR(Number(body, "seed", -1, 4294967295.0, &seed));
  sp.seed = seed < 0 || seed == 4294967295 ? std::random_device{}() : static_cast<uint32_t>(seed);
  int64_t n = 1;
  STOWAGE_RETURN_IF_ERROR(Number(body, "n", 1, kMaxInt, &n));
  if (n != 1)
    return Unimplemented("'n': only one choice per request is supported, found " + std::to_string(n));
  if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        if (!(*it)[i].is_string()) return WrongType("stop[" + std::to_string(i) + "]", "a string", (*it)[i]);
        r.stop.push_back((*it)[i].get<std::string>());
      }
    } else {
      return WrongType("stop", "a string or an array of strings", *it);
    }
  }
  STOWAGE_RETURN_IF_ERROR(Bool(body, "ignore_eos", &r.ignore_eos));
  STOWAGE_RETURN_IF_ERROR(Bool(body, "stream", &out->stream));
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return WrongType("stream_options", "an object", *it);
    STOWAGE_RETURN_IF_ERROR(Bool(*it, "include_usage", &out->include_usage));
  }
  return {};
}

namespace {

// One prompt: a string (tokenized with BOS and special tokens, as llama-server) or token ids.
Result<std::vector<int32_t>> PromptTokens(const json& p, const std::string& field, const Tokenizer& tok) {
  std::vector<int32_t> tokens;
  if (p.is_string()) {
    tokens = tok.Tokenize(p.get_ref<const std::string&>(), /*add_special=*/true, /*parse_special=*/true);
  } else if (p.is_array() && !p.empty() && p[0].is_number()) {
    for (size_t i = 0; i < p.size(); ++i) {
      const json& t = p[i];
      const std::string at = field + "[" + std::to_string(i) + "]";
      if (!t.is_number_integer()) return WrongType(at, "a token id", t);
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= tok.n_vocab())
        return InvalidArgument("'" + at + "': token id " + std::to_string(id) + " is outside [0, " +
                               std::to_string(tok.n_vocab()) + ")");
      tokens.push_back(static_cast<int32_t>(id));
    }
  } else {
    return WrongType(field, "a string or an array of token ids", p);
  }
  if (tokens.empty()) return InvalidArgument("'" + field + "': no tokens");
  return tokens;
}

// A field holding one prompt or an array of prompts (strings or token-id arrays).
bool IsPromptList(const json& p) {
  return p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
}

}  // namespace

Status ParseCompletionPrompt(const json& body, const Tokenizer& tok, ParsedCompletion* out) {
  const auto it = body.find("prompt");
  if (it == body.end()) return InvalidArgument("'prompt' is required");
  if (IsPromptList(*it) && it->size() > 1)
    return Unimplemented("'prompt': one prompt per request is supported, found " +
                         std::to_string(it->size()));
  const json& p = IsPromptList(*it) ? (*it)[0] : *it;
  STOWAGE_ASSIGN_OR_RETURN(out->request.prompt, PromptTokens(p, "prompt", tok));
  return {};
}

Result<std::vector<std::vector<int32_t>>> ParseEmbeddingInputs(const json& body, const Tokenizer& tok) {
  auto it = body.find("input");
  if (it == body.end()) it = body.find("content");
  if (it == body.end()) return InvalidArgument("'input' is required");
  if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string()) return WrongType("encoding_format", "\"float\"", *f);
    if (f->get<std::string>() != "float")
      return Unimplemented("'encoding_format': only \"float\" is supported, found " + Dump(*f));
  }
  std::vector<std::vector<int32_t>> out;
  if (!IsPromptList(*it)) {
    STOWAGE_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, PromptTokens(*it, "input", tok));
    out.push_back(std::move(tokens));
    return out;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    STOWAGE_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                             PromptTokens((*it)[i], "input[" + std::to_string(i) + "]", tok));
    out.push_back(std::move(tokens));
  }
  return out;
}

json EmbeddingsResponse(const std::string& model, std::vector<std::vector<float>> embeddings,
                        int64_t n_prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < embeddings.size(); ++i) {
    std::vector<float>& e = embeddings[i];
    double sum = 0;
    for (float v : e) sum += static_cast<double>(v) * v;
    const double norm = std::sqrt(sum);
    if (norm > 0)
      for (float& v : e) v = static_cast<float>(v / norm);
    data.push_back({{"embedding", std::move(e)}, {"index", i}, {"object", "embedding"}});
  }
  return {{"data", std::move(data)},
          {"model", model},
          {"object", "list"},
          {"usage", {{"prompt_tokens", n_prompt_tokens}, {"total_tokens", n_prompt_tokens}}}};
}

Result<std::vector<ChatMessage>> ParseChatMessages(const json& body) {
  const auto it = body.find("messages");
  if (it == body.end()) return InvalidArgument("'messages' is required");
  if (!it->is_array()) return WrongType("messages", "a non-empty array", *it);
  if (it->empty()) return InvalidArgument("'messages': expected a non-empty array, found an empty array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return WrongType(at, "an object", m);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return role == m.end() ? InvalidArgument("'" + at + ".role' is required")
                             : WrongType(at + ".role", "a string", *role);
    std::string content;
    const auto c = m.find("content");
    if (c != m.end() && c->is_string()) {
      content = c->get<std::string>();
    } else if (c != m.end() && c->is_array()) {  // [{"type": "text", "text": ...}, ...]
      for (size_t k = 0; k < c->size(); ++k) {
        const json& part = (*c)[k];
        const std::string pat = at + ".content[" + std::to_string(k) + "]";
        // Named by type, never dumped: a deeply nested part would exhaust the stack in Dump.
        if (!part.is_object()) return WrongType(pat, "{\"type\": \"text\", \"text\": string}", part);
        const auto type = part.find("type");
        if (type == part.end()) return InvalidArgument("'" + pat + ".type' is required");
        if (!type->is_string() || type->get_ref<const std::string&>() != "text")
          return WrongType(pat + ".type", "\"text\"", *type);
        const auto text = part.find("text");
        if (text == part.end()) return InvalidArgument("'" + pat + ".text' is required");
        if (!text->is_string()) return WrongType(pat + ".text", "a string", *text);
        content += text->get_ref<const std::string&>();
      }
    } else if (c != m.end() && !c->is_null()) {
      return WrongType(at + ".content", "a string or an array of text parts", *c);
    } else if (c == m.end() && !m.contains("tool_calls")) {
      // llama.cpp common_chat_msgs_parse_oaicompat: "Expected 'content' or 'tool_calls'" (null is content).
      return InvalidArgument("'" + at + ".content' is required (a string, an array of text parts, or null)");
    }
    out.push_back({role->get<std::string>(), std::move(content)});
  }
  return out;
}

std::string CompletionId(const std::string& prefix) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string id = prefix;
  for (int i = 0; i < 32; ++i) id += kChars[rd() % (sizeof(kChars) - 1)];
  return id;
}

json Usage(const CompletionEvent& done) {
  return {{"completion_tokens", done.n_predicted},
          {"prompt_tokens", done.n_prompt},
          {"total_tokens", done.n_prompt + done.n_predicted}};
}

json Timings(const CompletionEvent& done) {
  const auto per = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  const auto rate = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
  return {{"prompt_n", done.n_prompt},
          {"prompt_ms", done.prompt_ms},
          {"prompt_per_token_ms", per(done.prompt_ms, done.n_prompt)},
          {"prompt_per_second", rate(done.prompt_ms, done.n_prompt)},
          {"predicted_n", done.n_predicted},
          {"predicted_ms", done.predicted_ms},
          {"predicted_per_token_ms", per(done.predicted_ms, done.n_predicted)},
          {"predicted_per_second", rate(done.predicted_ms, done.n_predicted)}};
}

namespace {

json Head(const ResponseHead& h, json choices, const char* object) {
  return {{"choices", std::move(choices)},
          {"created", h.created},
          {"id", h.id},
          {"model", h.model},
          {"system_fingerprint", std::string("stowage-") + stowage_version()},
          {"object", object}};
}

const char* ChunkObject(const ResponseHead& h) {
  return h.chat ? "chat.completion.chunk" : "text_completion";
}

}  // namespace

json TextChunk(const ResponseHead& h, const std::string& text, bool role_only) {
  json choice = {{"finish_reason", nullptr}, {"index", 0}};
  if (!h.chat) {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  } else if (role_only) {
    choice["delta"] = {{"role", "assistant"}, {"content", nullptr}};
  } else {
    choice["delta"] = {{"content", text}};
  }
  return Head(h, json::array({std::move(choice)}), ChunkObject(h));
}

json FinalChunk(const ResponseHead& h, const CompletionEvent& done) {
  json choice = {{"finish_reason", done.finish_reason}, {"index", 0}};
  if (h.chat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
    choice["logprobs"] = nullptr;
  }
  json j = Head(h, json::array({std::move(choice)}), ChunkObject(h));
  j["timings"] = Timings(done);
  return j;
}

json UsageChunk(const ResponseHead& h, const CompletionEvent& done) {
  json j = Head(h, json::array(), ChunkObject(h));
  j["usage"] = Usage(done);
  return j;
}

json FullResponse(const ResponseHead& h, const std::string& text, const CompletionEvent& done) {
  json choice = {{"finish_reason", done.finish_reason}, {"index", 0}};
  if (h.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  json j = Head(h, json::array({std::move(choice)}), h.chat ? "chat.completion" : "text_completion");
  j["usage"] = Usage(done);
  j["timings"] = Timings(done);
  return j;
}

std::string SseEvent(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace stowage::server
