#!/usr/bin/python3
"""train_bpe.py — byte-level BPE in the GPT-2 manner: training, encoding, decoding, and the Hugging Face files.

    /usr/bin/python3 tools/train_bpe.py [--corpus tools/runs/corpus] [--out tools/runs/tokenizer] [--vocab 8192]

Training (on train.jsonl of tools/corpus.py): every file is cut into pre-tokens by the GPT-2 pattern, each
pre-token's UTF-8 bytes become symbols (one per byte), and the most frequent adjacent pair of symbols, counted
over all pre-tokens with their frequencies, is merged into a new symbol, again and again until the vocabulary has
`--vocab` entries: 256 bytes + merges + <|endoftext|> (the last id). Ties go to the pair of smaller ids. Pair
counts are kept up to date incrementally: a merge touches only the pre-tokens that hold its pair.

Writes tokenizer.json (Hugging Face format: BPE model, "a b" merges, ByteLevel pre-tokenizer and decoder,
<|endoftext|> as a special added token), vocab.json and merges.txt ("#version: 0.2" first). Symbols are written
through GPT-2's byte-to-unicode map; ids 0..255 are the bytes in that map's order, as in GPT-2's own vocabulary.

Encoding applies merges by rank (lowest first) within each pre-token — what every GPT-2 tokenizer does.
"""

import argparse
import collections
import heapq
import json
import os
import sys
import time

import regex

PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


def byte_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
    stand for themselves, the other 68 bytes take the characters U+0100, U+0101, ... in byte order. Returned as an
    ordered list of (byte, character), printable bytes first."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    pairs = [(b, chr(b)) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            pairs.append((b, chr(0x100 + extra)))
            extra += 1
    return pairs


