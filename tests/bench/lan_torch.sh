#!/usr/bin/env bash
# Emulated LAN, PyTorch GPT: sgp against DDP and DiLoCo, time to the loss of
# the model trained alone. 4 hosts are network namespaces (sgpt-h1 .. sgpt-h4,
# host i has the address 10.77.1.i/24), each with one veth link to a Linux
# bridge in a namespace of its own (sgpt-br); every link is shaped with tc tbf
# in both directions (egress of the host's eth0 and of the bridge's port) to
# LT_RATE. The workload is peer/python/examples/gpt_torch.py's byte-level
# nanoGPT on the Brown corpus (AdamW, warm-up and cosine, clipping at 1.0,
# the total batch split over the 4 hosts):
#
#   alone   gpt_torch.py without --cluster, outside the namespaces: its final
#           validation loss is the target of the other runs
#   sgp     gpt_torch.py as 4 sgp peers (sgp.torch.Optimizer), one per host,
#           --local-steps LT_H --outer LT_OUTER --codec LT_CODEC; the cluster
#           file of `sgp launch --prepare` with the hosts' addresses put in
#   ddp     tests/bench/lan_torch_baselines.py --system ddp: DDP over gloo, one
#           rank per host, the gradients all-reduced every step
#   diloco  tests/bench/lan_torch_baselines.py --system diloco: LT_H local AdamW
#           steps, then the pseudo-gradient all-reduced and an outer Nesterov
#           SGD step (lr 0.7, momentum 0.9) on the anchor
#
# Scenarios: base (all 4 links at LT_RATE), slow (the same links; host 4
# runs with --slow LT_SLOW: after each step it sleeps LT_SLOW - 1 times that
# step's compute, a host LT_SLOW times slower) and open (links not shaped,
# sgp only: the compute-bound limit of its base run).
#
# A benchmark: it prints a table and asserts nothing. Root only (namespaces,
# tc): without root it says so and exits 0. After `make` and `make data`, with
# Debian's python3-torch (/usr/bin/python3), from anywhere:
#   bash tests/bench/lan_torch.sh
#   LT_STEPS=60 LT_EVAL_EVERY=20 LT_SCENARIOS=base bash tests/bench/lan_torch.sh   # a quick try
# Knobs (environment), defaults in brackets:
#   LT_MODEL [2:64:4] LAYERS:WIDTH:HEADS   LT_STEPS [600]   LT_BYTES [262144]
#   LT_BATCH [16] windows a step, all hosts together   LT_LR [0.003]
#   LT_EVAL_EVERY [50] steps between evaluations (rank/peer 0's model)
#   LT_RATE [100mbit] every link, both directions   LT_H [10] local steps
#   LT_OUTER [nesterov:0.7:0.9] sgp's outer optimizer (DiLoCo's is parsed from it)
#   LT_CODEC [stc:0.04] sgp's codec   LT_SLOW [4] host 4's slow-down in `slow`
#   LT_RECIPE [none] lm: sgp runs --recipe lm (the exact sparse all-gather on
#               a complete topology) in place of LT_H, LT_OUTER and LT_CODEC
#               (DiLoCo still takes LT_H and LT_OUTER)
#   LT_DEAD_TIMEOUT [libsgp's] sgp's --dead-timeout (raise it where 4 peers'
#               steps starve their network threads on a few cores)
#   LT_SYSTEMS ["sgp ddp diloco"]   LT_SCENARIOS ["base slow"]
#   LT_CAP [900] seconds a run may take: every process runs under timeout
#   LT_TARGET [alone's final validation loss] another target loss
#   LT_SGP_LOGS [0] which sgp peers evaluate into a log of their own: 0 (peer 0
#               only, as rank 0 only in DDP and DiLoCo) or all (peer I into
#               peerI.jsonl; an evaluation costs about 25 training steps of
#               compute, which 4 processes on a few cores share)
# Measured per run: wall time (start to the last process's exit, Python's
# start-up and evaluations included), time to the target (the first "t" of
# rank/peer 0's evaluation log with val_loss <= alone's final loss, or the best
# loss reached and when), rank/peer 0's last logged validation loss, and the
# bytes on the wire (the sum over the hosts of eth0's tx_bytes, after - before).
# Then, per scenario, the ratios DDP/sgp and DiLoCo/sgp of the times to the
# target (a baseline that did not reach it: its wall time as a lower bound),
# and the same at the highest of the systems' best losses, which every system
# reached (evaluations are every LT_EVAL_EVERY steps: that is the resolution).
# Output: the table on stdout and in $BUILD/bench/lan_torch.txt; the runs
# (outputs, logs, meta.json) in $BUILD/bench/lan_torch/.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-$root/build}
PY=${PY:-/usr/bin/python3}
MODEL=${LT_MODEL:-2:64:4}
STEPS=${LT_STEPS:-600}
BYTES=${LT_BYTES:-262144}
BATCH=${LT_BATCH:-16}
LR=${LT_LR:-0.003}
EVAL_EVERY=${LT_EVAL_EVERY:-50}
RATE=${LT_RATE:-100mbit}
H=${LT_H:-10}
OUTER=${LT_OUTER:-nesterov:0.7:0.9}
CODEC=${LT_CODEC:-stc:0.04}
SLOW=${LT_SLOW:-4}
RECIPE=${LT_RECIPE:-}
DEAD_TIMEOUT=${LT_DEAD_TIMEOUT:-}
SYSTEMS=${LT_SYSTEMS:-sgp ddp diloco}
SCENARIOS=${LT_SCENARIOS:-base slow}
CAP=${LT_CAP:-900}
SGP_LOGS=${LT_SGP_LOGS:-0}
N=4
NS=sgpt # namespace prefix: sgpt-br (the bridge), sgpt-h1 .. sgpt-h4
TEXT=$BUILD/data/brown/brown.txt
GPT_PY=$root/peer/python/examples/gpt_torch.py
BASE_PY=$here/lan_torch_baselines.py
OUT=$BUILD/bench/lan_torch.txt
RUNS=$BUILD/bench/lan_torch
ENV=(OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
    "SGP_LIB=$BUILD/libsgp.so")

