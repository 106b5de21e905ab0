#!/usr/bin/env bash
# What gossip costs next to training, measured side by side in one run:
#   train   one process, `sgp train --model mlp:256 --epochs E` (batch 64)
#   launch  4 real peers on this machine, `sgp launch --peers 4 --epochs E`
#           (make demo's run: mlp:256, 16 samples a peer and round, stc:0.04),
#           with each peer's time breakdown (local step, gossip CPU, framing
#           and crypto, waiting, idle; means over peers)
#   sim     `sgp sim --peers 8 --epochs 2 --codec stc:0.04`: wall time per
#           round and the CPU parts per peer-round
#   launch with --local-steps H (COST_LOCAL_STEPS, 4; empty: not run): the
#           same launch with H local steps between exchanges, so a round's
#           gossip is paid once per H steps
#   yardstick build/bench/memory_pass: one pass over the model at memory
#           speed (absorb's x += m * r), and the simulator's peer-round in
#           such passes
#   big     COST_BIG_MODEL (mlp:2048,2048: 5.8M parameters; empty: not run):
#           `sgp sim --peers 8 --epochs 1 --codec stc:0.04` on that model,
#           with one step a round, and 4 epochs (52 rounds) with --local-steps
#           10 --outer nesterov:0.7:0.9 --lr 0.01 (the 1000x setting's shape;
#           the default lr diverges there), each once, with the yardstick at
#           that size: gossip per peer-round in passes, and gossip over step
# Each program runs COST_REPEAT times, interleaved, and the medians are shown.
# COST_BASE=/path/to/other/sgp adds the same rows for that binary (a build of
# an older commit, say), interleaved with this one, for before/after figures.
#
#   bash tests/bench/gossip_cost.sh                 # about a minute
#   COST_REPEAT=5 COST_BASE=/tmp/old/sgp bash tests/bench/gossip_cost.sh
#
# Knobs: COST_REPEAT (3), COST_EPOCHS (10), COST_BASE (none), COST_LOCAL_STEPS (4),
# COST_BIG_MODEL (mlp:2048,2048), SGP_BIN (build/sgp).
# The table also goes to build/bench/gossip_cost.txt. See tests/bench/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SGP=${SGP_BIN:-$root/build/sgp}
REPEAT=${COST_REPEAT:-3}
EPOCHS=${COST_EPOCHS:-10}
BASE=${COST_BASE:-}
LOCAL=${COST_LOCAL_STEPS-4}
BIG=${COST_BIG_MODEL-mlp:2048,2048}
OUT=$root/build/bench/gossip_cost.txt
[ -x "$SGP" ] || { echo "gossip_cost.sh: $SGP not built (run make)" >&2; exit 1; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "gossip_cost.sh: COST_BASE=$BASE is not an executable" >&2; exit 1; }
command -v python3 >/dev/null || { echo "gossip_cost.sh: needs python3 to read the JSON summaries" >&2; exit 1; }
mkdir -p "$root/build/bench"
PASS_BIN=$root/build/bench/memory_pass
[ -x "$PASS_BIN" ] || make --no-print-directory -C "$root" build/bench/memory_pass >&2 ||
    echo "gossip_cost.sh: build/bench/memory_pass did not build: no yardstick line" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bins=("$SGP")
[ -n "$BASE" ] && bins+=("$BASE")

run_all() { # $1 = index of the binary, $2 = repeat
    local b=${bins[$1]} tag="$1.$2"
    echo "  run $(($2 + 1))/$REPEAT: $b" >&2
    "$b" train --model mlp:256 --epochs "$EPOCHS" --summary "$work/train.$tag.json" >/dev/null
    "$b" launch --peers 4 --model mlp:256 --epochs "$EPOCHS" --run-dir "$work/run.$tag" \
        --summary "$work/launch.$tag.json" >/dev/null
    "$b" sim --peers 8 --epochs 2 --codec stc:0.04 --summary "$work/sim.$tag.json" >/dev/null
    if [ -n "$LOCAL" ]; then
        "$b" launch --peers 4 --model mlp:256 --epochs "$EPOCHS" --local-steps "$LOCAL" --run-dir "$work/runh.$tag" \
            --summary "$work/launchh.$tag.json" >/dev/null
    fi
    rm -rf "$work/run.$tag" "$work/runh.$tag"
    if [ "$1" = 0 ] && [ -x "$PASS_BIN" ]; then
        "$PASS_BIN" >"$work/pass.$2.txt"
    fi
}

echo "gossip_cost.sh: $REPEAT runs of each program, $EPOCHS epochs" >&2
for ((r = 0; r < REPEAT; r++)); do
    for i in "${!bins[@]}"; do run_all "$i" "$r"; done
done
if [ -n "$BIG" ]; then
    for i in "${!bins[@]}"; do
        echo "  big model $BIG: ${bins[$i]}" >&2
        "${bins[$i]}" sim --peers 8 --epochs 1 --codec stc:0.04 --model "$BIG" --summary "$work/big.$i.json" >/dev/null
        "${bins[$i]}" sim --peers 8 --epochs 4 --lr 0.01 --codec stc:0.04 --model "$BIG" --local-steps 10 \
            --outer nesterov:0.7:0.9 --summary "$work/bigh.$i.json" >/dev/null
    done
    dim=$(python3 -c "import json; print(json.load(open('$work/big.0.json'))['parameters'])")
    [ -x "$PASS_BIN" ] && "$PASS_BIN" --dim "$dim" >"$work/bigpass.txt"
