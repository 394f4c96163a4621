"""SSH to the pool's hosts on asyncssh: one persistent connection per host, reused across polls,
reconnected with backoff; a timeout on every command; bounded concurrency.

Host keys are verified against known_hosts (asyncssh's default is ~/.ssh/known_hosts). An unknown or
changed key is a state with the fix in words, never accepted silently; `host_key_policy = "accept-new"`
records a first-seen key (as OpenSSH's StrictHostKeyChecking=accept-new), never a changed one, and
creates the known_hosts file (0600, its directory 0700) when there is none yet. A missing known_hosts,
identity or config file is named in the host's error with the fix, never "No such file or directory"
alone. Only key and agent authentication. ~/.ssh/config is honoured the way OpenSSH users expect (Host
aliases, HostName, User, Port, IdentityFile, ProxyJump), through asyncssh's own OpenSSH config support.

Commands are fixed strings from the collectors' modules: nothing from config or the network is
interpolated into them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncssh

from poolconsole.config.models import Host
from poolconsole.model.hosts import HostState

CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)
"""asyncssh's own ciphers, AES-GCM first: it runs in one AES-NI call per packet, where asyncssh builds
chacha20-poly1305 from four cipher contexts in Python (measured 7.6 vs 42 us per packet; a host poll
is about 24 packets, so this was most of the console's SSH cost). Every server OpenSSH has shipped
since 6.2 offers AES-GCM; one that does not still gets the rest of the list. The choice overrides a
`Ciphers` line of ~/.ssh/config."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int | None
    stdout: str
    stderr: str
    elapsed_s: float


class SSHFailure(Exception):
    """A connection or command failure, classified as a host state with the error in words."""

    def __init__(self, state: HostState, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


def _expand(path: str | None) -> str | None:
    return None if path is None else os.path.expanduser(path)


def _known_hosts_path(host: Host) -> str:
    return _expand(host.known_hosts) or os.path.expanduser("~/.ssh/known_hosts")


def _trusted_keys(host: Host, hostname: str, port: int) -> bool:
    """Does known_hosts hold any key for this host (so a verification failure means the key *changed*)?"""
    import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

    path = _known_hosts_path(host)
    if not os.path.exists(path):
        return False
    try:
        known = asyncssh.read_known_hosts(path)
        names = [hostname if port == 22 else f"[{hostname}]:{port}", hostname, host.address]
        for name in names:
            trusted = known.match(name, "", port)
            if trusted[0] or trusted[2]:  # host keys or CA keys
                return True
    except (OSError, ValueError, asyncssh.Error):
        return False
    return False


def _same_path(a: str, b: str | None) -> bool:
    return b is not None and os.path.abspath(a) == os.path.abspath(b)


def _missing_known_hosts(host: Host, hostname: str, port: int) -> SSHFailure:
    kh = _known_hosts_path(host)
    parent = os.path.dirname(os.path.abspath(kh))
    mkdir = "" if os.path.isdir(parent) else f"mkdir -m 700 -p {parent}, then "
    return SSHFailure(
        HostState.HOST_KEY_UNKNOWN,
        f"there is no known_hosts file at {kh}, so the host key of {hostname}:{port} cannot be verified: check "
        f"the key out of band and record it ({mkdir}ssh-keyscan -p {port} {hostname} >> {kh}, after comparing the "
        f'fingerprint), or set host_key_policy = "accept-new" for this host to record the first-seen key',
    )


def _file_failure(exc: OSError, host: Host, hostname: str, port: int) -> SSHFailure:
    """A file the connection needs is missing or unreadable: which one, who named it, and the fix."""
    where = f"{hostname}:{port}"
    path = os.fsdecode(exc.filename)
    problem = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror or exc})"
    kh = _known_hosts_path(host)
    if _same_path(kh, path):
        if isinstance(exc, FileNotFoundError):
            return _missing_known_hosts(host, hostname, port)
        return SSHFailure(
            HostState.HOST_KEY_UNKNOWN,
            f"the known_hosts file {kh} {problem}, so the host key of {where} cannot be verified: fix its "
            "permissions, or point known_hosts for this host at another file",
        )
    if _same_path(_expand(host.identity_file) or "", path):
        return SSHFailure(
            HostState.AUTH_FAILED,
            f"the identity file {path} (identity_file for {where} in hosts.toml) {problem}: fix identity_file, "
            "or remove it to use ~/.ssh/config and the agent",
        )
    config = _expand(host.ssh_config) or os.path.expanduser("~/.ssh/config")
    if host.ssh_config is not None and _same_path(config, path):
        return SSHFailure(
            HostState.UNREACHABLE,
            f"the SSH config file {path} (ssh_config for {where} in hosts.toml) {problem}: fix ssh_config",
        )
    if os.path.exists(config):
        # Reading client keys is what opens files named in the config (IdentityFile, CertificateFile).
        return SSHFailure(
            HostState.AUTH_FAILED,
            f"the identity file {path}, named for {where} in {config}, {problem}: fix the IdentityFile line "
            "there, or set identity_file for this host in hosts.toml",
        )
    return SSHFailure(HostState.UNREACHABLE, f"{path}, needed to connect to {where}, {problem}")


