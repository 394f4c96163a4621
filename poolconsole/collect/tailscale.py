"""Tailscale peer state: `tailscale status --json` run here (this machine's view of every peer) and on
each host over SSH (the host's own view of itself), parsed into immutable snapshots. The parser is pure
and tested on a real, masked capture (tests/fixtures/tailscale/); the reads never raise."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import time
from dataclasses import dataclass
from typing import Any

from poolconsole.collect.ssh import HostConnection, SSHFailure

COMMAND = ("tailscale", "status", "--json")
TIMEOUT_S = 10.0
MAX_BYTES = 8 * 1024 * 1024
NEVER = "0001-01-01T00:00:00Z"
"""Go's zero time: what Tailscale prints for a handshake or write that never happened."""


class StatusUnreadable(ValueError):
    """Not a `tailscale status --json` document."""


@dataclass(frozen=True)
class Node:
    host_name: str
    dns_name: str
    """Without the trailing dot; "" when MagicDNS gives it none."""
    ips: tuple[str, ...]
    online: bool | None
    cur_addr: str
    """The direct path's endpoint, "" when none (relayed through DERP, or idle)."""
    relay: str
    """The DERP region (home region for Self; the one a peer would be relayed through)."""
    active: bool | None
    last_handshake: float | None
    """Epoch seconds; None when never (Go's zero time) or absent."""
    os: str = ""
    never_handshaken: bool = False
    """Tailscale printed Go's zero time: no handshake ever (None above and this False: not said)."""

    @property
    def path(self) -> str:
        """direct | relayed | idle (online, no traffic yet) | offline | unknown."""
        if self.online is False:
            return "offline"
        if self.cur_addr:
            return "direct"
        if self.active and self.relay:
            return "relayed"
        if self.online:
            return "idle"
        return "unknown"

    def names(self) -> set[str]:
        short = self.dns_name.split(".", 1)[0] if self.dns_name else ""
        return {n.lower() for n in (self.host_name, self.dns_name, short) if n}


@dataclass(frozen=True)
class TailnetStatus:
    backend_state: str
    """Running, Stopped, NeedsLogin, NeedsMachineAuth, Starting, NoState (Tailscale's own words)."""
    self_node: Node | None
    peers: tuple[Node, ...]
    magic_dns_suffix: str
    version: str
    fetched_at: float
    source: str

    def find(self, address: str) -> Node | None:
        """The node a host address names: one of its Tailscale IPs, its MagicDNS name (full or short) or
        its host name; Self included."""
        wanted = address.strip().rstrip(".").lower()
        for node in (*self.peers, *([self.self_node] if self.self_node else [])):
            if wanted in {ip.lower() for ip in node.ips} or wanted in node.names():
                return node
        return None


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    text = value.replace("Z", "+00:00")
    if "." in text:  # Go prints up to 9 fraction digits; Python reads 6
        head, _, rest = text.partition(".")
        zone_at = next((i for i, c in enumerate(rest) if not c.isdigit()), len(rest))
        digits, zone = rest[:zone_at], rest[zone_at:]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _node(doc: Any) -> Node | None:
    if not isinstance(doc, dict):
        return None
    ips = doc.get("TailscaleIPs")
    online, active, handshake = doc.get("Online"), doc.get("Active"), doc.get("LastHandshake")
    return Node(
        str(doc.get("HostName") or ""),
        str(doc.get("DNSName") or "").rstrip("."),
        tuple(str(ip) for ip in ips) if isinstance(ips, list) else (),
        online if isinstance(online, bool) else None,
        str(doc.get("CurAddr") or ""),
        str(doc.get("Relay") or ""),
        active if isinstance(active, bool) else None,
        _time(handshake),
        str(doc.get("OS") or ""),
        isinstance(handshake, str) and handshake.startswith("0001-01-01"),
    )


def parse_status(text: str | bytes, source: str, fetched_at: float | None = None) -> TailnetStatus:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StatusUnreadable(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or "BackendState" not in doc:
        raise StatusUnreadable(f"{source}: no BackendState: not `tailscale status --json`")
    peers_doc = doc.get("Peer")
    peers = [_node(p) for p in peers_doc.values()] if isinstance(peers_doc, dict) else []
    return TailnetStatus(
        str(doc.get("BackendState") or ""),
        _node(doc.get("Self")),
        tuple(p for p in peers if p is not None),
        str(doc.get("MagicDNSSuffix") or ""),
        str(doc.get("Version") or ""),
        time.time() if fetched_at is None else fetched_at,
        source,
    )


def is_tailnet_address(address: str, status: TailnetStatus | None = None) -> bool:
    """A Tailscale IP (100.64.0.0/10, fd7a:115c:a1e0::/48) or a name in the tailnet's MagicDNS domain."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        suffix = status.magic_dns_suffix.lower() if status else ""
        name = address.rstrip(".").lower()
        return (bool(suffix) and name.endswith("." + suffix)) or name.endswith(".ts.net")
    return ip in ipaddress.ip_network("100.64.0.0/10") or ip in ipaddress.ip_network("fd7a:115c:a1e0::/48")


async def read_local(timeout_s: float = TIMEOUT_S) -> tuple[TailnetStatus | None, str | None]:
    """This machine's `tailscale status --json` (the CLI on PATH), or (None, why not)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *COMMAND, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except FileNotFoundError:  # the errno's words ("No such file or directory") had been the note
        return None, "tailscale is not installed on this machine (no `tailscale` command on PATH)"
    except PermissionError:
        return None, "tailscale on PATH cannot be run here (permission denied)"
    except OSError as exc:
        return None, f"tailscale could not be run here: {exc.strerror or exc}"
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await process.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return None, f"tailscale status --json did not answer within {timeout_s:g} s"
    if process.returncode != 0:
        return (
            None,
            f"tailscale status --json exited {process.returncode}: {err.decode(errors='replace').strip()[:300]}",
        )
    try:
        return parse_status(out[:MAX_BYTES], "tailscale status --json (here)"), None
    except StatusUnreadable as exc:
        return None, str(exc)


async def read_remote(conn: HostConnection, timeout_s: float = TIMEOUT_S) -> tuple[TailnetStatus | None, str | None]:
    """The host's own `tailscale status --json` over SSH, or (None, why not)."""
    try:
        result = await conn.run(" ".join(COMMAND), timeout_s)
    except SSHFailure as exc:
        return None, f"SSH: {exc.message}"
    if result.exit_status == 127:
        return None, "tailscale is not installed on the host (command not found)"
    if result.exit_status != 0:
        return None, f"tailscale status --json exited {result.exit_status}: {result.stderr.strip()[:300]}"
    try:
        return parse_status(result.stdout[:MAX_BYTES], f"tailscale status --json on {conn.host.name}"), None
    except StatusUnreadable as exc:
        return None, str(exc)
