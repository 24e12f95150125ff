#include "bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <locale>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cli_numbers.h"
#include "llama_args.h"
#include "model_session.h"
#include "planner_args.h"
#include "stowage/plan/plan_generated.h"
#include "stowage/runtime/device_probe.h"
#include "stowage/runtime/ggml_types.h"
#include "stowage/runtime/gguf.h"
#include "stowage/runtime/plan.h"
#include "stowage/runtime/session.h"
#include "stowage/runtime/tokenizer.h"
#include "stowage/runtime/version.h"

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

/// llama.cpp's size class of the model (llm_type_name of the type its load_arch_hparams picks from
/// the layer count and a few other hyper-parameters) for llama, qwen2, qwen3, gemma2 and gemma3
/// (llama.cpp 2026 src/models/<arch>.cpp); "?B" (LLM_TYPE_UNKNOWN) for other architectures and
/// sizes, which llama.cpp may know.
std::string SizeClass(const GgufFile& gguf, const std::string& arch) {
  const auto u32 = [&](const std::string& key, uint32_t def) {
    auto v = gguf.GetU32Or(arch + "." + key, def);
    return v.ok() ? *v : def;
  };
  const uint32_t n_layer = u32("block_count", 0), n_embd = u32("embedding_length", 0);
  const uint32_t n_head = u32("attention.head_count", 0), n_expert = u32("expert_count", 0);
  const uint32_t n_head_kv = u32("attention.head_count_kv", n_head);
  uint64_t n_vocab = u32("vocab_size", 0);
  if (n_vocab == 0)
    if (const GgufValue* v = gguf.Find("tokenizer.ggml.tokens"); v != nullptr && v->is_array())
      n_vocab = v->count;
  const char* t = "?B";
  if (arch == "llama") {
    if (n_expert == 8) {
      t = n_layer == 32 ? "8x7B" : n_layer == 56 ? "8x22B" : "?B";
    } else {
      switch (n_layer) {
        case 16:
        case 22:
          t = "1B";
          break;
        case 26:
        case 28:
          t = "3B";
          break;
        case 30:
          t = "256M";
          break;
        case 32:
          t = n_vocab == 49152 ? "3B" : n_vocab < 40000 ? "7B" : "8B";
          break;
        case 36:
          t = "8B";
          break;
        case 40:
          t = "13B";
          break;
        case 48:
          t = "34B";
          break;
        case 60:
          t = "30B";
          break;
        case 80:
          t = n_head == n_head_kv ? "65B" : "70B";
          break;
        default:
          break;
      }
    }
  } else if (arch == "qwen2") {
    switch (n_layer) {
      case 24:
        t = n_embd == 1024 ? "0.5B" : "1B";
        break;
      case 28:
        t = n_embd == 1536 ? "1.5B" : "7B";
        break;
      case 32:
        t = "7B";
        break;
      case 36:
        t = "3B";
        break;
      case 40:
        t = n_head == 20 ? "4B" : "13B";
        break;
      case 48:
        t = "14B";
        break;
      case 64:
        t = "32B";
        break;
      case 80:
        t = "70B";
        break;
      default:
        break;
    }
  } else if (arch == "qwen3") {
    switch (n_layer) {
      case 28:
        t = n_embd == 1024 ? "0.6B" : "1.7B";
        break;
      case 36:
        t = n_embd == 2560 ? "4B" : "8B";
        break;
      case 40:
        t = "14B";
        break;
      case 64:
        t = "32B";
        break;
      default:
        break;
    }
  } else if (arch == "gemma2") {
    t = n_layer == 26 ? "2B" : n_layer == 42 ? "9B" : n_layer == 46 ? "27B" : "?B";
  } else if (arch == "gemma3") {
    switch (n_layer) {
      case 18:
        t = "270M";
        break;
      case 26:
        t = "1B";
        break;
      case 32:
        t = "8B";
        break;
      case 34:
        t = "4B";
        break;
      case 48:
        t = "12B";
        break;
      case 62:
        t = "27B";
        break;
      default:
        break;
    }
  }
  return t;
}

