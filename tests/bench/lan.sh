#!/usr/bin/env bash
# shellcheck disable=SC2059 # printf "$FMT": one format for the header and the rows
# Emulated LAN: sgp against PyTorch DDP (plain all-reduce and PowerSGD) on
# hosts whose links are really shaped (issue 14). N hosts are network
# namespaces, each with one veth link to a Linux bridge (in a namespace of its
# own; the set-up, the sshds and the clean-up are netns.sh's, shared with
# partition.sh); every link is shaped with tc tbf in both directions (egress of the
# host-side veth and egress of the bridge-side veth) to the rate of the row.
# Host i has the address 10.77.0.i. The workload is `make demo`'s: embedded
# MNIST (8,000 train / 2,000 test), mlp:256, total batch 64, 10 epochs,
# SGD lr 0.1 momentum 0.9 Nesterov wd 5e-4, 1 warm-up epoch, cosine decay.
#
#   sgp     `sgp launch --hosts FILE` run from host 1, one sshd per host
#           (key-based root login with a key made for the run, BatchMode):
#           every peer starts over ssh in its host's namespace
#   ddp     tests/bench/lan_ddp.py, one rank per host (ip netns exec),
#           gloo, init_method=tcp://10.77.0.1:PORT; `powersgd` adds the
#           PowerSGD hook (rank LAN_POWERSGD_RANK)
#
# A benchmark: it prints a table and asserts nothing. Root only (namespaces,
# tc): without root it says so and exits 0. Run it as
#   bash tests/bench/lan.sh
# Knobs (environment):
#   LAN_HOSTS       host counts, e.g. "4 8"
#   LAN_RATES       link rates for tc, e.g. "1gbit 100mbit 10mbit"; "loopback" runs
#                   the same systems on 127.0.0.1 without namespaces. Every host
#                   count runs at every rate (LAN_HOSTS default "4 8", LAN_RATES
#                   default "1gbit 100mbit 10mbit"); with neither set: 4 hosts at
#                   1gbit, 100mbit and 10mbit, and 8 hosts at 100mbit
#   LAN_SYSTEMS     "sgp:CODEC ... ddp powersgd" (default
#                   "sgp:none sgp:stc:0.04 sgp:topk:0.05 ddp powersgd"); an sgp
#                   system may add options as +NAME=VALUE, passed to sgp launch
#                   as --NAME VALUE: "sgp:stc:0.04+local-steps=4"
#   LAN_EPOCHS      epochs (default 10)
#   LAN_CAP         seconds a run may take before it is stopped and marked capped (default 300)
#   LAN_REPEAT      runs of every row, interleaved (default 1)
#   LAN_STRAGGLER   rate of the straggler scenario at 4 hosts: host 4's link at a
#                   quarter of it (default 100mbit; empty: none)
#   LAN_STRAGGLER_SYSTEMS  systems of the straggler scenario (default "sgp:stc:0.04 ddp")
#   LAN_POWERSGD_RANK      PowerSGD's matrix approximation rank (default 2)
#   LAN_DDP_ACC     DDP's final accuracy in percent, for the time-to columns of a
#                   plan without a DDP run (say, from an earlier run)
#   LAN_NAME        name of the outputs (default lan)
#   SGP             the sgp binary (default $BUILD/sgp; copied first)
# Output: the table on stdout and in $BUILD/bench/NAME.txt, plots of accuracy
# against wall time in $BUILD/bench/NAME_<hosts>h_<rate>.png (gnuplot), the
# runs in $BUILD/bench/NAME/. See tests/bench/README.md, "Emulated LAN".
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP_SRC=${SGP:-$BUILD/sgp}
PY=${PY:-/usr/bin/python3}
if [ -z "${LAN_HOSTS+x}" ] && [ -z "${LAN_RATES+x}" ]; then
    PLAN="4:1gbit 4:100mbit 4:10mbit 8:100mbit"
else
    PLAN=""
    for n in ${LAN_HOSTS:-4 8}; do
        for r in ${LAN_RATES:-1gbit 100mbit 10mbit}; do PLAN="$PLAN $n:$r"; done
    done