if [ "$(id -u)" != 0 ]; then
    echo "lan_torch.sh: skipped: needs root (network namespaces, veth, tc); run it as root"
    exit 0
fi
for f in "$BUILD/sgp" "$BUILD/libsgp.so"; do
    [ -f "$f" ] || { echo "lan_torch.sh: $f not built (run make)" >&2; exit 1; }
done
[ -f "$TEXT" ] || { echo "lan_torch.sh: $TEXT not found (run make data)" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "lan_torch.sh: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
command -v tc >/dev/null || { echo "lan_torch.sh: tc (iproute2) is needed" >&2; exit 1; }
# DiLoCo's outer step from LT_OUTER = nesterov:LR:MOMENTUM
case $OUTER in
nesterov:*:*) OUTER_LR=$(echo "$OUTER" | cut -d: -f2) OUTER_MOM=$(echo "$OUTER" | cut -d: -f3) ;;
*) OUTER_LR=0.7 OUTER_MOM=0.9 ;;
esac

now() { date +%s.%N; }

# ---- clean-up: whatever happens, no namespace or process is left ----------------
NS_MADE=()
PIDS=()
kill_ns() { # SIGNAL: every process in our namespaces
    local ns p
    for ns in "${NS_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill "-$1" "$p" 2>/dev/null; done
    done
}
cleanup() {
    local p i left ns
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    kill_ns TERM
    for ((i = 0; i < 50; i++)); do # up to 5 s to stop on SIGTERM
        left=0
        for ns in "${NS_MADE[@]}"; do [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    kill_ns KILL
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    for ns in "${NS_MADE[@]}"; do ip netns del "$ns" 2>/dev/null; done
    for p in $(ip -o link show 2>/dev/null | grep -o "st[vb]$$h[0-9]*" | sort -u); do ip link del "$p" 2>/dev/null; done
    NS_MADE=() PIDS=()
}
trap cleanup EXIT
trap 'echo "lan_torch.sh: interrupted; cleaning up" >&2; exit 130' INT
trap 'echo "lan_torch.sh: terminated; cleaning up" >&2; exit 143' TERM

# Leftovers of an earlier run that was killed -9 (nothing else uses the prefix).
for ns in $(ip netns list 2>/dev/null | awk -v p="^$NS-" '$1 ~ p { print $1 }'); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns"
done
for p in $(ip -o link show 2>/dev/null | grep -oE "st[vb][0-9]+h[0-9]+" | sort -u); do ip link del "$p" 2>/dev/null; done

# ---- the emulated LAN -------------------------------------------------------------
# tbf for a rate like 100mbit: burst 2 ms of the rate (at least 16 kB), queue up to 20 ms
tbf_args() {
    local r=$1 bps burst
    bps=$(awk -v r="$r" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
        m = u ~ /^g/ ? 1e9 : u ~ /^m/ ? 1e6 : u ~ /^k/ ? 1e3 : 1; print n * m }')
    burst=$(awk -v b="$bps" 'BEGIN { x = b / 8 * 0.002; if (x < 16000) x = 16000; printf "%d", x }')
    echo "rate $r burst $burst latency 20ms"
}
shape() { # I RATE: host I's link in both directions; RATE "open": not shaped
    if [ "$2" = open ]; then
        tc -n "$NS-h$1" qdisc del dev eth0 root 2>/dev/null
        tc -n "$NS-br" qdisc del dev "b$1" root 2>/dev/null
        return 0
    fi
    # shellcheck disable=SC2046 # tbf_args is words
    tc -n "$NS-h$1" qdisc replace dev eth0 root tbf $(tbf_args "$2") &&
        tc -n "$NS-br" qdisc replace dev "b$1" root tbf $(tbf_args "$2")
}
lan_up() {
    local i
    ip netns add "$NS-br" || return 1
    NS_MADE+=("$NS-br")
    ip -n "$NS-br" link add br0 type bridge && ip -n "$NS-br" link set br0 up || return 1
    for ((i = 1; i <= N; i++)); do
        ip netns add "$NS-h$i" || return 1
        NS_MADE+=("$NS-h$i")
        ip link add "stv$$h$i" type veth peer name "stb$$h$i" &&
            ip link set "stv$$h$i" netns "$NS-h$i" && ip link set "stb$$h$i" netns "$NS-br" &&
            ip -n "$NS-h$i" link set "stv$$h$i" name eth0 && ip -n "$NS-br" link set "stb$$h$i" name "b$i" &&
            ip netns exec "$NS-h$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
                net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.eth0.disable_ipv6=1 &&
            ip -n "$NS-h$i" addr add "10.77.1.$i/24" dev eth0 &&
            ip -n "$NS-h$i" link set lo up && ip -n "$NS-h$i" link set eth0 up &&
            ip -n "$NS-br" link set "b$i" master br0 && ip -n "$NS-br" link set "b$i" up &&
            shape "$i" "$RATE" || return 1
    done
    command -v ping >/dev/null || return 0 # (a failing run shows it otherwise)
    for ((i = 2; i <= N; i++)); do
        ip netns exec "$NS-h1" ping -c 1 -W 2 "10.77.1.$i" >/dev/null 2>&1 ||
            { echo "lan_torch.sh: host 1 cannot reach 10.77.1.$i" >&2; return 1; }
    done
}
tx_all() { # each host's eth0 tx_bytes, comma separated
    local i out=()
    for ((i = 1; i <= N; i++)); do
        out+=("$(ip netns exec "$NS-h$i" cat /sys/class/net/eth0/statistics/tx_bytes)")
    done
    local IFS=,
    echo "${out[*]}"
}

# ---- the runs -------------------------------------------------------------------------
rm -rf "$RUNS"
mkdir -p "$RUNS"
common=(--text "$TEXT" --model "$MODEL" --steps "$STEPS" --bytes "$BYTES" --batch "$BATCH" --lr "$LR"
    --threads 1 --eval-every "$EVAL_EVERY")
T_START=$(date +%s)
echo "lan_torch.sh: model $MODEL, $STEPS steps, batch $BATCH, $BYTES bytes, links $RATE, systems '$SYSTEMS'," \
    "scenarios '$SCENARIOS', cap ${CAP}s" >&2

# alone: the target
mkdir -p "$RUNS/alone"
t0=$(now)
env "${ENV[@]}" "$PY" "$GPT_PY" "${common[@]}" --t0 "$t0" --log "$RUNS/alone/peer0.jsonl" \
    >"$RUNS/alone/peer0.out" 2>&1 &
PIDS+=($!)
wait $! || { echo "lan_torch.sh: the alone run failed: see $RUNS/alone/peer0.out" >&2; exit 1; }
t1=$(now)
printf '{"scenario": "-", "system": "alone", "t0": %s, "t1": %s, "rc": 0, "tx0": null, "tx1": null}\n' \
    "$t0" "$t1" >"$RUNS/alone/meta.json"
ALONE=$(sed -n 's/^summary //p' "$RUNS/alone/peer0.out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["validation_loss"])')
TARGET=${LT_TARGET:-$ALONE}
echo "lan_torch.sh: alone: validation loss $ALONE in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s; target $TARGET" >&2

lan_up || { echo "lan_torch.sh: cannot build the emulated LAN (no network namespaces here?); skipped" >&2; exit 0; }

RUN_NO=0
run_one() { # SCENARIO SYSTEM
    local scen=$1 sys=$2 dir port i h p pids=() rc=0 r extra log tx0 tx1 t0 t1
    RUN_NO=$((RUN_NO + 1))
    dir=$RUNS/$(printf '%02d-%s-%s' "$RUN_NO" "$scen" "$sys")
    mkdir -p "$dir"
    port=$((31000 + 10 * RUN_NO))
    for ((i = 1; i <= N; i++)); do
        shape "$i" "$([ "$scen" = open ] && echo open || echo "$RATE")" ||
            { echo "lan_torch.sh: cannot shape host $i's link" >&2; return 1; }
    done
    if [ "$sys" = sgp ]; then
        "$BUILD/sgp" launch --peers "$N" --prepare --run-dir "$dir/cluster" \
            --topology "$([ "$RECIPE" = lm ] && echo complete || echo exponential)" >"$dir/prepare.out" 2>&1 ||
            { echo "lan_torch.sh: sgp launch --prepare failed: see $dir/prepare.out" >&2; return 1; }
        awk -v port="$port" '$1 == "peer" { sub(/127\.0\.0\.1:[0-9]+/, "10.77.1." ($2 + 1) ":" port) } { print }' \
            "$dir/cluster/cluster.conf" >"$dir/cluster/cluster.conf.new" &&
            mv "$dir/cluster/cluster.conf.new" "$dir/cluster/cluster.conf"
    fi
    tx0=$(tx_all)
    t0=$(now)
    for ((i = 0; i < N; i++)); do
        h=$((i + 1))
        extra=()
        [ "$scen" = slow ] && [ "$h" = "$N" ] && extra=(--slow "$SLOW")
        log=()
        [ "$i" = 0 ] || [ "$SGP_LOGS" = all ] && log=(--log "$dir/peer$i.jsonl")
        case $sys in
        sgp)
            ip netns exec "$NS-h$h" timeout -k 10 "$CAP" env "${ENV[@]}" "$PY" "$GPT_PY" "${common[@]}" \
                --cluster "$dir/cluster/cluster.conf" --id "$i" "${SGP_ALGO[@]}" \
                --t0 "$t0" "${log[@]}" "${extra[@]}" >"$dir/peer$i.out" 2>&1 &
            ;;
        ddp | diloco)
            ip netns exec "$NS-h$h" timeout -k 10 "$CAP" env "${ENV[@]}" GLOO_SOCKET_IFNAME=eth0 "$PY" "$BASE_PY" \
                --system "$sys" --rank "$i" --world "$N" --init "tcp://10.77.1.1:$port" "${common[@]}" \
                --local-steps "$H" --outer-lr "$OUTER_LR" --outer-momentum "$OUTER_MOM" --t0 "$t0" \
                --log "$dir/peer0.jsonl" "${extra[@]}" >"$dir/peer$i.out" 2>&1 &
            ;;
        *)
            echo "lan_torch.sh: unknown system '$sys'" >&2
            return 1
            ;;
        esac
        pids+=($!)
        PIDS+=($!)
    done
    # in the background and waited for, so that a signal reaches the traps at once
    for p in "${pids[@]}"; do
        wait "$p"
        r=$?
        [ "$r" != 0 ] && [ "$rc" = 0 ] && rc=$r
    done
    t1=$(now)
    tx1=$(tx_all)
    kill_ns KILL # nothing of this run is left (a capped run's stragglers)
    PIDS=()
    printf '{"scenario": "%s", "system": "%s", "t0": %s, "t1": %s, "rc": %d, "tx0": [%s], "tx1": [%s]}\n' \
        "$scen" "$sys" "$t0" "$t1" "$rc" "$tx0" "$tx1" >"$dir/meta.json"
    printf 'lan_torch.sh: %-5s %-6s %6.1f s, exit %d%s\n' "$scen" "$sys" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$rc" \
        "$([ "$rc" = 124 ] && echo " (capped at ${CAP}s)")" >&2
}

