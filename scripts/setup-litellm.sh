#!/usr/bin/env bash
# Install the LiteLLM proxy into its own virtualenv under ~/.cache/poolconsole (about 45 s, 750 MB).
# 1.108.7 is the newest litellm[proxy] whose pinned companions exist on the package index
# (shared/reference/real-engines.md). Cached: a second run is a no-op. Prints the litellm executable.
set -euo pipefail
VERSION="${LITELLM_VERSION:-1.108.7}"
CACHE="${POOLCONSOLE_CACHE:-$HOME/.cache/poolconsole}"
VENV="$CACHE/litellm-$VERSION"
# The `prometheus` callback (per-route and per-caller-key counters on /metrics, no license needed in this
# version) imports prometheus_client, which only the heavy `proxy-runtime` extra pulls in: installed alone.
PROM="prometheus-client>=0.20.0,<1.0"
if [[ -f "$VENV/.ready" ]]; then
  [[ -f "$VENV/.prometheus" ]] || { "$VENV/bin/pip" install -q "$PROM" >&2 && touch "$VENV/.prometheus"; }
  echo "$VENV/bin/litellm"; exit 0
fi
PY="${PYTHON:-python3}"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip >&2
PIN=(-c "$(cd "$(dirname "$0")/.." && pwd)/requirements/litellm-constraints.txt")
[[ -n "${POOLCONSOLE_UNPINNED:-}" || "$VERSION" != 1.108.7 ]] && PIN=()  # resolving afresh, on purpose
"$VENV/bin/pip" install -q "${PIN[@]}" "litellm[proxy]==$VERSION" >&2
"$VENV/bin/pip" install -q "${PIN[@]}" "$PROM" >&2
touch "$VENV/.prometheus"
touch "$VENV/.ready"
echo "$VENV/bin/litellm"
