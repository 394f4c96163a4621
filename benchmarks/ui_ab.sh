#!/bin/bash
# Two consoles side by side on one demo pool, to compare two checkouts of poolconsole under the same load
# and the same machine noise: benchmarks/ui_ab.sh DIR_A DIR_B [NODES] [SECONDS]. Each line printed is
# benchmarks/ui_bench.py's output, prefixed with the checkout it ran.
set -euo pipefail
a=$(realpath "$1"); b=$(realpath "$2"); nodes=${3:-64}; seconds=${4:-120}
tmp=$(mktemp -d); trap 'kill -INT $sim 2>/dev/null; wait $sim 2>/dev/null; rm -rf "$tmp"' EXIT
python -m poolconsole demo --serve-only --nodes "$nodes" --config-out "$tmp/pool.toml" >/dev/null &
sim=$!
while [ ! -s "$tmp/pool.toml" ]; do sleep 0.5; done
consoles=()
for dir in "$a" "$b"; do
  (cd "$dir" && UI_BENCH_POOL="$tmp/pool.toml" python benchmarks/ui_bench.py "$nodes" "$seconds" 2>&1 | sed "s|^|$dir: |") &
  consoles+=($!)
done
wait "${consoles[@]}"
