#!/usr/bin/env bash
# `cmake --install BUILD --prefix P` gives P/bin/tessel and the plot scripts in P/share/tessel,
# and the installed binary runs its bench plot from there (not from the source tree).
#   install_test.sh BUILD_DIR
set -euo pipefail
build="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
bin="$work/prefix/bin/tessel"
for f in "$bin" "$work/prefix/share/tessel/plot_bench.py" "$work/prefix/share/tessel/plot_metrics.py"; do
  [ -x "$f" ] || { echo "install_test: $f was not installed (or is not executable)" >&2; exit 1; }
done
"$bin" --version
"$bin" convert synthetic --nodes 100 --classes 3 --feat-dim 4 --seed 1 "$work/g.h5" >/dev/null
"$bin" partition "$work/g.h5" --parts 1 --out "$work/p" >/dev/null 2>&1
# `echo` stands in for Python: the bench prints the plot command it would run.
out="$(TESSEL_PYTHON=echo "$bin" bench "$work/p" --modes full --epochs 1 --quiet --out "$work/r" 2>&1)"
expected="$work/prefix/share/tessel/plot_bench.py"
if ! grep -qF "$expected" <<<"$out"; then
  echo "install_test: the installed tessel did not run $expected; it printed:" >&2
  echo "$out" >&2
  exit 1
fi
echo "install_test: passed"
