#!/usr/bin/env python3
"""Builds the demo model's tokenizer (deploy/models/demo-llama): a byte-level BPE in Hugging
Face tokenizer.json form, trained here on a small built-in English corpus, plus
tokenizer_config.json with a ChatML chat template. Deterministic: two runs give the same files.

Usage: tools/make_demo_tokenizer.py [OUT_DIR]   (default deploy/models/demo-llama)
"""
import collections
import json
import os
import re
import sys

NUM_MERGES = 744  # 256 byte tokens + 744 merges = 1000 ids, then 3 special tokens
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CORPUS = """
Once upon a time there was a small server that answered questions. It read every request,
checked it, turned the words into numbers and sent them to the engine. The engine thought about
the numbers, one step at a time, and sent new numbers back. The server turned them into words
again and streamed them to the user, piece by piece, until the answer was complete.
The user asked: what is the capital of France? The assistant answered: the capital of France is
Paris. The user asked for a story about a cat, a dog and a little girl who loved to play in the
park with a big red ball. They played all day and when the sun went down they went home happy.
Large language models predict the next token. A tokenizer splits text into tokens; the model
reads the tokens and writes logits; the sampler picks the next token; the detokenizer turns it
back into text. Continuous batching keeps the machine busy: new requests join the batch while
others are still running, and the key value cache is split into blocks so that memory is never
wasted. Hello, world! How are you today? I am fine, thank you. What would you like to know?
Please write a short poem about the sea, the sky and the stars at night.
def main(): return 0  # code 1234567890 numbers, dates 2026-11-22 and prices $19.99.
"""

# GPT-2's pre-tokenizer, approximated with Python's re (ASCII letters and digits); the merges
# it produces are valid for any pre-tokenizer.
PRETOKEN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train(corpus):
    byte_map = bytes_to_unicode()
    words = collections.Counter(
        tuple(byte_map[b] for b in piece.encode("utf-8")) for piece in PRETOKEN.findall(corpus))
    vocab = [byte_map[b] for b in range(256)]
    merges = []
    for _ in range(NUM_MERGES):
        pairs = collections.Counter()
        for word, count in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        vocab.append(best[0] + best[1])
        merged = collections.Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return vocab, merges


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "deploy", "models", "demo-llama")
    vocab, merges = train(CORPUS)
    ids = {tok: i for i, tok in enumerate(vocab)}
    first_special = len(vocab)
    added = [{"id": first_special + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": ids, "merges": [a + " " + b for a, b in merges]},
    }
    template = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
                "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    config = {
        "add_bos_token": False, "add_eos_token": False, "bos_token": None,
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "clean_up_tokenization_spaces": False, "model_max_length": 2048,
        "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": template,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                 for t in added},
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"{out_dir}: {len(vocab)} BPE tokens ({len(merges)} merges) + {len(SPECIALS)} special")


if __name__ == "__main__":
    main()
