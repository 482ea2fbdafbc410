#!/usr/bin/python3
"""train.py — trains specdec's default GPT-2 pair: the target from text, the draft by distillation.

    # target: next-token cross-entropy
    /usr/bin/python3 tools/train.py --run tools/runs/target --d 384 --layers 8 --heads 6 --steps 1200
    # draft: distilled from the target's final weights (KL(target ‖ draft) at temperature 1, plus a little CE),
    # every second step on windows that end in 32 tokens the draft samples itself
    /usr/bin/python3 tools/train.py --run tools/runs/draft --d 96 --layers 3 --heads 3 --steps 1500 \\
        --teacher tools/runs/target --on-policy-every 2 --sample-tokens 32
    # pilot: time a few steps of a size, print tokens/s, save nothing
    /usr/bin/python3 tools/train.py --pilot 4 --d 384 --layers 8 --heads 6
    # the draft on a GPU machine, from tools/pack.py's pack (the data and the teacher, carried there)
    python3 tools/train.py --run tools/runs/draft --data tools/runs/pack/data --teacher tools/runs/pack/teacher \
        --device cuda ...

A run lives in its folder (--run): ckpt.pt, the latest checkpoint (model, optimizer, step, training seconds,
hyper-parameters; written every --ckpt-minutes to a temporary file, then renamed), log.txt, and final.pt when the
last step is done (then rerunning is a no-op). A run resumes from ckpt.pt exactly: the batch of step s is drawn from
a generator seeded by (seed, s), there is no dropout, and the hyper-parameters come from the checkpoint, so a run
interrupted any number of times computes the same weights as one that was not (same machine, same thread count).
It runs on the CPU (--threads) or, with --device cuda, on a GPU: the batches and the on-policy samples' generator
seeds are the same, the arithmetic is the device's.
The process writes its PID to tools/runs/train.pid (unless a live run's is there; removed on exit), so that others
can pause it with `kill -STOP` and resume it with `kill -CONT`; SIGTERM or SIGINT saves a checkpoint and exits.

The data are token ids of tools/corpus.py's splits under tools/train_bpe.py's tokenizer (cached in
tools/runs/data/): every file followed by <|endoftext|>, concatenated; a batch is --batch random windows of
--ctx + 1 tokens. The model is GPT-2 (pre-LayerNorm blocks, GELU tanh, learnt positions, tied LM head) with
Hugging Face GPT2Model parameter names and Conv1D [in, out] layouts, so its state_dict is a checkpoint as is.
AdamW (β = 0.9, 0.95; weight decay 0.1 on matrices), linear warm-up then cosine decay to 10%, gradients clipped
to norm 1. Forward and backward run under bfloat16 autocast (F32 master weights), unless --fp32.
"""

import argparse
import io
import lzma
import math
import os
import signal
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_bpe import Tokenizer, read_jsonl  # noqa: E402

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")


# ---------------------------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------------------------

