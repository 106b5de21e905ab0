#!/usr/bin/env bash
# Reference rows for the byte-level GPT's bytes-against-loss frontier
# (issue #43): one process, DDP, DiLoCo (swept, best reported) and
# SparseLoCo as its authors run it, in PyTorch (lm_reference_torch.py), on
# the text frontier.sh uses (FRONTIER_TEXT=1: the first 1 MiB of the Brown
# corpus's training part, the first 64 KiB of its held-out tenth), gpt:4:128:4,
# context 64, total batch 32 windows, 8 workers, AdamW lr 0.006, 0.1 epochs
# of warm-up, sgp's cosine schedule, 1 epoch, seed 1, the same for every row.
# The table (validation loss of the shared model, vs one process, bytes sent
# per worker, how many times fewer than DDP) goes to
# build/bench/lm_reference.txt, the JSON lines (with each row's loss curve) to
# build/bench/lm_reference.jsonl, a gnuplot PNG of validation loss against
# bytes per worker (log x), one series per system and setting, to
# build/bench/lm_reference.png, and the loss curves against tokens to
# build/bench/lm_reference_curve.png. sgp's rows are added to the plot from
# frontier.sh's text tables (build/bench/frontier_text*.txt, bytes of all 8
# peers / 8) where there are some, and from LMREF_SGP_ROWS.
#
#   bash tests/bench/lm_reference.sh                       # after make data; about 45 CPU minutes
#   LMREF_ROWS="alone diloco:10:0.7:0.9 sparseloco:10:64" bash tests/bench/lm_reference.sh
#   LMREF_TRAIN_BYTES=65536 LMREF_CURVE=2 bash tests/bench/lm_reference.sh   # a quick smoke run
#
# Rows: alone, ddp, diloco:H:OUTER_LR:OUTER_MOMENTUM, sparseloco:H:K (see
# lm_reference_torch.py --help). Knobs: LMREF_ROWS (default: alone, ddp,
# DiLoCo H 5, 10, 20 x outer (0.7, 0.9), (0.5, 0.5), (1.0, 0) and SparseLoCo
# H 5, 10 x K 32, 64), LMREF_JOBS (processes at once, 1 thread each; default
# 1), LMREF_EPOCHS (1), LMREF_LR (0.006), LMREF_SEED (1), LMREF_CURVE
# (validation points a row, 4), LMREF_TRAIN_BYTES / LMREF_VAL_BYTES (1 MiB,
# 64 KiB), LMREF_EXTRA (more lm_reference_torch.py options), LMREF_NAME
# (lm_reference), LMREF_MORE (JSON-lines files of earlier runs, e.g. a copy
# of build/bench/lm_reference.jsonl: their rows join the table and the plot
# where this run has none of that name; LMREF_ROWS=" " runs none;
# tests/bench/lm_reference_rows.jsonl holds the 16 rows of tests/bench/README.md),
# LMREF_SGP_ROWS (more sgp points by hand, "LABEL:LOSS:MB" or
# "SERIES|LABEL:LOSS:MB" with MB the bytes of all 8 peers, space-separated), PYTHON
# (/usr/bin/python3, Debian's python3-torch; installed with gnuplot-nox when
# missing, as root).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
NAME=${LMREF_NAME:-lm_reference}
JOBS=${LMREF_JOBS:-1}
ROWS=${LMREF_ROWS:-"alone ddp diloco:5:0.7:0.9 diloco:10:0.7:0.9 diloco:20:0.7:0.9 diloco:5:0.5:0.5
  diloco:10:0.5:0.5 diloco:20:0.5:0.5 diloco:5:1:0 diloco:10:1:0 diloco:20:1:0 sparseloco:5:32
  sparseloco:5:64 sparseloco:10:32 sparseloco:10:64"}
OUT=$root/build/bench

corpus=${SGP_DATA_DIR:-$root/build/data}/brown/brown.txt
[ -f "$corpus" ] || { echo "lm_reference.sh: $corpus not there (run make data)" >&2; exit 1; }
need=()
"$PY" -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
if [ ${#need[@]} -gt 0 ]; then
    echo "lm_reference.sh: installing ${need[*]}" >&2
    apt-get -o DPkg::Lock::Timeout=600 update -q >&2 &&
        env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${need[@]}" >&2 ||
        echo "lm_reference.sh: could not install ${need[*]}" >&2
fi

# The text, as frontier.sh's FRONTIER_TEXT=1 makes it (the same files).
textdir=$OUT/text
# shellcheck source=tests/bench/text_split.sh
. "$here/text_split.sh"
text_split "$corpus" "$textdir" "${LMREF_TRAIN_BYTES:-1048576}" "${LMREF_VAL_BYTES:-65536}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
read -r -d '' -a rows <<<"$ROWS" || true
# Rows dealt round-robin to LMREF_JOBS processes, one thread each.
pids=()
for ((j = 0; j < JOBS; j++)); do
    mine=()
    for ((i = j; i < ${#rows[@]}; i += JOBS)); do mine+=("${rows[$i]}"); done
    [ ${#mine[@]} -gt 0 ] || continue
    # shellcheck disable=SC2086
    OMP_WAIT_POLICY=PASSIVE "$PY" "$here/lm_reference_torch.py" --train "$textdir/train.txt" \
        --val "$textdir/val.txt" --epochs "${LMREF_EPOCHS:-1}" --lr "${LMREF_LR:-0.006}" \
        --seed "${LMREF_SEED:-1}" --curve "${LMREF_CURVE:-4}" --threads 1 ${LMREF_EXTRA:-} "${mine[@]}" \
        >"$work/$j.out" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$work"/*.out 2>/dev/null | grep '^{' >"$work/all.jsonl" || true
# Rows of earlier runs (their JSON lines) join the table where this run has no row of that name.
for f in ${LMREF_MORE:-}; do
    "$PY" - "$f" "$work/all.jsonl" <<'EOF2'
import json, sys
have = {json.loads(l)["row"] for l in open(sys.argv[2])}
more = [l for l in open(sys.argv[1]) if l.startswith("{") and json.loads(l)["row"] not in have]
open(sys.argv[2], "a").write("".join(more))
EOF2
    mapfile -t -O "${#rows[@]}" rows < <(grep -o '"row": "[^"]*"' "$f" | cut -d'"' -f4)
done

export SGP_ROWS_BY_HAND=${LMREF_SGP_ROWS:-} LMREF_ROWS_ORDER="${rows[*]}"
"$PY" - "$work/all.jsonl" "$OUT" "$NAME" "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo -)" <<'EOF'
import glob, json, os, re, subprocess, sys
src, out, name, commit = sys.argv[1:5]
order = os.environ.get("LMREF_ROWS_ORDER", "").split()
rows = sorted((json.loads(l) for l in open(src)), key=lambda r: order.index(r["row"]) if r["row"] in order else 0)
alone = next((r for r in rows if r["system"] == "alone"), None)
r0 = rows[0]
W, P, steps = 8, r0["parameters"], r0["steps"]
ddp_bytes = steps * 2 * (W - 1) / W * 4 * P
best = {}
for r in rows:  # the best DiLoCo setting at each H
    if r["system"] == "diloco" and (r["H"] not in best or r["val_loss"] < best[r["H"]]["val_loss"]):
        best[r["H"]] = r
lines = [f"{r0['model']}, context {r0['context']}, total batch {r0['batch']} windows, {r0['tokens']:,} tokens, "
         f"AdamW lr {r0['lr']}, {W} workers (alone: 1); at {commit}",
         f"bytes: sent per worker (ring all-reduce 2(n-1)/n x 4P a sync for ddp and DiLoCo; SparseLoCo a ring "
         f"all-gather, (n-1) x message); fewer: than ddp's {ddp_bytes / 1e6:,.1f} MB; * = best DiLoCo at its H",
         f"{'row':<22} {'val loss':>8} {'bits/B':>6} {'vs alone':>8} {'syncs':>5} {'MB a worker':>11} {'fewer':>7}"]
for r in rows:
    vs = f"{100 * (r['val_loss'] / alone['val_loss'] - 1):+.2f}%" if alone else "-"
    fewer = f"{ddp_bytes / r['bytes_per_worker']:,.0f}x" if r["bytes_per_worker"] else "-"
    mark = " *" if r["system"] == "diloco" and best.get(r["H"]) is r else ""
    lines.append(f"{r['row'] + mark:<22} {r['val_loss']:>8.4f} {r['bits_per_byte']:>6.3f} {vs:>8} {r['syncs']:>5} "
                 f"{r['bytes_per_worker'] / 1e6:>11.2f} {fewer:>7}")
if best:
    b = min(best.values(), key=lambda r: r["val_loss"])
    lines.append(f"best DiLoCo: {b['row']} at {b['val_loss']:.4f}" +
                 (f" ({100 * (b['val_loss'] / alone['val_loss'] - 1):+.2f}% vs alone)" if alone else ""))
curves = ["loss curves (step: validation loss of the shared model, MB sent a worker):"]
for r in rows:
    curves.append(f"  {r['row']:<20} " + "  ".join(f"{c[0]}: {c[3]:.4f} {c[2] / 1e6:.2f}" for c in r["curve"]))
text = "\n".join(lines + curves)
print(text)
open(f"{out}/{name}.txt", "w").write(text + "\n")
open(f"{out}/{name}.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in rows))

# sgp's points: frontier.sh's text tables (bytes of all 8 peers), and any given by hand.
sgp = []
for f in sorted(glob.glob(f"{out}/frontier_text*.txt")):
    for l in open(f):
        t = l.split()
        if len(t) >= 12 and t[-2].endswith("MB") and t[-1].endswith("x") and re.match(r"^\d+\.\d+$", t[5]):
            sgp.append((f"{t[0]}/{t[4]}", float(t[5]), float(t[-2][:-2]) / 8))
for item in os.environ.get("SGP_ROWS_BY_HAND", "").split():
    label, loss, mb = item.rsplit(":", 2)  # (label: POINT, or SERIES|POINT)
    sgp.append((label, float(loss), float(mb) / 8))
if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) != 0:
    print("(no gnuplot: no plot)")
    sys.exit(0)
series = {}
for r in rows:
    if r["system"] == "ddp":
        key = "DDP"
    elif r["system"] == "diloco":
        key = f"DiLoCo outer lr {r['outer_lr']:g} momentum {r['outer_momentum']:g}"
    elif r["system"] == "sparseloco":
        key = f"SparseLoCo top-{r['k']} of 4096, 2 bits"
    else:
        continue
    series.setdefault(key, []).append((r["bytes_per_worker"] / 1e6, r["val_loss"], f"H{r.get('H', 1)}"))
for label, loss, mb in sgp:
    key, point = label.split("|", 1) if "|" in label else ("", label.split("/")[0])
    series.setdefault(f"sgp {key} (bytes of 8 peers / 8)".replace("  ", " "), []).append((mb, loss, point))
plot = ["set terminal pngcairo noenhanced size 1100,700", f"set output '{out}/{name}.png'", "set logscale x",
        "set xlabel 'bytes sent per worker (MB, log)'",
        "set ylabel 'validation loss of the shared model (nats per byte)'", "set grid", "set key font ',9' bottom left",
        f"set title 'bytes against validation loss, {r0['model']}, {r0['tokens']:,} tokens, {W} workers'"]
if alone:  # the one-process line and +2%, +3% in view
    plot.append(f"set yrange [{alone['val_loss'] - 0.03}:*]")
    for f, dt in ((1, 1), (1.02, 2), (1.03, 3)):
        plot.append(f"set arrow from graph 0, first {alone['val_loss'] * f} to graph 1, first "
                    f"{alone['val_loss'] * f} nohead dt {dt} lc rgb 'gray'")
    plot.append(f"set label 'one process {alone['val_loss']:.4f} (dashed: +2%, +3%)' at graph 0.6, first "
                f"{alone['val_loss']} offset 0,-0.7 font ',9' tc rgb 'gray40'")
cmds, blocks, cmds_keys = [], [], []
for key, pts in series.items():
    pts.sort()
    data = "\n".join(f"{b} {a} {h}" for b, a, h in pts) + "\ne"
    blocks += [data, data]
    sgp_colours = ("black", "gray50", "dark-green", "brown")  # (sgp's series apart from the references' colours)
    n_sgp = sum(k.startswith("sgp") for k in cmds_keys)
    style = f"points pt {7 + 2 * n_sgp} ps 1.3 lc rgb '{sgp_colours[n_sgp % 4]}'" if key.startswith("sgp") else "linespoints"
    cmds_keys.append(key)
    cmds.append(f"'-' using 1:2 with {style} title '{key}'")
    cmds.append("'-' using 1:2:3 with labels offset 0,0.8 font ',8' notitle")
plot.append("plot " + ", ".join(cmds))
subprocess.run(["gnuplot"], input=("\n".join(plot) + "\n" + "\n".join(blocks) + "\n").encode(), check=False)
curve = ["set terminal pngcairo noenhanced size 1100,700", f"set output '{out}/{name}_curve.png'",
         "set xlabel 'tokens'", "set ylabel 'validation loss of the shared model (nats per byte)'", "set grid",
         "set key font ',8' top right", f"set title 'validation loss along the run, {r0['model']}'"]
data = ["\n".join(f"{c[1]} {c[3]}" for c in r["curve"]) + "\ne" for r in rows]
curve.append("plot " + ", ".join(f"'-' using 1:2 with linespoints title '{r['row']}'" for r in rows))
subprocess.run(["gnuplot"], input=("\n".join(curve) + "\n" + "\n".join(data) + "\n").encode(), check=False)
print(f"plot: {out}/{name}.png (loss against bytes), {out}/{name}_curve.png (loss against tokens)")
EOF
