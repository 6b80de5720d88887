#!/usr/bin/env python3
"""Writes the seed corpora in corpus/<target>/ (run from tests/fuzz/; the files are committed).
Real inputs: the repo's demo model and cluster.yaml, the chat templates and configs of
../shared when present, and small requests, step plans and safetensors files in the wire
formats the code reads."""
import json, os, struct

C = 'corpus'
SHARED = '../../../shared'


def w(target, name, data):
    d = os.path.join(C, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    open(os.path.join(d, name), 'wb').write(data)


# (a) openai_request: first byte 0 chat, 1 completions, 2 tokenize, 3 detokenize, 4 json body
chat = {"model": "demo", "messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 16, "stop": ["\n\n"], "stream": True,
        "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2, "n": 2, "seed": 1}
w('openai_request', 'chat', b'\x00' + json.dumps(chat).encode())
w('openai_request', 'chat_kwargs', b'\x00' + json.dumps(
    {"model": "demo", "messages": [{"role": "user", "content": "x"}],
     "chat_template_kwargs": {"enable_thinking": False}, "add_generation_prompt": False,
     "stop_token_ids": [2], "min_tokens": 1, "ignore_eos": True, "priority": 0}).encode())
w('openai_request', 'completions', b'\x01' + json.dumps(
    {"model": "demo", "prompt": ["Once upon a time", "The cat"], "max_tokens": 32, "temperature": 0,
     "echo": True, "logprobs": 1, "frequency_penalty": 0.5, "presence_penalty": 0.5,
     "repetition_penalty": 1.1, "top_k": 40, "min_p": 0.05}).encode())
w('openai_request', 'completions_ids', b'\x01' + json.dumps(
    {"model": "demo", "prompt": [[1, 2, 3], [4]], "n": 3, "stop": "x"}).encode())
w('openai_request', 'tokenize', b'\x02' + json.dumps(
    {"model": "demo", "prompt": "Hello world", "add_special_tokens": False}).encode())
w('openai_request', 'tokenize_chat', b'\x02' + json.dumps(
    {"model": "demo", "messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}).encode())
w('openai_request', 'detokenize', b'\x03' + json.dumps({"model": "demo", "tokens": [1, 15043, 3186]}).encode())
w('openai_request', 'deep', b'\x04' + b'{"a":' + b'[' * 80 + b']' * 80 + b'}')
# structured output and forced tool calls
w('openai_request', 'chat_tool_required', b'\x00' + json.dumps(
    {"model": "demo", "messages": [{"role": "user", "content": "Weather?"}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                "parameters": {"type": "object", "properties": {
                    "city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["C", "F"]}},
                    "required": ["city"]}}}],
     "tool_choice": "required", "parallel_tool_calls": False}).encode())
w('openai_request', 'chat_json_schema', b'\x00' + json.dumps(
    {"model": "demo", "messages": [{"role": "user", "content": "Hi"}],
     "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": {
         "$defs": {"n": {"type": "object", "properties": {
             "v": {"type": ["integer", "null"]},
             "k": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3}}}},
         "$ref": "#/$defs/n"}}}}).encode())
w('openai_request', 'completions_guided_choice', b'\x01' + json.dumps(
    {"model": "demo", "prompt": "The review was", "guided_choice": ["positive", "negative"],
     "max_tokens": 4}).encode())
w('openai_request', 'chat_structured_outputs', b'\x00' + json.dumps(
    {"model": "demo", "messages": [{"role": "user", "content": "Hi"}],
     "structured_outputs": {"json": json.dumps({"type": "object", "properties": {
         "a": {"anyOf": [{"const": 1}, {"type": "string", "minLength": 2}]}}})}}).encode())
w('json_schema', 'object', json.dumps(
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
     "age": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]},
     "maxItems": 3}}, "required": ["name"]}, separators=(',', ':')))
w('json_schema', 'recursive', json.dumps(
    {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
     "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"},
    separators=(',', ':')))
w('json_schema', 'anyof', json.dumps(
    {"anyOf": [{"type": "number"}, {"type": ["string", "null"], "minLength": 2},
               {"const": {"a": [1, True]}}]}, separators=(',', ':')))
w('json_schema', 'value', '{"a": [1, 2.5e3, "x\\u00e9", {"b": null}]}')
w('json_schema', 'keywords', json.dumps(
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
     "when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"},
     "n": {"type": "integer", "minimum": -1000, "exclusiveMaximum": 123456}}},
    separators=(',', ':')))
