#!/usr/bin/env bash
# Dropout's share of a training step: the same runs with --dropout 0.5 and with --dropout 0
# (identical otherwise: ReLU runs through the same fused kernel with p = 0), interleaved A B A B
# over rounds, full-batch GCN 2x128 and sampled SAGE 3x128 (fanouts 15,10,5, batch 1024) on a
# synthetic graph (200k nodes by default, average degree 20, 128 features), P = 1 rank x THREADS
# threads, features row-normalized. Per run the median of the training seconds per epoch after the
# warm-up epochs (evaluation left out); per setting the range over rounds and the share
# 1 - t(dropout 0) / t(dropout 0.5) from the medians of each round, with the CPU model, the ISA
# Tessel's kernels take, and the load average before and after.
#
# With --profile (needs perf), one more run per mode and dropout under `perf record` (past the
# set-up), and the share of the samples in the dropout kernels: the draws (keep_words_*), the
# input features' dropout (dropout_rows_*<false>: in the sampled step that is the feature gather
# with the dropout fused into it, which with p = 0 is a row copy: memmove and its loop), ReLU with
# the next layer's dropout (dropout_rows_*<true>, the ReLU's own work included) and their
# backward (dropout_grad_*). What the dropout adds: those shares in the p = 0.5 profile less the
# same in the p = 0 one (its gather a plain row copy, its ReLU drawing nothing). Environment
# FULL_PROFILE_EPOCHS (default 40) and SAMPLED_PROFILE_EPOCHS (default 5) set the profiled runs.
#
# scripts/bench/dropout_share.sh [--profile] [ROUNDS (default 3)]; environment THREADS (default
# 2), NODES (default 200000), FULL_EPOCHS (default 12), SAMPLED_EPOCHS (default 3), WORK (default
# build/bench-dropout), TESSEL (default build/src/cli/tessel). TESSEL_CPU_ISA=avx2 with
# ONEDNN_MAX_CPU_ISA=AVX2 holds Tessel's kernels and oneDNN to AVX2 on an AVX-512 machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh
profile=0
if [ "${1:-}" = --profile ]; then
  profile=1
  shift
fi
rounds="${1:-3}"
threads="${THREADS:-2}"
nodes="${NODES:-200000}"
work="${WORK:-build/bench-dropout}"
tessel="${TESSEL:-build/src/cli/tessel}"
bench_require dropout_share.sh "$tessel" python3 uptime
[ "$profile" = 0 ] || bench_require dropout_share.sh "$tessel" perf
mkdir -p "$work"
store="$work/synth.h5" parts="$work/p1"
if [ "$nodes" != 200000 ]; then store="$work/synth-n$nodes.h5" parts="$work/p1-n$nodes"; fi
bench_synthetic "$tessel" "$store" "$nodes" 20 16 128
bench_parts "$tessel" "$store" 1 "$parts"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo avx2) (Tessel's kernels choose by CPU features${TESSEL_CPU_ISA:+; TESSEL_CPU_ISA=$TESSEL_CPU_ISA}${ONEDNN_MAX_CPU_ISA:+; ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA})"
echo "graph: $nodes nodes, average degree 20, 128 features; $threads threads"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# Row-normalized features: with the raw synthetic features the 3-layer SAGE at dropout 0.5 falls to
# a constant output (dead ReLUs) while the dropout 0 run learns, and the two steps then do
# different work.
common=(--threads "$threads" --hidden 128 --lr 0.01 --seed 0 --eval-every 1000000
  --normalize-features row)
full_model=(--mode full --model gcn --layers 2)
sampled_model=(--mode sampled --model sage --layers 3 --fanouts 15,10,5 --batch-size 1024)
full=("${full_model[@]}" --epochs "${FULL_EPOCHS:-12}")
sampled=("${sampled_model[@]}" --epochs "${SAMPLED_EPOCHS:-3}")
for round in $(seq 1 "$rounds"); do
  for mode in full sampled; do
    for p in 0.5 0; do
      declare -n flags="$mode"
      "$tessel" train "$parts" "${common[@]}" "${flags[@]}" --dropout "$p" \
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
            # Training seconds: the last epoch is evaluated, and its evaluation is left out.
            t[p].append(statistics.median(e["epoch_s"] - e["phases"].get("eval", 0.0)
                                          for e in epochs[warm[mode]:]))
    shares = [1 - b / a for a, b in zip(t["0.5"], t["0"])]
    print(f"{mode}: dropout 0.5 {min(t['0.5']):.3f}-{max(t['0.5']):.3f} s, dropout 0 "
          f"{min(t['0']):.3f}-{max(t['0']):.3f} s per epoch; dropout's share "
          f"{100 * min(shares):.1f}-{100 * max(shares):.1f}% (median {100 * statistics.median(shares):.1f}%)")
PY
[ "$profile" = 1 ] || exit 0

# perf record past the set-up (the store read and the matrices built: 3 s per 200k nodes), over
# more epochs than the timed runs.
delay=$((3000 * nodes / 200000))
full_profile=("${full_model[@]}" --epochs "${FULL_PROFILE_EPOCHS:-40}")
sampled_profile=("${sampled_model[@]}" --epochs "${SAMPLED_PROFILE_EPOCHS:-5}")
for mode in full sampled; do
  for p in 0.5 0; do
    declare -n flags="${mode}_profile"
    OMP_WAIT_POLICY=passive perf record -q -F 999 -D "$delay" -o "$work/perf-$mode-$p.data" -- \
      "$tessel" train "$parts" "${common[@]}" "${flags[@]}" --dropout "$p" >/dev/null 2>&1
    perf report -q -n -i "$work/perf-$mode-$p.data" --no-children --sort symbol --stdio 2>/dev/null > "$work/perf-$mode-$p.txt"
  done
done
python3 - "$work" <<'PY'
import re, sys
work = sys.argv[1]
keys = ["draws", "input dropout", "relu+dropout", "backward", "row copy"]
def samples(path):
    # `perf report -n --sort symbol` lines: "  12.34%  5678  [.] symbol".
    out, total = dict.fromkeys(keys, 0), 0
    for line in open(path):
        m = re.match(r"\s+\d+\.\d+%\s+(\d+)\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        count, symbol = int(m.group(1)), m.group(2)
        total += count
        if "keep_words_" in symbol: out["draws"] += count
        elif "dropout_grad_" in symbol: out["backward"] += count
        elif re.search(r"dropout_rows_\w+<true>", symbol): out["relu+dropout"] += count
        elif re.search(r"dropout_rows_\w+<false>", symbol): out["input dropout"] += count
        elif "gather_dropout_rows" in symbol or "__memmove" in symbol: out["row copy"] += count
    return out, total
for mode in ("full", "sampled"):
    (a, ta), (b, tb) = samples(f"{work}/perf-{mode}-0.5.txt"), samples(f"{work}/perf-{mode}-0.txt")
    added = sum(a[k] / ta - b[k] / tb for k in keys)
    print(f"{mode} profile, % of samples, dropout 0.5 / 0: " +
          ", ".join(f"{k} {100 * a[k] / ta:.1f} / {100 * b[k] / tb:.1f}" for k in keys) +
          f"; dropout adds {100 * added:.1f} points ({ta} / {tb} samples)")
PY
