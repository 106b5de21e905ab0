#!/bin/bash
# A PyTorch GPT over sgp (peer/python/examples/gpt_torch.py): the same script
# alone, as 4 peers uncompressed (every step gossiped, float32), and as 4
# peers with the 1000x setting (local steps, outer Nesterov, stc), on the
# Brown corpus; `lm` (in GPT_RUNS): 4 peers with --recipe lm, the exact
# sparse all-gather, on the complete topology. Validation loss, its gap to
# the alone run, bytes sent by all peers, and time.
#
#   bash tests/bench/gpt_torch.sh          (after `make` and `make data`; needs Debian's python3-torch)
#
# Environment: GPT_MODEL (LAYERS:WIDTH:HEADS, 4:128:4), GPT_STEPS (2000),
# GPT_BYTES (1048576), GPT_BATCH (32, all peers together), GPT_LR (0.003),
# GPT_H (10), GPT_OUTER (nesterov:0.7:0.9), GPT_CODEC (stc:0.04),
# GPT_RUNS ("alone plain recipe"; also lm), GPT_DIR (a fresh temporary directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || { echo "gpt_torch.sh: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
[ -x build/sgp ] && [ -f build/libsgp.so ] || { echo "gpt_torch.sh: run make first" >&2; exit 1; }
[ -f build/data/brown/brown.txt ] || { echo "gpt_torch.sh: run make data first (the Brown corpus)" >&2; exit 1; }
export SGP_LIB=$root/build/libsgp.so OMP_WAIT_POLICY=PASSIVE
MODEL=${GPT_MODEL:-4:128:4} STEPS=${GPT_STEPS:-2000} BYTES=${GPT_BYTES:-1048576} BATCH=${GPT_BATCH:-32}
LR=${GPT_LR:-0.003} H=${GPT_H:-10} OUTER=${GPT_OUTER:-nesterov:0.7:0.9} CODEC=${GPT_CODEC:-stc:0.04}
RUNS=${GPT_RUNS:-alone plain recipe}
dir=${GPT_DIR:-$(mktemp -d /tmp/sgp-gpt-torch-XXXXXX)}
mkdir -p "$dir"
common=(--model "$MODEL" --steps "$STEPS" --bytes "$BYTES" --batch "$BATCH" --lr "$LR")
ex=peer/python/examples/gpt_torch.py

# The summary JSON's key of one output file.
field() { sed -n 's/^summary //p' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)[\"$2\"])"; }

# run NAME ARGS...: 4 peers of the script on a fresh cluster, ARGS added.
four() {
    local name=$1 topology=exponential; shift
    [ "$name" = lm ] && topology=complete # (the all-gather's)
    build/sgp launch --peers 4 --prepare --topology $topology --run-dir "$dir/$name" >/dev/null
    local pids=()
    for i in 0 1 2 3; do
        "$PY" $ex "${common[@]}" --cluster "$dir/$name/cluster.conf" --id $i "$@" >"$dir/$name/peer$i.out" 2>&1 &
        pids+=($!)
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || { echo "gpt_torch.sh: a peer of '$name' failed: see $dir/$name" >&2; exit 1; }
}

declare -A loss bytes secs
for run in $RUNS; do
    start=$(date +%s.%N)
    case $run in
    alone) mkdir -p "$dir/alone"; "$PY" $ex "${common[@]}" >"$dir/alone/peer0.out" 2>&1 ;;
    plain) four plain ;;
    recipe) four recipe --local-steps "$H" --outer "$OUTER" --codec "$CODEC" ;;
    lm) four lm --recipe lm ;;
    *) echo "gpt_torch.sh: unknown run '$run'" >&2; exit 1 ;;
    esac
    secs[$run]=$(echo "$(date +%s.%N) - $start" | bc)
    n=1; [ "$run" = alone ] || n=4
    l=0; b=0
    for ((i = 0; i < n; i++)); do
        l=$(echo "$l + $(field "$dir/$run/peer$i.out" validation_loss) / $n" | bc -l)
        [ "$run" = alone ] || b=$((b + $(field "$dir/$run/peer$i.out" bytes_sent)))
    done
    loss[$run]=$l; bytes[$run]=$b
done

echo "gpt_torch.sh: model $MODEL, $STEPS steps of $BATCH windows, first $BYTES bytes of Brown, lr $LR (outputs in $dir)"
echo
echo "| run | validation loss (mean of peers) | vs alone | bytes sent (all peers) | fewer bytes than plain | wall |"
echo "|---|---|---|---|---|---|"
for run in $RUNS; do
    vs=-; [ -n "${loss[alone]:-}" ] && [ "$run" != alone ] && vs=$(printf "%+.1f%%" "$(echo "100 * (${loss[$run]} / ${loss[alone]} - 1)" | bc -l)")
    ratio=-; [ -n "${bytes[plain]:-}" ] && [ "$run" != alone ] && [ "${bytes[$run]}" -gt 0 ] &&
        ratio=$(printf "%.0fx" "$(echo "${bytes[plain]} / ${bytes[$run]}" | bc -l)")
    label=$run
    case $run in
    plain) label="4 peers, every step, float32" ;;
    recipe) label="4 peers, H=$H, $OUTER, $CODEC" ;;
    lm) label="4 peers, --recipe lm (the all-gather)" ;;
    esac
    printf "| %s | %.4f | %s | %s | %s | %.0f s |\n" "$label" "${loss[$run]}" "$vs" "${bytes[$run]}" "$ratio" "${secs[$run]}"
done
