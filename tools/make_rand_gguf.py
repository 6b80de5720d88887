#!/usr/bin/env python3
"""Small random-weight F32 GGUFs as llama.cpp's convert_hf_to_gguf.py writes real ones, with a
real tokenizer and chat template, for by-hand checks against llama.cpp (README, GGUF files):
serve one with `MODEL=OUT.gguf tools/serve.sh` and with llama-server, compare greedy outputs.

  llama32: Llama-3.2-shaped: gpt2 / llama-bpe vocabulary (128,256), tied embeddings (no
           output.weight), rope_freqs.weight from the "llama3" rope scaling (factor 32), q/k rows
           permuted. Tokenizer folder: ../shared/tokenizers/llama3.
  qwen2:   Qwen2.5-shaped: gpt2 / qwen2 vocabulary padded to 151,936 with [PAD] tokens as the
           converter does, q/k/v biases, tied embeddings. Tokenizer folder:
           ../shared/tokenizers/qwen3 (the Qwen tokenizer and Qwen3's chat template).

usage: make_rand_gguf.py llama32|qwen2 OUT.gguf LLAMA_CPP_DIR TOKENIZER_DIR
Needs numpy (Debian python3-numpy) and gguf-py from the llama.cpp checkout (not copied); the
tokenizer folder holds tokenizer.json and tokenizer_config.json.
"""
import json, math, os, sys

import numpy as np

if len(sys.argv) != 5 or sys.argv[1] not in ("llama32", "qwen2"):
    sys.exit("usage: make_rand_gguf.py llama32|qwen2 OUT.gguf LLAMA_CPP_DIR TOKENIZER_DIR")
shape, out, lcpp, tokdir = sys.argv[1:5]
for need in (os.path.join(lcpp, "gguf-py"), os.path.join(tokdir, "tokenizer.json")):
    if not os.path.exists(need):
        sys.exit(f"make_rand_gguf.py: {need} is missing")
sys.path.insert(0, os.path.join(lcpp, "gguf-py"))
import gguf  # noqa: E402

tok = json.load(open(os.path.join(tokdir, "tokenizer.json")))
cfg = json.load(open(os.path.join(tokdir, "tokenizer_config.json")))
llama = shape == "llama32"
dim, ffn, layers, heads, kv = 256, 512, 4, 8, 2
theta = 500000.0 if llama else 1000000.0
head_dim = dim // heads
vocab = len(tok["model"]["vocab"]) + len(tok["added_tokens"]) if llama else 151936
rng = np.random.default_rng(7 if llama else 9)


def rnd(*s):
    return (rng.standard_normal(s, dtype=np.float32) * 0.5).astype(np.float32)


def permute(w, n):  # HF rotate-half rows -> llama.cpp interleaved rows (llama only)
    return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


w = gguf.GGUFWriter(out, "llama" if llama else "qwen2")
w.add_name("rand-" + shape)
w.add_context_length(4096)
w.add_embedding_length(dim)
w.add_block_count(layers)
w.add_feed_forward_length(ffn)
w.add_head_count(heads)
w.add_head_count_kv(kv)
w.add_layer_norm_rms_eps(1e-5 if llama else 1e-6)
w.add_rope_freq_base(theta)
if llama:
    w.add_rope_dimension_count(head_dim)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
if llama:
    w.add_vocab_size(vocab)
toks = [f"[PAD{i}]" for i in range(vocab)]
types = [1 if llama else 5] * vocab  # the converter's padding is UNUSED (5)
for t, i in tok["model"]["vocab"].items():
    toks[i], types[i] = t, 1
for a in tok["added_tokens"]:
    toks[a["id"]], types[a["id"]] = a["content"], 3 if a["special"] else 4
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("llama-bpe" if llama else "qwen2")
w.add_token_list(toks)
w.add_token_types(types)
w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]])
if llama:
    w.add_bos_token_id(128000)
    w.add_eos_token_id(128009)
    w.add_add_bos_token(True)
else:
    w.add_eos_token_id(151645)
    w.add_pad_token_id(151643)
    w.add_bos_token_id(151643)
    w.add_add_bos_token(False)
w.add_chat_template(cfg["chat_template"])
w.add_tensor("token_embd.weight", rnd(vocab, dim) * 0.1)
w.add_tensor("output_norm.weight", np.ones(dim, np.float32))
if llama:
    # convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, rope_scaling llama3 (Llama 3.2)
    factor, low, high, old = 32.0, 1.0, 4.0, 8192
    freqs = 1.0 / (np.float32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    f = []
    for fr in freqs:
        wl = 2 * math.pi / float(fr)
        if wl < old / high:
            f.append(1)
        elif wl > old / low:
            f.append(factor)
        else:
            s = (old / wl - low) / (high - low)
            f.append(1 / ((1 - s) / factor + s))
    w.add_tensor("rope_freqs.weight", np.array(f, dtype=np.float32))
    print("rope_freqs", [round(x, 3) for x in f])
for i in range(layers):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(dim, np.float32))
    if llama:
        w.add_tensor(p + "attn_q.weight", permute(rnd(dim, dim), heads))
        w.add_tensor(p + "attn_k.weight", permute(rnd(kv * head_dim, dim), kv))
        w.add_tensor(p + "attn_v.weight", rnd(kv * head_dim, dim))
    else:
        w.add_tensor(p + "attn_q.weight", rnd(dim, dim))
        w.add_tensor(p + "attn_k.weight", rnd(kv * head_dim, dim))
        w.add_tensor(p + "attn_v.weight", rnd(kv * head_dim, dim))
        w.add_tensor(p + "attn_q.bias", rnd(dim))
        w.add_tensor(p + "attn_k.bias", rnd(kv * head_dim))
        w.add_tensor(p + "attn_v.bias", rnd(kv * head_dim))
    w.add_tensor(p + "attn_output.weight", rnd(dim, dim))
    w.add_tensor(p + "ffn_norm.weight", np.ones(dim, np.float32))
    w.add_tensor(p + "ffn_gate.weight", rnd(ffn, dim))
    w.add_tensor(p + "ffn_up.weight", rnd(ffn, dim))
    w.add_tensor(p + "ffn_down.weight", rnd(dim, ffn))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