def classify(exc: BaseException, host: Host, target: tuple[str, int]) -> SSHFailure:
    """An exception from asyncssh or the socket layer, as a host state and a sentence with the fix."""
    import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

    if isinstance(exc, SSHFailure):
        return exc
    hostname, port = target
    where = f"{hostname}:{port}"
    kh = _known_hosts_path(host)
    if isinstance(exc, OSError) and exc.filename is not None:
        return _file_failure(exc, host, hostname, port)
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        if _trusted_keys(host, hostname, port):
            return SSHFailure(
                HostState.HOST_KEY_CHANGED,
                f"the host key of {where} does not match the one in {kh}: the host was reinstalled or someone is "
                f"in the middle. Check it out of band, then replace the entry (ssh-keygen -R '[{hostname}]:{port}' "
                f"-f {kh} and ssh once to record the new key)",
            )
        return SSHFailure(
            HostState.HOST_KEY_UNKNOWN,
            f"the host key of {where} is not in {kh}: verify it and add it (ssh -p {port} {hostname} once, or "
            f'ssh-keyscan -p {port} {hostname} >> {kh}), or set host_key_policy = "accept-new" for this host',
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return SSHFailure(
            HostState.AUTH_FAILED,
            f"authentication refused by {where} (key and agent "
            f"authentication only): check user and identity_file, and the key in authorized_keys",
        )
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return SSHFailure(HostState.UNREACHABLE, f"no answer from {where} within the SSH timeout")
    if isinstance(exc, ConnectionRefusedError):
        return SSHFailure(HostState.UNREACHABLE, f"connection refused by {where} (is sshd running on that port?)")
    if isinstance(exc, asyncssh.ConnectionLost):
        return SSHFailure(HostState.UNREACHABLE, f"connection to {where} lost")
    if isinstance(exc, asyncssh.DisconnectError):
        return SSHFailure(HostState.UNREACHABLE, f"{where} disconnected: {exc.reason}")
    if isinstance(exc, OSError):
        return SSHFailure(HostState.UNREACHABLE, f"cannot reach {where}: {exc.strerror or exc}")
    if isinstance(exc, asyncssh.Error):
        return SSHFailure(HostState.UNREACHABLE, f"SSH error with {where}: {exc}")
    return SSHFailure(HostState.UNREACHABLE, f"{type(exc).__name__}: {exc}")


def _append_known_host(path: Path, line: str) -> None:
    """Append one known_hosts line, creating the file 0600 and missing directories 0700, as OpenSSH does
    for ~/.ssh/known_hosts."""
    missing: list[Path] = []
    parent = path.absolute().parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)  # whatever the umask
    created = not path.exists()
    if not created and path.stat().st_size:
        with path.open("rb") as old:
            old.seek(-1, os.SEEK_END)
            if old.read(1) != b"\n":
                line = "\n" + line  # never glue the entry onto a last line that lacks its newline
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as fh:
        if created:
            os.fchmod(fd, 0o600)  # whatever the umask
        fh.write(line)


