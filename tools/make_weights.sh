#!/usr/bin/env bash
# make_weights.sh — the whole pipeline of specdec's default model pair (`make weights` runs it):
#   corpus → tokenizer → target → pack → draft (distilled) → evaluation → export to weights/pystd/ (+ card).
# Every stage resumes: the corpus and tokenizer are made once (delete tools/runs/ to start over; the Debian packages
# the corpus is read from stay cached in tools/runs/debian/, delete that too for newer versions); training picks up
# from tools/runs/<run>/ckpt.pt (written every 5 minutes) and is a no-op once final.pt exists. Training runs under
# `nice -n 19` on 2 threads; its PID is in tools/runs/train.pid (`kill -STOP` pauses it, `kill -CONT` resumes).
# Needs Debian's python3-torch and python3-regex, apt-get and dpkg-deb (the corpus's packages are downloaded, not
# installed: run `apt-get update` once first), and build/release/specdec (`make`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="nice -n 19 /usr/bin/python3"
RUNS=tools/runs
mkdir -p "$RUNS"

[ -f "$RUNS/corpus/manifest.tsv" ] || $PY tools/corpus.py
[ -f "$RUNS/tokenizer/tokenizer.json" ] || $PY tools/train_bpe.py

# Target: 8 × 384, 6 heads, 512 positions; 4000 steps of 16 × 512 tokens (32.8 M tokens, 0.45 epoch of the
# corpus) — on 2 CPU cores, many hours: it runs across sessions, resuming from its checkpoint.
$PY tools/train.py --run "$RUNS/target" --d 384 --layers 8 --heads 6 --positions 512 --ctx 512 \
    --batch 16 --steps 4000 --warmup 100 --lr 1.2e-3
# The draft learns from a pack (tools/pack.py): 24 M tokens of whole training files drawn at random and the target's
# weights, 61 MiB with the repository, small enough to carry to a GPU machine. DEVICE=cuda trains there (the shipped
# draft: tools/runs/pack carried to an H100, tools/runs/draft/final.pt back: 6.1 min of steps, beside two other runs);
# on 2 CPU cores about 12 hours (`train.py --pilot 5` with the draft's arguments: 1500 tokens/s).
[ -f "$RUNS/pack/teacher/final.pt" ] && [ "$RUNS/pack/teacher/final.pt" -nt "$RUNS/target/final.pt" ] ||
    $PY tools/pack.py --tokens 24000000
# Draft: 3 × 96, 3 heads, 1/15.5 of the target's multiply-adds; 2000 steps of 64 × 512 tokens, distilled from the
# target: loss = 0.9 · KL(target ‖ draft) + 0.1 · cross-entropy; every second step's windows end in 32 tokens the
# draft samples itself (DistillSpec's on-policy data). A 6 × 128 draft learnt more (α 0.78 against 0.69) but its
# steps cost twice as much, and its speed-ups measured the same (docs/performance-history.md).
$PY tools/train.py --run "$RUNS/draft" --data "$RUNS/pack/data" --teacher "$RUNS/pack/teacher" \
    --device "${DEVICE:-cpu}" --d 96 --layers 3 --heads 3 --positions 512 --ctx 512 \
    --batch 64 --steps 2000 --warmup 40 --lr 3e-3 --ce-weight 0.1 --on-policy-every 2 --sample-tokens 32

if [ ! -f "$RUNS/eval.json" ] || [ "$RUNS/draft/final.pt" -nt "$RUNS/eval.json" ]; then
    $PY tools/evaluate.py
fi
$PY tools/export.py --name pystd
