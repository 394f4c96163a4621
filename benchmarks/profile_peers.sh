#!/usr/bin/env bash
# The console alone in the peers harness (../shared/peers/measure.sh: N replayed vLLM 0.32 pages, 160x48 tmux
# pane, 1 s refresh, CPU over WINDOW s from DELAY s after launch), sampled by py-spy over the same window.
# usage: W=<peers work dir> benchmarks/profile_peers.sh N OUT.txt    (SPEC, WINDOW, DELAY as measure.sh; pc N)
# then: python benchmarks/pyspy_shares.py OUT.txt
set -u; N=$1; PROF=$2; export W=${W:?set W}; WINDOW=${WINDOW:-60}; DELAY=${DELAY:-5}; export WINDOW DELAY
P=$(cd "$(dirname "$0")/../../shared/peers" && pwd); SPY=${SPY:-$(dirname "$(command -v python)")/py-spy}
source "$P/programs.sh"
pc "$N" & RUN=$!
TM="tmux -L sbs -f $P/tmux.conf"; S=pm-poolconsole-$N-${TAG:-r1}
for t in $(seq 200); do PID=$($TM display -p -t "$S" '#{pane_pid}' 2>/dev/null) && [ -n "$PID" ] && break; sleep 0.05; done
T0=$(date +%s.%N); sleep "$DELAY"
"$SPY" record -p "$PID" -d "$WINDOW" -r 50 -f raw -o "$PROF" > /dev/null 2>&1
wait "$RUN"
