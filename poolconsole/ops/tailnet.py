"""`poolconsole tailnet`: each host's place on the tailnet, judged from `tailscale status --json` here (how
this machine reaches it: direct, relayed through DERP, idle, offline) and on the host over SSH (its own
tailscaled's state). `judge` is pure; `survey` does the reads.

Flagged: a host that answers SSH but is off the tailnet (its tailscaled stopped or logged out, the tailnet
sees it offline, or no peer has its address: SSH then goes over some other network), and one whose
traffic is relayed through a DERP server rather than a direct path (slower: every packet takes a detour)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.collect.tailscale import Node, TailnetStatus, is_tailnet_address, read_local, read_remote
from poolconsole.config.models import Host, PoolConfig


@dataclass(frozen=True)
class HostTailnet:
    host: str
    address: str
    """The address hosts.toml reaches it by (over SSH)."""
    path: str
    """direct | relayed | idle | offline | this machine | not in tailnet | unknown."""
    online: bool | None
    relay: str | None
    """The DERP region it is (or would be) relayed through."""
    direct_endpoint: str | None
    last_handshake_s: float | None
    """Seconds since the last WireGuard handshake with it; None: never, or unknown (`handshake` says which)."""
    tailnet_address: str | None
    """The tailnet address it is reached by: the configured one when that is on the tailnet, else its own."""
    backend_state: str | None
    """The host's own tailscaled (Running, Stopped, NeedsLogin, ...); None when not read."""
    flags: tuple[str, ...]
    notes: tuple[str, ...]
    handshake: str = "unknown"
    """The last handshake in words: "60 s ago", "never" (Tailscale says none happened), "n/a: this machine",
    or "unknown" (no view of it, or Tailscale did not say)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "address": self.address,
            "path": self.path,
            "online": self.online,
            "relay": self.relay,
            "direct_endpoint": self.direct_endpoint,
            "last_handshake_s": self.last_handshake_s,
            "handshake": self.handshake,
            "tailnet_address": self.tailnet_address,
            "backend_state": self.backend_state,
            "flags": list(self.flags),
            "notes": list(self.notes),
        }


def judge(
    host: str,
    address: str,
    local: TailnetStatus | None,
    remote: TailnetStatus | None,
    *,
    ssh_ok: bool | None,
    now: float,
    local_error: str | None = None,
    remote_error: str | None = None,
    rtt_ms: float | None = None,
) -> HostTailnet:
    peer: Node | None = local.find(address) if local is not None else None
    if peer is None and local is not None and remote is not None and remote.self_node is not None:
        peer = next((n for ip in remote.self_node.ips if (n := local.find(ip)) is not None), None)
    is_self = peer is not None and local is not None and peer is local.self_node
    if peer is not None:
        path = "this machine" if is_self else peer.path
    else:
        path = "unknown" if local is None else "not in tailnet"
    on_tailnet_address = is_tailnet_address(address, local)
    tailnet_address = address if on_tailnet_address else (peer.ips[0] if peer and peer.ips else None)
    notes: list[str] = []
    if local is None and local_error:
        notes.append(f"this machine's view: {local_error}")
    if remote is None and remote_error:
        notes.append(f"the host's own view: {remote_error}")
    flags: list[str] = []
    off: str | None = None
    if remote is not None and remote.backend_state != "Running":
        off = f"its tailscaled is {remote.backend_state or 'in no state'}"
    elif path == "offline":
        off = "the tailnet sees it offline"
    elif path == "not in tailnet":
        off = f"no tailnet node has its address {address}"
    if off is not None and ssh_ok:
        flags.append(f"answers SSH but is off the tailnet: {off} (SSH reaches it some other way)")
    elif off is not None:
        notes.append(f"off the tailnet: {off}")
    if path == "relayed":
        slow = f", SSH round trip {rtt_ms:.0f} ms" if rtt_ms is not None else ""
        flags.append(
            f"relayed through DERP {peer.relay if peer else '?'}{slow}: no direct path (UDP blocked or a hard NAT "
            "on one side); every packet takes the detour"
        )
    if peer is not None and not on_tailnet_address and not is_self and peer.ips:
        notes.append(f"SSH goes to {address}, not its tailnet address {peer.ips[0]}")
    handshake = now - peer.last_handshake if peer is not None and peer.last_handshake is not None else None
    if is_self:
        said = "n/a: this machine"
    elif handshake is not None:
        said = f"{max(0.0, handshake):.0f} s ago"
    else:
        said = "never" if peer is not None and peer.never_handshaken else "unknown"
    return HostTailnet(
        host,
        address,
        path,
        peer.online if peer else None,
        (peer.relay or None) if peer else None,
        (peer.cur_addr or None) if peer else None,
        max(0.0, handshake) if handshake is not None else None,
        tailnet_address,
        remote.backend_state if remote is not None else None,
        tuple(flags),
        tuple(notes),
        said,
    )


async def _host_view(pool: SSHPool, host: Host) -> tuple[bool | None, float | None, TailnetStatus | None, str | None]:
    """(answers SSH, its round trip in ms, its own status, why not) for one host."""
    conn = pool[host.name]
    started = time.monotonic()
    try:
        await conn.run("true", 10.0)
    except SSHFailure as exc:
        return False, None, None, f"SSH: {exc.message}"
    rtt = (time.monotonic() - started) * 1000
    status, why = await read_remote(conn)
    return True, rtt, status, why


async def survey(config: PoolConfig) -> list[HostTailnet]:
    """Every host of the config, in its order: this machine's status once, each host's over SSH at once."""
    remote = [h for h in config.hosts if not h.local]
    pool = SSHPool(remote, config.settings.ssh_timeout_s, config.settings.ssh_concurrency)
    try:
        here = asyncio.ensure_future(read_local())
        views = await asyncio.gather(*(_host_view(pool, h) for h in remote))
        local, local_error = await here
    finally:
        await pool.close()
    by_name = dict(zip((h.name for h in remote), views, strict=True))
    now = time.time()
    out = []
    for host in config.hosts:
        if host.local:  # this machine: its own view is the local one
            out.append(judge(host.name, host.address, local, local, ssh_ok=None, now=now, local_error=local_error))
            continue
        ssh_ok, rtt, status, why = by_name[host.name]
        out.append(
            judge(host.name, host.address, local, status, ssh_ok=ssh_ok, now=now, local_error=local_error,
                  remote_error=why, rtt_ms=rtt)
        )  # fmt: skip
    return out



def document(results: list[HostTailnet]) -> dict[str, Any]:
    return {"hosts": [r.to_json() for r in results], "flagged": any(r.flags for r in results)}


def text_lines(results: list[HostTailnet]) -> list[str]:
    """Each host as `tailnet` prints it: its path, tailnet address and handshake, then its flags and notes."""
    lines = []
    for r in results:
        via = f" via DERP {r.relay}" if r.path == "relayed" else (f" {r.direct_endpoint}" if r.direct_endpoint else "")
        lines.append(f"{r.host:16s} {r.path}{via}  tailnet {r.tailnet_address or 'n/a'}  handshake {r.handshake}")
        lines += [f"  !! {f}" for f in r.flags]
        lines += [f"  -- {n}" for n in r.notes]
    return lines


def exit_code(results: list[HostTailnet]) -> int:
    """0 every host on the tailnet and direct (or idle), 1 a host flagged."""
    return 1 if any(r.flags for r in results) else 0
