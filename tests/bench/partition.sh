#!/usr/bin/env bash
# shellcheck disable=SC2059 # printf "$FMT": one format for the header and the rows
# A network partition on real processes (issue 27): 4 peers on 4 emulated
# hosts, `sgp launch --hosts` over ssh as in lan.sh (the namespaces, bridge
# and sshds come from netns.sh), the exponential graph, launch's defaults
# (mlp:256, codec stc:0.04) and PARTITION_EPOCHS epochs. PARTITION_AT seconds
# after the launch starts, the links of peers 2 and 3 (hosts 3 and 4 here,
# namespaces $NS-h3 and $NS-h4) are cut off from those of peers 0 and 1 for
# PARTITION_SECONDS: their bridge ports move from br0 to a second bridge, br1,
# so 0-1 and 2-3 still talk within their side and nothing crosses (no link
# goes down; frames across are dropped, as by a switch split in two). Then the
# ports go back on br0 (the heal). Each binary (SGP_BEFORE, the build before
# the change, and SGP, this build) runs once without the cut and once with it,
# PARTITION_REPEAT times, interleaved.
#
# Per run: wall time, the average model's and the worst peer's test accuracy,
# consensus distance, the push-sum weight (held by the peers + in flight, from
# launch's combined summary), and the rounds each peer advanced during the cut
# (its log's last round line when the ports moved to br1 and when they came
# back; in a run without the cut, over the same seconds, for the pace).
#
# A benchmark: it prints a table and asserts nothing. Root only (namespaces):
# without root it says so and exits 0. Run it as
#   SGP_BEFORE=/path/to/old/build/sgp bash tests/bench/partition.sh
# Knobs (environment):
#   PARTITION_EPOCHS   epochs (default 60)
#   PARTITION_AT       seconds from the launch to the cut (default 5)
#   PARTITION_SECONDS  how long the cut lasts (default 15)
#   PARTITION_REPEAT   runs of every row, interleaved (default 1)
#   PARTITION_RATE     tc tbf rate of every link, e.g. 1gbit (default: none, bare veths)
#   PARTITION_ARGS     more options for sgp launch (and so the peers), e.g. "--codec none"
#   PARTITION_HOW      split (default: the bridge is split in two, no link goes
#                      down) or down (the cut-off hosts' links go down: ip link set
#                      eth0 down, then up)
#   PARTITION_CAP      seconds a run may take before it is stopped (default 300)
#   PARTITION_NAME     name of the outputs (default partition)
#   SGP                this build's sgp (default $BUILD/sgp; copied first)
#   SGP_BEFORE         the sgp to compare with (a build from before the change);
#                      without it, only SGP runs
# Output: the table on stdout and in $BUILD/bench/NAME.txt, the runs in
# $BUILD/bench/NAME/ (launch's output, the peers' logs in remote/). See
# tests/bench/README.md, "A network partition".
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP_SRC=${SGP:-$BUILD/sgp}
BEFORE_SRC=${SGP_BEFORE:-}
PY=${PY:-/usr/bin/python3}
EPOCHS=${PARTITION_EPOCHS:-60}
AT=${PARTITION_AT:-5}
SECONDS_CUT=${PARTITION_SECONDS:-15}
REPEAT=${PARTITION_REPEAT:-1}
RATE=${PARTITION_RATE:-}
read -r -a EXTRA <<<"${PARTITION_ARGS:-}"
CAP=${PARTITION_CAP:-300}
HOW=${PARTITION_HOW:-split}
NAME=${PARTITION_NAME:-partition}
NS=sgppart # namespace prefix: sgppart-br (the bridges), sgppart-h1 .. sgppart-h4
N=4
SIDE_B="3 4" # the hosts of peers 2 and 3: the side cut off
OUT=$BUILD/bench/$NAME.txt
RUNS=$BUILD/bench/$NAME

if [ "$(id -u)" != 0 ]; then
    echo "partition.sh: skipped: needs root (network namespaces, veth, bridges); run it as root"
    exit 0
