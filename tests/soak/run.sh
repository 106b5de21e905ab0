#!/usr/bin/env bash
# shellcheck disable=SC2059 # printf "$FMT": one format for the header and the rows
# Soak test: 8 real `sgp peer` processes under `sgp launch` for about
# SOAK_SECONDS, with a random fault every few seconds (mostly kill -9 and
# restart with --resume, some SIGSTOP/SIGCONT, at most SOAK_KILLS peers killed
# for good). Not part of `make test`; run it by hand:
#   bash tests/soak/run.sh                      # 10 minutes
#   SOAK_SECONDS=120 bash tests/soak/run.sh     # a quick check
# Knobs (environment):
#   SOAK_SECONDS   planned length of the faulty run [600]
#   SOAK_SEED      seed of the fault schedule and of the peers' --seed [drawn from the clock; printed]
#   SOAK_RPS       rounds per second to plan with; skips the calibration run (with the
#                  same SOAK_SEED, SOAK_SECONDS and SOAK_RPS the same faults are drawn)
#   SOAK_PEERS [8]  SOAK_MODEL [mlp:256]  SOAK_TOPOLOGY [exponential]
#   SOAK_GAP_MIN, SOAK_GAP_MAX  seconds between two faults, drawn uniformly [2, 6]
#   SOAK_KILLS     peers killed for good (--kill) over the whole run [2]
#   SOAK_STALL     seconds without a new round line from any peer that count as a hang [120]
#   SOAK_LIMIT     seconds after which the faulty run counts as a hang [2 x planned + 120]
#   SOAK_BASELINE=1  also run the same training without faults and report it next to the soak
#   SOAK_MIN_ACCURACY  fail when the faults run's average-model accuracy (in %) is below this [no check]
#   SOAK_DIR       where the runs go [$BUILD/soak]; its calib/, faults/, baseline/ are replaced
#   SGP            the sgp binary [$BUILD/sgp] (e.g. build/address/sgp after make SANITIZER=address)
# The report goes to stdout and to $SOAK_DIR/report.txt. Exit status: 0 when no
# crash, no hang, launch exited 0, every peer not killed for good finished (and,
# with SOAK_MIN_ACCURACY, the accuracy is high enough).
# See tests/soak/README.md.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP=${SGP:-$BUILD/sgp}
SECS=${SOAK_SECONDS:-600}
SEED=${SOAK_SEED:-$(($(date +%s) % 1000000))}
RPS=${SOAK_RPS:-}
PEERS=${SOAK_PEERS:-8}
MODEL=${SOAK_MODEL:-mlp:256}
TOPO=${SOAK_TOPOLOGY:-exponential}
GAP_MIN=${SOAK_GAP_MIN:-2}
GAP_MAX=${SOAK_GAP_MAX:-6}
KILLS=${SOAK_KILLS:-2}
STALL=${SOAK_STALL:-120}
BASELINE=${SOAK_BASELINE:-0}
MIN_ACC=${SOAK_MIN_ACCURACY:-}
DIR=${SOAK_DIR:-$BUILD/soak}
CALIB_EPOCHS=2
# Keep at least two peers that are never killed for good (the schedule draws
# the killed peers among those still alive).
[ "$KILLS" -gt $((PEERS - 2)) ] && KILLS=$((PEERS - 2))
# What every run of the soak gives each peer (launch forwards these to `sgp peer`).
PEER_OPTS=(--checkpoint-every 1 --dead-timeout 2 --seed "$SEED")
# Leak reports of a sanitizer build: the same suppressions as `make test`.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp}

if [ ! -x "$SGP" ]; then
    echo "soak: $SGP not built (run 'make')" >&2
    exit 1
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# A copy of the binary: a rebuild while the soak runs must not change the
# peers that are restarted later (launch restarts them with its own path).
cp -p "$SGP" "$DIR/sgp" || exit 1
BIN=$DIR/sgp