w('json_schema', 'numbers', json.dumps(
    {"type": "object", "properties": {
        "p": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1e3, "multipleOf": 0.01},
        "t": {"type": "number", "minimum": -2.25, "exclusiveMinimum": True, "maximum": 40},
        "q": {"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 1000},
        "e": {"type": ["integer", "string"], "multipleOf": 12}}},
    separators=(',', ':')))
w('json_schema', 'lengths', json.dumps(
    {"type": "object", "properties": {
        "c": {"type": "string", "pattern": "[A-Z][a-z0-9]*", "minLength": 3, "maxLength": 6},
        "d": {"type": "string", "format": "date", "maxLength": 10},
        "w": {"type": "string", "pattern": "(\u00e9|[a-c\"])+", "minLength": 2, "maxLength": 4},
        "m": {"type": "string", "format": "email", "minLength": 10}}},
    separators=(',', ':')))
# regex_grammar: first byte even = text, odd = inside a JSON string; then the pattern
for name, mode, pattern in [
        ('email', 0, r'^[a-z0-9._%+-]{1,20}@[a-z0-9-]+(\.[a-z]{2,6}){1,2}$'),
        ('phone', 0, r'\(\d{3}\) \d{3}-\d{4}( ext\. \d{1,5})?'),
        ('unicode', 1, '[\u00e0-\u00ff\u4e00-\u9fff]+|caf\u00e9|\\u{1F600}.?'),
        ('classes', 1, r'[^\]\\"-]{2,}\s\S\w\W\D(?:a|b|)*?c{,3}x{'),
        ('groups', 0, r'((?P<y>\d{4})-(?<m>0[1-9]|1[0-2])){1,3}|(ab|c*)+d')]:
    w('regex_grammar', name, bytes([mode]) + pattern.encode())


# (b) http: byte 0 read size (0: no limit), byte 1 write size (0: no limit), byte 2 from 0xC0:
# the stream operation byte2 - 0xBF fails; then the bytes the client sends on one connection
def req(method, path, body=b'', extra=''):
    h = f'{method} {path} HTTP/1.1\r\nHost: localhost\r\n{extra}'
    if body or method == 'POST':
        h += f'Content-Type: application/json\r\nContent-Length: {len(body)}\r\n'
    return h.encode() + b'\r\n' + body


def http(name, data, read_size=0, write_size=0, fail=0):
    w('http', name, bytes([read_size, write_size, 0xBF + fail if fail else 0]) + data)


http('health', req('GET', '/health'))
http('models', req('GET', '/v1/models'))
http('tokenize', req('POST', '/tokenize', json.dumps({"model": "demo-llama", "prompt": "Hello world"}).encode()))
http('tokenize_chat', req('POST', '/tokenize', json.dumps(
    {"model": "demo-llama", "messages": [{"role": "user", "content": "Hi </s><s>"}]}).encode()))
http('detokenize', req('POST', '/detokenize', json.dumps({"model": "demo-llama", "tokens": [1, 2, 3, 300]}).encode()))
http('chat', req('POST', '/v1/chat/completions', json.dumps(
    {"model": "demo-llama", "messages": [{"role": "user", "content": "Hi"}], "stream": True}).encode()))
http('completions', req('POST', '/v1/completions', json.dumps(
    {"model": "demo-llama", "prompt": "Once", "max_tokens": 4}).encode(), 'Authorization: Bearer sk-x\r\n'))
body = json.dumps({"model": "demo-llama", "prompt": "chunked"}).encode()
pipelined = (b'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n'
             + (b'%x\r\n' % len(body)) + body + b'\r\n0\r\n\r\n' + req('GET', '/health')
             + req('GET', '/metrics', b'', 'Connection: close\r\n'))
http('chunked_pipelined', pipelined)
http('chunked_pipelined_fragments', pipelined, read_size=7, write_size=5)
http('http10', b'GET /health HTTP/1.0\r\n\r\n')
http('health_bytewise', req('GET', '/health') + req('GET', '/v1/models'), read_size=1, write_size=1)
http('tokenize_fail_op3', req('POST', '/tokenize', json.dumps({"model": "demo-llama", "prompt": "x"}).encode())
     + req('GET', '/health'), fail=3)
http('expect_continue_no_body', req('POST', '/tokenize', b'', 'Expect: 100-continue\r\n')
     .replace(b'Content-Length: 0', b'Content-Length: 40'))
http('bad_request', b'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n')


