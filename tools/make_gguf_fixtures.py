#!/usr/bin/python3
"""The GGUF fixtures of tests/fixtures/gguf/: small random-weight checkpoints of our own, written as a Hugging Face
folder and converted to GGUF with llama.cpp's own gguf-py, the way its convert_hf_to_gguf.py writes each
architecture; the quantized ones then quantized by its llama-quantize, with the logits their weights give once
dequantized by gguf-py's `gguf.quants.dequantize` (a float64 numpy forward) stored beside them.

    bash ../shared/peers/llamacpp/build.sh /tmp/llamacpp       # llama-quantize and gguf-py (once, ~5 minutes)
    /usr/bin/python3 tools/make_gguf_fixtures.py /tmp/llamacpp  # numpy and PyYAML: apt python3-numpy python3-yaml

It also writes convert_llama/: a BF16 Llama 3-style folder with a small byte-level BPE tokenizer and a chat template,
and expected_tensors.txt, the tensors that the kit's own to_gguf.py (../shared/peers/llamacpp) and then llama-quantize
write from it for bf16, q8_0, q4_0, q4_k_m, q5_k_m and q6_k: name, type and shape of each in file order, and a hash of its bytes
(FNV-1a, 64 bits), for tests/checkpoint/test_gguf_convert.c to hold `specdec convert` to; and the same for BF16
qwen2, qwen3 and gpt2 folders (convert_qwen2, convert_qwen3, convert_gpt2), whose bf16 file, to_gguf.py converting
llamas alone, is this script's own conversion.

Every run writes the same bytes: the weights come from numpy generators seeded by the fixture's name. Tests read
the files; they never need llama.cpp (tests/fixtures/gguf/README.md says what each fixture covers).
"""
import json, os, shutil, struct, subprocess, sys, zlib
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "gguf")

# name: architecture, sizes, dtype of the matrices, options
FLOAT_CASES = {
    "llama_gqa_f32": dict(arch="llama", d=16, H=4, Hkv=2, hd=4, F=40, L=2, V=50, dtype="F32", tied=False),
    "llama3_rope_bf16": dict(arch="llama", d=16, H=2, Hkv=1, hd=8, F=32, L=2, V=50, dtype="BF16", tied=True,
                             theta=500000.0, llama3=True),
    "qwen2_bias_f16": dict(arch="qwen2", d=16, H=2, Hkv=1, hd=8, F=32, L=2, V=50, dtype="F16", tied=True,
                           theta=1e6),
    "qwen3_qknorm_bf16": dict(arch="qwen3", d=16, H=2, Hkv=1, hd=12, F=32, L=2, V=50, dtype="BF16", tied=False),
    "gpt2_f32": dict(arch="gpt2", d=16, H=2, F=64, L=2, V=50, P=32, dtype="F32", tied=True),
}
# quantized: (the float checkpoint they start from, llama-quantize's type)
# At unit gain (gain=1): the float fixtures' extra gain on q, k, gate and the embeddings makes a model whose logits
# move several times more under 8-bit noise (specdec's own --quant q8 of the Q8_0 fixture's float checkpoint: worst
# cosine 0.9972 with those gains, 0.9995 at unit gain), more than 8-bit arithmetic could keep within the issue's
# 0.999 for Q8_0 and Q6_K.
SMALL = dict(arch="llama", d=64, H=4, Hkv=2, hd=16, F=128, L=2, V=64, dtype="F32", tied=False, gain=1)
WIDE = dict(arch="llama", d=256, H=2, Hkv=1, hd=128, F=256, L=1, V=64, dtype="F32", tied=False, gain=1)  # rows: 256
# Rows of 64 (but the down projection's 256), as Qwen2.5-0.5B's 896 and SmolLM2's 576 and 960 are not whole K-quant
# blocks: llama-quantize's Q4_K_M falls back from Q4_K to Q5_0 and from Q6_K to Q8_0, its Q5_K_M from Q5_K to Q5_1.
NARROW = dict(arch="llama", d=64, H=4, Hkv=2, hd=16, F=256, L=1, V=64, dtype="F32", tied=False, gain=1)
QUANT_CASES = {"llama_q8_0": (SMALL, "Q8_0"), "llama_q4_0": (SMALL, "Q4_0"), "llama_q4_1": (SMALL, "Q4_1"),
               "llama_q4_k_m": (WIDE, "Q4_K_M"),
               "llama_q6_k": (WIDE, "Q6_K"), "llama_q4_k_m_narrow": (NARROW, "Q4_K_M"),
               "llama_q5_k_m_narrow": (NARROW, "Q5_K_M")}
