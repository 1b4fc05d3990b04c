#!/usr/bin/env bash
# Full-batch communication reduction: what --boundary-sampling (BNS-GCN), --halo-dtype
# (compressed halos), --halo-aggregation (SuperGCN) and --stale-halo (PipeGCN) buy. For each setting at P = 2 and 4: halo bytes per epoch and seconds per
# epoch (with the exposed exchange, the "communicate" phase) on a synthetic graph (200k nodes,
# 128 features; GCN 2x128), and the test accuracy at the best validation epoch on the shipped
# Cora (paper recipe, 200 epochs; the synthetic graph's labels carry no signal), with Cora's halo
# bytes per epoch. Writes fullbatch_comm.tsv, fullbatch_comm.md and, with matplotlib,
# fullbatch_comm.png (accuracy against halo bytes per epoch, one point per setting) to WORK.
#
# Environment (optional): TESSEL (binary, default build/src/cli/tessel), WORK (scratch folder,
# default build/bench-fullbatch-comm), NODES (200000), AVG_DEGREE (20), FEAT (128), HIDDEN
# (128), EPOCHS (8; the first 2 are warm-up), CORES (2), SEEDS (Cora seeds averaged, 3),
# RANKS ("2 4"), ONLY (a grep -E pattern of the settings to run besides f32), PYTHON (the
# interpreter for the table and the PNG).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-fullbatch-comm}"
nodes="${NODES:-200000}"
avg_degree="${AVG_DEGREE:-20}"
feat="${FEAT:-128}"
hidden="${HIDDEN:-128}"
epochs="${EPOCHS:-8}"
cores="${CORES:-2}"
seeds="${SEEDS:-3}"
ranks="${RANKS:-2 4}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require fullbatch_comm.sh "$tessel" jq python3
mkdir -p "$work"

synthetic="$work/synthetic-n${nodes}-d${avg_degree}-f${feat}.h5"
bench_synthetic "$tessel" "$synthetic" "$nodes" "$avg_degree" 16 "$feat"
cora="$work/cora.h5"
[ -f "$cora" ] || "$tessel" convert ogb datasets/samples/cora "$cora" >/dev/null

# label|flags: the settings, the plain exchange first.
settings=(
  "f32|"
  "boundary 0.5|--boundary-sampling 0.5"
  "boundary 0.1|--boundary-sampling 0.1"
  "boundary 0.01|--boundary-sampling 0.01"
  "bf16|--halo-dtype bf16"
  "f16|--halo-dtype f16"
  "int8|--halo-dtype int8"
  "boundary 0.1 + int8|--boundary-sampling 0.1 --halo-dtype int8"
  "pre-aggregation|--halo-aggregation pre"
  "auto-aggregation|--halo-aggregation auto"
  "stale|--stale-halo"
  "stale, smoothing 0.5|--stale-halo --stale-smoothing 0.5"
  "auto + stale + int8|--halo-aggregation auto --stale-halo --halo-dtype int8"
)
# ONLY (a grep -E pattern): run the settings whose label matches, and f32 always.
if [ -n "${ONLY:-}" ]; then
  kept=()
  for entry in "${settings[@]}"; do
    label=${entry%%|*}
    if [ "$label" = f32 ] || grep -qE -- "$ONLY" <<< "$label"; then kept+=("$entry"); fi
  done
  settings=("${kept[@]}")
fi

# median FILE EXPR: the median of EXPR over the epochs after the first two.
median() {
  jq -s "[ .[] | select(.summary | not) ] | .[2:] | map($2) | sort | .[length / 2 | floor]" "$1"
}