/// llama-bench's model column and model_type field (llama_model_desc): "<arch> <size class>
/// <ftype>", e.g. "llama ?B (guessed) all F32".
std::string ModelDescription(const GgufFile& gguf) {
  const std::string arch = gguf.GetStringOr("general.architecture", "?").value();
  const auto ftype = gguf.GetU32Or("general.file_type", UINT32_MAX);
  std::string model_desc = arch + " " + SizeClass(gguf, arch) + " ";
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
    // llama.cpp 2026's llama_model_loader::ftype_name: "(guessed) " before the name.
    model_desc += guessed >= 0 ? "(guessed) " + FtypeName(guessed) : "?";
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

/// What llama-bench reports of the machine and build: its backends column, the cpu_info and
/// gpu_info fields, whether it shows the ngl column.
struct BenchMachine {
  std::string backends;  ///< ggml reg names of the devices other than the CPU, or "CPU"
  std::string cpu_info;  ///< descriptions of the CPU and ACCEL devices, ", "-joined
  std::string gpu_info;  ///< descriptions of the GPUs, ", "-joined
  bool has_gpu = false;  ///< the markdown table has an ngl column
  int physical_cores = 1;
};

// llama-bench's get_backend / get_cpu_info / get_gpu_info over the probed devices (ggml registry
// order: GPUs, ACCEL, CPU). llama-bench hides the ngl column for a "CPU", "BLAS" or "ZenDNN"
// backend; here for any machine without a GPU (oneDNN, ONEDNN, is Stowage's BLAS-like ACCEL).
BenchMachine ProbeBenchMachine() {
  BenchMachine m;
  std::vector<std::string> backends, cpus, gpus;
  for (const ProbedDevice& d : ProbeDevices().devices) {
    if (d.backend != "CPU" && std::find(backends.begin(), backends.end(), d.backend) == backends.end())
      backends.push_back(d.backend);
    (d.type == DeviceType::kGpu ? gpus : cpus).push_back(d.description);
    m.has_gpu = m.has_gpu || d.type == DeviceType::kGpu;
  }
  const auto join = [](const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
    return out;
  };
  m.backends = backends.empty() ? "CPU" : join(backends, ",");
  m.cpu_info = join(cpus, ", ");
  m.gpu_info = join(gpus, ", ");
  m.physical_cores = std::max(1, ProbeCpu().physical_cores);
  return m;
}

/// One llama-bench test instance: its settings and, once run, its samples.
struct BenchTest {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  int n_batch = 0, n_ubatch = 0, n_threads = 0, n_gpu_layers = 0, flash_attn = -1;
  std::string type_k, type_v;
  std::string test_time;             ///< RFC 3339, when its session was ready
  std::vector<uint64_t> samples_ns;  ///< one per repetition
  std::vector<OpProfileEntry> profile;

  std::vector<double> Ts() const {
    std::vector<double> ts;
    for (uint64_t ns : samples_ns) ts.push_back(1e9 * (n_prompt + n_gen) / static_cast<double>(ns));
    return ts;
  }
};

// llama-bench's mean and sample standard deviation, in the type of the samples (integer
// nanoseconds stay integers) and with its formula (sqrt(sum x^2 / (n-1) - mean^2 n / (n-1))).
template <typename T>
T Mean(const std::vector<T>& v) {
  return v.empty() ? T(0) : std::accumulate(v.begin(), v.end(), T(0)) / static_cast<T>(v.size());
}
template <typename T>
T Stdev(const std::vector<T>& v) {
  if (v.size() <= 1) return 0;
  const T mean = Mean(v), n = static_cast<T>(v.size());
  const T sq_sum = std::inner_product(v.begin(), v.end(), v.begin(), T(0));
  return static_cast<T>(std::sqrt(sq_sum / (n - 1) - mean * mean * n / (n - 1)));
}

/// llama-bench's test column: "pp512", "tg128", "pp512+tg128", each with " @ d<depth>" when deep.
std::string TestName(const BenchTest& t) {
  std::string name = t.n_gen == 0      ? "pp" + std::to_string(t.n_prompt)
                     : t.n_prompt == 0 ? "tg" + std::to_string(t.n_gen)
                                       : "pp" + std::to_string(t.n_prompt) + "+tg" + std::to_string(t.n_gen);
  if (t.n_depth > 0) name += " @ d" + std::to_string(t.n_depth);
  return name;
}

/// The model as llama-bench's fields show it.
struct BenchModel {
  std::string filename, description;
  uint64_t size = 0, params = 0;
};

/// The value types of llama-bench's fields (test::get_field_type): how JSON and SQL print them.
enum class FieldType { kString, kBool, kInt, kFloat };

/// llama-bench's fields, in its order (test::get_fields), with their types.
const std::vector<std::pair<const char*, FieldType>>& Fields() {
  using F = FieldType;
  static const std::vector<std::pair<const char*, FieldType>> kFields = {
      {"build_commit", F::kString},
      {"build_number", F::kInt},
      {"cpu_info", F::kString},
      {"gpu_info", F::kString},
      {"backends", F::kString},
      {"model_filename", F::kString},
      {"model_type", F::kString},
      {"model_size", F::kInt},
      {"model_n_params", F::kInt},
      {"n_batch", F::kInt},
      {"n_ubatch", F::kInt},
      {"n_threads", F::kInt},
      {"cpu_mask", F::kString},
      {"cpu_strict", F::kBool},
      {"poll", F::kInt},
      {"type_k", F::kString},
      {"type_v", F::kString},
      {"n_gpu_layers", F::kInt},
      {"n_cpu_moe", F::kInt},
      {"split_mode", F::kString},
      {"main_gpu", F::kInt},
      {"no_kv_offload", F::kBool},
      {"flash_attn", F::kInt},
      {"devices", F::kString},
      {"tensor_split", F::kString},
      {"tensor_buft_overrides", F::kString},
      {"load_mode", F::kString},
      {"lazy_mode", F::kString},
      {"embeddings", F::kBool},
      {"no_op_offload", F::kInt},
      {"no_host", F::kBool},
      {"fit_target", F::kInt},
      {"fit_min_ctx", F::kInt},
      {"n_prompt", F::kInt},
      {"n_gen", F::kInt},
      {"n_depth", F::kInt},
      {"test_time", F::kString},
      {"avg_ns", F::kInt},
      {"stddev_ns", F::kInt},
      {"avg_ts", F::kFloat},
      {"stddev_ts", F::kFloat}};
  return kFields;
}

/// Everything a printer needs besides the test.
struct BenchContext {
  BenchModel model;
  BenchMachine machine;
  bool no_kv_offload = false, no_mmap = false;
};

/// The values of Fields() for one finished test, as llama-bench's test::get_values writes them.
/// What Stowage has no setting for is llama-bench's default on a CPU: cpu_mask 0x0, cpu_strict 0,
/// poll 50, n_cpu_moe 0, split_mode layer, main_gpu 0, devices auto, tensor_split 0.00,
/// tensor_buft_overrides none, lazy_mode auto, embeddings / no_op_offload / no_host / fit_* 0.
/// build_commit is Stowage's git describe ("unknown" without one), build_number 0.
std::vector<std::string> FieldValues(const BenchTest& t, const BenchContext& x) {
  const std::string commit = stowage_git_describe();
  const std::vector<double> ts = t.Ts();
  return {commit.empty() ? "unknown" : commit,
          "0",
          x.machine.cpu_info,
          x.machine.gpu_info,
          x.machine.backends,
          x.model.filename,
          x.model.description,
          std::to_string(x.model.size),
          std::to_string(x.model.params),
          std::to_string(t.n_batch),
          std::to_string(t.n_ubatch),
          std::to_string(t.n_threads),
          "0x0",
          "0",
          "50",
          t.type_k,
          t.type_v,
          std::to_string(t.n_gpu_layers),
          "0",
          "layer",
          "0",
          x.no_kv_offload ? "1" : "0",
          std::to_string(t.flash_attn),
          "auto",
          "0.00",
          "none",
          x.no_mmap ? "none" : "auto",
          "auto",
          "0",
          "0",
          "0",
          "0",
          "0",
          std::to_string(t.n_prompt),
          std::to_string(t.n_gen),
          std::to_string(t.n_depth),
          t.test_time,
          std::to_string(Mean(t.samples_ns)),
          std::to_string(Stdev(t.samples_ns)),
          std::to_string(Mean(ts)),
          std::to_string(Stdev(ts))};
}

/// `v` joined with ", " as llama-bench's join (an ostream's default formatting: "%g" for doubles).
template <typename T>
std::string JoinSamples(const std::vector<T>& v) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  return out.str();
}

