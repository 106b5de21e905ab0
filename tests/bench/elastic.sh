#!/usr/bin/env bash
# Elastic membership on real processes in network namespaces (issue 46):
# 4 peers of the cluster file train on hosts 1-4 (10.77.0.1-4; the
# namespaces, bridge and sshds of netns.sh); two hosts that are not in the
# file join with credentials at different rounds (hosts 5 and 6, each
# listening on its own address, --listen), one founder leaves (SIGTERM: it
# hands its weight on), and the host of another dies (kill -9) and is
# replaced by a new host (7) with the same id and key on a new address
# (--listen, --resume without a checkpoint: it pulls the model). Nobody is
# restarted in place. Against it, a fixed run of 6 peers of the file on
# hosts 1-6 with the same options (the same total batch: --batch is the
# run's). Every peer is `sgp peer` started with `ip netns exec`; the run's
# files are on the shared file system, combined with tests/bench/combine.c
# (the average model of those that did not leave, as sgp launch averages)
# and tests/bench/ledger.c (the push-sum weight, held and in flight).
#
# A benchmark: it prints a table and asserts nothing. Root only; without
# root it says so and exits 0. Knobs (environment):
#   ELASTIC_EPOCHS   epochs (default 8)
#   ELASTIC_ROUNDS   "JOIN1 JOIN2 LEAVE REPLACE": the rounds of peer 0 at which
#                    the events happen (default "100 250 400 550")
#   ELASTIC_ARGS     more options for every peer (default: the model and codec
#                    of sgp launch, mlp:256 and stc:0.04)
#   ELASTIC_RATE     tc tbf rate of every link, e.g. 100mbit (default: none)
#   ELASTIC_CAP      seconds a run may take (default 600)
#   ELASTIC_REPEAT   pairs of runs (fixed, then elastic), one row each (default 1)
#   SGP              the sgp to run (default $BUILD/sgp)
# Output: the table on stdout and in $BUILD/bench/elastic.txt, the runs in
# $BUILD/bench/elastic/{elastic,fixed}N/. See tests/bench/README.md,
# "Elastic membership".
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP=${SGP:-$BUILD/sgp}
EPOCHS=${ELASTIC_EPOCHS:-8}
read -r R_JOIN1 R_JOIN2 R_LEAVE R_REPLACE <<<"${ELASTIC_ROUNDS:-100 250 400 550}"
read -r -a ARGS <<<"${ELASTIC_ARGS:---model mlp:256 --codec stc:0.04}"
RATE=${ELASTIC_RATE:-}
CAP=${ELASTIC_CAP:-600}
REPEAT=${ELASTIC_REPEAT:-1}
NS=sgpelastic
N_HOSTS=7
PORT=7000
OUT=$BUILD/bench/elastic.txt
RUNS=$BUILD/bench/elastic
COMBINE=${COMBINE:-$BUILD/bench/combine}
LEDGER=${LEDGER:-$BUILD/bench/ledger}

if [ "$(id -u)" != 0 ]; then
    echo "elastic.sh: skipped: needs root (network namespaces, veth, bridges); run it as root"
    exit 0
fi
for b in "$SGP" "$COMBINE" "$LEDGER"; do
    if [ ! -x "$b" ]; then
        echo "elastic.sh: $b not built (run 'make' and 'make $BUILD/bench/combine $BUILD/bench/ledger')" >&2
        exit 1
    fi
done
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null || {
        echo "elastic.sh: cannot install ${need[*]}" >&2
        exit 1
    }
fi

SSHD=$(mktemp -d /tmp/sgp-elastic-ssh.XXXXXX)
NETNS_TAG=elastic.sh
mkdir -p "$RUNS"
# shellcheck source=tests/bench/netns.sh
. "$here/netns.sh"
netns_traps
netns_remove_leftovers
lan_up "$N_HOSTS" || { echo "elastic.sh: the emulated LAN did not come up" >&2; exit 1; }
if [ -n "$RATE" ]; then
    for ((h = 1; h <= N_HOSTS; h++)); do shape "$h" "$RATE" || exit 1; done
fi

