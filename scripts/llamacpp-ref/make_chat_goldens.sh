#!/usr/bin/env bash
# Makes test/data/chat-template/{builtin,templates}.json with llama.cpp 2026-09-28 (node-llama-cpp
# 3.22.1, fetched by fetch.sh): llama_chat_apply_template's text for every built-in template name
# and for the template texts of popular models over fixed conversations, and the family
# llm_chat_detect_template finds (chat_template_ref.cpp).
#
#   scripts/llamacpp-ref/make_chat_goldens.sh [REF_DIR] [VOCAB_DIR]
#
# REF_DIR defaults to ~/.cache/llamacpp-ref-3.22.1, VOCAB_DIR to ../shared/models/vocab. Template
# texts: the `tokenizer.chat_template` of the vocabulary GGUFs in VOCAB_DIR that carry one (read by
# ggml's gguf reader), and the template_str of every test case of the reference's own
# tests/test-chat-template.cpp (model data; from the git bundle fetch.sh unpacked into REF_DIR/src).
# Needs nlohmann-json3-dev. Deterministic: running it again gives the same bytes.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REF=${1:-$HOME/.cache/llamacpp-ref-3.22.1}
VOCAB=${2:-$ROOT/../shared/models/vocab}
OUT=$ROOT/test/data/chat-template
B=$REF/bin/package/bins/linux-x64
T=$REF/stowage
[ -d "$B" ] || { echo "make_chat_goldens.sh: $B missing: run scripts/llamacpp-ref/fetch.sh --version 3.22.1 first" >&2; exit 1; }
LLAMA=$(cd "$B" && ls libllama.v*.so | head -1)
GGML=$(cd "$B" && ls libggml.v*.so | head -1)
mkdir -p "$T/include" "$OUT"
# llm_chat_detect_template's enum is in an internal header of libllama (its symbols are exported).
[ -f "$T/include/llama-chat.h" ] || git -C "$REF/src" show FETCH_HEAD:src/llama-chat.h > "$T/include/llama-chat.h"
if [ ! -x "$T/chat_template_ref" ] || [ "$HERE/chat_template_ref.cpp" -nt "$T/chat_template_ref" ]; then
  g++ -O1 -std=c++17 -Wall "$HERE/chat_template_ref.cpp" -o "$T/chat_template_ref" \
    -I"$T/include" -I"$REF/include" -I"$REF/ggml/include" \
    -L"$B" -l:"$LLAMA" -l:"$GGML" -l:libggml-base.so -Wl,-rpath,"$B"
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
git -C "$REF/src" show FETCH_HEAD:tests/test-chat-template.cpp > "$TMP/test-chat-template.cpp"
python3 - "$TMP" "$VOCAB" <<'EOF'
import glob, json, os, re, sys
tmp, vocab = sys.argv[1], sys.argv[2]

# The fixed conversations: the usual turns (whitespace around contents exercises the families that
# trim, UTF-8 the byte copies), one without a system message, tool roles, one message, none, and
# edge cases (the assistant first, empty and blank contents, repeated and unknown roles).
conversations = [
    {"name": "system-user-assistant-user", "messages": [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "  Hi there, I am an assistant.  \n"},
        {"role": "user", "content": " Wie geht's? 你好 \n"}]},
    {"name": "user-assistant-user", "messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "Another question"}]},
    {"name": "tools", "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What is 6 times 7?"},
        {"role": "assistant_tool_call", "content": "{\"name\": \"mul\", \"arguments\": [6, 7]}"},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": " 42. "},
        {"role": "user", "content": "thanks"}]},
    {"name": "user", "messages": [{"role": "user", "content": "Hi"}]},
    {"name": "edge-cases", "messages": [
        {"role": "assistant", "content": "I speak first."},
        {"role": "system", "content": " \t\n"},
        {"role": "user", "content": ""},
        {"role": "user", "content": "\ttwo users in a row\r\n"},
        {"role": "function", "content": "f()"},
        {"role": "model", "content": "as gemma's role"},
        {"role": "system", "content": "a late system message"},
        {"role": "User", "content": "capital role"}]},
    {"name": "empty", "messages": []},
]

