// chat_template_ref: llama.cpp's built-in chat templates applied to fixed conversations, as JSON
// goldens for Stowage's ChatTemplate (test/data/chat-template, make_chat_goldens.sh).
//
//   chat_template_ref CASES.json > OUT.json
//
// CASES.json: {"conversations": [{"name": N, "messages": [{"role": R, "content": C}, ...]}, ...],
//              "templates": [{"source": S, "text": T} | {"source": S, "gguf": PATH}, ...]}
// or {"conversations": [...], "builtin": true} for every name of llama_chat_builtin_templates.
// For each template (a built-in name, a text, or a GGUF's tokenizer.chat_template read with ggml's
// gguf reader) it writes the family llm_chat_detect_template finds (named by its entry in the
// built-in list; "dots1" for the one family without a name, "unknown" for none) and, for every
// conversation with and without the assistant prompt, llama_chat_apply_template's text (null when
// it returns -1). Built against the fetched llama.cpp by make_chat_goldens.sh, not by CMake:
// llm_chat_detect_template and llm_chat_template_from_str are libllama's exported internals
// (src/llama-chat.h, fetched beside llama-ext.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf.h"
#include "llama-chat.h"
#include "llama.h"

using nlohmann::json;

namespace {

std::map<int, std::string> FamilyNames() {
  std::map<int, std::string> names;
  const int32_t n = llama_chat_builtin_templates(nullptr, 0);
  std::vector<const char*> list(n);
  llama_chat_builtin_templates(list.data(), list.size());
  for (const char* name : list) names[llm_chat_template_from_str(name)] = name;
  names[LLM_CHAT_TEMPLATE_DOTS1] = "dots1";
  names[LLM_CHAT_TEMPLATE_UNKNOWN] = "unknown";
  return names;
}

std::string GgufTemplate(const std::string& path) {
  gguf_init_params params = {/*no_alloc=*/true, /*ctx=*/nullptr};
  gguf_context* ctx = gguf_init_from_file(path.c_str(), params);
  if (ctx == nullptr) {
    std::fprintf(stderr, "chat_template_ref: %s: not a GGUF file\n", path.c_str());
    std::exit(1);
  }
  const int64_t key = gguf_find_key(ctx, "tokenizer.chat_template");
  if (key < 0) {
    std::fprintf(stderr, "chat_template_ref: %s: no tokenizer.chat_template\n", path.c_str());
    std::exit(1);
  }
  std::string text = gguf_get_val_str(ctx, key);
  gguf_free(ctx);
  return text;
}

json Apply(const std::string& tmpl, const json& conversations) {
  json outputs = json::array();
  for (const json& conv : conversations) {
    std::vector<std::string> roles, contents;
    for (const json& m : conv["messages"]) {
      roles.push_back(m["role"]);
      contents.push_back(m["content"]);
    }
    std::vector<llama_chat_message> msgs;
    for (size_t i = 0; i < roles.size(); ++i) msgs.push_back({roles[i].c_str(), contents[i].c_str()});
    for (bool add_ass : {false, true}) {
      const int32_t n =
          llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_ass, nullptr, 0);
      json text = nullptr;
      if (n >= 0) {
        std::vector<char> buf(n + 1);
        llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_ass, buf.data(), buf.size());
        text = std::string(buf.data(), n);
      }
      outputs.push_back({{"conversation", conv["name"]}, {"add_assistant_prompt", add_ass}, {"text", text}});
    }
  }
  return outputs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: chat_template_ref CASES.json > OUT.json\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  const json cases = json::parse(in);
  const std::map<int, std::string> names = FamilyNames();
  json out = {{"conversations", cases["conversations"]}, {"cases", json::array()}};
  std::vector<json> templates;
  if (cases.value("builtin", false)) {
    for (const auto& [id, name] : names)
      if (id != LLM_CHAT_TEMPLATE_DOTS1 && id != LLM_CHAT_TEMPLATE_UNKNOWN)
        templates.push_back({{"source", "builtin"}, {"text", name}});
  } else {
    templates = cases["templates"].get<std::vector<json>>();
  }
  for (json t : templates) {
    if (t.contains("gguf")) {
      t["text"] = GgufTemplate(t["gguf"]);
      const std::string path = t["gguf"];
      t["gguf"] = path.substr(path.find_last_of('/') + 1);
    }
    const std::string text = t["text"];
    t["family"] = names.at(llm_chat_detect_template(text));
    t["outputs"] = Apply(text, cases["conversations"]);
    out["cases"].push_back(t);
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}