fi
for b in "$SGP_SRC" ${BEFORE_SRC:+"$BEFORE_SRC"}; do
    if [ ! -x "$b" ]; then
        echo "partition.sh: $b not built (run 'make')" >&2
        exit 1
    fi
done

# ---- packages ---------------------------------------------------------------
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null && command -v scp >/dev/null || need+=(openssh-client)
[ -n "$RATE" ] && ! command -v tc >/dev/null && need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
    echo "partition.sh: installing ${need[*]}" >&2
    apt-get -o DPkg::Lock::Timeout=600 update -q >&2 &&
        env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends "${need[@]}" >&2 || echo "partition.sh: apt-get install failed" >&2
fi
if [ ! -x /usr/sbin/sshd ] || ! command -v ip >/dev/null; then
    echo "partition.sh: sshd (openssh-server) and ip (iproute2) are needed" >&2
    exit 1
fi

rm -rf "$RUNS"
mkdir -p "$RUNS" "$BUILD/bench"
# Copies of the binaries, so a rebuild during the benchmark cannot mix versions.
BINS=()
LABELS=()
if [ -n "$BEFORE_SRC" ]; then
    cp -p "$BEFORE_SRC" "$RUNS/sgp-before" || exit 1
    BINS+=("$RUNS/sgp-before") LABELS+=(before)
fi
cp -p "$SGP_SRC" "$RUNS/sgp-after" || exit 1
BINS+=("$RUNS/sgp-after") LABELS+=(after)
SSHD=$RUNS/ssh

NETNS_TAG=partition.sh
# shellcheck source=tests/bench/netns.sh
. "$here/netns.sh"
netns_cgroup
netns_traps
netns_remove_leftovers

# sleep_until T: until the clock reads T (seconds since the epoch), waited for
# in the background so that a signal reaches the traps at once
sleep_until() {
    local s
    s=$(awk -v t="$1" -v n="$(now)" 'BEGIN { d = t - n; printf "%.3f", (d > 0 ? d : 0) }')
    sleep "$s" &
    wait $!
}

# ---- one run --------------------------------------------------------------------
RUN_NO=0
# run_one K SCENARIO REP: binary K (index into BINS) with SCENARIO (none|cut);
# writes $RUNS/TAG/meta.json
run_one() {
    local k=$1 scen=$2 rep=$3 bin label tag dir port t0 t1 rc pid i t_cut=null t_heal=null split=0
    bin=${BINS[$k]} label=${LABELS[$k]}
    RUN_NO=$((RUN_NO + 1))
    tag=$(printf '%03d-%s-%s-%d' "$RUN_NO" "$label" "$scen" "$rep")
    dir=$RUNS/$tag
    mkdir -p "$dir"
    port=$((17000 + 10 * (RUN_NO % 400)))
    : >"$dir/hosts"
    for ((i = 1; i <= N; i++)); do echo "10.77.0.$i slots=1 ssh=root@10.77.0.$i" >>"$dir/hosts"; done
    local b0 c0 b1 c1
    b0=$(machine_busy) c0=$(ours_cpu)
    t0=$(now)
    timeout -s INT -k 30 "$CAP" ip netns exec "$NS-h1" env PATH="$SSHD/bin:$PATH" \
        "$bin" launch --peers "$N" --epochs "$EPOCHS" "${EXTRA[@]}" --hosts "$dir/hosts" \
        --run-dir "$dir/run" --remote-dir "$dir/remote" --base-port "$port" \
        --summary "$dir/launch.json" >"$dir/launch.out" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    # the cut (or, without one, the same two instants, for the pace)
    sleep_until "$(awk -v a="$t0" -v b="$AT" 'BEGIN { printf "%.3f", a + b }')"
    if alive "$pid"; then
        if [ "$scen" = cut ]; then
            if [ "$HOW" = down ]; then
                lan_down "$SIDE_B" || echo "partition.sh: the links did not go down" >&2
            else
                lan_split "$SIDE_B" || echo "partition.sh: the split failed" >&2
            fi
            split=1
        fi
        t_cut=$(now)
        sleep_until "$(awk -v a="$t_cut" -v b="$SECONDS_CUT" 'BEGIN { printf "%.3f", a + b }')"
        if [ "$split" = 1 ]; then
            if [ "$HOW" = down ]; then
                lan_up_again "$SIDE_B" || echo "partition.sh: the links did not come back up" >&2
            else
                lan_heal || echo "partition.sh: the heal failed" >&2
            fi
        fi
        t_heal=$(now)
    fi
    wait "$pid"
    rc=$?
    t1=$(now)
    b1=$(machine_busy) c1=$(ours_cpu)
    local others=null
    [ -n "$c0" ] && [ -n "$c1" ] && others=$(awk -v b0="$b0" -v b1="$b1" -v c0="$c0" -v c1="$c1" -v t0="$t0" \
        -v t1="$t1" 'BEGIN { o = ((b1 - b0) - (c1 - c0)) / (t1 - t0); printf "%.2f", o < 0 ? 0 : o }')
    reap_runs "$N" "$RUNS/sgp-*"
    lan_heal # (a run stopped between the two)
    lan_up_again "$SIDE_B"
    printf '{"label": "%s", "scenario": "%s", "rep": %d, "t0": %s, "t1": %s, "rc": %d, "cap": %s, "at": %s, "seconds": %s, "split": %d, "t_cut": %s, "t_heal": %s, "others": %s}\n' \
        "$label" "$scen" "$rep" "$t0" "$t1" "$rc" "$CAP" "$AT" "$SECONDS_CUT" "$split" "$t_cut" "$t_heal" \
        "$others" >"$dir/meta.json"
    printf '  %-6s %-4s run %d: %6.1f s, exit %d, other load %s cores\n' "$label" "$scen" "$rep" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc" "$others" >&2
}

