"""`poolconsole tailnet`: each host's place on the tailnet, judged from `tailscale status --json` here (how
this machine reaches it: direct, relayed through DERP, idle, offline) and on the host over SSH (its own
tailscaled's state). `judge` is pure; `survey` does the reads.

Flagged: a host that answers SSH but is off the tailnet (its tailscaled stopped or logged out, the tailnet
sees it offline, or no peer has its address: SSH then goes over some other network), and one whose
traffic is relayed through a DERP server rather than a direct path (slower: every packet takes a detour)."""

from __future__ import annotations

import asyncio
import time

from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.collect.tailscale import Node, TailnetStatus, is_tailnet_address, read_local, read_remote
from poolconsole.config.models import Host, PoolConfig
from poolconsole.model.tailnet import HostTailnet
from poolconsole.model.units import NA


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
        said = f"{NA}: this machine"
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
