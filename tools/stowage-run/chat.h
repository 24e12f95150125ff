// Chat mode (stowage-run -cnv), as llama-cli's conversation mode: user turns read from standard
// input, formatted with the model's chat template (or --chat-template NAME; chat_template.h), each
// reply generated until an end-of-generation token, the KV cache kept across turns so that only a
// new turn's tokens are decoded.
#pragma once

#include <cstdio>
#include <string>

#include "run_common.h"
#include "stowage/runtime/chat_template.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/sampler.h"

namespace stowage::run {

/// What the chat runs with (llama-cli's conversation-mode flags).
struct ChatOptions {
  std::string system_prompt;    ///< -sys: the conversation's system message ("" = none)
  std::string first_prompt;     ///< -p / -f: the first user turn ("" = read it from the input)
  std::string chat_template;    ///< --chat-template NAME ("" = the model's tokenizer.chat_template)
  int n_predict = -1;           ///< tokens per reply; -1: until an end-of-generation token
  SamplerParams sampler;        ///< seed kRandomSeed: a random seed for this run (printed)
  bool escape = true;           ///< expand \n, \t, ... in the user turns (llama-cli's -e default)
  bool quiet = false;           ///< -q: only the replies
  bool verbose_prompt = false;  ///< --verbose-prompt: each turn's templated text and tokens on stderr
};

/// Loads the model and a session (LoadModel), then chats as llama-cli -cnv: the system message and
/// the first prompt (when given) are formatted with the template and decoded (BOS added as the
/// vocabulary says, special tokens parsed); then, for each turn, the reply is sampled and streamed
/// to stdout until an end-of-generation token (Tokenizer::IsEog), n_predict tokens or a full
/// context, and "\n> " asks for the next user turn: one line of `in` (a line that ends with '\'
/// continues on the next one; an empty line is skipped; the end of the input ends the chat). Each
/// user turn is the text ChatTemplate::ApplyIncrement adds to the conversation so far (llama.cpp
/// common_chat_format_single), decoded after the previous reply's end-of-generation token, as
/// llama-cli keeps it in the KV cache. A reply cut by n_predict is closed with the vocabulary's
/// end-of-turn token (eot, else eos) and kept in the history, as llama-cli does for a reply
/// interrupted with Ctrl+C (llama-cli leaves a reply cut by -n out of the history). The sampler's
/// sampler restarts at each turn read (common_sampler_reset: penalty history, random generator).
/// Template: PickChatTemplate (--chat-template NAME or TEXT, else the model's, else chatml). Returns the exit
/// status (errors: one line on stderr, status 1; a full context ends the chat with a message and
/// status 0, as text generation).
int Chat(const CommonOptions& c, ChatOptions o, std::FILE* in);

/// The chat template of stowage-run -cnv and stowage-server: `name` (--chat-template) when not
/// empty: a built-in name or a template text whose family llama.cpp detects (ChatTemplate::FromText,
/// as llama.cpp's --chat-template accepts either); else the model's (FromModel), else chatml with a
/// line "<tool>: <file> has no tokenizer.chat_template: ..." on stderr (llama.cpp's default when a
/// model has none: common_chat_templates_init). Errors: kInvalidArgument "--chat-template: unknown
/// chat template name 'x' (expected one of llama.cpp's built-in names: ...), or a template text of a
/// family llama.cpp detects" for a short value without spaces or brackets, else "--chat-template:
/// chat template not recognised: ..." (FromText's); FromModel's other than a missing key, prefixed
/// with the --chat-template hint.
Result<ChatTemplate> PickChatTemplate(const GgufFile& gguf, const std::string& name, const char* tool);

}  // namespace stowage::run