/// A JSON string's contents as llama-bench's escape_json writes them ('"', '\\' and control
/// characters as \u00XX); UTF-8 passes through, and a byte that is not UTF-8 becomes \ufffd so the
/// output stays JSON (llama-bench writes such bytes as a broken \uffff.. escape).
std::string EscapeJson(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // A well-formed UTF-8 sequence (no overlong forms, surrogates or values above U+10FFFF).
      const size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                       : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4
                                                : 0;
      bool ok = n > 0 && i + n <= s.size();
      for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok && n >= 3) {
        const auto c1 = static_cast<unsigned char>(s[i + 1]);
        ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0) && !(c == 0xF0 && c1 < 0x90) &&
             !(c == 0xF4 && c1 >= 0x90);
      }
      if (ok) {
        out.append(s, i, n);
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  return out;
}

/// A field's value as llama-bench's JSON printers write it: strings quoted, booleans as words.
std::string JsonValue(FieldType type, const std::string& v) {
  if (type == FieldType::kString) return "\"" + EscapeJson(v) + "\"";
  if (type == FieldType::kBool) return v == "0" ? "false" : "true";
  return v;
}

/// The markdown table's columns, chosen as llama-bench's markdown_printer::print_header does.
struct MarkdownColumn {
  const char* field;  ///< the field (or "model", "size", "params", "backend", "test", "t/s")
  const char* title;  ///< its display name
  int width;          ///< printf width: < 0 left-aligned
};

std::vector<MarkdownColumn> MarkdownColumns(const BenchOptions& b, const BenchContext& x) {
  std::vector<MarkdownColumn> cols = {
      {"model", "model", -30}, {"size", "size", 10}, {"params", "params", 10}, {"backend", "backend", -10}};
  // llama-bench: a column when its list has several values or differs from the default.
  const auto differs = [](const std::vector<int>& v, int def) { return v.size() != 1 || v[0] != def; };
  if (x.machine.has_gpu) cols.push_back({"n_gpu_layers", "ngl", 3});
  if (b.threads.size() > 1 || !b.threads_default || !x.machine.has_gpu)
    cols.push_back({"n_threads", "threads", 7});
  if (differs(b.batches, 2048)) cols.push_back({"n_batch", "n_batch", 7});
  if (differs(b.ubatches, 512)) cols.push_back({"n_ubatch", "n_ubatch", 8});
  const auto f16 = std::vector<std::string>{"f16"};
  if (b.types_k != f16) cols.push_back({"type_k", "type_k", 6});
  if (b.types_v != f16) cols.push_back({"type_v", "type_v", 6});
  if (x.no_kv_offload) cols.push_back({"no_kv_offload", "nkvo", 13});
  if (differs(b.flash_attn, -1)) cols.push_back({"flash_attn", "fa", 3});
  if (x.no_mmap) cols.push_back({"load_mode", "lm", 10});
  cols.push_back({"test", "test", 15});
  cols.push_back({"t/s", "t/s", 20});
  return cols;
}

/// Prints the results in one of llama-bench's formats: the header first, each test as it finishes,
/// then the footer (llama-bench's printer classes).
class BenchPrinter {
 public:
  BenchPrinter(const BenchOptions& b, const BenchContext& x, std::vector<MarkdownColumn> cols)
      : b_(b), x_(x), cols_(std::move(cols)) {}

  void Header() {
    const auto& fields = Fields();
    if (b_.format == "md") {
      std::printf("|");
      for (const auto& c : cols_) std::printf(" %*s |", c.width, c.title);
      std::printf("\n|");
      for (const auto& c : cols_)
        std::printf(" %s%s |", std::string(std::abs(c.width) - 1, '-').c_str(), c.width > 0 ? ":" : "-");
      std::printf("\n");
    } else if (b_.format == "csv") {
      for (size_t i = 0; i < fields.size(); ++i) std::printf("%s%s", i ? "," : "", fields[i].first);
      std::printf("\n");
    } else if (b_.format == "json") {
      std::printf("[\n");
    } else if (b_.format == "sql") {
      std::printf("CREATE TABLE IF NOT EXISTS llama_bench (\n");
      for (size_t i = 0; i < fields.size(); ++i) {
        const FieldType t = fields[i].second;
        std::printf("  %s %s%s\n", fields[i].first,
                    t == FieldType::kString  ? "TEXT"
                    : t == FieldType::kFloat ? "REAL"
                                             : "INTEGER",
                    i + 1 < fields.size() ? "," : "");
      }
      std::printf(");\n\n");
    }
  }

