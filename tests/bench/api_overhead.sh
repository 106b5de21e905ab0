#!/usr/bin/env bash
# The cost of the library path: 4 peers training mlp:256 on the embedded
# MNIST, once as `sgp peer` processes and once as a program of its own that
# takes the same local steps (nn/) and gossips through peer/lib/sgp.h
# (tests/bench/api_peer.c). Runs interleaved, REPEAT times each; prints the
# median rounds per second of each and their ratio (the reference is sgp
# peer, measured in this run).
#   make build/sgp build/bench/api_peer && bash tests/bench/api_overhead.sh     Knobs: EPOCHS (3), REPEAT (3), CODEC (stc:0.04), BUILD
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
EPOCHS=${EPOCHS:-3}
REPEAT=${REPEAT:-3}
CODEC=${CODEC:-stc:0.04}
PEERS=4
for f in "$BUILD/sgp" "$BUILD/bench/api_peer"; do
    [ -x "$f" ] || { echo "api_overhead.sh: $f not built (make bench builds it)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/sgp-api-bench-XXXXXX)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$work"' EXIT
"$BUILD/sgp" launch --peers $PEERS --prepare --run-dir "$work/run" >/dev/null || exit 1
rounds=$((EPOCHS * 125)) # 8,000 examples / total batch 64
# sgp peer with the local step api_peer takes: plain momentum SGD, constant lr, no weight decay
peer_opts="--model mlp:256 --epochs $EPOCHS --batch 64 --lr 0.1 --momentum 0.9 --no-nesterov --weight-decay 0
           --warmup 0 --lr-decay constant --codec $CODEC"

# one KIND: start the 4 peers, wait for all; prints the wall seconds
one() {
    local kind=$1 i pids=() t0
    t0=$(date +%s.%N)
    for ((i = 0; i < PEERS; i++)); do
        if [ "$kind" = peer ]; then
            # shellcheck disable=SC2086
            "$BUILD/sgp" peer --cluster "$work/run/cluster.conf" --id $i $peer_opts >"$work/$kind$i.out" 2>&1 &
        else
            "$BUILD/bench/api_peer" "$work/run/cluster.conf" $i "$EPOCHS" "$CODEC" >"$work/$kind$i.out" 2>&1 &
        fi
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || { echo "api_overhead.sh: a $kind process failed:" >&2; cat "$work/$kind"*.out >&2; exit 1; }
    done
    awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {print a - b}'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

peer_t=() api_t=()
for ((r = 0; r < REPEAT; r++)); do
    peer_t+=("$(one peer)") || exit 1
    api_t+=("$(one api)") || exit 1
done
pm=$(printf '%s\n' "${peer_t[@]}" | median)
am=$(printf '%s\n' "${api_t[@]}" | median)
acc_peer=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$work/peer0.out" | tail -n 1)
acc_api=$(sed -n 's/.*accuracy \([0-9.]*\)$/\1/p' "$work/api0.out" | tail -n 1)
echo "4 peers on loopback, mlp:256, $EPOCHS epochs ($rounds rounds), codec $CODEC, $REPEAT runs each, interleaved"
echo "(wall time of the whole run per process set, start-up and data loading included)"
printf "%-34s %12s %14s %16s %12s\n" driver "median wall" "rounds/s" "peer 0 accuracy" "runs (s)"
printf "%-34s %11.2fs %14.1f %15s%% %12s\n" "sgp peer (reference)" "$pm" "$(awk -v r=$rounds -v t="$pm" 'BEGIN {print r / t}')" \
    "$acc_peer" "$(echo "${peer_t[*]}" | awk '{for (i = 1; i <= NF; i++) printf "%.1f ", $i}')"
printf "%-34s %11.2fs %14.1f %15s%% %12s\n" "own loop on peer/lib/sgp.h" "$am" "$(awk -v r=$rounds -v t="$am" 'BEGIN {print r / t}')" \
    "$acc_api" "$(echo "${api_t[*]}" | awk '{for (i = 1; i <= NF; i++) printf "%.1f ", $i}')"
echo "library rounds/s relative to sgp peer: $(awk -v a="$am" -v p="$pm" 'BEGIN {printf "%.3f", p / a}')"
