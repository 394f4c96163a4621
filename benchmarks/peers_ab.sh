#!/usr/bin/env bash
# Two checkouts' consoles beside the steady floor and the peers, in one interleaved run of the peers harness
# (../shared/peers/measure.sh: N=32 replayed vLLM 0.32 pages, 160x48 tmux pane, 1 s refresh, CPU over 60 s):
# issue 36's "no regression against the starting commit" and issue 39 item 3 ("32 direct engines at the
# stack's cost"), measured side by side.
#
# usage: W=<peers work dir> OLD=<checkout> NEW=<checkout> benchmarks/peers_ab.sh
#   W as the harness's README sets it up (specs/, conf/, venv-vllm-htop/), plus the steady spec:
#   python benchmarks/steady_spec.py $W/specs/steady.  SPECS ("cycle steady"), ROUNDS ("1 2"), LOCK (a file
#   each round holds with flock, so no other heavy run shares the machine: /tmp/heavy.lock), NICE (10).
# Per spec and round, in this order (the second round reversed): pc-old, pc-new (the console of each checkout,
# its poolconsole on PYTHONPATH and cwd the checkout, run by this venv's python as the `poolconsole` command
# does, each with fresh XDG dirs: history store and state start empty), floor-steady (NEW's
# benchmarks/floor_app.py --steady), vllm-htop, prometheus. Results: $W/results/summary.jsonl (tag SPEC-rN).
set -u
here=$(cd "$(dirname "$0")" && pwd); P=$(cd "$here/../../shared/peers" && pwd)
export W=${W:?set W} OLD=${OLD:?set OLD} NEW=${NEW:?set NEW}
PY=${PY:-$(command -v python)}; export PY

console(){  # NAME DIR
  local x=$W/xdg-$1; rm -rf "$x"; mkdir -p "$x"
  # shellcheck disable=SC2016  # $0 and $1 are the inner shell's
  MARKER0=eng00 "$P/measure.sh" "$1" 32 tiny -- env XDG_CONFIG_HOME="$x/config" XDG_DATA_HOME="$x/data" \
    XDG_STATE_HOME="$x/state" XDG_CACHE_HOME="$x/cache" \
    sh -c 'cd "$1" && PYTHONPATH="$1" exec "$0" -c "$3" --config "$2"' "$PY" "$2" "$W/conf/poolconsole-32.toml" \
    'import sys; from poolconsole.__main__ import main; sys.argv[0] = "poolconsole"; sys.exit(main())'
}

if [ "${1:-}" = round ]; then  # one round, under the lock: round PROGRAM...
  shift; export REPLAY_SERVER=$P/replay_server.py
  # shellcheck source=/dev/null
  source "$P/programs.sh"
  echo "round $TAG from $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for p in "$@"; do
    case $p in
      old) console pc-old "$OLD" ;;
      new) console pc-new "$NEW" ;;
      floor) "$P/measure.sh" floor-steady 32 eng00 -- env PYTHONPATH="$NEW" "$PY" "$NEW/benchmarks/floor_app.py" \
        --steady --config "$W/conf/poolconsole-32.toml" ;;
      htop) htop 32 ;;
      prom) prom 32 ;;
    esac
  done
  exit 0
fi
for spec in ${SPECS:-cycle steady}; do
  if [ "$spec" = steady ]; then export SPEC=$W/specs/steady/steady.json; else export SPEC=$W/specs/cycle.json; fi
  for r in ${ROUNDS:-1 2}; do
    export TAG=$spec-r$r
    order="old new floor htop prom"; [ "$r" = 2 ] && order="prom htop floor new old"
    # shellcheck disable=SC2086  # the order is words
    nice -n "${NICE:-10}" flock "${LOCK:-/tmp/heavy.lock}" "$0" round $order
  done
done
