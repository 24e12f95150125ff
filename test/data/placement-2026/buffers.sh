#!/bin/sh
# Reads a llama.cpp or plan-model loader log on standard input and prints one line per buffer,
# "<buffer type> <model|KV|compute|output> <MiB>", sorted, so that llama.cpp 2026's lines
# (load_tensors / llama_kv_cache / llama_context / sched_reserve) and plan-model's (load_tensors /
# llama_kv_cache_init / llama_init_from_model) compare line by line. llama.cpp's closing
# "~llama_context: ... matches expectation" lines are left out.
grep -E ' (model|KV|compute|output) buffer size = ' | grep -v '~llama_context' |
  sed -E 's/^[^:]*: +(.*[^ ]) +(model|KV|compute|output) buffer size = +([0-9.]+) MiB.*/\1 \2 \3/' | sort -u
