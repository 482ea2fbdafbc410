#!/usr/bin/env bash
# pilot_drafts.sh — draft shapes side by side: each distilled from a pack's teacher (tools/pack.py) in parallel on one
# GPU, then evaluated on the validation split (tools/evaluate.py: α, greedy agreement, cost ratio). Run on a GPU
# machine the pack was carried to:
#   SHAPES="s96:96:3:3 s128x6:128:6:4" STEPS=2000 BATCH=16 TRAIN_S=370 OUT=/tmp/out tools/pilot_drafts.sh [PACK]
# SHAPES: name:d:layers:heads, each trained with make_weights.sh's draft recipe for STEPS steps of BATCH windows,
# stopped (and evaluated at its last checkpoint) after TRAIN_S seconds. Writes OUT/eval-NAME.json and OUT/NAME.pt
# (the run's final.pt, or its checkpoint less the optimizer's state: for a speed test on the CPU, tools/export.py's
# write_folder, then run-bench -s speculative -d FOLDER).
set -u
cd "$(dirname "$0")/.."
PACK=${1:-tools/runs/pack}
SHAPES=${SHAPES:-s96:96:3:3 s128:128:4:4 s128x6:128:6:4 s192:192:4:6 s256x2:256:2:4}
WORK=$(mktemp -d)
for s in $SHAPES; do
    IFS=: read -r name d layers heads <<<"$s"
    PYTHONUNBUFFERED=1 timeout "${TRAIN_S:-400}" python3 tools/train.py --run "$WORK/$name" --data "$PACK/data" \
        --teacher "$PACK/teacher" --device cuda --d "$d" --layers "$layers" --heads "$heads" --positions 512 \
        --ctx 512 --batch "${BATCH:-16}" --steps "${STEPS:-2000}" --warmup 40 --lr 3e-3 --ce-weight 0.1 \
        --on-policy-every 2 --sample-tokens 32 --ckpt-minutes 1 --eval-every 500 >"$WORK/$name.log" 2>&1 &
done
wait
for s in $SHAPES; do
    IFS=: read -r name _ <<<"$s"
    echo "== $name: $(grep -E 'done:|checkpoint step' "$WORK/$name.log" | tail -1)"
    final=final
    [ -f "$WORK/$name/final.pt" ] || final=ckpt
    mkdir -p "$WORK/weights-$name"                      # evaluate.py reads final.pt: the run's, or its checkpoint's
    python3 -c 'import sys, torch; s = torch.load(sys.argv[1], map_location="cpu")
torch.save({k: v for k, v in s.items() if k != "opt"}, sys.argv[2])' \
        "$WORK/$name/$final.pt" "$WORK/weights-$name/final.pt"
    python3 tools/evaluate.py --target "$PACK/teacher" --draft "$WORK/weights-$name" --data "$PACK/data" \
        --device cuda --out "$OUT/eval-$name.json" | grep -E '^draft |^pair'
    cp "$WORK/weights-$name/final.pt" "$OUT/$name.pt"
done
