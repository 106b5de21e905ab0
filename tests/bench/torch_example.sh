#!/usr/bin/env bash
# A PyTorch model and training loop over sgp gossip (peer/python/examples/mnist_torch.py):
# the same program alone (the reference, measured in this run) against 4
# processes on loopback, uncompressed and with a codec. Prints a table
# (accuracy, bytes sent per peer, ratio to uncompressed, wall time).
#   bash tests/bench/torch_example.sh            (after `make`; needs Debian's python3-torch)
# Knobs: EPOCHS (10), PEERS (4), CODEC (stc:0.04), BUILD (build)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
EPOCHS=${EPOCHS:-10}
PEERS=${PEERS:-4}
CODEC=${CODEC:-stc:0.04}
PY=/usr/bin/python3
EX=$root/peer/python/examples/mnist_torch.py
export OMP_WAIT_POLICY=PASSIVE SGP_LIB=$BUILD/libsgp.so
if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
    echo "torch_example.sh: $PY cannot import torch and numpy (apt-get install python3-torch)" >&2
    exit 1
fi
[ -f "$SGP_LIB" ] || { echo "torch_example.sh: $SGP_LIB not built (run make)" >&2; exit 1; }
work=$(mktemp -d /tmp/sgp-torch-bench-XXXXXX)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$work"' EXIT
cd "$root" || exit 1

acc() { sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -n 1; }
field() { sed -n 's/^summary //p' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin).get('$2', 0))"; }

# run NAME CODEC: PEERS processes of the example on a fresh cluster; prints its table row
run() {
    local name=$1 codec=$2 dir=$work/$1
    "$BUILD/sgp" launch --peers "$PEERS" --prepare --run-dir "$dir" >/dev/null || exit 1
    local t0 pids=() i
    t0=$(date +%s.%N)
    for ((i = 0; i < PEERS; i++)); do
        "$PY" "$EX" --cluster "$dir/cluster.conf" --id "$i" --codec "$codec" --epochs "$EPOCHS" >"$dir/peer$i.out" 2>&1 &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || { echo "torch_example.sh: a peer failed (logs in $dir)" >&2; trap - EXIT; exit 1; }; done
    local wall lo=101 hi=0 bytes=0 a b
    wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {print a - b}')
    for ((i = 0; i < PEERS; i++)); do
        a=$(acc "$dir/peer$i.out")
        b=$(field "$dir/peer$i.out" bytes_sent)
        lo=$(awk -v a="$a" -v b="$lo" 'BEGIN {print (a < b ? a : b)}')
        hi=$(awk -v a="$a" -v b="$hi" 'BEGIN {print (a > b ? a : b)}')
        bytes=$((bytes + b))
    done
    echo "$name $codec $lo $hi $((bytes / PEERS)) $wall"
}

echo "PyTorch MLP 784-256-256-10 on the embedded MNIST (8,000 train / 2,000 test), $EPOCHS epochs, total batch 64,"
echo "SGD lr 0.05 momentum 0.9; $PEERS processes on loopback over sgp (exponential graph), one thread each."
t0=$(date +%s.%N)
"$PY" "$EX" --epochs "$EPOCHS" >"$work/alone.out" 2>&1 || { cat "$work/alone.out"; exit 1; }
alone_wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {print a - b}')
alone=$(acc "$work/alone.out")
none=$(run uncompressed none)
coded=$(run compressed "$CODEC")
none_bytes=$(echo "$none" | cut -d' ' -f5)
printf "\n%-28s %-10s %-16s %18s %10s %8s\n" run codec "test accuracy" "bytes sent/peer" "vs none" "wall s"
printf "%-28s %-10s %-16s %18s %10s %8.1f\n" "alone (reference)" - "$alone%" - - "$alone_wall"
for row in "$none" "$coded"; do
    read -r name codec lo hi bytes wall <<<"$row"
    printf "%-28s %-10s %-16s %18s %9.1fx %8.1f\n" "$PEERS peers, $name" "$codec" "$lo-$hi%" "$bytes" \
        "$(awk -v a="$none_bytes" -v b="$bytes" 'BEGIN {print a / b}')" "$wall"
done