def c_string(lit):
    """The value of a C++ string literal: "...", u8"..." or U8C("...")."""
    m = re.fullmatch(r'(?:U8C\()?(?:u8)?"(.*)"\)?', lit)
    assert m, lit
    s, out, i = m.group(1), [], 0
    esc = {'n': '\n', 't': '\t', 'r': '\r', '"': '"', "'": "'", '\\': '\\'}
    while i < len(s):
        if s[i] == '\\':
            out.append(esc[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return ''.join(out)

lines = open(os.path.join(tmp, 'test-chat-template.cpp'), encoding='utf-8').read().split('\n')
templates = []
for i, line in enumerate(lines):
    m = re.match(r'\s*/\* \.name= \*/ (.*),$', line)
    if not m:
        continue
    name = c_string(m.group(1))
    # The template is the case's next field after comments (spelt "/* .template_str */" twice).
    j = i + 1
    while lines[j].strip().startswith('//'):
        j += 1
    t = re.match(r'\s*/\* \.template_str=? \*/ (.*),$', lines[j])
    assert t, lines[j]
    templates.append({"source": "llama.cpp tests/test-chat-template.cpp: " + name,
                      "text": c_string(t.group(1))})
# Short texts that hold the marker strings of each detection rule (and pairs of rules, for the
# order), written here: the reference says which family each one is. Not model data.
probes = [
    "mistral", "{{ '[INST]' }}", "[INST] <<SYS>>", "{{ bos_token + '[INST] ' }}<<SYS>>",
    "[INST] {{ content.strip() }}", "[INST][SYSTEM_PROMPT]", "[INST][AVAILABLE_TOOLS] [INST]",
    "[AVAILABLE_TOOLS]{{ \"[INST]\" }}", "[AVAILABLE_TOOLS][INST]", "' [INST] ' + system_message",
    "<|assistant|><|end|>", "[gMASK]<sop><|user|>", "<|assistant|><|user|>", "<|assistant|><|user|></s>",
    "<|assistant|><|user|><|tool_declare|>", "<|{{ item['role'] }}|><|begin_of_image|>",
    "<|user|><|endoftext|>", "{{ bos_token + message['role'] }}", "<start_of_turn>model",
    "'\\n\\nAssistant: ' + eos_token", "GPT4 Correct User", "USER: ASSISTANT: ",
    "SYSTEM: USER: ASSISTANT: ", "### Instruction:<|EOT|>", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
    "<|start_header_id|><|end_header_id|>", "[gMASK]sop", "<用户><AI>",
    "'Assistant: ' + message['content'] + eos_token", "<｜Assistant｜><｜User｜><｜end▁of▁sentence｜>",
    "[|system|][|assistant|][|endofturn|]", "[|system|][|assistant|][|endofturn|][|tool|]",
    "rwkv-world", "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}", "<|start_of_role|>",
    "<|start_of_role|><tools>g4_default_system_message", "<|start_of_role|><tool_call>",
    "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]",
    "<|role_start|>", " Ассистент:", "<role>ASSISTANT</role>'HUMAN'",
    "<role>ASSISTANT</role>\"HUMAN\"<think>", "<role>ASSISTANT</role><role>HUMAN</role><|role_end|>",
    "<|header_start|><|header_end|>", "<|endofuserprompt|>", "<|extra_0|><|extra_4|>",
    "<|start|><|channel|>", "<｜hy_Assistant｜><｜hy_begin▁of▁sentence｜>",
    "<｜hy_Assistant｜><｜hy_place▁holder▁no▁3｜>", "<|im_assistant|>assistant<|im_middle|>",
    "<seed:bos>", "'Assistant: '  + message['content'] + '<|separator|>",
    "[unused9]系统：[unused10]", "<|begin|><|end|><|content|>",
    "<|im_start|><|im_sep|>", "<|im_start|><end_of_utterance>", "<|im_start|><start_of_turn>",
    "<start_of_turn><|start_header_id|><|end_header_id|>", "chatml ", "Chatml", "{{ messages }}", "",
]
templates += [{"source": "marker probe", "text": t} for t in probes]
for path in sorted(glob.glob(os.path.join(vocab, '*.gguf'))):
    if b'tokenizer.chat_template' in open(path, 'rb').read():
        templates.append({"source": "vocab GGUF", "gguf": path})
json.dump({"conversations": conversations, "builtin": True}, open(os.path.join(tmp, 'builtin-cases.json'), 'w'))
json.dump({"conversations": conversations, "templates": templates},
          open(os.path.join(tmp, 'template-cases.json'), 'w'))
EOF
"$T/chat_template_ref" "$TMP/builtin-cases.json" > "$OUT/builtin.json"
"$T/chat_template_ref" "$TMP/template-cases.json" > "$OUT/templates.json"
echo "wrote $OUT/builtin.json ($(grep -c '"family"' "$OUT/builtin.json") names), $OUT/templates.json ($(grep -c '"family"' "$OUT/templates.json") template texts)"
