// stowage-server's decode loop (tools/stowage-server/engine.h) on a real session, and its request
// parsing and text helpers (oai.h): what the HTTP tests (test/server) cannot reach.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine.h"
#include "oai.h"
#include "plan_cpu.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"
#include "test_paths.h"

namespace stowage::server {
namespace {

TEST(ServerText, CompleteUtf8PrefixHoldsBackAPartialCharacter) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("a\xC3"), 1u);                 // é's lead byte alone
  EXPECT_EQ(CompleteUtf8Prefix("a\xC3\xA9"), 3u);             // é whole
  EXPECT_EQ(CompleteUtf8Prefix("\xE2\x82"), 0u);              // 2 of €'s 3 bytes
  EXPECT_EQ(CompleteUtf8Prefix("x\xF0\x9F\x98"), 1u);         // 3 of 😀's 4 bytes
  EXPECT_EQ(CompleteUtf8Prefix("x\xF0\x9F\x98\x80"), 5u);     // 😀 whole
  EXPECT_EQ(CompleteUtf8Prefix("\x80\x80\x80\x80\x80"), 5u);  // no lead byte to wait for
}

TEST(ServerText, FindStopAndThePartialSuffix) {
  size_t partial = 0;
  EXPECT_EQ(FindStop("hello wor", 0, {"world"}, &partial), std::string::npos);
  EXPECT_EQ(partial, 6u);  // "wor" may begin "world": held back
  EXPECT_EQ(FindStop("hello world!", 0, {"world"}, &partial), 6u);
  EXPECT_EQ(FindStop("a.b!c", 0, {"!", "."}, &partial), 1u);  // the earliest of several
  EXPECT_EQ(partial, 5u);
  EXPECT_EQ(FindStop("stop here stop", 5, {"stop"}, &partial), 10u);  // from an offset
  EXPECT_EQ(FindStop("abc", 0, {""}, &partial), std::string::npos);   // an empty stop is ignored
  EXPECT_EQ(partial, 3u);
  EXPECT_EQ(FindStop("ab\n\n", 0, {"\n\n\n"}, &partial), std::string::npos);
  EXPECT_EQ(partial, 2u);  // the longest suffix that begins a stop string
}

TEST(ServerRequest, ParseErrorsNameTheField) {
  ServerDefaults d{"m.gguf", 16};
  EXPECT_EQ(ParseBody("{\"a\":").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBody("[1]").status().message(), "the body must be a JSON object, found array");
  const auto parse = [&](const char* text) {
    ParsedCompletion pc;
    return ParseCommon(json::parse(text), d, &pc);
  };
  EXPECT_EQ(parse(R"({"temperature": "hot"})").message(),
            "'temperature': expected a number, found string \"hot\"");
  EXPECT_EQ(parse(R"({"top_p": 2})").message(), "'top_p': 2 is outside [0, 1]");
  EXPECT_EQ(parse(R"({"top_k": 1.5})").message(), "'top_k': expected an integer, found number 1.5");
  EXPECT_EQ(parse(R"({"stop": [1]})").message(), "'stop[0]': expected a string, found number 1");
  EXPECT_EQ(parse(R"({"model": "x"})").code(), StatusCode::kNotFound);
  EXPECT_EQ(parse(R"({"n": 3})").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(parse(R"({"stream": 1})").message(), "'stream': expected true or false, found number 1");
  ParsedCompletion pc;
  ASSERT_TRUE(ParseCommon(json::parse(R"({"model": "m.gguf", "max_tokens": 5, "temperature": 0, "seed": 7,
                                          "stop": "x", "stream": true, "stream_options": {"include_usage": true}})"),
                          d, &pc)
                  .ok());
  EXPECT_EQ(pc.request.n_predict, 5);
  EXPECT_EQ(pc.request.sampling.temperature, 0.0f);
  EXPECT_EQ(pc.request.sampling.seed, 7u);
  EXPECT_EQ(pc.request.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(pc.stream && pc.include_usage);
  ParsedCompletion dflt;
  ASSERT_TRUE(ParseCommon(json::object(), d, &dflt).ok());
  EXPECT_EQ(dflt.request.n_predict, 16);  // -n
  auto msgs = ParseChatMessages(json::parse(R"({"messages": [{"role": "user", "content": [{"type": "text",
                                               "text": "a"}, {"type": "text", "text": "b"}]}]})"));
  ASSERT_TRUE(msgs.ok()) << msgs.status().ToString();
  EXPECT_EQ((*msgs)[0].content, "ab");
  EXPECT_EQ(ParseChatMessages(json::parse(R"({"messages": [{"role": 1}]})")).status().message(),
            "'messages[0].role': expected a string, found number 1");
  EXPECT_EQ(ParseChatMessages(json::parse(R"({"messages": []})")).status().message(),
            "'messages': expected a non-empty array, found an empty array");
  EXPECT_EQ(
      ParseChatMessages(json::parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "user"}]})"))
          .status()
          .message(),
      "'messages[1].content' is required (a string, an array of text parts, or null)");
  auto null_content = ParseChatMessages(json::parse(R"({"messages": [{"role": "user", "content": null}]})"));
  ASSERT_TRUE(null_content.ok()) << null_content.status().ToString();
  EXPECT_EQ((*null_content)[0].content, "");
}

