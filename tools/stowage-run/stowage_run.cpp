// stowage-run: executes a plan (or plans on the fly for this machine) and generates text,
// measures perplexity, or benchmarks prompt processing and generation (llama-bench style).
// This file is the command line: each subcommand's options and the checks between them;
// generate.h, perplexity.h and bench.h run what it asks for.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"
#include "chat.h"
#include "cli_numbers.h"
#include "generate.h"
#include "hosts.h"
#include "llama_args.h"
#include "output_path.h"
#include "perplexity.h"
#include "planner_args.h"
#include "prompt_escapes.h"
#include "run_common.h"
#include "stdout_check.h"
#include "stowage/runtime/chat_template.h"
#include "stowage/runtime/session.h"

namespace stowage::run {
namespace {

// Generation's flags: the options before any subcommand other than the common ones.
struct GenerateFlags {
  GenerateOptions options;  ///< prompt (-p), -n, the sampler, --ignore-eos, --verbose-prompt, -q
  std::string prompt_file;  ///< -f
  bool escape = true;       ///< -e / --no-escape (perplexity's -f text: only with -e)
  bool no_display_prompt = false;
  int64_t seed = -1;               ///< -s: -1 or 4294967295 for a random seed
  bool conversation = false;       ///< -cnv: the chat mode (chat.h)
  std::string system_prompt;       ///< -sys
  std::string chat_template;       ///< --chat-template
  std::string chat_template_file;  ///< --chat-template-file
};

// The perplexity subcommand's flags.
struct PerplexityFlags {
  std::string text_file;  ///< -f
  std::string kl_base;    ///< --kl-divergence-base
  bool kl_divergence = false;
  int max_chunks = -1;  ///< --chunks
  int output_type = 0;  ///< --ppl-output-type
};

// The options every subcommand takes: the model, the plan or planning on the fly, the session.
void AddCommonOptions(CLI::App* a, CommonOptions* c) {
  a->add_option("-m,--model", c->model, "GGUF model file")->required();
  a->add_option("--plan", c->plan,
                "plan file made by plan-model (default: plan on the fly for this machine)");
  // llama.cpp's -t -1 is its default; any larger count than the session's 4x the hardware threads
  // is refused (CheckThreadCount: more only oversubscribes, and huge counts crashed in OpenMP).
  a->add_option(
       "-t,--threads", c->threads,
       "CPU threads (0 or -1 = the default, as llama.cpp's -1: all hardware threads; at most 4x them)")
      ->check(tools::IntegerIn(-1, MaxThreads()));
  a->add_option("-c,--ctx-size", c->n_ctx,
                "context size when planning on the fly (0 = the model's training context; default: the "
                "model's to generate text, as llama-cli 2026 (4096 with --llamacpp-compat feb25); 512 for "
                "perplexity, as llama-perplexity; each test's "
                "-p + -n + -d for bench, as llama-bench)")
      ->check(tools::IntegerIn(0, kMaxTokens))
      ->default_str("");  // "not given": the default depends on the subcommand (above), not 0
  a->add_option("-b,--batch-size", c->n_batch, "logical batch size when planning on the fly")
      ->check(tools::IntegerIn(1, kMaxTokens));
  a->add_option("--ubatch-size", c->n_ubatch, "physical batch size when planning on the fly")
      ->check(tools::IntegerIn(1, kMaxTokens));
  a->add_option("--n-gpu-layers", c->n_gpu_layers,
                "layers to offload when planning on the fly: N, 'all' or <= -2, 'auto' or -1 (fit to the "
                "GPUs' free memory, as plan-model --fit; the default with --llamacpp-compat 2026, as "
                "llama-cli 2026; 0 with feb25; bench: every layer, as llama-bench)")
      ->transform(tools::GpuLayersValue())
      ->default_str("");  // "not given": the default depends on --llamacpp-compat (above)
  a->add_option("--cache-type-k", c->cache_type_k,
                "KV cache type for K when planning on the fly (f16, f32, bf16, q8_0, q4_0, q4_1, iq4_nl, "
                "q5_0, q5_1)");
  a->add_option(
      "--cache-type-v", c->cache_type_v,
      "KV cache type for V when planning on the fly (f16, f32, bf16; the quantized ones need -fa on)");
  a->add_option(
       "--flash-attn", c->flash_attn,
       "flash attention when planning on the fly: on, off (the default with --llamacpp-compat feb25), or "
       "auto (on unless a layer's attention would run on another device than the layer, as plan-model; "
       "the default with 2026)")
      ->transform(tools::FlashAttnValue());
  tools::AddLlamacppCompatOption(*a, c->llamacpp_compat)
      ->description(
          "when planning on the fly, the llama.cpp to follow, as plan-model: 2026 (the default: its "
          "graph rules, -fa auto, -ngl auto, -c 0 to generate text) or feb25 (February 2025's, the "
          "seed's behaviour: -fa off, -ngl 0, -c 4096 to generate text)");
  tools::AddOptLevelOption(*a, c->opt_level,
                           "when planning on the fly, the compiler stage as plan-model -O: ");
  a->add_flag("--no-mmap", c->no_mmap,
              "when planning on the fly: load weights into allocated buffers instead of mapping the file");
  a->add_flag("--no-repack", c->no_repack, "when planning on the fly: no CPU_REPACK buffer type");
  a->add_flag("--no-kv-offload", c->no_kv_offload, "when planning on the fly: KV cache on the CPU");
  a->add_flag("--swa-full", c->swa_full,
              "when planning on the fly: full-size SWA cache for gemma2/gemma3 (n_ctx cells, llama.cpp "
              "--swa-full) instead of the sliding-window ring");
  a->add_flag(
      "--no-fit-check", c->no_fit_check,
      "when planning on the fly: run even when the plan does not fit this machine's memory (a warning "
      "instead of plan-model's error)");
  a->add_flag("--huge-pages", c->huge_pages,
              "copy mapped weights into transparent huge pages at load (faster token generation; the weights "
              "then take anonymous memory instead of the shared page cache)");
  a->add_flag("--llamacpp-numerics", c->llamacpp_numerics,
              "CPU matrix products sum in llama.cpp's CPU orders in prompt processing too, so logits and "
              "greedy text stay bit-identical to llama.cpp's over long prompts (slower prompt processing)");
  a->add_option(
       "--cpu-isa", c->cpu_isa,
       "highest instruction set of the CPU kernels: avx512vnni (the default: the best the CPU has), "
       "avx512 (AVX-512 without VNNI, as a Skylake-X), avx2 (llama.cpp's haswell variant, as a Zen 3) or "
       "scalar; never above what the CPU supports")
      ->check(CLI::IsMember({"avx512vnni", "avx512", "avx2", "scalar"}));
  a->add_option(
       "--mpi-timeout", c->mpi_timeout,
       "under mpirun (a plan made with plan-model --cluster, rank h = host h): the seconds a rank waits "
       "for another before every rank ends with an error")
      ->check(tools::NumberIn(0.001, 86400));
}

// Text generation's options (stowage-run without a subcommand).
void AddGenerateOptions(CLI::App* app, GenerateFlags* g) {
  auto* prompt_opt = app->add_option("-p,--prompt", g->options.prompt, "prompt text");
  app->add_option(
         "-f,--file", g->prompt_file,
         "a file whose text is the prompt (one final newline is dropped, as llama-cli; a regular file of at "
         "most 256 MiB)")
      ->excludes(prompt_opt);
  app->add_flag("-e,--escape,!--no-escape", g->escape,
                "expand \\n, \\r, \\t, \\', \\\", \\\\ and \\xHH in the prompt (llama.cpp's default; "
                "--no-escape keeps them); in perplexity's text only when given, as llama-perplexity");
  app->add_flag("--ignore-eos", g->options.ignore_eos,
                "never sample an end-of-generation token (generate -n tokens)");
  app->add_flag("--no-display-prompt", g->no_display_prompt,
                "do not echo the prompt before the generated text");
  app->add_flag("--verbose-prompt", g->options.verbose_prompt,
                "print the prompt's tokens (id -> piece) on stderr before generating");
  app->add_option("--dump-logits", g->options.dump_logits,
                  "write every decode's logits (float32 rows, native byte order) to this file, which appears "
                  "whole when generation ends (never an input file); across hosts, the rank holding the "
                  "output writes it");
  app->add_option("-n,--n-predict", g->options.n_predict,
                  "tokens to generate (-1 = until the end of text or a full context)")
      ->check(tools::IntegerIn(-1, kMaxTokens));
  app->add_option("--temp", g->options.sampler.temperature, "temperature (<= 0 = greedy)")
      ->check(tools::NumberIn(-1e4, 1e4));
  app->add_option("--top-k", g->options.sampler.top_k, "top-k (0 = off)")
      ->check(tools::IntegerIn(-2147483647, 2147483647));
  app->add_option("--top-p", g->options.sampler.top_p, "top-p (1 = off)")->check(tools::NumberIn(0, 1));
  app->add_option("--min-p", g->options.sampler.min_p, "min-p (0 = off)")->check(tools::NumberIn(0, 1));
  app->add_option("--repeat-last-n", g->options.sampler.penalty_last_n,
                  "last n tokens (prompt included) the penalties look at (0 = off, -1 = the context)")
      ->check(tools::IntegerIn(-1, 2147483647));
  app->add_option("--repeat-penalty", g->options.sampler.penalty_repeat,
                  "divide a repeated token's logit by this (a logit <= 0 is multiplied by it; 1 = off)")
      ->check(tools::PositiveNumberUpTo(1e4));
  app->add_option("--presence-penalty", g->options.sampler.penalty_present,
                  "subtract this from the logit of a repeated token (0 = off)")
      ->check(tools::NumberIn(-1e4, 1e4));
  app->add_option("--frequency-penalty", g->options.sampler.penalty_freq,
                  "subtract this times its count from the logit of a repeated token (0 = off)")
      ->check(tools::NumberIn(-1e4, 1e4));
  app->add_option("-s,--seed", g->seed, "random seed (-1 or 4294967295: a random seed, printed)")
      ->check(tools::IntegerIn(-1, UINT32_MAX));
  app->add_flag("-q,--quiet", g->options.quiet,
                "no log lines, seed or timings on stderr: only the text (the prompt, unless "
                "--no-display-prompt, then the generated text)");
  app->add_flag("--conversation", g->conversation,
                "chat (llama-cli -cnv): user turns from stdin, one a line, formatted by the chat template; "
                "-p is the first turn; each reply ends at the end-of-generation token or -n (default -1)");
  app->add_option("--system-prompt", g->system_prompt,
                  "the chat's system message (llama-cli -sys; with -cnv)");
  auto* tmpl = app->add_option(
      "--chat-template", g->chat_template,
      "the chat template (with -cnv): a built-in one by llama.cpp's name (chatml, llama3, gemma, phi3, "
      "mistral-v7, gpt-oss, ...) or a template text whose family is detected; default: the model's "
      "tokenizer.chat_template, else chatml");
  app->add_option("--chat-template-file", g->chat_template_file,
                  "a file whose text is the chat template (with -cnv), as --chat-template (llama.cpp's flag)")
      ->excludes(tmpl);
}

// The text shared by the subcommands' --help footers.
constexpr const char* kSubcommandFooter =
    "Also takes the options before the subcommand: -m, --plan, -t, -c, -b, -ub, -ngl, -ctk, -ctv, -O, "
    "--huge-pages, --llamacpp-numerics, --cpu-isa";

CLI::App* AddPerplexity(CLI::App* app, PerplexityFlags* f) {
  auto* ppl = app->add_subcommand("perplexity", "perplexity of a text file (llama-perplexity style)");
  ppl->footer(std::string(kSubcommandFooter) + ", -e/--escape.");
  ppl->add_option(
      "-f,--file", f->text_file,
      "text file (one final newline dropped, escapes kept unless -e, as llama-perplexity; a regular file "
      "of at most 256 MiB); required, except with --kl-divergence");
  ppl->add_option(
      "--kl-divergence-base,--save-all-logits", f->kl_base,
      "base file of log-probabilities (llama-perplexity's format): written while scoring -f, or read "
      "by --kl-divergence");
  ppl->add_flag(
      "--kl-divergence", f->kl_divergence,
      "compare the model's distributions with the --kl-divergence-base file's (its tokens and n_ctx; -f is "
      "not read): KL divergence, PPL ratio, top token agreement, as llama-perplexity");
  ppl->add_option(
         "--ppl-output-type", f->output_type,
         "0: llama-perplexity's '[1]ppl,[2]ppl,...' line; 1: a line per chunk of its first token, the "
         "perplexity, the mean and the standard error of the negative log-likelihood (nats)")
      ->check(CLI::IsMember({0, 1}));
  ppl->add_option("--chunks", f->max_chunks, "score at most this many chunks (-1 = all)")
      ->check(tools::IntegerIn(-1, 2147483647) &
              CLI::Validator(
                  [](std::string& v) {
                    return v == "0" ? std::string(
                                          "expected a chunk count from 1 to 2147483647 or -1 (all), found 0 "
                                          "(no chunk to score)")
                                    : std::string();
                  },
                  ""));
  return ppl;
}

// Flags given where they would be ignored, refused: with --plan the planning flags (the context,
// batch sizes and offload are the plan's); with a subcommand (`sub`, or null) generation's prompt
// and sampler flags.
Status CheckFlagsApply(const CLI::App& app, const CommonOptions& c, const CLI::App* sub) {
  STOWAGE_RETURN_IF_ERROR(CheckPlanningFlagsUnused(app, c));
  if (sub != nullptr)
    for (const char* name : {"--prompt",
                             "--file",
                             "--n-predict",
                             "--temp",
                             "--top-k",
                             "--top-p",
                             "--min-p",
                             "--seed",
                             "--repeat-last-n",
                             "--repeat-penalty",
                             "--presence-penalty",
                             "--frequency-penalty",
                             "--ignore-eos",
                             "--no-display-prompt",
                             "--verbose-prompt",
                             "--conversation",
                             "--system-prompt",
                             "--chat-template",
                             "--chat-template-file",
                             "--dump-logits"})
      if (app.count(name) > 0)
        return InvalidArgument(std::string(name) + " applies to text generation, not to " + sub->get_name());
  return Status::Ok();
}

// perplexity: scores -f, writing --kl-divergence-base when given, or with --kl-divergence compares
// the model with that file.
int RunPerplexity(const CLI::App& app, const CLI::App& ppl, const CommonOptions& c, const PerplexityFlags& f,
                  bool escape) {
  const bool has_base = ppl.count("--kl-divergence-base") > 0;
  if (has_base && f.kl_base.empty()) return Fail(InvalidArgument("--kl-divergence-base '': no file name"));
  if (f.kl_divergence) {
    if (!has_base)
      return Fail(InvalidArgument(
          "--kl-divergence needs --kl-divergence-base FILE: the log-probabilities of the base "
          "model, written by perplexity -f TEXT --kl-divergence-base FILE"));
    if (ppl.count("--file") > 0)  // llama-perplexity ignores it too
      std::fprintf(stderr, "stowage-run: note: --kl-divergence takes its tokens from %s; -f %s is not read\n",
                   f.kl_base.c_str(), f.text_file.c_str());
    return KlDivergence(c, app.count("--ctx-size") > 0, f.kl_base, f.max_chunks);
  }
  if (ppl.count("--file") == 0)
    return Fail(InvalidArgument(
        "perplexity: -f/--file is required (the text to score; only --kl-divergence reads its "
        "tokens from --kl-divergence-base)"));
  // The base file replaces what is at its path: never one of the inputs.
  if (Status st = tools::CheckOutputIsNotInput("--kl-divergence-base", f.kl_base,
                                               {&c.model, &c.plan, &f.text_file}, "the base");
      has_base && !st.ok())
    return Fail(st);
  if (has_base && tools::IsStandardOutput(f.kl_base))
    return Fail(
        InvalidArgument("--kl-divergence-base " + f.kl_base +
                        " is standard output, where the perplexity is printed: write the base to a file"));
  auto text = ReadTextFile(f.text_file, "a text file to score (perplexity -f)", escape);
  if (!text.ok()) return Fail(text.status());
  return Perplexity(c, f.text_file, *text, f.max_chunks, f.kl_base, f.output_type);
}

// The chat mode: -p / -f is the first user turn (optional), -n counts per reply (llama-cli's -1
// unless given).
int RunChat(const CLI::App& app, const CommonOptions& c, GenerateFlags g) {
  if (g.options.ignore_eos)
    return Fail(InvalidArgument(
        "--ignore-eos does not apply to the chat mode: a reply ends at the end-of-generation token"));
  ChatOptions o;
  o.system_prompt = g.escape ? tools::ProcessEscapes(g.system_prompt) : g.system_prompt;
  o.first_prompt = std::move(g.options.prompt);
  o.chat_template = g.chat_template;
  if (app.count("--chat-template-file") > 0) {
    auto text = ReadTextFile(g.chat_template_file, "a chat template file (--chat-template-file)", false);
    if (!text.ok()) return Fail(text.status());
    if (text->empty())
      return Fail(InvalidArgument(g.chat_template_file + ": the chat template file is empty"));
    // Checked here so that an unknown template names its file, not --chat-template.
    auto tmpl = ChatTemplate::FromText(*text);
    if (!tmpl.ok()) return Fail(tmpl.status().WithPrefix(g.chat_template_file + " (--chat-template-file)"));
    o.chat_template = std::move(*text);
  }
  o.n_predict = app.count("--n-predict") > 0 ? g.options.n_predict : -1;
  o.sampler = g.options.sampler;
  o.sampler.seed = g.seed < 0 ? kRandomSeed : static_cast<uint32_t>(g.seed);
  o.escape = g.escape;
  o.quiet = g.options.quiet;
  o.verbose_prompt = g.options.verbose_prompt;
  return Chat(c, std::move(o), stdin);
}

// Text generation: the prompt from -p or -f, the context planned on the fly llama-cli's default.
int RunGenerate(const CLI::App& app, CommonOptions c, GenerateFlags g) {
  std::string& prompt = g.options.prompt;
  const bool from_file = app.count("--file") > 0;
  if (from_file) {
    auto text = ReadTextFile(g.prompt_file, "a text file with the prompt (-f)", g.escape);
    if (!text.ok()) return Fail(text.status());
    prompt = std::move(*text);
  } else if (g.escape) {
    prompt = tools::ProcessEscapes(prompt);
  }
  for (const char* name : {"--system-prompt", "--chat-template", "--chat-template-file"})
    if (!g.conversation && app.count(name) > 0)
      return Fail(InvalidArgument(std::string(name) + " applies to the chat mode (-cnv / --conversation)"));
  if (prompt.empty() && !g.conversation)
    return Fail(InvalidArgument(!from_file
                                    ? "-p/--prompt is required (an empty prompt has no tokens to evaluate)"
                                    : g.prompt_file + ": the prompt file is empty (no tokens to evaluate)"));
  if (c.plan.empty() && app.count("--ctx-size") == 0)  // llama-cli's default of that llama.cpp
    c.n_ctx = planner::LlamacppDefaultsOf(tools::LlamacppCompatOf(c.llamacpp_compat)).n_ctx;
  if (g.conversation) return RunChat(app, c, std::move(g));
  if (app.count("--dump-logits") > 0 && g.options.dump_logits.empty())
    return Fail(InvalidArgument("--dump-logits '': no file name"));
  if (Status st = tools::CheckOutputIsNotInput("--dump-logits", g.options.dump_logits,
                                               {&c.model, &c.plan, &g.prompt_file}, "the logits");
      !st.ok())
    return Fail(st);
  g.options.prompt_source = from_file ? g.prompt_file : std::string("the prompt (-p)");
  g.options.show_prompt = !g.no_display_prompt;
  g.options.sampler.seed = g.seed < 0 ? kRandomSeed : static_cast<uint32_t>(g.seed);
  return Generate(c, std::move(g.options));
}

int RunMode(const CLI::App& app, CommonOptions& c, GenerateFlags& g, CLI::App* ppl,
            PerplexityFlags& ppl_flags, CLI::App* bench, BenchFlags& bench_flags);

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"stowage-run: execute a Stowage plan and generate text", "stowage-run"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(0, 1);
  CommonOptions c;
  GenerateFlags g;
  PerplexityFlags ppl_flags;
  BenchFlags bench_flags;
  AddCommonOptions(&app, &c);
  AddGenerateOptions(&app, &g);
  CLI::App* ppl = AddPerplexity(&app, &ppl_flags);
  CLI::App* bench = AddBench(&app, &bench_flags);
  ppl->fallthrough();
  bench->fallthrough();

