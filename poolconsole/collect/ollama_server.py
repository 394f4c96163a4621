"""An Ollama server's own settings (OLLAMA_KEEP_ALIVE, OLLAMA_NUM_PARALLEL) over SSH: Ollama serves them on
no endpoint, but logs them at start in its `server config` line, defaults included. The line is found in
the engine's log (its control backend or `[engines.logs]`, as collect.engine_logs reads it) by a fixed
`grep -F` on the host, so only that one line travels back; the log's text never reaches a shell."""

from __future__ import annotations

import shlex

from poolconsole.collect.engine_logs import DEFAULT_BYTES, MAX_LINES, LogsUnavailable, clean, log_plan
from poolconsole.collect.ssh import HostConnection, SSHFailure
from poolconsole.config.models import Engine
from poolconsole.model.ollama import SERVER_CONFIG_MARK, OllamaServer, parse_server_config

TIMEOUT_S = 20.0


def settings_command(engine: Engine) -> tuple[str, str]:
    """(the shell line, its source in words): the log's newest MAX_LINES lines, the last server config line
    of them. LogsUnavailable when the engine has no log source."""
    plan = log_plan(engine, None, MAX_LINES, DEFAULT_BYTES)
    command = f"{shlex.join(plan.argv)} 2>&1 | grep -a -F -e {shlex.quote(SERVER_CONFIG_MARK)} | tail -n 1"
    return command, f"{plan.source}, its server config line"


async def read_server_settings(conn: HostConnection, engine: Engine) -> OllamaServer:
    try:
        command, source = settings_command(engine)
    except LogsUnavailable as exc:
        return OllamaServer(None, None, "its log", str(exc))
    try:
        result = await conn.run(command, TIMEOUT_S)
    except SSHFailure as exc:
        return OllamaServer(None, None, source, exc.message)
    line = clean(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else ""
    if not line:
        return OllamaServer(None, None, source, "no server config line in its log (rotated away, or not Ollama's log)")
    return parse_server_config(line, source)
