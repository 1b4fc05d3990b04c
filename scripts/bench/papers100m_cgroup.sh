#!/usr/bin/env bash
# A papers100M-shape graph (`convert synthetic --preset papers100m --scale SCALE`) made,
# partitioned and trained inside one memory cgroup (default 6G) with a feature budget below the
# features: each step's peak RSS (/usr/bin/time), the cgroup's own peak (page cache included),
# whether the kernel's OOM killer fired, and the training throughput, hit rate and bytes read.
# Needs root for the cgroup: cgroup v2 (memory.max) where the memory controller is there, else
# cgroup v1 (memory.limit_in_bytes); it says which, and exits when it can make neither (set
# NO_CGROUP=1 to run uncapped).
#
# The peers (scripts/bench/ooc_peers.py, with DGL 2.1 and h5py in PEER_PYTHON), on the same graph,
# the same model and batches, one process with PEER_THREADS threads: DGL's sampled SAGE with every feature
# row in memory (outside the cgroup: the in-memory comparison), and DGL's GraphBolt with its
# features left on disk (OnDiskDataset, `in_memory: false`: a numpy memory map of the .npy file,
# its pages dropped before the first epoch) inside the same cgroup. Their data is written from the
# same store by `ooc_peers.py export --store`, outside the cgroup, straight in GraphBolt's
# preprocessed layout: the graph symmetrized as `partition` does (32-bit ids), the features copied
# in row blocks. Its peak memory is about the symmetrized graph, never the features; on disk it
# adds one copy of the features (GraphBolt's own preprocessing, which would copy them again, does
# not run). DGL in memory holds the features and the graph in 64-bit ids (PEER_RUNS=graphbolt
# where the machine lacks that memory).
# DISK_TEST=1 first measures the disk under WORK with fio: random reads of 4 KiB and 512 B,
# O_DIRECT, one job at queue depth 1 (psync) and at 32 (io_uring), 10 s each, on the store file.
#
# Environment (all optional):
#   TESSEL     the tessel binary                       (default: build/src/cli/tessel)
#   WORK       folder for the store and the parts      (default: build/bench-papers100m)
#   SCALE      --scale of the preset  (default 0.25, the quarter size: 27.8M nodes, 14 GB of
#              features; 0.01: 1.1M nodes, 568 MB: a few minutes for each step on 2 cores)
#   LIMIT      the cgroup's limit                      (default 6G)
#   PARTS      parts and ranks                         (default 2)
#   METHOD     partition --method                      (default metis)
#   BUDGET     --feature-memory per rank               (default: an eighth of a part's features)
#   HIDDEN, FANOUTS, BATCH                             (default 256, 15,10,5, 1024)
#   STEPS      --max-batches of the one epoch          (default 50)
#   EVAL=0     no closing evaluation (--eval-every 0): at the quarter size the evaluation over
#              every node takes longer than the steps     (default 1)
#   KEEP=1     keep the store and the parts afterwards (default: removed)
#   PREPARED=1 train only, on the parts a KEEP=1 run left in WORK (timed runs apart from the
#              preparation); BUDGET=all with NO_CGROUP=1 is the in-memory, uncapped comparison
#   PREPARE_ONLY=1  convert, partition and export for the peers, then stop (with KEEP=1)
#   PEERS      auto: the peers too when PEER_PYTHON imports dgl.graphbolt (and h5py); 0: not;
#              only: the peers alone (Tessel's training skipped)          (default auto)
#   PEER_PYTHON, PEER_THREADS, PEER_EPOCHS                (default python3, 2, 2)
#   PEER_RUNS  which peers                                (default "dgl graphbolt")
#   PEER_TIMEOUT  seconds after which the GraphBolt run is stopped (its steps so far are shown;
#              each step is logged as it ends)        (default: none)
#   PEER_LIMIT  the cgroup's limit for the GraphBolt run only, e.g. to scale the memory left for
#              its page cache with the graph at small SCALE   (default LIMIT)
#   DISK_TEST=1  the fio read test above                  (default 0)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh

tessel="${TESSEL:-build/src/cli/tessel}"
work="${WORK:-build/bench-papers100m}"
scale="${SCALE:-0.25}"
limit="${LIMIT:-6G}"
parts="${PARTS:-2}"
method="${METHOD:-metis}"
hidden="${HIDDEN:-256}"
fanouts="${FANOUTS:-15,10,5}"
batch="${BATCH:-1024}"
steps="${STEPS:-50}"
peers="${PEERS:-auto}"
peer_python="${PEER_PYTHON:-python3}"
peer_threads="${PEER_THREADS:-2}"
peer_epochs="${PEER_EPOCHS:-2}"

