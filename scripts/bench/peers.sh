#!/usr/bin/env bash
# Tessel, DGL and PyG side by side on one graph and one thread count, interleaved over rounds:
# full-batch GCN, GraphSAGE and GAT (seconds per training step and per forward-only evaluation)
# and sampled GraphSAGE and GAT (seconds per training epoch); per side the best and the median
# over rounds, the ratios Tessel / peer of both, and every run's CPU and wall seconds.
#
# scripts/bench/peers.sh [--install] [--venv DIR] [--work DIR] [--rounds R] [--threads T]
#                        [--epochs E] [--sampled-epochs E] [--ids generated|shuffled|both]
#                        [--orders LIST] [--ranks LIST] [--workloads LIST] [--preset products]
#                        [--sides LIST] [--prepare | --round R | --report]
#   --install   make two virtual environments under the --venv folder (default build/peers-venv):
#               dgl/ with DGL 2.1.0, torch 2.2.1, torchdata 0.7.1 and numpy < 2 (what DGL 2.1
#               needs), pyg/ with PyG 2.8.1 and the current torch. torch comes from PyTorch's CPU
#               index where it can be reached, else from PyPI, whose wheels pull a few GB of CUDA
#               libraries even for CPU use.
#   --rounds    rounds, at least 3 (default 3). A round runs each workload in turn (full GCN, full
#               SAGE, sampled SAGE) and each one on every side in turn (Tessel P=1, Tessel P=2,
#               DGL, PyG edge_index, PyG sparse), one process per run, so that every side sees
#               the same stretches of the machine's load.
#   --workloads comma-separated subset of full-gcn,full-sage,sampled-sage,full-gat,sampled-gat
#               (default: all five, in that order).
#   --threads   cores shared by every side (default 2); --epochs full-batch epochs per run
#               (default 12, the first two warm up); --sampled-epochs (default 3, one warms up).
#   --ids       the graph's node ids as generated, shuffled (`convert synthetic --shuffle-ids`:
#               a random permutation, the same ids for every framework), or both (default): one
#               full benchmark per graph, in --work/generated and --work/shuffled, and peers.md
#               with both reports. The generator keeps many edges within a window of ids, which
#               flatters a cache; shuffled ids carry no such locality.
#   --orders    Tessel's sides once per `partition --order` in the comma-separated LIST (none,
#               rcm, bfs, community), each on its own partition, named tessel-p<P>-<order>;
#               default: one side per rank count on the partitioner's default order.
#   --ranks     Tessel's rank counts (default 1,2).
#   --preset    products: the graph at ogbn-products' shape (`convert synthetic --preset
#               products`: 2,449,029 nodes, mean degree about 50, 100 features, 47 classes, 8%
#               train / 1.6% valid, so a sampled epoch has products' ~191 steps); NODES and the
#               others below still override it. Memory: the DGL side holds about 6 GB.
#   --sides     only these sides (comma-separated: tessel-p1, tessel-p2, ..., dgl, pyg, pyg-sparse).
#   --prepare, --round R, --report: a series in pieces, so that each piece can run alone (e.g.
#               under a lock that other jobs wait for): --prepare makes the graph, the store, the
#               partitions and the peers' arrays and stops; --round R runs round R alone (of
#               --sides) and appends it to runs.jsonl, with the load average before and after to
#               loads.txt; --report writes the tables from what the --round calls recorded (at
#               least 3 rounds of every side). Give every piece the same options.
#   --work      scratch folder (default build/bench-peers): the OGB raw folder everyone reads,
#               Tessel's store, partitions and metrics, runs.jsonl, and the results: peers.md (the
#               tables, also printed) and peers.json (machine, load, every round's raw figures).
# The graph: `tessel convert synthetic --ogb` with 200k nodes, average degree 20, 128 features,
# 16 classes, seed 1 (environment NODES, AVG_DEGREE, FEAT, CLASSES change it). Tessel runs
# P = 1 rank x T threads and P = 2 ranks x T/2 threads; the Python frameworks run one process
# with T threads. Models: 2 layers of width 128 full batch, 3 layers with fanouts 15,10,5 and a
# global batch of 1024 sampled; dropout 0.5 on every layer's input, the input features included
# (as Tessel applies it), features row-normalized once before timing (with the raw synthetic
# features the 3-layer SAGE at dropout 0.5 falls to a constant output in every framework), Adam
# lr 0.01. GAT: HEADS heads (default 8) of 128 / HEADS columns each in the hidden layers,
# concatenated, one output head, attention dropout 0.5 on the coefficients besides the dropout
# on the features, self loops (Tessel's --model gat; DGL's and PyG's GATConv; PyG on edge_index
# only, and DGL's sampled blocks have no self loops). ONEDNN_MAX_CPU_ISA, if set, caps oneDNN's ISA (AVX2
# stands in for an AVX2 machine); MKL_ENABLE_INSTRUCTIONS and ATEN_CPU_CAPABILITY (torch) and
# TESSEL_CPU_ISA (Tessel's own SpMM and dropout kernels) are set to match unless given. A framework whose environment is missing is left out with a note.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