  void Test(const BenchTest& t) {
    const auto& fields = Fields();
    const std::vector<std::string> values = FieldValues(t, x_);
    if (b_.format == "md") {
      Markdown(t, values);
    } else if (b_.format == "csv") {
      // llama-bench's escape_csv: every value quoted, a '"' doubled.
      for (size_t i = 0; i < values.size(); ++i) {
        std::string q;
        for (char ch : values[i]) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        std::printf("%s\"%s\"", i ? "," : "", q.c_str());
      }
      std::printf("\n");
    } else if (b_.format == "json") {
      std::printf("%s  {\n", first_ ? "" : ",\n");
      for (size_t i = 0; i < fields.size(); ++i)
        std::printf("    \"%s\": %s,\n", fields[i].first, JsonValue(fields[i].second, values[i]).c_str());
      std::printf("    \"samples_ns\": [ %s ],\n", JoinSamples(t.samples_ns).c_str());
      std::printf("    \"samples_ts\": [ %s ]\n", JoinSamples(t.Ts()).c_str());
      std::printf("  }");
    } else if (b_.format == "jsonl") {
      std::printf("{");
      for (size_t i = 0; i < fields.size(); ++i)
        std::printf("\"%s\": %s, ", fields[i].first, JsonValue(fields[i].second, values[i]).c_str());
      std::printf("\"samples_ns\": [ %s ],\"samples_ts\": [ %s ]}\n", JoinSamples(t.samples_ns).c_str(),
                  JoinSamples(t.Ts()).c_str());
    } else if (b_.format == "sql") {
      std::printf("INSERT INTO llama_bench (");
      for (size_t i = 0; i < fields.size(); ++i) std::printf("%s%s", i ? ", " : "", fields[i].first);
      std::printf(") VALUES (");
      // A quote inside a value is doubled (SQL's escape; llama-bench writes it as is).
      for (size_t i = 0; i < values.size(); ++i) {
        std::string q;
        for (char ch : values[i]) q += ch == '\'' ? std::string("''") : std::string(1, ch);
        std::printf("'%s'%s", q.c_str(), i + 1 < values.size() ? ", " : "");
      }
      std::printf(");\n");
    }
    first_ = false;  // the caller flushes (FlushStdout: a lost write is reported once)
  }

  void Footer() {
    if (b_.format == "md") {
      const std::string commit = stowage_git_describe();
      std::printf("\nbuild: %s (%d)\n", commit.empty() ? "unknown" : commit.c_str(), 0);
    } else if (b_.format == "json") {
      std::printf("\n]\n");
    }
  }

 private:
  void Markdown(const BenchTest& t, const std::vector<std::string>& values) {
    const auto& fields = Fields();
    std::printf("|");
    for (const auto& c : cols_) {
      const std::string field = c.field;
      std::string v;
      char buf[128];
      int width = c.width;
      if (field == "model") {
        v = x_.model.description;
      } else if (field == "size") {
        const double mib = x_.model.size / 1024.0 / 1024.0;
        std::snprintf(buf, sizeof buf, x_.model.size < (1ull << 30) ? "%.2f MiB" : "%.2f GiB",
                      x_.model.size < (1ull << 30) ? mib : mib / 1024.0);
        v = buf;
      } else if (field == "params") {
        std::snprintf(buf, sizeof buf, x_.model.params < 1000000000ull ? "%.2f M" : "%.2f B",
                      x_.model.params < 1000000000ull ? x_.model.params / 1e6 : x_.model.params / 1e9);
        v = buf;
      } else if (field == "backend") {
        v = x_.machine.backends;
      } else if (field == "test") {
        v = TestName(t);
      } else if (field == "t/s") {
        const std::vector<double> ts = t.Ts();
        std::snprintf(buf, sizeof buf, "%.2f ± %.2f", Mean(ts), Stdev(ts));
        v = buf;
        width += 1;  // as llama-bench: '±' is two bytes
      } else {
        for (size_t i = 0; i < fields.size(); ++i)
          if (field == fields[i].first) v = values[i];
      }
      std::printf(" %*s |", width, v.c_str());
    }
    std::printf("\n");
  }

  const BenchOptions& b_;
  const BenchContext& x_;
  std::vector<MarkdownColumn> cols_;
  bool first_ = true;
};