# (c) tokenizer: first byte: low 4 bits pick the tokenizer (0 = demo, then ../shared/tokenizers
# sorted), 0x10 add_special, 0x20 parse_special, 0x40 skip_special, 0x80 decode (int32 ids)
texts = ["Hello world", "Once upon a time, there was a little girl.",
         "  leading spaces\tand\ttabs\n\nnew lines", "Ünïcödé 日本語 🤖 emoji",
         "<s>[INST] hi [/INST]</s><|im_start|>user\nx<|im_end|>", "1234567890 3.14159 x=y+z;",
         "\u200b zero width"]
for t in range(6):
    for i, s in enumerate(texts if t == 0 else texts[:4]):
        w('tokenizer', f'enc_{t}_{i}', bytes([t | 0x30]) + s.encode())
    w('tokenizer', f'dec_{t}', bytes([t | 0x80 | 0x40]) + struct.pack('<12i', 1, 2, 3, 100, 200, 300, 1000, 5000, 29871, 13, 0, -1))
    w('tokenizer', f'dec_raw_{t}', bytes([t | 0x80]) + struct.pack('<8i', 1, 15043, 3186, 29892, 13, 2, 32000, 128000))

# (d) chat templates: the real templates, a NUL, the context
ctx = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "2+2?"}],
       "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}
srcs = {'demo-llama': '../../deploy/models/demo-llama/tokenizer_config.json',
        'stories260K': f'{SHARED}/models/stories260K/tokenizer_config.json'}
for n in ['deepseek_v3', 'gemma3', 'llama3', 'mistral', 'qwen3']:
    srcs[n] = f'{SHARED}/tokenizers/{n}/tokenizer_config.json'
for n, p in srcs.items():
    if not os.path.exists(p):
        continue
    t = json.load(open(p)).get('chat_template')
    if isinstance(t, list):
        t = t[0]['template']
    if t:
        w('chat_template', n, t.encode() + b'\x00' + json.dumps(ctx).encode())
