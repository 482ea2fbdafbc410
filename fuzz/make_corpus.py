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


TEXTS = [b"hello world", "héllo wörld € 😀\n\tdef f(x):\n    return x  # ok\n".encode(),
         b"<|endoftext|>hello<pad>  world's", b"bad \xff byte \xe2\x82", b""]


def main():
    f32 = struct.pack("<3f", 1.0, -2.5, 3.25)
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

    for name, kwargs in [("strings", {}), ("pairs", {"pairs": True}), ("ignore_merges", {"ignore_merges": True})]:
        write("tokenizer_json", name, tokenizer_json(**kwargs) + SEP + TEXTS[1])
    write("tokenizer_json", "special_text", tokenizer_json() + SEP + TEXTS[2])

    v = vocab()
    merges = "#version: 0.2\n" + "".join(byte_level(a) + " " + byte_level(b) + "\n" for a, b in MERGES)
    vm = json.dumps(v, ensure_ascii=False).encode() + SEP + merges.encode()
    write("vocab_merges", "text", vm + SEP + TEXTS[1])
    write("vocab_merges", "special_text", vm + SEP + TEXTS[2])
    write("vocab_merges", "crlf_no_text", vm.replace(b"\n", b"\r\n").replace(b"\r\n|||\r\n", SEP))

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


if __name__ == "__main__":
    main()
