#!/usr/bin/env bash
# The same fault scenario in `sgp sim` and with real processes (`sgp launch`):
# both run the one round driver and pacing policy, so their accuracies and
# fault counters should agree. Eight peers, mlp:256, 10 epochs, the same seed
# and codec; scenarios:
#   kill   peers 3 and 5 die for good at rounds 200 and 250 (dead timeout 1 s;
#          SVR_KILL changes the rounds, e.g. "3@20 5@25" with 10 local steps)
#   slow   peer 3 computes at 1/4 of its speed
#   none   no fault (the reference)
# The real peers share this machine's cores, so a round costs them far more
# than one step alone: the simulator's step time is set to the real run's
# seconds per round without faults (links infinitely fast), so that its
# virtual clock keeps the real run's proportions (a straggler's step, the
# dead timeout in rounds). A benchmark: it prints a table and asserts nothing.
#   bash tests/bench/sim_vs_real.sh
# Knobs (environment): SVR_EPOCHS (10), SVR_MODEL (mlp:256), SVR_CODEC (none),
#   SVR_SEED (1), SVR_SCENARIOS ("none kill slow"), SVR_KILL ("3@200 5@250"),
#   SVR_EXTRA (more options for both drivers, e.g. "--local-steps 10 --step
#   0.35 --outer nesterov:0.5:0.5"), SGP (default $BUILD/sgp).
# The table goes to stdout and $BUILD/bench/sim_vs_real.txt; runs stay in
# $BUILD/bench/sim_vs_real/.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP=${SGP:-$BUILD/sgp}
EPOCHS=${SVR_EPOCHS:-10}
MODEL=${SVR_MODEL:-mlp:256}
CODEC=${SVR_CODEC:-none}
SEED=${SVR_SEED:-1}
SCENARIOS=${SVR_SCENARIOS:-none kill slow}
KILL=${SVR_KILL:-3@200 5@250}
EXTRA=${SVR_EXTRA:-}
RUNS=$BUILD/bench/sim_vs_real
OUT=$BUILD/bench/sim_vs_real.txt

if [ ! -x "$SGP" ]; then
    echo "sim_vs_real.sh: $SGP not built (run 'make')" >&2
    exit 1
fi
rm -rf "$RUNS"
mkdir -p "$RUNS"
# shellcheck disable=SC2206 # SVR_EXTRA is words
common=(--model "$MODEL" --epochs "$EPOCHS" --codec "$CODEC" --seed "$SEED" --dead-timeout 1 --no-progress $EXTRA)

faults() { # scenario, "sim" or "launch": that driver's fault options
    case "$1/$2" in
    kill/sim) for k in $KILL; do printf -- "--crash %s " "$k"; done ;;
    kill/launch) for k in $KILL; do printf -- "--kill %s " "$k"; done ;;
    slow/*) echo "--slow 3:4" ;;
    *) echo "" ;;
    esac
}

# The numbers of one run: accuracy of the average model, worst live peer,
# local steps, late marks, catch-ups, neighbours lost (summed over the live peers).
sim_row() {
    python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("%.2f %.2f %d %d %d %d" % (100 * d["test_accuracy"], 100 * d["test_accuracy_min"], d["local_steps"],
      d["late_marks"], d["catch_ups"], d["neighbours_lost"]))
EOF
}
launch_row() {
    python3 - "$1" "$2" <<'EOF'
import glob, json, os, sys
d = json.load(open(sys.argv[1]))
peers = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[2], "peer*.json")))]
s = lambda k: sum(p.get(k, 0) for p in peers)
print("%.2f %.2f %d %d %d %d" % (100 * d["test_accuracy"], 100 * min(p["test_accuracy"] for p in peers),
      s("local_steps"), s("late_marks"), s("catch_ups"), s("neighbours_lost")))
EOF
}

real() { # scenario: run it with sgp launch
    # shellcheck disable=SC2046 # the fault options are words
    "$SGP" launch --peers 8 "${common[@]}" $(faults "$1" launch) --run-dir "$RUNS/$1-real" \
        --summary "$RUNS/$1-real.json" > "$RUNS/$1-real.out" 2>&1
}

FMT="%-6s %-6s %8s %8s %8s %6s %9s %6s\n"
real none || { echo "sim_vs_real.sh: the run without faults failed (see $RUNS/none-real.out)" >&2; exit 1; }
step=$(python3 - "$RUNS/none-real" <<'EOF'
import glob, json, os, sys
d = json.load(open(sys.argv[1] + ".json"))
peers = [json.load(open(f)) for f in glob.glob(os.path.join(sys.argv[1], "peer*.json"))]
print(d["wall_seconds"] * len(peers) / sum(p["local_steps"] for p in peers))
EOF
)
{
    echo "simulated step: $step s (the real run's seconds per local step without faults)"
    [ -z "$EXTRA" ] || echo "options: --codec $CODEC $EXTRA"
    printf "$FMT" scenario driver "acc %" "worst %" steps late catch-ups lost
    for sc in $SCENARIOS; do
        # shellcheck disable=SC2046 # the fault options are words
        "$SGP" sim --peers 8 "${common[@]}" --compute-time "$step" --bandwidth 0 $(faults "$sc" sim) \
            --summary "$RUNS/$sc-sim.json" > "$RUNS/$sc-sim.out" 2>&1 &&
            printf "$FMT" "$sc" sim $(sim_row "$RUNS/$sc-sim.json") || echo "$sc sim: failed (see $RUNS/$sc-sim.out)"
        [ "$sc" = none ] || real "$sc" || echo "$sc real: failed (see $RUNS/$sc-real.out)"
        [ -f "$RUNS/$sc-real.json" ] && printf "$FMT" "$sc" real $(launch_row "$RUNS/$sc-real.json" "$RUNS/$sc-real")
    done
} | tee "$OUT"