fi
HOSTS_LIST=$(for p in $PLAN; do echo "${p%%:*}"; done | awk '!seen[$0]++' | xargs)
rates_of() { for p in $PLAN; do [ "${p%%:*}" = "$1" ] && echo "${p#*:}"; done | xargs; } # rates for $1 hosts
SYSTEMS=${LAN_SYSTEMS:-sgp:none sgp:stc:0.04 sgp:topk:0.05 ddp powersgd}
EPOCHS=${LAN_EPOCHS:-10}
CAP=${LAN_CAP:-300}
REPEAT=${LAN_REPEAT:-1}
STRAGGLER=${LAN_STRAGGLER-100mbit}
STRAGGLER_SYSTEMS=${LAN_STRAGGLER_SYSTEMS:-sgp:stc:0.04 ddp}
PSGD_RANK=${LAN_POWERSGD_RANK:-2}
NAME=${LAN_NAME:-lan}
NS=sgplan # namespace prefix: sgplan-br (the bridge), sgplan-h1 .. sgplan-hN
OUT=$BUILD/bench/$NAME.txt
RUNS=$BUILD/bench/$NAME
THREADS_ENV=(OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1)

if [ "$(id -u)" != 0 ]; then
    echo "lan.sh: skipped: needs root (network namespaces, veth, tc); run it as root"
    exit 0
fi
if [ ! -x "$SGP_SRC" ]; then
    echo "lan.sh: $SGP_SRC not built (run 'make')" >&2
    exit 1
fi