SGP_ALGO=(--local-steps "$H" --outer "$OUTER" --codec "$CODEC")
[ -n "$RECIPE" ] && SGP_ALGO=(--recipe "$RECIPE")
[ -n "$DEAD_TIMEOUT" ] && SGP_ALGO+=(--dead-timeout "$DEAD_TIMEOUT")
for scen in $SCENARIOS; do
    case $scen in base | slow | open) ;; *) echo "lan_torch.sh: unknown scenario '$scen'" >&2; exit 1 ;; esac
    for sys in $SYSTEMS; do
        [ "$scen" = open ] && [ "$sys" != sgp ] && continue # (the compute-bound limit is sgp's)
        run_one "$scen" "$sys"
    done
done
cleanup
T_END=$(date +%s)

# ---- the table ----------------------------------------------------------------------------
"$PY" - "$RUNS" "$OUT" "$TARGET" "$((T_END - T_START))" "$CAP" "$ALONE" \
    "model $MODEL, $STEPS steps, batch $BATCH, $BYTES bytes, lr $LR, eval every $EVAL_EVERY; 4 hosts, links $RATE (tbf, both directions; open: not shaped); sgp ${SGP_ALGO[*]}; diloco H=$H, outer nesterov lr $OUTER_LR momentum $OUTER_MOM; slow: host 4 --slow $SLOW; sgp peers evaluating: $SGP_LOGS" <<'PYEOF'
