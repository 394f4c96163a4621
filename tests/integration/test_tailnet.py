"""Tailscale peer state per host, on a real (masked) `tailscale status --json` capture: no tailnet runs here,
so a shim `tailscale` on PATH (tests/helpers/shims/tailscale-bin/) plays this machine's view and the demo's
simulated hosts answer `tailscale status --json` over real SSH with their own. Direct, relayed through DERP,
idle and off-the-tailnet hosts are told apart; a host that answers SSH but is off the tailnet, and one
relayed, are flagged."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.collect.tailscale import parse_status, read_local
from poolconsole.ops.tailnet import judge
from poolconsole.sim.demo import SimPool
from tests.conftest import FIXTURES

CAPTURE = FIXTURES / "tailscale" / "status-1.102.4-windows-masked.json"
SHIMS = Path(__file__).resolve().parents[1] / "helpers" / "shims" / "tailscale-bin"
IDLE, DIRECT = "100.100.10.2", "100.100.10.3"
HANDSHAKE = dt.datetime(2026, 10, 3, 2, 19, 7, 175446, dt.UTC).timestamp()  # "2026-10-03T11:19:07.1754464+09:00"
NOW = HANDSHAKE + 60.0


def capture() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(CAPTURE.read_text())
    return doc


def peer(doc: dict[str, Any], ip: str) -> dict[str, Any]:
    return next(p for p in doc["Peer"].values() if ip in p["TailscaleIPs"])


def test_the_real_capture_parses_into_its_three_states() -> None:
    status = parse_status(CAPTURE.read_text(), "capture")
    assert status.backend_state == "Running" and status.magic_dns_suffix == "tail0000aa.ts.net"
    assert status.self_node is not None and status.self_node.relay == "tok" and status.self_node.cur_addr == ""
    idle, direct = status.find(IDLE), status.find("peer-direct")
    assert idle is not None and idle.path == "idle" and idle.last_handshake is None  # 0001-01-01: never
    assert idle.never_handshaken and direct is not None and not direct.never_handshaken
    assert direct is not None and direct.path == "direct" and direct.cur_addr == "172.16.31.147:41641"
    assert direct.last_handshake == pytest.approx(HANDSHAKE, abs=1e-3)
    assert status.find("peer-direct.tail0000aa.ts.net.") is direct and status.find("100.100.10.99") is None


def test_judging_each_path() -> None:
    local = parse_status(CAPTURE.read_text(), "capture")
    direct = judge("a", "peer-direct.tail0000aa.ts.net", local, None, ssh_ok=True, now=NOW)
    assert (direct.path, direct.flags, direct.tailnet_address) == ("direct", (), "peer-direct.tail0000aa.ts.net")
    assert direct.last_handshake_s == pytest.approx(60.0, abs=1e-3) and direct.handshake == "60 s ago"
    idle = judge("b", IDLE, local, None, ssh_ok=True, now=NOW)
    assert (idle.path, idle.flags, idle.relay, idle.handshake) == ("idle", (), "tok", "never")
    lan = judge("c", "192.168.1.50", local, None, ssh_ok=True, now=NOW)
    assert lan.path == "not in tailnet" and lan.flags and "answers SSH but is off the tailnet" in lan.flags[0]
    assert lan.last_handshake_s is None and lan.handshake == "unknown"  # no node: not "never"
    assert local.self_node is not None
    here = judge("s", local.self_node.ips[0], local, None, ssh_ok=None, now=NOW)
    assert here.path == "this machine" and here.handshake == "n/a: this machine"
    silent = capture()
    del peer(silent, DIRECT)["LastHandshake"]  # a Tailscale that does not say: unknown, not never
    unsaid = judge("u", DIRECT, parse_status(json.dumps(silent), "silent"), None, ssh_ok=True, now=NOW)
    assert unsaid.path == "direct" and unsaid.last_handshake_s is None and unsaid.handshake == "unknown"
    down = judge("d", "192.168.1.50", local, None, ssh_ok=False, now=NOW)
    assert not down.flags and down.notes  # not answering SSH either: the host's row says so, not this flag
    doc = capture()
    peer(doc, IDLE).update(Active=True)  # traffic flowing, no direct path: relayed through DERP tok
    relayed = judge("e", IDLE, parse_status(json.dumps(doc), "relayed"), None, ssh_ok=True, now=NOW, rtt_ms=180)
    assert relayed.path == "relayed" and "relayed through DERP tok, SSH round trip 180 ms" in relayed.flags[0]


@pytest.fixture
async def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[SimPool, Path]]:
    """Three simulated hosts over SSH, each with its own tailscale view, and the shim playing this machine's."""
    doc = capture()
    peer(doc, IDLE).update(Active=True)  # rig3090's traffic is relayed
    local = tmp_path / "local-status.json"
    local.write_text(json.dumps(doc))
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("POOLCONSOLE_TAILSCALE_STATUS", str(local))
    pool = SimPool(seed=9)
    await pool.start(tmp_path / "keys")

    def own_view(ip: str, state: str = "Running") -> str:
        view = capture()
        view["BackendState"] = state
        view["Self"]["TailscaleIPs"] = [ip]
        return json.dumps(view)

    pool.sim_hosts["tp4"].tailscale = own_view(DIRECT)
    pool.sim_hosts["rig3090"].tailscale = own_view(IDLE)
    pool.sim_hosts["ws48"].tailscale = own_view("100.100.10.99", "Stopped")  # `tailscale down` on the host
    blocks = pool.config_toml().split("\n[[")
    keep = [b for b in blocks[1:] if b.startswith("hosts]]") and any(f'name = "{n}"' in b for n in HOSTS)]
    path = tmp_path / "hosts.toml"
    path.write_text("\n[[".join([blocks[0], *keep]) + "\n")
    try:
        yield pool, path
    finally:
        await pool.stop()


