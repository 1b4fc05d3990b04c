#!/usr/bin/env bash
# Fixed runs: every mode at 1 and 2 ranks on the CPU, on the shipped Cora and england_covid, with
# metrics, predictions and checkpoints written to OUT. Run it at two commits and compare the two
# folders with `scripts/fixed_runs.sh --compare OUT_A OUT_B`: a change that claims to keep
# behaviour (a refactor) must leave everything identical except the timing fields.
#
#   scripts/fixed_runs.sh OUT [TESSEL]        (TESSEL defaults to build/src/cli/tessel)
#   scripts/fixed_runs.sh --compare A B
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--compare" ]; then
  python3 - "$2" "$3" <<'EOF'
import json, pathlib, re, subprocess, sys
a, b = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
# Fields that measure time or memory of the run, not its results.
TIMING = ("seconds", "_s", "time", "rss", "peak", "setup", "gflops", "throughput", "per_s",
          "bubble", "minor_faults", "host_bytes", "device_bytes", "hostname", "gemm_backend",
          "phases")
def timing(k):
    return any(t in k for t in TIMING)
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not timing(k)}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
def h5(path):
    text = subprocess.run(["h5dump", "-m", "%.17g", str(path)], capture_output=True, text=True,
                          check=True).stdout.splitlines()[1:]
    kept, skip = [], None
    for line in text:
        m = re.match(r'(\s*)ATTRIBUTE "([^"]*)" {', line)
        if skip is None and m and timing(m.group(2)):
            skip = m.group(1) + "}"
        elif skip is not None:
            if line == skip: skip = None
        else:
            kept.append(line)
    return kept
names = sorted({p.relative_to(a) for p in a.rglob("*") if p.is_file()} |
               {p.relative_to(b) for p in b.rglob("*") if p.is_file()})
differ = 0
for n in names:
    pa, pb = a / n, b / n
    if not pa.exists() or not pb.exists():
        print(f"only in {'B' if not pa.exists() else 'A'}: {n}"); differ += 1; continue
    if n.suffix == ".jsonl":
        la = [strip(json.loads(l)) for l in pa.read_text().splitlines() if l.strip()]
        lb = [strip(json.loads(l)) for l in pb.read_text().splitlines() if l.strip()]
        same = la == lb
    elif n.suffix == ".json":
        same = strip(json.loads(pa.read_text())) == strip(json.loads(pb.read_text()))
    elif n.suffix == ".log":
        continue
    elif n.suffix == ".h5":  # every value in full precision, timing attributes aside
        same = h5(pa) == h5(pb)
    else:
        same = pa.read_bytes() == pb.read_bytes()
    if not same:
        print(f"differs: {n}"); differ += 1
print(f"{len(names)} files, {differ} differ (timing fields and logs aside)")
sys.exit(1 if differ else 0)
EOF
  exit $?
fi

out=${1:?usage: scripts/fixed_runs.sh OUT [TESSEL] | --compare A B}
tessel=$(realpath "${2:-build/src/cli/tessel}")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rm -rf "$out" && mkdir -p "$out/data"
data="$out/data"
"$tessel" convert ogb datasets/samples/cora "$data/cora.h5" >/dev/null
"$tessel" convert temporal datasets/samples/england_covid/england_covid.json "$data/ec.h5" \
  --lags 8 --standardize >/dev/null
for p in 1 2; do
  "$tessel" partition "$data/cora.h5" --parts $p --out "$data/cora-$p" >/dev/null 2>&1
  "$tessel" partition "$data/ec.h5" --parts $p --out "$data/ec-$p" >/dev/null 2>&1
done

run() {  # name np dataset args...
  local name=$1 np=$2 dataset=$3
  shift 3
  mkdir -p "$out/$name/ckpt"
  mpirun --bind-to none -np "$np" "$tessel" train "$data/$dataset-$np" --threads 1 --seed 3 \
    --metrics "$out/$name/metrics.jsonl" --predictions "$out/$name/predictions.npz" \
    --checkpoint "$out/$name/ckpt" --checkpoint-every 5 "$@" >"$out/$name.log" 2>&1 ||
    { echo "fixed run $name failed:"; tail -5 "$out/$name.log"; exit 1; }
}
for np in 1 2; do
  run full-$np $np cora --mode full --model gcn --epochs 10 --eval-every 5 \
    --normalize-features row
  run sampled-$np $np cora --mode sampled --model sage --fanouts 5,5 --batch-size 64 \
    --epochs 4 --eval-every 2 --dropout 0.5
  run pipeline-$np $np cora --mode pipeline --hops 2 --mlp-layers 2 --hidden 32 --stages $np \
    --epochs 4 --eval-every 2
  run dynamic-$np $np ec --mode dynamic --model gcn-gru --hidden 16 --epochs 10 --eval-every 5
  run dynamic-vertex-$np $np ec --mode dynamic --model gcn-lstm --hidden 16 --epochs 6 \
    --eval-every 3 --temporal-partition vertex
  run dynamic-link-$np $np ec --mode dynamic --model gcn-gru --task link-prediction --hidden 16 \
    --layers 2 --dropout 0.3 --epochs 4 --eval-every 2 --temporal-partition vertex
  run dynamic-evolve-$np $np ec --mode dynamic --model evolvegcn-o --task link-prediction \
    --hidden 16 --layers 2 --dropout 0.3 --epochs 4 --eval-every 2
done
echo "fixed runs written to $out"