# ---- packages ---------------------------------------------------------------
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null && command -v scp >/dev/null || need+=(openssh-client)
command -v iperf3 >/dev/null || need+=(iperf3)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v tc >/dev/null || need+=(iproute2)
case " $SYSTEMS $STRAGGLER_SYSTEMS " in
*" ddp "* | *" powersgd "*) "$PY" -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch) ;;
esac
if [ ${#need[@]} -gt 0 ]; then
    echo "lan.sh: installing ${need[*]}" >&2
    apt-get -o DPkg::Lock::Timeout=600 update -q >&2 &&
        env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends "${need[@]}" >&2 || echo "lan.sh: apt-get install failed" >&2
fi
if [ ! -x /usr/sbin/sshd ] || ! command -v tc >/dev/null; then
    echo "lan.sh: sshd (openssh-server) and tc (iproute2) are needed" >&2
    exit 1
fi

rm -rf "$RUNS"
mkdir -p "$RUNS" "$BUILD/bench"
# A copy of the binary, so a rebuild during the benchmark cannot mix two versions.
cp -p "$SGP_SRC" "$RUNS/sgp" || exit 1
BIN=$RUNS/sgp
DDP_PY=$here/lan_ddp.py
DATA=$root/nn/data
SSHD=$RUNS/ssh

# The emulated LAN (namespaces, bridge, sshds, tc), the cgroup of the run and
# the clean-up: shared with partition.sh.
NETNS_TAG=lan.sh
# shellcheck source=tests/bench/netns.sh
. "$here/netns.sh"
netns_cgroup
netns_traps
netns_remove_leftovers

rate_quarter() { awk -v r="$1" 'BEGIN { n = r + 0; u = substr(r, length(n "") + 1); printf "%g%s", n / 4, u }'; }

# measure FROM TO [ARGS]: iperf3 throughput from host FROM to host TO, Mbit/s
measure() {
    local from=$1 to=$2 port=5201 pid mbps
    command -v iperf3 >/dev/null || { echo "-"; return; }
    ip netns exec "$NS-h$to" iperf3 -s -1 -B "10.77.0.$to" -p $port >/dev/null 2>&1 &
    pid=$! # (in a $(...) subshell: cleanup finds it by its namespace)
    if ! wait_for 20 listening "$NS-h$to" $port; then
        kill "$pid" 2>/dev/null
        echo "-"
        return
    fi
    mbps=$(ip netns exec "$NS-h$from" iperf3 -c "10.77.0.$to" -p $port -t 2 -J 2>/dev/null |
        "$PY" -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e6))' \
            2>/dev/null)
    wait "$pid" 2>/dev/null
    echo "${mbps:--}"
}

# ---- one run --------------------------------------------------------------------
RUN_NO=0
# run_one SYSTEM N RATE SCENARIO REP: writes $RUNS/TAG/meta.json
run_one() {
    local sys=$1 n=$2 rate=$3 scen=$4 rep=$5 tag dir t0 t1 rc tx0="" tx1="" logdir port i
    RUN_NO=$((RUN_NO + 1))
    tag=$(printf '%03d-%s-%dh-%s-%s-%d' "$RUN_NO" "${sys//[:]/_}" "$n" "$rate" "$scen" "$rep")
    dir=$RUNS/$tag
    mkdir -p "$dir"
    port=$((17000 + 10 * (RUN_NO % 400)))
    [ "$rate" != loopback ] && tx0=$(tx_all "$n")
    local b0 c0 b1 c1
    b0=$(machine_busy) c0=$(ours_cpu)
    t0=$(now)
    case $sys in
    sgp:*)
        local spec=${sys#sgp:} codec opt opts=() extra=()
        codec=${spec%%+*}
        # +NAME=VALUE suffixes: more options for sgp launch
        if [ "$codec" != "$spec" ]; then
            IFS=+ read -r -a opts <<<"${spec#*+}"
            for opt in "${opts[@]}"; do extra+=("--${opt%%=*}" "${opt#*=}"); done
        fi
        if [ "$rate" = loopback ]; then
            logdir=$dir/run
            timeout -s INT -k 30 "$CAP" "$BIN" launch --peers "$n" --epochs "$EPOCHS" --codec "$codec" "${extra[@]}" \
                --run-dir "$dir/run" --summary "$dir/launch.json" >"$dir/launch.out" 2>&1 &
        else
            logdir=$dir/remote
            : >"$dir/hosts"
            for ((i = 1; i <= n; i++)); do echo "10.77.0.$i slots=1 ssh=root@10.77.0.$i" >>"$dir/hosts"; done
            timeout -s INT -k 30 "$CAP" ip netns exec "$NS-h1" env PATH="$SSHD/bin:$PATH" \
                "$BIN" launch --peers "$n" --epochs "$EPOCHS" --codec "$codec" "${extra[@]}" --hosts "$dir/hosts" \
                --run-dir "$dir/run" --remote-dir "$dir/remote" --base-port "$port" \
                --summary "$dir/launch.json" >"$dir/launch.out" 2>&1 &
        fi
        # in the background and waited for, so that a signal reaches the traps at once
        local pid=$!
        PIDS+=("$pid")
        wait "$pid"
        rc=$?
        ;;
    ddp | powersgd)
        local psgd=0 r pids=() addr
        [ "$sys" = powersgd ] && psgd=$PSGD_RANK
        logdir=$dir
        for ((r = 0; r < n; r++)); do
            if [ "$rate" = loopback ]; then
                addr=127.0.0.1
                env "${THREADS_ENV[@]}" GLOO_SOCKET_IFNAME=lo timeout -k 10 $((CAP + 120)) "$PY" "$DDP_PY" \
                    --rank "$r" --world "$n" --init "tcp://$addr:$((port + 29000 - 17000))" --data "$DATA" \
                    --epochs "$EPOCHS" --powersgd "$psgd" --time-cap "$CAP" --t0 "$t0" \
                    --log "$dir/ddp.jsonl" --summary "$dir/ddp.json" >"$dir/rank$r.out" 2>&1 &
            else
                ip netns exec "$NS-h$((r + 1))" env "${THREADS_ENV[@]}" GLOO_SOCKET_IFNAME=eth0 \
                    timeout -k 10 $((CAP + 120)) "$PY" "$DDP_PY" \
                    --rank "$r" --world "$n" --init "tcp://10.77.0.1:$((port + 29000 - 17000))" --data "$DATA" \
                    --epochs "$EPOCHS" --powersgd "$psgd" --time-cap "$CAP" --t0 "$t0" \
                    --log "$dir/ddp.jsonl" --summary "$dir/ddp.json" >"$dir/rank$r.out" 2>&1 &
            fi
            pids+=($!)
            PIDS+=($!)
        done
        rc=0
        for r in "${pids[@]}"; do wait "$r" || rc=$?; done
        ;;
    esac
    t1=$(now)
    b1=$(machine_busy) c1=$(ours_cpu)
    local others=null
    [ -n "$c0" ] && [ -n "$c1" ] && others=$(awk -v b0="$b0" -v b1="$b1" -v c0="$c0" -v c1="$c1" -v t0="$t0" \
        -v t1="$t1" 'BEGIN { o = ((b1 - b0) - (c1 - c0)) / (t1 - t0); printf "%.2f", o < 0 ? 0 : o }')
    [ "$rate" != loopback ] && tx1=$(tx_all "$n") && reap_runs "$n" "$BIN" '*python3*'
    printf '{"system": "%s", "hosts": %d, "rate": "%s", "scenario": "%s", "rep": %d, "t0": %s, "t1": %s, "rc": %d, "cap": %s, "logdir": "%s", "tx0": [%s], "tx1": [%s], "powersgd_rank": %d, "others": %s}\n' \
        "$sys" "$n" "$rate" "$scen" "$rep" "$t0" "$t1" "$rc" "$CAP" "$logdir" \
        "${tx0// /, }" "${tx1// /, }" "$PSGD_RANK" "$others" >"$dir/meta.json"
    printf '  %-14s %2d hosts %-8s %-9s run %d: %6.1f s, exit %d, other load %s cores\n' "$sys" "$n" "$rate" \
        "$scen" "$rep" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc" "$others" >&2
}

