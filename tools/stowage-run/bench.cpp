#include "bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_numbers.h"
#include "model_session.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/session.h"

namespace stowage::run {
namespace {

/// llama.cpp's name of a general.file_type value (llama_model_ftype_name), as llama-bench's model
/// column shows it; "ftype N" for values it does not know, "?" when the key is absent.
std::string FtypeName(int64_t ftype) {
  static const std::pair<int, const char*> kNames[] = {{0, "all F32"},
                                                       {1, "F16"},
                                                       {2, "Q4_0"},
                                                       {3, "Q4_1"},
                                                       {7, "Q8_0"},
                                                       {8, "Q5_0"},
                                                       {9, "Q5_1"},
                                                       {10, "Q2_K - Medium"},
                                                       {11, "Q3_K - Small"},
                                                       {12, "Q3_K - Medium"},
                                                       {13, "Q3_K - Large"},
                                                       {14, "Q4_K - Small"},
                                                       {15, "Q4_K - Medium"},
                                                       {16, "Q5_K - Small"},
                                                       {17, "Q5_K - Medium"},
                                                       {18, "Q6_K"},
                                                       {19, "IQ2_XXS - 2.0625 bpw"},
                                                       {20, "IQ2_XS - 2.3125 bpw"},
                                                       {21, "Q2_K - Small"},
                                                       {22, "IQ3_XS - 3.3 bpw"},
                                                       {23, "IQ3_XXS - 3.0625 bpw"},
                                                       {24, "IQ1_S - 1.5625 bpw"},
                                                       {25, "IQ4_NL - 4.5 bpw"},
                                                       {26, "IQ3_S - 3.4375 bpw"},
                                                       {27, "IQ3_S mix - 3.66 bpw"},
                                                       {28, "IQ2_S - 2.5 bpw"},
                                                       {29, "IQ2_M - 2.7 bpw"},
                                                       {30, "IQ4_XS - 4.25 bpw"},
                                                       {31, "IQ1_M - 1.75 bpw"},
                                                       {32, "BF16"},
                                                       {36, "TQ1_0 - 1.69 bpw ternary"},
                                                       {37, "TQ2_0 - 2.06 bpw ternary"},
                                                       {38, "MXFP4 MoE"}};
  if (ftype < 0) return "?";
  for (const auto& [v, name] : kNames)
    if (v == ftype) return name;
  return "ftype " + std::to_string(ftype);
}

/// llama-bench's model column: "<arch> <size class> <ftype>"; the size class is llama.cpp's
/// per-architecture table (LLM_TYPE_*), which Stowage does not keep, so this is "<arch> <ftype>".
std::string ModelDescription(const GgufFile& gguf) {
  const std::string arch = gguf.GetStringOr("general.architecture", "?").value();
  const auto ftype = gguf.GetU32Or("general.file_type", UINT32_MAX);
  std::string model_desc = arch + " ";
  if (ftype.ok() && *ftype != UINT32_MAX) {
    model_desc += FtypeName(*ftype);
  } else {
    // No general.file_type: llama_model_loader guesses it from the most common tensor type.
    std::map<GgmlType, int> count;
    for (const auto& t : gguf.tensors()) ++count[t.type];
    GgmlType most = GgmlType::F32;
    int best = -1;
    for (const auto& [t, n] : count)
      if (n > best) {
        best = n;
        most = t;
      }
    static const std::pair<GgmlType, int> kGuess[] = {
        {GgmlType::F32, 0},   {GgmlType::F16, 1},     {GgmlType::BF16, 32},   {GgmlType::Q4_0, 2},
        {GgmlType::Q4_1, 3},  {GgmlType::Q5_0, 8},    {GgmlType::Q5_1, 9},    {GgmlType::Q8_0, 7},
        {GgmlType::Q2_K, 10}, {GgmlType::Q3_K, 12},   {GgmlType::Q4_K, 15},   {GgmlType::Q5_K, 17},
        {GgmlType::Q6_K, 18}, {GgmlType::IQ4_NL, 25}, {GgmlType::IQ4_XS, 30}, {GgmlType::MXFP4, 38}};
    int64_t guessed = -1;
    for (const auto& [t, f] : kGuess)
      if (t == most) guessed = f;
    model_desc += guessed >= 0 ? FtypeName(guessed) + " (guessed)" : "?";
  }
  return model_desc;
}

// The op profile of one bench test as a markdown table (per token, largest first).
void PrintProfile(const std::vector<OpProfileEntry>& rows, const std::string& graph, const char* test, int n,
                  int reps) {
  double total = 0;
  for (const auto& e : rows)
    if (e.graph == graph && e.op == "(ubatch)") total = e.seconds;
  if (total <= 0) return;
  const double tokens = double(n) * reps;
  std::printf("\nprofile %s%d (host wall time per token, mean of %d repetitions; %% of the ubatch time):\n",
              test, n, reps);
  std::printf(
      "| op | backend | calls/token | us/token | %% |\n| -- | ------- | ----------: | -------: | --: |\n");
  for (const auto& e : rows) {
    if (e.graph != graph) continue;
    std::printf("| %s | %s | %.2f | %.2f | %.1f |\n", e.op.c_str(),
                e.backend.empty() ? "-" : e.backend.c_str(), e.calls / tokens, e.seconds / tokens * 1e6,
                100.0 * e.seconds / total);
  }
}

/// One llama-bench test: n_prompt tokens in one batch (pp) or n_gen tokens one at a time (tg), at
/// `threads` threads; `tps` holds one tokens/s figure per repetition.
struct BenchTest {
  int threads = 0;
  int n_prompt = 0;
  int n_gen = 0;
  std::vector<double> tps;
  std::vector<OpProfileEntry> profile;
  double Mean() const {
    double m = 0;
    for (double v : tps) m += v;
    return tps.empty() ? 0 : m / tps.size();
  }
  double Sd() const {
    const double m = Mean();
    double var = 0;
    for (double v : tps) var += (v - m) * (v - m);
    return tps.size() > 1 ? std::sqrt(var / (tps.size() - 1)) : 0;
  }
};

/// llama-bench's test name: "pp512", "tg128", "pp512+tg128".
std::string TestName(const BenchTest& t) {
  if (t.n_prompt > 0 && t.n_gen > 0)
    return "pp" + std::to_string(t.n_prompt) + "+tg" + std::to_string(t.n_gen);
  return t.n_prompt > 0 ? "pp" + std::to_string(t.n_prompt) : "tg" + std::to_string(t.n_gen);
}

// The model as llama-bench's columns show it: its file, type, size (bytes of its tensors) and
// parameter count.
struct BenchModel {
  std::string filename, description;
  uint64_t size = 0, params = 0;
};

// The tests of `b` in llama-bench's order, each in a session of its thread count; `backend` gets
// the devices holding the last session's buffers ("CPU", "ONEDNN,CPU", "CUDA0,CPU"). Errors: a
// session's; a test longer than the context; a test's decode error prefixed with its name.
Status RunTests(const CommonOptions& c, const std::shared_ptr<const GgufFile>& gguf, const BenchOptions& b,
                int max_p, int max_n, std::vector<BenchTest>* tests, std::string* backend) {
  for (int threads : b.threads) {
    CommonOptions ct = c;
    ct.threads = threads;
    STOWAGE_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, OpenSession(ct, gguf, true, b.profile));
    Session& s = *session;
    backend->clear();
    for (const auto& buf : s.Buffers())
      if (("," + *backend + ",").find("," + buf.device + ",") == std::string::npos)
        *backend += (backend->empty() ? "" : ",") + buf.device;
    for (const auto& [name, n] : {std::pair<const char*, int>{"-p/--n-prompt", max_p}, {"-n/--n-gen", max_n}})
      if (n > s.n_ctx())
        return OutOfRange(std::string(name) + " " + std::to_string(n) + " exceeds the context of " +
                          std::to_string(s.n_ctx()) + " tokens (" + ContextHint(c) + ")");
    // One test: a prompt of n_p tokens in one batch, then n_g tokens one at a time (pp: n_g = 0,
    // tg: n_p = 0, llama-bench's -pg: both; tokens/s counts both).
    auto run = [&](int n_p, int n_g) -> Status {
      BenchTest t;
      t.threads = threads;
      t.n_prompt = n_p;
      t.n_gen = n_g;
      std::vector<float> logits;
      const int n = n_p + n_g;
      for (int r = 0; r < b.reps + 1; ++r) {  // first run is a warm-up
        s.Reset();
        if (r == 1) s.ResetOpProfile();
        std::vector<int32_t> toks(static_cast<size_t>(n), 1);
        for (int i = 0; i < n; ++i) toks[i] = (i * 7 + 3) % static_cast<int>(s.n_vocab());
        const auto t0 = Clock::now();
        if (n_p > 0)
          STOWAGE_RETURN_IF_ERROR(
              s.Decode(std::vector<int32_t>(toks.begin(), toks.begin() + n_p), false, &logits));
        for (int i = n_p; i < n; ++i) STOWAGE_RETURN_IF_ERROR(s.Decode({toks[i]}, false, &logits));
        if (r > 0) t.tps.push_back(n / Seconds(t0, Clock::now()));
      }
      t.profile = s.OpProfile();
      tests->push_back(std::move(t));
      return Status::Ok();
    };
    for (int n : b.prompts)
      if (n > 0) STOWAGE_RETURN_IF_ERROR(run(n, 0).WithPrefix("pp" + std::to_string(n)));
    for (int n : b.gens)
      if (n > 0) STOWAGE_RETURN_IF_ERROR(run(0, n).WithPrefix("tg" + std::to_string(n)));
    for (const auto& [n_p, n_g] : b.pgs)
      STOWAGE_RETURN_IF_ERROR(
          run(n_p, n_g).WithPrefix("pp" + std::to_string(n_p) + "+tg" + std::to_string(n_g)));
  }
  return Status::Ok();
}

// The benchmark harness's one line (scripts/bench-vs-llamacpp.sh): the pp and tg tests' mean and
// standard deviation, and the peak resident memory.
void PrintJsonSummary(const std::vector<BenchTest>& tests) {
  double r[2][2] = {{0, 0}, {0, 0}};
  for (const auto& t : tests) {
    const int k = t.n_prompt > 0 ? 0 : 1;
    r[k][0] = t.Mean();
    r[k][1] = t.Sd();
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg_tps\": %.3f, \"tg_sd\": %.3f, \"maxrss_kib\": %ld}\n",
              r[0][0], r[0][1], r[1][0], r[1][1], ru.ru_maxrss);
}

// -o json (an array) or jsonl (`lines`: an object a line), llama-bench's field names for what
// Stowage knows.
void PrintJson(const std::vector<BenchTest>& tests, const BenchModel& m, const std::string& backend,
               bool lines) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const auto& t : tests) {
    nlohmann::ordered_json j;
    j["model_filename"] = m.filename;
    j["model_type"] = m.description;
    j["model_size"] = m.size;
    j["model_n_params"] = m.params;
    j["backends"] = backend;
    j["n_threads"] = t.threads;
    j["n_prompt"] = t.n_prompt;
    j["n_gen"] = t.n_gen;
    j["avg_ts"] = t.Mean();
    j["stddev_ts"] = t.Sd();
    j["samples_ts"] = t.tps;
    // A path that is not UTF-8 prints its bad bytes as U+FFFD (as plan-dump --json).
    if (lines)
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    else
      all.push_back(std::move(j));
  }
  if (!lines)
    std::printf("%s\n", all.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
}