install=0
venv=build/peers-venv
work=build/bench-peers
rounds=3
threads=2
epochs=12
sampled_epochs=3
ids=both
preset=
orders=
ranks=1,2
workloads=full-gcn,full-sage,sampled-sage,full-gat,sampled-gat
only_sides=
step=all
only_round=
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1 ;;
    --ids) ids="$2"; shift ;;
    --preset) preset="$2"; pass+=("$1" "$2"); shift ;;
    --orders) orders="$2"; pass+=("$1" "$2"); shift ;;
    --ranks) ranks="$2"; pass+=("$1" "$2"); shift ;;
    --workloads) workloads="$2"; pass+=("$1" "$2"); shift ;;
    --venv) venv="$2"; pass+=("$1" "$2"); shift ;;
    --work) work="$2"; shift ;;
    --rounds) rounds="$2"; pass+=("$1" "$2"); shift ;;
    --threads) threads="$2"; pass+=("$1" "$2"); shift ;;
    --epochs) epochs="$2"; pass+=("$1" "$2"); shift ;;
    --sampled-epochs) sampled_epochs="$2"; pass+=("$1" "$2"); shift ;;
    --sides) only_sides="$2"; pass+=("$1" "$2"); shift ;;
    --prepare) step=prepare; pass+=("$1") ;;
    --round) step=round; only_round="$2"; pass+=("$1" "$2"); shift ;;
    --report) step=report; pass+=("$1") ;;
    -h|--help) sed -n '2,59p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peers.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$rounds" -ge 3 ] 2>/dev/null || { echo "peers.sh: --rounds must be at least 3" >&2; exit 2; }
[ "$step" != round ] || [ "$only_round" -ge 1 ] 2>/dev/null \
  || { echo "peers.sh: --round must be a round number from 1" >&2; exit 2; }
[ "$threads" -ge 1 ] 2>/dev/null || { echo "peers.sh: --threads must be at least 1" >&2; exit 2; }
[ "$epochs" -ge 3 ] 2>/dev/null \
  || { echo "peers.sh: --epochs must be at least 3 (2 warm up)" >&2; exit 2; }
[ "$sampled_epochs" -ge 2 ] 2>/dev/null \
  || { echo "peers.sh: --sampled-epochs must be at least 2 (1 warms up)" >&2; exit 2; }
case "$ids" in
  generated|shuffled|both) ;;
  *) echo "peers.sh: --ids must be generated, shuffled or both" >&2; exit 2 ;;
esac
IFS=, read -r -a workload_list <<< "$workloads"
[ "${#workload_list[@]}" -ge 1 ] || { echo "peers.sh: --workloads is empty" >&2; exit 2; }
for w in "${workload_list[@]}"; do
  case "$w" in
    full-gcn|full-sage|sampled-sage|full-gat|sampled-gat) ;;
    *) echo "peers.sh: --workloads: $w is not one of full-gcn, full-sage, sampled-sage," \
         "full-gat, sampled-gat" >&2; exit 2 ;;
  esac
