#!/usr/bin/env bash
# The bytes-against-accuracy frontier of local steps (--local-steps H), the
# outer optimizer (--outer) and the codecs, in the simulator: 8 peers on the
# exponential graph (topologies/exp8.topo), the embedded MNIST, mlp:256, 10
# epochs, seed 1. The reference is uncompressed SGP (--codec none, H = 1),
# run in the same script; every row gives its accuracy (average model and
# worst peer), consensus distance, bytes sent and how many times fewer bytes
# than the reference, and the accuracy difference to it. A PNG plot of
# accuracy against bytes (log scale), one series per codec setting, goes to
# build/bench/frontier.png; the table to build/bench/frontier.txt.
#
#   bash tests/bench/frontier.sh                  # about 5 minutes here
#   FRONTIER_ROWS="none:1 stc:0.04:4:0.4" bash tests/bench/frontier.sh
#   FRONTIER_DATA=fashion FRONTIER_MODEL=lenet FRONTIER_EPOCHS=10 bash tests/bench/frontier.sh
#   FRONTIER_TEXT=1 bash tests/bench/frontier.sh  # the byte-level GPT on the Brown corpus (see below)
#
# Text (FRONTIER_TEXT=1, after `make data`): gpt:4:128:4 with --context 64 on
# the first FRONTIER_TRAIN_BYTES (1 MiB) of the Brown corpus's training part
# and the first FRONTIER_VAL_BYTES (64 KiB) of its held-out tenth, total batch
# 32 windows, inner optimizer AdamW lr 0.001 with 0.1 epochs of warm-up; the
# metric is the validation loss (nats per token, and bits per byte) of the
# average model and of the worst peer, and "vs ref" is its relative change.
#
# A row is CODEC:H[:STEP[:OUTER]][/INNER] (OUTER as --outer takes it, e.g.
# nesterov:0.5:0.5; STEP "-" for the codec's default; INNER the local
# optimizer as KIND:LR[:MOMENTUM], e.g. adamw:0.003, default sgd:0.1:0.9),
# or gather:DECAY:CODEC:H[/INNER]: the exact sparse all-gather (--gather
# DECAY on the complete topology), e.g. gather:0.8:sparseloco:32:10.
# The reference row none:1 is always run first.
# Knobs: FRONTIER_ROWS, FRONTIER_DATA (embedded), FRONTIER_MODEL (mlp:256),
# FRONTIER_EPOCHS (10), FRONTIER_SEED (1), FRONTIER_NAME (frontier),
# FRONTIER_EXTRA (more sgp sim options for every row), FRONTIER_INNER (the
# inner optimizer of rows that name none), SGP_BIN (build/sgp). See
# tests/bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
SEED=${FRONTIER_SEED:-1}
EXTRA=${FRONTIER_EXTRA:-}
INNER=${FRONTIER_INNER:-}
if [ "${FRONTIER_TEXT:-0}" = 1 ]; then
    corpus=${SGP_DATA_DIR:-$root/build/data}/brown/brown.txt
    [ -f "$corpus" ] || { echo "frontier.sh: $corpus not there (run make data)" >&2; exit 1; }
    textdir=$root/build/bench/text
    # shellcheck source=tests/bench/text_split.sh
    . "$here/text_split.sh"
    text_split "$corpus" "$textdir" "${FRONTIER_TRAIN_BYTES:-1048576}" "${FRONTIER_VAL_BYTES:-65536}"
    DATA=${FRONTIER_DATA:-text:$textdir/train.txt,$textdir/val.txt}
    MODEL=${FRONTIER_MODEL:-gpt:4:128:4}
    EPOCHS=${FRONTIER_EPOCHS:-1}
    NAME=${FRONTIER_NAME:-frontier_text}
    EXTRA="--context 64 --batch 32 --warmup 0.1 $EXTRA"
    INNER=${INNER:-adamw:0.001}
    ROWS=${FRONTIER_ROWS:-"stc:0.04:1 stc:0.04:10:-:nesterov:0.7:0.9"}
else
    DATA=${FRONTIER_DATA:-}
    MODEL=${FRONTIER_MODEL:-mlp:256}
    EPOCHS=${FRONTIER_EPOCHS:-10}
    NAME=${FRONTIER_NAME:-frontier}
