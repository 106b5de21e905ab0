#!/usr/bin/env bash
# shellcheck disable=SC2059 # printf "$FMT": one format for the header and the rows
# Training-step throughput, sgp (nn/ on OpenBLAS) against PyTorch, measured in
# the same run with the same environment for both. Called by `make bench` as
#   BUILD=/abs/build bash tests/bench/run.sh
# Knobs (environment): BENCH_SECONDS  timed seconds per run (default 1)
#                      BENCH_REPEAT   runs per program and row, interleaved; the best counts (default 3)
#                      BENCH_TORCH=0  skip PyTorch (and its installation)
#                      BENCH_OMP_WAIT_POLICY  OMP_WAIT_POLICY for both (default PASSIVE; empty: leave unset)
#                      BENCH_ROWS     "MODEL BATCH [CONTEXT];..." (default: the rows below); a gpt:L:C:H
#                                     MODEL is a GPT row (gpt_step, tokens/s, CONTEXT default 64)
#                      BENCH_THREADS  thread counts (default "1 2")
#                      BENCH_CORETYPES  OPENBLAS_CORETYPE values, "unset" for none (default "Haswell unset")
#                      BENCH_GPT_CORETYPES  the same for GPT rows (default: BENCH_CORETYPES if set, else "unset")
#                      BENCH_TEXT     text for the GPT rows' windows (default $BUILD/data/brown/brown.txt;
#                                     both programs use random bytes if it cannot be read)
# The table goes to stdout and to $BUILD/bench/train.txt. See tests/bench/README.md.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-$root/build}
SGP_STEP=$BUILD/bench/train_step
TORCH_STEP=$here/train_step_torch.py
SGP_GPT=$BUILD/bench/gpt_step
TORCH_GPT=$here/gpt_step_torch.py
TEXT=${BENCH_TEXT:-$BUILD/data/brown/brown.txt}
PY=/usr/bin/python3 # Debian's python: python3-torch installs there, not into a pyenv on PATH
SECS=${BENCH_SECONDS:-1}
REPEAT=${BENCH_REPEAT:-3}
# Debian's torch runs its intra-op pool on GNU OpenMP and nn.Linear on the
# pthread build of OpenBLAS, which has its own pool. With OpenMP's default
# (active) waiting, torch's idle OpenMP threads spin on the cores OpenBLAS's
# threads need, and 2-thread torch drops 3-15x. PASSIVE makes the reference
# what torch can do here; sgp has no OpenMP, so it changes nothing for sgp.
OMP_WAIT=${BENCH_OMP_WAIT_POLICY-PASSIVE}
OUT=$BUILD/bench/train.txt

for bin in "$SGP_STEP" "$SGP_GPT"; do
    if [ ! -x "$bin" ]; then
        echo "run.sh: $bin not built (run 'make bench')" >&2
        exit 1
    fi
done
mkdir -p "$BUILD/bench"

# ---- PyTorch, the reference ----------------------------------------------------
have_torch() { [ -x "$PY" ] && "$PY" -c 'import torch' >/dev/null 2>&1; }
torch_ok=0
torch_note=
if [ "${BENCH_TORCH:-1}" = 0 ]; then
    torch_note="PyTorch skipped (BENCH_TORCH=0)"
elif have_torch; then
    torch_ok=1
else
    echo "run.sh: PyTorch not importable by $PY; installing python3-torch (Debian) for the reference column" >&2
    sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    # Lock::Timeout: wait for another apt/dpkg to finish instead of failing at once.
    if command -v apt-get >/dev/null &&
        $sudo apt-get -o DPkg::Lock::Timeout=600 update -q >&2 &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends python3-torch >&2 && have_torch; then
        torch_ok=1
    else
        torch_note="PyTorch could not be installed (apt-get install python3-torch failed): torch column skipped"
    fi
fi
[ -n "$torch_note" ] && echo "run.sh: $torch_note" >&2

