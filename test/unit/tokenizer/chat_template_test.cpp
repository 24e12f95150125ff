// ChatTemplate against llama.cpp 2026-09-28's llama_chat_apply_template and llm_chat_detect_template
// (test/data/chat-template/*.json, made by scripts/llamacpp-ref/make_chat_goldens.sh): every
// built-in name, the template texts of popular models and marker probes for every detection rule,
// over fixed conversations with and without the assistant prompt, byte for byte.
#include "stowage/runtime/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "stowage/runtime/gguf.h"
#include "stowage/runtime/gguf_writer.h"
#include "test_paths.h"

namespace stowage {
namespace {

using nlohmann::json;

json LoadGolden(const std::string& name) {
  std::ifstream in(std::string(STOWAGE_TEST_DATA_DIR) + "/chat-template/" + name);
  EXPECT_TRUE(in.good()) << "missing golden " << name;
  return in.good() ? json::parse(in) : json();
}

std::map<std::string, std::vector<ChatMessage>> Conversations(const json& golden) {
  std::map<std::string, std::vector<ChatMessage>> out;
  for (const json& c : golden["conversations"]) {
    std::vector<ChatMessage>& msgs = out[c["name"]];
    for (const json& m : c["messages"]) msgs.push_back({m["role"], m["content"]});
  }
  return out;
}

// Every output of `golden_case` equals t.Apply's; returns the number of outputs compared.
int ExpectOutputsEqual(const ChatTemplate& t, const json& golden_case,
                       const std::map<std::string, std::vector<ChatMessage>>& convs,
                       const std::string& what) {
  int n = 0;
  for (const json& o : golden_case["outputs"]) {
    const bool add_ass = o["add_assistant_prompt"];
    Result<std::string> got = t.Apply(convs.at(o["conversation"]), add_ass);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, o["text"].get<std::string>())
        << what << " (" << t.name() << "), conversation " << o["conversation"] << ", add_assistant_prompt "
        << add_ass;
    ++n;
  }
  return n;
}

TEST(ChatTemplate, BuiltinNamesAreLlamaCpps) {
  const json golden = LoadGolden("builtin.json");
  std::vector<std::string> want;
  for (const json& c : golden["cases"]) want.push_back(c["text"]);
  std::sort(want.begin(), want.end());
  const std::vector<std::string_view> names = ChatTemplate::BuiltinNames();
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.end()), want);
}

TEST(ChatTemplate, EveryBuiltinNameFormatsAsLlamaCpp) {
  const json golden = LoadGolden("builtin.json");
  const auto convs = Conversations(golden);
  int compared = 0;
  for (const json& c : golden["cases"]) {
    const std::string name = c["text"];
    Result<ChatTemplate> t = ChatTemplate::FromName(name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->name(), c["family"].get<std::string>());
    compared += ExpectOutputsEqual(*t, c, convs, "built-in " + name);
  }
  EXPECT_EQ(compared, 54 * 6 * 2);
}

// The comparison above can fail: the conversations tell every family from every other one
// (llama.cpp's granite-4.0 and granite-4.1 format alike, the one exception), and the assistant
// prompt changes the text of every family that has one.
TEST(ChatTemplate, ConversationsTellFamiliesApart) {
  const json golden = LoadGolden("builtin.json");
  std::map<std::string, std::string> all_outputs;  // family -> its outputs, concatenated
  for (const json& c : golden["cases"]) all_outputs[c["family"]] = c["outputs"].dump();
  std::set<std::string> twins;
  for (auto a = all_outputs.begin(); a != all_outputs.end(); ++a)
    for (auto b = std::next(a); b != all_outputs.end(); ++b)
      if (a->second == b->second) twins.insert(a->first + "=" + b->first);
  EXPECT_EQ(twins, std::set<std::string>{"granite-4.0=granite-4.1"});

  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  Result<ChatTemplate> chatml = ChatTemplate::FromName("chatml");
  ASSERT_TRUE(chatml.ok());
  EXPECT_NE(*chatml->Apply(msgs, true), *chatml->Apply(msgs, false));
}

TEST(ChatTemplate, TemplateTextsDetectAndFormatAsLlamaCpp) {
  const json golden = LoadGolden("templates.json");
  const auto convs = Conversations(golden);
  int detected = 0, unknown = 0;
  for (const json& c : golden["cases"]) {
    const std::string text = c["text"];
    const std::string family = c["family"];
    const std::string what = c["source"].get<std::string>() + " " + c.value("gguf", "");
    Result<ChatTemplate> t = ChatTemplate::FromText(text);
    if (family == "unknown") {
      ASSERT_FALSE(t.ok()) << what << ": '" << text << "' detected as " << t->name();
      EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
      EXPECT_NE(t.status().message().find("chat template not recognised"), std::string::npos);
      EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << "one line";
      for (const json& o : c["outputs"]) EXPECT_TRUE(o["text"].is_null());
      ++unknown;
      continue;
    }
    ASSERT_TRUE(t.ok()) << what << ": " << t.status().ToString();
    EXPECT_EQ(t->name(), family) << what << ": '" << text.substr(0, 200) << "'";
    ExpectOutputsEqual(*t, c, convs, what);
    ++detected;
  }
  EXPECT_GE(detected, 90);
  EXPECT_EQ(unknown, 4);
}

// Every family llm_chat_detect_template can return is returned for some text of the goldens.
TEST(ChatTemplate, GoldensCoverEveryDetectedFamily) {
  const json golden = LoadGolden("templates.json");
  std::set<std::string> seen;
  for (const json& c : golden["cases"]) seen.insert(c["family"]);
  for (std::string_view name : ChatTemplate::BuiltinNames())
    if (name != "deepseek-ocr" && name != "mistral-v7-tekken")  // no detection rule: by name only
      EXPECT_TRUE(seen.count(std::string(name))) << name;
  EXPECT_TRUE(seen.count("dots1"));
}