bench_require papers100m_cgroup.sh "$tessel" jq mpirun /usr/bin/time
mkdir -p "$work"
store="$work/papers100m-x$scale.h5"
partdir="$work/p$parts"
peer_data="$work/graphbolt-x$scale"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$store" "$partdir" "$peer_data"' EXIT
# The peers need DGL 2.1 (dgl.graphbolt), and h5py to export the store unless PREPARED=1.
peer_modules=dgl.graphbolt
[ "${PREPARED:-0}" = 1 ] || peer_modules="$peer_modules, h5py"
if [ "$peers" = auto ]; then
  if "$peer_python" -c "import $peer_modules" >/dev/null 2>&1; then
    peers=1
  else
    peers=0
    echo "note: $peer_python does not import $peer_modules; the DGL and GraphBolt peers are not" \
      "run (PEER_PYTHON names a Python with DGL 2.1 and h5py)"
  fi
elif [ "$peers" != 0 ]; then
  "$peer_python" -c "import $peer_modules" || {
    echo "papers100m_cgroup.sh: PEERS=$peers but $peer_python does not import $peer_modules" >&2
    exit 1
  }
fi

limit_bytes=$(numfmt --from=iec "$limit")
cgroup="" kind=""
if [ "${NO_CGROUP:-0}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "papers100m_cgroup.sh: a memory cgroup needs root (or NO_CGROUP=1)" >&2; exit 1; }
  if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
     mkdir "/sys/fs/cgroup/tessel-p100m-$$" 2>/dev/null; then
    cgroup="/sys/fs/cgroup/tessel-p100m-$$" kind=v2
    echo "$limit_bytes" >"$cgroup/memory.max"
  elif [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/tessel-p100m-$$" 2>/dev/null; then
    cgroup="/sys/fs/cgroup/memory/tessel-p100m-$$" kind=v1
    echo "$limit_bytes" >"$cgroup/memory.limit_in_bytes"
  else
    echo "papers100m_cgroup.sh: cannot make a memory cgroup (tried /sys/fs/cgroup (v2) and" \
      "/sys/fs/cgroup/memory (v1)); NO_CGROUP=1 runs uncapped" >&2
    exit 1
  fi
  # A rank the OOM killer took may leave the cgroup a moment later: retry the removal.
  trap 'for _ in 1 2 3 4 5; do rmdir "$cgroup" 2>/dev/null && break; sleep 1; done
        [ "${KEEP:-0}" = 1 ] || rm -rf "$store" "$partdir" "$peer_data"' EXIT
fi

# The cgroup's peak usage since the last reset, in MiB, and the OOM kills so far.
cgroup_peak_mib() {
  case $kind in
    v1) echo $(( $(cat "$cgroup/memory.max_usage_in_bytes") >> 20 )) ;;
    v2) if [ -r "$cgroup/memory.peak" ]; then echo $(( $(cat "$cgroup/memory.peak") >> 20 )); else echo -; fi ;;
    *) echo - ;;
  esac
}
cgroup_reset() { [ "$kind" != v1 ] || echo 0 >"$cgroup/memory.max_usage_in_bytes"; }
# cgroup_limit BYTES: sets the cgroup's limit (the kernel reclaims its page cache to fit).
cgroup_limit() {
  case $kind in
    v1) echo "$1" >"$cgroup/memory.limit_in_bytes" ;;
    v2) echo "$1" >"$cgroup/memory.max" ;;
  esac
}
cgroup_ooms() {
  case $kind in
    v1) sed -n 's/^oom_kill //p' "$cgroup/memory.oom_control" ;;
    v2) sed -n 's/^oom_kill //p' "$cgroup/memory.events" ;;
    *) echo - ;;
  esac
}