# ---- the runs ---------------------------------------------------------------------
SHAPING=$RUNS/shaping.txt
: >"$SHAPING"
T_START=$(date +%s)
echo "lan.sh: hosts:rates '${PLAN# }', systems '$SYSTEMS', $EPOCHS epochs, cap ${CAP}s" >&2
for n in $HOSTS_LIST; do
    RATES=$(rates_of "$n")
    lan=0
    for rate in $RATES; do [ "$rate" != loopback ] && lan=1; done
    if [ "$lan" = 1 ]; then
        if ! lan_up "$n"; then
            echo "lan.sh: cannot build the emulated LAN of $n hosts (no network namespaces here?); skipped" >&2
            exit 0
        fi
    fi
    for rate in $RATES; do
        if [ "$rate" != loopback ]; then
            for ((i = 1; i <= n; i++)); do shape "$i" "$rate" || exit 1; done
            echo "$n hosts, $rate: host 2 -> host 1 $(measure 2 1) Mbit/s, host 1 -> host 2 $(measure 1 2) Mbit/s" |
                tee -a "$SHAPING" >&2
        fi
        for ((rep = 1; rep <= REPEAT; rep++)); do
            for sys in $SYSTEMS; do run_one "$sys" "$n" "$rate" base "$rep"; done
        done
    done
    if [ "$n" = 4 ] && [ -n "$STRAGGLER" ] && [ "$lan" = 1 ] && [ "$STRAGGLER" != loopback ]; then
        slow=$(rate_quarter "$STRAGGLER")
        for ((i = 1; i <= n; i++)); do shape "$i" "$STRAGGLER" || exit 1; done
        shape "$n" "$slow" || exit 1
        echo "$n hosts, $STRAGGLER, host $n at $slow: host $n -> host 1 $(measure "$n" 1) Mbit/s, host 1 -> host $n $(measure 1 "$n") Mbit/s" |
            tee -a "$SHAPING" >&2
        for ((rep = 1; rep <= REPEAT; rep++)); do
            for sys in $STRAGGLER_SYSTEMS; do run_one "$sys" "$n" "$STRAGGLER" "straggler" "$rep"; done
        done
    fi
    cleanup
done
T_END=$(date +%s)

# ---- the table and the plots ---------------------------------------------------------
"$PY" - "$RUNS" "$OUT" "$BUILD/bench" "$((T_END - T_START))" "$NAME" <<'PYEOF'
import glob, json, os, subprocess, sys

runs_dir, out_path, plot_dir, total_s, out_name = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