// The benchmark harness's one line (scripts/bench-vs-llamacpp.sh): the pp and tg tests' mean and
// standard deviation of tokens/s, and the peak resident memory.
void PrintJsonSummary(const std::vector<BenchTest>& tests) {
  double r[2][2] = {{0, 0}, {0, 0}};
  for (const auto& t : tests) {
    const int k = t.n_prompt > 0 ? 0 : 1;
    const std::vector<double> ts = t.Ts();
    r[k][0] = Mean(ts);
    r[k][1] = Stdev(ts);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("{\"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg_tps\": %.3f, \"tg_sd\": %.3f, \"maxrss_kib\": %ld}\n",
              r[0][0], r[0][1], r[1][0], r[1][1], ru.ru_maxrss);
}

/// The tests in llama-bench's order (get_cmd_params_instances: -ngl, -b, -ub, -ctk, -ctv, -fa, -t,
/// -d outermost to innermost, then each -p, each -n, each -pg); zeros of -p / -n are no test.
std::vector<BenchTest> Instances(const BenchOptions& b) {
  std::vector<BenchTest> out;
  for (int ngl : b.gpu_layers)
    for (int nb : b.batches)
      for (int nub : b.ubatches)
        for (const std::string& tk : b.types_k)
          for (const std::string& tv : b.types_v)
            for (int fa : b.flash_attn)
              for (int nt : b.threads)
                for (int nd : b.depths) {
                  BenchTest t;
                  t.n_depth = nd;
                  t.n_batch = nb;
                  t.n_ubatch = nub;
                  t.n_threads = nt;
                  t.n_gpu_layers = ngl;
                  t.flash_attn = fa;
                  t.type_k = tk;
                  t.type_v = tv;
                  const auto add = [&](int p, int n) {
                    t.n_prompt = p;
                    t.n_gen = n;
                    out.push_back(t);
                  };
                  for (int p : b.prompts)
                    if (p > 0) add(p, 0);
                  for (int n : b.gens)
                    if (n > 0) add(0, n);
                  for (const auto& [p, n] : b.pgs) add(p, n);
                }
  return out;
}

/// The session settings of a test planned on the fly: `c` with the test's context (llama-bench's
/// n_prompt + n_gen + n_depth unless -c), batch sizes, flash attention, offload (llama-bench's
/// negative -ngl: every layer) and threads.
CommonOptions TestOptions(const CommonOptions& c, bool ctx_given, const BenchTest& t) {
  CommonOptions ct = c;
  ct.threads = t.n_threads;
  if (!c.plan.empty()) return ct;
  if (!ctx_given) ct.n_ctx = static_cast<uint32_t>(t.n_prompt + t.n_gen + t.n_depth);
  ct.n_batch = static_cast<uint32_t>(t.n_batch);
  ct.n_ubatch = static_cast<uint32_t>(t.n_ubatch);
  ct.flash_attn = t.flash_attn < 0 ? "auto" : t.flash_attn ? "on" : "off";
  ct.cache_type_k = t.type_k;
  ct.cache_type_v = t.type_v;
  ct.n_gpu_layers = t.n_gpu_layers < 0 ? tools::kAllGpuLayers : t.n_gpu_layers;
  return ct;
}

/// Decodes as llama-bench's test_prompt (n tokens in batches of `n_batch`, the first BOS when the
/// vocabulary adds one, the others random) and test_gen (n tokens one at a time, BOS then random).
class BenchDecoder {
 public:
  BenchDecoder(Session& s, int32_t bos, int n_batch) : s_(s), bos_(bos), n_batch_(std::max(1, n_batch)) {}

  Status Prompt(int n) {
    std::vector<int32_t> toks;
    for (int done = 0; done < n; done += static_cast<int>(toks.size())) {
      toks.assign(static_cast<size_t>(std::min(n - done, n_batch_)), 0);
      for (size_t i = 0; i < toks.size(); ++i) toks[i] = done == 0 && i == 0 && bos_ >= 0 ? bos_ : Random();
      STOWAGE_RETURN_IF_ERROR(s_.Decode(toks, false, &logits_));
    }
    return Status::Ok();
  }
  Status Gen(int n) {
    int32_t tok = bos_ >= 0 ? bos_ : Random();
    for (int i = 0; i < n; ++i) {
      STOWAGE_RETURN_IF_ERROR(s_.Decode({tok}, false, &logits_));
      tok = Random();
    }
    return Status::Ok();
  }

 private:
  int32_t Random() { return static_cast<int32_t>(rng_() % static_cast<uint64_t>(s_.n_vocab())); }

  Session& s_;
  int32_t bos_;
  int n_batch_;
  std::mt19937_64 rng_{1};
  std::vector<float> logits_;
};

/// Runs test `t` as llama-bench: a warm-up (the prompt, one generated token), then `reps` timed runs,
/// each after clearing the KV cache and filling it with n_depth tokens (untimed).
Status RunTest(Session& s, int32_t bos, const BenchOptions& b, BenchTest* t) {
  // llama_decode calls of at most n_batch tokens (the context's n_batch: at most n_ctx).
  BenchDecoder d(s, bos, std::min<int>(t->n_batch, static_cast<int>(s.n_ctx())));
  s.Reset();
  if (b.warmup) {
    if (t->n_prompt > 0) STOWAGE_RETURN_IF_ERROR(d.Prompt(t->n_prompt).WithPrefix("warm-up"));
    if (t->n_gen > 0) STOWAGE_RETURN_IF_ERROR(d.Gen(1).WithPrefix("warm-up"));
  }
  s.ResetOpProfile();
  for (int r = 0; r < b.reps; ++r) {
    s.Reset();
    if (t->n_depth > 0) STOWAGE_RETURN_IF_ERROR(d.Prompt(t->n_depth).WithPrefix("depth"));
    const auto t0 = Clock::now();
    if (t->n_prompt > 0) STOWAGE_RETURN_IF_ERROR(d.Prompt(t->n_prompt));
    if (t->n_gen > 0) STOWAGE_RETURN_IF_ERROR(d.Gen(t->n_gen));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    t->samples_ns.push_back(static_cast<uint64_t>(std::max<int64_t>(ns, 1)));
  }
  t->profile = s.OpProfile();
  return Status::Ok();
}

/// The context, batch sizes, cache types and flash attention of the --plan, for the fields (a plan
/// fixes them; the bench flags cannot change them).
struct PlanSettings {
  int n_ctx = 0, n_batch = 0, n_ubatch = 0, flash_attn = 0;
  std::string type_k, type_v;
};

Result<PlanSettings> ReadPlanSettings(const std::string& path) {
  STOWAGE_ASSIGN_OR_RETURN(std::unique_ptr<PlanFile> plan, PlanFile::Load(path));
  const plan::ContextParams* ctx = plan->root().context();
  if (ctx == nullptr) return DataLoss(path + ": the plan has no context parameters");
  PlanSettings p;
  p.n_ctx = static_cast<int>(ctx->n_ctx());
  p.n_batch = static_cast<int>(ctx->n_batch());
  p.n_ubatch = static_cast<int>(ctx->n_ubatch());
  p.flash_attn = ctx->flash_attn() ? 1 : 0;
  p.type_k = GgmlTypeName(static_cast<GgmlType>(ctx->type_k()));
  p.type_v = GgmlTypeName(static_cast<GgmlType>(ctx->type_v()));
  return p;
}

}  // namespace

