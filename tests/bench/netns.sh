# shellcheck shell=bash
# The emulated LAN of the benchmarks, sourced by tests/bench/lan.sh and
# tests/bench/partition.sh (not run on its own). Host i (1..N) is the network
# namespace $NS-hI with address 10.77.0.i and one veth link (eth0) to a Linux
# bridge, br0, in a namespace of its own ($NS-br; the port of host i is bI),
# so the root namespace is untouched. Each host runs an sshd on its address
# (key-based root login with a key made for the run); `ssh` and `scp`
# wrappers in $SSHD/bin add the run's client config.
#
# The sourcing script sets, before calling anything here:
#   NS         namespace prefix (lan.sh: sgplan; partition.sh: sgppart)
#   RUNS       its output directory (the sshds log to $RUNS/sshd.log)
#   SSHD       where the run's keys and ssh configs go (removed on exit)
#   NETNS_TAG  the name its messages start with (lan.sh, partition.sh)
# Sourcing defines functions and the PIDS and NS_MADE arrays, nothing else:
#   netns_cgroup            put this script in a cgroup of its own (CG; ours_cpu)
#   netns_traps             clean up on EXIT, INT and TERM (cleanup, on_exit)
#   netns_remove_leftovers  namespaces $NS-* of an earlier run killed -9
#   lan_up N                the bridge, N hosts and their sshds
#   shape I RATE            tc tbf on host I's link, both directions
#   lan_split "I ..."       move those hosts' ports to a second bridge, br1
#   lan_heal                every port back on br0
#   tx_all N, reap_runs N PATTERN..., wait_for, listening, alive, now

now() { date +%s.%N; }

# CPU that other processes use while a run runs: everything the script starts
# (the sshds and so the peers, the DDP ranks) is in a cpuacct cgroup of its own.
# Processes' time only (user, nice, system): the softirq time of the emulated
# links (veth, bridge, tbf) is not charged to any process and is not "others".
HZ=$(getconf CLK_TCK)
machine_busy() { awk -v hz="$HZ" '/^cpu / { printf "%.3f\n", ($2 + $3 + $4) / hz }' /proc/stat; }
CG=""
netns_cgroup() {
    local base
    for base in /sys/fs/cgroup/cpuacct /sys/fs/cgroup/unified /sys/fs/cgroup; do
        [ -n "$CG" ] && break
        if [ -f "$base/cpuacct.usage" ] || [ -f "$base/cgroup.controllers" ]; then
            if mkdir "$base/$NS-$$" 2>/dev/null; then
                if echo $$ >"$base/$NS-$$/cgroup.procs" 2>/dev/null; then
                    CG=$base/$NS-$$
                else
                    rmdir "$base/$NS-$$" 2>/dev/null
                fi
            fi
        fi
    done
}
ours_cpu() {
    if [ -f "$CG/cpuacct.usage" ]; then
        awk '{ printf "%.3f\n", $1 / 1e9 }' "$CG/cpuacct.usage"
    elif [ -f "$CG/cpu.stat" ]; then
        awk '$1 == "usage_usec" { printf "%.3f\n", $2 / 1e6 }' "$CG/cpu.stat"
    fi
}