tsv="$work/fullbatch_comm.tsv"
printf "P\tsetting\tsynthetic_halo_MB_per_epoch\tsynthetic_s_per_epoch\tsynthetic_communicate_s\tcora_halo_KB_per_epoch\tcora_test_acc\n" > "$tsv"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for p in $ranks; do
  threads=$(bench_threads "$p" "$cores")
  bench_parts "$tessel" "$synthetic" "$p" "$work/synthetic-p$p"
  bench_parts "$tessel" "$cora" "$p" "$work/cora-p$p"
  for entry in "${settings[@]}"; do
    label=${entry%%|*}
    read -r -a flags <<< "${entry#*|}"
    tag="p$p-$(echo "$label" | tr ' +.' '_-_')"
    OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$p" -x OMP_NUM_THREADS \
      "$tessel" train "$work/synthetic-p$p" --mode full --model gcn --layers 2 --hidden "$hidden" \
      --dropout 0.5 --epochs "$epochs" --eval-every 1000000 --threads "$threads" --quiet \
      "${flags[@]}" --metrics "$work/synthetic-$tag.jsonl"
    acc_sum=0
    for seed in $(seq 0 $((seeds - 1))); do
      OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -np "$p" -x OMP_NUM_THREADS \
        "$tessel" train "$work/cora-p$p" --mode full --model gcn --layers 2 --hidden 16 \
        --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --normalize-features row --epochs 200 \
        --threads "$threads" --quiet --seed "$seed" "${flags[@]}" \
        --metrics "$work/cora-$tag-s$seed.jsonl"
      acc=$(jq -s '.[-1].test_acc' "$work/cora-$tag-s$seed.jsonl")
      acc_sum=$(python3 -c "print($acc_sum + $acc)")
    done
    synthetic_metrics="$work/synthetic-$tag.jsonl"
    printf "%s\t%s\t%.2f\t%.4f\t%.4f\t%.1f\t%.4f\n" "$p" "$label" \
      "$(median "$synthetic_metrics" '(.halo_bytes + .halo_grad_bytes) / 1e6')" \
      "$(median "$synthetic_metrics" '.epoch_s')" \
      "$(median "$synthetic_metrics" '.phases.communicate // 0')" \
      "$(median "$work/cora-$tag-s0.jsonl" '(.halo_bytes + .halo_grad_bytes) / 1e3')" \
      "$(python3 -c "print($acc_sum / $seeds)")" >> "$tsv"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
# The table needs any Python 3; the PNG one with matplotlib (Debian's python3-matplotlib).
python=${PYTHON:-python3}
"$python" -c "import matplotlib" 2>/dev/null || { [ -x /usr/bin/python3 ] && python=/usr/bin/python3; }
"$python" - "$tsv" "$work" "$cpu" "$load_before" "$load_after" "$seeds" <<'EOF'
import csv, os, sys
tsv, work, cpu, before, after, seeds = sys.argv[1:]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
lines = [f"Full-batch communication on {cpu}; load average {before} before, {after} after.",
         f"Synthetic graph: halo rows and gradients per training epoch, seconds per epoch and the",
         f"exposed exchange (medians of the epochs after the first two). Cora: test accuracy at the",
         f"best validation epoch, mean of {seeds} seeds, and its halo bytes per epoch.", "",
         "| P | setting | synthetic halo MB / epoch | vs f32 | s / epoch | communicate s | Cora halo KB / epoch | Cora test acc |",
         "|---|---|---|---|---|---|---|---|"]
base = {}
for r in rows:
    if r["setting"] == "f32":
        base[r["P"]] = float(r["synthetic_halo_MB_per_epoch"])
for r in rows:
    mb = float(r["synthetic_halo_MB_per_epoch"])
    ratio = base[r["P"]] / mb if mb > 0 else float("inf")
    lines.append(f"| {r['P']} | {r['setting']} | {mb:.2f} | {ratio:.1f}x fewer | {float(r['synthetic_s_per_epoch']):.3f} | "
                 f"{float(r['synthetic_communicate_s']):.3f} | {float(r['cora_halo_KB_per_epoch']):.1f} | {float(r['cora_test_acc']):.4f} |")
md = "\n".join(lines) + "\n"
open(os.path.join(work, "fullbatch_comm.md"), "w").write(md)
print(md)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("fullbatch_comm.sh: no matplotlib, no PNG")
    sys.exit(0)
fig, ax = plt.subplots(figsize=(7, 4.5))
for p in sorted({r["P"] for r in rows}):
    pts = [r for r in rows if r["P"] == p]
    xs = [float(r["cora_halo_KB_per_epoch"]) for r in pts]
    ys = [float(r["cora_test_acc"]) for r in pts]
    ax.scatter(xs, ys, label=f"P = {p}")
    for r, x, y in zip(pts, xs, ys):
        ax.annotate(r["setting"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
ax.set_xscale("symlog", linthresh=1)
ax.set_xlabel("Cora halo rows and gradients per epoch (KB)")
ax.set_ylabel(f"Cora test accuracy (mean of {seeds} seeds)")
ax.set_title("Full-batch GCN: accuracy against halo traffic")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(work, "fullbatch_comm.png"), dpi=120)
print(f"fullbatch_comm.sh: wrote {os.path.join(work, 'fullbatch_comm.png')}")
EOF