log() { echo "soak: $*" >&2; }
now() { date +%s.%N; }
# num KEY FILE: a number from sgp's pretty-printed JSON ("key": value a line); empty if absent.
num() { sed -n "s/^[[:space:]]*\"$1\": \\([-0-9.eE+]*\\),\\{0,1\\}[[:space:]]*\$/\\1/p" "$2" 2>/dev/null | head -1; }
fmt() { awk -v x="$1" -v f="$2" 'BEGIN { if (x == "") print "-"; else printf f "\n", x }'; }
pct() { awk -v x="$1" 'BEGIN { if (x == "") print "-"; else printf "%.2f%%\n", 100 * x }'; }

# The processes of one run: launch (our child) and its peers (found by their
# cluster file, so nothing but this run's peers is touched).
LAUNCH_PID=
run_peers() { # run_peers RUNDIR: pids of sgp peers of that run
    local p
    for p in /proc/[0-9]*; do
        tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "--cluster $1/cluster.conf " && echo "${p#/proc/}"
    done
}
stop_run() { # stop_run RUNDIR: SIGTERM launch (it stops its peers), then SIGKILL what is left
    local rd=$1 i
    [ -n "$LAUNCH_PID" ] && kill -TERM "$LAUNCH_PID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        if [ -z "$LAUNCH_PID" ] || ! kill -0 "$LAUNCH_PID" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    [ -n "$LAUNCH_PID" ] && kill -KILL "$LAUNCH_PID" 2>/dev/null
    for i in $(run_peers "$rd"); do
        kill -CONT "$i" 2>/dev/null
        kill -KILL "$i" 2>/dev/null
    done
}
CURRENT_RUN=
on_signal() {
    log "interrupted; stopping the run in $CURRENT_RUN"
    [ -n "$CURRENT_RUN" ] && stop_run "$CURRENT_RUN"
    exit 130
}
trap on_signal INT TERM