class Tokenizer:
    """A byte-level BPE: tokens[id] = bytes, merges = [(id_a, id_b)] in rank order (merge r makes id 256 + r)."""

    def __init__(self, tokens, merges, eot_id):
        self.tokens = tokens                                  # id -> bytes (the EOT id maps to its text)
        self.merges = merges
        self.eot_id = eot_id
        self.byte_id = {}
        for i in range(256):
            self.byte_id[tokens[i][0]] = i
        self.rank = {pair: r for r, pair in enumerate(merges)}
        self.merged = {pair: 256 + r for r, pair in enumerate(merges)}
        self.cache = {}

    @classmethod
    def load(cls, folder):
        """From tokenizer.json in `folder`."""
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        to_byte = {c: b for b, c in byte_to_unicode()}
        vocab = tj["model"]["vocab"]
        n = max(vocab.values()) + 1
        tokens = [None] * (n + len(tj["added_tokens"]))
        for s, i in vocab.items():
            tokens[i] = bytes(to_byte[c] for c in s)
        eot_id = None
        for t in tj["added_tokens"]:
            tokens[t["id"]] = t["content"].encode()
            if t["content"] == EOT:
                eot_id = t["id"]
        ids = {s: i for s, i in vocab.items()}
        merges = []
        for m in tj["model"]["merges"]:
            a, b = m.split(" ") if isinstance(m, str) else m
            merges.append((ids[a], ids[b]))
        tokens = [t for t in tokens if t is not None]
        return cls(tokens, merges, eot_id)

    def encode_word(self, word: str):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        ids = [self.byte_id[b] for b in word.encode("utf-8")]
        while len(ids) > 1:
            best, best_rank = -1, None
            for k in range(len(ids) - 1):
                r = self.rank.get((ids[k], ids[k + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = k, r
            if best < 0:
                break
            pair = (ids[best], ids[best + 1])
            new, k = [], 0
            while k < len(ids):                               # merge every occurrence of the best pair
                if k + 1 < len(ids) and (ids[k], ids[k + 1]) == pair:
                    new.append(self.merged[pair])
                    k += 2
                else:
                    new.append(ids[k])
                    k += 1
            ids = new
        self.cache[word] = ids
        return ids

    def encode(self, text: str):
        """Ids of plain text (no special tokens are recognised in it)."""
        out = []
        for word in PATTERN.findall(text):
            out += self.encode_word(word)
        return out

    def decode_bytes(self, ids):
        return b"".join(self.tokens[i] for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def train(texts, vocab_size, log=sys.stderr):
    """(tokens, merges) learnt from an iterable of strings."""
    t0 = time.time()
    freq = collections.Counter()
    for text in texts:
        freq.update(PATTERN.findall(text))
    order = byte_to_unicode()
    byte_id = {b: i for i, (b, _) in enumerate(order)}
    tokens = [bytes([b]) for b, _ in order]
    words = [[byte_id[b] for b in w.encode("utf-8")] for w in freq]
    counts = list(freq.values())
    print(f"bpe: {len(words)} distinct pre-tokens, {sum(counts)} in all ({time.time() - t0:.1f} s)", file=log)

    pair_count = collections.defaultdict(int)
    where = collections.defaultdict(set)                      # pair -> indices of words that may hold it
    for wi, (w, c) in enumerate(zip(words, counts)):
        for pair in zip(w, w[1:]):
            pair_count[pair] += c
            where[pair].add(wi)
    heap = [(-c, pair) for pair, c in pair_count.items()]
    heapq.heapify(heap)

    merges = []
    n_merges = vocab_size - 256 - 1
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue                                          # stale entry
        new_id = len(tokens)
        tokens.append(tokens[pair[0]] + tokens[pair[1]])
        merges.append(pair)
        changed = set()
        for wi in where.pop(pair):
            w = words[wi]
            if len(w) < 2:
                continue
            c = counts[wi]
            k, new, hit = 0, [], False
            while k < len(w):
                if k + 1 < len(w) and w[k] == pair[0] and w[k + 1] == pair[1]:
                    new.append(new_id)
                    k += 2
                    hit = True
                else:
                    new.append(w[k])
                    k += 1
            if not hit:
                continue
            for p in zip(w, w[1:]):
                pair_count[p] -= c
                changed.add(p)
            for p in zip(new, new[1:]):
                pair_count[p] += c
                where[p].add(wi)
                changed.add(p)
            words[wi] = new
        pair_count.pop(pair, None)
        changed.discard(pair)
        for p in changed:
            c = pair_count[p]
            if c > 0:
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
        if len(merges) % 1000 == 0:
            print(f"bpe: {len(merges)} merges, last {tokens[-1]!r} x{-negc} ({time.time() - t0:.1f} s)", file=log)
    tokens.append(EOT.encode())
    return tokens, merges


def save(folder, tokens, merges):
    """tokenizer.json, vocab.json and merges.txt of a trained BPE (the last token is <|endoftext|>)."""
    os.makedirs(folder, exist_ok=True)
    b2u = dict(byte_to_unicode())
    show = [("".join(b2u[b] for b in t)) for t in tokens[:-1]]
    vocab = {s: i for i, s in enumerate(show)}
    assert len(vocab) == len(show), "duplicate tokens"
    merge_lines = [f"{show[a]} {show[b]}" for a, b in merges]
    eot_id = len(tokens) - 1
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": eot_id, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": {**vocab, EOT: eot_id}, "merges": merge_lines},
    }
    files = {
        "tokenizer.json": json.dumps(tj, ensure_ascii=False, indent=1),
        "vocab.json": json.dumps({**vocab, EOT: eot_id}, ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "".join(line + "\n" for line in merge_lines),
    }
    for name, data in files.items():
        tmp = os.path.join(folder, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, os.path.join(folder, name))


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="tools/runs/corpus")
    ap.add_argument("--out", default="tools/runs/tokenizer")
    ap.add_argument("--vocab", type=int, default=8192)
    args = ap.parse_args()
    t0 = time.time()
    train_docs = read_jsonl(os.path.join(args.corpus, "train.jsonl"))
    tokens, merges = train((d["text"] for d in train_docs), args.vocab)
    save(args.out, tokens, merges)
    tok = Tokenizer.load(args.out)
    assert tok.tokens == tokens and tok.merges == merges and tok.eot_id == args.vocab - 1
    n_bytes = n_ids = 0
    for d in read_jsonl(os.path.join(args.corpus, "val.jsonl")):
        ids = tok.encode(d["text"])
        assert tok.decode(ids) == d["text"], f"round trip failed on {d['path']}"
        n_bytes += len(d["text"].encode())
        n_ids += len(ids)
    print(f"bpe: {len(tokens)} tokens -> {args.out}; validation round trip ok, {n_bytes / n_ids:.2f} bytes/token "
          f"({time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
