#!/usr/bin/env bash
# Models past the old 2^27 cap: libsgp peers with no trainer
# (tests/bench/vector_peer.c: an N-float vector and a synthetic step) on a
# ring of VEC_PEERS processes on this machine, three runs: plain; a join
# (the last peer starts once peer 0 has logged a round, without a
# checkpoint, and pulls the whole model: a MODEL of 4 N bytes, in pieces);
# a resume (the last peer checkpoints and leaves at round 2, then starts
# again with --resume). For each run: the ledger's mass check
# (tests/bench/ledger.c: held + in flight == peers + rescaled - adopted),
# each peer's rounds, start round, weight, bytes sent, peak RSS and its
# memory by part (the end of its log), and the wall time.
#
#   bash tests/bench/vector_scale.sh                    # 2 peers of 200M parameters
#   VEC_PARAMS=5e7 VEC_PEERS=4 bash tests/bench/vector_scale.sh
#   VEC_PARAMS=5e8 VEC_RUNS=join VEC_ROUNDS=30 bash tests/bench/vector_scale.sh
#
# (At 500M a joiner's own start, its vector drawn and its origin file
# written, takes about 30 s, in which a founder runs 10 or so rounds alone:
# fewer than 30 rounds and the run is over before the joiner is in.)
#
# Memory: a peer holds about 4.3 copies of the vector with stc (the
# caller's vector, x, one reference per edge: peer/README.md, "Memory"),
# more while a whole model is encoded or put together (a resumed one gives
# its checkpoint's pages back as it reads them); the script refuses
# to start when MemAvailable is below VEC_PEERS x 5.5 copies. Each step also sleeps
# VEC_STEP_MS (2000), a device's step time, which leaves a joiner the
# time to pull the model before a founder alone has run every round.
# Knobs: VEC_PARAMS (2e8), VEC_PEERS (2), VEC_ROUNDS (12), VEC_STEP_MS,
# VEC_CODEC (stc:0.04), VEC_RUNS ("plain join resume"), VEC_KEEP (1: keep
# the run directories).
# The table also goes to build/bench/vector_scale.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
VP=$root/build/bench/vector_peer
LEDGER=$root/build/bench/ledger
N=${VEC_PARAMS:-2e8}
P=${VEC_PEERS:-2}
R=${VEC_ROUNDS:-12}
STEP_MS=${VEC_STEP_MS:-2000}
CODEC=${VEC_CODEC:-stc:0.04}
RUNS=${VEC_RUNS:-plain join resume}
OUT=$root/build/bench/vector_scale.txt
for b in "$SGP" "$VP" "$LEDGER"; do
    [ -x "$b" ] || { echo "vector_scale.sh: $b not built (make build/sgp build/bench/vector_peer build/bench/ledger)" >&2; exit 1; }
done
need=$(python3 -c "print(int($N * 4 * 5.5 * $P / 2**30) + 1)")
avail=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
[ "$avail" -ge "$need" ] || { echo "vector_scale.sh: ${avail} GB available, $P peers of $N values want about $need GB" >&2; exit 1; }
mkdir -p "$root/build/bench"
work=$(mktemp -d)
if [ "${VEC_KEEP:-0}" = 1 ]; then
    trap 'echo "vector_scale.sh: run directories kept in $work" >&2' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
last=$((P - 1))

# start_peer DIR I [OPTIONS...]: one peer in the background, its pid in pids[I].
declare -a pids
start_peer() {
    local d=$1 i=$2
    shift 2
    "$VP" --cluster "$d/cluster.conf" --id "$i" --params "$N" --rounds "$R" --codec "$CODEC" \
        --log "$d/peer$i.jsonl" --checkpoint "$d/peer$i.ckpt" --dead-timeout 120 --step-ms "$STEP_MS" "$@" \
        >>"$d/peer$i.json" 2>>"$d/peer$i.err" &
    pids[$i]=$!
}
# await_round DIR I ROUND: until peer I's log has a round line at ROUND or later.
await_round() {
    while ! python3 - "$1/peer$2.jsonl" "$3" <<'PY'; do sleep 0.5; done
import json, sys
try:
    rounds = [json.loads(l).get("round", -1) for l in open(sys.argv[1]) if l.startswith('{"round"')]
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if rounds and max(rounds) >= int(sys.argv[2]) else 1)
PY
}
wait_all() {
    local rc=0
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    return $rc
}

: >"$work/rows"
for run in $RUNS; do
    d=$work/$run
    "$SGP" launch --prepare --peers "$P" --topology ring --run-dir "$d" >/dev/null
    echo "  $run: $P peers of $N values, $R rounds, $CODEC" >&2
    pids=()
    t0=$(date +%s.%N)
    case $run in
    plain)
        for i in $(seq 0 $last); do start_peer "$d" "$i"; done
        ;;
    join)
        for i in $(seq 0 $((last - 1))); do start_peer "$d" "$i" --round-timeout 5; done
        await_round "$d" 0 1
        start_peer "$d" "$last" --resume --round-timeout 120
        ;;
    resume)
        for i in $(seq 0 $((last - 1))); do start_peer "$d" "$i"; done
        start_peer "$d" "$last" --leave-at 2
        wait "${pids[$last]}" || { echo "vector_scale.sh: peer $last did not leave cleanly" >&2; exit 1; }
        start_peer "$d" "$last" --resume
        ;;
    *) echo "vector_scale.sh: unknown run '$run' (plain, join, resume)" >&2; exit 2 ;;
    esac
    wait_all || { tail -n 3 "$d"/peer*.err >&2; echo "vector_scale.sh: the $run run failed" >&2; exit 1; }
    t1=$(date +%s.%N)
    mass=$("$LEDGER" "$d" "$P" || true)
    echo "$run $(echo "$t1 - $t0" | bc) $d $mass" >>"$work/rows"
done

python3 - "$work/rows" "$P" "$N" <<'PY' | tee "$OUT"
import json, sys
peers, n = int(sys.argv[2]), float(sys.argv[3])
mb = 2**20
print("%d peers of %.0f values (%.0f MB a copy)" % (peers, n, 4 * n / mb))
print("%-7s %7s | %-74s | %s" % ("run", "wall s", "per peer: rounds start weight sent-MB peakRSS-MB (model gossip codec flight)", "mass"))
for line in open(sys.argv[1]):
    run, wall, d, mass = line.split(" ", 3)
    cells = []
    for i in range(peers):
        last = [json.loads(l) for l in open("%s/peer%d.json" % (d, i)) if l.strip()][-1]
        mem = [json.loads(l) for l in open("%s/peer%d.jsonl" % (d, i)) if l.startswith('{"memory"')][-1]
        cells.append("%d %d %.3f %.0f %.0f (%.0f %.0f %.0f %.0f)" % (
            last["rounds"], last["start_round"], last["weight"], last["bytes_sent"] / mb, mem["peak_rss"] / mb,
            mem["model"] / mb, mem["gossip"] / mb, mem["codec"] / mb, mem["in_flight"] / mb))
    print("%-7s %7.1f | %-74s | %s" % (run, float(wall), "; ".join(cells), mass.strip()))
PY