# peer RUN I HOST [ARGS...]: sgp peer I on host HOST, in the background; its pid in PEER_PID[I]
declare -A PEER_PID
peer() {
    local run=$1 i=$2 host=$3
    shift 3
    ip netns exec "$NS-h$host" "$SGP" peer --cluster "$run/cluster.conf" --id "$i" --key "$run/$i.key" \
        --seed 1 --epochs "$EPOCHS" --log "$run/peer$i.jsonl" --summary "$run/peer$i.json" \
        --save-model "$run/peer$i.model" --no-progress "${ARGS[@]}" "$@" >>"$run/peer$i.out" 2>&1 &
    PEER_PID[$i]=$!
    PIDS+=($!)
}
last_round() { grep -o '"round": [0-9]*' "$1" 2>/dev/null | tail -n 1 | cut -d' ' -f2; }
at_round() { local r; r=$(last_round "$1"); [ -n "$r" ] && [ "$r" -ge "$2" ]; } # JSONL ROUND
# The files of a run: keys, the topology and the cluster file (FOUNDERS peer
# lines on hosts 1.., SLOTS ids; an admission key and credentials past them).
make_run() {
    local run=$1 founders=$2 slots=$3 i admit
    rm -rf "$run" && mkdir -p "$run"
    printf 'peers %d\ngenerator exponential\n' "$slots" >"$run/topology.topo"
    {
        echo "cluster elastic"
        echo "topology topology.topo"
        if [ "$slots" -gt "$founders" ]; then
            admit=$("$SGP" cluster keygen --out "$run" | head -c 44)
            echo "slots $slots"
            echo "admit $admit"
        fi
        for ((i = 0; i < founders; i++)); do
            "$SGP" keygen --out "$run" --id "$i" >/dev/null
            echo "peer $i 10.77.0.$((i + 1)):$PORT $(cat "$run/$i.pub")"
        done
    } >"$run/cluster.conf"
    for ((i = founders; i < slots; i++)); do
        "$SGP" keygen --out "$run" --id "$i" >/dev/null &&
            "$SGP" cluster admit --admit-key "$run/admit.key" --cluster elastic --key "$run/$i.pub" --id "$i" \
                --out "$run/$i.cred" >/dev/null || return 1
    done
}
wait_peers() { # RUN IDS...: until they exit, at most CAP s from the run's start
    local run=$1 i
    shift
    for i in "$@"; do
        while alive "${PEER_PID[$i]}"; do
            [ $(($(date +%s) - T0)) -ge "$CAP" ] && { echo "elastic.sh: $run: peer $i still running at the cap" >&2; return 1; }
            sleep 0.2
        done
        wait "${PEER_PID[$i]}" 2>/dev/null
    done
}
event() { # what WHEN: at peer 0's round WHEN
    wait_for "$CAP" at_round "$RUN/peer0.jsonl" "$2" || { echo "elastic.sh: round $2 never came" >&2; return 1; }
    echo "  round $(last_round "$RUN/peer0.jsonl"), $(($(date +%s) - T0)) s: $1"
}

declare -A WALL
for ((rep = 1; rep <= REPEAT; rep++)); do
echo "elastic.sh: run $rep of $REPEAT, fixed: 6 peers of the file on hosts 1-6, $EPOCHS epochs"
RUN=$RUNS/fixed$rep
make_run "$RUN" 6 6 || exit 1
T0=$(date +%s)
for ((i = 0; i < 6; i++)); do peer "$RUN" "$i" $((i + 1)); done
wait_peers "$RUN" 0 1 2 3 4 5 || exit 1
WALL[fixed$rep]=$(($(date +%s) - T0))
"$COMBINE" "$RUN" 6 "$RUN/summary.json" >"$RUN/combine.txt" || exit 1
"$LEDGER" "$RUN" 6 >"$RUN/ledger.txt"

echo "elastic.sh: run $rep of $REPEAT, elastic: 4 founders, joins at rounds $R_JOIN1 and $R_JOIN2, peer 1 leaves" \
    "at $R_LEAVE, peer 3's host dies at $R_REPLACE and host 7 replaces it"
RUN=$RUNS/elastic$rep
make_run "$RUN" 4 6 || exit 1
T0=$(date +%s)
for ((i = 0; i < 4; i++)); do peer "$RUN" "$i" $((i + 1)); done
event "peer 4 joins from host 5" "$R_JOIN1" || exit 1
peer "$RUN" 4 5 --credential "$RUN/4.cred" --listen "10.77.0.5:$PORT"
event "peer 5 joins from host 6" "$R_JOIN2" || exit 1
peer "$RUN" 5 6 --credential "$RUN/5.cred" --listen "10.77.0.6:$PORT"
event "peer 1 leaves (SIGTERM)" "$R_LEAVE" || exit 1
kill -TERM "${PEER_PID[1]}"
event "peer 3's host dies (kill -9); host 7 takes its slot" "$R_REPLACE" || exit 1
kill -KILL "${PEER_PID[3]}"
wait "${PEER_PID[3]}" 2>/dev/null
mv "$RUN/peer3.out" "$RUN/peer3.before.out"
peer "$RUN" 3 7 --resume --listen "10.77.0.7:$PORT"
wait_peers "$RUN" 0 1 2 3 4 5 || exit 1
WALL[elastic$rep]=$(($(date +%s) - T0))
"$COMBINE" "$RUN" 6 "$RUN/summary.json" 1 >"$RUN/combine.txt" || exit 1
# Held weight (the ledgers' in flight counts the dead run's edges, which no log closes)
"$LEDGER" "$RUN" 6 >"$RUN/ledger.txt" # (4 founders and 2 joiners: 6 ledgers)
done

num() { grep -o "\"$2\": [-0-9.e+]*" "$1" | head -n 1 | cut -d' ' -f2; }
{
    echo "Elastic membership, $EPOCHS epochs, ${ARGS[*]}${RATE:+, links $RATE} ($(date -u +%Y-%m-%d), $(git -C "$root" rev-parse --short HEAD 2>/dev/null))"
    printf '%-40s %10s %10s %8s  %s\n' run "avg model" "worst peer" "wall s" "push-sum weight held"
    for ((rep = 1; rep <= REPEAT; rep++)); do
        for r in fixed elastic; do
            s=$RUNS/$r$rep/summary.json
            printf '%-40s %10.4f %10.4f %8s  %s\n' \
                "$([ $r = fixed ] && echo "6 peers of the file ($rep)" || echo "4 + 2 joins, 1 leave, 1 replaced ($rep)")" \
                "$(num "$s" test_accuracy)" "$(num "$s" test_accuracy_min)" "${WALL[$r$rep]}" \
                "$(grep -o '^held [-0-9.e+]*' "$RUNS/$r$rep/ledger.txt" | cut -d' ' -f2)"
        done
    done
    grep -h "listens at" "$RUNS/elastic1"/peer*.out | sort | uniq -c | sed 's/^/  /'
} | tee "$OUT"