TEST(ServerResponse, ErrorBodiesAndEmbeddings) {
  EXPECT_EQ(ErrorBody(HttpErrorOf(OutOfRange("too long"))),
            R"({"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}})");
  EXPECT_EQ(ErrorBody(InvalidApiKey()),
            R"({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}})");
  const json j = EmbeddingsResponse("m", {{3, 4}, {0, 0}}, 7);
  EXPECT_EQ(j["data"][0]["embedding"], json::parse("[0.6000000238418579, 0.800000011920929]"));
  EXPECT_EQ(j["data"][1]["embedding"], json::parse("[0.0, 0.0]"));  // a zero vector stays zero
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
}

// An engine over stories260K with `n_seq` slots sharing `n_ctx` cells.
class EngineTest : public ::testing::Test {
 protected:
  void Open(uint32_t n_ctx, uint32_t n_seq) {
    const std::string model = test::ModelPath("stories260K.gguf");
    if (!test::FileExists(model)) GTEST_SKIP() << "skipped: " << model << " not found (shared models absent)";
    planner::ContextConfig cfg;
    cfg.n_ctx = n_ctx;
    cfg.n_seq_max = n_seq;
    cfg.kv_unified = true;
    auto plan = test::PlanCpu(model, cfg, /*use_mmap=*/true);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto gguf = GgufFile::Open(model);
    ASSERT_TRUE(gguf.ok());
    auto tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok());
    tok_ = std::make_unique<Tokenizer>(*tok);
    SessionOptions o;
    o.n_threads = 2;
    auto s = Session::CreateFromPlanBytes(*plan, std::shared_ptr<const GgufFile>(std::move(*gguf)), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
    engine_ = std::make_unique<Engine>(*session_, *tok_, 512);
    engine_->Start();
  }

  CompletionRequest Greedy(const std::string& prompt, int32_t n) const {
    CompletionRequest r;
    r.prompt = tok_->Tokenize(prompt, true, true);
    r.sampling.temperature = 0;
    r.n_predict = n;
    return r;
  }

  // Every event of `s` until its end: the text, and the last event.
  static CompletionEvent Drain(CompletionStream& s, std::string* text) {
    for (;;) {
      auto e = s.Next(std::chrono::seconds(30));
      if (!e) {
        CompletionEvent timeout;
        timeout.kind = CompletionEvent::Kind::kError;
        timeout.error = Internal("no event in 30 s");
        return timeout;
      }
      if (e->kind != CompletionEvent::Kind::kText) return *e;
      *text += e->text;
    }
  }

  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Engine> engine_;
};

// Unbounded requests that fill the shared cache end with "length" (the batch is halved and a slot
// without room stops), not with an error; the cache is then free for the next request.
TEST_F(EngineTest, AFullCacheEndsUnboundedRequestsWithLength) {
  Open(64, 2);
  if (IsSkipped()) return;
  std::vector<std::shared_ptr<CompletionStream>> streams;
  for (const char* p : {"Once upon a time", "The little dog"}) {
    CompletionRequest r = Greedy(p, -1);
    r.ignore_eos = true;
    auto s = engine_->Submit(std::move(r));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  int32_t total = 0;
  for (auto& s : streams) {
    std::string text;
    const CompletionEvent e = Drain(*s, &text);
    ASSERT_EQ(e.kind, CompletionEvent::Kind::kDone) << e.error.ToString();
    EXPECT_EQ(e.finish_reason, "length");
    EXPECT_GT(e.n_predicted, 0);
    EXPECT_LE(e.n_prompt + e.n_predicted, 64 + 1);  // a slot's last token is not decoded
    total += e.n_prompt + e.n_predicted;
  }
  // Together they filled the cache (the first to stop frees its cells for the other).
  EXPECT_GE(total, 64);
  auto again = engine_->Submit(Greedy("Once upon a time", 8));
  ASSERT_TRUE(again.ok());
  std::string text;
  EXPECT_EQ(Drain(**again, &text).kind, CompletionEvent::Kind::kDone);
  EXPECT_FALSE(text.empty());
}

// Bounded requests whose prompt + max_tokens do not fit next to the running ones wait (deferred)
// rather than meet a full cache; a request over the whole context is refused at once.
TEST_F(EngineTest, ReservationsDeferRequestsThatDoNotFit) {
  Open(64, 2);
  if (IsSkipped()) return;
  EXPECT_EQ(engine_->Submit(Greedy("Once upon a time", 60)).status().code(), StatusCode::kOutOfRange);
  CompletionRequest ra = Greedy("Once upon a time", 40), rb = Greedy("The little dog", 40);
  ra.ignore_eos = rb.ignore_eos = true;
  auto a = engine_->Submit(std::move(ra));
  auto b = engine_->Submit(std::move(rb));
  ASSERT_TRUE(a.ok() && b.ok());
  std::string ta, tb;
  const CompletionEvent ea = Drain(**a, &ta), eb = Drain(**b, &tb);
  ASSERT_EQ(ea.kind, CompletionEvent::Kind::kDone) << ea.error.ToString();
  ASSERT_EQ(eb.kind, CompletionEvent::Kind::kDone) << eb.error.ToString();
  EXPECT_EQ(ea.n_predicted, 40);
  EXPECT_EQ(eb.n_predicted, 40);  // after a, not cut short
  const EngineMetrics m = engine_->Metrics();
  EXPECT_EQ(m.n_busy_slots_total, m.n_decode_total);  // never both at once: b waited for a
}

}  // namespace
}  // namespace stowage::server