class Conv1D(nn.Module):
    """y = x W + b, W stored [n_in, n_out] as in GPT-2."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)


class Attention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(d, 3 * d)
        self.c_proj = Conv1D(d, d)

    def forward(self, x, mask):
        B, T, d = x.shape
        H = self.n_head
        q, k, v = (z.reshape(B, T, H, d // H).transpose(1, 2) for z in self.c_attn(x).split(d, dim=2))
        scores = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(d // H))       # [B, H, T, T]
        probs = torch.softmax(scores.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
        return self.c_proj((probs @ v).transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = Conv1D(d, 4 * d)
        self.c_proj = Conv1D(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = Attention(d, n_head)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = MLP(d)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        d, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
        self.cfg = dict(cfg)
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(P, d)
        self.h = nn.ModuleList(Block(d, cfg["n_head"]) for _ in range(L))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.register_buffer("mask", torch.ones(P, P, dtype=torch.bool).triu(1), persistent=False)
        # GPT-2's initialisation: N(0, 0.02), the projections into the residual stream scaled by 1/√(2L).
        for name, p in self.named_parameters():
            if name.endswith(".bias") or ".ln_" in name or name.startswith("ln_f"):
                continue
            std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
            nn.init.normal_(p, 0.0, std if name != "wpe.weight" else 0.01)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:T]
        for block in self.h:
            x = block(x, self.mask)
        return self.ln_f(x) @ self.wte.weight.T                            # [B, T, V], tied head

    def hf_config(self):
        """config.json of this model (transformers' GPT2Config field names)."""
        c = self.cfg
        return {
            "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": c["vocab_size"], "n_positions": c["n_positions"], "n_ctx": c["n_positions"],
            "n_embd": c["n_embd"], "n_layer": c["n_layer"], "n_head": c["n_head"], "n_inner": None,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
            "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02, "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "use_cache": True,
            "tie_word_embeddings": True, "bos_token_id": c["eot_id"], "eos_token_id": c["eot_id"],
            "torch_dtype": "float32",
        }


def per_token_cost(cfg):
    """Multiply-adds per generated token, excluding attention over the cache: L·12d² (blocks) + V·d (LM head)."""
    d = cfg["n_embd"]
    return cfg["n_layer"] * 12 * d * d + cfg["vocab_size"] * d


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------

def token_stream(split, data=None, corpus=os.path.join(RUNS, "corpus"), tokenizer=os.path.join(RUNS, "tokenizer")):
    """int32 ids of a split (every file then <|endoftext|>), cached in tools/runs/data/<split>.pt; or, with data
    a folder, the ids in its <split>.pt.xz (tools/pack.py's shard, made to be carried to another machine)."""
    if data:
        with open(os.path.join(data, split + ".pt.xz"), "rb") as f:
            return torch.load(io.BytesIO(lzma.decompress(f.read())))
    cache = os.path.join(RUNS, "data", split + ".pt")
    src = [os.path.join(corpus, split + ".jsonl"), os.path.join(tokenizer, "tokenizer.json")]
    if os.path.exists(cache) and all(os.path.getmtime(cache) >= os.path.getmtime(s) for s in src):
        return torch.load(cache)
    tok = Tokenizer.load(tokenizer)
    ids = []
    for doc in read_jsonl(src[0]):
        ids += tok.encode(doc["text"])
        ids.append(tok.eot_id)
    t = torch.tensor(ids, dtype=torch.int32)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    torch.save(t, cache + ".tmp")
    os.replace(cache + ".tmp", cache)
    return t


def batch_at(data, step, seed, batch, ctx):
    """(inputs, targets) [batch, ctx] of a step: random windows, drawn from a generator seeded by (seed, step)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(data) - ctx - 1, (batch,), generator=g)
    w = torch.stack([data[s:s + ctx + 1] for s in starts.tolist()]).long()
    return w[:, :-1], w[:, 1:]


def draft_samples(draft, x, n_new, window, step, seed, bf16):
    """DistillSpec's on-policy data (Zhou et al. 2023): each window x [batch, ctx] with its last n_new tokens
    replaced by ones the draft samples itself at temperature 1, one at a time, each seeing at most `window` tokens
    before it (without a KV cache, the full context would cost ctx forwards of ctx tokens). The generator is seeded
    by (seed, step), like the batch, so that a resumed run samples the same tokens."""
    g = torch.Generator(device=x.device).manual_seed(seed * 1_000_003 + step + 500_000_000)
    seq = x[:, : x.shape[1] - n_new]
    with torch.no_grad(), torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
        for _ in range(n_new):
            p = F.softmax(draft(seq[:, -window:])[:, -1].float(), dim=-1)
            seq = torch.cat([seq, torch.multinomial(p, 1, generator=g)], dim=1)
    return seq


def val_windows(data, ctx, max_windows=None):
    """Consecutive non-overlapping windows of ctx + 1 tokens (sharing one token) over a stream."""
    n = (len(data) - 1) // ctx
    if max_windows:
        n = min(n, max_windows)
    w = torch.stack([data[i * ctx:i * ctx + ctx + 1] for i in range(n)]).long()
    return w[:, :-1], w[:, 1:]


@torch.no_grad()
def val_loss(model, data, ctx, max_windows=None, batch=8):
    model.eval()
    x, y = val_windows(data, ctx, max_windows)
    dev = model.wte.weight.device
    total = 0.0
    for i in range(0, len(x), batch):
        logits = model(x[i:i + batch].to(dev))
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[i:i + batch].reshape(-1).to(dev),
                                 reduction="sum").item()
    model.train()
    return total / y.numel()


# ---------------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------------

def lr_at(step, hp):
    if step < hp["warmup"]:
        return hp["lr"] * (step + 1) / hp["warmup"]
    t = (step - hp["warmup"]) / max(1, hp["steps"] - hp["warmup"])
    return hp["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def make_optimizer(model, hp):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n != "wpe.weight"]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and n != "wpe.weight")]
    return torch.optim.AdamW([{"params": decay, "weight_decay": hp["wd"]}, {"params": rest, "weight_decay": 0.0}],
                             lr=hp["lr"], betas=(0.9, 0.95), eps=1e-8)


def load_teacher(run):
    state = torch.load(os.path.join(run, "final.pt"), map_location="cpu")
    teacher = GPT2(state["model_cfg"])
    teacher.load_state_dict(state["model"])
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def atomic_save(obj, path):
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


class PauseClock(threading.Thread):
    """Counts the seconds this process spent stopped (kill -STOP ... kill -CONT): a thread that wakes every half
    second sees a gap when the whole process was frozen."""

    def __init__(self):
        super().__init__(daemon=True)
        self.paused = 0.0

    def run(self):
        last = time.monotonic()
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            if now - last > 3.0:
                self.paused += now - last - 0.5
            last = now


class Log:
    def __init__(self, path):
        self.f = open(path, "a") if path else None

    def __call__(self, msg):
        line = time.strftime("%H:%M:%S ") + msg
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


def running_elsewhere(pid_path):
    """Whether pid_path names another live process (a run already training): its PID then stays in the file."""
    try:
        with open(pid_path) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid != os.getpid()
    except (OSError, ValueError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", help="run folder (checkpoints, log, final weights)")
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--positions", type=int, default=512, help="n_positions (declared context)")
    ap.add_argument("--ctx", type=int, default=512, help="training window")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--teacher", help="run folder of the target to distil from (its final.pt)")
    ap.add_argument("--ce-weight", type=float, default=0.1, help="distillation: weight of hard-label CE")
    ap.add_argument("--on-policy-every", type=int, default=0, help="distillation: every K-th step's windows end in "
                    "--sample-tokens tokens the draft samples itself (DistillSpec's on-policy data; 0 = never)")
    ap.add_argument("--sample-tokens", type=int, default=32, help="tokens the draft samples per on-policy window")
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="where the steps run: cpu, or cuda on a GPU machine (the "
                    "batches and samples are drawn as on the CPU; checkpoints are read and written on the CPU side)")
    ap.add_argument("--data", help="a folder of tools/pack.py's token streams (train.pt.xz, val.pt.xz) to train on "
                    "instead of the whole corpus's (tools/runs/data/)")
    ap.add_argument("--fp32", dest="bf16", action="store_false",
                    help="plain F32 matmuls (default: bfloat16 autocast, about 4x faster on AVX512-BF16 CPUs; "
                         "weights, optimizer state and losses stay F32)")
    ap.add_argument("--pilot", type=int, default=0, help="time this many steps, save nothing")
    ap.add_argument("--stop-after", type=int, default=0, help="checkpoint and exit after this many steps of this "
                    "process (the run goes on when the command is run again)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    if args.run and os.path.exists(os.path.join(args.run, "final.pt")):
        print(f"{args.run}: already trained (final.pt)")
        return
    train_data = token_stream("train", args.data)
    val_data = token_stream("val", args.data)
    dev = torch.device(args.device)
    tok = Tokenizer.load(os.path.join(RUNS, "tokenizer"))

    ckpt_path = os.path.join(args.run, "ckpt.pt") if args.run else None
    state = torch.load(ckpt_path, map_location="cpu") if ckpt_path and os.path.exists(ckpt_path) else None
    if state:
        hp, model_cfg = state["hp"], state["model_cfg"]
    else:
        hp = {k: getattr(args, k) for k in ("ctx", "batch", "steps", "warmup", "lr", "wd", "seed", "teacher",
                                            "ce_weight", "bf16")}
        if args.teacher and args.on_policy_every:  # (a target's hp stay as they were: its runs resume unchanged)
            hp.update(on_policy_every=args.on_policy_every, sample_tokens=args.sample_tokens)
        model_cfg = {"n_embd": args.d, "n_layer": args.layers, "n_head": args.heads, "n_positions": args.positions,
                     "vocab_size": len(tok.tokens), "eot_id": tok.eot_id}
    torch.manual_seed(hp["seed"])
    model = GPT2(model_cfg).to(dev)
    opt = make_optimizer(model, hp)
    step, train_seconds = 0, 0.0
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, train_seconds = state["step"], state["train_seconds"]
    teacher = load_teacher(hp["teacher"]).to(dev) if hp["teacher"] else None

    if args.run:
        os.makedirs(args.run, exist_ok=True)
    log = Log(os.path.join(args.run, "log.txt") if args.run else None)
    if args.run and not running_elsewhere(os.path.join(RUNS, "train.pid")):
        with open(os.path.join(RUNS, "train.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    tokens_per_step = hp["batch"] * hp["ctx"]
    log(f"{'resume at step ' + str(step) if state else 'start'}: {model_cfg} hp={hp} params={n_params(model)} "
        f"cost/token={per_token_cost(model_cfg)} train_tokens={len(train_data)} val_tokens={len(val_data)} "
        f"tokens/step={tokens_per_step}" + (f" teacher cost/token={per_token_cost(teacher.cfg)} ratio="
                                            f"{per_token_cost(teacher.cfg) / per_token_cost(model_cfg):.2f}"
                                            if teacher else ""))

    stop = []
    if args.run:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.append(1))

    def save():
        atomic_save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "hp": hp,
                     "model_cfg": model_cfg, "train_seconds": train_seconds}, ckpt_path)

    last_ckpt = time.time()
    first_step = step
    pause_clock = PauseClock()
    pause_clock.start()
    ema_loss, ema_rate, pilot_t0 = None, None, None
    end = step + args.pilot if args.pilot else hp["steps"]
    while step < end:
        t0, paused0 = time.time(), pause_clock.paused
        if args.pilot and pilot_t0 is None and step == 1:
            pilot_t0 = t0                                                   # step 0 warms up
        x, y = (t.to(dev) for t in batch_at(train_data, step, hp["seed"], hp["batch"], hp["ctx"]))
        n_real = hp["ctx"]  # positions whose next token is the corpus's (the rest: the draft's own samples)
        if teacher is not None and hp.get("on_policy_every") and step % hp["on_policy_every"] == 0:
            n_new = hp["sample_tokens"]
            x = draft_samples(model, x, n_new, 128, step, hp["seed"], hp.get("bf16", False))
            n_real = hp["ctx"] - n_new  # position ctx − n_new − 1 still sees only the corpus
        for group in opt.param_groups:
            group["lr"] = lr_at(step, hp)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=hp.get("bf16", False)):
            logits = model(x)
        flat = logits.float().reshape(-1, logits.shape[-1])
        if n_real == hp["ctx"]:
            ce = F.cross_entropy(flat, y.reshape(-1))
        else:  # hard labels only where the inputs are the corpus's; the KL below covers every position
            ce = F.cross_entropy(flat.view(*logits.shape)[:, :n_real].reshape(-1, flat.shape[-1]),
                                 y[:, :n_real].reshape(-1))
        if teacher is not None:
            with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=hp.get("bf16", False)):
                t_logits = teacher(x)
            t_logp = F.log_softmax(t_logits.float().reshape(-1, flat.shape[-1]), dim=-1)
            kl = F.kl_div(F.log_softmax(flat, dim=-1), t_logp, log_target=True, reduction="batchmean")
            loss = (1 - hp["ce_weight"]) * kl + hp["ce_weight"] * ce
        else:
            kl, loss = None, ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        step += 1
        dt = max(1e-3, time.time() - t0 - (pause_clock.paused - paused0))     # not counting pauses
        rate = tokens_per_step / dt
        train_seconds += dt
        ema_rate = rate if ema_rate is None else 0.9 * ema_rate + 0.1 * rate
        ema_loss = ce.item() if ema_loss is None else 0.95 * ema_loss + 0.05 * ce.item()
        if step % 10 == 0 or step == end or args.pilot:
            left = (hp["steps"] - step) * tokens_per_step / ema_rate
            log(f"step {step}/{hp['steps']} ce {ce.item():.4f} (ema {ema_loss:.4f})"
                + (f" kl {kl.item():.4f}" if kl is not None else "")
                + f" lr {lr_at(step - 1, hp):.2e} gnorm {gnorm:.2f} {rate:.0f} tok/s (ema {ema_rate:.0f})"
                f" trained {train_seconds / 60:.1f} min, left ~{left / 60:.1f} min")
        if args.pilot:
            continue
        if step % args.eval_every == 0 or step == hp["steps"]:
            log(f"step {step} val ce {val_loss(model, val_data, hp['ctx'], max_windows=16):.4f} (first 16 windows)")
        if args.stop_after and step - first_step >= args.stop_after and step < hp["steps"]:
            stop.append(1)
        if time.time() - last_ckpt >= 60 * args.ckpt_minutes or stop or step == hp["steps"]:
            save()
            last_ckpt = time.time()
            log(f"checkpoint step {step}")
        if stop:
            log("stopped; resume by running the same command")
            return
    if args.pilot:
        n = args.pilot - 1
        if n > 0 and pilot_t0:
            log(f"pilot: {n * tokens_per_step / (time.time() - pilot_t0):.0f} tok/s over {n} steps "
                f"(d={args.d} L={args.layers} ctx={hp['ctx']} batch={hp['batch']}, params {n_params(model)}, "
                f"{4 * n_params(model) / 2**20:.1f} MiB F32)")
        return
    full = val_loss(model, val_data, hp["ctx"])
    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {args.threads} threads"
    atomic_save({"model": {k: v.cpu() for k, v in model.state_dict().items()}, "model_cfg": model_cfg, "hp": hp,
                 "step": step, "train_seconds": train_seconds, "val_ce": full, "device": where},
                os.path.join(args.run, "final.pt"))
    log(f"done: {step} steps, {train_seconds / 60:.1f} min, val ce {full:.4f} (ppl {math.exp(full):.2f})")
    pid_path = os.path.join(RUNS, "train.pid")
    try:
        with open(pid_path) as f:
            if f.read().strip() == str(os.getpid()):
                os.remove(pid_path)
    except OSError:
        pass


if __name__ == "__main__":
    main()
