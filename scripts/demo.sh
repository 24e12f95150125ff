#!/usr/bin/env bash
# The main job on a fresh build: inspect a real model (later: plan it and generate text).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/stories260K.gguf}
./build/bin/gguf-dump "$MODEL"
