#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine or a developer's: installs what the tests need
# (system packages when run as root, the Python package with its test extras in .venv, each at the version
# pinned in requirements/test-constraints.txt, llama-server
# and vLLM's CPU build cached under ~/.cache/poolconsole), then runs pytest. Extra arguments go to pytest.
#   scripts/test.sh                 # everything, real-engine tier included (what CI runs)
#   scripts/test.sh -m "not engine" # the fast tier only
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  need=()
  for pkg in openssh-server openssh-client supervisor tmux iproute2 cmake g++ podman runc busybox-static prometheus prometheus-alertmanager; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if ((${#need[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  mkdir -p /run/sshd
fi

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -U pip
.venv/bin/python -m pip install -q -c requirements/test-constraints.txt -e '.[test]'  # pinned: see the file

if [[ " $* " != *"not engine"* ]]; then
  POOLCONSOLE_LLAMA_SERVER="$(PYTHON="$PWD/.venv/bin/python" scripts/build-llama-server.sh)"
  POOLCONSOLE_VLLM_PYTHON="$(PYTHON="$PY" scripts/setup-vllm.sh)"
  POOLCONSOLE_LITELLM="$(PYTHON="$PY" scripts/setup-litellm.sh)"
  export POOLCONSOLE_LLAMA_SERVER POOLCONSOLE_VLLM_PYTHON POOLCONSOLE_LITELLM
fi

exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