fi

python3 - "$work" "$REPEAT" "$LOCAL" "${bins[@]}" <<'EOF' | tee "$OUT"
import json, os, statistics, sys
work, repeat, local, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def med(kind, i, key):
    return statistics.median(json.load(open(f"{work}/{kind}.{i}.{r}.json"))[key] for r in range(repeat))
print(f"{'binary':<28} {'train':>7} {'launch':>7} {'ratio':>6} {'step':>6} {'gossip':>7} {'frame':>6} {'wait':>6} {'idle':>6} {'g/s':>5} {'acc':>7} | {'sim/rnd':>8} {'step':>6} {'gossip':>7} {'g/s':>5}")
print(f"{'':<28} {'wall s':>7} {'wall s':>7} {'':>6} {'s/peer':>6} {'s/peer':>7} {'s/peer':>6} {'s/peer':>6} {'s/peer':>6} {'':>5} {'':>7} | {'wall ms':>8} {'ms/pr':>6} {'ms/pr':>7} {'':>5}")
for i, b in enumerate(bins):
    name = b if len(b) <= 28 else "..." + b[-25:]
    tw = med("train", i, "wall_seconds")
    rounds = med("sim", i, "rounds")
    sr = med("sim", i, "wall_seconds_per_round") * 1e3
    ss = med("sim", i, "cpu_step_seconds") / (8 * rounds) * 1e3
    sg = med("sim", i, "cpu_gossip_seconds") / (8 * rounds) * 1e3
    for kind, label in (("launch", name), ("launchh", f"  same, --local-steps {local}")):
        if kind == "launchh" and not local:
            continue
        lw, st, go = (med(kind, i, k) for k in ("wall_seconds", "step_seconds", "gossip_seconds"))
        fr, wa, idl = (med(kind, i, k) for k in ("frame_seconds", "wait_seconds", "idle_seconds"))
        acc = med(kind, i, "test_accuracy")
        sim = f"{sr:8.2f} {ss:6.3f} {sg:7.3f} {sg / ss:5.1f}" if kind == "launch" else f"{'':>8} {'':>6} {'':>7} {'':>5}"
        print(f"{label:<28} {tw:7.2f} {lw:7.2f} {lw / tw:5.1f}x {st:6.2f} {go:7.2f} {fr:6.2f} {wa:6.2f} {idl:6.2f} {go / st:5.1f} {acc * 100:6.2f}% | {sim}")
passes = sorted(f"{work}/pass.{r}.txt" for r in range(repeat))
if all(os.path.exists(f) for f in passes):
    fields = [dict(kv.split("=") for kv in open(f).read().split()) for f in passes]
    mem = statistics.median(float(f["pass_ms_memory"]) for f in fields)
    cache = statistics.median(float(f["pass_ms_cache"]) for f in fields)
    rounds = med("sim", 0, "rounds")
    ss = med("sim", 0, "cpu_step_seconds") / (8 * rounds) * 1e3
    sg = med("sim", 0, "cpu_gossip_seconds") / (8 * rounds) * 1e3
    print(f"yardstick: one pass x += m * r over {fields[0]['dim']} floats takes {mem:.3f} ms from memory"
          f" ({float(fields[0]['gbps_memory']):.0f} GB/s), {cache:.3f} ms from cache;"
          f" a sim peer-round: local step {ss / mem:.1f} passes, gossip {sg / mem:.1f} passes")
if os.path.exists(f"{work}/big.0.json"):
    f = dict(kv.split("=") for kv in open(f"{work}/bigpass.txt").read().split()) if os.path.exists(f"{work}/bigpass.txt") else None
    for i, b in enumerate(bins):
        for kind, label in (("big", "1 step a round"), ("bigh", "--local-steps 10 --outer")):
            s = json.load(open(f"{work}/{kind}.{i}.json"))
            steps, rounds = s["local_steps"], s["rounds"]
            gr = s["cpu_gossip_seconds"] / (8 * rounds) * 1e3  # gossip ms per peer-round
            st = s["cpu_step_seconds"] / steps * 1e3          # ms per local step
            passes = f", {gr / float(f['pass_ms_memory']):.1f} passes" if f else ""
            share = s["cpu_gossip_seconds"] / s["cpu_step_seconds"]
            print(f"big {s['model']} ({s['parameters']} parameters), {label}, {'base' if i else 'this'}: gossip"
                  f" {gr:.1f} ms a peer-round{passes}; local step {st:.1f} ms; gossip {100 * share:.1f}% of the step CPU;"
                  f" {rounds} rounds, {100 * s['test_accuracy']:.2f}%")
    if f:
        print(f"  (yardstick at that size: one pass x += m * r over {f['dim']} floats {float(f['pass_ms_memory']):.2f} ms)")
print("(medians; launch parts are each peer's wall-clock time in that part, 4 peers sharing this machine's cores;"
      " g/s = gossip over local step; ms/pr = CPU ms per peer-round)")
EOF
