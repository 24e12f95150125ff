#!/bin/sh
# Writes <model>.txt here: llama.cpp 3.22.1's (2026-09-28) context sizing lines for each case of
# cases.txt ("N_CTX FLASH_ATTN_TYPE": -1 auto, 0 off, 1 on; n_batch 2048, n_ubatch 512, CPU only),
# from nctx.c (llama_init_from_model on the prebuilt libllama), one "== N_CTX FA" header per case.
# Usage: sh make.sh  (needs ~/.cache/llamacpp-ref-3.22.1 and the shared models)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$HOME/.cache/llamacpp-ref-3.22.1
ref=$root/bin/package
export REF_BACKEND_DIR=$ref/bins/linux-x64
models=${MODELS:-$here/../../../../../shared/models}
tmp=$(mktemp -d)
cc -O1 -o "$tmp/nctx" "$here/nctx.c" -I"$root/include" -I"$root/ggml/include" \
  -L"$REF_BACKEND_DIR" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$REF_BACKEND_DIR"
pat='^llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|n_outputs_max) |output buffer size|KV buffer size|^llama_kv_cache: size|compute buffer size'
for model in stories260K-Q4_0 llama-2-tiny-random; do
  while read -r n fa; do
    echo "== $n $fa"
    "$tmp/nctx" "$models/$model.gguf" "$n" "$fa" 2>&1 | sed 's/^[0-9.]* [A-Z] //' | grep -E "$pat"
  done <"$here/cases.txt" >"$here/$model.txt"
done
rm -rf "$tmp"