// -o csv, llama-bench's columns for what Stowage knows.
void PrintCsv(const std::vector<BenchTest>& tests, const BenchModel& m, const std::string& backend) {
  // RFC 4180 quoting, as llama-bench's escape_csv: a '"' inside a field is doubled.
  auto quoted = [](const std::string& v) {
    std::string q = "\"";
    for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::printf(
      "model_filename,model_type,model_size,model_n_params,backends,n_threads,n_prompt,n_gen,avg_ts,stddev_"
      "ts\n");
  for (const auto& t : tests)
    std::printf("%s,%s,%llu,%llu,%s,%d,%d,%d,%.6f,%.6f\n", quoted(m.filename).c_str(),
                quoted(m.description).c_str(), static_cast<unsigned long long>(m.size),
                static_cast<unsigned long long>(m.params), quoted(backend).c_str(), t.threads, t.n_prompt,
                t.n_gen, t.Mean(), t.Sd());
}

// -o md: llama-bench's table, then with --profile each pp and tg test's op profile.
void PrintMarkdown(const std::vector<BenchTest>& tests, const BenchModel& m, const std::string& backend,
                   const BenchOptions& b) {
  // Sizes as llama-bench prints them: MiB / M below 1 GiB / 1 B, GiB / B above.
  char size_s[32], params_s[32];
  if (m.size < (1ull << 30))
    std::snprintf(size_s, sizeof size_s, "%.2f MiB", m.size / 1048576.0);
  else
    std::snprintf(size_s, sizeof size_s, "%.2f GiB", m.size / 1073741824.0);
  if (m.params < 1000000000ull)
    std::snprintf(params_s, sizeof params_s, "%.2f M", m.params / 1e6);
  else
    std::snprintf(params_s, sizeof params_s, "%.2f B", m.params / 1e9);
  std::printf("| model | size | params | backend | threads | test | t/s |\n");
  std::printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: |\n");
  for (const auto& t : tests)
    std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", m.description.c_str(), size_s, params_s,
                backend.c_str(), t.threads, TestName(t).c_str(), t.Mean(), t.Sd());
  if (b.profile)
    for (const auto& t : tests) {
      // A prompt of n tokens runs the "pp" graph (one token: "tg", as llama.cpp's graphs).
      if (t.n_prompt > 0 && t.n_gen > 0) continue;  // a -pg test mixes both graphs
      if (t.n_prompt > 0)
        PrintProfile(t.profile, t.n_prompt == 1 ? "tg" : "pp", "pp", t.n_prompt, b.reps);
      else
        PrintProfile(t.profile, "tg", "tg", t.n_gen, b.reps);
    }
}

}  // namespace

Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& name, int lo, int hi) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  auto num = [&](const std::string& v, int* x) -> bool {
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return false;
    *x = std::stoi(v);
    return *x >= lo && *x <= hi;
  };
  while (std::getline(ss, item, ',')) {
    const auto bad = [&]() {
      return InvalidArgument(name + ": expected an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + " or a range first-last[+step|*factor], found '" +
                             tools::ShownValue(item) + "'");
    };
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!num(item, &first)) return bad();
      out.push_back(first);
      continue;
    }
    const size_t op = item.find_first_of("+*", dash);
    if (!num(item.substr(0, dash), &first) ||
        !num(item.substr(dash + 1, op == std::string::npos ? std::string::npos : op - dash - 1), &last) ||
        last < first)
      return bad();
    const bool times = op != std::string::npos && item[op] == '*';
    int step = 1;
    if (op != std::string::npos &&
        (!num(item.substr(op + 1), &step) || step < (times ? 2 : 1) || (times && first < 1)))
      return bad();
    for (int64_t v = first; v <= last; v = times ? v * step : v + step) {
      out.push_back(static_cast<int>(v));
      if (out.size() > 4096) return InvalidArgument(name + ": '" + item + "' makes more than 4096 values");
    }
  }
  if (out.empty()) return InvalidArgument(name + ": no value");
  return out;
}