w('chat_template', 'chatml', "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + "
  "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
w('chat_template', 'exprs', "{% set x = [1, 2, 3] %}{{ x[1:] | length }}{% for i in x %}{{ loop.index0 ~ '-' ~ i }}"
  "{% else %}none{% endfor %}{{ 'a' if x is defined else 'b' }}{{ ' s '.strip().upper() }}{# c #}"
  "{%- if not false and 3 % 2 == 1 -%} odd {%- elif none is none %}n{% endif %}"
  "{{ raise_exception('boom') if x|length > 5 else '' }}")


# (e) safetensors
def st(tensors, meta=None):
    hdr, data = {}, b''
    for name, (dt, shape, nb) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + nb]}
        data += (bytes(range(256)) * (nb // 256 + 1))[:nb]
    if meta:
        hdr['__metadata__'] = meta
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    return struct.pack('<Q', len(h)) + h + data


w('safetensors', 'f32', st({"w": ("F32", [2, 3], 24), "b": ("F32", [3], 12)}, {"format": "pt"}))
w('safetensors', 'f16_bf16', st({"a": ("F16", [4, 2], 16), "b": ("BF16", [8], 16), "s": ("F32", [], 4)}))
w('safetensors', 'other_dtypes', st({"i": ("I64", [2], 16), "u": ("U8", [5], 5), "z": ("F32", [0, 4], 0)}))

# (e2) gguf: a tiny llama file (metadata of every kind the loaders read, an SPM vocabulary,
# F32 / F16 / Q8_0 tensors) and a metadata-only file with every value type and a nested array
def gg_str(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack('<Q', len(s)) + s


def gg_kv(key, typ, body):
    return gg_str(key) + struct.pack('<I', typ) + body


def gg_arr(elem, items, fmt=None):
    body = struct.pack('<IQ', elem, len(items))
    for x in items:
        body += gg_str(x) if elem == 8 else struct.pack('<' + fmt, x)
    return body


def gguf(kvs, tensors):
    out = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)) + b''.join(kvs)
    data = b''
    for name, dims, typ, nbytes in tensors:
        data += b'\0' * ((32 - len(data) % 32) % 32)
        out += gg_str(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<IQ', typ, len(data))
        data += (bytes(range(1, 128)) * (nbytes // 127 + 1))[:nbytes]
    if tensors:
        out += b'\0' * ((32 - len(out) % 32) % 32) + data
    return out


toks = ['<unk>', '<s>', '</s>', '\u2581a', 'b', '\u2581ab']
w('gguf', 'tiny_llama', gguf([
    gg_kv('general.architecture', 8, gg_str('llama')),
    gg_kv('llama.block_count', 4, struct.pack('<I', 1)),
    gg_kv('llama.embedding_length', 4, struct.pack('<I', 32)),
    gg_kv('llama.feed_forward_length', 4, struct.pack('<I', 32)),
    gg_kv('llama.attention.head_count', 4, struct.pack('<I', 2)),
    gg_kv('llama.attention.head_count_kv', 4, struct.pack('<I', 1)),
    gg_kv('llama.attention.layer_norm_rms_epsilon', 6, struct.pack('<f', 1e-5)),
    gg_kv('llama.attention.sliding_window', 4, struct.pack('<I', 8)),
    gg_kv('tokenizer.ggml.model', 8, gg_str('llama')),
    gg_kv('tokenizer.ggml.tokens', 9, gg_arr(8, toks)),
    gg_kv('tokenizer.ggml.scores', 9, gg_arr(6, [0, 0, 0, -1, -2, -3], 'f')),
    gg_kv('tokenizer.ggml.token_type', 9, gg_arr(5, [3, 3, 3, 1, 1, 1], 'i')),
    gg_kv('tokenizer.ggml.bos_token_id', 4, struct.pack('<I', 1)),
    gg_kv('tokenizer.ggml.add_bos_token', 7, b'\x01'),
    gg_kv('tokenizer.chat_template', 8, gg_str('{{ bos_token }}{{ messages[0].content }}')),
], [('token_embd.weight', [32, 6], 1, 32 * 6 * 2), ('output_norm.weight', [32], 0, 128),
    ('blk.0.attn_q.weight', [32, 32], 8, 34 * 32)]))
w('gguf', 'all_types', gguf([
    gg_kv('u8', 0, b'\x07'), gg_kv('i8', 1, b'\xff'), gg_kv('u16', 2, struct.pack('<H', 7)),
    gg_kv('i16', 3, struct.pack('<h', -7)), gg_kv('u32', 4, struct.pack('<I', 7)),
    gg_kv('i32', 5, struct.pack('<i', -7)), gg_kv('f32', 6, struct.pack('<f', 0.5)),
    gg_kv('bool', 7, b'\x01'), gg_kv('str', 8, gg_str('x')),
    gg_kv('u64', 10, struct.pack('<Q', 7)), gg_kv('i64', 11, struct.pack('<q', -7)),
    gg_kv('f64', 12, struct.pack('<d', 0.25)),
    gg_kv('nested', 9, struct.pack('<IQ', 9, 2) + struct.pack('<IQ', 0, 2) + b'\x01\x02' +
          struct.pack('<IQ', 8, 1) + gg_str('y')),
    gg_kv('general.gpt2.merges', 9, gg_arr(8, ['a b', 'ab c'])),
], []))

# (f) config.json and cluster.yaml
w('model_config', 'demo-llama', open('../../deploy/models/demo-llama/config.json', 'rb').read())
p = f'{SHARED}/models/stories260K/config.json'
if os.path.exists(p):
    w('model_config', 'stories260K', open(p, 'rb').read())
w('model_config', 'qwen3', json.dumps(
    {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
     "vocab_size": 1000, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
     "tie_word_embeddings": True, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": [2, 3],
     "hidden_act": "silu"}))
w('model_config', 'llama31', json.dumps(
    {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
     "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
     "attention_bias": False, "mlp_bias": False, "torch_dtype": "float16", "hidden_act": "silu"}))
w('model_config', 'qwen2_sliding', json.dumps(
    {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
     "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
     "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "use_sliding_window": True,
     "sliding_window": 128, "max_window_layers": 2, "torch_dtype": "float32", "hidden_act": "silu"}))
w('cluster_config', 'deploy', open('../../deploy/cluster.yaml', 'rb').read())
w('cluster_config', 'small', "model: {path: /m, load_format: dummy}\nengine: {block_size: 16}\n"
  "router:\n  port: 2000\n  api_keys: [sk-a, sk-b]\n")


# (g) step plans: 2 bytes (mirror's num_blocks, block_size), then u16-length-prefixed messages
VERSION = 5  # kStepPlanVersion (worker/engine/step_plan.h)


def ints(v):
    return struct.pack('<I', len(v)) + b''.join(struct.pack('<i', x) for x in v)


# Sampling parameters of a new sequence (temperature, top_k, top_p, min_p, repetition,
# presence, frequency, logprobs, seed), as the last pipeline stage gets them.
SAMPLING = struct.pack('<fifffffiQ', 0.8, 40, 0.9, 0.0, 1.1, 0.0, 0.0, 2, 12345)


def step(n, new=(), sampled=(), fin=(), pre=(), blocks=(), sched=()):
    b = struct.pack('<BBQ', VERSION, 2, n)
    b += struct.pack('<I', len(new)) + b''.join(struct.pack('<q', i) + ints(p) + SAMPLING for i, p in new)
    b += struct.pack('<I', len(sampled)) + b''.join(struct.pack('<qi', i, t) for i, t in sampled)
    for ids in (fin, pre):
        b += struct.pack('<I', len(ids)) + b''.join(struct.pack('<q', i) for i in ids)
    b += struct.pack('<I', len(blocks)) + b''.join(struct.pack('<qi', i, f) + ints(bl) for i, f, bl in blocks)
    # each scheduled entry: id, start, count, samples, then its grammar mask words (none here)
    b += struct.pack('<I', len(sched)) + b''.join(struct.pack('<qiiBI', i, st, k, s, 0) for i, st, k, s in sched)
    return b


def stream(nb, bs, msgs):
    return bytes([nb, bs]) + b''.join(struct.pack('<H', len(m)) + m for m in msgs)


# start: num_blocks 16, block_size 4, decode graphs of up to 8 sequences and 4 table columns, a
# float16 KV cache (DType::kF16 = 1)
start = struct.pack('<BBiiiiB', VERSION, 1, 16, 4, 8, 4, 1)
w('step_plan', 'prefill_decode', stream(15, 3, [
    start, step(1, new=[(7, [1, 2, 3, 4, 5])], blocks=[(7, 0, [0, 1])], sched=[(7, 0, 5, 1)]),
    step(2, sampled=[(7, 9)], sched=[(7, 5, 1, 1)]),
    step(3, sampled=[(7, 10)], blocks=[(7, 2, [2])], sched=[(7, 6, 1, 1)])]))
w('step_plan', 'chunked_preempt', stream(7, 1, [
    step(1, new=[(1, [1, 2, 3, 4, 5, 6]), (2, [7])], blocks=[(1, 0, [0]), (2, 0, [1])], sched=[(1, 0, 2, 0), (2, 0, 1, 1)]),
    step(2, sampled=[(2, 5)], blocks=[(1, 1, [2])], sched=[(1, 2, 2, 0)]),
    step(3, pre=[1], fin=[2], blocks=[(1, 0, [3, 4])], sched=[(1, 0, 4, 0)]),
    struct.pack('<BB', VERSION, 3)]))
# prefix caching: a second sequence starts at the first one's two cached blocks (start 6)
w('step_plan', 'prefix_cache', stream(8, 2, [  # block size 1 + 2 = 3
    step(1, new=[(1, [1, 2, 3, 4, 5, 6, 7])], blocks=[(1, 0, [0, 1, 2])], sched=[(1, 0, 7, 1)]),
    step(2, new=[(2, [1, 2, 3, 4, 5, 6, 8])], sampled=[(1, 9)], blocks=[(2, 0, [0, 1, 3])],
         sched=[(1, 7, 1, 1), (2, 6, 1, 1)])]))

# tool_parser: first byte the parser (0 hermes, 1 llama3_json, 2 mistral, 3 deepseek_v3,
# 4 json_array, 5 none), second the piece lengths of the stream, then the model's text
tool_texts = {
    'hermes': (0, '<think>x</think>Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
                  '{"city": "Paris", "unit": "c"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", '
                  '"arguments": {"city": "Rome"}}\n</tool_call>'),
    'hermes_string_args': (0, '<tool_call>{"arguments": "{\\"a\\": [1, 2.50, \\"\\\\u00e9\\"]}", '
                              '"name": "f"}</tool_call>'),
    'llama3_json': (1, '{"name": "f", "parameters": {"x": 1, "s": "a\\/b \\ud83d\\ude00"}}; '
                       '{"parameters": {}, "name": "g"}'),
    'llama3_tag': (1, 'Sure. <|python_tag|>{"name": "f", "arguments": {"q": "a;b"}}'),
    'mistral': (2, 'Hi[TOOL_CALLS][{"name": "f", "arguments": {"a": "]"}}, '
                   '{"name": "g", "arguments": {}}]'),
    'mistral_v11': (2, '[TOOL_CALLS]f[ARGS]{"a": 1e2, "b": [true, null]}[TOOL_CALLS]g[ARGS]{}'),
    'deepseek_v3': (3, '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n'
                       '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function'
                       '<｜tool▁sep｜>get_time\n```json\n{"tz": "Europe/Rome"}\n```<｜tool▁call▁end｜>'
                       '<｜tool▁calls▁end｜>'),
    'json_array': (4, '[{"name": "get_weather", "parameters": {"city": "Paris", "unit": "C"}}, '
                      '{"name": "now", "parameters": {}}]'),
}
for name, (kind, text) in tool_texts.items():
    w('tool_parser', name, bytes([kind, 7]) + text.encode())
