"""Each host's place on the tailnet as `poolconsole tailnet` shows it: the judged view of one host (ops.tailnet
judges it from the Tailscale status here and on the host), the document `--json` prints, the text lines and the
exit code. Pure data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
