#!/usr/bin/env python3
"""Writes a tiny llama GGUF (1 layer, n_embd 32, 4 heads, n_ff 64, vocab 32, f32 zeros) with
edits, for the importer's error tests:

  write_tiny_gguf.py OUT [--arch NAME] [--drop TENSOR] [--shape TENSOR=ne0,ne1]
                         [--type TENSOR=f16] [--extra TENSOR] [--split-experts] [--phi3 [--swa N]]

--split-experts declares 2 experts and adds the pre-2024 per-expert tensor blk.0.ffn_gate.0.weight.
--phi3 writes phi3's layout instead (fused attn_qkv, fused ffn_up of 2*n_ff, no ffn_gate) with
phi3.attention.sliding_window = N (default 0: no sliding window).
GGUF v3 layout: header, key/values, tensor infos, data aligned to 32 bytes.
"""
import argparse
import struct

GGML_F32, GGML_F16 = 0, 1
TYPE_SIZES = {GGML_F32: 4, GGML_F16: 2}


def gguf_string(s):
    b = s.encode()
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack('<I', vtype)
    if vtype == 4:  # uint32
        out += struct.pack('<I', value)
    elif vtype == 6:  # float32
        out += struct.pack('<f', value)
    elif vtype == 8:  # string
        out += gguf_string(value)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument('out')
    p.add_argument('--arch', default='llama')
    p.add_argument('--drop', action='append', default=[])
    p.add_argument('--shape', action='append', default=[])
    p.add_argument('--type', action='append', default=[])
    p.add_argument('--extra', action='append', default=[])
    p.add_argument('--split-experts', action='store_true')
    p.add_argument('--phi3', action='store_true')
    p.add_argument('--swa', type=int, default=0)
    a = p.parse_args()

    n_embd, n_ff, n_vocab, n_head = 32, 64, 32, 4
    tensors = {
        'token_embd.weight': [n_embd, n_vocab],
        'output_norm.weight': [n_embd],
        'output.weight': [n_embd, n_vocab],
        'blk.0.attn_norm.weight': [n_embd],
        'blk.0.attn_q.weight': [n_embd, n_embd],
        'blk.0.attn_k.weight': [n_embd, n_embd],
        'blk.0.attn_v.weight': [n_embd, n_embd],
        'blk.0.attn_output.weight': [n_embd, n_embd],
        'blk.0.ffn_norm.weight': [n_embd],
        'blk.0.ffn_gate.weight': [n_embd, n_ff],
        'blk.0.ffn_up.weight': [n_embd, n_ff],
        'blk.0.ffn_down.weight': [n_ff, n_embd],
    }
    if a.phi3:
        a.arch = 'phi3'
        for n in ['blk.0.attn_q.weight', 'blk.0.attn_k.weight', 'blk.0.attn_v.weight',
                  'blk.0.ffn_gate.weight']:
            del tensors[n]
        tensors['blk.0.attn_qkv.weight'] = [n_embd, 3 * n_embd]
        tensors['blk.0.ffn_up.weight'] = [n_embd, 2 * n_ff]
    types = {name: GGML_F32 for name in tensors}
    for name in a.drop:
        del tensors[name]
    for spec in a.shape:
        name, dims = spec.split('=')
        tensors[name] = [int(d) for d in dims.split(',')]
    for spec in a.type:
        name, t = spec.split('=')
        types[name] = {'f32': GGML_F32, 'f16': GGML_F16}[t]
    for name in a.extra:
        tensors[name] = [n_embd]
        types[name] = GGML_F32
    if a.split_experts:
        tensors['blk.0.ffn_gate.0.weight'] = [n_embd, n_ff]
        types['blk.0.ffn_gate.0.weight'] = GGML_F32

    arch = a.arch
    kvs = [
        kv('general.architecture', 8, arch),
        kv(arch + '.context_length', 4, 128),
        kv(arch + '.embedding_length', 4, n_embd),
        kv(arch + '.block_count', 4, 1),
        kv(arch + '.feed_forward_length', 4, n_ff),
        kv(arch + '.attention.head_count', 4, n_head),
        kv(arch + '.attention.head_count_kv', 4, n_head),
        kv(arch + '.attention.layer_norm_rms_epsilon', 6, 1e-5),
        kv(arch + '.vocab_size', 4, n_vocab),
    ]
    if a.phi3:
        kvs.append(kv(arch + '.attention.sliding_window', 4, a.swa))
    if a.split_experts:
        kvs += [kv(arch + '.expert_count', 4, 2), kv(arch + '.expert_used_count', 4, 1)]

    infos, data, offset = b'', b'', 0
    for name, dims in tensors.items():
        t = types[name]
        infos += gguf_string(name) + struct.pack('<I', len(dims))
        infos += b''.join(struct.pack('<Q', d) for d in dims)
        infos += struct.pack('<IQ', t, offset)
        n = 1
        for d in dims:
            n *= d
        size = n * TYPE_SIZES[t]
        size += (-size) % 32
        data += b'\0' * size
        offset += size

    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)) + b''.join(kvs) + infos
    head += b'\0' * ((-len(head)) % 32)
    with open(a.out, 'wb') as f:
        f.write(head + data)


if __name__ == '__main__':
    main()
