#!/usr/bin/env python3
"""A random-weight llama-architecture F16 GGUF of a real model's shape, for side-by-side speed
runs with llama.cpp at sizes people serve (README, "At a 7B shape"). Quantize it with
llama.cpp's llama-quantize (Q4_K_M, Q8_0, ...) and run tools/bench-vs-llama-cpp.sh on both.

  mistral7b: hidden 4096, FFN 14336, 32 heads / 8 KV heads, 32 layers (7.24B parameters)
  llama2-7b: hidden 4096, FFN 11008, 32 heads / 32 KV heads, 32 layers (6.74B)
  llama2-13b: hidden 5120, FFN 13824, 40 heads / 40 KV heads, 40 layers (13.0B)

The vocabulary is llama.cpp's Llama-2 SentencePiece one (models/ggml-vocab-llama-spm.gguf in its
checkout, 32000 tokens). Tensors are written one at a time (a 7B shape does not fit in memory
twice): ~14.5 GB of disk and 2-3 minutes for mistral7b. Weights are N(0, 0.02) (seed 1234),
norms 1: greedy output is noise, the speed is a real model's.

usage: make_rand_big_gguf.py mistral7b|llama2-7b|llama2-13b OUT.gguf LLAMA_CPP_DIR [--layers N]
Needs numpy (Debian python3-numpy) and gguf-py from the llama.cpp checkout (not copied).
"""
import os, sys

import numpy as np

SHAPES = {  # hidden, FFN, heads, KV heads, layers
    "mistral7b": (4096, 14336, 32, 8, 32),
    "llama2-7b": (4096, 11008, 32, 32, 32),
    "llama2-13b": (5120, 13824, 40, 40, 40),
}
if len(sys.argv) not in (4, 6) or sys.argv[1] not in SHAPES or \
        (len(sys.argv) == 6 and sys.argv[4] != "--layers"):
    sys.exit("usage: make_rand_big_gguf.py " + "|".join(SHAPES) +
             " OUT.gguf LLAMA_CPP_DIR [--layers N]")
shape, out, lcpp = sys.argv[1:4]
dim, ffn, heads, kv_heads, layers = SHAPES[shape]
if len(sys.argv) == 6:
    layers = int(sys.argv[5])
vocab_file = os.path.join(lcpp, "models", "ggml-vocab-llama-spm.gguf")
for need in (os.path.join(lcpp, "gguf-py"), vocab_file):
    if not os.path.exists(need):
        sys.exit(f"make_rand_big_gguf.py: {need} is missing")
sys.path.insert(0, os.path.join(lcpp, "gguf-py"))
import gguf  # noqa: E402

head_dim = dim // heads
vocab_src = gguf.GGUFReader(vocab_file)
fields = vocab_src.fields
tokens = [bytes(fields["tokenizer.ggml.tokens"].parts[i]) for i in fields["tokenizer.ggml.tokens"].data]
vocab = len(tokens)

tensors = [("token_embd.weight", (vocab, dim)), ("output.weight", (vocab, dim)),
           ("output_norm.weight", (dim,))]
for i in range(layers):
    b = f"blk.{i}."
    tensors += [(b + "attn_norm.weight", (dim,)), (b + "attn_q.weight", (dim, dim)),
                (b + "attn_k.weight", (kv_heads * head_dim, dim)),
                (b + "attn_v.weight", (kv_heads * head_dim, dim)),
                (b + "attn_output.weight", (dim, dim)), (b + "ffn_norm.weight", (dim,)),
                (b + "ffn_gate.weight", (ffn, dim)), (b + "ffn_up.weight", (ffn, dim)),
                (b + "ffn_down.weight", (dim, ffn))]

w = gguf.GGUFWriter(out, "llama")
w.add_name(f"rand-{shape}")
w.add_context_length(4096)
w.add_embedding_length(dim)
w.add_block_count(layers)
w.add_feed_forward_length(ffn)
w.add_head_count(heads)
w.add_head_count_kv(kv_heads)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
w.add_rope_dimension_count(head_dim)
w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores([float(fields["tokenizer.ggml.scores"].parts[i][0])
                    for i in fields["tokenizer.ggml.scores"].data])
w.add_token_types([int(fields["tokenizer.ggml.token_type"].parts[i][0])
                   for i in fields["tokenizer.ggml.token_type"].data])
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.add_add_bos_token(True)
w.add_add_eos_token(False)
for name, s in tensors:  # norms F32 (as the converter writes them), matrices F16
    dt = np.dtype(np.float32 if len(s) == 1 else np.float16)
    w.add_tensor_info(name, s, dt, int(np.prod(s)) * dt.itemsize)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
rng = np.random.default_rng(1234)
for name, s in tensors:
    if len(s) == 1:
        w.write_tensor_data(np.ones(s, np.float32))
    else:
        w.write_tensor_data((rng.standard_normal(s, dtype=np.float32) * 0.02).astype(np.float16))
w.close()
params = sum(int(np.prod(s)) for _, s in tensors)
print(f"wrote {out}: {shape} shape, {layers} layers, {params / 1e9:.2f}B parameters, F16")