import glob, json, math, os, sys

runs, out_path, target, total_s, cap, alone, config = (sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]),
                                                      sys.argv[5], float(sys.argv[6]), sys.argv[7])
is_alone = abs(target - alone) < 1e-12
rows, notes = [], []
res = {}
for d in sorted(glob.glob(os.path.join(runs, "*"))):
    try:
        m = json.load(open(os.path.join(d, "meta.json")))
    except (OSError, ValueError):
        continue
    pts = []
    try:
        for line in open(os.path.join(d, "peer0.jsonl")):
            try:
                r = json.loads(line)
                pts.append((r["t"], r["step"], r["val_loss"]))
            except (ValueError, KeyError):
                pass
    except OSError:
        pass
    wall = m["t1"] - m["t0"]
    capped = m["rc"] == 124
    hit = next((p for p in pts if p[2] <= target), None)
    if hit:
        ttt = "%.1f s (step %d)" % (hit[0], hit[1])
    elif pts:
        best = min(pts, key=lambda p: p[2])
        ttt = "not reached (best %.4f at %.1f s)" % (best[2], best[0])
    else:
        ttt = "not reached (no evaluation)"
    if pts:
        final = "%.4f" % pts[-1][2] + (" (step %d)" % pts[-1][1] if capped or m["rc"] else "")
    else:
        final = "-"
    mb = "-" if m["tx0"] is None else "%.1f" % ((sum(m["tx1"]) - sum(m["tx0"])) / 1e6)
    status = "" if m["rc"] == 0 else (" capped" if capped else " exit %d" % m["rc"])
    rows.append((m["scenario"], m["system"], ttt, final, "%.1f s%s" % (wall, status), mb))
    res[(m["scenario"], m["system"])] = (hit[0] if hit else None, wall, capped, pts)
    if m["system"] == "sgp":
        sent = []
        for f in sorted(glob.glob(os.path.join(d, "peer[0-9].out"))):
            for line in open(f):
                if line.startswith("summary "):
                    sent.append(json.loads(line[8:]).get("bytes_sent", 0))
        if sent:
            notes.append("%s sgp: peers' own bytes_sent (sgp's count) %.1f MB in all" % (m["scenario"], sum(sent) / 1e6))