def load_json(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def sgp_run(m, d):
    """Curve (t, mean accuracy of the peers' own models per epoch), final accuracy, diagnostics."""
    n, t0, logdir = m["hosts"], m["t0"], m["logdir"]
    per_round, starts, ends, peers = {}, [], [], []
    global last_start
    for i in range(n):
        log, summ = os.path.join(logdir, "peer%d.jsonl" % i), os.path.join(logdir, "peer%d.json" % i)
        pts, last_t = [], None
        try:
            with open(log) as f:
                for line in f:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if "t" in r:
                        last_t = r["t"]
                    if "test_accuracy" in r and "round" in r:
                        pts.append((r["round"], r["t"], r["test_accuracy"]))
        except OSError:
            pass
        s = load_json(summ)
        if s:
            start = os.path.getmtime(summ) - s["wall_seconds"] - t0
            ends.append(start + s["wall_seconds"])
            peers.append(s)
        elif last_t is not None:
            start = os.path.getmtime(log) - last_t - t0
            ends.append(start + last_t)
        else:
            continue
        starts.append(start)
        for rnd, t, acc in pts:
            per_round.setdefault(rnd, []).append((start + t, acc))
    last_start = min(starts) if starts else None
    curve = []
    for rnd in sorted(per_round):
        v = per_round[rnd]
        if len(v) == n:
            curve.append((max(t for t, _ in v), sum(a for _, a in v) / n))
    L = load_json(os.path.join(d, "launch.json"))
    capped = m["rc"] == 124 or L is None
    end = max(ends) if ends else None
    if L is not None and end is not None:
        final = L["test_accuracy"]
        curve.append((end, final))
    else:
        final = curve[-1][1] if curve else None
    diag = None
    if peers:
        rounds = sum(p["rounds"] for p in peers)
        diag = {
            "late_marks": sum(p["late_marks"] for p in peers),
            "catch_ups": sum(p["catch_ups"] for p in peers),
            "absorbed_per_round": sum(p["messages_absorbed"] for p in peers) / max(rounds, 1),
            "local_steps_pc": 100.0 * sum(p["local_steps"] for p in peers) / max(rounds, 1),
            "staleness": sum(p["mean_staleness"] for p in peers) / len(peers),
            "payload_mb": sum(p["bytes_sent"] for p in peers) / len(peers) / 1e6,
            "sends_refused": sum(p["sends_refused"] for p in peers),
            "wait_s": sum(p["wait_seconds"] for p in peers) / len(peers),
            "idle_s": sum(p["idle_seconds"] for p in peers) / len(peers),
            "min_acc": min(p["test_accuracy"] for p in peers),
        }
    return curve, final, capped, end, diag

def ddp_run(m, d):
    curve = []
    try:
        with open(os.path.join(d, "ddp.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("step", 0) > 0:
                    curve.append((r["t"], r["test_accuracy"]))
    except (OSError, ValueError):
        pass
    global last_start
    s = load_json(os.path.join(d, "ddp.json"))
    last_start = s["ready_seconds"] if s else None
    if s:
        return curve, s["test_accuracy"], bool(s["capped"]), s["wall_seconds"], None
    return curve, (curve[-1][1] if curve else None), True, (curve[-1][0] if curve else None), None

rows = []
for mp in sorted(glob.glob(os.path.join(runs_dir, "*", "meta.json"))):
    m = load_json(mp)
    if not m:
        continue
    d = os.path.dirname(mp)
    if m["system"].startswith("sgp:"):
        curve, final, capped, end, diag = sgp_run(m, d)
    else:
        curve, final, capped, end, diag = ddp_run(m, d)
    n = m["hosts"]
    if m["tx0"] and m["tx1"]:
        mb = sum(b - a for a, b in zip(m["tx0"], m["tx1"])) / n / 1e6
        mb_how = "tx_bytes"
    elif m["system"].startswith("sgp:") and diag:
        mb, mb_how = diag["payload_mb"], "payload"
    else:
        mb, mb_how = None, ""
    name = m["system"]
    if name == "powersgd":
        name = "powersgd:%d" % m["powersgd_rank"]
    rows.append(dict(m=m, name=name, curve=curve, final=final, capped=capped, end=end, diag=diag, start=last_start,
                     wall=m["t1"] - m["t0"], mb=mb, mb_how=mb_how, dir=d))

# The target: DDP's final accuracy at the same host count (DDP computes the
# same thing at every rate, so an uncapped run at any rate gives it).
def target(n, rate):
    same = [r for r in rows if r["m"]["system"] == "ddp" and r["m"]["hosts"] == n and not r["capped"]
            and r["m"]["scenario"] == "base" and r["final"] is not None]
    pick = [r for r in same if r["m"]["rate"] == rate] or same
    if not pick:
        return float(os.environ["LAN_DDP_ACC"]) / 100 if os.environ.get("LAN_DDP_ACC") else None
    return sum(r["final"] for r in pick) / len(pick)

def time_to(curve, acc):
    for t, a in curve:
        if a >= acc - 1e-9:
            return t
    return None

def fmt_t(t, capped, tg=0):
    if tg is None:
        return "-"
    if t is None:
        return "capped" if capped else "not reached"
    return "%.1f" % t

for r in rows:
    tg = target(r["m"]["hosts"], r["m"]["rate"])
    r["target"] = tg
    r["tt"] = time_to(r["curve"], tg) if tg is not None else None
    r["tt5"] = time_to(r["curve"], tg - 0.005) if tg is not None else None

lines = []
FMT = "%-14s %5s %-8s %-9s %3s %9s %11s %11s %7s %7s %8s %6s  %s"
lines.append(FMT % ("system", "hosts", "rate", "scenario", "run", "final acc", "t to DDP", "t to -0.5",
                    "start s", "wall s", "MB/peer", "others", "note"))
for r in rows:
    m = r["m"]
    note = []
    if r["capped"]:
        ep = ""
        if m["system"] in ("ddp", "powersgd"):
            s = load_json(os.path.join(r["dir"], "ddp.json"))
            if s:
                ep = " after %.2f of %d epochs (all %d: ~%.0f s at that pace)" % (
                    s["epochs_done"], s["epochs"], s["epochs"], s["wall_seconds"] * s["total_steps"] / max(s["steps"], 1))
        note.append("capped at %d s%s" % (m["cap"], ep))
    if r["mb_how"] == "payload":
        note.append("MB: sgp's own count")
    if r["diag"] and r["diag"]["min_acc"] < r["final"] - 0.002:
        note.append("worst peer %.2f%%" % (100 * r["diag"]["min_acc"]))
    if m["rc"] not in (0, 124):
        note.append("exit %d" % m["rc"])
    lines.append(FMT % (r["name"], m["hosts"], m["rate"], m["scenario"], m["rep"],
                        "-" if r["final"] is None else "%.2f%%" % (100 * r["final"]),
                        fmt_t(r["tt"], r["capped"], r["target"]), fmt_t(r["tt5"], r["capped"], r["target"]),
                        "-" if r["start"] is None else "%.1f" % r["start"], "%.1f" % r["wall"],
                        "-" if r["mb"] is None else "%.1f" % r["mb"],
                        "-" if m.get("others") is None else "%.2f" % m["others"], "; ".join(note)))
lines.append("")
lines.append("t to DDP: seconds from the start of the run until the system's test accuracy first reaches DDP's final")
lines.append("accuracy at the same host count (t to -0.5: half a point below it); sgp: the mean of the peers' own")
lines.append("models at each epoch end (peerI.jsonl) and the average model at the end (launch summary); DDP/PowerSGD:")
lines.append("evaluated every 25 steps. start s: when training began (sgp: the first peer's start, after launch's")
lines.append("ssh set-up; DDP: rank 0 past init_process_group, after importing torch). wall s: the whole run (start-up,")
lines.append("ssh, fetching the models included). MB/peer: tx_bytes of each host's link, mean over hosts (all traffic:")
lines.append("TCP/IP headers, ssh). others: cores used by other processes during the run (of 2); above ~0.2 suspect.")
targets = sorted({(r["m"]["hosts"], r["target"]) for r in rows if r["target"] is not None})
for n, tg in targets:
    lines.append("DDP's final accuracy at %d hosts: %.2f%%" % (n, 100 * tg))

# sgp's diagnostics
diag_rows = [r for r in rows if r["diag"]]
if diag_rows:
    lines.append("")
    D = "%-14s %5s %-8s %-9s %3s %10s %9s %10s %9s %9s %9s %8s %8s"
    lines.append(D % ("sgp run", "hosts", "rate", "scenario", "run", "late marks", "catch-ups", "absorbed/r",
                      "steps", "staleness", "payload", "wait s", "idle s"))
    for r in diag_rows:
        g, m = r["diag"], r["m"]
        lines.append(D % (r["name"], m["hosts"], m["rate"], m["scenario"], m["rep"], g["late_marks"], g["catch_ups"],
                          "%.3f" % g["absorbed_per_round"], "%.1f%%" % g["local_steps_pc"], "%.2f" % g["staleness"],
                          "%.1f MB" % g["payload_mb"], "%.1f" % g["wait_s"], "%.1f" % g["idle_s"]))
    lines.append("(sums over peers: late marks, catch-ups; absorbed/r: shares taken in per peer-round, 1.000 when no share")
    lines.append("stayed home; steps: local steps / rounds; payload: sgp's own bytes sent per peer; wait/idle: per peer)")

# the issue's targets
def med(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None

def pick(system, n, rate, scen="base"):
    return [r for r in rows if r["name"] == system and r["m"]["hosts"] == n and r["m"]["rate"] == rate
            and r["m"]["scenario"] == scen]

sgp_default = "sgp:stc:0.04"
# the default codec alone, then with any options it was run with (+local-steps=4, ...)
sgp_variants = [sgp_default] + sorted({r["name"] for r in rows if r["name"].startswith(sgp_default + "+")})
psgd_name = next((r["name"] for r in rows if r["name"].startswith("powersgd")), "powersgd")
lines.append("")
lines.append("Issue 14's targets (medians over runs; 'sooner' = time to DDP's final accuracy, or to half a point below):")
for n, rate, other, want in ((4, "100mbit", "ddp", 20), (4, "100mbit", psgd_name, 10), (4, "1gbit", "ddp", 3),
                             (8, "100mbit", "ddp", 20), (8, "1gbit", "ddp", 3)):
    for sgp_name in sgp_variants:
        a, b = pick(sgp_name, n, rate), pick(other, n, rate)
        if not a or not b:
            continue
        for key, label in (("tt", "DDP's accuracy"), ("tt5", "DDP's -0.5")):
            ta, tb = med([r[key] for r in a if r[key] is not None]), med([r[key] for r in b if r[key] is not None])
            sa = med([r["start"] for r in a if r["start"] is not None]) or 0.0
            sb = med([r["start"] for r in b if r["start"] is not None]) or 0.0
            if ta is None:
                txt = "sgp did not reach it"
            elif tb is None:
                tb_wall = med([r["wall"] for r in b])
                txt = "%s did not reach it (%s run of %.0f s): > %.1fx" % (other, "capped" if any(r["capped"] for r in b)
                                                                           else "its", tb_wall, tb_wall / ta)
            else:
                txt = "%.1f s against %.1f s: %.1fx; from the start of training %.1f s against %.1f s: %.1fx" % (
                    ta, tb, tb / ta, ta - sa, tb - sb, (tb - sb) / max(ta - sa, 1e-9))
            lines.append("  %d hosts %s, %s vs %s, to %s: %s (target >= %dx)" % (n, rate, sgp_name, other, label, txt,
                                                                               want))
for system in sgp_variants + ["ddp"]:
    a, b = pick(system, 4, "100mbit"), pick(system, 4, "100mbit", "straggler")
    if a and b:
        wa, wb = med([r["wall"] for r in a]), med([r["wall"] for r in b])
        ea = med([r["end"] for r in a if r["end"]]) or wa
        eb = med([r["end"] for r in b if r["end"]]) or wb
        cap = " (capped)" if any(r["capped"] for r in b) else ""
        lines.append("  straggler (4 hosts 100mbit, host 4 at 25mbit), %s: wall %.1f -> %.1f s (%+.0f%%), training end "
                     "%.1f -> %.1f s (%+.0f%%)%s, accuracy %s -> %s%s" % (
                         system, wa, wb, 100 * (wb / wa - 1), ea, eb, 100 * (eb / ea - 1), cap,
                         "%.2f%%" % (100 * med([r["final"] for r in a])), "%.2f%%" % (100 * med([r["final"] for r in b])),
                         " (target for sgp: <= 15%)" if system.startswith("sgp") else ""))
try:
    with open(os.path.join(runs_dir, "shaping.txt")) as f:
        shp = f.read().strip()
except OSError:
    shp = ""
if shp:
    lines.append("")
    lines.append("Shaping check (iperf3, 2 s, TCP goodput):")
    lines += ["  " + l for l in shp.splitlines()]
lines.append("")
lines.append("Benchmark took %d s (%.1f min)." % (total_s, total_s / 60))
text = "\n".join(lines) + "\n"
sys.stdout.write(text)
with open(out_path, "w") as f:
    f.write(text)

# plots: accuracy against wall time, one per (hosts, rate), base and straggler runs of run 1
have_gp = subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) == 0
groups = {}
for r in rows:
    if r["m"]["rep"] == 1 and r["curve"]:
        groups.setdefault((r["m"]["hosts"], r["m"]["rate"]), []).append(r)
for (n, rate), rs in sorted(groups.items()):
    data = os.path.join(runs_dir, "curve_%dh_%s.dat" % (n, rate))
    series = []
    with open(data, "w") as f:
        for r in rs:
            label = r["name"] + (" (straggler)" if r["m"]["scenario"] != "base" else "") + (" capped" if r["capped"] else "")
            f.write("# %s\n" % label)
            for t, a in r["curve"]:
                f.write("%.3f %.4f\n" % (t, 100 * a))
            f.write("\n\n")
            series.append(label)
    if not have_gp:
        continue
    png = os.path.join(plot_dir, "%s_%dh_%s.png" % (out_name, n, rate))
    tg = target(n, rate)
    allt = [t for r in rs for t, _ in r["curve"]]
    plots = []
    colours = {"sgp:none": "#9400d3", "sgp:stc:0.04": "#009e73", "ddp": "#e69f00", "powersgd": "#d55e00"}
    spare = ["#56b4e9", "#0072b2", "#cc79a7", "#000000", "#999999"]
    for k, label in enumerate(series):
        system = label.split(" ")[0]
        key = "powersgd" if system.startswith("powersgd") else system
        if key not in colours:
            colours[key] = spare[len([c for c in colours if c not in
                                      ("sgp:none", "sgp:stc:0.04", "ddp", "powersgd")]) % len(spare)]
        dash = "dt 2" if "straggler" in label else "dt 1"
        plots.append("'%s' index %d using 1:2 with linespoints lw 2 lc rgb '%s' pt %d ps 0.8 %s title '%s'" % (
            data, k, colours[key], 7 if label.startswith("sgp") else 5, dash, label))
    if tg is not None:
        plots.append("%.4f with lines dt 3 lc rgb 'gray30' title \"DDP's final accuracy (%.2f%%)\"" % (100 * tg, 100 * tg))
    script = "\n".join([
        "set terminal pngcairo size 1000,620 font 'DejaVu Sans,11'",
        "set output '%s'" % png,
        "set title 'mlp:256 on embedded MNIST, %d hosts, links at %s: test accuracy against wall time'" % (n, rate),
        "set xlabel 'wall seconds since the start of the run (log scale)'",
        "set ylabel 'test accuracy (%)'",
        "set logscale x",
        "set xtics (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)",
        "set xrange [%g:%g]" % (max(1.0, 0.8 * min(allt)), 1.25 * max(allt)),
        "set yrange [80:97]",
        "set grid",
        "set key bottom right",
        "plot " + ", \\\n  ".join(plots),
    ])
    subprocess.run(["gnuplot"], input=script.encode(), check=False)
    print("plot: %s" % png)
PYEOF
