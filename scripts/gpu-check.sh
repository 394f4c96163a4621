#!/usr/bin/env bash
# The device check of issue 19: poolconsole on a real NVIDIA GPU, in one command (about 2 minutes, under 8).
#
# It installs the package into a venv (pip install -e .), starts a throwaway sshd on 127.0.0.1 with
# keys made for this run, and writes a config with this machine twice: `self-nvml` (local = true, read
# through NVML) and `self-ssh` (nvidia-smi over that sshd), each with an engine on GPU 0. Then
# scripts/gpu_check.py runs `poolconsole status --json` idle and under a torch workload of known size,
# compares both hosts' readings with nvidia-smi --query-gpu and NVML read directly (printed side by side),
# checks the workload's process is mapped to the engine with its memory, that the reading follows when
# it stops, measures the cost per sample of the NVML reader and of the streamed nvidia-smi loop, and
# saves masked captures (UUIDs, serials, host names) for tests/fixtures/real/.
#
# The machine it runs on has no network: first, here, with network, fetch the package's wheels:
#   scripts/gpu-check.sh --fetch-wheels        # -> build/gpu-check-wheels (ignored by git, ~20 MB)
# then on the lent machine, in one call:
#   run(command="scripts/gpu-check.sh", carry=["build/gpu-check-wheels"], timeout_s=540)
# What comes back under $OUT (else build/gpu-check-out): gpu-check.log, report.json, comparison.txt and
# captures/gpu-check-captures.tar.gz (the masked captures, with a CAPTURE.md). Exit 0: every check passed;
# 1: some failed (listed at the end); 2: the set-up failed.
#
# Environment: PYTHON (default python3, the one holding torch: the workload runs under it), GPU_CHECK_GIB
# (memory the workload holds, default 8), GPU_CHECK_VENV (use this existing venv instead of installing),
# SSHD (the sshd binary; without one, an asyncssh server stands in and the report says so), GPU_CHECK_KEEP
# (keep the work folder under /tmp: keys, config, unmasked logs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY="${PYTHON:-python3}"
WHEELS="$ROOT/build/gpu-check-wheels"

if [[ ${1:-} == --fetch-wheels ]]; then
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  platforms=()
  for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
  done
  "$PY" -m pip download -q --only-binary=:all: --python-version "${WHEEL_PYTHON:-3.12}" --implementation cp \
    "${platforms[@]}" -d "$WHEELS" "setuptools>=68" "$ROOT"
  du -sh "$WHEELS"
  exit 0
fi

OUT="${OUT:-$ROOT/build/gpu-check-out}"
WORK="$(mktemp -d /tmp/gpu-check.XXXXXX)"
mkdir -p "$OUT/captures" "$WORK/captures"
export PYTHONUNBUFFERED=1
PIDS=()
VPY=""
finish() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ -s $WORK/log && -n $VPY ]]; then  # the log, masked like the captures
    "$VPY" scripts/gpu_check.py mask "$WORK/log" >"$OUT/gpu-check.log" 2>/dev/null || true
  fi
  [[ -n ${GPU_CHECK_KEEP:-} ]] || rm -rf "$WORK"
  exit "$rc"
}
trap finish EXIT
exec > >(tee "$WORK/log") 2>&1
t0=$SECONDS
step() { printf '\n== +%ss %s\n' "$((SECONDS - t0))" "$*"; }

step "the GPU (no UUID or serial printed)"
if ! command -v nvidia-smi >/dev/null; then
  echo "nvidia-smi is not on PATH: this is not an NVIDIA machine"
  exit 2
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total,mig.mode.current --format=csv,noheader
"$PY" -c 'import torch; print("torch", torch.__version__, "sees CUDA:", torch.cuda.is_available())' 2>&1 \
  || echo "torch does not import under $PY: the workload checks will report that no workload could start"

step "install poolconsole into a venv"
if [[ -n ${GPU_CHECK_VENV:-} ]]; then
  VPY="$GPU_CHECK_VENV/bin/python"
else
  VENV="$WORK/venv"
  if "$PY" -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    PIP=("$VENV/bin/python" -m pip)
  else  # a python without ensurepip: pip from outside, installing into the venv
    rm -rf "$VENV" && "$PY" -m venv --without-pip "$VENV"
    PIP=("$PY" -m pip --python "$VENV/bin/python")
  fi
  if [[ -d $WHEELS ]]; then
    PIP_CONFIG_FILE=/dev/null "${PIP[@]}" install -q --no-index --find-links "$WHEELS" -e "$ROOT"
  else
    echo "no $WHEELS: installing from the index (needs network; see --fetch-wheels)"
    "${PIP[@]}" install -q -e "$ROOT"
  fi
  VPY="$VENV/bin/python"