TOKENS = [0, 7, 3, 11, 1, 5, 9, 2]  # the expected logits' input ids


def rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns, rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def stored(x, dtype):
    """x as the checkpoint stores it: (raw array, its float32 values)."""
    if dtype == "F32":
        return x.astype(np.float32), x.astype(np.float32)
    if dtype == "F16":
        h = x.astype(np.float16)
        return h, h.astype(np.float32)
    b = bf16_bits(x)
    return b, (b.astype(np.uint32) << 16).view(np.float32)


# ---- a random checkpoint, in transformers' names ---------------------------------------------------------------

def weights(name, c):
    """{transformers name: float32 array}, at a scale where every part of the model matters."""
    g = rng(name)
    gain = c.get("gain")  # None: the float fixtures' gains below
    mat = lambda rows, cols, k=1: (g.standard_normal((rows, cols)) / np.sqrt(cols) * (gain or k)).astype(np.float32)
    vec = lambda n, mean=0.0: (mean + 0.2 * g.standard_normal(n)).astype(np.float32)
    d, F, L, V = c["d"], c["F"], c["L"], c["V"]
    w = {}
    if c["arch"] == "gpt2":
        w["wte.weight"] = mat(V, d) * 4
        w["wpe.weight"] = mat(c["P"], d)
        for l in range(L):
            p = f"h.{l}."
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = vec(d, 1.0), vec(d)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = mat(d, 3 * d) * 2, vec(3 * d)  # Conv1D [in, out]
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = mat(d, d), vec(d)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = vec(d, 1.0), vec(d)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = mat(d, F), vec(F)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = mat(F, d), vec(d)
        w["ln_f.weight"], w["ln_f.bias"] = vec(d, 1.0), vec(d)
        return w
    H, Hkv, hd = c["H"], c["Hkv"], c["hd"]
    w["model.embed_tokens.weight"] = mat(V, d, 4)
    for l in range(L):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = vec(d, 1.0)
        w[p + "self_attn.q_proj.weight"] = mat(H * hd, d, 2)
        w[p + "self_attn.k_proj.weight"] = mat(Hkv * hd, d, 2)
        w[p + "self_attn.v_proj.weight"] = mat(Hkv * hd, d)
        if c["arch"] == "qwen2":
            for x, n in (("q", H), ("k", Hkv), ("v", Hkv)):
                w[p + f"self_attn.{x}_proj.bias"] = vec(n * hd)
        if c["arch"] == "qwen3":
            w[p + "self_attn.q_norm.weight"], w[p + "self_attn.k_norm.weight"] = vec(hd, 1.0), vec(hd, 1.0)
        w[p + "self_attn.o_proj.weight"] = mat(d, H * hd)
        w[p + "post_attention_layernorm.weight"] = vec(d, 1.0)
        w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"] = mat(F, d, 2), mat(F, d)
        w[p + "mlp.down_proj.weight"] = mat(d, F)
    w["model.norm.weight"] = vec(d, 1.0)
    if not c["tied"]:
        w["lm_head.weight"] = mat(V, d, 4)
    return w


