// Chat templates: a conversation (role, content messages) formatted into the prompt text a chat
// model was trained on, as llama.cpp's built-in templates do (src/llama-chat.cpp of 2026:
// llm_chat_detect_template, llm_chat_apply_template, the list LLM_CHAT_TEMPLATES).
//
// There is no Jinja interpreter: a GGUF's `tokenizer.chat_template` (Jinja text) is not executed;
// its family is recognised from marker strings in the text, in llama.cpp's order ("<|im_start|>"
// -> chatml unless "<|im_sep|>" (phi4) or "<end_of_utterance>" (smolvlm); "[INST]" -> the mistral
// and llama2 variants; "<|start_header_id|>" -> llama3; "<start_of_turn>" -> gemma; ...), and the
// family's fixed formatting is applied. The output equals llama.cpp's llama_chat_apply_template
// byte for byte for every family (test/data/chat-template holds the reference's outputs).
//
// Families, by llama.cpp's names (FromName; BuiltinNames lists them): chatml, llama2, llama2-sys,
// llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7,
// mistral-v7-tekken, phi3, phi4, falcon3, zephyr, monarch, gemma, orion, openchat, vicuna,
// vicuna-orca, deepseek, deepseek2, deepseek3, deepseek-ocr, command-r, llama3, chatglm3, chatglm4,
// glmedge, minicpm, exaone3, exaone4, exaone-moe, rwkv-world, granite, granite-4.0, granite-4.1,
// gigachat, megrez, yandex, bailing, bailing-think, bailing2, llama4, smolvlm, hunyuan-moe, gpt-oss,
// hunyuan-dense, hunyuan-vl, kimi-k2, seed_oss, grok-2, pangu-embedded, solar-open; and "dots1",
// which llama.cpp detects from a template text but has no name for (FromName refuses it, as
// llama.cpp's llm_chat_template_from_str does).
//
// Roles are free text: "system", "user" and "assistant" are what every family knows; some know
// "tool" (exaone4, exaone-moe, kimi-k2, pangu-embedded) or "assistant_tool_call" (granite); a role a
// family does not know is formatted as that family's code does (written verbatim by the families
// that print the role, skipped or treated as the assistant by the others), as in llama.cpp.
//
// Thread-safety: a ChatTemplate is an immutable value; copies are cheap and independent.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stowage/runtime/status.h"

namespace stowage {

class GgufFile;

/// One message of a conversation. `role` is usually "system", "user" or "assistant"; `content` is
/// UTF-8 text (not validated: bytes are copied as they are).
struct ChatMessage {
  std::string role;
  std::string content;
};

/// A chat template family of llama.cpp's built-in list.
class ChatTemplate {
 public:
  /// The family named `name` in llama.cpp's built-in list (exact, case-sensitive: "chatml",
  /// "llama3", "gemma", "gpt-oss", ...; llama.cpp llm_chat_template_from_str). Errors:
  /// kNotFound "unknown chat template name 'x' (expected one of llama.cpp's built-in names: chatml,
  /// llama2, ...)".
  static Result<ChatTemplate> FromName(std::string_view name);

  /// The family of a template text as llama.cpp's llm_chat_detect_template finds it: a built-in
  /// name is taken as that family, any other text is searched for the family's marker strings, in
  /// llama.cpp's order (the first rule that matches wins). Errors: kNotFound "chat template not
  /// recognised: no built-in family matches '<the text's first 60 bytes, escaped>...' (N bytes)".
  static Result<ChatTemplate> FromText(std::string_view text);

  /// The family of the model's `tokenizer.chat_template` (FromText on its value; llama.cpp
  /// llama_model_chat_template with no name). Errors: kNotFound "<file>: missing key
  /// 'tokenizer.chat_template' (the model carries no chat template: choose one with --chat-template
  /// NAME)"; kInvalidArgument (GgufFile::KeyError) "<file>: offset N: key 'tokenizer.chat_template':
  /// expected a string, found <type>", or "...: expected a template of a family in llama.cpp's
  /// built-in list, found '<first 60 bytes, escaped>...' (N bytes)" when no family matches.
  static Result<ChatTemplate> FromModel(const GgufFile& gguf);

  /// llama.cpp's built-in template names, in its order (sorted by byte value, as its std::map;
  /// llama_chat_builtin_templates).
  static std::vector<std::string_view> BuiltinNames();

  /// `msgs` formatted by this family (llama.cpp llm_chat_apply_template), with the assistant's
  /// turn opened at the end when `add_assistant_prompt` (llama.cpp's add_ass; families whose
  /// llama.cpp code ignores it -- orion, minicpm, rwkv-world, hunyuan-moe, hunyuan-dense,
  /// hunyuan-vl, mistral, llama2, deepseek-ocr -- ignore it too). The text has no BOS token of its
  /// own unless the family writes one ("<s>" of llama2-sys-bos inside the history, monarch,
  /// gigachat): the caller tokenizes it with the model's add_bos and parse_special = true. Errors:
  /// none today (a Result so that a family that refuses a conversation can say so).
  Result<std::string> Apply(const std::vector<ChatMessage>& msgs, bool add_assistant_prompt) const;

  /// The text that `new_msg` adds to a conversation `past` already formatted (and decoded) with
  /// Apply(past, false): Apply(past + new_msg, add_assistant_prompt) minus Apply(past, false)'s
  /// bytes, with a "\n" first when add_assistant_prompt and the past's text ends with one
  /// (llama.cpp common_chat_format_single, what llama-cli's conversation mode decodes per turn).
  /// Errors: those of Apply.
  Result<std::string> ApplyIncrement(const std::vector<ChatMessage>& past, const ChatMessage& new_msg,
                                     bool add_assistant_prompt) const;

  /// The family's name in llama.cpp's list ("chatml", "llama3", ...; "dots1" for the one family
  /// without a name there).
  std::string_view name() const;

  /// Families are equal when they format alike (same name).
  bool operator==(const ChatTemplate& other) const { return family_ == other.family_; }
  bool operator!=(const ChatTemplate& other) const { return family_ != other.family_; }

 private:
  explicit ChatTemplate(int family) : family_(family) {}
  int family_;  // index into the implementation's family table
};

}  // namespace stowage
