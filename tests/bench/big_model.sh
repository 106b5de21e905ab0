#!/usr/bin/env bash
# A model of 100M+ parameters on one machine: `sgp launch --peers 4` with
# stc:0.04 for BIG_ROUNDS rounds, then the same with one peer killed (-9)
# and started again: first without a checkpoint (it pulls the whole model, a
# MODEL frame of 4 x parameters bytes, from a neighbour and joins), then from
# its checkpoint (--resume). For each run: peak RSS per peer and its parts,
# and time per round by part (local step, gossip CPU, framing and crypto,
# waiting), means over the peers; beside them, the framing and crypto that
# the thread pool does for big frames (4 MiB or more: the whole models).
#
#   bash tests/bench/big_model.sh                     # mlp:9000,10400: 100.8M parameters
#   BIG_MODEL=mlp:4096,4096 bash tests/bench/big_model.sh
#
# Memory: each peer holds the model times (2 + its edges + a few) here
# (tests/bench/README.md, "Memory"); the default runs on the ring, the graph
# with the fewest edges (4 peers of 100M: about 3.1 GB each, more while a
# whole-model message is built or taken in). The script refuses to
# start when MemAvailable is below BIG_NEED_GB (20).
# Knobs: BIG_MODEL, BIG_ROUNDS (20), BIG_TOPOLOGY (ring), BIG_PEERS (4),
# BIG_CODEC (stc:0.04), BIG_RUNS ("plain join resume"), SGP_BIN (build/sgp),
# BIG_KEEP (1: keep the run directories, their path printed at the end: at
# 100M the checkpoints of a resume run alone are about 10 GB).
# The table also goes to build/bench/big_model.txt. Under each run: its
# joins and resumes, how many times a peer routed around a neighbour that
# was silent (not disconnected) for the dead timeout, and the longest
# gossip time of one round of any peer after round 2 (a loop blocked that
# long sends no heartbeat).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
MODEL=${BIG_MODEL:-mlp:9000,10400}
ROUNDS=${BIG_ROUNDS:-20}
TOPO=${BIG_TOPOLOGY:-ring}
PEERS=${BIG_PEERS:-4}
CODEC=${BIG_CODEC:-stc:0.04}
RUNS=${BIG_RUNS:-plain join resume}
NEED=${BIG_NEED_GB:-20}
OUT=$root/build/bench/big_model.txt
[ -x "$SGP" ] || { echo "big_model.sh: $SGP not built (run make)" >&2; exit 1; }
avail=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
[ "$avail" -ge "$NEED" ] || { echo "big_model.sh: ${avail} GB available, wants ${NEED} GB (BIG_NEED_GB)" >&2; exit 1; }
mkdir -p "$root/build/bench"
work=$(mktemp -d)
if [ "${BIG_KEEP:-0}" = 1 ]; then
    trap 'echo "big_model.sh: run directories kept in $work" >&2' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi

# An epoch is 8,000 samples of the embedded MNIST: a total batch of 8000 / ROUNDS
# makes it ROUNDS rounds.
batch=$((8000 / ROUNDS))
half=$((ROUNDS / 2))
: >"$work/rows"
for run in $RUNS; do
    case $run in
    plain) fault=() ;;
    join) fault=(--restart "1@$half:1" --checkpoint-every 1e9) ;; # no checkpoint yet: pulls the model
    resume) fault=(--restart "1@$half:1" --checkpoint-every 10) ;;
    *) echo "big_model.sh: unknown run '$run' (plain, join, resume)" >&2; exit 2 ;;
    esac
    echo "  $run: launch --peers $PEERS --topology $TOPO --model $MODEL --codec $CODEC, $ROUNDS rounds ${fault[*]}" >&2
    t0=$(date +%s.%N)
    "$SGP" launch --peers "$PEERS" --topology "$TOPO" --model "$MODEL" --codec "$CODEC" --epochs 1 --batch "$batch" \
        --run-dir "$work/$run" --summary "$work/$run.json" "${fault[@]}" >"$work/$run.out" 2>&1 ||
        { cat "$work/$run.out" >&2; echo "big_model.sh: the $run run failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    grep -h "joined with the model\|resumed from\|pull the model" "$work/$run"/peer*.out >"$work/$run.events" || true
    echo "$run $(echo "$t1 - $t0" | bc) $work/$run.json $work/$run" >>"$work/rows"
done

python3 - "$work/rows" "$PEERS" <<'PY' | tee "$OUT"
import json, sys, glob, os
rows = [l.split() for l in open(sys.argv[1])]
peers = int(sys.argv[2])
print("%-7s %9s %8s %7s | %-44s | %s" % ("run", "params", "rounds", "wall s", "per peer: peak RSS MB (model/gossip/codec/flight)",
                                         "per round ms: step, gossip, frame+crypto, wait (frame+crypto on the pool)"))
for run, wall, summary, d in rows:
    s = json.load(open(summary))
    rss, parts, t = [], [], [0.0, 0.0, 0.0, 0.0, 0.0]
    for i in range(peers):
        p = json.load(open(os.path.join(d, "peer%d.json" % i)))
        rss.append("%.0f" % (p["peak_rss_bytes"] / 1e6))
        parts.append("%.0f/%.0f/%.0f/%.0f" % tuple(p["memory_%s_bytes" % k] / 1e6 for k in ("model", "gossip", "codec", "in_flight")))
        r = max(p["rounds"] - p["start_round"], 1)
        for k, key in enumerate(("step_seconds", "gossip_seconds", "frame_seconds", "wait_seconds", "frame_pool_seconds")):
            t[k] += 1e3 * p[key] / r / peers
    print("%-7s %9d %8d %7.1f | %-44s | %.0f, %.0f, %.0f, %.0f (%.0f)" % (run, s["parameters"], s["rounds"], float(wall),
          " ".join(rss), t[0], t[1], t[2], t[3], t[4]))
    print("%-7s %9s %8s %7s |   parts: %s" % ("", "", "", "", "  ".join(parts)))
    ev = open(os.path.join(os.path.dirname(summary), run + ".events")).read().strip()
    if ev:
        print("%-7s   events: %s" % ("", ev.replace("\n", " | ")))
    silent, longest = 0, (0.0, -1, -1)
    for i in range(peers):
        silent += open(os.path.join(d, "peer%d.out" % i)).read().count("silent for the dead timeout")
        before = 0.0
        for line in open(os.path.join(d, "peer%d.jsonl" % i)):
            r = json.loads(line)
            if "gossip_s" not in r:
                continue
            g = r["gossip_s"] - before
            if g < 0:  # (a restarted peer's process counts from zero again)
                g = r["gossip_s"]
            if r["round"] > 2 and g > longest[0]:
                longest = (g, i, r["round"])
            before = r["gossip_s"]
    print("%-7s   routed around for silence: %d; longest gossip of a round after round 2: %.2f s (peer %d, round %d)"
          % ("", silent, longest[0], longest[1], longest[2]))
print("(model/gossip/codec/flight: MB when the peer's last round was done; peak RSS: the most the peer held)")
PY