def hf_config(c):
    if c["arch"] == "gpt2":
        return {"model_type": "gpt2", "n_embd": c["d"], "n_head": c["H"], "n_layer": c["L"], "n_inner": c["F"],
                "n_positions": c["P"], "vocab_size": c["V"], "bos_token_id": 0, "eos_token_id": 1,
                "activation_function": "gelu_new", "tie_word_embeddings": True}
    cfg = {"model_type": c["arch"], "hidden_size": c["d"], "num_attention_heads": c["H"],
           "num_key_value_heads": c["Hkv"], "head_dim": c["hd"], "intermediate_size": c["F"],
           "num_hidden_layers": c["L"], "max_position_embeddings": 64, "vocab_size": c["V"],
           "rms_norm_eps": 1e-5, "rope_theta": c.get("theta", 10000.0), "tie_word_embeddings": c["tied"],
           "bos_token_id": 0, "eos_token_id": 1, "hidden_act": "silu"}
    if c.get("llama3"):
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192}
    return cfg


def write_safetensors(path, tensors):
    """{name: raw array} -> a .safetensors file (sorted by name, as transformers writes them)."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.uint16): "BF16"}
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- the conversion, as llama.cpp's convert_hf_to_gguf.py does it ----------------------------------------------

def permute(w, n_head):
    """A llama's q/k rows per head from rotate-half order to llama.cpp's interleaved one (LlamaModel.permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def rope_factors(cfg):
    """Llama 3's rope scaling as llama.cpp's converter writes it: one divisor per frequency."""
    r, dim = cfg["rope_scaling"], cfg["head_dim"]
    freqs = 1.0 / (cfg["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old, lo, hi, factor = r["original_max_position_embeddings"], r["low_freq_factor"], r["high_freq_factor"], r["factor"]
    out = []
    for f in freqs:
        wl = 2 * np.pi / f
        if wl < old / hi:
            out.append(1.0)
        elif wl > old / lo:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def gguf_tensors(c, raw, cfg):
    """[(llama.cpp name, raw array)] in its converter's order and layout."""
    out = []
    if c["arch"] == "gpt2":
        names = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
                 "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias"}
        layer = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
                 "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
        for name, a in raw.items():
            if name.startswith("h."):
                _, l, rest = name.split(".", 2)
                part, kind = rest.rsplit(".", 1)
                if kind == "weight" and a.ndim == 2:
                    a = np.ascontiguousarray(a.T)  # Conv1D [in, out] -> [out, in]
                out.append((f"blk.{l}.{layer[part]}.{kind}", a))
            else:
                out.append((names[name], a))
        out.append(("output.weight", raw["wte.weight"]))  # GPT-2's head: a copy of wte
        return out
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    if c.get("llama3"):
        out.append(("rope_freqs.weight", rope_factors(cfg)))
    for name, a in raw.items():
        if name.startswith("model.layers."):
            l, rest = name[len("model.layers."):].split(".", 1)
            part, kind = rest.rsplit(".", 1)
            if c["arch"] == "llama" and part in ("self_attn.q_proj", "self_attn.k_proj"):
                a = permute(a, c["H"] if part.endswith("q_proj") else c["Hkv"])
            out.append((f"blk.{l}.{layer[part]}.{kind}", a))
        else:
            out.append((names[name], a))
    return out


def write_gguf(path, c, cfg, raw, gguf):
    arch = c["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(os.path.dirname(path)))
    w.add_context_length(cfg.get("max_position_embeddings", cfg.get("n_positions")))
    w.add_embedding_length(c["d"])
    w.add_block_count(c["L"])
    w.add_feed_forward_length(c["F"])
    w.add_head_count(c["H"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    if arch == "gpt2":
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_head_count_kv(c["Hkv"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_rope_freq_base(cfg["rope_theta"])
        w.add_key_length(c["hd"])
        w.add_value_length(c["hd"])
        w.add_rope_dimension_count(c["hd"])
    w.add_vocab_size(c["V"])
    file_types = {"F32": gguf.LlamaFileType.ALL_F32, "F16": gguf.LlamaFileType.MOSTLY_F16,
                  "BF16": gguf.LlamaFileType.MOSTLY_BF16}
    w.add_file_type(file_types[c["dtype"]])
    for name, a in gguf_tensors(c, raw, cfg):
        if a.dtype == np.uint16:
            w.add_tensor(name, np.ascontiguousarray(a), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_checkpoint(folder, name, c, gguf):
    """folder/{config.json, model.safetensors, model.gguf}: the same weights twice. Matrices in c's dtype,
    vectors (norms, biases) F32 in the GGUF as llama.cpp writes them and in c's dtype in the safetensors."""
    os.makedirs(folder, exist_ok=True)
    cfg = hf_config(c)
    raw, gguf_raw = {}, {}
    for n, x in weights(name, c).items():
        raw[n], values = stored(x, c["dtype"])
        gguf_raw[n] = raw[n] if x.ndim == 2 else values
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(folder, "model.safetensors"), raw)
    write_gguf(os.path.join(folder, "model.gguf"), c, cfg, gguf_raw, gguf)
    return cfg


# ---- the expected logits of a quantized file: its weights dequantized by gguf-py, a float64 forward ------------

def read_dequantized(path, gguf):
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float64)
        out[t.name] = a.reshape([int(n) for n in reversed(t.shape)]) if a.ndim != len(t.shape) else a
    return out


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama_logits(w, c, cfg, tokens):
    """transformers' LlamaForCausalLM in float64, from llama.cpp names (q/k rows put back in HF's order)."""
    H, Hkv, hd, eps = c["H"], c["Hkv"], c["hd"], cfg["rms_norm_eps"]
    rms = lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g
    T = len(tokens)
    x = w["token_embd.weight"][tokens]
    inv = 1.0 / cfg["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    if "rope_freqs.weight" in w:  # Llama 3's rope scaling: divisors of the frequencies
        inv = inv / w["rope_freqs.weight"]
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    rot = lambda v: v * cos[:, None] + np.concatenate([-v[..., hd // 2:], v[..., :hd // 2]], -1) * sin[:, None]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(c["L"]):
        p = f"blk.{l}."
        h = rms(x, w[p + "attn_norm.weight"])
        q = (h @ unpermute(w[p + "attn_q.weight"], H).T).reshape(T, H, hd)
        k = (h @ unpermute(w[p + "attn_k.weight"], Hkv).T).reshape(T, Hkv, hd)
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, Hkv, hd)
        q, k = rot(q), rot(k)
        k, v = np.repeat(k, H // Hkv, 1), np.repeat(v, H // Hkv, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", a, v).reshape(T, H * hd)
        x = x + o @ w[p + "attn_output.weight"].T
        h = rms(x, w[p + "ffn_norm.weight"])
        g = h @ w[p + "ffn_gate.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    head = w.get("output.weight", w["token_embd.weight"])
    return rms(x, w["output_norm.weight"]) @ head.T


def write_sdfx(path, tokens, logits):
    T, V = logits.shape
    with open(path, "wb") as f:
        f.write(b"SDFX" + struct.pack("<III", 1, T, V) + np.array(tokens, "<i4").tobytes() +
                logits.astype("<f4").tobytes())


# ---- blocks of every quantized type read, and gguf-py's dequantization of them (tests/kernels/test_qk.c) ------

BLOCK_TYPES = {"Q8_0": (32, 34, [0]), "Q4_0": (32, 18, [0]), "Q4_K": (256, 144, [0, 2]), "Q5_K": (256, 176, [0, 2]),
               "Q6_K": (256, 210, [208]), "Q5_0": (32, 22, [0]), "Q5_1": (32, 24, [0, 2]),
               "Q4_1": (32, 20, [0, 2])}  # name: weights and bytes of a block, where its f16 scales lie


def write_blocks(path, gguf):
    """"QKFX" u32 version (1) u32 count, then per row: u32 ggml type, u32 n, its blocks, f32 dequantized[n]."""
    g = rng("blocks")
    out = b""
    for name, (n, size, halves) in BLOCK_TYPES.items():
        qtype = gguf.GGMLQuantizationType[name]
        blocks = g.integers(0, 256, (3, size), dtype=np.uint8)  # 3 blocks a row: random quants and scales
        for h in halves:
            blocks[:, h:h + 2] = np.frombuffer(g.standard_normal(3).astype(np.float16).tobytes(), np.uint8).reshape(3, 2)
        values = gguf.quants.dequantize(blocks.reshape(-1), qtype).astype("<f4")
        out += struct.pack("<II", int(qtype), 3 * n) + blocks.tobytes() + values.tobytes()
    with open(path, "wb") as f:
        f.write(b"QKFX" + struct.pack("<II", 1, len(BLOCK_TYPES)) + out)


# ---- convert_llama: a folder for `specdec convert`, and what llama.cpp's tools make of it -------------------------

CONVERT = dict(arch="llama", d=256, H=2, Hkv=1, hd=32, F=32, L=2, V=272, dtype="BF16", tied=True, gain=1,
               theta=500000.0)  # rows of 256: K-quant blocks for the embeddings (the tied head) and q, k, v, gate, up
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
            "{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
            "<|end_header_id|>\n\n{% endif %}")
LLAMA3_PATTERN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_alphabet():
    """GPT-2's byte-level alphabet: byte b -> a printable character."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    return {b: chr(b) if b in keep else chr(256 + extra.index(b)) for b in range(256)}


def tokenizer_json(V):
    """A byte-level BPE in Llama 3's form: 256 byte tokens, merges of common English pairs, the special tokens."""
    alphabet = byte_alphabet()
    vocab = {alphabet[b]: b for b in range(256)}
    merges = []
    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"), ("i", "n"), ("e", "r"), ("o", "n"), ("Ġ", "s"),
                 ("r", "e"), ("a", "t"), ("e", "n")]:
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
    added = [{"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
    assert len(vocab) + len(SPECIALS) == V
    return {"version": "1.0", "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
            "post_processor": {"type": "TemplateProcessing", "single": [
                {"SpecialToken": {"id": SPECIALS[0], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": SPECIALS[0], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": SPECIALS[0], "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {SPECIALS[0]: {"id": SPECIALS[0], "ids": [len(vocab)], "tokens": [SPECIALS[0]]}}},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                      "vocab": vocab, "merges": merges}}


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def tensor_lines(path, label, gguf):
    """One line per tensor of the file at path, in file order: label name type ne0 ne1 fnv1a64."""
    out = []
    for t in gguf.GGUFReader(path).tensors:
        ne = [int(n) for n in t.shape] + [1]
        out.append(f"{label} {t.name} {t.tensor_type.name} {ne[0]} {ne[1]} {fnv1a(bytes(np.array(t.data).view(np.uint8).reshape(-1))):016x}")
    return out


def write_convert_fixture(kit, gguf):
    name, c = "convert_llama", CONVERT
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    cfg = hf_config(c)
    cfg["bos_token_id"], cfg["eos_token_id"] = c["V"] - len(SPECIALS), c["V"] - len(SPECIALS) + 1
    cfg["max_position_embeddings"] = 131072
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}
    raw = {n: stored(x, "BF16")[0] for n, x in weights(name, c).items()}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(folder, "model.safetensors"), raw)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(c["V"]), f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "chat_template": TEMPLATE}, f, indent=1)
    work = os.path.join("/tmp", "make_gguf_fixtures", name)
    os.makedirs(work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    to_gguf = os.path.join(here, "..", "..", "shared", "peers", "llamacpp", "to_gguf.py")
    bf16 = os.path.join(work, "bf16.gguf")
    env = dict(os.environ, PYTHONPATH=os.path.join(kit, "llama.cpp", "gguf-py"))
    subprocess.run([sys.executable, to_gguf, folder, bf16, "--outtype", "bf16"], check=True, env=env,
                   stderr=subprocess.DEVNULL)
    write_expected_tensors(folder, kit, bf16, work, gguf)
    for label in ("q5_k_m", "q6_k"):  # the logits of llama-quantize's files' weights dequantized by gguf-py
        logits = llama_logits(read_dequantized(os.path.join(work, f"{label}.gguf"), gguf), c, cfg, TOKENS)
        write_sdfx(os.path.join(folder, f"expected_{label}.bin"), TOKENS, logits)


def write_expected_tensors(folder, kit, bf16, work, gguf):
    """folder/expected_tensors.txt: the tensors of the bf16 file, then of llama-quantize's q8_0, q4_0, q4_k_m, q5_k_m
    and q6_k of it."""
    lines = tensor_lines(bf16, "bf16", gguf)
    for label, qtype in (("q8_0", "Q8_0"), ("q4_0", "Q4_0"), ("q4_k_m", "Q4_K_M"), ("q5_k_m", "Q5_K_M"),
                         ("q6_k", "Q6_K")):
        out = os.path.join(work, f"{label}.gguf")
        subprocess.run([os.path.join(kit, "build", "bin", "llama-quantize"), bf16, out, qtype], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lines += tensor_lines(out, label, gguf)
    with open(os.path.join(folder, "expected_tensors.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- convert_qwen2, convert_qwen3, convert_gpt2: the other architectures for `specdec convert` ------------------
# The kit's to_gguf.py converts llamas alone, so their bf16 file is this script's own conversion (write_gguf, as
# convert_hf_to_gguf.py writes each architecture), which llama-quantize then quantizes. Rows of 256 where K-quants
# can apply (Qwen's q, k, v, gate, up, the embeddings); GPT-2's rows of 32, where llama-quantize's Q4_K_M falls back
# from Q4_K to Q5_0 and from Q6_K to Q8_0, in 3 layers, so that attn_qkv (an attn_v to llama.cpp) takes Q6_K in the
# last alone.
CONVERT_ARCHS = {
    "convert_qwen2": dict(arch="qwen2", d=256, H=2, Hkv=1, hd=32, F=32, L=1, V=64, dtype="BF16", tied=True, gain=1,
                          theta=1e6),
    "convert_qwen3": dict(arch="qwen3", d=256, H=2, Hkv=1, hd=32, F=32, L=1, V=64, dtype="BF16", tied=False, gain=1),
    "convert_gpt2": dict(arch="gpt2", d=32, H=2, F=64, L=3, V=64, P=16, dtype="BF16", tied=True, gain=1),
}


def write_convert_arch_fixture(kit, gguf, name, c):
    """OUT/name/{config.json, model.safetensors, expected_tensors.txt}."""
    work = os.path.join("/tmp", "make_gguf_fixtures", name)
    write_checkpoint(work, name, c, gguf)
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    for f in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(work, f), os.path.join(folder, f))
    write_expected_tensors(folder, kit, os.path.join(work, "model.gguf"), work, gguf)


def main():
    kit = sys.argv[1] if len(sys.argv) > 1 else "/tmp/llamacpp"
    sys.path.insert(0, os.path.join(kit, "llama.cpp", "gguf-py"))
    try:  # gguf-py's metadata module imports PyYAML, which nothing here uses
        import yaml  # noqa: F401
    except ImportError:
        import types
        sys.modules["yaml"] = types.ModuleType("yaml")
    import gguf
    for name, c in FLOAT_CASES.items():
        write_checkpoint(os.path.join(OUT, name), name, c, gguf)
    write_blocks(os.path.join(OUT, "blocks.bin"), gguf)
    quantize = os.path.join(kit, "build", "bin", "llama-quantize")
    for name, (c, qtype) in QUANT_CASES.items():
        work = os.path.join("/tmp", "make_gguf_fixtures", name)
        cfg = write_checkpoint(work, name, c, gguf)
        folder = os.path.join(OUT, name)
        os.makedirs(folder, exist_ok=True)
        out = os.path.join(folder, "model.gguf")
        subprocess.run([quantize, os.path.join(work, "model.gguf"), out, qtype], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        logits = llama_logits(read_dequantized(out, gguf), c, cfg, TOKENS)
        write_sdfx(os.path.join(folder, "expected.bin"), TOKENS, logits)
    write_convert_fixture(kit, gguf)
    for name, c in CONVERT_ARCHS.items():
        write_convert_arch_fixture(kit, gguf, name, c)
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
