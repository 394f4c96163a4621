"""poolconsole: the operator console of a self-hosted GPU inference pool. With no command it opens the
console on the configured pool (the simulated demo pool when none is configured)."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import shutil
import sys
from collections.abc import Sequence

from poolconsole import __version__
from poolconsole.commands import console
from poolconsole.commands.common import (
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_READER_GONE,
    audit_read,
    confirm,
    default_config_path,
    demo_stores_of,
    history_path,
    user_config_file,
)
from poolconsole.commands.launch import DEMO_HINT, DemoConsole, demo_console, open_console
from poolconsole.config import ConfigError

__all__ = [
    "DEMO_HINT",
    "EXIT_CONFIG",
    "EXIT_OK",
    "EXIT_PROBLEM",
    "EXIT_READER_GONE",
    "DemoConsole",
    "audit_read",
    "build_parser",
    "confirm",
    "default_config_path",
    "demo_console",
    "demo_stores_of",
    "history_path",
    "main",
    "open_console",
]

COMMANDS: dict[str, str] = {
    "status": "status",
    "check-config": "check_config",
    "schema": "schema",
    "smoke": "smoke",
    "plan": "plan",
    "audit": "audit",
    "logs": "logs",
    "exposure": "exposure",
    "tailnet": "tailnet",
    "restart": "action",
    "rollover": "action",
    "exporter": "exporter",
    "record": "record",
    "watch": "watch",
    "prometheus-rules": "prometheus_rules",
    "export": "export",
    "ledger": "ledger",
    "runs": "runs",
    "replay": "replay",
    "prometheus-config": "prometheus_config",
    "demo": "demo",
}
"""Each command, by the module of commands/ that adds its parser, in the order --help lists them. A run imports
only its command's module, and the console's launch none (the 21 modules and what they import were ~5 ms of
its start-up); tests/unit/test_cli.py holds this table to the parsers the modules add."""
EVERY = tuple(dict.fromkeys(COMMANDS.values()))
"""Every module of the table, once, in its order."""
VALUED = ("--config", "--prometheus")
"""The options before a command that take a value (the value is not the command)."""


def modules_for(argv: Sequence[str]) -> list[str]:
    """The modules of commands/ whose parsers `argv` needs: its command's; none for the console (no command and
    no help asked for); every one when in doubt (help, an unknown word: argparse lists the choices)."""
    words = iter(argv)
    for word in words:
        if word in VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return [COMMANDS[word]] if word in COMMANDS else list(EVERY)
    asks_help = any(w.startswith(("-h", "--h")) for w in argv)
    return list(EVERY) if asks_help else []


class _OneLineFormatter(argparse.HelpFormatter):
    """One line per command: argparse measures the command names at one indent less than it draws them,
    so the longest (check-config) would wrap; its column is widened by that indent."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            longest = max(len(name) for name in action.choices)
            self._action_max_length = max(self._action_max_length, longest + self._current_indent + 4)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return _OneLineFormatter(prog, max_help_position=24, width=max(80, shutil.get_terminal_size().columns))


def build_parser(modules: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser, with the parsers of `modules` (commands/; modules_for), of every command by
    default."""
    parser = argparse.ArgumentParser(
        prog="poolconsole",
        description=__doc__,
        epilog="The config is --config FILE, else $POOLCONSOLE_CONFIG, else "
        f"{user_config_file()}; the working directory is not searched.",
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"poolconsole {__version__}")
    parser.add_argument("--config", metavar="FILE", help="hosts.toml of the pool (see below)")
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every action that changes anything")
    parser.add_argument("--prometheus", metavar="URL", help="no hosts.toml: the engines a Prometheus holds, read-only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in EVERY if modules is None else modules:
        importlib.import_module(f"poolconsole.commands.{name}").add_parser(sub)
    return parser


def _store_errors() -> tuple[type[Exception], ...]:
    """The stores' errors, imported only when an exception is being matched: the audit log's and smoke runs'
    modules cost the console's launch about 15 ms of CPU before its first frame, and it needs neither then."""
    from poolconsole.workflows.stores import AuditUnreadable, StoreUnusable

    return (AuditUnreadable, StoreUnusable)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(modules_for(words)).parse_args(words)
    if not hasattr(args, "config"):
        args.config = None
    func = getattr(args, "func", console.run)
    if args.command not in (None, "demo") or getattr(args, "serve_only", False):  # not a console
        gc.enable()  # paused for start-up (__main__.py); the console's runtime resumes it as its loops start
    try:
        return int(func(args))
    except ConfigError as exc:
        if not exc.problems:
            print(
                "poolconsole: no hosts.toml found: pass --config FILE, set POOLCONSOLE_CONFIG, "
                "or try `poolconsole demo`",
                file=sys.stderr,
            )
        else:
            print(exc.render(), file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `poolconsole status --json | head`: the reader went away, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush does not fail again
        # what `cat` and `git` exit with when the reader leaves (killed by SIGPIPE), not 1, which
        # `status` says for a pool with problems
        return EXIT_READER_GONE
    except _store_errors() as exc:  # evaluated only when the clauses above did not match
        print(f"poolconsole: {exc}", file=sys.stderr)
        return EXIT_CONFIG