# ---- clean-up: whatever happens, no namespace, bridge, sshd or peer is left --
PIDS=()      # processes started here (sshd, iperf3, launch, DDP ranks)
NS_MADE=()   # namespaces made here
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st#Z}" = "$st" ]; }
cleanup() {
    local p ns left i
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for ns in "${NS_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    done
    for ((i = 0; i < 100; i++)); do # up to 10 s for everything to stop on SIGTERM
        left=0
        for p in "${PIDS[@]}"; do alive "$p" && left=1; done
        for ns in "${NS_MADE[@]}"; do [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for ns in "${NS_MADE[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    for ns in "${NS_MADE[@]}"; do ip netns del "$ns" 2>/dev/null; done
    for p in $(ip -o link show 2>/dev/null | grep -o "sl[vb]$$h[0-9]*" | sort -u); do ip link del "$p" 2>/dev/null; done
    PIDS=() NS_MADE=()
}
on_exit() {
    cleanup
    rm -rf "$SSHD"
    if [ -n "$CG" ]; then
        echo $$ >"$(dirname "$CG")/cgroup.procs" 2>/dev/null
        rmdir "$CG" 2>/dev/null
    fi
}
netns_traps() {
    trap on_exit EXIT
    # shellcheck disable=SC2064 # the tag now, as it is
    trap "echo \"$NETNS_TAG: interrupted; cleaning up\" >&2; exit 130" INT
    # shellcheck disable=SC2064
    trap "echo \"$NETNS_TAG: terminated; cleaning up\" >&2; exit 143" TERM
}

# Polls until cmd succeeds (an event: a port listening, a file there), at most $1 s.
wait_for() {
    local limit=$1 t0
    shift
    t0=$(date +%s)
    until "$@" >/dev/null 2>&1; do
        [ $(($(date +%s) - t0)) -ge "$limit" ] && return 1
        sleep 0.05
    done
}
listening() { ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q LISTEN; } # NS PORT

# ---- the emulated LAN ---------------------------------------------------------
# Leftovers of an earlier run that was killed -9 (nothing else uses the prefix).
netns_remove_leftovers() {
    local ns p
    for ns in $(ip netns list 2>/dev/null | awk -v p="^$NS-" '$1 ~ p { print $1 }'); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns"
    done
}

# tbf parameters for a rate like 100mbit: burst 2 ms of the rate (at least 16 kB),
# queue up to 20 ms.
tbf_args() {
    local r=$1 bps
    bps=$(awk -v r="$r" 'BEGIN { n = r + 0; u = tolower(substr(r, length(n "") + 1));
        m = u ~ /^g/ ? 1e9 : u ~ /^m/ ? 1e6 : u ~ /^k/ ? 1e3 : 1; print n * m }')
    local burst
    burst=$(awk -v b="$bps" 'BEGIN { x = b / 8 * 0.002; if (x < 16000) x = 16000; printf "%d", x }')
    echo "rate $r burst $burst latency 20ms"
}

# shape I RATE: host I's link in both directions
shape() {
    # shellcheck disable=SC2046 # tbf_args is words
    ip -n "$NS-h$1" link set eth0 up &&
        tc -n "$NS-h$1" qdisc replace dev eth0 root tbf $(tbf_args "$2") &&
        tc -n "$NS-br" qdisc replace dev "b$1" root tbf $(tbf_args "$2")
}

# lan_up N: the bridge namespace, N hosts, an sshd on each
lan_up() {
    local n=$1 i
    ip netns add "$NS-br" || return 1
    NS_MADE+=("$NS-br")
    ip -n "$NS-br" link add br0 type bridge && ip -n "$NS-br" link set br0 up || return 1
    for ((i = 1; i <= n; i++)); do
        ip netns add "$NS-h$i" || return 1
        NS_MADE+=("$NS-h$i")
        ip link add "slv$$h$i" type veth peer name "slb$$h$i" &&
            ip link set "slv$$h$i" netns "$NS-h$i" && ip link set "slb$$h$i" netns "$NS-br" &&
            ip -n "$NS-h$i" link set "slv$$h$i" name eth0 && ip -n "$NS-br" link set "slb$$h$i" name "b$i" &&
            ip netns exec "$NS-h$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
                net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.eth0.disable_ipv6=1 &&
            ip -n "$NS-h$i" addr add "10.77.0.$i/24" dev eth0 &&
            ip -n "$NS-h$i" link set lo up && ip -n "$NS-h$i" link set eth0 up &&
            ip -n "$NS-br" link set "b$i" master br0 && ip -n "$NS-br" link set "b$i" up || return 1
    done
    # one sshd per host, on its own address; a key and a client config made for this run
    mkdir -p /run/sshd "$SSHD/bin"
    chmod 700 "$SSHD"
    if [ ! -f "$SSHD/id" ]; then
        ssh-keygen -q -t ed25519 -N '' -C "$NS-host" -f "$SSHD/hostkey" &&
            ssh-keygen -q -t ed25519 -N '' -C "$NS-client" -f "$SSHD/id" || return 1
        cp "$SSHD/id.pub" "$SSHD/authorized_keys"
        echo "10.77.0.* $(cut -d' ' -f1,2 "$SSHD/hostkey.pub")" >"$SSHD/known_hosts"
        cat >"$SSHD/sshd_config" <<EOF
Port 22
HostKey $SSHD/hostkey
AuthorizedKeysFile $SSHD/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
LogLevel ERROR
MaxStartups 200:30:400
MaxSessions 200
Subsystem sftp internal-sftp
EOF
        cat >"$SSHD/ssh_config" <<EOF
Host 10.77.0.*
  User root
  IdentityFile $SSHD/id
  IdentitiesOnly yes
  UserKnownHostsFile $SSHD/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
EOF
        # sgp launch runs `ssh` and `scp` from PATH: these add the config above
        printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$SSHD/ssh_config" >"$SSHD/bin/ssh"
        printf '#!/bin/sh\nexec /usr/bin/scp -S /usr/bin/ssh -F %s "$@"\n' "$SSHD/ssh_config" >"$SSHD/bin/scp"
        chmod +x "$SSHD/bin/ssh" "$SSHD/bin/scp"
    fi
    for ((i = 1; i <= n; i++)); do
        ip netns exec "$NS-h$i" /usr/sbin/sshd -D -e -f "$SSHD/sshd_config" -o "ListenAddress=10.77.0.$i" \
            >>"$RUNS/sshd.log" 2>&1 &
        PIDS+=($!)
    done
    for ((i = 1; i <= n; i++)); do
        wait_for 20 listening "$NS-h$i" 22 || { echo "$NETNS_TAG: sshd on host $i did not start" >&2; return 1; }
    done
    for ((i = 1; i <= n; i++)); do
        ip netns exec "$NS-h1" "$SSHD/bin/ssh" "root@10.77.0.$i" true ||
            { echo "$NETNS_TAG: cannot ssh from host 1 to 10.77.0.$i" >&2; return 1; }
    done
}

# lan_split "I J ...": a partition. Those hosts' bridge ports leave br0 for a
# second bridge, br1 (made on first use): they still reach each other, and the
# hosts left on br0 reach each other, but no frame crosses (a switch split in
# two: no link goes down, no error reaches a sender, what is sent across is
# dropped). The ports stay up and keep their tbf.
lan_split() {
    local i
    if ! ip -n "$NS-br" link show br1 >/dev/null 2>&1; then
        ip -n "$NS-br" link add br1 type bridge && ip -n "$NS-br" link set br1 up || return 1
    fi
    for i in $1; do ip -n "$NS-br" link set "b$i" master br1 || return 1; done
}
# lan_heal: every port of br1 back on br0
lan_heal() {
    local p
    for p in $(ip -n "$NS-br" -o link show master br1 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
        ip -n "$NS-br" link set "$p" master br0 || return 1
    done
}

# lan_down "I J ...": those hosts' links go down (ip link set eth0 down in
# each host: its route goes, a send fails at once, a connect finds no route);
# lan_up_again "I J ...": they come back up.
lan_down() {
    local i
    for i in $1; do ip -n "$NS-h$i" link set eth0 down || return 1; done
}
lan_up_again() {
    local i
    for i in $1; do ip -n "$NS-h$i" link set eth0 up || return 1; done
}

# tx_all N: each host's eth0 tx_bytes, space separated
tx_all() {
    local i out=()
    for ((i = 1; i <= $1; i++)); do
        out+=("$(ip netns exec "$NS-h$i" cat /sys/class/net/eth0/statistics/tx_bytes)")
    done
    echo "${out[*]}"
}

# reap_runs N PATTERN...: kills what a run left in the hosts (a capped run's
# peers): the processes whose executable matches a PATTERN (a shell glob), not
# the sshds.
reap_runs() {
    local n=$1 i p exe pat
    shift
    for ((i = 1; i <= n; i++)); do
        for p in $(ip netns pids "$NS-h$i" 2>/dev/null); do
            exe=$(readlink "/proc/$p/exe" 2>/dev/null)
            for pat in "$@"; do
                # shellcheck disable=SC2254 # $pat is a glob
                case $exe in $pat) kill -KILL "$p" 2>/dev/null ;; esac
            done
        done
    done
}