lines = ["lan_torch: " + config,
         "target: alone's final validation loss %.4f" % target if is_alone
         else "target: LT_TARGET %.4f (alone's final validation loss %.4f)" % (target, alone), "",
         "| scenario | system | %s | final val loss | wall | MB on the wire |" % (
             "time to alone's loss" if is_alone else "time to loss %.4f" % target),
         "|---|---|---|---|---|---|"]
lines += ["| %s | %s | %s | %s | %s | %s |" % r for r in rows]
lines.append("")
order = lambda s: ["base", "slow", "open"].index(s) if s in ("base", "slow", "open") else 9
s, o = res.get(("base", "sgp")), res.get(("open", "sgp"))
if s and o and s[0] is not None and o[0] is not None:
    lines.append("sgp on %s links against unshaped ones, time to target: %.2f (%.1f s / %.1f s)" % (
        "shaped", s[0] / o[0], s[0], o[0]))
for scen in sorted({k[0] for k in res if k[0] != "-"}, key=order):
    s = res.get((scen, "sgp"))
    for b, name in (("ddp", "DDP"), ("diloco", "DiLoCo")):
        r = res.get((scen, b))
        if s is None or r is None:
            continue
        if s[0] is None:
            lines.append("%s: %s/sgp: - (sgp did not reach the target)" % (scen, name))
        elif r[0] is not None:
            lines.append("%s: %s/sgp time to target: %.2f (%.1f s / %.1f s)" % (scen, name, r[0] / s[0], r[0], s[0]))
        else:
            why = "capped at %s s" % cap if r[2] else "all steps run"
            lines.append("%s: %s/sgp time to target: > %.2f (%s did not reach it, %s: its wall %.1f s taken as a lower bound; sgp %.1f s)"
                         % (scen, name, r[1] / s[0], name, why, r[1], s[0]))
# A loss every system of a scenario reached (the highest of their best), so that
# there is a ratio even where the target above was not reached by all.
for scen in sorted({k[0] for k in res if k[0] != "-"}, key=order):
    got = {k[1]: v for k, v in res.items() if k[0] == scen and v[3]}
    if "sgp" not in got or len(got) < 2:
        continue
    common = max(min(p[2] for p in v[3]) for v in got.values())
    tt = {name: next(p[0] for p in v[3] if p[2] <= common) for name, v in got.items()}
    lines.append("%s: the loss every system reached, %.4f (the highest best loss): %s; %s" % (
        scen, common, ", ".join("%s %.1f s" % (n, tt[n]) for n in got),
        ", ".join("%s/sgp %.2f" % ({"ddp": "DDP", "diloco": "DiLoCo"}.get(n, n), tt[n] / tt["sgp"])
                  for n in got if n != "sgp")))
lines += notes
lines.append("total %.1f min" % (total_s / 60))
text = "\n".join(lines)
print(text)
with open(out_path, "w") as f:
    f.write(text + "\n")
PYEOF