HOSTS = ("tp4", "ws48", "rig3090", "duo5090")


async def test_tailnet_json_flags_off_tailnet_and_relayed_hosts(
    hosts: tuple[SimPool, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = hosts
    code = await asyncio.to_thread(cli.main, ["tailnet", "--config", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    by_host = {h["host"]: h for h in doc["hosts"]}
    assert code == 1 and doc["flagged"] is True and set(by_host) == set(HOSTS)
    tp4 = by_host["tp4"]
    assert (tp4["path"], tp4["flags"], tp4["tailnet_address"]) == ("direct", [], DIRECT)
    assert tp4["direct_endpoint"] == "172.16.31.147:41641" and tp4["backend_state"] == "Running"
    assert any("not its tailnet address 100.100.10.3" in n for n in tp4["notes"])  # SSH goes to 127.0.0.1
    rig = by_host["rig3090"]
    assert rig["path"] == "relayed" and rig["relay"] == "tok" and rig["last_handshake_s"] is None
    assert rig["handshake"] == "never" and by_host["duo5090"]["handshake"] == "unknown"
    assert len(rig["flags"]) == 1 and rig["flags"][0].startswith("relayed through DERP tok, SSH round trip")
    ws48 = by_host["ws48"]
    assert ws48["backend_state"] == "Stopped" and ws48["path"] == "not in tailnet"
    assert ws48["flags"] == [
        "answers SSH but is off the tailnet: its tailscaled is Stopped (SSH reaches it some other way)"
    ]
    duo = by_host["duo5090"]  # no tailscale installed on it, and no tailnet node has its address
    assert duo["backend_state"] is None and "not installed" in " ".join(duo["notes"])
    assert duo["flags"] and "no tailnet node has its address 127.0.0.1" in duo["flags"][0]


async def test_no_tailscaled_here_is_said_not_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("POOLCONSOLE_TAILSCALE_STATUS", raising=False)
    status, why = await read_local()
    assert status is None and why is not None and "failed to connect to local tailscaled" in why
    judged = judge("a", DIRECT, None, None, ssh_ok=True, now=NOW, local_error=why)
    assert judged.path == "unknown" and not judged.flags and "failed to connect" in judged.notes[0]


async def test_tailnet_text_says_never_only_when_tailscale_does(
    hosts: tuple[SimPool, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = hosts
    code = await asyncio.to_thread(cli.main, ["tailnet", "--config", str(path)])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")}
    assert code == 1 and set(rows) == set(HOSTS)
    assert rows["rig3090"].endswith("handshake never")  # Go's zero time in its capture
    assert rows["duo5090"].endswith("handshake unknown")  # no tailnet node: nothing said either way


async def test_no_tailscale_command_here_is_said_in_words(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The note had been the errno's words alone: 'No such file or directory'."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no tailscale
    status, why = await read_local()
    assert status is None and why == "tailscale is not installed on this machine (no `tailscale` command on PATH)"
