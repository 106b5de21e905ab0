#!/bin/bash
# sgp.torch with the model on a GPU, sized for one short session on a GPU
# host: (1) GPT-2's shapes (peer/python/examples/gpt_torch.py --device) as
# 4 processes sharing the GPU, with the language-model recipe, overlapped
# and not, and at H 1: the caller's blocking share of its loop (peer.step's
# time against the GPU steps'), peak host RSS and device memory, the
# validation loss; (2) peer.step() at 124M and 350M parameters against a
# stand-in GPU step (tests/bench/torch_peer_step.py --device), push-sum and
# the recipe's all-gather with --overlap. Prints one table for each.
#
#   SGP_LIB=build/libsgp.so bash tests/bench/gpu.sh      (after make, make data)
#   GPU_DEVICE=cpu GPU_MODELS=2:64:2 GPU_SIZES=1e6 GPU_STEPS=20 bash tests/bench/gpu.sh   (a dry run)
#
# A GPU host without libuv, libsodium or OpenBLAS: pack the binaries with
# the libraries they load here (all but glibc's, libgcc_s and zlib, which
# PyTorch loads too: theirs stay the host's), carry the folder there:
#   bash tests/bench/gpu.sh --pack .dev      (after make build/sgp build/libsgp.so)
#   LD_LIBRARY_PATH=.dev/lib SGP_BIN=.dev/sgp SGP_LIB=.dev/libsgp.so bash tests/bench/gpu.sh
#
# Environment: GPU_DEVICE (cuda), GPU_MODELS ("12:768:12 24:1024:16": GPT-2
# small's and medium's layers, width and heads over a byte vocabulary,
# 85.5M and 302M parameters), GPU_STEPS (100 a run; H 1 runs a third),
# GPU_SIZES ("124e6 350e6", torch_peer_step.py's), GPU_STEP_MS (20, its
# stand-in step), GPU_DIR (a fresh temporary directory), SGP_BIN
# (build/sgp: it writes the clusters), PYTHON (python3).
set -euo pipefail
case ${1:-} in
-h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
--pack | '') ;;
*) echo "gpu.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PY=${PYTHON:-python3}
SGP=${SGP_BIN:-$root/build/sgp}
export SGP_LIB=${SGP_LIB:-$root/build/libsgp.so} SGP_BIN=$SGP OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
DEV=${GPU_DEVICE:-cuda} MODELS=${GPU_MODELS:-12:768:12 24:1024:16} STEPS=${GPU_STEPS:-100}
SIZES=${GPU_SIZES:-124e6 350e6} STEP_MS=${GPU_STEP_MS:-20}
if [ "${1:-}" = --pack ]; then
    [ -n "${2:-}" ] || { echo "usage: bash tests/bench/gpu.sh --pack DIR" >&2; exit 2; }
    [ -x "$SGP" ] && [ -f "$SGP_LIB" ] || { echo "gpu.sh: no $SGP or $SGP_LIB (run make first)" >&2; exit 1; }
    mkdir -p "$2/lib"
    cp "$SGP" "$SGP_LIB" "$2/"
    ldd "$SGP" "$SGP_LIB" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|libz|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$2/lib/"
    du -sh "$2"; ls "$2/lib"
    exit 0
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "gpu.sh: $PY cannot import torch" >&2; exit 1; }
[ -x "$SGP" ] && [ -f "$SGP_LIB" ] || { echo "gpu.sh: no $SGP or $SGP_LIB (run make first)" >&2; exit 1; }
[ -f build/data/brown/brown.txt ] || { echo "gpu.sh: run make data first (the Brown corpus)" >&2; exit 1; }
if [ "$DEV" != cpu ]; then
    "$PY" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
        { echo "gpu.sh: torch sees no GPU (GPU_DEVICE=cpu for a dry run)" >&2; exit 1; }
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
dir=${GPU_DIR:-$(mktemp -d /tmp/sgp-gpu-XXXXXX)}
mkdir -p "$dir"
ex=peer/python/examples/gpt_torch.py

# four NAME MODEL STEPS ARGS...: 4 processes of gpt_torch.py on a fresh complete cluster.
four() {
    local name=$1 model=$2 steps=$3; shift 3
    "$SGP" launch --peers 4 --prepare --topology complete --run-dir "$dir/$name" >/dev/null
    local pids=() rc=0
    for i in 0 1 2 3; do
        "$PY" $ex --device "$DEV" --model "$model" --steps "$steps" --context 64 --batch 8 --val-bytes 4096 \
            --threads 1 --dead-timeout 120 --checkpoint "$dir/$name/$i.ckpt" --cluster "$dir/$name/cluster.conf" \
            --id $i "$@" >"$dir/$name/peer$i.out" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || { echo "gpu.sh: a peer of '$name' failed: see $dir/$name" >&2; tail -n 5 "$dir/$name"/peer*.out >&2; exit 1; }
}

# row NAME ARGS: one line of the table from the four summaries.
row() {
    "$PY" - "$dir/$1" "$1" "$2" <<'EOF'
import json, sys, glob
d, name, args = sys.argv[1:4]
s = [json.loads(l[8:]) for f in sorted(glob.glob(d + "/peer*.out")) for l in open(f) if l.startswith("summary ")]
step = [1e3 * (x["loop_seconds"] - x["gossip_seconds"]) / x["steps"] for x in s]
block = [100 * x["blocking_share"] for x in s]
per_round = [1e3 * x["gossip_seconds"] / max(1, x["round"]) for x in s]
rss = [x["peak_rss_mb"] for x in s]
print("| %s | %s | %.1fM | %.0f-%.0f | %s | %.0f-%.0f | %.0f-%.0f | %s | %s |" % (
    name, args, s[0]["parameters"] / 1e6, min(step), max(step), ", ".join("%.1f" % b for b in block),
    min(per_round), max(per_round), min(rss), max(rss),
    ", ".join("%.0f" % x["peak_device_mb"] for x in s) if "peak_device_mb" in s[0] else "-",
    ", ".join(sorted({"%.4f" % x["validation_loss"] for x in s}))))
EOF
}

echo
echo "GPT-2's shapes through sgp.torch, 4 processes on one $DEV, context 64, batch 8 in all ($dir)"
echo
echo "| run | options | parameters | step (ms, a process) | peer.step against the steps (%) | peer.step a round (ms) | peak RSS (MiB) | peak device (MiB) | validation loss |"
echo "|---|---|---:|---:|---|---:|---:|---|---|"
for m in $MODELS; do
    tag=${m//:/-}
    four "$tag-lm-overlap" "$m" "$STEPS" --recipe lm --overlap
    row "$tag-lm-overlap" "--recipe lm --overlap"
    four "$tag-lm" "$m" "$STEPS" --recipe lm
    row "$tag-lm" "--recipe lm"
    h1=$((STEPS / 3 > 3 ? STEPS / 3 : 3))
    four "$tag-lm-h1" "$m" "$h1" --recipe lm --local-steps 1
    row "$tag-lm-h1" "--recipe lm --local-steps 1"
done

echo
echo "peer.step() against a stand-in step of $STEP_MS ms on $DEV (torch_peer_step.py, 2 peers, H 10)"
for p in $SIZES; do
    "$PY" tests/bench/torch_peer_step.py --device "$DEV" --params "$p" --local-steps 10 --step-ms "$STEP_MS" --rounds 8
    "$PY" tests/bench/torch_peer_step.py --device "$DEV" --params "$p" --local-steps 10 --step-ms "$STEP_MS" --rounds 8 \
        --codec sparseloco:32 --gather 0.95 --overlap
done
