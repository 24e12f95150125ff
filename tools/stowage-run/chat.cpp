#include "chat.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "model_session.h"
#include "prompt_escapes.h"
#include "stowage/runtime/chat_template.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"

namespace stowage::run {

Result<ChatTemplate> PickChatTemplate(const GgufFile& gguf, const std::string& name, const char* tool) {
  if (!name.empty()) {
    // A built-in name or a template text, as llama.cpp's --chat-template (common_chat_verify_template:
    // llama_chat_apply_template detects the family of either).
    Result<ChatTemplate> t = ChatTemplate::FromText(name);
    if (t.ok()) return t;
    const bool looks_like_a_name =
        name.size() <= 40 && name.find_first_of(" \t\n{}<>[]") == std::string::npos;
    if (!looks_like_a_name) return InvalidArgument("--chat-template: " + t.status().message());
    return InvalidArgument("--chat-template: " + ChatTemplate::FromName(name).status().message() +
                           ", or a template text of a family llama.cpp detects");
  }
  Result<ChatTemplate> t = ChatTemplate::FromModel(gguf);
  if (t.ok() || t.status().code() != StatusCode::kNotFound) {
    if (!t.ok()) return t.status().WithPrefix("--chat-template NAME chooses a built-in template instead");
    return t;
  }
  std::fprintf(stderr,
               "%s: %s has no tokenizer.chat_template: chatting with chatml (--chat-template NAME "
               "chooses another)\n",
               tool, gguf.path().c_str());
  return ChatTemplate::FromName("chatml");
}

namespace {

// One user turn from `in`: a line without its newline, continued past a line that ends with '\'
// (llama-cli's console::readline); false at the end of the input with nothing read.
bool ReadTurn(std::FILE* in, std::string* turn) {
  turn->clear();
  char* line = nullptr;
  size_t cap = 0;
  bool got = false;
  for (ssize_t n; (n = getline(&line, &cap, in)) >= 0;) {
    got = true;
    std::string s(line, static_cast<size_t>(n));
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (!s.empty() && s.back() == '\\') {
      s.back() = '\n';
      *turn += s;
      continue;
    }
    *turn += s;
    break;
  }
  std::free(line);
  return got;
}

struct ChatState {
  ChatState(const Tokenizer& t, Session& se, const ChatOptions& op, bool random)
      : tok(t), session(se), o(op), sampler(op.sampler), random_seed(random) {}
  const Tokenizer& tok;
  Session& session;
  const ChatOptions& o;
  Sampler sampler;
  bool random_seed;  // no -s: each turn read restarts the sampler from a new random seed
  std::vector<ChatMessage> history;
  std::vector<int32_t> pending;  // decoded before the next turn's tokens: the last reply's end token
  std::vector<float> logits;
  int64_t n_prompt = 0, n_generated = 0;
  double prompt_seconds = 0, generation_seconds = 0;
};

// --verbose-prompt: a turn's templated text, and the tokens decoded for it at position `pos` (the
// previous reply's end token first), as llama-cli's lines.
void PrintTurn(const Tokenizer& tok, const std::string& text, const std::vector<int32_t>& tokens,
               int64_t pos) {
  std::fprintf(stderr, "chat: formatted: '%s'\n", text.c_str());
  std::fprintf(stderr, "chat: decoding %zu tokens at position %lld\n", tokens.size(),
               static_cast<long long>(pos));
  for (int32_t t : tokens) std::fprintf(stderr, "%6d -> '%s'\n", t, tok.TokenToPiece(t, true).c_str());
}

// How a turn ended.
enum class TurnEnd {
  kReplied,      // the reply ended (end-of-generation token or -n): the chat goes on
  kFullContext,  // said on stderr: the chat ends
  kError,        // *st says why
  kOutputLost,   // stdout could not be written (said by FlushStdout)
};

// Decodes `text` (after the pending end token) and streams the reply.
// `first`: the conversation's first text (BOS added); `typed`: a turn read from the input, before
// which llama-cli resets its sampler (common_sampler_reset: the penalties' history cleared, the
// random generator restarted from the seed, a new random one without -s) and accepts the turn's
// tokens, not the previous reply's end token that it accepted when it was sampled.
TurnEnd Turn(ChatState& s, const std::string& text, bool first, bool typed, Status* st) {
  std::vector<int32_t> tokens = s.pending;
  const std::vector<int32_t> turn = s.tok.Tokenize(text, /*add_special=*/first, /*parse_special=*/true);
  tokens.insert(tokens.end(), turn.begin(), turn.end());
  if (s.o.verbose_prompt) PrintTurn(s.tok, text, tokens, s.session.n_past());
  const int64_t n_ctx = s.session.n_ctx();
  if (s.session.n_past() + static_cast<int64_t>(tokens.size()) > n_ctx) {
    std::fprintf(
        stderr,
        "\nstowage-run: context full (%lld tokens): the turn of %zu tokens does not fit => stopping\n",
        static_cast<long long>(n_ctx), tokens.size());
    return TurnEnd::kFullContext;
  }
  s.pending.clear();
  if (typed) {
    s.sampler.ResetHistory();
    s.sampler.Reseed(s.random_seed ? std::random_device{}() : s.o.sampler.seed);
  }
  for (int32_t t : turn) s.sampler.Accept(t);
  auto t0 = Clock::now();
  if (*st = s.session.Decode(tokens, false, &s.logits); !st->ok()) return TurnEnd::kError;
  s.prompt_seconds += Seconds(t0, Clock::now());
  s.n_prompt += static_cast<int64_t>(tokens.size());
  t0 = Clock::now();
  std::string reply;
  bool ended = false;
  for (int n = 0; s.o.n_predict < 0 || n < s.o.n_predict; ++n) {
    const int32_t next = s.sampler.Sample(s.logits.data(), static_cast<int>(s.session.n_vocab()));
    if (next < 0) {
      *st = DataLoss("the logits at position " + std::to_string(s.session.n_past() - 1) +
                     " are all NaN or -inf, so no token can be sampled");
      return TurnEnd::kError;
    }
    s.sampler.Accept(next);
    ++s.n_generated;
    if (s.tok.IsEog(next)) {  // llama-cli decodes it with the next turn
      s.pending = {next};
      ended = true;
      break;
    }
    const std::string piece = s.tok.TokenToPiece(next, false);
    reply += piece;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    if (!FlushStdout()) return TurnEnd::kOutputLost;
    if (s.session.n_past() + 1 > n_ctx) {
      std::fprintf(stderr, "\nstowage-run: context full (%lld tokens) => stopping\n",
                   static_cast<long long>(n_ctx));
      return TurnEnd::kFullContext;
    }
    if (*st = s.session.Decode({next}, false, &s.logits); !st->ok()) return TurnEnd::kError;
  }
  if (!ended) {  // cut by -n: closed with the end-of-turn token
    const int32_t eot = s.tok.eot() != kTokenNull ? s.tok.eot() : s.tok.eos();
    if (eot != kTokenNull) s.pending = {eot};
  }
  s.generation_seconds += Seconds(t0, Clock::now());
  s.history.push_back({"assistant", reply});
  return TurnEnd::kReplied;
}

}  // namespace

int Chat(const CommonOptions& c, ChatOptions o, std::FILE* in) {
  const bool random_seed = o.sampler.seed == kRandomSeed;
  if (random_seed) o.sampler.seed = std::random_device{}();
  auto loaded = LoadModel(c, o.quiet);
  if (!loaded.ok()) return Fail(loaded.status());
  Result<ChatTemplate> tmpl = PickChatTemplate(*loaded->gguf, o.chat_template, "stowage-run");
  if (!tmpl.ok()) return Fail(tmpl.status());
  Session& session = *loaded->session;
  if (o.sampler.penalty_last_n < 0)
    o.sampler.penalty_last_n = static_cast<int32_t>(std::min<int64_t>(session.n_ctx(), INT32_MAX));
  ChatState s(loaded->tokenizer, session, o, random_seed);
  if (!o.quiet) {
    std::fprintf(stderr, "chat: template '%.*s'%s\n", static_cast<int>(tmpl->name().size()),
                 tmpl->name().data(), o.chat_template.empty() ? "" : " (--chat-template)");
    if (o.sampler.temperature > 0) std::fprintf(stderr, "sampler seed: %u\n", o.sampler.seed);
  }
  // The first turn: the system message and the first user turn formatted as one conversation, BOS
  // added (llama-cli with -p; without -p it decodes the system message alone and then the first
  // turn read after a "\n", common_chat_format_single's newline, which no template has there).
  if (!o.system_prompt.empty()) s.history.push_back({"system", o.system_prompt});
  bool first = true;
  Status st;
  auto run_turn = [&](const std::string& user, bool typed) -> TurnEnd {
    std::vector<ChatMessage> msgs = s.history;
    msgs.push_back({"user", user});
    Result<std::string> text =
        first ? tmpl->Apply(msgs, true) : tmpl->ApplyIncrement(s.history, msgs.back(), true);
    if (!text.ok()) {
      st = text.status();
      return TurnEnd::kError;
    }
    s.history.push_back({"user", user});
    const TurnEnd end = Turn(s, *text, first, typed, &st);
    first = false;
    return end;
  };
  TurnEnd end = TurnEnd::kReplied;
  if (!o.first_prompt.empty()) end = run_turn(o.first_prompt, false);
  std::string user;
  for (bool ask = true; end == TurnEnd::kReplied;) {
    if (ask) std::printf("\n> ");  // llama-cli's prompt for the user's turn
    if (!FlushStdout()) return 1;
    if (!ReadTurn(in, &user)) break;
    ask = !user.empty();
    if (user.empty()) continue;
    if (o.escape) user = tools::ProcessEscapes(user);
    end = run_turn(user, true);
  }
  if (end == TurnEnd::kOutputLost) return 1;
  std::printf("\n");
  if (!FlushStdout()) return 1;
  if (!st.ok()) return Fail(st);
  if (!o.quiet) {
    std::fprintf(stderr, "\nload time   = %8.2f ms\n", session.load_seconds() * 1e3);
    std::fprintf(stderr, "prompt eval = %8.2f ms / %lld tokens\n", s.prompt_seconds * 1e3,
                 static_cast<long long>(s.n_prompt));
    std::fprintf(stderr, "generation  = %8.2f ms / %lld tokens\n", s.generation_seconds * 1e3,
                 static_cast<long long>(s.n_generated));
    PrintBuffers(session);
  }
  return 0;
}

}  // namespace stowage::run
