// Chat template families: detection from a template text and formatting, as llama.cpp 2026
// src/llama-chat.cpp (llm_chat_detect_template, llm_chat_apply_template).
#include "stowage/runtime/chat_template.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "stowage/runtime/gguf.h"

namespace stowage {
namespace {

enum class Family {
  kChatml,
  kLlama2,
  kLlama2Sys,
  kLlama2SysBos,
  kLlama2SysStrip,
  kMistralV1,
  kMistralV3,
  kMistralV3Tekken,
  kMistralV7,
  kMistralV7Tekken,
  kPhi3,
  kPhi4,
  kFalcon3,
  kZephyr,
  kMonarch,
  kGemma,
  kOrion,
  kOpenchat,
  kVicuna,
  kVicunaOrca,
  kDeepseek,
  kDeepseek2,
  kDeepseek3,
  kDeepseekOcr,
  kCommandR,
  kLlama3,
  kChatglm3,
  kChatglm4,
  kGlmedge,
  kMinicpm,
  kExaone3,
  kExaone4,
  kExaoneMoe,
  kRwkvWorld,
  kGranite3,
  kGranite40,
  kGranite41,
  kGigachat,
  kMegrez,
  kYandex,
  kBailing,
  kBailingThink,
  kBailing2,
  kLlama4,
  kSmolvlm,
  kHunyuanMoe,
  kGptOss,
  kHunyuanDense,
  kHunyuanVl,
  kKimiK2,
  kSeedOss,
  kGrok2,
  kPanguEmbedded,
  kSolarOpen,
  kDots1,  // detected only: llama.cpp's list has no name for it
  kCount,
};

struct NamedFamily {
  std::string_view name;
  Family family;
  bool builtin;  // in llama.cpp's LLM_CHAT_TEMPLATES (FromName accepts it)
};

// llama.cpp's LLM_CHAT_TEMPLATES, indexed by Family.
constexpr NamedFamily kFamilies[] = {
    {"chatml", Family::kChatml, true},
    {"llama2", Family::kLlama2, true},
    {"llama2-sys", Family::kLlama2Sys, true},
    {"llama2-sys-bos", Family::kLlama2SysBos, true},
    {"llama2-sys-strip", Family::kLlama2SysStrip, true},
    {"mistral-v1", Family::kMistralV1, true},
    {"mistral-v3", Family::kMistralV3, true},
    {"mistral-v3-tekken", Family::kMistralV3Tekken, true},
    {"mistral-v7", Family::kMistralV7, true},
    {"mistral-v7-tekken", Family::kMistralV7Tekken, true},
    {"phi3", Family::kPhi3, true},
    {"phi4", Family::kPhi4, true},
    {"falcon3", Family::kFalcon3, true},
    {"zephyr", Family::kZephyr, true},
    {"monarch", Family::kMonarch, true},
    {"gemma", Family::kGemma, true},
    {"orion", Family::kOrion, true},
    {"openchat", Family::kOpenchat, true},
    {"vicuna", Family::kVicuna, true},
    {"vicuna-orca", Family::kVicunaOrca, true},
    {"deepseek", Family::kDeepseek, true},
    {"deepseek2", Family::kDeepseek2, true},
    {"deepseek3", Family::kDeepseek3, true},
    {"deepseek-ocr", Family::kDeepseekOcr, true},
    {"command-r", Family::kCommandR, true},
    {"llama3", Family::kLlama3, true},
    {"chatglm3", Family::kChatglm3, true},
    {"chatglm4", Family::kChatglm4, true},
    {"glmedge", Family::kGlmedge, true},
    {"minicpm", Family::kMinicpm, true},
    {"exaone3", Family::kExaone3, true},
    {"exaone4", Family::kExaone4, true},
    {"exaone-moe", Family::kExaoneMoe, true},
    {"rwkv-world", Family::kRwkvWorld, true},
    {"granite", Family::kGranite3, true},
    {"granite-4.0", Family::kGranite40, true},
    {"granite-4.1", Family::kGranite41, true},
    {"gigachat", Family::kGigachat, true},
    {"megrez", Family::kMegrez, true},
    {"yandex", Family::kYandex, true},
    {"bailing", Family::kBailing, true},
    {"bailing-think", Family::kBailingThink, true},
    {"bailing2", Family::kBailing2, true},
    {"llama4", Family::kLlama4, true},
    {"smolvlm", Family::kSmolvlm, true},
    {"hunyuan-moe", Family::kHunyuanMoe, true},
    {"gpt-oss", Family::kGptOss, true},
    {"hunyuan-dense", Family::kHunyuanDense, true},
    {"hunyuan-vl", Family::kHunyuanVl, true},
    {"kimi-k2", Family::kKimiK2, true},
    {"seed_oss", Family::kSeedOss, true},
    {"grok-2", Family::kGrok2, true},
    {"pangu-embedded", Family::kPanguEmbedded, true},
    {"solar-open", Family::kSolarOpen, true},
    {"dots1", Family::kDots1, false},
};
static_assert(std::size(kFamilies) == static_cast<size_t>(Family::kCount), "one entry per family");

const NamedFamily* FindBuiltin(std::string_view name) {
  for (const NamedFamily& f : kFamilies)
    if (f.builtin && f.name == name) return &f;
  return nullptr;
}

// llama.cpp llm_chat_detect_template's rules after the name lookup, in its order.
Family DetectFromText(std::string_view t) {
  auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return Family::kPhi4;
    // SmolVLM starts its prompt with <|im_start|> but is not chatml.
    return has("<end_of_utterance>") ? Family::kSmolvlm : Family::kChatml;
  }
  if (t.substr(0, 7) == "mistral" || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return Family::kMistralV7;
    // Mistral's official v1 template, and v3 / v3-tekken (mistralai cookbook, chat_templates.md).
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return Family::kMistralV1;
      if (has("\"[INST]\"")) return Family::kMistralV3Tekken;
      return Family::kMistralV3;
    }
    if (has("content.strip()")) return Family::kLlama2SysStrip;
    if (has("bos_token + '[INST]")) return Family::kLlama2SysBos;
    if (has("<<SYS>>")) return Family::kLlama2Sys;
    return Family::kLlama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return Family::kPhi3;
  if (has("[gMASK]<sop>")) return Family::kChatglm4;
  if (has("<|assistant|>") && has("<|user|>")) {
    if (has("<|tool_declare|>")) return Family::kExaoneMoe;
    return has("</s>") ? Family::kFalcon3 : Family::kGlmedge;
  }
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return Family::kGlmedge;
  if (has("<|user|>") && has("<|endoftext|>")) return Family::kZephyr;
  if (has("bos_token + message['role']")) return Family::kMonarch;
  if (has("<start_of_turn>")) return Family::kGemma;
  if (has("'\\n\\nAssistant: ' + eos_token")) return Family::kOrion;
  if (has("GPT4 Correct ")) return Family::kOpenchat;
  if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? Family::kVicunaOrca : Family::kVicuna;
  if (has("### Instruction:") && has("<|EOT|>")) return Family::kDeepseek;
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return Family::kCommandR;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Family::kLlama3;
  if (has("[gMASK]sop")) return Family::kChatglm3;
  if (has("<用户>")) return Family::kMinicpm;
  if (has("'Assistant: ' + message['content'] + eos_token")) return Family::kDeepseek2;
  if (has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>")) return Family::kDeepseek3;
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"))
    return has("[|tool|]") ? Family::kExaone4 : Family::kExaone3;
  if (has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
    return Family::kRwkvWorld;
  if (has("<|start_of_role|>")) {
    if (has("<tool_call>") || has("<tools>"))
      return has("g4_default_system_message") ? Family::kGranite40 : Family::kGranite41;
    return Family::kGranite3;
  }
  if (has("message['role'] + additional_special_tokens[0] + message['content'] + "
          "additional_special_tokens[1]"))
    return Family::kGigachat;
  if (has("<|role_start|>")) return Family::kMegrez;
  if (has(" Ассистент:")) return Family::kYandex;
  if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) return Family::kBailing;
  if (has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>")) return Family::kBailingThink;
  if (has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>"))
    return Family::kBailing2;
  if (has("<|header_start|>") && has("<|header_end|>")) return Family::kLlama4;
  if (has("<|endofuserprompt|>")) return Family::kDots1;
  if (has("<|extra_0|>") && has("<|extra_4|>")) return Family::kHunyuanMoe;
  if (has("<|start|>") && has("<|channel|>")) return Family::kGptOss;
  if (has("<｜hy_Assistant｜>") && has("<｜hy_begin▁of▁sentence｜>")) return Family::kHunyuanVl;
  if (has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>")) return Family::kHunyuanDense;
  if (has("<|im_assistant|>assistant<|im_middle|>")) return Family::kKimiK2;
  if (has("<seed:bos>")) return Family::kSeedOss;
  if (has("'Assistant: '  + message['content'] + '<|separator|>")) return Family::kGrok2;
  if (has("[unused9]系统：[unused10]")) return Family::kPanguEmbedded;
  if (has("<|begin|>") && has("<|end|>") && has("<|content|>")) return Family::kSolarOpen;
  return Family::kCount;
}

// C-locale isspace, llama.cpp's trim.
bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string AsciiUpper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// The first bytes of a template text for a one-line message: control bytes escaped.
std::string Excerpt(std::string_view text) {
  constexpr size_t kMax = 60;
  std::string out;
  for (char c : text.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  out = "'" + out + (text.size() > kMax ? "'..." : "'");
  return out + " (" + std::to_string(text.size()) + " bytes)";
}

void FormatMistral(Family f, const std::vector<ChatMessage>& msgs, std::string& out) {
  if (f == Family::kMistralV7 || f == Family::kMistralV7Tekken) {
    // mistralai Mistral-Large-Instruct-2411 (v7) and Mistral-Small-3.1 (v7-tekken).
    const char* sp = f == Family::kMistralV7 ? " " : "";
    for (const ChatMessage& m : msgs) {
      if (m.role == "system") {
        out += "[SYSTEM_PROMPT]" + (sp + m.content) + "[/SYSTEM_PROMPT]";
      } else if (m.role == "user") {
        out += "[INST]" + (sp + m.content) + "[/INST]";
      } else {
        out += sp + m.content + "</s>";
      }
    }
    return;
  }
  const std::string lead = f == Family::kMistralV1 ? " " : "";
  const std::string trail = f == Family::kMistralV3Tekken ? "" : " ";
  bool in_turn = false;
  for (const ChatMessage& m : msgs) {
    if (!in_turn) {
      out += lead + "[INST]" + trail;
      in_turn = true;
    }
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + lead + "[/INST]";
    } else {
      out += trail;
      out += f == Family::kMistralV3 ? Trim(m.content) : std::string_view(m.content);
      out += "</s>";
      in_turn = false;
    }
  }
}

// Llama 2 and its variants (huggingface.co/blog/llama2#how-to-prompt-llama-2).
void FormatLlama2(Family f, const std::vector<ChatMessage>& msgs, std::string& out) {
  const bool system = f != Family::kLlama2;
  const bool bos_in_history = f == Family::kLlama2SysBos;
  const bool strip = f == Family::kLlama2SysStrip;
  bool in_turn = true;  // the first [INST] has no BOS
  out += "[INST] ";
  for (const ChatMessage& m : msgs) {
    const std::string_view content = strip ? Trim(m.content) : std::string_view(m.content);
    if (!in_turn) {
      in_turn = true;
      out += bos_in_history ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      // Without <<SYS>> the system message still goes into the first turn.
      if (system) {
        out += "<<SYS>>\n";
        out += content;
        out += "\n<</SYS>>\n\n";
      } else {
        out += content;
        out += "\n";
      }
    } else if (m.role == "user") {
      out += content;
      out += " [/INST]";
    } else {
      out += content;
      out += "</s>";
      in_turn = false;
    }
  }
}

// Families whose every message is prefix + role + middle + content + suffix.
struct RoleFormat {
  Family family;
  const char* prefix;
  const char* middle;
  const char* suffix;
  bool trim;
  const char* assistant_prompt;  // nullptr: the family has none
};

constexpr RoleFormat kRoleFormats[] = {
    {Family::kChatml, "<|im_start|>", "\n", "<|im_end|>\n", false, "<|im_start|>assistant\n"},
    {Family::kPhi3, "<|", "|>\n", "<|end|>\n", false, "<|assistant|>\n"},
    {Family::kPhi4, "<|im_start|>", "<|im_sep|>", "<|im_end|>", false, "<|im_start|>assistant<|im_sep|>"},
    {Family::kFalcon3, "<|", "|>\n", "\n", false, "<|assistant|>\n"},
    {Family::kZephyr, "<|", "|>\n", "<|endoftext|>\n", false, "<|assistant|>\n"},
    {Family::kLlama3, "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", true,
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {Family::kLlama4, "<|header_start|>", "<|header_end|>\n\n", "<|eot|>", true,
     "<|header_start|>assistant<|header_end|>\n\n"},
    {Family::kGlmedge, "<|", "|>\n", "", false, "<|assistant|>"},
    {Family::kMegrez, "<|role_start|>", "<|role_end|>", "<|turn_end|>", false,
     "<|role_start|>assistant<|role_end|>"},
    {Family::kSolarOpen, "<|begin|>", "<|content|>", "<|end|>", false, "<|begin|>assistant"},
};

const RoleFormat* FindRoleFormat(Family f) {
  for (const RoleFormat& r : kRoleFormats)
    if (r.family == f) return &r;
  return nullptr;
}

// What a family whose roles map to fixed prefixes and suffixes does with a role other than system,
// user and assistant.
enum class OtherRole { kSkip, kAsUser, kAsAssistant };

// Families that map the three usual roles to fixed prefixes and suffixes (a null prefix: the role is
// left out).
struct TurnFormat {
  const char* system_prefix;
  const char* system_suffix;
  const char* user_prefix;
  const char* user_suffix;
  const char* assistant_prefix;
  const char* assistant_suffix;
  OtherRole other = OtherRole::kSkip;
};

void FormatTurns(const TurnFormat& t, const std::vector<ChatMessage>& msgs, bool trim, std::string& out) {
  for (const ChatMessage& m : msgs) {
    const char* pre;
    const char* suf;
    if (m.role == "system") {
      pre = t.system_prefix, suf = t.system_suffix;
    } else if (m.role == "user") {
      pre = t.user_prefix, suf = t.user_suffix;
    } else if (m.role == "assistant" || t.other == OtherRole::kAsAssistant) {
      pre = t.assistant_prefix, suf = t.assistant_suffix;
    } else if (t.other == OtherRole::kAsUser) {
      pre = t.user_prefix, suf = t.user_suffix;
    } else {
      continue;
    }
    if (pre == nullptr) continue;  // a role the family leaves out
    out += pre;
    out += trim ? Trim(m.content) : std::string_view(m.content);
    out += suf;
  }
}

void FormatOther(Family f, const std::vector<ChatMessage>& msgs, bool add_ass, std::string& out) {
  switch (f) {
    case Family::kMonarch:  // mlabonne/AlphaMonarch-7B: BOS inside the history
      for (size_t i = 0; i < msgs.size(); ++i)
        out += (i == 0 ? "" : "<s>") + msgs[i].role + "\n" + msgs[i].content + "</s>\n";
      if (add_ass) out += "<s>assistant\n";
      return;
    case Family::kGemma: {  // google/gemma-7b-it: no system role, merged into the next user turn
      std::string system;
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          system += Trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") {
          out += system + "\n\n";
          system.clear();
        }
        out += Trim(m.content);
        out += "<end_of_turn>\n";
      }
      if (add_ass) out += "<start_of_turn>model\n";
      return;
    }
    case Family::kOrion: {  // OrionStarAI/Orion-14B-Chat
      std::string system;
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          system += m.content;
        } else if (m.role == "user") {
          out += "Human: ";
          if (!system.empty()) {
            out += system + "\n\n";
            system.clear();
          }
          out += m.content + "\n\nAssistant: </s>";
        } else {
          out += m.content + "</s>";
        }
      }
      return;
    }
    case Family::kOpenchat:  // openchat/openchat-3.5-0106
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          out += m.content + "<|end_of_turn|>";
        } else {
          std::string role = m.role;
          if (!role.empty() && role[0] >= 'a' && role[0] <= 'z')
            role[0] = static_cast<char>(role[0] - 'a' + 'A');
          out += "GPT4 Correct " + role + ": " + m.content + "<|end_of_turn|>";
        }
      }
      if (add_ass) out += "GPT4 Correct Assistant:";
      return;
    case Family::kVicuna:
    case Family::kVicunaOrca:  // eachadea/vicuna-13b-1.1 and its Orca variant
      FormatTurns({f == Family::kVicunaOrca ? "SYSTEM: " : "", f == Family::kVicunaOrca ? "\n" : "\n\n",
                   "USER: ", "\n", "ASSISTANT: ", "</s>\n"},
                  msgs, false, out);
      if (add_ass) out += "ASSISTANT:";
      return;
    case Family::kDeepseek:  // deepseek-ai/deepseek-coder-33b-instruct
      FormatTurns({"", "", "### Instruction:\n", "\n", "### Response:\n", "\n<|EOT|>\n"}, msgs, false, out);
      if (add_ass) out += "### Response:\n";
      return;
    case Family::kCommandR:  // CohereForAI/c4ai-command-r-plus
      FormatTurns({"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
                   "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
                   "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
                  msgs, true, out);
      if (add_ass) out += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
      return;
    case Family::kChatglm3:
    case Family::kChatglm4: {  // THUDM chatglm3-6b, glm-4
      const bool v3 = f == Family::kChatglm3;
      out += v3 ? "[gMASK]sop" : "[gMASK]<sop>";
      for (const ChatMessage& m : msgs) out += "<|" + m.role + (v3 ? "|>\n " : "|>\n") + m.content;
      if (add_ass) out += v3 ? "<|assistant|>" : "<|assistant|>\n";
      return;
    }
    case Family::kMinicpm:  // MiniCPM-3B-OpenHermes-2.5-v2
      for (const ChatMessage& m : msgs) {
        if (m.role == "user") out += "<用户>";
        out += Trim(m.content);
        if (m.role == "user") out += "<AI>";
      }
      return;
    case Family::kDeepseek2:  // DeepSeek-V2
      FormatTurns({"", "\n\n", "User: ", "\n\n", "Assistant: ", "<｜end▁of▁sentence｜>"}, msgs, false, out);
      if (add_ass) out += "Assistant:";
      return;
    case Family::kDeepseek3:  // DeepSeek-V3
      FormatTurns({"", "\n\n", "<｜User｜>", "", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"}, msgs, false,
                  out);
      if (add_ass) out += "<｜Assistant｜>";
      return;
    case Family::kDeepseekOcr:  // no template: the contents
      for (const ChatMessage& m : msgs) out += m.content;
      return;
    case Family::kExaone3:
    case Family::kExaone4:  // LGAI-EXAONE 3.0 (and 4.0, which adds the tool role)
      for (const ChatMessage& m : msgs) {
        const std::string_view c = Trim(m.content);
        if (m.role == "system") {
          out += "[|system|]" + std::string(c) + "[|endofturn|]\n";
        } else if (m.role == "user") {
          out += "[|user|]" + std::string(c) + "\n";
        } else if (m.role == "assistant") {
          out += "[|assistant|]" + std::string(c) + "[|endofturn|]\n";
        } else if (m.role == "tool" && f == Family::kExaone4) {
          out += "[|tool|]" + std::string(c) + "[|endofturn|]\n";
        }
      }
      if (add_ass) out += "[|assistant|]";
      return;
    case Family::kExaoneMoe:
      for (const ChatMessage& m : msgs) {
        if (m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool") {
          out += "<|" + m.role + "|>\n";
          out += Trim(m.content);
          out += "<|endofturn|>\n";
        }
      }
      if (add_ass) out += "<|assistant|>\n";
      return;
    case Family::kRwkvWorld:  // the model's EOT token is "\n\n"
      for (size_t i = 0; i < msgs.size(); ++i) {
        const std::string c(Trim(msgs[i].content));
        if (msgs[i].role == "system") {
          out += "System: " + c + "\n\n";
        } else if (msgs[i].role == "user") {
          out += "User: " + c + "\n\n";
          if (i + 1 == msgs.size()) out += "Assistant:";
        } else if (msgs[i].role == "assistant") {
          out += "Assistant: " + c + "\n\n";
        }
      }
      return;
    case Family::kGranite3:
    case Family::kGranite40:
    case Family::kGranite41:  // IBM Granite 3.x / 4.0 / 4.1
      for (const ChatMessage& m : msgs) {
        if (m.role == "assistant_tool_call") {
          out += f == Family::kGranite3 ? "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>"
                                        : "<|start_of_role|>assistant<|end_of_role|><|tool_call|>";
        } else {
          out += "<|start_of_role|>" + m.role + "<|end_of_role|>";
        }
        out += m.content + "<|end_of_text|>\n";
      }
      if (add_ass) out += "<|start_of_role|>assistant<|end_of_role|>";
      return;
    case Family::kGigachat: {
      const bool has_system = !msgs.empty() && msgs[0].role == "system";
      out += "<s>";
      if (has_system) out += msgs[0].content + "<|message_sep|>";
      for (size_t i = has_system ? 1 : 0; i < msgs.size(); ++i) {
        if (msgs[i].role == "user") {
          out += "user<|role_sep|>" + msgs[i].content +
                 "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>";
        } else if (msgs[i].role == "assistant") {
          out += "assistant<|role_sep|>" + msgs[i].content + "<|message_sep|>";
        }
      }
      if (add_ass) out += "assistant<|role_sep|>";
      return;
    }
    case Family::kYandex:  // "\n\n" is the EOT token
      FormatTurns({nullptr, nullptr, " Пользователь: ", "\n\n", " Ассистент: ", "\n\n"}, msgs, false, out);
      if (add_ass) out += " Ассистент:[SEP]";
      return;
    case Family::kBailing:
    case Family::kBailingThink:
    case Family::kBailing2: {  // inclusionAI Ling / Ring, Ling 2.0
      const bool v2 = f == Family::kBailing2;
      if (v2 && (msgs.empty() || msgs[0].role != "system"))
        out += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
      for (const ChatMessage& m : msgs) {
        out +=
            "<role>" + (m.role == "user" ? std::string("HUMAN") : AsciiUpper(m.role)) + "</role>" + m.content;
        if (v2) out += "<|role_end|>";
      }
      if (add_ass)
        out += f == Family::kBailingThink ? "<role>ASSISTANT</role><think>" : "<role>ASSISTANT</role>";
      return;
    }
    case Family::kSmolvlm:  // <|im_start|> as BOS, then not chatml
      out += "<|im_start|>";
      FormatTurns({"", "\n\n", "User: ", "<end_of_utterance>\n", "Assistant: ", "<end_of_utterance>\n",
                   OtherRole::kAsAssistant},
                  msgs, false, out);
      if (add_ass) out += "Assistant:";
      return;
    case Family::kDots1:  // rednote-hilab dots.llm1.inst
      FormatTurns({"<|system|>", "<|endofsystem|>", "<|userprompt|>", "<|endofuserprompt|>", "<|response|>",
                   "<|endofresponse|>", OtherRole::kAsAssistant},
                  msgs, false, out);
      if (add_ass) out += "<|response|>";
      return;
    case Family::kHunyuanMoe:  // tencent/Hunyuan-A13B-Instruct
      FormatTurns({"<|startoftext|>", "<|extra_4|>", "<|startoftext|>", "<|extra_0|>", "", "<|eos|>",
                   OtherRole::kAsUser},
                  msgs, false, out);
      return;
    case Family::kGptOss:  // OpenAI's harmony format
      for (const ChatMessage& m : msgs)
        out += "<|start|>" + m.role + "<|message|>" + m.content +
               (m.role == "assistant" ? "<|return|>" : "<|end|>");
      if (add_ass) out += "<|start|>assistant";
      return;
    case Family::kHunyuanDense:  // tencent/Hunyuan-4B-Instruct
      for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (i == 0 && m.role == "system") out += m.content + "<｜hy_place▁holder▁no▁3｜>";
        if (m.role == "assistant") {
          out += "<｜hy_Assistant｜>" + m.content + "<｜hy_place▁holder▁no▁2｜>";
        } else if (m.role == "user") {
          out += "<｜hy_User｜>" + m.content + "<｜hy_Assistant｜>";
        }
      }
      return;
    case Family::kHunyuanVl:  // tencent/HunyuanOCR, HunyuanVL
      out += "<｜hy_begin▁of▁sentence｜>";
      for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (i == 0 && m.role == "system") {
          out += m.content + "<｜hy_place▁holder▁no▁3｜>";
        } else if (m.role == "user") {
          out += m.content + "<｜hy_User｜>";
        } else if (m.role == "assistant") {
          out += m.content + "<｜hy_Assistant｜>";
        }
      }
      return;
    case Family::kKimiK2:  // moonshotai/Kimi-K2-Instruct
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          out += "<|im_system|>system<|im_middle|>";
        } else if (m.role == "user") {
          out += "<|im_user|>user<|im_middle|>";
        } else if (m.role == "assistant") {
          out += "<|im_assistant|>assistant<|im_middle|>";
        } else if (m.role == "tool") {
          out += "<|im_system|>tool<|im_middle|>";
        }
        out += m.content + "<|im_end|>";
      }
      if (add_ass) out += "<|im_assistant|>assistant<|im_middle|>";
      return;
    case Family::kSeedOss:  // ByteDance-Seed/Seed-OSS
      for (const ChatMessage& m : msgs) {
        out += "<seed:bos>" + m.role + "\n";
        out += m.role == "assistant" ? Trim(m.content) : std::string_view(m.content);
        out += "<seed:eos>";
      }
      if (add_ass) out += "<seed:bos>assistant\n";
      return;
    case Family::kGrok2:
      for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
          out += "System: " + std::string(Trim(m.content)) + "<|separator|>\n\n";
        } else if (m.role == "user") {
          out += "Human: " + std::string(Trim(m.content)) + "<|separator|>\n\n";
        } else if (m.role == "assistant") {
          out += "Assistant: " + m.content + "<|separator|>\n\n";
        }
      }
      if (add_ass) out += "Assistant:";
      return;
    case Family::kPanguEmbedded: {  // openPangu-Embedded: [unused9]<role>：text[unused10]
      static constexpr std::pair<std::string_view, std::string_view> kRoles[] = {{"system", "系统"},
                                                                                 {"user", "用户"},
                                                                                 {"assistant", "助手"},
                                                                                 {"tool", "工具"},
                                                                                 {"function", "方法"}};
      for (size_t i = 0; i < msgs.size(); ++i) {
        if (i == 0 && msgs[i].role != "system") out += "[unused9]系统：[unused10]";
        for (const auto& [role, label] : kRoles) {
          if (msgs[i].role != role) continue;
          out += "[unused9]";
          out += label;
          out += "：" + msgs[i].content + "[unused10]";
        }
      }
      if (add_ass) out += "[unused9]助手：";
      return;
    }
    default:
      return;
  }
}

}  // namespace