# ---- one measurement --------------------------------------------------------------
# field NAME < line: the value of NAME=VALUE in a result line.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p"; }

# run_one sgp|torch CORETYPE MODEL BATCH THREADS [CONTEXT]: one result line on
# stdout (empty on failure). With a CONTEXT the row is a GPT row: gpt_step and
# gpt_step_torch.py, on windows of TEXT. The environment is built from scratch
# here so both programs see exactly the same BLAS settings; "unset" removes
# OPENBLAS_CORETYPE (an empty value is not the same: OpenBLAS then picks a
# different core).
run_one() {
    local prog=$1 ct=$2 model=$3 batch=$4 threads=$5 context=${6:-}
    local envs=(env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY OPENBLAS_NUM_THREADS="$threads"
        OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads")
    [ "$ct" = unset ] || envs+=(OPENBLAS_CORETYPE="$ct")
    [ -z "$OMP_WAIT" ] || envs+=(OMP_WAIT_POLICY="$OMP_WAIT")
    local args=(--model "$model" --batch "$batch" --threads "$threads" --seconds "$SECS")
    local sgp_bin=$SGP_STEP torch_py=$TORCH_STEP key=samples_per_second
    if [ -n "$context" ]; then
        args+=(--context "$context" --text "$TEXT")
        sgp_bin=$SGP_GPT torch_py=$TORCH_GPT key=tokens_per_second
    fi
    if [ "$prog" = sgp ]; then
        "${envs[@]}" "$sgp_bin" "${args[@]}" 2>/dev/null | grep "^$key="
    else
        "${envs[@]}" "$PY" "$torch_py" "${args[@]}" 2>/dev/null | grep "^$key="
    fi
}

# Other processes' CPU use while we measure, in cores: machine busy time (from
# /proc/stat) minus what our own children used (bash's `times`). On a shared
# machine this says which rows to distrust.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
machine_busy() { awk -v hz="$HZ" '/^cpu / { printf "%.3f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat; }
# `times` must run in this shell: inside $(...) it would report the subshell's
# own (empty) children, so it writes to a file and CHILD is read back.
TIMES_FILE=$(mktemp)
trap 'rm -f "$TIMES_FILE"' EXIT
children_cpu_to() { # children_cpu_to VAR: our children's user+sys seconds so far, into VAR
    times >"$TIMES_FILE"
    printf -v "$1" '%s' "$(awk 'NR == 2 { t = 0; for (i = 1; i <= NF; i++) { f = $i; sub(/s$/, "", f); split(f, a, "m"); t += a[1] * 60 + a[2] } printf "%.3f\n", t }' "$TIMES_FILE")"
}
now() { date +%s.%N; }
others_since() { # others_since T0 BUSY0 CHILD0 CHILD1 -> cores used by other processes since then
    awk -v t0="$1" -v b0="$2" -v c0="$3" -v c1="$4" -v t1="$(now)" -v b1="$(machine_busy)" \
        'BEGIN { w = t1 - t0; o = (b1 - b0) - (c1 - c0); if (o < 0) o = 0; printf "%.2f", (w > 0 ? o / w : 0) }'
}

best() { # best of the numbers on stdin ("-" if none)
    awk 'BEGIN { b = -1 } $1 != "" { if ($1 + 0 > b) b = $1 + 0 } END { if (b < 0) print "-"; else printf "%.0f\n", b }'
}

FMT='%-12s %5s %7s %-8s %-10s %9s %-7s %10s %10s %9s %6s  %s\n'
# GPT rows: MODEL BATCH CONTEXT. Batch 32 x 64 tokens for the small model (nanoGPT's
# CPU configuration), 16 x 64 for the 10.8M one (about a second a step on one core here).
ROWS=${BENCH_ROWS:-mlp:256,256 64;mlp:256,256 256;lenet 64;cnn 64;gpt:4:128:4 32 64;gpt:6:384:6 16 64}
# "cnn": the Fashion-MNIST CNN of the README (any spec of nn/MODELS.md may be a row's MODEL)
CNN_SPEC='conv:32:3:pad=1,relu,maxpool:2,conv:64:3:pad=1,relu,maxpool:2,fc:128,relu,dropout:0.25,fc'

THREADS=${BENCH_THREADS:-1 2}
CORETYPES=${BENCH_CORETYPES:-Haswell unset}
# The GPT rows take longer (a torch start-up and a few one-second steps per run):
# by default only with the core OpenBLAS detects, unless BENCH_CORETYPES says otherwise.
GPT_CORETYPES=${BENCH_GPT_CORETYPES:-${BENCH_CORETYPES:-unset}}

# ---- the table --------------------------------------------------------------------------
{
    echo "sgp vs PyTorch: one training step = forward + softmax cross-entropy + backward + SGD(momentum 0.9)"
    echo "  GPT rows (batch BxT): forward + next-token cross-entropy at every position + backward + AdamW(lr 1e-3,"
    echo "  wd 0.01; torch.optim.AdamW foreach=None, its per-tensor loop on CPU), in tokens/s"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host: $(uname -n); cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
    t0=$(now) b0=$(machine_busy)
    sleep 0.5
    echo "machine: $(nproc) cores; other processes were using $(others_since "$t0" "$b0" 0 0) cores just before the run"
    echo "method: ${SECS}s per run, best of $REPEAT runs per program, sgp and torch interleaved; OMP_WAIT_POLICY=${OMP_WAIT:-unset} for both"
    echo "sgp:   nn/ on $(env -u OPENBLAS_CORETYPE "$SGP_STEP" --describe 2>&1 | head -1) (OPENBLAS_CORETYPE unset)"
    if [ "$torch_ok" = 1 ]; then
        echo "torch: $(env -u OPENBLAS_CORETYPE "$PY" "$TORCH_STEP" --describe 2>&1 | head -1)"
        echo "       GPT rows: $(env -u OPENBLAS_CORETYPE "$PY" "$TORCH_GPT" --describe 2>&1 | head -1)"
        echo "       nn.Linear -> OpenBLAS sgemm (same library and core as sgp); LeNet's Conv2d -> oneDNN,"
        echo "       which ignores OPENBLAS_CORETYPE and picks its own ISA (so the LeNet rows are not BLAS vs BLAS)"
    else
        echo "torch: $torch_note"
    fi
    echo
    printf "$FMT" model batch threads coretype "blas core" params unit "sgp/s" "torch/s" sgp/torch others note
    printf "$FMT" ------------ ----- ------- -------- ---------- --------- ------- ---------- ---------- --------- ------ ----
} | tee "$OUT"

below=0 mismatch=0
IFS=';' read -r -a rows <<<"$ROWS"
for row in "${rows[@]}"; do
    read -r model batch context <<<"$row"
    [ -n "$model" ] || continue
    spec=$model
    [ "$model" = cnn ] && spec=$CNN_SPEC
    cts=$CORETYPES key=samples_per_second unit=samples shown=$batch
    case $model in
    gpt:*)
        context=${context:-64}
        cts=$GPT_CORETYPES key=tokens_per_second unit=tokens shown=${batch}x$context
        ;;
    *) context= ;;
    esac
    for threads in $THREADS; do
        for ct in $cts; do
            sgp_vals='' torch_vals='' core='' tcore='' c0='' c1='' params='' tparams='' data='' tdata=''
            t0=$(now) b0=$(machine_busy)
            children_cpu_to c0
            for ((r = 0; r < REPEAT; r++)); do
                # Alternate who goes first, so slow drift of a shared machine hits both alike.
                order="sgp torch"
                [ $((r % 2)) = 1 ] && order="torch sgp"
                for prog in $order; do
                    [ "$prog" = torch ] && [ "$torch_ok" != 1 ] && continue
                    line=$(run_one "$prog" "$ct" "$spec" "$batch" "$threads" "$context")
                    v=$(echo "$line" | field "$key")
                    if [ "$prog" = sgp ]; then
                        sgp_vals="$sgp_vals $v"
                        [ -n "$core" ] || core=$(echo "$line" | field core)
                        [ -n "$params" ] || params=$(echo "$line" | field params)
                        [ -n "$data" ] || data=$(echo "$line" | field data)
                    else
                        torch_vals="$torch_vals $v"
                        [ -n "$tcore" ] || tcore=$(echo "$line" | field core)
                        [ -n "$tparams" ] || tparams=$(echo "$line" | field params)
                        [ -n "$tdata" ] || tdata=$(echo "$line" | field data)
                    fi
                done
            done
            children_cpu_to c1
            others=$(others_since "$t0" "$b0" "$c0" "$c1")
            s=$(tr ' ' '\n' <<<"$sgp_vals" | best)
            t=$(tr ' ' '\n' <<<"$torch_vals" | best)
            ratio=- note=
            if [ "$s" != - ] && [ "$t" != - ]; then
                ratio=$(awk -v s="$s" -v t="$t" 'BEGIN { printf "%.2fx", s / t }')
                if awk -v s="$s" -v t="$t" 'BEGIN { exit !(s < t) }'; then
                    note="below target (>= 1.00x)"
                    below=$((below + 1))
                fi
            fi
            [ "$s" = - ] && note="sgp run failed"
            [ "$torch_ok" = 1 ] && [ "$t" = - ] && note="${note:+$note; }torch run failed"
            # Both must have run the same OpenBLAS kernels, or the row compares something else.
            [ -n "$tcore" ] && [ -n "$core" ] && [ "$tcore" != "$core" ] &&
                note="${note:+$note; }torch's OpenBLAS core: $tcore"
            # ... and the same model: a parameter count that differs means the torch side built another one.
            if [ -n "$tparams" ] && [ -n "$params" ] && [ "$tparams" != "$params" ]; then
                note="${note:+$note; }PARAMETERS DIFFER: torch has $tparams"
                mismatch=$((mismatch + 1))
            fi
            [ -n "$data" ] && note="${note:+$note; }data=$data"
            [ -n "$tdata" ] && [ -n "$data" ] && [ "$tdata" != "$data" ] && note="$note (torch: $tdata)"
            printf "$FMT" "$model" "$shown" "$threads" "$ct" "${core:--}" "${params:--}" "$unit" "$s" "$t" "$ratio" \
                "$others" "$note" | tee -a "$OUT"
        done
    done