  if (int rc = tools::ParseWithAliases(app, argc, argv,
                                       {{"-ub", "--ubatch-size"},
                                        {"-ngl", "--n-gpu-layers"},
                                        {"-ctk", "--cache-type-k"},
                                        {"-ctv", "--cache-type-v"},
                                        {"-nr", "--no-repack"},
                                        {"-nkvo", "--no-kv-offload"},
                                        {"-pg", "--pg"},
                                        {"-fa", "--flash-attn"},
                                        {"-cnv", "--conversation"},
                                        {"-sys", "--system-prompt"}});
      rc >= 0)
    return rc;
  if (c.threads < 0) c.threads = 0;  // -t -1: the default
  const CLI::App* sub = *ppl ? ppl : *bench ? bench : nullptr;
  if (Status st = CheckFlagsApply(app, c, sub); !st.ok()) return Fail(st);
  auto transport = StartHosts(c.mpi_timeout);  // under mpirun: MPI up, the plan's host check follows at load
  if (!transport.ok()) return Fail(transport.status());
  c.transport = *transport;
  return EndHostsOnFailure(*transport, RunMode(app, c, g, ppl, ppl_flags, bench, bench_flags));
}

namespace {

// The mode the command line asks for: perplexity, bench, or text generation (and chat).
int RunMode(const CLI::App& app, CommonOptions& c, GenerateFlags& g, CLI::App* ppl,
            PerplexityFlags& ppl_flags, CLI::App* bench, BenchFlags& bench_flags) {
  // Across hosts only the generation loop passes the sampled token between ranks (hosts.h).
  if (c.transport && (*ppl || *bench || g.conversation))
    return Fail(Unimplemented(std::string("under mpirun, stowage-run generates text (-p / -f); ") +
                              (*ppl     ? "perplexity"
                               : *bench ? "bench"
                                        : "the chat mode (-cnv)") +
                              " runs in one process (without mpirun the plan's hosts all run here)"));
  // llama-cli's and llama-perplexity's -ngl of that llama.cpp when planning on the fly: 2026's is
  // auto, --fit (common.h n_gpu_layers -1, fit_params true); llama-bench keeps its own.
  if (c.plan.empty() && app.count("--n-gpu-layers") == 0 && !*bench &&
      planner::LlamacppDefaultsOf(tools::LlamacppCompatOf(c.llamacpp_compat)).fit)
    c.n_gpu_layers = tools::kAutoGpuLayers;
  if (*ppl) {
    // llama-perplexity's defaults: chunks of 512 tokens, the text's escapes kept unless -e.
    if (c.plan.empty() && app.count("--ctx-size") == 0) c.n_ctx = kPerplexityContext;
    return RunPerplexity(app, *ppl, c, ppl_flags, app.count("--escape") > 0 && g.escape);
  }
  if (*bench) {
    auto b = ParseBenchOptions(app, *bench, c, bench_flags);
    if (!b.ok()) return Fail(b.status());
    return Bench(c, app.count("--ctx-size") > 0, *b);
  }
  return RunGenerate(app, std::move(c), std::move(g));
}

}  // namespace

}  // namespace stowage::run

// A lost write to standard output (> /dev/full, a full disk) is exit status 1 with one line.
int main(int argc, char** argv) {
  return stowage::tools::RunTool("stowage-run", stowage::run::Main, argc, argv);
}
