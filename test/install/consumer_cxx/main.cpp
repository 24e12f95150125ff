// An out-of-tree C++ program against the installed runtime (find_package(Stowage)): tokenizes the
// prompt as stowage-run does (special tokens added and parsed), generates greedily with the sampler
// (temperature 0) until an end-of-generation token or N_PREDICT tokens, and prints the text as
// stowage-run -q --no-display-prompt does; the prompt's and the generated token ids go to stderr.
//   consumer_cxx PLAN MODEL PROMPT N_PREDICT
#include <stowage/runtime/gguf.h>
#include <stowage/runtime/sampler.h>
#include <stowage/runtime/session.h>
#include <stowage/runtime/tokenizer.h>
#include <stowage/runtime/version.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

int Fail(const stowage::Status& st) {
  std::fprintf(stderr, "consumer_cxx: %s\n", st.ToString().c_str());
  return 1;
}

void PrintIds(const char* what, const std::vector<int32_t>& ids) {
  std::fprintf(stderr, "%s:", what);
  for (int32_t id : ids) std::fprintf(stderr, " %d", id);
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s PLAN MODEL PROMPT N_PREDICT\n", argv[0]);
    return 2;
  }
  std::fprintf(stderr, "consumer_cxx: stowage %s\n", stowage_version_string());
  auto gguf = stowage::GgufFile::Open(argv[2]);
  if (!gguf.ok()) return Fail(gguf.status());
  std::shared_ptr<const stowage::GgufFile> model = std::move(*gguf);
  auto tok = stowage::Tokenizer::FromGguf(*model);
  if (!tok.ok()) return Fail(tok.status());
  auto session = stowage::Session::Create(argv[1], model);
  if (!session.ok()) return Fail(session.status());
  stowage::Session& s = **session;

  const std::vector<int32_t> prompt = tok->Tokenize(argv[3], /*add_special=*/true, /*parse_special=*/true);
  PrintIds("prompt ids", prompt);
  stowage::SamplerParams params;
  params.temperature = 0;  // greedy
  stowage::Sampler sampler(params);
  for (int32_t t : prompt) sampler.Accept(t);

  std::vector<float> logits;
  if (stowage::Status st = s.Decode(prompt, false, &logits); !st.ok()) return Fail(st);
  std::vector<int32_t> generated;
  const int n_predict = std::atoi(argv[4]);
  std::string text;
  for (int i = 0; i < n_predict; ++i) {
    const int32_t next = sampler.Sample(logits.data(), static_cast<int>(s.n_vocab()));
    sampler.Accept(next);
    generated.push_back(next);
    if (tok->IsEog(next)) break;
    text += tok->TokenToPiece(next, false);
    if (i + 1 < n_predict)
      if (stowage::Status st = s.Decode({next}, false, &logits); !st.ok()) return Fail(st);
  }
  PrintIds("generated ids", generated);
  std::printf("%s\n", text.c_str());
  return 0;
}
