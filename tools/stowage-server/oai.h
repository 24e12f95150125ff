// The OpenAI-compatible request and response shapes of stowage-server, as llama-server answers
// them (llama.cpp 2026 tools/server/server-task.cpp, server-common.cpp): request bodies parsed into
// a CompletionRequest, responses and server-sent-event chunks, and error bodies.
#pragma once

#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine.h"
#include "stowage/runtime/chat_template.h"
#include "stowage/runtime/status.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::server {

using json = nlohmann::json;

/// An HTTP error with an OpenAI-style body: {"error": {"code": status, "message", "type"}}.
struct HttpError {
  int status = 500;
  std::string type = "server_error";
  std::string message;
};

/// The HTTP status and OpenAI error type of `s` (llama-server's format_error_response):
/// kInvalidArgument 400 invalid_request_error, kOutOfRange 400 exceed_context_size_error, kNotFound
/// 404 not_found_error, kUnimplemented 501 not_supported_error, kUnavailable 503
/// unavailable_error, anything else 500 server_error.
HttpError HttpErrorOf(const Status& s);
/// 401 authentication_error "Invalid API Key" (llama-server's API key middleware).
HttpError InvalidApiKey();
/// The error body, one line of JSON (invalid UTF-8 in the message replaced).
std::string ErrorBody(const HttpError& e);

/// The server's settings that requests see.
struct ServerDefaults {
  std::string model_id;    ///< what /v1/models lists and "model" must name when given
  int32_t n_predict = -1;  ///< -n: max_tokens when a request gives none
};

/// A parsed /v1/completions or /v1/chat/completions body.
struct ParsedCompletion {
  CompletionRequest request;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage: a last chunk with "usage"
};

/// The JSON object in `body`. Errors (kInvalidArgument): "malformed JSON body: <parser message>",
/// or "the body must be a JSON object, found <type>".
Result<json> ParseBody(const std::string& body);

/// "model" when given: d.model_id, else kNotFound naming both; kInvalidArgument when not a string.
Status CheckModel(const json& body, const ServerDefaults& d);

/// The fields both endpoints share: "model" (CheckModel), "max_tokens" / "max_completion_tokens" /
/// "n_predict" (>= -1; else d.n_predict), "temperature", "top_k", "top_p", "min_p", "seed" (-1 or absent:
/// random), "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "stop" (a string or
/// an array of strings), "ignore_eos", "stream", "stream_options.include_usage", "n" (1 only). Defaults are
/// llama.cpp's (common_params_sampling). Errors (kInvalidArgument): "'<field>': expected <type>, found
/// <type>" or "'<field>': <value> is outside [lo, hi]"; kUnimplemented for n > 1, and for the fields
/// asking for what this server does not do (logprobs, top_logprobs, n_probs, echo, tools, functions,
/// grammar, json_schema, logit_bias, suffix when true / non-zero / non-empty; a response_format whose
/// type is not "text"): the client learns it instead of getting a reply without it.
Status ParseCommon(const json& body, const ServerDefaults& d, ParsedCompletion* out);

/// The prompt of /v1/completions: "prompt" as a string (tokenized as llama-server does: the
/// vocabulary's BOS added, special tokens parsed), an array of token ids, or an array holding one
/// of those. Errors (kInvalidArgument): missing, of another type, several prompts, a token id
/// outside [0, n_vocab), no tokens.
Status ParseCompletionPrompt(const json& body, const Tokenizer& tok, ParsedCompletion* out);

/// The messages of /v1/chat/completions: "messages", a non-empty array of {"role": string,
/// "content": string | [{"type": "text", "text": string}...] | null}, the parts' texts joined.
/// "content" may be left out only beside "tool_calls" (llama.cpp common_chat_msgs_parse_oaicompat).
/// Errors (kInvalidArgument) naming the message index and field; an empty array: "'messages':
/// expected a non-empty array, found an empty array".
Result<std::vector<ChatMessage>> ParseChatMessages(const json& body);

/// The inputs of /v1/embeddings: "input" (or llama-server's "content") as a string, an array of
/// token ids, or an array of those; strings tokenized as llama-server does (BOS, special tokens
/// parsed). "encoding_format" must be "float" when given. Errors (kInvalidArgument): missing, of
/// another type, an empty input, a token id outside [0, n_vocab); kUnimplemented for "base64".
Result<std::vector<std::vector<int32_t>>> ParseEmbeddingInputs(const json& body, const Tokenizer& tok);

/// The /v1/embeddings response for `embeddings` (one per input, in order), each scaled to unit
/// Euclidean length as llama-server does (common_embd_normalize with its default 2; a zero vector
/// stays zero), with the usage of `n_prompt_tokens`.
json EmbeddingsResponse(const std::string& model, std::vector<std::vector<float>> embeddings,
                        int64_t n_prompt_tokens);

/// A completion id: `prefix` ("cmpl-", "chatcmpl-") and 32 random letters and digits.
std::string CompletionId(const std::string& prefix);

/// What every response object carries.
struct ResponseHead {
  std::string id, model;
  std::time_t created = 0;
  bool chat = false;  ///< chat.completion(.chunk) shapes, else text_completion
};

/// {"prompt_tokens", "completion_tokens", "total_tokens"} of a finished completion.
json Usage(const CompletionEvent& done);
/// llama-server's "timings" of a finished completion (prompt_n, prompt_ms, prompt_per_token_ms,
/// prompt_per_second and the predicted_ equivalents).
json Timings(const CompletionEvent& done);
/// One streamed chunk: text (chat: a delta {"content"}; `role_only`: the first delta
/// {"role": "assistant", "content": null}) with a null finish_reason.
json TextChunk(const ResponseHead& h, const std::string& text, bool role_only = false);
/// The last streamed chunk: empty text (chat: an empty delta) with the finish reason and timings.
json FinalChunk(const ResponseHead& h, const CompletionEvent& done);
/// stream_options.include_usage's chunk after the last: no choices, the usage.
json UsageChunk(const ResponseHead& h, const CompletionEvent& done);
/// The whole non-streamed response: the text (chat: a message {"role": "assistant", "content"}),
/// finish reason, usage and timings.
json FullResponse(const ResponseHead& h, const std::string& text, const CompletionEvent& done);
/// One server-sent event: "data: <json>\n\n".
std::string SseEvent(const json& j);
/// JSON text of `j`, invalid UTF-8 replaced (generated text may split a character only at its end).
std::string Dump(const json& j);

}  // namespace stowage::server