done

tessel="${TESSEL:-build/src/cli/tessel}"
case "$preset" in
  '') nodes="${NODES:-200000}" avg_degree="${AVG_DEGREE:-20}" feat="${FEAT:-128}"
      classes="${CLASSES:-16}" ;;
  # The generator's preset values (the split fractions come with --preset).
  products) nodes="${NODES:-2449029}" avg_degree="${AVG_DEGREE:-57}" feat="${FEAT:-100}"
            classes="${CLASSES:-47}" ;;
  *) echo "peers.sh: --preset $preset: expected products" >&2; exit 2 ;;
esac
heads="${HEADS:-8}"
[ $(( 128 % heads )) -eq 0 ] 2>/dev/null \
  || { echo "peers.sh: HEADS=$heads does not divide the width 128" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_require peers.sh "$tessel" python3 mpirun uptime

if [ "$install" = 1 ]; then
  mkdir -p "$venv"
  cpu_index=https://download.pytorch.org/whl/cpu
  torch_index=()
  if python3 -c "import urllib.request; urllib.request.urlopen('$cpu_index/torch/', timeout=15)" \
      2>/dev/null; then
    torch_index=(--index-url "$cpu_index" --extra-index-url https://pypi.org/simple)
  else
    echo "peers.sh: $cpu_index unreachable; torch from PyPI (with its CUDA libraries)" >&2
  fi
  if [ ! -x "$venv/dgl/bin/python" ]; then python3 -m venv "$venv/dgl"; fi
  "$venv/dgl/bin/pip" install -q "${torch_index[@]}" torch==2.2.1
  "$venv/dgl/bin/pip" install -q torch==2.2.1 dgl==2.1.0 torchdata==0.7.1 "numpy<2" pandas \
    pydantic pyyaml
  if [ ! -x "$venv/pyg/bin/python" ]; then python3 -m venv "$venv/pyg"; fi
  "$venv/pyg/bin/pip" install -q "${torch_index[@]}" torch
  "$venv/pyg/bin/pip" install -q torch torch_geometric==2.8.1 pandas
fi

# Both graphs: one full benchmark each, then one peers.md holding both reports.
if [ "$ids" = both ]; then
  for which in generated shuffled; do
    "$0" "${pass[@]}" --ids "$which" --work "$work/$which"
  done
  case "$step" in prepare|round) exit 0 ;; esac
  { echo "## Node ids as generated"; echo; cat "$work/generated/peers.md"; echo
    echo "## Node ids shuffled"; echo; cat "$work/shuffled/peers.md"; } > "$work/peers.md"
  echo "peers.sh: both reports in $work/peers.md" >&2
  exit 0
fi

# An ISA cap for oneDNN (Tessel's GEMM, torch's oneDNN ops) caps torch's MKL GEMM and its own
# vectorized kernels too, unless they are given caps of their own.
if [ -n "${ONEDNN_MAX_CPU_ISA:-}" ]; then
  case "${ONEDNN_MAX_CPU_ISA^^}" in
    AVX2*) mkl=AVX2 aten=avx2 own=avx2 ;;
    AVX512*) mkl=AVX512 aten=avx512 own= ;;
    AVX) mkl=AVX aten=default own=sse ;;
    *) mkl=SSE4_2 aten=default own=sse ;;
  esac
  export MKL_ENABLE_INSTRUCTIONS="${MKL_ENABLE_INSTRUCTIONS:-$mkl}"
  export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-$aten}"
  if [ -n "$own" ]; then export TESSEL_CPU_ISA="${TESSEL_CPU_ISA:-$own}"; fi
fi

