#!/bin/bash
# Two consoles side by side on one demo pool, to compare two checkouts of poolconsole under the same load
# and the same machine noise: benchmarks/ui_ab.sh DIR_A DIR_B [NODES] [SECONDS]. Each line printed is
# benchmarks/ui_bench.py's output, prefixed with its side (A or B) and the checkout it ran. Each side imports poolconsole from its own
# checkout (PYTHONPATH=DIR, cwd DIR: an editable install of another checkout must not win), and says which; the
# demo pool is the checkout this script is run from. DIR_A and DIR_B may be the same checkout (an A/A run: the
# machine's noise).
set -euo pipefail
a=$(realpath "$1"); b=$(realpath "$2"); nodes=${3:-64}; seconds=${4:-120}
tmp=$(mktemp -d); trap 'kill -INT $sim 2>/dev/null; wait $sim 2>/dev/null; rm -rf "$tmp"' EXIT
python -m poolconsole demo --serve-only --nodes "$nodes" --config-out "$tmp/pool.toml" >/dev/null &
sim=$!
while [ ! -s "$tmp/pool.toml" ]; do sleep 0.5; done
consoles=()
for side in A B; do
  dir=$a; [ "$side" = B ] && dir=$b
  (cd "$dir" && export PYTHONPATH="$dir" && python -c "import poolconsole; print('imports', poolconsole.__file__)" &&
    UI_BENCH_POOL="$tmp/pool.toml" python benchmarks/ui_bench.py "$nodes" "$seconds" 2>&1) | sed "s|^|$side $dir: |" &
  consoles+=($!)
done
wait "${consoles[@]}"
