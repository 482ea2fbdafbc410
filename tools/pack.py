#!/usr/bin/python3
"""pack.py — what the draft's distillation reads, packed small enough to carry to a GPU machine (64 MiB each way).

    /usr/bin/python3 tools/pack.py [--target tools/runs/target] [--tokens 16000000] [--out tools/runs/pack]

writes
  OUT/data/train.pt.xz   the ids of whole training files drawn at random (seeded) until --tokens, each file
                         followed by <|endoftext|> as in the full stream; int16, xz-compressed (~3.6× on this corpus)
  OUT/data/val.pt.xz     the whole validation stream, likewise
  OUT/data/meta.json     the validation split's size in bytes (for tools/evaluate.py's bits per byte)
  OUT/teacher/final.pt   the target's final weights: the block matrices in bfloat16 — under bfloat16 autocast the
                         teacher multiplies by them rounded so anyway, so its logits are the F32 teacher's bit for
                         bit — and the embeddings, LayerNorms and biases in F32 (wte is also looked up, not only
                         multiplied by)
so that `train.py --data OUT/data --teacher OUT/teacher` distils the draft the same on the CPU or, with
`--device cuda`, on a GPU (tools/make_weights.sh). A draft sees --tokens distinct tokens this way, a fraction of
the corpus: enough for a model of its size (the shipped draft's card says how many passes it made).
"""

import argparse
import io
import json
import lzma
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evaluate import validation_bytes  # noqa: E402
from train import RUNS, token_stream  # noqa: E402


def whole_files(stream, eot_id, n_tokens, seed):
    """Whole files (each with its <|endoftext|>) of a stream, drawn without replacement until n_tokens."""
    ends = (stream == eot_id).nonzero().flatten() + 1                  # one past each file's <|endoftext|>
    starts = torch.cat([torch.zeros(1, dtype=ends.dtype), ends[:-1]])
    picked, total = [], 0
    for i in torch.randperm(len(ends), generator=torch.Generator().manual_seed(seed)).tolist():
        if total >= n_tokens:
            break
        picked.append(stream[starts[i]:ends[i]])
        total += len(picked[-1])
    return torch.cat(picked)


def packed_teacher(model_state):
    """A target's state_dict with its block matrices in bfloat16 (the rest as it was)."""
    return {k: v.to(torch.bfloat16) if k.startswith("h.") and v.dim() == 2 else v for k, v in model_state.items()}


def save_xz(ids, path):
    buf = io.BytesIO()
    torch.save(ids.to(torch.int16), buf)
    with open(path + ".tmp", "wb") as f:
        f.write(lzma.compress(buf.getvalue()))
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=os.path.join(RUNS, "target"))
    ap.add_argument("--tokens", type=int, default=16_000_000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default=os.path.join(RUNS, "pack"))
    args = ap.parse_args()

    state = torch.load(os.path.join(args.target, "final.pt"), map_location="cpu")
    cfg = state["model_cfg"]
    assert cfg["vocab_size"] <= 2**15, "ids are stored as int16"
    for d in ("data", "teacher"):
        os.makedirs(os.path.join(args.out, d), exist_ok=True)
    train = whole_files(token_stream("train"), cfg["eot_id"], args.tokens, args.seed)
    save_xz(train, os.path.join(args.out, "data", "train.pt.xz"))
    save_xz(token_stream("val"), os.path.join(args.out, "data", "val.pt.xz"))
    with open(os.path.join(args.out, "data", "meta.json"), "w") as f:
        json.dump({"val_bytes": validation_bytes(), "train_tokens": len(train)}, f)
    state["model"] = packed_teacher(state["model"])
    torch.save(state, os.path.join(args.out, "teacher", "final.pt"))
    sizes = {p: os.path.getsize(os.path.join(args.out, p)) / 2**20
             for p in ("data/train.pt.xz", "data/val.pt.xz", "teacher/final.pt")}
    print(f"{args.out}: {len(train)} training tokens; " + ", ".join(f"{p} {s:.1f} MiB" for p, s in sizes.items())
          + f"; {sum(sizes.values()):.1f} MiB in all")


if __name__ == "__main__":
    main()