fi
"$VPY" -m poolconsole --version

step "a throwaway SSH server on 127.0.0.1"
SSH="$WORK/ssh"
mkdir -p "$SSH/home"
"$VPY" scripts/gpu_check.py keygen "$SSH/host_ed25519" "$SSH/client_ed25519"
cp "$SSH/client_ed25519.pub" "$SSH/authorized_keys"
PORT=$("$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
up() {  # is something listening on the port? (up to 10 s)
  for _ in $(seq 100); do
    if "$VPY" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
SSHD_BIN="${SSHD:-$(command -v sshd || echo /usr/sbin/sshd)}"
SERVER=none
if [[ -x $SSHD_BIN ]]; then
  mkdir -p /run/sshd
  # The session sees this PATH (nvidia-smi may live under the driver's own folder) and its libraries;
  # HOME keeps the machine's shell start-up files out.
  session="PATH=$PATH HOME=$SSH/home"
  if [[ -n ${LD_LIBRARY_PATH:-} ]]; then session+=" LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; fi
  cat >"$SSH/sshd_config" <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $SSH/host_ed25519
AuthorizedKeysFile $SSH/authorized_keys
PidFile $SSH/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxSessions 64
MaxStartups 100
SetEnv $session
EOF
  "$SSHD_BIN" -D -e -f "$SSH/sshd_config" 2>"$SSH/sshd.log" &
  PIDS+=($!)
  if up; then SERVER="openssh ($("$SSHD_BIN" -V 2>&1 | head -1 || true))"; else
    echo "sshd did not start:" && tail -5 "$SSH/sshd.log"
  fi
fi
if [[ $SERVER == none ]]; then
  echo "no working OpenSSH sshd: an asyncssh server stands in (the SSH path is then not tested against OpenSSH)"
  "$VPY" scripts/gpu_check.py serve-ssh --port "$PORT" --host-key "$SSH/host_ed25519" \
    --authorized-keys "$SSH/authorized_keys" 2>"$SSH/serve.log" &
  PIDS+=($!)
  up || { echo "no SSH server could be started" && cat "$SSH/serve.log"; exit 2; }
  SERVER="asyncssh (no sshd on this machine)"
fi
echo "[127.0.0.1]:$PORT $(cat "$SSH/host_ed25519.pub")" >"$SSH/known_hosts"
echo "listening on 127.0.0.1:$PORT: $SERVER"

step "the config: this machine through NVML and over SSH, an engine on GPU 0 of each"
ssh_keys="port = $PORT
user = \"$(id -un)\"
identity_file = \"$SSH/client_ed25519\"
known_hosts = \"$SSH/known_hosts\""
cat >"$WORK/hosts.toml" <<EOF
[settings]
poll_interval_s = 1.0
http_timeout_s = 2.0
ssh_timeout_s = 10.0

[[hosts]]
name = "self-nvml"
address = "127.0.0.1"
local = true
description = "this machine, read through NVML (over SSH if NVML does not load)"
$ssh_keys

[[hosts]]
name = "self-ssh"
address = "127.0.0.1"
description = "this machine, nvidia-smi over SSH to 127.0.0.1"
$ssh_keys

# The engines only give the GPU an owner: nothing listens on port 9, so they read "down".
[[engines]]
name = "gpu0-nvml"
kind = "vllm"
url = "http://127.0.0.1:9"
host = "self-nvml"
gpus = [0]

[[engines]]
name = "gpu0-ssh"
kind = "vllm"
url = "http://127.0.0.1:9"
host = "self-ssh"
gpus = [0]
EOF
"$VPY" -m poolconsole check-config "$WORK/hosts.toml"

step "the checks"
rc=0
timeout 420 "$VPY" scripts/gpu_check.py run --config "$WORK/hosts.toml" --captures "$WORK/captures" \
  --torch-python "$PY" --gib "${GPU_CHECK_GIB:-8}" --sshd "$SERVER" || rc=$?

step "what comes back"
for f in report.json comparison.txt; do
  if [[ -f $WORK/captures/$f ]]; then cp "$WORK/captures/$f" "$OUT/$f"; fi
done
tar -C "$WORK" -czf "$OUT/captures/gpu-check-captures.tar.gz" captures
tar -tzf "$OUT/captures/gpu-check-captures.tar.gz" | sed 's/^/  /'
ls -la "$OUT" "$OUT/captures"
echo "exit $rc after $((SECONDS - t0)) s"
exit "$rc"
