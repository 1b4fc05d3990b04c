#!/usr/bin/env bash
# Dropout's share of a training step: the same runs with --dropout 0.5 and with --dropout 0
# (identical otherwise: ReLU runs through the same fused kernel with p = 0), interleaved A B A B
# over rounds, full-batch GCN 2x128 and sampled SAGE 3x128 (fanouts 15,10,5, batch 1024) on the
# 200k-node synthetic graph, P = 1 rank x THREADS threads. Per run the median of the epoch
# seconds after the warm-up epochs; per setting the range over rounds and the share
# 1 - t(dropout 0) / t(dropout 0.5) from the medians of each round, with the CPU model, the ISA
# Tessel's kernels take, and the load average before and after.
#
# scripts/bench/dropout_share.sh [ROUNDS (default 3)]; environment THREADS (default 2),
# WORK (default build/bench-dropout), TESSEL (default build/src/cli/tessel).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh
rounds="${1:-3}"
threads="${THREADS:-2}"
work="${WORK:-build/bench-dropout}"
tessel="${TESSEL:-build/src/cli/tessel}"
bench_require dropout_share.sh "$tessel" python3 uptime
mkdir -p "$work"
bench_synthetic "$tessel" "$work/synth.h5" 200000 20 16 128
bench_parts "$tessel" "$work/synth.h5" 1 "$work/p1"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo avx2) (Tessel's kernels choose by CPU features${TESSEL_CPU_ISA:+; TESSEL_CPU_ISA=$TESSEL_CPU_ISA})"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
common=(--threads "$threads" --hidden 128 --lr 0.01 --seed 0 --eval-every 1000000)
full=(--mode full --model gcn --layers 2 --epochs 12)
sampled=(--mode sampled --model sage --layers 3 --fanouts 15,10,5 --batch-size 1024 --epochs 3)
for round in $(seq 1 "$rounds"); do
  for mode in full sampled; do
    for p in 0.5 0; do
      declare -n flags="$mode"
      "$tessel" train "$work/p1" "${common[@]}" "${flags[@]}" --dropout "$p" \
        --metrics "$work/$mode-$p-$round.jsonl" >/dev/null 2>&1
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
warm = {"full": 2, "sampled": 1}
for mode in ("full", "sampled"):
    t = {p: [] for p in ("0.5", "0")}
    for r in range(1, rounds + 1):
        for p in t:
            epochs = [json.loads(l) for l in open(f"{work}/{mode}-{p}-{r}.jsonl") if '"epoch"' in l]
            t[p].append(statistics.median(e["epoch_s"] for e in epochs[warm[mode]:]))
    shares = [1 - b / a for a, b in zip(t["0.5"], t["0"])]
    print(f"{mode}: dropout 0.5 {min(t['0.5']):.3f}-{max(t['0.5']):.3f} s, dropout 0 "
          f"{min(t['0']):.3f}-{max(t['0']):.3f} s per epoch; dropout's share "
          f"{100 * min(shares):.1f}-{100 * max(shares):.1f}% (median {100 * statistics.median(shares):.1f}%)")
PY
