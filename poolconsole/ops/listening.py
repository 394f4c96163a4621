"""Where an engine listens, as `ss -ltn` on its host over SSH sees it, and who that lets reach it: every
interface, a public or LAN address, the tailnet, or loopback only (the exposure audit's listen checks)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from poolconsole.collect.hosts import poll as host_commands
from poolconsole.collect.ssh import SSHFailure, SSHPool
from poolconsole.config.models import Engine, Host

LISTEN_COMMAND = host_commands.LISTENING
TAILNET_V4 = ipaddress.ip_network("100.64.0.0/10")
TAILNET_V6 = ipaddress.ip_network("fd7a:115c:a1e0::/48")


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    process: str | None

    def scope(self) -> str:
        """all (every interface), public, lan, tailnet or loopback."""
        if self.address in ("*", "0.0.0.0", "::"):
            return "all"
        try:
            ip = ipaddress.ip_address(self.address)
        except ValueError:
            return "public"
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_unspecified:
            return "all"
        if ip.is_loopback:
            return "loopback"
        if ip in TAILNET_V4 or ip in TAILNET_V6:
            return "tailnet"
        if ip.is_private or ip.is_link_local:
            return "lan"
        return "public"

    def text(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"


def parse_ss(text: str) -> list[Listener]:
    """`ss -ltnH` (with or without -p) as listeners: local address and port, and the process where shown."""
    out: list[Listener] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] != "LISTEN":
            continue
        local = parts[3]
        address, _, port = local.rpartition(":")
        if not port.isdigit():
            continue
        address = address.strip("[]").split("%", 1)[0]
        process = None
        rest = " ".join(parts[5:])
        if 'users:(("' in rest:
            process = rest.split('users:(("', 1)[1].split('"', 1)[0]
        out.append(Listener(address, int(port), process))
    return out


def engine_port(engine: Engine) -> int:
    parts = urlsplit(engine.url)
    return parts.port or (443 if parts.scheme == "https" else 80)


async def read_listeners(pool: SSHPool, host: Host) -> tuple[list[Listener] | None, str | None]:
    """The host's listening TCP sockets over SSH, or (None, why not)."""
    try:
        result = await pool[host.name].run(LISTEN_COMMAND)
    except SSHFailure as exc:
        return None, f"listening addresses not read: {exc.message}"
    if result.exit_status == host_commands.NOT_FOUND:
        return None, (
            f"listening addresses not read: {host.name} has no `ss` (iproute2 on Linux; macOS has none, so "
            "where an engine listens is not checked there)"
        )
    if result.exit_status != 0:
        return None, f"listening addresses not read: `ss` exited {result.exit_status} on {host.name}"
    return parse_ss(result.stdout), None


CONTAINED = {
    frozenset({"loopback"}): "it listens on loopback only: only this host's users and processes reach it",
    frozenset({"tailnet"}): "it listens on the tailnet only: any tailnet peer can use it",
    frozenset({"loopback", "tailnet"}): "it listens on loopback and the tailnet only: any tailnet peer can use it",
}
UNKNOWN_LISTEN = "where it listens was not checked"


@dataclass(frozen=True)
class Reach:
    """Who reaches the engine, from where it listens: `local` (loopback only: this host's users and
    processes), `contained` (loopback and/or the tailnet only) or neither (every interface, a public or LAN
    address, or not known: unknown is never contained)."""

    local: bool
    contained: bool
    where: str
    """Said after a finding: the listen scope that rates it, or that the scope is unknown; empty for a wider
    listener (its listen_* finding says where)."""


def reach(mine: list[Listener] | None) -> Reach:
    if not mine:  # not read, or nothing on the engine's port as `ss` saw it
        return Reach(False, False, f" ({UNKNOWN_LISTEN})")
    scopes = frozenset(s.scope() for s in mine)
    if scopes in CONTAINED:
        return Reach(scopes == {"loopback"}, True, f" ({CONTAINED[scopes]})")
    return Reach(False, False, "")
