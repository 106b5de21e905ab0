#!/usr/bin/env bash
# shellcheck disable=SC2059 # printf "$FMT": one format for the header and the rows
# Stragglers and dead peers: what they cost the others. Eight real peers under
# `sgp launch` (8 peers, mlp:256, 4 epochs, the same seed), three configurations
# run interleaved a, b, c, a, b, c, ...:
#   a  no faults
#   b  --slow 3:4                            peer 3's local steps take 4x as long
#   c  --kill 3@200 --kill 5@250 --dead-timeout 1   2 of 8 killed for good
# A benchmark: it prints a table and asserts nothing. Run it as
#   bash tests/bench/faults.sh
# Knobs (environment): FAULTS_REPEAT  runs per configuration (default 3)
#                      FAULTS_EPOCHS  epochs per run (default 4)
#                      FAULTS_MODEL   model (default mlp:256)
#                      FAULTS_SEED    --seed of every run (default 1)
#                      FAULTS_CONFIGS which configurations, e.g. "a b" (default "a b c")
#                      SGP            the sgp binary (default $BUILD/sgp)
# The table goes to stdout and to $BUILD/bench/faults.txt; the runs stay in
# $BUILD/bench/faults/. See tests/bench/README.md.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP=${SGP:-$BUILD/sgp}
REPEAT=${FAULTS_REPEAT:-3}
EPOCHS=${FAULTS_EPOCHS:-4}
MODEL=${FAULTS_MODEL:-mlp:256}
SEED=${FAULTS_SEED:-1}
CONFIGS=${FAULTS_CONFIGS:-a b c}
PEERS=8
SLOW=3 # the straggler of b
KILLED="3 5"
OUT=$BUILD/bench/faults.txt
RUNS=$BUILD/bench/faults

if [ ! -x "$SGP" ]; then
    echo "faults.sh: $SGP not built (run 'make')" >&2
    exit 1
fi
rm -rf "$RUNS"
mkdir -p "$RUNS"
# A copy of the binary, so a rebuild during the benchmark cannot mix two versions.
cp -p "$SGP" "$RUNS/sgp" || exit 1
BIN=$RUNS/sgp

config_args() { # the launch options of configuration $1
    case $1 in
    a) ;;
    b) echo "--slow $SLOW:4" ;;
    c) echo "--kill 3@200 --kill 5@250 --dead-timeout 1" ;;
    esac
}
config_name() {
    case $1 in
    a) echo "a none" ;;
    b) echo "b slow $SLOW:4" ;;
    c) echo "c kill 3,5" ;;
    esac
}
fast_peers() { # the peers whose speed is measured: all but the straggler / the killed
    local i
    for ((i = 0; i < PEERS; i++)); do
        case $1 in
        a | b) [ "$i" = "$SLOW" ] && continue ;;
        c) case " $KILLED " in *" $i "*) continue ;; esac ;;
        esac
        echo "$i"
    done
}

# num KEY FILE: a number from sgp's pretty-printed JSON ("key": value a line).
num() { sed -n "s/^[[:space:]]*\"$1\": \\([-0-9.eE+]*\\),\\{0,1\\}[[:space:]]*\$/\\1/p" "$2" 2>/dev/null | head -1; }

