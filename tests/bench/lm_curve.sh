#!/usr/bin/env bash
# Learning curves of the byte-level GPT, sgp against PyTorch: `sgp train` and
# tests/bench/lm_train_torch.py train the same model on the same text with the
# same batch, context, AdamW and schedule, and both evaluate the validation
# bits per byte after every epoch (a point of the curve), on the same windows.
# The table goes to build/bench/lm_curve.txt, the plot (bits per byte against
# tokens seen) to build/bench/lm_curve.png.
#
#   bash tests/bench/lm_curve.sh          # after `make data`; about 25 minutes here
#   LM_CONFIGS="gpt:2:64:4 64 32 0.003 262144 2" bash tests/bench/lm_curve.sh
#
# A config is "MODEL CONTEXT BATCH LR TRAIN_BYTES EPOCHS", configs separated
# by ';'. The data: the first TRAIN_BYTES of the Brown corpus's training part
# (what --data brown trains on) and the first LM_VAL_BYTES (65536) of its
# held-out tenth. Warm-up 0.1 epochs, then cosine; weight decay 0.01; seed 1;
# one thread each (LM_THREADS). The two runs draw different windows and
# initial weights (each its own generator, the same distributions), so their
# difference is that noise plus any difference of the implementations.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
PY=/usr/bin/python3
CONFIGS=${LM_CONFIGS:-"gpt:4:128:4 64 32 0.003 1048576 3;gpt:6:384:6 64 16 0.001 262144 1"}
THREADS=${LM_THREADS:-1}
OUT=$root/build/bench
corpus=${SGP_DATA_DIR:-$root/build/data}/brown/brown.txt
[ -x "$SGP" ] || { echo "lm_curve.sh: $SGP not built (run make)" >&2; exit 1; }
[ -f "$corpus" ] || { echo "lm_curve.sh: $corpus not there (run make data)" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "lm_curve.sh: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
len=$(stat -c %s "$corpus")
held=$((len / 100 * 10 + len % 100 * 10 / 100)) # the tenth --data text:FILE holds out
# (no pipes into head: under pipefail the writer's SIGPIPE would end the script)
tail -c "$held" "$corpus" >"$work/held.txt"
head -c "${LM_VAL_BYTES:-65536}" "$work/held.txt" >"$work/val.txt"

: >"$work/points"
IFS=';' read -r -a configs <<<"$CONFIGS"
for cfg in "${configs[@]}"; do
    read -r model ctx batch lr bytes epochs <<<"$cfg"
    head -c $((bytes < len - held ? bytes : len - held)) "$corpus" >"$work/train.txt"
    echo "  $model context $ctx batch $batch lr $lr: $bytes bytes x $epochs epochs" >&2
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$THREADS "$SGP" train --model "$model" --context "$ctx" \
        --batch "$batch" --optimizer adamw --lr "$lr" --warmup 0.1 --epochs "$epochs" --threads "$THREADS" \
        --data "text:$work/train.txt,$work/val.txt" --no-progress >"$work/sgp.out"
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$THREADS "$PY" "$here/lm_train_torch.py" --model "$model" \
        --context "$ctx" --batch "$batch" --lr "$lr" --warmup 0.1 --epochs "$epochs" --threads "$THREADS" \
        --train "$work/train.txt" --val "$work/val.txt" >"$work/torch.out"
    # epoch E: tokens = E * (bytes / ctx) * ctx
    awk -v m="$model" -v per=$((bytes / ctx * ctx)) '/^epoch/ { split($2, e, "/"); for (i = 1; i < NF; i++) if ($i == "val") v = $(i + 3);
        gsub(/[(]/, "", v); print m, "sgp", e[1] * per, v }' "$work/sgp.out" >>"$work/points"
    awk -v m="$model" '/^epoch/ { print m, "torch", $4, substr($8, 2) }' "$work/torch.out" >>"$work/points"
    grep -h "tokens/s" "$work/sgp.out" | tail -1 | sed "s/^/    sgp:   /" >&2
    tail -1 "$work/torch.out" | sed "s/^/    torch: /" >&2
done

python3 - "$work/points" "$OUT/lm_curve" <<'EOF'
import subprocess, sys
points, out = sys.argv[1], sys.argv[2]
runs = {}
for line in open(points):
    model, who, tokens, bpb = line.split()
    runs.setdefault(model, {}).setdefault(who, []).append((int(tokens), float(bpb)))
lines = ["validation bits per byte after N tokens (Brown corpus), sgp train against PyTorch (AdamW, same model, data, batch, schedule)",
         f"{'model':<14} {'tokens':>10} {'sgp':>7} {'torch':>7} {'sgp-torch':>9}"]
for model, r in runs.items():
    for (t, a), (_, b) in zip(r.get("sgp", []), r.get("torch", [])):
        lines.append(f"{model:<14} {t:>10,} {a:>7.4f} {b:>7.4f} {a - b:>+9.4f}")
text = "\n".join(lines)
print(text)
open(out + ".txt", "w").write(text + "\n")
if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) != 0:
    sys.exit(0)
plot = ["set terminal pngcairo size 900,560", f"set output '{out}.png'", "set grid", "set key top right",
        "set xlabel 'tokens seen'", "set ylabel 'validation bits per byte'",
        "set title 'byte-level GPT on the Brown corpus: sgp train and PyTorch'"]
cmds, blocks = [], []
for model, r in runs.items():
    for who in ("sgp", "torch"):
        cmds.append(f"'-' using 1:2 with linespoints title '{model} {who}'")
        blocks.append("\n".join(f"{t} {b}" for t, b in r.get(who, [])) + "\ne")
plot.append("plot " + ", ".join(cmds))
subprocess.run(["gnuplot"], input=("\n".join(plot) + "\n" + "\n".join(blocks) + "\n").encode(), check=False)
print(f"plot: {out}.png")
EOF
