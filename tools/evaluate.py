#!/usr/bin/python3
"""evaluate.py — held-out figures of the target and the draft, and of the pair for speculative decoding.

    /usr/bin/python3 tools/evaluate.py [--target tools/runs/target] [--draft tools/runs/draft]
                                       [--max-windows N] [--ckpt] [--out tools/runs/eval.json]
                                       [--data tools/runs/pack/data] [--device cuda]

On the validation split (tools/corpus.py), cut into consecutive windows of the training context (every token
predicted once, with up to ctx − 1 tokens of left context), in F32:
  * each model's cross-entropy (nats/token) and perplexity, and bits per byte;
  * α = E[Σ_x min(p(x), q(x))], p the target's and q the draft's next-token distribution at temperature 1: the
    expected acceptance rate of speculative sampling (Leviathan et al. 2023, Corollary 3.6);
  * greedy agreement: how often argmax p == argmax q (the acceptance rate at temperature 0);
  * both by bucket of the target's top-1 probability (how much of the disagreement is near-ties of a flat p);
  * c, the draft's per-token cost relative to the target's (multiply-adds: L·12d² + V·d), and the expected
    speed-up (1 − α^{γ+1}) / ((1 − α)(γc + 1)) for γ = 1..8 (Theorem 3.8), at temperature 1 and at 0.
Reads each run's final.pt, or with --ckpt its latest ckpt.pt (figures of a run in progress). Prints a table and
writes the figures as JSON to --out. With --data, the validation stream is tools/pack.py's copy (the same ids), so
that a GPU machine the pack was carried to can evaluate drafts too (--device cuda).
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import GPT2, RUNS, per_token_cost, token_stream, val_windows  # noqa: E402


def load(run, ckpt=False):
    path = os.path.join(run, "ckpt.pt" if ckpt else "final.pt")
    state = torch.load(path, map_location="cpu")
    model = GPT2(state["model_cfg"])
    model.load_state_dict(state["model"])
    model.eval()
    return model, state


# Buckets of the target's top-1 probability, for the figures by confidence.
BUCKETS = ((0.0, 0.3), (0.3, 0.5), (0.5, 0.8), (0.8, 1.01))


def speedup(alpha, gamma, c):
    expected_tokens = gamma + 1 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return expected_tokens / (gamma * c + 1)


@torch.no_grad()
def evaluate(target, draft, data, ctx, max_windows=None, batch=4):
    x, y = val_windows(data, ctx, max_windows)
    dev = target.wte.weight.device
    x, y = x.to(dev), y.to(dev)
    sums = {"ce_target": 0.0, "ce_draft": 0.0, "alpha": 0.0, "agree": 0.0, "p_top1": 0.0}
    bucket = {b: [0, 0.0, 0.0] for b in BUCKETS}                   # positions, agreements, Σ min(p, q)
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch], y[i:i + batch].reshape(-1)
        lp = F.log_softmax(target(xb).reshape(-1, target.cfg["vocab_size"]), dim=-1)
        sums["ce_target"] += F.nll_loss(lp, yb, reduction="sum").item()
        if draft is not None:
            lq = F.log_softmax(draft(xb).reshape(-1, draft.cfg["vocab_size"]), dim=-1)
            sums["ce_draft"] += F.nll_loss(lq, yb, reduction="sum").item()
            overlap = torch.minimum(lp.exp(), lq.exp()).sum(-1)
            agree = (lp.argmax(-1) == lq.argmax(-1)).double()
            top1 = lp.max(-1).values.exp()
            sums["alpha"] += overlap.sum().item()
            sums["agree"] += agree.sum().item()
            sums["p_top1"] += top1.sum().item()
            for lo, hi in BUCKETS:
                m = (top1 >= lo) & (top1 < hi)
                bucket[(lo, hi)][0] += int(m.sum())
                bucket[(lo, hi)][1] += agree[m].sum().item()
                bucket[(lo, hi)][2] += overlap[m].sum().item()
    n = y.numel()
    out = {k: v / n for k, v in sums.items()}
    out["by_confidence"] = [{"p_top1_from": lo, "p_top1_to": min(hi, 1.0), "share": c / n,
                             "greedy_agreement": a / max(c, 1), "alpha": o / max(c, 1)}
                            for (lo, hi), (c, a, o) in bucket.items()]
    return out, n


def validation_bytes():
    """UTF-8 bytes of the validation split's files."""
    with open(os.path.join(RUNS, "corpus", "val.jsonl"), encoding="utf-8") as f:
        return sum(len(json.loads(line)["text"].encode()) for line in f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=os.path.join(RUNS, "target"))
    ap.add_argument("--draft", default=os.path.join(RUNS, "draft"))
    ap.add_argument("--ckpt", action="store_true", help="use the latest ckpt.pt instead of final.pt")
    ap.add_argument("--max-windows", type=int, default=None)
    ap.add_argument("--out", default=os.path.join(RUNS, "eval.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", help="tools/pack.py's data folder: read its validation stream and byte count")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    target, t_state = load(args.target, args.ckpt)
    has_draft = os.path.exists(os.path.join(args.draft, "ckpt.pt" if args.ckpt else "final.pt"))
    draft, d_state = load(args.draft, args.ckpt) if has_draft else (None, None)
    target.to(args.device)
    if draft is not None:
        draft.to(args.device)
    data = token_stream("val", args.data)
    ctx = t_state["hp"]["ctx"]
    m, n = evaluate(target, draft, data, ctx, args.max_windows)
    if args.data:
        with open(os.path.join(args.data, "meta.json")) as f:
            val_bytes = json.load(f)["val_bytes"]
    else:
        val_bytes = validation_bytes()
    bytes_per_token = val_bytes / (len(data) - data.eq(target.cfg["eot_id"]).sum().item())

    out = {"positions": n, "ctx": ctx, "bytes_per_token": bytes_per_token}
    rows = [("target", target, t_state, m["ce_target"])]
    if draft is not None:
        rows.append(("draft", draft, d_state, m["ce_draft"]))
    print(f"validation: {n} positions in windows of {ctx} tokens ({bytes_per_token:.2f} bytes/token)")
    print(f"{'model':7s} {'d':>4s} {'L':>2s} {'H':>2s} {'params':>10s} {'cost/token':>11s} {'steps':>6s} "
          f"{'train min':>9s} {'CE nats':>8s} {'ppl':>7s} {'bits/byte':>9s}")
    for name, model, state, ce in rows:
        c = model.cfg
        params = sum(p.numel() for p in model.parameters())
        out[name] = {"n_embd": c["n_embd"], "n_layer": c["n_layer"], "n_head": c["n_head"],
                     "n_positions": c["n_positions"], "vocab_size": c["vocab_size"], "params": params,
                     "cost_per_token": per_token_cost(c), "steps": state["step"],
                     "train_minutes": state["train_seconds"] / 60, "val_ce": ce, "val_ppl": math.exp(ce),
                     "bits_per_byte": ce / math.log(2) / bytes_per_token,
                     "tokens_seen": state["step"] * state["hp"]["batch"] * state["hp"]["ctx"]}
        r = out[name]
        print(f"{name:7s} {c['n_embd']:4d} {c['n_layer']:2d} {c['n_head']:2d} {params:10d} "
              f"{r['cost_per_token']:11d} {state['step']:6d} {r['train_minutes']:9.1f} {ce:8.4f} "
              f"{r['val_ppl']:7.2f} {r['bits_per_byte']:9.3f}")
    if draft is not None:
        c = per_token_cost(draft.cfg) / per_token_cost(target.cfg)
        out["pair"] = {"alpha": m["alpha"], "greedy_agreement": m["agree"], "cost_ratio": c,
                       "target_mean_top1_prob": m["p_top1"], "by_confidence": m["by_confidence"],
                       "speedup_t1": {g: speedup(m["alpha"], g, c) for g in range(1, 9)},
                       "speedup_t0": {g: speedup(m["agree"], g, c) for g in range(1, 9)}}
        print(f"pair: α (temperature 1) = {m['alpha']:.4f}   greedy agreement = {m['agree']:.4f}   "
              f"c = draft/target cost = 1/{1 / c:.1f}")
        print(f"target's mean top-1 probability {m['p_top1']:.3f}; by the target's top-1 probability:")
        for b in m["by_confidence"]:
            print(f"  [{b['p_top1_from']:.1f}, {b['p_top1_to']:.1f}): {b['share']:6.1%} of positions, "
                  f"greedy agreement {b['greedy_agreement']:.3f}, α {b['alpha']:.3f}")
        print("expected speed-up by γ:  " + "  ".join(f"γ={g}" for g in range(1, 9)))
        for label, key in (("temperature 1", "speedup_t1"), ("greedy       ", "speedup_t0")):
            print(f"  {label}          " + "  ".join(f"{out['pair'][key][g]:.2f}" for g in range(1, 9)))
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