fi
ROWS=${ROWS:-${FRONTIER_ROWS:-"none:4 none:16 none:64 stc:0.04:1 stc:0.04:4 stc:0.04:16 stc:0.04:64
  sketch:0.04:1 sketch:0.04:4 sketch:0.04:16 sketch:0.04:64 stc:0.04:4:0.4 stc:0.04:8:0.3:nesterov:0.5:0.5
  stc:0.04:10:0.35:nesterov:0.5:0.5 none:1/adamw:0.003 stc:0.04:4:0.35:nesterov:0.7:0.9/adamw:0.003
  stc:0.04:10:0.35:nesterov:0.7:0.9/adamw:0.003 stc:0.04:16:0.35:nesterov:0.7:0.9/adamw:0.003
  stc:0.04:32:0.35:nesterov:0.7:0.9/adamw:0.003"}}
OUT=$root/build/bench
[ -x "$SGP" ] || { echo "frontier.sh: $SGP not built (run make)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "frontier.sh: needs python3 to read the JSON summaries" >&2; exit 1; }
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# CODEC:H[:STEP[:OUTER]] into sgp sim options. Codec specs have one or two
# fields (none, stc:0.04, topk:0.01:sampled is not supported here).
options() {
    local IFS=: f inner row=$1
    [ "${row#*/}" = "$row" ] && [ -n "$INNER" ] && row="$row/$INNER"
    read -r -a f <<<"${row%%/*}"
    if [ "${row#*/}" != "$row" ]; then
        read -r -a inner <<<"${row#*/}"
        echo "--optimizer ${inner[0]} --lr ${inner[1]}"
        [ ${#inner[@]} -gt 2 ] && echo "--momentum ${inner[2]}"
    fi
    if [ "${f[0]}" = gather ]; then # (after the script's --topology: the last one counts)
        echo "--topology complete --gather ${f[1]} --codec ${f[2]}:${f[3]} --local-steps ${f[4]}"
        return 0
    fi
    local codec=${f[0]} i=1
    if [ "$codec" != none ] && [ "$codec" != exact ] && [ "$codec" != fp16 ] && [ "$codec" != bf16 ] &&
        [ "$codec" != terngrad ] && [ "$codec" != natural ] && [ "$codec" != sign ]; then
        codec="$codec:${f[1]}" i=2
    fi
    local h=${f[$i]:-1} step=${f[$((i + 1))]:--} outer=none
    [ ${#f[@]} -gt $((i + 2)) ] && outer=$(IFS=:; echo "${f[*]:$((i + 2))}")
    echo "--codec $codec --local-steps $h --outer $outer"
    [ "$step" != - ] && echo "--step $step"
    return 0
}

data=()
[ -n "$DATA" ] && data=(--data "$DATA")
n=0
for row in none:1 $ROWS; do
    n=$((n + 1))
    echo "  [$n] $row" >&2
    # shellcheck disable=SC2046
    "$SGP" sim --peers 8 --topology "$root/topologies/exp8.topo" --model "$MODEL" --epochs "$EPOCHS" \
        --seed "$SEED" --no-progress "${data[@]}" $EXTRA $(options "$row") --summary "$work/$n.json" >/dev/null
    echo "$row" >"$work/$n.row"
done

python3 - "$work" "$n" "$OUT/$NAME" "$MODEL" "$EPOCHS" "${DATA:-embedded MNIST}" <<'EOF'
import json, subprocess, sys
work, n, out, model, epochs, data = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
rows = []
for k in range(1, n + 1):
    s = json.load(open(f"{work}/{k}.json"))
    rows.append((open(f"{work}/{k}.row").read().strip(), s))
ref = rows[0][1]
is_text = "context" in ref  # a language model: validation loss, lower is better
if is_text:
    head = f"{'loss':>7} {'bits/B':>6} {'worst':>7} {'vs ref':>7}"
else:
    head = f"{'accuracy':>8} {'worst':>7} {'vs ref':>7}"
lines = [f"8 peers, exponential graph, {model}, {epochs} epochs, {data}; reference: --codec none, H = 1",
         f"{'row (codec:H[:step[:outer]][/inner])':<48} {'H':>3} {'step':>6} {'outer':<17} {'inner':<12} {head} "
         f"{'consensus':>9} {'bytes':>10} {'fewer':>7}"]
for row, s in rows:
    ratio = ref["bytes_sent"] / s["bytes_sent"]
    inner = f"{s['optimizer']}:{s['lr']:.3g}"
    if is_text:
        metric = (f"{s['test_loss']:>7.4f} {s['test_bits_per_byte']:>6.3f} {s['test_loss_max']:>7.4f} "
                  f"{100 * (s['test_loss'] / ref['test_loss'] - 1):>+6.2f}%")
    else:
        metric = (f"{100 * s['test_accuracy']:>7.2f}% {100 * s['test_accuracy_min']:>6.2f}% "
                  f"{100 * (s['test_accuracy'] - ref['test_accuracy']):>+7.2f}")
    lines.append(f"{row:<48} {s['local_steps_per_round']:>3} {s['step']:>6.3g} {s['outer']:<17} {inner:<12} "
                 f"{metric} {s['consensus_distance']:>9.2e} {s['bytes_sent'] / 1e6:>8.1f}MB {ratio:>6.0f}x")
text = "\n".join(lines)
print(text)
open(out + ".txt", "w").write(text + "\n")
# One series per setting without H (codec, step, outer), points along H.
series = {}
for row, s in rows:
    key = (f"gather {s['gather']:.2g} {s['codec']}" if s.get("gather", -1) >= 0 else f"{s['codec']} step {s['step']:.3g}") + \
        ("" if s["outer"] == "none" else f" outer {s['outer']}") + \
        ("" if s["optimizer"] == "sgd" else f" {s['optimizer']}:{s['lr']:.3g}")
    y = s["test_loss"] if is_text else 100 * s["test_accuracy"]
    series.setdefault(key, []).append((s["bytes_sent"] / 1e6, y, s["local_steps_per_round"]))
if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) != 0:
    print("(no gnuplot: no plot)")
    sys.exit(0)
plot = [f"set terminal pngcairo size 1000,640", f"set output '{out}.png'", "set logscale x",
        "set xlabel 'bytes sent by all peers (MB, log)'", "set key font ',9'", "set grid",
        f"set arrow from {ref['bytes_sent'] / 1e9}, graph 0 to {ref['bytes_sent'] / 1e9}, graph 1 nohead dt 2 lc rgb 'gray'"]
if is_text:  # the band: within 2% of the reference's loss
    plot += ["set ylabel 'validation loss of the average model (nats per byte)'", "set key top right",
             f"set title 'bytes against validation loss: local steps H, codecs, outer optimizer ({model}, 8 peers)'",
             f"set arrow from graph 0, first {ref['test_loss'] * 1.02} to graph 1, first {ref['test_loss'] * 1.02} "
             "nohead dt 2 lc rgb 'gray'"]
else:
    plot += ["set ylabel 'test accuracy of the average model (%)'", "set key bottom right",
             f"set title 'bytes against accuracy: local steps H, codecs, outer optimizer ({model}, 8 peers)'",
             f"set arrow from graph 0, first {100 * ref['test_accuracy'] - 0.5} to graph 1, first "
             f"{100 * ref['test_accuracy'] - 0.5} nohead dt 2 lc rgb 'gray'",
             "set yrange [80:97]  # lower points are in the table"]
cmds, blocks = [], []
for i, (key, pts) in enumerate(series.items()):
    pts.sort()
    blocks.append("\n".join(f"{b} {a} {h}" for b, a, h in pts) + "\ne")
    blocks.append("\n".join(f"{b} {a} {h}" for b, a, h in pts) + "\ne")
    cmds.append(f"'-' using 1:2 with linespoints title '{key}'")
    cmds.append(f"'-' using 1:2:(sprintf('H%d',$3)) with labels offset 0,0.8 font ',8' notitle")
plot.append("plot " + ", ".join(cmds))
subprocess.run(["gnuplot"], input=("\n".join(plot) + "\n" + "\n".join(blocks) + "\n").encode(), check=False)
print(f"plot: {out}.png (dashed: the reference's " + ("loss plus 2%" if is_text else "accuracy less 0.5 points") +
      ", and 1,000x fewer bytes)")
EOF
