// An out-of-tree C++ program against the installed runtime (find_package(Stowage)), the C++ twin of
// consumer_c: tokenizes each prompt as stowage-run does (special tokens added and parsed), decodes
// all the prompts in one batch, one sequence each (Session::DecodeBatch; plan-model -np N -kvu),
// then generates for every sequence at once with a SamplerChain each (penalties over the last 64
// tokens at 1.1, then greedy: stowage-run --temp 0 --repeat-penalty 1.1) until an end-of-generation
// token or N_PREDICT tokens, and prints each sequence's text on its own line (as stowage-run -q
// --no-display-prompt); the prompt's and the generated token ids go to stderr.
//   consumer_cxx PLAN MODEL N_PREDICT PROMPT [PROMPT...]
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

void PrintIds(const char* what, size_t k, const std::vector<int32_t>& ids) {
  std::fprintf(stderr, "sequence %zu %s:", k, what);
  for (int32_t id : ids) std::fprintf(stderr, " %d", id);
  std::fprintf(stderr, "\n");
}

struct Sequence {
  std::vector<int32_t> prompt, generated;
  stowage::SamplerChain chain;
  std::string text;
  size_t row = 0;  // its logits row in the last batch
  bool done = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PLAN MODEL N_PREDICT PROMPT [PROMPT...]\n", argv[0]);
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
  const int n_predict = std::atoi(argv[3]);

  std::vector<Sequence> seqs(static_cast<size_t>(argc - 4));
  std::vector<stowage::BatchToken> batch;
  for (size_t k = 0; k < seqs.size(); ++k) {
    Sequence& q = seqs[k];
    q.prompt = tok->Tokenize(argv[4 + k], /*add_special=*/true, /*parse_special=*/true);
    PrintIds("prompt ids", k, q.prompt);
    q.chain.Add(stowage::SamplerStep::Penalties(64, 1.1f, 0.f, 0.f));
    q.chain.Add(stowage::SamplerStep::Greedy());
    for (size_t i = 0; i < q.prompt.size(); ++i) {
      q.chain.Accept(q.prompt[i]);
      const bool last = i + 1 == q.prompt.size();
      batch.push_back({q.prompt[i], static_cast<int32_t>(i), static_cast<int32_t>(k), last});
    }
  }
  std::vector<float> logits;
  for (int step = 0; step <= n_predict; ++step) {
    if (batch.empty()) break;
    if (stowage::Status st = s.DecodeBatch(batch, &logits); !st.ok()) return Fail(st);
    // The rows of the tokens that asked for logits, in batch order.
    size_t row = 0;
    for (const stowage::BatchToken& t : batch)
      if (t.logits) seqs[static_cast<size_t>(t.seq_id)].row = row++;
    batch.clear();
    for (size_t k = 0; k < seqs.size(); ++k) {
      Sequence& q = seqs[k];
      if (q.done) continue;
      const int32_t next = q.chain.Sample(logits.data() + q.row * s.n_vocab(), static_cast<int>(s.n_vocab()));
      if (next < 0) return Fail(stowage::DataLoss("no token can be sampled"));
      q.chain.Accept(next);
      q.generated.push_back(next);
      const bool eog = tok->IsEog(next);
      if (!eog) q.text += tok->TokenToPiece(next, false);
      q.done = eog || static_cast<int>(q.generated.size()) == n_predict;
      if (!q.done)
        batch.push_back({next, static_cast<int32_t>(q.prompt.size() + q.generated.size() - 1),
                         static_cast<int32_t>(k), true});
    }
  }
  for (size_t k = 0; k < seqs.size(); ++k) {
    PrintIds("generated ids", k, seqs[k].generated);
    std::printf("%s\n", seqs[k].text.c_str());
  }
  return 0;
}