# launch_run NAME LIMIT EPOCHS [fault options...]: one `sgp launch` into $DIR/NAME,
# watched: killed when it runs longer than LIMIT seconds or no peer logs a round
# for $STALL seconds. Sets RUN_RC (launch's exit status), RUN_HANG (0 or 1),
# RUN_HANG_WHY, RUN_WALL.
launch_run() {
    local name=$1 limit=$2 epochs=$3
    shift 3
    local rd=$DIR/$name
    rm -rf "$rd"
    mkdir -p "$rd"
    CURRENT_RUN=$rd
    RUN_HANG=0 RUN_HANG_WHY=
    printf '%q ' "$BIN" launch --peers "$PEERS" --topology "$TOPO" --model "$MODEL" --epochs "$epochs" \
        --run-dir "$rd" --summary "$rd/summary.json" "${PEER_OPTS[@]}" "$@" >"$rd/command.txt"
    echo >>"$rd/command.txt"
    local t0 t last_round=0 last_size=-1 size shown=0
    t0=$(now)
    "$BIN" launch --peers "$PEERS" --topology "$TOPO" --model "$MODEL" --epochs "$epochs" \
        --run-dir "$rd" --summary "$rd/summary.json" "${PEER_OPTS[@]}" "$@" >"$rd/launch.log" 2>&1 &
    LAUNCH_PID=$!
    last_round=$(now)
    while kill -0 "$LAUNCH_PID" 2>/dev/null; do
        sleep 1
        t=$(now)
        # Progress: the summed size of the round logs grows with every round any peer logs.
        size=$(stat -c %s "$rd"/peer*.jsonl 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
        if [ "$size" != "$last_size" ]; then
            last_size=$size last_round=$t
        fi
        local el
        el=$(awk -v a="$t0" -v b="$t" 'BEGIN { printf "%d", b - a }')
        if [ "$el" -ge $((shown + 30)) ]; then
            shown=$el
            log "$name: ${el}s of ~$(fmt "$PLANNED" %.0f)s planned: $(grep '^round ' "$rd/launch.log" | tail -1)"
        fi
        if [ "$el" -gt "$limit" ]; then
            RUN_HANG=1 RUN_HANG_WHY="still running after ${el}s (limit ${limit}s)"
        elif awk -v a="$last_round" -v b="$t" -v s="$STALL" 'BEGIN { exit !(b - a > s) }'; then
            RUN_HANG=1 RUN_HANG_WHY="no peer logged anything for ${STALL}s (at ${el}s)"
        fi
        if [ "$RUN_HANG" = 1 ]; then
            log "$name: HANG: $RUN_HANG_WHY; stopping it"
            # What each peer was doing, for the report: its last log line and its process state.
            for f in "$rd"/peer*.jsonl; do
                echo "$(basename "$f"): $(tail -1 "$f")"
            done >"$rd/hang.txt"
            for p in $(run_peers "$rd"); do
                echo "pid $p: state $(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -o -- '--id [0-9]*')"
            done >>"$rd/hang.txt"
            stop_run "$rd"
            break
        fi
    done
    wait "$LAUNCH_PID"
    RUN_RC=$?
    LAUNCH_PID=
    CURRENT_RUN=
    RUN_WALL=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
}

echo "soak: seed $SEED (SOAK_SEED=$SEED reproduces the schedule for the same rounds per second)"
echo "soak: $PEERS peers, $MODEL, topology $TOPO, ${SECS}s planned; peer options: ${PEER_OPTS[*]}"
echo "soak: runs in $DIR (binary copied from $SGP)"

# ---- calibration: rounds per second without faults --------------------------------
PLANNED=
if [ -z "$RPS" ]; then
    log "calibrating: a fault-free run of $CALIB_EPOCHS epochs"
    PLANNED=60
    launch_run calib 300 "$CALIB_EPOCHS"
    if [ "$RUN_RC" != 0 ] || [ ! -s "$DIR/calib/summary.json" ]; then
        echo "soak: the calibration run failed (exit $RUN_RC); see $DIR/calib/launch.log" >&2
        exit 1
    fi
    # Each peer's rounds over its own clock (the last round line's "t"); the mean over peers.
    RPS=$(for f in "$DIR"/calib/peer*.jsonl; do
        grep '"loss"' "$f" | tail -1
    done | sed -n 's/.*"round": \([0-9]*\),.*"t": \([0-9.]*\).*/\1 \2/p' |
        awk '$2 > 0 { s += $1 / $2; n++ } END { if (n) printf "%.2f\n", s / n }')
    CAL_ROUNDS=$(num rounds "$DIR/calib/summary.json")
    RPE=$(awk -v r="$CAL_ROUNDS" -v e="$CALIB_EPOCHS" 'BEGIN { printf "%d", r / e }')
    if [ -z "$RPS" ] || [ "${RPE:-0}" -le 0 ]; then
        echo "soak: could not read rounds per second from $DIR/calib" >&2
        exit 1
    fi
    echo "soak: calibration: $RPS rounds/s, $RPE rounds an epoch ($CAL_ROUNDS rounds in ${RUN_WALL}s wall)"
else
    # Rounds an epoch without a calibration run: the embedded set has 8,000 training digits, batch 64.
    RPE=${SOAK_RPE:-125}
    echo "soak: planning with SOAK_RPS=$RPS rounds/s, $RPE rounds an epoch (no calibration)"
fi

EPOCHS=$(awk -v s="$SECS" -v r="$RPS" -v e="$RPE" 'BEGIN { n = int(s * r / e + 0.5); print (n < 1 ? 1 : n) }')
ROUNDS=$((EPOCHS * RPE))
PLANNED=$(awk -v n="$ROUNDS" -v r="$RPS" 'BEGIN { printf "%.1f", n / r }')
LIMIT=${SOAK_LIMIT:-$(awk -v p="$PLANNED" 'BEGIN { printf "%d", 2 * p + 120 }')}

# ---- the fault schedule ------------------------------------------------------------------
# Fault times from ~5% of the run (at least 3 s in) to 85%, every GAP_MIN..GAP_MAX
# seconds (at most 256 faults: launch's limit), turned into rounds with RPS. The last 15% stay fault-free, so
# that the peers re-converge before the accuracy is read.
# KILLS of the faults, drawn from the middle of the run, are --kill, each of a
# different peer that then gets no later fault; of the rest 3 in 4 are
# --restart (1-3 s down), 1 in 4 --stop (2-8 s).
mapfile -t FAULTS < <(awk -v seed="$SEED" -v rps="$RPS" -v T="$PLANNED" -v np="$PEERS" -v kills="$KILLS" \
    -v gmin="$GAP_MIN" -v gmax="$GAP_MAX" 'BEGIN {
    srand(seed)
    t = 0.05 * T; if (t < 3) t = 3
    n = 0
    while (t < 0.85 * T && n < 256) { tm[n++] = t; t += gmin + rand() * (gmax - gmin) }
    lo = int(n / 5); hi = int(4 * n / 5); if (hi <= lo) { lo = 0; hi = n }
    for (k = 0; k < kills && k < hi - lo; k++) {
        do i = lo + int(rand() * (hi - lo)); while (i in kill)
        kill[i] = 1
    }
    for (i = 0; i < n; i++) {
        do p = int(rand() * np); while (p in dead)
        r = int(tm[i] * rps) + 1
        if (i in kill) { dead[p] = 1; printf "--kill %d@%d\n", p, r; continue }
        if (rand() < 0.75) printf "--restart %d@%d:%.1f\n", p, r, 1 + 2 * rand()
        else printf "--stop %d@%d:%.1f\n", p, r, 2 + 6 * rand()
    }
}')
NPLAN=${#FAULTS[@]}
FAULT_ARGS=()
for f in "${FAULTS[@]}"; do
    # shellcheck disable=SC2206 # "--restart 3@120:1.5" -> two words
    FAULT_ARGS+=($f)
done
printf '%s\n' "${FAULTS[@]}" >"$DIR/faults.txt"
NKILL=$(grep -c '^--kill' "$DIR/faults.txt")
NRESTART=$(grep -c '^--restart' "$DIR/faults.txt")
NSTOP=$(grep -c '^--stop' "$DIR/faults.txt")
echo "soak: $EPOCHS epochs ($ROUNDS rounds, ~${PLANNED}s); $NPLAN faults planned: $NRESTART restart, $NSTOP stop, $NKILL kill (list in $DIR/faults.txt)"
echo "soak: watchdog: a hang is > ${LIMIT}s in all or ${STALL}s without a round logged"
echo "soak: to reproduce this schedule: SOAK_SEED=$SEED SOAK_RPS=$RPS SOAK_SECONDS=$SECS bash tests/soak/run.sh"

# ---- the soak ------------------------------------------------------------------------------
log "faults run: started $(date '+%H:%M:%S')"
launch_run faults "$LIMIT" "$EPOCHS" "${FAULT_ARGS[@]}"
F=$DIR/faults
F_RC=$RUN_RC F_HANG=$RUN_HANG F_WHY=$RUN_HANG_WHY F_WALL=$RUN_WALL
log "faults run: ended after ${F_WALL}s, launch exit status $F_RC"

if [ "$BASELINE" = 1 ]; then
    log "baseline: the same run without faults"
    launch_run baseline "$LIMIT" "$EPOCHS"
    B_RC=$RUN_RC B_HANG=$RUN_HANG B_WALL=$RUN_WALL
fi

# ---- the report ---------------------------------------------------------------------------
# Lines launch prints when it injects a fault: "sgp launch: peer 3 at round 812: kill -9 and restart".
inj_re='^sgp launch: peer [0-9]+ at round [0-9]+: '
L_ALL=$(grep -cE "$inj_re" "$F/launch.log")
L_RESTART=$(grep -cE "${inj_re}kill -9 and restart\$" "$F/launch.log")
L_STOP=$(grep -cE "${inj_re}SIGSTOP\$" "$F/launch.log")
L_KILL=$(grep -cE "${inj_re}kill -9\$" "$F/launch.log")
L_CONT=$(grep -cE '^sgp launch: peer [0-9]+: SIGCONT' "$F/launch.log")
# Peers that died in a way launch did not cause, and sanitizer/abort traces in the peers' output.
FAILED=$(grep -cE '^sgp launch: peer [0-9]+ failed' "$F/launch.log")
crash_re='AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error:|Segmentation|Assertion|Aborted|double free|stack smashing|core dumped'
TRACES=$(cat "$F"/peer*.out 2>/dev/null | grep -cE "$crash_re")
CRASHES=$((FAILED + TRACES))
# Peer-side events (the .out files are appended to across restarts; a peer killed
# with -9 may lose output it had not flushed, so these are lower bounds).
ev() { cat "$F"/peer*.out 2>/dev/null | grep -c "$1"; }
E_ROUTED=$(ev 'routing around neighbour')
E_BACK=$(ev 'neighbour is back\|neighbour reconnected')
E_LATE=$(ev 'not waiting for late neighbour')
E_CATCH=$(ev 'catching up')
E_RESUMED=$(ev 'resumed from')
# Longest time between two consecutive round lines of one peer (one incarnation: a
# restarted peer's round log starts over), and which.
GAP=$(for f in "$F"/peer*.jsonl; do
    grep '"loss"' "$f" 2>/dev/null | sed -n 's/.*"round": \([0-9]*\),.*"t": \([0-9.]*\).*/\1 \2/p' |
        awk -v p="$(basename "$f" .jsonl)" 'NR > 1 && $2 - t > g { g = $2 - t; r = $1 } { t = $2 } END { if (g) printf "%.1f %s %s\n", g, p, r }'
done | sort -rn | head -1)
S=$F/summary.json
FINISHED=$(num peers_finished "$S")
INJECTED=$(num faults_injected "$S")
EXPECT=$((PEERS - L_KILL))
UNFINISHED=0
[ -n "$FINISHED" ] && [ "$FINISHED" -lt "$EXPECT" ] && UNFINISHED=$((EXPECT - FINISHED))
[ -z "$FINISHED" ] && UNFINISHED=$EXPECT

# Over the peers that finished (the last incarnation of a restarted one): the share of
# their rounds computed here rather than skipped by catching up, and the spread and
# the total of their push-sum weights (1 each without faults; gsp_resume keeps the
# total within [0.5, 2] x the live peers under churn).
peer_stats() { # peer_stats RUNDIR -> "STEPS% (min..max)  wMIN..wMAX"
    local f
    for f in "$1"/peer*.json; do
        [ -e "$f" ] || continue
        echo "$(num local_steps "$f") $(num rounds "$f") $(num start_round "$f") $(num weight "$f")"
    done | awk 'NF == 4 { n++; s += $1; r += $2 - $3; fr = ($2 > $3) ? $1 / ($2 - $3) : 1
        if (n == 1 || fr < fmin) fmin = fr; if (n == 1 || fr > fmax) fmax = fr
        if (n == 1 || $4 < wmin) wmin = $4; if (n == 1 || $4 > wmax) wmax = $4; ws += $4 }
        END { if (n) printf "%.0f%% (%.0f..%.0f%%)  w %.3g..%.3g, total %.3g of %d peers\n", 100 * s / r, 100 * fmin, 100 * fmax, wmin, wmax, ws, n; else print "-" }'
}
LOW_ACC=
if [ -n "$MIN_ACC" ] && ! awk -v a="$(num test_accuracy "$S")" -v m="$MIN_ACC" 'BEGIN { exit !(a != "" && 100 * a >= m) }'; then
    LOW_ACC=1
fi
bl() { [ "$BASELINE" = 1 ] && echo "$1" || echo; }
R=$DIR/report.txt
{
    echo
    echo "soak report: seed $SEED, $PEERS peers, $MODEL, $EPOCHS epochs, ${SECS}s asked, ${PLANNED}s planned at $RPS rounds/s"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -n); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "binary: $SGP (sha256 $(sha256sum "$BIN" | cut -c1-12), built $(date -r "$BIN" '+%Y-%m-%d %H:%M:%S'))"
    FMT='%-44s %-32s %s\n'
    printf "$FMT" "check" "faults run" "$(bl baseline)"
    printf "$FMT" "--------------------------------------------" "--------------------------------" "$(bl --------------------------------)"
    printf "$FMT" "faults planned (restart/stop/kill)" "$NPLAN ($NRESTART/$NSTOP/$NKILL)" ""
    printf "$FMT" "faults injected (summary)" "${INJECTED:--}" ""
    printf "$FMT" "faults injected (launch lines, r/s/k)" "$L_ALL ($L_RESTART/$L_STOP/$L_KILL)" ""
    printf "$FMT" "SIGCONTs sent" "$L_CONT" ""
    printf "$FMT" "crashes: 'peer N failed' lines" "$FAILED" ""
    printf "$FMT" "crashes: sanitizer/segv/assert lines in .out" "$TRACES" ""
    printf "$FMT" "hangs (watchdog fired)" "$F_HANG${F_WHY:+: $F_WHY}" "$(bl "${B_HANG:-}")"
    printf "$FMT" "launch exit status" "$F_RC" "$(bl "${B_RC:-}")"
    printf "$FMT" "peers finished (expected)" "${FINISHED:--} ($EXPECT)" "$(bl "$(num peers_finished "$DIR/baseline/summary.json" 2>/dev/null)")"
    printf "$FMT" "rounds" "$(num rounds "$S")" "$(bl "$(num rounds "$DIR/baseline/summary.json")")"
    printf "$FMT" "wall seconds (planned ${PLANNED})" "$F_WALL" "$(bl "${B_WALL:-}")"
    printf "$FMT" "test accuracy, average model" "$(pct "$(num test_accuracy "$S")")" "$(bl "$(pct "$(num test_accuracy "$DIR/baseline/summary.json")")")"
    printf "$FMT" "test accuracy, peers min" "$(pct "$(num test_accuracy_min "$S")")" "$(bl "$(pct "$(num test_accuracy_min "$DIR/baseline/summary.json")")")"
    printf "$FMT" "test accuracy, peers mean" "$(pct "$(num test_accuracy_mean "$S")")" "$(bl "$(pct "$(num test_accuracy_mean "$DIR/baseline/summary.json")")")"
    printf "$FMT" "consensus distance" "$(fmt "$(num consensus_distance "$S")" %.2e)" "$(bl "$(fmt "$(num consensus_distance "$DIR/baseline/summary.json")" %.2e)")"
    printf "$FMT" "local steps / rounds (min..max), weights" "$(peer_stats "$F")" "$(bl "$(peer_stats "$DIR/baseline")")"
    printf "$FMT" "peer events: routed around / back" "$E_ROUTED / $E_BACK" ""
    printf "$FMT" "peer events: late marks / catch-ups" "$E_LATE / $E_CATCH" ""
    printf "$FMT" "peer events: resumed from checkpoint" "$E_RESUMED" ""
    printf "$FMT" "longest gap between rounds (s, peer, round)" "${GAP:--}" ""
    echo
    verdict=PASS
    why=
    [ "$CRASHES" -gt 0 ] && why="$why crashes=$CRASHES"
    [ "$F_HANG" != 0 ] && why="$why hang"
    [ "$F_RC" != 0 ] && why="$why launch-exit=$F_RC"
    [ "$UNFINISHED" -gt 0 ] && why="$why unfinished-peers=$UNFINISHED"
    [ -n "$LOW_ACC" ] && why="$why accuracy<$MIN_ACC%"
    if [ "$BASELINE" = 1 ] && { [ "${B_RC:-1}" != 0 ] || [ "${B_HANG:-0}" != 0 ]; }; then
        why="$why baseline-failed"
    fi
    [ -n "$why" ] && verdict="FAIL:$why"
    echo "soak: $verdict"
    echo "logs: $F/launch.log, $F/peer*.out, $F/peer*.jsonl; the fault list: $DIR/faults.txt"
    [ "$F_HANG" != 0 ] && echo "hang: each peer's last log line and state in $F/hang.txt"
    if [ "$CRASHES" -gt 0 ]; then
        # Each failed peer with the last line it printed (usually why it exited).
        grep -E '^sgp launch: peer [0-9]+ failed' "$F/launch.log" | while read -r _ _ _ id _; do
            echo "peer $id failed; the last line of peer$id.out: $(grep -v 'connection refused' "$F/peer$id.out" | tail -1)"
        done
        grep -HnE "$crash_re" "$F"/peer*.out | head -20
    fi
} | tee "$R"

[ "$CRASHES" -eq 0 ] && [ "$F_HANG" = 0 ] && [ "$F_RC" = 0 ] && [ "$UNFINISHED" -eq 0 ] && [ -z "$LOW_ACC" ] &&
    { [ "$BASELINE" != 1 ] || { [ "${B_RC:-1}" = 0 ] && [ "${B_HANG:-0}" = 0 ]; }; }