Result<ChatTemplate> ChatTemplate::FromName(std::string_view name) {
  if (const NamedFamily* f = FindBuiltin(name)) return ChatTemplate(static_cast<int>(f->family));
  std::string names;
  for (std::string_view n : BuiltinNames()) names += (names.empty() ? "" : ", ") + std::string(n);
  return NotFound("unknown chat template name '" + std::string(name) +
                  "' (expected one of llama.cpp's built-in names: " + names + ")");
}

Result<ChatTemplate> ChatTemplate::FromText(std::string_view text) {
  if (const NamedFamily* f = FindBuiltin(text)) return ChatTemplate(static_cast<int>(f->family));
  const Family f = DetectFromText(text);
  if (f == Family::kCount)
    return NotFound("chat template not recognised: no built-in family matches " + Excerpt(text));
  return ChatTemplate(static_cast<int>(f));
}

Result<ChatTemplate> ChatTemplate::FromModel(const GgufFile& gguf) {
  constexpr std::string_view kKey = "tokenizer.chat_template";
  if (gguf.Find(kKey) == nullptr)
    return NotFound(gguf.path() + ": missing key '" + std::string(kKey) +
                    "' (the model carries no chat template: choose one with --chat-template NAME)");
  STOWAGE_ASSIGN_OR_RETURN(const std::string text, gguf.GetString(kKey));
  Result<ChatTemplate> t = FromText(text);
  if (!t.ok())
    return gguf.KeyError(kKey, "a template of a family in llama.cpp's built-in list", Excerpt(text));
  return t;
}