done

{
    echo
    echo "coretype: OPENBLAS_CORETYPE for both programs (unset = OpenBLAS detects the CPU; 'blas core' is what sgp's"
    echo "OpenBLAS picked). threads: OpenBLAS/OpenMP threads and torch.set_num_threads. sgp/s, torch/s: samples/s,"
    echo "or tokens/s (batch x context) for GPT rows (unit column); higher is better. params: sgp's parameter count,"
    echo "checked against torch's. data: the GPT rows' text (brown = build/data/brown/brown.txt, random = random bytes)."
    echo "others: cores used by other processes while the row ran (of $(nproc)); a row with others > 0.2 is suspect:"
    echo "rerun it alone, e.g. BENCH_ROWS='mlp:256,256 256' make bench-run"
    if [ "$torch_ok" = 1 ]; then
        echo "target: sgp >= 1.00x PyTorch on every row; rows below it: $below"
        [ "$mismatch" = 0 ] || echo "ERROR: $mismatch rows where torch's model has another parameter count than sgp's"
    fi
    echo "table written to $OUT"
} | tee -a "$OUT"

# Codec throughput, next to memcpy of the same floats in the same process.
echo
echo "compression: encode and decode_add throughput, one core (tests/bench/compress_speed.c)"
"$BUILD/bench/compress_speed" | tee "$BUILD/bench/compress.txt"

# A row whose two programs built different models compared nothing: fail.
[ "$mismatch" = 0 ] || exit 1
