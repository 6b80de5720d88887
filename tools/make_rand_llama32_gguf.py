#!/usr/bin/env python3
"""A small random-weight Llama-3.2-shaped F32 GGUF as llama.cpp's convert_hf_to_gguf.py writes
one: the gpt2 / llama-bpe vocabulary (128,256 tokens) and merges, the chat template, tied
embeddings (no output.weight), rope_freqs.weight from the "llama3" rope scaling (factor 32), q/k
rows permuted. For a by-hand check of a Llama 3.x file against llama.cpp (README, GGUF files):
serve it with `MODEL=OUT tools/serve.sh` and with llama-server, and compare greedy outputs.

usage: make_rand_llama32_gguf.py OUT.gguf LLAMA_CPP_DIR LLAMA3_TOKENIZER_DIR
Needs numpy (Debian python3-numpy) and gguf-py from the llama.cpp checkout (not copied); the
tokenizer folder is ../shared/tokenizers/llama3 (tokenizer.json, tokenizer_config.json).
"""
import json, math, os, sys

import numpy as np

out, lcpp, tokdir = sys.argv[1:4]
sys.path.insert(0, os.path.join(lcpp, "gguf-py"))
import gguf  # noqa: E402

tok = json.load(open(os.path.join(tokdir, "tokenizer.json")))
cfg = json.load(open(os.path.join(tokdir, "tokenizer_config.json")))
dim, ffn, layers, heads, kv, theta = 256, 512, 4, 8, 2, 500000.0
head_dim = dim // heads
vocab = len(tok['model']['vocab']) + len(tok['added_tokens'])
rng = np.random.default_rng(7)
def rnd(*s): return (rng.standard_normal(s, dtype=np.float32) * 0.5).astype(np.float32)
def permute(w, n):
    return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
w = gguf.GGUFWriter(out, 'llama')
w.add_name('rand-llama32'); w.add_context_length(4096); w.add_embedding_length(dim)
w.add_block_count(layers); w.add_feed_forward_length(ffn); w.add_head_count(heads)
w.add_head_count_kv(kv); w.add_layer_norm_rms_eps(1e-5); w.add_rope_freq_base(theta)
w.add_rope_dimension_count(head_dim); w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_vocab_size(vocab)
toks = [None] * vocab; types = [1] * vocab
for t, i in tok['model']['vocab'].items(): toks[i] = t
for a in tok['added_tokens']:
    toks[a['id']] = a['content']; types[a['id']] = 3 if a['special'] else 4
w.add_tokenizer_model('gpt2'); w.add_tokenizer_pre('llama-bpe')
w.add_token_list(toks); w.add_token_types(types)
w.add_token_merges(tok['model']['merges'])
w.add_bos_token_id(128000); w.add_eos_token_id(128009); w.add_add_bos_token(True)
w.add_chat_template(cfg['chat_template'])
w.add_tensor('token_embd.weight', rnd(vocab, dim) * 0.1)
w.add_tensor('output_norm.weight', np.ones(dim, np.float32))
# convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, rope_scaling llama3 (Llama 3.2)
factor, low, high, old = 32.0, 1.0, 4.0, 8192
freqs = 1.0 / (np.float32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
f = []
for fr in freqs:
    wl = 2 * math.pi / float(fr)
    if wl < old / high: f.append(1)
    elif wl > old / low: f.append(factor)
    else:
        s = (old / wl - low) / (high - low); f.append(1 / ((1 - s) / factor + s))
w.add_tensor('rope_freqs.weight', np.array(f, dtype=np.float32))
for i in range(layers):
    p = f'blk.{i}.'
    w.add_tensor(p + 'attn_norm.weight', np.ones(dim, np.float32))
    w.add_tensor(p + 'attn_q.weight', permute(rnd(dim, dim), heads))
    w.add_tensor(p + 'attn_k.weight', permute(rnd(kv * head_dim, dim), kv))
    w.add_tensor(p + 'attn_v.weight', rnd(kv * head_dim, dim))
    w.add_tensor(p + 'attn_output.weight', rnd(dim, dim))
    w.add_tensor(p + 'ffn_norm.weight', np.ones(dim, np.float32))
    w.add_tensor(p + 'ffn_gate.weight', rnd(ffn, dim))
    w.add_tensor(p + 'ffn_up.weight', rnd(ffn, dim))
    w.add_tensor(p + 'ffn_down.weight', rnd(dim, ffn))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print('factors', [round(x, 3) for x in f])
