"""A simulated host keeps only the SSH sessions open now (issue 35 item 9): it had kept every connection it
ever accepted, so each reconnect of the console's pollers held a whole connection for the rest of the demo."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncssh

from poolconsole.sim.demo import SimPool
from poolconsole.sim.hosts import MAX_COMMANDS


async def test_closed_sessions_leave_and_the_command_record_is_bounded(tmp_path: Path) -> None:
    pool = SimPool(seed=5)
    keys = tmp_path / "keys"
    await pool.start(keys)
    try:
        await pool.wait_ready()
        host = next(iter(pool.sim_hosts.values()))
        before = len(host._conns)
        for _ in range(5):
            async with asyncssh.connect(
                "127.0.0.1",
                port=host.port,
                username="demo",
                client_keys=[str(keys / "id_ed25519")],
                known_hosts=str(keys / "known_hosts"),
            ) as conn:
                assert (await conn.run("true")).exit_status == 0
        for _ in range(50):  # the server hears each close a moment later
            if len(host._conns) <= before:
                break
            await asyncio.sleep(0.05)
        assert len(host._conns) <= before
        for i in range(MAX_COMMANDS + 5):
            host.commands.append(f"docker inspect {i}")
        assert len(host.commands) == MAX_COMMANDS and host.commands[-1] == f"docker inspect {MAX_COMMANDS + 4}"
    finally:
        await pool.stop()
