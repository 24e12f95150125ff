#!/usr/bin/env bash
# Regenerates the goldens of this folder (see README.md). Needs gguf-synth (a build's bin/) on PATH
# and the reference llama.cpp of node-llama-cpp $NLC (default 3.21.1) in $REF (default
# ~/.cache/llamacpp-ref, ~/.cache/llamacpp-ref-$NLC for another version), which
# scripts/llamacpp-ref/fetch.sh fetches when missing (and builds its refdump).
# Usage: make_goldens.sh [NAME...]   (default: every model below)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NLC=${NLC:-3.21.1}
if [ "$NLC" = 3.21.1 ]; then REF=${REF:-$HOME/.cache/llamacpp-ref}; else REF=${REF:-$HOME/.cache/llamacpp-ref-$NLC}; fi
ENVLINE=$(bash "$HERE/../../../scripts/llamacpp-ref/fetch.sh" --version "$NLC" "$REF" | tail -1)
REF_TOOLS=$(echo "$ENVLINE" | sed -n 's/^export .* REF_TOOLS=\([^ ]*\).*/\1/p')
export REF_BACKEND_DIR=${REF_BACKEND_DIR:-$(echo "$ENVLINE" | sed -n 's/^export REF_BACKEND_DIR=\([^ ]*\).*/\1/p')}
PROMPT="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
# name -> gguf-synth arguments (the e2e test builds the same models with gguf-synth's library).
# phi3: general.name must not contain "phi3"/"phi-3": llama.cpp's vocab loader then sets attributes
# of Phi-3's special tokens (<|endoftext|> ...), which the generated vocabulary lacks (load fails).
# qwen3: heads of 32 (--head-dim) with n_embd 64, so attention.key_length is written and attn_q is
# n_embd_head_k * n_head = 128 wide, as Qwen3-0.6B's heads are wider than n_embd / n_head.
# llama-yarn / mistral3: YaRN factor 4 over an original context of 16, so the prompt's positions
# (0..81) run far past it; mistral3's temperature factor log(floor(pos / 16) + 1) * 0.5 + 1 then
# takes six values; beta_slow 0.25 widens YaRN's ramp (corr dims 0..3 instead of 0..1) and the log
# multiplier 0.1 makes the attention factor differ from 1. llama-ropefreqs: Llama-3.1 rope_freqs of an
# original context of 64, so that dims fast enough to turn within the prompt are scaled (factor 8).
# smollm3: 8 layers, so that layers 3 and 7 have no rope ((il + 1) % 4 == 0, n_no_rope_layer_step).
# granite: Granite-3.3-8B's residual (0.22) and embedding (12) multipliers, a logit scale of 0.25
# (logits times 4, so that they are not too small for the tolerance) and attention.scale 0.5.
# qwen3moe: heads of 32 as qwen3's, 8 experts of which 2 are used (softmax top-k, normalized weights);
# seed 5, as with the default seed two experts' scores are so close at three prompt positions that
# llama.cpp itself picks others token by token (--n-ubatch 1) than for the whole prompt (logits 0.78
# apart; seed 5: 0.003 F32, 0.22 Q8_0, within the batch-vs-single tolerances of golden_arch_test).
# deepseek2: 3 layers (the first dense), heads of 24 (16 nope + 8 rope, v 24), q LoRA 32, kv LoRA
# 32, 8 experts of which 2 used with sigmoid routing, the expert-score bias, weights normalized and
# scaled by 2.5, one shared expert (gguf-synth's defaults), YaRN factor 4 over 16 with
# yarn_log_multiplier 0.1 (deepseek2's kq_scale mscale). deepseek2-groups: the same with 16 experts in
# 4 groups of which 2 are used (DeepSeek-V3's group-limited top-k), 3 experts used; seed 7, as with
# other seeds group sums so close that other groups are picked token by token than for the whole
# prompt are common (llama.cpp --n-ubatch 1, F32: 0.3-0.8 apart with seeds 3-6, 0.004 with seed 7).
# deepseek2-legacy: deepseek2-f32's model in the older form (--mla-legacy: one attn_kv_b per layer,
# no key_length_mla / value_length_mla; llama.cpp runs it as MHA) with V heads of 16 (K 16 + 8).
# glm4moe: 3 trunk blocks (block 0 dense, 1-2 with 8 sigmoid-routed experts, 2 used, the selection
# bias, weights normalized and scaled by 2.5, one shared expert), heads of 32 with q/k norms and q/k/v
# biases roped over their first 16 dimensions, plus one NextN block that both skip; seed 2 for the
# routing near-ties as qwen3moe's (seed 1: 0.72 between the whole prompt and token by token there).
# gemma2 / gemma3: a sliding window of 8, far shorter than the prompt (82 tokens), and soft-caps small
# enough to bite at these logit sizes (gemma2: attention 0.5, final 2; gemma3: final 2); gemma3 with 6
# layers (the default pattern: layers 0-4 sliding-window, 5 global), global rope base 1e6 with
# linear scaling 8 and the SWA layers' base 10000 (rope.freq_base_swa, scale 1), as Gemma-3-27B.
# gpt-oss: layer 0 slides over a window of 8 (layer 1 global), 4 experts of which 2 are used, YaRN
# factor 4 over 16. Its goldens come from llama.cpp 2026-09-28: NLC=3.22.1 make_goldens.sh gpt-oss-f32
# gpt-oss-q8_0. gpt-oss-mxfp4.gguf is the F32 model quantized by that version's quantize (ftype 38,
# MXFP4_MOE), gpt-oss-mxfp4.json refdump of it reduced as here; gpt-oss-clamp-f32.json refdump of
# the F32 model with its ffn_gate_exps / ffn_up_exps weights times 32 (README.md).
declare -A ARGS=(
  [mixtral-f32]="--arch mixtral --type f32"
  [mixtral-q4_0]="--arch mixtral --type q4_0"
  [qwen2moe-f32]="--arch qwen2moe --type f32"
  [qwen2moe-q8_0]="--arch qwen2moe --type q8_0"
  [phi3-f32]="--arch phi3 --type f32 --name synthetic-phi"
  [phi3-q4_0]="--arch phi3 --type q4_0 --name synthetic-phi"
  [phi3-ropefactors-short-f32]="--arch phi3 --type f32 --name synthetic-phi --rope-freqs"
  [phi3-ropefactors-long-f32]="--arch phi3 --type f32 --name synthetic-phi --rope-freqs --n-ctx 128"
  [mamba-f32]="--arch mamba --type f32"
  [mamba-q8_0]="--arch mamba --type q8_0"
  [qwen3-f32]="--arch qwen3 --type f32 --head-dim 32"
  [qwen3-q8_0]="--arch qwen3 --type q8_0 --head-dim 32"
  [llama-yarn-f32]="--arch llama --type f32 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16"
  [llama-ropefreqs-f32]="--arch llama --type f32 --rope-freqs --rope-freqs-orig-ctx 64"
  [mistral3-f32]="--arch mistral3 --type f32 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-beta-slow 0.25 --yarn-log-mul 0.1 --attn-temp-scale 0.5"
  [mistral3-q8_0]="--arch mistral3 --type q8_0 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-beta-slow 0.25 --yarn-log-mul 0.1 --attn-temp-scale 0.5"
  [smollm3-f32]="--arch smollm3 --type f32 --n-layer 8"
  [smollm3-q8_0]="--arch smollm3 --type q8_0 --n-layer 8"
  [granite-f32]="--arch granite --type f32 --logit-scale 0.25 --attention-scale 0.5"
  [granite-q8_0]="--arch granite --type q8_0 --logit-scale 0.25 --attention-scale 0.5"
  [gemma2-f32]="--arch gemma2 --type f32 --sliding-window 8 --attn-softcap 0.5 --final-softcap 2"
  [gemma2-q8_0]="--arch gemma2 --type q8_0 --sliding-window 8 --attn-softcap 0.5 --final-softcap 2"
  [gemma3-f32]="--arch gemma3 --type f32 --n-layer 6 --sliding-window 8 --rope-freq-base 1000000 --rope-scaling linear --rope-scale 8 --final-softcap 2"
  [qwen3moe-f32]="--arch qwen3moe --type f32 --head-dim 32 --n-expert 8 --n-expert-used 2 --seed 5"
  [qwen3moe-q8_0]="--arch qwen3moe --type q8_0 --head-dim 32 --n-expert 8 --n-expert-used 2 --seed 5"
  [deepseek2-f32]="--arch deepseek2 --type f32 --n-layer 3 --n-expert 8 --n-expert-used 2 --head-dim 24 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 3"
  [deepseek2-q8_0]="--arch deepseek2 --type q8_0 --n-layer 3 --n-expert 8 --n-expert-used 2 --head-dim 24 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 3"
  [deepseek2-legacy-f32]="--arch deepseek2 --mla-legacy --type f32 --n-layer 3 --n-expert 8 --n-expert-used 2 --head-dim 24 --v-head-dim 16 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 3"
  [deepseek2-legacy-q8_0]="--arch deepseek2 --mla-legacy --type q8_0 --n-layer 3 --n-expert 8 --n-expert-used 2 --head-dim 24 --v-head-dim 16 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 3"
  [deepseek2-groups-f32]="--arch deepseek2 --type f32 --n-layer 3 --n-expert 16 --n-expert-used 3 --n-expert-groups 4 --n-group-used 2 --head-dim 24 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 7"
  [deepseek2-groups-q8_0]="--arch deepseek2 --type q8_0 --n-layer 3 --n-expert 16 --n-expert-used 3 --n-expert-groups 4 --n-group-used 2 --head-dim 24 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16 --yarn-log-mul 0.1 --seed 7"
  [glm4moe-f32]="--arch glm4moe --type f32 --n-layer 3 --head-dim 32 --n-expert 8 --n-expert-used 2 --qk-norm --seed 2"
  [gpt-oss-f32]="--arch gpt-oss --type f32 --sliding-window 8 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16"
  [gpt-oss-q8_0]="--arch gpt-oss --type q8_0 --sliding-window 8 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 16"
  [glm4moe-q8_0]="--arch glm4moe --type q8_0 --n-layer 3 --head-dim 32 --n-expert 8 --n-expert-used 2 --qk-norm --seed 2"
  [gemma3-q8_0]="--arch gemma3 --type q8_0 --n-layer 6 --sliding-window 8 --rope-freq-base 1000000 --rope-scaling linear --rope-scale 8 --final-softcap 2"
)
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=(mixtral-f32 mixtral-q4_0 qwen2moe-f32 qwen2moe-q8_0 phi3-f32 phi3-q4_0 phi3-ropefactors-short-f32
                            phi3-ropefactors-long-f32 mamba-f32 mamba-q8_0 qwen3-f32 qwen3-q8_0
                            llama-yarn-f32 llama-ropefreqs-f32 mistral3-f32 mistral3-q8_0
                            gemma2-f32 gemma2-q8_0 gemma3-f32 gemma3-q8_0 smollm3-f32 smollm3-q8_0
                            granite-f32 granite-q8_0 qwen3moe-f32 qwen3moe-q8_0 glm4moe-f32 glm4moe-q8_0 deepseek2-f32 deepseek2-q8_0
                            deepseek2-groups-f32 deepseek2-groups-q8_0 deepseek2-legacy-f32 deepseek2-legacy-q8_0
                            gpt-oss-f32 gpt-oss-q8_0)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for n in "${NAMES[@]}"; do
  gguf-synth ${ARGS[$n]} -o "$TMP/$n.gguf" >/dev/null
  "$REF_TOOLS/refdump" "$TMP/$n.gguf" "$PROMPT" 24 1 > "$TMP/$n.ref.json"
  python3 "$HERE/reduce.py" "$TMP/$n.ref.json" "$TMP/$n.gguf" "${ARGS[$n]}" > "$HERE/$n.json"
  echo "wrote $HERE/$n.json"
done