Result<std::vector<int>> ParseIntList(const std::string& text, const std::string& name, int lo, int hi) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  // A number of the item: digits, with a '-' sign only where `sign` (the first value, when lo < 0).
  auto num = [&](const std::string& v, int* x, bool sign) -> bool {
    const size_t digits = sign && !v.empty() && v[0] == '-' ? 1 : 0;
    if (v.size() <= digits || v.size() > 9 + digits ||
        v.find_first_not_of("0123456789", digits) != std::string::npos)
      return false;
    *x = std::stoi(v);
    return *x >= lo && *x <= hi;
  };
  while (std::getline(ss, item, ',')) {
    const auto bad = [&]() {
      return InvalidArgument(name + ": expected an integer from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + " or a range first-last[+step|*factor], found '" +
                             tools::ShownValue(item) + "'");
    };
    const bool sign = lo < 0;
    const size_t dash = item.find('-', sign ? 1 : 0);
    int first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!num(item, &first, sign)) return bad();
      out.push_back(first);
      continue;
    }
    const size_t op = item.find_first_of("+*", dash);
    if (!num(item.substr(0, dash), &first, sign) ||
        !num(item.substr(dash + 1, op == std::string::npos ? std::string::npos : op - dash - 1), &last,
             false) ||
        last < first)
      return bad();
    const bool times = op != std::string::npos && item[op] == '*';
    int step = 1;
    if (op != std::string::npos &&
        (!num(item.substr(op + 1), &step, false) || step < (times ? 2 : 1) || (times && first < 1)))
      return bad();
    for (int64_t v = first; v <= last; v = times ? v * step : v + step) {
      out.push_back(static_cast<int>(v));
      if (out.size() > 4096) return InvalidArgument(name + ": '" + item + "' makes more than 4096 values");
    }
  }
  if (out.empty()) return InvalidArgument(name + ": no value");
  return out;
}

CLI::App* AddBench(CLI::App* app, BenchFlags* f) {
  auto* bench = app->add_subcommand("bench", "llama-bench: pp and tg speed over lists of settings");
  bench->footer(
      "Also takes the options before the subcommand: -m, --plan, -c, -nkvo, --no-mmap, --no-repack, "
      "--huge-pages, --llamacpp-numerics, --cpu-isa, --llamacpp-compat (and -t, -ngl, -fa, -b, -ub, -ctk, "
      "-ctv as "
      "single values). Lists as llama-bench: 128,512 or 64-512*2 or 1-4+1; a repeated option adds its "
      "values.");
  const auto list = [&](const char* names, std::vector<std::string>* v, const std::string& what) {
    bench->add_option(names, *v, what)->allow_extra_args(false)->take_all();
  };
  list("-p,--n-prompt", &f->prompts, "prompt tokens of the pp tests (0 = none; default 512)");
  list("-n,--n-gen", &f->gens, "generated tokens of the tg tests (0 = none; default 128)");
  list("-d,--n-depth", &f->depths, "tokens in the KV cache before each test (default 0)");
  list("--pg", &f->pgs, "-pg pp,tg: a prompt of pp tokens then tg generated ones in one test (repeatable)");
  list("-t,--threads", &f->threads, "CPU threads (default: the physical cores, as llama-bench)");
  list("--n-gpu-layers", &f->gpu_layers,
       "-ngl: layers on the GPUs (default -1: every layer, as llama-bench)");
  list("--flash-attn", &f->flash_attn, "-fa: flash attention, on|off|auto or 1|0|-1 (default auto)");
  list("-b,--batch-size", &f->batches, "logical batch size (default 2048)");
  list("--ubatch-size", &f->ubatches, "-ub: physical batch size (default 512)");
  list("--cache-type-k", &f->types_k,
       "-ctk: KV cache type for K: f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (default f16)");
  list("--cache-type-v", &f->types_v, "-ctv: KV cache type for V (default f16; quantized ones need -fa on)");
  bench->add_option("-r,--repetitions", f->reps, "timed repetitions of each test")
      ->check(tools::IntegerIn(1, 1000000));
  bench->add_option("-o,--output", f->format, "output format: md, csv, json, jsonl, sql (llama-bench's)")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl", "sql"}));
  bench->add_flag("--no-warmup", f->no_warmup, "no warm-up run before each test's repetitions");
  bench->add_flag(
      "--json", f->json,
      "one JSON line for the benchmark harness: pp/tg tokens per second (mean, sd) and peak resident "
      "KiB (one value of each list)");
  bench
      ->add_flag(
          "--profile", f->profile,
          "after the table, host time per op and per token of each test (every node timed; not with --json)")
      ->excludes("--json");
  return bench;
}

namespace {

// One -pg value, "pp,tg": two token counts >= 1 (the values of repeated -pg are kept apart).
Result<std::pair<int, int>> ParsePromptGen(const std::string& v) {
  const size_t comma = v.find(',');
  auto pp = ParseIntList(v.substr(0, comma), "-pg", 1, kMaxTokens / 2);
  auto tg = comma == std::string::npos
                ? Result<std::vector<int>>(InvalidArgument("-pg: '" + v + "' is not pp,tg"))
                : ParseIntList(v.substr(comma + 1), "-pg", 1, kMaxTokens / 2);
  if (!pp.ok() || !tg.ok() || pp->size() != 1 || tg->size() != 1)
    return InvalidArgument("-pg: '" + v + "' is not pp,tg (two token counts >= 1, e.g. -pg 512,128)");
  return std::pair<int, int>{pp->front(), tg->front()};
}

// -fa's list: llama.cpp's truthy (on, enabled, true, 1), falsy (off, disabled, false, 0) and auto
// (auto, -1) words, as llama_flash_attn_type values.
Result<std::vector<int>> ParseFlashAttnList(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string v;
  while (std::getline(ss, v, ',')) {
    if (v == "on" || v == "enabled" || v == "true" || v == "1")
      out.push_back(1);
    else if (v == "off" || v == "disabled" || v == "false" || v == "0")
      out.push_back(0);
    else if (v == "auto" || v == "-1")
      out.push_back(-1);
    else
      return InvalidArgument("-fa/--flash-attn: expected on, off or auto (or 1, 0, -1), found '" +
                             tools::ShownValue(v) + "'");
  }
  if (out.empty()) return InvalidArgument("-fa/--flash-attn: no value");
  return out;
}

// The values of a repeated list option, parsed; `def` when it was not given.
Result<std::vector<int>> ListOr(const std::vector<std::string>& given, const std::string& name, int lo,
                                int hi, std::vector<int> def) {
  if (given.empty()) return def;
  return ParseIntList(tools::JoinValues(given), name, lo, hi);
}

}  // namespace