class ChatTemplateVocabTest : public ::testing::TestWithParam<const char*> {};

// The vocabulary GGUFs of ../shared/models/vocab that carry a tokenizer.chat_template.
TEST_P(ChatTemplateVocabTest, FromModelAsLlamaCpp) {
  const std::string file = std::string("ggml-vocab-") + GetParam() + ".gguf";
  const std::string path = test::ModelPath("vocab/" + file);
  STOWAGE_REQUIRE_FILE(path);
  const json golden = LoadGolden("templates.json");
  const auto convs = Conversations(golden);
  auto gguf = GgufFile::Open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  Result<ChatTemplate> t = ChatTemplate::FromModel(**gguf);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  int cases = 0;
  for (const json& c : golden["cases"]) {
    if (c.value("gguf", "") != file) continue;
    EXPECT_EQ((*gguf)->GetString("tokenizer.chat_template").value(), c["text"].get<std::string>());
    EXPECT_EQ(t->name(), c["family"].get<std::string>());
    ExpectOutputsEqual(*t, c, convs, file);
    ++cases;
  }
  EXPECT_EQ(cases, 1);
}

INSTANTIATE_TEST_SUITE_P(Vocab, ChatTemplateVocabTest, ::testing::Values("phi-3", "qwen2"));

std::unique_ptr<GgufFile> ModelWith(std::vector<uint8_t>& bytes, const char* key, GgufMetaValue value) {
  GgufWriter w;
  EXPECT_TRUE(w.AddKV("general.architecture", GgufMetaValue::Str("llama")).ok());
  if (key != nullptr) EXPECT_TRUE(w.AddKV(key, std::move(value)).ok());
  auto b = w.WriteToBuffer();
  EXPECT_TRUE(b.ok());
  bytes = std::move(*b);
  auto f = GgufFile::Parse(bytes.data(), bytes.size(), "m.gguf");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(*f);
}

TEST(ChatTemplate, FromModelErrors) {
  std::vector<uint8_t> bytes;
  auto absent = ChatTemplate::FromModel(*ModelWith(bytes, nullptr, GgufMetaValue::U32(0)));
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(absent.status().message(),
            "m.gguf: missing key 'tokenizer.chat_template' (the model carries no chat template: choose one "
            "with --chat-template NAME)");

  auto wrong_type =
      ChatTemplate::FromModel(*ModelWith(bytes, "tokenizer.chat_template", GgufMetaValue::U32(7)));
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_type.status().message().find("key 'tokenizer.chat_template': expected str, found u32"),
            std::string::npos)
      << wrong_type.status().message();

  auto unknown = ChatTemplate::FromModel(*ModelWith(
      bytes, "tokenizer.chat_template", GgufMetaValue::Str("{% for m in messages %}\n{{ m.content }}")));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("key 'tokenizer.chat_template': expected a template of a family "
                                            "in llama.cpp's built-in list, found "
                                            "'{% for m in messages %}\\n{{ m.content }}' (39 bytes)"),
            std::string::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("m.gguf: offset "), std::string::npos);

  auto named =
      ChatTemplate::FromModel(*ModelWith(bytes, "tokenizer.chat_template", GgufMetaValue::Str("gemma")));
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->name(), "gemma");
}

TEST(ChatTemplate, FromNameRefusesUnknownNames) {
  for (const char* bad : {"ChatML", "chatml ", "", "llama-3", "dots1", "<|im_start|>"}) {
    Result<ChatTemplate> t = ChatTemplate::FromName(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(t.status().message().rfind(
                  std::string("unknown chat template name '") + bad + "' (expected one of", 0),
              0u)
        << t.status().message();
  }
}

TEST(ChatTemplate, LongUnknownTextIsCutInTheMessage) {
  const std::string text(1000, 'x');
  Result<ChatTemplate> t = ChatTemplate::FromText(text);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "chat template not recognised: no built-in family matches '" +
                                      std::string(60, 'x') + "'... (1000 bytes)");
}

// ApplyIncrement is what a chat decodes per turn: past text + increment = the whole conversation
// (llama.cpp common_chat_format_single), with its "\n" for a past that ends with one.
TEST(ChatTemplate, ApplyIncrementIsTheNewTurnsText) {
  Result<ChatTemplate> chatml = ChatTemplate::FromName("chatml");
  ASSERT_TRUE(chatml.ok());
  std::vector<ChatMessage> past;
  Result<std::string> first = chatml->ApplyIncrement(past, {"system", "S"}, false);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "<|im_start|>system\nS<|im_end|>\n");
  past.push_back({"system", "S"});
  Result<std::string> user = chatml->ApplyIncrement(past, {"user", "Hi"}, true);
  ASSERT_TRUE(user.ok());
  EXPECT_EQ(*user, "\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  Result<ChatTemplate> llama3 = ChatTemplate::FromName("llama3");
  ASSERT_TRUE(llama3.ok());
  past = {{"user", "Hi"}, {"assistant", "Hello"}};
  Result<std::string> next = llama3->ApplyIncrement(past, {"user", "Bye"}, true);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(
      *next,
      "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_"
      "id|>\n\n");
  EXPECT_EQ(*llama3->Apply(past, false) + *next, *llama3->Apply({past[0], past[1], {"user", "Bye"}}, true));
}

}  // namespace
}  // namespace stowage