class HostConnection:
    """One persistent SSH connection to one host, opened on first use and after any failure."""

    BACKOFF = (1.0, 2.0, 5.0, 10.0, 30.0)

    def __init__(self, host: Host, timeout_s: float, semaphore: asyncio.Semaphore) -> None:
        self.host = host
        self.timeout_s = timeout_s
        self.semaphore = semaphore
        self.conn: asyncssh.SSHClientConnection | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.last_failure: SSHFailure | None = None
        self.connects = 0
        self._lock = asyncio.Lock()

    def _options(self) -> dict[str, Any]:
        """Key or agent authentication only, known_hosts checked, AES-GCM preferred (see CIPHERS)."""
        host = self.host
        opts: dict[str, Any] = {
            "known_hosts": _known_hosts_path(host),
            "password_auth": False,
            "kbdint_auth": False,
            "connect_timeout": self.timeout_s,
            "keepalive_interval": 30,
            "keepalive_count_max": 3,
            "encryption_algs": CIPHERS,
        }
        if host.port is not None:
            opts["port"] = host.port
        if host.user is not None:
            opts["username"] = host.user
        if host.identity_file is not None:
            opts["client_keys"] = [_expand(host.identity_file)]
        if host.ssh_config is not None:
            opts["config"] = [_expand(host.ssh_config)]
        return opts

    def target(self) -> tuple[str, int]:
        """The address and port asyncssh will use after ~/.ssh/config (for messages)."""
        return self.host.address, self.host.port or 22

    def _may_accept_new(self, exc: Exception) -> bool:
        """accept-new, and the key is not known yet: not verifiable with no entry, or no known_hosts file at all
        (a key that does not match an entry is a changed key, never recorded)."""
        if self.host.host_key_policy != "accept-new":
            return False
        if isinstance(exc, FileNotFoundError):
            return exc.filename is not None and _same_path(_known_hosts_path(self.host), os.fsdecode(exc.filename))
        return not _trusted_keys(self.host, *self.target())

    async def _accept_new(self, opts: dict[str, Any]) -> None:
        """accept-new: record an unknown host's key, the way OpenSSH's StrictHostKeyChecking=accept-new does.
        The next connection verifies against what was recorded, so a key swapped in between is refused."""
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        hostname, port = self.target()
        key = await asyncssh.get_server_host_key(hostname, port, config=opts.get("config", ()))
        if key is None:
            raise asyncssh.HostKeyNotVerifiable("no host key offered")
        path = Path(opts["known_hosts"])
        name = hostname if port == 22 else f"[{hostname}]:{port}"
        try:
            _append_known_host(path, f"{name} {key.export_public_key().decode().strip()}\n")
        except OSError as exc:
            raise SSHFailure(
                HostState.HOST_KEY_UNKNOWN,
                f'host_key_policy = "accept-new" could not record the host key of {hostname}:{port} in {path}: '
                f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}; fix the permissions or "
                "point known_hosts for this host at a writable file",
            ) from None

    async def connect(self) -> asyncssh.SSHClientConnection:
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        if self.conn is not None and not self.conn.is_closed():
            return self.conn
        now = time.monotonic()
        if now < self.retry_at and self.last_failure is not None:
            raise self.last_failure
        opts = self._options()
        try:
            async with asyncio.timeout(self.timeout_s * 2):
                try:
                    self.conn = await asyncssh.connect(self.host.address, **opts)
                except (asyncssh.HostKeyNotVerifiable, FileNotFoundError) as exc:
                    if not self._may_accept_new(exc):
                        raise
                    await self._accept_new(opts)
                    self.conn = await asyncssh.connect(self.host.address, **opts)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            failure = classify(exc, self.host, self.target())
            self.failures += 1
            self.retry_at = now + self.BACKOFF[min(self.failures - 1, len(self.BACKOFF) - 1)]
            self.last_failure = failure
            raise failure from None
        self.failures = 0
        self.last_failure = None
        self.connects += 1
        return self.conn

    async def run(self, command: str, timeout_s: float | None = None, stdin: str | None = None) -> CommandResult:
        """Run a fixed command; raises SSHFailure. `stdin` is written to the command's standard input (how a
        profile's values reach the host: never in the command line). A command that outlives its timeout is
        abandoned; the connection is kept when the host still answers a ping, dropped when it does not."""
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        timeout = timeout_s or self.timeout_s
        async with self.semaphore:
            async with self._lock:
                conn = await self.connect()
            start = time.monotonic()
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see collect.tasks
                    result = await conn.run(command, check=False, input=stdin)
            except TimeoutError:
                raise await self._hung(conn, command, timeout) from None
            except (asyncssh.Error, OSError) as exc:
                await self.close()
                raise classify(exc, self.host, self.target()) from None
        stdout = result.stdout if isinstance(result.stdout, str) else (result.stdout or b"").decode(errors="replace")
        stderr = result.stderr if isinstance(result.stderr, str) else (result.stderr or b"").decode(errors="replace")
        return CommandResult(command, result.exit_status, stdout, stderr, time.monotonic() - start)

    async def start(self, command: str) -> asyncssh.SSHClientProcess[str]:
        """Start a long-lived fixed command (a telemetry loop); raises SSHFailure. It holds no slot of the
        concurrency bound: it mostly waits."""
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        async with self._lock:
            conn = await self.connect()
        try:
            async with asyncio.timeout(self.timeout_s):
                return await conn.create_process(command)
        except TimeoutError:
            raise await self._hung(conn, command, self.timeout_s) from None
        except (asyncssh.Error, OSError) as exc:
            await self.close()
            raise classify(exc, self.host, self.target()) from None

    async def _hung(self, conn: asyncssh.SSHClientConnection, command: str, timeout: float) -> SSHFailure:
        """A command outlived its timeout: is the command stuck, or has the host (or the link) gone?"""
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        try:
            async with asyncio.timeout(min(2.0, self.timeout_s)):
                await conn.run("true", check=False)
        except (TimeoutError, asyncssh.Error, OSError):
            self.abort()
            hostname, port = self.target()
            return SSHFailure(
                HostState.UNREACHABLE,
                f"{hostname}:{port} stopped answering (host down or link cut): "
                f"`{command.split()[0]}` got no answer within {timeout:g} s, nor did a ping",
            )
        return SSHFailure(
            HostState.DEGRADED,
            f"`{command.split()[0]}` did not finish within {timeout:g} s on the host (the host answers otherwise)",
        )

    def abort(self) -> None:
        """Drop the connection without a goodbye (the peer is not answering)."""
        if self.conn is not None:
            self.conn.abort()
            self.conn = None

    async def close(self) -> None:
        import asyncssh  # imported when SSH is first used: a pool without hosts never loads it

        if self.conn is not None:
            self.conn.close()
            with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
                async with asyncio.timeout(2):
                    await self.conn.wait_closed()
            self.conn = None


class SSHPool:
    """Connections to every host, sharing one concurrency bound."""

    def __init__(self, hosts: list[Host], timeout_s: float, concurrency: int) -> None:
        self.semaphore = asyncio.Semaphore(concurrency)
        self.timeout_s = timeout_s
        self.connections = {h.name: HostConnection(h, timeout_s, self.semaphore) for h in hosts}

    def __getitem__(self, name: str) -> HostConnection:
        return self.connections[name]

    def add(self, host: Host) -> HostConnection:
        self.connections[host.name] = HostConnection(host, self.timeout_s, self.semaphore)
        return self.connections[host.name]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()))