Result<BenchOptions> ParseBenchOptions(const CLI::App& app, const CLI::App& bench, const CommonOptions& c,
                                       const BenchFlags& f) {
  BenchOptions b;
  // At most kMaxTokens / 4 each: the context planned on the fly is a test's -p + -n + -d.
  STOWAGE_ASSIGN_OR_RETURN(b.prompts, ListOr(f.prompts, "-p/--n-prompt", 0, kMaxTokens / 4, b.prompts));
  STOWAGE_ASSIGN_OR_RETURN(b.gens, ListOr(f.gens, "-n/--n-gen", 0, kMaxTokens / 4, b.gens));
  STOWAGE_ASSIGN_OR_RETURN(b.depths, ListOr(f.depths, "-d/--n-depth", 0, kMaxTokens / 4, b.depths));
  for (const std::string& v : f.pgs) {
    STOWAGE_ASSIGN_OR_RETURN(auto pg, ParsePromptGen(v));
    b.pgs.push_back(pg);
  }
  // Settings given before the subcommand are one-value lists; the subcommand's own lists win.
  const auto given = [&](const char* name) { return app.count(name) > 0; };
  const int threads_before = given("--threads") ? c.threads : 0;
  b.threads_default = f.threads.empty() && !given("--threads");
  STOWAGE_ASSIGN_OR_RETURN(b.threads, ListOr(f.threads, "-t/--threads", 0, MaxThreads(), {threads_before}));
  const bool plan = !c.plan.empty();
  for (const auto& [flag, name] :
       {std::pair<const std::vector<std::string>*, const char*>{&f.gpu_layers, "-ngl"},
        {&f.flash_attn, "-fa"},
        {&f.batches, "-b"},
        {&f.ubatches, "-ub"},
        {&f.types_k, "-ctk"},
        {&f.types_v, "-ctv"}})
    if (plan && !flag->empty())
      return InvalidArgument(std::string(name) +
                             " applies only when planning on the fly; the plan given with --plan fixes it "
                             "(re-plan with plan-model)");
  const int ngl_before = !given("--n-gpu-layers")                 ? -1
                         : c.n_gpu_layers == tools::kAllGpuLayers ? -1
                                                                  : c.n_gpu_layers;
  STOWAGE_ASSIGN_OR_RETURN(b.gpu_layers, ListOr(f.gpu_layers, "-ngl/--n-gpu-layers", -tools::kAllGpuLayers,
                                                tools::kAllGpuLayers, {ngl_before}));
  if (!f.flash_attn.empty()) {
    STOWAGE_ASSIGN_OR_RETURN(b.flash_attn, ParseFlashAttnList(tools::JoinValues(f.flash_attn)));
  } else if (given("--flash-attn")) {
    b.flash_attn = {c.flash_attn == "auto" ? -1 : c.flash_attn == "on" ? 1 : 0};
  }
  STOWAGE_ASSIGN_OR_RETURN(b.batches, ListOr(f.batches, "-b/--batch-size", 1, kMaxTokens,
                                             {given("--batch-size") ? static_cast<int>(c.n_batch) : 2048}));
  STOWAGE_ASSIGN_OR_RETURN(b.ubatches, ListOr(f.ubatches, "-ub/--ubatch-size", 1, kMaxTokens,
                                              {given("--ubatch-size") ? static_cast<int>(c.n_ubatch) : 512}));
  // Cache types: llama-bench's comma lists of type names; given before the subcommand, one value.
  for (const auto& [given_list, before, name, out] :
       {std::tuple<const std::vector<std::string>*, const std::string*, const char*,
                   std::vector<std::string>*>{&f.types_k, &c.cache_type_k, "-ctk/--cache-type-k", &b.types_k},
        {&f.types_v, &c.cache_type_v, "-ctv/--cache-type-v", &b.types_v}}) {
    std::vector<std::string> types;
    std::stringstream ss(given_list->empty() ? *before : tools::JoinValues(*given_list));
    for (std::string v; std::getline(ss, v, ',');) {
      // llama-bench's ggml_type_from_name knows these (no f32; a value before the subcommand is
      // plan-model's -ctk, checked when planning).
      static const char* const kTypes[] = {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"};
      if (!given_list->empty() && std::find(std::begin(kTypes), std::end(kTypes), v) == std::end(kTypes))
        return InvalidArgument(
            std::string(name) +
            ": expected f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl (llama-bench's), "
            "found '" +
            tools::ShownValue(v) + "'");
      types.push_back(v);
    }
    if (types.empty()) return InvalidArgument(std::string(name) + ": no value");
    *out = types;
  }
  const auto none = [](const std::vector<int>& v) {
    return std::all_of(v.begin(), v.end(), [](int x) { return x == 0; });
  };
  if (none(b.prompts) && none(b.gens) && b.pgs.empty())
    return InvalidArgument("bench: nothing to measure (-p/--n-prompt and -n/--n-gen are both 0)");
  const bool lists = b.prompts.size() > 1 || b.gens.size() > 1 || b.threads.size() > 1 || !b.pgs.empty() ||
                     b.depths.size() > 1 || b.gpu_layers.size() > 1 || b.flash_attn.size() > 1 ||
                     b.batches.size() > 1 || b.ubatches.size() > 1 || b.types_k.size() > 1 ||
                     b.types_v.size() > 1;
  if (f.json && lists)
    return InvalidArgument("bench: --json takes one value of each list (use -o json for lists)");
  if (f.json && bench.count("--output") > 0)
    return InvalidArgument("bench: --json and -o/--output exclude each other");
  if (f.profile && f.format != "md")
    return InvalidArgument("bench: --profile prints markdown tables after the results: only with -o md");
  // The session's limit, checked for every value before the first test runs (0: all hardware threads).
  for (int t : b.threads) STOWAGE_RETURN_IF_ERROR(CheckThreadCount(t, "-t/--threads:"));
  b.reps = f.reps;
  b.warmup = !f.no_warmup;
  b.json_summary = f.json;
  b.format = f.format;
  b.profile = f.profile;
  return b;
}

int Bench(const CommonOptions& c, bool ctx_given, const BenchOptions& opts) {
  BenchOptions b = opts;
  BenchContext x;
  x.machine = ProbeBenchMachine();
  for (int& t : b.threads)
    if (t <= 0 && b.threads_default) t = x.machine.physical_cores;
  for (int& t : b.threads)
    if (t <= 0) t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto gguf = OpenModel(c);
  if (!gguf.ok()) return Fail(gguf.status());
  x.model.filename = c.model;
  for (const auto& t : (*gguf)->tensors()) {
    x.model.size += t.nbytes;
    x.model.params += static_cast<uint64_t>(t.nelements());
  }
  x.model.description = ModelDescription(**gguf);
  x.no_kv_offload = c.no_kv_offload;
  x.no_mmap = c.no_mmap;
  // BOS first, as llama-bench, when the vocabulary adds one (a model without a tokenizer: none).
  int32_t bos = -1;
  if (auto tok = Tokenizer::FromGguf(**gguf); tok.ok() && tok->add_bos()) bos = tok->bos();

  std::vector<BenchTest> tests = Instances(b);
  // The context every test needs, checked before any output where it is known up front.
  std::optional<PlanSettings> plan;
  if (!c.plan.empty()) {
    auto p = ReadPlanSettings(c.plan);
    if (!p.ok()) return Fail(p.status());
    plan = *p;
  }
  const int known_ctx = plan ? plan->n_ctx : ctx_given ? static_cast<int>(c.n_ctx) : 0;
  // Planned on the fly without -c, a test's context is its own n_prompt + n_gen + n_depth (as
  // llama-bench's); one beyond the model's training context (a typo such as -d 1000000) would plan
  // and fill a cache of that size for minutes before its first line, so it is refused up front.
  uint32_t n_ctx_train = 0;
  if (known_ctx == 0) {
    auto arch = (*gguf)->GetString("general.architecture");
    auto train = arch.ok() ? (*gguf)->GetU32Or(*arch + ".context_length", 0) : Result<uint32_t>(0u);
    if (train.ok()) n_ctx_train = *train;
  }
  for (BenchTest& t : tests) {
    if (n_ctx_train > 0 && static_cast<int64_t>(t.n_prompt) + t.n_gen + t.n_depth > n_ctx_train)
      return Fail(OutOfRange("test " + TestName(t) + " needs " +
                             std::to_string(t.n_prompt + t.n_gen + t.n_depth) +
                             " tokens of context, more than the model's training context of " +
                             std::to_string(n_ctx_train) + " (give -c to run it in a context that large)"));
    if (known_ctx > 0 && t.n_prompt + t.n_gen + t.n_depth > known_ctx)
      return Fail(
          OutOfRange("test " + TestName(t) + " needs " + std::to_string(t.n_prompt + t.n_gen + t.n_depth) +
                     " tokens of context, more than the " + std::to_string(known_ctx) + " of " +
                     (plan ? std::string("the plan (re-plan with plan-model -c)") : std::string("-c"))));
    if (plan) {
      t.n_batch = plan->n_batch;
      t.n_ubatch = plan->n_ubatch;
      t.flash_attn = plan->flash_attn;
      t.type_k = plan->type_k;
      t.type_v = plan->type_v;
    }
  }
  if (plan) {  // the plan's cache types, for the columns
    b.types_k = {plan->type_k};
    b.types_v = {plan->type_v};
  }
  BenchPrinter printer(b, x, MarkdownColumns(b, x));
  if (!b.json_summary) printer.Header();
  if (!FlushStdout()) return 1;  // the header before the first test's session loads, as llama-bench
  // A session per test (llama-bench's context per test), kept while the next test's settings match.
  std::unique_ptr<Session> session;
  std::string session_key;
  for (BenchTest& t : tests) {
    const CommonOptions ct = TestOptions(c, ctx_given, t);
    const std::string key = std::to_string(ct.n_ctx) + "/" + std::to_string(ct.n_batch) + "/" +
                            std::to_string(ct.n_ubatch) + "/" + ct.flash_attn + "/" +
                            std::to_string(ct.n_gpu_layers) + "/" + std::to_string(ct.threads) + "/" +
                            ct.cache_type_k + "/" + ct.cache_type_v;
    if (!session || key != session_key) {
      session.reset();
      auto s = OpenSession(ct, *gguf, true, b.profile);
      if (!s.ok()) return Fail(s.status().WithPrefix(TestName(t)));
      session = std::move(*s);
      session_key = key;
    }
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::strftime(when, sizeof when, "%FT%TZ", &utc);
    t.test_time = when;
    if (Status st = RunTest(*session, bos, b, &t); !st.ok()) return Fail(st.WithPrefix(TestName(t)));
    if (!b.json_summary) printer.Test(t);
    if (!FlushStdout()) return 1;
  }
  if (b.json_summary) {
    PrintJsonSummary(tests);
    return 0;
  }
  printer.Footer();
  if (b.profile)
    for (const auto& t : tests) {
      // A prompt of n tokens runs the "pp" graph (one token: "tg", as llama.cpp's graphs).
      if (t.n_prompt > 0 && t.n_gen > 0) continue;  // a -pg test mixes both graphs
      if (t.n_prompt > 0)
        PrintProfile(t.profile, t.n_prompt == 1 ? "tg" : "pp", "pp", t.n_prompt, b.reps);
      else
        PrintProfile(t.profile, "tg", "tg", t.n_gen, b.reps);
    }
  return 0;
}

}  // namespace stowage::run