# step NAME COMMAND...: runs it inside the cgroup (outside when UNCAPPED=1 is set for the call);
# prints seconds, peak RSS and the cgroup's peak.
step() {
  local name=$1
  shift
  cgroup_reset
  local start rc=0
  start=$(date +%s.%N)
  if [ -n "$cgroup" ] && [ "${UNCAPPED:-0}" != 1 ]; then
    /usr/bin/time -f "%M" -o "$work/$name.rss" \
      bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup" "$@" >"$work/$name.log" 2>&1 || rc=$?
  else
    /usr/bin/time -f "%M" -o "$work/$name.rss" "$@" >"$work/$name.log" 2>&1 || rc=$?
  fi
  local seconds
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  printf "%-10s %8.1f s  peak RSS %6d MiB  cgroup peak %6s MiB  OOM kills %s  exit %d\n" "$name" \
    "$seconds" $(( $(tail -1 "$work/$name.rss" | grep -Eo '^[0-9]+$' || echo 0) >> 10 )) \
    "$([ "${UNCAPPED:-0}" = 1 ] && echo - || cgroup_peak_mib)" \
    "$([ "${UNCAPPED:-0}" = 1 ] && echo - || cgroup_ooms)" "$rc"
  if [ "$rc" = 124 ] && [ "${ALLOW_TIMEOUT:-0}" = 1 ]; then
    echo "$name: stopped at its time limit; its last step: $(grep ' step ' "$work/$name.log" | tail -1)"
    return 0
  fi
  if [ "$rc" != 0 ]; then
    tail -3 "$work/$name.log" >&2
    echo "papers100m_cgroup.sh: $name failed (exit $rc); stopping" >&2
    exit 1
  fi
}

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "memory cgroup: ${kind:-none} ${cgroup:+limit $limit ($cgroup)}"
echo "disk free under $work: $(df -h --output=avail "$work" | tail -1 | tr -d ' ')"

if [ "${PREPARED:-0}" = 1 ]; then
  [ -f "$partdir/partition.json" ] || { echo "papers100m_cgroup.sh: PREPARED=1 but no $partdir/partition.json (run with KEEP=1 first)" >&2; exit 1; }
  [ "$peers" = 0 ] || [ -f "$peer_data/preprocessed/metadata.yaml" ] ||
    { echo "papers100m_cgroup.sh: PREPARED=1 but no $peer_data/preprocessed/metadata.yaml (run with KEEP=1 first, or PEERS=0)" >&2; exit 1; }
else
  step convert "$tessel" convert synthetic --preset papers100m --scale "$scale" "$store"
  sed -n 1p "$work/convert.log"
  step partition "$tessel" partition "$store" --parts "$parts" --method "$method" --out "$partdir" --force
  grep -E "^edge cut|^time" "$work/partition.log" || true
  if [ "$peers" != 0 ]; then
    rm -rf "$peer_data"
    UNCAPPED=1 step peer-export "$peer_python" scripts/bench/ooc_peers.py export --store "$store" \
      --out "$peer_data"
    tail -1 "$work/peer-export.log"
  fi
fi
if [ "${DISK_TEST:-0}" = 1 ]; then
  command -v fio >/dev/null || { echo "papers100m_cgroup.sh: DISK_TEST=1 needs fio" >&2; exit 1; }
  # fio's own JSON: read IOPS of each job (queue depth 1 with psync, 32 with io_uring).
  for bs in 4k 512; do
    for engine in psync:1 io_uring:32; do
      fio --name=read --filename="$store" --readonly --rw=randread --bs="$bs" --direct=1 \
        --ioengine="${engine%:*}" --iodepth="${engine#*:}" --runtime=10 --time_based \
        --output-format=json 2>/dev/null |
        jq -r --arg bs "$bs" --arg e "$engine" \
          '"disk: random \($bs) reads, O_DIRECT, \($e | sub(":"; ", queue depth ")): \(.jobs[0].read.iops | round) per second"' ||
        echo "disk: random $bs reads with $engine: fio failed"
    done
  done
fi
[ "${PREPARE_ONLY:-0}" != 1 ] || exit 0

feature_bytes=$(jq '.num_nodes * .feature_dim * 4' "$partdir/partition.json")
budget="${BUDGET:-$(( feature_bytes / parts / 8 ))}"
if [ "$budget" = all ]; then
  echo "features: $(( feature_bytes >> 20 )) MiB in all; --feature-memory all"
else
  echo "features: $(( feature_bytes >> 20 )) MiB in all; --feature-memory $budget per rank ($(( budget >> 20 )) MiB)"