std::vector<std::string_view> ChatTemplate::BuiltinNames() {
  std::vector<std::string_view> names;
  for (const NamedFamily& f : kFamilies)
    if (f.builtin) names.push_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string_view ChatTemplate::name() const { return kFamilies[family_].name; }

Result<std::string> ChatTemplate::Apply(const std::vector<ChatMessage>& msgs,
                                        bool add_assistant_prompt) const {
  const Family f = kFamilies[family_].family;
  std::string out;
  if (const RoleFormat* r = FindRoleFormat(f)) {
    for (const ChatMessage& m : msgs) {
      out += r->prefix + m.role + r->middle;
      out += r->trim ? Trim(m.content) : std::string_view(m.content);
      out += r->suffix;
    }
    if (add_assistant_prompt) out += r->assistant_prompt;
    return out;
  }
  switch (f) {
    case Family::kMistralV1:
    case Family::kMistralV3:
    case Family::kMistralV3Tekken:
    case Family::kMistralV7:
    case Family::kMistralV7Tekken:
      FormatMistral(f, msgs, out);
      break;
    case Family::kLlama2:
    case Family::kLlama2Sys:
    case Family::kLlama2SysBos:
    case Family::kLlama2SysStrip:
      FormatLlama2(f, msgs, out);
      break;
    default:
      FormatOther(f, msgs, add_assistant_prompt, out);
      break;
  }
  return out;
}

Result<std::string> ChatTemplate::ApplyIncrement(const std::vector<ChatMessage>& past,
                                                 const ChatMessage& new_msg,
                                                 bool add_assistant_prompt) const {
  std::string past_text;
  if (!past.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(past_text, Apply(past, false));
  }
  std::vector<ChatMessage> all = past;
  all.push_back(new_msg);
  STOWAGE_ASSIGN_OR_RETURN(const std::string all_text, Apply(all, add_assistant_prompt));
  std::string out = add_assistant_prompt && !past_text.empty() && past_text.back() == '\n' ? "\n" : "";
  // llama.cpp takes the bytes past the old text's length, also where a family reformats the past
  // (gemma's system prompt merged into the first user turn).
  if (all_text.size() > past_text.size()) out += all_text.substr(past_text.size());
  return out;
}

}  // namespace stowage