mkdir -p "$work/metrics"
shuffle=()
[ "$ids" = shuffled ] && shuffle=(--shuffle-ids)
ogb="$work/ogb-${preset:+$preset-}n${nodes}-d${avg_degree}-f${feat}-${ids}"
[ -n "$preset" ] && shuffle+=(--preset "$preset")
[ -d "$ogb/raw" ] || "$tessel" convert synthetic --nodes "$nodes" --avg-degree "$avg_degree" \
  --classes "$classes" --feat-dim "$feat" --seed 1 "${shuffle[@]}" --ogb "$ogb"
store="$ogb.h5"
[ -f "$store" ] || "$tessel" convert ogb "$ogb" "$store" >/dev/null
cache="$ogb-arrays.npz"
runs="$work/runs.jsonl"
loads="$work/loads.txt"
# A series in pieces starts afresh at --prepare and adds to runs.jsonl at every --round.
case "$step" in all|prepare) : > "$runs"; : > "$loads" ;; esac
table=scripts/bench/peers_table.py

# The sides, in the order every round runs them.
sides=()
for p in ${ranks//,/ }; do
  if [ -z "$orders" ]; then
    bench_parts "$tessel" "$store" "$p" "$ogb-parts$p"
    sides+=("tessel-p$p")
  else
    for order in ${orders//,/ }; do
      bench_parts "$tessel" "$store" "$p" "$ogb-parts$p-$order" --order "$order"
      sides+=("tessel-p$p-$order")
    done
  fi
done
declare -A peer_python=()
for framework in dgl pyg; do
  py="$venv/$framework/bin/python"
  if [ -x "$py" ]; then
    peer_python[$framework]="$py"
    if [ "$framework" = dgl ]; then sides+=(dgl); else sides+=(pyg pyg-sparse); fi
    # The arrays every peer reads, made before the first round so that no run pays for them.
    [ -f "$cache" ] || "$py" scripts/bench/peer_gnn.py --framework "$framework" --ogb "$ogb" \
      --cache "$cache" --prepare
  elif [ "$step" = all ] || [ "$step" = prepare ]; then
    label=$([ "$framework" = dgl ] && echo DGL || echo PyG)
    python3 "$table" missing --record "$runs" --side "$framework" --label "$label" \
      --why "no environment at $venv/$framework (run with --install)"
  fi
done

[ "$step" = prepare ] && { echo "peers.sh: prepared ${sides[*]} in $work" >&2; exit 0; }
if [ -n "$only_sides" ]; then
  kept=()
  for s in ${only_sides//,/ }; do
    [[ " ${sides[*]} " == *" $s "* ]] \
      || { echo "peers.sh: --sides: $s is not one of ${sides[*]}" >&2; exit 2; }
    kept+=("$s")
  done
  sides=("${kept[@]}")
fi

# run_side SIDE WORKLOAD ROUND: one measured run, appended to runs.jsonl.
run_side() {
  local side=$1 workload=$2 round=$3
  local record=(python3 "$table" run --record "$runs" --round "$round" --side "$side"
                --workload "$workload")
  case "$side" in
    tessel-p*)
      local p=${side#tessel-p} t order= label
      [[ "$p" == *-* ]] && { order=${p#*-}; p=${p%%-*}; }
      t=$(bench_threads "$p" "$threads")
      label="Tessel P=$p x $t${order:+ --order $order}"
      local metrics="$work/metrics/$side-$workload-r$round.jsonl"
      local model=${workload#*-} width=(--hidden 128)
      # GAT: --hidden is one head's width; the heads are concatenated to 128.
      [ "$model" = gat ] && width=(--hidden $(( 128 / heads )) --heads "$heads" --out-heads 1
                                   --attn-dropout 0.5)
      local cmd=(mpirun --oversubscribe --bind-to none -np "$p" "$tessel" train
                 "$ogb-parts$p${order:+-$order}"
                 --threads "$t" --quiet "${width[@]}" --dropout 0.5 --lr 0.01 --seed 0
                 --normalize-features row --metrics "$metrics")
      if [ "${workload%%-*}" = sampled ]; then
        # The global batch is --batch-size x ranks: keep it at 1024. Evaluation only after the
        # last epoch, and its seconds are left out: epochs time training only, as the peers'
        # sampled epochs do.
        cmd+=(--mode sampled --model "$model" --layers 3 --fanouts 15,10,5
              --batch-size $(( 1024 / p )) --epochs "$sampled_epochs" --eval-every 1000000)
      else
        cmd+=(--mode full --model "$model" --layers 2 --epochs "$epochs")
      fi
      "${record[@]}" --label "$label" --tessel-metrics "$metrics" --binary "$tessel" \
        -- "${cmd[@]}"
      ;;
    *)
      local framework=${side%-sparse} label only adjacency=()
      case "$side" in
        dgl) label=DGL ;;
        pyg) label="PyG edge_index"; adjacency=(--adjacency edge_index) ;;
        pyg-sparse) label="PyG sparse"; adjacency=(--adjacency sparse) ;;
      esac
      case "$workload" in
        full-gcn) only=gcn ;;
        full-sage) only=sage ;;
        sampled-sage) only=sampled ;;
        full-gat) only=gat ;;
        sampled-gat) only=sampled-gat ;;
      esac
      "${record[@]}" --label "$label" -- env OMP_NUM_THREADS="$threads" \
        "${peer_python[$framework]}" scripts/bench/peer_gnn.py --framework "$framework" \
        --ogb "$ogb" --cache "$cache" --threads "$threads" --epochs "$epochs" \
        --sampled-epochs "$sampled_epochs" --normalize-features row --only "$only" \
        --heads "$heads" --attn-dropout 0.5 "${adjacency[@]}"
      ;;
  esac
}