fi
threads=$(bench_threads "$parts" "$(nproc)")
metrics="$work/train.jsonl"
rm -f "$metrics" "$work/ranks.rss"
if [ "$peers" != only ]; then
  # Each rank's own peak RSS (/usr/bin/time around each rank, appended to ranks.rss).
  step train env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np "$parts" --oversubscribe \
    bash -c 'exec /usr/bin/time -a -o "$0" -f "rank $OMPI_COMM_WORLD_RANK: peak RSS %M KiB" "$@"' \
    "$work/ranks.rss" "$tessel" train "$partdir" --mode sampled --model sage \
    --layers 3 --hidden "$hidden" --fanouts "$fanouts" --batch-size "$batch" --epochs 1 \
    --max-batches "$steps" --threads "$threads" --seed 1 --feature-memory "$budget" \
    --eval-every "$([ "${EVAL:-1}" = 0 ] && echo 0 || echo 1)" --metrics "$metrics"
  grep -E "^features:|^epoch|^evaluate:" "$work/train.log" || true
  sort "$work/ranks.rss" | awk '{printf "%s %s peak RSS %d MiB\n", $1, $2, $5 / 1024}'
  # Training seconds without the closing evaluation; seeds (each rank's training nodes, at most
  # steps x batch of them) and sampled edges per second.
  jq -r --argjson batch "$batch" --argjson parts "$parts" \
      --argjson train "$(jq -c '[.parts[].train]' "$partdir/partition.json")" '
      select(.epoch == 1)
      | (.epoch_s - (.phases.eval // 0)) as $s
      | .steps as $steps | ([$train[] | [., $steps * $batch] | min] | add) as $seeds
      | "train: \(.steps) steps of up to \($batch) seeds per rank in \($s * 100 | round / 100) s: " +
        "\(($seeds / $s) | round) seeds/s over \($parts) ranks (\($seeds) seeds), " +
        "\((.sampled_edges / $s) | round) sampled edges/s; hit rate " +
        "\(if .feature_hit_rate then (.feature_hit_rate * 1000 | round) / 1000 else "-" end), \(((.feature_bytes_read_per_step // 0) / 1048576 * 10 | round) / 10) MiB read per step, " +
        "peak before evaluation \((.peak_rss_before_eval_bytes // 0) / 1048576 | round) MiB"' "$metrics"
fi

if [ "$peers" != 0 ]; then
  # The peers: 1 process x PEER_THREADS threads; each epoch over the training split, at most
  # STEPS x PARTS batches (the seeds Tessel's ranks train on together).
  peer_args=(--data "$peer_data" --threads "$peer_threads" --epochs "$peer_epochs" --layers 3
             --hidden "$hidden" --fanouts "$fanouts" --batch-size "$batch"
             --max-steps $(( steps * parts )))
  peer_runs=" ${PEER_RUNS:-dgl graphbolt} "
  if [[ "$peer_runs" == *" dgl "* ]]; then
    UNCAPPED=1 step dgl env OMP_NUM_THREADS="$peer_threads" "$peer_python" \
      scripts/bench/ooc_peers.py dgl "${peer_args[@]}"
  fi
  if [[ "$peer_runs" == *" graphbolt "* ]]; then
    if [ -n "$cgroup" ] && [ -n "${PEER_LIMIT:-}" ]; then
      cgroup_limit "$(numfmt --from=iec "$PEER_LIMIT")"
      echo "memory cgroup: limit $PEER_LIMIT for the GraphBolt run"
    fi
    peer_timeout=()
    [ -z "${PEER_TIMEOUT:-}" ] || peer_timeout=(timeout "$PEER_TIMEOUT")
    ALLOW_TIMEOUT=1 step graphbolt "${peer_timeout[@]}" env OMP_NUM_THREADS="$peer_threads" \
      "$peer_python" scripts/bench/ooc_peers.py graphbolt "${peer_args[@]}"
    [ -z "$cgroup" ] || cgroup_limit "$limit_bytes"
  fi
  for name in $peer_runs; do
    grep '^{' "$work/$name.log" | jq -r '"\(.framework) (\(.features)), epoch \(.epoch): \(.steps) steps in \(.seconds) s: \(.seeds_per_s) seeds/s, \(.sampled_edges_per_s) sampled edges/s, peak RSS \(.peak_rss_mib) MiB (at the end: \(.rss_anon_mib) MiB anonymous, \(.rss_file_mib) MiB file-backed)"'
  done
fi
