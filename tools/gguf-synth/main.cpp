// gguf-synth: writes a random-weight GGUF model (seeded) for one of Stowage's architectures, or a
// header-only stand-in at a real size. See synth.h for names, shapes, keys and values.
//
//   gguf-synth --arch qwen2 --n-layer 2 --n-embd 64 -o qwen2.gguf
//   gguf-synth --preset llama3-405b --type q4_K --header-only -o llama3-405b.gguf
//
// Exit status 1 with a one-line error on bad options or a failed write (nothing is written then).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cli_numbers.h"
#include "llama_args.h"
#include "stdout_check.h"
#include "stowage/runtime/atomic_file.h"
#include "stowage/runtime/gguf_writer.h"
#include "synth.h"

namespace {

int Run(int argc, char** argv) {
  namespace tools = stowage::tools;
  using stowage::synth::ModelSpec;
  CLI::App app{"gguf-synth: write a random-weight GGUF model (llama.cpp names, shapes and keys)"};
  std::string out, preset, arch, type = "f32", name, vocab_from;
  ModelSpec d;  // option storage; applied over the preset only when given
  bool list = false, header_only = false, pure = false, tied = false, untied = false, rope_freqs = false;
  CLI::Option* o_out = app.add_option("-o,--output", out, "output GGUF file (written atomically)");
  app.add_flag("--list-presets", list, "print the presets and exit");
  app.add_option(
      "--preset", preset,
      "real-size preset: llama3-8b, llama3-70b, llama3-405b, mixtral-8x7b, deepseek-v3-like, mamba-2.8b");
  auto* o_arch = app.add_option("--arch", arch,
                                "llama, qwen2, phi3, gemma, mamba, qwen2moe, mixtral, qwen3, mistral3, "
                                "smollm3, granite, gemma2, gemma3, qwen3moe, deepseek2, gpt-oss, glm4moe");
  auto* o_layer = app.add_option("--n-layer", d.n_layer, "layers (blocks)")->check(tools::IntegerIn(1, 512));
  auto* o_embd = app.add_option("--n-embd", d.n_embd, "embedding width")->check(tools::IntegerIn(1, 1 << 20));
  auto* o_head = app.add_option("--n-head", d.n_head, "attention heads")->check(tools::IntegerIn(1, 1 << 16));
  auto* o_head_kv = app.add_option("--n-head-kv", d.n_head_kv, "key/value heads (GQA)")
                        ->check(tools::IntegerIn(1, 1 << 16));
  auto* o_head_dim = app.add_option("--head-dim", d.head_dim, "head size (default n_embd / n_head)")
                         ->check(tools::IntegerIn(0, 1 << 16));
  auto* o_ff = app.add_option("--n-ff", d.n_ff, "feed-forward width")->check(tools::IntegerIn(1, 1 << 24));
  auto* o_vocab = app.add_option("--n-vocab", d.n_vocab, "vocabulary size (generated SPM vocab)")
                      ->check(tools::IntegerIn(0, UINT32_MAX));
  auto* o_ctx =
      app.add_option("--n-ctx", d.n_ctx, "<arch>.context_length")->check(tools::IntegerIn(1, UINT32_MAX));
  auto* o_exp = app.add_option("--n-expert", d.n_expert, "experts per layer (mixtral, qwen2moe, qwen3moe)")
                    ->check(tools::IntegerIn(0, 1024));
  auto* o_exp_used = app.add_option("--n-expert-used", d.n_expert_used, "experts used per token")
                         ->check(tools::IntegerIn(0, 1024));
  auto* o_ff_exp = app.add_option("--n-ff-exp", d.n_ff_exp, "qwen2moe, qwen3moe: expert feed-forward width")
                       ->check(tools::IntegerIn(0, 1 << 24));
  auto* o_ff_shexp =
      app.add_option("--n-ff-shexp", d.n_ff_shexp, "qwen2moe: shared expert feed-forward width")
          ->check(tools::IntegerIn(0, 1 << 24));
  auto* o_base =
      app.add_option("--rope-freq-base", d.rope_freq_base, "rope.freq_base")->check(tools::NumberIn(0, 1e30));
  auto* o_swa = app.add_option("--sliding-window", d.n_swa,
                               "phi3, gemma2, gemma3: attention.sliding_window (default 2047; 0 = none)")
                    ->check(tools::IntegerIn(0, UINT32_MAX));
  bool no_swa_key = false;
  app.add_flag(
      "--no-sliding-window-key", no_swa_key,
      "phi3, gemma2, gemma3: omit attention.sliding_window (phi3: as files converted before llama.cpp "
      "PR #8931)");
  auto* o_swa_period =
      app.add_option("--sliding-window-pattern", d.swa_period,
                     "gemma2, gemma3: attention.sliding_window_pattern, a period (default: no key)")
          ->check(tools::IntegerIn(0, 512));
  auto* o_attn_cap =
      app.add_option("--attn-softcap", d.attn_softcap, "gemma2: attn_logit_softcapping (default 50)")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_final_cap =
      app.add_option("--final-softcap", d.final_softcap,
                     "gemma2: final_logit_softcapping (default 30); gemma3: written when not 0 (default 0)")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_base_swa = app.add_option("--rope-freq-base-swa", d.rope_freq_base_swa,
                                    "gemma3: rope.freq_base_swa (default 10000; 0 = no key)")
                         ->check(tools::NumberIn(0, 1e30));
  auto* o_d_state = app.add_option("--ssm-d-state", d.ssm_d_state, "mamba: state size")
                        ->check(tools::IntegerIn(1, 1 << 16));
  auto* o_d_inner = app.add_option("--ssm-d-inner", d.ssm_d_inner, "mamba: inner size (default 2 n_embd)")
                        ->check(tools::IntegerIn(0, 1 << 24));
  auto* o_d_conv = app.add_option("--ssm-d-conv", d.ssm_d_conv, "mamba: convolution kernel")
                       ->check(tools::IntegerIn(1, 1024));
  auto* o_dt_rank =
      app.add_option("--ssm-dt-rank", d.ssm_dt_rank, "mamba: time step rank (default ceil(n_embd/16))")
          ->check(tools::IntegerIn(0, 1 << 20));
  auto* o_type =
      app.add_option("--type", type,
                     "weight type: f32, f16, bf16, q8_0, q4_0, mxfp4 (experts MXFP4, other matrices Q8_0, as "
                     "llama-quantize MXFP4_MOE); any ggml type, or q4_K_M (llama-quantize's per-tensor "
                     "types), with --header-only (deepseek-v3-like: q4_K_M by default)");
  auto* o_seed = app.add_option("--seed", d.seed, "random seed")->check(tools::IntegerIn(0, UINT64_MAX));
  app.add_option("--name", name, "general.name");
  app.add_option("--vocab-from", vocab_from, "copy the tokenizer.* keys of this GGUF (n_vocab follows it)");
  app.add_flag("--tied", tied, "no output.weight (the output reuses token_embd)");
  app.add_flag("--untied", untied, "write output.weight");
  app.add_flag("--rope-freqs", rope_freqs,
               "llama: add rope_freqs.weight (Llama-3.1 rope scaling); phi3: rope_factors_long/short.weight");
  auto* o_freqs_orig = app.add_option("--rope-freqs-orig-ctx", d.rope_original_ctx,
                                      "original context of the --rope-freqs Llama-3.1 factors (default 8192)")
                           ->check(tools::IntegerIn(1, UINT32_MAX));
  auto* o_scaling = app.add_option("--rope-scaling", d.rope_scaling,
                                   "rope.scaling.type: none, linear, yarn or longrope (default: no key)");
  auto* o_scale = app.add_option("--rope-scale", d.rope_scale, "rope.scaling.factor (default: no key)")
                      ->check(tools::NumberIn(0, 1e30));
  auto* o_orig = app.add_option("--rope-orig-ctx", d.rope_scaling_orig_ctx,
                                "rope.scaling.original_context_length (default: no key)")
                     ->check(tools::IntegerIn(0, UINT32_MAX));
  auto* o_beta_fast =
      app.add_option("--yarn-beta-fast", d.yarn_beta_fast, "mistral3: rope.scaling.yarn_beta_fast")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_beta_slow =
      app.add_option("--yarn-beta-slow", d.yarn_beta_slow, "mistral3: rope.scaling.yarn_beta_slow")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_log_mul =
      app.add_option("--yarn-log-mul", d.yarn_log_mul, "mistral3: rope.scaling.yarn_log_multiplier")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_logit = app.add_option("--logit-scale", d.logit_scale, "granite: logit_scale (default 16)")
                      ->check(tools::NumberIn(1e-30, 1e30));
  auto* o_resid = app.add_option("--residual-scale", d.residual_scale, "granite: residual_scale (0: no key)")
                      ->check(tools::NumberIn(0, 1e30));
  auto* o_embs =
      app.add_option("--embedding-scale", d.embedding_scale, "granite: embedding_scale (0: no key)")
          ->check(tools::NumberIn(0, 1e30));
  auto* o_attn_scale = app.add_option("--attention-scale", d.attention_scale,
                                      "granite: attention.scale (0: no key, 1/sqrt(head size))")
                           ->check(tools::NumberIn(0, 1e30));
  auto* o_q_lora =
      app.add_option("--q-lora-rank", d.q_lora_rank, "deepseek2: attention.q_lora_rank (0: attn_q)")
          ->check(tools::IntegerIn(0, 1 << 20));
  auto* o_kv_lora = app.add_option("--kv-lora-rank", d.kv_lora_rank, "deepseek2: attention.kv_lora_rank")
                        ->check(tools::IntegerIn(1, 1 << 20));
  auto* o_rope_dim = app.add_option("--rope-dim", d.mla_rope_dim,
                                    "deepseek2: the rope part of a head (rope.dimension_count; --head-dim is "
                                    "key_length_mla); glm4moe: rope.dimension_count (default head_dim / 2)")
                         ->check(tools::IntegerIn(2, 1 << 16));
  auto* o_v_head = app.add_option("--v-head-dim", d.mla_v_head_dim,
                                  "deepseek2: attention.value_length_mla (default --head-dim)")
                       ->check(tools::IntegerIn(0, 1 << 16));
  auto* o_dense_lead =
      app.add_option("--n-dense-lead", d.n_dense_lead, "deepseek2: leading_dense_block_count (default 1)")
          ->check(tools::IntegerIn(0, 512));
  auto* o_shared =
      app.add_option("--n-expert-shared", d.n_expert_shared, "deepseek2: expert_shared_count (default 1)")
          ->check(tools::IntegerIn(0, 1024));
  auto* o_w_scale = app.add_option("--expert-weights-scale", d.expert_weights_scale,
                                   "deepseek2: expert_weights_scale (default 2.5; 0: no key)")
                        ->check(tools::NumberIn(0, 1e30));
  auto* o_w_norm = app.add_option("--expert-weights-norm", d.expert_weights_norm,
                                  "deepseek2: expert_weights_norm (default true)");
  auto* o_gating = app.add_option("--expert-gating", d.expert_gating_func,
                                  "deepseek2: expert_gating_func, 1 softmax or 2 sigmoid (default 2)")
                       ->check(tools::IntegerIn(1, 2));
  auto* o_groups = app.add_option("--n-expert-groups", d.n_expert_groups,
                                  "deepseek2: expert_group_count (default: no key)")
                       ->check(tools::IntegerIn(0, 1024));
  auto* o_group_used = app.add_option("--n-group-used", d.n_group_used,
                                      "deepseek2: expert_group_used_count (with --n-expert-groups)")
                           ->check(tools::IntegerIn(0, 1024));
  auto* o_nextn =
      app.add_option("--nextn", d.n_nextn,
                     "glm4moe: NextN / MTP blocks after the trunk (nextn_predict_layers; default 1)")
          ->check(tools::IntegerIn(0, 16));
  bool qk_norm = false;
  app.add_flag("--qk-norm", qk_norm, "glm4moe: per-head q/k norms (GLM-4.5; GLM-4.5-Air has none)");
  bool mla_legacy = false;
  app.add_flag("--mla-legacy", mla_legacy,
               "deepseek2: the older form (one attn_kv_b per layer, no key_length_mla / value_length_mla; "
               "llama.cpp runs it as MHA)");
  bool no_probs_b = false;
  app.add_flag("--no-exp-probs-b", no_probs_b, "deepseek2: no expert-score bias (exp_probs_b.bias)");
  auto* o_temp = app.add_option("--attn-temp-scale", d.attn_temp_scale,
                                "mistral3: attention.temperature_scale (llama 4 temperature tuning)")
                     ->check(tools::NumberIn(0, 1e30));
  app.add_flag("--header-only", header_only, "leave the data region a sparse hole (costs no disk)");
  app.add_flag("--pure", pure, "mxfp4: every matrix MXFP4 (llama-quantize --pure)");
  double max_gib = 16;
  app.add_option("--max-gib", max_gib, "refuse to write more than this many GiB of weights (default 16)")
      ->check(tools::NumberIn(0, 1 << 20));
  if (int rc = stowage::tools::ParseWithAliases(app, argc, argv, {}); rc >= 0) return rc;

  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "%s%s\n", msg.rfind("gguf-synth: ", 0) == 0 ? "" : "gguf-synth: ", msg.c_str());
    return 1;
  };
  if (list) {
    for (const auto& p : stowage::synth::PresetNames()) {
      ModelSpec spec = *stowage::synth::Preset(p);
      spec.header_only = true;  // resolves a preset whose types have no generator (deepseek-v3-like) too
      auto s = stowage::synth::Resolve(spec);
      if (!s.ok()) return fail(s.status().message());
      std::printf(
          "%-18s arch %-9s %3u layers, n_embd %5u, n_head %3u/%3u, n_ff %5u, n_expert %3u/%u, n_vocab %u\n",
          p.c_str(), s->arch.c_str(), s->n_layer, s->n_embd, s->n_head, s->n_head_kv, s->n_ff, s->n_expert,
          s->n_expert_used, s->n_vocab);
    }
    return 0;
  }
  if (o_out->count() > 0 && out.empty())
    return fail("-o/--output: empty file name (give the GGUF file to write)");
  if (out.empty()) return fail("an output file is required (-o FILE)");
  if (!vocab_from.empty() && stowage::SameFile(out, vocab_from))
    return fail("-o " + out + ": is the model given with --vocab-from (writing would replace it)");
  if (tied && untied) return fail("--tied and --untied exclude each other");

  ModelSpec s;
  if (!preset.empty()) {
    auto p = stowage::synth::Preset(preset);
    if (!p.ok()) return fail(p.status().message());
    s = *p;
  }
  auto given = [](CLI::Option* o) { return o->count() > 0; };
  if (given(o_arch)) s.arch = arch;
  if (given(o_layer)) s.n_layer = d.n_layer;
  if (given(o_embd)) s.n_embd = d.n_embd;
  if (given(o_head)) s.n_head = d.n_head;
  if (given(o_head_kv)) s.n_head_kv = d.n_head_kv;
  if (given(o_head_dim)) s.head_dim = d.head_dim;
  if (given(o_ff)) s.n_ff = d.n_ff;
  if (given(o_vocab)) s.n_vocab = d.n_vocab;
  if (given(o_ctx)) s.n_ctx = d.n_ctx;
  if (given(o_exp)) s.n_expert = d.n_expert;
  if (given(o_exp_used)) s.n_expert_used = d.n_expert_used;
  if (given(o_ff_exp)) s.n_ff_exp = d.n_ff_exp;
  if (given(o_ff_shexp)) s.n_ff_shexp = d.n_ff_shexp;
  if (given(o_base)) s.rope_freq_base = d.rope_freq_base;
  if (given(o_swa)) s.n_swa = d.n_swa;
  if (no_swa_key) s.swa_key = false;
  if (given(o_swa_period)) s.swa_period = d.swa_period;
  if (given(o_attn_cap)) s.attn_softcap = d.attn_softcap;
  if (given(o_final_cap)) s.final_softcap = d.final_softcap;
  if (given(o_base_swa)) s.rope_freq_base_swa = d.rope_freq_base_swa;
  if (given(o_d_state)) s.ssm_d_state = d.ssm_d_state;
  if (given(o_d_inner)) s.ssm_d_inner = d.ssm_d_inner;
  if (given(o_d_conv)) s.ssm_d_conv = d.ssm_d_conv;
  if (given(o_dt_rank)) s.ssm_dt_rank = d.ssm_dt_rank;
  if (given(o_seed)) s.seed = d.seed;
  if (given(o_freqs_orig)) s.rope_original_ctx = d.rope_original_ctx;
  if (given(o_scaling)) s.rope_scaling = d.rope_scaling;
  if (given(o_scale)) s.rope_scale = d.rope_scale;
  if (given(o_orig)) s.rope_scaling_orig_ctx = d.rope_scaling_orig_ctx;
  if (given(o_beta_fast)) s.yarn_beta_fast = d.yarn_beta_fast;
  if (given(o_beta_slow)) s.yarn_beta_slow = d.yarn_beta_slow;
  if (given(o_log_mul)) s.yarn_log_mul = d.yarn_log_mul;
  if (given(o_temp)) s.attn_temp_scale = d.attn_temp_scale;
  if (given(o_q_lora)) s.q_lora_rank = d.q_lora_rank;
  if (given(o_kv_lora)) s.kv_lora_rank = d.kv_lora_rank;
  if (given(o_rope_dim)) s.mla_rope_dim = s.rope_dim = d.mla_rope_dim;  // deepseek2's / glm4moe's
  if (given(o_nextn)) s.n_nextn = d.n_nextn;
  if (qk_norm) s.qk_norm = true;
  if (given(o_v_head)) s.mla_v_head_dim = d.mla_v_head_dim;
  if (given(o_dense_lead)) s.n_dense_lead = d.n_dense_lead;
  if (given(o_shared)) s.n_expert_shared = d.n_expert_shared;
  if (given(o_w_scale)) s.expert_weights_scale = d.expert_weights_scale;
  if (given(o_w_norm)) s.expert_weights_norm = d.expert_weights_norm;
  if (given(o_gating)) s.expert_gating_func = d.expert_gating_func;
  if (given(o_groups)) s.n_expert_groups = d.n_expert_groups;
  if (given(o_group_used)) s.n_group_used = d.n_group_used;
  if (no_probs_b) s.exp_probs_b = false;
  if (mla_legacy) s.mla_legacy = true;
  if (given(o_logit)) s.logit_scale = d.logit_scale;
  if (given(o_resid)) s.residual_scale = d.residual_scale;
  if (given(o_embs)) s.embedding_scale = d.embedding_scale;
  if (given(o_attn_scale)) s.attention_scale = d.attention_scale;
  if (given(o_type) || preset.empty()) {
    if (auto st = stowage::synth::SetWeightType(type, &s); !st.ok()) return fail(st.message());
  }
  if (!name.empty()) s.name = name;
  if (!vocab_from.empty()) s.vocab_from = vocab_from;
  // mamba and gemma3 tie by default (Gemma-3's files have no output.weight)
  if ((s.arch == "mamba" || s.arch == "gemma3") && preset.empty() && !untied) s.tied_output = true;
  if (tied) s.tied_output = true;
  if (untied) s.tied_output = false;
  if (rope_freqs) s.rope_freqs = true;
  if (header_only) s.header_only = true;
  if (pure) s.pure = true;

  if (!(max_gib > 0) || !std::isfinite(max_gib))
    return fail("--max-gib: expected a positive number of GiB, found " + std::to_string(max_gib));
  stowage::GgufWriter w;
  stowage::Status st = stowage::synth::BuildModel(s, &w);
  if (st.ok() && !s.header_only && static_cast<double>(w.FileSize()) > max_gib * 1073741824.0) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", max_gib);
    return fail("the model would take " + std::to_string(w.FileSize()) +
                " bytes of random weights (over --max-gib " + limit +
                "); use --header-only or a larger --max-gib");
  }
  if (st.ok()) st = w.WriteFile(out);
  if (!st.ok()) return fail(st.message());
  // The status line must not land in the model when the model goes to standard output.
  std::fprintf(
      stowage::tools::IsStandardOutput(out) ? stderr : stdout,
      "gguf-synth: wrote %s: %zu key/value pairs, %zu tensors, header %llu bytes, file %llu bytes%s\n",
      out.c_str(), w.n_kv(), w.n_tensors(), static_cast<unsigned long long>(w.HeaderSize()),
      static_cast<unsigned long long>(w.FileSize()), s.header_only ? " (data region sparse)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return stowage::tools::RunTool("gguf-synth", Run, argc, argv); }