int Bench(CommonOptions c, bool ctx_given, BenchOptions b) {
  int max_p = *std::max_element(b.prompts.begin(), b.prompts.end());
  const int max_n = *std::max_element(b.gens.begin(), b.gens.end());
  for (const auto& [n_p, n_g] : b.pgs) max_p = std::max(max_p, n_p + n_g);  // a -pg test fills both
  // Without -c, a context just large enough for the largest test (-c 0: the model's training context).
  if (!ctx_given) c.n_ctx = static_cast<uint32_t>(std::max(max_p, max_n) + 8);
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  BenchModel m;
  m.filename = c.model;
  for (const auto& t : (*gguf)->tensors()) {
    m.size += t.nbytes;
    m.params += static_cast<uint64_t>(t.nelements());
  }
  m.description = ModelDescription(**gguf);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  for (int& t : b.threads)
    if (t <= 0) t = hw;

  // Every test runs before anything is printed: an error is then the only output.
  std::vector<BenchTest> tests;
  std::string backend;
  if (Status st = RunTests(c, *gguf, b, max_p, max_n, &tests, &backend); !st.ok()) return Fail(st);
  if (b.json_summary)
    PrintJsonSummary(tests);
  else if (b.format == "json" || b.format == "jsonl")
    PrintJson(tests, m, backend, b.format == "jsonl");
  else if (b.format == "csv")
    PrintCsv(tests, m, backend);
  else
    PrintMarkdown(tests, m, backend, b);
  return 0;
}

}  // namespace stowage::run
