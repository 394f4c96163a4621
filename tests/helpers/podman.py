"""podman as it runs in this sandbox (shared/reference/real-engines.md, section 4: runc instead of crun,
cgroupfs, lowered ulimits, images built locally because no registry is reachable), and an image that
holds a real llama-server: busybox for /bin/sh, the binary, every shared library `ldd` names (copied to
the same paths, symlinks resolved, plus the dynamic loader) and the tiny GGUF models under /models."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.helpers.engines import llama_server_binary, model_path

PODMAN = ["podman", "--runtime", "/usr/sbin/runc", "--cgroup-manager=cgroupfs"]
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
"""The sandbox lacks CAP_SYS_RESOURCE: podman's default limits cannot be set, lowered ones can."""
LOADER = "/lib64/ld-linux-x86-64.so.2"


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=check)


def missing_tools() -> list[str]:
    return [tool for tool in ("podman", "busybox", "ldd") if shutil.which(tool) is None] + (
        [] if Path("/usr/sbin/runc").exists() else ["runc (/usr/sbin/runc)"]
    )


def shared_libraries(binary: str) -> list[str]:
    """Paths of the libraries the binary loads, as `ldd` resolves them (with its RUNPATH)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True, timeout=60).stdout
    paths: list[str] = []
    for line in out.splitlines():
        if "not found" in line:
            raise RuntimeError(f"ldd {binary}: {line.strip()}")
        found = re.search(r"=>\s+(/\S+)\s+\(", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if found:
            paths.append(found.group(1))
    return paths


F32 = "/models/tiny-f32.gguf"
F16 = "/models/tiny-f16.gguf"
"""The tiny GGUFs inside the image (the same files as tests.helpers.engines.model_path makes)."""


def llama_rootfs(root: Path) -> Path:
    def put(source: str, inside: str) -> None:
        target = root / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(source), target)  # the file a symlink names, under the link's path

    binary = llama_server_binary()
    put(shutil.which("busybox") or "busybox", "/bin/busybox")
    (root / "bin" / "sh").symlink_to("busybox")
    put(binary, "/bin/llama-server")
    for library in [*shared_libraries(binary), LOADER]:
        put(library, library)  # llama-server's RUNPATH is its build directory: the same path inside
    put(str(model_path("tiny", seed=1)), F32)
    put(str(model_path("tiny-f16", f16=True, seed=1)), F16)
    for empty in ("tmp", "profile", "proc", "sys", "dev"):
        (root / empty).mkdir(exist_ok=True)
    return root


def import_llama_image(work: Path, tag: str) -> str:
    """Build the rootfs under `work` and import it as the image `tag` (removed by the caller)."""
    root = llama_rootfs(work / "rootfs")
    tarball = work / "rootfs.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True, timeout=120)
    podman("import", str(tarball), tag, timeout=300)
    tarball.unlink()
    shutil.rmtree(root)
    return tag


def launcher(port: int) -> list[str]:
    """The container's command: source the bind-mounted profile file, then exec llama-server (PID 1, so
    `podman restart` stops the server itself and a profile that fails to load exits the container)."""
    return [
        "/bin/sh",
        "-c",
        ". /profile/profile.env; exec /bin/llama-server $POOL_ARGS --host 127.0.0.1 "
        f"--port {port} --metrics -c 2048 -np 2 -t 1",
    ]