# ---- the runs ---------------------------------------------------------------------
T_START=$(date +%s)
echo "partition.sh: ${LABELS[*]}, $EPOCHS epochs, peers 2 and 3 cut off at ${AT} s for ${SECONDS_CUT} s," \
    "links ${RATE:-unshaped}, launch options '${EXTRA[*]}'" >&2
if ! lan_up "$N"; then
    echo "partition.sh: cannot build the emulated LAN (no network namespaces here?); skipped" >&2
    exit 0
fi
if [ -n "$RATE" ]; then
    for ((i = 1; i <= N; i++)); do shape "$i" "$RATE" || exit 1; done
fi
for ((rep = 1; rep <= REPEAT; rep++)); do
    for scen in none cut; do
        for ((k = 0; k < ${#BINS[@]}; k++)); do run_one "$k" "$scen" "$rep"; done
    done
done
cleanup
T_END=$(date +%s)

# ---- the table -------------------------------------------------------------------------
"$PY" - "$RUNS" "$OUT" "$((T_END - T_START))" "$EPOCHS" "$RATE" "${EXTRA[*]}" <<'PYEOF'
import glob, json, os, sys

runs_dir, out_path, total_s, epochs, rate, extra = sys.argv[1:7]
N, SIDES = 4, ((0, 1), (2, 3))
REJOIN = ("neighbour reconnected", "neighbour is back", "hearing in-neighbours again")

def load_json(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def read_log(path):
    rounds, events, ledger_w, last_t = [], [], None, None
    try:
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if "t" in r:
                    last_t = r["t"]
                if "loss" in r and "round" in r:
                    rounds.append((r["round"], r["t"]))
                elif "event" in r:
                    events.append((r["event"], r["peer"], r["round"], r["t"]))
                elif r.get("ledger") == "peer":
                    ledger_w = r["w"]
    except OSError:
        pass
    return rounds, events, ledger_w, last_t

rows = []
for mp in sorted(glob.glob(os.path.join(runs_dir, "*", "meta.json"))):
    m = load_json(mp)
    if not m:
        continue
    d = os.path.dirname(mp)
    L = load_json(os.path.join(d, "launch.json"))
    tc, th = m["t_cut"], m["t_heal"]
    logs = [read_log(os.path.join(d, "remote", "peer%d.jsonl" % i)) for i in range(N)]
    # each peer's start on our clock: its summary's time less its wall seconds,
    # else its log's time less the log's last t
    start, steps, errors = [], [], []
    for i in range(N):
        summ, log = os.path.join(d, "remote", "peer%d.json" % i), os.path.join(d, "remote", "peer%d.jsonl" % i)
        s = load_json(summ)
        steps.append(s.get("local_steps") if s else None)
        try:  # a failed peer's last words (its output, as launch collected it)
            with open(os.path.join(d, "run", "peer%d.out" % i)) as f:
                errors += [l.strip() for l in f if l.startswith("sgp peer:")]
        except OSError:
            pass
        if s and "wall_seconds" in s:
            start.append(os.path.getmtime(summ) - s["wall_seconds"])
        elif logs[i][3] is not None:
            start.append(os.path.getmtime(log) - logs[i][3])
        else:
            start.append(None)

    def round_at(i, when):
        """peer i's last round logged by `when` (our clock)"""
        last = 0
        for rnd, t in logs[i][0]:
            if start[i] + t > when:
                break
            last = rnd
        return last

    during = [round_at(i, th) - round_at(i, tc) if tc and th and start[i] is not None else None for i in range(N)]
    firsts = [start[i] + logs[i][0][0][1] for i in range(N) if start[i] is not None and logs[i][0]]
    train0 = min(firsts) if firsts else None
    # longest pause between two round lines of a peer, over the run
    pause = []
    for rounds, _, _, _ in logs:
        ts = [t for _, t in rounds]
        pause.append(max((b - a for a, b in zip(ts, ts[1:])), default=None))
    # events, on the cut's clock (seconds since the ports moved)
    ev = {}
    for i, (_, events, _, _) in enumerate(logs):
        for what, peer, rnd, t in events:
            at = start[i] + t - tc if start[i] is not None and tc else None
            ev.setdefault(what, []).append((i, peer, rnd, at))
    rows.append(dict(m=m, L=L, steps=steps, errors=errors, during=during, pause=pause, ev=ev, w=[lg[2] for lg in logs],
                     final_round=[lg[0][-1][0] if lg[0] else None for lg in logs], wall=m["t1"] - m["t0"],
                     cut_at=(tc - train0) if tc and train0 else None, cut_len=(th - tc) if tc and th else None,
                     train0=(train0 - m["t0"]) if train0 else None, dir=d))

def pct(x):
    return "-" if x is None else "%.2f%%" % (100 * x)

def side(v, s):
    return ",".join("-" if v[i] is None else str(v[i]) for i in s)

lines = []
FMT = "%-6s %-4s %3s %7s %9s %9s %10s %13s %12s %12s %10s %6s  %s"
lines.append(FMT % ("binary", "cut", "run", "wall s", "avg acc", "worst acc", "consensus", "weight",
                    "cut: 0,1", "cut: 2,3", "pause s", "others", "note"))
for r in rows:
    m, L = r["m"], r["L"]
    note = []
    if m["rc"] != 0:
        note.append("exit %d%s" % (m["rc"], " (capped)" if m["rc"] == 124 else ""))
    if L is None:
        note.append("no combined summary")
    elif L.get("peers_finished", N) != N:
        note.append("%d of %d peers finished" % (L["peers_finished"], N))
    note += [e[len("sgp peer: "):] for e in r["errors"]]
    weight = "-"
    if L is not None and "weight_total" in L:
        weight = "%.3f+%.3f" % (L["weight_total"] - L["weight_in_flight"], L["weight_in_flight"])
    lines.append(FMT % (m["label"], "yes" if m["scenario"] == "cut" else "no", m["rep"], "%.1f" % r["wall"],
                        pct(L and L.get("test_accuracy")), pct(L and L.get("test_accuracy_min")),
                        "-" if not L else "%.2e" % L["consensus_distance"], weight,
                        side(r["during"], SIDES[0]), side(r["during"], SIDES[1]),
                        "-" if None in r["pause"] else "%.1f" % max(r["pause"]),
                        "-" if m.get("others") is None else "%.2f" % m["others"], "; ".join(note)))
lines.append("")
m0 = rows[0]["m"] if rows else {"at": "?", "seconds": "?"}
lines.append("%s epochs, launch's defaults (mlp:256, codec stc:0.04, exponential graph)%s, links %s; the cut: peers 2"
             % (epochs, (", options '%s'" % extra) if extra else "", rate or "unshaped veths"))
lines.append("and 3 (hosts 3, 4) cut off from peers 0 and 1 (hosts 1, 2) %s s after the launch started, for %s s."
             % (m0["at"], m0["seconds"]))
lines.append("avg acc: the average model of the peers; worst acc: the worst peer's own model; consensus: launch's")
lines.append("consensus distance; weight: push-sum weight held by the peers + in flight at the end (of 4);")
lines.append("cut: 0,1 / 2,3: rounds each peer advanced while the sides were apart (without the cut: over the same")
lines.append("seconds, for the pace); pause s: the longest gap between two rounds of any peer; others: cores other")
lines.append("processes used during the run (of 2), above ~0.2 the row is suspect.")

lines.append("")
D = "%-6s %-4s %3s %8s %8s %23s %23s %23s %-19s %s"
lines.append(D % ("binary", "cut", "run", "train s", "cut at s", "final w (peers 0-3)", "final round (0-3)",
                  "steps (0-3)", "pause s (0-3)", "took a model"))
for r in rows:
    m = r["m"]
    lines.append(D % (m["label"], "yes" if m["scenario"] == "cut" else "no", m["rep"],
                      "-" if r["train0"] is None else "%.1f" % r["train0"],
                      "-" if r["cut_at"] is None else "%.1f" % r["cut_at"],
                      " ".join("-" if w is None else "%.3f" % w for w in r["w"]),
                      " ".join("-" if x is None else str(x) for x in r["final_round"]),
                      " ".join("-" if x is None else str(x) for x in r["steps"]),
                      " ".join("-" if x is None else "%.1f" % x for x in r["pause"]),
                      " ".join("%d<-%d" % (x[0], x[1]) for x in r["ev"].get("took the current model of peer", []))
                      or "-"))
lines.append("(train s: seconds from the launch to the first peer's first round; cut at: seconds from then to the cut")
lines.append("(the same instant without the cut); final w: each peer's weight in its last ledger line; final round:")
lines.append("its last round line; steps: the local steps it computed (its summary), fewer when it jumped rounds;")
lines.append("took a model: I<-J, peer I was far behind and took peer J's model, dropping its own, as a joiner does)")

lines.append("")
lines.append("Events in the peers' logs (count, and seconds from the cut of the first and the last; the heal at +%s):"
             % m0["seconds"])
for r in rows:
    m = r["m"]
    if not r["ev"]:
        continue
    lines.append("  %s, cut %s, run %d:" % (m["label"], "yes" if m["scenario"] == "cut" else "no", m["rep"]))
    for what, v in sorted(r["ev"].items(), key=lambda kv: min((x[3] or 0) for x in kv[1])):
        ats = [x[3] for x in v if x[3] is not None]
        who = sorted({"%d:%d" % (x[0], x[1]) if x[1] >= 0 else "%d" % x[0] for x in v})
        lines.append("    %-55s %3d  %+7.1f .. %+7.1f  %s" % (what, len(v), min(ats) if ats else 0,
                                                             max(ats) if ats else 0, " ".join(who[:12])))
lines.append("")
lines.append("Benchmark took %s s (%.1f min)." % (total_s, int(total_s) / 60))
text = "\n".join(lines) + "\n"
sys.stdout.write(text)
with open(out_path, "w") as f:
    f.write(text)
PYEOF