round_list=$(seq 1 "$rounds")
case "$step" in
  round) round_list=$only_round ;;
  report) round_list= ;;
esac
load_before=$(uptime)
[ -n "$round_list" ] && echo "peers.sh: ${sides[*]}; rounds $(echo $round_list);" \
  "load average before: ${load_before##*: }" >&2
for round in $round_list; do
  for workload in "${workload_list[@]}"; do
    for side in "${sides[@]}"; do
      # PyG's sampled runs and its GAT use edge_index: the sparse side has neither.
      [ "$side" = pyg-sparse ] && { [ "${workload%%-*}" = sampled ] || [ "$workload" = full-gat ]; } \
        && continue
      run_side "$side" "$workload" "$round"
    done
  done
done
load_after=$(uptime)
if [ "$step" = round ]; then
  printf '%s\n%s\n' "$load_before" "$load_after" >> "$loads"
  exit 0
fi
if [ "$step" = report ]; then
  [ -s "$loads" ] || { echo "peers.sh: --report: no --round has run in $work" >&2; exit 2; }
  load_before=$(head -n 1 "$loads") load_after=$(tail -n 1 "$loads")
fi

t_half=$(bench_threads 2 "$threads")
graph="\`tessel convert synthetic --ogb\`, $nodes nodes, average degree $avg_degree,"
graph+=" $feat features, $classes classes, seed 1, node ids $ids${preset:+, --preset $preset}"
models="workloads $workloads; full batch 2 layers of width 128; sampled 3 layers of width 128,"
models+=" fanouts 15,10,5 (input"
models+=" layer first), global batch 1024, training only; dropout 0.5 on every layer's input, the"
models+=" input features included, in every framework (as Tessel applies it); features"
models+=" row-normalized once before timing (Tessel's --normalize-features row); Adam lr 0.01;"
models+=" GAT: $heads heads of $(( 128 / heads )) columns concatenated, 1 output head, attention"
models+=" dropout 0.5, self loops (none on DGL's sampled blocks), PyG on edge_index;"
models+=" $epochs full-batch and $sampled_epochs sampled epochs per run. Tessel P=1 x $threads"
models+=" threads and P=2 x $t_half; DGL and PyG one process with $threads threads."
python3 "$table" report "$runs" --threads "$threads" --graph "$graph" --models "$models" \
  --load-before "$load_before" --load-after "$load_after" \
  --md "$work/peers.md" --json "$work/peers.json"