# Other processes' CPU use while a run ran, in cores, as in run.sh: machine busy
# time minus what our children (launch and, through it, its peers) used.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
machine_busy() { awk -v hz="$HZ" '/^cpu / { printf "%.3f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat; }
TIMES_FILE=$(mktemp)
trap 'rm -f "$TIMES_FILE"' EXIT
children_cpu_to() {
    times >"$TIMES_FILE"
    printf -v "$1" '%s' "$(awk 'NR == 2 { t = 0; for (i = 1; i <= NF; i++) { f = $i; sub(/s$/, "", f); split(f, a, "m"); t += a[1] * 60 + a[2] } printf "%.3f\n", t }' "$TIMES_FILE")"
}
now() { date +%s.%N; }

# measure CONFIG RUN: one launch; prints "RPS STEPS STRAGGLER GAP ACC WALL OTHERS RC"
# ("-" for what it could not read).
measure() {
    local cfg=$1 run=$2 rd=$RUNS/$1$2 t0 b0 c0 c1 rc
    # shellcheck disable=SC2046 # the configuration's options are separate words
    set -- $(config_args "$cfg")
    t0=$(now) b0=$(machine_busy)
    children_cpu_to c0
    "$BIN" launch --peers "$PEERS" --model "$MODEL" --epochs "$EPOCHS" --seed "$SEED" \
        --run-dir "$rd" --summary "$rd/summary.json" "$@" >"$RUNS/$cfg$run.log" 2>&1
    rc=$?
    children_cpu_to c1
    local others
    others=$(awk -v t0="$t0" -v b0="$b0" -v c0="$c0" -v c1="$c1" -v t1="$(now)" -v b1="$(machine_busy)" \
        'BEGIN { w = t1 - t0; o = (b1 - b0) - (c1 - c0); if (o < 0) o = 0; printf "%.2f", (w > 0 ? o / w : 0) }')
    local i rps_list='' steps_list='' gap=0 g
    for i in $(fast_peers "$cfg"); do
        local j=$rd/peer$i.json
        [ -s "$j" ] || continue
        rps_list="$rps_list $(awk -v r="$(num rounds "$j")" -v w="$(num wall_seconds "$j")" 'BEGIN { if (w > 0) printf "%.3f", r / w }')"
        steps_list="$steps_list $(awk -v s="$(num local_steps "$j")" -v r="$(num rounds "$j")" -v s0="$(num start_round "$j")" 'BEGIN { if (r - s0 > 0) printf "%.4f", s / (r - s0) }')"
        # Longest time between two consecutive round lines (the jsonl "t" field).
        g=$(grep '"loss"' "$rd/peer$i.jsonl" 2>/dev/null | sed -n 's/.*"t": \([0-9.]*\).*/\1/p' |
            awk 'NR > 1 && $1 - t > g { g = $1 - t } { t = $1 } END { printf "%.3f", g + 0 }')
        gap=$(awk -v a="$gap" -v b="$g" 'BEGIN { print (b > a ? b : a) }')
    done
    mean() { tr ' ' '\n' | awk '$1 != "" { s += $1; n++ } END { if (n) printf "%.4f", s / n; else print "-" }'; }
    local straggler=-
    if [ "$cfg" != c ] && [ -s "$rd/peer$SLOW.json" ]; then
        straggler=$(awk -v s="$(num local_steps "$rd/peer$SLOW.json")" -v r="$(num rounds "$rd/peer$SLOW.json")" \
            -v s0="$(num start_round "$rd/peer$SLOW.json")" 'BEGIN { if (r - s0 > 0) printf "%.4f", s / (r - s0); else print "-" }')
    fi
    local acc wall
    acc=$(num test_accuracy "$rd/summary.json")
    wall=$(num wall_seconds "$rd/summary.json")
    echo "$(echo "$rps_list" | mean) $(echo "$steps_list" | mean) $straggler $gap ${acc:--} ${wall:--} $others $rc"
}

# ---- the runs, interleaved -------------------------------------------------------------
declare -A RES
for ((r = 1; r <= REPEAT; r++)); do
    for cfg in $CONFIGS; do
        echo "faults.sh: run $r/$REPEAT, $(config_name "$cfg")" >&2
        RES[$cfg$r]=$(measure "$cfg" "$r")
    done
done

# ---- the table ----------------------------------------------------------------------------
# Mean fast-peer rounds/s of configuration a: what the drops are measured against.
field() { echo "${RES[$1]}" | awk -v k="$2" '{ print $k }'; }
A_RPS=$(for ((r = 1; r <= REPEAT; r++)); do field "a$r" 1; done |
    awk '$1 != "-" && $1 != "" { s += $1; n++ } END { if (n) printf "%.4f", s / n; else print "-" }')
pc() { awk -v x="$1" 'BEGIN { if (x == "-" || x == "") print "-"; else printf "%.1f%%\n", 100 * x }'; }
drop() { awk -v x="$1" -v a="$A_RPS" 'BEGIN { if (x == "-" || a == "-" || a == 0) print "-"; else printf "%+.1f%%\n", 100 * (a - x) / a }'; }
f1() { awk -v x="$1" -v f="$2" 'BEGIN { if (x == "-" || x == "") print "-"; else printf f "\n", x }'; }
FMT='%-14s %4s %10s %9s %9s %10s %10s %8s %7s %6s  %s\n'
{
    echo "stragglers and dead peers: sgp launch --peers $PEERS --model $MODEL --epochs $EPOCHS --seed $SEED (codec: launch's default)"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -n); cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
    echo "binary: $SGP (sha256 $(sha256sum "$BIN" | cut -c1-12), built $(date -r "$BIN" '+%Y-%m-%d %H:%M:%S'))"
    echo "configs: a = no faults; b = --slow $SLOW:4; c = --kill 3@200 --kill 5@250 --dead-timeout 1; $REPEAT runs each, interleaved"
    echo
    printf "$FMT" config run "fast r/s" "drop vs a" accuracy "fast steps" "straggler" "gap s" "wall s" others note
    printf "$FMT" -------------- ---- ---------- --------- --------- ---------- ---------- -------- ------- ------ ----
    for cfg in $CONFIGS; do
        for ((r = 1; r <= REPEAT; r++)); do
            v=${RES[$cfg$r]}
            read -r rps steps strag gap acc wall others rc <<<"$v"
            note=
            [ "$rc" != 0 ] && note="launch exit $rc (see $RUNS/$cfg$r.log)"
            printf "$FMT" "$(config_name "$cfg")" "$r" "$(f1 "$rps" %.1f)" "$(drop "$rps")" "$(pc "$acc")" \
                "$(pc "$steps")" "$(pc "$strag")" "$(f1 "$gap" %.2f)" "$(f1 "$wall" %.1f)" "$others" "$note"
        done
        # The mean of the runs of this configuration.
        m=$(for ((r = 1; r <= REPEAT; r++)); do echo "${RES[$cfg$r]}"; done | awk '
            { for (k = 1; k <= 7; k++) if ($k != "-") { s[k] += $k; n[k]++ } }
            END { for (k = 1; k <= 7; k++) printf "%s ", (n[k] ? s[k] / n[k] : "-"); print "" }')
        read -r rps steps strag gap acc wall others <<<"$m"
        printf "$FMT" "$(config_name "$cfg")" mean "$(f1 "$rps" %.1f)" "$(drop "$rps")" "$(pc "$acc")" \
            "$(pc "$steps")" "$(pc "$strag")" "$(f1 "$gap" %.2f)" "$(f1 "$wall" %.1f)" "$(f1 "$others" %.2f)" ""
    done
    echo
    echo "fast r/s: rounds / wall_seconds of each peer (peerI.json), mean over the fast peers: all but peer $SLOW in a and b,"
    echo "  the 6 survivors in c. drop vs a: against the mean of the a runs; positive = slower."
    echo "accuracy: the average model of the peers that finished (launch's summary)."
    echo "fast steps: local_steps / rounds of the fast peers (below 100%: rounds skipped by catching up)."
    echo "straggler: peer $SLOW's local_steps / rounds (in b it is the slow one; in a the same peer for reference)."
    echo "gap s: the longest time between two consecutive round lines (jsonl \"t\") of any fast peer / survivor."
    echo "others: cores used by other processes during the run (of $(nproc)); above ~0.2 the row is suspect."
    echo "table written to $OUT; runs in $RUNS"
} | tee "$OUT"
