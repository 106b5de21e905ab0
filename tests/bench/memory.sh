#!/usr/bin/env bash
# Where a peer's memory goes, next to one process training the same model:
#   train   `sgp train --model M --epochs 1`: the reference (parameters,
#           gradients, optimizer state, activations, data)
#   sim     `sgp sim --peers P --model M --epochs 1 --codec C`: per peer
#   launch  `sgp launch --peers L --model M --epochs 1 --codec C`: the
#           largest peer (each `sgp peer` process reports its own parts)
# For each: peak RSS, RSS when the last round was done and its parts (the
# summaries' memory_* keys, peer/core/memory.h), and the peer's cost in
# copies of the model over `sgp train`: (peak RSS - train's peak RSS) / (4 x
# parameters). MEM_BASE=/path/to/other/sgp adds the same rows for that binary
# (it must write the memory_* keys), for before/after figures.
#
#   bash tests/bench/memory.sh                                  # 5.8M parameters, a few minutes
#   MEM_MODELS="mlp:2048,2048 mlp:4096,4096" MEM_CODECS="stc:0.04 none" bash tests/bench/memory.sh
#
# Knobs: MEM_MODELS (mlp:2048,2048), MEM_CODECS (stc:0.04), MEM_SIM_PEERS (8),
# MEM_LAUNCH_PEERS (4), MEM_BASE (none), SGP_BIN (build/sgp).
# Mind the machine's memory: a sim holds MEM_SIM_PEERS peers in one process.
# The table also goes to build/bench/memory.txt. See tests/bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
BASE=${MEM_BASE:-}
MODELS=${MEM_MODELS:-mlp:2048,2048}
CODECS=${MEM_CODECS:-stc:0.04}
SIMP=${MEM_SIM_PEERS:-8}
LAUNCHP=${MEM_LAUNCH_PEERS:-4}
OUT=$root/build/bench/memory.txt
[ -x "$SGP" ] || { echo "memory.sh: $SGP not built (run make)" >&2; exit 1; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "memory.sh: MEM_BASE=$BASE is not an executable" >&2; exit 1; }
command -v python3 >/dev/null || { echo "memory.sh: needs python3 to read the JSON summaries" >&2; exit 1; }
mkdir -p "$root/build/bench"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bins=("$SGP")
[ -n "$BASE" ] && bins+=("$BASE")

rows=$work/rows
: >"$rows"
for model in $MODELS; do
    for b in "${!bins[@]}"; do
        bin=${bins[$b]} tag=$b.${model//[:,]/_}
        echo "  $bin: train $model" >&2
        "$bin" train --model "$model" --epochs 1 --summary "$work/train.$tag.json" >/dev/null
        echo "train $b $model - 1 $work/train.$tag.json" >>"$rows"
        for codec in $CODECS; do
            echo "  $bin: sim --peers $SIMP $model $codec" >&2
            "$bin" sim --peers "$SIMP" --model "$model" --epochs 1 --codec "$codec" \
                --summary "$work/sim.$tag.$codec.json" >/dev/null
            echo "sim $b $model $codec $SIMP $work/sim.$tag.$codec.json" >>"$rows"
            echo "  $bin: launch --peers $LAUNCHP $model $codec" >&2
            "$bin" launch --peers "$LAUNCHP" --model "$model" --epochs 1 --codec "$codec" \
                --run-dir "$work/run.$tag.$codec" --summary "$work/launch.$tag.$codec.json" >/dev/null
            echo "launch $b $model $codec 1 $work/launch.$tag.$codec.json" >>"$rows"
            rm -rf "$work/run.$tag.$codec"
        done
    done
done

python3 - "$rows" "${bins[@]}" <<'PY' | tee "$OUT"
import json, sys
rows = [l.split() for l in open(sys.argv[1])]
bins = sys.argv[2:]
parts = ["model", "gossip", "codec", "in_flight", "data", "runtime"]
train_peak = {}
print("%-6s %-4s %-16s %-9s %9s %9s %8s %8s %8s %8s %8s %8s %10s" %
      ("run", "bin", "model", "codec", "peak MB", "end MB", "model", "gossip", "codec", "flight", "data", "runtime",
       "copies+"))
for kind, b, model, codec, per, path in rows:
    s = json.load(open(path))
    per = int(s.get("memory_peers", per))
    copy = 4.0 * s["parameters"]
    peak = s["peak_rss_bytes"] / per  # the sim: one process, its peers' average
    if kind == "train":
        train_peak[(b, model)] = s["peak_rss_bytes"]
    over = (peak - train_peak[(b, model)]) / copy if kind != "train" else 0.0
    print("%-6s %-4s %-16s %-9s %9.1f %9.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %10.1f" %
          (kind, "new" if b == "0" else "base", model, codec, peak / 1e6, s["rss_bytes"] / per / 1e6,
           *[s["memory_%s_bytes" % p] / per / 1e6 for p in parts], over))
print("(MB; sim rows per peer; launch rows: its largest peer; copies+: (peak - train's peak) / model size)")
print("bins: new = %s%s" % (bins[0], "; base = %s" % bins[1] if len(bins) > 1 else ""))
PY
